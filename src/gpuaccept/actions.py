"""What to do about a run's findings (issue #31 §1): every failing or warning finding carries an
action from a closed set, and the node's action is the most severe of them.

Checks name the cause of a finding where they know it (`Cause`: an XID, NVML's recovery action, a
DCGM error code, a row-remapping failure, a port down...); the tables in data/actions.toml turn a
cause into an action and keep the source of each row. A finding no cause names takes its check's
action for its status. Two bounds hold whatever a table says: a failing finding recommends at
least `rerun` (the verdict failed: "nothing to do" would hide it), and a warning at most
`monitor` (the verdict passed: nothing that takes a node out of service follows from a pass).

The plan is computed once, when the report is made, stored in it and rendered by every writer.
A site changes any row with `--rules FILE` (the same tables, only the rows it changes).
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping, Sequence
from enum import StrEnum
from functools import cache, cached_property
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from gpuaccept.errors import InputError
from gpuaccept.probe.pci_address import match_gpu, one_name_per_gpu, parse_pci_address
from gpuaccept.verdict import Status

if TYPE_CHECKING:
    from gpuaccept.results import CheckResult, RunReport


class Action(StrEnum):
    """The closed set, from the least to the most severe."""

    NONE = "none"
    MONITOR = "monitor"
    RERUN = "rerun"
    RESET_GPU = "reset-gpu"
    REBOOT_NODE = "reboot-node"
    DRAIN = "drain"
    REPLACE = "replace"

    @property
    def severity(self) -> int:
        return list(Action).index(self)

    @property
    def takes_out_of_service(self) -> bool:
        """Whether the node must leave service for it (a GPU reset stops every job on it)."""
        return self.severity >= Action.RESET_GPU.severity


def most_severe(actions: list[Action]) -> Action:
    return max(actions, key=lambda action: action.severity, default=Action.NONE)


CauseKind = Literal["xid", "sxid", "recovery-action", "dcgm-error", "cause"]

Judge = Literal["fail", "warn", "ignore"]

# NVIDIA's XID catalogue's immediate-action buckets as gpuaccept's actions (docs/actions.md says
# why); scripts/action_tables.py writes the [xid] rows with it and
# tests/conformance/test_xid_catalogue.py recomputes them
CATALOGUE_BUCKETS: dict[str, Action] = {
    "IGNORE": Action.NONE,
    "RESTART_APP": Action.RERUN,
    "CHECK_UVM": Action.RERUN,
    "WORKFLOW_XID_45": Action.NONE,
    "RESET_GPU": Action.RESET_GPU,
    "WORKFLOW_XID_48": Action.RESET_GPU,
    "WORKFLOW_NVLINK_ERR": Action.RESET_GPU,
    "WORKFLOW_NVLINK5_ERR": Action.RESET_GPU,
    "RESTART_BM": Action.REBOOT_NODE,
    "RESTART_VM": Action.REBOOT_NODE,
    "UPDATE_SWFW": Action.DRAIN,
    "CHECK_MECHANICALS": Action.DRAIN,
    "UNEXPECTED_ERR_REPORT_ISSUE": Action.DRAIN,
    "CONTACT_SUPPORT": Action.REPLACE,
}


def judge_of(action: Action) -> Judge:
    """The verdict a row's action gives when the row says no other (issue #50 §1): an action that
    takes the GPU out of service (reset-gpu and above) fails, `none` ignores (the catalogue's
    IGNORE), anything between warns."""
    if action.takes_out_of_service:
        return "fail"
    return "ignore" if action is Action.NONE else "warn"


class Cause(str):
    """A finding's text that also names its cause: still the string every message, test and
    writer reads, and the key the action tables are looked up by."""

    kind: CauseKind
    code: str
    gpu: str | None
    times: int  # how many times it was seen (an XID repeated in the kernel log)
    span_hours: float | None  # between its first and last sighting; None: not known

    def __new__(
        cls,
        text: str,
        kind: CauseKind,
        code: str | int,
        gpu: str | None = None,
        times: int = 1,
        span_hours: float | None = None,
    ) -> Cause:
        made = super().__new__(cls, text)
        made.kind, made.code, made.gpu = kind, str(code), gpu
        made.times, made.span_hours = times, span_hours
        return made

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling between worker processes
        return (Cause, (str(self), self.kind, self.code, self.gpu, self.times, self.span_hours))


def finding_records(failures: list[str], warnings: list[str]) -> list[dict[str, Any]]:
    """The findings of a check as its details store them: every one, caused or not, so that the
    plan can tell a check whose failures all have a cause from one with others beside them."""
    return [
        {
            "status": status.value,
            "text": str(text),
            "kind": getattr(text, "kind", None),
            "code": getattr(text, "code", None),
            "gpu": getattr(text, "gpu", None),
            **(
                {"count": text.times, "span_hours": text.span_hours}
                if isinstance(text, Cause) and text.times > 1
                else {}
            ),
        }
        for status, texts in ((Status.FAIL, failures), (Status.WARN, warnings))
        for text in texts
    ]


# --- the tables ---------------------------------------------------------------------------


class _Table(BaseModel):
    # not `strict`, which refuses an action's name for the enum; numbers are StrictInt, and a
    # str field never takes a number in pydantic's lax mode either
    model_config = ConfigDict(frozen=True, extra="forbid")


class RepeatRow(_Table):
    """An XID seen `count` times or more within `hours` (first to last sighting) recommends
    `action` at least (GPUd's and NVSentinel's per-XID thresholds let sites do the same)."""

    count: StrictInt = Field(ge=2, le=1_000_000)
    hours: float = Field(gt=0, le=24 * 365, allow_inf_nan=False)
    action: Action
    source: str = ""


class XidRow(_Table):
    action: Action
    catalog: str = ""
    mnemonic: str = ""
    line: StrictInt = 0  # the row's line in the catalogue copy the header cites
    repeat: RepeatRow | None = None
    # a verdict other than the action's (judge_of), with the reason and its source
    judge: Judge | None = None
    why: str = ""

    @property
    def verdict(self) -> Judge:
        return self.judge or judge_of(self.action)


class SxidRow(_Table):
    """An NVSwitch SXid: its Fabric Manager guide class and the action it asks for."""

    action: Action
    name: str = ""
    class_: Literal["non-fatal", "fatal", "always-fatal", "other", ""] = Field(
        default="", alias="class"
    )
    gpud: str = ""  # gpud's event type for it
    line: StrictInt = 0
    judge: Judge | None = None
    why: str = ""

    @property
    def verdict(self) -> Judge:
        return self.judge or judge_of(self.action)


DcgmSeverity = Literal["NONE", "MONITOR", "ISOLATE", "UNKNOWN", "TRIAGE", "CONFIG", "RESET"]


class DcgmErrorRow(_Table):
    """A DCGM_FR_* code: its name and DCGM's severity (dcgm_errors.c), whose action
    `[dcgm_severity]` gives; a site may give the code an action of its own, and a verdict other
    than that action's (`judge`, with its `why`), as an XID row does."""

    name: str = ""
    severity: DcgmSeverity = "UNKNOWN"
    line: StrictInt = 0
    action: Action | None = None
    judge: Judge | None = None
    why: str = ""


class CauseRow(_Table):
    action: Action
    source: str = ""


class CheckRow(_Table):
    fail: Action = Action.DRAIN
    warn: Action = Action.MONITOR
    error: Action = Action.RERUN


class LimitRow(_Table):
    value: float = Field(gt=0, allow_inf_nan=False)
    source: str = ""


# The limits the health and events checks judge by, which a site may set in its rules file:
# each built-in row names its source in data/actions.toml.
LIMITS = (
    "dram_ecc",  # corrected or uncorrected DRAM ECC errors, volatile or aggregate: above fails
    "sram_corrected",  # corrected SRAM ECC errors: above fails (any uncorrected one fails)
    "remapped_rows_uncorrectable",  # rows remapped for uncorrectable errors: at or above fails
    "retirement_full_pages",  # retired pages with a retirement pending: at or above fails
    "nvlink_crc_per_second",  # a GPU's NVLink CRC errors per second in the run: at or above fails
)


_TABLES = (
    "xid",
    "sxid",
    "recovery_action",
    "dcgm_severity",
    "dcgm_error",
    "cause",
    "check",
    "limit",
)

# The catalogue's range of XIDs (the highest code of the copy data/actions.toml cites); a site's
# key outside it can never match a line (issue #49 §5)
XID_RANGE = range(1, 173)


class ActionRules(_Table):
    schema_: StrictInt = Field(default=1, alias="schema", ge=1, le=1)
    xid: dict[str, XidRow] = Field(default_factory=dict)
    sxid: dict[str, SxidRow] = Field(default_factory=dict)
    recovery_action: dict[str, Action] = Field(default_factory=dict)
    dcgm_severity: dict[str, Action] = Field(default_factory=dict)
    dcgm_error: dict[str, DcgmErrorRow] = Field(default_factory=dict)
    cause: dict[str, CauseRow] = Field(default_factory=dict)
    check: dict[str, CheckRow] = Field(default_factory=dict)
    limit: dict[str, LimitRow] = Field(default_factory=dict)
    origin: str = Field(default="built-in", exclude=True)

    @model_validator(mode="after")
    def _keys(self) -> ActionRules:
        for table in ("xid", "sxid", "dcgm_error"):
            for key in getattr(self, table):
                if not _is_code(key):
                    raise ValueError(
                        f"{table}.{key!r}: a key is a code, a whole number without leading zeros"
                    )
        for key in self.xid:
            if int(key) not in XID_RANGE:
                raise ValueError(
                    f"xid.{key}: not an XID of NVIDIA's catalogue ({XID_RANGE.start}-"
                    f"{XID_RANGE.stop - 1}): it can never match"
                )
        for key in self.limit:
            if key not in LIMITS:
                raise ValueError(
                    f"limit.{key}: not a limit gpuaccept judges by ({', '.join(LIMITS)})"
                )
        return self

    def limit_of(self, name: str) -> float:
        """A limit's value: the site's, else the built-in one (every built-in table has each)."""
        row = self.limit.get(name) or builtin_rules().limit[name]
        return row.value

    def limit_said(self, name: str, builtin: str) -> str:
        """How a finding names the limit it crossed: `builtin` (a format with {value}) for the
        built-in row, the site's file for its own."""
        value = self.limit_of(name)
        shown = f"{value:.0f}" if value.is_integer() else f"{value:g}"
        if self.limit.get(name) != builtin_rules().limit[name]:
            return f"the limit {shown} of {self.origin}"
        return builtin.format(value=shown)

    def merged(self, site: ActionRules, origin: str) -> ActionRules:
        """These rules with each row the site's file gives replaced by the site's: a new model,
        never a copy (a copy would carry this one's cached label)."""
        rows = {table: {**getattr(self, table), **getattr(site, table)} for table in _TABLES}
        for table in ("xid", "sxid"):
            for code, row in getattr(site, table).items():
                rows[table][code] = _kept_departure(getattr(self, table).get(code), row)
        for code, error in site.dcgm_error.items():
            # a code's name and severity are DCGM's: a site row that changes only its action or
            # verdict (`42 = { judge = "fail" }`) keeps them
            builtin_error = self.dcgm_error.get(code)
            if builtin_error is not None:
                given = error.model_dump(exclude_unset=True)
                rows["dcgm_error"][code] = builtin_error.model_copy(update=given)
        return ActionRules.model_validate({**rows, "origin": origin})

    @property
    def rows(self) -> int:
        return sum(len(getattr(self, table)) for table in _TABLES)

    def action_for(self, kind: str | None, code: str | None) -> tuple[Action, str] | None:
        """(action, where it comes from) of a named cause; None when no row names it."""
        if kind == "xid" and code in self.xid:
            row = self.xid[code]
            name = f" {row.mnemonic}" if row.mnemonic else ""
            said = f"catalogue {row.catalog}" if row.catalog and row.catalog != "-" else "site"
            if row.catalog == "-":
                said = "no catalogue bucket"
            if self.origin != "built-in" and row != builtin_rules().xid.get(code):
                said = f"{self.origin}"
            return row.action, f"XID {code}{name}: {said}"
        if kind == "sxid" and code in self.sxid:
            sxid = self.sxid[code]
            klass = f"Fabric Manager guide: {sxid.class_}" if sxid.class_ else self.origin
            return sxid.action, f"SXid {code} {sxid.name}: {klass}".replace("  ", " ")
        if kind == "recovery-action" and code in self.recovery_action:
            return self.recovery_action[code], f"NVML recovery action {code!r}"
        if kind == "dcgm-error" and code in self.dcgm_error:
            error = self.dcgm_error[code]
            action = dcgm_error_action(self, code)
            if action is not None:
                said = f"DCGM severity {error.severity}"
                if self.origin != "built-in" and error != builtin_rules().dcgm_error.get(code):
                    said = self.origin
                return action, f"{error.name or 'DCGM error ' + code}: {said}"
        if kind == "cause" and code in self.cause:
            return self.cause[code].action, self.cause[code].source
        return None

    def for_check(self, check: str, status: Status) -> Action:
        row = self.check.get(check) or self.check.get("default") or CheckRow()
        return {Status.FAIL: row.fail, Status.WARN: row.warn, Status.ERROR: row.error}.get(
            status, Action.NONE
        )

    @cached_property
    def label(self) -> str:
        """How a plan names the tables it was made with: `built-in (sha256 ...)`, or the site's
        file over them. The digest tells one release's tables from another's. Computed once:
        every report read checks its plan's label against the built-in one."""
        digest = hashlib.sha256(self.model_dump_json(by_alias=True).encode()).hexdigest()
        return f"{self.origin} (sha256 {digest[:12]})"


def _kept_departure(builtin: Any, site: Any) -> Any:
    """A site's row whole, except that a built-in departure from the action's verdict (`judge`,
    `why`: 94 fails though its bucket is RESTART_APP) stands while the site keeps the built-in
    action and says no verdict of its own (a site that only adds a repeat rule to 94 still fails
    it; one that gives 94 another action gets that action's verdict)."""
    if builtin is None or site.judge is not None or builtin.judge is None:
        return site
    if site.action is not builtin.action:
        return site
    return site.model_copy(update={"judge": builtin.judge, "why": builtin.why})


def _is_code(key: str) -> bool:
    """A whole number as a code is written: digits, no sign, no leading zero ("079" is not 79)."""
    return key.isascii() and key.isdigit() and len(key) <= 6 and key == str(int(key))


def xid_verdict(rules: ActionRules, xid: int) -> Judge:
    """Fail, warn or ignore for an XID, from its row (an XID with no row warns: it is said, and a
    person reads it)."""
    row = rules.xid.get(str(xid))
    return "warn" if row is None else row.verdict


def xid_row_is_builtin(rules: ActionRules, xid: int) -> bool:
    """Whether the XID's row is the built-in one (the NVLink5 decode refines only that row: a
    site's row is the site's word for every line of that XID)."""
    return rules.xid.get(str(xid)) == builtin_rules().xid.get(str(xid))


def sxid_verdict(rules: ActionRules, sxid: int) -> Judge:
    row = rules.sxid.get(str(sxid))
    return "warn" if row is None else row.verdict


def sxid_row_is_builtin(rules: ActionRules, sxid: int) -> bool:
    return rules.sxid.get(str(sxid)) == builtin_rules().sxid.get(str(sxid))


def dcgm_error_action(rules: ActionRules, code: int | str) -> Action | None:
    """A DCGM_FR_* code's action: its row's own, else its severity's (`[dcgm_severity]`)."""
    row = rules.dcgm_error.get(str(code))
    if row is None:
        return None
    return row.action or rules.dcgm_severity.get(row.severity)


def dcgm_error_verdict(rules: ActionRules, code: int | str) -> Judge | None:
    """Fail, warn or ignore for a DCGM_FR_* code, from its row as for an XID (`judge_of` its
    action, or the row's `judge`); None where no row judges it: a code with no row, or one DCGM
    classes UNKNOWN ("This error code is not recognized", dcgmlib/dcgm_errors.h:182 at
    NVIDIA/DCGM@72fa3fe) without an action of its own. There DCGM's own status stands."""
    row = rules.dcgm_error.get(str(code))
    if row is None:
        return None
    if row.judge is not None:
        return row.judge
    if row.severity == "UNKNOWN" and row.action is None:
        return None
    action = dcgm_error_action(rules, code)
    return None if action is None else judge_of(action)


@cache
def builtin_rules() -> ActionRules:
    text = files("gpuaccept.data").joinpath("actions.toml").read_text(encoding="utf-8")
    return ActionRules.model_validate(tomllib.loads(text))


_MAX_RULES_BYTES = 1024 * 1024


def load_rules(path: Path) -> ActionRules:
    """The built-in tables with a site's rows over them; any fault in the file is an InputError
    naming it (a rules file that half applies would act on rows nobody chose)."""
    from gpuaccept.input_files import first_validation_error, read_toml_input

    raw = read_toml_input(path, "rules", f"rules {path}", _MAX_RULES_BYTES)
    try:
        site = ActionRules.model_validate(raw)
    except ValidationError as error:
        raise InputError(f"rules {path}: {first_validation_error(error)}") from None
    if not site.rows:
        raise InputError(f"rules {path}: changes no row (tables: xid, recovery_action, ...)")
    unknown = _keys_that_cannot_match(site)
    if unknown:
        raise InputError(f"rules {path}: {unknown}")
    return builtin_rules().merged(site, f"site {path.name}")


# The checks a site's [check] rows may name, held here, below the suite and the burn-in that run
# them, so reading the rules imports neither (issue #51 §2); tests/test_layers.py holds these to
# suite.selection.CHECKS and burnin.checks.CHECK_NAMES.
_SUITE_CHECKS = (
    "inventory",
    "stack",
    "fabric",
    "health",
    "compute",
    "memory",
    "transfer",
    "train",
    "collectives",
    "ddp",
    "workload",
    "network",
    "host",
    "p2p",
    "dcgm",
    "fabric-errors",
    "events",
)
_BURNIN_CHECKS = ("burnin-correctness", "burnin-hardware", "burnin-throughput")
# checks that are not in the suite's list but write findings a plan reads (gpuaccept.burnin,
# compare/self_comparison, suite/multinode, suite/isolation, mnist, checks/network)
_OTHER_CHECKS = ("history", "pairwise", "pairwise-ib", "isolation", "mnist", "burnin")


def known_check_names() -> frozenset[str]:
    return frozenset({"default", *_SUITE_CHECKS, *_BURNIN_CHECKS, *_OTHER_CHECKS})


def _keys_that_cannot_match(site: ActionRules) -> str | None:
    """The first key of a site's tables that names nothing gpuaccept can find (issue #49 §5): a
    check that does not exist, a cause, a recovery action or a DCGM severity no check names."""
    builtin = builtin_rules()
    named: list[tuple[str, dict[str, Any], frozenset[str]]] = [
        ("check", site.check, known_check_names()),
        ("cause", site.cause, frozenset(builtin.cause)),
        ("recovery_action", site.recovery_action, frozenset(builtin.recovery_action)),
        ("dcgm_severity", site.dcgm_severity, frozenset(builtin.dcgm_severity)),
    ]
    for table, rows, known in named:
        for key in rows:
            if key not in known:
                return (
                    f"{table}.{key}: no such {table.replace('_', ' ')} "
                    f"(known: {', '.join(sorted(known))})"
                )
    return None


# --- the plan -------------------------------------------------------------------------------


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    check: str
    status: Status
    action: Action
    cause: str = Field(description="what the action was looked up by, with its source")
    finding: str = Field(description="the finding, as the check said it")
    gpu: str | None = None


class ActionPlan(BaseModel):
    """The node's action and each finding's, with the rules that gave them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Action
    rules: str = Field(description="the tables that gave the actions, with their digest")
    recommendations: list[Recommendation] = Field(default_factory=list)

    @model_validator(mode="after")
    def _node_action(self) -> ActionPlan:
        expected = most_severe([r.action for r in self.recommendations])
        if self.action is not expected:
            raise ValueError(
                f"the node's action {self.action.value!r} is not the most severe of its "
                f"findings' ({expected.value!r})"
            )
        return self

    def for_check(self, check: str) -> Action:
        return most_severe([r.action for r in self.recommendations if r.check == check])

    def out_of_service_gpus(self, gpus: Sequence[Mapping[str, Any]] = ()) -> list[str]:
        """The GPUs a finding names with an action that takes them out of service (reset-gpu,
        reboot-node, drain, replace), each once, in the findings' order, as the findings name
        them: a UUID, or `PCI domain:bus:device` (a kernel-log XID).

        One GPU is one entry however it is named (issue #50 §5): PCI addresses are compared by
        domain:bus:device, the domain as a number (`probe.pci_address`); and given the run's
        GPUs (the environment's `gpus`: `uuid`, `pci_bus_id`), a PCI address one of them has is
        that GPU's UUID, so a GPU named by an NVML event and by its kernel-log line counts once.
        """
        out = [r.gpu for r in self.recommendations if r.gpu and r.action.takes_out_of_service]
        pci = one_name_per_gpu(g.removeprefix("PCI ") for g in out if g.startswith("PCI "))
        uuids = [str(g.get("uuid") or "") for g in gpus]
        addresses = [parse_pci_address(str(g.get("pci_bus_id") or "")) for g in gpus]
        named: list[str] = []
        seen: set[str] = set()
        for gpu in out:
            key = gpu
            if gpu.startswith("PCI "):
                key = "PCI " + pci[gpu.removeprefix("PCI ")]
                address = parse_pci_address(key)
                index = None if address is None else match_gpu(address, addresses)
                if index is not None and uuids[index]:
                    key = gpu = uuids[index]
            if key not in seen:
                seen.add(key)
                named.append(gpu)
        return named

    def out_of_service_uuids(self, gpus: Sequence[Mapping[str, Any]] = ()) -> list[str]:
        """`out_of_service_gpus` that are GPU UUIDs, sorted: a GPU's identity across hosts."""
        return sorted(g for g in self.out_of_service_gpus(gpus) if g.startswith("GPU-"))

    @property
    def sentence(self) -> str:
        """`reset-gpu (health: gpu3: row remapping pending)`, or `none`."""
        if not self.recommendations:
            return Action.NONE.value
        worst = next(r for r in self.recommendations if r.action is self.action)
        more = len({r.check for r in self.recommendations if r.action is self.action}) - 1
        also = f" and {more} more" if more > 0 else ""
        return f"{self.action.value} ({worst.check}: {shortened(worst.finding, 160)}{also})"


def shortened(text: str, limit: int) -> str:
    """`text` within `limit` characters, "..." where it was cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


_FLOOR = {Status.FAIL: Action.RERUN, Status.ERROR: Action.RERUN}
_CEILING = {Status.WARN: Action.MONITOR}


def _bounded(action: Action, status: Status) -> Action:
    floor, ceiling = _FLOOR.get(status), _CEILING.get(status)
    if floor is not None and action.severity < floor.severity:
        return floor
    if ceiling is not None and action.severity > ceiling.severity:
        return ceiling
    return action


def _record_status(record: Any) -> Status | None:
    try:
        return Status(str(record.get("status"))) if isinstance(record, dict) else None
    except ValueError:
        return None


def _repeated(
    rules: ActionRules, kind: Any, code: str, record: dict[str, Any], action: Action, cause: str
) -> tuple[Action, str]:
    """The XID row's repeat rule over its action: seen often enough within its hours (a finding
    whose span is not known, a saved log without stamps, is not escalated on a guess)."""
    row = rules.xid.get(code) if kind == "xid" else None
    repeat = row.repeat if row is not None else None
    count, span = record.get("count", 1), record.get("span_hours")
    if (
        repeat is None
        or not isinstance(count, int)
        or count < repeat.count
        or not isinstance(span, int | float)
        or span > repeat.hours
    ):
        return action, cause
    said = f"{cause}; {count} times within {span:.1f} h, its repeat rule ({repeat.count} within "
    return most_severe([action, repeat.action]), f"{said}{repeat.hours:g} h: {repeat.action.value})"


def _check_recommendations(check: CheckResult, rules: ActionRules) -> list[Recommendation]:
    """One recommendation per finding the check recorded; a failing or warning check whose
    status no recorded finding explains (an exception, a writer that keeps no findings) gets
    its check's action for that status, so no failure is ever left without one."""
    if check.status in (Status.PASS, Status.SKIP):
        return []
    out: list[Recommendation] = []
    records = check.details.get("findings")
    if check.status is not Status.ERROR and isinstance(records, list):
        for record in records:
            status = _record_status(record)
            if status not in (Status.FAIL, Status.WARN):
                continue
            kind, code = record.get("kind"), record.get("code")
            found = rules.action_for(kind, None if code is None else str(code))
            if found is not None:
                action, cause = _repeated(rules, kind, str(code), record, *found)
            else:
                action = rules.for_check(check.name, status)
                cause = "check" if kind is None else f"{kind} {code}: no row; the check's action"
            gpu = record.get("gpu")
            out.append(
                Recommendation(
                    check=check.name,
                    status=status,
                    action=_bounded(action, status),
                    cause=cause,
                    finding=shortened(str(record.get("text", "")), 500),
                    gpu=gpu if isinstance(gpu, str) else None,
                )
            )
    if not any(r.status is check.status for r in out):
        out.append(
            Recommendation(
                check=check.name,
                status=check.status,
                action=_bounded(rules.for_check(check.name, check.status), check.status),
                cause="check",
                finding=shortened(check.message, 500),
            )
        )
    return out


def plan_actions(checks: list[CheckResult], rules: ActionRules | None = None) -> ActionPlan:
    """Each failing, erring or warning finding's action, and the node's."""
    rules = rules or builtin_rules()
    recommendations = [r for check in checks for r in _check_recommendations(check, rules)]
    return ActionPlan(
        action=most_severe([r.action for r in recommendations]),
        rules=rules.label,
        recommendations=recommendations,
    )


def plan_of(report: RunReport) -> ActionPlan:
    """A report's plan: the one it stores; for a report written before plans were stored, the
    built-in tables' plan of its checks. Planning is the caller's: the report model validates
    its fields and plans nothing (issue #51 §2)."""
    return report.actions if report.actions is not None else plan_actions(report.checks)


def out_of_service_uuids(report: RunReport) -> list[str]:
    """The UUIDs of the GPUs a report's findings named for a remediation, however they named
    them (a kernel-log XID's PCI address is the GPU its capture lists there)."""
    return plan_of(report).out_of_service_uuids(report.captured_gpus)
