"""A tiny training run whose attention kernel comes from the Hub, pinned by kernels.lock."""

import kernlock

applied = kernlock.apply()  # first: check the lock covers this machine, bind every kernel load
print(applied)

import torch  # noqa: E402
from kernels import get_loaded_kernels  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaConfig  # noqa: E402

torch.manual_seed(0)
config = LlamaConfig(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, vocab_size=128, max_position_embeddings=64,
)
model = AutoModelForCausalLM.from_config(config, attn_implementation="kernels-community/flash-attn2")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batch = torch.randint(0, config.vocab_size, (4, 32))
for step in range(3):
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step}: loss {loss.item():.4f}")

for kernel in get_loaded_kernels():
    identity = getattr(kernel.module, "KERNEL_IDENTITY", {})
    print(
        f"loaded {kernel.repo_info.repo_id} at commit {kernel.repo_info.revision} "
        f"variant {identity.get('variant')} (build {identity.get('build')!r})"
    )
