"""No Gateway configured and none answering at the default URL is local mode, "an expected
mode, not an outage" (README): a compaction there records no Gateway error, so neither the
slash command nor ``status`` lists "Gateway unavailable" errors. A Gateway the user named that
does not answer still does."""

import dataclasses
import socket

from helpers import conversation, plugin
from tencentdb_offload import ops
from tencentdb_offload.host.command import make_command
from tencentdb_offload.runtime.process import Runtime
from tencentdb_offload.settings.config import load_settings


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]


def _compact_and_status(tmp_path, capsys, configured: bool) -> str:
    settings, _ = load_settings({"HERMES_HOME": str(tmp_path / "home")}, None)
    settings = dataclasses.replace(settings, gateway_url=_dead_url(), gateway_configured=configured)
    rt = Runtime(settings, [], {"HERMES_HOME": str(tmp_path / "home")})
    eng = plugin.open_session(rt, "s1", 64_000, model="m")
    for _ in range(2):                       # the first finds the Gateway down, the next skips it
        eng.compress(conversation(40, 5000), current_tokens=60_000)
    text = make_command(rt)("status")
    directory = rt.store.directory
    rt.close()
    assert ops.main(["status", "--store", str(directory)]) == 0
    return text + capsys.readouterr().out


def test_unconfigured_default_url_down_is_no_error(tmp_path, capsys):
    text = _compact_and_status(tmp_path, capsys, configured=False)
    assert "compacted locally" in text, text
    assert "gateway unavailable" not in text.lower(), text
    assert "error (compaction" not in text, text


def test_configured_gateway_down_is_still_reported(tmp_path, capsys):
    text = _compact_and_status(tmp_path, capsys, configured=True)
    assert "gateway unavailable" in text.lower(), text


def test_health_without_a_configured_gateway_reads_as_local_mode(tmp_path):
    """`/tencentdb-offload health` with the default URL silent: local mode and what to set, not
    a bare 'Gateway not usable: Connection refused' as for a Gateway the user named."""
    for configured in (False, True):
        settings, _ = load_settings({"HERMES_HOME": str(tmp_path / "home")}, None)
        settings = dataclasses.replace(settings, gateway_url=_dead_url(), gateway_configured=configured)
        rt = Runtime(settings, [], {"HERMES_HOME": str(tmp_path / "home")})
        text = make_command(rt)("health")
        rt.close()
        if configured:
            assert text.startswith("Gateway not usable: "), text
        else:
            assert "no Gateway configured" in text and "TENCENTDB_OFFLOAD_GATEWAY_URL" in text, text
