"""One measured step of the GPU end-to-end run, in a fresh process (started by gpu/e2e.py).

    python gpu/child.py env
    python gpu/child.py targets
    python gpu/child.py load  --mode locked|unlocked
    python gpu/child.py train --mode locked|unlocked|sdpa-only [--compare-steps N] [--time-steps N] ...
    python gpu/child.py fail

Runs with the project directory as its working directory (so `kernlock.apply()` finds
kernels.lock there) and HF_ENDPOINT / HF_HOME pointing at the test Hub and a cache.
The last line of output is ``RESULT <json>``.
"""

from __future__ import annotations

import time

_PROCESS_START = time.perf_counter()

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

REPO = "kernels-community/flash-attn2"


def result(**data) -> None:
    print("RESULT " + json.dumps(data, default=str), flush=True)


def _version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _where(module_name: str) -> str | None:
    import importlib.util

    spec = importlib.util.find_spec(module_name)
    return spec.origin if spec else None


def cmd_env(args) -> None:
    import platform

    import torch

    info = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cxx11_abi": bool(torch.compiled_with_cxx11_abi()),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001
        info["triton"] = f"unavailable ({type(exc).__name__})"
    for name, module in (("transformers", "transformers"), ("kernels", "kernels"), ("huggingface_hub", "huggingface_hub"),
                         ("kernlock", "kernlock"), ("tokenizers", "tokenizers"), ("safetensors", "safetensors"),
                         ("httpx2", "httpx2"), ("tomlkit", "tomlkit"), ("numpy", "numpy")):
        info[name] = {"version": _version(name), "file": _where(module)}
    import transformers

    info["transformers_imported"] = transformers.__version__
    result(**info)


def cmd_targets(args) -> None:
    from kernlock._internal.compat.kernels_api import kernels_target, running_backend
    from kernlock._internal.host import current_target

    result(current_target=str(current_target()), kernels_target=str(kernels_target()), variant_str=running_backend())


def cmd_load(args) -> None:
    """Time to kernel ready, as benchmarks/load.py measures it: torch and kernels imported first."""
    import kernels
    import torch  # noqa: F401

    start = time.perf_counter()
    if args.mode == "locked":
        import kernlock

        kernlock.apply()
    module = kernels.get_kernel(REPO, version=4)
    ready = time.perf_counter()
    result(ready_ms=(ready - start) * 1000, since_process_start_ms=(ready - _PROCESS_START) * 1000,
           identity=module.KERNEL_IDENTITY)


def _kernel_module():
    from kernels import get_loaded_kernels

    for kernel in get_loaded_kernels():
        if getattr(kernel.module, "KERNEL_IDENTITY", {}).get("repo") == REPO:
            return kernel.module
    raise RuntimeError(f"{REPO} is not among the loaded kernels")


def _config(size: str):
    from transformers import LlamaConfig

    if size == "gpu":  # ~190M parameters; 4 x 1024 tokens a step
        return LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                           num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048), (4, 1024)
    return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=128, max_position_embeddings=128), (2, 48)


def _step(torch, model, optimizer, batch) -> float:
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def _rel(torch, a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def cmd_train(args) -> None:
    data: dict = {"mode": args.mode}
    if args.mode == "locked":
        import kernlock

        applied = kernlock.apply()
        data["applied"] = str(applied)
    import torch
    from transformers import AutoModelForCausalLM

    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    config, (batch_size, seqlen) = _config(args.size)
    data.update(device=str(device), dtype=args.dtype, batch=batch_size, seqlen=seqlen)

    def build(attn: str):
        # A config of its own per model: from_config records attn_implementation on the config,
        # and the attention layers read it at every call.
        torch.manual_seed(0)
        with device:
            return AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=attn, dtype=dtype)

    kernel_attn = "sdpa" if args.mode == "sdpa-only" else REPO
    model = build(kernel_attn)
    data["attn_implementation"] = model.config._attn_implementation
    data["parameters"] = sum(p.numel() for p in model.parameters())
    module = None
    if args.mode != "sdpa-only":
        module = _kernel_module()
        data["identity"] = module.KERNEL_IDENTITY
    generator = torch.Generator().manual_seed(1)
    batch = torch.randint(0, config.vocab_size, (batch_size, seqlen), generator=generator).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    if args.compare_steps and module is not None:
        reference = build("sdpa")
        reference.load_state_dict(model.state_dict())
        # A padded batch (right padding) takes Transformers' varlen path: compare logits on real tokens.
        mask = torch.ones_like(batch)
        mask[-1, seqlen * 3 // 4:] = 0
        before = dict(module.CALLS)
        with torch.no_grad():
            padded = model(input_ids=batch, attention_mask=mask).logits
            expected = reference(input_ids=batch, attention_mask=mask).logits
        keep = mask.bool()
        data["padded_logits_rel_err"] = _rel(torch, padded[keep], expected[keep])
        data["padded_calls"] = {k: module.CALLS[k] - before[k] for k in module.CALLS}
        del padded, expected
        optimizers = [torch.optim.AdamW(m.parameters(), lr=args.lr) for m in (model, reference)]
        before = dict(module.CALLS)
        losses = {"kernel": [], "sdpa": []}
        for _ in range(args.compare_steps):
            losses["kernel"].append(_step(torch, model, optimizers[0], batch))
            losses["sdpa"].append(_step(torch, reference, optimizers[1], batch))
        data["losses"] = losses
        data["loss_rel_diff"] = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses["kernel"], losses["sdpa"])]
        data["losses_finite"] = all(math.isfinite(x) for x in losses["kernel"] + losses["sdpa"])
        data["train_calls"] = {k: module.CALLS[k] - before[k] for k in module.CALLS}
        data["attn_implementations_after"] = [model.config._attn_implementation, reference.config._attn_implementation]
        del reference, optimizers
        if device.type == "cuda":
            torch.cuda.empty_cache()

    if args.time_steps:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        for _ in range(args.warmup):
            _step(torch, model, optimizer, batch)
        sync()
        times = []
        for _ in range(args.time_steps):
            start = time.perf_counter()
            _step(torch, model, optimizer, batch)
            sync()
            times.append((time.perf_counter() - start) * 1000)
        data["step_ms"] = times
        data["step_ms_median"] = statistics.median(times)
    if module is not None:
        data["calls_total"] = dict(module.CALLS)
    if device.type == "cuda":
        data["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    result(**data)


def cmd_fail(args) -> None:
    """apply() against a lock that does not cover this environment must raise before any model exists."""
    stage = "import kernlock"
    try:
        import kernlock

        stage = "apply"
        kernlock.apply()
        stage = "build model"
        import torch
        from transformers import AutoModelForCausalLM

        config, _ = _config("tiny")
        AutoModelForCausalLM.from_config(config, attn_implementation=REPO, dtype=torch.float32)
        stage = "done"
        result(stage=stage, raised=None)
    except Exception as exc:  # noqa: BLE001
        import kernlock

        result(stage=stage, raised=type(exc).__name__, is_no_variant_error=isinstance(exc, kernlock.NoVariantError),
               message=str(exc), transformers_imported="transformers" in sys.modules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env")
    sub.add_parser("targets")
    load = sub.add_parser("load")
    load.add_argument("--mode", choices=("locked", "unlocked"), required=True)
    train = sub.add_parser("train")
    train.add_argument("--mode", choices=("locked", "unlocked", "sdpa-only"), required=True)
    train.add_argument("--device", default="cuda")
    train.add_argument("--dtype", default="bfloat16")
    train.add_argument("--size", choices=("gpu", "tiny"), default="gpu")
    train.add_argument("--compare-steps", type=int, default=0)
    train.add_argument("--time-steps", type=int, default=0)
    train.add_argument("--warmup", type=int, default=3)
    train.add_argument("--lr", type=float, default=1e-4)
    sub.add_parser("fail")
    args = parser.parse_args()
    {"env": cmd_env, "targets": cmd_targets, "load": cmd_load, "train": cmd_train, "fail": cmd_fail}[args.command](args)


if __name__ == "__main__":
    main()
