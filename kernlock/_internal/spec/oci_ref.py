"""Where a lock's kernels live as OCI artifacts: `oci://HOST[:PORT]/NAMESPACE/NAME[:TAG][@DIGEST]`
(a registry) or `oci-layout:DIR[:TAG][@DIGEST]` (an OCI image layout on disk), parsed once."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from kernlock.errors import UsageError

REGISTRY_SCHEME = "oci://"
LAYOUT_SCHEME = "oci-layout:"
DEFAULT_TAG = "latest"  # as `oras push` and `docker push`

# the distribution spec's grammar (distribution/reference)
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.?)+(?::\d{1,5})?|\[[0-9a-fA-F:]+\](?::\d{1,5})?"
)
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"\w[\w.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_LOOPBACK = re.compile(r"(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d+)?")
EXAMPLES = "oci://registry.example.com/team/kernels:v1 or oci-layout:/srv/kernels"


@dataclass(frozen=True)
class OciRef:
    """An OCI location: a registry repository (`host`, `repository`) or a layout directory
    (`layout`), with the tag or digest that names one artifact there."""

    host: str | None = None
    repository: str = ""
    layout: Path | None = None
    tag: str | None = None
    digest: str | None = None

    @property
    def location(self) -> str:
        """The location with its tag and without its digest: what the lock records."""
        where = (
            f"{LAYOUT_SCHEME}{self.layout}"
            if self.layout
            else f"{REGISTRY_SCHEME}{self.host}/{self.repository}"
        )
        return where + (f":{self.tag}" if self.tag else "")

    @property
    def reference(self) -> str:
        """What names the artifact in the store: the digest, else the tag (default `latest`)."""
        return self.digest or self.tag or DEFAULT_TAG

    @property
    def plain_http(self) -> bool:
        """A registry on this machine's loopback is spoken to over plain HTTP, as Docker does."""
        return self.host is not None and _LOOPBACK.fullmatch(self.host) is not None

    def at(self, digest: str) -> OciRef:
        """The same location, naming the artifact `digest`."""
        return replace(self, digest=digest)

    def __str__(self) -> str:
        return self.location + (f"@{self.digest}" if self.digest else "")


def is_oci(text: str) -> bool:
    """Whether `text` names an OCI location (rather than a directory)."""
    return text.startswith((REGISTRY_SCHEME, LAYOUT_SCHEME))


def parse_ref(text: str) -> OciRef:
    """`text` as an `OciRef`; anything else is a one-line `UsageError` with examples."""
    rest, _, digest = text.partition("@sha256:")
    digest = f"sha256:{digest}" if digest or text.endswith("@sha256:") else ""
    if digest and not _DIGEST.fullmatch(digest):
        raise _bad(text, f"{digest!r} is not a sha256 digest (64 lower-case hex characters)")
    if rest.startswith(LAYOUT_SCHEME):
        return _layout(text, rest[len(LAYOUT_SCHEME) :], digest or None)
    if not rest.startswith(REGISTRY_SCHEME):
        raise _bad(text, f"it starts with neither {REGISTRY_SCHEME} nor {LAYOUT_SCHEME}")
    host, _, path = rest[len(REGISTRY_SCHEME) :].partition("/")
    if "@" in host:
        raise UsageError(
            f"{REGISTRY_SCHEME}{host.rsplit('@', 1)[1]}/…: credentials in the URL are refused "
            "(they would be written to kernels.lock)",
            fix="log in with `docker login` or `oras login` (kernlock reads their "
            "~/.docker/config.json) and drop `user:password@` from the URL",
        )
    if not _HOST.fullmatch(host):
        raise _bad(text, f"{host!r} is not a registry host[:port]")
    tag = None
    name, colon, maybe_tag = path.rpartition(":")
    if colon and "/" not in maybe_tag:
        if not _TAG.fullmatch(maybe_tag):
            raise _bad(text, f"{maybe_tag!r} is not a tag")
        path, tag = name, maybe_tag
    components = path.split("/")
    if len(components) < 2 or not all(_COMPONENT.fullmatch(c) for c in components):
        raise _bad(
            text,
            f"{path!r} is not NAMESPACE/NAME (lower-case letters, digits and . _ - between them)",
        )
    return OciRef(host=host, repository=path, tag=tag, digest=digest or None)


def _layout(text: str, path: str, digest: str | None) -> OciRef:
    tag = None
    head, colon, maybe_tag = path.rpartition(":")
    if colon and head and "/" not in maybe_tag and _TAG.fullmatch(maybe_tag):
        path, tag = head, maybe_tag
    if not path:
        raise _bad(text, "it names no directory")
    return OciRef(layout=Path(path), tag=tag, digest=digest)


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"{text!r} is not an OCI location: {why}", fix=f"name one like {EXAMPLES}")
