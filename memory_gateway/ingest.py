"""The background sender: delivers each session's outbox to the Gateway, in order.

One thread per process. It sends prompt rows (L1.5) alone and consecutive tool pairs in
batches, marks rows delivered only after the Gateway said ``code: 0``, retries with backoff,
and refreshes a session's task canvas after new data was accepted. While the circuit
breaker is open it only runs the cheap half-open probe when it is due.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Dict, List, Optional

from ..context import canvas
from .client import (BodyTooLarge, GatewayClient, GatewayError, GatewayRejected,
                             GatewayUnavailable)
from ..session import SessionRegistry, gateway_session_id
from .timestamps import gateway_timestamp

log = logging.getLogger("tencentdb_offload.ingest")

MAX_PAIRS_PER_BATCH = 100
CONFIG_RETRY_S = 30.0


class IngestWorker:
    def __init__(self, client: GatewayClient, store: Any, registry: SessionRegistry, *,
                 canvas: bool = True) -> None:
        self.client = client
        self.store = store
        self.registry = registry
        self.canvas = canvas
        self.delivered = 0
        self.dead = 0
        self.last_error = ""
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._passes = 0
        self._retry_at: Dict[str, float] = {}
        self._boundary: Dict[str, str] = {}     # session -> when its last prompt was accepted
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="tencentdb-offload-ingest",
                                        daemon=True)
        self._thread.start()

    # -- control ----------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def kick(self, session: str) -> None:
        """Deliver this session now, skipping any retry backoff it is in."""
        self._retry_at.pop(session, None)
        self._wake.set()

    def flush(self, session: Optional[str] = None, timeout: float = 5.0) -> bool:
        """Wait until the session's (or every) backlog is delivered; False on timeout/outage."""
        deadline = time.monotonic() + timeout
        if session is not None:
            self._retry_at.pop(session, None)
        while True:
            if self.store.backlog(session) == 0:
                return True
            if not self.client.available:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._cond:
                seen = self._passes
                self._wake.set()
                self._cond.wait_for(lambda: self._passes > seen, timeout=min(left, 1.0))

    def stop(self, timeout: float = 2.0) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout)

    # -- loop -------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            if self._stop:
                break
            try:
                self._pass()
            except Exception as exc:   # the worker must survive anything
                self.last_error = "ingest pass failed: %s" % exc
                log.warning("tencentdb-offload: %s", self.last_error)
            with self._cond:
                self._passes += 1
                self._cond.notify_all()

    def _pass(self) -> None:
        breaker = self.client.breaker
        if not breaker.allow():
            if not breaker.probe_due() or not self.client.probe():
                return
        rows = self.store.pending(limit=500)
        by_session: Dict[str, List[tuple]] = {}
        for row in rows:
            by_session.setdefault(row[1], []).append(row)
        now = time.monotonic()
        refreshed = set()
        for session, srows in by_session.items():
            if self._retry_at.get(session, 0) > now:
                continue
            ok = self._deliver_session(session, srows)
            if ok:
                refreshed.add(session)
            if not self.client.available:
                return
        if by_session and len(rows) == 500:
            self._wake.set()     # more rows are waiting
        if self.canvas:
            self._refresh_canvases(refreshed)

    def _deliver_session(self, session: str, rows: List[tuple]) -> bool:
        gid = gateway_session_id(session)
        state = self.registry.peek(session)
        i = 0
        while i < len(rows):
            if rows[i][2] == "prompt":
                batch = [rows[i]]
                i += 1
            else:
                batch = []
                size = 0
                while (i < len(rows) and rows[i][2] == "pair" and len(batch) < MAX_PAIRS_PER_BATCH
                       and (not batch or size + rows[i][5] < self.client.body_limit * 0.8)):
                    size += rows[i][5]
                    batch.append(rows[i])
                    i += 1
            if not self._send(gid, batch, state, session):
                return False
        return True

    def _send(self, gid: str, batch: List[tuple], state: Any, session: str) -> bool:
        ids = [r[0] for r in batch]
        try:
            if batch[0][2] == "prompt":
                p = batch[0][3]
                self.client.ingest(gid, [], prompt=p.get("prompt", ""),
                                   recent_messages=p.get("recent_messages") or None)
                self._boundary[session] = gateway_timestamp()
            else:
                prompt, recent = "", None
                if state is not None:
                    prompt, recent = state.prompt, list(state.recent) or None
                self.client.ingest(gid, [self._after_boundary(session, r[3]) for r in batch],
                                   prompt=prompt, recent_messages=recent)
        except BodyTooLarge:
            if len(batch) > 1:
                return all(self._send(gid, [r], state, session) for r in batch)
            return self._send_shrunk(gid, batch[0], state, session)
        except GatewayUnavailable as exc:
            self.last_error = str(exc)
            return False
        except GatewayRejected as exc:
            self.last_error = str(exc)
            if exc.config_problem and exc.status in (401, 403):
                self._retry_at[session] = time.monotonic() + CONFIG_RETRY_S
                return False
            if exc.config_problem:
                if len(batch) > 1:      # find the row the Gateway refuses, deliver the rest
                    return all(self._send(gid, [r], state, session) for r in batch)
                self.store.mark_failed(ids, str(exc), dead=True)
                self.dead += 1
                log.warning("tencentdb-offload: Gateway refused an outbox row for good: %s", exc)
                return True
            self._backoff(session, batch)
            self.store.mark_failed(ids, str(exc), dead=False)
            return False
        except GatewayError as exc:      # protocol error: a broken reply, try again later
            self.last_error = str(exc)
            self._backoff(session, batch)
            self.store.mark_failed(ids, str(exc), dead=False)
            return False
        self.store.mark_delivered(ids)
        self.delivered += len(ids)
        if state is not None:
            state.canvas_wanted = True
        return True

    def _after_boundary(self, session: str, pair: Dict[str, Any]) -> Dict[str, Any]:
        """The Gateway attaches a pair to the task whose boundary (stamped with the Gateway's
        clock when the turn's prompt arrived) sorts before the pair's timestamp. A pair
        recorded before that prompt was delivered (slow worker, outage) would land in the
        previous task, so it carries the delivery time instead."""
        floor = self._boundary.get(session, "")
        if floor and str(pair.get("timestamp", "")) < floor:
            return dict(pair, timestamp=floor)
        return pair

    def _send_shrunk(self, gid: str, row: tuple, state: Any, session: str) -> bool:
        """A single pair over the body limit: send it with its result cut to fit.

        The full result stays in the local archive, where tdai_read_cos reads it."""
        pair = dict(row[3])
        text = pair.get("result")
        text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
        keep = max(1000, int(self.client.body_limit * 0.6))
        pair["result"] = (text[:keep] + "\n\n[... %d characters not sent to the Gateway; the full "
                          "result is in the local archive: tdai_read_cos(tool_call_id=\"%s\") ...]"
                          % (len(text) - keep, pair.get("tool_call_id", "")))
        return self._send(gid, [(row[0], row[1], row[2], pair, row[4], len(pair["result"]))],
                          state, session)

    def _backoff(self, session: str, batch: List[tuple]) -> None:
        attempts = max(r[4] for r in batch) + 1
        self._retry_at[session] = time.monotonic() + min(60.0, 0.5 * (2 ** min(attempts, 7)))

    def _refresh_canvases(self, sessions: set) -> None:
        wanted = [s for s in self.registry.all() if s.canvas_wanted or s.key in sessions]
        for state in wanted:
            if not self.client.available:
                return
            state.canvas_wanted = False
            try:
                data = self.client.query_mmd(state.gateway_id, limit=1)
            except GatewayError as exc:
                self.last_error = "canvas refresh: %s" % exc
                continue
            current = data.get("currentMmd")
            mmds = [m for m in data.get("mmds") or [] if isinstance(m, dict)]
            chosen = next((m for m in mmds if m.get("filename") == current), mmds[-1] if mmds else None)
            content = str(chosen.get("content") or "") if chosen else ""
            if not content.strip():
                continue
            state.set_canvas(canvas.format_block(str(chosen.get("filename") or ""), content))
