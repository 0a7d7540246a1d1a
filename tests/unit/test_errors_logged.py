"""Errors the plugin survives are logged with their traceback, printable (issue 27).

Before, tracebacks appeared only at DEBUG, the recall tool's errors were never logged and the
reclaimer's errors only set a status field: an operator reading the log could not find why.
"""

import logging
import sqlite3

import tencentdb_offload as plugin
from tencentdb_offload.archive.recall import SEARCH
from tencentdb_offload.hooks import HookHandlers

from helpers import env_for

EVIL = "\x1b[2J\x07"


def damaged(rt):
    """Another process broke the store's schema (a damaged or foreign file)."""
    HookHandlers(rt).post_tool_call(tool_name="cat", args={}, result="text", session_id="s1",
                                    tool_call_id="c1")
    assert rt.writer.flush(10)
    conn = sqlite3.connect(str(rt.store.path))
    conn.execute('ALTER TABLE archive RENAME TO "gone%s"' % EVIL)
    conn.execute('ALTER TABLE events RENAME TO "gone_events%s"' % EVIL)
    conn.commit()
    conn.close()


def logged(caplog, needle):
    return [r for r in caplog.records if needle in r.getMessage()]


def test_a_failing_recall_tool_and_reclaim_are_logged_with_a_printable_traceback(tmp_path, caplog):
    rt = plugin.build_runtime(env=env_for(tmp_path, retention_days="1"))
    try:
        damaged(rt)
        with caplog.at_level(logging.WARNING, logger="tencentdb_offload"):
            answer = rt.tools.handle(SEARCH, {"query": "text"}, rt.registry.for_session_id("s1").key,
                                     "hermes-s1")
            rt.reclaimer.run()
        assert "failed" in answer          # the model still gets an answer
        for needle in ("tool failed", "reclaim failed"):
            records = logged(caplog, needle)
            assert records and records[0].exc_info, (needle, caplog.text)
        assert "Traceback" in caplog.text and EVIL not in caplog.text
        assert "\x1b" not in caplog.text and "\x07" not in caplog.text
    finally:
        rt.close()


def test_a_guarded_error_is_logged_with_its_traceback(tmp_path, caplog):
    rt = plugin.build_runtime(env=env_for(tmp_path))
    try:
        with caplog.at_level(logging.WARNING, logger="tencentdb_offload"):
            try:
                raise RuntimeError("boom" + EVIL)
            except RuntimeError:
                rt.note_error("a hook failed")
        record = logged(caplog, "a hook failed")[0]
        assert record.exc_info and "RuntimeError" in caplog.text
        assert "\x1b" not in caplog.text
    finally:
        rt.close()
