"""A user's DDP training script, unchanged by kernlock: run it under `kernlock run -- torchrun …`.

    torchrun --nproc_per_node=N gpu/ddp_train.py [--backend nccl|gloo] [--device cuda|cpu] [--attn REPO|sdpa]

A bf16 (GPU) or fp32 (CPU) Llama, randomly initialised, with
`attn_implementation="kernels-community/flash-attn2"`, wrapped in DDP, trained for
`--steps` steps on the same batch per rank. It never imports kernlock: under
`kernlock run` the lock is applied by the start-up hook and the cross-rank identity
guard runs inside `init_process_group`. Each rank prints one line
``RESULT <json>``: rank, world size, backend, the loaded kernel's identity (commit,
variant) and call counters, losses, per-step times, and seconds from launch
(`$KL_LAUNCH_T0`, set by gpu/ddp.py) to the first step. `--guard-only` stops right
after `init_process_group` (no collective: how two NCCL ranks can share one GPU).
"""

from __future__ import annotations

import time

_START = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402


def emit(**data) -> None:
    sys.stdout.write("RESULT " + json.dumps(data, default=str) + "\n")  # one write: ranks share the pipe
    sys.stdout.flush()


def since_launch() -> float:
    return time.time() - float(os.environ.get("KL_LAUNCH_T0", _START))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="nccl")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--attn", default="kernels-community/flash-attn2")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--size", choices=("gpu", "tiny"), default="gpu")
    parser.add_argument("--guard-only", action="store_true")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
    started = time.perf_counter()
    dist.init_process_group(args.backend)
    init_ms = (time.perf_counter() - started) * 1000
    rank, world = dist.get_rank(), dist.get_world_size()
    info = {"rank": rank, "world": world, "backend": args.backend, "init_ms": init_ms,
            "lock_applied": "kernlock._internal.runtime.apply" in sys.modules, "lockfile": os.environ.get("KERNLOCK_LOCKFILE")}
    if args.guard_only:
        emit(**info, stage="init")
        dist.destroy_process_group()
        return 0

    from torch.nn.parallel import DistributedDataParallel
    from transformers import AutoModelForCausalLM, LlamaConfig

    if args.size == "gpu":  # ~190M parameters, 4 x 1024 tokens per rank and step
        config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
        batch_size, seqlen = 4, 1024
    else:
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, vocab_size=128, max_position_embeddings=128)
        batch_size, seqlen = 2, 48
    device = torch.device(args.device, torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(config, attn_implementation=args.attn, dtype=dtype)
    kernel = None
    if args.attn != "sdpa":
        from kernels import get_loaded_kernels

        kernel = next(k.module for k in get_loaded_kernels()
                      if getattr(k.module, "KERNEL_IDENTITY", {}).get("repo") == args.attn)
        info["identity"] = kernel.KERNEL_IDENTITY
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    batch = torch.randint(0, config.vocab_size, (batch_size, seqlen), generator=torch.Generator().manual_seed(1 + rank))
    batch = batch.to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    info["first_step_s"] = since_launch()
    losses, step_ms = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = ddp(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        step_ms.append((time.perf_counter() - t0) * 1000)
        losses.append(float(loss.detach()))
    info.update(losses=losses, losses_finite=all(math.isfinite(x) for x in losses), step_ms=step_ms,
                step_ms_median=statistics.median(step_ms[2:] or step_ms))
    if kernel is not None:
        info["calls"] = dict(kernel.CALLS)
    emit(**info)
    del ddp  # before the process group: see examples/cluster/train.py (a Reducer freed last can hang the exit)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
