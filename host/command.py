"""The ``/tencentdb-offload`` slash command: status, health, flush, reclaim, help."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from ..compaction.record import Compaction
from ..settings.config import gateway_text
from ..common.humanize import count, plural, printable, size
from .thresholds import small_window_note

HELP = """/tencentdb-offload [subcommand]
  status   (default) the last compaction first, then mode, thresholds, sessions,
           compactions, levels, tokens saved, archive size, Gateway health and breaker,
           outbox backlog, last errors
  health   probe the Gateway now (GET /health)
  flush    deliver the ingest outbox to the Gateway now (waits up to 10 s)
  reclaim  delete archive/outbox data older than TENCENTDB_OFFLOAD_RETENTION_DAYS
  help     this text
In `hermes chat -q` this text goes to the model as a prompt; for a one-shot status run
`python3 <plugin dir> status` instead."""


RECALL = "the model can recall them with tdai_offload_search / tdai_read_cos"


def when(ts: Any, unknown: str = "-") -> str:
    """A moment as people read it in status lines: local time, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else unknown


def describe_compaction(ev: Dict[str, Any]) -> str:
    """One line about a stored compaction event: when, the record's own description, whose."""
    text = "%s, %s" % (when(ev.get("ts"), "?"), Compaction.from_json(ev).describe())
    if ev.get("session"):
        text += " (session %s)" % ev["session"]
    return printable(text + "; " + RECALL, newlines=False)      # level, error: the Gateway's words


def explain_unchanged(tokens: int, target: int, trigger: int, messages: int) -> str:
    """Why a compaction the user asked for (``/compress``) left the context as it was.

    ``tokens``: the context now (our estimate); ``target``/``trigger``: the engine's target
    and trigger in tokens; ``messages``: how many messages the context holds.
    """
    if tokens <= target:
        return ("tencentdb-offload: nothing to compact — the context (~%s tokens, %s) is already "
                "under the target of %s tokens by %s; compaction starts by itself at %s tokens"
                % (count(tokens), plural(messages, "message"), count(target), count(target - tokens),
                   count(trigger)))
    return ("tencentdb-offload: nothing could be removed — the context (~%s tokens, %s) is %s "
            "tokens over the target of %s, but what is left is the protected start of the "
            "conversation and the current turn" % (count(tokens), plural(messages, "message"),
                                                  count(tokens - target), count(target)))


def last_compaction(runtime: Any) -> Optional[Dict[str, Any]]:
    """The newest compaction this store knows, from any process (None without a store)."""
    if runtime.store is None:
        return None
    runtime.flush_writes()
    found = runtime.store.events("compaction", limit=1)
    return found[0] if found else None


def render_status(st: Dict[str, Any], last: Optional[Dict[str, Any]] = None) -> str:
    s, t = st["settings"], st["totals"]
    store = st.get("store") or {}
    lines: List[str] = [
        "tencentdb-offload — mode: %s" % st["mode"],
        "  last compaction: %s" % (describe_compaction(last) if last else "none yet"),
        "  compaction at %.0f%% of the window%s, down to %.0f%%; keep first %s; trim results over %s"
        % (s["threshold"] * 100, small_window_note(s), s["compact_ratio"] * 100,
           plural(s["keep_first"], "message"),
           plural(s["trim_chars"], "char")),
        "  sessions in memory: %s (at most %s; %s evicted, their archive stays) — this Hermes "
        "process only; the archive holds %s from every process"
        % (count(st["sessions_in_memory"]), count(s["max_sessions"]), count(st["sessions_evicted"]),
           plural(store.get("archived_sessions", 0), "session")),
        "    (one per conversation this process served: a chat, and each sub-agent or background "
        "review Hermes runs with its own session id; a compaction's new id stays with its chat)%s"
        % held_sessions(st.get("held") or []),
        "  compactions this process: %s (Gateway %s, local %s); levels: %s"
        % (count(t["compactions"]), count(t["gateway_compactions"]), count(t["local_compactions"]),
           ", ".join("%s %s" % (k, count(v)) for k, v in sorted(t["levels"].items())) or "none"),
        "  tokens: %s before → %s after (saved %s); archived this process: %s"
        % (count(t["tokens_before"]), count(t["tokens_after"]), count(t["tokens_saved"]),
           plural(t["archived"], "item")),
        "  canvas: injected %s, stale blocks removed %s" % (count(t["canvas_injections"]),
                                                            count(t["canvas_blocks_removed"])),
        prompt_cache_line(st.get("prompt_cache") or {}),
    ]
    if "error" in store or st.get("store_error"):
        lines.append("  archive: UNAVAILABLE — %s" % (st.get("store_error") or store.get("error")))
    elif store:
        lines.append("  archive: %s (%s of text) in %s; database %s"
                     % (plural(store["archived_items"], "item"), size(store["archived_chars"]),
                        plural(store["archived_sessions"], "session"), size(store["db_bytes"])))
    w = st.get("writer") or {}
    if w and not w.get("healthy", True):
        lines.append("  ARCHIVE WRITES WAITING: %s retrying (%s held in memory), %s lost — %s"
                     % (count(w.get("retrying", 0)), size(w.get("waiting_bytes", 0)),
                        count(w.get("lost", 0)), w.get("last_error") or "store unavailable"))
    gw = st.get("gateway")
    if gw:
        b = gw["breaker"]
        lines.append("  %s (instance %s), health %s%s; breaker %s%s"
                     % (gateway_text(gw["url"], s.get("gateway_configured", True)), gw["instance_id"], gw["health"],
                        " (version %s)" % gw["version"] if gw.get("version") else "",
                        b["state"], " (retry in %.0f s)" % b["retry_in_s"] if b["state"] == "open" else ""))
        lines.append("  outbox: %s waiting, %s refused for good, %s delivered"
                     % (count(store.get("outbox_backlog", 0)), count(store.get("outbox_dead", 0)),
                        count(store.get("delivered", 0))))
        if gw.get("config_error"):
            lines.append("  CONFIG PROBLEM: %s — check TENCENTDB_OFFLOAD_API_KEY / _INSTANCE_ID / _GATEWAY_URL"
                         % gw["config_error"])
        if gw.get("last_error"):
            lines.append("  last Gateway error: %s" % gw["last_error"])
    else:
        lines.append("  %s" % gateway_text("", False))
    for w in st.get("warnings", [])[-3:]:
        lines.append("  warning: %s" % w)
    for e in st.get("recent_errors", [])[-3:]:
        lines.append("  error: %s" % e)
    return "\n".join(printable(line, newlines=False) for line in lines)   # peers' text, one line each


def prompt_cache_line(pc: Dict[str, Any]) -> str:
    """The provider's prompt cache: the share read from it, what compactions' rewrites wrote,
    and the compactions done where the cache was cold anyway."""
    share = pc.get("cached_share")
    return ("  prompt cache: %s of prompt tokens read from it; compactions' rewrites wrote %s "
            "tokens; %s after a pause over %s" % (
                "%.0f%%" % (share * 100) if isinstance(share, (int, float)) else "not reported",
                count(pc.get("compaction_cache_write_tokens", 0)),
                plural(pc.get("idle_compactions", 0), "idle compaction"),
                "%s s (cache TTL)" % count(pc.get("ttl_s", 0)) if pc.get("ttl_s") else "the TTL (off)"))


def held_sessions(held: List[Dict[str, Any]], most: int = 5) -> str:
    """``: a1b2 (12 tool results), c3d4 (0 tool results), …`` for the sessions held in memory."""
    if not held:
        return ""
    shown = ["%s (%s%s)" % (h["session"], "no session id given; " if h["session"] == "default" else "",
                            plural(h["tool_results"]["recorded"], "tool result"))
             for h in held[-most:][::-1]]
    return ": " + ", ".join(shown) + (", …" if len(held) > most else "")


def flush_text(runtime: Any) -> str:
    """What ``flush`` did, truthfully: nothing is sent without a Gateway or while it is down."""
    if runtime.worker is None:
        runtime.flush(None, 10.0)
        return ("archive writes saved to disk; nothing sent: the Gateway is off (local mode), "
                "so there is no outbox to deliver")
    done = runtime.flush(None, 10.0)
    left = runtime.store.backlog() if runtime.store else 0
    if done and not left:
        return "outbox delivered: nothing waiting for the Gateway"
    gw = runtime.status().get("gateway") or {}
    why = gw.get("worker_error") or gw.get("last_error") or "health %s, breaker %s" % (
        gw.get("health", "?"), (gw.get("breaker") or {}).get("state", "?"))
    return "outbox not delivered: %s waiting (kept on disk, sent when the Gateway answers); %s" % (
        plural(left, "row"), why)


def make_command(runtime: Any) -> Callable[[str], str]:
    def handler(raw_args: str = "", *_: Any, **__: Any) -> str:
        return printable(answer(raw_args))          # Gateway errors and versions are peers' text

    def answer(raw_args: str) -> str:
        words = (raw_args or "").split()
        sub = words[0].lower() if words else "status"
        try:
            if sub == "status":
                last = last_compaction(runtime)      # flushes pending writes first
                st = runtime.status()
                st["held"] = [x.status() for x in runtime.registry.all()]
                return render_status(st, last)
            if sub == "help":
                return HELP
            if sub == "health":
                h = runtime.health()
                if h["ok"]:
                    return "Gateway up: status %s, version %s, %.1f ms" % (
                        h["status"], h["version"] or "?", h["latency_ms"])
                return "Gateway not usable: %s" % h["reason"]
            if sub == "flush":
                return flush_text(runtime)
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
