"""Tool arguments with NaN or Infinity (Python's JSON, and so Hermes, parses a model's ``NaN``)
or a non-finite duration: the Gateway's JSON parser refuses such a body, so the pair was
refused for good ("Invalid JSON body"). They go as text."""

import json

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for


def test_nan_and_infinity_in_a_pair_do_not_get_it_refused(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        try:
            hooks = HookHandlers(rt)
            hooks.post_tool_call(tool_name="calc", args=json.loads('{"x": NaN, "y": [-Infinity]}'),
                                 result={"r": float("inf")}, session_id="s1", tool_call_id="n1")
            hooks.post_tool_call(tool_name="calc", args={"x": 1}, result="ok", session_id="s1",
                                 tool_call_id="n2", duration_ms=float("nan"))
            assert rt.writer.flush(30) and rt.flush("s1", 10)
            sent = {p["tool_call_id"]: p for p in gw.ingested_pairs("hermes-s1")}
            assert rt.store.outbox.refused() == []
            assert sent["n1"]["params"] == {"x": "nan", "y": ["-inf"]}
            assert "duration_ms" not in sent["n2"]
            assert all(r.status == 200 for r in gw.requests)
        finally:
            rt.close()
