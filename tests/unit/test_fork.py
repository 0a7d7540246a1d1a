"""A host that forks after loading the plugin: the child says so plainly and never hangs
(issue 27 item 9).

``fork()`` keeps only the calling thread. Before, the child's hooks queued writes that no
thread committed (0 of 20 archived) while its writer reported healthy. Reopening the store in
the child is no cure: a lock SQLite held in a parent thread at the fork stays held, and the
child hung in ``sqlite3.connect`` (seen 1 run in 8 under load). So the child uses neither
SQLite nor the Gateway (the test makes both fail loudly if touched), goes on locally, and
status says why nothing is archived there.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakes.gateway import FakeGateway

from helpers import env_for

TESTS = Path(__file__).resolve().parent.parent

FORKING_HOST = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from helpers import count_archived
from tencentdb_offload.hooks import HookHandlers
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
hooks = HookHandlers(rt)
hooks.post_tool_call(tool_name="cat", args={}, result="before the fork", session_id="parent",
                     tool_call_id="p0")
assert rt.writer.flush(10)
pid = os.fork()
if pid == 0:
    import socket, sqlite3
    def touched(*_a, **_k):
        raise AssertionError("the forked child used SQLite or the network")
    sqlite3.connect = touched
    socket.create_connection = touched
    started = time.monotonic()
    for i in range(20):
        hooks.post_tool_call(tool_name="cat", args={}, result="child result %d" % i,
                             session_id="child", tool_call_id="c%d" % i)
    flushed = rt.writer.flush(2)
    status = rt.status()
    out = {"flushed": flushed, "seconds": time.monotonic() - started,
           "store_error": status["store_error"], "warnings": status["warnings"],
           "mode": status["mode"], "writable": rt.writer.stats()["writable"],
           "gateway": "gateway" in status, "errors": list(rt.errors)}
    print(json.dumps(out), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
hooks.post_tool_call(tool_name="cat", args={}, result="after the fork", session_id="parent",
                     tool_call_id="p1")
assert rt.writer.flush(10)
print(json.dumps({"parent_archived": count_archived(rt.store, rt.registry.for_session_id("parent").key)}))
rt.close()
"""

def run_host(env):
    proc = subprocess.run([sys.executable, "-c", FORKING_HOST, str(TESTS), json.dumps(env)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    child = next(x for x in lines if "store_error" in x)
    parent = next(x for x in lines if "parent_archived" in x)
    return child, parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_says_it_archives_nothing_and_the_parent_goes_on(tmp_path):
    child, parent = run_host(env_for(tmp_path))
    assert not child["flushed"] and not child["writable"], child       # never claimed healthy
    assert "forked" in child["store_error"] and any("forked" in w for w in child["warnings"])
    assert child["seconds"] < 10, child                                   # nothing waited on a lock
    assert parent["parent_archived"] == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_sends_nothing_and_the_parent_still_delivers(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        child, parent = run_host(env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        assert child["mode"] == "local" and not child["gateway"], child
        assert gw.ingested_pairs("hermes-child") == []
        assert parent["parent_archived"] == 2


SUBPROCESS_WHILE_A_HOOK_HOLDS_A_LOCK = r"""
import json, logging, subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
held, release = threading.Event(), threading.Event()
def hook_on_another_thread():           # a parallel tool call's hook, inside the tally
    with rt.counters._lock:
        held.set()
        release.wait(30)
t = threading.Thread(target=hook_on_another_thread, daemon=True)
t.start()
held.wait(5)
started = time.monotonic()
# what Hermes' shell and file tools do: a child with a preexec_fn, which runs the at-fork
# handlers between fork and exec
done = subprocess.run(["sh", "-c", "echo child-ran"], preexec_fn=lambda: None,
                      capture_output=True, text=True, timeout=20)
release.set()
print(json.dumps({"seconds": time.monotonic() - started, "out": done.stdout,
                  "err": done.stderr}), flush=True)
rt.close()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_tool_subprocess_never_waits_on_a_lock_another_hook_holds(tmp_path):
    """The at-fork handler runs in every child the host starts with a preexec_fn, between
    fork and exec. It took the counters' lock: with a parallel tool call's hook inside it on
    another thread, the child hung before exec and the tool call (and the turn) with it."""
    proc = subprocess.run([sys.executable, "-c", SUBPROCESS_WHILE_A_HOOK_HOLDS_A_LOCK, str(TESTS),
                           json.dumps(env_for(tmp_path))], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["out"].strip() == "child-ran" and out["seconds"] < 10, out
    assert "forked" not in out["err"] + proc.stderr, "a child that only execs logs nothing"


CHILD_EXITS_NORMALLY = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
load_plugin()
from tencentdb_offload.host import wiring
os.environ.update(json.loads(sys.argv[2]))
rt = wiring.shared_runtime()            # as register() builds it: closed by an exit hook
pid = os.fork()
if pid == 0:
    sys.exit(0)                         # a normal exit: the exit hooks run in the child too
_, status = os.waitpid(pid, 0)
print(json.dumps({"child_status": status}), flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_that_exits_normally_closes_quietly(tmp_path):
    """The child's writer is never started when the child writes nothing; closing it at
    exit joined that thread ('cannot join thread before it is started'), a traceback on
    the child's stderr from the runtime's exit hook."""
    proc = subprocess.run([sys.executable, "-c", CHILD_EXITS_NORMALLY, str(TESTS),
                           json.dumps(env_for(tmp_path))], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1])["child_status"] == 0
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
