"""kernlock end to end on a real GPU (issue #8), or the same flow on a CPU (--cpu-dry-run).

    python gpu/e2e.py --out $OUT                # on the lent GPU machine (via gpu/run_gpu.sh)
    python gpu/e2e.py --cpu-dry-run --out DIR   # here: same plumbing, CPU variant, no Triton/CUDA checks

Steps (each in fresh child processes where a process start matters; every step runs even
when an earlier one failed, and the table at the end says which passed):

  env          versions and where each package is imported from; kernlock wheel == checkout
  triton       gpu/check_triton.py: Triton forward vs SDPA (bf16/fp16), backward grads (GPU only)
  hub          fixture repos built from this checkout's fixtures/, test Hub served in this process;
               the locked commit must be the fixture's v4 tip (else the lock is stale)
  verify       `kernlock verify` and `kernlock verify --json` in the project (exit 0)
  targets      current_target() == kernels_target() == the expected target; kernels' variant_str
  apply-train  kernlock.apply() + a Llama on attn_implementation="kernels-community/flash-attn2":
               locked variant and commit loaded, Triton forward used, losses vs the same model on sdpa
  step-time    training step time, locked vs unlocked (fresh processes, alternating), plus sdpa
  ready        time to kernel ready in fresh processes: locked warm, locked cold, unlocked warm,
               with the Hub requests each made
  failure      apply() with a lock that does not cover this machine raises NoVariantError naming it

On the GPU the covering lock is gpu/project (torch2.11-cxx11-cu130-x86_64-linux) and the
failing one gpu/project-nocuda (torch2.13 CPU only); the dry run swaps them, since here the
CPU lock is the one that covers the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "gpu"
PYTHON = sys.executable
REPO = "kernels-community/flash-attn2"
GPU_TARGET = "torch2.11-cxx11-cu130-x86_64-linux"
_UNSET_ENV = (
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE", "HF_HUB_DISABLE_TELEMETRY", "KERNELS_CACHE", "LOCAL_KERNELS", "HF_TOKEN_PATH",
    "HF_XET_CACHE", "KERNLOCK_LOCKFILE", "KERNLOCK_APPLY", "KERNLOCK_STRICT", "KERNLOCK_TARGET",
    "KERNLOCK_VENDOR_DIR", "HF_ENDPOINT", "HF_HOME",
)


class ChildError(Exception):
    pass


def verdict(figures: str, problems: list[str], details: dict, first: bool = False) -> tuple[str, str, dict]:
    """A step's (status, figures, details): FAIL with the problems named when there are any."""
    if problems:
        figures = "; ".join(problems) + "; " + figures if first else figures + "; " + "; ".join(problems)
    return ("FAIL" if problems else "PASS"), figures, details


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dry = args.cpu_dry_run
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="kernlock-e2e-"))
        self.start = time.monotonic()
        self.steps: list[dict] = []
        self.data: dict = {"mode": "cpu-dry-run" if self.dry else "gpu"}
        self.hub = None
        self.good = GPU / ("project-nocuda" if self.dry else "project")
        self.bad = GPU / ("project" if self.dry else "project-nocuda")
        self.hf_warm = self.work / "hf-home-warm"

    # ------------------------------------------------------------ plumbing

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.args.budget_s - self.elapsed()

    def log(self, text: str) -> None:
        print(text, flush=True)

    def env(self, hf_home: Path | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _UNSET_ENV}
        env["PYTHONUNBUFFERED"] = "1"
        env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        if self.hub is not None:
            env["HF_ENDPOINT"] = self.hub.url
        env["HF_HOME"] = str(hf_home or self.hf_warm)
        return env

    def child(self, argv: list[str], *, cwd: Path | None = None, hf_home: Path | None = None,
              timeout: float = 240, check: bool = True, label: str = "") -> dict:
        """Run `python gpu/child.py ARGV...` (or another script) and return its RESULT plus wall time and Hub requests."""
        if argv[0].endswith(".py"):
            cmd = [PYTHON, *argv]
        else:
            cmd = [PYTHON, str(GPU / "child.py"), *argv]
        if self.hub is not None:
            self.hub.reset_counts()
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd or self.work, env=self.env(hf_home), capture_output=True, text=True,
                              timeout=min(timeout, max(self.left(), 30)))
        wall_ms = (time.perf_counter() - started) * 1000
        requests = dict(self.hub.requests) if self.hub is not None else {}
        lines = proc.stdout.splitlines()
        found = [line for line in lines if line.startswith("RESULT ")]
        noise = [line for line in lines if not line.startswith("RESULT ")] + proc.stderr.splitlines()
        if noise:
            self.log("\n".join(f"    | {line}" for line in noise[-40:]))
        if proc.returncode != 0 or not found:
            if check:
                raise ChildError(f"{label or argv[0]}: exit {proc.returncode}; "
                                 + (proc.stderr.strip().splitlines() or ["no output"])[-1][:400])
            return {"returncode": proc.returncode, "wall_ms": wall_ms, "requests": requests}
        data = json.loads(found[-1][len("RESULT "):])
        data.update(wall_ms=wall_ms, requests=requests, returncode=proc.returncode)
        return data

    def step(self, name: str, fn) -> None:
        self.log(f"\n== {name}  (t={self.elapsed():.0f}s)")
        record = {"step": name, "status": "FAIL", "figures": "", "details": {}}
        self.steps.append(record)
        try:
            status, figures, details = fn()
            record.update(status=status, figures=figures, details=details)
        except Exception as exc:  # keep going: the table reports it
            record["figures"] = f"{type(exc).__name__}: {exc}"[:300]
            record["details"] = {"traceback": traceback.format_exc()}
            self.log(traceback.format_exc())
        self.log(f"-> {record['status']}: {record['figures']}")
        self.save()

    def save(self) -> None:
        doc = {**self.data, "elapsed_s": round(self.elapsed(), 1), "steps": self.steps}
        (self.out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")

    def lock(self, project: Path):
        from kernlock._internal.lockfile.serialize import load_lockfile

        return load_lockfile(project / "kernels.lock")

    def expected(self) -> tuple[str, str]:
        """(target, variant) this machine should load, from the covering lock."""
        lock = self.lock(self.good)
        target = str(lock.targets[0])
        entry = next(k for k in lock.kernels if k.repo == REPO)
        return target, entry.variant_for(target).name

    def commit(self) -> str:
        return next(k for k in self.lock(self.good).kernels if k.repo == REPO).commit

    # ------------------------------------------------------------ steps

    def s_env(self):
        info = self.child(["env"], label="env")
        self.data["env"] = info
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                               capture_output=True, text=True)
            info["nvidia_smi"] = q.stdout.strip() or q.stderr.strip()
        import kernlock

        installed = Path(kernlock.__file__).resolve().parent
        checkout = ROOT / "kernlock"
        differ = []
        if installed != checkout.resolve():
            for source in sorted(checkout.rglob("*.py")):
                other = installed / source.relative_to(checkout)
                if not other.exists() or hashlib.sha256(other.read_bytes()).digest() != hashlib.sha256(source.read_bytes()).digest():
                    differ.append(str(source.relative_to(ROOT)))
        info["kernlock_from"] = str(installed)
        info["kernlock_differs_from_checkout"] = differ
        for key in ("device", "nvidia_smi", "python", "torch", "torch_cuda", "triton"):
            self.log(f"   {key}: {info.get(key)}")
        for key in ("transformers", "kernels", "huggingface_hub", "kernlock", "tokenizers", "httpx2"):
            self.log(f"   {key}: {info[key]['version']}  ({info[key]['file']})")
        problems = []
        if differ:
            problems.append(f"kernlock at {installed} differs from the checkout in {len(differ)} files")
        if not self.dry and not info.get("cuda_available"):
            problems.append("CUDA is not available")
        if info["transformers"]["version"] != "5.25.0" or info["kernels"]["version"] != "0.19.1":
            problems.append("transformers/kernels are not the carried versions")
        figures = f"{info.get('device')}; torch {info.get('torch')} cuda {info.get('torch_cuda')} triton {info.get('triton')}; " \
                  f"transformers {info['transformers']['version']} kernels {info['kernels']['version']} " \
                  f"hub {info['huggingface_hub']['version']}"
        return verdict(figures, problems, info)

    def s_triton(self):
        if self.dry:
            return "SKIP", "no CUDA (the Triton logic is checked with TRITON_INTERPRET=1, see report)", {}
        report = self.out / "triton_check.json"
        proc = subprocess.run([PYTHON, str(GPU / "check_triton.py"), "--device", "cuda", "--json", str(report)],
                              cwd=self.work, env=self.env(), capture_output=True, text=True,
                              timeout=min(300, max(self.left(), 30)))
        self.log("\n".join("    | " + line for line in (proc.stdout + proc.stderr).splitlines()[-80:]))
        if not report.exists():
            return "FAIL", f"check_triton exit {proc.returncode}, no report", {}
        summary = json.loads(report.read_text())["summary"]
        status = "PASS" if proc.returncode == 0 and summary["failed"] == 0 else "FAIL"
        return status, (f"{summary['cases']} cases, {summary['failed']} failed; max rel err fwd "
                        f"{summary['max_rel_err_forward']:.2e}, bwd {summary['max_rel_err_backward']:.2e}"), summary

    def s_hub(self):
        from kernlock.testing.fixtures import build_fixture_repos, rev_parse
        from kernlock.testing.hub import TestHub

        if not shutil.which("git"):
            raise RuntimeError("git is not on PATH (the test Hub needs it)")
        started = time.perf_counter()
        repos = build_fixture_repos(ROOT / "fixtures", self.work / "repos")
        built_s = time.perf_counter() - started
        self.hub = TestHub(repos).start()
        for repo in self.hub.repos.values():  # fill the server's per-commit caches: no load pays its warm-up
            for commit in set(repo.refs().values()):
                repo.entries(commit)
                repo.last_commits(commit)
        v4 = rev_parse(repos[REPO], "v4")
        locked = {p.name: next(k for k in self.lock(p).kernels if k.repo == REPO).commit for p in (self.good, self.bad)}
        details = {"url": self.hub.url, "v4": v4, "locked": locked, "build_s": built_s}
        self.log(f"   {self.hub.url}; {REPO} v4 = {v4}; locked {locked}")
        if any(c != v4 for c in locked.values()):
            return "FAIL", f"stale lock: v4 is {v4[:12]}, locks say {locked}; rerun gpu/make_lock.sh", details
        return "PASS", f"{len(repos)} repos built in {built_s:.1f}s; v4 {v4[:12]} == locked commit", details

    def s_verify(self):
        project = self.work / "project"
        shutil.copytree(self.good, project, dirs_exist_ok=True)
        plain = subprocess.run([PYTHON, "-m", "kernlock", "verify"], cwd=project, env=self.env(),
                               capture_output=True, text=True, timeout=120)
        self.log("\n".join("    | " + line for line in (plain.stdout + plain.stderr).splitlines()))
        as_json = subprocess.run([PYTHON, "-m", "kernlock", "verify", "--json"], cwd=project, env=self.env(),
                                 capture_output=True, text=True, timeout=120)
        (self.out / "verify.json").write_text(as_json.stdout or as_json.stderr)
        try:
            report = json.loads(as_json.stdout)
        except json.JSONDecodeError:
            report = {"unparsed": as_json.stdout[-2000:], "stderr": as_json.stderr[-2000:]}
        ok = plain.returncode == 0 and as_json.returncode == 0
        return ("PASS" if ok else "FAIL"), f"verify exit {plain.returncode}, --json exit {as_json.returncode}", report

    def s_targets(self):
        target, variant = self.expected()
        got = self.child(["targets"], label="targets")
        self.log(f"   current_target()  = {got['current_target']}\n   kernels_target()  = {got['kernels_target']}\n"
                 f"   _select_backend(None).variant_str = {got['variant_str']}\n   expected          = {target}")
        backend = target.split("-")[2]
        ok = got["current_target"] == got["kernels_target"] == target and got["variant_str"] == backend
        return ("PASS" if ok else "FAIL"), \
            f"{got['current_target']} / {got['kernels_target']} / {got['variant_str']} (expected {target})", got

    def train_argv(self, mode: str, **extra) -> list[str]:
        argv = ["train", "--mode", mode]
        if self.dry:
            argv += ["--device", "cpu", "--dtype", "float32", "--size", "tiny"]
        for key, value in extra.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        return argv

    def s_apply_train(self):
        target, variant = self.expected()
        commit = self.commit()
        got = self.child(self.train_argv("locked", compare_steps=self.args.compare_steps), cwd=self.work / "project",
                         timeout=300, label="train locked")
        identity = got.get("identity", {})
        limit = 1e-4 if self.dry else 2e-2
        problems = []
        if identity.get("variant") != variant:
            problems.append(f"variant {identity.get('variant')} != {variant}")
        if identity.get("commit") != commit:
            problems.append(f"commit {identity.get('commit')} != {commit}")
        if not got.get("losses_finite"):
            problems.append("non-finite loss")
        worst = max(got.get("loss_rel_diff") or [float("inf")])
        if worst > limit:
            problems.append(f"loss rel diff {worst:.2e} > {limit:.0e}")
        if got.get("padded_logits_rel_err", 1.0) > limit:
            problems.append(f"padded logits rel err {got.get('padded_logits_rel_err'):.2e} > {limit:.0e}")
        calls = got.get("train_calls", {})
        padded = got.get("padded_calls", {})
        if not self.dry:
            if calls.get("triton_forward", 0) <= 0 or calls.get("torch_forward", 0) != 0:
                problems.append(f"triton forward not used: {calls}")
            if calls.get("torch_backward", 0) <= 0:
                problems.append(f"no torch backward: {calls}")
            if padded.get("flash_attn_varlen_func", 0) <= 0 or padded.get("triton_forward", 0) <= 0:
                problems.append(f"padded batch did not run the Triton varlen path: {padded}")
        elif calls.get("torch_forward", 0) <= 0:
            problems.append(f"kernel not called: {calls}")
        for step, (a, b, d) in enumerate(zip(got["losses"]["kernel"], got["losses"]["sdpa"], got["loss_rel_diff"])):
            self.log(f"   step {step}: loss kernel {a:.6f}  sdpa {b:.6f}  rel diff {d:.2e}")
        self.log(f"   loaded {identity}\n   calls during training: {calls}; padded forward: {padded}; "
                 f"padded logits rel err {got.get('padded_logits_rel_err'):.2e}")
        figures = (f"{identity.get('variant')} @{str(identity.get('commit'))[:12]}; losses "
                   + " ".join(f"{a:.4f}/{b:.4f}" for a, b in zip(got["losses"]["kernel"], got["losses"]["sdpa"]))
                   + f" (kernel/sdpa, max rel diff {worst:.1e}); triton fwd {calls.get('triton_forward', 0)}, "
                     f"torch bwd {calls.get('torch_backward', 0)}, varlen {padded.get('flash_attn_varlen_func', 0)}")
        return verdict(figures, problems, got)

    def s_step_time(self):
        rounds = self.args.time_rounds
        runs: dict[str, list[dict]] = {"locked": [], "unlocked": [], "sdpa-only": []}
        order = ["locked", "unlocked"] * rounds + ["sdpa-only"]
        for mode in order:
            if self.left() < 150 and runs["locked"] and runs["unlocked"]:
                self.log(f"   budget: skipping further step-time runs ({self.left():.0f}s left)")
                break
            got = self.child(self.train_argv(mode, time_steps=self.args.time_steps), cwd=self.work / "project",
                             timeout=240, label=f"train {mode}")
            runs[mode].append(got)
            self.log(f"   {mode:9s} median step {got['step_ms_median']:.2f} ms  "
                     f"(min {min(got['step_ms']):.2f}, max {max(got['step_ms']):.2f}); {got.get('identity', '')}")
        med = {m: statistics.median(r["step_ms_median"] for r in rs) for m, rs in runs.items() if rs}
        spread = {m: (max(r["step_ms_median"] for r in rs) - min(r["step_ms_median"] for r in rs)) for m, rs in runs.items() if rs}
        details = {"median_ms": med, "spread_of_run_medians_ms": spread,
                   "runs": {m: [{k: r.get(k) for k in ("step_ms_median", "step_ms", "identity", "calls_total",
                                                        "max_memory_gib", "parameters")} for r in rs] for m, rs in runs.items()}}
        unlocked_ids = {json.dumps(r.get("identity"), sort_keys=True) for r in runs["unlocked"]}
        ratio = med["locked"] / med["unlocked"]
        details["locked_over_unlocked"] = ratio
        figures = (f"locked {med['locked']:.2f} ms, unlocked {med['unlocked']:.2f} ms (x{ratio:.3f}), "
                   f"sdpa {med.get('sdpa-only', float('nan')):.2f} ms; median of {self.args.time_steps} steps per run")
        problems = []
        if not self.dry and abs(ratio - 1) > max(0.05, 2 * max(spread["locked"], spread["unlocked"]) / med["unlocked"]):
            problems.append("locked and unlocked step times differ beyond noise")
        if len(unlocked_ids) != 1:
            problems.append(f"unlocked runs loaded different builds: {unlocked_ids}")
        return verdict(figures, problems, details)

    def s_ready(self):
        reps = self.args.ready_reps
        runs: dict[str, list[dict]] = {"locked warm": [], "locked cold": [], "unlocked warm": []}
        for mode in ("locked", "unlocked"):  # warm the shared cache through both paths (untimed)
            self.child(["load", "--mode", mode], cwd=self.work / "project", label=f"warm-up load {mode}")
        for rep in range(reps):
            if rep and self.left() < 60:
                self.log(f"   budget: stopping after {rep} repetitions ({self.left():.0f}s left)")
                break
            for name in runs:
                mode = name.split()[0]
                cold = name.endswith("cold")
                hf_home = self.work / f"hf-home-cold-{rep}" if cold else None
                got = self.child(["load", "--mode", mode], cwd=self.work / "project", hf_home=hf_home,
                                 label=f"load {name}")
                runs[name].append(got)
                if cold:
                    shutil.rmtree(hf_home, ignore_errors=True)
        summary = {}
        for name, rs in runs.items():
            summary[name] = {
                "reps": len(rs),
                "ready_ms_median": statistics.median(r["ready_ms"] for r in rs),
                "ready_ms": [round(r["ready_ms"], 1) for r in rs],
                "process_ms_median": statistics.median(r["wall_ms"] for r in rs),
                "requests_median": statistics.median(sum(r["requests"].values()) for r in rs),
                "requests_by_kind_last": rs[-1]["requests"],
                "identity_last": rs[-1].get("identity"),
            }
            s = summary[name]
            self.log(f"   {name:13s} ready {s['ready_ms_median']:8.1f} ms (median of {s['reps']}: {s['ready_ms']}), "
                     f"process {s['process_ms_median']:.0f} ms, Hub requests {s['requests_median']:g} "
                     f"{s['requests_by_kind_last']}")
        problems = []
        if summary["locked warm"]["requests_median"] != 0:
            problems.append("locked warm load made Hub requests")
        target, variant = self.expected()
        for name, s in summary.items():
            if (s["identity_last"] or {}).get("variant") != variant:
                problems.append(f"{name} loaded {s['identity_last']}")
        figures = "; ".join(f"{n} {s['ready_ms_median']:.0f} ms/{s['requests_median']:g} req" for n, s in summary.items())
        return verdict(figures, problems, summary)

    def s_failure(self):
        project = self.work / "project-failing"
        shutil.copytree(self.bad, project, dirs_exist_ok=True)
        got = self.child(["fail"], cwd=project, label="fail")
        message = got.get("message") or ""
        self.log(f"   stage {got.get('stage')}, raised {got.get('raised')}:\n   {message}")
        target, _ = self.expected()
        torch_part, abi, backend, cpu, os_name = target.split("-")
        needles = [torch_part, abi, backend, f"{cpu}-{os_name}"]
        problems = []
        if not got.get("is_no_variant_error"):
            problems.append(f"raised {got.get('raised')}, not NoVariantError")
        if got.get("stage") != "apply":
            problems.append(f"failed at stage {got.get('stage')!r}, not inside apply()")
        missing = [n for n in needles if n not in message]
        if missing:
            problems.append(f"message does not name {missing}")
        figures = f"{got.get('raised')} in {got.get('stage')}(): {message[:160]}"
        return verdict(figures, problems, got, first=True)

    # ------------------------------------------------------------ all

    def run(self) -> int:
        self.log(f"kernlock e2e ({self.data['mode']}); work dir {self.work}; results in {self.out}")
        self.step("env", self.s_env)
        self.step("triton", self.s_triton)
        self.step("hub", self.s_hub)
        self.step("verify", self.s_verify)
        self.step("targets", self.s_targets)
        self.step("apply-train", self.s_apply_train)
        self.step("failure", self.s_failure)
        self.step("step-time", self.s_step_time)
        self.step("ready", self.s_ready)
        return self.finish()

    def finish(self) -> int:
        """Stop the Hub, save results.json, print the summary table; exit code 1 when a step failed."""
        if self.hub is not None:
            self.hub.stop()
        self.save()
        width = max(len(s["step"]) for s in self.steps)
        self.log(f"\n== summary ({self.data['mode']}, {self.elapsed():.0f}s; full figures in {self.out / 'results.json'})")
        for s in self.steps:
            self.log(f"{s['step']:<{width}}  {s['status']:4s}  {s['figures']}")
        failed = [s["step"] for s in self.steps if s["status"] == "FAIL"]
        self.log(f"RESULT: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}")
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-dry-run", action="store_true", help="run the flow on this CPU (no Triton/CUDA checks)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/kernlock-e2e-out")
    parser.add_argument("--budget-s", type=float, default=420, help="skip optional repetitions past this")
    parser.add_argument("--compare-steps", type=int, default=5)
    parser.add_argument("--time-steps", type=int, default=20)
    parser.add_argument("--time-rounds", type=int, default=2, help="locked/unlocked step-time process pairs")
    parser.add_argument("--ready-reps", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    return Run(args).run()


if __name__ == "__main__":
    sys.exit(main())
