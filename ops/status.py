"""``status``: what the archive says about the engine's sessions, read-only."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Dict, List

from ..command import describe_compaction
from ..compaction_record import Compaction
from ..humanize import count, plural, printable
from ..config import Settings
from .env import CliError, _ro, resolve_settings, unreadable


def status_data(store_dir: Path, settings: Settings, recent: int = 10) -> Dict[str, Any]:
    from ..archive.store import Store, StoreError
    db = store_dir / "store.db"
    out: Dict[str, Any] = {"store_dir": str(store_dir), "exists": db.exists(),
                           "settings": settings.public()}
    if not db.exists():
        return out
    problem = unreadable(db)
    if problem:
        raise CliError(problem)
    try:
        store = Store(store_dir)
    except StoreError as exc:
        raise CliError(str(exc))
    try:
        out["store"] = store.stats()
        out["backlog"] = store.backlog()
        events = store.events("compaction", limit=100_000)
    finally:
        store.close()
    sessions: Dict[str, Dict[str, Any]] = {}
    errors: List[Dict[str, Any]] = []
    conn = _ro(db)
    try:
        for sess, items, chars, last in conn.execute(
                "SELECT session, count(*), sum(chars), max(created) FROM archive GROUP BY session"):
            sessions[sess] = {"session": sess, "archived_items": items, "archived_chars": chars or 0,
                              "last_activity": last, "compactions": 0, "tokens_saved": 0,
                              "backlog": 0}
        for sess, n, last in conn.execute(
                "SELECT session, count(*), max(created) FROM outbox WHERE dead=0 GROUP BY session"):
            row = sessions.setdefault(sess, {"session": sess, "archived_items": 0, "archived_chars": 0,
                                             "last_activity": last, "compactions": 0,
                                             "tokens_saved": 0, "backlog": 0})
            row["backlog"] = n
        for created, sess, err in conn.execute(
                "SELECT created, session, last_error FROM outbox WHERE last_error IS NOT NULL "
                "AND last_error != '' ORDER BY id DESC LIMIT 5"):
            errors.append({"ts": created, "session": sess, "source": "outbox", "error": err})
    finally:
        conn.close()
    levels: Dict[str, int] = {}
    saved = gateway = 0
    for ev in events:
        rec = Compaction.from_json(ev)
        gain = rec.saved
        saved += gain
        gateway += 1 if rec.via_gateway else 0
        levels[rec.level.value] = levels.get(rec.level.value, 0) + 1
        row = sessions.setdefault(ev.get("session") or "?", {
            "session": ev.get("session") or "?", "archived_items": 0, "archived_chars": 0,
            "last_activity": ev.get("ts"), "compactions": 0, "tokens_saved": 0, "backlog": 0})
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
        "levels": levels, "tokens_saved": saved,
        "recent": [dict(Compaction.from_json(ev).to_json(), ts=ev.get("ts"),
                        session=ev.get("session")) for ev in events[:recent]]}
    out["errors"] = errors[:recent]
    return out


def _when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def render_status_text(st: Dict[str, Any]) -> str:
    s = st["settings"]
    lines = ["tencentdb-offload status — store %s" % st["store_dir"]]
    recent = (st.get("compactions") or {}).get("recent") or []
    lines.append("  last compaction: %s" % (describe_compaction(recent[0]) if recent else "none yet"))
    lines.append("  configured: %s; compaction at %.0f%% of the window, down to %.0f%%"
                 % ("Gateway %s (instance %s)" % (s["gateway_url"], s["instance_id"])
                    if s["gateway_url"] else "local only (no Gateway)",
                    s["threshold"] * 100, s["compact_ratio"] * 100))
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
    lines.append("  compactions: %s (Gateway %s, local %s); levels: %s; tokens saved %s"
                 % (count(comp["total"]), count(comp["gateway"]), count(comp["local"]),
                    ", ".join("%s %s" % (k, count(v)) for k, v in sorted(comp["levels"].items())) or "none",
                    count(comp["tokens_saved"])))
    if st["sessions"]:
        lines.append("  sessions (newest first):")
        for r in st["sessions"][:15]:
            lines.append("    %s: %s, %s, saved %s tokens, %s waiting, last %s"
                         % (r["session"], plural(r["archived_items"], "item"),
                            plural(r["compactions"], "compaction"), count(r["tokens_saved"]),
                            count(r["backlog"]), _when(r["last_activity"])))
    if comp["recent"]:
        lines.append("  recent compactions:")
        for ev in comp["recent"]:
            lines.append("    %s  %s: %s" % (_when(ev["ts"]), printable(ev["session"], 200, False),
                                             Compaction.from_json(ev).describe()))
    for e in st["errors"][:5]:
        lines.append("  error (%s, %s): %s" % (e["source"], _when(e["ts"]),
                                               printable(e["error"], 200, newlines=False)))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, _block, settings, warnings = resolve_settings(overrides)
    data = status_data(settings.resolved_store_dir(env), settings, args.recent)
    data["warnings"] = warnings
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(render_status_text(data))
        for w in warnings:
            print("  warning: %s" % w)
    return 0


