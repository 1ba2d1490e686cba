"""A locked variant's signing record in the lock file: the build provenance kernels' metadata.json
states, and the Sigstore signature (log entry and signer identity) kernlock verified.

`kernlock._internal.lockfile.entries.LockedVariant` holds one of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernlock._internal.lockfile.table import (
    Ignored,
    Table,
    ensure,
    get,
    get_required,
    model,
)


@model
class Provenance(Table):
    """How a variant was built, from its `metadata.json` (kernel-builder and kernel source)."""

    builder_version: str | None = None
    builder_commit: str | None = None
    builder_dirty: bool | None = None
    source_commit: str | None = None
    source_dirty: bool | None = None

    @property
    def dirty(self) -> bool:
        """Whether the kernel source or kernel-builder had uncommitted changes."""
        return bool(self.builder_dirty or self.source_dirty)

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> Provenance:
        cls._check_keys(d, ignored)
        return cls(
            builder_version=get(d, str, "builder-version"),
            builder_commit=get(d, str, "builder-commit"),
            builder_dirty=get(d, bool, "builder-dirty"),
            source_commit=get(d, str, "source-commit"),
            source_dirty=get(d, bool, "source-dirty"),
        )


@model
class Signature(Table):
    """Who signed a variant's `metadata.json`: from the verified bundle's certificate and
    transparency-log entry."""

    issuer: str  # OIDC issuer (GitHub Actions: https://token.actions.githubusercontent.com)
    # build signer URI: the workflow that signed, https://github.com/<org>/<repo>/<path>@<ref>
    build_signer: str
    source_repository: str | None = None
    source_commit: str | None = None
    log_index: int
    integrated_time: int  # seconds since the epoch, as the log signed it

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> Signature:
        cls._check_keys(d, ignored)
        log_index, integrated_time = (
            get_required(d, int, "log-index"),
            get_required(d, int, "integrated-time"),
        )
        ensure(log_index >= 0, "log-index", "expected a non-negative integer")
        ensure(integrated_time >= 0, "integrated-time", "expected a non-negative integer")
        return cls(
            issuer=get_required(d, str, "issuer"),
            build_signer=get_required(d, str, "build-signer"),
            source_repository=get(d, str, "source-repository"),
            source_commit=get(d, str, "source-commit"),
            log_index=log_index,
            integrated_time=integrated_time,
        )
