"""Each compaction lands at its own depth, and a prepared one asks for the target it was
prepared with (issue 51 item 12).

Hermes 0.22 may call ``compress()`` again on an engine whose first call still runs. The
depth (an idle compaction lands deeper) was one field of the engine: the other call reset it,
and the idle compaction landed at the ordinary target. A compaction prepared ahead read the
engine's target when a pool thread got to it, not when it was prepared.
"""

import threading

import tencentdb_offload as plugin
from fakes.gateway import COMPACT, FakeGateway
from tencentdb_offload.compaction import idle
from tencentdb_offload.compaction.ahead import MAX_RUNNING
from tencentdb_offload.memory_gateway.compaction import context_window_for

from helpers import conversation, env_for, wait_for
from test_idle_compaction import TTL, Clock, answered, between_triggers, engine


def test_an_idle_compaction_keeps_its_depth_while_another_call_runs(tmp_path):
    clock = Clock()
    rt, eng = engine(tmp_path, clock)
    conv = between_triggers(eng)
    answered(eng, conv)
    clock.pause(TTL + 1)
    ordinary = eng.compaction_target()
    sized, go_on = threading.Event(), threading.Event()
    real_ordinary_target = eng.ordinary_target

    def ordinary_target():         # the idle call is held while it sizes its landing
        if threading.current_thread().name == "idle" and not sized.is_set():
            sized.set()
            go_on.wait()
        return real_ordinary_target()
    eng.ordinary_target = ordinary_target
    first = threading.Thread(target=lambda: eng.compress(list(conv), current_tokens=60_000),
                             name="idle")
    first.start()
    try:
        assert sized.wait(30)
        eng.compress(list(conv), current_tokens=eng.estimate_real(conv))   # the re-entrant call
        ordinary_record = eng.current_state().last_compaction
    finally:
        go_on.set()
        first.join(60)
    idle_record = eng.current_state().last_compaction
    assert ordinary_record.reason == "threshold" and ordinary_record.target == ordinary
    assert idle_record.reason == "idle"
    assert idle_record.target == idle.idle_target(ordinary)


def test_a_prepared_compaction_asks_for_the_target_it_was_prepared_with(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gate = gw.hold_compacts()
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            conv = [{"role": "system", "content": "sys"}] + conversation(12, 6000)
            engines = []
            for i in range(MAX_RUNNING + 1):        # the pool is busy: the last one queues
                eng = plugin.open_session(rt, "conv-%d" % i, 64_000, model="m")
                eng.prune_tool_results_only(list(conv),
                                            current_tokens=int(eng.threshold_tokens * 0.9))
                engines.append(eng)
            assert wait_for(lambda: sum(r.path == COMPACT for r in list(gw.requests))
                            == MAX_RUNNING, 30)
            queued = engines[-1]
            asked = context_window_for(queued.compaction_target())
            queued.update_model(model="m", context_length=200_000)    # its agent switched model
            gate.set()
            assert wait_for(lambda: rt.ahead.status()["preparing"] == 0, 60)
            sent = gw.compact_calls(queued.current_state().gateway_id)
            assert len(sent) == 1 and sent[0][0]["context_window"] == asked
        finally:
            gate.set()
            rt.close()
