#!/usr/bin/env bash
# CI: the pinned set (requirements-dev.txt) resolves from the public index alone, for every Python the
# README names: no machine-local wheels, find-links, extra indexes or constraints (PIP_CONFIG_FILE=/dev/null).
# Fails on ResolutionImpossible. Pythons: $PIN_PYTHONS (default: pyenv's 3.11, 3.12 and 3.13, else python3.1x).
set -uo pipefail
cd "$(dirname "$0")/.."
pythons=${PIN_PYTHONS:-}
if [ -z "$pythons" ]; then
  for minor in 11 12 13; do
    found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python 2>/dev/null | tail -1)
    pythons="$pythons ${found:-$(command -v python3.$minor || true)}"
  done
fi
status=0
for python in $pythons; do
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || { status=1; continue; }
  if env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
      "$python" -m pip install --quiet --dry-run --ignore-installed -r requirements-dev.txt; then
    echo "pins resolve on Python $version (public index only)"
  else
    echo "pins do NOT resolve on Python $version (public index only)" >&2
    status=1
  fi
done
[ -n "${pythons// /}" ] || { echo "no Python 3.11-3.13 found to resolve the pins with" >&2; exit 1; }
exit $status
