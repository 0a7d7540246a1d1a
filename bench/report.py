"""Write the results: latest.json, a markdown table (latest.md) and an SVG chart (latest.svg)."""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any, Dict, List, Optional


def fmt(v: Optional[float], unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if unit == "µs" and v >= 1000:
        return "%.2f ms" % (v / 1000)
    if abs(v) >= 1000:
        s = "{:,.0f}".format(v)
    elif abs(v) >= 100:
        s = "%.0f" % v
    elif abs(v) >= 10:
        s = "%.1f" % v
    else:
        s = "%.2f" % v
    return s + (" " + unit if unit else "")


def met_mark(m: Optional[bool]) -> str:
    return "–" if m is None else ("yes" if m else "**no**")


def targets_line(rows: List[Dict[str, Any]]) -> str:
    """Targets met, counted the one way every summary counts them: rows with a target."""
    targeted = [r for r in rows if r.get("met") is not None]
    missed = [r["id"] for r in targeted if r["met"] is False]
    return "%d of %d figures with a target met it (%d without a target)%s" % (
        len(targeted) - len(missed), len(targeted), len(rows) - len(targeted),
        ("; missed: " + ", ".join(missed)) if missed else "")


def markdown(results: Dict[str, Any]) -> str:
    m = results["machine"]
    lines = ["| what | case | median | p99 | floor (what) | ratio | target | met? |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        unit = r["unit"]
        ratio = "–" if r.get("ratio") is None else "%.2f×" % r["ratio"]
        floor = "–" if r.get("floor") is None else "%s (%s)" % (fmt(r["floor"], unit), r["floor_what"])
        p99 = fmt(r.get("p99"), unit)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["what"], r["case"], fmt(r["median"], unit), p99, floor, ratio, r["target"],
            met_mark(r["met"])))
    notes = [r for r in results["rows"] if r.get("note")]
    out = ["Run %s (%s mode, %.0f s) on %s, %s cores, %s RAM, Python %s; load average "
           "%s at start, %s at end." % (results["started"], results["mode"], results["seconds"],
                                        m["cpu"], m["cores"], m["memory"], m["python"],
                                        results.get("load_start", "?"), results.get("load_end", "?")),
           "", "\n".join(lines), "", "Notes:", ""]
    out += ["- **%s — %s**: %s" % (r["what"], r["case"], r["note"]) for r in notes]
    if results.get("skipped"):
        out += ["", "Skipped:", ""] + ["- %s" % s for s in results["skipped"]]
    return "\n".join(out) + "\n"


# -- SVG ----------------------------------------------------------------------------------

def _bar_value(r: Dict[str, Any]) -> Optional[tuple]:
    """(median, p99) as a fraction of the row's target (1.0 = at the target), or None."""
    t = r["target"]
    if r["unit"] in ("µs",) and "< 1 ms" in t:
        return r["median"] / 1000, (r["p99"] or r["median"]) / 1000
    if r["what"] == "pre_llm_call hook":
        return r["median"] / 2000, (r["p99"] or r["median"]) / 2000
    if r["unit"] == "µs" and "10 µs" in t:
        return r["median"] / 10, (r["p99"] or r["median"]) / 10
    if "floor + 1 ms" in t and r.get("floor") is not None:
        return r["median"] / (r["floor"] + 1000), (r["p99"] or r["median"]) / (r["floor"] + 1000)
    if "< 50 ms" in t:
        return r["median"] / 50, (r["p99"] or r["median"]) / 50
    if "3× floor" in t and r.get("floor"):
        return r["median"] / r["floor"] / 3, (r["p99"] or r["median"]) / r["floor"] / 3
    if "2× floor" in t and r.get("floor"):
        return r["median"] / r["floor"] / 2, (r["p99"] or r["median"]) / r["floor"] / 2
    if r["unit"] == "pairs/s":
        return 2000 / r["median"], 2000 / max(1e-9, r["p99"] or r["median"])
    if r["unit"] == "%":
        spread = max(abs(r.get("p10", 0)), abs(r.get("p90", 0)))
        return max(1e-3, abs(r["median"]) / 10), max(1e-3, spread / 10)
    if r["id"] == "memory/rss" and r.get("floor"):
        limit = max(8.0, 0.05 * r["floor"])        # MB of growth allowed after warm-up
        return max(1e-3, (r["median"] - r["floor"]) / limit), max(1e-3, (r["p99"] - r["floor"]) / limit)
    if r.get("allowed") and r.get("floor") is not None:      # growth after warm-up ÷ allowance
        v = max(1e-3, (r["median"] - r["floor"]) / r["allowed"])
        return v, v
    if r["id"] == "memory/archive" and r.get("ratio"):
        return r["ratio"] / 1.5, r["ratio"] / 1.5
    return None


def svg(results: Dict[str, Any]) -> str:
    rows = [(r, _bar_value(r)) for r in results["rows"]]
    rows = [(r, v) for r, v in rows if v is not None]
    W, left, right = 1060, 420, 40
    bar_h, gap = 13, 5
    top = 75
    h1 = top + len(rows) * (bar_h + gap) + 40
    comp = results.get("series", {})
    h2 = 300 if comp.get("compress_local") else 0
    H = h1 + h2 + 20
    lo, hi = 0.001, 100.0
    plot_w = W - left - right

    def x(v: float) -> float:
        v = min(hi, max(lo, v))
        return left + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * plot_w

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="Helvetica,Arial,sans-serif" font-size="11">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="20" font-size="15" font-weight="bold">tencentdb-offload benchmarks — '
         'cost as a fraction of its target (log scale; left of the red line = target met)</text>',
         '<text x="10" y="38" fill="#555">bar = median, tick = p99. Throughput: target ÷ rate. '
         'Token estimate: |median error| ÷ 10 %% (tick: p10/p90 spread). Memory: growth ÷ '
         'allowance, archive ratio ÷ 1.5.</text>',
         '<text x="10" y="53" fill="#555">%s, %s cores, Python %s, %s run, %s</text>' % (
             escape(results["machine"]["cpu"]), results["machine"]["cores"],
             results["machine"]["python"], results["mode"], escape(results["started"]))]
    for v in (0.001, 0.01, 0.1, 1, 10, 100):
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="%s"/>' % (
            x(v), top - 8, x(v), h1 - 30, "#d00" if v == 1 else "#ddd", 2 if v == 1 else 1))
        o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s×</text>' % (
            x(v), h1 - 16, ("%g" % v)))
    y = top
    for r, (med, p99) in rows:
        ok = r["met"]
        color = "#4a8" if ok else ("#d55" if ok is False else "#999")
        label = "%s — %s" % (r["what"].replace(" (client side)", " (client)"), r["case"])
        label = label.replace(", after the first failure", "").replace(" messages", " msgs")
        if len(label) > 70:
            label = label[:69] + "…"
        o.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 6, y + bar_h - 3, escape(label)))
        o.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (
            left, y, max(1.0, x(med) - left), bar_h, color))
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#222" stroke-width="2"/>' % (
            x(p99), y - 1, x(p99), y + bar_h + 1))
        y += bar_h + gap
    if h2:
        o += _compress_panel(comp, h1 + 10, W)
    o.append("</svg>")
    return "\n".join(o) + "\n"


def _compress_panel(comp: Dict[str, List[Dict[str, Any]]], y0: int, W: int) -> List[str]:
    left, right, h = 90, 200, 230
    top = y0 + 30
    local = comp.get("compress_local") or []
    gw = comp.get("compress_gateway") or []
    pts = [p for s in (local, gw) for p in s]
    xs = [p["mb"] for p in pts]
    ys = [v for p in pts for v in (p["median_ms"], p["floor_ms"])] + [p.get("total_ms", 1) for p in gw]
    x_lo, x_hi = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
    y_lo, y_hi = 10 ** math.floor(math.log10(max(0.01, min(ys)))), 10 ** math.ceil(math.log10(max(ys)))
    pw = W - left - right

    def X(v):
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * pw

    def Y(v):
        return top + h - (math.log10(max(v, y_lo)) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * h

    o = ['<text x="10" y="%d" font-size="14" font-weight="bold">compress() time vs conversation '
         'size (log–log) with the json.dumps + json.loads floor</text>' % (y0 + 14),
         '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (left, top, pw, h)]
    v = x_lo
    while v <= x_hi * 1.001:
        o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%g MB</text>' % (X(v), top + h + 15, v))
        v *= 10
    v = y_lo
    while v <= y_hi * 1.001:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (left, Y(v), left + pw, Y(v)))
        o.append('<text x="%d" y="%.1f" text-anchor="end" fill="#555">%g ms</text>' % (left - 5, Y(v) + 4, v))
        v *= 10
    series = [("floor: json.dumps+loads", "#888", "6,4", [(p["mb"], p["floor_ms"]) for p in local]),
              ("local compress()", "#27c", "", [(p["mb"], p["median_ms"]) for p in local]),
              ("via Gateway, client side", "#e80", "", [(p["mb"], p["median_ms"]) for p in gw]),
              ("via Gateway, total", "#e80", "2,3", [(p["mb"], p["total_ms"]) for p in gw])]
    ly = top + 10
    for name, color, dash, data in series:
        if not data:
            continue
        path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", X(a), Y(b)) for i, (a, b) in enumerate(data))
        o.append('<path d="%s" fill="none" stroke="%s" stroke-width="2" %s/>' % (
            path, color, 'stroke-dasharray="%s"' % dash if dash else ""))
        for a, b in data:
            o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (X(a), Y(b), color))
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" %s/>' % (
            left + pw + 10, ly, left + pw + 30, ly, color, 'stroke-dasharray="%s"' % dash if dash else ""))
        o.append('<text x="%d" y="%d">%s</text>' % (left + pw + 35, ly + 4, escape(name)))
        ly += 18
    return o


def write(results: Dict[str, Any], out_dir: Path, stem: str = "latest") -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in ((stem + ".json", json.dumps(results, indent=1, default=str)),
                       (stem + ".md", markdown(results)), (stem + ".svg", svg(results))):
        tmp = out_dir / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out_dir / name)
