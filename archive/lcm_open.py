"""Opening hermes-lcm's ``lcm.db`` so that nothing is written beside it and nothing committed is missed.

- a store at rest (no ``-wal``, or an empty one) is opened ``immutable=1``: no lock taken, no
  ``-wal``/``-shm`` created;
- a store whose WAL and index exist (hermes-lcm still running) ``mode=ro&readonly_shm=1``;
- a store with a committed ``-wal`` but no ``-shm`` (a backup tool's copy, a moved folder):
  ``immutable=1`` would ignore the WAL, and a plain open would create the index beside the
  file. The store and its WAL are copied into a private temporary folder (once per process
  while neither changes, up to ``COPY_MAX`` bytes) and that copy is read; a larger one is read
  without its WAL and every answer says the history is incomplete;
- a rollback-journal store is opened ``mode=ro``, so a writer holding it is seen as locked.
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Dict, Tuple

from .readonly import uri

BUSY_S = 0.25               # how long to wait for another process's lock
MAX_BYTES = 16 << 30        # larger than this is not opened at all
COPY_MAX = 128 << 20        # a store + WAL without its index is copied up to this size
WAL_HEADER = 32             # a WAL of this size or less holds no committed frame


class LcmUnavailable(Exception):
    """The store exists but cannot be read now; str() is the reason."""


def _wal_header(path: Path) -> bool:
    """True when the file says it is in WAL mode (header bytes 18-19 are 2)."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or not head.startswith(b"SQLite format 3\0"):
        raise LcmUnavailable("%s is not an SQLite database" % path)
    return head[18] == 2


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _stamp(path: Path) -> Tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


class _Copies:
    """Private copies of stores with an orphaned WAL: one per store while it is unchanged,
    removed when it changes and at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Dict[str, Tuple[tuple, Path]] = {}
        atexit.register(self.clear)

    def get(self, path: Path, wal: Path) -> Path:
        stamp = (_stamp(path), _stamp(wal))
        with self._lock:
            held = self._held.get(str(path))
            if held is not None and held[0] == stamp and held[1].exists():
                return held[1]
            if held is not None:
                shutil.rmtree(held[1].parent, ignore_errors=True)
            folder = Path(tempfile.mkdtemp(prefix="tdo-lcm-"))       # 0700: this user only
            copy = folder / "lcm.db"
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, Path(str(copy) + "-wal"))
            self._held[str(path)] = (stamp, copy)
            return copy

    def clear(self) -> None:
        with self._lock:
            for _stamp_, copy in self._held.values():
                shutil.rmtree(copy.parent, ignore_errors=True)
            self._held.clear()


COPIES = _Copies()


def open_readonly(path: Path) -> Tuple[sqlite3.Connection, str]:
    """A connection that cannot write ``path`` or leave a file beside it, and '' or why what
    it reads is incomplete (see the module doc)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise LcmUnavailable("cannot read %s: %s" % (path, exc.strerror or exc))
    if size > MAX_BYTES:
        raise LcmUnavailable("%s is %.1f MB, more than the %.1f MB this plugin reads"
                             % (path, size / 1e6, MAX_BYTES / 1e6))
    try:
        wal = _wal_header(path)
    except OSError as exc:
        raise LcmUnavailable("cannot read %s: %s" % (path, exc.strerror or exc))
    wal_file, shm_file = Path(str(path) + "-wal"), Path(str(path) + "-shm")
    target, mode, incomplete = path, "immutable=1", ""     # at rest: no lock, no -wal/-shm created
    if not wal:
        mode = "mode=ro"                    # shared lock: a writer holding it reads as locked
    elif wal_file.exists() and shm_file.exists():
        mode = "mode=ro&readonly_shm=1"     # hermes-lcm still has it open: read its WAL, write nothing
    elif _size(wal_file) > WAL_HEADER:
        target, mode, incomplete = _orphaned_wal(path, wal_file, size)
    try:
        return sqlite3.connect(uri(target) + mode, uri=True, timeout=BUSY_S,
                               check_same_thread=False), incomplete
    except sqlite3.Error as exc:
        raise LcmUnavailable("cannot open %s: %s" % (path, exc))


def _orphaned_wal(path: Path, wal: Path, size: int) -> Tuple[Path, str, str]:
    """(what to open, how, why it is incomplete) for a store whose committed WAL has no index."""
    total = size + _size(wal)
    why = ("%s-wal holds writes this plugin cannot read in place (no %s-shm beside it): the "
           "newest messages may be missing" % (path.name, path.name))
    if total > COPY_MAX:
        return path, "immutable=1", "%s (%.0f MB with its WAL, more than the %.0f MB it copies " \
            "to read them)" % (why, total / 1e6, COPY_MAX / 1e6)
    try:
        return COPIES.get(path, wal), "", ""        # our own copy: opened as SQLite likes
    except OSError as exc:
        return path, "immutable=1", "%s (copying it to read them failed: %s)" % (why, exc.strerror or exc)
