"""Every path and environment variable a gpuaccept command reads or writes (issue #30 §9), in
one place: `tests/test_input_registry.py` fails when the CLI or the code grows an input that is
not here, and throws the generic hostile forms at every input that has a command line.

An entry's `argv` is the shortest command line that reads (or checks) the input, given the path
(or value) to put there; `forms` are the hostile forms it must refuse with one line and exit 2,
and `allowed` the forms it accepts by design, each with why (a checkpoint that does not exist yet
is a fresh start). An input read only deep inside a run names the tests that attack it in
`covered_by` instead (checked to exist).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FILE_FORMS = (
    "missing",
    "empty",
    "directory",
    "fifo",
    "dev-zero",
    "symlink-loop",
    "garbage",
    "huge",
)
OUTPUT_FORMS = ("directory", "under-a-file")
ENV_FILE_FORMS = ("missing", "directory", "fifo", "dev-zero", "symlink-loop")
ENV_DIR_FORMS = ("missing", "a-file", "no-sys")

Argv = Callable[[str, Path], list[str]]  # (the hostile path or value, a scratch directory)


@dataclass(frozen=True)
class Input:
    command: str  # as typed after `gpuaccept`
    name: str  # the option, the argument's metavar, or the environment variable
    role: str  # "reads", "writes", "env"
    argv: Argv | None = None
    forms: tuple[str, ...] = ()
    allowed: dict[str, str] = field(default_factory=dict)  # form -> why it is accepted
    covered_by: tuple[str, ...] = ()  # "tests/file.py::test_name"
    gap: str = ""  # registered, not yet attacked here: what is missing (said in the note)

    @property
    def key(self) -> tuple[str, str]:
        return (self.command, self.name)


def _accept(flag: str) -> Argv:
    history = [] if flag == "--history" else ["--no-history"]
    return lambda path, _: ["accept", "--device", "cpu", *history, "--only", "stack", flag, path]


def _failed_report(scratch: Path) -> str:
    """A failing accept report in `scratch`, for inputs read beside one."""
    from tests.run_reports import gpu_report

    path = scratch / "failed-report.json"
    path.write_text(gpu_report("n1", [500.0], passed=False).model_dump_json())
    return str(path)


def _with_report(command: list[str], flag: str, more: list[str] | None = None) -> Argv:
    """`command` on a failing accept report with `flag PATH` (an output checked before the
    scheduler is asked anything)."""
    return lambda path, scratch: [
        *command,
        _failed_report(scratch),
        *(more or []),
        flag,
        path,
    ]


def _watch(flag: str) -> Argv:
    """One poll of `watch` (no metrics server) with `flag` given `path`; refused before it."""
    history = [] if flag == "--history" else ["--no-history"]
    return lambda path, _: ["watch", "--once", *history, flag, path]


def _burnin(flag: str) -> Argv:
    return lambda path, _: [
        "burnin",
        "--duration",
        "2s",
        "--device",
        "cpu",
        "--no-history",
        flag,
        path,
    ]


def _history(command: str) -> Argv:
    extra = {
        "show": ["1"],
        "compare": ["1", "2"],
        "trend": ["x"],
        "gpu": ["GPU-00000000-0000-0000-0000-000000000000"],
    }.get(command, [])
    return lambda path, _: ["history", command, *extra, "--history", path]


def _reports(command: list[str]) -> Argv:
    return lambda path, scratch: [*command, path, "--history", str(scratch / "new.sqlite")]


def _bench(name: str) -> list[Input]:
    tests = (
        "tests/test_hostile_inputs.py::test_bench_outputs_never_replace_the_history_or_each_other",
    )
    return [
        Input(f"bench {name}", flag, role, covered_by=tests)
        for flag, role in (("--json", "writes"), ("--csv", "writes"), ("--history", "reads"))
    ]


def _preflight(flag: str, act: bool = False) -> Argv:
    """One check of preflight (the stack's), with `flag PATH`; `act`: in shadow mode, where the
    drain's own inputs are read (refused before any check runs)."""

    def argv(path: str, scratch: Path) -> list[str]:
        acting = ["--act", "shadow", "--report-dir", str(scratch / "reports")] if act else []
        return ["preflight", "--device", "cpu", "--only", "stack", *acting, flag, path]

    return argv


_SWEEP_SCRIPT = str(Path(__file__).resolve().parent.parent / "slurm" / "accept-node.sbatch")


def _sweep(flag: str) -> Argv:
    """A shadow round of the sweep with `flag PATH`: every path is checked before Slurm is asked."""

    def argv(path: str, scratch: Path) -> list[str]:
        given = {
            "--results": str(scratch / "results"),
            "--script": _SWEEP_SCRIPT,
            "--history": str(scratch / "history.sqlite"),
        } | {flag: path}
        return ["sweep", "--act", "shadow", *(part for pair in given.items() for part in pair)]

    return argv


MISSING_HISTORY = "a history that does not exist yet is created (or listed as empty)"
NO_ACT_STATE = (
    "no records yet: the breaker is not tripped and no stack is held (reset/clear say so)"
)

REGISTRY: list[Input] = [
    Input("accept", "--baseline", "reads", _accept("--baseline"), FILE_FORMS),
    Input("accept", "--node-profile", "reads", _accept("--node-profile"), FILE_FORMS),
    Input("accept", "--rules", "reads", _accept("--rules"), FILE_FORMS),
    Input("burnin", "--rules", "reads", _burnin("--rules"), FILE_FORMS),
    Input("accept", "--record-baseline", "writes", _accept("--record-baseline"), OUTPUT_FORMS),
    Input("accept", "--report-dir", "writes", covered_by=("tests/test_cli_inputs.py",)),
    Input(
        "accept",
        "--evidence",
        "writes",
        _accept("--evidence"),
        ("a-file", "under-a-file"),
        covered_by=("tests/evidence/test_evidence.py",),
    ),
    Input("accept", "--junit", "writes", _accept("--junit"), OUTPUT_FORMS),
    Input(
        "accept",
        "--topology",
        "reads",
        lambda path, _: [
            "accept",
            "--device",
            "cpu",
            "--no-history",
            "--isolate",
            "--topology",
            path,
        ],
        FILE_FORMS,
        covered_by=("tests/suite/test_topology.py",),
    ),
    Input(
        "accept",
        "--history",
        "reads",
        _accept("--history"),
        FILE_FORMS[2:],
        allowed={
            "missing": MISSING_HISTORY,
            "empty": "an empty file is an empty SQLite database: the run is recorded in it",
        },
        # behind a directory the user may not search (and a damaged row): one line, exit 2
        covered_by=("tests/store/test_unreachable_history.py", "tests/store/test_damaged_rows.py"),
    ),
    Input(
        "burnin",
        "--checkpoint",
        "reads",
        _burnin("--checkpoint"),
        FILE_FORMS[1:],
        allowed={"missing": "a checkpoint that does not exist yet is a fresh start"},
        covered_by=("tests/burnin/test_checkpoint.py",),
    ),
    Input("burnin", "--report-dir", "writes", covered_by=("tests/burnin/test_cli_burnin.py",)),
    Input(
        "burnin",
        "--junit",
        "writes",
        lambda path, _: [
            "burnin",
            "--duration",
            "2s",
            "--device",
            "cpu",
            "--no-history",
            "--junit",
            path,
        ],
        OUTPUT_FORMS,
    ),
    Input("burnin", "--history", "reads", covered_by=("tests/test_hostile_inputs.py",)),
    Input("env", "--output", "writes", lambda path, _: ["env", "--output", path], OUTPUT_FORMS),
    Input("report", "SOURCE", "reads", lambda path, _: ["report", path], FILE_FORMS),
    Input(
        "report",
        "--html",
        "writes",
        covered_by=(
            "tests/test_hostile_inputs.py",
            # "-" (a file named "-"), and the fleet page on a pipe or device
            "tests/commands/test_report.py::"
            "test_a_dash_is_stdout_for_markdown_alone_never_a_file_named_dash",
            "tests/commands/test_report.py::"
            "test_the_fleet_page_is_refused_on_a_pipe_before_its_pages_are_put_beside_it",
        ),
    ),
    Input("report", "--markdown", "writes", covered_by=("tests/test_hostile_inputs.py",)),
    Input(
        "report",
        "--prometheus",
        "writes",
        covered_by=(
            "tests/test_hostile_inputs.py",
            # with --fleet: the fleet's MTBI metrics (issue #53 §4)
            "tests/report/test_fleet_prometheus.py::test_nothing_is_written_when_an_output_is_wrong",
            "tests/commands/test_report.py::"
            "test_a_dash_is_stdout_for_markdown_alone_never_a_file_named_dash",
        ),
    ),
    Input("report", "--history", "reads", covered_by=("tests/test_hostile_inputs.py",)),
    Input("node-verdict", "REPORTS", "reads", lambda path, _: ["node-verdict", path], FILE_FORMS),
    *(
        Input("node-verdict", flag, "writes", _with_report(["node-verdict"], flag), OUTPUT_FORMS)
        for flag in ("--record", "--prometheus")
    ),
    *(
        Input(
            "act slurm",
            flag,
            "writes",
            _with_report(["act", "slurm"], flag, ["--node", "n1"]),
            OUTPUT_FORMS,
        )
        for flag in ("--record", "--prometheus")
    ),
    Input(
        "node-verdict",
        "--cluster",
        "reads",
        lambda path, scratch: ["node-verdict", _failed_report(scratch), "--cluster", path],
        FILE_FORMS,
        covered_by=(
            "tests/act/test_kubernetes_fleet.py::test_a_cluster_file_that_is_not_a_node_list_is_refused",
        ),
    ),
    # gpuaccept's own records of the breaker's trip and the regressions it holds (issue #49)
    Input(
        "act breaker status",
        "--state",
        "reads",
        lambda path, _: ["act", "breaker", "status", "--state", path],
        FILE_FORMS[1:],
        allowed={"missing": NO_ACT_STATE},
    ),
    *(
        Input(command, "--state", "reads", argv, FILE_FORMS[1:], allowed={"missing": NO_ACT_STATE})
        for command, argv in (
            (
                "act slurm",
                lambda path, scratch: [
                    "act",
                    "slurm",
                    _failed_report(scratch),
                    "--node",
                    "n1",
                    "--state",
                    path,
                ],
            ),
            (
                "node-verdict",
                lambda path, scratch: [
                    "node-verdict",
                    _failed_report(scratch),
                    "--act",
                    "shadow",
                    "--cluster",
                    str(scratch / "no-cluster.json"),
                    "--state",
                    path,
                ],
            ),
            (
                "act breaker reset",
                lambda path, _: [
                    "act",
                    "breaker",
                    "reset",
                    "--by",
                    "x",
                    "--why",
                    "y",
                    "--state",
                    path,
                ],
            ),
            (
                "act regression clear",
                lambda path, _: [
                    "act",
                    "regression",
                    "clear",
                    "0123abcd",
                    "--by",
                    "x",
                    "--why",
                    "y",
                    "--state",
                    path,
                ],
            ),
        )
    ),
    Input(
        "act breaker status",
        "GPUACCEPT_ACT_STATE",
        "env",
        lambda value, _: ["act", "breaker", "status"],
        FILE_FORMS[1:],
        allowed={"missing": NO_ACT_STATE},
    ),
    Input(
        "act slurm",
        "REPORT",
        "reads",
        lambda path, _: ["act", "slurm", path, "--node", "n1"],
        FILE_FORMS,
    ),
    Input(
        "act slurm",
        "--earlier",
        "reads",
        lambda path, scratch: [
            "act",
            "slurm",
            _failed_report(scratch),
            "--node",
            "n1",
            "--earlier",
            path,
        ],
        ("missing", "a-file"),
        covered_by=(
            "tests/act/test_repeats.py::test_earlier_reports_are_the_nodes_newest_and_a_damaged_one_is_said",
        ),
    ),
    *_bench("matmul"),
    *_bench("membw"),
    *_bench("transfer"),
    *_bench("nbody"),
    *_bench("collectives"),
    *(
        Input("train mnist", flag, role, covered_by=("tests/mnist",))
        for flag, role in (
            ("--data", "reads"),
            ("--save-model", "writes"),
            ("--checkpoint", "reads"),
            ("--report-dir", "writes"),
            ("--scratch", "writes"),
            ("--history", "reads"),
        )
    ),
    Input("train llm", "--report-dir", "writes", covered_by=("tests/llm/test_cli_llm.py",)),
    Input(
        "train llm",
        "--history",
        "reads",
        lambda path, _: ["train", "llm", "--device", "cpu", "--steps", "2", "--history", path],
        FILE_FORMS[2:],
        allowed={
            "missing": MISSING_HISTORY,
            "empty": "an empty file is an empty SQLite database: the run is recorded in it",
        },
    ),
    *(
        Input(
            f"history {command}",
            "--history",
            "reads",
            _history(command),
            FILE_FORMS[1:],
            allowed={"missing": MISSING_HISTORY} if command == "list" else {},
        )
        for command in ("list", "show", "compare", "trend", "fleet", "gpu")
    ),
    Input(
        "history push",
        "--history",
        "reads",
        covered_by=("tests/store/test_spool.py",),
        gap="attacked with a spooled run to deliver (tests/store/test_spool.py); with an empty "
        "spool push opens no history",
    ),
    Input(
        "history push",
        "GPUACCEPT_SPOOL",
        "env",
        lambda value, scratch: ["history", "push", "--history", str(scratch / "new.sqlite")],
        ("a-file", "fifo", "dev-zero", "symlink-loop", "under-a-file"),
        allowed={"missing": "nothing was spooled yet: nothing to push"},
        covered_by=("tests/store/test_spool.py",),
    ),
    Input("history import", "REPORTS", "reads", _reports(["history", "import"]), FILE_FORMS),
    Input("history import", "--history", "reads", covered_by=("tests/test_cli_history.py",)),
    # issue #53 §2: the fleet's values, held and refused in one line by the requests (the walk
    # above finds path options; these are named by what they hold), and the page's directory
    *(
        Input(
            command,
            "SINCE (--since)",
            "reads",
            covered_by=(
                "tests/compare/test_fleet_first_screen.py::"
                "test_since_takes_hours_days_or_an_instant_and_refuses_the_rest",
            ),
        )
        for command in ("history fleet", "report")
    ),
    Input(
        "history fleet",
        "PAGE (--page, --page-size)",
        "reads",
        covered_by=(
            "tests/compare/test_fleet_first_screen.py::"
            "test_since_takes_hours_days_or_an_instant_and_refuses_the_rest",
            "tests/compare/test_fleet_first_screen.py::"
            "test_history_fleet_leads_with_the_decision_and_pages_the_nodes",
        ),
    ),
    Input(
        "report",
        "PAGE.nodes (beside --fleet --html PAGE)",
        "writes",
        covered_by=(
            "tests/report/test_fleet_html.py::test_the_node_table_is_paged_in_files_beside_the_page",
            "tests/report/test_fleet_html.py::test_a_page_whose_pages_cannot_be_written_is_refused",
        ),
    ),
    # environment variables
    Input(
        "accept",
        "GPUACCEPT_KERNEL_LOG",
        "env",
        lambda value, _: ["accept", "--device", "cpu", "--no-history", "--only", "stack"],
        ENV_FILE_FORMS,
    ),
    Input(
        "accept",
        "GPUACCEPT_SYSFS_ROOT",
        "env",
        lambda value, _: ["accept", "--device", "cpu", "--no-history", "--only", "stack"],
        ENV_DIR_FORMS,
    ),
    # issue #50 §7: the node's key for the checkpoint's keyed digest, read before a window runs
    Input(
        "burnin",
        "GPUACCEPT_CHECKPOINT_KEY",
        "env",
        lambda value, scratch: [
            "burnin",
            "--duration",
            "2s",
            "--device",
            "cpu",
            "--no-history",
            "--checkpoint",
            str(scratch / "burnin-checkpoint.json"),
        ],
        (*ENV_FILE_FORMS, "empty"),
        covered_by=(
            "tests/burnin/test_checkpoint.py::"
            "test_a_node_that_keeps_a_key_refuses_a_checkpoint_changed_within_physics",
        ),
    ),
    Input(
        "burnin",
        "GPUACCEPT_SYSFS_ROOT",
        "env",
        lambda value, _: ["burnin", "--duration", "2s", "--device", "cpu", "--no-history"],
        ENV_DIR_FORMS,
    ),
    Input(
        "history list",
        "GPUACCEPT_HISTORY",
        "env",
        lambda value, _: ["history", "list"],
        FILE_FORMS[1:],
        allowed={"missing": MISSING_HISTORY},
    ),
    # files every command's environment capture reads (issue #31 §4: the machine's identity)
    *(
        Input(
            "accept",
            path,
            "reads",
            covered_by=(
                "tests/record/test_machine_identity.py::"
                "test_a_hostile_identity_file_is_absent_not_a_hang_nor_a_problem",
            ),
        )
        for path in ("/etc/machine-id", "$GPUACCEPT_SYSFS_ROOT/class/dmi/id/product_serial")
    ),
    Input(
        "accept",
        "GPUACCEPT_NVML_MODULE",
        "env",
        covered_by=(
            "tests/test_hostile_inputs.py::test_accept_refuses_bad_settings_before_any_check",
        ),
    ),
    Input(
        "accept",
        "GPUACCEPT_NVML_INIT_TIMEOUT",
        "env",
        covered_by=(
            "tests/test_hostile_inputs.py::test_accept_refuses_bad_settings_before_any_check",
            "tests/burnin/test_cli_burnin.py::"
            "test_a_bad_nvml_timeout_is_refused_before_the_burn_in",
        ),
    ),
    Input(
        "accept",
        "GPUACCEPT_NODE_NAME",
        "env",
        covered_by=(
            "tests/test_multinode.py::"
            "test_a_node_name_that_is_not_a_host_name_is_refused_before_any_work",
            "tests/test_multinode.py::test_two_nodes_of_one_name_are_refused_at_once",
            "tests/record/test_identity.py::test_every_writer_names_the_node_by_its_one_name",
        ),
    ),
    Input(
        "accept",
        # the Kubernetes node's name (k8s/ sets it from spec.nodeName): the report's node name
        # where neither the operator nor Slurm names the node (record/identity.py)
        "GPUACCEPT_K8S_NODE_NAME",
        "env",
        covered_by=(
            "tests/record/test_identity.py::test_the_capture_records_the_name_once",
            "tests/record/test_identity.py::"
            "test_the_kubernetes_manifests_set_the_kubernetes_source_from_the_node",
        ),
    ),
    *(
        Input(
            "accept",
            name,
            "env",
            # checked before any work (distributed/launch_env.check_rendezvous); since the
            # isolation rounds' children meet there too, read again at --isolate
            covered_by=(
                "tests/test_hostile_inputs.py::"
                "test_bad_launcher_variables_are_refused_before_any_rank_waits",
                "tests/test_multinode.py::"
                "test_a_rank_that_cannot_start_the_rounds_children_says_why",
            ),
        )
        for name in ("MASTER_ADDR", "MASTER_PORT")
    ),
    Input(
        "accept",
        "GPUACCEPT_LOCAL_ADDR",
        "env",
        covered_by=(
            "tests/test_multinode.py::"
            "test_a_node_name_that_is_not_a_host_name_is_refused_before_any_work",
            "tests/test_job_scripts.py::"
            "test_a_bad_local_address_is_refused_in_one_line_before_torchrun",
        ),
    ),
    Input(
        "accept",
        "GPUACCEPT_DCGM_RUN",
        "env",
        covered_by=(
            "tests/checks/test_dcgm.py::"
            "test_a_dcgmi_wrapper_that_double_forks_is_ended_at_its_timeout_with_its_grandchild",
        ),
        gap="set by gpuaccept in dcgmi's environment to find what it started; no user sets it",
    ),
    # read by the job scripts (tasks/, slurm/, htcondor/, k8s/, containers/)
    Input(
        "job scripts",
        "GPUACCEPT_NPROC",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::test_a_bad_process_count_is_refused_in_one_line_before_torchrun",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_RESULTS",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::"
            "test_the_health_check_with_its_results_under_a_file_does_not_judge_or_drain",
            "tests/test_job_scripts.py::"
            "test_a_slurm_job_whose_results_cannot_be_written_says_so_as_an_input_error",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_RDZV_ENDPOINT",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::"
            "test_a_multinode_step_without_its_rendezvous_writes_a_report_saying_so",
            "tests/test_job_scripts.py::"
            "test_a_malformed_rendezvous_is_refused_before_torchrun_with_a_report",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_ACTIVATE",
        "env",
        covered_by=(
            "tests/test_slurm.py::test_a_run_that_judged_nothing_does_not_drain",
            "tests/test_job_scripts.py::test_an_activation_hook_that_is_not_a_file_is_said_and_no_other_gpuaccept_runs",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_HEALTHCHECK_ARGS",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::test_bad_accept_or_act_options_in_the_health_check_are_said_and_drain_nothing",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_HEALTHCHECK_TIMEOUT",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::test_a_bad_health_check_setting_is_refused_before_the_run_and_drains_nothing",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_ACT",
        "env",
        covered_by=(
            "tests/test_slurm.py::test_the_health_check_in_shadow_mode_drains_nothing_and_says_so",
            "tests/test_job_scripts.py::test_a_bad_health_check_setting_is_refused_before_the_run_and_drains_nothing",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_ACT_ARGS",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::test_bad_accept_or_act_options_in_the_health_check_are_said_and_drain_nothing",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_RESUME_LEVEL",
        "env",
        covered_by=(
            "tests/test_slurm.py::test_a_node_gpuaccept_drained_is_checked_at_the_level_that_can_return_it",
            "tests/test_job_scripts.py::test_a_bad_health_check_setting_is_refused_before_the_run_and_drains_nothing",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_PAIRWISE",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::"
            "test_a_bad_isolation_setting_is_refused_in_one_line_before_torchrun",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_RAILS",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::"
            "test_a_bad_isolation_setting_is_refused_in_one_line_before_torchrun",
        ),
    ),
    Input(
        "job scripts",
        "GPUACCEPT_ISOLATE_MIN_BUSBW",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::"
            "test_a_bad_isolation_setting_is_refused_in_one_line_before_torchrun",
        ),
    ),
    *(
        Input(
            "job scripts",
            name,
            "env",
            covered_by=(
                "tests/test_job_scripts.py::"
                "test_a_bad_isolation_setting_is_refused_in_one_line_before_torchrun",
                "tests/test_job_scripts.py::test_the_collectives_floors_reach_accept_on_every_node",
            ),
        )
        for name in ("GPUACCEPT_MIN_ALLGATHER_BUSBW", "GPUACCEPT_MIN_ALLTOALL_BUSBW")
    ),
    Input(
        "job scripts",
        "GPUACCEPT_TOPOLOGY",
        "env",
        covered_by=(
            "tests/test_job_scripts.py::"
            "test_a_bad_isolation_setting_is_refused_in_one_line_before_torchrun",
            "tests/suite/test_topology.py",
        ),
        gap="a hostile file is accept's --topology, attacked there (tests/test_input_registry.py)",
    ),
    Input(
        "job scripts",
        "GPUACCEPT_TARGET",
        "env",
        covered_by=(
            "tests/htcondor/test_submit_files.py::test_a_target_that_is_not_one_is_refused_at_submit",
            "tests/htcondor/test_submit_files.py::test_a_target_in_other_letters_is_the_target_in_its_own",
        ),
    ),
    Input("watch", "--rules", "reads", _watch("--rules"), FILE_FORMS),
    # the ports' error counters, read at every poll (refused before the first)
    Input(
        "watch",
        "GPUACCEPT_SYSFS_ROOT",
        "env",
        lambda value, _: ["watch", "--once", "--no-history"],
        ENV_DIR_FORMS,
    ),
    Input(
        "watch",
        "--history",
        "reads",
        _watch("--history"),
        FILE_FORMS[2:],
        allowed={
            "missing": MISSING_HISTORY,
            "empty": "an empty file is an empty SQLite database: the watch records in it",
        },
        # one that fills up later is survived, its records kept and written when it frees
        covered_by=(
            "tests/commands/test_watch.py::"
            "test_a_full_disk_keeps_the_records_and_writes_them_when_it_frees",
        ),
    ),
    Input(
        "watch",
        "--state",
        "reads",
        _watch("--state"),
        FILE_FORMS[1:],
        allowed={"missing": NO_ACT_STATE},
    ),
    # preflight (issue #54 §2): the quick level's inputs, and the drain's (as act slurm's)
    Input("preflight", "--rules", "reads", _preflight("--rules"), FILE_FORMS),
    Input(
        "preflight",
        "--report-dir",
        "writes",
        _preflight("--report-dir"),
        ("a-file", "under-a-file"),
    ),
    Input(
        "preflight",
        "--history",
        "reads",
        _preflight("--history"),
        FILE_FORMS[2:],
        allowed={
            "missing": MISSING_HISTORY,
            "empty": "an empty file is an empty SQLite database: the run is recorded in it",
        },
    ),
    Input(
        "preflight",
        "--state",
        "reads",
        _preflight("--state", act=True),
        FILE_FORMS[1:],
        allowed={"missing": NO_ACT_STATE},
    ),
    *(
        Input("preflight", flag, "writes", _preflight(flag, act=True), OUTPUT_FORMS)
        for flag in ("--record", "--prometheus")
    ),
    *(
        Input(
            "preflight",
            name,
            "env",
            covered_by=(
                "tests/commands/test_preflight_inputs.py::"
                "test_a_gang_setting_that_is_not_one_is_refused_in_one_line_before_any_check",
            ),
        )
        for name in ("GPUACCEPT_GANG_SIZE", "GPUACCEPT_GANG_LEADER")
    ),
    Input(
        "job scripts",
        "GPUACCEPT_PREFLIGHT_ARGS",
        "env",
        covered_by=(
            "tests/commands/test_preflight_inputs.py::"
            "test_the_prolog_with_a_setting_that_is_not_one_judges_nothing_and_lets_the_job_go",
        ),
    ),
    # sweep (issue #54 §3)
    Input("sweep", "--results", "writes", _sweep("--results"), ("a-file", "under-a-file")),
    Input(
        "sweep",
        "--script",
        "reads",
        _sweep("--script"),
        ("missing", "directory", "fifo", "dev-zero", "symlink-loop"),
        allowed={
            form: "sbatch reads the script, on the controller's side: it refuses one that is not "
            "a batch script, said as the sweep's error (exit 3)"
            for form in ("empty", "garbage", "huge")
        },
    ),
    Input(
        "sweep",
        "--template",
        "reads",
        lambda path, scratch: [
            *_sweep("--template")(path, scratch),
            "--scheduler",
            "kubernetes",
        ],
        FILE_FORMS,
    ),
    Input(
        "sweep",
        "--history",
        "reads",
        _sweep("--history"),
        FILE_FORMS[2:],
        allowed={
            "missing": MISSING_HISTORY,
            "empty": "an empty file is an empty SQLite database: the reports are imported into it",
        },
    ),
]
