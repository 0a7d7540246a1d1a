"""Outbox rows the Gateway refused for good: why, how many, and putting them back in line.

A row is marked refused (``dead``) only when the Gateway itself said no to it (a bad request,
a missing route). The operator sees the reasons in ``status`` and doctor and, once the cause
is fixed, re-queues the rows (``python3 <plugin dir> outbox requeue``); nothing is deleted.
"""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from .browse import BUSY_S, writer



def requeue_command(plugin_dir: Any) -> str:
    """The command that re-queues refused rows, safe to paste into a shell."""
    return "python3 %s outbox requeue" % shlex.quote(str(plugin_dir))


def refusals_line(rows_by_reason: Mapping[str, int]) -> str:
    """The one log line for the rows refused for good in one sending pass, however many."""
    reason = max(rows_by_reason, key=lambda r: rows_by_reason[r])
    others = len(rows_by_reason) - 1
    return ("Gateway refused %d outbox row(s) for good: %s%s; status lists why, %s re-queues "
            "them" % (sum(rows_by_reason.values()), reason,
                      " (and %d other reason(s))" % others if others else "",
                      requeue_command(Path(__file__).resolve().parent.parent)))


def refused_by_reason(conn: sqlite3.Connection, limit: int = 5) -> List[Dict[str, Any]]:
    """The most common reasons rows were refused for good: reason, rows, sessions."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(outbox)")}
    if "dead" not in cols:
        return []
    rows = conn.execute(
        "SELECT coalesce(last_error, ''), count(*), count(DISTINCT session) FROM outbox "
        "WHERE dead=1 GROUP BY 1 ORDER BY 2 DESC LIMIT ?", (limit,)).fetchall()
    return [{"reason": r[0] or "no reason recorded", "rows": r[1], "sessions": r[2]} for r in rows]


def requeue(directory: Path, session: Optional[str] = None, timeout: float = BUSY_S) -> int:
    """Refused rows (of one session, or all) wait for the sender again, their attempts reset
    so the first retry is not delayed by old backoff; the number of rows re-queued. Waits up
    to ``timeout`` for the write lock, like any writer."""
    with writer(directory, timeout) as conn:
        conn.execute("BEGIN IMMEDIATE")
        where, args = ("dead=1 AND session=?", (session,)) if session else ("dead=1", ())
        moved = conn.execute("UPDATE outbox SET dead=0, attempts=0 WHERE " + where, args).rowcount
        conn.execute("COMMIT")
        return moved
