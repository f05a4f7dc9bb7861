"""All-pairs gravitational n-body (cuda-samples nbody): one integration step per iteration.

Two kernels compute the accelerations. On a GPU, `triton-fused` (measure.nbody_triton) keeps
every interaction in registers, as the cuda-samples kernel does. `torch-tiled` is plain torch in
tiles of bodies, so memory stays O(N x tile), never O(N^2); it is the CPU path and the fallback
where Triton is missing, and on a GPU it measures memory traffic rather than arithmetic. FLOP/s
follow the cuda-samples convention: 20 flops per interaction in fp32, 30 in fp64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpuaccept.errors import EnvironmentProblem, InputError
from gpuaccept.measure.timing import TimingStats, time_repeats

NBODY_DTYPES = {"fp32": torch.float32, "fp64": torch.float64}
FLOPS_PER_INTERACTION = {"fp32": 20, "fp64": 30}
SOFTENING_SQUARED = 0.01
TIME_STEP = 0.01
TILED, FUSED = "torch-tiled", "triton-fused"
KERNEL_CHOICES = ("auto", "triton", "torch")


@dataclass(frozen=True)
class NbodyFigure:
    dtype: str
    bodies: int
    timing: TimingStats  # per integration step
    kernel: str = TILED

    @property
    def interactions_per_second(self) -> float:
        return self.bodies**2 / self.timing.median_seconds

    @property
    def gflops(self) -> float:
        return self.interactions_per_second * FLOPS_PER_INTERACTION[self.dtype] / 1e9


def choose_kernel(device: torch.device, requested: str) -> str:
    """The kernel that will run: `auto` takes the fused one on a GPU when Triton is there."""
    from gpuaccept.measure.nbody_triton import interpreting, triton_available

    if requested not in KERNEL_CHOICES:
        raise InputError(f"--kernel must be one of {', '.join(KERNEL_CHOICES)} (got {requested!r})")
    if requested == "torch":
        return TILED
    if requested == "auto":
        return FUSED if device.type == "cuda" and triton_available() else TILED
    if not triton_available():
        raise EnvironmentProblem("--kernel triton: Triton is not installed in this environment")
    if device.type != "cuda" and not interpreting():
        raise EnvironmentProblem(
            "--kernel triton runs on a GPU; on the CPU only in Triton's interpreter "
            "(set TRITON_INTERPRET=1, slow: for small --bodies)"
        )
    return FUSED


def usable_kernel(kernel: str, requested: str, device: torch.device) -> tuple[str, str | None]:
    """The kernel that runs here, and why it is not the one chosen when it is not.

    The fused kernel's first launch on a GPU builds Triton's C launcher with the compiler CC
    names, else gcc, else clang, and the interpreter's Python.h (triton/runtime/build.py,
    `_build`): a bare container or a system Python without python3-dev has neither. So it is
    launched once on a few bodies first: under `auto`, a kernel that cannot run gives way to the
    torch path, said in a line; asked for by name (`--kernel triton`), it is an environment
    problem, exit 3, never a traceback."""
    if kernel != FUSED:
        return kernel, None
    try:
        positions, _, masses = initial_bodies(64, device, "fp32")
        kernel_accelerations(FUSED, positions, masses, 64)
    except EnvironmentProblem:
        raise
    except Exception as error:  # Triton's build and launch fail in many ways; all mean "not here"
        said = str(error).strip().splitlines()
        why = f"{type(error).__name__}: {said[0][:200] if said else ''}"
        if requested != "auto":
            raise EnvironmentProblem(f"--kernel triton cannot run here ({why})") from None
        return TILED, f"the fused Triton kernel cannot run here ({why}): the torch path runs"
    return kernel, None


def kernel_accelerations(
    kernel: str, positions: torch.Tensor, masses: torch.Tensor, tile: int
) -> torch.Tensor:
    if kernel == FUSED:
        from gpuaccept.measure.nbody_triton import fused_accelerations

        return fused_accelerations(positions, masses, SOFTENING_SQUARED)
    return accelerations(positions, masses, tile)


def accelerations(positions: torch.Tensor, masses: torch.Tensor, tile: int) -> torch.Tensor:
    """a_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps^2)^(3/2), tiled over i."""
    result = torch.empty_like(positions)
    for begin in range(0, len(positions), tile):
        mine = positions[begin : begin + tile]
        delta = positions[None, :, :] - mine[:, None, :]  # tile x N x 3
        inverse = (delta.square().sum(-1) + SOFTENING_SQUARED).rsqrt()
        weight = masses[None, :] * inverse * inverse * inverse
        result[begin : begin + tile] = (delta * weight[..., None]).sum(1)
    return result


def initial_bodies(
    bodies: int, device: torch.device, dtype: str, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Positions, velocities and masses of a random cluster (same values for every dtype)."""
    generator = torch.Generator().manual_seed(seed)
    positions = torch.randn(bodies, 3, generator=generator, dtype=torch.float64)
    velocities = torch.randn(bodies, 3, generator=generator, dtype=torch.float64) * 0.1
    masses = torch.rand(bodies, generator=generator, dtype=torch.float64) + 0.5
    kind = NBODY_DTYPES[dtype]
    return (
        positions.to(device, kind),
        velocities.to(device, kind),
        masses.to(device, kind),
    )


def integrate(
    positions: torch.Tensor,
    velocities: torch.Tensor,
    masses: torch.Tensor,
    steps: int,
    tile: int,
    kernel: str = TILED,
) -> None:
    """Leapfrog-style steps in place (what the timed loop does)."""
    for _ in range(steps):
        velocities.add_(kernel_accelerations(kernel, positions, masses, tile), alpha=TIME_STEP)
        positions.add_(velocities, alpha=TIME_STEP)


def measure_nbody(
    device: torch.device,
    dtype: str,
    bodies: int,
    tile: int,
    warmup: int,
    repeats: int,
    kernel: str = TILED,
) -> NbodyFigure:
    """Time one integration step of `bodies` bodies."""
    if dtype not in NBODY_DTYPES:
        raise InputError(f"--dtype must be one of {', '.join(NBODY_DTYPES)} (got {dtype!r})")
    if bodies < 2 or tile < 1:
        raise InputError(
            f"n-body needs at least 2 bodies and a positive tile (got {bodies}, {tile})"
        )
    positions, velocities, masses = initial_bodies(bodies, device, dtype)
    timing = time_repeats(
        lambda: integrate(positions, velocities, masses, 1, tile, kernel), device, warmup, repeats
    )
    return NbodyFigure(dtype, bodies, timing, kernel)


def nbody_max_relative_error(
    device: torch.device, dtype: str, bodies: int, tile: int, kernel: str = TILED
) -> float:
    """Worst relative error of one step's accelerations against an untiled float64 reference."""
    positions, _, masses = initial_bodies(bodies, device, dtype)
    measured = kernel_accelerations(kernel, positions, masses, tile).double().cpu()
    p64, _, m64 = initial_bodies(bodies, torch.device("cpu"), "fp64")
    delta = p64[None, :, :] - p64[:, None, :]
    inverse = (delta.square().sum(-1) + SOFTENING_SQUARED) ** -1.5
    reference = (delta * (m64[None, :] * inverse)[..., None]).sum(1)
    scale = reference.norm(dim=1).clamp_min(1e-12)
    return float(((measured - reference).norm(dim=1) / scale).max())
