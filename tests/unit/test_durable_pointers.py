"""On a full disk, a tool result is trimmed behind a ``tdai_read_cos`` pointer only when its
full text is durable; otherwise it stays whole (issue 27, item 10)."""

import json
import subprocess
import sys
from pathlib import Path

import tencentdb_offload as plugin
from tencentdb_offload.context import messages as M
from tencentdb_offload.context.durable_pointers import pointed, restore
from tencentdb_offload.context.provenance import Seal

from helpers import conversation, env_for

TESTS = Path(__file__).resolve().parent.parent

FULL_DISK = r"""
import json, os, resource, signal, sys
sys.path.insert(0, sys.argv[1])
from conftest import load_plugin
plugin = load_plugin()
from helpers import conversation, env_for
from pathlib import Path
from tencentdb_offload.archive.writer import StoreWriter
StoreWriter.RETRY_MIN_S = 0.05
rt = plugin.build_runtime(env=env_for(Path(sys.argv[2])))
eng = plugin.open_session(rt, "s1", 64_000, model="m")
rt.flush_writes()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # EFBIG instead of being killed
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
size = max(os.path.getsize(str(p)) for p in Path(rt.store.path).parent.glob("*") if p.is_file())
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, hard))    # the disk is "full"
conv = conversation(40, 6_000, calls=5)                            # 200 tool results
out = eng.compress(conv, current_tokens=120_000)
print(json.dumps({"key": eng.current_state().key, "out": out, "errors": list(rt.errors)}))
os._exit(0)                                           # a crash: no retry after the limit
"""


def test_on_a_full_disk_every_pointer_given_resolves_after_a_restart(tmp_path):
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(TESTS), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    rt = plugin.build_runtime(env=env_for(tmp_path))            # the restart
    try:
        text = "\n".join(M.text_of(m) for m in got["out"])
        promised = [tid for m in got["out"] if M.is_tool_result(m)
                    for tid, body in M.tool_results(m) if 'tdai_read_cos(tool_call_id="%s")' % tid in body]
        assert [t for t in promised if not rt.store.holds(got["key"], t)] == []
        assert "call_0_0" in text or promised              # whole, or behind a pointer that reads
        assert any("kept whole" in e for e in got["errors"]), got["errors"]
    finally:
        rt.close()


def test_restore_puts_back_only_the_results_the_archive_lacks():
    seal = Seal(b"d" * 32)
    before = conversation(1, 50, calls=2)
    after = [dict(m) for m in before]
    for m in after:
        if m.get("role") == "tool":
            m["content"] = seal.seal_text("trim", "short " + m["tool_call_id"])
    assert sorted(pointed(after, seal)) == ["call_0_0", "call_0_1"]
    out, restored = restore(after, before, seal, lambda tid: tid == "call_0_0")
    assert restored == 1
    tools = {m["tool_call_id"]: m["content"] for m in out if m.get("role") == "tool"}
    assert tools["call_0_1"] == before[3]["content"] and "short call_0_0" in tools["call_0_0"]
