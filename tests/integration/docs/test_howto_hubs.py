"""The newcomer's docs off the happy path (issue 46): docs/how-to/other-hubs.md (the bundled test Hub's script, the
private-repo error) and the tiny model recipe of docs/tutorial/quick-start.md, each run as written."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers import CPU, REPO_ROOT, make_project, markdown_blocks, run_bash, run_tiny_model_recipe
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub

PAGE = REPO_ROOT / "docs" / "how-to" / "other-hubs.md"


def text_block(containing: str) -> str:
    """The one ```text block of other-hubs.md that contains `containing`."""
    [block] = [b for b in markdown_blocks(PAGE.read_text(encoding="utf-8"), "text") if containing in b]
    return block


@pytest.mark.slow
def test_the_test_hub_script_runs_as_written(tmp_path: Path) -> None:
    """The script starts the test Hub, which prints the variables the page shows and its `--help` names; kernlock
    locks and verifies against it without writing the endpoint down; the script's trap stops the Hub."""
    [script] = markdown_blocks(PAGE.read_text(encoding="utf-8"), "bash")

    ran = run_bash(script, tmp_path)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "ok   fresh" in ran.stdout and "ok   coverage" in ran.stdout, ran.stdout
    printed = dict(line.split("=", 1) for line in (tmp_path / "test-hub.env").read_text().splitlines())
    shown = dict(line.split("=", 1) for line in text_block("HF_ENDPOINT=").splitlines())
    assert list(printed) == list(shown) == ["HF_ENDPOINT", "HF_HUB_DISABLE_XET", "KERNLOCK_SIGSTORE_TRUSTED_ROOT"]
    assert {k: v for k, v in printed.items() if k != "HF_ENDPOINT"} == {k: v for k, v in shown.items() if k != "HF_ENDPOINT"}
    assert (tmp_path / printed["KERNLOCK_SIGSTORE_TRUSTED_ROOT"]).is_file()
    helped = subprocess.run([sys.executable, "-m", "kernlock.testing.hub", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "prints the variables to export" in " ".join(helped.stdout.split())
    assert all(name in helped.stdout for name in printed), helped.stdout
    assert [k.spec for k in load_lockfile(tmp_path / "kernels.lock").kernels] == ["kernels-community/activation@v1"]
    for written in ("kernels.lock", "pyproject.toml"):
        assert "127.0.0.1" not in (tmp_path / written).read_text(), written  # the page: the endpoint is not written
    with pytest.raises(urllib.error.URLError):  # stopped by the trap
        urllib.request.urlopen(printed["HF_ENDPOINT"] + "/api/kernels/kernels-community/activation", timeout=5)


def test_the_private_repo_error_is_the_line_lock_prints(hub: TestHub, tmp_path: Path) -> None:
    """The page's error line for a repo that needs a token is what `kernlock lock` prints."""
    repo = "kernels-community/tagged"
    project = make_project(tmp_path / "p", kernels=[f"{repo}@v1"], targets=[CPU])
    hub.add_fault("respond", match="/refs", times=10, status=401, body={"error": "Access to this repo is restricted"})

    locked = run_bash("kernlock lock", project)

    assert locked.returncode == 1 and hub.fired["respond"] >= 1
    assert locked.stderr == text_block("access denied").replace("ORG/REPO", repo)


@pytest.mark.slow
def test_the_tutorials_tiny_model_recipe_makes_a_model_and_a_data_set(tmp_path: Path) -> None:
    """docs/tutorial/quick-start.md's recipe, run as written in an empty directory: `./model` loads with
    `from_pretrained` (a Llama of about 90,000 parameters whose tokenizer knows every character of the data), and
    `./data` holds the 8 rows."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_tiny_model_recipe(tmp_path)

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "model")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 85_000 < sum(p.numel() for p in model.parameters()) < 95_000
    assert (tmp_path / "model" / "model.safetensors").stat().st_size < 400_000  # "360 KB"
    rows = [json.loads(line) for line in (tmp_path / "data" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(set(row) == {"text"} for row in rows)
    ids = tokenizer(rows[0]["text"], return_tensors="pt").input_ids
    assert tokenizer.unk_token_id not in ids[0].tolist()
    assert torch.isfinite(model(ids, labels=ids).loss)
