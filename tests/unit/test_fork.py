"""A host that forks after loading the plugin: the child archives and delivers (issue 27 item 9).

``fork()`` keeps only the calling thread. Before, the child's hooks queued writes that no
thread committed (0 of 20 archived) while its writer reported healthy, and it would have used
the parent's SQLite connection and sockets. The child now starts its own.
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
import json, os, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from tencentdb_offload.hooks import HookHandlers
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
hooks = HookHandlers(rt)
hooks.post_tool_call(tool_name="cat", args={}, result="before the fork", session_id="parent",
                     tool_call_id="p0")
assert rt.writer.flush(10)
pid = os.fork()
if pid == 0:
    for i in range(20):
        hooks.post_tool_call(tool_name="cat", args={}, result="child result %d" % i,
                             session_id="child", tool_call_id="c%d" % i)
    flushed = rt.writer.flush(10)
    key = rt.registry.for_session_id("child").key
    out = {"flushed": flushed, "archived": rt.store.count_archived(key),
           "writable": rt.writer.stats()["writable"],
           "delivered": rt.flush("child", 15) if rt.worker else None}
    print(json.dumps(out), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
hooks.post_tool_call(tool_name="cat", args={}, result="after the fork", session_id="parent",
                     tool_call_id="p1")
assert rt.writer.flush(10)
print(json.dumps({"parent_archived": rt.store.count_archived(rt.registry.for_session_id("parent").key)}))
rt.close()
"""


def run_host(env):
    proc = subprocess.run([sys.executable, "-c", FORKING_HOST, str(TESTS), json.dumps(env)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    child = next(x for x in lines if "archived" in x)
    parent = next(x for x in lines if "parent_archived" in x)
    return child, parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_archives_everything_and_the_parent_goes_on(tmp_path):
    child, parent = run_host(env_for(tmp_path))
    assert child["flushed"] and child["archived"] == 20 and child["writable"]
    assert parent["parent_archived"] == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_delivers_to_the_gateway(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        child, _parent = run_host(env_for(tmp_path, gateway_url=gw.url, api_key="k1"))
        assert child["archived"] == 20 and child["delivered"], child
        assert len(gw.ingested_pairs("hermes-child")) == 20
