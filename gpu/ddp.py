"""Multi-rank kernlock on a GPU machine (issue #20): torchrun + DDP under `kernlock run`, and the
cross-rank identity guard over NCCL. One command, one table:

    python gpu/ddp.py --out $OUT              # on the lent GPU machine (after gpu/run_gpu.sh's set-up)
    python gpu/ddp.py --cpu-dry-run --out DIR # here: the same flow on a CPU with gloo

Steps (fresh `torchrun` jobs of gpu/ddp_train.py, which never imports kernlock; the test Hub
runs in this process, so every job's Hub requests are counted):

  env, hub         as gpu/e2e.py (versions; fixture repos and the test Hub)
  locks            `kernlock lock` of three projects: main (this machine's target), v3 (a per-target
                   override pins another commit), mixed (two targets of one commit); `kernlock sync`
  locked           kernlock run -- torchrun --nproc_per_node=G ddp_train.py: every rank reports the
                   locked commit/variant and the kernel's CALLS; 0 Hub requests (warm cache)
  unlocked         the same job without kernlock (kernels resolves on every rank)
  sdpa             the same job on sdpa: losses of the locked run within tolerance of it
  step-time        per-step medians locked vs unlocked; launch → first step
  step-time-alt    with --step-time-jobs N: N locked and N unlocked jobs, alternating (locked first),
                   --step-time-steps steps each; per-job medians of steps 3..S and 11..S, the median
                   over jobs of each kind, their ratio and min–max; --step-time-only skips sdpa,
                   two-ranks and the guard steps (a device call of 600 s holds ~12 such jobs)
  two-ranks        2 ranks on GPU 0 with gloo (NCCL refuses two ranks on one GPU), 10 DDP steps
  guard-*          2 ranks over NCCL (guard-only where no collective can run on one GPU): identical
                   passes; rank 1 on another lock / another variant fails inside init_process_group
                   with the table, before any step; mixed variants pass when opted in
  guard-cost       init_process_group with the guard on vs KERNLOCK_RANK_CHECK=0

G is the number of GPUs (1 on the single-H200 kind); the dry run uses gloo on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import GPU, PYTHON, REPO, Run, verdict  # noqa: E402

TRAIN = GPU / "ddp_train.py"
RANK_ENV = GPU / "rank_env.sh"


class DDPRun(Run):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.data["mode"] = "cpu-dry-run" if self.dry else "gpu-ddp"
        self.gpus = 0
        if not self.dry:
            import torch

            self.gpus = torch.cuda.device_count()
        self.backend = "gloo" if self.dry else "nccl"
        self.device = "cpu" if self.dry else "cuda"
        self.target = "torch2.13-cxx11-cpu-x86_64-linux" if self.dry else "torch2.11-cxx11-cu130-x86_64-linux"
        self.other_target = "torch2.12-cxx11-cpu-x86_64-linux" if self.dry else "torch2.11-cxx11-cu128-x86_64-linux"
        self.projects: dict[str, Path] = {}
        self.jobs: dict[str, dict] = {}

    # ------------------------------------------------------------ plumbing

    def torchrun(self, nproc: int) -> list[str]:
        return [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]

    def job(self, name: str, *, nproc: int, locked: bool = True, project: str = "main", attn: str = REPO,
            extra_env: dict[str, str] | None = None, script_args: list[str] = (), wrap: bool = False,
            timeout: float = 400) -> dict:
        """One torchrun job; returns exit code, per-rank RESULTs, Hub requests, wall time and stderr tail."""
        cmd = self.torchrun(nproc)
        if wrap:
            cmd += ["--no-python", "bash", str(RANK_ENV), PYTHON]
        cmd += [str(TRAIN), "--backend", self.backend, "--device", self.device, "--attn", attn,
                "--size", "tiny" if self.dry else "gpu", *script_args]
        if locked:
            cmd = [PYTHON, "-m", "kernlock", "run", "-v", "--", *cmd]
        env = self.env()
        # NVLink multicast stays off (the device machines' rule; harmless elsewhere).
        env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
        env.update(extra_env or {})
        env["KL_LAUNCH_T0"] = repr(time.time())
        self.hub.reset_counts()
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=self.projects[project], env=env, capture_output=True, text=True,
                              timeout=min(timeout, max(self.left(), 60)))
        wall = time.perf_counter() - started
        decoder = json.JSONDecoder()
        ranks = sorted((decoder.raw_decode(chunk)[0] for chunk in proc.stdout.split("RESULT ")[1:]),
                       key=lambda r: r["rank"])
        noise = [line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith("RESULT ")]
        self.log("\n".join(f"    | {line}" for line in noise[-30:]))
        record = {"returncode": proc.returncode, "wall_s": wall, "ranks": ranks,
                  "requests": dict(self.hub.requests), "stderr_tail": "\n".join(noise[-60:]), "output": "\n".join(noise)}
        self.jobs[name] = record
        return record

    def lock_project(self, name: str, targets: list[str], extra: str = "") -> Path:
        project = self.work / f"ddp-{name}"
        project.mkdir(parents=True, exist_ok=True)
        quoted = ", ".join(f'"{t}"' for t in targets)
        (project / "pyproject.toml").write_text(
            f'[project]\nname = "ddp-{name}"\nversion = "0"\n\n[tool.kernlock]\nkernels = ["{REPO}"]\n'
            f"targets = [{quoted}]\n{extra}")
        proc = subprocess.run([PYTHON, "-m", "kernlock", "lock"], cwd=project, env=self.env(), capture_output=True,
                              text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"kernlock lock in {project.name}: {(proc.stderr or proc.stdout).strip()[-400:]}")
        self.projects[name] = project
        return project

    def binding(self, project: str, target: str) -> tuple[str, str]:
        entry = next(k for k in self.lock(self.projects[project]).kernels if k.repo == REPO)
        return entry.commit, entry.variant_for(target).name

    @staticmethod
    def total(requests: dict) -> int:
        return int(sum(v for k, v in requests.items() if not k.startswith("bytes")))

    # ------------------------------------------------------------ steps

    def s_locks(self):
        self.lock_project("main", [self.target])
        backend = self.target.split("-")[2]
        self.lock_project("v3", [self.target], extra=(
            f'\n[[tool.kernlock.overrides."{REPO}"]]\nbackend = "{backend}"\nversion = 3\n'
            'reason = "a rank on another lock (issue #20 guard check)"\n'))
        self.lock_project("mixed", [self.target, self.other_target])
        sync = subprocess.run([PYTHON, "-m", "kernlock", "sync", "--all-targets"], cwd=self.projects["mixed"],
                              env=self.env(), capture_output=True, text=True, timeout=300)
        self.log("    | " + (sync.stdout + sync.stderr).strip().replace("\n", "\n    | "))
        main = self.binding("main", self.target)
        v3 = self.binding("v3", self.target)
        mixed = (self.binding("mixed", self.target), self.binding("mixed", self.other_target))
        details = {"main": main, "v3": v3, "mixed": mixed}
        problems = []
        if sync.returncode != 0:
            problems.append(f"kernlock sync exit {sync.returncode}")
        if v3[0] == main[0]:
            problems.append("the v3 override did not pin another commit")
        if mixed[0][0] != mixed[1][0] or mixed[0][1] == mixed[1][1]:
            problems.append(f"mixed lock is not two variants of one commit: {mixed}")
        figures = (f"main {main[0][:12]} {main[1]}; v3 {v3[0][:12]}; mixed {mixed[0][1]} + {mixed[1][1]}; "
                   f"sync exit {sync.returncode}")
        return verdict(figures, problems, details)

    def nproc(self) -> int:
        return 2 if self.dry else max(self.gpus, 1)

    def s_locked(self):
        commit, variant = self.binding("main", self.target)
        job = self.job("locked", nproc=self.nproc())
        problems = self.check_ranks(job, self.nproc(), commit, variant, kernel=True)
        if self.total(job["requests"]):
            problems.append(f"{self.total(job['requests'])} Hub requests with a warm cache: {job['requests']}")
        calls = [r.get("calls", {}) for r in job["ranks"]]
        figures = (f"{len(job['ranks'])} rank(s) on {commit[:12]} {variant}; CALLS "
                   + "; ".join(f"r{r['rank']} {r.get('calls')}" for r in job["ranks"])
                   + f"; {self.total(job['requests'])} Hub requests; launch→first step "
                   + ", ".join(f"{r.get('first_step_s', float('nan')):.1f}s" for r in job["ranks"]))
        if not self.dry and any(c.get("triton_forward", 0) <= 0 for c in calls):
            problems.append("the Triton forward did not run on every rank")
        return verdict(figures, problems, job)

    def check_ranks(self, job: dict, nproc: int, commit: str, variant: str, kernel: bool) -> list[str]:
        problems = []
        if job["returncode"] != 0:
            problems.append(f"exit {job['returncode']}: {job['stderr_tail'].splitlines()[-1:] }")
        if len(job["ranks"]) != nproc:
            problems.append(f"{len(job['ranks'])} of {nproc} ranks reported")
        for r in job["ranks"]:
            if kernel:
                ident = r.get("identity", {})
                if (ident.get("commit"), ident.get("variant")) != (commit, variant):
                    problems.append(f"rank {r['rank']} loaded {ident.get('commit', '')[:12]} {ident.get('variant')}")
            if r.get("losses") is not None and not r.get("losses_finite"):
                problems.append(f"rank {r['rank']}: non-finite loss")
        return problems

    def s_unlocked(self):
        self.job("unlocked-first", nproc=self.nproc(), locked=False)  # kernels' own download/metadata warm-up
        job = self.job("unlocked", nproc=self.nproc(), locked=False)
        problems = [] if job["returncode"] == 0 else [f"exit {job['returncode']}"]
        ranks = job["ranks"]
        figures = (f"{len(ranks)} rank(s) on " + ", ".join(f"{r.get('identity', {}).get('commit', '')[:12]} "
                                                           f"{r.get('identity', {}).get('variant')}" for r in ranks)
                   + f"; {self.total(job['requests'])} Hub requests warm ({job['requests']})")
        return verdict(figures, problems, job)

    def s_sdpa(self):
        job = self.job("sdpa", nproc=self.nproc(), locked=False, attn="sdpa")
        locked = self.jobs.get("locked", {}).get("ranks") or []
        reference = job["ranks"]
        problems = [] if job["returncode"] == 0 else [f"exit {job['returncode']}"]
        limit = 1e-4 if self.dry else 2e-2
        worst = 0.0
        for mine, ref in zip(locked, reference):
            for a, b in zip(mine["losses"], ref["losses"]):
                worst = max(worst, abs(a - b) / max(abs(b), 1e-30))
        if not locked or not reference:
            problems.append("no losses to compare")
        elif worst > limit:
            problems.append(f"loss rel diff {worst:.2e} > {limit:.0e}")
        first = f"{locked[0]['losses'][0]:.4f}/{reference[0]['losses'][0]:.4f} … " \
                f"{locked[0]['losses'][-1]:.4f}/{reference[0]['losses'][-1]:.4f}" if locked and reference else "-"
        return verdict(f"locked vs sdpa losses, rank 0: {first}; max rel diff {worst:.2e} (limit {limit:.0e})",
                       problems, {"max_rel_diff": worst})

    def s_step_time(self):
        locked, unlocked = self.jobs.get("locked"), self.jobs.get("unlocked")
        if not locked or not unlocked or not locked["ranks"] or not unlocked["ranks"]:
            return "FAIL", "needs the locked and unlocked jobs", {}
        lm = statistics.median(r["step_ms_median"] for r in locked["ranks"])
        um = statistics.median(r["step_ms_median"] for r in unlocked["ranks"])
        lf = max(r["first_step_s"] for r in locked["ranks"])
        uf = max(r["first_step_s"] for r in unlocked["ranks"])
        figures = (f"step {lm:.1f} ms locked vs {um:.1f} ms unlocked (×{lm / um:.2f}); launch→first step "
                   f"{lf:.1f} s locked vs {uf:.1f} s unlocked; job wall {locked['wall_s']:.1f} s vs "
                   f"{unlocked['wall_s']:.1f} s")
        details = {"locked_step_ms": lm, "unlocked_step_ms": um, "ratio": lm / um,
                   "locked_first_step_s": lf, "unlocked_first_step_s": uf}
        return "PASS", figures, details

    def s_step_time_alt(self):
        """Alternating locked/unlocked jobs (after the locked and unlocked steps, which warm the kernel, Triton and
        Hub caches): the single-pair ratio of s_step_time is one sample; this gives one per job."""
        n, steps = self.args.step_time_jobs, self.args.step_time_steps
        per: dict[str, list[dict]] = {"locked": [], "unlocked": []}
        commit_variant = self.binding("main", self.target)
        problems = []
        for i in range(n):
            for kind in ("locked", "unlocked"):
                if self.left() < 45:
                    problems.append(f"budget: stopped before {kind} job {i + 1} ({self.left():.0f}s left)")
                    break
                job = self.job(f"alt-{kind}-{i + 1}", nproc=self.nproc(), locked=kind == "locked",
                               script_args=["--steps", str(steps)])
                if job["returncode"] != 0 or not job["ranks"]:
                    problems.append(f"{kind} job {i + 1}: exit {job['returncode']}")
                    continue
                r0 = job["ranks"][0]
                if kind == "locked":
                    problems += [f"locked job {i + 1}: {p}" for p in self.check_ranks(job, self.nproc(), *commit_variant,
                                                                                     kernel=True)]
                ms = r0["step_ms"]
                per[kind].append({"job": i + 1, "median_3": statistics.median(ms[2:]),
                                  "median_11": statistics.median(ms[10:] or ms), "first_ms": ms[:3],
                                  "first_step_s": r0["first_step_s"], "wall_s": job["wall_s"],
                                  "requests": self.total(job["requests"]), "step_ms": ms})
                self.log(f"   {kind} {i + 1}: median(3..{steps}) {per[kind][-1]['median_3']:.2f} ms, "
                         f"median(11..{steps}) {per[kind][-1]['median_11']:.2f} ms, first steps "
                         + ", ".join(f"{x:.0f}" for x in ms[:3]) + " ms")
            else:
                continue
            break
        if not per["locked"] or not per["unlocked"]:
            return verdict("no complete jobs", problems or ["no jobs"], per)

        def summary(rows: list[dict], key: str) -> dict:
            vals = sorted(r[key] for r in rows)
            q = statistics.quantiles(vals, n=4, method="inclusive") if len(vals) >= 2 else [vals[0]] * 3
            return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1], "q1": q[0], "q3": q[2]}

        stats = {kind: {key: summary(rows, key) for key in ("median_3", "median_11", "first_step_s", "wall_s")}
                 for kind, rows in per.items()}
        ratio = stats["locked"]["median_3"]["median"] / stats["unlocked"]["median_3"]["median"]
        ratio_11 = stats["locked"]["median_11"]["median"] / stats["unlocked"]["median_11"]["median"]
        pairs = [a["median_3"] / b["median_3"] for a, b in zip(per["locked"], per["unlocked"])]
        details = {"jobs_per_kind": {k: len(v) for k, v in per.items()}, "steps": steps, "stats": stats,
                   "ratio": ratio, "ratio_steps_11": ratio_11, "pair_ratios": pairs, "jobs": per}
        fmt = lambda s: f"{s['median']:.2f} ms (min–max {s['min']:.2f}–{s['max']:.2f}, IQR {s['q1']:.2f}–{s['q3']:.2f})"
        figures = (f"{len(per['locked'])}+{len(per['unlocked'])} alternating jobs, {steps} steps; median over jobs of "
                   f"median(steps 3..{steps}): locked {fmt(stats['locked']['median_3'])} vs unlocked "
                   f"{fmt(stats['unlocked']['median_3'])}: ×{ratio:.3f} (steps 11..: ×{ratio_11:.3f}); "
                   f"pair ratios {min(pairs):.3f}–{max(pairs):.3f}; launch→first step "
                   f"{stats['locked']['first_step_s']['median']:.1f} s vs {stats['unlocked']['first_step_s']['median']:.1f} s")
        return verdict(figures, problems, details)

    def s_two_ranks(self):
        """2 ranks, full DDP: on a single GPU both share it through gloo (NCCL needs a GPU per rank)."""
        commit, variant = self.binding("main", self.target)
        backend = "nccl" if self.gpus >= 2 else "gloo"
        saved, self.backend = self.backend, backend
        try:
            job = self.job("two-ranks", nproc=2)
        finally:
            self.backend = saved
        problems = self.check_ranks(job, 2, commit, variant, kernel=True)
        figures = (f"{backend}, {len(job['ranks'])} ranks on {self.device}: "
                   + "; ".join(f"r{r['rank']} {r.get('identity', {}).get('variant')} loss {r['losses'][0]:.3f}→"
                               f"{r['losses'][-1]:.3f} CALLS {r.get('calls')}" for r in job["ranks"] if r.get("losses"))
                   + f"; {self.total(job['requests'])} Hub requests")
        return verdict(figures, problems, job)

    def guard_job(self, name: str, extra_env: dict[str, str], guard_only: bool) -> dict:
        args = ["--guard-only"] if guard_only else ["--steps", "2"]
        return self.job(name, nproc=2, extra_env=extra_env, script_args=args, wrap=True)

    def s_guard_same(self):
        job = self.guard_job("guard-same", {}, guard_only=True)
        problems = [] if job["returncode"] == 0 and len(job["ranks"]) == 2 else [f"exit {job['returncode']}"]
        return verdict(f"{self.backend}, 2 ranks, same lock: exit {job['returncode']}, init "
                       + ", ".join(f"{r['init_ms']:.0f} ms" for r in job["ranks"]), problems, job)

    def refused(self, job: dict, needles: list[str]) -> list[str]:
        problems = []
        if job["returncode"] == 0:
            problems.append("the job was not refused")
        if any("first_step_s" in r for r in job["ranks"]):
            problems.append("a rank reached its first step")
        missing = [n for n in needles if n not in job["output"]]
        if missing:
            problems.append(f"the table does not show {missing}")
        return problems

    def table_of(self, job: dict) -> str:
        lines = job["output"].splitlines()
        start = next((i for i, line in enumerate(lines) if re.search(r"(kernlock: (error: )?|Error: )ranks ", line)), None)
        return "\n".join(lines[start:start + 5]) if start is not None else ""

    def s_guard_lock(self):
        v3_commit, _ = self.binding("v3", self.target)
        job = self.guard_job("guard-other-lock", {"KL_RANK1_LOCKFILE": str(self.projects["v3"] / "kernels.lock")},
                             guard_only=False)
        table = self.table_of(job)
        self.data["guard_lock_table"] = table
        return verdict(f"rank 1 on another lock: exit {job['returncode']}; table: {table!r}",
                       self.refused(job, ["different lock files", v3_commit[:12]]), job)

    def s_guard_variant(self):
        job = self.guard_job("guard-other-variant", {"KL_RANK1_TARGET": self.other_target,
                                                     "KERNLOCK_LOCKFILE": str(self.projects["mixed"] / "kernels.lock")},
                             guard_only=False)
        table = self.table_of(job)
        self.data["guard_variant_table"] = table
        _, other_variant = self.binding("mixed", self.other_target)
        problems = self.refused(job, ["different build variants", other_variant])
        opted = self.guard_job("guard-mixed-allowed", {
            "KL_RANK1_TARGET": self.other_target, "KERNLOCK_ALLOW_MIXED_VARIANTS": "1",
            "KERNLOCK_LOCKFILE": str(self.projects["mixed"] / "kernels.lock")}, guard_only=True)
        if opted["returncode"] != 0 or len(opted["ranks"]) != 2:
            problems.append(f"opted-in mixed variants refused: exit {opted['returncode']}")
        return verdict(f"rank 1 on {other_variant}: exit {job['returncode']}, table: {table!r}; opted in: exit "
                       f"{opted['returncode']}", problems, {"refused": job, "opted_in": opted})

    def s_guard_cost(self):
        """init_process_group time with and without the guard; the last rank to arrive waits for nobody, so its
        time (the per-job minimum) is the guard's own work, and the maximum adds the ranks' start-up skew."""
        reps = self.args.cost_reps
        samples: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for _ in range(reps):
            for key, env in (("on", {}), ("off", {"KERNLOCK_RANK_CHECK": "0"})):
                job = self.guard_job(f"guard-cost-{key}", env, guard_only=True)
                if job["returncode"] == 0 and len(job["ranks"]) == 2:
                    times = [r["init_ms"] for r in job["ranks"]]
                    samples[key].append((min(times), max(times)))
        if not samples["on"] or not samples["off"]:
            return "FAIL", "guard-only jobs failed", samples
        med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in samples.items()}
        figures = (f"init_process_group ({self.backend}, 2 ranks, median of {reps}): last rank {med['on'][0]:.1f} ms "
                   f"with the guard vs {med['off'][0]:.1f} ms without (+{med['on'][0] - med['off'][0]:.1f} ms); "
                   f"slowest rank {med['on'][1]:.1f} vs {med['off'][1]:.1f} ms")
        return "PASS", figures, samples

    # ------------------------------------------------------------ all

    def run(self) -> int:
        self.log(f"kernlock ddp ({self.data['mode']}, {self.gpus} GPU(s)); work dir {self.work}; results in {self.out}")
        self.step("env", self.s_env)
        self.step("hub", self.s_hub)
        self.step("locks", self.s_locks)
        steps = [("locked", self.s_locked), ("unlocked", self.s_unlocked), ("sdpa", self.s_sdpa),
                 ("step-time", self.s_step_time)]
        if self.args.step_time_jobs:
            steps.append(("step-time-alt", self.s_step_time_alt))
        steps += [("two-ranks", self.s_two_ranks), ("guard-same", self.s_guard_same), ("guard-lock", self.s_guard_lock),
                  ("guard-variant", self.s_guard_variant), ("guard-cost", self.s_guard_cost)]
        if self.args.step_time_only:
            steps = [s for s in steps if s[0] in ("locked", "unlocked", "step-time", "step-time-alt")]
        for name, fn in steps:
            if "locks" in {s["step"] for s in self.steps if s["status"] == "FAIL"}:
                break
            self.step(name, fn)
        self.data["jobs"] = {k: {**v, "output": v["output"][-6000:]} for k, v in self.jobs.items()}
        return self.finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-dry-run", action="store_true", help="the same flow on this CPU with gloo")
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/kernlock-ddp-out")
    parser.add_argument("--budget-s", type=float, default=540)
    parser.add_argument("--cost-reps", type=int, default=3)
    parser.add_argument("--step-time-jobs", type=int, default=0, help="alternating locked/unlocked jobs of each kind")
    parser.add_argument("--step-time-steps", type=int, default=50, help="training steps per alternating job")
    parser.add_argument("--step-time-only", action="store_true", help="only locked, unlocked, step-time(-alt)")
    parser.add_argument("--keep", action="store_true")
    return DDPRun(parser.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
