import random

import pytest

from tencentdb_offload.context import messages
from tencentdb_offload.context.fallback import local_compact
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.context.tokens import messages_tokens

from helpers import conversation, random_conversation, tool_turn

SEAL = Seal(b"fallback-tests-key")


def ids_in(msgs):
    return {tid for m in msgs for tid in messages.results_of(m)}


def test_keeps_head_current_turn_and_fits():
    conv = conversation(30, 4000)
    budget = 8000
    res = local_compact(conv, budget, seal=SEAL)
    assert res.tokens_after <= budget and res.within_budget
    assert messages.validation_errors(res.messages) == []
    assert res.messages[0] == conv[0]                       # first user message kept
    assert res.messages[-1]["content"] == conv[-1]["content"]  # newest message kept
    notices = [m for m in res.messages if messages.NOTICE_MARK in messages.text_of(m)]
    assert len(notices) == 1 and "tdai_read_cos" in messages.text_of(notices[0])
    assert res.removed and all(r in conv for r in res.removed)


def test_trims_long_results_with_pointer():
    conv = conversation(3, 9000)
    res = local_compact(conv, 100_000, trim_chars=2000, seal=SEAL)
    trimmed = [m for m in res.messages if m.get("role") == "tool" and "trimmed by tencentdb-offload" in m["content"]]
    assert trimmed and all("tdai_read_cos(tool_call_id=" in m["content"] for m in trimmed)
    # the current turn's result is not trimmed when it fits
    assert "trimmed" not in res.messages[-2]["content"]
    assert res.trimmed


def test_heartbeat_pairs_dropped_first():
    conv = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "hb", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "HEARTBEAT.md"}'}}]},
            {"role": "tool", "tool_call_id": "hb", "content": "beat"}] + conversation(2, 10)
    res = local_compact(conv, 100_000, seal=SEAL)
    assert "hb" not in ids_in(res.messages)
    assert any(m.get("tool_call_id") == "hb" for m in res.removed)


def test_single_huge_current_turn_still_fits():
    conv = tool_turn(0, 400_000, calls=3)
    res = local_compact(conv, 3000, seal=SEAL)
    assert res.tokens_after <= 3000
    assert messages.validation_errors(res.messages) == []
    assert res.messages[0]["content"].startswith("turn 0")


def test_old_notice_is_replaced_not_stacked():
    conv = conversation(30, 4000)
    once = local_compact(conv, 8000, seal=SEAL).messages
    twice = local_compact(once + tool_turn(99, 4000), 8000, seal=SEAL).messages
    assert sum(messages.NOTICE_MARK in messages.text_of(m) for m in twice) == 1


@pytest.mark.parametrize("seed", range(3))
def test_property_random_conversations(seed):
    rng = random.Random(seed)
    for _ in range(250):
        conv = random_conversation(rng)
        assert messages.validation_errors(conv) == [], conv
        budget = rng.choice([300, 2000, 8000, 32000, 200000])
        # below any real target, or the current turn's own words (never altered) taking half
        # of it: valid and best effort, not a promise
        last_user = next((m for m in reversed(conv) if messages.is_real_user(m)), None)
        own = messages_tokens([m for m in conv if m.get("role") == "system"] + [last_user or {}])
        tiny = budget < 1000 or own > budget // 2
        res = local_compact(conv, budget, keep_first=rng.choice([0, 3, 5]),
                            trim_chars=rng.choice([500, 2000]), seal=SEAL)
        errors = messages.validation_errors(res.messages)
        assert errors == [], (errors, budget)
        assert res.tokens_after == messages_tokens(res.messages)
        assert res.tokens_after <= budget or tiny, (res.tokens_after, budget)
        assert res.within_budget == (res.tokens_after <= budget)
        # nothing lost: every result left out or trimmed is in removed/trimmed
        gone = ids_in(conv) - ids_in(res.messages)
        kept_away = ids_in(res.removed)
        assert gone <= kept_away
        # the newest real user message survives
        if last_user is not None and "HEARTBEAT" not in messages.text_of(last_user):
            assert any(messages.text_of(last_user)[:40] in messages.text_of(m) for m in res.messages)



def test_the_newest_steps_results_are_trimmed_as_few_as_fit():
    """Three fresh results over the room by one: the newest two stay whole and one is trimmed
    (trimming all three would hide every one from the model that asked for them)."""
    conv = conversation(6, 4000) + tool_turn(9, 24000, calls=3)[:-1]     # mid-turn: no answer yet
    fresh = ["call_9_0", "call_9_1", "call_9_2"]
    res = local_compact(conv, 12000, seal=SEAL)
    whole = [m["tool_call_id"] for m in res.messages if m.get("tool_call_id") in fresh
             and "trimmed by tencentdb-offload" not in m["content"]]
    assert res.within_budget and res.tokens_after <= 12000
    assert whole == ["call_9_1", "call_9_2"]
    assert ids_in(res.messages) >= set(fresh) and messages.validation_errors(res.messages) == []
    # with room for none whole, all are trimmed, as before
    tight = local_compact(conv, 4500, seal=SEAL)
    assert tight.within_budget and not any(
        m.get("tool_call_id") in fresh and "trimmed by tencentdb-offload" not in m["content"]
        for m in tight.messages)
