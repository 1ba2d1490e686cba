#!/usr/bin/env bash
# kernlock end to end on the bundled test Hub: lock -> verify -> train under kernlock.apply().
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
# The Hub and its caches go at exit; the project and its lock stay (their path is printed last).
trap 'kill "$hub_pid" 2>/dev/null || true; rm -rf "$work/hub" "$work/hf-home" "$work/hub.env"' EXIT

echo "== starting the bundled test Hub (real git repos of fixture kernels)"
python -m kernlock.testing.hub --port 0 --workdir "$work/hub" > "$work/hub.env" &
hub_pid=$!
for _ in $(seq 100); do grep -q HF_ENDPOINT "$work/hub.env" 2>/dev/null && break; sleep 0.2; done
export "$(grep HF_ENDPOINT "$work/hub.env")"
export "$(grep KERNLOCK_SIGSTORE_TRUSTED_ROOT "$work/hub.env")"  # the test Sigstore's root: the fixtures' bundles
export HF_HOME="$work/hf-home"
echo "   $HF_ENDPOINT"

cp -r "$here/examples/demo/." "$work/project"
cd "$work/project"

echo "== kernlock lock (this machine + a CUDA 12.8 cluster)"
kernlock lock --target torch2.12-cxx11-cu128-x86_64-linux

echo "== kernlock verify --all-targets"
kernlock verify --all-targets

echo "== training under kernlock.apply()"
python train.py

echo "== kept: the project at $work/project, its lock at $work/project/kernels.lock"
echo "   (its Hub was the demo's test Hub, now stopped: read the lock, or run make demo again to use it)"
