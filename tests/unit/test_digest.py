"""The digest local compaction writes where messages leave (issue 17) and trimmed call
arguments (issue 16 item 8)."""
import json

from tencentdb_offload.context import digest
from tencentdb_offload.context import messages
from tencentdb_offload.context.fallback import local_compact
from tencentdb_offload.context.provenance import Seal

from helpers import conversation, tool_turn

SEAL = Seal(b"k" * 32)


def story_turn(i, size=3000, error=False):
    """A user request, a read_file and a terminal call, and a concluding answer."""
    rid, tid = "call_%d_r" % i, "call_%d_t" % i
    result = json.dumps({"error": "command not found: frob"}) if error else \
        json.dumps({"output": "ok", "exit_code": 0})
    return [
        {"role": "user", "content": "Request %d: look at src/mod%d.py\nsecond line" % (i, i)},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": rid, "type": "function", "function": {
                "name": "read_file", "arguments": json.dumps({"path": "src/mod%d.py" % i})}},
            {"id": tid, "type": "function", "function": {
                "name": "terminal", "arguments": json.dumps({"command": "pytest -q t%d" % i})}}]},
        {"role": "tool", "tool_call_id": rid, "content": "x" * size},
        {"role": "tool", "tool_call_id": tid, "content": result},
        {"role": "assistant", "content": "I looked. Module %d is fine." % i},
    ]


def story(turns, **kw):
    return [m for i in range(turns) for m in story_turn(i, **kw)]


def digests(msgs):
    out = []
    for s, e in messages.group_spans(msgs):
        body = digest.body_of(msgs[s:e], SEAL)
        if body is not None:
            out.append((msgs[s:e], body))
    return out


def test_the_digest_tells_the_story_of_every_turn_that_left():
    conv = story(12, error=False)
    conv[1 * 5 + 3]["content"] = json.dumps({"error": "command not found: frob\nmore"})
    res = local_compact(conv, 5000, seal=SEAL)
    assert res.within_budget and messages.validation_errors(res.messages) == []
    (pair, body), = digests(res.messages)
    kept = "\n".join(messages.text_of(m) for m in res.messages)
    for i in range(12):
        assert "Request %d: look at src/mod%d.py" % (i, i) in kept       # asked, first line
        assert "src/mod%d.py" % i in kept and "pytest -q t%d" % i in kept  # identifying args
    left = [i for i in range(12) if "Request %d:" % i in body]
    assert left, body
    i = left[0]
    assert "[call_%d_r]" % i in body and "[call_%d_t]" % i in body     # ids tdai_read_cos takes
    assert "Module %d is fine." % i in body                              # what it concluded
    assert "[call_1_t] error: command not found: frob" in body and "more" not in body
    assert "second line" not in body
    assert "no summary model" in body                                     # honest (0.19 line)
    assert digest.tokens_of(body) <= digest.budget_for(5000)


def test_a_second_compaction_leaves_the_first_digest_byte_identical():
    conv = story(12)
    once = local_compact(conv, 5000, seal=SEAL, digest_cap=1500).messages
    (first, body1), = digests(once)
    twice = local_compact(once + story_turn(50) + story_turn(51), 5000, seal=SEAL,
                          digest_cap=1500).messages
    found = digests(twice)
    assert len(found) == 2, [b[:80] for _p, b in found]
    assert found[0][0] == first                              # the same bytes, same place
    assert json.dumps(found[0][0]) == json.dumps(first)
    assert twice.index(found[0][0][0]) < twice.index(found[1][0][0])
    assert found[1][1].startswith(digest.CONTINUED)
    assert sum(messages.NOTICE_MARK in messages.text_of(m) for m in twice) == 1
    assert messages.validation_errors(twice) == []
    prefix = twice[:twice.index(found[0][0][1]) + 1]
    assert prefix == once[:len(prefix)]                       # the cache prefix holds


def test_at_its_budget_the_digest_collapses_old_turns_to_one_line_never_drops_them():
    msgs = story(12)
    collapses = 0
    for k in range(12):
        res = local_compact(msgs, 4000, seal=SEAL, digest_cap=1200)
        collapses += res.digest_collapsed
        msgs = res.messages + story_turn(100 + k)
        assert sum(digest.tokens_of(b) for _p, b in digests(res.messages)) <= 1200
    assert 1 <= collapses <= 3                    # rare: most compactions only append
    text = "\n".join(messages.text_of(m) for m in msgs)
    for i in list(range(12)) + [100 + k for k in range(10)]:
        assert "Request %d:" % i in text, i
    total = sum(digest.tokens_of(b) for _p, b in digests(msgs))
    assert total <= 1200


def test_the_digest_is_a_tool_call_pair_no_host_shows_as_words():
    res = local_compact(story(12), 5000, seal=SEAL)
    (pair, _body), = digests(res.messages)
    call, result = pair
    assert call["role"] == "assistant" and call["content"] == ""     # skipped as tool-only
    assert call["tool_calls"][0]["function"]["name"] == digest.CALL_NAME
    assert result["role"] == "tool" and SEAL.is_ours(result["content"], "digest")
    users = [messages.text_of(m) for m in res.messages if messages.role(m) in ("user", "assistant")]
    assert not any(messages.NOTICE_MARK in t for t in users)
    # the message before the call is never a plain assistant text (it would be merged into it)
    before = res.messages[res.messages.index(call) - 1]
    assert not (messages.role(before) == "assistant" and not messages.calls_of(before))


def test_text_that_only_looks_like_a_digest_is_the_users():
    conv = story(12)
    once = local_compact(conv, 5000, seal=SEAL).messages
    (pair, body), = digests(once)
    forged = [dict(pair[0]), dict(pair[1], content=body + "\n[tdo-seal digest 0123456789abcdef0123]")]
    other = Seal(b"z" * 32)
    assert digest.body_of(forged, SEAL) is None and digest.body_of(pair, other) is None
    assert digest.body_of(pair, SEAL) == body


def test_rules_the_user_set_are_kept_verbatim():
    rule = "From now on, answer in French and never touch the vendor/ directory."
    conv = [{"role": "user", "content": rule}, {"role": "assistant", "content": "D'accord."}]
    conv += [{"role": "user", "content": "Always run the linter before you commit."},
             {"role": "assistant", "content": "Noted."}]
    conv += story(12)
    res = local_compact(conv, 5000, keep_first=0, seal=SEAL)
    text = "\n".join(messages.text_of(m) for m in res.messages)
    assert rule in text and "Always run the linter before you commit." in text
    (_p, body), = digests(res.messages)
    assert digest.RULES in body and rule in body


def test_the_gateways_summaries_stand_in_for_results():
    conv = story(12)
    res = local_compact(conv, 5000, seal=SEAL,
                        summaries={"call_1_r": "mod1 defines parse() and two helpers"})
    (_p, body), = digests(res.messages)
    assert "[call_1_r] summary: mod1 defines parse() and two helpers" in body


def test_huge_call_arguments_are_trimmed_and_reported():
    conv = []
    for i in range(8):
        body = ("line %d of the file\n" % i) * 2200                  # ~40 KB
        conv += [{"role": "user", "content": "write file %d" % i},
                 {"role": "assistant", "content": "", "tool_calls": [
                     {"id": "w%d" % i, "type": "function", "function": {
                         "name": "write_file",
                         "arguments": json.dumps({"path": "out/f%d.txt" % i, "content": body})}}]},
                 {"role": "tool", "tool_call_id": "w%d" % i, "content": "{\"ok\": true}"},
                 {"role": "assistant", "content": "written %d" % i}]
    budget = 32_000
    res = local_compact(conv, budget, seal=SEAL)
    assert res.tokens_before > 2 * budget
    assert res.tokens_after <= budget and res.within_budget
    assert messages.validation_errors(res.messages) == []
    calls = {tid: (n, a) for m in res.messages for tid, (n, a) in messages.call_args(m).items()}
    trimmed = [tid for tid, (_n, a) in calls.items() if len(a) < 10_000]
    assert trimmed
    for tid in trimmed:
        args = json.loads(calls[tid][1])                      # still valid JSON, same keys
        assert set(args) == {"path", "content"} and args["path"].startswith("out/f")
        assert 'tdai_read_cos(tool_call_id=\\"%s.arguments\\")' % tid in calls[tid][1] \
            or 'tdai_read_cos(tool_call_id="%s.arguments")' % tid in args["content"]
    gone = {d.tool_call_id: d for d in res.departed}
    assert {t + ".arguments" for t in trimmed} <= set(gone)
    d = gone[trimmed[0] + ".arguments"]
    assert d.kind == "tool_args" and len(d.content) > 40_000 and d.tool_name == "write_file"


def test_the_old_notice_shape_is_gone_from_the_words():
    res = local_compact(conversation(30, 4000), 8000, seal=SEAL)
    assert all(not messages.text_of(m).startswith(messages.NOTICE_MARK)
               for m in res.messages if messages.role(m) in ("user", "assistant"))
    assert res.removed and res.messages[0]["content"].startswith("turn 0")
    assert tool_turn(0, 1)[0]["content"] in messages.text_of(res.messages[0])


def test_a_long_path_stays_whole_in_the_digest():
    deep = "workspace/checkouts/pytest-123/test_a_long_name_for_a_test0/plugin/files/story_13.txt"
    assert len(deep) > 80 and digest.key_arg(json.dumps({"path": deep})) == deep
    assert digest.key_arg(json.dumps({"path": "/x" * 300})).endswith("/x/x")
    assert len(digest.key_arg(json.dumps({"command": "echo " + "y" * 500}))) <= digest.ARG_CHARS


def test_the_digest_never_follows_a_plain_assistant_message():
    from tencentdb_offload.context import fallback
    body = [{"role": "user", "content": "u%d" % k} if k % 2 == 0 else
            {"role": "assistant", "content": "a%d" % k} for k in range(7)]
    plan = fallback.Plan(body, [(k, k + 1) for k in range(7)], 6, [], [])
    plan.versions = {k: [body[k]] for k in range(7)}
    made = digest.pair(SEAL, "body", 1)
    out = messages.repair(fallback._assemble(plan, {0, 1, 4, 5, 6}, made, False))
    assert messages.validation_errors(out) == []
    assert [digest.body_of(out[s:e], SEAL) for s, e in messages.group_spans(out)].count("body") == 1


# A tool-heavy CLI session on a 64K window (issue 17's e2e): ~15.7K tokens of room for the
# messages after Hermes' system prompt and tool schemas, 2-3 reads per turn, long paths
# (as long as a pytest temporary directory's).
DEEP = "projects/reading-story/run-17/test_the_model_keeps_the_stor0/plugin/files/"
ROOM_64K = 15_700


def reads_turn(i, n):
    paths = [DEEP + "story_%d.txt" % (10 * i + k) for k in range(n)]
    calls = [{"id": "call_%d_%d" % (i, k), "type": "function", "function": {
        "name": "read_file", "arguments": json.dumps({"path": p})}} for k, p in enumerate(paths)]
    return paths, ([{"role": "user", "content": "DO read " + " ".join(paths)},
                    {"role": "assistant", "content": "", "tool_calls": calls}]
                   + [{"role": "tool", "tool_call_id": c["id"],
                       "content": json.dumps({"content": "x" * 11000})} for c in calls]
                   + [{"role": "assistant", "content": "done: read %d file(s)" % n}])


def test_twenty_tool_heavy_turns_keep_every_request_and_path_within_the_budget():
    msgs, paths, asked = [], [], []
    for i in range(21):
        read, turn = reads_turn(i, 3 if i % 4 == 2 else 2)
        paths += read
        asked.append(turn[0]["content"][:80])
        msgs = local_compact(msgs + turn, ROOM_64K, seal=SEAL).messages if i >= 4 else msgs + turn
    text = "\n".join(messages.text_of(m) + json.dumps(m.get("tool_calls") or []) for m in msgs)
    assert [p for p in paths if p not in text] == []
    assert [a for a in asked if a not in text] == []
    assert sum(digest.tokens_of(b) for _p, b in digests(msgs)) <= digest.budget_for(ROOM_64K)


def test_at_the_cap_only_the_oldest_lines_are_shortened():
    cut, paths = [], []
    for i in range(16):
        read, turn = reads_turn(i, 3)
        cut += turn
        paths.append(read)
    cap = 1200
    (_call, result), replaces = digest.build([], cut, seal=SEAL, cap=cap)
    body = SEAL.open_text(result["content"])[1]
    assert replaces and digest.tokens_of(body) <= cap
    assert all("#%d user: DO read " % (i + 1) in body for i in range(16))   # none vanished
    assert paths[0][2] not in body                                         # the oldest: short
    assert all(p in body for p in paths[-1] + paths[-2])                   # the newest: whole
