"""What Transformers requests for each model family on a real GPU, without kernlock, against what
`kernlock lock` locks for it (issue 43), and `lock --record` of a script whose own code calls
`get_kernel`.

    python gpu/families.py --out $OUT     # on the lent GPU (gpu/run_gpu.sh with E2E_SCRIPT=gpu/families.py)

With the test Hub in this process (every request logged), for each family of
tests/scripts/families.py: a tiny random model is saved with `save_pretrained`; a fresh process
(no kernlock) loads it with `from_pretrained(path, device_map="cuda")`, trains one step and runs
`generate` in eval mode; the kernel repos it requested are read off the Hub's log. Then `kernlock
lock` of a project declaring that model for this GPU's target: every requested repo must be locked.
The fixture kernels are stand-ins (`simple` template), so a family whose kernel Transformers calls
for real may fail after the request; what it requested is what is compared.

`record`: `kernlock lock --record -- python train.py` of a script calling `get_kernel` itself locks
that kernel, and the next `kernlock run -- python train.py` makes 0 Hub requests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
PYTHON = sys.executable
TARGET = "torch2.11-cxx11-cu130-x86_64-linux"
_CLEAN = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "KERNELS_CACHE", "LOCAL_KERNELS", "KERNLOCK_LOCKFILE",
          "KERNLOCK_APPLY", "KERNLOCK_TARGET", "USE_HUB_KERNELS", "HF_ENDPOINT", "HF_HOME")

CHILD = r'''
import json, sys, torch, traceback
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM
path, stage = sys.argv[1], "save"
out = {"ok": False}
try:
    config = AutoConfig.from_pretrained(path)
    masked = any(a.endswith("MaskedLM") for a in config.architectures or [])
    auto = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    if sys.argv[2] == "save":
        quant = getattr(config, "quantization_config", None)
        if quant is not None:
            del config.quantization_config  # random bf16 weights; the config keeps the quantization_config
        torch.manual_seed(0)
        auto.from_config(config, dtype=torch.bfloat16).save_pretrained(path)
        if quant is not None:
            data = json.load(open(f"{path}/config.json"))
            data["quantization_config"] = quant if isinstance(quant, dict) else quant.to_dict()
            json.dump(data, open(f"{path}/config.json", "w"))
        out["ok"] = True
    else:
        stage = "from_pretrained"
        model = auto.from_pretrained(path, device_map="cuda", dtype=torch.bfloat16)
        stage = "train"
        model.train()
        ids = torch.randint(3, 100, (2, 16), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        out["loss"] = float(loss)
        stage = "generate"
        model.eval()
        if not masked:
            model.generate(ids[:, :8], max_new_tokens=2, do_sample=False)
        out["ok"] = True
except Exception as error:
    out.update(stage=stage, raised=type(error).__name__, message=str(error)[:300], tb=traceback.format_exc()[-1500:])
print("RESULT " + json.dumps(out))
'''

RECORD_SCRIPT = '''
import torch
from kernels import get_kernel
kernel = get_kernel("kernels-community/universal", version=1)
print("sum", kernel.add(torch.ones(2, device="cuda"), torch.ones(2, device="cuda")).tolist())
'''


class Run:
    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="kernlock-families-"))
        from kernlock.testing.fixtures import build_fixture_repos
        from kernlock.testing.hub import TestHub

        self.hub = TestHub(build_fixture_repos(ROOT / "fixtures", self.work / "repos")).start()
        self.rows: list[dict] = []

    def env(self, home: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _CLEAN}
        env.update(PYTHONUNBUFFERED="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HOME=str(self.work / home),
                   HF_ENDPOINT=self.hub.url, HF_HUB_DISABLE_XET="1", **extra)
        return env

    def run(self, argv: list[str], cwd: Path, home: str, timeout: float = 400, **extra: str) -> dict:
        self.hub.reset_counts()
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=self.env(home, **extra), capture_output=True, text=True,
                              timeout=timeout)
        found = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        got = json.loads(found[-1][len("RESULT "):]) if found else {}
        got.update(returncode=proc.returncode, stdout=proc.stdout[-3000:], stderr=proc.stderr[-3000:],
                   wall_s=round(time.perf_counter() - started, 2), paths=[p for _, p in self.hub.log])
        return got

    def repos(self, paths: list[str]) -> list[str]:
        """The kernel repos (those the test Hub serves) a request log names."""
        found = set()
        for path in paths:
            for repo in self.hub.repos:
                if re.search(rf"(^|/){re.escape(repo)}(/|$|\?)", path):
                    found.add(repo)
        return sorted(found)

    def family(self, name: str) -> None:
        from scripts import families

        project = self.work / name
        families.save(self.work / "configs", only=name)
        (project / "model").mkdir(parents=True)
        (project / "model" / "config.json").write_bytes((self.work / "configs" / name / "config.json").read_bytes())
        saved = self.run([PYTHON, "-c", CHILD, str(project / "model"), "save"], project, f"home-{name}")
        loaded = self.run([PYTHON, "-c", CHILD, str(project / "model"), "load"], project, f"home-{name}")
        requested = self.repos(loaded["paths"])
        (project / "pyproject.toml").write_text(
            f'[project]\nname = "{name}"\nversion = "0"\n\n[tool.kernlock]\ntargets = ["{TARGET}"]\n'
            'models = ["./model"]\n')
        locked_run = self.run([PYTHON, "-m", "kernlock", "lock"], project, f"lock-{name}")
        from kernlock import load_lockfile

        locked = sorted({k.repo for k in load_lockfile(project / "kernels.lock").kernels}) \
            if (project / "kernels.lock").exists() else []
        missing = sorted(set(requested) - set(locked))
        row = {"family": name, "requested": requested, "locked": locked, "missing": missing,
               "status": "PASS" if locked_run["returncode"] == 0 and not missing and saved.get("ok") else "FAIL",
               "save_ok": saved.get("ok"), "run": "trained+generate" if loaded.get("ok") else
               f"{loaded.get('stage')}: {loaded.get('raised')}: {loaded.get('message')}",
               "lock_exit": locked_run["returncode"], "lock_err": locked_run["stderr"][-600:],
               "save_err": saved.get("message")}
        self.rows.append(row)
        print(json.dumps({k: row[k] for k in ("family", "status", "requested", "locked", "run")}), flush=True)

    def record(self) -> None:
        project = self.work / "record"
        project.mkdir()
        (project / "train.py").write_text(RECORD_SCRIPT)
        (project / "pyproject.toml").write_text(
            f'[project]\nname = "record"\nversion = "0"\n\n[tool.kernlock]\ntargets = ["{TARGET}"]\n')
        recorded = self.run([PYTHON, "-m", "kernlock", "lock", "--record", "--", PYTHON, "train.py"], project, "rec")
        lock = (project / "kernels.lock").read_text() if (project / "kernels.lock").exists() else ""
        again = self.run([PYTHON, "-m", "kernlock", "run", "--", PYTHON, "train.py"], project, "rec")
        kernel_requests = [p for p in again["paths"] if "kernels-community" in p]
        ok = (recorded["returncode"] == 0 and 'source = "recorded"' in lock and again["returncode"] == 0
              and not kernel_requests)
        self.rows.append({"family": "record", "status": "PASS" if ok else "FAIL",
                          "record_exit": recorded["returncode"], "record_out": (recorded["stdout"] + recorded["stderr"])[-800:],
                          "run_exit": again["returncode"], "run_out": (again["stdout"] + again["stderr"])[-800:],
                          "run_hub_requests": again["paths"], "lock_has_recorded": 'source = "recorded"' in lock})
        print(json.dumps(self.rows[-1])[:1500], flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/kernlock-families")
    parser.add_argument("--only", help="comma-separated families (and/or `record`)")
    args = parser.parse_args()
    from scripts import families

    names = [*sorted(families.families()), "record"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    run = Run(Path(args.out))
    for name in names:
        try:
            run.record() if name == "record" else run.family(name)
        except Exception as error:  # keep going: the table says what failed
            run.rows.append({"family": name, "status": "FAIL", "error": f"{type(error).__name__}: {error}"[:500]})
            print(run.rows[-1], flush=True)
        (run.out / "families.json").write_text(json.dumps(run.rows, indent=2) + "\n")
    lines = ["| family | requested (no kernlock) | locked | run |", "| --- | --- | --- | --- |"]
    for row in run.rows:
        if row["family"] != "record" and "requested" in row:
            lines.append(f"| {row['family']} | {', '.join(row['requested']) or '-'} | {', '.join(row['locked'])} | "
                         f"{' '.join(str(row['run']).split())[:160]} |")
    (run.out / "families.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    failed = [r["family"] for r in run.rows if r["status"] != "PASS"]
    print("FAILED:", failed or "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
