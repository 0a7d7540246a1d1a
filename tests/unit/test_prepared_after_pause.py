"""Issue 31: with a Gateway, the compaction a cold turn start wants is prepared during the
user's pause (in a process that outlives the turn), and an idle compaction never waits for a
``/compact``: it applies what was prepared, or compacts locally at once."""

from __future__ import annotations

import threading
import time

import pytest

from fakes.gateway import FakeGateway
from helpers import conversation, make_engine, wait_for
from tencentdb_offload.compaction import idle
from tencentdb_offload.compaction.ahead import PauseBookings
from tencentdb_offload.context import messages

TTL = 1
NEXT = {"role": "user", "content": "back after a pause: the next step, please"}


def _between_the_triggers(eng):
    """A conversation past the idle trigger and under the point where it is prepared at once."""
    low = idle.idle_trigger(eng.threshold_tokens, eng.compaction_target())
    high = eng.threshold_tokens * 0.8
    for n in range(1, 40):
        conv = [{"role": "system", "content": "sys"}] + conversation(n, 6000)
        if low * 1.05 < eng.estimate_real(conv) < high * 0.95:
            return conv
    raise AssertionError("no size between %d and %d" % (low, high))


def _compacts(gw):
    return [r for r in gw.requests if r.path.endswith("/compact")]


def _responded(eng, conv):
    eng.select_context(conv)
    eng.update_from_response({"prompt_tokens": eng.estimate_real(conv)})


@pytest.fixture
def answered(tmp_path):
    """(Gateway, runtime, engine, conversation): a conversation between the triggers whose
    last request was just answered, on a cache TTL of TTL seconds."""
    with FakeGateway(api_key="k1") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k1", cache_ttl_s=str(TTL))
        try:
            conv = _between_the_triggers(eng)
            _responded(eng, conv)
            yield gw, rt, eng, conv
        finally:
            rt.close()


def _cold_turn_start(rt, eng, conv):
    """The next turn's compaction once the cache has gone cold: (its list, its record)."""
    assert wait_for(lambda: idle.due(rt, eng.current_state()), 5)
    out = eng.compress(conv + [NEXT])
    assert messages.validation_errors(out) == [] and out[-1] == NEXT
    last = eng.current_state().last_compaction
    assert last.reason == "idle", last
    return out, last


def test_the_pause_prepares_what_the_cold_turn_start_applies(answered):
    gw, rt, eng, conv = answered
    eng.on_turn_complete(messages=conv)
    assert rt.ahead.status()["waiting_for_pause"] == 1 and not _compacts(gw)
    assert wait_for(lambda: rt.ahead.status()["prepared_after_pause"] == 1, 10)
    assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 30)
    assert len(_compacts(gw)) == 1
    _out, last = _cold_turn_start(rt, eng, conv)
    assert last.via_gateway, last
    assert len(_compacts(gw)) == 1, "the turn start asked the Gateway nothing more"
    assert rt.ahead.status()["prepared_used"] == 1


def test_a_response_before_the_cache_went_cold_cancels_the_preparation(answered):
    gw, rt, eng, conv = answered
    eng.on_turn_complete(messages=conv)
    time.sleep(0.01)
    _responded(eng, conv + [NEXT])          # the user came back early: the cache is warm
    time.sleep(TTL * 1.5)
    assert rt.ahead.status()["prepared_after_pause"] == 0 and not _compacts(gw)


def test_an_idle_compaction_with_nothing_prepared_does_not_ask_the_gateway(answered):
    """A per-turn process has no pause to prepare in: it compacts locally at once."""
    gw, rt, eng, conv = answered
    _out, last = _cold_turn_start(rt, eng, conv)
    assert not last.via_gateway and not _compacts(gw)


def _recorder():
    got, event = [], threading.Event()

    def start(*args):
        got.append(args)
        event.set()
        return True
    return got, event, start


def test_later_keeps_the_newest_booking_per_conversation_and_at_most_most():
    got, event, start = _recorder()
    later = PauseBookings(start, most=2)
    later.book("a", 0.2, ("a-old",), lambda: True)
    later.book("a", 0.2, ("a-new",), lambda: True)
    later.book("b", 0.2, ("b",), lambda: True)
    later.book("c", 0.2, ("c",), lambda: True)      # "a" is the oldest: it goes
    assert later.waiting == 2
    assert wait_for(lambda: len(got) == 2, 5)
    assert sorted(got) == [("b",), ("c",)] and later.fired == 2
    later.close()


def test_later_starts_nothing_unwanted_cancelled_or_closed():
    got, event, start = _recorder()
    later = PauseBookings(start, most=5)
    later.book("unwanted", 0.05, ("u",), lambda: False)
    later.book("cancelled", 0.05, ("x",), lambda: True)
    later.cancel("cancelled")
    later.book("closed", 0.3, ("c",), lambda: True)
    time.sleep(0.15)
    later.close()
    time.sleep(0.3)
    assert got == [] and later.fired == 0
    later.book("after close", 0.0, ("z",), lambda: True)
    time.sleep(0.05)
    assert got == []
