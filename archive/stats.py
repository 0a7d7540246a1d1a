"""What a store holds, in one typed record, and the one way its events are decoded.

``Store.stats()`` (the running plugin) and ``StoreReader.stats()`` (status and doctor, read-only)
both return ``StoreStats`` from ``read_stats``: the same figures, by construction. A table or
column an older store lacks reads as empty.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Set


@dataclass(frozen=True)
class StoreStats:
    archived_items: int
    archived_chars: int
    archived_sessions: int
    outbox_backlog: int         # rows waiting for the Gateway
    outbox_dead: int            # rows the Gateway refused for good
    delivered: int
    writes_lost: int
    db_bytes: int               # the database with its WAL and index
    path: str
    recoveries: int = 0         # live repairs by this process (the running plugin only)
    last_recovery: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def tables(conn: sqlite3.Connection) -> Set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(conn: sqlite3.Connection, table: str) -> Set[str]:
    return {r[1] for r in conn.execute("PRAGMA table_info(%s)" % table)}


def outbox_where(outbox_columns: Set[str], dead: int) -> str:
    """Rows waiting (``dead=0``) or refused for good (``dead=1``); an old outbox has no ``dead``."""
    if "dead" in outbox_columns:
        return " WHERE dead=%d" % dead
    return "" if dead == 0 else " WHERE 0"


def read_stats(conn: sqlite3.Connection, directory: Path, recoveries: Optional[list] = None) -> StoreStats:
    """The store's figures from ``conn`` (read-only or not)."""
    present = tables(conn)
    outbox_cols = columns(conn, "outbox") if "outbox" in present else set()

    def one(table: str, sql: str) -> int:
        if table not in present:
            return 0
        row = conn.execute(sql).fetchone()
        return int(row[0] or 0) if row else 0

    counters = dict(conn.execute("SELECT name, value FROM counters").fetchall()
                    if "counters" in present else [])
    size = sum(p.stat().st_size for p in Path(directory).glob("store.db*") if p.is_file())
    done = list(recoveries or [])
    return StoreStats(
        archived_items=one("archive", "SELECT count(*) FROM archive"),
        archived_chars=one("archive", "SELECT coalesce(sum(chars),0) FROM archive"),
        archived_sessions=one("archive", "SELECT count(DISTINCT session) FROM archive"),
        outbox_backlog=one("outbox", "SELECT count(*) FROM outbox" + outbox_where(outbox_cols, 0)),
        outbox_dead=one("outbox", "SELECT count(*) FROM outbox" + outbox_where(outbox_cols, 1)),
        delivered=int(counters.get("delivered", 0)), writes_lost=int(counters.get("writes_lost", 0)),
        db_bytes=size, path=str(Path(directory) / "store.db"),
        recoveries=len(done), last_recovery=done[-1] if done else "")


def decode_event(ts: float, session: Optional[str], kind: str, data: str) -> Dict[str, Any]:
    """One events row as a dict: the record's fields, then the row's own ``ts``, ``session``
    and ``kind``, which win (the row is the truth; the record is anyone's JSON)."""
    try:
        fields = json.loads(data)
    except ValueError:
        fields = {"error": "unreadable event record"}
    return {**(fields if isinstance(fields, dict) else {}), "ts": ts, "session": session, "kind": kind}
