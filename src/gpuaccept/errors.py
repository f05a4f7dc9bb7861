"""Errors the library raises; the CLI turns each into one line on stderr and its exit code."""

from __future__ import annotations


class GpuacceptError(Exception):
    """Base class: a failure with a message a user can act on."""

    exit_code: int = 1


class CheckFailed(GpuacceptError):
    """A check or gate failed (exit 1)."""

    exit_code = 1


class InputError(GpuacceptError):
    """A bad flag, or an unreadable or invalid file (exit 2)."""

    exit_code = 2


class EnvironmentProblem(GpuacceptError):
    """A required component is missing, e.g. NCCL asked for but absent (exit 3)."""

    exit_code = 3


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (Ctrl-C, HTCondor eviction, `timeout`): exit 128 + signal.

    A BaseException, as KeyboardInterrupt is, and for the same reason: it is raised wherever the
    main thread happens to be, and the probes that turn any failure into "unknown" (`except
    Exception`) must not swallow it. One did: a SIGTERM during the environment capture was lost
    and the run went on to print SUCCESS.
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
