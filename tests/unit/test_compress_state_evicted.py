"""A compaction's conversation stays in the registry until its result has landed (issue 51
item 13).

The registry keeps the newest ``MAX_SESSIONS`` conversations. In a busy messaging gateway,
others came and went while a compaction waited on the Gateway; pushed out, the conversation's
next hook built a second state for it, and the compaction published to the first one: the
record, the canvas re-pin and the end of "compact the transcript" were lost.
"""

import threading

from fakes.gateway import COMPACT, FakeGateway
from tencentdb_offload.context import messages
from tencentdb_offload.hooks import HookHandlers

from helpers import conversation, make_engine, wait_for


def test_a_compaction_lands_on_the_state_the_hooks_find(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gate = gw.hold_compacts()
        rt, eng = make_engine(tmp_path, session="busy", gateway_url=gw.url, api_key="k1",
                              max_sessions=3)
        conv = [{"role": "system", "content": "sys"}] + conversation(30, 6000)
        out = {}
        worker = threading.Thread(target=lambda: out.update(r=eng.compress(list(conv),
                                                                           current_tokens=60_000)))
        hooks = HookHandlers(rt)
        try:
            worker.start()
            assert wait_for(lambda: any(r.path == COMPACT for r in list(gw.requests)), 30)
            for i in range(20):                         # other conversations come and go
                hooks.pre_llm_call(session_id="other-%d" % i, user_message="hello %d" % i,
                                   conversation_history=[])
            hooks.pre_llm_call(session_id="busy", user_message="next turn",
                               conversation_history=[])
            rt.registry.get("busy").transcript_due(True)    # a request was cut meanwhile
        finally:
            gate.set()
            worker.join(60)
        try:
            assert out["r"] != conv and messages.validation_errors(out["r"]) == []
            state = rt.registry.get("busy")
            assert state.stats.compactions == 1, "the result landed on a state nobody reads"
            assert state.canvas_repin and not state.compact_transcript
            assert len(rt.registry) <= 3                # released: the bound holds again
        finally:
            rt.close()
