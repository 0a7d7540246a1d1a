"""Read a store without changing a byte of it: the opener and the SQL of ``status`` and ``doctor``.

``Store`` creates tables, migrates an old outbox and switches the file to WAL; opening it
from an operator command would rewrite a store the user only asked to look at. Here:

- a store with a WAL and its index (a live or crashed writer) is opened
  ``mode=ro&readonly_shm=1``: the WAL is read, the shared-memory index only read;
- a store at rest (the main file holds everything) is opened ``immutable=1``: no lock, no
  ``-shm``/``-wal`` created (a plain ``mode=ro`` would create both);
- a table or column an older store lacks reads as empty, never as an error.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from .repair import SCHEMA_VERSION, schema_problem
from .stats import StoreStats, columns, decode_event, outbox_where, read_stats, tables

STORE_TABLES = {"archive", "outbox", "events"}


def uri(path: Path) -> str:
    """``file:PATH?`` for sqlite3's ``uri=True``; any byte of the name (not UTF-8, space, ?, #,
    %) percent-encoded, so every path the file system holds can be opened."""
    return "file:%s?" % urllib.parse.quote(os.fsencode(str(path)))


def connect(path: Path, timeout: float = 5) -> sqlite3.Connection:
    """A connection that cannot write ``path`` or create files beside it."""
    try:        # SQLite follows a linked store.db: its -wal and -shm are beside the target
        path = Path(path).resolve()
    except (OSError, RuntimeError):     # a link loop: SQLite says what it finds
        pass
    url = uri(path)
    if Path(str(path) + "-wal").exists() and Path(str(path) + "-shm").exists():
        conn = sqlite3.connect(url + "mode=ro&readonly_shm=1", uri=True, timeout=timeout)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:     # an index it cannot use read-only: read the file alone
            conn.close()
    if rollback_journal(path):      # no -shm to create: locks and a pending rollback honoured
        return sqlite3.connect(url + "mode=ro", uri=True, timeout=timeout)
    # at rest (or a WAL without its index, which only a writer may rebuild): the main file
    return sqlite3.connect(url + "immutable=1", uri=True, timeout=timeout)


def rollback_journal(path: Path) -> bool:
    """A database in rollback-journal mode (Hermes keeps state.db so on a SQLite with the
    WAL-reset bug), or one a writer left a ``-journal`` beside: ``immutable=1`` would ignore the
    writer's lock and the journal and read pages of a write that never committed."""
    if Path(str(path) + "-journal").exists():
        return True
    try:
        with open(str(path), "rb") as db:
            header = db.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18] == 1


# the columns every version wrote (unchanged since the first): a table of one of these names
# without them is another program's, and the first query would fail with "no such column"
STORE_COLUMNS = {
    "archive": {"id", "session", "item_key", "kind", "tool_call_id", "tool_name", "role",
                "args", "content", "chars", "created"},
    "aliases": {"session_id", "conversation", "created"},
    "events": {"id", "ts", "session", "kind", "data"}}


def foreign(conn: sqlite3.Connection, db: Path) -> str:
    """Why the tables of ``db`` are not a store's (a table lacks its columns); "" when none."""
    names = tables(conn)
    for table in sorted(STORE_COLUMNS.keys() & names):
        lacking = STORE_COLUMNS[table] - columns(conn, table)
        if lacking:
            return ("%s is not a tencentdb-offload store (its %s table lacks %s): another "
                    "program's database? Move it aside, or give --store DIR"
                    % (db, table, ", ".join(sorted(lacking))))
    return ""


def unwritten(db: Path) -> bool:
    """No store yet: no file, or an empty one (a kill or a full disk before the first page;
    SQLite reads 0 bytes as an empty database, which the plugin fills at its next open)."""
    try:
        return db.stat().st_size == 0 and db.is_file()
    except FileNotFoundError:
        return True
    except OSError:                 # a link loop, no permission: the opener says which
        return False


def unreadable(db: Path, exc: sqlite3.Error) -> str:
    """Why opening the store ``db`` read-only failed, in the user's terms."""
    if "locked" in str(exc):    # a rollback-journal store a writer holds: busy, not corrupt
        return "cannot read %s: %s (another process is writing it; try again)" % (db, exc)
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK":
        return ("cannot read %s: a write a stopped process did not finish waits in %s-journal; "
                "the plugin's next process rolls it back" % (db, db.name))
    return "cannot read %s: %s (the plugin moves a corrupt store aside and starts a new one)" % (db, exc)


def problem(db: Path) -> str:
    """Why ``db`` cannot be read as a store; "" when it can (checked without writing)."""
    if db.is_dir():
        return "%s is a directory, not a store: move it aside (the plugin then starts one)" % db
    try:
        conn = connect(db)
        try:
            names, why = tables(conn), foreign(conn, db)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return unreadable(db, exc)
    if not names & STORE_TABLES:
        return "%s is not a tencentdb-offload store (no %s table)" % (db, ", ".join(sorted(STORE_TABLES)))
    return why


def newer(db: Path) -> str:
    """Why the plugin refuses ``db`` although it reads (a newer version's schema); "" when it
    does not. The same words the plugin's own open gives (``repair.schema_problem``)."""
    try:
        conn = connect(db)
        try:
            why = schema_problem(conn, "", SCHEMA_VERSION)
        finally:
            conn.close()
    except sqlite3.Error:           # unreadable: ``problem`` says why
        return ""
    return "%s %s" % (db, why) if why else ""


class StoreReader:
    """The queries status and doctor show, on a read-only connection."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.conn = connect(self.directory / "store.db")
        self.tables = tables(self.conn)
        self.outbox_cols = columns(self.conn, "outbox") if "outbox" in self.tables else set()

    def close(self) -> None:
        self.conn.close()

    def _rows(self, table: str, sql: str, args: tuple = ()) -> List[tuple]:
        return self.conn.execute(sql, args).fetchall() if table in self.tables else []

    def _outbox_where(self, dead: int) -> str:
        return outbox_where(self.outbox_cols, dead)

    def stats(self) -> StoreStats:
        return read_stats(self.conn, self.directory)

    def backlog(self) -> int:
        return self.stats().outbox_backlog

    def events(self, kind: str, limit: int, session: Optional[str] = None) -> List[Dict[str, Any]]:
        """Newest first; one conversation's only when ``session`` is given."""
        where, args = ("kind=?", (kind,)) if session is None else ("kind=? AND session=?",
                                                                   (kind, session))
        return [decode_event(*r) for r in self._rows(
            "events", "SELECT ts,session,kind,data FROM events WHERE %s ORDER BY id DESC LIMIT ?"
            % where, args + (limit,))]

    def each_event(self, kind: str, session: Optional[str] = None,
                   oldest_first: bool = False) -> Iterator[Dict[str, Any]]:
        """Every event of ``kind`` (one conversation's when ``session`` is given), newest first
        unless ``oldest_first``, one at a time (a store may hold any number: status and report
        count them all without holding them)."""
        if "events" not in self.tables:
            return
        where, args = ("kind=?", (kind,)) if session is None else ("kind=? AND session=?",
                                                                   (kind, session))
        for row in self.conn.execute("SELECT ts,session,kind,data FROM events WHERE %s ORDER BY "
                                     "id %s" % (where, "ASC" if oldest_first else "DESC"), args):
            yield decode_event(*row)

    def count_events(self, kind: str, session: str) -> int:
        """How many events of ``kind`` one conversation has."""
        rows = self._rows("events", "SELECT count(*) FROM events WHERE kind=? AND session=?",
                          (kind, session))
        return rows[0][0] if rows else 0

    def conversation_of(self, session_id: str) -> Optional[str]:
        """The conversation a session id (one the host rotated) belongs to, if recorded."""
        rows = self._rows("aliases", "SELECT conversation FROM aliases WHERE session_id=?",
                          (session_id,))
        return rows[0][0] if rows else None

    def archive_by_session(self) -> List[tuple]:
        """(session, items, chars, newest created) per archived session."""
        return self._rows("archive", "SELECT session, count(*), sum(chars), max(created) FROM archive "
                          "GROUP BY session")

    def backlog_by_session(self) -> List[tuple]:
        """(session, rows waiting, newest created) per session with a backlog."""
        return self._rows("outbox", "SELECT session, count(*), max(created) FROM outbox%s GROUP BY "
                          "session" % self._outbox_where(0))

    def outbox_errors(self, limit: int) -> List[tuple]:
        """(created, session, last_error) of the newest rows the Gateway refused."""
        if "last_error" not in self.outbox_cols:
            return []
        return self._rows("outbox", "SELECT created, session, last_error FROM outbox WHERE "
                          "last_error IS NOT NULL AND last_error != '' ORDER BY id DESC LIMIT ?",
                          (limit,))
