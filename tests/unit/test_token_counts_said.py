"""Every token figure says which count it is (issue 53 item 4). A compaction's "before" is the
whole context when it ran, results not sent yet included, by the plugin's calibrated estimate:
"compacted locally: 74,885 → 25,015 tokens" in a 64,000-token window, and the report's arrows
starting above the red window line, read as requests over the window; only the demo explained
it. status, status --json, report (page and --json) and the demo now say it: compaction sizes
are estimated, request sizes the provider's own count."""

from __future__ import annotations

import html
import json
import re
import time

from report_page import elements, figures

import helpers
from tencentdb_offload.session.record import SIZES, Compaction
from tencentdb_offload.status.render import announce_line

BEFORE, AFTER, WINDOW = 74_885, 25_015, 64_000


def _store(directory):
    now = time.time() - 100
    rows = [(now + i, "conv", "request", {"prompt_tokens": 30_000 + 5_000 * i,
                                          "context_length": WINDOW, "threshold_tokens": 54_400})
            for i in range(6)]
    rows.append((now + 7, "conv", "compaction", {
        "route": "local", "level": "local", "tokens_before": BEFORE, "tokens_after": AFTER,
        "target": 28_800, "archived": 9, "trigger": 54_400, "context_length": WINDOW,
        "left": ["call_1"], "prefix_kept": 3_000, "cached_before": 55_000}))
    helpers.store_with_events(directory, rows)


def _listed(data, path):
    """The values at a ``token_counts`` field path (``a.b[].c``) of ``data``."""
    found = [data]
    for part in path.split("."):
        many = part.endswith("[]")
        found = [x.get(part[:-2] if many else part) for x in found if isinstance(x, dict)]
        if many:
            found = [y for x in found for y in (x or [])]
    return found


def test_status_names_the_count_of_every_token_figure(tmp_path):
    store = tmp_path / "store"
    _store(store)
    text = helpers.cli_stdout(tmp_path, "status", "--store", str(store))
    sized = [line for line in text.splitlines() if "%s → %s" % (format(BEFORE, ","), format(AFTER, ","))
             in line or "saved" in line]
    assert sized and all("estimated" in line for line in sized), sized
    assert text.count(SIZES) == 1, text
    data = json.loads(helpers.cli_stdout(tmp_path, "status", "--store", str(store), "--json"))
    counts = data["token_counts"]
    assert "compactions.recent[].tokens_before" in counts["estimated"]["fields"]
    for field in counts["estimated"]["fields"]:
        assert _listed(data, field), field          # each field named is one --json prints
    assert SIZES in counts["estimated"]["means"]


def test_the_report_names_the_count_of_every_token_figure(tmp_path):
    store, page = tmp_path / "store", tmp_path / "p.html"
    _store(store)
    data = json.loads(helpers.cli_stdout(tmp_path, "report", "--store", str(store), "--out", str(page), "--json"))
    text = page.read_text(encoding="utf-8")
    assert html.escape(SIZES, quote=True) in text
    assert all(b["data-count"] == "provider" for b in elements(page, "request"))
    (arrow,) = elements(page, "compaction")
    assert arrow["data-count"] == "estimated" and int(arrow["data-before"]) > WINDOW
    assert "estimated tokens before" in text
    cells = dict(re.findall(r'data-name="(\w+)" data-value="[^"]*">([^<]*)<', text))
    assert "(estimated)" in cells["tokens_saved"], cells
    assert "the provider's count" in cells["largest_request_tokens"], cells
    counts = data["token_counts"]
    assert "requests[].prompt_tokens" in counts["provider"]["fields"]
    assert "compactions[].tokens_before" in counts["estimated"]["fields"]
    for field in counts["estimated"]["fields"] + counts["provider"]["fields"]:
        assert _listed(data, field), field
    assert figures(page)["tokens_saved"] == str(BEFORE - AFTER)


def test_the_demo_and_the_start_of_a_compaction_say_it_too(tmp_path):
    text = helpers.cli_stdout(tmp_path, "demo", "--turns", "12", "--context-length", "64000")
    assert "compactions (%s" % SIZES in text
    assert "tokens saved (estimated)" in text and "the provider's count" in text
    last = Compaction.from_json({"route": "local", "tokens_before": BEFORE, "tokens_after": AFTER,
                                 "target": 28_800, "archived": 9})
    line = announce_line(80_000, 28_800, False, last)
    assert "(Hermes' estimate)" in line and "%s tokens (estimated" % format(AFTER, ",") in line, line
