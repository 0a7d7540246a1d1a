"""The archive as a person looks into it without a chat: list, show, search, export, forget.

Reads open the file with ``readonly.connect`` (the one read-only opener): they work while another
process writes the store (WAL readers never wait), never create tables, files beside it or
convert the file, and leave it byte-identical.
Export walks one conversation in id order a page of row heads at a time and streams each text
through SQLite's incremental blob I/O, so memory stays flat whatever the archive's size.
Forget is the one write: it takes the write lock like any writer (``BEGIN IMMEDIATE``, waiting
for another process's transaction) and overwrites what it deletes (``secure_delete``).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from . import lookup, readonly
from .stats import tables
from ..context.redact import strict
from ..context import item_key

BUSY_S = 10.0
_HEADS = 500                # row heads (no content) read per page of an export
# a conversation's rows in the tables that hold per-conversation data; {scope} is lookup.SCOPE
_FORGET = (("archive", "DELETE FROM archive WHERE {scope}"),
           ("outbox", "DELETE FROM outbox WHERE {scope}"),
           ("outbox_leases", "DELETE FROM outbox_leases WHERE {scope}"),
           ("events", "DELETE FROM events WHERE {scope}"),
           # what one process left the next (calibration, the canvas pin: the Gateway's map of
           # the task), keyed by conversation; a table stores before 0.3.0 do not have
           ("handover", "DELETE FROM handover WHERE conversation IN (SELECT ? UNION "
                        "SELECT session_id FROM aliases WHERE conversation=?)"))


class BrowseError(Exception):
    """The store cannot be read (missing, not a store); the message says which."""


def open_readonly(directory: Path, timeout: float = BUSY_S) -> sqlite3.Connection:
    """A read-only connection to ``directory/store.db``; BrowseError when there is none."""
    db = Path(directory) / "store.db"
    if Path(directory).exists() and not Path(directory).is_dir():    # as status says it
        raise BrowseError("the store directory %s is not a directory" % directory)
    if readonly.unwritten(db):
        raise BrowseError("no archive at %s" % db)
    if not db.is_file():
        raise BrowseError("%s is not a file: not a tencentdb-offload store" % db)
    try:
        conn = readonly.connect(db.resolve(), timeout)
        names, why = readonly.tables(conn), readonly.foreign(conn, db)
    except sqlite3.Error as exc:
        raise BrowseError(readonly.unreadable(db, exc)) from exc
    if "archive" not in names or why:
        conn.close()
        raise BrowseError(why or "%s is not a tencentdb-offload store (no archive table)" % db)
    return conn


def conversation_of(conn: sqlite3.Connection, session: str) -> str:
    """The conversation ``session`` names: itself, or the one a session id the host rotated
    at a compaction belongs to (the id Hermes printed last is such an alias)."""
    try:
        row = conn.execute("SELECT conversation FROM aliases WHERE session_id=? LIMIT 1",
                           (session,)).fetchone()
    except sqlite3.OperationalError:        # a store from before aliases
        return session
    return row[0] if row and isinstance(row[0], str) else session


def conversations(conn: sqlite3.Connection) -> List[Dict[str, Any]]:
    """Every conversation in the archive, newest activity first, with counts and sizes."""
    rows = conn.execute(
        "SELECT session, count(*), sum(kind='message'), sum(kind='tool_result'), "
        "coalesce(sum(chars),0), min(created), max(created) FROM archive GROUP BY session "
        "ORDER BY max(created) DESC").fetchall()
    aliases: Dict[str, int] = dict(conn.execute(
        "SELECT conversation, count(*) FROM aliases GROUP BY conversation"))
    return [{"session": r[0], "items": r[1], "messages": r[2] or 0, "tool_results": r[3] or 0,
             "chars": r[4], "first": r[5], "last": r[6], "aliases": aliases.get(r[0], 0)}
            for r in rows]


def find(conn: sqlite3.Connection, ident: str, session: Optional[str] = None) -> List[Dict[str, Any]]:
    """Items named ``ident``: a row number (``#12`` or ``12``), a ``msg-`` key or a
    ``tool_call_id``; in one conversation when ``session`` is given (keys repeat across them)."""
    number = ident[1:] if ident.startswith("#") else ident
    head = "SELECT " + lookup.ITEM + ",session FROM archive WHERE "
    if number.isascii() and number.isdigit():      # beyond SQLite's integers: no such row
        rows = conn.execute(head + "id=?", (int(number),)).fetchall() if int(number) < 2 ** 63 else []
    elif item_key.PATTERN.fullmatch(ident):
        low = "msg:" + ident[len(item_key.PREFIX):]
        rows = conn.execute(head + "item_key >= ? AND item_key < ? ORDER BY id LIMIT 50",
                            (low, low + "g")).fetchall()
    else:
        rows = conn.execute(head + "tool_call_id=? ORDER BY id LIMIT 50", (ident,)).fetchall()
    out = [dict(lookup.described(r[:-1]), session=r[-1]) for r in rows]
    return [o for o in out if session is None or o["session"] == session]


def read(conn: sqlite3.Connection, item: Dict[str, Any], offset: int, limit: int) -> str:
    """A page of one item found by ``find``."""
    return lookup.page_of(conn, item["id"], item["total_chars"], max(0, offset), limit)


def search(conn: sqlite3.Connection, query: str, session: Optional[str] = None,
           limit: int = 20) -> List[Dict[str, Any]]:
    """Items containing every word of ``query`` (any case), newest conversations first."""
    words = lookup.words_of(query)
    sessions = [session] if session else [c["session"] for c in conversations(conn)]
    out: List[Dict[str, Any]] = []
    for s in sessions:
        for hit in lookup.search(conn, s, words, limit - len(out)):
            out.append(dict(hit, session=s))
        if len(out) >= limit:
            break
    return out


def export(conn: sqlite3.Connection, session: str, write: Callable[[str], Any],
           secrets: Optional[List[int]] = None) -> int:
    """Every item of one conversation (with its aliased session ids), in order, as JSON Lines
    through ``write``; the number of items. Memory: a page of heads and a chunk of text.
    ``secrets``: the ids of the items holding a secret (``strict`` would mask) appended."""
    n = 0
    for row in _heads(conn, session, ",session,args"):
        item = dict(lookup.described(row[:-2]), session=row[-2], args=row[-1] or "")
        write(json.dumps(item, ensure_ascii=False)[:-1] + ', "content": "')
        held = secrets is not None and _holds_secret(item["args"])
        last = ""
        for text in lookup.chunks(conn, item["id"]):
            write(json.dumps(text, ensure_ascii=False)[1:-1])
            if secrets is not None and not held:    # (a chunk's start read with the last's end)
                held, last = _holds_secret(last[-SCAN_OVERLAP:] + text), text
        if held:
            secrets.append(item["id"])  # type: ignore[union-attr]
        write('"}\n')
        n += 1
    return n


SCAN_OVERLAP = 4_000        # chars of a chunk's end read again with the next: a key block spans it


def _holds_secret(text: str) -> bool:
    return bool(text) and strict(text) != text


def _heads(conn: sqlite3.Connection, session: str, more: str = "") -> Iterator[tuple]:
    """One conversation's row heads (``lookup.ITEM`` and ``more`` columns) in order, a page
    in memory at a time. One query: a page per query (``id > last``) walked the whole
    conversation's index again for each page, quadratic (1M items: minutes)."""
    cur = conn.execute("SELECT " + lookup.ITEM + more + " FROM archive WHERE " + lookup.SCOPE
                       + " ORDER BY id", (session, session))
    try:
        while True:
            rows = cur.fetchmany(_HEADS)
            if not rows:
                return
            yield from rows
    finally:
        cur.close()


def forget_counts(conn: sqlite3.Connection, session: str) -> Dict[str, int]:
    """What ``forget`` would remove, table by table."""
    out = {table: int(conn.execute(sql.replace("DELETE", "SELECT count(*)", 1).format(
        scope=lookup.SCOPE), (session, session)).fetchone()[0]) for table, sql in _FORGET
        if table in tables(conn)}
    out["aliases"] = int(conn.execute("SELECT count(*) FROM aliases WHERE conversation=? OR "
                                      "session_id=?", (session, session)).fetchone()[0])
    return out


def forget(directory: Path, session: str, timeout: float = BUSY_S) -> Dict[str, int]:
    """Delete one conversation's data (archive, outbox, leases, events, handover, aliases) in one
    transaction; the rows removed per table. Waits up to ``timeout`` for the write lock."""
    with writer(directory, timeout) as conn:
        conn.execute("PRAGMA secure_delete=ON")     # the deleted text is overwritten, not freed
        conn.execute("BEGIN IMMEDIATE")
        try:
            removed = {}
            for table, sql in [f for f in _FORGET if f[0] in tables(conn)]:
                removed[table] = conn.execute(sql.format(scope=lookup.SCOPE),
                                              (session, session)).rowcount
            removed["aliases"] = conn.execute("DELETE FROM aliases WHERE conversation=? OR "
                                              "session_id=?", (session, session)).rowcount
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        try:        # the WAL still holds the old pages until a checkpoint: copy them back now
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        return removed


@contextlib.contextmanager
def writer(directory: Path, timeout: float = BUSY_S) -> Iterator[sqlite3.Connection]:
    """The connection of an operator command's one write (forget, requeue): to a store that
    exists (never creates one); a busy or read-only store is a BrowseError in words."""
    open_readonly(directory).close()
    try:
        conn = sqlite3.connect(str(Path(directory) / "store.db"), timeout=timeout,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise write_problem(exc, directory) from exc
    try:
        yield conn
    except sqlite3.OperationalError as exc:
        raise write_problem(exc, directory) from exc
    finally:
        conn.close()


def write_problem(exc: sqlite3.Error, directory: Path) -> BrowseError:
    """What a refused write means for the user: wait, or a store they may not write."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return BrowseError("the store %s is busy (another process holds its write lock); try "
                           "again" % directory)
    if "readonly" in text or "read-only" in text:
        return BrowseError("cannot write %s: the store is read-only here (%s)" % (directory, text))
    return BrowseError("cannot write %s: %s" % (directory, text))


def items(conn: sqlite3.Connection, session: str) -> Iterator[Dict[str, Any]]:
    """One conversation's items without content, in order (for ``list --session``)."""
    for r in _heads(conn, session):
        yield lookup.described(r)
