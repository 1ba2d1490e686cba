"""`[tool.kernlock] gpu-archs`: the GPU architectures the project's GPU targets run on (its node
pools).

    [tool.kernlock]
    gpu-archs = ["8.0", "9.0"]          # every CUDA target runs on A100s (8.0) and H100s (9.0)

    [tool.kernlock.gpu-archs]           # or per target: the target's text, or a glob over it
    "torch2.11-cxx11-cu130-x86_64-linux" = ["H100", "B200"]
    "*-rocm*" = ["gfx942"]

An architecture is a CUDA compute capability (`8.0`, `9.0`, `10.0`), a ROCm `gfx` name, or a GPU's
name (`A100`, `H100`, `MI300X`; see `GPU_NAMES`). A target gets every architecture of every entry
that matches it; a CUDA capability applies to CUDA targets, a `gfx` name to ROCm ones. `kernlock
verify` fails when a locked build does not support one of them
(`kernlock._internal.rules.gpu_archs`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from kernlock._internal.spec.target import Target
from kernlock.errors import ConfigError

# Data-center GPUs by name: their CUDA compute capability or ROCm architecture.
GPU_NAMES = {
    "V100": "7.0",
    "T4": "7.5",
    "A100": "8.0",
    "A30": "8.0",
    "A10": "8.6",
    "A10G": "8.6",
    "A40": "8.6",
    "L4": "8.9",
    "L40": "8.9",
    "L40S": "8.9",
    "H100": "9.0",
    "H200": "9.0",
    "GH200": "9.0",
    "B200": "10.0",
    "GB200": "10.0",
    "B300": "10.3",
    "GB300": "10.3",
    "MI210": "gfx90a",
    "MI250": "gfx90a",
    "MI250X": "gfx90a",
    "MI300A": "gfx942",
    "MI300X": "gfx942",
    "MI325X": "gfx942",
    "MI350X": "gfx950",
    "MI355X": "gfx950",
}
_CUDA = re.compile(r"\d+\.\d+")
_ROCM = re.compile(r"gfx[0-9a-f]+")


class GpuArch(NamedTuple):
    """One declared architecture: `arch` as kernels compares it (`9.0`, `gfx942`), `declared` as
    written."""

    arch: str
    declared: str

    @property
    def family(self) -> str:
        """`cuda` or `rocm`."""
        return "rocm" if self.arch.startswith("gfx") else "cuda"

    def __str__(self) -> str:
        return self.arch if self.declared == self.arch else f"{self.arch} ({self.declared})"


def _arch(value: Any, where: str) -> GpuArch:
    if not isinstance(value, str):
        raise ConfigError(
            f"{where}: {value!r} is not a GPU architecture",
            fix='write it as a string like "9.0", "gfx942" or "H100"',
        )
    arch = GPU_NAMES.get(value.upper(), value)
    if not (_CUDA.fullmatch(arch) or _ROCM.fullmatch(arch)):
        raise ConfigError(
            f"{where}: {value!r} is not a GPU architecture",
            fix='write a CUDA compute capability like "9.0" (a device has no a/f/+PTX '
            "suffix; builds do), a ROCm name "
            f'like "gfx942", or a GPU name ({", ".join(sorted(GPU_NAMES))})',
        )
    return GpuArch(arch, value)


def parse_gpu_archs(value: Any, source: str) -> tuple[tuple[str, tuple[GpuArch, ...]], ...]:
    """`gpu-archs` as (target glob, architectures) pairs; a plain list applies to every target
    (`*`)."""
    if value is None:
        return ()
    where = f"{source}: [tool.kernlock] gpu-archs"
    table = {"*": value} if isinstance(value, list) else value
    if not isinstance(table, dict):
        raise ConfigError(
            f"{where} is neither a list nor a table",
            fix="write a list of architectures, or a table of target (or glob) = [architectures]",
        )
    pairs = []
    for pattern, archs in table.items():
        if not isinstance(archs, list) or not archs:
            raise ConfigError(
                f"{where}: {pattern!r} names no list of architectures",
                fix='give it a non-empty list, like ["8.0", "9.0"]',
            )
        pairs.append(
            (pattern, tuple(dict.fromkeys(_arch(a, f"{where} {pattern!r}") for a in archs)))
        )
    return tuple(pairs)


def declared_archs(
    declarations: tuple[tuple[str, tuple[GpuArch, ...]], ...], target: Target, family: str
) -> list[GpuArch]:
    """The `family` (`cuda`/`rocm`) architectures declared for `target`, in declaration order, each
    once."""
    name = str(target)
    found: dict[str, GpuArch] = {}
    for pattern, archs in declarations:
        if pattern == name or fnmatch.fnmatchcase(name, pattern):
            for arch in archs:
                if arch.family == family:
                    found.setdefault(arch.arch, arch)
    return list(found.values())


def declared_capabilities(
    declarations: tuple[tuple[str, tuple[GpuArch, ...]], ...], targets: Iterable[Target]
) -> dict[str, tuple[int, ...]]:
    """The CUDA compute capabilities (`9.0` → 90) declared for any of `targets`, as kernels'
    `CUDAProperties` compares them: `{"cuda": (80, 90)}`, or `{}` when none are declared."""
    found = {
        int(arch.arch.replace(".", ""))
        for target in targets
        for arch in declared_archs(declarations, target, "cuda")
    }
    return {"cuda": tuple(sorted(found))} if found else {}
