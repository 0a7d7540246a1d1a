"""Outbox rows queued while no Gateway was configured: how many, and the user's choice for them.

While no Gateway is configured the plugin queues each tool pair in case one answers at the
default URL. A Gateway configured later does not get those rows unasked: its process holds
them (``archive/outbox.py``). The user decides once, for all of them or one conversation's:
``outbox send-held`` lets them go to the configured Gateway (its L1 summaries and canvas then
cover those sessions too), ``outbox drop-held`` takes them out of the queue (the archive keeps
every result; recall is unchanged). doctor and status say how many there are.
"""

from __future__ import annotations

import shlex
import sqlite3
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .browse import BUSY_S, writer

HELD = "dead=0 AND unconfigured=1"


def _has_column(conn: sqlite3.Connection) -> bool:
    """Stores written before rows said so hold none (the first process that opens them decides)."""
    return "unconfigured" in {r[1] for r in conn.execute("PRAGMA table_info(outbox)")}


def held_rows(conn: sqlite3.Connection) -> Dict[str, Any]:
    """``{"rows", "sessions", "oldest", "newest"}`` of the rows queued while no Gateway was
    configured and still waiting (times are the rows' ``created``; None when there are none)."""
    if not _has_column(conn):
        return {"rows": 0, "sessions": 0, "oldest": None, "newest": None}
    rows, sessions, oldest, newest = conn.execute(
        "SELECT count(*), count(DISTINCT session), min(created), max(created) FROM outbox WHERE "
        + HELD).fetchone()
    return {"rows": int(rows or 0), "sessions": int(sessions or 0), "oldest": oldest, "newest": newest}


def by_session(conn: sqlite3.Connection, limit: int = 20) -> List[Dict[str, Any]]:
    """The held rows per conversation, the most first."""
    if not _has_column(conn):
        return []
    return [{"session": r[0], "rows": r[1], "oldest": r[2], "newest": r[3]} for r in conn.execute(
        "SELECT session, count(*), min(created), max(created) FROM outbox WHERE %s GROUP BY session "
        "ORDER BY 2 DESC, 1 LIMIT ?" % HELD, (limit,))]


def _change(directory: Path, sql: str, session: Optional[str], timeout: float) -> int:
    with writer(directory, timeout) as conn:
        if not _has_column(conn):
            return 0
        conn.execute("BEGIN IMMEDIATE")
        where, args = (HELD + " AND session=?", (session,)) if session else (HELD, ())
        changed = conn.execute(sql + where, args).rowcount
        conn.execute("COMMIT")
        return changed


def send(directory: Path, session: Optional[str] = None, timeout: float = BUSY_S) -> int:
    """The held rows (of one conversation, or all) become rows for the configured Gateway,
    their attempts reset; how many."""
    return _change(directory, "UPDATE outbox SET unconfigured=0, attempts=0 WHERE ", session, timeout)


def drop(directory: Path, session: Optional[str] = None, timeout: float = BUSY_S) -> int:
    """The held rows (of one conversation, or all) leave the queue; the archive keeps what
    they carried. How many."""
    return _change(directory, "DELETE FROM outbox WHERE ", session, timeout)


def commands(plugin_dir: Any) -> Tuple[str, str]:
    """(send, drop): the two commands, safe to paste into a shell."""
    base = "python3 %s outbox" % shlex.quote(str(plugin_dir))
    return base + " send-held", base + " drop-held"


def stamp(ts: Any) -> str:
    """A row's ``created`` as local time, minutes."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(ts)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"
