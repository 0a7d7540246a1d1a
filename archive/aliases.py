"""A session alias (Hermes' new id continues a conversation) as a store operation.

It goes through the writer like every other write: the engine records it on Hermes' thread
(a compaction's session rotation), which must never wait for the store's write lock (another
process may hold it for seconds).
"""

from __future__ import annotations

import sqlite3
from typing import Callable


def op_alias(session_id: str, conversation: str, now: float) -> Callable[[sqlite3.Connection], None]:
    def op(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR REPLACE INTO aliases(session_id,conversation,created) "
                     "VALUES (?,?,?)", (session_id, conversation, now))
    return op
