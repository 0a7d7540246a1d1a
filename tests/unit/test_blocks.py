"""``context/blocks.py``: every spelling of text, a tool call and a tool result reads as one
typed Block, odd shapes included; and no product module outside it reads a block's ``type``."""

from __future__ import annotations

import re
from pathlib import Path

from tencentdb_offload.context import blocks
from tencentdb_offload.context import messages
from tencentdb_offload.context import tokens
from tencentdb_offload.context.blocks import Kind

ROOT = Path(__file__).resolve().parents[2]


def kinds(msg):
    return [b.kind for b in blocks.blocks_of(msg)]


def test_string_content_is_one_text_block():
    (b,) = blocks.blocks_of({"role": "user", "content": "hello"})
    assert (b.kind, b.text, b.raw) == (Kind.TEXT, "hello", "hello")


def test_list_content_reads_each_spelling():
    msg = {"role": "assistant", "content": [
        "plain", {"type": "text", "text": "typed"},
        {"type": "tool_use", "id": "u1", "name": "read_file", "input": {"path": "/a"}},
        {"type": "image", "source": {}}, {"type": "thinking", "thinking": "hmm"}]}
    got = list(blocks.blocks_of(msg))
    assert [b.kind for b in got] == [Kind.TEXT, Kind.TEXT, Kind.TOOL_USE, Kind.OTHER, Kind.OTHER]
    use = got[2]
    assert (use.id, use.name, use.args, use.in_calls) == ("u1", "read_file", {"path": "/a"}, False)
    assert got[3].is_image and got[4].thinking == "hmm" and got[4].text == ""
    assert messages.calls_of(msg) == ["u1"]
    assert messages.text_of(msg) == 'plain\ntyped\nread_file({"path": "/a"})'


def test_openai_tool_calls_and_tool_messages():
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"d": 1}'}}
    asst = {"role": "assistant", "content": "looking", "tool_calls": [call]}
    got = list(blocks.blocks_of(asst))
    assert [b.kind for b in got] == [Kind.TEXT, Kind.TOOL_USE]
    assert (got[1].id, got[1].name, got[1].args, got[1].in_calls, got[1].raw) == (
        "c1", "ls", '{"d": 1}', True, call)
    tool = {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
    (res,) = blocks.blocks_of(tool)
    assert (res.kind, res.id, res.text, res.raw) == (Kind.TOOL_RESULT, "c1", "a.txt", tool)
    assert messages.results_of(tool) == ["c1"] and messages.is_tool_result(tool)
    assert list(messages.tool_results(tool)) == [("c1", "a.txt")]
    assert messages.call_args(asst) == {"c1": ("ls", '{"d": 1}')}


def test_anthropic_results_with_nested_content():
    msg = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": [
        {"type": "text", "text": "line one"}, "line two",
        {"type": "tool_result", "tool_use_id": "deep", "content": "nested"}]}]}
    (b,) = blocks.blocks_of(msg)
    assert (b.kind, b.id, b.text) == (Kind.TOOL_RESULT, "u1", "line one\nline two\nnested")
    assert messages.is_tool_result(msg) and messages.results_of(msg) == ["u1"]
    mixed = {"role": "user", "content": msg["content"] + [{"type": "text", "text": "and a note"}]}
    assert not messages.is_tool_result(mixed) and messages.results_of(mixed) == ["u1"]


def test_odd_shapes_read_without_raising():
    assert list(blocks.blocks_of(None)) == [] and list(blocks.blocks_of("not a message")) == []
    assert list(blocks.blocks_of({"role": "assistant", "content": None})) == []
    assert kinds({"role": "user", "content": [None, 7, ["nested", "list"]]}) == [Kind.OTHER] * 3
    assert kinds({"role": "user", "content": {"a": 1}}) == [Kind.OTHER]
    assert kinds({"role": "assistant", "tool_calls": ["junk", {"function": "x"}, None]}) == [
        Kind.OTHER, Kind.TOOL_USE, Kind.OTHER]
    # a call without an id is no call to answer; a result without an id answers none
    assert messages.calls_of({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}) == []
    assert messages.results_of({"role": "tool", "content": "x"}) == [""]
    odd = {"type": "tool_result", "tool_use_id": None, "content": 5}
    b = blocks.read_block(odd)
    assert (b.kind, b.id, b.text) == (Kind.TOOL_RESULT, "", "")
    assert blocks.read_block({"type": 3, "text": "t"}).kind is Kind.OTHER


def test_lone_surrogates_pass_through_unchanged():
    bad = "half \ud800 a pair"
    msg = {"role": "user", "content": [{"type": "text", "text": bad}]}
    (b,) = blocks.blocks_of(msg)
    assert b.text == bad and messages.text_of(msg) == bad
    assert tokens.message_tokens(msg) > tokens.PER_MESSAGE + 1
    assert blocks.as_text({"k": bad}) == '{"k": "half \ud800 a pair"}'


def test_calls_of_lists_openai_calls_first_and_only_for_assistants():
    msg = {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "name": "n"}],
           "tool_calls": [{"id": "c", "function": {"name": "m", "arguments": "{}"}}]}
    assert messages.calls_of(msg) == ["c", "u"]
    assert messages.calls_of(dict(msg, role="user")) == []


def test_the_fast_ids_are_the_blocks_ids_for_every_shape():
    """``use_ids`` and ``result_ids`` (what calls_of and results_of ask) skip building blocks;
    they must agree with them."""
    entries = [None, "junk", 7, {}, {"id": None}, {"id": ""}, {"id": 0}, {"id": 5},
               {"id": "c1", "function": {"name": "f"}}, {"id": "c2", "function": "x"}]
    items = [None, "text", {"type": "tool_use"}, {"type": "tool_use", "id": None},
             {"type": "tool_use", "id": ""}, {"type": "tool_use", "id": 0},
             {"type": "tool_use", "id": "u1", "name": "n"}, {"type": "text", "text": "t", "id": "x"},
             {"type": "tool_result", "tool_use_id": "r"}]
    shapes = [{"role": "assistant", "tool_calls": entries[i:i + 3], "content": items[j:j + 3]}
              for i in range(len(entries)) for j in range(len(items))]
    shapes += [{"role": "assistant", "tool_calls": "not a list", "content": {"a": 1}},
               {"role": "assistant", "content": "text only"}, {"role": "user", "tool_calls": entries},
               {"role": "assistant"}, None, "a string"]
    results = [{"type": "tool_result"}, {"type": "tool_result", "tool_use_id": None},
               {"type": "tool_result", "tool_use_id": 0}, {"type": "tool_result", "tool_use_id": "r1"},
               {"type": "text", "text": "t", "tool_use_id": "x"}, "text", None]
    shapes += [{"role": "user", "content": results[j:j + 3]} for j in range(len(results))]
    shapes += [{"role": "tool", "tool_call_id": v, "content": "x"} for v in (None, "", 0, 5, "t1")]
    shapes += [{"role": "user", "content": "text"}, {"role": "assistant", "content": results}]
    for msg in shapes:
        assert blocks.use_ids(msg) == [b.id for b in blocks.tool_uses(msg)], msg
        assert blocks.result_ids(msg) == [b.id for b in blocks.tool_results(msg)], msg
        content = msg.get("content") if isinstance(msg, dict) else None
        assert blocks.only_results(msg) == (messages.role(msg) == "tool" or (
            messages.role(msg) == "user" and isinstance(content, list) and bool(content) and
            all(b.kind is Kind.TOOL_RESULT for b in blocks.content_blocks(content)))), msg


def test_tokens_count_every_spelling_and_images_flat():
    text = "some words to count " * 20
    as_str = tokens.message_tokens({"role": "user", "content": text})
    as_block = tokens.message_tokens({"role": "user", "content": [{"type": "text", "text": text}]})
    in_result = tokens.message_tokens({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "u", "content": text}]})
    as_tool = tokens.message_tokens({"role": "tool", "tool_call_id": "u", "content": text})
    assert as_str == as_block == in_result == as_tool
    image = tokens.message_tokens({"role": "user", "content": [{"type": "image_url", "image_url": {}}]})
    assert image == tokens.PER_MESSAGE + 1 + tokens.IMAGE_TOKENS
    call = {"id": "c", "function": {"name": "write", "arguments": '{"body": "%s"}' % text}}
    use = {"type": "tool_use", "id": "c", "name": "write", "input": {"body": text}}
    assert (tokens.message_tokens({"role": "assistant", "tool_calls": [call]}) ==
            tokens.message_tokens({"role": "assistant", "content": [use]}))


def test_as_blocks_turns_text_into_one_block():
    assert blocks.as_blocks("hi") == [{"type": "text", "text": "hi"}]
    assert blocks.as_blocks(None) == [] and blocks.as_blocks([1]) == [1]


# a block's ``type`` read (a tool call's ``"function"`` type is the call's shape, not a block's)
BLOCK_TYPE = re.compile(r"""(\.get\(\s*["']type["']|\[\s*["']type["']\s*\])(?!.*["']function["'])""")
# a block kind compared as a literal (archive and departure kinds are compared as ``kind``)
KIND_LITERAL = re.compile(r"""(==|!=|\bin\s*[(\[]?)\s*["'](tool_use|tool_result)["']""")


def block_checks(line: str) -> bool:
    return bool(BLOCK_TYPE.search(line) or (KIND_LITERAL.search(line) and "kind" not in line))


def test_only_blocks_py_reads_a_content_block_type():
    """Block kinds are read in context/blocks.py alone (archive kinds such as "tool_result"
    are another vocabulary: ``kind`` attributes and columns, never a block's ``type`` key)."""
    offenders = []
    for path in sorted(ROOT.glob("**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/", "bench/")) or rel == "context/blocks.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if block_checks(line):
                offenders.append("%s:%d: %s" % (rel, n, line.strip()))
    assert offenders == []


def test_the_guard_sees_a_type_check():
    assert block_checks('if b.get("type") == "tool_use":')
    assert block_checks("kind = block['type']")
    assert block_checks('    if kind in ("tool_use", "tool_result"):') is False   # a kind, not a block
    assert block_checks('if t == "tool_result":')
    assert not block_checks('ArchiveItem("tool_result", text)')
    assert not block_checks('if item["kind"] == "tool_result":')
    assert not block_checks('call.get("type", "function") == "function"')
