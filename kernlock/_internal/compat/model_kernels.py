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

A GPU's compute capability can select other repositories; discovery takes the
union over `CAPABILITIES` (A100, H100, B200 and MI300-class devices).

Imports torch and Transformers: called only by `kernlock lock` for declared models.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from kernlock.errors import ModelError

MODES = ("training", "inference")
# Compute capabilities (major*10+minor) the discovery assumes per device type; the union of what
# they select.
CAPABILITIES = {"cuda": (80, 90, 100), "rocm": (94,)}
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


class ModelKernels(NamedTuple):
    """A model's class and the kernels its default kernelize loads."""

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


def _model_class(config: Any) -> Any:
    """The class `from_pretrained` builds for `config`: its first architecture, else the causal-LM
    auto class."""
    import transformers

    for name in getattr(config, "architectures", None) or ():
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM._model_mapping[type(config)]


def _meta_model(name: str, root: Path) -> Any:
    """The declared model built from its config on the meta device (no weights)."""
    import torch
    from transformers import AutoConfig

    local = (root / name) if not Path(name).is_absolute() else Path(name)
    source = str(local) if local.is_dir() else name
    try:
        config = AutoConfig.from_pretrained(source)
        cls = _model_class(config)
        with torch.device("meta"):
            return cls._from_config(config)
    except (OSError, ValueError, KeyError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelError(
            f"model {name}: cannot build it from its config.json ({first})",
            fix="point [tool.kernlock] models at a directory holding config.json or a Hub "
            f"model id; {name!r} is neither",
        ) from None


@contextlib.contextmanager
def _recording(mapping: dict[str, Any], asked: list[Any]) -> Iterator[None]:
    """Every repository in `mapping` notes its load in `asked` and raises `FileNotFoundError`
    (kernels falls back)."""
    from kernlock._internal.compat.kernels_api import kernels_module

    repos_module = kernels_module("layer.repos")
    classes = {type(repo) for repo in _repositories(mapping)}
    originals = {cls: cls.__dict__["load"] for cls in classes if "load" in cls.__dict__}
    original_capability = getattr(repos_module, "_find_capability")  # noqa: B009 - a private name, looked up here

    def load(self: Any) -> Any:
        asked.append(self)
        raise FileNotFoundError("kernlock: discovery only")

    for cls in originals:
        cls.load = load
    try:
        yield
    finally:
        for cls, method in originals.items():
            cls.load = method
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


def discover(name: str, devices: Iterable[str], root: Path) -> ModelKernels:
    """What the installed Transformers' default kernelize loads for model `name` on each device
    type, in each mode."""
    from kernels import KernelizeFallback, Mode, kernelize, use_kernel_mapping
    from transformers.integrations.hub_kernels import get_kernel_mapping_transformers

    from kernlock._internal.compat.kernels_api import kernels_module

    model = _meta_model(name, root)
    mapping = get_kernel_mapping_transformers()
    names = _layer_names(mapping)
    repos_module = kernels_module("layer.repos")
    found: set[LayerKernel] = set()
    asked: list[Any] = []
    with _recording(mapping, asked), use_kernel_mapping(mapping, inherit_mapping=False):
        for device in sorted(set(devices)):
            for capability in CAPABILITIES.get(device, (0,)):
                setattr(  # noqa: B010
                    repos_module, "_find_capability", lambda device_index=None, _c=capability: _c
                )
                for mode_name, mode in (("training", Mode.TRAINING), ("inference", Mode.INFERENCE)):
                    asked.clear()
                    kernelize(model, device=device, mode=mode, use_fallback=KernelizeFallback.ALL)
                    for repo in asked:
                        found.add(
                            LayerKernel(
                                names.get(id(repo), getattr(repo, "layer_name", "?")),
                                repo._repo_id,
                                getattr(repo, "_version", None),
                                getattr(repo, "_revision", None),
                                device,
                                mode_name,
                            )
                        )
    return ModelKernels(name, type(model).__name__, tuple(sorted(found, key=_order)))


def _order(kernel: LayerKernel) -> tuple[str, str, str, str, str]:
    return (
        kernel.repo,
        str(kernel.version),
        kernel.revision or "",
        kernel.layer,
        kernel.device + kernel.mode,
    )
