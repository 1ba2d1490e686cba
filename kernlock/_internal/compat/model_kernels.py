"""The Hub kernels Transformers' default `kernelize` binds for a model, found without a GPU.

Transformers 5.25 kernelizes every model it loads on a GPU (`use_kernels`
defaults to on): each layer a model class registers
(`use_kernel_forward_from_hub("RMSNorm")`, `use_kernelized_func(...)`) is looked
up in its mapping (`integrations/hub_kernels.py`) for the device type and mode.
kernlock asks the installed Transformers and kernels themselves: it builds the
model class from its config on the meta device (no weights, no GPU), and runs
kernels' own `kernelize` under Transformers' mapping for each device type and
mode, with every repository's `load` answering "not here" after noting what
was asked. So the answer is exactly what those two releases would load, and no
kernel is downloaded.

A GPU's compute capability can select other repositories (`Device(properties=CUDAProperties(...))`
keys of the mapping); discovery takes the union over every capability the mapping's own entries
name, plus one outside all of them (the plain `"cuda"` entries), narrowed to the project's
`gpu-archs` when it declares them.

Imports torch and Transformers: called only by `kernlock lock` for declared models.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

MODES = ("training", "inference")
PLAIN_CAPABILITY = 0  # a capability inside no properties range: selects the mapping's plain entries
MAPPING_SOURCE = "integrations/hub_kernels.py"  # where Transformers keeps its kernelize mapping


class LayerKernel(NamedTuple):
    """One kernel Transformers' default kernelize loads for a model: which layer, repo, device type
    and mode."""

    layer: str  # the name the model class registers (`RMSNorm`, `rotary_pos_emb`)
    repo: str
    version: int | None
    revision: str | None
    device: str  # kernels' device type: cuda, rocm, xpu, mps
    mode: str  # training or inference
    source: str = MAPPING_SOURCE  # what brought it in: the mapping, or a call site `file:line`


class ModelKernels(NamedTuple):
    """A model's class and the kernels the installed Transformers loads for it."""

    name: str  # as declared: a local directory or a Hub model id
    model_class: str
    kernels: tuple[LayerKernel, ...]


def mapping_digest(transformers_root: Path) -> str | None:
    """sha256 of Transformers' kernelize mapping source (read, not imported); None when it has
    none."""
    try:
        return hashlib.sha256((transformers_root / MAPPING_SOURCE).read_bytes()).hexdigest()
    except OSError:
        return None


class _Noted(Exception):
    """Discovery under kernels 0.16: a layer's repository was noted; that layer is done."""


@contextlib.contextmanager
def _recording(mapping: dict[str, Any], asked: list[Any]) -> Iterator[None]:
    """Every repository in `mapping` notes its load in `asked` and raises `FileNotFoundError`
    (kernels falls back)."""
    from kernlock._internal.compat.kernels_api import kernels_module, line

    repos_module = kernels_module("layer.repos")
    classes = {type(repo) for repo in _repositories(mapping)}
    originals = {cls: cls.__dict__["load"] for cls in classes if "load" in cls.__dict__}
    original_capability = getattr(repos_module, "_find_capability")  # noqa: B009 - a private name, looked up here

    def load(self: Any) -> Any:
        asked.append(self)
        raise FileNotFoundError("kernlock: discovery only")

    for cls in originals:
        cls.load = load
    # kernels 0.16's kernelize lets a failed load through, and names each repository (resolving its
    # version on the Hub) first: note the repository and leave that layer as it is, resolve nothing
    kernelizer = kernels_module("layer.kernelize")
    layers = kernels_module("layer.layer")
    per_layer = None if line().RESOLVER_CHAIN else getattr(kernelizer, "kernelize_layer")  # noqa: B009
    memoize = getattr(layers, "_get_layer_memoize", None)
    resolvers = {
        c: c.__dict__["_resolve_revision"] for c in classes if "_resolve_revision" in c.__dict__
    }

    def recorded(repo: Any, module_class: Any) -> Any:
        asked.append(repo)
        raise _Noted

    def kernelize_layer(*args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(_Noted):
            assert per_layer is not None
            per_layer(*args, **kwargs)

    if per_layer is not None:
        setattr(kernelizer, "kernelize_layer", kernelize_layer)  # noqa: B010
        setattr(layers, "_get_layer_memoize", recorded)  # noqa: B010
        for cls in resolvers:
            cls._resolve_revision = lambda self: "(not resolved: kernlock discovery)"
    try:
        yield
    finally:
        for cls, method in originals.items():
            cls.load = method
        if per_layer is not None:
            setattr(kernelizer, "kernelize_layer", per_layer)  # noqa: B010
            setattr(layers, "_get_layer_memoize", memoize)  # noqa: B010
            for cls, method in resolvers.items():
                cls._resolve_revision = method
        setattr(repos_module, "_find_capability", original_capability)  # noqa: B010


def _repositories(mapping: dict[str, Any]) -> Iterator[Any]:
    for devices in mapping.values():
        for value in devices.values():
            yield from (value.values() if isinstance(value, dict) else (value,))


def _layer_names(mapping: dict[str, Any]) -> dict[int, str]:
    """Repository object → the layer name Transformers maps to it."""
    names: dict[int, str] = {}
    for layer, devices in mapping.items():
        for value in devices.values():
            for repo in value.values() if isinstance(value, dict) else (value,):
                names.setdefault(id(repo), layer)
    return names


def capabilities(mapping: dict[str, Any], device: str, declared: Iterable[int] = ()) -> list[int]:
    """The capabilities worth asking for on `device`: each bound of a properties range the mapping
    names and one outside them all; only the `declared` ones (the project's `gpu-archs`) if any."""
    bounds = {PLAIN_CAPABILITY}
    for devices in mapping.values():
        for key in devices:
            properties = getattr(key, "properties", None)
            if getattr(key, "type", None) == device and properties is not None:
                bounds |= {properties.min_capability, properties.max_capability}
    declared = sorted(set(declared))
    return declared or sorted(bounds)


def mapped_kernels(
    model: Any, devices: Iterable[str], declared: dict[str, tuple[int, ...]] | None = None
) -> list[LayerKernel]:
    """What the installed Transformers' default kernelize loads for `model` (built on the meta
    device) on each device type, in each mode."""
    import logging

    import kernels
    from kernels import Mode, kernelize, use_kernel_mapping
    from transformers.integrations.hub_kernels import get_kernel_mapping_transformers

    # keep every layer's own forward where no kernel loads (kernels 0.16: `use_fallback=True`)
    fallback = kernels.KernelizeFallback.ALL if hasattr(kernels, "KernelizeFallback") else True
    from kernlock._internal.compat.kernels_api import kernels_module

    mapping = get_kernel_mapping_transformers()
    names = _layer_names(mapping)
    repos_module = kernels_module("layer.repos")
    found: set[LayerKernel] = set()
    asked: list[Any] = []
    quiet = logging.getLogger("kernels")  # "no kernel mapping found for layer …": not the user's
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with _recording(mapping, asked), use_kernel_mapping(mapping, inherit_mapping=False):
            for device in sorted(set(devices)):
                for capability in capabilities(mapping, device, (declared or {}).get(device, ())):
                    setattr(  # noqa: B010
                        repos_module,
                        "_find_capability",
                        lambda device_index=None, _c=capability: _c,
                    )
                    for mode_name, mode in (
                        ("training", Mode.TRAINING),
                        ("inference", Mode.INFERENCE),
                    ):
                        asked.clear()
                        kernelize(model, device=device, mode=mode, use_fallback=fallback)
                        found.update(
                            LayerKernel(
                                names.get(id(repo), getattr(repo, "layer_name", "?")),
                                repo._repo_id,
                                getattr(repo, "_version", None),
                                getattr(repo, "_revision", None),
                                device,
                                mode_name,
                            )
                            for repo in asked
                        )
    finally:
        quiet.setLevel(level)
    return sorted(found, key=order)


def mapped_repos(device: str, training: bool) -> dict[str, str]:
    """Layer name → the repo id the installed Transformers' kernelize mapping names for it on
    `device` in the mode (training or inference)."""
    from kernels import Mode
    from transformers.integrations.hub_kernels import get_kernel_mapping_transformers

    mapping = get_kernel_mapping_transformers()

    wanted = Mode.TRAINING if training else Mode.INFERENCE
    named: dict[str, str] = {}
    for layer, devices in mapping.items():
        for key, value in devices.items():
            if getattr(key, "type", key) != device:
                continue
            if isinstance(value, dict):
                repos = [repo for mode, repo in value.items() if wanted in mode]
            else:
                repos = [value]
            for repo in repos:
                repo_id = getattr(repo, "_repo_id", None)
                if isinstance(repo_id, str):
                    named.setdefault(layer, repo_id)
    return named


def order(kernel: LayerKernel) -> tuple[str, str, str, str, str]:
    return (
        kernel.repo,
        str(kernel.version),
        kernel.revision or "",
        kernel.layer,
        kernel.device + kernel.mode,
    )
