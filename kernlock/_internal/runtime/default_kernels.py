"""Transformers' default kernelize under the lock: an unlocked layer kernel keeps Transformers' own
forward.

Transformers 5.25 kernelizes every model it loads on a GPU unless told not to:
`from_pretrained` turns `use_kernels` on by default, and `model.train()`/`.eval()`
kernelize again. Under `kernlock.apply()`, a layer kernel that this default asks
for and the lock holds loads from the lock like any other. One the lock does not
hold must neither load nor reach the Hub, and must not stop the run: kernlock
answers kernels' load with `FileNotFoundError`, the one error on which kernels'
`KernelizeFallback.ALL` (what Transformers passes) keeps the layer's own forward,
and prints one line per repo naming the fix.

What the user asked for explicitly stays refused under strict mode, as before:
`use_kernels=True` written in the `from_pretrained` call or set on the model, a
`KernelConfig`, a mapping of the user's own (`use_kernel_mapping`,
`register_kernel_mapping` entries not in Transformers' table), `get_kernel`, and
`attn_implementation`. So either way the run is reproducible: the locked kernel
or Transformers' own code.

The patch wraps three Transformers names, listed in `PATCHED` (a contract test
checks they exist): `modeling_utils.kernelize` (what `from_pretrained`,
`set_use_kernels` and `train()` call), `PreTrainedModel.from_pretrained` and the
`PreTrainedModel.use_kernels` setter.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

PATCHED = (
    "transformers.modeling_utils.kernelize",
    "transformers.modeling_utils.PreTrainedModel.from_pretrained",
    "transformers.modeling_utils.PreTrainedModel.use_kernels",
)


class DefaultKernelize(NamedTuple):
    """A kernelize Transformers runs by default: the requests its own table makes, and the model's
    name."""

    requests: frozenset[tuple[str, int | None, str | None]]  # (repo, version, revision)
    model: str | None  # `config.name_or_path`: what the fix tells the user to declare


_DEFAULT: contextvars.ContextVar[DefaultKernelize | None] = contextvars.ContextVar(
    "kernlock_default_kernelize", default=None
)
_EXPLICIT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "kernlock_explicit_kernels", default=False
)
_EXPLICIT_ATTRIBUTE = "_kernlock_explicit_kernels"  # set on a model whose user asked for kernels


class NotLockedDefaultKernel(FileNotFoundError):
    """A layer kernel of Transformers' default kernelize that the lock does not hold: kernels keeps
    the layer."""


def default_kernelize() -> DefaultKernelize | None:
    """The default kernelize running in this context, if any."""
    return _DEFAULT.get()


def _explicit(model: Any, kernel_config: Any) -> bool:
    """Whether the user asked for this model's kernels: in the call, on the model, or with a
    `KernelConfig`."""
    return (
        _EXPLICIT.get()
        or kernel_config is not None
        or getattr(model, "kernel_config", None) is not None
        or bool(getattr(model, _EXPLICIT_ATTRIBUTE, False))
    )


def _device_type(model: Any) -> str:
    """The device type kernelize binds `model` for: the one Transformers recorded, else its
    weights'."""
    device = getattr(model, "_kernels_device", None)
    if device is None:
        try:
            device = next(model.parameters()).device
        except (StopIteration, AttributeError, TypeError):
            return "cpu"
    return str(getattr(device, "type", device)).split(":")[0]


def _record(model: Any) -> None:
    """Record which kernel each layer of `model` runs now (`layer_record`)."""
    from kernlock._internal.compat.model_kernels import mapped_repos
    from kernlock._internal.runtime import state
    from kernlock._internal.runtime.layer_record import record_layers

    asked = mapped_repos(_device_type(model), bool(getattr(model, "training", False)))
    record_layers(model, state.binding(), asked)
    if state.binding() is not None:
        from kernlock._internal.runtime.layer_record import layer_table
        from kernlock._internal.runtime.rank_hook import check_layers

        check_layers(layer_table())


def _wrap_kernelize(original: Callable[..., Any]) -> Callable[..., Any]:
    def kernelize(
        model: Any, mode: Any = None, kernel_config: Any = None, device_map: Any = None
    ) -> Any:
        if _explicit(model, kernel_config):
            result = original(model, mode=mode, kernel_config=kernel_config, device_map=device_map)
            _record(model)
            return result
        config = getattr(model, "config", None)
        from kernlock._internal.compat.transformers import kernelize_requests

        token = _DEFAULT.set(
            DefaultKernelize(kernelize_requests(), getattr(config, "name_or_path", None) or None)
        )
        try:
            result = original(model, mode=mode, kernel_config=kernel_config, device_map=device_map)
        finally:
            _DEFAULT.reset(token)
        _record(model)
        return result

    return functools.update_wrapper(kernelize, original)


def _wrap_from_pretrained(original: Callable[..., Any]) -> Callable[..., Any]:
    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("use_kernels") is not True:
            return original(cls, *args, **kwargs)
        token = _EXPLICIT.set(True)
        try:
            model = original(cls, *args, **kwargs)
        finally:
            _EXPLICIT.reset(token)
        # its later train()/eval() kernelizes are explicit too
        object.__setattr__(model, _EXPLICIT_ATTRIBUTE, True)
        return model

    return functools.update_wrapper(from_pretrained, original)


def patch_modeling_utils(module: ModuleType) -> None:
    """Wrap Transformers' kernelize entry points in `transformers.modeling_utils` (see the module
    docstring)."""
    module.kernelize = _wrap_kernelize(module.kernelize)  # type: ignore[attr-defined]
    pretrained = module.PreTrainedModel
    method = pretrained.__dict__["from_pretrained"]
    pretrained.from_pretrained = classmethod(_wrap_from_pretrained(method.__func__))
    prop = pretrained.__dict__["use_kernels"]

    def set_use_kernels(self: Any, value: bool) -> None:
        if value:
            object.__setattr__(self, _EXPLICIT_ATTRIBUTE, True)
        prop.fset(self, value)

    pretrained.use_kernels = property(prop.fget, set_use_kernels, prop.fdel, prop.__doc__)
