"""GPU architectures on the real GPU (issue 34): a lock of a 10.0-only build is refused on an H100 (9.0) with one line.

    python gpu/arch_check.py --out $OUT     # on the lent GPU machine (E2E_SCRIPT=gpu/arch_check.py bash gpu/run_gpu.sh)

With the test Hub in this process (`kernlock.testing.hub.TestHub` over `fixtures/`), a project locking
`kernels-community/sm100-only@v1` (CUDA builds listing only `10.0`) for this machine's target
`torch2.11-cxx11-cu130-x86_64-linux`, each step in a fresh process:

  lock          `python -m kernlock lock`: the locked variant records archs = ["10.0"]
  verify        with `[tool.kernlock] gpu-archs = ["H100"]`: `kernlock verify` fails offline (HF_HUB_OFFLINE=1),
                naming the target, the variant and arch 9.0; without it, verify passes
  load          `kernlock.apply()` (GPU not yet initialised) then `kernels.get_kernel`: refused with kernlock's
                one line (GpuArchError), the kernel's module never imported
  apply         `torch.cuda.init()` first, then `kernlock.apply()`: refused by apply() itself, same line
  opt-out       `get_kernel(..., check_arch=False)` under apply(): kernels' own opt-out loads the build and its
                pure-Python `add` runs on CUDA tensors
  unlocked      plain kernels (no kernlock) on the same Hub: kernels' own RuntimeError, for comparison
  zip           a project locking `kernels-community/zipped@v1` (kernels 0.19's ZIP build layout): under
                apply() the build loads from the lock (its module file inside the archive) and its `add` runs
                on CUDA tensors; `verify --cache` passes; a flipped byte in the cached archive is then refused
                (IntegrityError) before any member is imported

Prints `RESULT {json}` last (also written to $OUT/arch_check.json); exit 1 when a step failed. On a GPU of
capability 10.x the build is supported: `load` and `apply` then report that nothing was refused.
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
PYTHON = sys.executable
TARGET = "torch2.11-cxx11-cu130-x86_64-linux"
VARIANT = "torch211-cxx11-cu130-x86_64-linux"
SM100 = "kernels-community/sm100-only"
ZIPPED = "kernels-community/zipped"
_CLEAN = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "KERNELS_CACHE", "LOCAL_KERNELS", "KERNLOCK_LOCKFILE",
          "KERNLOCK_APPLY", "KERNLOCK_TARGET", "USE_HUB_KERNELS", "HF_ENDPOINT", "HF_HOME")

# ---------------------------------------------------------------- the child (one mode per fresh process)

CHILD = r'''
import json, sys, traceback
mode = sys.argv[1]
out = {"mode": mode, "stage": "import"}
try:
    import torch  # the device is named only at the end: get_device_name would initialise CUDA before apply()
    import kernels
    if mode != "unlocked":
        import kernlock
    if mode == "apply":
        out["stage"] = "cuda-init"
        torch.cuda.init()
        out["capability"] = "%d.%d" % torch.cuda.get_device_capability()
    out["cuda_initialised_before_apply"] = torch.cuda.is_initialized()
    if mode != "unlocked":
        out["stage"] = "apply"
        kernlock.apply()
    out["stage"] = "get_kernel"
    module = kernels.get_kernel("@@REPO@@", version=1, **({"check_arch": False} if mode == "opt-out" else {}))
    out["capability"] = "%d.%d" % torch.cuda.get_device_capability()
    out["stage"] = "run"
    a = torch.ones(4, device="cuda")
    out["sum"] = float(module.add(a, a).sum())
    out["identity"] = module.KERNEL_IDENTITY
    out["ok"] = True
except BaseException as error:
    out.update(ok=False, raised=type(error).__name__, message=str(error), lines=len(str(error).splitlines()),
               is_runtime_error=isinstance(error, RuntimeError), traceback=traceback.format_exc()[-3000:])
    try:
        import torch
        out.setdefault("capability", "%d.%d" % torch.cuda.get_device_capability())
    except Exception:
        pass
try:
    out["device"] = torch.cuda.get_device_name(0)
except Exception:
    pass
out["kernel_imported"] = any("sm100_only" in name for name in sys.modules)
print("RESULT " + json.dumps(out))
'''.replace("@@REPO@@", SM100)

ZIP_CHILD = r'''
import json, sys, traceback
out = {"stage": "import"}
try:
    import torch, kernels, kernlock
    out["stage"] = "apply"
    kernlock.apply()
    out["stage"] = "get_kernel"
    module = kernels.get_kernel("@@REPO@@", version=1)
    out["stage"] = "run"
    a = torch.arange(4.0, device="cuda")
    result = module.add(a, a)
    out.update(ok=True, sum=float(result.sum()), on=str(result.device), file=module.__file__,
               identity=module.KERNEL_IDENTITY)
except BaseException as error:
    out.update(ok=False, raised=type(error).__name__, message=str(error), lines=len(str(error).splitlines()),
               traceback=traceback.format_exc()[-3000:])
out["member_ran"] = any(name.startswith("_zipped_") and hasattr(module, "add")
                        for name, module in list(sys.modules.items()))
print("RESULT " + json.dumps(out, default=str))
'''.replace("@@REPO@@", ZIPPED)


class Run:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="kernlock-arch-check-"))
        self.project = self.work / "project"
        self.hub = None
        self.steps: list[dict] = []
        self.lock_commit = ""

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _CLEAN}
        env.update(PYTHONUNBUFFERED="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HOME=str(self.work / "hf-home"),
                   HF_HUB_DISABLE_XET="1", **extra)  # the test Hub has no Xet server
        if self.hub is not None:
            env["HF_ENDPOINT"] = self.hub.url
        return env

    def run(self, argv: list[str], timeout: float = 300, cwd: Path | None = None, **extra: str) -> dict:
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd or self.project, env=self.env(**extra), capture_output=True, text=True,
                              timeout=timeout)
        found = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        got = json.loads(found[-1][len("RESULT "):]) if found else {}
        got.update(returncode=proc.returncode, stdout=proc.stdout[-3000:], stderr=proc.stderr[-3000:],
                   wall_s=round(time.perf_counter() - started, 2))
        return got

    def child(self, mode: str) -> dict:
        return self.run([PYTHON, "-c", CHILD, mode])

    def pyproject(self, extra: str = "") -> None:
        (self.project / "pyproject.toml").write_text(
            f'[project]\nname = "arch-check"\nversion = "0"\n\n[tool.kernlock]\nkernels = ["{SM100}@v1"]\n'
            f'targets = ["{TARGET}"]\n{extra}')

    def step(self, name: str, fn) -> None:
        print(f"\n== {name}", flush=True)
        record: dict = {"step": name, "status": "FAIL", "figures": "", "details": {}}
        self.steps.append(record)
        try:
            problems, figures, details = fn()
            record.update(status="FAIL" if problems else "PASS", details=details, figures="; ".join([*problems, figures]))
        except Exception as error:
            record.update(figures=f"{type(error).__name__}: {error}"[:400], details={"traceback": traceback.format_exc()})
        print(f"-> {record['status']}: {record['figures']}", flush=True)
        (self.out / "arch_check.json").write_text(json.dumps(self.steps, indent=2, default=str) + "\n")

    def expected_line(self, capability: str) -> str:
        return (f"{SM100}@v1 {VARIANT} at {self.lock_commit[:12]} is built for GPU archs 10.0, which do not cover "
                f"this GPU (CUDA capability {capability}); kernels would refuse to load it there")

    # ------------------------------------------------------------ steps

    def s_lock(self):
        from kernlock._internal.lockfile.serialize import load_lockfile
        from kernlock.testing.fixtures import build_fixture_repos
        from kernlock.testing.hub import TestHub

        self.hub = TestHub(build_fixture_repos(ROOT / "fixtures", self.work / "repos")).start()
        self.project.mkdir()
        self.pyproject()
        got = self.run([PYTHON, "-m", "kernlock", "lock"])
        if got["returncode"] != 0:
            return [f"lock exit {got['returncode']}: {got['stderr'][-400:]}"], "", got
        [entry] = load_lockfile(self.project / "kernels.lock").kernels
        self.lock_commit = entry.commit
        variant = entry.variant_for(TARGET)
        archs = list(variant.archs) if variant else None
        problems = [] if variant and variant.name == VARIANT and archs == ["10.0"] else [f"locked {variant} {archs}"]
        return problems, f"{entry.commit[:12]} [{variant.name if variant else None}] archs {archs}", got

    def s_verify(self):
        self.pyproject('gpu-archs = ["H100"]\n')
        declared = self.run([PYTHON, "-m", "kernlock", "verify", "--json", "--target", TARGET], HF_HUB_OFFLINE="1")
        self.pyproject()
        plain = self.run([PYTHON, "-m", "kernlock", "verify", "--target", TARGET], HF_HUB_OFFLINE="1")
        report = json.loads(declared["stdout"]) if declared["stdout"].strip().startswith("{") else {}
        check = next((c for c in report.get("checks", []) if c["name"] == "gpu-archs"), {})
        problems = []
        found = check.get("problems") or [{}]
        if declared["returncode"] == 0 or found[0].get("arch") != "9.0" or found[0].get("target") != TARGET:
            problems.append(f"declared H100: exit {declared['returncode']}, {check}")
        if plain["returncode"] != 0:
            problems.append(f"without gpu-archs: exit {plain['returncode']}: {plain['stdout'][-300:]}")
        return problems, f"declared H100: exit {declared['returncode']}: {found[0].get('message')}; " \
                         f"without: exit {plain['returncode']}", {"declared": declared, "plain": plain, "check": check}

    def _refused(self, mode: str, stage: str):
        got = self.child(mode)
        capability = got.get("capability", "?")
        if capability.startswith("10."):
            return [], f"capability {capability}: the build is supported here (nothing to refuse); {got.get('ok')}", got
        problems = []
        if got.get("ok") or got.get("raised") != "GpuArchError" or got.get("stage") != stage:
            problems.append(f"not refused by kernlock in {stage}: {got.get('raised')} in {got.get('stage')}: "
                            f"{str(got.get('message'))[:300]}")
        elif not str(got.get("message", "")).startswith(self.expected_line(capability)) or got.get("lines") != 1:
            problems.append(f"unexpected line: {got.get('message')}")
        if got.get("kernel_imported"):
            problems.append("the kernel module was imported")
        return problems, f"{got.get('device')} ({capability}): {got.get('raised')} in {got.get('stage')}: " \
                         f"{got.get('message')}", got

    def s_load(self):
        return self._refused("load", "get_kernel")

    def s_apply(self):
        return self._refused("apply", "apply")

    def s_opt_out(self):
        got = self.child("opt-out")
        problems = [] if got.get("ok") and got.get("sum") == 8.0 and \
            (got.get("identity") or {}).get("commit") == self.lock_commit else [f"{got.get('raised')}: {got.get('message')}"]
        return problems, f"check_arch=False: ok={got.get('ok')} sum={got.get('sum')} {got.get('identity')}", got

    def s_unlocked(self):
        got = self.child("unlocked")
        return [], f"plain kernels: {got.get('raised')} in {got.get('stage')}: {str(got.get('message'))[:300]}", got

    def s_zip(self):
        """A ZIP-layout build locked for this target loads from the lock and runs on CUDA; a flipped byte in its
        cached archive is then refused before any member is imported."""
        from kernlock._internal.store.hub_cache import variant_dir
        from kernlock._internal.lockfile.serialize import load_lockfile

        project = self.work / "zip-project"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[project]\nname = "zip-check"\nversion = "0"\n\n[tool.kernlock]\nkernels = ["{ZIPPED}@v1"]\n'
            f'targets = ["{TARGET}"]\n')
        locked = self.run([PYTHON, "-m", "kernlock", "lock"], cwd=project)
        if locked["returncode"] != 0:
            return [f"lock exit {locked['returncode']}: {locked['stderr'][-400:]}"], "", locked
        [entry] = load_lockfile(project / "kernels.lock").kernels
        variant = entry.variant_for(TARGET)
        [archive] = [f.path for f in variant.files if f.path.endswith(".zip")]
        loaded = self.run([PYTHON, "-c", ZIP_CHILD], cwd=project)
        problems = []
        identity = loaded.get("identity") or {}
        if not (loaded.get("ok") and loaded.get("sum") == 12.0 and loaded.get("on", "").startswith("cuda")
                and identity.get("commit") == entry.commit and identity.get("variant") == variant.name
                and str(loaded.get("file", "")).endswith(f"{archive}/__init__.py")):
            problems.append(f"load: {loaded.get('raised')} in {loaded.get('stage')}: {loaded.get('message')} {identity}")
        verify = self.run([PYTHON, "-m", "kernlock", "verify", "--cache", "--target", TARGET], cwd=project,
                          HF_HUB_OFFLINE="1")
        if verify["returncode"] != 0:
            problems.append(f"verify --cache after the load: exit {verify['returncode']}: {verify['stdout'][-300:]}")
        cached = (variant_dir(entry, variant.name, self.work / "hf-home" / "hub") / archive).resolve()
        data = bytearray(cached.read_bytes())
        data[len(data) // 2] ^= 0x01
        cached.chmod(0o644)
        cached.write_bytes(bytes(data))
        tampered = self.run([PYTHON, "-c", ZIP_CHILD], cwd=project)
        if tampered.get("ok") or tampered.get("raised") != "IntegrityError" or archive not in str(tampered.get("message")):
            problems.append(f"tampered archive not refused: {tampered.get('raised')}: {tampered.get('message')}")
        if tampered.get("member_ran"):
            problems.append("a member of the tampered archive was imported")
        return problems, f"{variant.name} at {entry.commit[:12]}: add on {loaded.get('on')} = {loaded.get('sum')} " \
                         f"from {str(loaded.get('file'))[-60:]}; verify --cache exit {verify['returncode']}; " \
                         f"tampered: {tampered.get('raised')}: {str(tampered.get('message'))[:200]}", \
            {"lock": locked, "load": loaded, "verify": verify, "tampered": tampered}

    def main(self) -> int:
        for name, fn in (("lock", self.s_lock), ("verify", self.s_verify), ("load", self.s_load),
                         ("apply", self.s_apply), ("opt-out", self.s_opt_out), ("unlocked", self.s_unlocked),
                         ("zip", self.s_zip)):
            if name != "lock" and not self.lock_commit:
                break
            self.step(name, fn)
        if self.hub is not None:
            self.hub.stop()
        failed = [s["step"] for s in self.steps if s["status"] != "PASS"]
        summary = {"result": "FAIL" if failed or len(self.steps) < 7 else "PASS", "failed": failed,
                   "steps": {s["step"]: f"{s['status']}: {s['figures'][:500]}" for s in self.steps}}
        print("RESULT " + json.dumps(summary), flush=True)
        shutil.rmtree(self.work, ignore_errors=True)
        return 0 if summary["result"] == "PASS" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/kernlock-arch-check")
    return Run(Path(parser.parse_args().out)).main()


if __name__ == "__main__":
    sys.exit(main())
