"""A fork while another thread of the host holds one of the hooks' locks (the poll-turn set,
the session counters' lock): the child must not hang on its next hook. The runtime's own locks
were already replaced in the child; these two were not."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import env_for

TESTS = Path(__file__).resolve().parent.parent

HOST = r"""
import json, os, signal, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from tencentdb_offload.session import state
from tencentdb_offload.hooks import HookHandlers
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
hooks = HookHandlers(rt)
lock = hooks._heartbeat_turns._lock if sys.argv[3] == "recent" else state._STATS_LOCK
lock.acquire()              # as a hook thread of another conversation holds it at the fork
pid = os.fork()
if pid == 0:
    signal.alarm(10)        # a hang ends the child with SIGALRM
    hooks.pre_llm_call(session_id="other", user_message="a new turn", conversation_history=[])
    rt.registry.for_session_id("other").stats.as_dict()
    os._exit(0)
_, status = os.waitpid(pid, 0)
lock.release()
print(json.dumps({"exit": status}))
rt.close()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("which", ["recent", "stats"])
def test_a_child_forked_while_a_hook_lock_is_held_does_not_hang(tmp_path, which):
    _child_exits_cleanly(HOST, tmp_path, which)


def _child_exits_cleanly(script, tmp_path, which):
    proc = subprocess.run([sys.executable, "-c", script, str(TESTS), json.dumps(env_for(tmp_path)),
                           which], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"exit": 0}


CONVERSATION_HOST = r"""
import json, os, signal, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from tencentdb_offload.hooks import HookHandlers
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
hooks = HookHandlers(rt)
engine = plugin.open_session(rt, "conv", 64_000, model="m")
state = rt.registry.for_session_id("conv")
lock = {"state": state.lock, "cache": state.cache.lock, "calibrator": state.calibrator._lock}[sys.argv[3]]
lock.acquire()              # a parallel tool call's hook of this conversation holds it at the fork
pid = os.fork()
if pid == 0:
    signal.alarm(10)        # a hang ends the child with SIGALRM
    hooks.post_tool_call(tool_name="cat", args={}, result="r", session_id="conv", tool_call_id="c1")
    hooks.pre_llm_call(session_id="conv", user_message="a new turn", conversation_history=[])
    engine.select_context([{"role": "user", "content": "a new turn"}])
    engine.update_from_response({"prompt_tokens": 1000, "completion_tokens": 10})
    os._exit(0)
_, status = os.waitpid(pid, 0)
lock.release()
print(json.dumps({"exit": status}))
rt.close()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("which", ["state", "cache", "calibrator"])
def test_a_child_forked_while_its_conversations_lock_is_held_does_not_hang(tmp_path, which):
    """The registry's lock was replaced in the child; each conversation's own locks (its
    state, cache clock and calibration) were not, so the child's next hook or response of
    that conversation waited forever."""
    _child_exits_cleanly(CONVERSATION_HOST, tmp_path, which)
