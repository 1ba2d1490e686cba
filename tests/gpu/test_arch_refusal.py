"""A locked build whose GPU archs do not cover this GPU is refused before it loads (issue 34).

`kernels-community/sm100-only@v1` ships CUDA builds for compute capability 10.0 only (B200). On an
H100 (9.0) `kernlock.apply()` refuses it with one line naming the build and this GPU: at the load
when CUDA is not yet initialised, at `apply()` itself when it is. Each case in a fresh interpreter.
"""

from __future__ import annotations

import pytest

import kernlock
from helpers import LockedProjectFactory
from scripts.harness import ok, python

pytestmark = pytest.mark.gpu

SM100 = "kernels-community/sm100-only"
LOAD = """
import kernels, kernlock
INIT
initialised = torch.cuda.is_initialized()
stage, refused = "apply", None
try:
    kernlock.apply()
    stage = "get_kernel"
    kernels.get_kernel("kernels-community/sm100-only", version=1)
    stage = "loaded"
except kernlock.GpuArchError as error:
    refused = str(error)
tiny.result(stage=stage, refused=refused, initialised=initialised,
            imported=any("sm100_only" in name for name in sys.modules),
            capability="%d.%d" % torch.cuda.get_device_capability())
"""


@pytest.mark.parametrize(("init", "stage"), [("", "get_kernel"), ("torch.cuda.init()", "apply")],
                         ids=["at-load", "at-apply"])
def test_a_10_0_only_build_is_refused_on_this_gpu_before_it_loads(
        locked_project: LockedProjectFactory, init: str, stage: str) -> None:
    import torch

    capability = "{}.{}".format(*torch.cuda.get_device_capability())
    if capability.startswith("10."):
        pytest.skip(f"CUDA capability {capability}: the 10.0 build supports this GPU")
    target = kernlock.current_target()
    project, lock = locked_project([f"{SM100}@v1"], targets=[str(target)])
    [entry] = lock.kernels
    variant = entry.variant_for(target)
    assert variant is not None and variant.archs == ("10.0",)
    result = ok(python(LOAD.replace("INIT", init), project))
    refused = result.pop("refused")
    assert result == {"stage": stage, "initialised": bool(init), "imported": False,
                      "capability": capability}
    assert refused is not None
    expected = (f"{SM100}@v1 {variant.name} at {entry.commit[:12]} is built for GPU archs 10.0, "
                f"which do not cover this GPU (CUDA capability {capability})")
    assert refused.splitlines()[0].startswith(expected), refused
