"""The lock's `[[mirror]]` records (lock format 1.6): where `kernlock vendor --to` pushed the
locked kernels as OCI artifacts, and the digest of the index it pushed, so a pull by that
location (`kernlock sync --from`, `KERNLOCK_MIRROR`) fetches exactly that index and not whatever
its tag names now. A record holds no credentials (a URL with them is refused before anything
is pushed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernlock._internal.lockfile.table import Ignored, Table, ensure, get_required, invalid, model
from kernlock._internal.spec.ids import is_sha256
from kernlock._internal.spec.oci_ref import parse_ref
from kernlock.errors import UsageError


@model
class Mirror(Table):
    """One OCI location the lock's kernels were pushed to, and the index pushed there."""

    url: str  # `oci://HOST/NAMESPACE/NAME[:TAG]` or `oci-layout:DIR[:TAG]`, without a digest
    index: str  # `sha256:<hex>` of the lock's OCI image index

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> Mirror:
        cls._check_keys(d, ignored)
        url = get_required(d, str, "url")
        try:
            ref = parse_ref(url)
        except UsageError as error:
            raise invalid(error.message, "url") from None
        ensure(ref.digest is None, "url", "names a digest: the record keeps it in `index`")
        index = get_required(d, str, "index")
        ensure(
            index.startswith("sha256:") and is_sha256(index[7:]),
            "index",
            "expected sha256: and 64 lower-case hex characters",
        )
        return cls(url=url, index=index)
