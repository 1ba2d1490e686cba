#!/usr/bin/env bash
# Write the locks the GPU run uses, against the bundled test Hub over this checkout's
# deterministic fixture repos (same commit SHAs on every machine):
#   gpu/project/kernels.lock         covers torch2.11-cxx11-cu130-x86_64-linux (the lent H100/H200)
#   gpu/project-nocuda/kernels.lock  covers only torch2.13-cxx11-cpu-x86_64-linux (the failure case)
# Each pyproject declares its one target, so the lock covers exactly that environment
# (not also the machine that locks). Rerun and commit the result whenever fixtures/ changes (the fixture commits change with it).
# Usage: gpu/make_lock.sh            (PYTHON=... to pick the interpreter; default /work/venv/bin/python)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
PY="${PYTHON:-/work/venv/bin/python}"
work="$(mktemp -d)"
hub_pid=
trap '[ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null; rm -rf "$work"' EXIT

"$PY" -m kernlock.testing.hub --port 0 --workdir "$work/hub" --fixtures "$root/fixtures" > "$work/hub.env" &
hub_pid=$!
for _ in $(seq 300); do grep -q HF_ENDPOINT "$work/hub.env" 2>/dev/null && break; sleep 0.1; done
export "$(grep HF_ENDPOINT "$work/hub.env")"
export "$(grep KERNLOCK_SIGSTORE_TRUSTED_ROOT "$work/hub.env")"  # the test Sigstore's root: the fixtures' bundles
export HF_HOME="$work/hf-home"
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE HF_HUB_CACHE KERNELS_CACHE KERNLOCK_LOCKFILE KERNLOCK_APPLY
echo "test Hub: $HF_ENDPOINT"

lock() {  # lock DIR TARGET
  local dir="$here/$1"
  mkdir -p "$dir"
  rm -f "$dir/kernels.lock"
  cat > "$dir/pyproject.toml" <<TOML
[project]
name = "kernlock-gpu-e2e"
version = "0"

[tool.kernlock]
kernels = ["kernels-community/flash-attn2"]
targets = ["$2"]
TOML
  (cd "$dir" && "$PY" -m kernlock lock --target "$2")
  echo "wrote $dir/kernels.lock"
}

lock project torch2.11-cxx11-cu130-x86_64-linux
lock project-nocuda torch2.13-cxx11-cpu-x86_64-linux
