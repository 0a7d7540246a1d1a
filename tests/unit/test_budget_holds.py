"""The budget is a hard invariant of every compaction: a long chat of many short turns lands
at or under the target, and its digest stays inside the digest's own budget for any number of
turns (issue 27, item 2)."""

import pytest

from tencentdb_offload.context import digest
from tencentdb_offload.context import messages
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.context.tokens import messages_tokens

from helpers import make_engine

SEAL = Seal(b"b" * 32)


def short_chat(turns, start=0, request="ok thanks %d"):
    out = []
    for i in range(start, start + turns):
        out += [{"role": "user", "content": request % i},
                {"role": "assistant", "content": "Sure: answer %d.\nAnything else?" % i}]
    return out


def digest_bodies(msgs):
    spans = messages.group_spans(msgs)
    return [b for b in (digest.body_of(msgs[s:e], SEAL) for s, e in spans) if b is not None]


@pytest.mark.parametrize("turns", [1_500, 4_000])
def test_many_short_turns_land_at_or_under_the_target_and_stay_there(tmp_path, turns):
    rt, eng = make_engine(tmp_path)          # a 64K window: target and trigger below it
    state = eng.current_state()
    msgs = ([{"role": "system", "content": "You are a helpful assistant."}]
            + short_chat(turns) + [{"role": "user", "content": "and now?"}])
    out = eng.compress(msgs, current_tokens=messages_tokens(msgs))
    after = state.calibrator.to_real(messages_tokens(out))
    assert messages.validation_errors(out) == []
    assert after <= eng.compaction_target() < eng.threshold_tokens
    assert out[-1] == {"role": "user", "content": "and now?"}
    # later turns: at most one more compaction in 40 turns, each landing under the target
    count = eng.compression_count
    for i in range(40):
        out = out + short_chat(1, turns + i)[1:] + short_chat(1, turns + i + 1)[:1]
        now = state.calibrator.to_real(messages_tokens(out))
        if eng.should_compress(now):
            out = eng.compress(out, current_tokens=now)
            assert state.calibrator.to_real(messages_tokens(out)) <= eng.compaction_target()
    assert eng.compression_count - count <= 1
    rt.close()


@pytest.mark.parametrize("request_text", ["ok thanks %d", "never mind, always be brief %d"])
def test_the_digest_stays_in_its_budget_for_any_number_of_turns(request_text):
    cap = digest.budget_for(32_000)
    (_call, result), _replaces = digest.build([], short_chat(6_000, request=request_text),
                                         seal=SEAL, cap=cap)
    body = SEAL.open_text(result["content"])[1]
    assert digest.tokens_of(body) <= cap
    assert "tdai_offload_search" in body and "#1–" in body     # the oldest turns as one range
    assert "#6000 user: " in body                               # the newest by name
    # a later compaction continues the numbering and stays inside the budget
    (_call, again), _ = digest.build([body], short_chat(3_000, 6_000, request_text), seal=SEAL, cap=cap)
    later = SEAL.open_text(again["content"])[1]
    assert digest.tokens_of(later) <= cap and "#9000 user: " in later
    assert digest.last_number([later]) == 9_000


def test_through_the_gateway_too_the_result_lands_at_or_under_the_target(tmp_path):
    from fakes.gateway import FakeGateway
    msgs = ([{"role": "system", "content": "You are a helpful assistant."}]
            + short_chat(4_000) + [{"role": "user", "content": "and now?"}])
    with FakeGateway(api_key="k") as gw:
        gw.tamper = lambda reply: msgs[:1] + msgs[3:]     # a reply that is still over budget
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k")
        out = eng.compress(msgs, current_tokens=messages_tokens(msgs))
        after = eng.current_state().calibrator.to_real(messages_tokens(out))
        stats = eng.get_status()["session_stats"]
        rt.close()
    assert stats["gateway_compactions"] == 1          # its reply was used, then cut further
    assert messages.validation_errors(out) == []
    assert after <= eng.compaction_target() < eng.threshold_tokens
