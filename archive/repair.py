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

import sqlite3
import time
from pathlib import Path
from typing import Optional, Tuple

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


def salvage(conn: Optional[sqlite3.Connection], dest: Path) -> int:
    """Back up what ``conn`` (open on the old file) still reads into ``dest``; the archived
    items saved, or -1 when it cannot be read (the file itself is garbage)."""
    if conn is None:
        return -1
    try:
        out = sqlite3.connect(str(dest))
        try:
            conn.backup(out)
            return int(out.execute("SELECT count(*) FROM archive").fetchone()[0])
        finally:
            out.close()
    except sqlite3.Error:
        for suffix in SUFFIXES:
            Path(str(dest) + suffix).unlink(missing_ok=True)
        return -1


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
