"""The registry client's answers to what real registries do that the CNCF registry in the suite does not: a Bearer
token server (GHCR, Docker Hub, Harbor), 429s and 5xx answers (issue 47)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kernlock._internal.oci.registry import Registry, _http
from kernlock._internal.spec.oci_ref import parse_ref
from kernlock.errors import MissingFilesError

pytestmark = pytest.mark.unit


def registry_answering(handler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, auths: dict | None = None) -> Registry:
    """A `Registry` for registry.example.com/team/kernels whose HTTP goes to `handler`, with `auths` as the Docker
    config's credentials."""
    (tmp_path / "config.json").write_text(json.dumps({"auths": auths or {}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setattr("kernlock._internal.oci.registry._BACKOFF", 0.0)
    http = _http()
    registry = Registry(parse_ref("oci://registry.example.com/team/kernels:v1"))
    registry._client = http.Client(transport=http.MockTransport(handler), follow_redirects=True)
    return registry


def test_a_token_server_is_asked_with_the_docker_config_s_login_and_its_token_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    http, seen = _http(), []
    login = base64.b64encode(b"ci:s3cret").decode()

    def handler(request):
        seen.append((request.url.path, dict(request.url.params), request.headers.get("authorization")))
        if request.url.path == "/token":
            return http.Response(200, json={"token": "t0k"})
        if request.headers.get("authorization") != "Bearer t0k":
            return http.Response(401, headers={"WWW-Authenticate": 'Bearer realm="https://registry.example.com/token",'
                                                                   'service="registry.example.com",scope="x"'})
        return http.Response(200, content=b'{"manifests": []}')

    registry = registry_answering(handler, monkeypatch, tmp_path, {"registry.example.com": {"auth": login}})
    assert registry.manifest("v1") == b'{"manifests": []}'
    assert seen == [
        ("/v2/team/kernels/manifests/v1", {}, None),
        ("/token", {"service": "registry.example.com", "scope": "repository:team/kernels:pull"}, f"Basic {login}"),
        ("/v2/team/kernels/manifests/v1", {}, "Bearer t0k"),
    ]


def test_429_and_503_are_tried_again_then_said_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    http, answers = _http(), [429, 503, 200]

    def handler(request):
        status = answers.pop(0) if answers else 503
        return http.Response(status, headers={"Retry-After": "0"}, content=b"{}" if status == 200 else b"")

    registry = registry_answering(handler, monkeypatch, tmp_path)
    assert registry.manifest("v1") == b"{}"
    with pytest.raises(MissingFilesError) as raised:
        registry.manifest("v1")
    assert str(raised.value) == ("registry.example.com/team/kernels: manifest v1 failed (HTTP 503); fix: check the "
                                 "registry registry.example.com (its logs say why), then re-run")


def test_credentials_from_a_helper_an_identity_token_or_the_auths_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`credHelpers`/`credsStore` run `docker-credential-<name> get` (host on stdin); `identitytoken` is a refresh
    token for the token server; `auth` is base64 `user:password`."""
    from kernlock._internal.oci.credentials import Credentials, credentials_for

    helper = tmp_path / "bin" / "docker-credential-team"
    helper.parent.mkdir()
    helper.write_text('#!/bin/sh\nread host\n[ "$host" = ghcr.io ] || exit 1\n'
                      'echo \'{"ServerURL": "ghcr.io", "Username": "bot", "Secret": "pat"}\'\n')
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helper.parent}:/usr/bin:/bin")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({
        "credHelpers": {"ghcr.io": "team"},
        "auths": {"harbor.example.com": {"identitytoken": "refresh"},
                  "https://registry.example.com": {"auth": base64.b64encode(b"ci:pw").decode()}}}))
    assert credentials_for("ghcr.io") == Credentials(username="bot", password="pat")
    assert credentials_for("harbor.example.com") == Credentials(identity_token="refresh")
    assert credentials_for("registry.example.com") == Credentials(username="ci", password="pw")
    assert credentials_for("elsewhere.example.com") is None


def test_an_endless_manifest_is_cut_off_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    http = _http()

    def handler(request):
        return http.Response(200, content=iter([b" " * (1 << 20)] * 17))

    with pytest.raises(MissingFilesError, match="manifest v1 is over 16 MiB: not a kernlock artifact"):
        registry_answering(handler, monkeypatch, tmp_path).manifest("v1")
