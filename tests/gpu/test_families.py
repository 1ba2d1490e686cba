"""What Transformers asks the Hub for, per model family, on a real GPU without kernlock, against
what `kernlock lock` locks for the same config (issue 43); and `lock --record` of a script whose
own code calls `get_kernel`.

For each family of tests/scripts/families.py a tiny random model is saved with `save_pretrained`
(a quantized family keeps its `quantization_config` in `config.json`, as checkpoints ship); a fresh
interpreter, with no kernlock, loads it with `from_pretrained(path, device_map="cuda")`, trains one
step and runs `generate`, and the kernel repos it requested are read off the test Hub's log. Every
one of them must be in the lock `kernlock lock` writes for a project declaring that model for this
GPU's target. The fixture kernels are stand-ins, so a family may stop after its requests (a layer
the stand-in lacks); what it requested is what is compared, and how far it got is recorded.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import kernlock
from helpers import cli
from kernlock import load_lockfile
from kernlock.testing.hub import TestHub
from scripts import families
from scripts.harness import CLIENT_CHATTER, run, run_within

pytestmark = pytest.mark.gpu

LOAD = r'''
import json, sys, torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM
out, stage = {"ok": False}, "from_pretrained"
try:
    config = AutoConfig.from_pretrained("model")
    masked = any(a.endswith("MaskedLM") for a in config.architectures or [])
    auto = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    model = auto.from_pretrained("model", device_map="cuda", dtype=torch.bfloat16)
    stage = "train"
    model.train()
    ids = torch.randint(3, 100, (2, 16), device="cuda")
    model(input_ids=ids, labels=ids).loss.backward()
    stage = "generate"
    model.eval()
    if not masked:
        model.generate(ids[:, :8], max_new_tokens=2, do_sample=False)
    out["ok"] = True
except Exception as error:
    out.update(stage=stage, error=f"{type(error).__name__}: {str(error)[:200]}")
print("RESULT " + json.dumps(out))
'''

RECORD_SCRIPT = '''
import torch
from kernels import get_kernel
kernel = get_kernel("kernels-community/universal", version=1)
print("sum", kernel.add(torch.ones(2, device="cuda"), torch.ones(2, device="cuda")).tolist())
'''


def save_family(name: str, model: Path) -> None:
    """A tiny random bf16 model of `name`, saved (a quantized one keeps its quantization_config)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    families.save(model.parent / "configs", only=name)
    config_path = model.parent / "configs" / name / "config.json"
    saved = json.loads(config_path.read_text())
    quant = saved.pop("quantization_config", None)
    config_path.write_text(json.dumps(saved))
    config = AutoConfig.from_pretrained(config_path.parent)
    masked = any(a.endswith("MaskedLM") for a in config.architectures or [])
    torch.manual_seed(0)
    auto = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    auto.from_config(config, dtype=torch.bfloat16).save_pretrained(model)
    if quant is not None:
        data = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**data, "quantization_config": quant}))


def requested_repos(hub: TestHub) -> list[str]:
    """The kernel repos (those the test Hub serves) its request log names."""
    paths = [path for _, path in hub.log if not path.startswith(CLIENT_CHATTER)]
    return sorted({repo for repo in hub.repos for path in paths
                   if re.search(rf"(^|/){re.escape(repo)}(/|$|\?)", path)})


def project(root: Path, extra: str = "") -> Path:
    """A project locking for this GPU's target (`extra` appended to `[tool.kernlock]`)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{root.name}"\nversion = "0"\n\n[tool.kernlock]\n'
        f'targets = ["{kernlock.current_target()}"]\n{extra}')
    return root


@pytest.mark.parametrize("name", sorted(families.families()))
def test_every_repo_a_family_requests_on_cuda_is_locked(
        hub: TestHub, tmp_path: Path, name: str,
        record_property: Callable[[str, object], None]) -> None:
    root = project(tmp_path / name.replace("_", "-"), 'models = ["./model"]\n')
    save_family(name, root / "model")
    hub.reset_counts()
    loaded = run_within(300, [sys.executable, "-c", LOAD], root)
    assert loaded.result is not None, loaded.stdout[-2000:] + loaded.stderr[-4000:]
    requested = requested_repos(hub)
    locked = cli("lock", cwd=root)
    assert locked.exit_code == 0, locked.output
    in_lock = sorted({k.repo for k in load_lockfile(root / "kernels.lock").kernels})
    record_property("requested", requested)
    record_property("locked", in_lock)
    record_property("run", "trained+generate" if loaded.result["ok"]
                    else f"{loaded.result['stage']}: {loaded.result['error']}")
    assert set(requested) <= set(in_lock), {"requested": requested, "locked": in_lock}


def test_lock_record_locks_a_kernel_the_projects_code_loads_and_run_then_asks_for_nothing(
        hub: TestHub, tmp_path: Path) -> None:
    root = project(tmp_path / "record")
    (root / "train.py").write_text(RECORD_SCRIPT)
    recorded = run_within(300, [sys.executable, "-m", "kernlock", "lock", "--record", "--",
                                 sys.executable, "train.py"], root)
    assert recorded.returncode == 0, recorded.stdout[-2000:] + recorded.stderr[-4000:]
    assert 'source = "recorded"' in (root / "kernels.lock").read_text()
    hub.reset_counts()
    again = run([sys.executable, "-m", "kernlock", "run", "--", sys.executable, "train.py"], root)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-4000:]
    assert "sum [2.0, 2.0]" in again.stdout
    assert [path for _, path in hub.log if not path.startswith(CLIENT_CHATTER)] == []
