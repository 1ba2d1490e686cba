"""Per-target overrides: parsing `[tool.kernlock.overrides]`, which targets a rule matches, the pin it gives."""

from __future__ import annotations

import re

import pytest

from kernlock._internal.spec.kernel_spec import parse_spec
from kernlock._internal.spec.overrides import parse_overrides
from kernlock._internal.spec.target import parse_target
from kernlock.errors import ConfigError, SpecError

FA2 = "kernels-community/flash-attn2"
CPU = parse_target("torch2.13-cxx11-cpu-x86_64-linux")
CU128 = parse_target("torch2.12-cxx11-cu128-x86_64-linux")
CU128_OLD_TORCH = parse_target("torch2.9-cxx11-cu128-x86_64-linux")
CU130 = parse_target("torch2.11-cxx11-cu130-x86_64-linux")
ARM = parse_target("torch2.10-cxx11-cu128-aarch64-linux")


def rules(*entries: dict) -> tuple:
    return parse_overrides({FA2: list(entries)}, "pyproject.toml")


@pytest.mark.parametrize(("entry", "problem"), [
    ({"revision": "v2", "reason": "x"}, "say which targets it applies to (backend, torch, cpu or os)"),
    ({"backend": "cu128", "reason": "x"}, "give exactly one of version or revision"),
    ({"backend": "cu128", "version": 2, "revision": "v2", "reason": "x"}, "give exactly one of version or revision"),
    ({"backend": "cu128", "version": 2}, "give a reason (it is shown by kernlock show and explain)"),
    ({"backend": "cu128", "version": 2, "reason": "  "}, "give a reason"),
    ({"torch": ">>2", "version": 2, "reason": "x"}, "torch = '>>2' is not a version specifier"),
    ({"backend": "cu128", "version": "2", "reason": "x"}, "version must be an integer"),
    ({"backend": "cu128", "version": True, "reason": "x"}, "version must be an integer"),
    ({"backend": "cu128", "version": 2, "reason": "x", "when": "always"}, "unknown key 'when'"),
])
def test_bad_overrides_are_config_errors_naming_the_entry(entry: dict, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f'pyproject.toml: [tool.kernlock.overrides."{FA2}"][0]')) as raised:
        rules(entry)
    assert problem in str(raised.value)


def test_a_pin_that_is_not_a_valid_spec_is_refused_when_read() -> None:
    with pytest.raises(SpecError, match=r"flash-attn2@a@b': more than one '@'"):
        rules({"backend": "cu128", "revision": "a@b", "reason": "x"})


def test_an_overrides_table_must_be_keyed_by_repo() -> None:
    with pytest.raises(ConfigError, match=r"must be a table keyed by repo"):
        parse_overrides(["cu128"], "pyproject.toml")
    with pytest.raises(ConfigError, match=r"\[0\] must be a table"):
        parse_overrides({FA2: ["cu128"]}, "pyproject.toml")


def test_matching_by_backend_pattern_torch_specifier_cpu_and_os() -> None:
    [by_backend, by_torch, by_cpu] = rules(
        {"backend": "cu12*", "revision": "v2", "reason": "GQA backward"},
        {"torch": "<2.11", "backend": "cu*", "version": 3, "reason": "old torch"},
        {"cpu": "aarch64", "os": "linux", "version": 1, "reason": "arm build"},
    )
    assert [by_backend.matches(t) for t in (CPU, CU128, CU130, ARM)] == [False, True, False, True]
    assert [by_torch.matches(t) for t in (CU128, CU128_OLD_TORCH, ARM, CPU)] == [False, True, True, False]
    assert [by_cpu.matches(t) for t in (CU128, ARM)] == [False, True]
    [exact] = rules({"torch": "2.12", "version": 2, "reason": "x"})
    assert exact.matches(CU128) and not exact.matches(CU130)  # a bare version means ==


def test_the_pin_and_its_description() -> None:
    [by_revision, by_version] = rules({"backend": "cu128", "torch": ">=2.9", "revision": "v2", "reason": " why "},
                                      {"backend": "cu128", "version": 3, "reason": "x"})
    assert (by_revision.reason, by_revision.when, by_revision.use) == ("why", "backend=cu128 torch>=2.9", "v2")
    assert by_version.use == "v3"
    base = parse_spec(f"{FA2}:flash_attn_func")
    assert by_revision.spec(base).key == f"{FA2}@v2"
    assert by_version.spec(base).key == f"{FA2}@v3"
