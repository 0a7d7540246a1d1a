"""The figures of ``report``'s picture of one conversation, read from the store as ``status`` reads them.

Every figure comes from the store's records: the per-request sizes the engine records as
``request`` events, the ``compaction`` events every surface describes, and ``status``'s own
per-conversation row (compactions, tokens saved, items archived). Read-only.
"""

from __future__ import annotations

import bisect
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..archive import readonly
from ..compaction.record import Compaction
from ..settings.config import Settings
from .env import CliError
from .status import status_data, status_report

MAX_EVENTS = 1_000_000      # per kind and conversation: far beyond a retention's worth


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


def _requests(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    for n, ev in enumerate(reversed(events), 1):             # oldest first
        prompt = _count(ev.get("prompt_tokens"))
        cached = ev.get("cache_read_tokens")
        reported = isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0
        out.append({"n": n, "ts": ev.get("ts") or 0, "prompt_tokens": prompt,
                    "context_length": _count(ev.get("context_length")),
                    "threshold_tokens": _count(ev.get("threshold_tokens")),
                    "cache_read_tokens": cached if reported else None,
                    "cached_share": (round(min(1.0, cached / prompt), 4)
                                     if reported and prompt else None)})
    return out


def _compactions(events: List[Dict[str, Any]], requests: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    sent = sorted(r["ts"] for r in requests)     # read once: a long conversation has 10^4 of each
    for n, ev in enumerate(reversed(events), 1):
        rec = Compaction.from_json(ev)
        ts = ev.get("ts") or 0
        after = bisect.bisect_right(sent, ts)    # requests sent before it landed
        out.append(dict(rec.to_json(), n=n, ts=ts, after_request=after, saved=rec.saved,
                        describe=rec.describe()))
    return out


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def figures(store_dir: Path, settings: Settings, conversation: Optional[str]) -> Dict[str, Any]:
    """Everything the page shows about ``conversation`` (the newest when None)."""
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
            req_events = reader.events("request", MAX_EVENTS, session=key)
            comp_events = reader.events("compaction", MAX_EVENTS, session=key)
        finally:
            reader.close()
    except sqlite3.Error as exc:
        raise CliError("cannot read %s: %s" % (Path(store_dir) / "store.db", exc))
    requests = _requests(req_events)
    compactions = _compactions(comp_events, requests)
    row = next((r for r in st.get("sessions") or [] if r["session"] == key), None) or {
        "session": key, "archived_items": 0, "compactions": 0, "tokens_saved": 0}
    return {"conversation": key, "store_dir": st["store_dir"], "requests": requests,
            "compactions": compactions, "status": row, "summary": _summary(requests, compactions, row)}


def _summary(requests: List[Dict[str, Any]], compactions: List[Dict[str, Any]],
             row: Dict[str, Any]) -> Dict[str, Any]:
    largest = max(requests, key=lambda r: r["prompt_tokens"], default=None)
    levels: Dict[str, int] = {}
    for c in compactions:
        levels[c["level"]] = levels.get(c["level"], 0) + 1
    reported = [r for r in requests if r["cache_read_tokens"] is not None]
    prompt = sum(r["prompt_tokens"] for r in reported)
    window = requests[-1]["context_length"] if requests else (
        compactions[-1]["context_length"] if compactions else 0)
    return {"requests": len(requests), "compactions": row["compactions"],
            "levels": levels, "tokens_saved": row["tokens_saved"],
            "archived_items": row["archived_items"],
            "texts_masked": row.get("redacted", 0),     # sent to the Gateway masked (a count)
            "largest_request_tokens": largest["prompt_tokens"] if largest else 0,
            "largest_request_pct": (round(100.0 * largest["prompt_tokens"] / largest["context_length"], 1)
                                    if largest and largest["context_length"] else None),
            "context_length": window,
            # requests before this version were not recorded: the newest compaction's trigger
            "threshold_tokens": (requests[-1]["threshold_tokens"] if requests else
                                 compactions[-1]["trigger"] if compactions else 0),
            "cache_reported_requests": len(reported),
            "cached_share": (round(sum(r["cache_read_tokens"] for r in reported) / prompt, 4)
                             if prompt else None)}
