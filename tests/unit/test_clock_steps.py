"""A wall clock stepped (NTP, a hand-set date, a restored VM) never makes fresh rows look old,
a warm cache look cold, or a lease outlive itself."""

import time

import tencentdb_offload as plugin
from tencentdb_offload.archive.outbox import LONGEST_LEASE_S, Outbox
from tencentdb_offload.hooks import HookHandlers

from helpers import make_engine
from test_idle_compaction import between_triggers

DAY = 86_400.0


class SteppedWall:
    def __init__(self):
        self.offset, self.real = 0.0, time.time

    def __call__(self):
        return self.real() + self.offset


def test_a_clock_stepped_back_never_lets_retention_take_fresh_rows(tmp_path, monkeypatch):
    wall = SteppedWall()
    monkeypatch.setattr(time, "time", wall)
    rt, eng = make_engine(tmp_path, RETENTION_DAYS="1")
    wall.offset = -2 * DAY
    HookHandlers(rt).post_tool_call(tool_name="cat", args={}, result="FRESH RESULT",
                                    session_id="s1", tool_call_id="c1")
    assert rt.writer.flush(5)
    assert rt.reclaimer.run().get("archive", 0) == 0
    assert "FRESH RESULT" in rt.tools.handle("tdai_read_cos", {"key": "c1"}, "s1", "hermes-s1")
    rt.close()


def test_a_clock_stepped_forward_is_no_pause_even_after_an_eviction(tmp_path, monkeypatch):
    wall = SteppedWall()
    monkeypatch.setattr(time, "time", wall)
    rt, eng = make_engine(tmp_path, CACHE_TTL_S="300", MAX_SESSIONS="2")
    conv = between_triggers(eng)
    eng.update_from_response({"prompt_tokens": eng.estimate_real(conv)})
    assert rt.flush_writes()
    wall.offset = 3600
    assert not eng.should_compress_preflight(conv)
    for other in ("other1", "other2"):          # the messaging gateway's registry evicts s1
        plugin.open_session(rt, other, 64_000, model="m")
    assert not eng.should_compress_preflight(conv)
    rt.close()


def test_a_lease_taken_by_a_clock_set_ahead_does_not_outlive_one_lease(tmp_path):
    rt, eng = make_engine(tmp_path)
    now = time.time()
    rt.store.transaction([Outbox.op_enqueue("conv-x", "pair", {"tool_call_id": "c1"}, now)])
    assert rt.store.outbox.claim("crashed-ahead", 30.0, now + DAY) == ["conv-x"]
    assert rt.store.outbox.claim("next", 30.0, now) == ["conv-x"]          # bogus: taken over
    assert rt.store.outbox.claim("third", 30.0, now) == []                  # a live lease holds
    assert rt.store.outbox.claim("slow", LONGEST_LEASE_S - 60, now + 31) == ["conv-x"]
    assert rt.store.outbox.claim("fourth", 30.0, now + 32) == []    # however long, within the bound
    rt.close()


def test_a_down_verdict_written_before_the_clock_stepped_back_is_not_trusted(tmp_path, monkeypatch):
    """A "down" written an hour ahead (the clock then went back) read as age 0: every
    process skipped the Gateway for an hour, though the Gateway was asked 30 s later before."""
    from tencentdb_offload.memory_gateway.shared_health import SharedHealth
    wall = SteppedWall()
    monkeypatch.setattr(time, "time", wall)
    wall.offset = 3_600.0
    SharedHealth(tmp_path, "http://gw.invalid").record(False, "no answer")
    wall.offset = 0.0
    assert SharedHealth(tmp_path, "http://gw.invalid").read() is None
    SharedHealth(tmp_path, "http://gw.invalid").record(False, "no answer")
    assert SharedHealth(tmp_path, "http://gw.invalid").read()["age_s"] < 5
