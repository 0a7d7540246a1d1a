"""A recording HTTP proxy in front of a Gateway: every request body the plugin sends is kept
(``bodies``) and forwarded as it is; the answer goes back unchanged. What the Gateway
received is then exactly what these bodies hold."""
from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Tuple
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.requests: List[Tuple[str, str, bytes]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else b""
                with owner._lock:
                    owner.requests.append((self.command, self.path, body))
                conn = http.client.HTTPConnection(*owner.upstream, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    reply = conn.getresponse()
                    data = reply.read()
                    self.send_response(reply.status)
                    for k, v in reply.getheaders():
                        if k.lower() not in HOP:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "RecordingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def sent(self) -> str:
        """Every body sent so far, as text (JSON escapes undone by the caller's check)."""
        with self._lock:
            return "\n".join(b.decode("utf-8", "replace") for _m, _p, b in self.requests)

    def paths(self) -> List[str]:
        with self._lock:
            return [p for _m, p, _b in self.requests]
