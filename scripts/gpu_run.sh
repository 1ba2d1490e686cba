#!/usr/bin/env bash
# The GPU tests on the lent GPU machine: install the carried wheels (scripts/gpu_wheels.sh, run here
# first) into /tmp/site, find git (unpacking the carried .deb where the machine has none), then
#   python3 -m pytest -m gpu tests/gpu --junitxml=$OUT/gpu.xml -p no:cacheprovider
# under a time limit: no test starts after $KERNLOCK_GPU_TESTS_BUDGET seconds (each left is
# reported as skipped), and SIGINT stops the run at $GPU_TESTS_TIMEOUT. Extra arguments go to
# pytest (`-k model_path`, `-x`). Writes $OUT/gpu.xml (per-test figures as junit properties) and
# $OUT/gpu.log; exits with pytest's status.
#
# Device command (carry: .whl), from the repository root:
#   bash scripts/gpu_run.sh 2>&1 | tail -80
# A subset: bash scripts/gpu_run.sh -k "model_path or arch_refusal" 2>&1 | tail -80
# Environment: OUT (default /tmp/kernlock-gpu-out), GPU_TESTS_TIMEOUT (pytest's limit, s, default
# 225), KERNLOCK_GPU_TESTS_BUDGET (default 60 s less: the longest test), PYTHON (default python3),
# SITE (default /tmp/site), WHEELS (default .whl).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kernlock-gpu-out}"
PY="${PYTHON:-python3}"
SITE="${SITE:-/tmp/site}"
WHEELS="${WHEELS:-.whl}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "no nvidia-smi"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" "$WHEELS"/*.whl || { echo "FATAL: the wheel install failed"; exit 1; }
# The checkout's sources first (the tests run the code they came with); the wheels' console
# scripts (trl) on PATH.
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
if ! command -v git >/dev/null && [ -f "$WHEELS/deb/git.deb" ]; then
  dpkg -x "$WHEELS/deb/git.deb" /tmp/gitroot
  export PATH="/tmp/gitroot/usr/bin:$PATH" GIT_EXEC_PATH=/tmp/gitroot/usr/lib/git-core \
         GIT_TEMPLATE_DIR=/tmp/gitroot/usr/share/git-core/templates
fi
git --version || echo "no git: the test Hub cannot serve the fixture repos"
"$PY" -c 'import sys, torch, triton, transformers, kernels, kernlock
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(),
      "triton", triton.__version__, "transformers", transformers.__version__,
      "kernlock from", kernlock.__file__)'
# The machine's own pytest plugins stay out (the carried pytest runs the suite as it runs here).
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONUNBUFFERED=1
limit="${GPU_TESTS_TIMEOUT:-225}"
export KERNLOCK_GPU_TESTS_BUDGET="${KERNLOCK_GPU_TESTS_BUDGET:-$((limit - 60))}"
timeout -s INT -k 20 "$limit" \
  "$PY" -m pytest -m gpu tests/gpu --junitxml="$OUT/gpu.xml" -p no:cacheprovider \
  -o junit_family=xunit1 -rA --durations=0 "$@" 2>&1 | tee "$OUT/gpu.log"
exit "${PIPESTATUS[0]}"
