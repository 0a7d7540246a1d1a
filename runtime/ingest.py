"""The background sender: delivers each session's outbox to the Gateway, in order.

One thread per process. It leases a session before sending it (processes sharing a store
never send the same rows), sends prompt rows (L1.5) alone and consecutive tool pairs in
batches bounded by bytes (content is loaded per batch, never the whole backlog), marks rows
delivered only after the Gateway said ``code: 0``, retries with backoff, and refreshes a
session's task canvas after new data was accepted. While the circuit breaker is open it
only runs the cheap half-open probe when it is due.

It knows nothing of sessions: an ``IngestPolicy`` (the runtime's, ``runtime/ingest_policy.py``) says
what goes with a session's rows (``Outgoing``: its Gateway id, the turn's prompt and recent
messages), hears which sessions' rows were accepted, names the canvases to refresh and gets
what the Gateway returned for each (``Canvas``).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Set, Tuple

from ..memory_gateway.client import (GatewayClient, GatewayError, GatewayRejected,
                     GatewayUnavailable)
from ..archive.outbox import Outbox, OutboxHead, OutboxRow
from ..archive.refused import refusals_line
from ..memory_gateway.pair_cut import args_text, cut_args
from ..memory_gateway.timestamps import gateway_timestamp
from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload.ingest")

MAX_PAIRS_PER_BATCH = 100
ROWS_PER_PASS = 1000        # row heads (no content) read per session and pass
BATCH_SHARE = 0.8           # of the body limit: a batch's stored bytes (JSON escaping adds)
SHRUNK_SHARE = 0.5          # of the body limit: what a single too-large result is cut to
CONFIG_RETRY_S = 30.0
BOUNDARY_KEEP = 4096        # sessions whose prompt boundary is remembered
LEASE_MIN_S = 30.0
ALL_CANVASES = 100          # query-mmd's limit for every file (the Gateway keeps 15 and the active)
CUT_NOTE = ("\n\n[... %d characters not sent to the Gateway; the full result is in the local "
            "archive: tdai_read_cos(tool_call_id=\"%s\") ...]")


@dataclass(frozen=True)
class Outgoing:
    """What goes with a session's rows: its Gateway id, and the turn's prompt and recent
    messages that accompany tool pairs (context for the Gateway's L1 summaries)."""
    gateway_id: str
    prompt: str = ""
    recent: Tuple[Dict[str, str], ...] = ()


@dataclass(frozen=True)
class Canvas:
    """The task canvas the Gateway holds for a session (its current Mermaid file)."""
    filename: str
    content: str


class CanvasDue(NamedTuple):
    """One canvas to fetch: the session, its Gateway id, and the policy's token for the asks
    the fetch answers (handed back with the answer)."""
    session: str
    gateway_id: str
    ask: int = 0


class IngestPolicy(Protocol):
    def outgoing(self, session: str) -> Outgoing:
        """What to send with this session's rows now."""

    def accepted(self, session: str) -> None:
        """The Gateway accepted rows of this session (its canvas may have changed)."""

    def canvases_due(self, delivered: Set[str]) -> List[CanvasDue]:
        """The canvases to ask for after a pass."""

    def canvas(self, due: CanvasDue, found: Optional[Canvas]) -> None:
        """The answer for one canvas asked for (None: none, or the Gateway failed)."""


class IngestWorker:
    def __init__(self, client: GatewayClient, outbox: Outbox, policy: IngestPolicy,
                 hold_unconfigured: bool = False) -> None:
        """``hold_unconfigured``: the user configured this Gateway, so rows queued while none
        was configured stay held (``archive/outbox.py``) until they release them."""
        self.client = client
        self.outbox = outbox
        self.policy = policy
        self.hold_unconfigured = hold_unconfigured
        self._held_said = False
        self.delivered = 0
        self.last_error = ""
        self.owner = "%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
        # a session's lease outlives any one send (renewed before each); when its holder
        # dies, another process takes the session over after this long
        self.lease_s = max(LEASE_MIN_S, 3 * client.ingest_timeout)
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._passes = 0
        self._refusals: "Counter[str]" = Counter()      # rows refused for good this pass, by why
        self._retry_at: Dict[str, float] = {}     # session -> monotonic time of its next try
        self._retry_lock = threading.Lock()         # kick()/flush() change it on other threads
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
        self._retry_now(session)
        self._wake.set()

    def flush(self, session: Optional[str] = None, timeout: float = 5.0) -> bool:
        """Wait until the session's (or every) backlog is delivered; False on timeout/outage."""
        deadline = time.monotonic() + timeout
        if session is not None:
            self._retry_now(session)
        while True:
            if self.outbox.backlog(session, self.hold_unconfigured) == 0:
                return True
            breaker = self.client.breaker
            if not breaker.allow() and not breaker.probe_due():
                return False        # an outage this process saw: no wait for it
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return False
            # a session in backoff is skipped by every pass until its retry time: waking the
            # worker before then spun both threads for the whole wait
            retry_in = self._retry_in(session, now)
            if retry_in >= left:
                return False        # nothing of it is sent before the deadline
            with self._cond:
                seen = self._passes
                if retry_in <= 0:
                    self._wake.set()
                self._cond.wait_for(lambda: self._passes > seen,
                                    timeout=min(left, retry_in if retry_in > 0 else 1.0))

    def _retry_in(self, session: Optional[str], now: float) -> float:
        """Seconds until the session's backoff ends (0: not in backoff, or every session)."""
        if session is None:
            return 0.0
        with self._retry_lock:
            return max(0.0, self._retry_at.get(session, now) - now)

    def _retry_now(self, session: str) -> None:
        with self._retry_lock:
            self._retry_at.pop(session, None)

    def _retry_later(self, session: str, seconds: float) -> None:
        with self._retry_lock:
            self._retry_at[session] = time.monotonic() + seconds

    def _waiting(self) -> frozenset:
        """Sessions still in backoff; the ones whose backoff ended are forgotten (the table
        would otherwise hold every session that ever failed once)."""
        now = time.monotonic()
        with self._retry_lock:
            self._retry_at = {s: t for s, t in self._retry_at.items() if t > now}
            return frozenset(self._retry_at)

    def stop(self, timeout: float = 2.0) -> None:
        """Let a pass in progress finish (bounded) when the Gateway answers this process. With
        the breaker open the worker sends nothing, at most it probes ``/health``; a Gateway
        that never answered this process is not waited for either (a call already waiting
        longer than a probe leaves that verdict for the next processes): a process ending its
        turn beside a hung Gateway exits at once. Rows not confirmed stay queued; the Gateway
        drops a pair it already has (by its tool-call id)."""
        self._stop = True
        self._wake.set()
        client = self.client
        if client.breaker.allow() and not client.answered:
            client.note_hung()
        waits = client.breaker.allow() and client.answered
        self._thread.join(timeout if waits else min(timeout, 0.1))

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
        if self.hold_unconfigured and not self._held_said:
            self._say_held()
        sessions = self.outbox.claim(self.owner, self.lease_s, time.time(), skip=self._waiting(),
                                    hold_unconfigured=self.hold_unconfigured)
        refreshed = set()
        more = False
        try:
            while sessions:
                session = sessions.pop(0)
                try:
                    ok, more_here = self._deliver_session(session)
                except Exception as exc:    # one session's failure is that session's alone
                    ok, more_here = False, False
                    self.last_error = "delivering %s failed: %s" % (session, exc)
                    log.warning("tencentdb-offload: %s", self.last_error, exc_info=True)
                    self._retry_later(session, CONFIG_RETRY_S)
                finally:
                    self.outbox.release(session, self.owner)
                more = more or more_here
                if ok:
                    refreshed.add(session)
                if not self.client.available:
                    return
        finally:
            for session in sessions:        # not reached (outage): free them for others
                self.outbox.release(session, self.owner)
            if self._refusals:              # one line per pass, however many rows
                log.warning("tencentdb-offload: %s", refusals_line(self._refusals))
                self._refusals.clear()
        if more:
            self._wake.set()     # more rows are waiting
        self._refresh_canvases(refreshed)

    def _say_held(self) -> None:
        """One log line per process: rows queued before a Gateway was configured are held."""
        self._held_said = True
        held = self.outbox.held()
        if held:
            log.warning("tencentdb-offload: %d outbox row(s) queued while no Gateway was configured "
                        "are held, not sent to %s; `python3 <plugin dir> outbox send-held` sends "
                        "them, `outbox drop-held` drops them (the archive keeps them)",
                        held, self.client.base_url)

    def _deliver_session(self, session: str) -> Tuple[bool, bool]:
        """Send the session's waiting rows in order, one byte-bounded batch at a time.
        Returns (all sent, rows left for the next pass)."""
        gid = self.policy.outgoing(session).gateway_id
        heads = self.outbox.heads(session, ROWS_PER_PASS, self.hold_unconfigured)
        budget = int(self.client.body_limit * BATCH_SHARE)
        i = 0
        while i < len(heads):
            if heads[i].kind == "prompt":
                batch = [heads[i]]
                i += 1
            else:
                batch, size = [], 0
                while (i < len(heads) and heads[i].kind == "pair" and len(batch) < MAX_PAIRS_PER_BATCH
                       and (not batch or size + heads[i].bytes < budget)):
                    size += heads[i].bytes
                    batch.append(heads[i])
                    i += 1
            if not self._renewed(session):
                return False, False         # our lease lapsed: another sender has the session
            if not self._send(gid, self._load(batch), session):
                return False, False
        return True, len(heads) == ROWS_PER_PASS

    def _load(self, batch: List[OutboxHead]) -> List[OutboxRow]:
        """Content of a batch; a single result over the body limit loads only the part sent."""
        limit = self.client.body_limit
        if len(batch) == 1 and batch[0].bytes > limit * BATCH_SHARE:
            return self.outbox.load(batch, int(limit * SHRUNK_SHARE))
        return self.outbox.load(batch)

    def _send(self, gid: str, batch: List[OutboxRow], session: str) -> bool:
        gone = [r for r in batch if r.kind == "pair" and "result" not in r.payload]
        if gone:        # its archived result was deleted (retention) before it was sent
            self.outbox.mark_failed([r.id for r in gone], "archived result deleted", dead=True)
            batch = [r for r in batch if r not in gone]
        if not batch:               # delivered or reclaimed since the heads were read
            return True
        ids = [r.id for r in batch]
        try:
            if batch[0].kind == "prompt":
                p = batch[0].payload
                self.client.ingest(gid, [], prompt=p.get("prompt", ""),
                                   recent_messages=p.get("recent_messages") or None)
                self._set_boundary(session, gateway_timestamp())
            else:
                context = self.policy.outgoing(session)
                self.client.ingest(gid, [self._after_boundary(session, self._noted(r))
                                         for r in batch],
                                   prompt=context.prompt,
                                   recent_messages=list(context.recent) or None)
        except GatewayError as exc:
            # over ours or its body limit (a 413, or a cut right after the body): send less
            if getattr(exc, "too_large", False) or getattr(exc, "size_refusal", False):
                if len(batch) > 1:
                    return self._one_by_one(gid, batch, session)
                return self._send_shrunk(gid, batch[0], session)
            return self._refused(gid, batch, session, exc)
        self.outbox.mark_delivered(ids)
        self.delivered += len(ids)
        self.policy.accepted(session)
        return True

    def _refused(self, gid: str, batch: List[OutboxRow], session: str, exc: GatewayError) -> bool:
        """A batch the Gateway did not take: kept for later, or (a row it refuses for good)
        marked dead; True when nothing of it waits any more. A broken reply (protocol
        error) or a refusal worth retrying waits with a backoff."""
        ids = [r.id for r in batch]
        self.last_error = str(exc)
        if isinstance(exc, GatewayUnavailable):
            return False
        if isinstance(exc, GatewayRejected):
            if exc.auth_refused:
                self._retry_later(session, CONFIG_RETRY_S)
                return False
            if exc.config_problem:
                if len(batch) > 1:      # find the row the Gateway refuses, deliver the rest
                    return self._one_by_one(gid, batch, session)
                self.outbox.mark_failed(ids, str(exc), dead=True)
                self._refusals[str(exc)] += len(ids)
                return True
        self._backoff(session, batch)
        self.outbox.mark_failed(ids, str(exc), dead=False)
        return False

    def _one_by_one(self, gid: str, batch: List[OutboxRow], session: str) -> bool:
        """A batch sent row by row, the lease renewed before each: a split can outlast the
        lease, and another process would then send the same rows again."""
        for row in batch:
            if not (self._renewed(session) and self._send(gid, [row], session)):
                return False
        return True

    def _renewed(self, session: str) -> bool:
        return self.outbox.renew(session, self.owner, self.lease_s, time.time())

    @staticmethod
    def _noted(row: OutboxRow) -> Dict[str, Any]:
        """A pair loaded as a prefix says where the rest is."""
        if not row.cut:
            return row.payload
        return dict(row.payload, result=row.payload["result"] + CUT_NOTE % (
            row.cut, row.payload.get("tool_call_id", "")))

    def _set_boundary(self, session: str, stamp: str) -> None:
        """The newest sessions' boundaries only (a messaging gateway serves conversations for
        months): a session pushed out fares as in a new process, its next prompt sets it."""
        self._boundary.pop(session, None)
        self._boundary[session] = stamp
        while len(self._boundary) > BOUNDARY_KEEP:
            del self._boundary[next(iter(self._boundary))]

    def _after_boundary(self, session: str, pair: Dict[str, Any]) -> Dict[str, Any]:
        """The Gateway attaches a pair to the task whose boundary (stamped with the Gateway's
        clock when the turn's prompt arrived) sorts before the pair's timestamp. A pair
        recorded before that prompt was delivered (slow worker, outage) would land in the
        previous task, so it carries the delivery time instead."""
        floor = self._boundary.get(session, "")
        if floor and str(pair.get("timestamp", "")) < floor:
            return dict(pair, timestamp=floor)
        return pair

    def _send_shrunk(self, gid: str, row: OutboxRow, session: str) -> bool:
        """A single pair over the body limit: send it with its result cut to fit (halved
        again if escaping still makes it too large), or its arguments when they are the
        larger part. The full pair stays in the local archive, where tdai_read_cos reads it."""
        text = row.payload.get("result")
        text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
        params = args_text(row.payload.get("params"))
        most = int(self.client.body_limit * SHRUNK_SHARE)
        keep = min(len(text) // 2, most)
        if not self._renewed(session):      # each cut is one more send
            return False
        if keep >= 200 and len(text) >= len(params):
            payload = dict(row.payload, result=text[:keep])
            return self._send(gid, [row._replace(payload=payload, cut=row.cut + len(text) - keep)],
                              session)
        keep = min(len(params) // 2, most)      # the arguments are the large part
        if keep < 200:
            self.outbox.mark_failed([row.id], "too large for the Gateway even when cut", dead=True)
            return True
        payload = dict(row.payload, params=cut_args(row.payload.get("params"), keep))
        return self._send(gid, [row._replace(payload=payload)], session)

    def _backoff(self, session: str, batch: List[OutboxRow]) -> None:
        attempts = max(r.attempts for r in batch) + 1
        self._retry_later(session, min(60.0, 0.5 * (2 ** min(attempts, 7))))

    def _refresh_canvases(self, delivered: Set[str]) -> None:
        for due in self.policy.canvases_due(delivered):
            if not self.client.available:
                return
            found = None
            try:
                data = self.client.query_mmd(due.gateway_id, limit=1)
                if not data.get("currentMmd") and data.get("mmds"):
                    # no active file: limit=1 gave the oldest; the Gateway shows the newest drawn
                    data = self.client.query_mmd(due.gateway_id, limit=ALL_CANVASES)
                found = current_canvas(data)
            except GatewayError as exc:
                self.last_error = "canvas refresh: %s" % exc
            self.policy.canvas(due, found)


def current_canvas(data: Dict[str, Any]) -> Optional[Canvas]:
    """The active canvas in a query-mmd answer (none marked active: the newest file with
    content, as the Gateway's own injection picks); None when there is none. An active file
    that is empty (the Gateway judged the prompt a new task and has drawn nothing yet) is a
    Canvas with no content: the previous task's canvas is no longer current (the Gateway's
    own injection removes it then)."""
    current = data.get("currentMmd")
    mmds = [m for m in data.get("mmds") or [] if isinstance(m, dict)]
    active = next((m for m in mmds if current and m.get("filename") == current), None)
    drawn = [m for m in mmds if str(m.get("content") or "").strip()]
    chosen = active or max(drawn, key=lambda m: str(m.get("filename") or ""), default=None)
    content = str(chosen.get("content") or "") if chosen else ""
    if not content.strip():
        return Canvas(str(current), "") if active is not None else None
    return Canvas(str(chosen.get("filename") or ""), content)
