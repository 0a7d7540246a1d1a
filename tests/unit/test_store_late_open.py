"""A store that cannot be opened at start-up and opens later is used at once: recall, the
alias lookup, retention, status and the Gateway sender all see it, not only the writer."""

import json

import tencentdb_offload as plugin
from tencentdb_offload.hooks import HookHandlers

from helpers import alias, env_for


def test_a_store_opened_after_start_is_used_everywhere(tmp_path):
    db = tmp_path / "home" / "tencentdb-offload" / "store.db"
    db.mkdir(parents=True)                          # a directory where the file should be
    rt = plugin.build_runtime(env=env_for(tmp_path, gateway_url="http://127.0.0.1:9"))
    try:
        assert rt.store is None and rt.store_error and rt.worker is None
        eng = plugin.open_session(rt, "s1", 64_000, model="m")
        HookHandlers(rt).post_tool_call(tool_name="read_file", args={}, result="important text",
                                        session_id="s1", tool_call_id="c1")
        db.rmdir()                                  # the user fixes it
        assert rt.writer.flush(10), rt.writer.last_flush
        assert rt.store is rt.writer.store is rt.tools.store is not None
        read = json.loads(eng.handle_tool_call("tdai_read_cos", {"key": "c1"}))
        assert read["ok"] and read["content"] == "important text"
        assert rt.status()["store_error"] == "" and rt.store_error not in rt.warnings
        assert rt.worker is not None and rt.client is not None
        assert "archive" in rt.reclaimer.run()      # retention reaches the store
        alias(rt.store, "child", "s1")
        assert rt.registry.conversation_of("child") == "s1"
    finally:
        rt.close()
