"""Which kernel each kernelized layer runs, or that it runs Transformers' own code and why.

After every kernelize (Transformers' default one and an explicit one alike), each module whose
class registered a layer name (`use_kernel_forward_from_hub("RMSNorm")`) is read: kernels marks
a module it bound with the repository it used (`_kernel_repo`), and leaves the others on their
own forward. The result goes into the run record (`kernlock.json`) and the rank guard, so a
layer that fell back to native code on one node is a recorded, compared fact.
"""

from __future__ import annotations

from typing import Any

from kernlock._internal.runtime.state import BOOK, Binding

NO_MAPPING = "no kernel in Transformers' mapping for this device and mode"


def _bound_entry(bound: Binding, repo: Any) -> dict[str, str]:
    """The lock entry and variant a bound layer's repository was served from."""
    from kernlock._internal.runtime.entries import find_entry

    repo_id = str(getattr(repo, "_repo_id", None) or getattr(repo, "repo_id", repo))
    version = getattr(repo, "_version", None)
    revision = getattr(repo, "_revision", None)
    entry = find_entry(bound.lock, repo_id, version, revision, bound.target)
    variant = entry.variant_for(bound.target) if entry is not None else None
    if entry is None or variant is None:
        return {"repo": repo_id, "commit": "", "variant": ""}
    return {"repo": entry.repo, "commit": entry.commit, "variant": variant.name}


def record_layers(model: Any, bound: Binding | None, asked: dict[str, str]) -> None:
    """Note, per registered layer of `model`, the kernel it runs or why it is native; `asked` maps
    layer names to the repo the mapping named for them (kernlock's reason then applies)."""
    if bound is None or not hasattr(model, "modules"):
        return
    with BOOK.mutex:
        for module in model.modules():
            layer = getattr(type(module), "kernel_layer_name", None)
            if not isinstance(layer, str):
                continue
            repo = module.__dict__.get("_kernel_repo")
            if repo is not None:
                BOOK.layers[layer] = _bound_entry(bound, repo)
                continue
            wanted = asked.get(layer)
            why = BOOK.native.get(wanted, f"{wanted} was not loaded") if wanted else NO_MAPPING
            BOOK.layers[layer] = {"native": why}


def layer_table() -> list[dict[str, str]]:
    """The recorded layers, sorted by name, as the run record lists them."""
    with BOOK.mutex:
        return [{"layer": name, **BOOK.layers[name]} for name in sorted(BOOK.layers)]


def native_by_lock(bound: Binding, repo: str, spec: str) -> str | None:
    """Why `repo`'s layers are native on the bound target per the lock (no build there), noted
    once and kept for the record; None when the lock says no such thing."""
    from kernlock._internal.runtime.notices import note_once

    native = next(
        (why for e in bound.lock.for_repo(repo) if (why := e.native_reason(bound.target))), None
    )
    if native is None:
        return None
    with BOOK.mutex:
        BOOK.native[repo] = f"native on {bound.target} per the lock: {native}"
    note_once(
        f"native:{spec}",
        f"kernlock: {spec} is native on {bound.target} per {bound.path} ({native}): its layers "
        "keep Transformers' own code",
    )
    return BOOK.native[repo]
