"""The spec grammar: every accepted form and every rejected one."""

from __future__ import annotations

import pytest

from kernlock._internal.spec.kernel_spec import Origin, parse_spec, spec_from_version
from kernlock.errors import SpecError


@pytest.mark.parametrize(
    ("text", "key", "func", "paged"),
    [
        ("kernels-community/flash-attn2", "kernels-community/flash-attn2", None, False),
        ("kernels-community/flash-attn2@v2", "kernels-community/flash-attn2@v2", None, False),
        ("kernels-community/flash-attn2@dev", "kernels-community/flash-attn2@dev", None, False),
        ("org/repo@0123abcd", "org/repo@0123abcd", None, False),
        ("org/repo:my_func", "org/repo", "my_func", False),
        ("org/repo@v3:flash_attn_func", "org/repo@v3", "flash_attn_func", False),
        ("paged|org/repo", "org/repo", None, True),
        ("paged|org/repo@v1:fn", "org/repo@v1", "fn", True),
    ],
)
def test_accepted_forms(text: str, key: str, func: str | None, paged: bool) -> None:
    spec = parse_spec(text)
    assert (spec.key, spec.func, spec.paged) == (key, func, paged)


@pytest.mark.parametrize("alias", ["flash_attention_2", "flash_attention_3", "flash_attention_4", "paged|flash_attention_2"])
def test_flash_attention_aliases(alias: str) -> None:
    spec = parse_spec(alias)
    assert spec.alias == alias.split("|")[-1]
    assert spec.with_repo("kernels-community/flash-attn2").key == "kernels-community/flash-attn2"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("org/", "not an org/repo id"),
        ("a/b@", "nothing after '@'"),
        ("a/b@x@y", "more than one '@'"),
        ("a/b c", "spaces"),
        (" a/b", "spaces"),
        ("../etc/passwd", "path components"),
        ("a/../b", "path components"),
        ("", "empty"),
        ("a", "not an org/repo id"),
        ("a/b/c", "not an org/repo id"),
        ("a/b:1x", "not a Python identifier"),
        ("weird|a/b", "unknown prefix"),
        ("a--b/c", "not an org/repo id"),
    ],
)
def test_rejected_forms_name_the_spec_and_origin(text: str, problem: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(text, Origin("train.py", 12))
    message = str(raised.value)
    assert repr(text) in message
    assert "train.py:12" in message
    assert problem in message
    assert "\n" not in message


def test_integer_versions_from_kernels_dependencies() -> None:
    spec = spec_from_version("kernels-community/activation", 1)
    assert (spec.key, spec.version) == ("kernels-community/activation@v1", 1)
    with pytest.raises(SpecError):
        spec_from_version("kernels-community/activation", "1")
    with pytest.raises(SpecError):
        spec_from_version("kernels-community/activation@v1", 1)
