"""All-pairs gravitational n-body (cuda-samples nbody): one integration step per iteration.

Accelerations are computed in tiles of bodies so memory stays O(N x tile), never O(N^2). FLOP/s
follow the cuda-samples convention: 20 flops per interaction in fp32, 30 in fp64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpuaccept.errors import InputError
from gpuaccept.measure.timing import TimingStats, time_repeats

NBODY_DTYPES = {"fp32": torch.float32, "fp64": torch.float64}
FLOPS_PER_INTERACTION = {"fp32": 20, "fp64": 30}
SOFTENING_SQUARED = 0.01
TIME_STEP = 0.01


@dataclass(frozen=True)
class NbodyFigure:
    dtype: str
    bodies: int
    timing: TimingStats  # per integration step

    @property
    def interactions_per_second(self) -> float:
        return self.bodies**2 / self.timing.median_seconds

    @property
    def gflops(self) -> float:
        return self.interactions_per_second * FLOPS_PER_INTERACTION[self.dtype] / 1e9


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
    positions: torch.Tensor, velocities: torch.Tensor, masses: torch.Tensor, steps: int, tile: int
) -> None:
    """Leapfrog-style steps in place (what the timed loop does)."""
    for _ in range(steps):
        velocities.add_(accelerations(positions, masses, tile), alpha=TIME_STEP)
        positions.add_(velocities, alpha=TIME_STEP)


def measure_nbody(
    device: torch.device, dtype: str, bodies: int, tile: int, warmup: int, repeats: int
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
        lambda: integrate(positions, velocities, masses, 1, tile), device, warmup, repeats
    )
    return NbodyFigure(dtype, bodies, timing)


def nbody_max_relative_error(device: torch.device, dtype: str, bodies: int, tile: int) -> float:
    """Worst relative error of one step's accelerations against an untiled float64 reference."""
    positions, _, masses = initial_bodies(bodies, device, dtype)
    measured = accelerations(positions, masses, tile).double().cpu()
    p64, _, m64 = initial_bodies(bodies, torch.device("cpu"), "fp64")
    delta = p64[None, :, :] - p64[:, None, :]
    inverse = (delta.square().sum(-1) + SOFTENING_SQUARED) ** -1.5
    reference = (delta * (m64[None, :] * inverse)[..., None]).sum(1)
    scale = reference.norm(dim=1).clamp_min(1e-12)
    return float(((measured - reference).norm(dim=1) / scale).max())
