"""Hook rows queued for the writer reach the archive at a normal exit and at session end
(issue 10 item 8)."""

import json
import subprocess
import sys
from pathlib import Path

from tencentdb_offload.archive.store import Store
from tencentdb_offload.hooks import HookHandlers

from helpers import count_archived, env_for, make_engine

TESTS = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from tencentdb_offload.hooks import HookHandlers
rt = plugin.build_runtime(env=json.loads(sys.argv[2]))
hooks = HookHandlers(rt)
for i in range(5000):
    hooks.post_tool_call(tool_name="read_file", args={"i": i}, result="result %d " % i * 40,
                         session_id="s1", tool_call_id="c%d" % i)
print(rt.writer.pending())
"""          # and the interpreter exits normally, the runtime never closed


def test_a_normal_exit_right_after_5000_hook_calls_archives_them_all(tmp_path):
    env = env_for(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(TESTS), json.dumps(env)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    store = Store(tmp_path / "home" / "tencentdb-offload")
    try:
        assert count_archived(store, "s1") == 5000
    finally:
        store.close()


def test_session_end_flushes_queued_rows(tmp_path):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    for i in range(2000):
        hooks.post_tool_call(tool_name="t", args={}, result="r%d" % i, session_id="s1",
                             tool_call_id="c%d" % i)
    eng.on_session_end("s1", [])
    try:
        assert count_archived(rt.store, "s1") == 2000
    finally:
        rt.close()


def test_an_exit_that_cannot_save_queued_rows_says_so(tmp_path):
    """The store cannot be opened (its directory is a file): the rows queued in memory are
    lost at exit, and the process says how many instead of ending in silence."""
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the store directory should be")
    env = env_for(tmp_path, store_dir=str(blocked / "store"))
    child = CHILD.replace("print(rt.writer.pending())", "print('queued')")
    proc = subprocess.run([sys.executable, "-c", child, str(TESTS), json.dumps(env)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if "not saved" in line]
    assert len(said) == 1 and "archive write(s) not saved" in said[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
