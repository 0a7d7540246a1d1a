"""What the model asked to read back in the current turn reaches it whole (the CI failure of
tests/e2e/test_side_by_side_cli.py on Hermes 0.19: a recall turn whose two pages did not fit
the room under the target was trimmed to a pointer back to itself, so the markers were never
read). Whole up to a ceiling under the trigger; past it the budget wins and they are trimmed."""

import json

from fakes.gateway import FakeGateway
from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import messages_tokens

from helpers import conversation, make_engine

WINDOW = 64_000
TRIGGER = int(WINDOW * 0.75)        # the default threshold
TARGET = int(WINDOW * 0.5)          # the default landing


def recall_turn(pages: int, chars: int):
    """The current turn: the user asks, the model calls tdai_read_cos ``pages`` times, each
    result a page of ``chars`` characters with a marker in its middle."""
    ids = ["rc_%d" % k for k in range(pages)]
    turn = [{"role": "user", "content": "read back what you read first"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": cid, "type": "function", "function": {
                    "name": "tdai_read_cos", "arguments": json.dumps({"tool_call_id": "old_%s" % cid})}}
                for cid in ids]}]
    for k, cid in enumerate(ids):
        half = "line of the archived file %d\n" % k * (chars // 56)
        turn.append({"role": "tool", "tool_call_id": cid,
                     "content": json.dumps({"ok": True, "text": half + "MARKER-%d\n" % k + half})})
    return turn


def compact(tmp_path, turn):
    rt, eng = make_engine(tmp_path, context_length=WINDOW)
    before = conversation(8, 12_000, calls=2) + turn
    out = eng.compress(before, current_tokens=messages_tokens(before))
    rt.close()
    assert messages.validation_errors(out) == []
    return out


def results(out):
    return {tid: text for m in out if messages.is_tool_result(m) for tid, text in messages.tool_results(m)}


def test_read_backs_over_the_target_room_stay_whole_under_the_trigger(tmp_path):
    turn = recall_turn(2, 80_000)               # together over what the target leaves them
    assert TARGET * 0.9 < messages_tokens(turn) < TRIGGER * 0.8
    out = compact(tmp_path, turn)
    got = results(out)
    assert all("MARKER-%d" % k in got.get("rc_%d" % k, "") for k in range(2)), \
        "a page the model asked for was cut before it read it"
    assert messages_tokens(out) <= TRIGGER


def test_read_backs_over_the_trigger_are_trimmed_to_the_budget(tmp_path):
    turn = recall_turn(3, 150_000)              # alone far over the trigger
    out = compact(tmp_path, turn)
    assert messages_tokens(out) <= TARGET
    assert set(results(out)) >= {"rc_0", "rc_1", "rc_2"}     # every pair kept, trimmed


def cut_read_backs(msgs):
    """A /compact reply that truncates the biggest results, the current turn's included (what
    the real Gateway does at its emergency level)."""
    return [dict(m, content=m["content"][:2000]) if m.get("role") == "tool" and len(m["content"]) > 20_000
            else m for m in msgs]


def test_a_gateway_that_cuts_a_read_back_is_repaired(tmp_path):
    turn = recall_turn(2, 30_000)
    before = conversation(8, 12_000, calls=2) + turn
    with FakeGateway(api_key="k") as gw:
        gw.tamper = cut_read_backs
        rt, eng = make_engine(tmp_path, context_length=WINDOW, gateway_url=gw.url, api_key="k")
        out = eng.compress(before, current_tokens=messages_tokens(before))
        stats = eng.get_status()["session_stats"]
        rt.close()
    assert stats["gateway_compactions"] == 1        # the Gateway's reply was used, repaired
    assert messages.validation_errors(out) == []
    got = results(out)
    assert all("MARKER-%d" % k in got.get("rc_%d" % k, "") for k in range(2))
    assert messages_tokens(out) <= TRIGGER
