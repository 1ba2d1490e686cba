#!/usr/bin/env bash
# kernlock end to end on the lent GPU machine (issue #8). From the repository root:
#   bash gpu/run_gpu.sh [e2e.py options]      e.g. --cpu-dry-run (any machine), --ready-reps 3
#   E2E_SCRIPT=gpu/ddp.py bash gpu/run_gpu.sh  the multi-rank run (issue #20) instead of e2e.py
#   E2E_SCRIPT=gpu/model_path.py bash gpu/run_gpu.sh  the default-kernelize model path (issue 33)
#   E2E_SCRIPT=gpu/arch_check.py bash gpu/run_gpu.sh  a 10.0-only build refused on this GPU (issue 34)
# Needs .whl/ (gpu/build_wheels.sh) carried along; installs it into /tmp/site when the device
# command has not already done so, finds git (unpacking the carried .deb if the machine has
# none), then runs gpu/e2e.py. Writes $OUT/log.txt, results.json, verify.json, triton_check.json;
# prints a summary table last. Exit 1 when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kernlock-gpu-out}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
SITE="${SITE:-/tmp/site}"
WHEELS="${WHEELS:-.whl}"
start=$(date +%s)

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
"$PY" -c 'import sys, platform, torch; print("python", sys.version.split()[0], sys.executable); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "cxx11abi", torch.compiled_with_cxx11_abi(), platform.machine())'
"$PY" -c 'import triton; print("triton", triton.__version__)' 2>/dev/null || echo "triton: not importable"
ldd --version 2>/dev/null | head -1

echo "== wheels -> $SITE"
if [ ! -d "$SITE/kernels" ] || [ ! -d "$SITE/kernlock" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
    || { echo "FATAL: wheel install failed"; exit 1; }
else
  echo "already installed"
fi
case ":${PYTHONPATH:-}:" in *":$SITE:"*) ;; *) export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" ;; esac
export PATH="$SITE/bin:$PATH"  # console scripts of the carried wheels (trl)

# The test Hub serves git repositories through the git CLI.
if ! command -v git >/dev/null; then
  if [ -f "$WHEELS/deb/git.deb" ] && command -v dpkg >/dev/null; then
    echo "git missing: unpacking the carried git .deb under /tmp/gitroot"
    dpkg -x "$WHEELS/deb/git.deb" /tmp/gitroot
    export PATH="/tmp/gitroot/usr/bin:$PATH" GIT_EXEC_PATH=/tmp/gitroot/usr/lib/git-core \
           GIT_TEMPLATE_DIR=/tmp/gitroot/usr/share/git-core/templates
  fi
fi
git --version || echo "FATAL-ish: no git; the hub step and everything after it will fail"

# A kernlock wheel older than the checkout would test stale code: prefer the checkout then.
stale=$("$PY" - "$SITE" <<'PYEOF'
import hashlib, sys
from pathlib import Path
site, checkout = Path(sys.argv[1]) / "kernlock", Path("kernlock")
h = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
print(sum(1 for s in checkout.rglob("*.py") if not (site / s.relative_to(checkout)).is_file() or h(site / s.relative_to(checkout)) != h(s)))
PYEOF
)
if [ "${stale:-0}" != "0" ]; then
  echo "WARNING: the kernlock wheel differs from the checkout in $stale files; using the checkout's kernlock (rebuild with gpu/build_wheels.sh)"
  export PYTHONPATH="$PWD:$PYTHONPATH"
fi
(cd "$(mktemp -d)" && "$PY" -c 'import kernlock, kernels, transformers, huggingface_hub as h; print("kernlock", kernlock.__file__); print("kernels", kernels.__file__); print("transformers", transformers.__version__, "huggingface_hub", h.__version__)') \
  || echo "FATAL-ish: imports failed"
echo "setup took $(( $(date +%s) - start ))s"

echo "== e2e"
"$PY" "${E2E_SCRIPT:-gpu/e2e.py}" --out "$OUT" "$@"
rc=$?
echo "total $(( $(date +%s) - start ))s, exit $rc"
exit $rc
