"""The test Hub's HTTP side: routing requests to a `TestHub`, its latency, rate limits and
faults."""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FAULT_KINDS = (
    "status",
    "reset",
    "truncate",
    "corrupt",
    "delay",
    "respond",
    "stall",
    "slowloris",
    "drip-headers",
    "endless",
    "pages",
)


@dataclass
class Fault:
    """An injected failure affecting the next ``times`` requests whose path matches ``match``."""

    kind: str
    match: str
    times: int
    method: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class HubError(Exception):
    """An error answered in the Hub's shape (``X-Error-Code`` header, JSON ``error`` body)."""

    def __init__(
        self, status: int, code: str | None, message: str, headers: dict[str, str] | None = None
    ):
        super().__init__(message)
        self.response = json_response({"error": message}, status)
        if code:
            self.response.headers["X-Error-Code"] = code
            self.response.headers["X-Error-Message"] = message
        self.response.headers.update(headers or {})


def json_response(data: Any, status: int = 200) -> Response:
    return Response(
        status, json.dumps(data).encode(), {"Content-Type": "application/json; charset=utf-8"}
    )


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")


def ranged(
    content: bytes, headers: dict[str, str], range_header: str | None, if_range: str | None = None
) -> Response:
    """A 200 with ``content``, or a 206 for a single satisfiable ``bytes=`` range.

    With ``If-Range``, the range is served only while it equals the answer's ``ETag``
    (a strong validator); otherwise the whole content, as RFC 9110 says.
    """
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header or "")
    if if_range is not None and (if_range != headers.get("ETag") or if_range.startswith("W/")):
        match = None
    if match and int(match[1]) < len(content):
        start = int(match[1])
        end = min(int(match[2]) if match[2] else len(content) - 1, len(content) - 1)
        return Response(
            206,
            content[start : end + 1],
            {**headers, "Content-Range": f"bytes {start}-{end}/{len(content)}"},
        )
    return Response(200, content, headers)


_API_REPO = re.compile(
    r"/api/kernels/([^/]+)/([^/]+)(?:/(refs|tree|revision|paths-info|commits)(?:/([^/]+)(/.*)?)?)?"
)
_RESOLVE = re.compile(r"/kernels/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)")
_CDN = re.compile(r"/cdn/([0-9a-f]{64})/[^/]+")
_MODEL = re.compile(r"/api/models/([^/]+)/([^/]+)")
_OVERVIEW = re.compile(r"/api/organizations/([^/]+)/overview")


class Handler(BaseHTTPRequestHandler):
    """Routes requests to a ``TestHub`` and applies its latency and faults."""

    hub: Any  # the TestHub served
    cdn: bool
    protocol_version = "HTTP/1.1"
    timeout = 60
    # TCP_NODELAY: headers and body go out as separate writes; with Nagle's algorithm the body
    # waited for the
    # client's delayed ACK (~40 ms a request on loopback), so a "0 ms" Hub answered in ~50 ms and a
    # "50 ms" Hub
    # in ~90 ms, flattering clients that overlap requests against those that do not (benchmarks/).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = (
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if method == "POST"
            else b""
        )
        kind, call = self._route(method, url.path, query, body)
        self._kind, self._path = kind, url.path
        fault = self.hub._record(
            method,
            url.path,
            kind,
            self.headers.get("Authorization"),
            self.headers.get("Range"),
            self.headers.get("If-Range"),
        )
        limits, over = self.hub._rate_limit(kind)
        moved = self.hub._renamed(url.path)
        if over:
            response = json_response(
                {"error": "You have exceeded our rate limit, please retry later"}, 429
            )
        elif moved is not None:
            response = Response(
                307, b"", {"Location": moved + (f"?{url.query}" if url.query else "")}
            )
        else:
            try:
                response = (
                    call() if call is not None else json_response({"error": "Not found"}, 404)
                )
            except HubError as error:
                response = error.response
        response.headers.update(limits)
        if self.hub.latency:
            time.sleep(self.hub.latency)
        self._send(method, response, fault)

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[str, Any]:
        hub = self.hub
        if self.cdn:
            if (m := _CDN.fullmatch(path)) and method in ("GET", "HEAD"):
                return "cdn", lambda: hub.cdn(
                    m[1], self.headers.get("Range"), self.headers.get("If-Range")
                )
            return "cdn", None
        if path == "/api/kernels" and method == "GET" and "author" in query:
            return "list", lambda: hub.list_kernels(query["author"])
        if m := _OVERVIEW.fullmatch(path):
            return "overview", lambda: hub.overview(unquote(m[1]))
        if (m := _MODEL.fullmatch(path)) and method == "GET":
            return "model", lambda: hub.model_info(f"{unquote(m[1])}/{unquote(m[2])}")
        if path == "/api/agent-harnesses":  # huggingface_hub's once-a-day agent registry lookup
            return "agent-registry", lambda: json_response({"standardEnvVars": [], "harnesses": {}})
        if (m := _RESOLVE.fullmatch(path)) and method in ("GET", "HEAD"):
            repo_id, rev, file = f"{unquote(m[1])}/{unquote(m[2])}", unquote(m[3]), unquote(m[4])
            return "resolve", lambda: hub.resolve(repo_id, rev, file, self.headers.get("Range"))
        if m := _API_REPO.fullmatch(path):
            repo_id, action, rev = f"{unquote(m[1])}/{unquote(m[2])}", m[3], unquote(m[4] or "main")
            sub = unquote(m[5] or "")
            if action is None and method == "GET":
                return "revision", lambda: hub.repo_info(repo_id, "main")
            if action == "refs" and method == "GET":
                return "refs", lambda: hub.refs(repo_id)
            if action == "revision" and method == "GET" and m[4] and not sub:
                return "revision", lambda: hub.repo_info(repo_id, rev)
            if action == "tree" and method == "GET" and m[4]:
                recursive, expand = _flag(query.get("recursive")), _flag(query.get("expand"))
                return "tree", lambda: hub.tree(
                    repo_id,
                    rev,
                    sub,
                    recursive,
                    expand,
                    query.get("cursor"),
                    self.path.split("&cursor=")[0].split("?cursor=")[0],
                )
            if action == "commits" and method == "GET" and m[4] and not sub:
                return "commits", lambda: hub.commits(repo_id, rev)
            if action == "paths-info" and method == "POST" and m[4] and not sub:
                paths, expand = self._paths_info_body(body)
                return "paths-info", lambda: hub.paths_info(repo_id, rev, paths, expand)
        return "other", None

    def _paths_info_body(self, body: bytes) -> tuple[list[str], bool]:
        if "json" in (self.headers.get("Content-Type") or ""):
            data = json.loads(body or b"{}")
            paths = data.get("paths", [])
            return ([paths] if isinstance(paths, str) else list(paths)), bool(data.get("expand"))
        form = parse_qs(body.decode(), keep_blank_values=True)
        return form.get("paths", []), _flag((form.get("expand") or [""])[-1])

    # Complexity 16: one branch per injectable fault kind, read top to bottom as the fault table.
    def _send(self, method: str, response: Response, fault: Fault | None) -> None:  # noqa: C901
        body = response.body
        if fault is not None and fault.kind in ("stall", "slowloris", "drip-headers", "endless"):
            self._hold(method, response, fault)
            return
        if fault is not None and fault.kind == "delay":
            time.sleep(float(fault.params.get("seconds", 1.0)))
        elif fault is not None and fault.kind == "status":
            code = int(fault.params.get("code", 500))
            response = json_response({"error": f"Injected fault: HTTP {code}"}, code)
            if "retry_after" in fault.params:
                response.headers["Retry-After"] = str(fault.params["retry_after"])
            body = response.body
        elif fault is not None and fault.kind == "respond":
            payload = fault.params.get("body", b"")
            if not isinstance(payload, (bytes, str)):
                payload = json.dumps(payload)
            body = payload.encode() if isinstance(payload, str) else payload
            response = Response(
                int(fault.params.get("status", 200)),
                body,
                {"Content-Type": "application/json", **fault.params.get("headers", {})},
            )
        elif fault is not None and fault.kind == "pages":
            body = json.dumps(fault.params.get("body", [])).encode()
            # a fresh next page every time: a listing never ending
            cursor = f"{self._path}?cursor={uuid.uuid4().hex}"
            response = Response(
                200,
                body,
                {
                    "Content-Type": "application/json",
                    "Link": f'<http://{self.headers.get("Host")}{cursor}>; rel="next"',
                },
            )
        elif fault is not None and fault.kind == "corrupt" and body:
            middle = len(body) // 2
            body = (
                body[:middle]
                + bytes(b ^ 0xFF for b in body[middle : middle + 16])
                + body[middle + 16 :]
            )
        reset = fault is not None and fault.kind == "reset"
        cut = reset or (fault is not None and fault.kind == "truncate")
        if cut and (method == "HEAD" or not body):
            self._abort(reset=reset)
            return
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "HEAD":
            return
        sent = (
            body[: int(fault.params.get("after", len(body) // 2))]
            if cut and fault is not None
            else body
        )
        pace = self.hub.cdn_pace if self._kind == "cdn" else 0.0
        step = 1024 if pace else max(len(sent), 1)
        try:
            for at in range(0, len(sent), step):  # paced: 1 KiB every `cdn_pace` seconds
                # Counted before the write: a client that has read these bytes always finds them
                # counted.
                self.hub._count_bytes(len(sent[at : at + step]), kind=self._kind, path=self._path)
                self.wfile.write(sent[at : at + step])
                if pace:
                    self.wfile.flush()
                    time.sleep(pace)
        except OSError:  # the client went away (killed)
            self.close_connection = True
            return
        if cut:
            self._abort(reset=reset)

    def _hold(self, method: str, response: Response, fault: Fault) -> None:
        """Hold the connection: say nothing (stall), drip the body (slowloris) or the headers
        (drip-headers), or never end the body (endless)."""
        stopping = self.hub._stopping
        self.close_connection = True
        interval = float(fault.params.get("interval", 0.2))
        if fault.kind == "stall":
            stopping.wait()
            return
        if fault.kind == "drip-headers":
            self._drip_headers(stopping, interval, fault.params.get("seconds"))
            return
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if fault.kind == "slowloris":
            self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if method == "HEAD":
            return
        body = iter(response.body) if fault.kind == "slowloris" else None
        try:
            while not stopping.is_set():
                if body is not None:
                    byte = next(body, None)
                    if byte is None:
                        return
                    chunk = bytes([byte])
                else:
                    chunk = b"\0" * 65536
                self.wfile.write(chunk)
                self.wfile.flush()
                self.hub._count_bytes(len(chunk))
                if body is not None:
                    stopping.wait(interval)
        except OSError:  # the client gave up
            return

    def _drip_headers(
        self, stopping: threading.Event, interval: float, seconds: float | None
    ) -> None:
        """The status line, then one header byte every `interval` (each well within a read timeout),
        for `seconds` (then the connection closes) or for ever."""
        until = None if seconds is None else time.monotonic() + float(seconds)
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            while not stopping.is_set() and (until is None or time.monotonic() < until):
                for byte in b"X-Drip: 1\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    if stopping.wait(interval):
                        return
        except OSError:  # the client gave up
            return

    def _abort(self, *, reset: bool) -> None:
        """Close the connection: with a TCP RST if ``reset``, else a normal FIN."""
        self.wfile.flush()
        self.close_connection = True
        if reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        else:
            self.connection.shutdown(socket.SHUT_RDWR)
