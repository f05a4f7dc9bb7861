"""`gpuaccept env` as a library call: capture the environment this process runs in (stack, GPUs,
lock hash, image, scheduler ids), as JSON or as a summary people read, into a file or the log.

The same capture is embedded in every report; unknown values are null."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from gpuaccept.commands.options import opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output


@dataclass(frozen=True, kw_only=True)
class EnvRequest:
    """`as_json`: the capture as JSON on the log (else a summary, unless it goes to a file);
    `output`: a file the capture is written to, as JSON."""

    as_json: Annotated[bool, opt("--json", text="Print the capture as JSON to stdout.")] = False
    output: Annotated[
        Path | None, opt(("--output", "-o"), text="Write the capture as JSON to this file.")
    ] = None


@dataclass(frozen=True)
class EnvResult:
    exit_code: int
    capture: dict[str, Any]


def run(request: EnvRequest, out: Output) -> EnvResult:
    """Refuse an --output that cannot be written before capturing, capture, write, say."""
    from gpuaccept.output_files import write_text_atomically
    from gpuaccept.record.environment import capture_environment

    output = request.output
    if output is not None:
        from gpuaccept.output_files import check_output_file

        check_output_file(output, "--output")
    capture = capture_environment()
    text = json.dumps(capture, indent=2, sort_keys=True, ensure_ascii=False)
    if output is not None:
        try:
            write_text_atomically(output, text + "\n")
        except OSError as error:
            raise InputError(f"--output {output}: cannot write: {error.strerror}") from None
    if request.as_json:
        out.line(text)
    elif output is None:
        for line in _summary_lines(capture):
            out.line(line)
    else:
        out.line(f"[ENV] {output}")
    return EnvResult(0, capture)


def _gpu_line(gpu: dict[str, Any]) -> str:
    """`  gpu0 NVIDIA H100 80GB HBM3 cc 9.0 GPU-... 0000:cb:00.0`, leaving out what is unknown."""
    capability = gpu.get("compute_capability")
    parts = [
        f"gpu{gpu.get('index')}",
        gpu.get("name"),
        f"cc {capability}" if capability is not None else None,
        gpu.get("uuid"),
        gpu.get("pci_bus_id"),
    ]
    return "  " + " ".join(str(part) for part in parts if part is not None)


def _summary_lines(capture: dict[str, Any]) -> list[str]:
    """The capture as people read it, a line per part of the stack."""

    def get(section: str, key: str) -> Any:
        """A captured value as people read it: 'none' where the probe found nothing."""
        value = (capture.get(section) or {}).get(key)
        return "none" if value is None or value == "" else value

    gpus = capture.get("gpus") or []
    memory = (capture.get("system") or {}).get("memory_bytes")
    memory_text = f"{memory / 1024**3:.1f} GiB" if isinstance(memory, int | float) else "none"
    runtime = (capture.get("system") or {}).get("container_runtime")
    lines = [
        f"host      {get('system', 'hostname')} ({get('system', 'os')}, "
        f"{get('system', 'architecture')}, {get('system', 'cores')} cores)",
        f"cpu       {get('system', 'cpu_model')}, memory {memory_text}, "
        f"kernel {get('system', 'kernel')}",
        f"python    {get('python', 'version')} {get('python', 'executable')}",
        f"torch     {get('torch', 'version')} (CUDA {get('cuda', 'runtime')}, "
        f"cuDNN {get('cuda', 'cudnn')}, NCCL {get('cuda', 'nccl')})",
        f"driver    {get('cuda', 'driver_version')} (CUDA {get('cuda', 'driver')})",
        f"gpus      {len(gpus)}",
        *(_gpu_line(gpu) for gpu in gpus if isinstance(gpu, dict)),
        f"pixi      env {get('pixi', 'environment')}, lock sha256 {get('pixi', 'lock_sha256')}",
        f"git       {get('git', 'sha')} {get('git', 'branch')}"
        f"{' (dirty)' if get('git', 'dirty') else ''}",
        (
            f"container {get('container', 'image')} revision {get('container', 'revision')}"
            if capture.get("container")
            # the runtime the host section saw (docker, apptainer, ...): inside a container that
            # is not one of our images, which is not the same as no container
            else f"container {runtime} (not a gpuaccept image)"
            if runtime
            else "container none"
        ),
        f"packages  {len(capture.get('packages') or [])}",
    ]
    return lines
