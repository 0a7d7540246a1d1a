"""Noticing that the store file under a live process was deleted, replaced or lost its WAL, and
the file operations of putting it right (quarantine, salvage); ``Store.recover`` runs them.

A process keeps its SQLite files open, so a store deleted or replaced under it goes on
"working": commits land in a file no other connection (and no restart) will ever see. The
store therefore remembers the identity (device, inode) of ``store.db`` and of its WAL and
compares before each write and each new connection. The still-open old file is the best copy
there is: it is backed up through an open connection before anything is moved. Broken files are
never deleted, only renamed with a timestamp for the user.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Tuple

Ident = Optional[Tuple[int, int]]
SUFFIXES = ("", "-wal", "-shm")
# errors that mean the file is not (or no longer) a database; "locked", "full" and I/O errors
# are the writer's to retry
_BROKEN = ("not a database", "malformed")


def ident(path: Path) -> Ident:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def identity(db: Path) -> Tuple[Ident, Ident]:
    """(store.db, store.db-wal) identities; None for a file that is not there."""
    return ident(db), ident(Path(str(db) + "-wal"))


def is_broken(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and any(w in str(exc) for w in _BROKEN)


_NO_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


SQLITE_MAX_PATH = 512      # the unix VFS's longest file name; its "-journal" file is the longest


def path_too_long(db: Path) -> str:
    """Why SQLite cannot open ``db`` whatever the disk holds (its name is too long for its
    ``-journal``, which SQLite reports only as "unable to open database file"); '' when not."""
    size = len(os.fsencode(os.path.abspath(str(db))))
    if size + len("-journal") <= SQLITE_MAX_PATH:
        return ""
    return ("its path is %d bytes and SQLite opens no file whose name passes %d bytes with "
            "'-journal': set TENCENTDB_OFFLOAD_STORE_DIR to an absolute directory of at most "
            "%d bytes" % (size, SQLITE_MAX_PATH, SQLITE_MAX_PATH - len("-journal/store.db")))


def no_space(directory: Path, exc: BaseException, size: int = 64 << 10) -> str:
    """SQLite says "disk I/O error" for a full disk (a quota, a file size limit, a read-only
    mount) as for a lost WAL: when ``directory`` cannot take ``size`` more bytes, why, in
    words that say nothing was moved; '' when it can (or ``exc`` is no I/O error)."""
    if "disk I/O error" not in str(exc):
        return ""
    fd, name = -1, ""
    try:
        fd, name = tempfile.mkstemp(prefix=".space-probe-", dir=str(directory))
        with os.fdopen(os.dup(fd), "wb") as probe_file:    # writes it all, or raises
            probe_file.write(b"\0" * size)
        return ""
    except OSError as probe:
        if probe.errno not in _NO_SPACE:
            return ""
        return "%s (%s): free some space and try again; nothing was moved" % (exc, probe.strerror)
    finally:
        if fd >= 0:
            os.close(fd)
            os.unlink(name)


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def quarantine(db: Path, label: str, suffixes: Tuple[str, ...] = SUFFIXES) -> str:
    """Rename the database files that exist to ``store.db.<label>-<time>[-wal|-shm]``; the
    name used ('' when there was nothing to move)."""
    aside = db.with_name("%s.%s-%s" % (db.name, label, stamp()))
    n = 1
    while any(Path(str(aside) + s).exists() for s in SUFFIXES):    # two in one second
        n += 1
        aside = db.with_name("%s.%s-%s-%d" % (db.name, label, stamp(), n))
    moved = False
    for suffix in suffixes:
        src = Path(str(db) + suffix)
        if src.exists():
            src.rename(Path(str(aside) + suffix))
            moved = True
    return aside.name if moved else ""


def salvage(conn: Optional[sqlite3.Connection], dest: Path, schema: str) -> int:
    """Back up what ``conn`` (open on the old file) still reads into ``dest``; the archived
    items saved, or -1 when it cannot be read (the file itself is garbage). A backup copies
    damaged pages verbatim, so a copy that fails SQLite's quick check is rebuilt row by row
    into a fresh ``schema``, skipping the rows that cannot be read."""
    if conn is None:
        return -1
    try:
        out = sqlite3.connect(str(dest), isolation_level=None)
        try:
            conn.backup(out)
            if out.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                out.close()
                _remove(dest)
                out = sqlite3.connect(str(dest), isolation_level=None)
                _copy_rows(conn, out, schema)
            return int(out.execute("SELECT count(*) FROM archive").fetchone()[0])
        finally:
            out.close()
    except sqlite3.Error:
        _remove(dest)
        return -1


def _remove(db: Path) -> None:
    for suffix in SUFFIXES:
        Path(str(db) + suffix).unlink(missing_ok=True)


MAX_SKIPS = 200     # unreadable stretches skipped per table before the rest is given up


def _copy_rows(src: sqlite3.Connection, out: sqlite3.Connection, schema: str) -> None:
    """Every row ``src`` can still read, table by table, into a fresh ``schema``."""
    out.executescript(schema)
    tables = [r[0] for r in out.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite%'")]
    for table in tables:
        cols = ",".join('"%s"' % r[1] for r in out.execute('PRAGMA table_info("%s")' % table))
        insert = 'INSERT OR IGNORE INTO "%s"(rowid,%s) VALUES (%s)' % (
            table, cols, ",".join("?" * (cols.count(",") + 2)))
        out.execute("BEGIN")
        try:
            _copy_table(src, out, 'SELECT rowid,%s FROM "%s" WHERE rowid>? ORDER BY rowid'
                        % (cols, table), insert)
        finally:
            out.execute("COMMIT")


def _copy_table(src: sqlite3.Connection, out: sqlite3.Connection, select: str,
                insert: str) -> None:
    last, step, skips = 0, 1, 0
    while skips <= MAX_SKIPS:
        try:
            for row in src.execute(select, (last,)):
                out.execute(insert, row)
                last, step = row[0], 1
            return
        except sqlite3.OperationalError as exc:
            if "no such" in str(exc):   # a table the old file never had
                return
        except sqlite3.DatabaseError:
            pass
        skips += 1
        last += step                    # past the unreadable stretch, in growing steps
        step = min(step * 2, 1 << 20)


SCHEMA_VERSION = 1          # PRAGMA user_version; 0 is a store made before it was set


def schema_problem(conn: sqlite3.Connection, schema: str, version: int) -> str:
    """Why this version cannot use the store: written by a newer one, or ``schema``'s tables
    there with columns missing (every write would fail); '' when nothing."""
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > version:
        return ("was written by a newer version of tencentdb-offload (schema %d, this one "
                "reads %d): update the plugin, or move the file aside to start a new archive"
                % (found, version))
    probe = sqlite3.connect(":memory:")
    try:
        probe.executescript(schema)
        for (table,) in probe.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            want = {r[1] for r in probe.execute('PRAGMA table_info("%s")' % table)}
            have = {r[1] for r in conn.execute('PRAGMA table_info("%s")' % table)}
            if have and want - have:
                return ("has an unknown schema (table %s lacks %s): written by a newer version "
                        "of tencentdb-offload or another program; move the file aside to start "
                        "a new archive" % (table, ", ".join(sorted(want - have))))
        return ""
    finally:
        probe.close()


def usable(db: Path) -> bool:
    """A database file with the archive table that passes SQLite's quick check (another
    process put a good store here: use it, do not move it)."""
    try:    # the header first: a connection would read our old WAL's pages over garbage
        with open(db, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return False
    except OSError:
        return False
    try:
        conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True, timeout=1.0)
        try:
            ok = conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            return ok and conn.execute("SELECT 1 FROM sqlite_master WHERE name='archive'"
                                       ).fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def while_locked(step: Callable[[], Any], seconds: float) -> Any:
    """Run ``step``, retrying for up to ``seconds`` while SQLite says the file is locked/busy."""
    deadline = time.monotonic() + seconds
    pause = 0.01
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(0.25, pause * 2)
