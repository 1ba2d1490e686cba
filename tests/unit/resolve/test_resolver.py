"""Planning, commit choice, pins, overrides and trust of the resolver, against an in-memory Hub."""

from __future__ import annotations

import pytest

from fake_hub import FakeHub
from kernlock._internal.resolve.resolver import ResolveOptions, resolver_for
from kernlock._internal.spec.kernel_spec import parse_spec
from kernlock._internal.spec.overrides import parse_overrides
from kernlock._internal.spec.target import parse_target
from kernlock.errors import NoVariantError, ResolutionError, TrustError

CPU = parse_target("torch2.13-cxx11-cpu-x86_64-linux")
CUDA = parse_target("torch2.12-cxx11-cu128-x86_64-linux")
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CUDA_VARIANT = "torch212-cxx11-cu128-x86_64-linux"
REPO = "kernels-community/act"


def build(code: str) -> dict[str, bytes]:
    return {"__init__.py": code.encode(), "ops.py": b"OPS = 1\n"}


@pytest.fixture
def hub() -> FakeHub:
    hub = FakeHub()
    hub.add_commit(REPO, "v1", {CPU_VARIANT: build("v1"), CUDA_VARIANT: build("v1 cuda")}, tag="1.0.0")
    hub.add_commit(REPO, "v2", {CUDA_VARIANT: build("v2 cuda")})
    return hub


def resolve(hub: FakeHub, *specs: str, targets=(CPU,), previous=None, **options):
    resolver = resolver_for(hub, ResolveOptions(targets=tuple(targets), **options), previous, workers=2)
    return resolver.resolve([parse_spec(s) for s in specs]), resolver


def test_branch_tag_and_commit_specs_pin_the_same_commit(hub: FakeHub) -> None:
    commit = hub.branches[REPO]["v1"]
    lock, _ = resolve(hub, f"{REPO}@v1", f"{REPO}@1.0.0", f"{REPO}@{commit}", f"{REPO}@{commit[:10]}")
    assert {k.spec: k.commit for k in lock.kernels} == {
        f"{REPO}@v1": commit, f"{REPO}@1.0.0": commit, f"{REPO}@{commit}": commit, f"{REPO}@{commit[:10]}": commit,
    }
    kernel = lock.kernels[0]
    assert kernel.variant_for(str(CPU)).name == CPU_VARIANT
    assert {f.path for f in kernel.variant_for(str(CPU)).files} == {"__init__.py", "ops.py"}


def test_unknown_revision_names_the_branches_and_tags(hub: FakeHub) -> None:
    with pytest.raises(ResolutionError, match=r"no branch or tag 'v9' on the Hub; branches: v1, v2; tags: 1.0.0"):
        resolve(hub, f"{REPO}@v9")


def test_a_missing_version_is_named_once(hub: FakeHub) -> None:
    from kernlock._internal.spec.kernel_spec import spec_from_version

    resolver = resolver_for(hub, ResolveOptions(targets=(CPU,)), None, workers=2)
    with pytest.raises(ResolutionError) as raised:
        resolver.resolve([spec_from_version(REPO, 7)])
    assert f"{REPO}@v7: version 7 has no branch v7 on the Hub; available versions: 1, 2" in str(raised.value)


def test_no_variant_names_a_version_that_has_one(hub: FakeHub) -> None:
    hub.add_commit(REPO, "v3", {CUDA_VARIANT: build("v3 cuda")})
    with pytest.raises(NoVariantError, match=rf"{REPO}@v1 has {CPU_VARIANT} for it"):
        resolve(hub, f"{REPO}@v3")


def test_existing_pins_are_kept_until_upgraded(hub: FakeHub) -> None:
    old, _ = resolve(hub, f"{REPO}@v1")
    moved = hub.add_commit(REPO, "v1", {CPU_VARIANT: build("v1 moved")})
    hub.calls.clear()
    kept, _ = resolve(hub, f"{REPO}@v1", previous=old)
    assert kept.kernels == old.kernels
    assert hub.calls == []  # a kept pin needs no Hub request
    upgraded, _ = resolve(hub, f"{REPO}@v1", previous=old, upgrade=frozenset({REPO}))
    assert upgraded.kernels[0].commit == moved != old.kernels[0].commit


def test_a_new_target_extends_a_kept_pin_at_the_same_commit(hub: FakeHub) -> None:
    old, _ = resolve(hub, f"{REPO}@v1")
    hub.add_commit(REPO, "v1", {CPU_VARIANT: build("moved"), CUDA_VARIANT: build("moved")})
    both, _ = resolve(hub, f"{REPO}@v1", targets=(CPU, CUDA), previous=old)
    [kernel] = both.kernels
    assert kernel.commit == old.kernels[0].commit
    assert kernel.variant_for(str(CUDA)).name == CUDA_VARIANT


def test_an_override_gives_matching_targets_their_own_entry(hub: FakeHub) -> None:
    rules = parse_overrides({REPO: [{"backend": "cu128", "revision": "v2", "reason": "v1 breaks on cu128"}]}, "pyproject.toml")
    lock, _ = resolve(hub, f"{REPO}@v1", targets=(CPU, CUDA), overrides=rules)
    by_target = {t: k for k in lock.kernels for v in k.variants for t in v.targets}
    assert by_target[CPU].commit == hub.branches[REPO]["v1"] and by_target[CPU].override is None
    cuda = by_target[CUDA]
    assert cuda.commit == hub.branches[REPO]["v2"] and cuda.override.reason == "v1 breaks on cu128"


def test_untrusted_publishers_need_the_allowlist(hub: FakeHub) -> None:
    repo = "someone/kernel"
    hub.add_commit(repo, "v1", {CPU_VARIANT: build("x")})
    with pytest.raises(TrustError, match="not a trusted kernel publisher"):
        resolve(hub, f"{repo}@v1")
    lock, _ = resolve(hub, f"{repo}@v1", trust_allowlist=frozenset({repo}))
    assert lock.kernels[0].trust == "allowlist"


def test_a_renamed_repo_is_locked_under_its_new_name(hub: FakeHub) -> None:
    hub.renamed["kernels-community/old-act"] = REPO
    lock, resolver = resolve(hub, "kernels-community/old-act@v1")
    [kernel] = lock.kernels
    assert kernel.repo == REPO and kernel.aliases == ("kernels-community/old-act",)
    assert any("renamed" in w for w in resolver.warnings)


def test_planning_splits_targets_between_the_spec_and_matching_overrides() -> None:
    from kernlock._internal.resolve.jobs import plan_jobs

    spec = parse_spec(f"{REPO}@v1")
    [alone] = plan_jobs(spec, (CPU, CUDA), ())
    assert (alone.spec.key, alone.targets, alone.override) == (f"{REPO}@v1", (CPU, CUDA), None)
    rules = parse_overrides({REPO: [{"backend": "cu*", "version": 2, "reason": "r"}],
                             "other/repo": [{"os": "linux", "version": 3, "reason": "r"}]}, "pyproject.toml")
    [own, overridden] = plan_jobs(spec, (CPU, CUDA), rules)
    assert (own.spec.key, own.targets, own.override) == (f"{REPO}@v1", (CPU,), None)
    assert (overridden.key, overridden.spec.key, overridden.targets) == (f"{REPO}@v1", f"{REPO}@v2", (CUDA,))
    assert (overridden.override.when, overridden.override.use) == ("backend=cu*", "v2")


def test_a_bare_spec_follows_the_resolving_targets_default_and_warns_where_others_differ(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kernlock._internal.resolve.resolver

    defaults = {str(CPU): 1, str(CUDA): 2}
    monkeypatch.setattr(kernlock._internal.resolve.resolver, "default_version", lambda repo, target: (defaults[str(target)], "stub default"))
    lock, resolver = resolve(hub, REPO, targets=(CPU, CUDA), resolving_target=CPU)
    [kernel] = lock.kernels
    assert kernel.commit == hub.branches[REPO]["v1"]
    assert [w for w in resolver.warnings if "would default to another version" in w] == [
        f"{REPO}: this Transformers release would default to another version on {CUDA}; "
        f"the lock pins v1 for every target (pin {REPO}@v<N>, or add an override)"
    ]
    lock, resolver = resolve(hub, REPO, targets=(CUDA,))
    assert lock.kernels[0].commit == hub.branches[REPO]["v2"] and not resolver.warnings


def test_short_shas_expand_only_when_unambiguous(hub: FakeHub) -> None:
    commit = hub.branches[REPO]["v2"]
    lock, _ = resolve(hub, f"{REPO}@{commit[:7]}", targets=(CUDA,))
    assert lock.kernels[0].commit == commit
    with pytest.raises(ResolutionError, match=r"no commit starting with '0000000' on any branch or tag"):
        resolve(hub, f"{REPO}@0000000", targets=(CUDA,))
    hub.history[REPO] += ["abcdef1" + "0" * 33, "abcdef1" + "1" * 33]  # two commits sharing a 7-character prefix
    with pytest.raises(ResolutionError, match=r"short SHA 'abcdef1' is ambiguous \(abcdef100000, abcdef111111\)"):
        resolve(hub, f"{REPO}@abcdef1", targets=(CUDA,))
