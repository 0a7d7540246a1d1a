"""A tool pair whose call arguments are the large part (``write_file`` of a big file, a short
result) goes to the Gateway with its arguments cut, not refused for good."""

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for

LIMIT = 100_000


def test_a_call_with_arguments_over_the_body_limit_is_sent_with_them_cut(tmp_path):
    with FakeGateway(api_key="k1", body_limit=LIMIT) as gw:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1",
                                              body_limit=LIMIT))
        try:
            hooks = HookHandlers(rt)
            hooks.post_tool_call(tool_name="write_file", session_id="s1", tool_call_id="w1",
                                 args={"path": "/a.py", "content": "x = 1\n" * 40_000},
                                 result="wrote 240000 bytes")
            assert rt.writer.flush(30)
            assert rt.flush("s1", 30)
            sent = {p["tool_call_id"]: p for p in gw.ingested_pairs("hermes-s1")}
            assert "w1" in sent, "refused: %s" % rt.store.outbox.refused()
            assert sent["w1"]["result"] == "wrote 240000 bytes"
            assert sent["w1"]["params"].startswith('{"path": "/a.py"')
            assert "arguments not sent to the Gateway" in sent["w1"]["params"]
            assert rt.store.outbox.refused() == []
        finally:
            rt.close()
