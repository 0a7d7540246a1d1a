"""The per-process runtime: settings, store + writer, session registry, Gateway client,
ingest worker, reclaimer and recall tools, shared by every engine copy and every hook.

Built once per process and ``HERMES_HOME`` (``host/wiring.shared_runtime``); engines hold a
reference to it (never a copy), so no lock, socket or sqlite connection is ever inside
deep-copied state.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..settings.config import Settings, announce_unconfigured_gateway
from ..memory_gateway.client import GatewayClient, GatewayError
from ..memory_gateway.compaction import GatewayCompactor, GatewayOutcome
from .ingest import IngestWorker
from . import after_fork, redaction
from .gateway_link import client_for, probe
from .ingest_policy import SessionIngestPolicy
from ..session.state import SessionRegistry, SessionState
from .reclaimer import Reclaimer
from ..context.tokens import TokenMemo
from ..archive.store import ArchiveItem, Store, StoreError
from ..archive.writer import StoreWriter
from ..archive.recall import RecallTools
from ..archive.lcm_history import LcmHistory
from ..archive.visibility import Scope, scope_of
from ..archive.aliases import op_alias
from ..archive.seal_key import load_seal
from ..hermes.compat import HOST_IMPORT_ERROR
from ..hermes.host import running_host
from ..compaction.ahead import PreparedCompactions, Aim, GatewayAttempt
from ..compaction.request_view import RequestView
from ..session.record import Compaction, Level
from ..context import departures, result_keys
from ..context.sealed import SealedWork
from ..status.model import StatusReport
from ..common.peer_text import plugin_logger
from ..common.once_per_error import OncePerError
from ..common.tally import Tally
from .noted_errors import RecentErrors
from . import status_view

log = plugin_logger("tencentdb_offload")
FLUSH_BEFORE_COMPACT_S = 0.5    # a compaction waits at most this for the backlog (a host may pool them)


class Runtime:
    def __init__(self, settings: Settings, warnings: Optional[List[str]] = None,
                 env: Optional[Mapping[str, str]] = None) -> None:
        import os
        self.settings = settings
        self.warnings = list(warnings or [])
        if HOST_IMPORT_ERROR:               # Hermes is there but rejects this engine: say so
            self.warnings.append(HOST_IMPORT_ERROR)
        self.started, self.at_rest = time.time(), redaction.at_rest(settings)     # (mask at rest or None)
        self.errors = RecentErrors(20)
        self.counters = Tally()          # bumped on hook threads
        self.note_fault = OncePerError(self.note_error)     # our own code failed: once each
        self.last_overhead_estimate = 0
        self.closed = False
        self._wiring = threading.Lock()     # the Gateway client and its sender appear together
        self.store: Optional[Store] = None
        self.store_error = ""
        store_dir = settings.resolved_store_dir(env if env is not None else os.environ)
        store: Optional[Store] = None
        try:
            store = Store(store_dir, unconfigured=not settings.gateway_configured)
            if store.last_error:
                self.warnings.append(store.last_error)
        except StoreError as exc:
            self.store_error = "%s — recall tools are off until this is fixed" % exc
            self.warnings.append(self.store_error)
        # what the plugin writes into the context carries this seal (context/provenance.py)
        self.seal, seal_problem = load_seal(store_dir)
        if seal_problem:
            self.warnings.append(seal_problem)
        self.sealed = SealedWork(self.seal)     # bound once: compaction never hands the seal down
        # everything reads the store through ``self.store``: one opened later is used at once
        self.registry = SessionRegistry(
            settings.max_sessions, alias_lookup=self._alias_lookup, alias_store=self._store_alias,
            on_error=self.note_error, on_create=self.inherit)
        self.client: Optional[GatewayClient] = None
        self.worker: Optional[IngestWorker] = None
        self.reclaimer = Reclaimer(self._reclaim, settings.retention_days)
        # retention runs on the writer thread: at start-up, then whenever it is due (daily)
        # without a store the writer keeps retrying to open one (rows wait, capped, in memory)
        self.store_dir = store_dir
        self.ahead = PreparedCompactions(self.gateway_attempt, settings.max_sessions, self.note_fault)
        # what compaction sees of this process (compaction/process_view.py)
        self.archive, self.gateway, self.clock = RuntimeArchive(self), RuntimeGateway(self), RuntimeClock(self)
        self.request_view = RequestView(self.sealed, self.leave_for_next_process
                                        if settings.canvas else None)
        self.tools = RecallTools(None, self.flush_writes, history=LcmHistory.from_settings(
            settings, env if env is not None else os.environ))
        if store is not None:
            self.use_store(store)
        elif settings.gateway_enabled:
            self.warnings.append("Gateway offload needs the store (durable outbox); running "
                                 "local-only until the store opens")
        self.writer = self.new_writer()
        for w in self.warnings:
            log.warning("tencentdb-offload: %s", w)
        after_fork.watch(self)

    def use_store(self, store: Store) -> None:
        """Wire ``store`` in: recall, the Gateway client and sender, status. At start, or on the
        writer thread when a store that could not be opened at start opens later."""
        self.store = store
        self.tools.store = store
        if self.settings.gateway_enabled and self.client is None:
            client = client_for(self.settings, store.directory, **redaction.gateway_redaction(self))
            self._wire(client, self.new_worker(client, store))
        if self.store_error in self.warnings:       # said at start; no longer true
            self.warnings.remove(self.store_error)
        self.store_error = ""

    def _open_store(self) -> Store:
        store = Store(self.store_dir, unconfigured=not self.settings.gateway_configured)
        self.use_store(store)
        log.warning("tencentdb-offload: the store opened: archiving and recall are on")
        return store

    def _alias_lookup(self, session_id: str) -> Optional[str]:
        return self.store.get_alias(session_id) if self.store is not None else None

    def _reclaim(self, days: int, now: Optional[float] = None,
                 keep_since: Optional[float] = None) -> Dict[str, int]:
        return self.store.reclaim(days, now, keep_since) if self.store is not None else {}

    def _store_alias(self, session_id: str, conversation: str) -> None:
        """Queued for the writer: Hermes' thread never waits on the store's write lock."""
        self.writer.submit(op_alias(session_id, conversation, self.now()))

    def new_writer(self) -> StoreWriter:
        return StoreWriter(self.store, on_commit=self._after_commit,
                           on_idle=self.reclaimer.maybe_run,
                           opener=None if self.store else self._open_store)

    def new_worker(self, client: GatewayClient, store: Store) -> IngestWorker:
        return IngestWorker(client, store.outbox, SessionIngestPolicy(
            self.registry, canvas=self.settings.canvas, on_answer=self._gateway_answered),
            hold_unconfigured=self.settings.gateway_configured)

    def _wire(self, client: GatewayClient, worker: IngestWorker) -> None:
        """The client and its sender for every thread (the sender first: whoever sees the
        client finds it); a runtime closed meanwhile stops them, nothing outlives close()."""
        with self._wiring:
            if not self.closed:
                self.tools.read_ref = self._read_ref
                self.worker, self.client = worker, client
                return
        worker.stop()
        client.close()

    # -- helpers used by hooks and engines --------------------------------------------
    def now(self) -> float:
        """Wall time at start + monotonic time since: a stepped clock never makes fresh rows
        look old to retention, nor a step forward a pause (the reclaimer reports the step)."""
        return self.reclaimer.trusted_now()

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @property
    def mode(self) -> str:
        if not self.settings.enabled:
            return "disabled"
        if self.client is None:
            return "local"
        if self.client.available:
            return "gateway"
        return ("local (gateway unavailable)" if self.gateway.relied_on
                else "local (no Gateway configured)")

    def note_error(self, message: str, conversation: str = "") -> None:
        """A guard caught something: keep the line for status, count it, and log it (with
        the traceback when called from an ``except`` block: the cause must be findable).
        ``conversation``: whose it is, never put in ``message`` (status decides who reads it)."""
        self.errors.add(message, conversation)
        self.counters.add("errors_caught")
        log.warning("tencentdb-offload: %s%s", message, " (conversation %s)" % conversation
                    if conversation else "", exc_info=sys.exc_info()[0] is not None)

    def scope_for(self, conversation: str, lineage: Any = ()) -> Scope:
        """What ``conversation`` may read ('': whoever runs the slash command), decided by
        ``archive/visibility.py`` for this host."""
        return scope_of(conversation, tuple(lineage), shared_host=running_host().messaging_gateway,
                        lcm_shared=self.settings.lcm_history_shared, session_ids=self._session_ids)

    def _session_ids(self, keys: Any) -> List[str]:
        """Hermes session ids aliased to the conversations ``keys`` (ids rotated at compactions)."""
        try:
            return self.store.aliases_of(keys) if self.store is not None else []
        except Exception as exc:        # unreadable: the conversations' own ids only
            self.note_error("session aliases unreadable (%s)" % exc)
            return []

    @staticmethod
    def near_threshold(state: SessionState) -> bool:
        """Past 60 % of the trigger: time to have the Gateway's L1 summaries ready."""
        return bool(state.threshold_tokens) and state.last_usage >= state.threshold_tokens * 0.6

    def flush_writes(self, timeout: float = 5.0) -> bool:
        return self.writer.flush(timeout)

    def flush(self, session: Optional[str] = None, timeout: float = 5.0) -> bool:
        """Persist queued rows, then (with a Gateway) deliver the session's backlog."""
        deadline = time.monotonic() + timeout
        self.writer.flush(timeout)
        if self.worker is None:
            return True
        return self.worker.flush(session, max(0.0, deadline - time.monotonic()))

    def session_ended(self, session: str, timeout: float = 2.0) -> None:
        """A real session boundary: its rows reach disk (bounded), then the sender goes; a
        compaction prepared for it is not needed any more."""
        self.ahead.drop(session)
        self.writer.flush(timeout)
        if self.worker is not None:
            self.worker.kick(session)

    def turn_completed(self, session: str) -> None:
        """The turn's tool pairs can go to the Gateway now; nobody waits for it."""
        if self.worker is not None:
            self.worker.kick(session)

    def archive_departures(self, state: SessionState, gone: departures.Departures) -> None:
        """Full originals of what left, except results the hook archived: it took every text
        of its ids (``claim_result``); what leaves under one is a stand-in for one of them."""
        with state.lock:
            state.deleted_ids |= gone.left_ids
            state.confirmed_ids |= gone.summarised_ids
            hooked = {d.tool_call_id for d in gone.items if d.tool_call_id in state.processed_ids}
            # a result the hook never saw (history from before the plugin, or an earlier
            # process's) is archived here, each text of a reused id once; a stand-in (our
            # sealed trim, a Gateway summary) is not a result
            items = [ArchiveItem(*d) for d in gone.items
                     if d.kind != "tool_result" or (
                         d.tool_call_id not in hooked and not self._stand_in(d.content)
                         and state.claim_result(d.tool_call_id, result_keys.seen_mark(d.content)))]
        if items:
            self.writer.submit(Store.op_archive(state.key, items, self.now(), self.at_rest))

    def _stand_in(self, text: str) -> bool:
        return text.startswith(departures.OFFLOADED_MARK) or self.sealed.is_ours(text)

    def gateway_compact(self, state: SessionState, messages: List[Dict[str, Any]], *, target: int,
                        context_length: int, overhead: int,
                        count: Callable[[Any], int]) -> Tuple[Optional[GatewayOutcome], str]:
        """Deliver the session's backlog (bounded: L1 summaries first), then ask the Gateway to
        compact. Returns (outcome, "") or (None, why) for whatever the Gateway did (down,
        refused, a reply we will not use: every ``GatewayError``, ``ReplyRefused`` included).
        A failure of our own is logged with its traceback and raised, for the engine's guard."""
        try:
            self.client.ensure_reachable()    # a Gateway known or found down costs no flush wait
            self.flush(state.key, FLUSH_BEFORE_COMPACT_S)
            return GatewayCompactor(self.client).run(
                state.gateway_id, messages, target_tokens=target, context_length=context_length,
                calibrator=state.calibrator, overhead_estimate=overhead, count=count), ""
        except GatewayError as exc:
            return None, str(exc)
        except Exception:
            log.debug("tencentdb-offload: Gateway compaction failed in the plugin", exc_info=True)
            raise

    def gateway_attempt(self, state: SessionState, clean: List[Dict[str, Any]], aim: Aim,
                        overhead: int, count: Optional[Callable[[Any], int]]) -> GatewayAttempt:
        """Ask the Gateway to compact ``clean`` for ``aim`` (fixed by the caller); keep what its
        reply taught us (canvas, L1 summaries). Never raises."""
        outcome, error = self.gateway_compact(
            state, clean, target=aim.target, context_length=aim.context_length,
            overhead=overhead, count=count or TokenMemo())
        if outcome is None:
            if self.settings.gateway_configured or self.client.answered:
                self.note_error("gateway compaction failed, compacting locally: %s" % error, state.key)
            else:       # nobody configured a Gateway and none answers: local mode, not an outage
                log.debug("tencentdb-offload: no Gateway at the default URL: %s", error)
            return GatewayAttempt.failed(error)
        self._gateway_answered()
        if outcome.canvas:
            state.set_canvas(outcome.canvas, replace=False)
        state.remember_summaries(departures.gateway_summaries(outcome.messages))
        return GatewayAttempt(outcome.messages, Level.parse(outcome.level), outcome.report or {},
                              list(outcome.body_trimmed), "")

    def record_compaction(self, state: SessionState, record: Compaction) -> None:
        state.record_compaction(record)
        state.cache.compaction_landed()         # the next response writes its rewrite
        self.writer.submit(Store.op_event(state.key, "compaction", record.to_json(), self.now()))
        log.info("tencentdb-offload: %s: %s", state.key, record.describe())

    def record_request(self, state: SessionState, prompt: int, usage: Dict[str, Any],
                       context_length: int, threshold: int) -> None:
        """One request's size as the provider counted it, for ``report``'s picture; its
        cache buckets where the host passed them (both 0 when the provider reports none)."""
        data = {"prompt_tokens": prompt, "context_length": context_length,
                "threshold_tokens": threshold}
        for bucket in ("cache_read_tokens", "cache_write_tokens"):
            value = usage.get(bucket)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                data[bucket] = value
        self.writer.submit(Store.op_event(state.key, "request", data, self.now()))

    # -- what an earlier process learned about a conversation -----------------------------
    def inherit(self, state: SessionState) -> None:
        """A new SessionState starts from what the last process on this conversation left: its
        calibration (so a fresh agent's first estimate is already calibrated), when its last
        provider response came (so a pause is seen across processes) and, on a host that selects
        context, where its requests carried the canvas (so they keep the same bytes)."""
        if self.store is None:
            return
        try:
            found = self.store.get_handover(state.key)
        except Exception as exc:        # unreadable: only a cache saving and a first estimate
            self.note_error("what an earlier process left for this conversation is unreadable "
                            "(%s)" % exc, state.key)
            return
        ignored = state.inherit(found.get("calibration"),
                                found.get("pin") if self.settings.canvas else None,
                                found.get("cache_clock"))
        if ignored:                     # a damaged row or another process's nonsense
            self.note_error(ignored, state.key)

    def leave_for_next_process(self, key: str, name: str, value: Any) -> None:
        if self.store is not None:
            self.writer.submit(Store.op_handover(key, name, value, self.now()))

    def _gateway_answered(self) -> None:
        """Something answered at the Gateway URL: say so once if nobody configured it."""
        announce_unconfigured_gateway(self.settings, log)

    def _after_commit(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    def _read_ref(self, gateway_session: str, ref: str) -> Optional[Dict[str, Any]]:
        if self.client is None or not self.client.available:
            return None
        try:
            return self.client.read_ref(gateway_session, ref)
        except GatewayError:
            return None

    def health(self) -> Dict[str, Any]:
        return probe(self.client, self.worker)      # (the client first: see ``_wire``)

    def status(self, scope: Optional[Scope] = None) -> Dict[str, Any]:
        """The status as a dict (what Hermes' ``get_status`` carries), as ``scope`` (default:
        whoever runs the slash command) may read it."""
        return status_view.as_dict(self, scope or self.scope_for(""))

    def status_record(self, recent: int = 10, scope: Optional[Scope] = None) -> StatusReport:
        """The status the slash command renders, as ``scope`` (default: whoever runs the slash
        command) may read it."""
        return status_view.record(self, recent, scope or self.scope_for(""))

    def close(self) -> None:
        with self._wiring:      # a client and sender wired after this are stopped by ``_wire``
            if self.closed:
                return
            self.closed = True
        self.ahead.close()
        if self.worker is not None:
            self.worker.stop()
        self.writer.close()
        if self.client is not None:
            self.client.close()
        if self.store is not None:
            self.store.close()


class RuntimeArchive:
    """The runtime's store and writer as compaction's archive (``compaction/process_view.py``),
    read at each call: a store opened later or gone after a fork, a writer replaced, are seen."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    @property
    def last_error(self) -> str:
        return self._rt.writer.last_error

    def record_departures(self, state: SessionState, gone: departures.Departures) -> None:
        self._rt.archive_departures(state, gone)

    def flush(self, timeout: float) -> bool:
        return self._rt.flush_writes(timeout)

    def settled(self, timeout: float) -> bool:
        return self._rt.writer.settled(timeout)

    def holds(self, conversation: str, key: str) -> bool:
        store = self._rt.store
        return store is not None and store.holds(conversation, key)

    def reused_ids(self, conversation: str, ids: Iterable[str]) -> Set[str]:
        store = self._rt.store
        return store.reused_ids(conversation, ids) if store is not None else set()

    def leave_for_next_process(self, conversation: str, name: str, value: Any) -> None:
        self._rt.leave_for_next_process(conversation, name, value)


class RuntimeGateway:
    """The runtime's Gateway client, its compactions prepared ahead, as compaction's Gateway
    session: a client wired later, or gone after a fork, is seen at the next call."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    @property
    def local_only(self) -> bool:
        return self._rt.client is None

    @property
    def available(self) -> bool:
        client = self._rt.client
        return client is not None and client.available

    @property
    def relied_on(self) -> bool:
        client = self._rt.client
        return client is not None and (self._rt.settings.gateway_configured or client.answered)

    @property
    def prepared(self) -> PreparedCompactions:
        return self._rt.ahead

    def attempt(self, state: SessionState, clean: List[Dict[str, Any]], aim: Aim, overhead: int,
                count: Optional[Callable[[Any], int]]) -> GatewayAttempt:
        return self._rt.gateway_attempt(state, clean, aim, overhead, count)


class RuntimeClock:
    """The runtime's clocks, asked at each call (a test may set the runtime's own)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def now(self) -> float:
        return self._rt.now()

    def monotonic(self) -> float:
        return self._rt.monotonic()
