"""One process of the GPU model-path run (issue 33), started by gpu/model_path.py.

    python gpu/model_child.py prepare DIR          # a tiny Llama + tokenizer (save_pretrained) and a data set
    python gpu/model_child.py train --load device_map|to_cuda [--use-kernels] [--steps N]
    python gpu/model_child.py rewrite              # Triton compiles the verified source, not a rewrite (issue 36)

`train` runs in a project directory: `kernlock.apply()` first (unless --no-apply), then
the user's real path, `from_pretrained("model", attn_implementation=..., device_map="cuda")`
or `from_pretrained(...)` followed by `.to("cuda").train()`, then AdamW steps. The last
line is ``RESULT <json>``: losses, the fixture kernels loaded (identity and call counters),
the layers kernels replaced, or the error that stopped it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = "kernels-community/flash-attn2"


def result(**data) -> None:
    print("RESULT " + json.dumps(data, default=str), flush=True)


def cmd_prepare(args) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    root = Path(args.dir)
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{chr(c): i + 3 for i, c in enumerate(range(32, 127))}}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.model_max_length = 64
    tok.save_pretrained(root / "model")
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=64, vocab_size=128, max_position_embeddings=128,
                         pad_token_id=0, eos_token_id=1, bos_token_id=1)
    LlamaForCausalLM(config).save_pretrained(root / "model")
    (root / "data").mkdir(exist_ok=True)
    lines = [f"kernel {i} is locked to a commit, a variant and file hashes." for i in range(64)]
    (root / "data" / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    result(model=str(root / "model"), data=str(root / "data"))


def _fixture_kernels() -> dict[str, dict]:
    """The fixture kernels imported in this process, by repo: identity and call counters."""
    found: dict[str, dict] = {}
    for module in list(sys.modules.values()):
        identity = getattr(module, "KERNEL_IDENTITY", None)
        if isinstance(identity, dict) and identity.get("repo"):
            entry = found.setdefault(identity["repo"], {"identity": identity, "calls": {}})
            for name, count in getattr(module, "CALLS", {}).items():
                entry["calls"][name] = entry["calls"].get(name, 0) + count
    return found


def cmd_train(args) -> None:
    stage = "apply"
    try:
        if not args.no_apply:
            import kernlock

            kernlock.apply()
        stage = "load"
        import torch
        from transformers import AutoModelForCausalLM

        dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
        kwargs = {"attn_implementation": args.attn, "dtype": dtype}
        if args.use_kernels:
            kwargs["use_kernels"] = True
        if args.load == "device_map":
            model = AutoModelForCausalLM.from_pretrained("model", device_map="cuda", **kwargs)
            model.train()
        else:
            model = AutoModelForCausalLM.from_pretrained("model", **kwargs)
            model = model.to("cuda").train()
        stage = "train"
        torch.manual_seed(1)
        batches = [torch.randint(3, 98, (4, 32), device="cuda") for _ in range(args.steps)]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for ids in batches:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        replaced = sorted({str(m.__dict__["_kernel_repo"]) for m in model.modules() if "_kernel_repo" in m.__dict__})
        result(ok=True, losses=losses, kernels=_fixture_kernels(), replaced=replaced,
               use_kernels=bool(getattr(model, "use_kernels", False)), device=str(next(model.parameters()).device))
    except Exception as error:  # noqa: BLE001 - the parent judges what was raised
        result(ok=False, stage=stage, raised=type(error).__name__, message=str(error)[:600],
               kernels=_fixture_kernels())


def cmd_rewrite(args) -> None:
    """Another user rewrites the verified flash-attn2 source after the import, before Triton's first launch."""
    import inspect

    import kernlock

    kernlock.apply()
    import torch
    from kernels import get_kernel

    kernel = get_kernel(REPO, version=4)
    path = kernel.__file__
    text = open(path).read()
    start = text.index("    def _flash_forward(")
    body = text.index("\n", text.index("):", start)) + 1
    with open(path, "w") as file:
        file.write(text[:body] + "    # INJECTED after kernlock verified this file\n" + text[body:])
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 256, 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = kernel.flash_attn_func(q, k, v, causal=True)  # the first launch: @triton.jit reads the source, compiles
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
    err = ((out.float() - ref.transpose(1, 2).float()).norm() / ref.float().norm()).item()
    jitted = kernel._triton_kernel()
    result(jit_source_injected="INJECTED" in "".join(jitted.raw_src),
           inspect_injected="INJECTED" in "".join(inspect.getsourcelines(jitted.fn)[0]),
           disk_injected="INJECTED" in open(path).read(), rel_err=err, triton_calls=dict(getattr(kernel, "CALLS", {})))


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    prepare = sub.add_parser("prepare")
    prepare.add_argument("dir")
    train = sub.add_parser("train")
    train.add_argument("--load", choices=("device_map", "to_cuda"), default="device_map")
    train.add_argument("--attn", default=REPO)
    train.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    train.add_argument("--steps", type=int, default=5)
    train.add_argument("--use-kernels", action="store_true", help="pass use_kernels=True (an explicit request)")
    train.add_argument("--no-apply", action="store_true")
    sub.add_parser("rewrite")
    args = parser.parse_args()
    {"prepare": cmd_prepare, "train": cmd_train, "rewrite": cmd_rewrite}[args.command](args)


if __name__ == "__main__":
    main()
