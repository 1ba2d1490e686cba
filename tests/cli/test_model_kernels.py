"""The kernels Transformers 5.25 kernelizes by default on a GPU (issue 33), on the CPU: discovery, the lock, verify,
and the fallback rule under `apply()`.

A GPU is simulated where kernels asks for one: the model is kernelized for device type `cuda`, and kernels'
capability lookup answers 9.0. The real GPU path is tests/gpu/test_model_path.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, CUDA_130, FA2, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub
from scripts import tiny
from scripts.harness import python

LIGER = "kernels-community/liger-kernels"
ROTARY = "kernels-community/rotary"
ACTIVATION = "kernels-community/activation"


def _project(root: Path, targets: list[str], models: str = '\nmodels = ["./model"]') -> Path:
    project = make_project(root, kernels=[FA2], targets=targets, extra=models)
    tiny.model("sdpa").save_pretrained(project / "model")
    return project


def test_a_declared_llama_locks_the_layer_kernels_transformers_maps_on_gpu_targets_only(hub: TestHub,
                                                                                      tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130, CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    by_spec = {k.spec: k for k in lock.kernels}
    assert set(by_spec) == {FA2, f"{LIGER}@v4", f"{ROTARY}@v2", f"{ACTIVATION}@v1"}
    assert lock.inputs == (FA2,)  # what the model brings in follows the model, not the sources' specs
    for spec, layer, modes in ((f"{LIGER}@v4", "RMSNorm", "inference, training"),
                               (f"{ROTARY}@v2", "rotary_pos_emb", "inference, training"),
                               (f"{ACTIVATION}@v1", "SiLU", "inference")):
        entry = by_spec[spec]
        assert entry.devices == ("cuda",) and entry.used_by == (f"./model: {layer} (cuda: {modes})",)
        assert entry.variant_for(CUDA_130) is not None and entry.variant_for(CPU) is None  # no CPU build is needed
    assert by_spec[FA2].variant_for(CPU) is not None and by_spec[FA2].devices == ()
    [model] = lock.models
    import transformers

    assert (model.name, model.model_class, model.transformers) == ("./model", "LlamaForCausalLM", transformers.__version__)
    assert "RMSNorm -> kernels-community/liger-kernels@v4 (cuda: inference, training)" in model.layers
    verified = cli("verify", "--all-targets", cwd=project)
    assert verified.exit_code == 0, verified.output
    shown = cli("show", cwd=project).output
    assert f"{LIGER}@v4: ./model: RMSNorm (cuda: inference, training)" in shown and "(on cuda only)" in shown


def test_a_cpu_only_project_finds_nothing_and_imports_nothing_for_its_model(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CPU])
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    assert [k.spec for k in lock.kernels] == [FA2] and lock.models == () and lock.version == "1.0"
    assert cli("verify", cwd=project).exit_code == 0


def test_lock_model_records_it_and_scan_finds_models_in_code(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130, CPU], models="")
    (project / "train.py").write_text(
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"model = AutoModelForCausalLM.from_pretrained('./model', attn_implementation='{FA2}')\n"
        "tokenizer = AutoTokenizer.from_pretrained('./tok')\n"
        "placeholder = AutoModelForCausalLM.from_pretrained('m')\n"  # neither a model directory nor a Hub id
    )
    result = cli("lock", "--scan", "train.py", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    assert [m.name for m in lock.models] == ["./model"] and f"{LIGER}@v4" in {k.spec for k in lock.kernels}
    (project / "train.py").write_text(f"MODEL = 'x'\nattn_implementation = '{FA2}'\n")  # no model named any more
    stale = cli("verify", cwd=project)
    assert stale.exit_code == 1 and "model ./model is locked but no longer declared" in stale.output
    fixed = cli("lock", "--model", "./model", cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert 'models = ["./model"]' in (project / "pyproject.toml").read_text()
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 0, verified.output


def test_a_declared_model_that_cannot_be_built_is_one_line(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CUDA_130], extra='\nmodels = ["./missing"]')
    before = (project / "pyproject.toml").read_bytes()
    result = cli("lock", cwd=project)
    assert result.exit_code == 2
    assert result.output.startswith("kernlock: error: model ./missing: cannot build it from its config.json")
    assert not (project / "kernels.lock").exists() and (project / "pyproject.toml").read_bytes() == before


def _heavy_imports(stderr: str) -> list[str]:
    names = [line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")]
    return [n for n in names if n.split(".")[0] in ("torch", "transformers", "kernels")]


@pytest.mark.slow
def test_verify_with_models_imports_neither_torch_nor_transformers_and_flags_a_transformers_upgrade(
        hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130, CPU])
    assert cli("lock", cwd=project).exit_code == 0
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "kernlock", "verify", "--all-targets"], cwd=project,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _heavy_imports(run.stderr) == []
    # The lock was made by another Transformers whose kernelize mapping differed: what an upgrade looks like.
    lockfile = project / "kernels.lock"
    text = lockfile.read_text()
    digest = re.search(r'kernel-mapping = "([0-9a-f]{64})"', text)
    assert digest is not None
    lockfile.write_text(text.replace(digest[1], "0" * 64).replace('transformers = "5.25.0"\nkernel', 'transformers = "5.24.0"\nkernel'))
    stale = subprocess.run([sys.executable, "-X", "importtime", "-m", "kernlock", "verify", "--json"], cwd=project,
                           capture_output=True, text=True)
    assert stale.returncode == 1 and _heavy_imports(stale.stderr) == []
    [fresh] = [c for c in json.loads(stale.stdout)["checks"] if c["name"] == "fresh"]
    [problem] = fresh["problems"]
    assert problem["message"] == ("model ./model: transformers 5.25.0 kernelizes with another mapping than "
                                  "transformers 5.24.0, which found the kernels the lock holds for it")
    fix = subprocess.run(problem["fix"].split(), cwd=project, capture_output=True, text=True,
                         env={**__import__("os").environ, "PATH": f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}"})
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert cli("verify", cwd=project).exit_code == 0


FALLBACK_SCRIPT = """
import kernlock
kernlock.apply()
from kernels import get_kernel
from kernels._internals.layer import repos
from transformers import AutoModelForCausalLM
repos._find_capability = lambda device_index=None: 90  # kernels asks the GPU for its capability; this is the CPU
reference = AutoModelForCausalLM.from_pretrained("model", use_kernels=False)
model = AutoModelForCausalLM.from_pretrained("model")
model._kernels_device = "cuda"  # what from_pretrained(device_map="cuda") or .to("cuda") records
model.train()  # Transformers kernelizes again for training, on cuda: the default mapping's liger-kernels and rotary
ids = torch.randint(3, 100, (2, 12))
same = torch.equal(model(ids).logits, reference(ids).logits)
replaced = sorted(str(m.__dict__["_kernel_repo"]) for m in model.modules() if "_kernel_repo" in m.__dict__)
model.eval(); model.train()  # kernelizes twice more: still one line per repo
explicit = []
try:
    get_kernel("kernels-community/liger-kernels", version=4)
except Exception as error:
    explicit.append([type(error).__name__, str(error)])
asked = AutoModelForCausalLM.from_pretrained("model", use_kernels=True)
asked._kernels_device = "cuda"
try:
    asked.train()
except Exception as error:
    explicit.append([type(error).__name__, str(error)])
tiny.result(same=same, replaced=replaced, explicit=explicit, loaded=sorted(tiny.loaded_kernels()))
"""


@pytest.mark.slow
def test_unlocked_default_layer_kernels_keep_transformers_forward_with_one_line_and_no_request(
        hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CPU], models="")
    assert cli("lock", cwd=project).exit_code == 0
    hub.reset_counts()
    done = python(FALLBACK_SCRIPT, project)
    assert done.returncode == 0, done.stdout + done.stderr
    result = done.result
    assert result["same"] is True and result["replaced"] == [] and result["loaded"] == []
    lines = [line for line in done.stderr.splitlines() if line.startswith("kernlock: Transformers kernelizes")]
    assert sorted(lines) == sorted(
        f"kernlock: Transformers kernelizes model with {spec} by default, and {project.resolve() / 'kernels.lock'} "
        "does not hold it: its layers keep Transformers' own forward; fix: `kernlock lock --model model` locks what "
        "the model loads" for spec in (f"{LIGER}@v4", f"{ROTARY}@v2", f"{ACTIVATION}@v1"))  # eval(): SiLU too
    assert not [path for _, path in hub.log if "liger" in path or "rotary" in path or "activation" in path]
    # Asked for by the user, the same kernels are refused as any unlocked load.
    [(direct, direct_message), (kind, message)] = result["explicit"]
    assert direct == kind == "UnlockedKernelError"
    assert direct_message.startswith(f"kernel {LIGER} (version 4) is not in ")
    assert re.match(rf"kernel ({LIGER}|{ROTARY}) \(version \d\) is not in ", message), message


@pytest.mark.slow
def test_locked_default_layer_kernels_are_served_from_the_lock(hub: TestHub, tmp_path: Path) -> None:
    """With the model declared, the same kernelize binds the layers to the locked commit (a CUDA target simulated)."""
    project = _project(tmp_path / "p", [CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    script = FALLBACK_SCRIPT.split("explicit = []")[0] + (
        "tiny.result(same=same, replaced=replaced, kernels={name: [m.KERNEL_IDENTITY, m.CALLS] "
        "for name, m in tiny.loaded_kernels().items()})\n")
    script = script.replace("reference = AutoModelForCausalLM.from_pretrained(\"model\", use_kernels=False)",
                            "reference = AutoModelForCausalLM.from_pretrained(\"model\", use_kernels=False)\n"
                            "import kernels._internals.validate as validate\n"
                            "validate.ArchValidator.validate_metadata = lambda self, **kw: None  # no GPU to ask\n")
    done = python(script, project, KERNLOCK_TARGET=CUDA_130)
    assert done.returncode == 0, done.stdout + done.stderr
    identities = {identity["repo"]: (identity["commit"], identity["variant"], calls)
                  for identity, calls in done.result["kernels"].values()}
    for repo, counter in ((LIGER, "rms_norm"), (ROTARY, "apply_rotary")):
        [entry] = lock.for_repo(repo)
        commit, variant, calls = identities[repo]
        assert (commit, variant) == (entry.commit, entry.variant_for(CUDA_130).name) and calls[counter] > 0
    assert done.result["same"] is True  # the fixture kernels compute what Transformers' forward computes
    assert set(done.result["replaced"]) == {f"`{LIGER}` (revision: version 4), layer `LigerRMSNorm`"}
    assert "kernlock: Transformers kernelizes" not in done.stderr


@pytest.mark.parametrize("value", ["5", ["x", 1]])
def test_models_must_be_a_list_of_strings(tmp_path: Path, value: object) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2], extra=f"\nmodels = {json.dumps(value)}")
    result = cli("lock", cwd=project)
    assert result.exit_code == 2 and "[tool.kernlock] models must be a list of strings" in result.output


@pytest.mark.slow
def test_the_default_kernelize_lines_fix_locks_the_model_and_then_the_lock_serves_it(hub: TestHub, tmp_path: Path) -> None:
    """The fix the fallback line prints, run as printed: it records the model and adds its kernels, nothing else;
    on the GPU target the same kernelize then loads them from the lock (no fallback line)."""
    project = _project(tmp_path / "p", [CPU, CUDA_130], models="")
    assert cli("lock", cwd=project).exit_code == 0
    before_lock = load_lockfile(project / "kernels.lock")
    before_pyproject = (project / "pyproject.toml").read_text()
    done = python(FALLBACK_SCRIPT.split("explicit = []")[0] + "tiny.result(same=same)\n", project)
    assert done.returncode == 0, done.stdout + done.stderr
    [line, *_] = [line for line in done.stderr.splitlines() if line.startswith("kernlock: Transformers kernelizes")]
    fix = line.split("fix: `", 1)[1].split("`", 1)[0]
    assert fix == "kernlock lock --model model"
    ran = subprocess.run(fix.split(), cwd=project, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    import difflib

    changed = [line for line in difflib.ndiff(before_pyproject.splitlines(), (project / "pyproject.toml").read_text()
                                              .splitlines()) if line[:1] in "+-"]
    assert changed == ['+ models = ["model"]'], changed  # the model recorded, nothing else
    after = load_lockfile(project / "kernels.lock")
    assert [k for k in after.kernels if not k.used_by] == list(before_lock.kernels)  # flash-attn2 untouched
    assert {k.spec for k in after.kernels if k.used_by} == {f"{LIGER}@v4", f"{ROTARY}@v2", f"{ACTIVATION}@v1"}
    assert [m.name for m in after.models] == ["./model"]
    script = FALLBACK_SCRIPT.split("explicit = []")[0].replace(
        'reference = AutoModelForCausalLM.from_pretrained("model", use_kernels=False)',
        'reference = AutoModelForCausalLM.from_pretrained("model", use_kernels=False)\n'
        "import kernels._internals.validate as validate\n"
        "validate.ArchValidator.validate_metadata = lambda self, **kw: None  # no GPU to ask\n") + "tiny.result(same=same)\n"
    served = python(script, project, KERNLOCK_TARGET=CUDA_130)
    assert served.returncode == 0 and served.result["same"] is True, served.stdout + served.stderr
    assert "kernlock: Transformers kernelizes" not in served.stderr
