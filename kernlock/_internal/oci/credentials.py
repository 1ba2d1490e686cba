"""Registry credentials from where `docker login` and `oras login` keep them: `auths` of
`$DOCKER_CONFIG/config.json` (else `~/.docker/config.json`), and the credential helpers it names
(`credHelpers`, `credsStore`: `docker-credential-<name> get`). Read when a registry asks for them,
never stored by kernlock."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernlock.errors import UsageError

_HELPER_TIMEOUT = 60.0


@dataclass(frozen=True)
class Credentials:
    """A user name and password, or an identity (refresh) token for the registry's token server."""

    username: str = ""
    password: str = ""
    identity_token: str = ""


def config_path() -> Path:
    """The Docker client configuration file ORAS shares."""
    directory = os.environ.get("DOCKER_CONFIG")
    return Path(directory or Path.home() / ".docker") / "config.json"


def credentials_for(host: str) -> Credentials | None:
    """The credentials the Docker/ORAS configuration holds for `host`, or None."""
    path = config_path()
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise UsageError(
            f"cannot read the registry credentials in {path} ({error})",
            fix=f"repair {path} (`docker login {host}` or `oras login {host}` rewrites it)",
        ) from None
    if not isinstance(config, dict):
        return None
    helper = (config.get("credHelpers") or {}).get(host) or config.get("credsStore")
    if isinstance(helper, str) and helper:
        found = _from_helper(helper, host)
        if found is not None:
            return found
    auths = config.get("auths") or {}
    for key in (host, f"https://{host}", f"http://{host}"):
        entry = auths.get(key)
        if isinstance(entry, dict):
            return _from_entry(entry)
    return None


def _from_entry(entry: dict[str, object]) -> Credentials | None:
    token = entry.get("identitytoken")
    if isinstance(token, str) and token:
        return Credentials(identity_token=token)
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        user, _, secret = base64.b64decode(auth).decode("utf-8").partition(":")
        return Credentials(username=user, password=secret)
    username, password = entry.get("username"), entry.get("password")
    if isinstance(username, str) and isinstance(password, str):
        return Credentials(username=username, password=password)
    return None


def _from_helper(helper: str, host: str) -> Credentials | None:
    program = shutil.which(f"docker-credential-{helper}")
    if program is None:
        return None
    answer = subprocess.run(
        [program, "get"], input=host, capture_output=True, text=True, timeout=_HELPER_TIMEOUT
    )
    if answer.returncode != 0:  # "credentials not found in native keychain"
        return None
    found = json.loads(answer.stdout)
    username, secret = str(found.get("Username", "")), str(found.get("Secret", ""))
    return (
        Credentials(identity_token=secret)
        if username == "<token>"
        else Credentials(username, secret)
    )
