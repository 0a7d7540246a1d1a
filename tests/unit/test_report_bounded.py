"""``report`` of a long-lived conversation stays a page a browser opens (issue 51 item 8):
50,000 requests and 2,500 compactions gave a 29.5 MB page at a 285 MB peak (one SVG bar per
request, drawn twice; a table row per compaction; every event held). The page is now at most
10 MB and the command's peak memory at most 256 MB at that size (docs/limits.md): requests are
drawn in at most 500 bars (each the largest of its requests), the compactions that saved the
most are listed, and the page says how many more there are and where to see them."""

from __future__ import annotations

import re
import subprocess
import sys

from report_page import ROOT, elements, figures, long_lived_store

from tencentdb_offload.ops.report_data import MAX_BARS, MAX_LISTED

REQUESTS, EVERY = 50_000, 20            # 2,500 compactions
MAX_PAGE = 10 * 2 ** 20
MAX_PEAK_KB = 256 * 1024

# the CLI in a child of a fresh interpreter: its peak resident size is the command's alone
MEASURE = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
           "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def test_a_long_lived_conversation_is_a_bounded_page(tmp_path):
    store, page, home = tmp_path / "store", tmp_path / "page.html", tmp_path / "home"
    home.mkdir()
    long_lived_store(store, REQUESTS, EVERY)
    env = {"HERMES_HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, str(ROOT), "report",
                           "--store", str(store), "--out", str(page)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=str(tmp_path))
    code, peak_kb = map(int, proc.stdout.split()[-2:])
    assert code == 0, proc.stdout + proc.stderr
    assert page.stat().st_size <= MAX_PAGE, "page of %d bytes" % page.stat().st_size
    assert peak_kb <= MAX_PEAK_KB, "peak %d MB" % (peak_kb // 1024)

    fig = figures(page)
    assert int(fig["requests"]) == REQUESTS and int(fig["compactions"]) == REQUESTS // EVERY
    bars = elements(page, "request")
    assert len(bars) <= MAX_BARS
    spans = [(int(b["data-n"]), int(b["data-last"])) for b in bars]
    assert spans[0][0] == 1 and spans[-1][1] == REQUESTS          # every request in one bar
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))
    assert max(int(b["data-tokens"]) for b in bars) == int(fig["largest_request_tokens"])
    assert len(elements(page, "cached")) == len(bars)

    rows = elements(page, "compaction-row")
    assert 0 < len(rows) <= MAX_LISTED and len(elements(page, "compaction")) == len(rows)
    more = elements(page, "not-listed")
    assert len(more) == 1 and int(more[0]["data-not-listed"]) == REQUESTS // EVERY - len(rows)
    text = page.read_text(encoding="utf-8")
    assert "status --recent %d" % (REQUESTS // EVERY) in text
    # the ones listed saved the most: with this store, those after request i with i % 997 high
    saved = sorted(((i % 997), i) for i in range(EVERY - 1, REQUESTS, EVERY))
    want = sorted(i for _s, i in saved[-len(rows):])
    listed = [int(x) for x in re.findall(r'<tr class="compaction-row" data-n="(\d+)"', text)]
    assert listed == [(i + 1) // EVERY for i in want]
