"""Check the fixture attention kernel's Triton forward (and its torch backward) against SDPA.

The module under test is built straight from ``fixtures/templates`` (the same source every
fixture variant ships), so this runs before any Hub or lock is involved.

    python gpu/check_triton.py --device cuda [--json FILE]     # on the GPU (bf16, fp16)
    TRITON_INTERPRET=1 python gpu/check_triton.py --device cpu  # Triton's interpreter, small shapes

For every case: fresh random inputs, the output buffer poisoned with NaN before the kernel
runs (an unwritten element stays NaN and fails), relative error ||out - ref|| / ||ref||
against ``scaled_dot_product_attention`` on float32 copies of the inputs (causal aligned
bottom-right, as flash-attn does). Exit status 1 when any case fails (error above the
threshold, NaN, unwritten output) or raises.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAIL_ABOVE = {"bfloat16": 2e-2, "float16": 1e-2, "float32": 1e-4}


def load_attention_module(root: Path = ROOT):
    """Import fixtures/templates/{common,attention}/*.py as one package (placeholders left as they are)."""
    templates = root / "fixtures" / "templates"
    package = Path(tempfile.mkdtemp(prefix="fa2-template-")) / "fa2_template"
    package.mkdir()
    for source in [*(templates / "common").glob("*.py"), *(templates / "attention").glob("*.py")]:
        shutil.copy(source, package / source.name)
    spec = importlib.util.spec_from_file_location("fa2_template", package / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fa2_template"] = module
    spec.loader.exec_module(module)
    return module


def reference(torch, q, k, v, causal, scale=None):
    """SDPA in float32 on [b, s, h, d] tensors, causal aligned bottom-right, GQA; rows with no key are 0."""
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
    out = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
        attn_mask=mask, scale=scale, enable_gqa=q.shape[2] != k.shape[2],
    ).transpose(1, 2)
    return out.nan_to_num(0.0)


def cases(device: str) -> list[dict]:
    """(batch, seqlen_q, seqlen_k, heads, kv heads, head dim, causal) combinations."""
    found = []
    if device == "cuda":
        shapes = [(2, 128), (4, 512), (2, 1000), (3, 1024), (2, 2048)]
        for i, (batch, seqlen) in enumerate(shapes):
            for headdim in (64, 128):
                for gqa in (1, 4):
                    for causal in (False, True):
                        heads = 16 if (i + headdim // 64) % 2 else 8
                        found.append(dict(b=batch, sq=seqlen, sk=seqlen, h=heads, hkv=heads // gqa, d=headdim,
                                          causal=causal, dtype="bfloat16"))
        extra = [  # seqlen_q != seqlen_k (bottom-right causal; rows past the keys see nothing), odd sizes
            dict(b=2, sq=384, sk=1024, h=16, hkv=4, d=128, causal=True, dtype="bfloat16"),
            dict(b=2, sq=1024, sk=384, h=8, hkv=2, d=64, causal=True, dtype="bfloat16"),
            dict(b=2, sq=1, sk=777, h=16, hkv=4, d=128, causal=True, dtype="bfloat16"),
            dict(b=1, sq=300, sk=1030, h=8, hkv=8, d=64, causal=False, dtype="bfloat16"),
            dict(b=2, sq=1024, sk=1024, h=16, hkv=4, d=96, causal=True, dtype="bfloat16"),
            dict(b=2, sq=512, sk=512, h=8, hkv=2, d=256, causal=True, dtype="bfloat16"),
            dict(b=2, sq=1024, sk=1024, h=16, hkv=4, d=128, causal=True, dtype="float16"),
            dict(b=2, sq=1024, sk=1024, h=16, hkv=16, d=64, causal=False, dtype="float16"),
        ]
        return found + extra
    # Triton's interpreter runs every program in numpy: small shapes only.
    for dtype in ("float32", "float16", "bfloat16"):
        found += [
            dict(b=2, sq=64, sk=64, h=2, hkv=2, d=64, causal=False, dtype=dtype),
            dict(b=2, sq=150, sk=150, h=4, hkv=1, d=64, causal=True, dtype=dtype),
            dict(b=1, sq=40, sk=200, h=4, hkv=2, d=128, causal=True, dtype=dtype),
            dict(b=1, sq=200, sk=40, h=2, hkv=1, d=32, causal=True, dtype=dtype),
            dict(b=1, sq=70, sk=130, h=2, hkv=2, d=48, causal=False, dtype=dtype),
        ]
    return found


def rel_err(torch, out, ref) -> float:
    return float((out.detach().float() - ref).norm() / ref.norm().clamp_min(1e-30))


def patch_interpreter_bf16_dot() -> None:
    """Triton 3.6's interpreter multiplies bf16 operands of tl.dot as their raw uint16 bits
    (garbage); upcast them to float32 first, as the GPU's bf16 MMA does. Interpreter only."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            def up(x):
                if x.dtype.scalar != tl.bfloat16:
                    return x
                data = interpreter._convert_float(x.data, tl.bfloat16, tl.float32, None).view(np.float32)
                return interpreter.TensorHandle(data, tl.float32)
            a, b = up(a), up(b)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot


def patch_interpreter_scalar_index() -> None:
    """Triton 3.6's interpreter turns a scalar tensor into a loop bound with `int(array)`, which
    NumPy >= 2.4 refuses for its shape-(1,) arrays; take the one element instead. Interpreter only."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor


def run_dense(torch, mod, case: dict, device: str) -> dict:
    dtype = getattr(torch, case["dtype"])
    q = torch.randn(case["b"], case["sq"], case["h"], case["d"], device=device, dtype=dtype)
    k = torch.randn(case["b"], case["sk"], case["hkv"], case["d"], device=device, dtype=dtype)
    v = torch.randn(case["b"], case["sk"], case["hkv"], case["d"], device=device, dtype=dtype)
    out = torch.full_like(q, float("nan"))  # poison
    start = time.perf_counter()
    mod._triton_forward(q, k, v, None, case["causal"], out=out)
    if device == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    ref = reference(torch, q, k, v, case["causal"])
    unwritten = int(out.isnan().sum())
    return {"rel_err": rel_err(torch, out, ref), "unwritten_or_nan": unwritten, "ms_first_call": elapsed * 1000}


def run_varlen(torch, mod, device: str, dtype_name: str) -> dict:
    """Three sequences of different lengths packed flat, against SDPA per sequence."""
    dtype = getattr(torch, dtype_name)
    lens_q, lens_k = ([37, 130, 64], [37, 200, 64]) if device == "cpu" else ([300, 1024, 77, 640], [300, 1100, 77, 640])
    heads, kv_heads, headdim = (4, 2, 64) if device == "cpu" else (16, 4, 128)
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device=device)
    q = torch.randn(sum(lens_q), heads, headdim, device=device, dtype=dtype)
    k = torch.randn(sum(lens_k), kv_heads, headdim, device=device, dtype=dtype)
    v = torch.randn(sum(lens_k), kv_heads, headdim, device=device, dtype=dtype)
    out = torch.full_like(q, float("nan"))
    mod._triton_forward(q, k, v, None, True, cu_q, cu_k, max(lens_q), out=out)
    refs = []
    for i in range(len(lens_q)):
        sq, eq, sk, ek = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        refs.append(reference(torch, q[None, sq:eq], k[None, sk:ek], v[None, sk:ek], True)[0])
    ref = torch.cat(refs)
    return {"rel_err": rel_err(torch, out, ref), "unwritten_or_nan": int(out.isnan().sum())}


def run_backward(torch, mod, device: str, dtype_name: str) -> dict:
    """Gradients through flash_attn_func's autograd path (Triton forward, torch backward) vs SDPA's."""
    dtype = getattr(torch, dtype_name)
    b, s, h, hkv, d = (1, 96, 4, 2, 64) if device == "cpu" else (2, 512, 16, 4, 128)
    leaves = [torch.randn(b, s, n, d, device=device, dtype=dtype, requires_grad=True) for n in (h, hkv, hkv)]
    grad_out = torch.randn(b, s, h, d, device=device, dtype=dtype)
    out = mod._TritonAttention.apply(*leaves, None, True, None, None, None)
    grads = torch.autograd.grad(out, leaves, grad_out)
    ref_leaves = [x.detach().float().requires_grad_() for x in leaves]
    ref = reference(torch, *ref_leaves, True)
    ref_grads = torch.autograd.grad(ref, ref_leaves, grad_out.float())
    errs = {name: rel_err(torch, g, r) for name, g, r in zip(("dq", "dk", "dv"), grads, ref_grads)}
    return {"rel_err": max(errs.values()), **{f"rel_err_{n}": e for n, e in errs.items()},
            "forward_rel_err": rel_err(torch, out, ref.detach()), "unwritten_or_nan": sum(int(g.isnan().sum()) for g in grads)}


def bench(torch, triton, mod) -> list[dict]:
    """Forward time, Triton kernel vs SDPA (bf16, median of do_bench), for context; not a pass/fail check."""
    rows = []
    for b, s, h, hkv, d, causal in ((4, 2048, 16, 4, 128, True), (4, 1024, 16, 4, 64, True), (4, 2048, 16, 16, 128, False)):
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        triton_ms = triton.testing.do_bench(lambda: mod._triton_forward(q, k, v, None, causal), return_mode="median")
        sdpa_ms = triton.testing.do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, is_causal=causal, enable_gqa=h != hkv), return_mode="median")
        rows.append({"shape": f"b={b} s={s} h={h} hkv={hkv} d={d} causal={int(causal)}", "triton_ms": triton_ms,
                     "sdpa_ms": sdpa_ms, "triton_tflops": flops / triton_ms / 1e9, "sdpa_tflops": flops / sdpa_ms / 1e9})
        print(f"bench {rows[-1]['shape']}: triton {triton_ms:.3f} ms ({rows[-1]['triton_tflops']:.0f} TFLOP/s), "
              f"sdpa {sdpa_ms:.3f} ms ({rows[-1]['sdpa_tflops']:.0f} TFLOP/s)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--json", type=Path, help="write every case's figures here")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 references
    torch.backends.cudnn.allow_tf32 = False
    mod = load_attention_module()
    if mod._triton_kernel() is None:
        print(f"triton unavailable: {mod._TRITON.get('error')}")
        return 1
    import triton

    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        patch_interpreter_bf16_dot()
        patch_interpreter_scalar_index()
    rows = []
    jobs = [("dense", c, lambda c=c: run_dense(torch, mod, c, args.device)) for c in cases(args.device)]
    for dtype in ("bfloat16", "float16", "float32") if args.device == "cpu" else ("bfloat16", "float16"):
        jobs.append(("varlen", {"dtype": dtype, "causal": True}, lambda d=dtype: run_varlen(torch, mod, args.device, d)))
    for dtype in ("bfloat16", "float32") if args.device == "cpu" else ("bfloat16",):
        jobs.append(("backward", {"dtype": dtype, "causal": True}, lambda d=dtype: run_backward(torch, mod, args.device, d)))
    for kind, case, job in jobs:
        row = {"kind": kind, **case}
        try:
            row.update(job())
            limit = FAIL_ABOVE[case["dtype"]] * (2 if kind == "backward" else 1)
            row["ok"] = bool(row["unwritten_or_nan"] == 0 and math.isfinite(row["rel_err"]) and row["rel_err"] <= limit)
        except Exception as exc:  # keep going: report every case
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=-3))
        rows.append(row)
        shape = " ".join(f"{key}={case[key]}" for key in ("b", "sq", "sk", "h", "hkv", "d") if key in case)
        figure = f"rel_err {row['rel_err']:.2e}" if "rel_err" in row else row.get("error", "")
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {kind:8s} {case['dtype']:8s} causal={int(case['causal'])} {shape:42s} {figure}",
              flush=True)
    errors = [r["rel_err"] for r in rows if "rel_err" in r and r["kind"] != "backward"]
    summary = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu (TRITON_INTERPRET=1)",
        "torch": torch.__version__, "triton": triton.__version__,
        "cases": len(rows), "failed": sum(not r["ok"] for r in rows),
        "max_rel_err_forward": max(errors) if errors else None,
        "max_rel_err_backward": max((r["rel_err"] for r in rows if r["kind"] == "backward" and "rel_err" in r), default=None),
    }
    if args.device == "cuda":
        try:
            summary["bench"] = bench(torch, triton, mod)
        except Exception as exc:  # context only: never fails the check
            summary["bench"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "cases": rows}, indent=2) + "\n")
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
