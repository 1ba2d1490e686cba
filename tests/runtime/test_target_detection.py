"""Targets: the grammar and detection of the running environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernlock._internal.compat.kernels_api import kernels_target
from kernlock._internal.host import current_target
from kernlock._internal.spec.target import parse_target
from kernlock.errors import TargetError


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("torch2.13-cxx11-cpu-x86_64-linux", "torch2.13-cxx11-cpu-x86_64-linux"),
        ("torch2.9-cu128-x86_64-linux", "torch2.9-cxx11-cu128-x86_64-linux"),
        ("torch2.8-cxx98-cu126-x86_64-linux", "torch2.8-cxx98-cu126-x86_64-linux"),
        ("torch2.11-cxx11-cu130-aarch64-linux", "torch2.11-cxx11-cu130-aarch64-linux"),
        ("torch2.9-metal-aarch64-darwin", "torch2.9-metal-aarch64-darwin"),
        ("torch2.8-rocm63-x86_64-linux", "torch2.8-cxx11-rocm63-x86_64-linux"),
    ],
)
def test_target_grammar_round_trips(text: str, canonical: str) -> None:
    assert str(parse_target(text)) == canonical
    assert parse_target(canonical) == parse_target(text)


@pytest.mark.parametrize("text", ["torch2-cpu-x86_64-linux", "torch2.13-gpu-x86_64-linux", "cpu", "", "torch2.13-cpu-x86_64"])
def test_bad_targets_explain_the_grammar(text: str) -> None:
    with pytest.raises(TargetError, match="expected torch<major>.<minor>"):
        parse_target(text)


def test_cheap_detection_agrees_with_kernels_detection() -> None:
    assert current_target() == kernels_target()


def test_cheap_detection_does_not_import_torch() -> None:
    code = "import sys; from kernlock._internal.host import current_target; current_target(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
