import copy
import json
import threading

from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import messages_tokens

from helpers import conversation, make_engine


def test_name_threshold_and_unknown_usage(tmp_path):
    rt, eng = make_engine(tmp_path)
    assert eng.name == "tencentdb-offload"
    assert eng.threshold_tokens == 48_000
    assert not eng.should_compress(47_999) and eng.should_compress(48_000)
    eng.last_prompt_tokens = -1
    assert not eng.should_compress()
    assert eng.should_defer_preflight_to_real_usage(100_000)


def test_compress_lands_at_target_and_archives(tmp_path):
    rt, eng = make_engine(tmp_path)
    conv = conversation(40, 6000, calls=2)
    eng.update_from_response({"prompt_tokens": 70_000})
    out = eng.compress(conv, current_tokens=70_000)
    assert messages.validation_errors(out) == []
    assert eng.compression_count == 1
    st = eng.current_state()
    assert st.calibrator.to_real(messages_tokens(out)) <= 32_000
    rt.flush()
    got = json.loads(eng.handle_tool_call("tdai_read_cos", {"tool_call_id": "call_0_1"}))
    assert got["ok"] and got["content"].startswith("result call_0_1") and got["total_chars"] > 6000
    found = json.loads(eng.handle_tool_call("tdai_offload_search", {"query": "call_5_0"}))
    assert found["count"] >= 1
    # a second call right away has nothing left to do: no loop, no count
    again = eng.compress(out, current_tokens=20_000)
    assert again is out and eng.compression_count == 1


def test_compress_never_raises(tmp_path):
    rt, eng = make_engine(tmp_path)
    assert eng.compress("not a list") == []
    weird = [{"role": "user", "content": "hi"}, 42, {"no": "role"}, {"role": "assistant", "content": "ok"}]
    out = eng.compress(weird, current_tokens=60_000)
    assert isinstance(out, list) and out


def test_deepcopy_shares_runtime_copies_budget(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.last_prompt_tokens = 123
    twin = copy.deepcopy(eng)
    assert twin.runtime is rt and twin.last_prompt_tokens == 123
    twin.update_model(model="small", context_length=100_000)
    assert eng.context_length == 64_000 and twin.context_length == 100_000


def test_one_conversation_across_rotation(tmp_path):
    rt, eng = make_engine(tmp_path, session="parent")
    key = eng.current_state().key
    eng.on_session_start("child", boundary_reason="compression", old_session_id="parent")
    assert eng.current_state().key == key
    assert rt.registry.conversation_of("child") == key
    rt.flush_writes()
    assert rt.store.get_alias("child") == key
    eng.on_session_start("fresh", old_session_id="child")      # /new
    assert eng.current_state().key == "fresh"


def test_disabled_passes_through(tmp_path):
    rt, eng = make_engine(tmp_path, enabled="false")
    conv = conversation(10, 5000)
    assert not eng.should_compress(10**9)
    assert eng.compress(conv) is conv
    assert eng.get_tool_schemas() == []


def test_status_has_no_key(tmp_path):
    rt, eng = make_engine(tmp_path, api_key="topsecret")
    st = eng.get_status()
    assert st["engine"] == "tencentdb-offload" and st["mode"] == "local"
    assert "topsecret" not in json.dumps(st, default=str)


def test_concurrent_sessions_in_threads(tmp_path):
    rt, eng = make_engine(tmp_path)
    errors = []

    def worker(n):
        try:
            mine = copy.deepcopy(eng)
            mine.on_session_start("sess-%d" % n)
            conv = conversation(20, 5000)
            out = mine.compress(conv, current_tokens=60_000)
            assert messages.validation_errors(out) == []
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    rt.flush_writes()
    assert rt.store.stats().archived_sessions == 8


def test_compress_returns_fresh_objects(tmp_path):
    """Hermes 0.17 persists a rotated session by object identity: kept messages must be
    new dicts, or they vanish from the new session on --resume."""
    rt, eng = make_engine(tmp_path)
    conv = conversation(40, 6000)
    conv[0]["_db_persisted"] = True
    out = eng.compress(conv, current_tokens=70_000)
    originals = {id(m) for m in conv}
    assert out and not any(id(m) in originals for m in out)
    assert "_db_persisted" not in out[0]


def test_deferred_preflight_attribute_exists(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.update_from_response({"prompt_tokens": 5000})
    eng.last_prompt_tokens = -1
    assert eng.should_defer_preflight_to_real_usage(10**6)
    assert eng.last_real_prompt_tokens == 5000     # the host formats it in its log line


def test_nothing_but_orphan_results_comes_back_as_given(tmp_path):
    # no conversation to keep: an empty list (or the system prompt alone) is no request at all
    rt, eng = make_engine(tmp_path)
    for head in ([], [{"role": "system", "content": "s"}]):
        msgs = head + [{"role": "tool", "tool_call_id": "x%d" % i, "content": "y" * 20_000}
                       for i in range(10)]
        assert eng.compress(msgs, current_tokens=60_000) == msgs
