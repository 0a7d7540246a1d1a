"""``report``: the page of a conversation holds the figures ``demo --json`` and ``status --json``
print (read from the page's data-* attributes), escapes what the store holds, and fails (or
says "nothing recorded yet") in one line."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from report_page import demo_store, elements, figures, json_of, run_cli

from tencentdb_offload.archive import browse
from tencentdb_offload.archive.store import Store


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    return demo_store(tmp_path_factory.mktemp("report"))


def test_page_holds_the_figures_demo_and_status_print(kept):
    demo, page = kept["demo"], kept["page"]
    status = json_of(run_cli("status", "--store", str(kept["store"]), "--json", home=kept["home"]))
    row = next(r for r in status["sessions"] if r["session"] == demo["conversation"])
    fig, s = figures(page), demo["summary"]
    bars = elements(page, "request")
    assert s["compactions"] >= 2, "the demo must compact for this test to mean anything"
    assert len(bars) == int(fig["requests"]) == s["requests"]
    assert max(int(b["data-tokens"]) for b in bars) == int(fig["largest_request_tokens"]) \
        == s["largest_request_tokens"]
    assert int(fig["context_length"]) == demo["context_length"]
    assert int(fig["threshold_tokens"]) == demo["threshold_tokens"]
    assert int(fig["tokens_saved"]) == s["tokens_saved"] == row["tokens_saved"]
    assert int(fig["compactions"]) == row["compactions"] == s["compactions"]
    assert int(fig["archived_items"]) == row["archived_items"] == s["archived_items"]
    marks = elements(page, "compaction")
    assert [(int(m["data-before"]), int(m["data-after"]), m["data-level"]) for m in marks] == \
        [(c["tokens_before"], c["tokens_after"], c["level"]) for c in demo["compactions"]]
    # each mark sits after the requests sent before it, in order
    after = [int(m["data-after-request"]) for m in marks]
    assert after == sorted(after) and 0 < after[0] and after[-1] <= len(bars)


def test_what_left_reads_back_by_the_keys_shown(kept):
    page, conv = kept["page"], kept["demo"]["conversation"]
    lists = elements(page, "left")
    assert len(lists) == len(kept["demo"]["compactions"])
    text = page.read_text(encoding="utf-8")
    keys = re.findall(r'<code class="left-key">([^<]+)</code>', text)
    assert keys and 'tdai_read_cos(key="%s")' % keys[0] in text
    conn = browse.open_readonly(kept["store"])
    try:
        unreadable = [k for k in keys if not browse.find(conn, html.unescape(k), conv)]
    finally:
        conn.close()
    assert unreadable == []
    shown = run_cli("archive", "--store", str(kept["store"]), "show", keys[0], home=kept["home"])
    assert shown.returncode == 0 and keys[0] in shown.stdout, shown.stderr


def test_page_is_self_contained(kept):
    text = kept["page"].read_text(encoding="utf-8")
    assert "<script" not in text.lower()
    assert set(re.findall(r"https?://[^\"' ]+", text)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"\b(src|href)=", text)


def test_named_conversation_and_default_are_the_same_page(kept, tmp_path):
    named = tmp_path / "named.html"
    proc = run_cli("report", kept["demo"]["conversation"], "--store", str(kept["store"]),
                   "--out", str(named), "--json", home=kept["home"])
    assert json_of(proc)["conversation"] == kept["demo"]["conversation"]
    assert figures(named) == figures(kept["page"])


def _hostile_store(directory: Path) -> str:
    Store(directory).close()
    evil = '<script>alert(1)</script>"\x1b[2J\u202e'
    conn = sqlite3.connect(str(directory / "store.db"))
    now = time.time()
    rows = [(now, evil, "request", {"prompt_tokens": 1000, "context_length": 64000,
                                    "threshold_tokens": 54400, "cache_read_tokens": 500}),
            (now + 1, evil, "request", {"prompt_tokens": 60000, "context_length": 64000,
                                        "threshold_tokens": 54400}),
            (now + 2, evil, "compaction", {"route": "gateway", "level": "<b>mild</b>",
                                           "tokens_before": 60000, "tokens_after": 30000,
                                           "archived": 1, "error": "<img src=x onerror=alert(2)>",
                                           "left": ["</code><script>alert(3)</script>"]})]
    conn.executemany("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)",
                     [(ts, s, k, json.dumps(d)) for ts, s, k, d in rows])
    conn.commit()
    conn.close()
    return evil


def test_store_text_is_escaped_and_cache_share_only_where_reported(tmp_path):
    store = tmp_path / "store"
    _hostile_store(store)
    page = tmp_path / "p.html"
    proc = run_cli("report", "--store", str(store), "--out", str(page), home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "<img" not in text and "<b>" not in text
    assert "\x1b" not in text and "\u202e" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in text
    shares = elements(page, "cached")
    assert [(s["data-n"], float(s["data-share"])) for s in shares] == [("1", 0.5)]
    assert len(elements(page, "request")) == 2


def test_no_store_is_nothing_yet_like_status(tmp_path):
    page = tmp_path / "p.html"
    proc = run_cli("report", "--store", str(tmp_path / "none"), "--out", str(page), home=tmp_path)
    status = run_cli("status", "--store", str(tmp_path / "none"), home=tmp_path)
    assert proc.returncode == status.returncode == 0, proc.stderr
    assert "nothing recorded yet" in proc.stdout and not page.exists()


def test_unknown_conversation_fails_in_one_line(kept, tmp_path):
    proc = run_cli("report", "no-such-conversation", "--store", str(kept["store"]),
                   "--out", str(tmp_path / "p.html"), home=kept["home"])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no conversation 'no-such-conversation'" in lines[0]
    assert kept["demo"]["conversation"] in lines[0]      # it names what there is
    assert not (tmp_path / "p.html").exists()


def test_unwritable_out_fails_in_one_line(kept, tmp_path):
    proc = run_cli("report", "--store", str(kept["store"]), "--out",
                   str(tmp_path / "missing" / "p.html"), home=kept["home"])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0]


def test_a_store_of_0_1_0_shows_no_zero_target_or_trigger(tmp_path):
    """0.1.0 recorded a compaction without target or trigger, and no requests (row as 0.1.0's
    demo wrote it): status and the page read '(target 0)' and 'compaction trigger 0 tokens'."""
    store = tmp_path / "store"
    Store(store).close()
    row = {"path": "local", "level": "local", "tokens_before": 109326, "tokens_after": 38152,
           "report": {}, "archived": 32, "error": "", "canvas_removed": 0, "at": time.time(),
           "ms": 1.4, "context_length": 128000}
    conn = sqlite3.connect(str(store / "store.db"))
    conn.execute("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)",
                 (time.time(), "old-conv", "compaction", json.dumps(row)))
    conn.commit()
    conn.close()
    page = tmp_path / "p.html"
    proc = run_cli("report", "--store", str(store), "--out", str(page), home=tmp_path)
    status = run_cli("status", "--store", str(store), home=tmp_path)
    assert proc.returncode == status.returncode == 0, proc.stderr + status.stderr
    assert "109,326 → 38,152 tokens (estimated), 32 items archived" in status.stdout, status.stdout
    text = page.read_text(encoding="utf-8")
    assert "target 0" not in text and "(0)" not in text and "not recorded" in text
    assert figures(page)["threshold_tokens"] == "0"


def test_a_store_path_with_a_byte_that_is_not_utf8(tmp_path):
    """A HERMES_HOME or --store folder with a latin-1 byte in its name: status printed it with
    '?', report crashed ('internal error: UnicodeEncodeError') writing the page."""
    import os
    store = tmp_path / os.fsdecode(b"caf\xe9 store")
    _hostile_store(store)
    page = tmp_path / "p.html"
    proc = run_cli("report", "--store", str(store), "--out", str(page), home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "caf? store" in page.read_text(encoding="utf-8")
