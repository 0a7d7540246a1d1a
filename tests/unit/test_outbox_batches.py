"""A backlog is delivered in batches bounded by bytes, never loaded whole (issue 10 item 7)."""

import json
import subprocess
import sys
from pathlib import Path

import tencentdb_offload as plugin
from fakes.gateway import INGEST, FakeGateway
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for

LIMIT = 1_000_000
TESTS = Path(__file__).resolve().parent.parent


def _backlog(tmp_path, gw, results, size):
    """Queue ``results`` tool results while the Gateway refuses, then end that process's
    runtime (its sender stopped and joined) and let the Gateway come back: what a restart
    after an outage finds. Returns the env a new runtime uses.

    The runtime that queued the rows is never reused: its sender may still be inside a
    refused call when the Gateway comes back, and that late failure reopens its breaker
    (flush() then answers False at once, as documented). Forcing that breaker closed from the
    test thread raced with it, and the test failed now and then (once in a fresh suite run)."""
    env = env_for(tmp_path, gateway_url=gw.url, api_key="k1", body_limit=LIMIT)
    gw.set_fault("refuse")
    rt = plugin.build_runtime(env=env)
    hooks = HookHandlers(rt)
    for i in range(results):
        hooks.post_tool_call(tool_name="cat", args={"i": i}, result=("%d " % i) * (size // 3),
                             session_id="s1", tool_call_id="c%d" % i)
    assert rt.writer.flush(60)
    rt.worker.stop(60)
    rt.close()
    gw.clear_fault()
    return env


DELIVER = r"""
import json, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
tracemalloc.start()
ok = rt.flush("s1", 60)
print(json.dumps({"ok": ok, "peak": tracemalloc.get_traced_memory()[1]}))
rt.close()
"""


def test_peak_memory_while_a_large_backlog_is_delivered_stays_a_few_body_limits(tmp_path):
    """Delivered by a fresh process (the one that queued 48 MB is gone), so its Python heap
    peak is the delivery alone; the fake Gateway runs here, out of the measurement."""
    with FakeGateway(api_key="k1", body_limit=LIMIT) as gw:
        env = _backlog(tmp_path, gw, 12, 4_000_000)         # 48 MB waiting, 1 MB body limit
        proc = subprocess.run([sys.executable, "-c", DELIVER, str(TESTS), json.dumps(env)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout.splitlines()[-1])
        assert out["ok"]
        assert out["peak"] <= 5 * LIMIT, "peak %.1f MB for a 48 MB backlog" % (out["peak"] / 1e6)
        sent = gw.ingested_pairs("hermes-s1")
        assert [p["tool_call_id"] for p in sent] == ["c%d" % i for i in range(12)]
        assert all("tdai_read_cos(tool_call_id=\"c%d\")" % i in p["result"]
                   for i, p in enumerate(sent))             # cut, with a pointer to the rest


def test_small_rows_go_in_batches_under_the_body_limit(tmp_path):
    with FakeGateway(api_key="k1", body_limit=LIMIT) as gw:
        rt = plugin.build_runtime(env=_backlog(tmp_path, gw, 300, 20_000))  # 6 MB of 20 KB
        try:
            assert rt.flush("s1", 60)
            bodies = [r for r in gw.requests if r.path == INGEST and r.status == 200]
            assert sum(len(r.body["tool_pairs"]) for r in bodies) == 300
            assert len(bodies) >= 6                          # not one oversized request
            assert all(len(r.body["tool_pairs"]) <= 100 for r in bodies)
            assert not any(r.status == 413 or r.status is None for r in gw.requests
                           if r.path == INGEST)
        finally:
            rt.close()
