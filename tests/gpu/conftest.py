"""The GPU tests (`pytest -m gpu tests/gpu`, scripts/gpu_run.sh on the lent GPU): skipped without
CUDA, run the most telling first, against the suite's test Hub (`hub`, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import kernlock
from helpers import FA2, LockedProject, cli, lock_project
from kernlock.testing.hub import TestHub

HERE = Path(__file__).resolve().parent
# Run order on the device, whose call is short: the model path and the arch refusal before the
# longer TRL run, the model families and the Triton grid.
ORDER = ("test_model_path.py", "test_arch_refusal.py", "test_flash_attn2.py", "test_trl_sft.py",
         "test_families.py", "test_triton_cuda.py")
# Seconds from the start of the run after which no further GPU test starts (each left reports
# it as skipped): the device call's own limit stops a run without its junit XML.
BUDGET_ENV = "KERNLOCK_GPU_TESTS_BUDGET"
STARTED = time.monotonic()


def _no_cuda() -> str | None:
    """Why the GPU tests cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA device"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the `gpu` tests without CUDA; order them by ORDER (the suite's own sort keeps it)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and (reason := _no_cuda()):
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=reason))
    rank = {name: i for i, name in enumerate(ORDER)}
    items.sort(key=lambda item: rank.get(item.path.name, -1) if item.path.parent == HERE else -1)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a GPU test that would start after $KERNLOCK_GPU_TESTS_BUDGET seconds."""
    budget = os.environ.get(BUDGET_ENV)
    if budget and time.monotonic() - STARTED > float(budget):
        pytest.skip(f"the GPU tests' time budget (${BUDGET_ENV}={budget} s) is spent")


def save_llama(path: Path) -> None:
    """A tiny random Llama (`tiny.gpu_config`) and its tokenizer, written with save_pretrained."""
    import torch
    from transformers import LlamaForCausalLM

    from scripts import tiny

    tiny.tokenizer(path)
    torch.manual_seed(0)
    LlamaForCausalLM(tiny.gpu_config()).save_pretrained(path)


@pytest.fixture
def declared_model(hub: TestHub, tmp_path: Path) -> LockedProject:
    """A project declaring a tiny Llama (`models = ["./model"]`) and flash-attn2, locked for this
    machine and synced (the cache is warm), with a tiny data set in `./data`."""
    root = tmp_path / "p"
    save_llama(root / "model")
    (root / "data").mkdir()
    lines = [f"kernel {i} is locked to a commit, a variant and file hashes." for i in range(32)]
    rows = "".join(json.dumps({"text": line}) + "\n" for line in lines)
    (root / "data" / "train.jsonl").write_text(rows)
    project = lock_project(root, [FA2], [str(kernlock.current_target())], '\nmodels = ["./model"]')
    synced = cli("sync", cwd=root)
    assert synced.exit_code == 0, synced.output
    return project
