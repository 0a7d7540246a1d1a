"""The durable ingest outbox: rows waiting for the Gateway, claimed by one process at a time.

A tool pair's result is stored once, in the archive: its outbox row keeps only the small
JSON around it and ``archive_id``; the result text is joined in when the row is loaded.
Several processes may share one store (a CLI session while the messaging gateway runs):
a sender first leases a session (``outbox_leases``), so each row is sent by one process and
in order; a lease that expires (its holder crashed or stalled) is taken over, which is the
only way a row is sent twice. Senders read row heads (id, kind, size) and load content one
byte-bounded batch at a time, so a large backlog never sits in memory.

A row queued while no Gateway was configured (the default URL, in case a Gateway answers
there) is marked ``unconfigured``. A process whose Gateway the user configured holds those
rows: they are not sent to it until the user says so (``outbox send-held``), or are dropped
(``outbox drop-held``); data written before there was a Gateway never leaves silently.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from ..context.redact import Redactor
from ..common.text import clean_text
from .lookup import prefix
from .refused import refused_by_reason

# No live lease runs further ahead than this (3 x the longest ingest timeout, 120 s, and
# slack): one that does was taken by a clock set ahead, and holding it would stall the
# session's rows until the clock caught up, not for one lease.
LONGEST_LEASE_S = 420.0

OUTBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox(
  id INTEGER PRIMARY KEY,
  session TEXT NOT NULL,
  kind TEXT NOT NULL,
  payload TEXT NOT NULL,
  created REAL NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  dead INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  archive_id INTEGER,
  bytes INTEGER,
  unconfigured INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox(dead, session, id);
CREATE TABLE IF NOT EXISTS outbox_leases(
  session TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  until REAL NOT NULL);
"""


def migrate_outbox(conn: sqlite3.Connection, unconfigured: bool = False) -> None:
    """Stores made before the result was stored once: add the columns; old rows keep their
    inline result (``archive_id`` NULL) and are delivered as they are. Stores made before
    rows said whether a Gateway was configured: the rows waiting take ``unconfigured``, what
    the process opening the store runs with (they were most likely queued so)."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(outbox)")}
    if "archive_id" in cols and "unconfigured" in cols:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(outbox)")}   # another process may have
        if "archive_id" not in cols:
            conn.execute("ALTER TABLE outbox ADD COLUMN archive_id INTEGER")
            conn.execute("ALTER TABLE outbox ADD COLUMN bytes INTEGER")
            conn.execute("UPDATE outbox SET bytes=length(CAST(payload AS BLOB))")
        if "unconfigured" not in cols:
            conn.execute("ALTER TABLE outbox ADD COLUMN unconfigured INTEGER NOT NULL DEFAULT 0")
            if unconfigured:
                conn.execute("UPDATE outbox SET unconfigured=1 WHERE dead=0")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _sendable(hold_unconfigured: bool) -> str:
    """The condition on waiting rows a sender may send."""
    return "dead=0 AND unconfigured=0" if hold_unconfigured else "dead=0"


class OutboxHead(NamedTuple):
    """A waiting row without its content: enough to plan a batch."""
    id: int
    kind: str               # "prompt" | "pair"
    attempts: int
    bytes: int              # UTF-8 bytes of the payload and the archived result


class OutboxRow(NamedTuple):
    """A waiting row, loaded: ``payload`` is what the Gateway receives."""
    id: int
    kind: str
    payload: Dict[str, Any]
    attempts: int
    cut: int                # characters of the result left out (loaded as a prefix), else 0


def sized(op: Callable[[sqlite3.Connection], Any], size: int) -> Callable[[sqlite3.Connection], Any]:
    """Tag a store operation with the bytes it holds while it waits (the writer's memory cap)."""
    op.size = size  # type: ignore[attr-defined]
    return op


class Outbox:
    """Outbox access, mixed into ``Store`` (needs its ``_conn()`` and ``transaction()``)."""

    _conn: Callable[[], sqlite3.Connection]
    transaction: Callable[..., None]

    @staticmethod
    def op_enqueue(session: str, kind: str, payload: Dict[str, Any], now: float,
                   mask: Optional[Callable[[str], str]] = None, unconfigured: bool = False) -> Callable:
        """Queue a row. A pair whose result the archive holds (same session, same call, same
        text: archived earlier in the same transaction) references it instead of copying it.
        ``mask``: its texts masked at rest, on the writer thread (as the archive's).
        ``unconfigured``: queued while no Gateway was configured (held from one configured later)."""
        result = payload.get("result")

        def op(conn: sqlite3.Connection) -> None:
            nonlocal payload, result
            if mask is not None:
                payload = Redactor(mask=mask).value(payload)[0]
                result = payload.get("result")
            body, archive_id = payload, None
            if kind == "pair" and isinstance(result, str) and payload.get("tool_call_id"):
                row = conn.execute(
                    "SELECT id FROM archive WHERE session=? AND item_key=? AND content=?",
                    (session, "call:%s" % payload["tool_call_id"], clean_text(result))).fetchone()
                if row is not None:
                    body = {k: v for k, v in payload.items() if k != "result"}
                    archive_id = row[0]
            text = clean_text(json.dumps(body, ensure_ascii=False, default=str))
            size = len(text.encode("utf-8"))
            if archive_id is not None:
                size += len(result.encode("utf-8", "replace"))  # type: ignore[union-attr]
            conn.execute("INSERT INTO outbox(session,kind,payload,created,archive_id,bytes,unconfigured) "
                         "VALUES (?,?,?,?,?,?,?)", (session, kind, text, now, archive_id, size,
                                                    1 if unconfigured else 0))
        return sized(op, len(result) if isinstance(result, str) else 256)

    # -- leases: one sender per session across processes ----------------------------
    def claim(self, owner: str, lease_s: float, now: float,
              skip: frozenset = frozenset(), hold_unconfigured: bool = False) -> List[str]:
        """Lease every session with rows to send that no other live sender holds."""
        got: List[str] = []
        # read first, outside a write transaction: an idle sender never takes the write lock
        sessions = [r[0] for r in self._conn().execute(
            "SELECT DISTINCT session FROM outbox WHERE " + _sendable(hold_unconfigured))
            if r[0] not in skip]
        if not sessions:
            return got

        def op(conn: sqlite3.Connection) -> None:
            for s in sessions:
                cur = conn.execute(
                    "INSERT INTO outbox_leases(session,owner,until) VALUES (?,?,?) "
                    "ON CONFLICT(session) DO UPDATE SET owner=excluded.owner, until=excluded.until "
                    "WHERE outbox_leases.until < ? OR outbox_leases.until > ? "
                    "OR outbox_leases.owner = excluded.owner",
                    (s, owner, now + lease_s, now, now + LONGEST_LEASE_S))
                if cur.rowcount:
                    got.append(s)
        self.transaction([op])
        return got

    def renew(self, session: str, owner: str, lease_s: float, now: float) -> bool:
        """Extend our lease before a send; False if it expired and another sender took it."""
        held: List[bool] = []

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE outbox_leases SET until=? WHERE session=? AND owner=?",
                               (now + lease_s, session, owner))
            held.append(cur.rowcount == 1)
        self.transaction([op])
        return held[0]

    def release(self, session: str, owner: str) -> None:
        self.transaction([lambda c: c.execute(
            "DELETE FROM outbox_leases WHERE session=? AND owner=?", (session, owner))])

    # -- reading, one bounded batch at a time ----------------------------------------
    def heads(self, session: str, limit: int = 1000, hold_unconfigured: bool = False) -> List[OutboxHead]:
        """The session's rows to send, oldest first, without their content."""
        rows = self._conn().execute(
            "SELECT id, kind, attempts, coalesce(bytes, 0) FROM outbox WHERE %s AND session=? "
            "ORDER BY id LIMIT ?" % _sendable(hold_unconfigured), (session, limit)).fetchall()
        return [OutboxHead(*r) for r in rows]

    def load(self, heads: List[OutboxHead], max_bytes: Optional[int] = None) -> List[OutboxRow]:
        """Rows with their payload; an archived result over ``max_bytes`` loads as a prefix
        read incrementally (``cut`` says how much was left out): a 50 MB result is never
        in memory to send 500 KB of it."""
        out: List[OutboxRow] = []
        conn = self._conn()
        for h in heads:
            row = conn.execute(
                "SELECT o.payload, o.archive_id, a.chars FROM outbox o "
                "LEFT JOIN archive a ON a.id = o.archive_id WHERE o.id=?", (h.id,)).fetchone()
            if row is None:         # delivered or reclaimed meanwhile
                continue
            payload, archive_id, chars = json.loads(row[0]), row[1], row[2]
            cut = 0
            if archive_id is not None and chars is None:
                payload = {}        # the archive row is gone (retention): no "result"
            elif archive_id is not None:
                if max_bytes is not None and h.bytes > max_bytes:
                    text = prefix(conn, archive_id, max_bytes)
                else:
                    text = conn.execute("SELECT content FROM archive WHERE id=?",
                                        (archive_id,)).fetchone()[0]
                payload["result"] = text
                cut = max(0, chars - len(text))
            out.append(OutboxRow(h.id, h.kind, payload, h.attempts, cut))
        return out

    # -- outcome ------------------------------------------------------------------------
    def mark_delivered(self, ids: List[int]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM outbox WHERE id=?", [(i,) for i in ids])
            conn.execute("INSERT INTO counters(name,value) VALUES('delivered',?) ON CONFLICT(name) "
                         "DO UPDATE SET value=value+excluded.value", (len(ids),))
        self.transaction([op])

    def mark_failed(self, ids: List[int], error: str, dead: bool) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.executemany("UPDATE outbox SET attempts=attempts+1, last_error=?, dead=? WHERE id=?",
                             [(error[:500], 1 if dead else 0, i) for i in ids])
        self.transaction([op])

    def refused(self, limit: int = 5) -> List[Dict[str, Any]]:
        """Why rows were refused for good (reason, rows, sessions), commonest first."""
        return refused_by_reason(self._conn(), limit)

    def backlog(self, session: Optional[str] = None, hold_unconfigured: bool = False) -> int:
        """Rows waiting to be sent (``hold_unconfigured``: not counting the held ones)."""
        where = _sendable(hold_unconfigured)
        if session is None:
            row = self._conn().execute("SELECT count(*) FROM outbox WHERE " + where).fetchone()
        else:
            row = self._conn().execute("SELECT count(*) FROM outbox WHERE %s AND session=?" % where,
                                       (session,)).fetchone()
        return int(row[0])

    def held(self) -> int:
        """Rows queued while no Gateway was configured, still waiting."""
        return int(self._conn().execute(
            "SELECT count(*) FROM outbox WHERE dead=0 AND unconfigured=1").fetchone()[0])
