"""A user message that carries tool results beside the user's own text (Anthropic shape):
its results are archived by their ids, so the pointer a trim gives reads them back, and the
user's text is archived as a message of its own."""

from __future__ import annotations

import json

from tencentdb_offload.context import departures

from helpers import conversation, make_engine


def mixed(result: str, words: str):
    return [{"role": "user", "content": "please read it"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "mx1", "name": "read_file", "input": {"path": "/a"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "mx1", "content": result},
                {"type": "text", "text": words}]},
            {"role": "assistant", "content": "done"}]


def test_a_trimmed_result_beside_text_reads_back_by_its_id(tmp_path):
    _, eng = make_engine(tmp_path)
    msgs = mixed("MIXRESULT " + "w " * 6000, "also note this") + conversation(20, 3000, "anthropic")
    out = eng.compress(msgs, force=True)
    assert 'tdai_read_cos(tool_call_id=\\"mx1\\")' in json.dumps(out)   # trimmed, pointing at it
    read = json.loads(eng.handle_tool_call("tdai_read_cos", {"tool_call_id": "mx1"}))
    assert read["ok"] and read["content"].startswith("MIXRESULT")


def test_a_departed_mixed_message_leaves_as_result_and_words():
    gone = departures.find(mixed("the result", "my own words"), [])
    kinds = {(d.kind, d.tool_call_id, d.content) for d in gone.items}
    assert ("tool_result", "mx1", "the result") in kinds
    assert ("message", "", "my own words") in kinds
    assert gone.left_ids == {"mx1"}
