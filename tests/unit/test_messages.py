import json

from tencentdb_offload.context import canvas
from tencentdb_offload.context.provenance import Seal
from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import Calibrator, estimate_text, message_tokens

from helpers import conversation, tool_turn


def test_pairs_openai_and_anthropic():
    for shape in ("openai", "anthropic"):
        turn = tool_turn(1, 10, shape, calls=2)
        assert messages.calls_of(turn[1]) == ["call_1_0", "call_1_1"]
        answered = [tid for m in turn for tid in messages.results_of(m)]
        assert answered == ["call_1_0", "call_1_1"]
        spans = messages.group_spans(turn)
        assert spans[1] == (1, 3 if shape == "anthropic" else 4)
        assert messages.validation_errors(turn) == []


def test_repair_drops_orphans_and_dangling_calls():
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "next", "_offloaded": True},
    ]
    rep = messages.RepairReport()
    out = messages.repair(msgs, rep)
    assert messages.validation_errors(out) == []
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert [c["id"] for c in out[1]["tool_calls"]] == ["a"]
    assert rep["orphan_results_dropped"] == 1
    assert rep["unanswered_calls_removed"] == 2
    assert all(not k.startswith("_") for m in out for k in m)


def test_repair_moves_system_first_and_merges_users():
    msgs = [{"role": "user", "content": "<current_task_context>x</current_task_context>"},
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "question"},
            {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
    out = messages.repair(msgs)
    assert out[0]["role"] == "system" and messages.validation_errors(out) == []
    # the current turn is never merged into: the older user text stays apart from it
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[1]["content"] == msgs[0]["content"] and out[3]["content"] == "question"
    assert "a\n\nb" == out[4]["content"]                   # assistants still merge


def test_repair_anthropic_blocks():
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}},
                                               {"type": "tool_use", "id": "y", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"},
                                         {"type": "tool_result", "tool_use_id": "z", "content": "?"}]}]
    out = messages.repair(msgs)
    assert messages.validation_errors(out) == []
    assert [b["id"] for b in out[1]["content"]] == ["x"]
    assert [b["tool_use_id"] for b in out[2]["content"]] == ["x"]


def test_rewritten_message_loses_api_content():
    msg = {"role": "user", "content": "a", "api_content": "a\n\ninjected", "_db_persisted": True}
    out = messages.with_content(msg, "b")
    assert out == {"role": "user", "content": "b"}


def test_strip_canvas_content_and_api_content():
    seal = Seal.ephemeral()
    block = canvas.sealed(canvas.format_block("001-a.mmd", "flow"), seal)
    msg = {"role": "user", "content": "do it\n\n" + block, "api_content": "do it\n\n" + block}
    out, n = canvas.strip_from(msg, seal)
    assert n == 2 and out["content"] == "do it" and out["api_content"] == "do it"
    only_api = {"role": "user", "content": "do it", "api_content": "do it\n\n" + block}
    out, n = canvas.strip_from(only_api, seal)
    assert n == 1 and out["api_content"] == "do it"
    alone, n = canvas.strip_from({"role": "user", "content": block}, seal)
    assert alone is None and n == 1


def test_token_estimate_cjk_and_ascii():
    prose = "The quick brown fox jumps over the lazy dog. " * 10        # o200k: 100 tokens
    assert 70 <= estimate_text(prose) <= 110                          # short words: low end
    assert estimate_text("中" * 150) == 101                            # ~1.5 CJK chars a token
    data = '{"id": 12345, "ok": true, "tags": ["a", "b"]}' * 10          # punctuation-heavy
    assert estimate_text(data) > len(data) / 4
    big = "word " * 100_000
    assert abs(estimate_text(big) - 100 * estimate_text("word " * 1000)) < 1000  # sampled, linear
    call = {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "x" * 400}}]}
    assert message_tokens(call) > 60


def test_calibrator_fits_overhead_and_slope():
    cal = Calibrator()
    assert cal.to_real(1000) == 1000
    cal.observe(10_000, 15_000)           # one point: proportional
    assert cal.to_real(10_000) == 15_000
    cal.observe(20_000, 25_000)           # two points: 5000 overhead, slope 1
    assert abs(cal.slope - 1.0) < 1e-6 and cal.overhead == 5000
    assert cal.to_estimate(25_000) == 20_000


def test_validation_catches_bad_sequences():
    assert messages.validation_errors([]) == ["empty"]
    assert messages.validation_errors([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    bad = conversation(1, 5)[:2]      # call without its result
    assert any("unanswered" in e for e in messages.validation_errors(bad))


def test_repair_merges_empty_content_beside_blocks():
    # an assistant with no content next to one with a block list: merged, never a TypeError
    # (local_compact repairs first, so this failure left the whole list uncompacted)
    said = [{"type": "text", "text": "said"}]
    for pair in ([None, said], [said, None], [None, 7], [7, None]):
        msgs = [{"role": "user", "content": "q"}] + [
            {"role": "assistant", "content": c} for c in pair] + [{"role": "user", "content": "next"}]
        out = messages.repair(msgs)
        assert [m["role"] for m in out] == ["user", "assistant", "user"]
        assert messages.validation_errors(out) == []


def test_compress_with_empty_assistant_beside_blocks(tmp_path):
    from helpers import make_engine
    _, eng = make_engine(tmp_path)
    msgs = conversation(20, 3000)
    msgs[9:9] = [{"role": "assistant", "content": None},
                 {"role": "assistant", "content": [{"type": "text", "text": "said"}]}]
    out = eng.compress(msgs, force=True)
    assert out is not msgs and len(out) < len(msgs)
    assert messages.validation_errors(out) == []


def test_compress_with_a_roleless_message(tmp_path):
    # a None or numeric role used to reach the archive key (role + text): TypeError, the whole
    # compaction failed; now it reads as no role, is dropped from the list and archived
    from helpers import make_engine
    rt, eng = make_engine(tmp_path)
    msgs = conversation(20, 3000)
    msgs[4:4] = [{"role": None, "content": "odd words ROLELESS1"},
                 {"role": 5, "content": "odd words ROLELESS2"}]
    out = eng.compress(msgs, force=True)
    assert not [e for e in rt.errors if "failed" in e]
    assert len(out) < len(msgs) and messages.validation_errors(out) == []
    for word in ("ROLELESS1", "ROLELESS2"):
        found = json.loads(eng.handle_tool_call("tdai_offload_search", {"query": word}))
        assert found["count"] == 1
