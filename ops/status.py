"""``status``: what the archive says about the engine's sessions, read-only."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, List

from ..archive import readonly
from ..host.command import describe_compaction, when
from ..compaction.record import Compaction
from ..common.humanize import count, plural, printable
from ..settings.config import Settings, gateway_text
from ..settings.gateway_env import sources_line
from ..host.thresholds import small_window_note
from .env import CliError, compression_findings, resolve_settings


def status_data(store_dir: Path, settings: Settings, recent: int = 10) -> Dict[str, Any]:
    db = store_dir / "store.db"
    out: Dict[str, Any] = {"store_dir": str(store_dir), "exists": db.exists(),
                           "settings": settings.public()}
    if not db.exists():
        return out
    problem = readonly.problem(db)
    if problem:
        raise CliError(problem)
    sessions: Dict[str, Dict[str, Any]] = {}
    errors: List[Dict[str, Any]] = []
    try:
        reader = readonly.StoreReader(store_dir)
        try:
            out["store"] = reader.stats()
            out["backlog"] = out["store"]["outbox_backlog"]
            events = reader.events("compaction", limit=100_000)
            for sess, items, chars, last in reader.archive_by_session():
                sessions[sess] = _session_row(sess, last, archived_items=items,
                                              archived_chars=chars or 0)
            for sess, n, last in reader.backlog_by_session():
                sessions.setdefault(sess, _session_row(sess, last))["backlog"] = n
            for created, sess, err in reader.outbox_errors(5):
                errors.append({"ts": created, "session": sess, "source": "outbox", "error": err})
        finally:
            reader.close()
    except sqlite3.Error as exc:
        raise CliError("cannot read %s: %s" % (db, exc))
    levels: Dict[str, int] = {}
    saved = gateway = idle = 0
    for ev in events:
        rec = Compaction.from_json(ev)
        gain = rec.saved
        saved += gain
        gateway += 1 if rec.via_gateway else 0
        idle += rec.idle
        levels[rec.level.value] = levels.get(rec.level.value, 0) + 1
        row = sessions.setdefault(ev.get("session") or "?", _session_row(ev.get("session") or "?",
                                                                        ev.get("ts")))
        row["compactions"] += 1
        row["tokens_saved"] += gain
        row["last_activity"] = max(row["last_activity"] or 0, ev.get("ts") or 0)
        if rec.error:
            errors.append({"ts": ev.get("ts"), "session": ev.get("session"), "source": "compaction",
                           "error": rec.error})
    errors.sort(key=lambda e: e.get("ts") or 0, reverse=True)
    out["sessions"] = sorted(sessions.values(), key=lambda r: r["last_activity"] or 0, reverse=True)
    out["compactions"] = {
        "total": len(events), "gateway": gateway, "local": len(events) - gateway,
        "levels": levels, "tokens_saved": saved, "idle": idle,
        "recent": [dict(Compaction.from_json(ev).to_json(), ts=ev.get("ts"),
                        session=ev.get("session")) for ev in events[:recent]]}
    out["errors"] = errors[:recent]
    return out


def _session_row(session: str, last: Any, **counts: Any) -> Dict[str, Any]:
    row = {"session": session, "archived_items": 0, "archived_chars": 0, "last_activity": last,
           "compactions": 0, "tokens_saved": 0, "backlog": 0}
    row.update(counts)
    return row


def render_status_text(st: Dict[str, Any]) -> str:
    s = st["settings"]
    lines = ["tencentdb-offload status — store %s" % st["store_dir"]]
    recent = (st.get("compactions") or {}).get("recent") or []
    lines.append("  last compaction: %s" % (describe_compaction(recent[0]) if recent else "none yet"))
    lines.append("  configured: %s; compaction at %.0f%% of the window%s, down to %.0f%%%s"
                 % (gateway_text(s["gateway_url"], s["gateway_configured"]) +
                    (" (instance %s)" % s["instance_id"] if s["gateway_url"] else ""),
                    s["threshold"] * 100, small_window_note(s), s["compact_ratio"] * 100,
                    ", at most %s tokens" % count(s["max_context_tokens"]) if s["max_context_tokens"] else ""))
    if st.get("gateway_sources"):
        lines.append("  Gateway settings: %s" % st["gateway_sources"])
    if not st["exists"]:
        lines.append("  no store yet: the plugin has not archived anything with this "
                     "HERMES_HOME / TENCENTDB_OFFLOAD_STORE_DIR")
        return "\n".join(lines)
    store, comp = st["store"], st["compactions"]
    lines.append("  archive: %s, %s chars in %s (every session any Hermes process archived; "
                 "`/tencentdb-offload status` in a chat also shows the sessions that process "
                 "holds in memory); database %.1f KB"
                 % (plural(store["archived_items"], "item"), count(store["archived_chars"]),
                    plural(store["archived_sessions"], "session"), store["db_bytes"] / 1e3))
    lines.append("  outbox: %s waiting, %s refused for good, %s delivered"
                 % (count(store["outbox_backlog"]), count(store["outbox_dead"]), count(store["delivered"])))
    lines.append("  compactions: %s (Gateway %s, local %s; %s idle, after a pause over the cache TTL); "
                 "levels: %s; tokens saved %s"
                 % (count(comp["total"]), count(comp["gateway"]), count(comp["local"]), count(comp["idle"]),
                    ", ".join("%s %s" % (k, count(v)) for k, v in sorted(comp["levels"].items())) or "none",
                    count(comp["tokens_saved"])))
    if st["sessions"]:
        lines.append("  sessions (newest first):")
        for r in st["sessions"][:15]:
            lines.append("    %s: %s, %s, saved %s tokens, %s waiting, last %s"
                         % (r["session"], plural(r["archived_items"], "item"),
                            plural(r["compactions"], "compaction"), count(r["tokens_saved"]),
                            count(r["backlog"]), when(r["last_activity"])))
    if comp["recent"]:
        lines.append("  recent compactions:")
        for ev in comp["recent"]:
            lines.append("    %s  %s: %s" % (when(ev["ts"]), ev["session"],
                                             Compaction.from_json(ev).describe()))
    for e in st["errors"][:5]:
        lines.append("  error (%s, %s): %s" % (e["source"], when(e["ts"]), str(e["error"])[:200]))
    return "\n".join(printable(line, newlines=False) for line in lines)  # levels, errors: peers' text


def cmd_status(args: argparse.Namespace) -> int:
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, config, settings, warnings = resolve_settings(overrides)
    data = status_data(settings.resolved_store_dir(env), settings, args.recent)
    data["gateway_sources"] = sources_line(env, config.block())
    off, ignored = compression_findings(config)
    if off:
        warnings = ["compression.enabled is false in %s: Hermes never calls the engine, nothing is "
                    "compacted (hermes config set compression.enabled true)" % config.path] + warnings
    if ignored:
        warnings.append("not honoured by this plugin: %s" % ", ".join(ignored))
    data["warnings"] = warnings
    data["hermes_compression_enabled"] = not off
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(render_status_text(data))
        for w in warnings:
            print("  warning: %s" % w)
    return 0


