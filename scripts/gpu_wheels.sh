#!/usr/bin/env bash
# Fill .whl/ (ignored; carried to the GPU machine) with what the lent GPU machine lacks to run
# `pytest -m gpu tests/gpu` (scripts/gpu_run.sh): the versions installed in this checkout's .venv
# (`make install`), as CPython 3.12 manylinux wheels, a fresh kernlock wheel, and git's .deb.
# The machine (no registry, no internet) has Python 3.12, torch 2.11.0+cu130, triton 3.6,
# transformers 5.17, huggingface_hub 1.33, numpy, safetensors, tokenizers, accelerate, pandas,
# pyarrow, xxhash, pyyaml, tqdm, fsspec, jinja2, psutil (KINDS.md of the device tool).
# Idempotent: downloads only what is missing, drops other versions, always rebuilds kernlock.
#   scripts/gpu_wheels.sh          (PYTHON=... for the interpreter with the tested set; default .venv)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$root/.venv/bin/python}"
cd "$root"
exclude="$(git rev-parse --git-common-dir)/info/exclude"   # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo /.whl/ >> "$exclude"
mkdir -p .whl

NAMES=(
  kernels            # a Rust extension: one wheel per CPython; the machine has none
  transformers       # the machine has 5.17; 5.25 kernelizes by default (the model path tests)
  huggingface_hub    # transformers 5.25 needs >=2.4,<3
  httpx2 httpcore2 truststore hf-xet anyio typing_extensions idna h11   # huggingface_hub 2.x's client
  regex              # transformers 5.25 checks regex>=2025.10.22 at import
  tomlkit click packaging filelock                                       # kernlock's own
  rfc8785 cryptography cffi pycparser   # kernlock.testing (the test Hub's Sigstore, the signer)
  trl datasets dill multiprocess        # `kernlock run -- trl sft` (tests/gpu/test_trl_sft.py)
  pytest pluggy iniconfig pygments      # the runner, as the suite runs it here
)
pins=()
for name in "${NAMES[@]}"; do
  pins+=("$name==$("$PY" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")")
done

platforms=()
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 \
         manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
  platforms+=(--platform "$p")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "${pins[@]}"

# Exactly one wheel per name, at the tested version.
"$PY" - "${pins[@]}" <<'PYEOF'
import re
import sys
from pathlib import Path

def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()

wanted = {norm(pin.split("==")[0]): pin.split("==")[1] for pin in sys.argv[1:]}
for wheel in sorted(Path(".whl").glob("*.whl")):
    name, version = wheel.name.split("-")[:2]
    if norm(name) != "kernlock" and wanted.get(norm(name)) != version:
        print(f"removing {wheel.name}")
        wheel.unlink()
missing = set(wanted) - {norm(w.name.split("-")[0]) for w in Path(".whl").glob("*.whl")}
if missing:
    sys.exit(f"missing wheels: {sorted(missing)}")
PYEOF

# kernlock itself, from this checkout (its metadata and console script; gpu_run.sh puts the
# checkout's sources first on the path, so the tests always run the code they are carried with).
rm -f .whl/kernlock-*.whl
"$PY" -m pip wheel -q --no-deps -w .whl "$root"

# git, for a machine without it (the test Hub serves git repositories through the git CLI).
if command -v apt-get >/dev/null && [ ! -f .whl/deb/git.deb ]; then
  mkdir -p .whl/deb
  if (cd .whl/deb && apt-get download -q git >/dev/null 2>&1); then
    mv .whl/deb/git_*.deb .whl/deb/git.deb
  else
    echo "note: could not download git's .deb (no fallback if the GPU machine lacks git)"
  fi
fi
ls -l .whl/*.whl | awk '{printf "%9d  %s\n", $5, $NF}'
du -sh .whl
