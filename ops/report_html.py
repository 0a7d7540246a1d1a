"""``report``'s page: one self-contained HTML file (inline SVG, no script, no network) of a conversation.

Every figure is also an attribute of the element that draws it (``data-tokens`` on a request's
bar, ``data-before``/``data-after``/``data-level`` on a compaction's mark, ``data-*`` on the
summary), so a test or a script reads exactly what a person sees. Everything that came from
the store or a peer goes through ``esc``: control characters dropped, HTML escaped.
"""

from __future__ import annotations

import html
import time
from typing import Any, Dict, List, Tuple

from ..common import cache_model
from ..common.humanize import count, kilo, plural, printable
from ..session.record import SIZES

WIDTH, LEFT, RIGHT, TOP = 1000, 70, 20, 40
MAIN_H, CACHE_H, BOTTOM = 360, 110, 34
LABELLED = 24               # compaction marks labelled on the chart (more: tooltips only)
SHOWN_KEYS = 40             # keys listed per compaction; the rest are one `archive list` away

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
table{border-collapse:collapse;margin-top:6px}td,th{border:1px solid #ccd;padding:4px 8px;
vertical-align:top;text-align:left}th{background:#eef1f7}code{font-size:12px;background:#f3f4f8;
padding:0 3px}.num{text-align:right;white-space:nowrap}.muted{color:#667}
svg{display:block;margin-top:6px}svg text{font:11px system-ui,sans-serif;fill:#333}"""


def esc(value: Any, limit: int = 300) -> str:
    """Store or peer text made safe for the page: no control characters, HTML escaped, UTF-8
    (a path's undecodable byte, a lone surrogate: '?', as status prints it)."""
    text = printable(value, limit, newlines=False).encode("utf-8", "replace").decode("utf-8")
    return html.escape(text, quote=True)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else "unknown time"


class Scale:
    """Request number → x, tokens → y, for a panel ``height`` tall whose top is at ``top``."""

    def __init__(self, requests: int, top_tokens: int, top: int, height: int) -> None:
        self.step = (WIDTH - LEFT - RIGHT) / float(max(1, requests))
        self.top_tokens = max(1, top_tokens)
        self.top, self.height = top, height

    def x(self, position: float) -> float:
        """Left edge of the slot of request ``position + 1``."""
        return round(LEFT + position * self.step, 2)

    def y(self, tokens: float) -> float:
        return round(self.top + self.height * (1 - min(tokens, self.top_tokens) / self.top_tokens), 2)


def _ticks(top: int) -> List[int]:
    raw = top / 4.0
    unit = 10 ** max(0, len(str(int(raw))) - 1)
    step = max(1, int(round(raw / unit)) * unit)
    return list(range(0, top + 1, step))


def _axes(sc: Scale, n_requests: int) -> List[str]:
    out = ['<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#99a"/>'
           % (LEFT, sc.y(0), WIDTH - RIGHT, sc.y(0))]
    for tick in _ticks(sc.top_tokens):
        y = sc.y(tick)
        out.append('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#e4e6ee"/>'
                   '<text x="%d" y="%s" text-anchor="end">%s</text>'
                   % (LEFT, y, WIDTH - RIGHT, y, LEFT - 6, y + 4, kilo(tick)))
    every = max(1, n_requests // 10)
    for n in range(1, n_requests + 1, every):
        out.append('<text x="%s" y="%s" text-anchor="middle">%d</text>'
                   % (sc.x(n - 0.5), sc.y(0) + 16, n))
    out.append('<text x="%d" y="%s" text-anchor="end">request →</text>'
               % (WIDTH - RIGHT, sc.y(0) + 30))
    return out


def _limit_line(sc: Scale, requests: List[Dict[str, Any]], field: str, css: str, name: str) -> str:
    points = []
    for r in requests:
        if r[field]:
            points += ["%s,%s" % (sc.x(r["n"] - 1), sc.y(r[field])),
                       "%s,%s" % (sc.x(r["last"]), sc.y(r[field]))]
    if not points:
        return ""
    last = requests[-1][field]
    return ('<polyline class="%s" data-tokens="%d" points="%s" fill="none" %s><title>%s %s tokens'
            '</title></polyline><text x="%d" y="%s" text-anchor="end">%s %s</text>'
            % (name, last, " ".join(points), css, name, count(last), WIDTH - RIGHT - 2,
               sc.y(last) - 4, name, kilo(last)))


def _slot(sc: Scale, r: Dict[str, Any]) -> Tuple[float, float]:
    """(x, width) of the bar of requests ``n`` to ``last``."""
    span = sc.step * (r["last"] - r["n"] + 1)
    width = max(0.6, span * 0.8)
    return round(sc.x(r["n"] - 1) + (span - width) / 2, 2), round(width, 2)


def _which(r: Dict[str, Any]) -> str:
    if r["last"] == r["n"]:
        return "request %d, %s" % (r["n"], _when(r["ts"]))
    return "requests %d–%d, %s to %s, the largest" % (r["n"], r["last"], _when(r["ts"]),
                                                      _when(r["ts_last"]))


def _request_bars(sc: Scale, requests: List[Dict[str, Any]]) -> List[str]:
    out = []
    for r in requests:
        x, width = _slot(sc, r)
        y = sc.y(r["prompt_tokens"])
        cached = "" if r["cached_share"] is None else ' data-cached="%s"' % r["cached_share"]
        out.append('<rect class="request" data-n="%d" data-last="%d" data-tokens="%d" '
                   'data-count="provider"%s x="%s" y="%s" width="%s" height="%s" fill="%s"><title>'
                   '%s: %s tokens (the provider\'s count)</title></rect>'
                   % (r["n"], r["last"], r["prompt_tokens"], cached, x, y, width,
                      round(sc.y(0) - y, 2), "#e8913a" if r["over"] else "#4a78c2", _which(r),
                      count(r["prompt_tokens"])))
    return out


def _compaction_marks(sc: Scale, compactions: List[Dict[str, Any]]) -> List[str]:
    out = []
    labelled = len(compactions) <= LABELLED      # more would overlap: their tooltips name them
    for c in compactions:
        if c["reason"] == "adopted":    # the cut's own arrow shows it
            continue
        x = sc.x(c["after_request"])
        label_y = TOP - 26 + 12 * (c["n"] % 2)
        out.append(
            '<g class="compaction" data-n="%d" data-level="%s" data-route="%s" data-before="%d" '
            'data-after="%d" data-count="estimated" data-after-request="%d"><title>compaction '
            '%d: %s</title>'
            '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#7a3fb0" stroke-dasharray="3 3"/>'
            '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#7a3fb0" stroke-width="2.5" '
            'marker-end="url(#down)"/>%s</g>'
            % (c["n"], esc(c["level"], 40), esc(c["route"], 40), c["tokens_before"],
               c["tokens_after"], c["after_request"], c["n"], esc(c["describe"]),
               x, TOP, x, sc.y(0), x, sc.y(c["tokens_before"]), x, sc.y(c["tokens_after"]),
               '<text x="%s" y="%s" text-anchor="middle" fill="#7a3fb0">#%d %s %s→%s</text>'
               % (x, label_y, c["n"], esc(c["level"], 40), kilo(c["tokens_before"]),
                  kilo(c["tokens_after"])) if labelled else ""))
    return out


def main_chart(fig: Dict[str, Any]) -> str:
    requests, compactions = fig["requests"], fig["compactions"]
    total = fig["summary"]["requests"]
    sc = Scale(total, int(fig["top_tokens"] * 1.05), TOP, MAIN_H)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" role="img" class="context-chart" '
             'width="%d" height="%d" viewBox="0 0 %d %d"><defs><marker id="down" markerWidth="8" '
             'markerHeight="8" refX="8" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" '
             'fill="#7a3fb0"/></marker></defs>' % (WIDTH, TOP + MAIN_H + BOTTOM, WIDTH,
                                                   TOP + MAIN_H + BOTTOM)]
    parts += _axes(sc, total) + _request_bars(sc, requests)
    parts.append(_limit_line(sc, requests, "context_length", 'stroke="#c0392b" stroke-width="2"',
                             "window"))
    parts.append(_limit_line(sc, requests, "threshold_tokens", 'stroke="#e8913a" stroke-width="2" '
                             'stroke-dasharray="6 4"', "trigger"))
    parts += _compaction_marks(sc, compactions)
    return "".join(parts) + "</svg>"


def cache_chart(fig: Dict[str, Any]) -> str:
    """The cached share of each request, under its heading; nothing where no request reported
    caching (the summary says so, once)."""
    requests = fig["requests"]
    if not any(r["cached_share"] is not None for r in requests):
        return ""
    sc = Scale(fig["summary"]["requests"], 100, 16, CACHE_H)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" role="img" class="cache-chart" width="%d" '
             'height="%d" viewBox="0 0 %d %d">' % (WIDTH, CACHE_H + 16 + BOTTOM, WIDTH,
                                                   CACHE_H + 16 + BOTTOM)]
    for tick in (0, 50, 100):
        parts.append('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#e4e6ee"/><text x="%d" y="%s" '
                     'text-anchor="end">%d%%</text>' % (LEFT, sc.y(tick), WIDTH - RIGHT, sc.y(tick),
                                                      LEFT - 6, sc.y(tick) + 4, tick))
    for r in requests:
        if r["cached_share"] is None:
            continue
        x, width = _slot(sc, r)
        y = sc.y(100 * r["cached_share"])
        parts.append('<rect class="cached" data-n="%d" data-last="%d" data-share="%s" x="%s" '
                     'y="%s" width="%s" height="%s" fill="#2e9e6a"><title>%s: %.0f%% cached'
                     '</title></rect>'
                     % (r["n"], r["last"], r["cached_share"], x, y, width, round(sc.y(0) - y, 2),
                        _which(r).replace(", the largest", ""), 100 * r["cached_share"]))
    return "<h2>Cached share per request</h2>" + "".join(parts) + "</svg>"


def _summary(fig: Dict[str, Any]) -> str:
    s = fig["summary"]
    levels = ", ".join("%s %d" % (esc(k, 40), v) for k, v in sorted(s["levels"].items())) or "none"
    pct = "" if s["largest_request_pct"] is None else " = %.1f%% of the window" % s["largest_request_pct"]
    cached = ("%s (a Hermes that passes the provider's cached count on shows them, where the "
              "provider counts them)"
              % cache_model.NOT_REPORTED if s["cached_share"] is None else
              "%.1f%% of the prompt tokens of the %s that reported it"
              % (100 * s["cached_share"], plural(s["cache_reported_requests"], "request")))
    rows = [("requests", "requests", count(s["requests"])),
            ("window", "context_length", "%s tokens" % count(s["context_length"])),
            ("compaction trigger", "threshold_tokens", "%s tokens" % count(s["threshold_tokens"])
             if s["threshold_tokens"] else "not recorded"),
            ("largest request", "largest_request_tokens",
             "%s tokens (the provider's count)%s" % (count(s["largest_request_tokens"]), pct)),
            ("compactions", "compactions", "%s (levels: %s)" % (count(s["compactions"]), levels)),
            ("tokens saved", "tokens_saved", "%s (estimated)" % count(s["tokens_saved"])),
            ("items archived", "archived_items", count(s["archived_items"])),
            ("texts with secrets masked before the Gateway", "texts_masked", count(s["texts_masked"])),
            ("cached", "cached_share", cached)]
    values = dict(s)
    c = s["cache_cost"]
    if c["priced"]:
        values.update(cache_written=c["written"], cache_cost=c["cost"])
        rows[6:6] = [
            ("compactions' cache writes", "cache_written",
             "~%s tokens (estimated: what the request after each wrote); ~%s with no compaction "
             "where the window held the context (%s of %s)%s"
             % (count(c["written"]), count(c["written_without"]), count(c["fitted"]),
                count(c["priced"]), "" if c["priced"] >= s["compactions"] else
                "; figures for %s of %s compactions (older records have none)"
                % (count(c["priced"]), count(s["compactions"])))),
            ("their cost, cache model (%s)" % cache_model.MODEL, "cache_cost",
             "%s units for the requests after them; %s without"
             % (count(c["cost"]), count(c["cost_without"])))]
    body = "".join('<tr><th>%s</th><td class="figure" data-name="%s" data-value="%s">%s</td></tr>'
                   % (label, name, "" if values[name] is None else values[name], text)
                   for label, name, text in rows)
    return '<table class="summary">%s</table>' % body


def _left_cell(c: Dict[str, Any], conversation: str, cut: int = 0) -> str:
    """What left at ``c``; an adopted one's left with the request cut it took (``cut``:
    that cut's number, 0 when it is not listed)."""
    keys = c["left"]
    if c["reason"] == "adopted":
        return ('<span class="muted">nothing more left: what left is listed with the cut made '
                'for one request%s, and counted there</span>' % (" (#%d)" % cut if cut else ""))
    if not keys:
        return ('<span class="muted">%s; keys not recorded for this compaction (an older '
                'version wrote it): <code>archive list --session %s</code></span>'
                % (plural(c["archived"], "item"), esc(conversation)))
    shown = " ".join('<code class="left-key">%s</code>' % esc(k) for k in keys[:SHOWN_KEYS])
    more = len(keys) - SHOWN_KEYS
    rest = (' <span class="muted">and %s more: <code>archive list --session %s</code></span>'
            % (count(more), esc(conversation)) if more > 0 else "")
    return ('<p class="left" data-left="%d">%s%s</p>Read one back: the model calls '
            '<code>tdai_read_cos(key="%s")</code>; you run <code>python3 &lt;plugin dir&gt; '
            'archive show %s</code>' % (len(keys), shown, rest, esc(keys[0]), esc(keys[0])))


def _cache_cell(c: Dict[str, Any]) -> str:
    """What one compaction cost the prompt cache (``Compaction.cache_break``), estimated."""
    brk = c["cache"]
    if brk is None:
        return ('<span class="muted">%s</span>' % ("counted with the cut" if c["reason"] == "adopted"
                                                 else "not recorded (an older version)"))
    without = ("writes %s, costs %s (so far %s)" % (count(brk["written_without"]),
                                                  count(brk["cost_without"]),
                                                  count(brk["cumulative_cost_without"]))
               if brk["cost_without"] is not None else "not an option: over the window")
    return ('<span class="cache-break" data-written="%d" data-invalidated="%d" data-cost="%s" '
            'data-cumulative-cost="%s" data-cost-without="%s" data-cumulative-cost-without="%s">'
            'writes %s tokens, drops %s cached; costs %s units (so far %s)<br><span '
            'class="muted">no compaction: %s</span></span>'
            % (brk["written"], brk["invalidated"], brk["cost"], brk["cumulative_cost"],
               "" if brk["cost_without"] is None else brk["cost_without"],
               brk["cumulative_cost_without"], count(brk["written"]), count(brk["invalidated"]),
               count(brk["cost"]), count(brk["cumulative_cost"]), without))


def compaction_table(fig: Dict[str, Any]) -> str:
    if not fig["compactions"]:
        return '<p class="muted">No compaction yet in this conversation.</p>'
    head = ("<tr><th>#</th><th>when</th><th>after request</th><th>how</th>"
            "<th>estimated tokens before → after (target)</th><th>saved</th><th>prompt cache: the "
            "request after it (estimated tokens; cost under the cache model, %s)</th><th>what "
            "left, and how to read it back</th></tr>" % cache_model.MODEL)
    rows, cut = [], 0
    for c in fig["compactions"]:
        cut = c["n"] if c["reason"] == "request" else cut
        rows.append('<tr class="compaction-row" data-n="%d"><td class="num">%d</td><td>%s</td>'
                    '<td class="num">%d</td><td>%s</td><td class="num">%s → %s (%s)</td>'
                    '<td class="num">%s</td><td>%s</td><td>%s</td></tr>'
                    % (c["n"], c["n"], _when(c["ts"]), c["after_request"], esc(c["describe"], 400),
                       count(c["tokens_before"]), count(c["tokens_after"]), count(c["target"]) if c["target"] else "–",
                       count(c["saved"]), _cache_cell(c), _left_cell(c, fig["conversation"], cut)))
    return '<table class="compactions">%s%s</table>%s' % (head, "".join(rows), _not_listed(fig))


def _not_listed(fig: Dict[str, Any]) -> str:
    """The line that says how many compactions the page leaves out, and where they all are."""
    more = fig["compactions_not_listed"]
    if not more:
        return ""
    every = more + len(fig["compactions"])
    return ('<p class="muted not-listed" data-not-listed="%d">Listed and drawn: the %s of %s '
            'compactions that saved the most tokens, in order; %s more are not. Every compaction, '
            'newest first: <code>python3 &lt;plugin dir&gt; status --recent %d</code> (add '
            '<code>--json</code> for the keys that left at each).</p>'
            % (more, count(len(fig["compactions"])), count(every), count(more), every))


def _bars_note(fig: Dict[str, Any]) -> str:
    per = fig["requests_per_bar"]
    if per <= 1:
        return ""
    return ('<p class="muted bars-note" data-per-bar="%d">%s requests: each bar is the largest of '
            'up to %s consecutive requests (its tooltip names them); the cached share, their '
            'share together.</p>' % (per, count(fig["summary"]["requests"]), count(per)))


def render_page(fig: Dict[str, Any]) -> str:
    """The whole page for ``report_data.figures``' result."""
    conv = esc(fig["conversation"])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>tencentdb-offload report: %s</title><style>%s</style></head><body>"
            "<h1>Conversation <code>%s</code></h1><p class=\"muted\">tencentdb-offload report from "
            "the store %s, written %s. Token figures: %s.</p>%s<h2>Context size of every "
            "request</h2><p class=\"muted\">Bars: each request, the provider's count (orange: at "
            "or over the trigger). Red line: the window; dashed orange: the compaction trigger; "
            "purple arrows: each compaction, from its estimated size before to after (it can "
            "start above a bar, even above the window: the context when it ran held results not "
            "sent yet).</p>%s%s%s<h2>Compactions: what left the context</h2>"
            "%s</body></html>\n"
            % (conv, STYLE, conv, esc(fig["store_dir"]), _when(time.time()), esc(SIZES, 600),
               _summary(fig),
               _bars_note(fig), main_chart(fig), cache_chart(fig), compaction_table(fig)))
