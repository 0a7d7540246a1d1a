"""Providers that reuse tool-call ids across turns (``call_0`` every turn, Kimi's
``functions.read_file:0``): every result stays recallable, and every pointer the model is
shown reads back exactly the result it stands for; unique ids keep their pointers as before."""

import json
import re

from tencentdb_offload.context import departures
from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import messages_tokens
from tencentdb_offload.hooks import HookHandlers

from helpers import count_archived, make_engine

TURNS = 60
TRIM_POINTER = re.compile(r'tool_call_id="([^"]+)"')
DIGEST_CALL = re.compile(r"read_file /f(\d+) \[([^\]]+)\]")


def turns(n, ids, size=6000):
    out = []
    for i in range(n):
        half = "lorem ipsum " * (size // 24)
        body = "MARKER_%d %s MIDDLE_%d %s" % (i, half, i, half)
        out += [{"role": "user", "content": "turn %d read file %d" % (i, i)},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": ids(i), "type": "function",
                     "function": {"name": "read_file", "arguments": json.dumps({"path": "/f%d" % i})}}]},
                {"role": "tool", "tool_call_id": ids(i), "content": body},
                {"role": "assistant", "content": "read %d" % i}]
    return out


def compacted(tmp_path, ids):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    msgs = turns(TURNS, ids)
    originals = {}
    for m in msgs:
        if m["role"] == "tool":
            originals[int(m["content"].split()[0][7:])] = m["content"]
            hooks.post_tool_call(tool_name="read_file", args={}, result=m["content"],
                                 session_id="s1", tool_call_id=m["tool_call_id"])
    msgs.append({"role": "user", "content": "now summarise"})
    out = eng.compress(msgs, current_tokens=messages_tokens(msgs))
    assert messages.validation_errors(out) == []
    rt.flush_writes(2.0)
    return rt, eng, out, originals


def read(eng, key):
    return json.loads(eng.handle_tool_call("tdai_read_cos", {"key": key, "limit": 100_000}))


def pointers(out):
    """(turn, key) for every trim pointer and digest line the model is shown."""
    found = []
    for m in out:
        text = messages.text_of(m)
        if messages.role(m) == "tool" and messages.TRIM_MARK in text:
            found.append((int(text.split()[0][7:]), TRIM_POINTER.search(text).group(1)))
        found += [(int(n), key) for n, key in DIGEST_CALL.findall(text)]
    return found


def test_every_result_of_a_reused_id_reads_back_through_its_pointer(tmp_path):
    rt, eng, out, originals = compacted(tmp_path, lambda i: "call_0")
    shown = pointers(out)
    assert len({n for n, _k in shown}) > TURNS // 2       # most results point at the archive
    for n, key in shown:
        got = read(eng, key)
        assert got.get("content") == originals[n], (n, key)
    gone = [n for n in originals if not any("MIDDLE_%d " % n in messages.text_of(m) for m in out)]
    assert gone
    for n in gone:                                      # each one found, and read back whole
        hits = json.loads(eng.handle_tool_call("tdai_offload_search",
                                               {"query": "MIDDLE_%d" % n, "limit": 20}))
        keys = [h["key"] for h in hits["results"] if "MIDDLE_%d " % n in h["snippet"]]
        assert len(keys) == 1, n
        assert read(eng, keys[0])["content"] == originals[n]
    rt.close()


def test_the_bare_id_reads_the_first_result_and_names_the_others(tmp_path):
    rt, eng, _out, originals = compacted(tmp_path, lambda i: "call_0")
    got = read(eng, "call_0")
    assert got["content"] == originals[0]
    assert len(got["other_keys"]) == 20 and "reused" in got["note"]
    assert read(eng, got["other_keys"][0])["content"] == originals[TURNS - 1]
    rt.close()


def test_unique_ids_keep_their_pointers(tmp_path):
    rt, eng, out, originals = compacted(tmp_path, lambda i: "call_%d" % i)
    shown = pointers(out)
    assert shown and all(key == "call_%d" % n for n, key in shown)
    assert not any("~" in messages.text_of(m) for m in out)
    assert "other_keys" not in read(eng, "call_3")
    rt.close()


def test_a_duplicate_is_the_same_id_and_text(tmp_path):
    rt, eng = make_engine(tmp_path)
    hooks = HookHandlers(rt)
    for text in ("same", "same", "other"):
        hooks.post_tool_call(tool_name="t", result=text, session_id="s1", tool_call_id="c")
    rt.flush_writes(2.0)
    assert count_archived(rt.store, eng.current_state().key) == 2
    rt.close()


def test_a_result_rewritten_to_the_same_length_has_left():
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]}
    before = [call, {"role": "tool", "tool_call_id": "c1", "content": "abcdef"}]
    after = [call, {"role": "tool", "tool_call_id": "c1", "content": "ABCDEF"}]
    gone = departures.find(before, after)
    assert [d.content for d in gone.items] == ["abcdef"]
    assert departures.find(before, before).items == []


def test_a_reused_id_from_an_earlier_process_still_points_at_its_own_text(tmp_path):
    # a per-turn CLI: each turn is a new process, and the provider says call_0 every turn
    earlier, _e = make_engine(tmp_path)
    HookHandlers(earlier).post_tool_call(tool_name="read_file", args={}, result="FIRST " * 3000,
                                         session_id="s1", tool_call_id="call_0")
    assert earlier.flush_writes(5.0)
    earlier.close()
    rt, eng = make_engine(tmp_path)             # the next turn's process: its history lost the
    msgs = turns(8, lambda i: "c%d" % i)        # first result in a compaction; then call_0 again
    second = "SECOND " * 3000
    msgs += [{"role": "user", "content": "read it again"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_0", "type": "function",
                  "function": {"name": "read_file", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "call_0", "content": second},
             {"role": "assistant", "content": "read"}] + turns(8, lambda i: "d%d" % i)
    HookHandlers(rt).post_tool_call(tool_name="read_file", args={}, result=second,
                                    session_id="s1", tool_call_id="call_0")
    assert rt.flush_writes(5.0)
    msgs.append({"role": "user", "content": "now summarise"})
    out = eng.compress(msgs, current_tokens=messages_tokens(msgs), force=True)
    shown = [k for m in out for k in TRIM_POINTER.findall(messages.text_of(m)) if k.startswith("call_0")]
    assert shown, "the second call_0 result was expected to be trimmed or listed"
    for key in shown:
        assert read(eng, key)["content"] == second, key
    rt.close()
