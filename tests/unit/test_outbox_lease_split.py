"""A batch the body limit refuses is sent one row at a time: each send renews the session's
lease. Without that, a split longer than the lease (a slow Gateway) let a second process on
the same store (here a second runtime, its own sender) take the session over and send the
same rows again, out of order."""

from collections import Counter

import tencentdb_offload as plugin
from fakes.gateway import INGEST, FakeGateway
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for

LIMIT = 100_000


def test_a_split_batch_keeps_its_lease_and_no_row_goes_twice(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        env = env_for(tmp_path, gateway_url=gw.url, api_key="k1", body_limit=LIMIT)
        first = plugin.build_runtime(env=env)
        second = plugin.build_runtime(env=env)      # a CLI beside the messaging gateway
        try:
            first.worker.lease_s = 1.0      # five sends long, shorter than the split
            gw.latency_s = 0.2              # a slow Gateway: each send takes a while
            hooks = HookHandlers(first)
            # quotes double when JSON-escaped: the batch planned under the limit is over it
            for i in range(16):
                hooks.post_tool_call(tool_name="cat", args={"i": i}, result='"' * 4_500,
                                     session_id="s1", tool_call_id="c%d" % i)
            assert first.writer.flush(30)
            assert first.flush("s1", 60) and second.flush("s1", 60)
            sent = [p["tool_call_id"] for p in gw.ingested_pairs("hermes-s1")]
            assert any(r.path == INGEST and len(r.body["tool_pairs"]) == 1 for r in gw.requests)
            assert [k for k, n in Counter(sent).items() if n > 1] == []
            assert sent == ["c%d" % i for i in range(16)]
        finally:
            first.close()
            second.close()
