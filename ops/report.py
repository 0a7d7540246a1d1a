"""The text report of ``demo`` and ``replay``: per-turn table, context chart, summary."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


def _k(n: Optional[int]) -> str:
    return "-" if n is None else ("%.1fK" % (n / 1000.0) if n >= 1000 else str(n))


def chart(report: Dict[str, Any], width: int = 60) -> List[str]:
    """Context size per turn: █ kept, ░ removed by a compaction; T threshold, t target."""
    ctx = report["context_length"]
    col = lambda tokens: min(width, int(round(width * tokens / float(ctx))))  # noqa: E731
    t_col, big_t = col(report["target_tokens"]), col(report["threshold_tokens"])
    lines = ["context per turn (peak request; █ sent, ░ removed by compaction; "
             "t target %s, T threshold %s, | window %s)"
             % (_k(report["target_tokens"]), _k(report["threshold_tokens"]), _k(ctx))]
    for row in report["turns"]:
        peak = col(row["peak_tokens"])
        after = col(row["tokens_after"]) if row["tokens_after"] is not None else peak
        cells = ["█" if i < min(peak, after) else ("░" if i < peak else " ") for i in range(width)]
        for pos, mark in ((t_col, "t"), (big_t, "T")):
            if 0 <= pos < width:
                cells[pos] = mark
        lines.append("%4d %s| %s%s" % (row["turn"], "".join(cells), _k(row["peak_tokens"]),
                                       " -> %s" % _k(row["tokens_after"]) if row["tokens_after"] else ""))
    return lines


def render(report: Dict[str, Any]) -> str:
    s, r = report["summary"], report["recall"]
    src = report["source"]
    what = ("synthetic coding session, %d turns, seed %s" % (src["turns"], src["seed"])
            if src.get("kind") == "synthetic" else
            "%s %s" % (src.get("kind"), src.get("session_id") or src.get("path")))
    out = ["tencentdb-offload %s — %s" % (report["command"], what),
           "mode: %s — %s" % (report["mode"].upper(), report["mode_reason"]),
           "window %s tokens; trigger %.0f%% = %s; target %.0f%% = %s; session %s"
           % (format(report["context_length"], ","), report["threshold"] * 100,
              format(report["threshold_tokens"], ","), report["ratio"] * 100,
              format(report["target_tokens"], ","), report["session_id"]), "",
           "turn  msgs  requests  peak tokens -> after  action      level       mode"]
    for t in report["turns"]:
        out.append("%4d  %4d  %8d  %11s -> %-6s %-11s %-11s %s"
                   % (t["turn"], t["messages"], t["requests"], format(t["peak_tokens"], ","),
                      _k(t["tokens_after"]), t["action"], t["level"] or "-", t["path"] or "-"))
    out += [""] + chart(report) + ["", "summary"]
    levels = ", ".join("%s %d" % kv for kv in sorted(s["levels"].items())) or "none"
    out.append("  messages read %d, now in context %d; %d requests sent"
               % (s["messages_read"], s["messages_now"], s["requests"]))
    out.append("  compactions: %d (gateway %d, local %d); levels: %s"
               % (s["compactions"], s["gateway_compactions"], s["local_compactions"], levels))
    out.append("  tokens saved: %s" % format(s["tokens_saved"], ","))
    out.append("  largest context sent: %s tokens = %.1f%% of the %s window%s"
               % (format(s["largest_request_tokens"], ","), s["largest_request_pct"],
                  format(report["context_length"], ","),
                  "" if s["largest_request_tokens"] <= report["context_length"] else "  OVER THE WINDOW"))
    out.append("  sequence validity: %s" % (
        "all %d requests valid" % s["requests"] if not s["invalid_requests"] else
        "%d INVALID, e.g. turn %d: %s" % (s["invalid_requests"], s["invalid_examples"][0]["turn"],
                                          "; ".join(s["invalid_examples"][0]["errors"]))))
    out.append("  archived: %d items (of %d tool results) in %s%s"
               % (s["archived_items"], s["tool_results"], report["store_dir"],
                  "" if report["store_kept"] else " (temporary; keep it with --store DIR)"))
    if r.get("tool_call_id"):
        out.append("  recall: tdai_read_cos(tool_call_id=%r) -> %s" % (r["tool_call_id"], (
            "%s chars, identical to the original %s result%s" % (
                format(r["chars"], ","), r["tool_name"] or "tool",
                "" if r.get("left_context") else " (it never left the context)")
            if r.get("ok") else "FAILED: %s" % r.get("reason", "text differs from the original"))))
    cal = s["calibration"]
    out.append("  calibration: provider tokens = %s x estimate + %s (%d observations)"
               % (cal["slope"], format(cal["overhead"], ","), cal["points"]))
    if report["mode"] == "gateway":
        out.append("  gateway: %d outbox rows delivered, %d waiting" % (s["delivered"], s["outbox_backlog"]))
    for w in s["warnings"]:
        out.append("  warning: %s" % w)
    for e in s["errors"][-3:]:
        out.append("  error: %s" % e)
    for p in s["problems"]:
        out.append("  PROBLEM: %s" % p)
    return "\n".join(out)
