"""A flush of a conversation whose delivery is in backoff waits for the retry time, not in a
loop: every pass skips that conversation until then, so waking the sender again and again
only spun both threads (a compaction's half-second wait for the backlog burned a core)."""

from __future__ import annotations

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for

INGEST = "/v2/offload/ingest"


def test_a_flush_in_backoff_wakes_the_sender_once_per_retry(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.set_fault("409", paths=(INGEST,))       # refused, worth a retry: the breaker stays closed
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1",
                                              instance_id="svc"))
        try:
            HookHandlers(rt).post_tool_call(tool_name="cat", args={}, result="text",
                                            session_id="s1", tool_call_id="c1")
            assert rt.writer.flush(10)
            before = rt.worker._passes
            assert rt.flush("s1", 1.5) is False
            passes = rt.worker._passes - before
            assert rt.client.breaker.allow(), "the breaker opened: flush gave up for an outage"
            assert rt.store.outbox.backlog("s1") == 1
            # the first try, the retry after the 1 s backoff, and the sender's own 1 s polls
            assert passes <= 6, "%d sender passes during a 1.5 s flush" % passes
        finally:
            rt.close()
