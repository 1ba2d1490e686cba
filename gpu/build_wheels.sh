#!/usr/bin/env bash
# Fill .whl/ with what the GPU machine (no registry; Python 3.12, torch 2.11, transformers 5.17,
# huggingface_hub 1.33, no kernels) needs to run gpu/run_gpu.sh, and build kernlock's own wheel.
# Idempotent: re-downloads nothing already there, drops stale versions, always rebuilds kernlock.
# Run it right before a GPU run (the kernlock wheel must match the checkout).
#   gpu/build_wheels.sh            (PYTHON=... for the interpreter running pip; default /work/venv/bin/python)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$root/.venv/bin/python}"
cd "$root"
exclude="$(git rev-parse --git-common-dir)/info/exclude"   # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo /.whl/ >> "$exclude"
mkdir -p .whl

# name==version, as tested here (/work/venv). The machine already has torch, triton, numpy,
# safetensors 0.8.0, tokenizers 0.23.2, pyyaml, tqdm, fsspec, accelerate (KINDS.md).
PINS=(
  kernels==0.19.1            # Rust extension, one wheel per CPython (cp312 here); sigstore is an optional extra
  transformers==5.25.0       # the machine has 5.17; what `pip install trl` gives today (needs kernels>=0.19.1)
  huggingface_hub==2.4.0     # transformers 5.25 needs >=2.4,<3; kernels 0.19 >=1.32
  httpx2==2.16.2             # huggingface_hub 2.x's HTTP client
  httpcore2==2.16.2
  truststore==0.10.5         # imported by httpcore2
  hf-xet==1.8.0              # huggingface_hub 2.4 requires >=1.6,<2
  anyio==4.16.0              # httpx2 needs >=4.10
  typing_extensions==4.16.0  # anyio 4.16 needs >=4.16 on Python < 3.15
  idna==3.20                 # httpx2 needs >=3.18
  h11==0.16.0
  regex==2026.11.19          # transformers 5.25 checks regex>=2025.10.22 at import
  tomlkit==0.15.3
  click==8.5.1               # huggingface_hub 2.4 needs >=8.4.2
  packaging==26.4
  filelock==4.3.1
  rfc8785==0.1.4             # kernlock.testing (test Hub's Sigstore, fixtures' signer): the machine has neither
  cryptography==50.0.2       # these nor cffi; kernlock's own load path imports none of them
  cffi==2.1.1
  pycparser==3.12
  trl==1.16.0                # `kernlock run -- trl sft` on the GPU (gpu/model_path.py); the machine has no trl
  datasets==5.2.0            # trl's; needs dill, multiprocess and pyarrow>=24 (the machine's pandas/xxhash/fsspec serve)
  dill==0.4.1
  multiprocess==0.70.19
)
names=()
for entry in "${PINS[@]}"; do
  pin="${entry%%#*}"; pin="${pin// /}"
  names+=("$pin")
done

platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 \
         manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
  platforms+=(--platform "$p")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "${names[@]}"

# Keep exactly one wheel per pinned name (drop other versions left by earlier pins).
"$PY" - "${names[@]}" <<'PYEOF'
import re, sys
from pathlib import Path
norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()
wanted = {norm(p.split("==")[0]): p.split("==")[1] for p in sys.argv[1:]}
for whl in sorted(Path(".whl").glob("*.whl")):
    name, version = whl.name.split("-")[:2]
    if norm(name) == "kernlock":
        continue
    if wanted.get(norm(name)) != version:
        print(f"removing stale {whl.name}")
        whl.unlink()
missing = set(wanted) - {norm(w.name.split("-")[0]) for w in Path(".whl").glob("*.whl")}
if missing:
    sys.exit(f"missing wheels: {sorted(missing)}")
PYEOF

# kernlock itself, from this checkout (hatchling comes from the build-isolation environment).
rm -f .whl/kernlock-*.whl
"$PY" -m pip wheel -q --no-deps -w .whl "$root"
ls -l .whl/*.whl | awk '{printf "%9d  %s\n", $5, $NF}'

# git, in case the machine has none (the test Hub serves git repositories through the git CLI):
# run_gpu.sh unpacks it under /tmp only when `git` is missing there.
if command -v apt-get >/dev/null && [ ! -f .whl/deb/git.deb ]; then
  mkdir -p .whl/deb
  if (cd .whl/deb && apt-get download -q git >/dev/null 2>&1); then
    mv .whl/deb/git_*.deb .whl/deb/git.deb
  else
    echo "note: could not download git's .deb (no fallback if the GPU machine lacks git)"
  fi
fi
du -sh .whl
