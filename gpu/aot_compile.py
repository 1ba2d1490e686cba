"""Compile the fixture's Triton attention kernel for sm_90 (H100/H200) without a GPU.

Triton's wheel carries LLVM and ptxas, so the full compile (TTIR -> TTGIR -> LLVM -> PTX ->
cubin) runs on any x86-64 machine; this catches front-end and lowering errors before a GPU
lease is spent, and reports registers, stack (spills) and wgmma use per configuration.

    python gpu/aot_compile.py        # needs triton (e.g. a throwaway venv with triton==3.6.0)
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_triton import load_attention_module  # noqa: E402


def main() -> int:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    mod = load_attention_module()
    kernel = mod._triton_kernel()
    target = GPUTarget("cuda", 90, 32)
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    failed = 0
    for dtype, headdim, causal, varlen in itertools.product(("bf16", "fp16"), (64, 96, 128, 256), (False, True),
                                                             (False, True)):
        signature = {name: "i32" for name in kernel.arg_names}
        signature.update({n: f"*{dtype}" for n in ("Q", "K", "V", "O")})
        signature.update({n: "*i32" if varlen else f"*{dtype}" for n in ("CU_Q", "CU_K")})
        signature["qk_scale"] = "fp32"
        # The same choices as _triton_forward.
        block_m, block_n, warps = (128, 64, 4) if headdim <= 64 else (128, 32, 8) if headdim <= 128 else (64, 64, 8)
        constants = dict(HEAD_DIM=headdim, BLOCK_D=max(16, triton.next_power_of_2(headdim)), BLOCK_M=block_m,
                         BLOCK_N=block_n, CAUSAL=causal, VARLEN=varlen)
        signature.update({name: "constexpr" for name in constants})
        label = f"{dtype} d={headdim:3d} causal={int(causal)} varlen={int(varlen)}"
        try:
            compiled = triton.compile(ASTSource(kernel, signature, constants), target=target,
                                      options=dict(num_warps=warps, num_stages=2))
        except Exception as exc:  # noqa: BLE001
            failed += 1
            print(f"FAIL {label}: {type(exc).__name__}: {str(exc)[:2000]}")
            continue
        usage = sass = ""
        if cuobjdump.exists():
            with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                f.write(compiled.asm["cubin"])
            usage = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
            sass = subprocess.run([cuobjdump, "--dump-sass", f.name], capture_output=True, text=True).stdout
            os.unlink(f.name)
        resources = " ".join(part for line in usage.splitlines() if "REG:" in line
                             for part in line.split() if part.startswith(("REG:", "STACK:")))
        print(f"ok   {label}: shared {compiled.metadata.shared} B, {resources}, wgmma {sass.count('HGMMA')}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
