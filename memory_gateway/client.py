"""HTTP client for the TencentDB Agent Memory Gateway's offload V2 API.

Knows nothing about Hermes. Callers see typed errors (``GatewayUnavailable``,
``GatewayTimeout``, ``GatewayRejected``, ``GatewayProtocolError``), never ``URLError`` or
``socket.timeout``. A circuit breaker shared by every caller in the process makes a dead
Gateway cost microseconds after the first failure: while it is open, calls fail at once;
only ``probe()`` (called from the background worker, never from a turn) touches the network
until ``/health`` answers again. Keep-alive connections are reused per thread.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

INGEST = "/v2/offload/ingest"
COMPACT = "/v2/offload/compact"
QUERY_MMD = "/v2/offload/query-mmd"
READ_REF = "/v2/offload/read-ref"
HEALTH = "/health"


class GatewayError(Exception):
    """Base class: anything that went wrong talking to the Gateway."""


class GatewayUnavailable(GatewayError):
    """Not reachable: refused, reset, or the circuit breaker is open."""

    def __init__(self, message: str, body_bytes: int = 0, reset: bool = False) -> None:
        super().__init__(message)
        self.body_bytes = body_bytes
        self.reset = reset          # the connection was cut mid-exchange (body limit, crash)


class GatewayTimeout(GatewayUnavailable):
    """No answer within the timeout."""


class GatewayRejected(GatewayError):
    """The Gateway answered with an error status or ``code != 0``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__("HTTP %d: %s" % (status, message))
        self.status = status
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.status >= 500 or self.status in (408, 409, 429)

    @property
    def config_problem(self) -> bool:
        """4xx other than conflicts: a setting or the client is wrong, not an outage."""
        return 400 <= self.status < 500 and not self.retryable


class BodyTooLarge(GatewayRejected):
    """The request would exceed the Gateway's body limit; it was not sent."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(413, "request body %d bytes exceeds the limit of %d" % (size, limit))
        self.size = size
        self.limit = limit


class GatewayProtocolError(GatewayError):
    """The Gateway answered 200 with something that is not the V2 envelope we expect."""


class GatewayNotSupported(GatewayRejected):
    """The route does not exist on this Gateway (HTTP 404)."""


class CircuitBreaker:
    """closed → open on an outage → half-open probe after a backoff → closed or open again."""

    def __init__(self, base_backoff: float = 1.0, max_backoff: float = 60.0) -> None:
        self.base = base_backoff
        self.max = max_backoff
        self.state = "closed"
        self.failures = 0
        self.retry_at = 0.0
        self.last_error = ""
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """May a normal call go to the network now? (Never blocks.)"""
        return self.state == "closed"

    def probe_due(self, now: Optional[float] = None) -> bool:
        return self.state == "open" and (now or time.monotonic()) >= self.retry_at

    def record_success(self) -> None:
        with self._lock:
            self.state, self.failures, self.last_error = "closed", 0, ""

    def record_outage(self, error: str) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = error
            backoff = min(self.max, self.base * (2 ** min(self.failures - 1, 10)))
            self.state = "open"
            self.retry_at = time.monotonic() + backoff

    def snapshot(self) -> Dict[str, Any]:
        left = max(0.0, self.retry_at - time.monotonic()) if self.state == "open" else 0.0
        return {"state": self.state, "failures": self.failures,
                "retry_in_s": round(left, 1), "last_error": self.last_error}


class GatewayClient:
    def __init__(self, base_url: str, api_key: str, instance_id: str, *,
                 timeout_ms: int = 90_000, ingest_timeout_ms: int = 5_000,
                 body_limit: int = 1_000_000, breaker: Optional[CircuitBreaker] = None,
                 probe_timeout_s: float = 1.0, health_ttl_s: float = 10.0) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("gateway URL must look like http://host:port")
        self.base_url = base_url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._api_key = api_key or "local"      # the Gateway requires a non-empty Bearer
        self.instance_id = instance_id or "default"
        self.timeout = timeout_ms / 1000.0
        self.ingest_timeout = ingest_timeout_ms / 1000.0
        self.body_limit = body_limit
        self.breaker = breaker or CircuitBreaker()
        self.probe_timeout = probe_timeout_s
        self.health_ttl = health_ttl_s
        self.read_ref_supported: Optional[bool] = None
        self.last_health: Dict[str, Any] = {}
        self.last_health_at = 0.0
        self.last_latency_ms = 0.0
        self.last_error = ""
        self.config_error = ""
        self._local = threading.local()

    def __repr__(self) -> str:
        return "GatewayClient(%s, instance=%s)" % (self.base_url, self.instance_id)

    # -- public API -------------------------------------------------------------------
    def ingest(self, session_id: str, tool_pairs: List[Dict[str, Any]], prompt: str = "",
               recent_messages: Optional[List[Dict[str, str]]] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {"session_id": session_id, "tool_pairs": tool_pairs}
        if prompt:
            body["prompt"] = prompt
        if recent_messages:
            body["recent_messages"] = recent_messages
        return self._call(INGEST, body, self.ingest_timeout)

    def compact(self, session_id: str, messages: List[Dict[str, Any]], *, ratio: float,
                context_window: int, total_tokens: int,
                message_tokens: Optional[List[int]] = None,
                encoded: Optional[bytes] = None) -> Dict[str, Any]:
        body = encoded or encode_compact(session_id, messages, ratio=ratio,
                                         context_window=context_window,
                                         total_tokens=total_tokens,
                                         message_tokens=message_tokens)
        data = self._call(COMPACT, body, self.timeout)
        if not isinstance(data.get("messages"), list) or not isinstance(data.get("report", {}), dict):
            raise GatewayProtocolError("compact reply has no message list")
        return data

    def query_mmd(self, session_id: str, limit: int = 1) -> Dict[str, Any]:
        data = self._call(QUERY_MMD, {"session_id": session_id, "limit": limit}, self.ingest_timeout)
        if not isinstance(data.get("mmds", []), list):
            raise GatewayProtocolError("query-mmd reply has no mmds list")
        return data

    def read_ref(self, session_id: str, ref: str) -> Optional[Dict[str, Any]]:
        """Ask the Gateway for an archived ref; None when this Gateway has no such route."""
        if self.read_ref_supported is False:
            return None
        try:
            data = self._call(READ_REF, {"session_id": session_id, "result_ref": ref},
                              self.ingest_timeout)
        except GatewayNotSupported:
            self.read_ref_supported = False
            return None
        self.read_ref_supported = True
        return data

    def health(self, force: bool = False, timeout: Optional[float] = None) -> Dict[str, Any]:
        """``GET /health`` (cached for a few seconds). 'ok' and 'degraded' both mean up."""
        now = time.monotonic()
        if not force and self.last_health and now - self.last_health_at < self.health_ttl:
            return self.last_health
        status, payload = self._request("GET", HEALTH, None, timeout or self.ingest_timeout)
        try:
            data = json.loads(payload.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise GatewayProtocolError("health reply is not JSON") from exc
        if status != 200 or not isinstance(data, dict) or data.get("status") not in ("ok", "degraded"):
            raise GatewayProtocolError("health says %r (HTTP %d)" % (
                data.get("status") if isinstance(data, dict) else data, status))
        self.last_health, self.last_health_at = data, now
        return data

    def probe(self) -> bool:
        """Half-open probe: one short ``/health``; closes the breaker when it answers."""
        try:
            self.health(force=True, timeout=self.probe_timeout)
        except GatewayError as exc:
            self.breaker.record_outage("probe failed: %s" % exc)
            return False
        self.breaker.record_success()
        return True

    @property
    def available(self) -> bool:
        return self.breaker.allow()

    def status(self) -> Dict[str, Any]:
        return {"url": self.base_url, "instance_id": self.instance_id,
                "breaker": self.breaker.snapshot(),
                "version": self.last_health.get("version", ""),
                "health": self.last_health.get("status", "unknown"),
                "last_latency_ms": round(self.last_latency_ms, 1),
                "last_error": self.last_error, "config_error": self.config_error,
                "read_ref_supported": self.read_ref_supported}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- transport --------------------------------------------------------------------
    def _call(self, path: str, body: Any, timeout: float) -> Dict[str, Any]:
        if not self.breaker.allow():
            raise GatewayUnavailable("circuit open after: %s" % (self.breaker.last_error or "failure"))
        payload = body if isinstance(body, (bytes, bytearray)) else \
            json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(payload) > self.body_limit:
            raise BodyTooLarge(len(payload), self.body_limit)
        started = time.monotonic()
        try:
            status, raw = self._request("POST", path, payload, timeout)
        except GatewayUnavailable as exc:
            exc.body_bytes = len(payload)
            self.last_error = str(exc)
            self.breaker.record_outage(str(exc))
            raise
        self.last_latency_ms = (time.monotonic() - started) * 1000
        try:
            data = self._parse(path, status, raw)
        except GatewayRejected as exc:
            self.last_error = str(exc)
            if exc.config_problem and not isinstance(exc, (GatewayNotSupported, BodyTooLarge)):
                self.config_error = str(exc)
            if exc.status >= 500:
                self.breaker.record_outage(str(exc))
            raise
        except GatewayProtocolError as exc:
            self.last_error = str(exc)
            raise
        self.breaker.record_success()
        self.config_error = ""
        return data

    @staticmethod
    def _parse(path: str, status: int, raw: bytes) -> Dict[str, Any]:
        try:
            env = json.loads(raw.decode("utf-8")) if raw else None
        except (ValueError, UnicodeDecodeError):
            env = None
        if status == 404:
            raise GatewayNotSupported(404, "no route %s on this Gateway" % path)
        if status != 200:
            message = ""
            if isinstance(env, dict):
                message = str(env.get("message") or env.get("error") or "")
            raise GatewayRejected(status, message[:300] or "no message")
        if not isinstance(env, dict):
            raise GatewayProtocolError("reply to %s is not a JSON object" % path)
        code = env.get("code")
        if code != 0:
            raise GatewayRejected(int(code) if isinstance(code, int) else 500,
                                  str(env.get("message") or env.get("error") or "code %r" % code)[:300])
        data = env.get("data", {})
        if not isinstance(data, dict):
            raise GatewayProtocolError("reply to %s has data of type %s" % (path, type(data).__name__))
        return data

    def _connection(self, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        if self._scheme == "https":
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        self._local.conn = conn
        return conn, False

    def _request(self, method: str, path: str, payload: Optional[bytes],
                 timeout: float) -> Tuple[int, bytes]:
        headers = {"Authorization": "Bearer " + self._api_key,
                   "x-tdai-service-id": self.instance_id,
                   "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn, reused = self._connection(timeout)
            try:
                conn.request(method, self._prefix + path, body=payload, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                return resp.status, raw
            except (socket.timeout, TimeoutError) as exc:
                self.close()
                raise GatewayTimeout("no answer from %s%s within %.1fs" % (
                    self.base_url, path, timeout)) from exc
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if reused and attempt == 1:
                    continue        # a kept-alive socket the server had closed: one fresh try
                raise GatewayUnavailable("connection to %s lost (%s)" % (
                    self.base_url, type(exc).__name__), reset=True) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise GatewayUnavailable("cannot reach %s (%s)" % (
                    self.base_url, getattr(exc, "strerror", None) or type(exc).__name__)) from exc
        raise GatewayUnavailable("cannot reach %s" % self.base_url)


def encode_compact(session_id: str, messages: List[Dict[str, Any]], *, ratio: float,
                   context_window: int, total_tokens: int,
                   message_tokens: Optional[List[int]] = None, ascii_only: bool = True) -> bytes:
    """The /compact body. ASCII escapes encode ~1.7× faster; CJK text is then 2× the bytes,
    so a caller near the body limit asks again with ``ascii_only=False``."""
    body: Dict[str, Any] = {"session_id": session_id, "messages": messages,
                            "ratio": round(min(2.0, max(0.0, float(ratio))), 4),
                            "context_window": int(max(1, context_window)),
                            "total_tokens": int(max(0, total_tokens))}
    if message_tokens is not None:
        body["message_tokens"] = [int(t) for t in message_tokens]
    if ascii_only:
        return json.dumps(body, separators=(",", ":")).encode("ascii")
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
