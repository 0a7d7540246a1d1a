"""report on a conversation of a long life: each request is read once, into at most MAX_BARS
bars, and each compaction lands after the requests sent before it (10^4 requests and 10^3
compactions were once 10^7 reads)."""

from tencentdb_offload.ops.report_data import MAX_BARS, Compactions, Requests


def test_each_compaction_lands_after_the_requests_sent_before_it():
    requests = Requests(iter([{"ts": float(t), "prompt_tokens": 10} for t in range(300)]), 300)
    events = [{"ts": float(t) + 0.5, "route": "local", "tokens_before": 9, "tokens_after": 1}
              for t in range(29, 300, 30)]                    # oldest first, as read
    out = Compactions(iter(events), requests.sent).listed
    assert [c["after_request"] for c in out] == list(range(30, 301, 30))


def test_requests_out_of_time_order_are_counted_as_before():
    requests = Requests(iter([{"ts": t} for t in (5.0, 1.0, 9.0, 3.0)]), 4)  # a clock stepped back
    out = Compactions(iter([{"ts": 0.5}, {"ts": 4.0}]), requests.sent).listed
    assert [c["after_request"] for c in out] == [0, 2]


def test_many_requests_are_at_most_max_bars_each_the_largest_of_its_own():
    n = 3 * MAX_BARS + 7
    sizes = [(i * 7919) % 100_000 for i in range(n)]
    requests = Requests(iter([{"ts": float(i), "prompt_tokens": s} for i, s in enumerate(sizes)]), n)
    bars = requests.bars
    assert len(bars) <= MAX_BARS and requests.count == n
    assert [b["n"] for b in bars] == [1] + [b["last"] + 1 for b in bars[:-1]] and bars[-1]["last"] == n
    assert all(b["prompt_tokens"] == max(sizes[b["n"] - 1:b["last"]]) for b in bars)
