"""Declared models → every Hub kernel the installed Transformers loads for them, as specs and lock
records.

Discovery (`kernlock._internal.compat.model_surface`) reads the kernelize mapping, the model's
own code, its quantizer, its experts implementation and its attention swap, per device type of the
lock's targets and per mode. A kernel found becomes a spec restricted to those device types (a CPU
target needs none of them), noting which model layer or call site uses it; a Hub kernel the
config's own `attn_implementation` names becomes a plain spec (locked, never loaded while
locking). The model itself becomes a `[[model]]` record
with the Transformers release and kernelize mapping that decided, so `verify` can
tell, without importing Transformers, when an upgrade makes the lock stale.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from kernlock._internal.compat.model_kernels import MAPPING_SOURCE, LayerKernel, mapping_digest
from kernlock._internal.compat.model_surface import discover
from kernlock._internal.compat.transformers import installed_transformers
from kernlock._internal.lockfile.entries import LockedModel
from kernlock._internal.project.scan import ModelRef
from kernlock._internal.spec.devices import device_type
from kernlock._internal.spec.kernel_spec import KernelSpec, Origin, parse_spec
from kernlock._internal.spec.target import Target
from kernlock.errors import ModelError


def _spec_text(kernel: LayerKernel) -> str:
    return (
        f"{kernel.repo}@v{kernel.version}"
        if kernel.version is not None
        else f"{kernel.repo}@{kernel.revision}"
    )


def _use(kernel: LayerKernel) -> str:
    """What binds the kernel: the mapped layer's name, or what loads it and where
    (`model code at models/rwkv/modeling_rwkv.py:52`)."""
    return kernel.layer if kernel.source == MAPPING_SOURCE else f"{kernel.layer} at {kernel.source}"


def _bindings(kernels: Iterable[LayerKernel]) -> list[tuple[str, str, str, str]]:
    """`(spec text, use, device type, modes)`, one per layer or call site and device type,
    sorted."""
    modes: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for kernel in kernels:
        modes[(_spec_text(kernel), _use(kernel), kernel.device)].add(kernel.mode)
    return [
        (spec, layer, device, ", ".join(sorted(used)))
        for (spec, layer, device), used in sorted(modes.items())
    ]


def model_kernels(
    models: Iterable[ModelRef],
    targets: Iterable[Target],
    root: Path,
    attention: Iterable[str] = (),
    capabilities: dict[str, tuple[int, ...]] | None = None,
) -> tuple[list[KernelSpec], tuple[LockedModel, ...]]:
    """The specs the installed Transformers loads for `models` on `targets` (the project asking for
    the `attention` implementations), and each model's record (none without a GPU target).

    Capability-keyed mapping entries are tried at every bound the mapping names, or only at the
    project's declared `capabilities` (`gpu-archs`: `{"cuda": (90,)}`)."""
    models = list(models)
    devices = sorted({d for target in targets if (d := device_type(target.backend)) is not None})
    if not models or not devices:
        return [], ()  # Transformers kernelizes nothing on a CPU: no GPU target, nothing to find
    info = installed_transformers()
    digest = mapping_digest(info.root) if info.root is not None else None
    if info.version is None or digest is None:
        raise ModelError(
            "[tool.kernlock] models needs Transformers to find what it kernelizes "
            f"({models[0].name}); it is not installed here",
            fix="pip install 'kernlock[transformers]' (or the Transformers your jobs run) "
            "and lock again",
        )
    specs: dict[str, KernelSpec] = {}
    records = []
    attention = list(attention)
    for ref in models:
        found, named = discover(ref.name, devices, root, attention, capabilities)
        # the config's own attn_implementation: locked, never loaded while locking
        if named is not None and named not in specs and named not in attention:
            specs[named] = parse_spec(named, Origin(f"model {ref.name} config.json"))
        bindings = _bindings(found.kernels)
        for text, layer, device, modes in bindings:
            spec = specs.get(text) or parse_spec(text, Origin(f"model {ref.name}"))
            specs[text] = replace(
                spec,
                devices=tuple(sorted({*spec.devices, device})),
                used_by=tuple(sorted({*spec.used_by, f"{ref.name}: {layer} ({device}: {modes})"})),
            )
        records.append(
            LockedModel(
                name=ref.name,
                model_class=found.model_class,
                transformers=info.version,
                kernel_mapping=digest,
                layers=tuple(
                    f"{layer} -> {text} ({device}: {modes})"
                    for text, layer, device, modes in bindings
                ),
            )
        )
    return list(specs.values()), tuple(records)
