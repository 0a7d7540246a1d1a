"""Hermes 0.17 shares one engine between an agent and its subagents: a subagent's
``on_session_start`` rebinds it while the parent's ``compress()`` still waits on the Gateway.
That compaction belongs to the conversation it started for: its record, counters and event
never land in the conversation the engine was rebound to."""

import threading

from fakes.gateway import COMPACT, FakeGateway
from tencentdb_offload.context import messages

from helpers import conversation, make_engine, wait_for


def test_a_compaction_lands_in_its_own_conversation_when_the_engine_is_rebound(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gate = gw.hold_compacts()
        rt, eng = make_engine(tmp_path, session="parent", gateway_url=gw.url, api_key="k1")
        conv = [{"role": "system", "content": "sys"}] + conversation(30, 6000)
        out = {}
        worker = threading.Thread(target=lambda: out.update(r=eng.compress(list(conv), current_tokens=60_000)))
        try:
            worker.start()
            assert wait_for(lambda: any(r.path == COMPACT for r in list(gw.requests)), 30)
            eng.on_session_start("child")           # the subagent binds the shared engine
        finally:
            gate.set()
            worker.join(60)
        try:
            assert out["r"] != conv and messages.validation_errors(out["r"]) == []
            assert rt.flush_writes(10)
            parent, child = rt.registry.peek("parent"), rt.registry.peek("child")
            assert parent.stats.compactions == 1 and child.stats.compactions == 0
            assert [e["session"] for e in rt.store.events("compaction")] == ["parent"]
        finally:
            rt.close()
