"""A store that cannot be written (read-only, or ``store.db`` replaced by a directory) while
the session is near its window: trimmed results the archive cannot hold went back whole, the
compaction landed over the window, and Hermes refused every later turn ("this session is too
large to compress further"). Whole they go back only while the list fits; the rest are
trimmed with no recall promised (Hermes' session store keeps their text)."""

from tencentdb_offload.context import messages

from helpers import conversation, make_engine

WINDOW = 64_000


def _unwritable(tmp_path):
    store = tmp_path / "home" / "tencentdb-offload"
    (store / "store.db").mkdir(parents=True)        # root ignores chmod; a directory is no db


def test_a_compaction_without_a_store_still_fits_the_window(tmp_path):
    _unwritable(tmp_path)
    rt, eng = make_engine(tmp_path, WINDOW)
    try:
        history = conversation(10, 25_000) + [{"role": "user", "content": "and now?"}]
        out = eng.compress(history, current_tokens=66_000)
        chars = sum(len(messages.text_of(m)) for m in out)
        assert chars / 4 < eng.threshold_tokens, (chars, eng.threshold_tokens)
        text = "\n".join(messages.text_of(m) for m in out)
        assert "tdai_read_cos(tool_call_id=" not in text        # nothing held, nothing promised
        newest = lambda msgs: next(m["content"] for m in msgs if m.get("tool_call_id") == "call_9_0")
        assert newest(out) == newest(history)                   # the newest result stays whole
        assert any("trimmed without recall" in e for e in rt.errors), list(rt.errors)
    finally:
        rt.close()
