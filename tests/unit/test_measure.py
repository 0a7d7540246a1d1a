"""The yardstick of the side-by-side e2e suites (tests/e2e/measure.py) and the fakes' parts it
relies on: the fake model's prompt-cache model and multi-id recall, the fake Gateway's slow
/compact (over a real socket)."""
from __future__ import annotations

import json
import sys
import threading
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))

import measure  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, PrefixCache, parse_command, prompt_tokens  # noqa: E402
from tests.fakes.gateway import REAL_COMPACT_SECONDS_PER_100K, FakeGateway  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
SYSTEM = {"role": "system", "content": "S" * 4000}


def body(*messages, tools=TOOLS):
    return {"tools": tools, "messages": [SYSTEM] + list(messages)}


def user(text):
    return {"role": "user", "content": text}


def result(cid, text):
    return {"role": "tool", "tool_call_id": cid, "content": text}


def call(cid):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}


def ex(b, auxiliary=False, verb="read"):
    return SimpleNamespace(body=b, auxiliary=auxiliary, command=(verb, []))


# ─── the cache model ─────────────────────────────────────────────────────────

def test_prefix_cache_reads_the_longest_prefix_of_any_earlier_request():
    cache = PrefixCache()
    a = body(user("read a"), call("c1"), result("c1", "A" * 8000))
    assert cache.add(a) == 0
    grown = body(user("read a"), call("c1"), result("c1", "A" * 8000), user("next"))
    assert cache.add(grown) == (prompt_tokens(grown) * 4 - len("next")) // 4
    # a rewrite of the result keeps the common start of that message, and nothing after it
    pruned = body(user("read a"), call("c1"), result("c1", "A" * 100 + " [trimmed]"), user("next"))
    assert cache.add(pruned) == (prompt_tokens(a) * 4 - 8000 + 100) // 4
    # the first request is still a prefix candidate after the rewrite: going back is cached
    assert cache.add(grown) == prompt_tokens(grown)
    # other tool schemas: at most their common start is cached, no message (tools come first)
    assert PrefixCache().add(a) == 0
    assert 0 < cache.add(body(user("read a"), tools=TOOLS * 2)) <= len(json.dumps(TOOLS)) // 4


def test_a_ttl_expires_the_cache_after_a_longer_pause_only():
    first = body(user("read a"), call("c1"), result("c1", "A" * 8000))
    grown = body(user("read a"), call("c1"), result("c1", "A" * 8000), user("next"))
    timed = [SimpleNamespace(body=first, auxiliary=False, at=100.0, command=("read", [])),
             SimpleNamespace(body=grown, auxiliary=False, at=102.0, command=("read", [])),  # within the TTL
             SimpleNamespace(body=grown, auxiliary=True, at=110.0, command=("", []))]  # after a longer pause
    never = measure.conversation(timed, window=64_000, trigger=48_000)
    expiring = measure.conversation(timed, window=64_000, trigger=48_000, ttl=5)
    assert never.cached > expiring.cached > 0 and expiring.cost > never.cost
    assert expiring.cached == measure.conversation(timed[:2], window=64_000, trigger=48_000).cached


def test_fake_model_reports_cached_tokens_only_when_asked():
    b = body(user("hello"))
    for report, cached in ((True, prompt_tokens(b)), (False, None)):
        with FakeLLM(report_cache=report) as llm:
            llm.respond("/v1/chat/completions", b)
            second = llm.respond("/v1/chat/completions", b)
        assert second.usage.get("prompt_tokens_details", {}).get("cached_tokens") == cached


def test_the_summariser_answers_at_the_length_the_hosts_prompt_asks_for():
    """The built-in's summary prompt says "Target ~N tokens": a fake answering one line would
    land its compactions smaller than a real summariser does."""
    asked = {"messages": [user("Summarise these turns.\nTarget ~2400 tokens. Be CONCRETE.")]}
    with FakeLLM() as llm:
        summary = llm.respond("/v1/chat/completions", asked).reply_text
        title = llm.respond("/v1/chat/completions", {"messages": [user("Generate a title")]}).reply_text
    assert abs(len(summary) / 4 - 2400) <= 1
    assert 0 < len(title) < 100


def test_recall_takes_several_ids_in_one_batch():
    assert parse_command("DO recall call_1 call_7") == ("recall", ["call_1", "call_7"])
    with FakeLLM() as llm:
        reply = llm.respond("/v1/chat/completions", body(user("DO recall call_1 call_7")))
    assert [(n, a) for _, n, a in reply.reply_tool_calls] == [
        ("tdai_read_cos", {"tool_call_id": "call_1"}), ("tdai_read_cos", {"tool_call_id": "call_7"})]


# ─── the figures ─────────────────────────────────────────────────────────────

def test_the_read_turns_cost_leaves_out_other_turns_and_keeps_their_auxiliary_calls():
    """A recall turn is not the same work in both engines (the built-in has no recall tool);
    a summariser call made during a read turn is that turn's cost."""
    r1 = body(user("DO read a"))
    r2 = body(user("DO read a"), call("c1"), result("c1", "R" * 4000))
    r3 = body(user("DO read a"), call("c1"), result("c1", "R" * 4000), user("DO recall c1"))
    whole = measure.conversation([ex(r1), ex(r2), ex(r2, auxiliary=True, verb="")],
                                 window=64_000, trigger=48_000)
    assert whole.read_cost == whole.cost > 0 and whole.other_turns == 0
    more = measure.conversation([ex(r1), ex(r2), ex(r2, auxiliary=True, verb=""), ex(r3, verb="recall")],
                                window=64_000, trigger=48_000)
    assert more.read_cost == whole.read_cost < more.cost and more.other_turns == 1
    row = measure.Row("plugin", 64_000, 48_000, 2, 2, [more])
    assert "provider cost of the read turns (the same work in both engines)" in row.lines()
    assert "provider cost of the read turns (the same work in both engines)" not in \
        measure.Row("plugin", 64_000, 48_000, 1, 1, [whole]).lines()


def test_appends_are_no_rewrites_and_a_compaction_is_one():
    r1 = body(user("t1"))
    r2 = body(user("t1"), call("c1"), result("c1", "R" * 40000))
    r3 = body(user("t1"), call("c1"), result("c1", "R" * 40000), {"role": "assistant", "content": "done"},
              user("t2"))
    compacted = body(user("summary of t1"), user("t2"))           # fewer messages
    trimmed = body(user("summary of t1"), user("t2 and more"))    # same count, a changed message
    aux = ex({"messages": [user("summarise " + "R" * 4000)]}, auxiliary=True)
    exchanges = [ex(r1), ex(r2), ex(r3), aux, ex(compacted), ex(trimmed)]
    c = measure.conversation(exchanges, window=12000, trigger=11000)
    assert (c.requests, c.auxiliary, c.rewrites, c.compactions) == (5, 1, 2, 1)
    assert c.over_window == 0 and c.largest == prompt_tokens(r3)
    assert c.after_rewrite_max == max(prompt_tokens(compacted), prompt_tokens(trimmed))
    assert c.over_trigger_after_compaction == 0
    assert measure.conversation(exchanges, window=12000, trigger=1000).over_trigger_after_compaction == 1
    assert measure.conversation(exchanges, window=1000, trigger=1000).over_window == 5
    # cost: every request's prompt, cached part at 0.1, the rest at 1.25 (aux included)
    cache, expected = PrefixCache(), 0.0
    for e in exchanges:
        cached = cache.add(e.body)
        expected += 0.1 * cached + 1.25 * (prompt_tokens(e.body) - cached)
    assert abs(c.cost - expected) < 1e-6 and 0 < c.cached / c.prompt < 1
    # offered: what the conversation would hold if nothing were dropped
    assert c.offered >= prompt_tokens(r3)


def test_offered_load_counts_each_read_once_at_its_largest(tmp_path):
    files = {}
    for cid, size in (("c1", 2000), ("c2", 4001)):
        files[cid] = tmp_path / f"{cid}.txt"
        files[cid].write_text("x" * size)
    r1 = body(user("t1"))
    r2 = body(user("t1"), call("c1"), result("c1", "R" * 4000))           # seen in full: 1000
    r3 = body(user("t1"), call("c1"), result("c1", "R" * 40), user("t2"))  # trimmed later: still 1000
    reads = {cid: str(p) for cid, p in files.items()}                      # c2 never reached the model
    c = measure.conversation([ex(r1), ex(r2), ex(r3)], window=64000, trigger=48000, reads=reads)
    # the call ("read_file{}", 3) and "t2" (1) are new messages; c1 at 1000, c2 at its file's 1001
    assert c.offered == prompt_tokens(r1) + 3 + 1 + 1000 + 1001
    # c1 reached the model whole once (4,000 of its 2,000 bytes); c2 never did
    assert c.unseen == 1 and c.unseen_tokens == 1001
    # reading c2 again writes its 1,001 tokens once more
    row = measure.Row("plugin", 64000, 48000, 1, 1, [c])
    assert row.cost_with_reads_again == c.cost + 1.25 * 1001


def test_a_failed_hidden_bar_shows_each_conversations_requests(tmp_path):
    """One failing run must say where results were hidden: each request's size, the reads
    it carried and how many of them not whole, per conversation of both engines."""
    path = tmp_path / "c1.txt"
    path.write_text("x" * 4000)
    cut = [ex(body(user("t1"))), ex(body(user("t1"), call("c1"))), ex(body(), auxiliary=True),
           ex(body(user("t1"), call("c1"), result("c1", "R" * 40)))]
    plugin = measure.analyse("plugin", {"a": cut}, window=64000, trigger=48000, turns=1,
                             answered=1, reads={"a": {"c1": str(path)}})
    whole = cut[:2] + [ex(body(user("t1"), call("c1"), result("c1", "x" * 4000)))]
    builtin = measure.analyse("builtin", {"a": whole}, window=64000, trigger=48000, turns=1,
                              answered=1, reads={"a": {"c1": str(path)}})
    assert plugin.convs[0].trace[2:] == ["aux", "%.1fk/1-1" % (prompt_tokens(cut[3].body) / 1000)]
    with pytest.raises(AssertionError) as failed:
        measure.assert_hides_no_more(plugin, builtin)
    assert "plugin 1 hidden, 0 rewrites: " in str(failed.value) and "/1-1" in str(failed.value)
    measure.assert_hides_no_more(builtin, plugin)           # 0 <= 1: passes


def test_the_lossless_floor_is_what_showing_every_message_once_costs():
    """An append-only conversation that shows every message whole pays at least the floor
    (each offered token written once); one that cuts a fresh read before sending it can pay
    less: the floor tells the two apart."""
    whole = [ex(body(user("t1"))), ex(body(user("t1"), call("c1"), result("c1", "R" * 40000))),
             ex(body(user("t1"), call("c1"), result("c1", "R" * 40000), user("t2")))]
    row = measure.analyse("plugin", {"a": whole}, window=64000, trigger=48000, turns=2, answered=2)
    assert row.floor == 1.25 * row.total("offered") and row.cost >= row.floor
    cut = [ex(body(user("t1"))), ex(body(user("t1"), call("c1"), result("c1", "R" * 400)))]
    big = measure.analyse("x", {"a": cut}, window=64000, trigger=48000, turns=1, answered=1,
                          reads={"a": {"c1": str(Path(__file__))}})
    assert big.cost < big.floor, (big.cost, big.floor)
    assert "lossless cost floor (each offered token written once)" in row.lines()


def test_fewest_rewrites_rewrite_as_late_as_the_ceiling_allows():
    # 10 fixed, 30 a step, ceiling 90: 10+30+30 fits, the third step needs a rewrite, ...
    assert measure.fewest_rewrites(10, 10, [30] * 7, 90) == 3
    assert measure.fewest_rewrites(10, 10, [30, 30], 90) == 0
    assert measure.fewest_rewrites(10, 10, [], 90) == 0
    # what a rewrite cannot drop (tool schemas, system prompt) leaves less room each time
    assert measure.fewest_rewrites(50, 40, [30, 30, 30], 90) == 2


def test_fewest_rewrites_of_a_conversation_count_whole_reads_at_the_headroom(tmp_path):
    """Each read adds its file's size where it first appears, even when a request carried it
    cut: the floor is what an engine that shows every read whole must rewrite."""
    window = 4000                                     # headroom 3,600 tokens
    paths = {}
    for n in range(4):
        paths[f"c{n}"] = tmp_path / f"c{n}.txt"
        paths[f"c{n}"].write_text("x" * 4000)         # 1,000 tokens each
    msgs, exchanges = [user("t")], [ex(body(user("t")))]
    for n in range(4):
        msgs = msgs + [call(f"c{n}"), result(f"c{n}", "R" * 40)]     # every one cut on the wire
        exchanges.append(ex(body(*msgs)))
    c = measure.conversation(exchanges, window=window, trigger=3000,
                             reads={k: str(v) for k, v in paths.items()})
    # ~1,000 fixed (system prompt, tools) + 1,000 + 1,000 fits the 3,600; the third read needs
    # a rewrite (down to the fixed part), the fourth fits after it
    assert c.rewrites == 0 and c.fewest_rewrites == 1
    row = measure.Row("plugin", window, 3000, 1, 1, [c])
    builtin = measure.Row("builtin", window, 3000, 1, 1, [measure.Conversation()])
    measure.assert_rewrites_within(row, builtin)
    more = measure.Row("plugin", window, 3000, 1, 1, [measure.Conversation(rewrites=2, fewest_rewrites=1)])
    with pytest.raises(AssertionError):
        measure.assert_rewrites_within(more, builtin)


def test_the_trace_marks_each_rewrite_and_a_failed_rewrite_bar_prints_it():
    """Where a conversation rewrote its prefix must be readable from one failing run."""
    exchanges = [ex(body(user("t1"))), ex(body(user("t1"), call("c1"))),
                 ex(body(user("t2"))), ex(body(user("t2"), user("t3")))]
    c = measure.conversation(exchanges, window=64000, trigger=48000)
    assert c.rewrites == 1 and [t.endswith("!") for t in c.trace] == [False, False, True, False]
    row = measure.Row("plugin", 64000, 48000, 1, 1, [c])
    builtin = measure.Row("builtin", 64000, 48000, 1, 1, [measure.Conversation()])
    with pytest.raises(AssertionError) as failed:
        measure.assert_rewrites_within(row, builtin)
    assert "plugin 0 hidden, 1 rewrites: " in str(failed.value) and "!" in str(failed.value)


def test_row_totals_and_the_side_by_side_table():
    convs = {"a": [ex(body(user("x"))), ex(body(user("y")))], "b": [ex(body(user("z")))]}
    row = measure.analyse("plugin", convs, window=64000, trigger=48000, turns=3, answered=2,
                          failed=["turn 2"], extra={"wall time": "1 s"})
    assert row.rewrites_per_conversation == 0.5 and row.over_window == 0 and row.failed == ["turn 2"]
    base = measure.analyse("builtin", convs, window=64000, trigger=54400, turns=3, answered=3)
    table = measure.side_by_side("T", [base, row])
    assert "| | builtin | plugin |" in table and "| turns answered | 3/3 | 2/3 |" in table
    assert "| wall time |  | 1 s |" in table


# ─── the slow /compact ───────────────────────────────────────────────────────

def _compact(gw, sid, total):
    msgs = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]
    data = json.dumps({"session_id": sid, "messages": msgs, "ratio": 0.5, "context_window": 200_000,
                       "total_tokens": total}).encode()
    req = urllib.request.Request(gw.url + "/v2/offload/compact", data=data, method="POST", headers={
        "Authorization": "Bearer k", "X-TDAI-Service-Id": "svc", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_slow_compact_scales_with_size():
    with FakeGateway(api_key="k") as gw:
        assert _compact(gw, "s0", 100_000)["code"] == 0 and gw.compact_delays == []   # off by default
        assert REAL_COMPACT_SECONDS_PER_100K == 3.2
        gw.slow_compact(0.4)
        threads = [threading.Thread(target=_compact, args=(gw, f"s{i}", 50_000 * i)) for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(gw.compact_delays) == [0.2, 0.4]
        assert len(gw.compact_calls()) == 3
        gw.slow_compact(0)
        _compact(gw, "s3", 100_000)
        assert len(gw.compact_delays) == 2


# ─── the host's import race on a fresh messaging gateway ─────────────────────

def test_a_turn_refused_by_the_hosts_import_race_is_sent_until_the_import_finished():
    """Hermes 0.22's API server can answer the first requests of a fresh process with a 500
    "cannot import name 'AIAgent'" (nothing ran); the harness sends such a turn again until it
    is answered, but never a turn that failed otherwise."""
    import warnings
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import harness

    seen = []

    class Api(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["X-Hermes-Session-Id"])
            raced = seen.count("raced") <= 2 and seen[-1] == "raced"
            if raced:       # the two kinds, one after the other (as seen in one run)
                race = harness.HOST_IMPORT_RACES[seen.count("raced") - 1]
                status, body = 500, {"error": {"message": "Internal server error: " + race}}
            elif seen[-1] == "broken":
                status, body = 500, {"error": {"message": "something else"}}
            else:
                status, body = 200, {"choices": [{"message": {"content": "done"}}]}
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        gwp = harness.GatewayProcess(Path("unused") / "home", server.server_address[1])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reply = gwp.chat("raced", "DO read x")
            broken = gwp.chat("broken", "DO read x")
        assert (reply.status, reply.text) == (200, "done")
        # catch_warnings is process-wide: another test's leftover thread may warn meanwhile
        races = [w for w in caught if "host import race" in str(w.message)]
        assert seen.count("raced") == 3 and len(races) == 2
        assert broken.status == 500 and seen.count("broken") == 1
    finally:
        server.shutdown()
        server.server_close()
