"""HTTP plumbing of the fake: the server, the request handler, faults, body decoding."""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import sys
import traceback
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .common import _HARD_BODY_CAP


# ─── HTTP plumbing ──────────────────────────────────────────────────────────────

@dataclass
class _Fault:
    kind: str
    every: int
    paths: frozenset | None
    status: int
    hang_seconds: float


def _norm_path(path: str) -> str:
    return path[:-1] if path.endswith("/") and len(path) > 1 else path


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # lets clear_fault()/start() re-bind the same port at once
    request_queue_size = 128  # the default 5 drops SYNs under parallel clients (1 s retransmit)

    def __init__(self, addr: tuple, gateway: Any):
        self.gateway = gateway
        super().__init__(addr, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), which can stall on a reverse DNS lookup.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, (OSError, ValueError)):  # client hang-ups are normal here
            traceback.print_exc()


class _Reset(Exception):
    """Raised inside a handler to drop the connection with a TCP reset."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive with Content-Length
    server_version = "FakeTDAIGateway/0.1"
    server: _Server

    def log_message(self, format, *args) -> None:  # noqa: A002 - quiet test output
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without NODELAY, Nagle + delayed ACK
        # add ~40 ms to every keep-alive exchange (the real Gateway has no such stall)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.gateway._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.gateway._track(self.connection, False)

    def do_GET(self) -> None:
        self.server.gateway._serve(self)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    # -- helpers used by FakeGateway._serve -----------------------------------
    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                total += size
                if total > _HARD_BODY_CAP:
                    raise _Reset()
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = 0
        if n > _HARD_BODY_CAP:
            raise _Reset()
        return self.rfile.read(n) if n > 0 else b""

    def reply(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def drop(self, reset: bool) -> None:
        """Close without a reply; with reset=True the peer sees ECONNRESET (SO_LINGER 0)."""
        self.close_connection = True
        try:
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.connection.close()  # real close happens once rfile/wfile close in finish()
        except OSError:
            pass


def _decode_body(raw: bytes, encoding: str, limit: int) -> tuple[bytes | None, str | None]:
    """Returns (bytes, None) or (None, 'encoding'|'corrupt'|'too_large')."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return (raw, None) if len(raw) <= limit else (None, "too_large")
    if enc in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif enc == "deflate":
        wbits = zlib.MAX_WBITS if raw[:1] == b"\x78" else -zlib.MAX_WBITS  # zlib or raw deflate
    else:
        return None, "encoding"
    try:
        d = zlib.decompressobj(wbits)
        out = d.decompress(raw, limit + 1)  # bounded: a bomb cannot blow up the fake
        if len(out) > limit or d.unconsumed_tail:
            return None, "too_large"
        out += d.flush()
        return (out, None) if len(out) <= limit else (None, "too_large")
    except zlib.error:
        return None, "corrupt"


def _parse_json(data: bytes) -> tuple[Any, bool]:
    if not data.strip():
        return {}, True
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant), True
    except (ValueError, UnicodeDecodeError):
        return None, False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN/Infinity
