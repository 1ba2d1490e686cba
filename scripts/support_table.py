"""Write the support table of docs/reference/supported-versions.md from the last matrix run (docs/matrix/*.json, written by `nox -s matrix`).

    python scripts/support_table.py           # rewrite the table in docs/reference/supported-versions.md
    python scripts/support_table.py --check   # exit 1 if that page's table is not the one the results give
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- support-table:start -->", "<!-- support-table:end -->"


def _order(record: dict) -> tuple:
    requested = record["requested"]
    installed = record["installed"] or {}  # the TRL cell requests no versions: order it by what pip picked
    versions = tuple(Version(requested.get(p) or installed.get(p) or "0")
                     for p in ("kernels", "transformers", "huggingface_hub", "torch"))
    return (*versions, record["cell"])  # the cell's name breaks ties: the same order on every file system


def table(results: Path) -> str:
    """The Markdown table of every recorded cell, newest kernels and Transformers first."""
    records = sorted((json.loads(p.read_text()) for p in results.glob("*.json")), key=_order, reverse=True)
    if not records:
        raise SystemExit(f"no matrix results in {results}; run `nox -s matrix` first")
    lines = [
        "| kernels | transformers | huggingface_hub | torch | result | the doctor's refusal and fix |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for record in records:
        if record["installed"] is None:  # pip could not install the cell here: what was asked, and why not
            asked = record["requested"]
            lines.append(
                f"| {asked['kernels']} | {asked['transformers'] or 'not installed'} | {asked['huggingface_hub'] or '—'} "
                f"| {asked['torch']} | {record['outcome']}: {record['problem'].replace('|', '&#124;')} | — |"
            )
            continue
        installed = record["installed"]
        slice_ = record.get("slice")
        ran = f" ({slice_['tests'] - slice_['skipped']} tests)" if slice_ else ""
        refusal = f"{record['refusal']}; `{record['fix']}`" if record["refusal"] else "—"
        transformers = installed["transformers"] or "not installed"
        if installed.get("trl"):  # the TRL cell asks for no Transformers; every other cell installs TRL beside its own
            pick = "pip's pick for" if not record["requested"].get("transformers") else "with"
            transformers += f" ({pick} trl {installed['trl']})"
        lines.append(
            f"| {installed['kernels']} | {transformers} | {installed['huggingface_hub']} | {installed['torch']} "
            f"| {record['outcome']}{ran} | {refusal.replace('|', '&#124;')} |"
        )
    python = sorted({r["installed"]["python"] for r in records if r["installed"]})
    lines.append("")
    tested = sorted({r["kernlock"] for r in records})
    lines.append(f"Python {', '.join(python)} in every cell, on a CPU-only machine (torch 2.14.1 is PyPI's CUDA 13.0 "
                 f"wheel); kernlock at {', '.join(tested)}.")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    readme = ROOT / "docs" / "reference" / "supported-versions.md"
    text = readme.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    updated = f"{head}{START}\n{table(ROOT / 'docs' / 'matrix')}\n{END}{tail}"
    if "--check" in argv:
        if updated != text:
            print("docs/reference/supported-versions.md's support table differs from docs/matrix/*.json; run: python scripts/support_table.py")
            return 1
        return 0
    readme.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
