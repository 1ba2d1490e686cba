"""`python -m benchmarks [--quick] [--only NAME] [--json PATH] [--markdown PATH] [--plot PATH]`:
run benchmarks, print tables, write JSON (and Markdown tables, and a PNG plot with matplotlib)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.harness import Result, Target, Workspace, format_table
from benchmarks.report import write

BENCHMARKS = ("lock", "load", "cold", "verify", "signatures", "scaling", "startup", "cluster", "resume", "download",
              "models")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sizes (smoke run)")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only this benchmark (repeatable)")
    parser.add_argument("--json", type=Path, help="results JSON path (default: a temp dir)")
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    parser.add_argument("--plot", type=Path, help="also plot lock and load times here (PNG; needs matplotlib)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    args = parser.parse_args(argv)
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        parser.error('--plot needs matplotlib; install it with: pip install -e ".[bench]"')

    selected = [name for name in BENCHMARKS if not args.only or name in args.only]
    ws = Workspace(keep=args.keep)
    results: list[Result] = []
    started = time.perf_counter()
    try:
        for name in selected:
            print(f"== {name} ...", flush=True)
            t0 = time.perf_counter()
            try:
                module = importlib.import_module(f"benchmarks.{name}")
                result = module.run(ws, args.quick)
            except Exception:
                traceback.print_exc()
                result = Result(name, targets=[Target(f"{name}: benchmark ran", "error", "no error", False)])
            result.data["seconds"] = round(time.perf_counter() - t0, 1)
            results.append(result)
            print(format_table(result.rows))
            for note in result.notes:
                print(f"  note: {note}")
            print(f"   ({result.data['seconds']} s)\n", flush=True)
    finally:
        ws.close()

    targets = [t.row() for r in results for t in r.targets]
    print("== summary")
    print(format_table(targets))
    out = args.json or Path(tempfile.mkdtemp(prefix="kernlock-bench-results-")) / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "quick": args.quick,
        "python": sys.version.split()[0],
        "machine": _machine(),
        "seconds": round(time.perf_counter() - started, 1),
        "benchmarks": {r.name: {"rows": r.rows, "targets": [t.row() for t in r.targets], "notes": r.notes,
                                "data": r.data} for r in results},
        "summary": targets,
    }
    text = json.dumps(report, indent=2, default=str)
    out.write_text(text)
    write(json.loads(text), args.markdown, args.plot)
    print(f"\nresults: {out}  ({time.perf_counter() - started:.0f} s)")
    return 0 if all(t["status"] == "PASS" for t in targets) else 1


def _machine() -> str:
    """OS, CPU model and core count, memory: what the figures depend on."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        memory = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
        model += f", {memory:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({model})"


if __name__ == "__main__":
    sys.exit(main())
