"""HTTP client for the TencentDB Agent Memory Gateway's offload V2 API.

Knows nothing about Hermes. Callers see typed errors (``GatewayUnavailable``,
``GatewayTimeout``, ``GatewayRejected``, ``GatewayProtocolError``), never ``URLError`` or
``socket.timeout``. A circuit breaker shared by every caller in the process makes a dead
Gateway cost microseconds after the first failure: while it is open, calls fail at once;
only ``probe()`` (called from the background worker, never from a turn) touches the network
until ``/health`` answers again. Keep-alive connections are reused per thread. Every call has
one deadline for the whole exchange and a cap on the reply size (see ``transport``); what
this process learns about the Gateway's health is shared with the others on the same store
(see ``shared_health``), so a fresh process does not wait on a Gateway known to be down.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..common.per_thread import PerThread
from ..context.redact import Redactor
from .breaker import CircuitBreaker
from .compact_body import encode_compact
from .shared_health import HungRoute, SharedHealth, down_trust_s
from .errors import (BodyTooLarge, GatewayConfigError, GatewayError, GatewayNotSupported,
                     GatewayProtocolError, GatewayRejected, GatewayTimeout, GatewayUnavailable,
                     REDIRECTS, page_note, parse_envelope)
from .transport import (BadReply, BaseURL, Connection, PeerClosed, ReplyTooLarge, build_request,
                        host_header, unsafe_credentials)

INGEST = "/v2/offload/ingest"
COMPACT = "/v2/offload/compact"
QUERY_MMD = "/v2/offload/query-mmd"
READ_REF = "/v2/offload/read-ref"
HEALTH = "/health"
FRESH_S = 30.0          # heard from the Gateway this recently: no /health before a compaction
RESET_MEANS_TOO_LARGE = 64_000   # the Gateway enforces its body limit by closing the socket
COMPACT_REPLY_EXTRA = 512_000  # a /compact reply may exceed twice our body by a canvas or so
QUICK_RESET_S = 5.0     # ... as soon as it has the headers; a reset after a long wait is a crash
SMALL_REPLY = 1 << 20   # /health and /ingest answer ~100 bytes; parsed, 16 MB of '[],' took 450 MB


class GatewayClient:
    def __init__(self, base_url: str, api_key: str, instance_id: str, *,
                 timeout_ms: int = 90_000, ingest_timeout_ms: int = 5_000,
                 body_limit: int = 1_000_000, breaker: Optional[CircuitBreaker] = None,
                 probe_timeout_s: float = 1.0, health_ttl_s: float = 10.0,
                 reply_limit: int = 0, shared_dir: Any = None,
                 redactor: Optional[Redactor] = None,
                 on_masked: Optional[Callable[[str, str, int], None]] = None) -> None:
        url = BaseURL(base_url)             # ValueError (without the URL) when malformed
        self.base_url = url.display         # credentials are never kept, sent or shown
        self._scheme, self._host, self._port, self._prefix = url.scheme, url.host, url.port, url.prefix
        self._host_header = host_header(url.host, url.port, url.scheme)
        self.instance_id = instance_id or "default"
        bad = unsafe_credentials(api_key, self.instance_id)
        self._api_key = "" if bad else (api_key or "local")  # the Gateway requires a Bearer
        if bad:
            self.instance_id = "(invalid)"
        self.timeout = timeout_ms / 1000.0
        self.ingest_timeout = ingest_timeout_ms / 1000.0
        self.body_limit = body_limit
        # a reply may be larger than its request (UTF-8 vs escapes, repairs), never unbounded
        self.reply_limit = reply_limit or max(16 << 20, 4 * body_limit)
        self.breaker = breaker or CircuitBreaker()
        self.probe_timeout = probe_timeout_s
        self.health_ttl = health_ttl_s
        self.shared = SharedHealth(shared_dir, base_url) if shared_dir is not None else None
        # a route that hangs while /health answers gets its own verdict (shared_health.HungRoute)
        self.routes = {r: HungRoute(shared_dir, base_url, r) for r in (COMPACT, QUERY_MMD)} \
            if shared_dir is not None else {}
        self.read_ref_supported: Optional[bool] = None
        self.last_health: Dict[str, Any] = {}
        self.last_health_at = 0.0
        self.last_ok_at = -FRESH_S           # monotonic time of the last answer in this process
        self.last_latency_ms = 0.0
        self.last_error = ""
        self.fatal_config = ("%s contains characters that cannot be sent in an HTTP header "
                             "(only printable ASCII); Gateway calls are off until it is fixed"
                             % " and ".join(bad)) if bad else ""
        self.config_error = self.fatal_config
        # every text bound for the Gateway is masked on the sending thread (``outbound``)
        self.redactor = redactor or Redactor()
        self.on_masked = on_masked      # (Gateway session id, route, texts masked)
        self._conns: PerThread[Connection] = PerThread(lambda c: c.close())
        self._served: Set[str] = set()      # routes that answered code 0 in this process
        self._waiting_since: Dict[int, float] = {}   # thread -> monotonic start of its call

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
        return self._call(INGEST, body, self.ingest_timeout,
                          reply_limit=min(self.reply_limit, SMALL_REPLY))

    def compact(self, session_id: str, messages: List[Dict[str, Any]], *, ratio: float,
                context_window: int, total_tokens: int,
                message_tokens: Optional[List[int]] = None) -> Dict[str, Any]:
        return self.compact_encoded(encode_compact(
            session_id, self.outbound(session_id, COMPACT, messages), ratio=ratio, context_window=context_window,
            total_tokens=total_tokens, message_tokens=message_tokens))

    def compact_encoded(self, body: bytes, timeout: Optional[float] = None) -> Dict[str, Any]:
        """``/compact`` with a body made by ``encode_compact`` (the compactor sizes it first),
        within ``timeout`` (default: the compaction timeout)."""
        # its reply is our messages, some cut, plus the canvas: parsing a reply many times our
        # body (a flood of tiny objects) would cost hundreds of MB, so it is not read
        data = self._guarded(COMPACT, lambda: self._call(
            COMPACT, body, self.timeout if timeout is None else max(0.0, timeout),
            reply_limit=min(self.reply_limit, 2 * len(body) + COMPACT_REPLY_EXTRA)))
        if not isinstance(data.get("messages"), list) or not isinstance(data.get("report", {}), dict):
            raise GatewayProtocolError("compact reply has no message list")
        return data

    def query_mmd(self, session_id: str, limit: int = 1) -> Dict[str, Any]:
        # hung while ingest answers: the canvas waits, the tool pairs do not (outbox)
        data = self._guarded(QUERY_MMD, lambda: self._call(
            QUERY_MMD, {"session_id": session_id, "limit": limit}, self.ingest_timeout))
        if not isinstance(data.get("mmds", []), list):
            raise GatewayProtocolError("query-mmd reply has no mmds list")
        return data

    def _guarded(self, path: str, request: Any) -> Dict[str, Any]:
        route = self.routes.get(path)
        return request() if route is None else route.call(request)

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
        try:
            status, payload, location = self._request(
                "GET", HEALTH, None, timeout or self.ingest_timeout, min(self.reply_limit, SMALL_REPLY))
        except GatewayUnavailable as exc:
            self._share(False, str(exc))
            raise
        try:
            data, readable = json.loads(payload.decode("utf-8-sig")), True
        except (ValueError, UnicodeDecodeError, RecursionError):
            data, readable = None, False
        if status != 200 and (not readable or status in REDIRECTS):
            # a proxy's page or a redirect: say which, not just "not JSON"
            raise GatewayProtocolError("health answered HTTP %d: %s" % (
                status, page_note(status, payload, location)))
        if not readable:
            raise GatewayProtocolError("health reply is not JSON (or nested too deeply)")
        if status != 200 or not isinstance(data, dict) or data.get("status") not in ("ok", "degraded"):
            raise GatewayProtocolError("health says %r (HTTP %d)" % (
                str(data.get("status") if isinstance(data, dict) else data)[:80], status))
        self.last_health, self.last_health_at = data, now
        self._heard()
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

    def ensure_reachable(self) -> None:
        """Raise ``GatewayUnavailable`` quickly unless the Gateway is known to be up.

        A process that has heard from the Gateway in the last ``FRESH_S`` goes ahead. Otherwise
        a recent "down" verdict from another process on the same store fails at once, and
        anything else costs one ``/health`` of at most ``probe_timeout``: a hung Gateway costs
        a new process about a second, not the whole compaction timeout.
        """
        if self.fatal_config:
            raise GatewayConfigError(self.fatal_config)
        if not self.breaker.allow():
            raise GatewayUnavailable("circuit open after: %s" % (self.breaker.last_error or "failure"))
        if time.monotonic() - self.last_ok_at < FRESH_S:
            return
        self._trust_shared_down()
        try:
            self.health(force=True, timeout=self.probe_timeout)
        except GatewayError as exc:
            self.last_error = "health check before compaction failed: %s" % exc
            self.breaker.record_outage(self.last_error)
            raise GatewayUnavailable(self.last_error) from exc

    def _trust_shared_down(self) -> None:
        """Fail at once while another process's "down" verdict is fresh and this process has
        not heard from the Gateway since: a per-turn process must not re-learn a hung Gateway
        by waiting out a call's timeout. The breaker opens with a probe due at once, so the
        background worker asks ``/health`` (short) and a Gateway back up is used without
        waiting for the verdict to age."""
        if self.shared is None or time.monotonic() - self.last_ok_at < FRESH_S:
            return
        known = self.shared.read()
        if not known or known.get("up") or known["age_s"] >= down_trust_s(known):
            return
        reason = "another process found the Gateway down %.0f s ago (%s)" % (
            known["age_s"], str(known.get("error") or "no answer")[:200])
        self.breaker.record_outage(reason, retry_in=0.0)
        raise GatewayUnavailable(reason)

    def shared_status(self) -> Optional[Dict[str, Any]]:
        """The verdict shared by all processes on this store (``up``, ``age_s``, ``error``)."""
        known = self.shared.read() if self.shared else None
        return {k: known[k] for k in ("up", "age_s", "error", "pid") if k in known} if known else None

    @property
    def available(self) -> bool:
        return self.breaker.allow()

    @property
    def answered(self) -> bool:
        """Whether anything answered at the URL in this process."""
        return self.last_ok_at >= 0

    def note_hung(self) -> bool:
        """The process ends while a call has waited on a Gateway that never answered it longer
        than a probe may: leave the verdict its timeout would have left (True if it did)."""
        starts = list(self._waiting_since.values())      # the calls in flight
        waited = time.monotonic() - min(starts) if starts else 0.0
        if self.answered or waited < self.probe_timeout:
            return False
        self.last_error = "no answer from %s within %.1f s (the process ended waiting)" % (
            self.base_url, waited)
        self.breaker.record_outage(self.last_error)
        self._share(False, self.last_error)
        return True

    def status(self) -> Dict[str, Any]:
        return {"url": self.base_url, "instance_id": self.instance_id,
                "breaker": self.breaker.snapshot(), "shared_health": self.shared_status(),
                "version": self.last_health.get("version", ""),
                "health": self.last_health.get("status", "unknown"),
                "last_latency_ms": round(self.last_latency_ms, 1),
                "last_error": self.last_error, "config_error": self.config_error,
                "read_ref_supported": self.read_ref_supported}

    def close(self) -> None:
        """Close every kept-alive connection, whichever (maybe finished) thread opened it."""
        self._conns.close_all()

    def _drop(self) -> None:  # this thread's connection, after an error or a closing reply
        self._conns.drop()

    def _heard(self) -> None:
        self.last_ok_at = time.monotonic()
        self._share(True)

    def _share(self, up: bool, error: str = "") -> None:
        if self.shared is not None:
            self.shared.record(up, error)

    def outbound(self, session_id: str, route: str, value: Any) -> Any:
        """``value`` with every text masked (unless the user turned it off), the count told to
        ``on_masked``: every JSON body in ``_call``, a ``/compact`` list before encoding."""
        redactor = self.redactor.remembering() if route == COMPACT else self.redactor
        out, masked = redactor.value(value)
        if masked and self.on_masked is not None:
            self.on_masked(session_id, route, masked)
        return out

    # -- transport --------------------------------------------------------------------
    def _call(self, path: str, body: Any, timeout: float,
              reply_limit: int = 0) -> Dict[str, Any]:
        if not self.breaker.allow():
            raise GatewayUnavailable("circuit open after: %s" % (self.breaker.last_error or "failure"))
        self._trust_shared_down()
        if isinstance(body, dict):      # (a /compact body is made of masked messages)
            body = self.outbound(str(body.get("session_id", "")), path, body)
        payload = body if isinstance(body, (bytes, bytearray)) else \
            json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(payload) > self.body_limit:
            raise BodyTooLarge(len(payload), self.body_limit)
        started = time.monotonic()
        thread = threading.get_ident()
        self._waiting_since[thread] = started
        try:
            status, raw, location = self._request("POST", path, payload, timeout, reply_limit)
        except GatewayUnavailable as exc:
            exc.body_bytes = len(payload)
            exc.size_refusal = (exc.reset and len(payload) > RESET_MEANS_TOO_LARGE and
                                time.monotonic() - started < min(QUICK_RESET_S, timeout / 2))
            self.last_error = str(exc)
            if not exc.size_refusal:
                self.breaker.record_outage(str(exc))
                self._share(False, str(exc))
            raise
        finally:
            self._waiting_since.pop(thread, None)
        self.last_latency_ms = (time.monotonic() - started) * 1000
        try:
            data = self._judged(path, status, raw, location)
        except GatewayRejected as exc:
            self.last_error = str(exc)
            if exc.config_problem and not isinstance(exc, (GatewayNotSupported, BodyTooLarge)):
                self.config_error = str(exc)
            if exc.outage:
                self.breaker.record_outage(str(exc))
            else:
                self._heard()
            raise
        except GatewayProtocolError as exc:
            self.last_error = str(exc)
            raise
        except GatewayUnavailable as exc:   # an answer, but not from the Gateway
            self.last_error = str(exc)
            self.breaker.record_outage(str(exc))
            self._share(False, str(exc))
            raise
        self.breaker.record_success()
        self.config_error = ""
        self._heard()
        self._served.add(path)
        return data

    def _judged(self, path: str, status: int, raw: bytes, location: str) -> Dict[str, Any]:
        """``parse_envelope``, knowing this process's history: a route that answered before does not
        vanish for good, its 404 is a Gateway restarting (routes not mounted yet)."""
        try:
            return parse_envelope(path, status, raw, location)
        except GatewayNotSupported:
            if path not in self._served:
                raise
            raise GatewayUnavailable("%s answered 404 for %s, a route it served before "
                                     "(restarting?)" % (self.base_url, path)) from None

    def _request(self, method: str, path: str, payload: Optional[bytes],
                 timeout: float, reply_limit: int = 0) -> Tuple[int, bytes, str]:
        """One exchange, all of it (connect, send, headers, body) within ``timeout``."""
        if self.fatal_config:
            raise GatewayConfigError(self.fatal_config)
        deadline = time.monotonic() + timeout
        headers = {"Authorization": "Bearer " + self._api_key,
                   "x-tdai-service-id": self.instance_id, "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        request = build_request(method, self._host_header, self._prefix + path, headers, payload)
        where = self.base_url + path
        for attempt in (1, 2):
            conn: Optional[Connection] = self._conns.get()
            if conn is not None and not conn.idle():    # closed, or sent bytes nobody asked for
                self._drop()
                conn = None
            reused = conn is not None
            try:
                if conn is None:
                    conn = self._conns.put(Connection(self._scheme, self._host, self._port,
                                                      deadline))
                status, headers, raw = conn.exchange(request, deadline,
                                                      reply_limit or self.reply_limit)
                if not conn.reusable:
                    self._drop()
                return status, raw, headers.get("location", "")
            except TimeoutError as exc:          # ExchangeTimeout included
                self._drop()
                raise GatewayTimeout("no complete answer from %s within %.1fs" % (
                    where, timeout)) from exc
            except ReplyTooLarge as exc:
                self._drop()
                raise GatewayProtocolError("reply from %s is larger than %d bytes; not read" % (
                    where, exc.limit)) from exc
            except BadReply as exc:
                self._drop()
                raise GatewayUnavailable("%s did not answer in HTTP (%s)" % (where, exc)) from exc
            except (PeerClosed, BrokenPipeError, ConnectionResetError) as exc:
                self._drop()
                fresh_start = not getattr(exc, "started", True) or not isinstance(exc, PeerClosed)
                if reused and attempt == 1 and fresh_start:
                    continue        # a kept-alive socket the server had closed: one fresh try
                raise GatewayUnavailable("connection to %s lost (%s)" % (
                    self.base_url, type(exc).__name__), reset=True) from exc
            except OSError as exc:
                self._drop()
                raise GatewayUnavailable("cannot reach %s (%s)" % (
                    self.base_url, getattr(exc, "strerror", None) or type(exc).__name__)) from exc
        raise GatewayUnavailable("cannot reach %s" % self.base_url)

