"""The current user turn is the user's own message, byte for byte, whatever the compaction
does around it and whatever the turn starts with (issue 27, items 8 and 11)."""

import copy

from fakes.gateway import FakeGateway
from tencentdb_offload.context import messages

from helpers import conversation, make_engine, tool_turn

# a user who pastes the plugin's own notice and asks about it: our prefix, not our seal
PASTED = ("[tencentdb-offload] 14 earlier message(s) were moved out of the context by a local "
          "compaction; " + "they can be read back with tdai_read_cos. " * 8
          + "— QUESTION: what does it mean?")
LONG_TURN = "Please refactor the scheduler so that " + "each job keeps its own timer, " * 12


def users_with(out, text):
    return [m for m in out if messages.role(m) == "user" and text[:60] in messages.text_of(m)]


def test_a_turn_that_starts_with_our_prefix_is_never_trimmed(tmp_path):
    rt, eng = make_engine(tmp_path)
    conv = conversation(10, 6000, calls=2)
    turn = tool_turn(99, 20_000, calls=400)     # the current turn's step alone is over budget
    turn[0] = {"role": "user", "content": PASTED}
    out = eng.compress(conv + turn[:-1], current_tokens=70_000)
    rt.close()
    assert messages.validation_errors(out) == []
    assert [m["content"] for m in users_with(out, PASTED)] == [PASTED]


def only_deletes_replies(msgs):
    """A /compact reply that only deletes: the assistant replies of the chat turns before
    the current one are gone, so older requests sit right before it."""
    last = max(i for i, m in enumerate(msgs) if messages.role(m) == "user" and "scheduler" in messages.text_of(m))
    return [m for i, m in enumerate(msgs)
            if not (last - 6 <= i < last and messages.role(m) == "assistant" and not m.get("tool_calls"))]


def test_a_reply_that_only_deletes_never_glues_requests_into_the_current_turn(tmp_path):
    chat = []
    for i in range(3):
        chat += [{"role": "user", "content": "ok thanks %d" % i},
                 {"role": "assistant", "content": "You're welcome %d." % i}]
    before = ([{"role": "system", "content": "be careful"}] + conversation(30, 3000, calls=2)
              + chat + [{"role": "user", "content": LONG_TURN}])
    with FakeGateway(api_key="k") as gw:
        gw.tamper = only_deletes_replies
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k", compact_ratio="0.5")
        eng.update_from_response({"prompt_tokens": 60_000})
        out = eng.compress(copy.deepcopy(before), current_tokens=60_000)
        stats = eng.get_status()["session_stats"]
        rt.close()
    assert stats["gateway_compactions"] == 1        # the deleting reply was used
    assert messages.validation_errors(out) == []
    assert [m["content"] for m in users_with(out, LONG_TURN)] == [LONG_TURN]
    older = "\n".join(messages.text_of(m) for m in out if messages.role(m) == "user")
    assert "ok thanks 2" in older       # the older request stays in the context, apart


def test_repair_keeps_the_current_turn_apart_from_an_older_request():
    msgs = [{"role": "user", "content": "first"}, {"role": "user", "content": "second"},
            {"role": "user", "content": "now"},
            {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
    out = messages.repair(msgs)
    assert messages.validation_errors(out) == []
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert out[0]["content"] == "first\n\nsecond" and out[2] == {"role": "user", "content": "now"}


def test_replay_tells_our_summaries_by_their_seal_not_by_our_prefix():
    from tencentdb_offload.context.provenance import Seal
    from tencentdb_offload.ops.replay import original_stream
    seal = Seal(b"r" * 32)
    ours = seal.seal_text("digest", "[tencentdb-offload] Digest of earlier turns.")
    rows = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
            {"role": "assistant", "content": ours}, {"role": "user", "content": PASTED}]
    kept, _copies, summaries, _runs = original_stream(rows, [0, 1, 2, 3], seal)
    assert summaries == 1 and ours not in [m["content"] for m in kept]
    assert [m["content"] for m in kept if m["role"] == "user"] == ["first", PASTED]


def test_replay_drops_our_digest_pair_whole():
    """Hermes 0.19 persists a compacted list: a digest travels as a tool pair (call + sealed
    result); the replay's original stream drops both, or the call stands unanswered (found
    with COMPACT_RATIO 0.35: "calls ['tdo_digest_1'] unanswered")."""
    from tencentdb_offload.context.provenance import Seal
    from tencentdb_offload.ops.replay import original_stream
    seal = Seal(b"r" * 32)
    digest = seal.seal_text("digest", "[tencentdb-offload] Digest of earlier turns.")
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "tdo_digest_1", "type": "function",
         "function": {"name": "tdai_offload_search", "arguments": "{}"}}]}
    rows = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second"}, call,
            {"role": "tool", "tool_call_id": "tdo_digest_1", "content": digest},
            {"role": "assistant", "content": "done"}]
    kept, _copies, summaries, _runs = original_stream(rows, [0, 1, 2, 3, 4, 5], seal)
    assert summaries == 2 and messages.validation_errors(kept) == []
    assert [m["content"] for m in kept] == ["first", "ok", "second", "done"]
    # a read whose trimmed copy (sealed) follows its original: the call is the user's, it stays
    read = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}
    trimmed = seal.seal_text("trim", "head [... trimmed ...] tail")
    rows = [{"role": "user", "content": "read it"}, read,
            {"role": "tool", "tool_call_id": "c1", "content": "the whole file"},
            {"role": "tool", "tool_call_id": "c1", "content": trimmed}]
    kept, _copies, _summaries, _runs = original_stream(rows, [0, 1, 2, 3], seal)
    assert [m.get("content") for m in kept] == ["read it", "", "the whole file"]
    assert messages.validation_errors(kept) == []
