"""The figures of ``report``'s picture of one conversation, read from the store as ``status`` reads them.

Every figure comes from the store's records: the per-request sizes the engine records as
``request`` events, the ``compaction`` events every surface describes, and ``status``'s own
per-conversation row (compactions, tokens saved, items archived). Read-only, and bounded
whatever the conversation's length: each event is read once and dropped (docs/limits.md).
"""

from __future__ import annotations

import bisect
import heapq
import sqlite3
from array import array
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..archive import readonly
from ..common.cache_model import reports_caching
from ..session.record import Compaction, token_counts
from ..settings.config import Settings
from ..status.model import CacheCost
from .env import CliError
from .status import status_data, status_report

MAX_BARS = 500              # request bars drawn: beyond, each bar is the largest of several
MAX_LISTED = 100            # compactions listed and drawn: those that saved the most
# which count each token figure of the page (and ``--json``) is
ESTIMATED_FIELDS = ("compactions[].tokens_before", "compactions[].tokens_after",
                    "compactions[].target", "compactions[].saved", "compactions[].prefix_kept",
                    "compactions[].cache.prefix_kept", "compactions[].cache.invalidated",
                    "compactions[].cache.written", "compactions[].cache.written_without",
                    "summary.tokens_saved", "summary.cache_cost.written",
                    "summary.cache_cost.written_without")
PROVIDER_FIELDS = ("requests[].prompt_tokens", "requests[].cache_read_tokens",
                   "summary.largest_request_tokens", "compactions[].cached_before",
                   "compactions[].cache.cached_before")
PRICED_FIELDS = ("compactions[].cache.cost", "compactions[].cache.cost_without",
                 "compactions[].cache.cumulative_cost", "compactions[].cache.cumulative_cost_without",
                 "summary.cache_cost.cost", "summary.cache_cost.cost_without")


class NothingYet(Exception):
    """Nothing recorded yet (no store, or no conversation in it): not an error, as in status."""


def _newest(st: Dict[str, Any], reader: readonly.StoreReader) -> str:
    """The conversation with the newest activity: status's newest row or the newest request."""
    best, when = "", float("-inf")
    for row in st.get("sessions") or []:
        if (row["last_activity"] or 0) > when:
            best, when = row["session"], row["last_activity"] or 0
    for ev in reader.events("request", 1):
        if (ev.get("ts") or 0) > when and ev.get("session"):
            best = ev["session"]
    if not best:
        raise NothingYet("nothing recorded yet in %s: no conversation has been compacted or "
                         "archived" % st["store_dir"])
    return best


def _named(st: Dict[str, Any], reader: readonly.StoreReader, name: str) -> str:
    """``name`` as a conversation of the store (or a session id aliased to one)."""
    known = [row["session"] for row in st.get("sessions") or []]
    if name in known or reader.events("request", 1, session=name):
        return name
    alias = reader.conversation_of(name)
    if alias:
        return alias
    newest = ", ".join(known[:3]) or "none"
    raise CliError("no conversation %r in %s (newest: %s; `archive list` lists them all)"
                   % (name, st["store_dir"], newest))


def _request(n: int, ev: Dict[str, Any]) -> Dict[str, Any]:
    prompt = _count(ev.get("prompt_tokens"))
    cached = ev.get("cache_read_tokens")
    reported = isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0
    return {"n": n, "last": n, "ts": ev.get("ts") or 0, "prompt_tokens": prompt,
            "context_length": _count(ev.get("context_length")),
            "threshold_tokens": _count(ev.get("threshold_tokens")),
            "cache_read_tokens": cached if reported else None,
            "prompt_reported": prompt if reported else 0, "caching": reports_caching(ev)}


def _merge(bar: Dict[str, Any], r: Dict[str, Any]) -> None:
    """Request ``r`` into ``bar``: the bar shows its largest request, the window and trigger
    its newest has, and the cached share of all its requests that reported one."""
    bar["last"], bar["ts_last"] = r["n"], r["ts"]
    bar["over"] = bar["over"] or _over(r)
    bar["prompt_tokens"] = max(bar["prompt_tokens"], r["prompt_tokens"])
    for name in ("context_length", "threshold_tokens"):
        bar[name] = r[name] or bar[name]
    if r["cache_read_tokens"] is not None:
        bar["cache_read_tokens"] = (bar["cache_read_tokens"] or 0) + r["cache_read_tokens"]
        bar["prompt_reported"] += r["prompt_reported"]


def _over(r: Dict[str, Any]) -> bool:
    return bool(r["threshold_tokens"]) and r["prompt_tokens"] >= r["threshold_tokens"]


class Requests:
    """One conversation's requests read once, oldest first, into at most ``MAX_BARS`` bars of
    ``per_bar`` consecutive requests each, the send times (for where each compaction landed)
    and the summary's figures; nothing else of a request is held."""

    def __init__(self, events: Iterator[Dict[str, Any]], total: int) -> None:
        self.per_bar = max(1, -(-total // MAX_BARS))
        self.bars: List[Dict[str, Any]] = []
        self.sent = array("d")
        self.count = self.reported = self.cached = self.prompt = 0
        self.caching = False        # a request reported a cache read or write above 0
        self.largest: Optional[Dict[str, Any]] = None
        self.newest: Optional[Dict[str, Any]] = None
        for n, ev in enumerate(events, 1):
            self._add(_request(n, ev))
        if any(a > b for a, b in zip(self.sent, self.sent[1:])):    # a clock stepped back
            self.sent = array("d", sorted(self.sent))
        for bar in self.bars:       # no share at all where nothing reported caching (zeros only)
            bar["cached_share"] = (round(min(1.0, bar["cache_read_tokens"] / bar["prompt_reported"]), 4)
                                   if self.caching and bar["cache_read_tokens"] is not None
                                   and bar["prompt_reported"] else None)

    def _add(self, r: Dict[str, Any]) -> None:
        self.count += 1
        self.sent.append(r["ts"])
        if self.largest is None or r["prompt_tokens"] > self.largest["prompt_tokens"]:
            self.largest = dict(r)
        self.caching = r.pop("caching") or self.caching
        if r["cache_read_tokens"] is not None:
            self.reported += 1
            self.cached += r["cache_read_tokens"]
            self.prompt += r["prompt_tokens"]
        self.newest = r
        if (r["n"] - 1) % self.per_bar:
            _merge(self.bars[-1], r)
        else:
            self.bars.append(dict(r, ts_last=r["ts"], over=_over(r)))


class Compactions:
    """One conversation's compactions read once, oldest first: their count, levels and largest
    size before, the newest, and the ``MAX_LISTED`` that saved the most (in order), each with
    the number of requests sent before it landed (``sent``: sorted send times)."""

    def __init__(self, events: Iterator[Dict[str, Any]], sent: Sequence[float]) -> None:
        self.count, self.largest_before = 0, 0
        self.levels: Dict[str, int] = {}
        self.newest: Optional[Compaction] = None
        self.cache = CacheCost()        # what they cost the prompt cache, so far
        kept: List[Tuple[int, int, float, Compaction, Optional[Dict[str, Any]]]] = []
        for n, ev in enumerate(events, 1):
            left = ev.pop("left", None)     # up to 200 keys: read only for a compaction listed
            rec = Compaction.from_json(ev)
            brk = rec.cache_break()
            if brk is not None:
                self.cache.add(brk)
                brk.update(self.cache.cumulative())
            self.count = n
            if not rec.adopted:         # a cut the transcript took: counted with the cut
                self.levels[rec.level.value] = self.levels.get(rec.level.value, 0) + 1
            self.largest_before = max(self.largest_before, rec.tokens_before)
            self.newest = rec
            if len(kept) < MAX_LISTED or (rec.saved, n) > kept[0][:2]:
                entry = (rec.saved, n, ev.get("ts") or 0, Compaction.from_json(dict(ev, left=left)),
                         brk)
                (heapq.heappush if len(kept) < MAX_LISTED else heapq.heapreplace)(kept, entry)
        self.listed = [dict(rec.to_json(), n=n, ts=ts, after_request=bisect.bisect_right(sent, ts),
                            saved=rec.saved, describe=rec.describe(), cache=brk)
                       for _saved, n, ts, rec, brk in sorted(kept, key=lambda e: e[1])]


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def figures(store_dir: Path, settings: Settings, conversation: Optional[str]) -> Dict[str, Any]:
    """Everything the page shows about ``conversation`` (the newest when None), bounded
    whatever its length (docs/limits.md): at most ``MAX_BARS`` request bars and ``MAX_LISTED``
    compactions listed, each event read once and dropped."""
    st = status_data(status_report(store_dir, settings, recent=0))
    if st.get("store_problem"):
        raise CliError(st["store_problem"])
    if not st["exists"]:
        raise NothingYet("nothing recorded yet: no store at %s (the plugin has not compacted or "
                         "archived anything with this HERMES_HOME / TENCENTDB_OFFLOAD_STORE_DIR)"
                         % st["store_dir"])
    try:
        reader = readonly.StoreReader(store_dir)
        try:
            key = _named(st, reader, conversation) if conversation else _newest(st, reader)
            requests = Requests(reader.each_event("request", key, oldest_first=True),
                                reader.count_events("request", key))
            compactions = Compactions(reader.each_event("compaction", key, oldest_first=True),
                                      requests.sent)
        finally:
            reader.close()
    except sqlite3.Error as exc:
        raise CliError("cannot read %s: %s" % (Path(store_dir) / "store.db", exc))
    row = next((r for r in st.get("sessions") or [] if r["session"] == key), None) or {
        "session": key, "archived_items": 0, "compactions": 0, "tokens_saved": 0}
    bars = requests.bars
    return {"conversation": key, "store_dir": st["store_dir"], "requests": bars,
            "requests_per_bar": requests.per_bar, "compactions": compactions.listed,
            "compactions_not_listed": compactions.count - len(compactions.listed),
            "top_tokens": max([b["prompt_tokens"] for b in bars] + [b["context_length"] for b in bars]
                              + [compactions.largest_before, 1000]),
            "status": row, "summary": _summary(requests, compactions, row),
            "token_counts": token_counts(ESTIMATED_FIELDS, PROVIDER_FIELDS, PRICED_FIELDS)}


def _summary(requests: Requests, compactions: Compactions, row: Dict[str, Any]) -> Dict[str, Any]:
    largest, newest, last = requests.largest, requests.newest, compactions.newest
    return {"requests": requests.count, "compactions": row["compactions"],
            "levels": compactions.levels, "tokens_saved": row["tokens_saved"],
            "archived_items": row["archived_items"],
            "texts_masked": row.get("redacted", 0),     # sent to the Gateway masked (a count)
            "largest_request_tokens": largest["prompt_tokens"] if largest else 0,
            "largest_request_pct": (round(100.0 * largest["prompt_tokens"] / largest["context_length"], 1)
                                    if largest and largest["context_length"] else None),
            "context_length": (newest["context_length"] if newest else
                               last.context_length if last else 0),
            # requests before this version were not recorded: the newest compaction's trigger
            "threshold_tokens": (newest["threshold_tokens"] if newest else
                                 last.trigger if last else 0),
            "cache_cost": asdict(compactions.cache),
            "cache_reported_requests": requests.reported if requests.caching else 0,
            "cached_share": (round(requests.cached / requests.prompt, 4)
                             if requests.prompt and requests.caching else None)}
