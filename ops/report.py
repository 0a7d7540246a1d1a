"""The text report of ``demo`` and ``replay``: per-turn table, context chart, summary."""

from __future__ import annotations

from typing import Any, Dict, List

from ..session.record import SIZES
from ..settings.thresholds import Trigger
from .host_emulation import SELECTING
from ..common.humanize import count, kilo, plural


def chart(report: Dict[str, Any], width: int = 60) -> List[str]:
    """Context size per turn: █ kept, ░ removed by a compaction; T threshold, t target."""
    ctx = report["context_length"]
    col = lambda tokens: min(width, int(round(width * tokens / float(ctx))))  # noqa: E731
    t_col, big_t = col(report["target_tokens"]), col(report["threshold_tokens"])
    lines = ["context per turn (largest request sent; █ sent, ░ removed by compaction; "
             "t target %s, T threshold %s, | window %s)"
             % (kilo(report["target_tokens"]), kilo(report["threshold_tokens"]), kilo(ctx))]
    for row in report["turns"]:
        peak = col(row["peak_tokens"])
        after = col(row["tokens_after"]) if row["tokens_after"] is not None else peak
        cells = ["█" if i < min(peak, after) else ("░" if i < peak else " ") for i in range(width)]
        for pos, mark in ((t_col, "t"), (big_t, "T")):
            if 0 <= pos < width:
                cells[pos] = mark
        lines.append("%4d %s| %s%s" % (row["turn"], "".join(cells), kilo(row["peak_tokens"]),
                                       " -> %s" % kilo(row["tokens_after"]) if row["tokens_after"] else ""))
    return lines


def _origin(text: str) -> str:
    return "" if text == "default" else " (from %s)" % text


def render(report: Dict[str, Any]) -> str:
    return "\n".join(_header(report) + _turns(report) + [""] + _compactions(report) + chart(report)
                     + ["", "summary"] + _summary(report))


def _compactions(report: Dict[str, Any]) -> List[str]:
    """Each compaction as every surface shows it: the stored record's ``describe()``."""
    if not report["compactions"]:
        return []
    return (["compactions (%s; after = what was left)" % SIZES]
            + ["  turn %d (%s): %s" % (c["turn"], c["trigger"], c["describe"] or "no record in the store")
               for c in report["compactions"]] + [""])


def _host(report: Dict[str, Any]) -> str:
    """Whose checks the run drove the engine with: the Python that runs it decides, and a user
    whose Hermes lives in its own environment would otherwise read another host's trigger as his."""
    if report.get("host") == SELECTING:
        return ("host: the checks and request figure of a Hermes that selects context per request "
                "(this Python imports one)")
    return ("host: the checks and request figure of a Hermes that does not select context per "
            "request (this Python imports no Hermes that does; for yours, run this command with "
            "the Python of your Hermes)")


def _header(report: Dict[str, Any]) -> List[str]:
    src = report["source"]
    what = ("synthetic coding session, %s, seed %s" % (plural(src["turns"], "turn"), src["seed"])
            if src.get("kind") == "synthetic" else
            "%s %s" % (src.get("kind"), src.get("session_id") or src.get("path")))
    out = ["tencentdb-offload %s — %s" % (report["command"], what)]
    # a setting that was ignored or odd changes the figures below: say so before them
    out += ["WARNING: %s" % w for w in (report.get("summary") or {}).get("warnings", ())]
    out += ["mode: %s — %s" % (report["mode"].upper(), report["mode_reason"]), _host(report),
           "window %s tokens%s" % (count(report["context_length"]), _origin(report["window_from"])),
           "compaction at %s%s; down to %.0f%% = %s tokens%s; session %s"
           % (Trigger(report["threshold_tokens"], report["context_length"]).describe(),
              _origin(report["threshold_from"]), report["ratio"] * 100, count(report["target_tokens"]),
              _origin(report["ratio_from"]), report["session_id"]), ""]
    return out


def _turns(report: Dict[str, Any]) -> List[str]:
    """Per turn: the largest request sent (the provider's count) and, when the turn compacted,
    the compaction record's before -> after (the same figures as the compaction list)."""
    out = ["turn  msgs  requests  largest sent  compacted before -> after  action      level       mode"]
    over = 0
    for t in report["turns"]:
        action = t["action"]
        if t.get("over_trigger"):
            action, over = "over*", over + 1
        compacted = ("%s -> %s" % (count(t["tokens_before"]), count(t["tokens_after"]))
                     if t["tokens_after"] is not None else "-")
        out.append("%4d  %4d  %8d  %12s  %25s  %-11s %-11s %s"
                   % (t["turn"], t["messages"], t["requests"], count(t["peak_tokens"]), compacted,
                      action, t["level"] or "-", t["path"] or "-"))
    if over:
        out.append("* over the trigger, no compaction yet: Hermes compacts after the response "
                   "that crossed it, before the next request")
    out.append("largest sent: the provider's count (simulated here); compacted before -> after: "
               "estimated, as in the list of compactions below")
    return out


def _summary(report: Dict[str, Any]) -> List[str]:
    s, r, src = report["summary"], report["recall"], report["source"]
    out: List[str] = []
    levels = ", ".join("%s %d" % kv for kv in sorted(s["levels"].items())) or "none"
    out.append("  messages read %s, now in context %s; %s sent"
               % (count(s["messages_read"]), count(s["messages_now"]), plural(s["requests"], "request")))
    for line in src.get("not_reconstructed") or []:
        out.append("  not reconstructed: %s" % line)
    out.append("  compactions: %s (Gateway %s, local %s); levels: %s"
               % (count(s["compactions"]), count(s["gateway_compactions"]), count(s["local_compactions"]),
                  levels))
    if src.get("live_compactions") is not None:
        out.append("  the live session compacted %s (runs of rows written back in state.db)"
                   % ("once" if src["live_compactions"] == 1 else "%s times" % count(src["live_compactions"])))
    out.append("  tokens saved (estimated): %s" % count(s["tokens_saved"]))
    out.append("  largest context sent (largest sent in the table, the provider's count): %s tokens "
               "= %.1f%% of the %s window%s"
               % (count(s["largest_request_tokens"]), s["largest_request_pct"],
                  count(report["context_length"]),
                  "" if s["largest_request_tokens"] <= report["context_length"] else "  OVER THE WINDOW"))
    out.append("  sequence validity: %s" % (
        "all %s valid" % plural(s["requests"], "request") if not s["invalid_requests"] else
        "%s INVALID, e.g. turn %d: %s" % (count(s["invalid_requests"]), s["invalid_examples"][0]["turn"],
                                          "; ".join(s["invalid_examples"][0]["errors"]))))
    out.append("  archived: %s — every tool result as it arrived (%s of %s) and %s a compaction "
               "removed — in %s%s"
               % (plural(s["archived_items"], "item"), count(s["archived_tool_results"]),
                  count(s["tool_results"]), plural(s["archived_messages"], "message"), report["store_dir"],
                  "" if report["store_kept"] else " (temporary; keep it with --store DIR)"))
    if r.get("tool_call_id"):
        out.append("  recall: tdai_read_cos(tool_call_id=%r) -> %s" % (r["tool_call_id"], (
            "%s chars, identical to the original %s result%s" % (
                count(r["chars"]), r["tool_name"] or "tool",
                "" if r.get("left_context") else " (it never left the context)")
            if r.get("ok") else "FAILED: %s" % r.get("reason", "text differs from the original"))))
    cal = s["calibration"]
    out.append("  calibration: provider tokens = %s x estimate + %s (%s)"
               % (cal["slope"], count(cal["overhead"]), plural(cal["points"], "observation")))
    if report["mode"] == "gateway":
        out.append("  Gateway: %s delivered, %s waiting"
                   % (plural(s["delivered"], "outbox row"), count(s["outbox_backlog"])))
    prepared = s.get("prepared_ahead")
    if prepared:
        out.append("  prepared ahead: %s of %s Gateway compactions used; the demo waited %.1f s for "
                   "them where a real session gives them the model's replies and the user's pauses"
                   % (count(prepared["used"]), count(prepared["started"]), prepared["waited_s"]))
    if s["warnings"]:
        out.append("  settings warnings: %d (listed at the top)" % len(s["warnings"]))
    for e in s["errors"][-3:]:
        out.append("  error: %s" % e)
    if s.get("seconds") is not None:     # measured, not claimed: a loaded machine is slower
        out.append("  the session took %.1f s (wall clock, this run; Python start-up not counted)"
                   % s["seconds"])
    for p in s["problems"]:
        out.append("  PROBLEM: %s" % p)
    return out
