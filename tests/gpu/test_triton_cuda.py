"""The fixture flash-attn2's Triton forward compiled on this GPU (`check_triton.py`): dense cases
over bf16/fp16, GQA, head dims 64-256 and unequal lengths, varlen, and the backward, vs SDPA."""

from __future__ import annotations

import json
from collections.abc import Callable

import check_triton
import pytest

pytestmark = pytest.mark.gpu


def test_the_triton_forward_matches_sdpa_on_cuda(
        record_property: Callable[[str, object], None]) -> None:
    report = check_triton.check("cuda")
    failed = [case for case in report["cases"] if not case["ok"]]
    assert not failed, json.dumps(failed, indent=1)[:4000]
    summary = report["summary"]
    assert summary["cases"] == 51
    for key in ("cases", "max_rel_err_forward", "max_rel_err_backward"):
        record_property(key, summary[key])
