"""A compacted list reloads in the order it was sent (issue 55): Hermes 0.17 writes each message
with its ``timestamp`` (the time of the write when it has none) and reloads a session ordered by
it, so a message the compaction put in (the digest pair) must not sort behind kept ones."""
from tencentdb_offload.context import messages

from helpers import conversation, make_engine


def reloaded(messages, now=float("inf")):
    """What Hermes 0.17 reads back: ORDER BY timestamp (the write's time when none), then id."""
    stamp = [m.get("timestamp", now) for m in messages]
    return [messages[i] for i in sorted(range(len(messages)), key=lambda i: (stamp[i], i))]


def test_compacted_list_reloads_in_the_order_sent(tmp_path):
    rt, eng = make_engine(tmp_path)
    conv = conversation(40, 6000, calls=2)
    for n, m in enumerate(conv[:-1]):       # loaded from the store; the new prompt has none
        m["timestamp"] = 1_700_000_000.0 + n
    eng.update_from_response({"prompt_tokens": 70_000})
    out = eng.compress(conv, current_tokens=70_000)
    ids = [c for m in out for c in messages.calls_of(m)]
    digest = next(i for i, m in enumerate(out) if any(c.startswith("tdo_digest_") for c in messages.calls_of(m)))
    assert any("timestamp" in m for m in out[digest + 2:]), "no kept message after the digest"
    assert ids and reloaded(out) == out
    assert messages.validation_errors(out) == []


def test_stored_in_order_keeps_what_is_in_order():
    a, b, c = ({"role": "user", "content": "a", "timestamp": 5.0},
               {"role": "assistant", "content": "b"},
               {"role": "user", "content": "c", "timestamp": 7.0})
    tail = {"role": "assistant", "content": "d"}
    out = messages.stored_in_order([b, a, c, tail])
    assert [m.get("timestamp") for m in out] == [5.0, 5.0, 7.0, None]
    assert out[1] is a and out[2] is c and out[3] is tail      # in order: the same objects
    late = messages.stored_in_order([c, a])                             # a stamp that goes back in time
    assert [m["timestamp"] for m in late] == [7.0, 7.0] and reloaded(late) == late
    iso = [{"role": "user", "content": "x", "timestamp": "2026-01-01"}, b]
    assert messages.stored_in_order(iso) is iso and messages.stored_in_order([b, tail])[0] is b
