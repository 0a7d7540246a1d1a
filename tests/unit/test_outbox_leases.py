"""Two real processes over one store: each row is sent by one of them, in per-session order
(issue 10 item 6); a sender killed with -9 loses nothing (another takes its lease over)."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from fakes.gateway import INGEST, FakeGateway

from helpers import env_for

TESTS = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.runtime import ingest
ingest.LEASE_MIN_S = 1.0            # a crashed sender's sessions are taken over sooner
env, name, sessions, pairs, mode = json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rt = plugin.build_runtime(env=env)
hooks = HookHandlers(rt)
for k in range(pairs):
    for s in range(sessions):
        hooks.post_tool_call(tool_name="t", args={"k": k}, result="%s r%d" % (name, k),
                             session_id="%s-%d" % (name, s), tool_call_id="%s-%d-%d" % (name, s, k))
    if k % 10 == 9:
        time.sleep(0.01)            # hooks keep coming while the senders work
assert rt.writer.flush(60)
print("ready", flush=True)
if mode == "hang":
    time.sleep(600)
rt.worker.wake()
deadline = time.monotonic() + 90
while rt.store.outbox.backlog() and time.monotonic() < deadline:
    rt.worker.wake()
    time.sleep(0.05)
left = rt.store.outbox.backlog()
rt.close()
print(json.dumps({"left": left}), flush=True)
"""


def _child(env, name, sessions, pairs, mode="deliver"):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS), json.dumps(env), name,
                             str(sessions), str(pairs), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _delivered(gw):
    """(session, tool_call_id) of every pair the Gateway accepted, in arrival order."""
    out = []
    for rec in list(gw.requests):
        if rec.path == INGEST and rec.status == 200 and isinstance(rec.body, dict):
            out += [(rec.body["session_id"], p["tool_call_id"]) for p in rec.body["tool_pairs"]]
    return out


def _inversions(delivered):
    last, bad = {}, 0
    for session, cid in delivered:
        k = int(cid.rsplit("-", 1)[1])
        if k < last.get(session, -1):
            bad += 1
        last[session] = max(k, last.get(session, -1))
    return bad


def test_two_processes_send_each_row_once_in_order(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.latency_s = 0.02
        env = env_for(tmp_path, gateway_url=gw.url, api_key="k1")
        procs = [_child(env, name, 4, 150) for name in ("a", "b")]
        outs = [p.communicate(timeout=180) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err[-2000:]
            assert json.loads(out.splitlines()[-1])["left"] == 0
        delivered = _delivered(gw)
    pairs = 2 * 4 * 150
    counts = Counter(delivered)
    assert len(counts) == pairs                             # every pair arrived
    duplicates = len(delivered) - len(counts)
    assert duplicates <= pairs * 0.01, "%d duplicates for %d pairs" % (duplicates, pairs)
    assert _inversions(delivered) == 0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_a_sender_killed_mid_delivery_loses_nothing(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        gw.latency_s = 0.3                                  # slow enough to be killed mid-way
        env = env_for(tmp_path, gateway_url=gw.url, api_key="k1", ingest_timeout_ms=1000)
        first = _child(env, "a", 3, 60, mode="hang")
        assert first.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not _delivered(gw) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        got_before = len(set(_delivered(gw)))
        assert got_before < 180
        second = _child(env, "b", 1, 1)                     # the next process delivers the rest
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err[-2000:]
        assert json.loads(out.splitlines()[-1])["left"] == 0
        delivered = _delivered(gw)
    by_session = defaultdict(set)
    for session, cid in delivered:
        by_session[session].add(cid)
    for s in range(3):
        assert by_session["hermes-a-%d" % s] == {"a-%d-%d" % (s, k) for k in range(60)}
