"""Caching is said one way (issue 53 item 5). On Hermes 0.22 with a provider that reports no
cache, every usage carries ``cache_read_tokens: 0``: the report's summary read "0.0 % of the
prompt tokens of the 13 requests that reported it" under an empty cached-share chart with no
note, while status said "the provider reports no cached tokens". Nothing reported (no read or
write above 0): both say so in the same words, the page once, and the empty chart is left out."""

from __future__ import annotations

import time

from report_page import elements, figures

import helpers
from tencentdb_offload.common.cache_model import NOT_REPORTED
from tencentdb_offload.session.state import SessionStats
from tencentdb_offload.status.model import prompt_cache
from tencentdb_offload.status.render import prompt_cache_line


def _store(directory, usage):
    now, rows = time.time() - 100, []
    for i in range(13):
        rows.append((now + i, "conv", "request", dict(
            {"prompt_tokens": 20_000 + 2_000 * i, "context_length": 64_000,
             "threshold_tokens": 54_400}, **usage)))
    rows.append((now + 14, "conv", "compaction", {
        "route": "local", "level": "local", "tokens_before": 50_000, "tokens_after": 25_000,
        "target": 28_800, "archived": 4, "trigger": 54_400, "context_length": 64_000}))
    helpers.store_with_events(directory, rows)


def _page(tmp_path, usage):
    store, page = tmp_path / "store", tmp_path / "page.html"
    _store(store, usage)
    proc = helpers.run_cli(["report", "--store", str(store), "--out", str(page)],
                           env={"HERMES_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return page


def test_no_cache_reported_is_said_once_and_the_empty_chart_left_out(tmp_path):
    page = _page(tmp_path, {"cache_read_tokens": 0, "cache_write_tokens": 0})
    text = page.read_text(encoding="utf-8")
    assert figures(page)["cached_share"] == "", figures(page)
    assert "0.0%" not in text and "requests that reported it" not in text
    assert text.count(NOT_REPORTED) == 1, text
    assert "Cached share per request" not in text and not elements(page, "cache-chart")


def test_status_says_it_in_the_same_words():
    stats = SessionStats()
    stats._add_usage(30_000, {"cache_read_tokens": 0, "cache_write_tokens": 0}, False)
    line = prompt_cache_line(prompt_cache(stats.as_dict(), 300))
    assert NOT_REPORTED in line and "%" not in line.split(";")[0], line


def test_a_provider_that_reports_caching_keeps_its_chart_and_share(tmp_path):
    page = _page(tmp_path, {"cache_read_tokens": 10_000, "cache_write_tokens": 0})
    assert 0 < float(figures(page)["cached_share"]) < 1
    assert len(elements(page, "cached")) == 13 and len(elements(page, "cache-chart")) == 1
    assert NOT_REPORTED not in page.read_text(encoding="utf-8")
