"""On a full disk, a tool result is trimmed behind a ``tdai_read_cos`` pointer only when its
full text is durable; otherwise it stays whole (issue 27, item 10)."""

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.context import digest
from tencentdb_offload.context.messages import is_tool_result, text_of, tool_results
from tencentdb_offload.context.durable_pointers import pointed, restore, unkept
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.ops.driver import Driver, read_whole
from tencentdb_offload.ops.host_emulation import NOT_SELECTING

from helpers import FullDisk, conversation, env_for, tool_turn
from test_long_session_property import DIGEST_KEY

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
        text = "\n".join(text_of(m) for m in got["out"])
        promised = [tid for m in got["out"] if is_tool_result(m)
                    for tid, body in tool_results(m) if 'tdai_read_cos(tool_call_id="%s")' % tid in body]
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


RECALL_CALL = re.compile(r'tdai_read_cos\((?:tool_call_id|key)=\\?"([^"\\<]+)\\?"\)')


def shown_keys(messages, seal):
    """Every key a recall call or a digest of ours names in ``messages``."""
    keys = set()
    for m in messages:
        for text in [json.dumps(m, ensure_ascii=False)] + [t for _i, t in tool_results(m)]:
            keys |= set(RECALL_CALL.findall(text.replace('\\\\"', '\\"')))
            opened = seal.open_text(text)
            if opened is not None and opened[0] == digest.KIND:
                keys |= {a or b for a, b in DIGEST_KEY.findall(opened[1])}
    return keys


@pytest.mark.parametrize("with_gateway", [False, True])
def test_after_a_full_disk_and_a_restart_every_recall_shown_reads_or_says_not_kept(
        tmp_path, with_gateway):
    """Results archived while the disk is full wait in memory; the compactions meanwhile
    trim and remove them, and the process ends. After the restart every recall the context
    names (a trim's or a Gateway cut's pointer, a digest's key, a call's arguments), and every
    key a compaction's record lists, reads its text; what the archive never held is marked
    not kept instead (issue 51, item 9)."""
    with contextlib.ExitStack() as stack:
        extra = {}
        if with_gateway:
            gw = stack.enter_context(FakeGateway(api_key="k1"))
            extra = dict(gateway_url=gw.url, api_key="k1", instance_id="svc")
        rt = plugin.build_runtime(env=env_for(tmp_path, **extra))
        d = Driver(rt, "s1", 64_000, "You are helpful.", [], host=NOT_SELECTING)

        def turn(i):
            msgs = tool_turn(i, 6_000, calls=3)
            msgs[0]["content"] += " " + "write docs " * (300 if i % 4 == 0 else 1)
            d.run_turn(msgs[0], [(msgs[1], msgs[2:-1]), (msgs[-1], [])])
        for i in range(3):
            turn(i)
        FullDisk(rt)
        done, shown, lost = len(d.compactions), set(), 0
        for i in range(3, 30):
            turn(i)
            shown |= shown_keys(d.messages, rt.seal)
            record = d.engine.current_state().last_compaction
            shown |= set(record.left if record else ())    # status and report list them
            lost += any("not kept" in json.dumps(m, ensure_ascii=False) for m in d.messages)
        assert len(d.compactions) - done >= 3 and not rt.writer.writable
        rt.close()                                  # what waits in memory ends with it
    rt = plugin.build_runtime(env=env_for(tmp_path))
    try:
        engine = plugin.open_session(rt, "s1", 64_000, model="m")
        assert [k for k in sorted(shown) if read_whole(engine, k)[0] is None] == []
    finally:
        rt.close()
    assert shown and lost               # recalls were shown, and losses said where they were


def test_each_mark_naming_a_text_not_held_says_not_kept_in_its_place():
    seal = Seal(b"d" * 32)
    folded = digest.fold_turns(["#1 user: hello (msg-aaaaaaaaaaaa)", "#2 user: more · x [c]"])[0]
    body = (digest.HEADER + "\nTurns:\n" + folded + "\n#3 user: fix it (msg-0123456789ab) · read_file "
            "/a [call_1], read_file /b [call_2]\n   [call_1] error: boom")
    cut_args = json.dumps({"path": "/p", "content": "head [... 9 chars cut; full arguments: "
                           'tdai_read_cos(tool_call_id="call_3.arguments") ...] tail'})
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "call_3", "type": "function",
            "function": {"name": "write_file", "arguments": cut_args}}]}
    trim = {"role": "tool", "tool_call_id": "call_3", "content": seal.seal_text(
        "trim", 'head\n\n[... 5 chars cut; full text: tdai_read_cos(tool_call_id="call_3") ...]\n\nt')}
    lost = {"call_1", "msg-0123456789ab", "call_3.arguments", "call_3"}
    out, changed = unkept(digest.pair(seal, body, 1) + [call, trim], lost, "disk full", seal)
    assert changed == 3
    kind, shown = seal.open_text(out[1]["content"])
    assert kind == digest.KIND and "[call_2]" in shown and "Nothing is lost" not in shown
    assert "[call_1]" not in shown and "msg-0123456789ab" not in shown
    assert "(not kept)" in shown and "[not kept] error: boom" in shown
    assert digest.LOST % (2, "disk full") in shown.splitlines()[1]
    # a range folded now may hold texts not kept: it no longer says all of them are archived
    ranged = next(ln for ln in shown.splitlines() if digest.span_of(ln) == (1, 2))
    assert digest.ALL_KEPT not in ranged and digest.SOME_KEPT in digest.fold_turns([ranged])[0]
    args = json.loads(out[2]["tool_calls"][0]["function"]["arguments"])
    assert "full arguments not kept (disk full)" in args["content"] and "tdai_read_cos" not in args["content"]
    kind, text = seal.open_text(out[3]["content"])
    assert kind == "trim" and "full text not kept (disk full)" in text and "tdai_read_cos" not in text
    assert unkept(out, {"call_2"}, "disk full", seal)[1] == 1       # the rest stays as it was
