"""Recall tools: one conversation's archive only, any-case search, capped echoes, paged reads."""

import json
import re
import threading
import tracemalloc

import pytest

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.archive.store import ArchiveItem, Store
from tencentdb_offload.engine import TencentDBOffloadEngine
from tencentdb_offload.hooks import HookHandlers

from helpers import alias, archive_items, env_for, tool_turn

READ, SEARCH = "tdai_read_cos", "tdai_offload_search"


def engine_for(rt, sid, **kw):
    eng = TencentDBOffloadEngine(rt)
    eng.update_model(model="m", context_length=64_000)
    eng.on_session_start(sid, **kw)
    return eng


def call(eng, name, **args):
    return json.loads(eng.handle_tool_call(name, args))


def test_read_and_search_never_return_another_conversations_content(tmp_path):
    rt = plugin.build_runtime(env=env_for(tmp_path))
    hooks = HookHandlers(rt)
    sids = ["user-%02d" % i for i in range(24)]

    def record(sid):
        for k in range(5):          # providers reuse ids like call_0 in every conversation
            hooks.post_tool_call(tool_name="read_file", args={"k": k}, session_id=sid,
                                 tool_call_id="call_%d" % k,
                                 result="secret of %s part %d " % (sid, k) + "x" * 300)
        hooks.post_tool_call(tool_name="grep", args={}, session_id=sid, tool_call_id="own-" + sid,
                             result="private note of %s" % sid)
    threads = [threading.Thread(target=record, args=(s,)) for s in sids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.flush()
    for i, sid in enumerate(sids):
        eng = engine_for(rt, sid)
        other = sids[(i + 1) % len(sids)]
        for k in range(5):
            got = call(eng, READ, tool_call_id="call_%d" % k)
            assert got["ok"] and got["content"].startswith("secret of %s part %d" % (sid, k))
        own = call(eng, READ, path="offload/hermes-%s/refs/own-%s.md" % (sid, sid))
        assert own["ok"] and own["content"] == "private note of " + sid
        for args in ({"tool_call_id": "own-" + other},
                     {"path": "offload/hermes-%s/refs/own-%s.md" % (other, other)},
                     {"path": "offload/hermes-%s/refs/call_0.md" % other}):
            got = call(eng, READ, **args)
            assert not got["ok"] and "nothing archived" in got["error"], args
        for query in ("secret", "private note", "x" * 50):
            found = call(eng, SEARCH, query=query, limit=20)
            assert found["count"] >= 1
            assert all(sid in r["snippet"] and other not in r["snippet"]
                       for r in found["results"]), (query, found)
        assert call(eng, SEARCH, query=other)["count"] == 0


def test_rotated_session_ids_read_as_one_conversation_and_only_it(tmp_path):
    rt = plugin.build_runtime(env=env_for(tmp_path))
    hooks = HookHandlers(rt)
    eng = engine_for(rt, "a1")
    hooks.post_tool_call(tool_name="t", args={}, result="before rotation", session_id="a1",
                         tool_call_id="c1")
    eng.on_session_start("a2", old_session_id="a1", boundary_reason="compression")
    hooks.post_tool_call(tool_name="t", args={}, result="after rotation", session_id="a2",
                         tool_call_id="c2")
    # a row filed under a rotated id before the host announced the rotation
    archive_items(rt.store, "a3", [ArchiveItem("tool_result", "filed under the new id", "c3", "t")])
    alias(rt.store, "a3", "a1")
    rt.flush()
    for e in (eng, engine_for(plugin.build_runtime(env=env_for(tmp_path)), "a2")):  # a new process too
        assert [call(e, READ, tool_call_id=c)["content"] for c in ("c1", "c2", "c3")] == [
            "before rotation", "after rotation", "filed under the new id"]
        assert call(e, SEARCH, query="FILED under")["count"] == 1
    stranger = engine_for(rt, "b1")
    assert not any(call(stranger, READ, tool_call_id=c)["ok"] for c in ("c1", "c2", "c3"))
    assert call(stranger, SEARCH, query="rotation")["count"] == 0


def test_only_well_formed_refs_of_this_session_reach_the_gateway(tmp_path):
    with FakeGateway(api_key="k1") as gw:
        rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url=gw.url, api_key="k1",
                                              instance_id="svc"))
        eng = engine_for(rt, "s1")
        for path in ("offload/hermes-s2/refs/c1.md", "offload/hermes-s1/refs/../../hermes-s2.md",
                     "/data/offload/hermes-s1/refs/c1.md", "offload/hermes-s1/refs/c1",
                     "refs/c1.md", "offload/hermes-s1/refs/a\nb.md"):
            assert not call(eng, READ, path=path)["ok"]
        assert [r for r in gw.requests if r.path.endswith("read-ref")] == []
        assert not call(eng, READ, path="offload/hermes-s1/refs/c9.md")["ok"]   # 404: no route
        asked = [r.body for r in gw.requests if r.path.endswith("read-ref")]
        assert asked == [{"session_id": "hermes-s1", "result_ref": "offload/hermes-s1/refs/c9.md"}]


@pytest.fixture
def store(tmp_path):
    st = Store(tmp_path)
    yield st
    st.close()


def test_search_folds_case_beyond_ascii(store):
    archive_items(store, "c", [ArchiveItem("tool_result", "Ошибка: диск заполнен", "r1", "sh"),
                        ArchiveItem("tool_result", "ÉCHEC de la connexion", "r2", "sh"),
                        ArchiveItem("tool_result", "Die STRASSE ist gesperrt", "r3", "sh"),
                        ArchiveItem("tool_result", "ΣΊΣΥΦΟΣ", "r4", "sh")])
    assert [h["tool_call_id"] for h in store.search("c", "ошибка")] == ["r1"]
    assert [h["tool_call_id"] for h in store.search("c", "échec CONNEXION")] == ["r2"]
    assert [h["tool_call_id"] for h in store.search("c", "straße")] == ["r3"]
    assert [h["tool_call_id"] for h in store.search("c", "σίσυφος")] == ["r4"]
    assert "Ошибка" in store.search("c", "ОШИБКА")[0]["snippet"]
    assert store.search("other", "ошибка") == []


def test_search_finds_words_across_chunk_edges_in_big_results(store):
    big = "é" * ((1 << 18) // 2 - 3) + "Needle" + "ä" * 1_500_000 + " tail-word"
    archive_items(store, "c", [ArchiveItem("tool_result", big, "big", "cat")])
    hits = store.search("c", "needle TAIL-WORD")
    assert [h["tool_call_id"] for h in hits] == ["big"] and "Needle" in hits[0]["snippet"]
    assert store.search("c", "needle absent") == []


def test_tool_errors_echo_inputs_capped(tmp_path):
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = engine_for(rt, "s1")
    huge = "z" * 10_000_000
    for name, args in ((READ, {"tool_call_id": huge}), (READ, {"path": huge}),
                       (READ, {"path": "offload/hermes-s1/refs/%s.md" % huge}),
                       (SEARCH, {"query": huge}), (huge, {})):
        text = eng.handle_tool_call(name, args)
        reply = json.loads(text)
        assert not reply["ok"] and len(text) < 1_000, (name, reply["error"][:200])
    assert "10000000 chars" in call(eng, READ, tool_call_id=huge)["error"]


def test_answers_are_utf8_even_when_the_model_sends_a_lone_surrogate(tmp_path):
    # a model's JSON may say "\ud800": echoed as is, the tool's answer cannot be encoded and
    # the host's next request to the provider fails
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = engine_for(rt, "s1")
    for name, args in ((SEARCH, {"query": "lost \ud800 word"}), (READ, {"tool_call_id": "x\udfff"}),
                       (SEARCH, {"query": "\ud800" * 5000})):
        text = eng.handle_tool_call(name, args)
        text.encode("utf-8")
        assert "ok" in json.loads(text)


def _peak_during(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_paging_a_big_result_reads_only_the_page(store):
    ascii_text = "".join("line %08d\n" % i for i in range(1_500_000))        # 21 MB
    archive_items(store, "c", [ArchiveItem("tool_result", ascii_text, "big", "cat")])
    page, peak = _peak_during(lambda: store.read_page("c", "big", 15_000_000, 20_000))
    assert page["content"] == ascii_text[15_000_000:15_020_000]
    assert page["total_chars"] == len(ascii_text)
    assert peak < 1_000_000, peak             # loading the row would cost 21 MB+


def test_paging_non_ascii_is_exact_and_bounded(store, tmp_path):
    text = "aé中😀\n" * 700_000                # multi-byte chars straddle every chunk edge
    archive_items(store, "c", [ArchiveItem("tool_result", text, "u", "cat")])
    page, peak = _peak_during(lambda: store.read_page("c", "u", 2_999_990, 100_000))
    assert page["content"] == text[2_999_990:3_099_990]
    assert peak < 4_000_000, peak            # the row as a str is 17 MB
    rt = plugin.build_runtime(env=env_for(tmp_path))
    archive_items(rt.store, "s1", [ArchiveItem("tool_result", text, "u", "cat")])
    eng = engine_for(rt, "s1")
    got, offset = [], 0
    while offset is not None:
        reply = call(eng, READ, tool_call_id="u", offset=offset, limit=100_000)
        got.append(reply["content"])
        offset = reply["next_offset"]
    assert "".join(got) == text
    assert call(eng, READ, tool_call_id="u", offset=len(text) + 5)["returned"] == 0


def test_search_is_newest_first_across_small_and_big_rows(store):
    for call_id, text in (("r1", "ein Wort"), ("r2", "x" * 100_000 + " WORT"), ("r3", "wort drei")):
        archive_items(store, "c", [ArchiveItem("tool_result", text, call_id, "t")])
    assert [h["tool_call_id"] for h in store.search("c", "wort", 2)] == ["r3", "r2"]
    hits = store.search("c", "wort", 5)
    assert [h["tool_call_id"] for h in hits] == ["r3", "r2", "r1"]
    assert hits[1]["snippet"].endswith(" WORT") and len(hits[1]["snippet"]) <= 500


def test_a_pointer_to_a_result_with_a_long_call_id_can_be_followed(tmp_path):
    # some OpenAI-compatible proxies carry model state in the id (hundreds of characters):
    # the archive keeps the id whole and the trim names it, so the tool must read it back
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = engine_for(rt, "s1")
    tid = "call_7__thought__" + "QmFzZTY0" * 60                 # 497 chars
    body = "the long result " + "r" * 9000
    conv = [{"role": "user", "content": "read it"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": tid, "type": "function",
             "function": {"name": "read_file", "arguments": "{\"path\": \"/a\"}"}}]},
            {"role": "tool", "tool_call_id": tid, "content": body},
            {"role": "assistant", "content": "read"}]
    for i in range(12):
        conv += tool_turn(10 + i, 3000)
    HookHandlers(rt).post_tool_call(tool_name="read_file", args={"path": "/a"}, session_id="s1",
                                    tool_call_id=tid, result=body)
    out = eng.compress(conv, current_tokens=200_000)
    rt.flush()
    shown = {k for m in out for k in re.findall(r'tool_call_id="([^"]+)"', str(m.get("content")))}
    assert tid in shown
    got = call(eng, READ, tool_call_id=tid)
    assert got["ok"] and got["content"] == body
    rt.close()


def test_search_reads_quoted_words_as_words(store):
    # models quote a phrase or a name as they would in a web search
    archive_items(store, "c", [ArchiveItem("tool_result", "curl: (7) Connection refused (app.py:3)",
                                    "r1", "sh")])
    for query in ('"connection refused"', "`app.py`", "\u201cConnection refused\u201d",
                  "'refused'"):
        assert [h["key"] for h in store.search("c", query)] == ["r1"], query
    assert store.search("c", '"connection accepted"') == []


def test_a_list_of_keys_is_told_to_be_one_key_per_call(tmp_path):
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = engine_for(rt, "s1")
    for args, word in (({"key": ["c1", "c2"]}, "a list"),
                       ({"tool_call_id": {"id": "c1"}}, "an object")):
        error = call(eng, READ, **args)["error"]
        assert "must be one string, not %s" % word in error and "once per item" in error
    assert "pass key" in call(eng, READ)["error"]
    rt.close()


def test_a_key_copied_with_its_brackets_or_quotes_reads_the_item(tmp_path):
    # the digest says tdai_read_cos(tool_call_id="<id in brackets>") over lines "[call_1] …":
    # a model passing "[call_1]" (or quoting the id) was told "nothing archived"
    rt = plugin.build_runtime(env=env_for(tmp_path))
    hooks = HookHandlers(rt)
    for cid, text in (("call_1", "plain id"), ("[odd]", "bracketed id"), ("odd", "bare id")):
        hooks.post_tool_call(tool_name="read_file", args={}, session_id="s1", tool_call_id=cid,
                             result=text)
    rt.flush()
    eng = engine_for(rt, "s1")
    for key in ("[call_1]", '"call_1"', "`call_1`", "\u201ccall_1\u201d", " [call_1 "):
        got = call(eng, READ, tool_call_id=key)
        assert got.get("ok") and got["content"] == "plain id", (key, got)
    assert call(eng, READ, key="[odd]")["content"] == "bracketed id"     # an exact id first
    assert call(eng, READ, key="odd")["content"] == "bare id"
    assert not call(eng, READ, key="[call_2]")["ok"]
    rt.close()


def test_a_list_query_is_told_to_be_one_string(tmp_path):
    # a model passing ["connection refused", "timeout"] was told "query must not be empty"
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = engine_for(rt, "s1")
    for query, word in ((["connection refused", "timeout"], "a list"), ({"q": "x"}, "an object")):
        error = call(eng, SEARCH, query=query)["error"]
        assert "query must be one string" in error and "not %s" % word in error, error
    assert call(eng, SEARCH, query="  ")["error"] == "query must not be empty"
    rt.close()


@pytest.mark.parametrize("window, shown_whole", [(64_000, 38_400), (128_000, 76_800),
                                                 (1_000_000, 100_000)])
def test_every_page_fits_what_the_host_shows_whole(tmp_path, window, shown_whole):
    # Hermes 0.19+ saves a tool answer over 15 % of the window (4 chars a token, 8K-100K chars)
    # to a file and shows the model 1,500 chars of it: a page past that was skipped unseen
    rt = plugin.build_runtime(env=env_for(tmp_path))
    eng = TencentDBOffloadEngine(rt)
    eng.update_model(model="m", context_length=window)
    eng.on_session_start("s1")
    text = "".join('line %d: "quoted" \\ \x1b[31mred\x1b[0m é\n' % i for i in range(12_000))
    archive_items(rt.store, "s1", [ArchiveItem("tool_result", text, "big", "sh")])
    got, offset = [], 0
    while offset is not None:
        answer = eng.handle_tool_call(READ, {"key": "big", "offset": offset, "limit": 100_000})
        assert len(answer) <= shown_whole
        reply = json.loads(answer)
        assert reply["returned"] == len(reply["content"]) > 0
        got.append(reply["content"])
        offset = reply["next_offset"]
    assert "".join(got) == text
    rt.close()
