"""Retention keeps a session alias while its conversation still has rows: Hermes 0.17 resumes
a rotated session id for months, and losing the alias loses the conversation's recent archive."""

import time

from tencentdb_offload.archive.store import ArchiveItem, Store
from helpers import alias, archive_items

DAY = 86_400


def test_an_alias_stays_while_its_conversation_has_recent_rows(tmp_path, monkeypatch):
    st = Store(tmp_path)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now - 40 * DAY)
    alias(st, "Y", "X")                          # rotated 40 days ago, resumed since
    alias(st, "old", "gone")                     # a conversation nobody came back to
    monkeypatch.setattr(time, "time", lambda: now - 5 * DAY)
    archive_items(st, "X", [ArchiveItem("tool_result", "recent result", "r1", "t")])
    monkeypatch.setattr(time, "time", lambda: now)
    counts = st.reclaim(30, now=now)
    assert counts["aliases"] == 1
    assert st.get_alias("Y") == "X" and st.get_alias("old") is None
    st.close()
