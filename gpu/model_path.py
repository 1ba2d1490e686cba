"""The user's real GPU path under the lock (issue 33): Transformers 5.25 kernelizes by default.

    python gpu/model_path.py --out $OUT     # on the lent GPU machine (gpu/run_gpu.sh with E2E_SCRIPT=gpu/model_path.py)

With the test Hub in this process (every request counted by path) and a tiny Llama saved
with `save_pretrained`, each step in fresh processes (gpu/model_child.py):

  lock        `kernlock lock` of a project declaring the model ([tool.kernlock] models) for this GPU's
              target: liger-kernels v4, rotary v2 and activation v1 are locked for it; `kernlock verify`
              passes and imports neither torch nor Transformers
  declared    `from_pretrained(model, attn_implementation=..., device_map="cuda")` under apply(), then
              training: the layer kernels run from the lock (call counters > 0, locked commit and variant)
  to-cuda     the same through `from_pretrained(...)` then `.to("cuda").train()` (what Trainer does), warm
              cache: 0 Hub requests
  baseline    the same with USE_HUB_KERNELS=NO: the losses agree within tolerance
  undeclared  a lock without the model: no crash, Transformers' own forward, one kernlock line per repo,
              0 Hub requests for them
  explicit    `use_kernels=True` written in the call, with the same lock: refused (UnlockedKernelError)
  trl         `kernlock run -- trl sft` (no --use_cpu) in the declared project, warm cache: trains,
              0 Hub requests (TRL's own telemetry POST, not a kernel load, is counted apart), the layer
              kernels bound to the lock
  triton-source  (issue 36) the verified flash-attn2 source rewritten on disk after the import: Triton's first
              launch compiles the verified source, and the output matches SDPA
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = ROOT / "gpu" / "model_child.py"
PYTHON = sys.executable
TARGET = "torch2.11-cxx11-cu130-x86_64-linux"
FA2 = "kernels-community/flash-attn2"
LAYER_REPOS = {"kernels-community/liger-kernels": "rms_norm", "kernels-community/rotary": "apply_rotary"}
DEFAULT_LINE = "kernlock: Transformers kernelizes"
_CLEAN = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "KERNELS_CACHE", "LOCAL_KERNELS", "KERNLOCK_LOCKFILE",
          "KERNLOCK_APPLY", "KERNLOCK_TARGET", "USE_HUB_KERNELS", "HF_ENDPOINT", "HF_HOME")


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="kernlock-model-path-"))
        self.hub = None
        self.steps: list[dict] = []
        self.started = time.monotonic()
        self.only = set(args.only.split(",")) if args.only else None  # steps to run (lock always comes first)

    def log(self, text: str) -> None:
        print(text, flush=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _CLEAN}
        env.update(PYTHONUNBUFFERED="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HOME=str(self.work / "hf-home"),
                   HF_DATASETS_OFFLINE="1", **extra)
        if self.hub is not None:
            env["HF_ENDPOINT"] = self.hub.url
        return env

    def run(self, argv: list[str], cwd: Path, timeout: float = 300, **extra: str) -> dict:
        """Run a command; its RESULT, output, exit code and the Hub requests it made (by path)."""
        if self.hub is not None:
            self.hub.reset_counts()
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=self.env(**extra), capture_output=True, text=True, timeout=timeout)
        found = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        got = json.loads(found[-1][len("RESULT "):]) if found else {}
        paths = [path for _, path in self.hub.log] if self.hub is not None else []
        got.update(returncode=proc.returncode, stdout=proc.stdout[-4000:], stderr=proc.stderr[-6000:],
                   wall_s=round(time.perf_counter() - started, 2), hub_paths=paths)
        return got

    def child(self, *argv: str, cwd: Path, **extra: str) -> dict:
        return self.run([PYTHON, str(CHILD), *argv], cwd, **extra)

    def step(self, name: str, fn) -> None:
        self.log(f"\n== {name}  (t={time.monotonic() - self.started:.0f}s)")
        record = {"step": name, "status": "FAIL", "figures": "", "details": {}}
        self.steps.append(record)
        try:
            problems, figures, details = fn()
            record.update(status="FAIL" if problems else "PASS", details=details,
                          figures="; ".join([*problems, figures]))
        except Exception as error:  # keep going: the table says what failed
            record["figures"] = f"{type(error).__name__}: {error}"[:400]
            record["details"] = {"traceback": traceback.format_exc()}
            self.log(traceback.format_exc())
        self.log(f"-> {record['status']}: {record['figures']}")
        (self.out / "model_path.json").write_text(json.dumps(self.steps, indent=2, default=str) + "\n")

    # ------------------------------------------------------------ steps

    def s_lock(self):
        from kernlock.testing.fixtures import build_fixture_repos
        from kernlock.testing.hub import TestHub

        self.hub = TestHub(build_fixture_repos(ROOT / "fixtures", self.work / "repos")).start()
        problems, details = [], {}
        for name, models in (("declared", '\nmodels = ["./model"]'), ("undeclared", "")):
            project = self.work / name
            project.mkdir()
            prepared = self.child("prepare", str(project), cwd=project)
            if prepared.get("model") is None:
                raise RuntimeError(f"prepare failed: {prepared['stderr'][-800:]}")
            (project / "pyproject.toml").write_text(
                f'[project]\nname = "{name}"\nversion = "0"\n\n[tool.kernlock]\nkernels = ["{FA2}"]\n'
                f'targets = ["{TARGET}"]{models}\n')
            locked = self.run([PYTHON, "-m", "kernlock", "lock"], project)
            verified = self.run([PYTHON, "-X", "importtime", "-m", "kernlock", "verify"], project)
            heavy = [line for line in verified["stderr"].splitlines()
                     if line.startswith("import time:") and line.split("|")[-1].strip().split(".")[0] in ("torch", "transformers")]
            from kernlock._internal.lockfile.serialize import load_lockfile

            lock = load_lockfile(project / "kernels.lock")
            specs = sorted(k.spec for k in lock.kernels)
            details[name] = {"lock_exit": locked["returncode"], "verify_exit": verified["returncode"], "specs": specs,
                             "models": [m.to_dict() for m in lock.models], "verify_imports_torch_or_transformers": heavy,
                             "lock_output": locked["stdout"][-2000:] + locked["stderr"][-1000:]}
            self.log(f"   {name}: lock exit {locked['returncode']}, verify exit {verified['returncode']}, {specs}")
            if locked["returncode"] or verified["returncode"]:
                problems.append(f"{name}: lock exit {locked['returncode']}, verify exit {verified['returncode']}: "
                                f"{(locked['stderr'] + verified['stdout'] + verified['stderr'])[-300:]}")
            if heavy:
                problems.append(f"{name}: verify imported {heavy[:2]}")
        wanted = {FA2, "kernels-community/liger-kernels@v4", "kernels-community/rotary@v2", "kernels-community/activation@v1"}
        if set(details["declared"]["specs"]) != wanted:
            problems.append(f"declared lock holds {details['declared']['specs']}, not {sorted(wanted)}")
        if details["undeclared"]["specs"] != [FA2]:
            problems.append(f"undeclared lock holds {details['undeclared']['specs']}")
        return problems, f"declared: {', '.join(details['declared']['specs'])}; verify imports no torch/transformers", details

    def _locked(self, project: str) -> dict[str, tuple[str, str]]:
        from kernlock._internal.lockfile.serialize import load_lockfile

        lock = load_lockfile(self.work / project / "kernels.lock")
        return {k.repo: (k.commit, k.variant_for(TARGET).name) for k in lock.kernels}

    def _trained(self, got: dict, project: str, need_layers: bool) -> list[str]:
        problems = []
        if not got.get("ok"):
            return [f"{got.get('stage')}: {got.get('raised')}: {got.get('message')} {got['stderr'][-300:]}"]
        if not all(isinstance(x, float) and x == x for x in got["losses"]):
            problems.append(f"non-finite losses {got['losses']}")
        locked = self._locked(project)
        for repo, counter in LAYER_REPOS.items():
            loaded = got["kernels"].get(repo)
            if need_layers:
                if loaded is None or loaded["calls"].get(counter, 0) <= 0:
                    problems.append(f"{repo} did not run: {loaded}")
                elif (loaded["identity"]["commit"], loaded["identity"]["variant"]) != locked[repo]:
                    problems.append(f"{repo} loaded {loaded['identity']}, the lock says {locked[repo]}")
            elif loaded is not None:
                problems.append(f"{repo} was loaded although the lock does not hold it: {loaded}")
        return problems

    def s_declared(self):
        got = self.child("train", "--load", "device_map", cwd=self.work / "declared")
        self.declared_losses = got.get("losses")
        problems = self._trained(got, "declared", need_layers=True)
        calls = {r: (got.get("kernels", {}).get(r) or {}).get("calls") for r in LAYER_REPOS}
        return problems, f"losses {got.get('losses')}; calls {calls}; replaced {got.get('replaced')}; " \
                         f"{len(got['hub_paths'])} Hub requests (cold cache)", got

    def s_to_cuda(self):
        got = self.child("train", "--load", "to_cuda", cwd=self.work / "declared")
        problems = self._trained(got, "declared", need_layers=True)
        if got["hub_paths"]:
            problems.append(f"warm run made Hub requests: {got['hub_paths'][:5]}")
        calls = {r: (got.get("kernels", {}).get(r) or {}).get("calls") for r in LAYER_REPOS}
        return problems, f"losses {got.get('losses')}; calls {calls}; {len(got['hub_paths'])} Hub requests", got

    def s_baseline(self):
        got = self.child("train", "--load", "device_map", cwd=self.work / "declared", USE_HUB_KERNELS="NO")
        problems = self._trained(got, "declared", need_layers=False)
        kernel, plain = self.declared_losses or [], got.get("losses") or []
        diffs = [abs(a - b) / abs(b) for a, b in zip(kernel, plain)]
        if len(diffs) != len(plain) or not plain or max(diffs) > 2e-2:
            problems.append(f"losses differ: kernels {kernel} vs USE_HUB_KERNELS=NO {plain}")
        return problems, f"USE_HUB_KERNELS=NO losses {plain}; max rel diff vs locked kernels " \
                         f"{max(diffs) if diffs else float('nan'):.1e}", {**got, "rel_diff": diffs}

    def _default_lines(self, stderr: str) -> list[str]:
        return [line for line in stderr.splitlines() if DEFAULT_LINE in line]

    def s_undeclared(self):
        got = self.child("train", "--load", "device_map", cwd=self.work / "undeclared")
        problems = self._trained(got, "undeclared", need_layers=False)
        lines = self._default_lines(got["stderr"])
        for repo in LAYER_REPOS:
            mine = [line for line in lines if repo in line]
            if len(mine) != 1:
                problems.append(f"{len(mine)} kernlock lines for {repo}, not 1")
        touched = [p for p in got["hub_paths"] if any(r in p for r in LAYER_REPOS)]
        if touched:
            problems.append(f"Hub requests for unlocked layer kernels: {touched[:4]}")
        return problems, f"trained (losses {got.get('losses')}), {len(lines)} kernlock lines, " \
                         f"{len(touched)} Hub requests for them: {lines}", got

    def s_explicit(self):
        got = self.child("train", "--load", "device_map", "--use-kernels", cwd=self.work / "undeclared")
        problems = []
        if got.get("ok") or got.get("raised") != "UnlockedKernelError":
            problems.append(f"use_kernels=True was not refused: {got.get('raised')} {got.get('message')}")
        touched = [p for p in got["hub_paths"] if any(r in p for r in LAYER_REPOS)]
        if touched:
            problems.append(f"Hub requests: {touched[:4]}")
        return problems, f"{got.get('raised')} in {got.get('stage')}: {str(got.get('message'))[:200]}", got

    def s_trl(self):
        trl = shutil.which("trl") or str(Path(sys.prefix) / "bin" / "trl")
        argv = [PYTHON, "-m", "kernlock", "run", "--", trl, "sft", "--model_name_or_path", "./model",
                "--dataset_name", "./data", "--attn_implementation", FA2, "--output_dir", "out", "--max_steps", "3",
                "--per_device_train_batch_size", "4", "--report_to", "none", "--save_strategy", "no",
                "--logging_steps", "1"]
        got = self.run(argv, self.work / "declared", timeout=400, KERNLOCK_VERBOSE="1")
        locked = self._locked("declared")
        problems = []
        if got["returncode"] != 0:
            problems.append(f"exit {got['returncode']}: {got['stderr'][-600:]}")
        # TRL posts its own usage telemetry to the Hub (`/api/telemetry/trl/...`, huggingface_hub's
        # send_telemetry; HF_HUB_DISABLE_TELEMETRY=1 silences it): not a kernel load, counted apart.
        telemetry = [p for p in got["hub_paths"] if p.startswith("/api/telemetry/")]
        other = [p for p in got["hub_paths"] if p not in telemetry]
        if other:
            problems.append(f"Hub requests with a warm cache: {other[:5]}")
        for repo in (*LAYER_REPOS, FA2):
            if f"kernlock: {repo} (version " not in got["stderr"] or locked[repo][0] not in got["stderr"]:
                problems.append(f"{repo} not bound to {locked[repo][0][:12]}")
        losses = [line for line in (got["stdout"] + got["stderr"]).splitlines() if "'loss'" in line]
        return problems, f"exit {got['returncode']}, {len(other)} Hub requests (+{len(telemetry)} TRL telemetry " \
                         f"{telemetry}), {len(losses)} logged steps, {got['wall_s']} s", {**got, "loss_lines": losses}

    def s_triton_source(self):
        """Issue 36: a verified kernel file rewritten after the import; Triton's first launch compiles the verified
        source (kernlock serves it to linecache), not the rewrite."""
        got = self.child("rewrite", cwd=self.work / "declared")
        problems = []
        if got.get("jit_source_injected") is not False or got.get("inspect_injected") is not False:
            problems.append(f"Triton read the rewritten source: {got.get('stderr', '')[-300:]}")
        if got.get("disk_injected") is not True:
            problems.append("the file on disk was not rewritten (the step proves nothing)")
        if not (got.get("rel_err", 1.0) < 2e-2):
            problems.append(f"output rel err {got.get('rel_err')}")
        return problems, f"rewritten on disk {got.get('disk_injected')}, compiled source injected " \
                         f"{got.get('jit_source_injected')}, rel err vs sdpa {got.get('rel_err')}, " \
                         f"calls {got.get('triton_calls')}", got

    def main(self) -> int:
        self.log(f"kernlock model path on the GPU; work {self.work}")
        for name, fn in (("lock", self.s_lock), ("declared", self.s_declared), ("to-cuda", self.s_to_cuda),
                         ("baseline", self.s_baseline), ("undeclared", self.s_undeclared),
                         ("explicit", self.s_explicit), ("trl", self.s_trl), ("triton-source", self.s_triton_source)):
            if self.only is None or name in self.only:
                self.step(name, fn)
        if self.hub is not None:
            self.hub.stop()
        self.log("\n== summary (model path)")
        for s in self.steps:
            self.log(f"{s['step']:<11} {s['status']}  {s['figures'][:400]}")
        failed = [s["step"] for s in self.steps if s["status"] != "PASS"]
        self.log(f"RESULT: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}")
        shutil.rmtree(self.work, ignore_errors=True)
        return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/kernlock-model-path")
    parser.add_argument("--only", help="comma-separated steps to run (lock is needed by every other step)")
    return Run(parser.parse_args()).main()


if __name__ == "__main__":
    sys.exit(main())
