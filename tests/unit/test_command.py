from fakes.gateway import FakeGateway
from tencentdb_offload.command import make_command

from helpers import conversation, make_engine


def test_status_help_and_unknown(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    cmd = make_command(rt)
    text = cmd("")
    assert "mode: local" in text and "compactions: 1 (gateway 0, local 1)" in text
    assert "gateway: off" in text and "archive:" in text
    assert "reclaim" in cmd("help")
    assert "unknown subcommand" in cmd("frobnicate")
    assert "no Gateway configured" in cmd("health")


def test_gateway_status_health_flush_reclaim(tmp_path):
    with FakeGateway(api_key="k") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k", retention_days="7")
        cmd = make_command(rt)
        assert cmd("health").startswith("gateway up: status ok")
        assert "outbox delivered" in cmd("flush")
        text = cmd("status")
        assert gw.url in text and "breaker closed" in text and "k\n" not in text
        assert cmd("reclaim").startswith("reclaimed:")
        gw.set_fault("refuse")
        assert cmd("health").startswith("gateway not usable")
