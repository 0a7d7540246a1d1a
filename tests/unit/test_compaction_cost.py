"""What each compaction cost the prompt cache (issue 53 item 17), per compaction in `status
--json` and `report`, summed in one status line: the tokens the request after it writes (the
cache break), the cached prefix it threw away, that request's cost under the documented cache
model (read 0.1, write 1.25) and the cumulative cost; beside them the same with no compaction,
where the context before it fitted the window. All of it from the store, across processes."""

from __future__ import annotations

import json
import re
import time

from report_page import elements

from helpers import Clock, cli_stdout, conversation, make_engine, store_with_events
from tencentdb_offload.session.record import Compaction

READ, WRITE = 0.1, 1.25         # docs/benchmarks.md: the cache model every cost figure uses


def _over_the_trigger(eng):
    for turns in range(10, 400, 5):
        conv = conversation(turns, 1000)
        if eng.estimate_real(conv) > eng.threshold_tokens:
            return conv
    raise AssertionError("no conversation over the trigger")


def _compacted(tmp_path, pause=0.0):
    clock = Clock()
    rt, eng = make_engine(tmp_path, CACHE_TTL_S="300")
    clock.drive(rt)
    conv = _over_the_trigger(eng)
    sent = eng.estimate_real(conv[:-3])             # the last request, before the step's results
    eng.update_from_response({"prompt_tokens": sent, "completion_tokens": 10})
    clock.pause(pause)
    out = eng.compress(conv, current_tokens=eng.estimate_real(conv))
    assert out != conv
    return rt, eng, sent


def test_a_compaction_records_what_it_breaks_and_what_the_request_after_it_costs(tmp_path):
    rt, eng, sent = _compacted(tmp_path)
    try:
        rec = eng.current_state().last_compaction
        brk = rec.cache_break()
        assert rec.cached_before == sent                # warm: the last request is what it held
        assert 0 < rec.prefix_kept < rec.tokens_after   # system prompt, schemas, first messages
        read = min(rec.prefix_kept, sent)
        assert brk["written"] == rec.tokens_after - read and brk["invalidated"] == sent - read
        assert brk["cost"] == round(READ * read + WRITE * (rec.tokens_after - read), 1)
        assert rec.tokens_before <= rec.context_length  # so no compaction was an option:
        assert brk["written_without"] == rec.tokens_before - sent
        assert brk["cost_without"] == round(READ * sent + WRITE * (rec.tokens_before - sent), 1)
        again = Compaction.from_json(json.loads(json.dumps(rec.to_json())))
        assert again.cache_break() == brk               # as a later process reads it
    finally:
        rt.close()


def test_after_a_pause_over_the_ttl_nothing_cached_is_lost(tmp_path):
    rt, eng, _sent = _compacted(tmp_path, pause=301)
    try:
        brk = eng.current_state().last_compaction.cache_break()
        assert brk["invalidated"] == 0 and brk["cached_before"] == 0
        assert brk["written_without"] >= brk["written"]     # a cold request is written whole
    finally:
        rt.close()


def _record(before, after, kept, cached, window=64_000, **extra):
    return dict({"route": "local", "level": "local", "tokens_before": before, "tokens_after": after,
                 "target": 28_800, "archived": 3, "trigger": 48_000, "context_length": window,
                 "prefix_kept": kept, "cached_before": cached, "left": ["call_x"]}, **extra)


RECORDS = [
    {"route": "local", "tokens_before": 60_000, "tokens_after": 30_000, "archived": 2,
     "context_length": 64_000},                         # an older version's: no figures
    _record(58_000, 26_000, 4_000, 50_000),
    _record(70_000, 27_000, 3_000, 52_000),             # over the window: it had to run
    _record(61_000, 25_000, 5_000, 0, reason="idle"),   # a cold cache
    _record(61_000, 25_000, 5_000, 0, reason="adopted"),    # counted with the cut before it
]


def _store(directory):
    now = time.time() - 100
    store_with_events(directory, [(now + i, "conv", "compaction", r) for i, r in enumerate(RECORDS)])


def test_status_and_report_show_each_cost_and_the_running_total(tmp_path):
    store, page = tmp_path / "store", tmp_path / "p.html"
    _store(store)
    breaks = [Compaction.from_json(r).cache_break() for r in RECORDS]
    priced = [b for b in breaks if b is not None]
    assert len(priced) == 3 and breaks[0] is None and breaks[-1] is None
    assert priced[1]["cost_without"] is None            # 70,000 before in a 64,000 window
    want_without = sum(b["cost_without"] if b["cost_without"] is not None else b["cost"]
                       for b in priced)

    data = json.loads(cli_stdout(tmp_path, "status", "--store", str(store), "--json"))
    oldest_first = data["compactions"]["recent"][::-1]
    assert [e["cache"] is None for e in oldest_first] == [b is None for b in breaks]
    running = [e["cache"]["cumulative_cost"] for e in oldest_first if e["cache"]]
    assert running == [round(sum(b["cost"] for b in priced[:i + 1]), 1) for i in range(3)]
    total = data["compactions"]["cache"]
    assert total["written"] == sum(b["written"] for b in priced)
    assert total["cost"] == running[-1]
    assert abs(total["cost_without"] - want_without) < 0.2
    assert oldest_first[-2]["cache"]["cumulative_cost_without"] == total["cost_without"]

    text = cli_stdout(tmp_path, "status", "--store", str(store))
    line = next(x for x in text.splitlines() if "compactions so far cost" in x)
    assert "compactions so far cost ~%s cache-write tokens" % format(total["written"], ",") in line
    assert "read 0.1, write 1.25" in line and "1 of 3" not in line and "2 of 3" in line, line

    fig = json.loads(cli_stdout(tmp_path, "report", "--store", str(store), "--out", str(page), "--json"))
    assert fig["summary"]["cache_cost"] == total
    cells = elements(page, "cache-break")
    assert [float(c["data-cumulative-cost"]) for c in cells] == running
    assert [c["data-cost-without"] for c in cells][1] == ""       # not an option there
    html = page.read_text(encoding="utf-8")
    assert "counted with the cut" in html and "not recorded (an older version)" in html
    summary = dict(re.findall(r'data-name="(\w+)" data-value="([^"]*)"', html))
    assert int(summary["cache_written"]) == total["written"]
