"""Every Hub kernel the installed Transformers loads for a model, found without a GPU and without
running anything from the Hub.

Transformers loads Hub kernels for a model from five places; each is read from Transformers' own
tables and source, so an upgrade is followed without a kernlock release:

1. the default `kernelize` mapping (`model_kernels.mapped_kernels`), on the meta device;
2. literal `get_kernel(...)` / `lazy_load_kernel(...)` calls in the model class's modeling module
   and the model modules it imports (RWKV, YOSO, MRA, SAM3-video);
3. the quantizer of the config's `quantization_config.quant_method` and the integration modules
   it imports (`mxfp4` unless `dequantize`, `fp8`, `fbgemm_fp8`, `eetq`, `nvfp4`, `metal`);
4. the config's `experts_implementation` (`deepgemm`, `sonicmoe`): the module of its forward in
   Transformers' `ExpertsInterface`, and what that imports;
5. the attention repo the model class swaps in (`_compatible_flash_implementations`) when the
   project asks for flash attention, chosen per device type as Transformers chooses.

A kernel the config's `attn_implementation` names is locked as a spec, never loaded. A model with
remote code (`auto_map`) is not built: its own `.py` files are read for literal calls instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernlock._internal.compat.model_config import ModelConfig, build_config, read_config
from kernlock._internal.compat.model_kernels import (
    MODES,
    LayerKernel,
    ModelKernels,
    mapped_kernels,
    order,
)
from kernlock._internal.compat.source_kernels import (
    KernelCall,
    hub_kernel_table,
    kernel_calls,
    walk,
)
from kernlock.errors import ModelError

GPU_DEVICES = ("cuda", "rocm", "xpu")


def _transformers_root() -> Path:
    import transformers

    return Path(transformers.__file__).parent


def _unbuildable(name: str, error: BaseException) -> ModelError:
    """One line: the declared model cannot be built, with the first line of why."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ModelError(
        f"model {name}: cannot build it from its config.json ({first[:200]})",
        fix="point [tool.kernlock] models at a directory holding config.json or a Hub "
        f"model id; {name!r} is neither",
    )


def _config_file(name: str, root: Path) -> Path:
    """The declared model's config.json: in its directory, or downloaded for a Hub model id."""
    local = (root / name) if not Path(name).is_absolute() else Path(name)
    if local.is_dir():
        return local / "config.json"
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return Path(hf_hub_download(name, "config.json"))
    except (HfHubHTTPError, OSError, ValueError) as error:
        raise _unbuildable(name, error) from None


def _remote_sources(name: str, config: ModelConfig) -> list[Path]:
    """The remote-code modules `auto_map` names, in the model's directory (downloaded, never
    imported, for a Hub model)."""
    modules = set()
    for value in config.data.get("auto_map", {}).values():
        for reference in value if isinstance(value, list) else [value]:
            if isinstance(reference, str) and "." in reference:
                modules.add(reference.split("--")[-1].rsplit(".", 1)[0])
    files = []
    for module in sorted(modules):
        path = config.directory / f"{module.replace('.', '/')}.py"
        if not path.is_file() and not (Path(name).exists() or "/" not in name):
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(name, path.name))
        if path.is_file():
            files.append(path)
    return files


def _calls(files: Iterable[Path], root: Path) -> list[KernelCall]:
    table = hub_kernel_table(root / "integrations" / "hub_kernels.py")
    return [call for path in files for call in kernel_calls(path, root, table)]


def _module_file(obj: Any) -> Path | None:
    module = sys.modules.get(getattr(obj, "__module__", ""))
    file = getattr(module, "__file__", None)
    return Path(file) if file else None


def _as_kernels(calls: Iterable[KernelCall], why: str, devices: Iterable[str]) -> set[LayerKernel]:
    return {
        LayerKernel(why, c.repo, c.version, c.revision, device, mode, c.site)
        for c in calls
        for device in devices
        for mode in MODES
    }


def _quantization(config: Any, devices: list[str], root: Path) -> set[LayerKernel]:
    """Kernels the config's quantizer loads (none for a dequantized mxfp4 checkpoint)."""
    quantization = getattr(config, "quantization_config", None)
    if not isinstance(quantization, dict):
        quantization = getattr(quantization, "to_dict", lambda: None)()
    if not isinstance(quantization, dict):
        return set()
    method = quantization.get("quant_method")
    if not isinstance(method, str) or quantization.get("dequantize") is True:
        return set()
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    quantizer = AUTO_QUANTIZER_MAPPING.get(method)
    start = _module_file(quantizer) if quantizer is not None else None
    if start is None:
        return set()
    metal = "metal" in method
    used = [d for d in devices if (d == "mps") == metal]
    files = walk([start], root, ("integrations",))
    return _as_kernels(_calls(files, root), f"quantization {method}", used)


def _experts(implementation: object, devices: list[str], root: Path) -> set[LayerKernel]:
    """Kernels of the forward of `experts_implementation` (as a config.json or the project's code
    names it): the module that defines it, and what that imports."""
    if not isinstance(implementation, str):
        return set()
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    forward = ALL_EXPERTS_FUNCTIONS._global_mapping.get(implementation)
    start = _module_file(forward) if forward is not None else None
    if start is None:
        return set()
    files = walk([start], root, ("integrations",))
    used = [d for d in devices if d in GPU_DEVICES]
    return _as_kernels(_calls(files, root), f"experts {implementation}", used)


def _compatible_flash(
    model_class: Any, attention: Iterable[str], devices: list[str]
) -> set[LayerKernel]:
    """The attention kernel Transformers swaps in for a flash request the model class does not
    list: the first of `_compatible_flash_implementations` with builds for the device."""
    compatible = getattr(model_class, "_compatible_flash_implementations", None)
    if not compatible:
        return set()
    from transformers.integrations.hub_kernels import get_attn_kernel_version
    from transformers.modeling_flash_attention_utils import (
        FLASH_ATTN_KERNEL_DEVICES,
        FLASH_ATTN_KERNEL_FALLBACK,
    )
    from transformers.utils.generic import is_flash_attention_requested

    asked = [
        a
        for a in attention
        if is_flash_attention_requested(requested_attention_implementation=a)
        and a not in compatible
    ]
    if not asked:
        return set()
    found = set()
    for device in devices:
        supported = [
            impl
            for impl in compatible
            if device
            in FLASH_ATTN_KERNEL_DEVICES.get(FLASH_ATTN_KERNEL_FALLBACK.get(impl, impl), (device,))
        ]
        chosen = (supported or compatible)[0]
        repo = FLASH_ATTN_KERNEL_FALLBACK.get(chosen, chosen)
        if "/" not in repo:
            continue
        repo, _, revision = repo.partition("@")
        version = None if revision else get_attn_kernel_version(repo)
        site = f"{model_class.__name__}._compatible_flash_implementations"
        found |= {
            LayerKernel("attention", repo, version, revision or None, device, mode, site)
            for mode in MODES
        }
    return found


def _model_class(config: Any) -> Any:
    """The class `from_pretrained` builds for `config`: its first architecture, else the causal-LM
    auto class."""
    import transformers

    for name in getattr(config, "architectures", None) or ():
        cls = getattr(transformers, name, None)
        if isinstance(cls, type):
            return cls
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM._model_mapping[type(config)]


def _meta_model(name: str, cls: Any, config: Any) -> Any:
    """The model built from its config on the meta device (no weights; capped layers)."""
    import torch

    try:
        with torch.device("meta"):
            return cls._from_config(config, attn_implementation="eager")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError) as error:
        raise _unbuildable(name, error) from None


def discover(
    name: str,
    devices: Iterable[str],
    root: Path,
    attention: Iterable[str] = (),
    capabilities: dict[str, tuple[int, ...]] | None = None,
) -> tuple[ModelKernels, str | None]:
    """Every kernel the installed Transformers loads for model `name` on `devices` (see the module
    docstring), and the Hub kernel its config's `attn_implementation` names, if any."""
    devices = sorted(set(devices))
    config = read_config(name, _config_file(name, root))
    transformers_root = _transformers_root()
    if config.remote_code:
        files = _remote_sources(name, config)
        found = _as_kernels(_calls(files, config.directory), "remote code", devices)
        architectures = config.data.get("architectures") or ["remote code"]
        return ModelKernels(
            name, architectures[0], tuple(sorted(found, key=order))
        ), config.attention
    built = build_config(name, config)
    try:
        cls = _model_class(built)
    except KeyError:
        raise ModelError(
            f"model {name}: no model class for its config ({type(built).__name__})",
            fix="add `architectures` to its config.json, naming the class you train",
        ) from None
    model = _meta_model(name, cls, built)
    found = set(mapped_kernels(model, devices, capabilities))
    start = _module_file(cls)
    if start is not None:
        model_files = walk([start], transformers_root, ("models",))
        gpu = [d for d in devices if d in GPU_DEVICES]
        found |= _as_kernels(_calls(model_files, transformers_root), "model code", gpu)
    found |= _quantization(built, devices, transformers_root)
    found |= _experts(config.data.get("experts_implementation"), devices, transformers_root)
    requested = [*attention, *([config.attention] if config.attention else [])]
    found |= _compatible_flash(cls, requested, [d for d in devices if d in GPU_DEVICES])
    return ModelKernels(name, cls.__name__, tuple(sorted(found, key=order))), config.attention
