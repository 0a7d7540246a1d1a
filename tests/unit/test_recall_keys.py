"""Every archived item has a key the model can read it back by, in full (issue 19 item 6), and
the tools say they hold this conversation's compacted items, not long-term memory (issue 20
item 5)."""

import json
import re

from tencentdb_offload.archive.recall import READ, SCHEMAS, SEARCH
from tencentdb_offload.archive.store import ArchiveItem
from tencentdb_offload.context.item_key import PATTERN, message_key

from helpers import archive_items, conversation, make_engine, tool_turn


def call(eng, name, **args):
    return json.loads(eng.handle_tool_call(name, args))


def test_a_removed_message_is_read_back_in_full_by_the_key_derived_before_it_was_written(tmp_path):
    rt, eng = make_engine(tmp_path)
    long_user = "the design we agreed on: " + "每个细节 detail " * 3000   # ~36K chars, not ASCII
    conv = [{"role": "user", "content": long_user},
            {"role": "assistant", "content": "noted"}] + conversation(60, 1500)
    key = message_key("user", long_user)          # what a notice can show before the write
    assert PATTERN.fullmatch(key)
    eng.compress(conv, current_tokens=70_000)
    rt.flush()
    assert rt.store.holds(rt.registry.get("s1").key, key)
    first = call(eng, READ, key=key)
    assert first["ok"] and first["kind"] == "message" and first["role"] == "user"
    assert first["total_chars"] == len(long_user) and first["key"] == key
    text, nxt = first["content"], first["next_offset"]
    while nxt is not None:                         # paged like a tool result
        page = call(eng, READ, key=key, offset=nxt)
        text, nxt = text + page["content"], page["next_offset"]
    assert text == long_user
    assert call(eng, READ, tool_call_id=key)["content"] == first["content"]  # either argument
    hits = call(eng, SEARCH, query="design agreed")
    assert hits["results"][0]["key"] == key and len(hits["results"][0]["snippet"]) <= 500
    assert hits["read_in_full"] == READ + "(key=<key>)"
    rt.close()


def test_keys_are_scoped_to_the_conversation(tmp_path):
    rt, eng = make_engine(tmp_path)
    item = ArchiveItem("message", "a private note", role="user")
    archive_items(rt.store, "other-conversation", [item])
    got = call(eng, READ, key=item.readable_key)
    assert not got["ok"] and "nothing archived" in got["error"]
    archive_items(rt.store, rt.registry.get("s1").key, [item])
    assert call(eng, READ, key=item.readable_key)["content"] == "a private note"
    result = ArchiveItem("tool_result", "out", tool_call_id="call_9", tool_name="t")
    assert result.readable_key == "call_9"
    rt.close()


def test_the_tools_say_they_hold_this_conversations_compacted_items_not_memories():
    for schema in SCHEMAS:
        text = schema["description"]
        assert "this conversation" in text.lower() or "THIS conversation" in text
        assert "memory_tencentdb_" in text and "not long-term memories" in text
    read = next(s for s in SCHEMAS if s["name"] == READ)
    assert "key" in read["parameters"]["properties"] and "msg-" in read["description"]


def test_the_digest_key_of_two_user_turns_in_a_row_reads_back(tmp_path):
    # a turn that got no answer (an interrupted or failed request) leaves two user messages in
    # a row; the compaction merges them as the host sends them, and the digest line names the
    # merged text's key
    rt, eng = make_engine(tmp_path)
    first = "first ask, never answered: " + "the plan in detail " * 1200
    conv = conversation(20, 3000) + [{"role": "user", "content": first},
                                     {"role": "user", "content": "second ask"},
                                     {"role": "assistant", "content": "ok"}]
    conv += sum((tool_turn(100 + i, 3000) for i in range(60)), [])
    out = eng.compress(conv, current_tokens=200_000)
    rt.flush()
    shown = [(k, str(m.get("content"))) for m in out
             for k in re.findall(r"msg-[0-9a-f]{12}", str(m.get("content")))]
    merged = [k for k, text in shown if text.find("first ask") >= 0]
    assert merged, "the merged turn names no key"
    for key, _text in shown:
        got = call(eng, READ, key=key)
        assert got["ok"], (key, got["error"])
    rt.close()


def test_the_digest_key_of_a_message_said_again_later_reads_back(tmp_path):
    # the user repeats an earlier request word for word; the older copy leaves with its turn,
    # the newer stays: the digest line of the older one names the text's key
    rt, eng = make_engine(tmp_path)
    again = "run the whole test suite again and report every failure in detail"
    conv = conversation(20, 3000) + [{"role": "user", "content": again},
                                     {"role": "assistant", "content": "ran it"}]
    conv += sum((tool_turn(100 + i, 3000) for i in range(60)), []) + [
        {"role": "user", "content": again}]
    out = eng.compress(conv, current_tokens=200_000)
    rt.flush()
    key = message_key("user", again)
    assert key in "".join(str(m.get("content")) for m in out[:-1])
    got = call(eng, READ, key=key)
    assert got["ok"] and got["content"] == again, got
    rt.close()


def test_keys_of_digest_lines_shortened_at_the_cap_read_back(tmp_path):
    # at the digest's cap, turn lines are cut to their width: "[call_52_…", "(msg-d15f2…"
    rt, eng = make_engine(tmp_path)
    out = eng.compress(conversation(60, 6000), current_tokens=200_000)
    rt.flush()
    shown = "".join(str(m.get("content")) for m in out)
    cut = re.findall(r"\[([^\]\s]+…)", shown) + re.findall(r"\((msg-[0-9a-f]+…)", shown)
    assert cut, "no shortened line"
    for key in cut:
        got = call(eng, READ, key=key)
        assert got["ok"] and got["key"].startswith(key[:-1]), (key, got)
    seven = message_key("user", "turn 7: please do step 7")
    assert call(eng, READ, key=seven[:10] + "...")["key"] == seven
    assert not call(eng, READ, key="call_5…")["ok"]      # several items begin so: none is guessed
    assert not call(eng, READ, key="ca…")["ok"]
    rt.close()
