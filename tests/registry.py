"""The CNCF distribution registry (Debian's `docker-registry`, `.ci/run` installs it) on 127.0.0.1 with a
throwaway filesystem storage, for the OCI tests: started by the `registry` fixture, stopped after."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = ("docker-registry", "registry")  # Debian's name, upstream's
MISSING = "the CNCF registry is not installed (`apt-get install docker-registry`)"


def registry_binary() -> str | None:
    """The registry's executable, if one is installed."""
    return next((found for name in BINARIES if (found := shutil.which(name))), None)


@dataclass(frozen=True)
class RunningRegistry:
    """A registry serving `host` (127.0.0.1:PORT) from `storage`."""

    host: str
    storage: Path
    log: Path

    def url(self, name: str = "team/kernels:v1") -> str:
        return f"oci://{self.host}/{name}"

    def blob_data(self, digest: str) -> Path:
        """Where the registry's filesystem driver keeps the bytes of blob `digest` (`sha256:…`)."""
        hex_digest = digest.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hex_digest[:2] / hex_digest / "data"

    def get(self, path: str, accept: str = "") -> bytes:
        request = urllib.request.Request(f"http://{self.host}{path}", headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.read()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# `ci:s3cret`, bcrypt at cost 4 (the registry checks it on every request), for a registry that asks for a login
HTPASSWD = "ci:$2b$04$g/315otZVq35tS6OImgPtec1EMOj/w0othQhz0esddlqbEUqW5knu\n"


@contextmanager
def running_registry(root: Path, login: bool = False) -> Iterator[RunningRegistry]:
    """Start the registry on a free loopback port with its config and storage under `root` (asking for Basic
    credentials, `HTPASSWD`'s, with `login`); stop it after."""
    binary = registry_binary()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{MISSING}; .ci/run installs it")
        pytest.skip(MISSING)
    host = f"127.0.0.1:{_free_port()}"
    storage, log = root / "storage", root / "registry.log"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: {host}\n"
    )
    if login:
        (root / "htpasswd").write_text(HTPASSWD)
        with config.open("a") as out:
            out.write(f"auth:\n  htpasswd:\n    realm: kernlock-test\n    path: {root / 'htpasswd'}\n")
    with open(log, "wb") as out:
        process = subprocess.Popen([binary, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{host}/v2/", timeout=2):
                    break
            except urllib.error.HTTPError:  # 401: up, and asking for credentials
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the registry did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.1)
        yield RunningRegistry(host=host, storage=storage, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
