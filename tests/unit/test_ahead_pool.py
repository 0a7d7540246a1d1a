"""Compactions prepared ahead run on a small pool (issue 27 item 6).

100 conversations near their trigger in one process: at most a handful of plugin threads
prepare them, a job dropped before its turn (the conversation left the bounded set) never
sends ``/compact``, and closing the runtime joins the pool.
"""

import threading
import time

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.compaction.ahead import MAX_RUNNING

from helpers import SELECTING_HOST, as_host, conversation, env_for, wait_for

CONVERSATIONS = 100
KEPT = 20                   # conversations the runtime keeps (max_sessions)


def ahead_threads():
    return [t for t in threading.enumerate() if t.name == "tdo-compact-ahead" and t.is_alive()]


def test_a_hundred_conversations_share_a_small_pool_and_dropped_jobs_send_nothing(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        # the calls sent while the conversations open wait until they all are: how many were
        # sent then does not depend on how fast this machine opens 100 conversations
        gate = gw.hold_compacts()
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1",
                                              max_sessions=str(KEPT)))
        try:
            conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
            most = 0
            for i in range(CONVERSATIONS):
                eng = plugin.open_session(rt, "conv-%d" % i, 64_000, model="m")
                eng.prune_tool_results_only(list(conv), current_tokens=int(eng.threshold_tokens * 0.9))
                most = max(most, len(ahead_threads()))
            assert most <= MAX_RUNNING, "%d threads for %d conversations" % (most, CONVERSATIONS)
            assert rt.ahead.status()["prepared_started"] == CONVERSATIONS
            gate.set()
            assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 60)
            compacts = [r for r in gw.requests if r.path.endswith("/compact")]
            # only the jobs still held (plus those already in flight when dropped) were sent
            assert len(compacts) <= KEPT + MAX_RUNNING, len(compacts)
            assert rt.ahead.status()["prepared_skipped"] >= CONVERSATIONS - KEPT - MAX_RUNNING
        finally:
            gate.set()
            rt.close()


def test_close_joins_the_pool_and_queued_jobs_are_never_sent(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.slow_compact(1.0)
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
        for i in range(10):
            eng = plugin.open_session(rt, "conv-%d" % i, 64_000, model="m")
            eng.prune_tool_results_only(list(conv), current_tokens=int(eng.threshold_tokens * 0.9))
        rt.close()
        assert not ahead_threads(), "the pool outlived the runtime"
        sent = len([r for r in gw.requests if r.path.endswith("/compact")])
        time.sleep(0.5)
        assert len([r for r in gw.requests if r.path.endswith("/compact")]) == sent
        assert sent <= MAX_RUNNING + 1


def test_a_conversation_that_ended_before_its_turn_sends_no_compact(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.slow_compact(3.0)
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
            engines = []
            for i in range(MAX_RUNNING + 3):        # the pool is busy: the last ones queue
                eng = plugin.open_session(rt, "conv-%d" % i, 64_000, model="m")
                eng.prune_tool_results_only(list(conv), current_tokens=int(eng.threshold_tokens * 0.9))
                engines.append(eng)
            ended = engines[-1]
            ended.on_session_end("conv-%d" % (len(engines) - 1))
            assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 60)
            sent = {c[0].get("session_id") for c in gw.compact_calls()}
            assert len(sent) == len(engines) - 1, sent
            assert not any(s.endswith("conv-%d" % (len(engines) - 1)) for s in sent), sent
        finally:
            rt.close()


def test_a_prepared_compaction_two_callers_waited_for_is_counted_used_once(tmp_path):
    # 0.22 calls compress() again while a stalled call waits for the same prepared job: both
    # get its result (the stalled one is cancelled), but one compaction was prepared and used
    with FakeGateway(api_key="k1") as gw:
        gate = gw.hold_compacts()
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
            eng = plugin.open_session(rt, "conv", 64_000, model="m")
            eng.prune_tool_results_only(list(conv), current_tokens=int(eng.threshold_tokens * 0.9))
            state = eng.current_state()
            job = rt.ahead._jobs[state.key]
            got = []
            takers = [threading.Thread(target=lambda: got.append(rt.ahead.take(state, list(conv), 60)))
                      for _ in range(2)]
            for t in takers:
                t.start()
            assert wait_for(lambda: len(job.done._cond._waiters) == 2, 10)   # both wait on it
            gate.set()
            for t in takers:
                t.join(60)
            assert len(got) == 2 and all(g is not None and g.messages for g in got)
            assert rt.ahead.status()["prepared_used"] == 1
        finally:
            gate.set()
            rt.close()


def test_a_snapshot_still_queued_when_compress_compacts_locally_is_never_sent(tmp_path, monkeypatch):
    # 0.22: the pool is busy, compress() waits its 0.5 s and compacts locally; the queued
    # snapshot predates that compaction, so a /compact of it later is nobody's use
    as_host(monkeypatch, **SELECTING_HOST)
    with FakeGateway(api_key="k1") as gw:
        gate = gw.hold_compacts()
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
            for i in range(MAX_RUNNING):                    # every pool thread held at the gate
                eng = plugin.open_session(rt, "busy-%d" % i, 64_000, model="m")
                eng.prune_tool_results_only(list(conv), current_tokens=int(eng.threshold_tokens * 0.9))
            assert wait_for(lambda: len([r for r in gw.requests if r.path.endswith("/compact")])
                            == MAX_RUNNING, 10)
            x = plugin.open_session(rt, "x", 64_000, model="m")
            x.prune_tool_results_only(list(conv), current_tokens=int(x.threshold_tokens * 0.9))
            x.compress(list(conv), current_tokens=int(x.threshold_tokens * 1.05))
            assert x.compression_count == 1 and rt.status()["totals"]["local_compactions"] == 1
            gate.set()
            assert wait_for(lambda: rt.ahead.status()["threads"] == 0, 30)
            sent = [c[0].get("session_id") for c in gw.compact_calls()]
            assert not any(s.endswith("x") for s in sent), sent
            assert rt.ahead.status()["prepared_skipped"] == 1
        finally:
            gate.set()
            rt.close()
