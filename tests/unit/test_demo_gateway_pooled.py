"""`demo --gateway` on a host whose compression pool is shared (Hermes 0.22) shows the Gateway
compacting, as real sessions there do: the compaction is prepared ahead (after a tool step the
host does not compact at, at a turn's end) and lands while the model replies. The demo's replies
take no time, so it gives the preparation that time; before, every compaction said "not ready
within 0.5 s … compacted locally" and the summary read "Gateway 0"."""

import contextlib
import io
import json
import os

from tencentdb_offload.ops import main
from tencentdb_offload.ops.host_emulation import SELECTING
from tencentdb_offload.ops.report import render
from tests.fakes.gateway import FakeGateway

import helpers

# a /compact that takes longer than the pool's wait (0.5 s) on any machine, as the real one does
SECONDS_PER_100K = 1.5


def test_the_demo_shows_gateway_compactions_on_a_pooling_host(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith(("TENCENTDB_OFFLOAD_", "HERMES_")) or name == "_HERMES_GATEWAY":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    helpers.as_host(monkeypatch, **helpers.SELECTING_HOST)     # pools compression, selects context
    with FakeGateway() as gw:
        gw.slow_compact(SECONDS_PER_100K)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["demo", "--turns", "20", "--gateway", gw.url, "--json"])
        report = json.loads(out.getvalue())
        assert gw.compact_calls(), "nothing reached the Gateway"
    summary = report["summary"]
    assert code == 0 and report["mode"] == "gateway" and report["host"] == SELECTING, summary["problems"]
    assert summary["compactions"] >= 1, summary
    assert summary["gateway_compactions"] == summary["compactions"], report["compactions"]
    assert not [c for c in report["compactions"] if "not ready" in c["describe"]], report["compactions"]
    prepared = summary["prepared_ahead"]
    assert prepared["used"] >= summary["gateway_compactions"] and prepared["waited_s"] > 0, prepared
    text = render(report)
    assert "prepared ahead: %d of %d" % (prepared["used"], prepared["started"]) in text, text
    assert "(Gateway %d, local 0)" % summary["compactions"] in text, text
