"""A raw-socket hostile Gateway: trickles headers or bodies, sends huge replies, hangs, resets,
or answers with a canned /compact reply. One behaviour per path; ``/health`` answers ok
unless told otherwise. Real sockets on 127.0.0.1; ``close()`` releases every stalled peer.

    with HostilePeer({"/v2/offload/compact": ("slow_body", 0.5)}) as peer:
        GatewayClient(peer.url, ...)
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any, Dict, List, Optional, Tuple

HEALTH_OK = ("json", {"status": "ok", "version": "hostile"})


def envelope(data: Any) -> Dict[str, Any]:
    return {"code": 0, "message": "ok", "data": data}


class HostilePeer:
    """Behaviours (``(kind, arg)``): ``json`` (arg = object, sent fast), ``slow_headers`` and
    ``slow_body`` (arg = seconds between bytes), ``huge`` (arg = declared Content-Length; bytes
    are streamed until the client leaves), ``huge_chunked`` (no length, endless chunks),
    ``hang`` (read the request, never answer), ``reset`` (RST after the request), ``raw`` (arg =
    the body bytes, sent as a 200), ``for_session`` (arg = (text, behaviour): that behaviour
    for a request whose ``session_id`` contains text, an empty success for the others).
    ``trailing`` (arg = (object, bytes): the reply, then bytes past its end), ``sequence``
    (arg = a list of behaviours: the n-th request to the path gets the n-th, the last repeats).
    ``late_reset`` (arg = seconds: read the request, wait, then RST), ``reset_over`` (arg =
    bytes: RST a request body larger than that, an empty success otherwise — how the Gateway
    enforces its body limit), ``status`` (arg = (HTTP status, body bytes): a proxy's page), ``wire`` (arg = the
    reply's bytes, status line and all), ``echo`` (arg = a function of the
    request body bytes returning the reply object).
    ``sessions`` lists the ``session_id`` of every POST, in order; ``bodies`` their sizes."""

    def __init__(self, routes: Optional[Dict[str, Tuple[str, Any]]] = None) -> None:
        self.routes: Dict[str, Tuple[str, Any]] = {"/health": HEALTH_OK}
        self.routes.update(routes or {})
        self.default: Tuple[str, Any] = ("json", envelope({}))
        self.requests: List[Tuple[str, str, Dict[str, str]]] = []
        self.sessions: List[str] = []
        self.bodies: List[int] = []
        self._served: Dict[str, int] = {}
        self.sent_bytes = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: List[socket.socket] = []
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        self.port = self._srv.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> "HostilePeer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._srv.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.close()
                except OSError:
                    pass

    # -- serving ----------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:])}
                need = int(headers.get("content-length", "0"))
                while len(buf) < need:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:need], buf[need:]
                self.requests.append((method, path, headers))
                behaviour = self.routes.get(path, self.default)
                session = _session_of(body) if method == "POST" else ""
                self.sessions.append(session)
                self.bodies.append(len(body))
                if behaviour[0] == "sequence":     # the n-th request gets the n-th answer
                    answers = behaviour[1]
                    with self._lock:
                        n = self._served[path] = self._served.get(path, 0) + 1
                    behaviour = answers[min(n, len(answers)) - 1]
                if behaviour[0] == "for_session":
                    text, chosen = behaviour[1]
                    behaviour = chosen if text in session else ("json", envelope({}))
                if behaviour[0] == "echo":
                    behaviour = ("json", behaviour[1](body))
                if behaviour[0] == "reset_over":
                    behaviour = ("reset", None) if need > behaviour[1] else ("json", envelope({}))
                if not self._answer(conn, behaviour):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, behaviour: Tuple[str, Any]) -> bool:
        """Send one reply; False when the connection is finished."""
        kind, arg = behaviour
        if kind == "json":
            body = json.dumps(arg).encode("utf-8")
            conn.sendall(_head(len(body)) + body)
            return True
        if kind == "raw":
            conn.sendall(_head(len(arg)) + arg)
            return True
        if kind == "wire":          # arg = the whole reply, status line included, sent as is
            conn.sendall(arg)
            return True
        if kind == "trailing":      # a reply, then bytes past its end (arg = (object, bytes))
            body = json.dumps(arg[0]).encode("utf-8")
            conn.sendall(_head(len(body)) + body + arg[1])
            return True
        if kind == "hang":
            self._stop.wait()
            return False
        if kind == "status":
            status, body = arg
            conn.sendall(("HTTP/1.1 %d Refused\r\nContent-Type: text/html\r\nContent-Length: %d"
                          "\r\n\r\n" % (status, len(body))).encode("ascii") + body)
            return True
        if kind == "late_reset" and self._stop.wait(arg):
            return False
        if kind in ("reset", "late_reset"):
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if kind in ("slow_headers", "slow_body"):
            body = json.dumps(envelope({})).encode()
            head = _head(len(body))
            fast, slow = (b"", head + body) if kind == "slow_headers" else (head, body)
            conn.sendall(fast)
            for i in range(len(slow)):
                if self._stop.wait(arg):
                    return False
                conn.sendall(slow[i:i + 1])
            return True
        chunk = b"x" * 65536
        if kind == "huge":
            conn.sendall(_head(arg))
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"10000\r\n" + chunk + b"\r\n"
        while not self._stop.is_set():
            conn.sendall(chunk)
            self.sent_bytes += len(chunk)
        return False


def _head(length: int) -> bytes:
    return ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            "Connection: keep-alive\r\n\r\n" % length).encode("ascii")


def _session_of(body: bytes) -> str:
    try:
        return str(json.loads(body.decode("utf-8")).get("session_id", ""))
    except (ValueError, AttributeError, RecursionError):
        return ""
