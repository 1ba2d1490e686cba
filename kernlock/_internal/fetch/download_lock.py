"""The per-file download lock in the Hub cache: the one `hf_hub_download` takes, waited on within
the Hub deadline, and a lock that cannot be taken (held too long, a planted link) named in one
line."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kernlock._internal import settings
from kernlock.errors import HubError, WriteError


@contextmanager
def download_lock(path: Path) -> Iterator[None]:
    """huggingface_hub's lock on `path` (the one `hf_hub_download` takes), waited on for at most
    `KERNLOCK_HUB_DEADLINE` seconds: a process that holds it longer (stopped, or a lock held on
    purpose) ends the wait with one line, never a hang."""
    from filelock import Timeout
    from huggingface_hub.utils import WeakFileLock

    from kernlock._internal.hub.transport import hub_deadline

    waited = hub_deadline()
    with ExitStack() as held:
        try:
            held.enter_context(WeakFileLock(path, timeout=waited))
        except Timeout:
            raise HubError(
                "another process (a kernlock, kernels or hf_hub_download of the same file) has "
                f"held the download lock {path} for over {waited:g} s (${settings.DEADLINE_ENV}); "
                "nothing was downloaded",
                fix="wait for it and run the command again, stop that process, or raise "
                f"${settings.DEADLINE_ENV}",
            ) from None
        except OSError as error:  # after Timeout (an OSError too): a planted link, a lock not ours
            raise _unusable_lock(path, error) from None
        yield


def _unusable_lock(path: Path, error: OSError) -> WriteError:
    """One line for a download lock that cannot be taken, naming the file, never the network."""
    own_cache = "HF_HUB_CACHE=$HOME/.cache/kernlock-hub kernlock sync"
    if os.path.islink(path):
        return WriteError(
            f"the download lock {path} is a symbolic link (to {os.readlink(path)}), which neither "
            "kernlock nor huggingface_hub follows; nothing was downloaded",
            fix=f"tell the shared cache's owner about that link, and meanwhile use a cache only "
            f"you write: {own_cache}",
        )
    return WriteError(
        f"cannot take the download lock {path} ({error.strerror or error}); nothing was downloaded",
        fix=f"make {path.parent} writable for you, or use a cache only you write: {own_cache}",
    )


def file_lock_name(commit: str, variant: str, path: str) -> str:
    """The per-file lock's name: readable where it fits a file name (255 bytes), else named by the
    path's hash."""
    name = f"{commit}-{variant}-{path.replace('/', '--')}.lock"
    if len(name.encode("utf-8")) <= 255:
        return name
    return f"{commit}-{variant}-{hashlib.sha256(path.encode('utf-8')).hexdigest()}.lock"
