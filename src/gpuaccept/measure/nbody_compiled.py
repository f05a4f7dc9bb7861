"""The fused n-body kernel compiled for real GPUs without one: registers, spills, the inner loop's
SASS, and the fp32 ceiling that instruction mix allows.

Triton compiles for any NVIDIA target on a CPU machine (its wheel ships ptxas and cuobjdump), and
its interpreter never runs the code generator, so this is how a kernel is known to compile, and
how fast it can be at best, before a GPU is at hand. `gpuaccept bench nbody --explain` prints it;
tests/measure/test_nbody_compiled.py holds every target to it.

The ceiling model, per SM sub-partition (4 per SM on sm_80, sm_90 and sm_100), per clock: one
warp instruction issued; FP32 lanes = the SM's FP32 lanes / 4; MUFU (rsqrt) 4 lanes. The SM's FP32
lanes come from the vendor peaks (FIELD-NOTES): H100 SXM 67 TFLOPS / (132 SMs x 1.98 GHz x 2) =
128; A100 19.5 / (108 x 1.41 x 2) = 64; Blackwell keeps Hopper's 128. MUFU at 16 per SM is an
assumption (the CUDA Programming Guide's throughput table for these generations), not measured
here; on every target it binds less than issue does. A warp's pass over one loop iteration costs
the most of: every instruction issued, its FP32 instructions at the lane rate (a paired FFMA2
counts as two), its MUFUs at the MUFU rate. With 20 flops per interaction (cuda-samples' nbody
convention), the ceiling is that rate against 2 x FP32 lanes flops per SM per clock. Latency,
occupancy and memory are ignored: it is an upper bound for the measured figure.

sm_103 (B300) and sm_121 (GB10) are compiled too (ptxas 12.9, which Triton 3.9 ships, knows
both): registers, spills and the loop are read, but no ceiling is modelled for them, for want of
a source read for their FP32 lanes per SM (B300 has no fp32 peak in references.toml; GB10's
6,144 CUDA cores give no SM count alone). Their loops differ: sm_103 pairs FP32 instructions as
sm_100 does (FFMA2, ...), sm_121 does not, so GB10 issues about 15 instructions an interaction
against sm_100's 10.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.measure.nbody_triton import GPU_CONFIGS

FLOPS_PER_INTERACTION = 20  # cuda-samples nbody: GFLOP/s = N^2 x iterations x 20 / time
TARGETS = (80, 90, 100, 103, 121)
SUB_PARTITIONS = 4
MUFU_LANES_PER_SUB_PARTITION = 4
FP32_LANES_PER_SM = {80: 64, 90: 128, 100: 128}
_FP32 = ("FADD", "FMUL", "FFMA")
_FP64 = ("DADD", "DMUL", "DFMA")
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_RESOURCES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


@dataclass(frozen=True)
class CompiledNbody:
    """What one tile shape compiles to for one target."""

    arch: int
    precision: str  # "fp32" or "fp64"
    block_i: int
    block_j: int
    warps: int
    registers: int
    spill_bytes: int  # stack plus local memory: any is a spill on these kernels
    loop: Counter[str]  # instruction counts (opcode without modifiers) in the inner loop

    @property
    def interactions_per_thread(self) -> int:
        """Interactions one thread computes per loop iteration (one rsqrt each)."""
        return self.loop["MUFU"]

    @property
    def loop_instructions(self) -> int:
        return sum(self.loop.values())

    def per_interaction(self, *opcodes: str) -> float:
        return sum(self.loop[op] * (2 if op.endswith("2") else 1) for op in opcodes) / max(
            1, self.interactions_per_thread
        )

    @property
    def fp32_per_interaction(self) -> float:
        """FP32 operations per interaction, a paired (…2) instruction counting as two."""
        return self.per_interaction(*_FP32, *(f"{op}2" for op in _FP32))

    @property
    def issue_per_interaction(self) -> float:
        return self.loop_instructions / max(1, self.interactions_per_thread)

    @property
    def ceiling_fraction(self) -> float | None:
        """The fp32 ceiling as a fraction of fp32 peak (None for fp64, and for a target whose
        FP32 lanes are not known: not modelled)."""
        if self.precision != "fp32" or not self.interactions_per_thread:
            return None
        if self.arch not in FP32_LANES_PER_SM:
            return None
        fp32_lanes = FP32_LANES_PER_SM[self.arch] // SUB_PARTITIONS
        cycles = max(
            float(self.loop_instructions),
            self.fp32_per_interaction * self.interactions_per_thread * 32 / fp32_lanes,
            self.loop["MUFU"] * 32 / MUFU_LANES_PER_SUB_PARTITION,
        )
        interactions_per_sm_clock = SUB_PARTITIONS * 32 * self.interactions_per_thread / cycles
        peak_flops_per_sm_clock = 2 * FP32_LANES_PER_SM[self.arch]
        return interactions_per_sm_clock * FLOPS_PER_INTERACTION / peak_flops_per_sm_clock


def _tool(name: str) -> Path:
    """A CUDA binary tool: the one pip's Triton ships beside its backend, else the one on PATH
    (conda-forge's cuda-cuobjdump, a CUDA toolkit)."""
    import shutil

    import triton

    shipped = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if shipped.is_file():
        return shipped
    found = shutil.which(name)
    if found is None:
        from gpuaccept.errors import EnvironmentProblem

        raise EnvironmentProblem(
            f"{name} is neither beside Triton's backend nor on PATH: install cuda-cuobjdump "
            "(conda-forge) or a CUDA toolkit to read the compiled kernel"
        )
    return Path(found)


def _signature(precision: str) -> dict[str, str]:
    pointer = "*fp64" if precision == "fp64" else "*fp32"
    names = ("x_ptr", "y_ptr", "z_ptr", "m_ptr", "ax_ptr", "ay_ptr", "az_ptr", "softening_ptr")
    return {
        **dict.fromkeys(names, pointer),
        "n": "i32",
        "BLOCK_I": "constexpr",
        "BLOCK_J": "constexpr",
    }


def inner_loop(sass: str) -> Counter[str]:
    """Opcode counts between the target and the source of the longest backward branch."""
    instructions = [
        (int(match[1], 16), match[2].split(".")[0], match[3])
        for match in _INSTRUCTION.finditer(sass)
    ]
    loops = []
    for address, opcode, operands in instructions:
        target = re.search(r"0x([0-9a-f]+)", operands) if opcode == "BRA" else None
        if target and int(target[1], 16) < address:
            loops.append((int(target[1], 16), address))
    if not loops:
        return Counter()
    start, end = max(loops, key=lambda loop: loop[1] - loop[0])
    return Counter(opcode for address, opcode, _ in instructions if start <= address <= end)


def compile_nbody(
    arch: int, precision: str, block_i: int, block_j: int, warps: int, *, fusion: bool = True
) -> CompiledNbody:
    """Compile the kernel for sm_`arch` (no GPU needed) and read its resources and inner loop,
    with the fusion the launch asks for (`nbody_triton.FP_FUSION`) unless told otherwise."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gpuaccept.measure.nbody_triton_kernel import nbody_accelerations_kernel

    source = ASTSource(
        fn=nbody_accelerations_kernel,
        signature=_signature(precision),
        constexprs={"BLOCK_I": block_i, "BLOCK_J": block_j},
    )
    compiled = triton.compile(
        source,
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": warps, "enable_fp_fusion": fusion},
    )
    with tempfile.TemporaryDirectory() as scratch:
        cubin = Path(scratch) / "nbody.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run(
            [str(_tool("cuobjdump")), "-res-usage", str(cubin)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        sass = subprocess.run(
            [str(_tool("cuobjdump")), "-sass", str(cubin)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    found = _RESOURCES.search(usage)
    if found is None:
        raise RuntimeError(f"cuobjdump -res-usage printed no resource line: {usage[:200]!r}")
    registers, stack, _, local = map(int, found.groups())
    return CompiledNbody(
        arch=arch,
        precision=precision,
        block_i=block_i,
        block_j=block_j,
        warps=warps,
        registers=registers,
        spill_bytes=stack + local,
        loop=inner_loop(sass),
    )


def compile_all(targets: tuple[int, ...] = TARGETS) -> list[CompiledNbody]:
    """Every tile shape the autotuner may pick, for every target."""
    return [
        compile_nbody(arch, precision, *config)
        for arch in targets
        for precision, configs in GPU_CONFIGS.items()
        for config in configs
    ]
