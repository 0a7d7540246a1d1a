"""Per-conversation state and an LRU registry of it.

Hermes gives hooks a ``session_id`` and engines an id through ``on_session_start``. A host may
rotate that id at every compaction; we keep one *conversation key* across those
rotations (aliases are persisted in the store, so a resumed child id finds its conversation
in a new process). Everything here is in memory and cheap; nothing durable lives only here.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .cache_clock import CacheClock
from .record import Compaction
from ..common.held_lru import HeldLRU
from ..common.seen_ids import SeenIds, newest
from ..common.text import clean_text
from ..context import canvas
from ..settings.thresholds import Trigger
from ..context.tokens import Calibrator
from ..memory_gateway.session_ids import gateway_session_id


MAX_INHERITED_CANVAS = 100_000      # chars: a pin read back from the store beyond this is ignored


_STATS_LOCK = threading.Lock()     # counters are bumped from hook threads and engines at once


def new_stats_lock() -> None:
    """In a forked child: the parent's lock may have been held by a thread the child lacks."""
    global _STATS_LOCK
    _STATS_LOCK = threading.Lock()


@dataclass
class SessionStats:
    """Counters for one conversation, or (``SessionRegistry.totals``) for the process. Written
    only through ``SessionState``'s ``record_*`` methods, which update both under one lock."""
    compactions: int = 0
    gateway_compactions: int = 0
    local_compactions: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    archived: int = 0
    levels: Counter = field(default_factory=Counter)
    last_level: str = ""
    last_error: str = ""
    canvas_injections: int = 0
    canvas_blocks_removed: int = 0
    prompt_tokens: int = 0          # provider usage, for the prompt-cache hit share
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    compaction_cache_write_tokens: int = 0   # written by the first response after a compaction
    idle_compactions: int = 0       # compactions at a turn start after a pause (cache cold)
    request_cuts: int = 0           # requests cut for themselves (the host had not compacted)
    cuts_adopted: int = 0           # of them, taken by the host's transcript compaction after
    last_compaction: Optional[Compaction] = None

    def _add_compaction(self, rec: Compaction) -> None:
        self.last_compaction, self.cuts_adopted = rec, self.cuts_adopted + rec.adopted
        if rec.adopted:             # the cut's saving and departures are counted already
            return
        self.compactions += 1
        self.gateway_compactions += rec.via_gateway
        self.local_compactions += not rec.via_gateway
        self.tokens_before += rec.tokens_before
        self.tokens_after += rec.tokens_after
        self.archived += rec.archived
        self.idle_compactions += rec.idle
        self.request_cuts += rec.request_only
        self.levels[rec.level.value] += 1
        self.last_level = rec.level.value
        self.canvas_blocks_removed += rec.canvas_removed
        if rec.error:
            self.last_error = rec.error

    def _add_usage(self, prompt: int, usage: Dict[str, Any], after_compaction: bool) -> None:
        """``cache_read_tokens``/``cache_write_tokens`` are the hosts' canonical buckets (0 or
        absent when the provider reports none); the first response after a compaction writes
        that compaction's rewrite."""
        self.prompt_tokens += prompt
        for bucket in ("cache_read_tokens", "cache_write_tokens"):
            value = usage.get(bucket)
            if isinstance(value, int) and value > 0:
                setattr(self, bucket, getattr(self, bucket) + value)
                if after_compaction and bucket == "cache_write_tokens":
                    self.compaction_cache_write_tokens += value

    def as_dict(self) -> Dict[str, Any]:
        with _STATS_LOCK:
            # none when nothing reported caching: the host passes both buckets as 0 then
            share = (self.cache_read_tokens / self.prompt_tokens if self.prompt_tokens and
                     (self.cache_read_tokens or self.cache_write_tokens) else None)
            last = self.last_compaction
            return {"compactions": self.compactions,
                    "gateway_compactions": self.gateway_compactions,
                    "local_compactions": self.local_compactions,
                    "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                    "tokens_saved": max(0, self.tokens_before - self.tokens_after),
                    "archived": self.archived, "levels": dict(self.levels),
                    "last_level": self.last_level, "last_error": self.last_error,
                    "canvas_injections": self.canvas_injections,
                    "canvas_blocks_removed": self.canvas_blocks_removed,
                    "prompt_tokens": self.prompt_tokens, "cache_read_tokens": self.cache_read_tokens,
                    "cache_write_tokens": self.cache_write_tokens,
                    "cache_hit_share": None if share is None else round(min(1.0, share), 3),
                    "compaction_cache_write_tokens": self.compaction_cache_write_tokens,
                    "idle_compactions": self.idle_compactions,
                    "request_cuts": self.request_cuts, "cuts_adopted": self.cuts_adopted,
                    "last_compaction": last.to_json() if last else {}}


@dataclass
class SessionState:
    key: str
    gateway_id: str
    parents: Tuple[str, ...] = ()   # conversations it was branched from (hermes/lineage.py)
    prompt: str = ""
    recent: List[Dict[str, str]] = field(default_factory=list)
    l15_hash: str = ""
    # the newest IDS_KEPT call ids of each kind, all counted (a chat may live for months)
    processed_ids: SeenIds = field(default_factory=SeenIds)     # tool calls recorded by the hook
    result_hashes: "OrderedDict[str, Set[int]]" = field(default_factory=OrderedDict)  # id -> texts
    reused_ids: SeenIds = field(default_factory=SeenIds)        # call ids seen with different texts
    confirmed_ids: SeenIds = field(default_factory=SeenIds)     # replaced by summaries (Gateway)
    deleted_ids: SeenIds = field(default_factory=SeenIds)       # removed from the context
    canvas_text: str = ""            # the current canvas block, formatted
    canvas_hash: str = ""
    canvas_cleared: bool = False     # the Gateway's active canvas is empty (a new task)
    injected_canvas_hash: str = ""   # last canvas handed to the model in this session
    canvas_asks: int = 0             # fresh canvases asked for (a new prompt, rows accepted)
    canvas_answered: int = 0         # of those, the asks a finished fetch began after
    # (the next five: a host that selects context)
    pinned_canvas: str = ""          # the canvas the requests carry, as first shown
    pinned_anchor: str = ""          # the user message it is pinned to (anchor_key)
    canvas_repin: bool = False       # a compaction happened; pin the current canvas anew
    compact_transcript: bool = False  # a request was cut for itself; the host should compact
    cut_memo: Any = None             # that cut (compaction/request_cut.CutMemo), for the catch-up
    request_estimate: int = 0        # estimate of the last request sent (for calibration)
    overhead_estimate: int = 0       # system prompt + tool schemas of the last request
    last_usage: int = 0              # provider prompt tokens of the last response
    threshold_tokens: int = 0        # the engine's trigger, for the warm-up flush
    trigger: Optional[Trigger] = None    # the trigger that applies, for status lines
    calibrator: Calibrator = field(default_factory=Calibrator)
    cache: CacheClock = field(default_factory=CacheClock)      # when the prompt cache is cold
    summaries: "OrderedDict[str, str]" = field(default_factory=OrderedDict)  # Gateway summaries by call id
    stats: SessionStats = field(default_factory=SessionStats)
    totals: SessionStats = field(default_factory=SessionStats, repr=False)  # the registry's
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def claim_result(self, tid: str, text_mark: int) -> bool:
        """Record a tool result (under the lock); False when this id and text are archived
        already. The same id with another text is new: the id is then reused."""
        seen = newest(self.result_hashes, tid, set())
        if text_mark in seen:
            return False
        if seen:
            self.reused_ids.add(tid)
        seen.add(text_mark)
        self.processed_ids.add(tid)
        return True

    def inherit(self, calibration: Any, pin: Any, cache_clock: Any = None) -> str:
        """Start from an earlier process's calibration points, canvas pin and last response time
        (each checked: the store is a file anyone can edit); what was ignored and why, or ""."""
        ignored = self.calibrator.seed(calibration)
        self.cache.seed(cache_clock)
        if (isinstance(pin, list) and len(pin) == 2 and all(isinstance(p, str) for p in pin)
                and all(pin) and len(pin[1]) <= MAX_INHERITED_CANVAS):
            with self.lock:
                if not self.pinned_canvas:
                    self.pinned_anchor, self.pinned_canvas = pin
        return ignored

    def forked(self) -> None:
        """In a forked child: a hook on a parent thread may have held these locks at the
        fork; the child's next hook or compaction of this conversation would wait forever."""
        self.lock, self.cache.lock = threading.Lock(), threading.Lock()
        self.calibrator.forked()

    # -- the one place counters change: this conversation's and the process totals ------
    def _both(self, apply: Callable[[SessionStats], None]) -> None:
        with _STATS_LOCK:
            apply(self.stats)
            if self.totals is not self.stats:
                apply(self.totals)

    def record_compaction(self, rec: Compaction) -> None:
        self._both(lambda s: s._add_compaction(rec))

    def record_usage(self, prompt: int, usage: Dict[str, Any], after_compaction: bool = False) -> None:
        self._both(lambda s: s._add_usage(prompt, usage, after_compaction))

    def record_canvas_shown(self) -> None:
        """The current canvas went to the model (a new one, or again after a boundary)."""
        self._both(lambda s: setattr(s, "canvas_injections", s.canvas_injections + 1))

    def record_canvas_removed(self, n: int) -> None:
        if n > 0:
            self._both(lambda s: setattr(s, "canvas_blocks_removed", s.canvas_blocks_removed + n))

    @property
    def last_compaction(self) -> Optional[Compaction]:
        return self.stats.last_compaction

    def status(self) -> Dict[str, Any]:
        return {"session": self.key, "gateway_session": self.gateway_id,
                "session_stats": self.stats.as_dict(), "calibration": self.calibrator.snapshot(),
                "tool_results": {"recorded": self.processed_ids.count,
                                 "summarised_by_gateway": self.confirmed_ids.count,
                                 "removed_from_context": self.deleted_ids.count}}

    def remember_summaries(self, found: Dict[str, str], cap: int = 2000) -> None:
        """Keep the Gateway's summaries of tool results (seen in compaction replies) for pruning."""
        with self.lock:
            for tid, text in found.items():
                self.summaries[tid] = text
                self.summaries.move_to_end(tid)
            while len(self.summaries) > cap:
                self.summaries.popitem(last=False)

    # -- fields other threads read: written only here, under the lock ----------------------
    @property
    def canvas_wanted(self) -> bool:
        """The worker should fetch the canvas (an ask no finished fetch began after)."""
        with self.lock:
            return self.canvas_asks > self.canvas_answered

    def ask_canvas(self) -> None:
        with self.lock:
            self.canvas_asks += 1

    def canvas_ask(self) -> int:
        """The asks a fetch starting now answers (its token for ``canvas_fetched``)."""
        with self.lock:
            return self.canvas_asks

    def canvas_fetched(self, ask: int, block: Optional[str]) -> None:
        """A fetch that began at ``ask`` finished (``block``: the canvas found, "": the active
        one is empty, a new task; None: none, or the fetch failed).
        An ask made while it was under way stays due: it may want a newer canvas."""
        with self.lock:
            self.canvas_answered = max(self.canvas_answered, ask)
            if block is not None:
                self._put_canvas(block)

    def use_trigger(self, tokens: int, trigger: Optional[Trigger] = None) -> None:
        """The engine's trigger applies to this conversation (None: keep the one it has)."""
        with self.lock:
            self.threshold_tokens = tokens
            if trigger is not None:
                self.trigger = trigger

    def request_measured(self, overhead: int, estimate: int) -> None:
        """Our estimate of the request about to go out (its overhead: system prompt, tools)."""
        with self.lock:
            self.overhead_estimate, self.request_estimate = overhead, estimate

    def transcript_due(self, due: bool) -> None:
        """A request was cut for itself (the host's transcript is still too big), or the host
        compacted since (the cut kept for it is then stale)."""
        with self.lock:
            self.compact_transcript = due
            if not due:
                self.cut_memo = None

    def remember_cut(self, memo: Any) -> None:
        with self.lock:
            self.cut_memo = memo

    def take_cut(self) -> Any:
        """The last request cut, once (None when there is none)."""
        with self.lock:
            memo, self.cut_memo = self.cut_memo, None
            return memo

    def response_measured(self, prompt: int) -> int:
        """The provider counted ``prompt`` tokens: the estimate of the request it answered,
        taken once (0 when none is waiting), for one calibration point."""
        with self.lock:
            self.last_usage = prompt
            estimate, self.request_estimate = self.request_estimate, 0
            return estimate

    def set_canvas(self, block: str, replace: bool = True) -> None:
        """Make ``block`` the current canvas (``replace=False``: only if there is none)."""
        with self.lock:
            if replace or not self.canvas_hash:
                self._put_canvas(block)

    def _put_canvas(self, block: str) -> None:      # under the lock
        self.canvas_text, self.canvas_hash = block, canvas.digest(block) if block else ""
        self.canvas_cleared = not block
        if not block:       # the task it showed is over: showing it again is news
            self.injected_canvas_hash = ""


class SessionRegistry:
    """Thread-safe LRU of SessionState keyed by conversation key, plus id aliases."""

    def __init__(self, max_sessions: int = 20,
                 alias_lookup: Optional[Callable[[str], Optional[str]]] = None,
                 alias_store: Optional[Callable[[str, str], None]] = None,
                 on_error: Optional[Callable[[str], None]] = None,
                 on_create: Optional[Callable[["SessionState"], None]] = None) -> None:
        self.max_sessions = max(1, max_sessions)
        self._sessions: HeldLRU[SessionState] = HeldLRU(self.max_sessions)
        self._aliases: "OrderedDict[str, str]" = OrderedDict()
        self._lock = threading.Lock()
        self._alias_lookup = alias_lookup
        self._alias_store = alias_store
        self._on_error = on_error or (lambda _message: None)
        self._on_create = on_create
        self.totals = SessionStats()   # survives eviction

    def forget_store(self) -> None:
        """In a forked child: aliases from memory only (the store is not used there), and a
        fresh lock (the parent's may have been held by a thread the child does not have)."""
        self._lock = threading.Lock()
        self._alias_lookup = self._alias_store = None
        for state in self._sessions.values():
            state.forked()

    evictions = property(lambda self: self._sessions.evictions)

    def conversation_of(self, session_id: str) -> str:
        """The conversation key for a Hermes session id (itself unless aliased; text the store
        can hold: a lone surrogate becomes U+FFFD)."""
        if not session_id:
            return "default"
        session_id = clean_text(str(session_id))
        with self._lock:
            hit = self._aliases.get(session_id)
        if hit is not None:
            return hit
        found = None
        if self._alias_lookup is not None:
            try:
                found = self._alias_lookup(session_id)
            except Exception as exc:    # a rotated id would start a new Gateway session
                self._on_error("session alias for %r unreadable (%s); treated as a new "
                               "conversation" % (session_id[:80], exc))
        key = found or session_id
        self._remember_alias(session_id, key)
        return key

    def link(self, new_id: str, old_id: str) -> str:
        """``new_id`` continues ``old_id``'s conversation (a compaction rotation)."""
        new_id = clean_text(str(new_id or ""))
        key = self.conversation_of(old_id) if old_id else new_id
        self._remember_alias(new_id, key)
        if self._alias_store is not None and new_id != key:
            try:
                self._alias_store(new_id, key)
            except Exception as exc:
                self._on_error("session alias %r -> %r not saved (%s): a later process may "
                               "see a new conversation" % (new_id[:80], key[:80], exc))
        return key

    def _remember_alias(self, session_id: str, key: str) -> None:
        with self._lock:
            self._aliases[session_id] = key
            self._aliases.move_to_end(session_id)
            while len(self._aliases) > self.max_sessions * 8:
                self._aliases.popitem(last=False)

    def get(self, key: str, hold: bool = False) -> SessionState:
        with self._lock:
            state, created = self._sessions.use(key, lambda: SessionState(
                key=key, gateway_id=gateway_session_id(key), totals=self.totals), hold)
        if created and self._on_create is not None:
            self._on_create(state)       # reads the store: outside the lock every session needs
        return state

    def release(self, key: str) -> None:
        """A compaction is done with ``key``'s state (``get(key, hold=True)``: never evicted
        while held, so that its result lands on the state the hooks find)."""
        with self._lock:
            self._sessions.release(key)

    def for_session_id(self, session_id: str) -> SessionState:
        return self.get(self.conversation_of(session_id))

    def peek(self, key: str) -> Optional[SessionState]:
        with self._lock:
            return self._sessions.peek(key)

    def all(self) -> List[SessionState]:
        with self._lock:
            return self._sessions.values()

    def newest_trigger(self) -> Optional[Trigger]:
        """The trigger of the conversation used last that has one (None before any window)."""
        found = [s.trigger for s in self.all() if s.trigger is not None and s.trigger.window]
        return found[-1] if found else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
