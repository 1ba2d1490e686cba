"""Device types: which kind of accelerator a target's backend runs on, in kernels' words."""

from __future__ import annotations

# kernels' device types (`kernels.Device(type=...)`) by target backend prefix; the CPU has none.
_DEVICE_TYPES = (("cu", "cuda"), ("rocm", "rocm"), ("xpu", "xpu"), ("metal", "mps"))


def device_type(backend: str) -> str | None:
    """kernels' device type for a target backend (`cu130` → `cuda`); None for a CPU backend, which
    has no device."""
    for prefix, name in _DEVICE_TYPES:
        if backend.startswith(prefix):
            return name
    return None
