"""The fixture attention kernel's Triton forward (and its torch backward) against SDPA.

The module under test is built straight from ``fixtures/templates`` (the source every fixture
variant of kernels-community/flash-attn2 ships), so no Hub or lock is involved.

    python tests/gpu/check_triton.py --device cuda [--json FILE]     # a GPU: bf16, fp16
    TRITON_INTERPRET=1 python tests/gpu/check_triton.py --device cpu  # Triton's interpreter

For every case: fresh random inputs, the output buffer poisoned with NaN before the kernel runs
(an unwritten element stays NaN and fails), relative error ||out - ref|| / ||ref|| against
``scaled_dot_product_attention`` on float32 copies of the inputs (causal aligned bottom-right,
as flash-attn does). Exit status 1 when any case fails (error above the threshold, NaN,
unwritten output) or raises. Run by tests/gpu/test_triton_cuda.py and, under the interpreter,
tests/integration/test_triton_fixture.py.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FAIL_ABOVE = {"bfloat16": 2e-2, "float16": 1e-2, "float32": 1e-4}
Case = dict[str, Any]


def load_attention_module(root: Path = ROOT) -> ModuleType:
    """Import fixtures/templates/{common,attention}/*.py as one package (placeholders kept)."""
    templates = root / "fixtures" / "templates"
    package = Path(tempfile.mkdtemp(prefix="fa2-template-")) / "fa2_template"
    package.mkdir()
    for source in [*(templates / "common").glob("*.py"), *(templates / "attention").glob("*.py")]:
        shutil.copy(source, package / source.name)
    spec = importlib.util.spec_from_file_location("fa2_template", package / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fa2_template"] = module
    spec.loader.exec_module(module)
    return module


def reference(torch: Any, q: Any, k: Any, v: Any, causal: bool) -> Any:
    """SDPA in float32 on [b, s, h, d] tensors, causal bottom-right, GQA; keyless rows are 0."""
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
    out = torch.nn.functional.scaled_dot_product_attention(
        *(x.float().transpose(1, 2) for x in (q, k, v)),
        attn_mask=mask,
        enable_gqa=q.shape[2] != k.shape[2],
    ).transpose(1, 2)
    return out.nan_to_num(0.0)


def case(b: int, sq: int, sk: int, h: int, hkv: int, d: int, causal: bool, dtype: str) -> Case:
    """One dense case: batch, query and key lengths, heads, kv heads, head dim."""
    return {"b": b, "sq": sq, "sk": sk, "h": h, "hkv": hkv, "d": d, "causal": causal,
            "dtype": dtype}


def cases(device: str) -> list[Case]:
    """The dense cases: a grid on a GPU, small shapes under the interpreter (numpy is slow)."""
    if device == "cpu":
        return [
            case(*shape, dtype=dtype)
            for dtype in ("float32", "float16", "bfloat16")
            for shape in ((2, 64, 64, 2, 2, 64, False), (2, 150, 150, 4, 1, 64, True),
                          (1, 40, 200, 4, 2, 128, True), (1, 200, 40, 2, 1, 32, True),
                          (1, 70, 130, 2, 2, 48, False))
        ]
    grid = [
        case(batch, seqlen, seqlen, heads, heads // gqa, headdim, causal, "bfloat16")
        for i, (batch, seqlen) in enumerate(((2, 128), (4, 512), (2, 1000), (3, 1024), (2, 2048)))
        for headdim in (64, 128)
        for heads in (16 if (i + headdim // 64) % 2 else 8,)
        for gqa in (1, 4)
        for causal in (False, True)
    ]
    return grid + [  # seqlen_q != seqlen_k (rows past the keys see nothing), odd sizes, fp16
        case(2, 384, 1024, 16, 4, 128, True, "bfloat16"),
        case(2, 1024, 384, 8, 2, 64, True, "bfloat16"),
        case(2, 1, 777, 16, 4, 128, True, "bfloat16"),
        case(1, 300, 1030, 8, 8, 64, False, "bfloat16"),
        case(2, 1024, 1024, 16, 4, 96, True, "bfloat16"),
        case(2, 512, 512, 8, 2, 256, True, "bfloat16"),
        case(2, 1024, 1024, 16, 4, 128, True, "float16"),
        case(2, 1024, 1024, 16, 16, 64, False, "float16"),
    ]


def rel_err(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref||, in float32."""
    return float((out.detach().float() - ref).norm() / ref.norm().clamp_min(1e-30))


def patch_interpreter_bf16_dot() -> None:
    """Triton 3.6's interpreter multiplies bf16 operands of tl.dot as their raw uint16 bits;
    upcast them to float32 first, as the GPU's bf16 MMA does. Interpreter only."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def up(x: Any) -> Any:
        if x.dtype.scalar != tl.bfloat16:
            return x
        data = interpreter._convert_float(x.data, tl.bfloat16, tl.float32, None)
        return interpreter.TensorHandle(data.view(np.float32), tl.float32)

    def create_dot(self: Any, a: Any, b: Any, *rest: Any) -> Any:
        return original(self, up(a), up(b), *rest)

    builder.create_dot = create_dot


def patch_interpreter_scalar_index() -> None:
    """Triton 3.6's interpreter turns a scalar tensor into a loop bound with `int(array)`, which
    NumPy >= 2.4 refuses for shape-(1,) arrays; take the one element. Interpreter only."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor


def run_dense(torch: Any, mod: ModuleType, c: Case, device: str) -> dict[str, Any]:
    """One dense forward into a poisoned buffer."""
    dtype = getattr(torch, c["dtype"])
    q = torch.randn(c["b"], c["sq"], c["h"], c["d"], device=device, dtype=dtype)
    k, v = (torch.randn(c["b"], c["sk"], c["hkv"], c["d"], device=device, dtype=dtype)
            for _ in range(2))
    out = torch.full_like(q, float("nan"))
    mod._triton_forward(q, k, v, None, c["causal"], out=out)
    ref = reference(torch, q, k, v, c["causal"])
    return {"rel_err": rel_err(out, ref), "unwritten_or_nan": int(out.isnan().sum())}


def run_varlen(torch: Any, mod: ModuleType, device: str, dtype_name: str) -> dict[str, Any]:
    """Sequences of different lengths packed flat, against SDPA per sequence."""
    dtype = getattr(torch, dtype_name)
    if device == "cpu":
        lens_q, lens_k, (heads, kv_heads, headdim) = [37, 130, 64], [37, 200, 64], (4, 2, 64)
    else:
        lens_q, lens_k = [300, 1024, 77, 640], [300, 1100, 77, 640]
        heads, kv_heads, headdim = 16, 4, 128
    cu_q, cu_k = (
        torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
        for lens in (lens_q, lens_k)
    )
    q = torch.randn(sum(lens_q), heads, headdim, device=device, dtype=dtype)
    k, v = (torch.randn(sum(lens_k), kv_heads, headdim, device=device, dtype=dtype)
            for _ in range(2))
    out = torch.full_like(q, float("nan"))
    mod._triton_forward(q, k, v, None, True, cu_q, cu_k, max(lens_q), out=out)
    refs = []
    for i in range(len(lens_q)):
        sq, eq, sk, ek = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        refs.append(reference(torch, q[None, sq:eq], k[None, sk:ek], v[None, sk:ek], True)[0])
    return {"rel_err": rel_err(out, torch.cat(refs)), "unwritten_or_nan": int(out.isnan().sum())}


def run_backward(torch: Any, mod: ModuleType, device: str, dtype_name: str) -> dict[str, Any]:
    """Gradients through the kernel's autograd (Triton forward, torch backward) vs SDPA's."""
    dtype = getattr(torch, dtype_name)
    b, s, h, hkv, d = (1, 96, 4, 2, 64) if device == "cpu" else (2, 512, 16, 4, 128)
    leaves = [torch.randn(b, s, n, d, device=device, dtype=dtype, requires_grad=True)
              for n in (h, hkv, hkv)]
    grad_out = torch.randn(b, s, h, d, device=device, dtype=dtype)
    out = mod._TritonAttention.apply(*leaves, None, True, None, None, None)
    grads = torch.autograd.grad(out, leaves, grad_out)
    ref_leaves = [x.detach().float().requires_grad_() for x in leaves]
    ref = reference(torch, *ref_leaves, True)  # type: ignore[call-arg]  # the three leaves are q, k, v
    ref_grads = torch.autograd.grad(ref, ref_leaves, grad_out.float())
    errors = [rel_err(g, r) for g, r in zip(grads, ref_grads, strict=True)]
    return {"rel_err": max(errors), "forward_rel_err": rel_err(out, ref.detach()),
            "unwritten_or_nan": sum(int(g.isnan().sum()) for g in grads)}


def jobs(torch: Any, mod: ModuleType, device: str) -> list[tuple[str, Case, Callable[[], dict]]]:
    """Every check: (kind, case, run it)."""
    found: list[tuple[str, Case, Callable[[], dict]]] = [
        ("dense", c, functools.partial(run_dense, torch, mod, c, device)) for c in cases(device)
    ]
    for dtype in ("bfloat16", "float16", "float32") if device == "cpu" else ("bfloat16", "float16"):
        found.append(("varlen", {"dtype": dtype, "causal": True},
                      functools.partial(run_varlen, torch, mod, device, dtype)))
    for dtype in ("bfloat16", "float32") if device == "cpu" else ("bfloat16",):
        found.append(("backward", {"dtype": dtype, "causal": True},
                      functools.partial(run_backward, torch, mod, device, dtype)))
    return found


def check(device: str, seed: int = 1234) -> dict[str, Any]:
    """Run every case on `device`; the summary and each case's figures."""
    import torch
    import triton

    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 references
    torch.backends.cudnn.allow_tf32 = False
    mod = load_attention_module()
    if mod._triton_kernel() is None:
        raise RuntimeError(f"triton unavailable: {mod._TRITON.get('error')}")
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        patch_interpreter_bf16_dot()
        patch_interpreter_scalar_index()
    rows = []
    for kind, c, job in jobs(torch, mod, device):
        row = {"kind": kind, **c}
        try:
            row.update(job())
            limit = FAIL_ABOVE[c["dtype"]] * (2 if kind == "backward" else 1)
            row["ok"] = bool(row["unwritten_or_nan"] == 0 and math.isfinite(row["rel_err"])
                             and row["rel_err"] <= limit)
        except Exception as exc:  # report every case
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}",
                       traceback=traceback.format_exc(limit=-3))
        rows.append(row)
        shape = " ".join(f"{key}={c[key]}" for key in ("b", "sq", "sk", "h", "hkv", "d")
                         if key in c)
        figure = f"rel_err {row['rel_err']:.2e}" if "rel_err" in row else row.get("error", "")
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {kind:8s} {c['dtype']:8s} "
              f"causal={int(c['causal'])} {shape:42s} {figure}", flush=True)
    forward = [r["rel_err"] for r in rows if "rel_err" in r and r["kind"] != "backward"]
    backward = [r["rel_err"] for r in rows if "rel_err" in r and r["kind"] == "backward"]
    summary = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (TRITON_INTERPRET=1)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cases": len(rows),
        "failed": sum(not r["ok"] for r in rows),
        "max_rel_err_forward": max(forward, default=None),
        "max_rel_err_backward": max(backward, default=None),
    }
    return {"summary": summary, "cases": rows}


def main(argv: list[str] | None = None) -> int:
    """`--device cuda|cpu [--json FILE]`: exit 1 when a case failed."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--json", type=Path, help="write every case's figures here")
    args = parser.parse_args(argv)
    report = check(args.device)
    print(json.dumps(report["summary"]))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["summary"]["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
