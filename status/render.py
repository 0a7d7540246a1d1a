"""The one status renderer: ``/tencentdb-offload``, ``python3 <plugin dir> status``, doctor's
store line and the host's start-of-compaction line print with these functions, so they show the
same figures."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Dict, List, Optional

from ..archive.stats import StoreStats
from ..archive.visibility import OPERATOR, Scope
from ..common import cache_model
from ..common.humanize import count, kilo, plural, printable, size
from ..session.record import SIZES, Compaction
from ..settings.thresholds import landing_text, trigger_text
from ..memory_gateway.session_ids import gateway_session_id
from ..settings.config import Settings, gateway_text
from .model import (CacheCost, GatewayView, HeldSession, ProcessView, StatusReport, StoreView,
                    prompt_cache)

RECALL = "the model can recall them with tdai_offload_search / tdai_read_cos"
NO_GATEWAY = "local mode (no Gateway configured)"


def when(ts: Any, unknown: str = "-") -> str:
    """A moment as people read it in status lines: local time, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else unknown


def describe_compaction(ev: Dict[str, Any], scope: Scope = OPERATOR) -> str:
    """One line about a stored compaction event: when, the record's own description, whose
    (not to a private reader; a conversation it may not see without the Gateway's words)."""
    rec = Compaction.from_json(ev)
    if not scope.sees(ev.get("session")):
        rec = replace(rec, error="")
    text = "%s, %s" % (when(ev.get("ts"), "?"), rec.describe())
    if ev.get("session") and not scope.private:
        text += " (session %s)" % ev["session"]
    return printable(text + "; " + RECALL, newlines=False)      # level, error: the Gateway's words


def store_figures(stats: StoreStats) -> str:
    """The store's figures in the words every surface (doctor included) prints them."""
    return "%s waiting for the Gateway, %s refused for good, %s delivered; %s archived" % (
        plural(stats.outbox_backlog, "row"), count(stats.outbox_dead), count(stats.delivered),
        plural(stats.archived_items, "item"))


def gateway_in_use(settings: Settings, gateway: Optional[GatewayView], stats: StoreStats) -> bool:
    """Whether the outbox is a story worth telling: a Gateway was configured or answered."""
    if not settings.gateway_url:
        return bool(stats.outbox_backlog or stats.outbox_dead)     # left from when one was on
    if gateway is not None:
        return not gateway.looks_unused
    return settings.gateway_configured or stats.delivered > 0


def mode_text(report: StatusReport) -> str:
    s, gw = report.settings, report.gateway
    if not s.enabled:
        return "disabled"
    if gw is not None and gw.looks_unused or gw is None and s.gateway_url and not s.gateway_configured:
        return "local (no Gateway configured)"
    # in the words the shell uses, whether a running process answers (the slash command) or not
    mode = report.process.mode if report.process is not None else (
        "gateway" if s.gateway_url else "local")
    return {"gateway": "Gateway at %s" % s.gateway_url, "local": "local (Gateway off)",
            "local (gateway unavailable)": "local (Gateway unavailable at %s)" % s.gateway_url,
            }.get(mode, mode)


PRIVATE = ("  conversations are not named here: in Hermes' messaging gateway anyone who can "
           "message it can run this command; `python3 <plugin dir> status` on the host names them")


def render(report: StatusReport) -> str:
    """As ``report.scope`` may read it (``archive/visibility.py``): a private reader (the
    messaging gateway's slash command answers whoever sends it; its session ids carry other
    users' chat ids) reads no other conversation's id, figures or error text."""
    s, scope = report.settings, report.scope
    private = scope.private
    store = report.store
    last = store.compactions.last if store else None
    lines: List[str] = [
        "tencentdb-offload status — mode: %s; store %s" % (mode_text(report), report.store_dir),
        "  last compaction: %s" % (describe_compaction(last, scope) if last else "none yet"),
        "  %s, %s; keep first %s; trim results over %s"
        % (trigger_text(s, report.trigger, report.host), landing_text(s, report.trigger, report.host),
           plural(s.keep_first, "message"),
           plural(s.trim_chars, "char")),
        "  " + cache_ttl_text(s)]
    if report.gateway_sources:
        lines.append("  Gateway settings: %s" % report.gateway_sources)
    if report.process is not None:
        lines += _process_lines(report.process, s, len(store.sessions) if store else 0, private)
    lines += _store_lines(report, private)
    lines += _gateway_lines(report)
    lines += ["  warning: %s" % w for w in report.warnings[-3:]]
    lines += ["  error: %s" % e for e in report.recent_errors[-3:]]
    if private:
        lines = hide_others(lines, report)
    return "\n".join(printable(line, newlines=False) for line in lines)   # peers' text, one line each


def cache_ttl_text(s: Settings) -> str:
    """The prompt-cache TTL idle compaction applies, and where it came from."""
    if not s.cache_ttl_s:
        return "prompt-cache TTL: off, no idle compaction (%s)" % s.cache_ttl_from
    return "prompt-cache TTL: %s s, idle compaction after a longer pause (%s)" % (
        count(s.cache_ttl_s), s.cache_ttl_from)


def hide_others(lines: List[str], report: StatusReport) -> List[str]:
    """The lines with every conversation the reader may not see unnamed, in case a peer's
    words (a Gateway's error) quote one: its key and its Gateway session id."""
    known = {r.session for r in report.store.sessions} if report.store else set()
    known |= {h.session for h in report.process.held} if report.process else set()
    names = sorted({n for k in known if k and not report.scope.sees(k)
                    for n in (k, gateway_session_id(k))}, key=len, reverse=True)
    for name in names:
        lines = [line.replace(name, "<another conversation>") for line in lines]
    return lines


def _process_lines(p: ProcessView, s: Settings, known: int, private: bool = False) -> List[str]:
    t = p.totals
    lines = [
        "  sessions in memory: %s (at most %s; %s evicted, their archive stays) — this Hermes "
        "process only; the archive holds %s from every process"
        % (count(sum(1 for h in p.held if h.active)), count(s.max_sessions), count(p.sessions_evicted),
           plural(known, "session")),
        "    (one per conversation this process served: a chat, and each sub-agent or background "
        "review Hermes runs with its own session id; a compaction's new id stays with its chat)%s"
        % ("" if private else held_sessions(p.held)),
        "  compactions this process: %s (Gateway %s, local %s); levels: %s"
        % (count(t["compactions"]), count(t["gateway_compactions"]), count(t["local_compactions"]),
           ", ".join("%s %s" % (k, count(v)) for k, v in sorted(t["levels"].items())) or "none"),
        "  tokens (estimated): %s before → %s after (saved %s); archived this process: %s"
        % (count(t["tokens_before"]), count(t["tokens_after"]), count(t["tokens_saved"]),
           plural(t["archived"], "item")),
        "  canvas: injected %s, stale blocks removed %s"
        % (count(t["canvas_injections"]), count(t["canvas_blocks_removed"])),
        prompt_cache_line(prompt_cache(t, s.cache_ttl_s))]
    w = p.writer
    if w and not w.get("healthy", True):
        lines.append("  ARCHIVE WRITES WAITING: %s retrying (%s held in memory), %s lost — %s"
                     % (count(w.get("retrying", 0)), size(w.get("waiting_bytes", 0)),
                        count(w.get("lost", 0)), w.get("last_error") or "store unavailable"))
    return lines


def prompt_cache_line(pc: Dict[str, Any]) -> str:
    share = pc.get("cached_share")
    return ("  prompt cache: %s; compactions' rewrites wrote %s "
            "tokens (the provider's count); %s after a pause over %s" % (
                "%.0f%% of prompt tokens read from it" % (share * 100)
                if isinstance(share, (int, float)) else cache_model.NOT_REPORTED,
                count(pc.get("compaction_cache_write_tokens", 0)),
                plural(pc.get("idle_compactions", 0), "idle compaction"),
                "%s s (cache TTL)" % count(pc["ttl_s"]) if pc.get("ttl_s") else "the TTL (off)"))


def held_sessions(held: List[HeldSession], most: int = 5) -> str:
    """``: a1b2 (12 tool results), …`` for the conversations held in memory (none invented)."""
    real = [h for h in held if h.active]
    if not real:
        return ""
    shown = ["%s (%s)" % (h.session, plural(h.tool_results, "tool result")) for h in real[-most:][::-1]]
    return ": " + ", ".join(shown) + (", …" if len(real) > most else "")


def _store_lines(report: StatusReport, private: bool = False) -> List[str]:
    if report.store_problem:
        return ["  archive: UNAVAILABLE — %s" % report.store_problem]
    store = report.store
    if store is None and report.store_option:
        return ["  no store at %s (the --store given): nothing has been archived there yet"
                % report.store_dir]
    if store is None:
        return ["  no store yet: the plugin has not archived anything with this "
                "HERMES_HOME / TENCENTDB_OFFLOAD_STORE_DIR"]
    st, comp = store.stats, store.compactions
    lines = ["  archive: %s, %s chars (%s of text) from %s of the %s the store knows; database %s"
             % (plural(st.archived_items, "item"), count(st.archived_chars), size(st.archived_chars),
                count(st.archived_sessions), plural(len(store.sessions), "session"), size(st.db_bytes))]
    if gateway_in_use(report.settings, report.gateway, st):
        lines.append("  store: " + store_figures(st))
    lines.append("  compactions (every process): %s (Gateway %s, local %s; %s idle, after a pause "
                 "over the cache TTL%s); levels: %s; tokens saved %s (estimated)"
                 % (count(comp.total), count(comp.gateway), count(comp.local), count(comp.idle),
                    "; %s for one request only, the host had not compacted in time%s"
                    % (count(comp.request_only), ", %s of them then taken by its transcript "
                       "(counted once)" % count(comp.adopted) if comp.adopted else "")
                    if comp.request_only else "",
                    ", ".join("%s %s" % (k, count(v)) for k, v in sorted(comp.levels.items())) or "none",
                    count(comp.tokens_saved)))
    if comp.cache.priced:
        lines.append(cache_cost_line(comp.cache, comp.total))
    if comp.total or comp.recent:
        lines.append("  (%s)" % SIZES)
    lines.append(masked_line(report.settings, store))
    lines += [PRIVATE] if private else _sessions_and_recent(store)
    seen = [e for e in store.errors[:5] if report.scope.sees(e.get("session"))]
    lines += ["  error (%s, %s): %s" % (e["source"], when(e["ts"]), str(e["error"])[:200]) for e in seen]
    if len(seen) < len(store.errors[:5]):
        lines.append("  %d error(s) of other conversations not shown here" % (len(store.errors[:5]) - len(seen)))
    return lines


def cache_cost_line(c: CacheCost, total: int) -> str:
    """What the compactions cost the provider's prompt cache, beside no compaction where the
    window held the context (docs/commands.md, "What a compaction cost")."""
    return ("  compactions so far cost ~%s cache-write tokens (estimated: what the request after "
            "each wrote; ~%s with no compaction where the window held the context, %s of %s)%s; "
            "under the cache model (%s) those requests cost %s units, %s without"
            % (count(c.written), count(c.written_without), count(c.fitted), count(c.priced),
               "" if c.priced >= total else " (figures for %s of %s compactions: older "
               "records have none)" % (count(c.priced), count(total)),
               cache_model.MODEL, count(c.cost), count(c.cost_without)))


def masked_line(s: Settings, store: StoreView) -> str:
    """What left for the Gateway with its secrets masked (counts; never a secret)."""
    texts = sum(r.redacted for r in store.sessions)
    if not s.redact:
        return ("  secrets: NOT masked (TENCENTDB_OFFLOAD_REDACT=false): tool output and prompts "
                "go to the Gateway as they are%s" % (
                    "; %s masked earlier" % plural(texts, "text") if texts else ""))
    return "  secrets masked before leaving for the Gateway (every process): %s in %s%s" % (
        plural(texts, "text"), plural(sum(1 for r in store.sessions if r.redacted), "conversation"),
        "; the archive masks them at rest too" if s.redact_archive else "; the archive keeps originals")


def _sessions_and_recent(store: StoreView) -> List[str]:
    lines = []
    if store.sessions:
        lines.append("  sessions (newest first):")
        for r in store.sessions[:15]:
            lines.append("    %s: %s, %s, saved %s tokens (estimated), %s waiting,%s last %s"
                         % (r.session, plural(r.archived_items, "item"), plural(r.compactions, "compaction"),
                            count(r.tokens_saved), count(r.backlog),
                            " %s masked," % plural(r.redacted, "text") if r.redacted else "",
                            when(r.last_activity)))
        if len(store.sessions) > 15:
            lines.append("    … and %s more" % plural(len(store.sessions) - 15, "session"))
    if store.compactions.recent:
        lines.append("  recent compactions:")
        for ev in store.compactions.recent:
            lines.append("    %s %s: %s" % (when(ev["ts"]), ev["session"], Compaction.from_json(ev).describe()))
    return lines


def _gateway_lines(report: StatusReport) -> List[str]:
    s, gw = report.settings, report.gateway
    if gw is None:
        if s.gateway_url and not s.gateway_configured:
            return ["  " + _unused_default(s.gateway_url)]
        return ["  %s%s" % (gateway_text(s.gateway_url, s.gateway_configured),
                            " (instance %s)" % s.instance_id if s.gateway_url else "")]
    if gw.looks_unused:
        return ["  " + _unused_default(gw.url)]
    lines = ["  %s (instance %s), health %s%s; breaker %s%s"
             % (gateway_text(gw.url, gw.configured), gw.instance_id, gw.health,
                " (version %s)" % gw.version if gw.version else "", gw.breaker_state,
                " (retry in %.0f s)" % gw.retry_in_s if gw.breaker_state == "open" else "")]
    if gw.config_error:
        lines.append("  CONFIG PROBLEM: %s — check TENCENTDB_OFFLOAD_API_KEY / _INSTANCE_ID / _GATEWAY_URL"
                     % gw.config_error)
    if gw.last_error:
        lines.append("  last Gateway error: %s" % gw.last_error)
    return lines


def _unused_default(url: str) -> str:
    return ("%s: compaction runs here; a %s is used only if one answers there "
            "(TENCENTDB_OFFLOAD_GATEWAY_URL=off stops looking)" % (NO_GATEWAY, gateway_text(url, False)))


def announce_line(approx: Any, target: int, via_gateway: bool, last: Optional[Compaction],
                  gateway_note: str = "") -> str:
    """What the user reads when a compaction starts (Hermes asks before it runs); ``approx``
    is Hermes' estimate, and the line says so."""
    size = ("~%s tokens (Hermes' estimate)" % kilo(approx) if isinstance(approx, int) and approx > 0
            else "the context")
    line = ("tencentdb-offload: compacting %s %s to the %s-token target; what leaves stays "
            "readable (recall: tdai_read_cos, tdai_offload_search)"
            % (size, "through the Gateway%s" % gateway_note if via_gateway else "locally",
               kilo(target)))
    return line + (". Last: " + last.describe() if last else "")


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
