"""One judge of a request: the product's validator, ``replay`` (a session file read as replay
reads it, judged as the driver judges every request) and the e2e harness's wire validator
give the same verdict on the same sequences; a Gateway reply's shape check is the same judge."""

from __future__ import annotations

import json

import pytest

from tencentdb_offload.context.messages import validation_errors
from tencentdb_offload.context import validate
from tencentdb_offload.memory_gateway.reply_shape import shape_problems
from tencentdb_offload.ops import driver, replay
from tencentdb_offload.ops.env import CliError
from tests.e2e import harness


def call(cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


OK = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
    {"role": "tool", "tool_call_id": "a", "content": "x"},
    {"role": "tool", "tool_call_id": "b", "content": "y"},
    {"role": "assistant", "content": "done"},
    {"role": "user", "content": "next"},
]
USE = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "r"}

VALID = {
    "openai calls": OK,
    "consecutive assistants": OK[:6] + [{"role": "assistant", "content": "more"}],
    "a call after an assistant turn (hosts merge the two)": OK[:2] + [
        {"role": "assistant", "content": "let me look"},
        {"role": "assistant", "content": "", "tool_calls": [call("c")]},
        {"role": "tool", "tool_call_id": "c", "content": "z"}],
    "anthropic blocks": [{"role": "user", "content": "u"},
                         {"role": "assistant", "content": [{"type": "text", "text": "t"}, USE]},
                         {"role": "user", "content": [RESULT]}],
    "images pass": [{"role": "user", "content": [{"type": "text", "text": "see"},
                                                 {"type": "image_url", "image_url": {"url": "x"}}]}],
}
INVALID = {
    "empty": [],
    "late system": OK[:2] + [{"role": "system", "content": "s2"}],
    "orphan tool": OK[:2] + [{"role": "tool", "tool_call_id": "a", "content": "x"}],
    "unanswered call": OK[:4] + OK[5:],
    "wrong id": OK[:3] + [{"role": "tool", "tool_call_id": "zz", "content": "x"}] + OK[4:],
    "answered twice": OK[:5] + [OK[4]] + OK[5:],
    "two users": OK + [{"role": "user", "content": "again"}],
    "text between call and result": OK[:3] + [{"role": "user", "content": "?"}] + OK[3:],
    "a call id twice in one message": OK[:2] + [
        {"role": "assistant", "content": "", "tool_calls": [call("d"), call("d")]},
        {"role": "tool", "tool_call_id": "d", "content": "x"}],
    "anthropic unanswered": [{"role": "user", "content": "u"},
                             {"role": "assistant", "content": [USE]},
                             {"role": "user", "content": "no"}],
    "anthropic stray result": [{"role": "user", "content": "u"},
                               {"role": "assistant", "content": "hi"},
                               {"role": "user", "content": [dict(RESULT, tool_use_id="t9")]}],
    "unknown role": [{"role": "user", "content": "u"}, {"role": "robot", "content": "beep"}],
    "tool message without its id": OK[:3] + [{"role": "tool", "content": "x"}] + OK[4:],
    "a call without a function": OK[:2] + [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "e", "type": "function"}]},
        {"role": "tool", "tool_call_id": "e", "content": "x"}],
    "non-text content": [{"role": "user", "content": 42}],
    "a block without a type": [{"role": "user", "content": [{"text": "untyped"}]}],
}


def replay_verdict(messages, tmp_path) -> bool:
    """True when replay would find the session valid: read from a file as replay reads it,
    judged by the validator the driver applies to every request."""
    path = tmp_path / "session.json"
    path.write_text(json.dumps(messages))
    try:
        msgs, _system, _src = replay.load_source(str(path), None)
    except CliError:
        return False           # replay refuses a file that holds no valid messages
    return not driver.messages.validation_errors(msgs)


# what Hermes' pre-request sanitizer repairs in a stored history (a call without a result gets
# a stub, a result that answers no call is left out): replay reads a session file so too, and
# the requests it then builds are judged by the one validator
REPAIRED_ON_LOAD = {"orphan tool", "unanswered call", "wrong id", "anthropic unanswered",
                    "anthropic stray result"}


@pytest.mark.parametrize("name", sorted(VALID) + sorted(INVALID))
def test_product_replay_and_harness_agree(name, tmp_path):
    messages = VALID.get(name, INVALID.get(name))
    expected = name in VALID
    assert (not validate.validation_errors(messages)) is expected, validate.validation_errors(messages)
    assert (not validation_errors(messages)) is expected
    assert (not harness.sequence_problems(messages)) is expected
    assert replay_verdict(messages, tmp_path) is (expected or name in REPAIRED_ON_LOAD)


def test_they_are_one_function():
    assert validation_errors is validate.validation_errors is driver.messages.validation_errors


def test_non_objects_are_judged_not_raised():
    assert validate.validation_errors([{"role": "user", "content": "a"}, "junk", None])
    assert harness.sequence_problems([None])


def test_a_gateway_reply_is_judged_by_the_same_shape_check():
    for name in ("unknown role", "tool message without its id", "a call without a function",
                 "non-text content", "a block without a type"):
        bad = [m for m in INVALID[name] if validate.message_problem(m)]
        assert bad and shape_problems(bad) == "1 " + validate.message_problem(bad[0])
    # a reply may not hold developer turns, a request may
    dev = [{"role": "developer", "content": "rules"}, {"role": "user", "content": "u"}]
    assert validate.validation_errors(dev) == [] and shape_problems(dev) == "1 messages with an invalid role"
