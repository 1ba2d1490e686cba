"""Files a project names are read bounded and parsed without tracebacks (issue 44, classes 5 and 11): an advisory
file that is `/dev/zero` or a FIFO, and a checkpoint's `kernlock.json` that is `/dev/zero`, nested too deeply or of
the wrong types, are each one line and a non-zero exit, never a hang, a MemoryError or a traceback."""

from __future__ import annotations

import json
import os

import pytest
from test_advisories import ADVISED, EXAMPLE

from helpers import FA2, cli


@pytest.mark.parametrize("shape", ["dev-zero", "fifo"])
def test_an_advisory_file_that_is_a_device_or_a_fifo_is_one_line(locked_project, shape: str) -> None:
    project = locked_project([f"{FA2}@v2"], extra=ADVISED, files={"advisories.toml": EXAMPLE.read_text()}).path
    advisories = project / "advisories.toml"
    advisories.unlink()
    if shape == "fifo":
        os.mkfifo(advisories)  # no writer: a plain open would block forever
    else:
        advisories.symlink_to("/dev/zero")  # a plain read would never end

    result = cli("verify", cwd=project)

    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"kernlock: error: advisories advisories.toml: cannot be read ({advisories} is not a regular file "
        "(a device, FIFO or socket)); fix: fix or remove it in [tool.kernlock] advisories"]


HOSTILE_RECORDS = {
    "dev-zero": None,
    "deep": "[" * 200_000,
    "not-an-object": "[123]",
    "target-not-a-string": json.dumps({"target": ["x"], "kernels": []}),
    "kernel-not-an-object": json.dumps({"target": "torch2.11-cxx11-cu130-x86_64-linux", "kernels": [123]}),
    "commit-not-a-string": json.dumps({"target": "torch2.11-cxx11-cu130-x86_64-linux",
                                       "kernels": [{"repo": FA2, "commit": 7, "variant": "v"}]}),
    "content-not-a-string": json.dumps({"target": "torch2.11-cxx11-cu130-x86_64-linux",
                                        "kernels": [{"repo": FA2, "commit": "c", "variant": "v", "content": {}}]}),
}
REASONS = {
    "dev-zero": "is not a regular file (a device, FIFO or socket)",
    "deep": "nested too deeply to be a run record",
    "not-an-object": "not a kernlock run record (no string `target`)",
    "target-not-a-string": "not a kernlock run record (no string `target`)",
    "kernel-not-an-object": "kernels[0] is not a recorded kernel (strings repo, commit, variant)",
    "commit-not-a-string": "kernels[0] is not a recorded kernel (strings repo, commit, variant)",
    "content-not-a-string": "kernels[0]: `spec` and `content` must be strings",
}


@pytest.mark.parametrize("shape", sorted(HOSTILE_RECORDS))
def test_a_hostile_checkpoint_record_is_one_line_and_exit_1(locked_project, shape: str) -> None:
    project = locked_project([f"{FA2}@v2"]).path
    checkpoint = project / "out" / "checkpoint-1"
    checkpoint.mkdir(parents=True)
    record = checkpoint / "kernlock.json"
    text = HOSTILE_RECORDS[shape]
    if text is None:
        record.symlink_to("/dev/zero")
    else:
        record.write_text(text)

    result = cli("verify", "--against", "out/checkpoint-1", cwd=project)

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    problems = [line for line in result.output.splitlines() if "no readable kernlock.json" in line]
    assert len(problems) == 1 and REASONS[shape] in problems[0], result.output
    assert sorted(p.name for p in checkpoint.iterdir()) == ["kernlock.json"]
