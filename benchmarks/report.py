"""Render a benchmark results JSON as Markdown tables and a PNG plot.

    python -m benchmarks --json R.json --markdown R.md --plot R.png   # while running
    python -m benchmarks.report R.json --markdown R.md --plot R.png   # from saved results

The plot needs matplotlib (`pip install -e ".[bench]"`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import format_table


def markdown(results: dict[str, Any]) -> str:
    """Every benchmark's table, its notes and the target summary, as Markdown."""
    lines = [
        f"Machine: {results['machine']}, Python {results['python']}; "
        f"{'quick run' if results['quick'] else 'full run'}, {results['seconds']:.0f} s.",
        "",
    ]
    for name, bench in results["benchmarks"].items():
        lines += [f"### {name}", "", *_markdown_table(bench["rows"]), ""]
        lines += [f"* {note}" for note in bench["notes"]]
        if bench["notes"]:
            lines.append("")
    lines += ["### targets", "", *_markdown_table(results["summary"]), ""]
    return "\n".join(lines)


def _markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        out.append("| " + " | ".join(str(row.get(c, "")).replace("|", "\\|") for c in columns) + " |")
    return out


def plot(results: dict[str, Any], path: Path) -> None:
    """Lock time and time to kernel ready vs number of kernels, kernlock next to the anchors."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        raise SystemExit('the plot needs matplotlib: pip install -e ".[bench]"') from None
    benches = results["benchmarks"]
    figure, (lock_axes, load_axes) = plt.subplots(1, 2, figsize=(11, 4.2))
    for tool, colour in (("kernels lock", "tab:gray"), ("kernlock lock", "tab:blue")):
        for latency, style in ((0, ":"), (50, "-")):
            points = sorted((r["kernels"], r["median_ms"] / 1000) for r in benches.get("lock", {}).get("rows", [])
                            if r["tool"] == tool and r["latency_ms"] == latency)
            if points:
                lock_axes.plot(*zip(*points, strict=True), style, marker="o", color=colour, label=f"{tool}, {latency} ms/request")
    lock_axes.set(title="Lock (cold cache, fresh process)", xlabel="kernels", ylabel="seconds", yscale="log")
    for mode, colour in (("unlocked get_kernel", "tab:gray"), ("locked get_kernel", "tab:blue")):
        for latency, style in ((0, ":"), (50, "-")):
            points = sorted((r["kernels"], r["ready_ms"]) for r in benches.get("load", {}).get("rows", [])
                            if r.get("kernels") and r["load"] == mode and r["latency_ms"] == latency)
            if points:
                label = "kernlock.apply() + get_kernel" if mode.startswith("locked") else "get_kernel (unlocked)"
                load_axes.plot(*zip(*points, strict=True), style, marker="o", color=colour, label=f"{label}, {latency} ms/request")
    load_axes.set(title="Time to kernels ready (warm cache, fresh process)", xlabel="kernels", ylabel="ms")
    for axes in (lock_axes, load_axes):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(f"kernlock benchmarks — {results['machine']}", fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(results: dict[str, Any], markdown_path: Path | None, plot_path: Path | None) -> None:
    """Write the requested renderings of `results`."""
    if markdown_path is not None:
        markdown_path.parent.mkdir(parents=True, exist_ok=True)
        markdown_path.write_text(markdown(results))
    if plot_path is not None:
        plot(results, plot_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as error:
        parser.error(f"cannot read results {args.results} ({error}); write them with python -m benchmarks --json PATH")
    write(results, args.markdown, args.plot)
    if args.markdown is None and args.plot is None:
        print(format_table(results["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
