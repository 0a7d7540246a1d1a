"""report on a conversation of a long life: each request's time is read once, not once per
compaction (10^4 requests and 10^3 compactions were 10^7 reads)."""

from tencentdb_offload.ops.report_data import _compactions


class Counted(dict):
    reads = 0

    def __getitem__(self, key):
        if key == "ts":
            Counted.reads += 1
        return super().__getitem__(key)


def test_each_request_time_is_read_once_whatever_the_compactions():
    requests = [Counted(ts=float(t)) for t in range(300)]
    events = [{"ts": float(t) + 0.5, "route": "local", "tokens_before": 9, "tokens_after": 1}
              for t in range(299, -1, -30)]                   # newest first, as read
    Counted.reads = 0
    out = _compactions(events, requests)
    assert [c["after_request"] for c in out] == list(range(30, 301, 30))
    assert Counted.reads <= len(requests)


def test_requests_out_of_time_order_are_counted_as_before():
    requests = [{"ts": t} for t in (5.0, 1.0, 9.0, 3.0)]     # a clock stepped back meanwhile
    out = _compactions([{"ts": 4.0}, {"ts": 0.5}], requests)
    assert [c["after_request"] for c in out] == [0, 2]
