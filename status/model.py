"""The status record: what the store holds across processes and what this process holds,
built in one place (``read_store_view``, ``Runtime.status_record``) for the one renderer."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..archive import readonly
from ..archive.stats import StoreStats
from ..archive.visibility import OPERATOR, Scope
from ..hermes.host import Host
from ..session.record import Compaction
from ..settings.thresholds import Trigger
from ..memory_gateway.client import GatewayClient
from ..settings.config import Settings


@dataclass
class SessionRow:
    session: str
    archived_items: int = 0
    archived_chars: int = 0
    last_activity: Optional[float] = None
    compactions: int = 0
    tokens_saved: int = 0
    backlog: int = 0
    redacted: int = 0           # texts whose secrets were masked before they left for the Gateway


def prompt_cache(totals: Dict[str, Any], ttl_s: int) -> Dict[str, Any]:
    """The provider's prompt cache as this process saw it: the share of prompt tokens read from
    it, what compactions' rewrites wrote, and the compactions done where it was cold anyway."""
    return {"ttl_s": ttl_s, "cached_share": totals.get("cache_hit_share"),
            "compaction_cache_write_tokens": totals.get("compaction_cache_write_tokens", 0),
            "idle_compactions": totals.get("idle_compactions", 0)}


@dataclass
class CacheCost:
    """Compactions' price to the prompt cache, summed (``Compaction.cache_break``): the tokens the
    request after each wrote and that request's cost under the cache model, and the same with
    no compaction wherever the context before it fitted the window (elsewhere it had to run)."""
    priced: int = 0             # compactions with the figures (older records have none)
    fitted: int = 0             # of them, whose context before fitted the window
    written: int = 0
    written_without: int = 0
    cost: float = 0.0
    cost_without: float = 0.0

    def add(self, brk: Dict[str, Any]) -> None:
        fits = brk["cost_without"] is not None
        self.priced += 1
        self.fitted += fits
        self.written += brk["written"]
        self.written_without += brk["written_without"] if fits else brk["written"]
        self.cost = round(self.cost + brk["cost"], 1)
        self.cost_without = round(self.cost_without + (brk["cost_without"] if fits else brk["cost"]), 1)

    def cumulative(self) -> Dict[str, Any]:
        return {"cumulative_cost": self.cost, "cumulative_cost_without": self.cost_without}


@dataclass
class CompactionSummary:
    total: int = 0
    gateway: int = 0
    local: int = 0
    idle: int = 0               # started at a cold turn start (a pause over the cache TTL)
    request_only: int = 0       # one request cut, the host's transcript left as it was
    adopted: int = 0            # of those, taken later by the transcript (not counted again)
    levels: Dict[str, int] = field(default_factory=dict)
    tokens_saved: int = 0
    recent: List[Dict[str, Any]] = field(default_factory=list)   # newest first, with ts and session
    cache: CacheCost = field(default_factory=CacheCost)           # what they cost the prompt cache

    @property
    def last(self) -> Optional[Dict[str, Any]]:
        return self.recent[0] if self.recent else None


@dataclass
class StoreView:
    """What the store says, whoever wrote it."""
    stats: StoreStats
    sessions: List[SessionRow]                  # newest activity first; every session counted
    compactions: CompactionSummary
    errors: List[Dict[str, Any]]

    def as_dict(self) -> Dict[str, Any]:
        """The keys ``status --json`` has always printed."""
        return {"store": self.stats.as_dict(), "backlog": self.stats.outbox_backlog,
                "sessions": [asdict(r) for r in self.sessions],
                "compactions": asdict(self.compactions), "errors": self.errors}


def read_store_view(directory: Path, recent: int = 10) -> StoreView:
    """Read ``directory/store.db`` without writing it (sqlite3.Error when unreadable)."""
    reader = readonly.StoreReader(directory)
    try:
        stats = reader.stats()
        sessions: Dict[str, SessionRow] = {}
        for sess, items, chars, last in reader.archive_by_session():
            sessions[sess] = SessionRow(sess, items, chars or 0, last)
        for sess, n, last in reader.backlog_by_session():
            sessions.setdefault(sess, SessionRow(sess, last_activity=last)).backlog = n
        errors = [{"ts": created, "session": sess, "source": "outbox", "error": err}
                  for created, sess, err in reader.outbox_errors(5)]
        # every compaction counts (a cap undercounted a busy store); streamed, not held
        summary = _fold_compactions(reader.each_event("compaction"), sessions, errors, recent)
        for ev in reader.each_event("redaction"):       # counts only: the secret never stored
            name = ev.get("session") or "?"
            n = ev.get("texts")
            sessions.setdefault(name, SessionRow(name, last_activity=ev.get("ts"))).redacted += \
                n if isinstance(n, int) and n > 0 else 0
    finally:
        reader.close()
    errors.sort(key=lambda e: e.get("ts") or 0, reverse=True)
    ordered = sorted(sessions.values(), key=lambda r: r.last_activity or 0, reverse=True)
    return StoreView(stats, ordered, summary, errors[:recent])


def _fold_compactions(events: Iterable[Dict[str, Any]], sessions: Dict[str, SessionRow],
                      errors: List[Dict[str, Any]], recent: int) -> CompactionSummary:
    """The summary of ``events`` (newest first), each added to its session's row."""
    summary = CompactionSummary()
    newer: Dict[str, CacheCost] = {}    # per conversation, the compactions newer than this one
    listed: List[Tuple[Dict[str, Any], str, Optional[Dict[str, Any]]]] = []
    for ev in events:
        if len(summary.recent) >= recent:
            ev.pop("left", None)        # the keys are shown for the recent ones only
        rec = Compaction.from_json(ev)
        name = ev.get("session") or "?"
        brk = rec.cache_break()
        if len(summary.recent) < recent:
            entry = dict(rec.to_json(), ts=ev.get("ts"), session=ev.get("session"), cache=brk)
            summary.recent.append(entry)
            listed.append((entry, name, dict(newer[name].cumulative()) if name in newer else None))
        if brk is not None:
            summary.cache.add(brk)
            newer.setdefault(name, CacheCost()).add(brk)
        row = sessions.setdefault(name, SessionRow(name, last_activity=ev.get("ts")))
        row.last_activity = max(row.last_activity or 0, ev.get("ts") or 0)
        if rec.adopted:                 # the cut it took is counted, with its saving
            summary.adopted += 1
            continue
        summary.total += 1
        row.compactions += 1
        row.tokens_saved += rec.saved
        summary.tokens_saved += rec.saved
        summary.gateway += 1 if rec.via_gateway else 0
        summary.idle += rec.idle
        summary.request_only += rec.request_only
        summary.levels[rec.level.value] = summary.levels.get(rec.level.value, 0) + 1
        if rec.error and len(errors) < 5 + recent:   # newest first: the older cannot show
            errors.append({"ts": ev.get("ts"), "session": ev.get("session"), "source": "compaction",
                           "error": rec.error})
    summary.local = summary.total - summary.gateway
    for entry, name, after in listed:   # cumulative = the conversation's total less what came after
        if entry["cache"] is not None:
            total = newer[name].cumulative()
            entry["cache"].update({k: round(v - (after or {}).get(k, 0.0), 1) for k, v in total.items()})
    return summary


@dataclass
class GatewayView:
    url: str
    configured: bool            # set by the user, not the default URL
    instance_id: str
    health: str
    version: str
    breaker_state: str
    retry_in_s: float
    config_error: str
    last_error: str
    answered: bool              # something answered at the URL in this process

    @classmethod
    def of(cls, client: GatewayClient, settings: Settings) -> "GatewayView":
        breaker = client.breaker.snapshot()
        return cls(client.base_url, settings.gateway_configured, client.instance_id,
                   client.last_health.get("status", "unknown"), client.last_health.get("version", ""),
                   breaker["state"], breaker.get("retry_in_s", 0.0), client.config_error,
                   client.last_error, client.answered)

    @property
    def looks_unused(self) -> bool:
        """Nobody configured it and nothing ever answered: local mode, not an outage."""
        return not self.configured and not self.answered


@dataclass
class HeldSession:
    session: str
    tool_results: int
    compactions: int

    @property
    def active(self) -> bool:
        """Did anything in this conversation: the engine's placeholder before a session is
        bound ("default") holds nothing and is not a conversation."""
        return self.tool_results > 0 or self.compactions > 0 or self.session != "default"


@dataclass
class ProcessView:
    """What this Hermes process holds in memory."""
    mode: str
    sessions_in_memory: int
    sessions_evicted: int
    held: List[HeldSession]
    totals: Dict[str, Any]      # session.SessionStats.as_dict() of every conversation
    writer: Dict[str, Any]      # archive/writer.StoreWriter.stats()
    store_error: str


@dataclass
class StatusReport:
    """Everything a status surface shows; ``store``/``process``/``gateway`` are None when the
    surface has none (no store yet; outside Hermes; no Gateway)."""
    settings: Settings
    store_dir: str
    trigger: Optional[Trigger] = None
    store: Optional[StoreView] = None
    process: Optional[ProcessView] = None
    gateway: Optional[GatewayView] = None
    store_problem: str = ""     # why the store could not be used ("" when it could)
    store_option: str = ""      # the --store the user gave ("" when the settings chose it)
    gateway_sources: str = ""
    warnings: List[str] = field(default_factory=list)
    recent_errors: List[str] = field(default_factory=list)     # as ``scope`` may read them
    scope: Scope = OPERATOR     # who reads it (``archive/visibility.py``): the host's operator by default
    host: Optional[Host] = None     # what the host the figures are for does (None: not known)
