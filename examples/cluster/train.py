"""A minimal DDP training job whose attention runs through a Hub kernel; it contains no kernlock code.

Run it under `kernlock run` so every rank binds kernels.lock and the ranks check each other:

    kernlock run -v -- torchrun --standalone --nproc-per-node 2 train.py                      # CPU, gloo
    kernlock run -v -- torchrun --nproc-per-node 8 train.py --backend nccl --device cuda      # GPUs
    kernlock run -v -- accelerate launch --config_file accelerate.yaml train.py --backend nccl --device cuda

Each rank prints its loss per step, a checksum of its parameters after the last step (equal on every
rank when DDP works) and the commit and variant of every Hub kernel it loaded.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoModelForCausalLM, LlamaConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gloo", help="torch.distributed backend: gloo or nccl")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--attn-implementation", default="kernels-community/flash-attn2")
    parser.add_argument("--model", help="a model directory (default: a tiny randomly initialised Llama)")
    return parser.parse_args()


def build_model(args: argparse.Namespace, dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)  # same initial weights on every rank
    if args.model:
        return AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=args.attn_implementation, dtype=dtype)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    return AutoModelForCausalLM.from_config(config, attn_implementation=args.attn_implementation, dtype=dtype)


def loaded_kernels() -> list[str]:
    """The Hub kernels this process loaded: repo, revision and build variant."""
    import sys

    if "kernels" not in sys.modules:
        return []
    import kernels

    found = []
    for loaded in kernels.get_loaded_kernels():
        origin = loaded.repo_info
        variant = next((d.name for d in Path(loaded.module.__file__).parents if (d / "metadata.json").is_file()), "?")
        found.append(f"{origin.repo_id if origin else loaded.metadata.name} {origin.revision if origin else '?'} [{variant}]")
    return found


def main() -> None:
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    dtype = getattr(torch, args.dtype)
    model = build_model(args, dtype).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if args.device == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    vocab = model.config.vocab_size
    for step in range(args.steps):
        generator = torch.Generator().manual_seed(step * world + rank)  # each rank its own batch
        input_ids = torch.randint(0, vocab, (2, 16), generator=generator).to(device)
        loss = ddp(input_ids, labels=input_ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().float().clone()
        dist.all_reduce(mean)
        print(f"rank {rank}/{world}: step {step} loss {loss.item():.4f} (mean over ranks {mean.item() / world:.4f})",
              flush=True)
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"rank {rank}/{world}: parameter checksum {checksum:.6f}", flush=True)
    for kernel in loaded_kernels():
        print(f"rank {rank}/{world}: kernel {kernel}", flush=True)
    # Free DDP before the process group. DDP's Reducer holds the group; when the Reducer is freed last (at the end
    # of main) it destroys the group with the GIL held, joining gloo's worker threads, and a worker still freeing
    # its last collective's thread-local state waits for that GIL: the job hangs at exit (torch 2.13, about one
    # run in twenty). Freed here, the group outlives the Reducer and destroy_process_group releases the GIL.
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
