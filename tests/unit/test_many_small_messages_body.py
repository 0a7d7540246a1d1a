"""A history of thousands of small messages is over the body limit however its results are
trimmed: the plugin does not send it, and says so with its own setting, not as the Gateway's
"HTTP 413" (which sent operators to raise the Gateway's limit, to no effect)."""

from fakes.gateway import FakeGateway
from helpers import conversation, make_engine


def test_a_body_not_sent_names_the_plugins_limit_not_the_gateway(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        rt, eng = make_engine(tmp_path, context_length=64_000, gateway_url=gw.url, api_key="k1",
                              body_limit="20000")
        conv = [{"role": "system", "content": "sys"}] + conversation(800, 60)   # 3,200 small messages
        eng.compress(conv, current_tokens=eng.threshold_tokens + 1000)
        assert not [r for r in gw.requests if r.path.endswith("/compact")]     # never sent
        error = eng.current_state().last_compaction.error
        assert "HTTP 413" not in error, error
        assert "not sent" in error and "TENCENTDB_OFFLOAD_BODY_LIMIT (20000)" in error, error
        rt.close()
