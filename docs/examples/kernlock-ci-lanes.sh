#!/usr/bin/env bash
# kernlock's two CI lanes (docs/how-to/ci-lanes.md), run from the project's root:
#   kernlock-ci-lanes.sh lane1   on every push and pull request: blocking, offline
#   kernlock-ci-lanes.sh lane2   nightly, against the Hub: fails when a locked kernel can be updated
set -euo pipefail

lane1() {
  # the lock is valid, fresh against pyproject.toml and covers every target; no Hub request
  HF_HUB_OFFLINE=1 kernlock verify --all-targets
}

lane2() {
  # what re-resolving every kernel would change: kept as JSON (the job's artifact), printed old -> new
  kernlock lock --upgrade --dry-run --json > kernlock-upgrade.json
  python - kernlock-upgrade.json <<'PY'
import json, sys
for change in json.load(open(sys.argv[1]))["changes"]:
    old, new = (change[key] or "-" for key in ("old", "new"))
    print(f"{change['spec']}: {old[:12]} -> {new[:12]} ({change['reason']})")
PY
  # exit 1 when a locked kernel can be updated: a moved branch, a newer version with builds, an advisory
  kernlock outdated --exit-code
}

case "${1:-}" in
  lane1) lane1 ;;
  lane2) lane2 ;;
  *) echo "usage: $0 lane1|lane2" >&2; exit 2 ;;
esac
