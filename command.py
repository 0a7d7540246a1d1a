"""The ``/tencentdb-offload`` slash command: status, health, flush, reclaim, help."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

HELP = """/tencentdb-offload [subcommand]
  status   (default) mode, thresholds, sessions, compactions, levels, tokens saved,
           archive size, Gateway health and breaker, outbox backlog, last errors
  health   probe the Gateway now (GET /health)
  flush    deliver the ingest outbox to the Gateway now (waits up to 10 s)
  reclaim  delete archive/outbox data older than TENCENTDB_OFFLOAD_RETENTION_DAYS
  help     this text"""


def _kb(n: int) -> str:
    return "%.1f MB" % (n / 1e6) if n >= 1e6 else "%.1f KB" % (n / 1e3)


def render_status(st: Dict[str, Any]) -> str:
    s = st["settings"]
    t = st["totals"]
    lines: List[str] = [
        "tencentdb-offload — mode: %s" % st["mode"],
        "  trigger %.0f%% of the window, target %.0f%%; keep first %d; trim results over %d chars"
        % (s["threshold"] * 100, s["compact_ratio"] * 100, s["keep_first"], s["trim_chars"]),
        "  sessions in memory: %d (evicted %d)" % (st["sessions_in_memory"], st["sessions_evicted"]),
        "  compactions: %d (gateway %d, local %d); levels: %s"
        % (t["compactions"], t["gateway_compactions"], t["local_compactions"],
           ", ".join("%s %d" % kv for kv in sorted(t["levels"].items())) or "none"),
        "  tokens: %d before -> %d after (saved %d); archived this process: %d"
        % (t["tokens_before"], t["tokens_after"], t["tokens_saved"], t["archived"]),
        "  canvas: injected %d, stale blocks removed %d"
        % (t["canvas_injections"], t["canvas_blocks_removed"]),
    ]
    store = st.get("store") or {}
    if "error" in store or st.get("store_error"):
        lines.append("  archive: UNAVAILABLE — %s" % (st.get("store_error") or store.get("error")))
    elif store:
        lines.append("  archive: %d items (%s of text) in %d sessions; db %s"
                     % (store["archived_items"], _kb(store["archived_chars"]),
                        store["archived_sessions"], _kb(store["db_bytes"])))
    gw = st.get("gateway")
    if gw:
        b = gw["breaker"]
        lines.append("  gateway: %s (instance %s) health %s %s; breaker %s%s"
                     % (gw["url"], gw["instance_id"], gw["health"], gw.get("version", ""),
                        b["state"], " (retry in %.0fs)" % b["retry_in_s"] if b["state"] == "open" else ""))
        lines.append("  outbox: %d waiting, %d refused for good, %d delivered"
                     % (store.get("outbox_backlog", 0), store.get("outbox_dead", 0),
                        store.get("delivered", 0)))
        if gw.get("config_error"):
            lines.append("  CONFIG PROBLEM: %s — check TENCENTDB_OFFLOAD_API_KEY / _INSTANCE_ID / _GATEWAY_URL"
                         % gw["config_error"])
        if gw.get("last_error"):
            lines.append("  last gateway error: %s" % gw["last_error"])
    else:
        lines.append("  gateway: off (local compaction only)")
    for w in st.get("warnings", [])[-3:]:
        lines.append("  warning: %s" % w)
    for e in st.get("recent_errors", [])[-3:]:
        lines.append("  error: %s" % e)
    return "\n".join(lines)


def make_command(runtime: Any) -> Callable[[str], str]:
    def handler(raw_args: str = "", *_: Any, **__: Any) -> str:
        words = (raw_args or "").split()
        sub = words[0].lower() if words else "status"
        try:
            if sub == "status":
                return render_status(runtime.status())
            if sub == "help":
                return HELP
            if sub == "health":
                h = runtime.health()
                if h["ok"]:
                    return "gateway up: status %s, version %s, %.1f ms" % (
                        h["status"], h["version"] or "?", h["latency_ms"])
                return "gateway not usable: %s" % h["reason"]
            if sub == "flush":
                done = runtime.flush(None, 10.0)
                left = runtime.store.backlog() if runtime.store else 0
                return "outbox %s; %d row(s) waiting" % ("delivered" if done else "not fully delivered", left)
            if sub == "reclaim":
                if runtime.reclaimer.retention_days <= 0:
                    return "retention is off (TENCENTDB_OFFLOAD_RETENTION_DAYS=0): nothing deleted"
                counts = runtime.reclaimer.run()
                if runtime.reclaimer.last_error:
                    return runtime.reclaimer.last_error
                return "reclaimed: " + ", ".join("%s %d" % kv for kv in sorted(counts.items()))
        except Exception as exc:
            return "tencentdb-offload %s failed: %s" % (sub, exc)
        return "unknown subcommand %r\n%s" % (sub, HELP)
    return handler
