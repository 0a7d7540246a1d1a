"""hermes-lcm's ``lcm.db`` as read-only history: find it, search it, read one message in full.

Users switching from hermes-lcm (LCM-X) keep months of history in its SQLite store: a
``messages`` table (``store_id``, ``session_id``, ``role``, ``content``, ``tool_name``,
``timestamp``) with an FTS5 index ``messages_fts`` and a ``summary_nodes`` DAG. It lives at
``LCM_DATABASE_PATH`` when set, else ``$HERMES_HOME/lcm.db``. This module never writes it:

- a store at rest is opened ``immutable=1`` (no lock taken, no ``-wal``/``-shm`` created);
- a store whose WAL and index exist (hermes-lcm still running) ``mode=ro&readonly_shm=1``;
- a rollback-journal store is opened ``mode=ro``, so a writer holding it is seen as locked;
- every call runs under a deadline (a progress handler), so a damaged, locked, huge or
  foreign file gives ``LcmUnavailable("<reason>")`` within a second, never a hang.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..host.hermes_config import hermes_home
from .readonly import uri

LABEL = "hermes-lcm history"
KEY_PREFIX = "lcm-"
KEY = re.compile(r"lcm-([0-9]{1,18})")
PATH_VARS = ("LCM_DATABASE_PATH", "LCM_DB_PATH")   # hermes-lcm's own; the second an older spelling
NEEDED = {"store_id", "session_id", "role", "content", "timestamp"}
DEADLINE_S = 0.8            # a search or read gives up after this (the answer is "unavailable")
BUSY_S = 0.25               # how long to wait for another process's lock
MAX_BYTES = 16 << 30        # larger than this is not opened at all
MAX_TERMS = 8
SNIPPET_BEFORE, SNIPPET = 200, 500


class LcmUnavailable(Exception):
    """The store exists but cannot be read now; str() is the reason."""


def store_path(setting: str, env: Mapping[str, str]) -> Optional[Path]:
    """Where hermes-lcm's store is for this setting (``auto``/``off``/a path); None when off."""
    if setting == "off":
        return None
    if setting and setting != "auto":
        return Path(setting).expanduser()
    for var in PATH_VARS:
        value = (env.get(var) or "").strip()
        if value and "\0" not in value:
            return Path(value).expanduser()
    return hermes_home(env) / "lcm.db"


def unavailable(reason: str) -> str:
    return "LCM history unavailable: %s" % reason


def _wal_header(path: Path) -> bool:
    """True when the file says it is in WAL mode (header bytes 18-19 are 2)."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or not head.startswith(b"SQLite format 3\0"):
        raise LcmUnavailable("%s is not an SQLite database" % path)
    return head[18] == 2


def open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` or leave a file beside it (see the module doc)."""
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
    live = Path(str(path) + "-wal").exists() and Path(str(path) + "-shm").exists()
    if not wal:
        mode = "mode=ro"                    # shared lock: a writer holding it reads as locked
    elif live:
        mode = "mode=ro&readonly_shm=1"     # hermes-lcm still has it open: read its WAL, write nothing
    else:
        mode = "immutable=1"                # at rest: no lock, no -wal/-shm created
    try:
        return sqlite3.connect(uri(path) + mode, uri=True, timeout=BUSY_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise LcmUnavailable("cannot open %s: %s" % (path, exc))


def _terms(query: str) -> List[str]:
    return [t for t in query.split() if t][:MAX_TERMS]


def _fts_query(terms: List[str]) -> str:
    """Every term as a quoted FTS5 prefix phrase, all required."""
    return " AND ".join('"%s"*' % t.replace('"', '""') for t in terms)


def _snippet(text: str, terms: List[str]) -> str:
    folded = text.casefold()
    at = min([i for i in (folded.find(t.casefold()) for t in terms) if i >= 0] or [0])
    start = max(0, at - SNIPPET_BEFORE)
    return ("…" if start else "") + text[start:start + SNIPPET] + ("…" if start + SNIPPET < len(text) else "")


def _when(ts: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ts)))
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


HOT_JOURNAL = ("%s has a hot journal (%s-journal: hermes-lcm stopped in the middle of a write); "
               "SQLite rolls it back at the next open for writing, which this plugin never does")


def _hot_journal(path: Path) -> bool:
    """A rollback journal left by a writer that died mid-transaction (no lock held on it):
    a read-only reader cannot roll it back, and SQLite says only "readonly database"."""
    try:
        return Path(str(path) + "-journal").stat().st_size > 0
    except OSError:
        return False


class LcmHistory:
    """Read-only search and read of one hermes-lcm store; a connection per call, none kept."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def from_settings(cls, settings: Any, env: Mapping[str, str] = os.environ) -> Optional["LcmHistory"]:
        path = store_path(getattr(settings, "lcm_history", "auto"), env)
        return cls(path) if path is not None else None

    def exists(self) -> bool:
        return self.path.is_file()

    def _run(self, work: Any) -> Any:
        """``work(conn, columns)`` on a read-only connection under the deadline."""
        conn = open_readonly(self.path)
        deadline = time.monotonic() + DEADLINE_S
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 2_000)
        try:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
            if not NEEDED <= cols:
                raise LcmUnavailable("%s is not a hermes-lcm store (no messages table with %s)"
                                     % (self.path, ", ".join(sorted(NEEDED))))
            return work(conn, cols)
        except sqlite3.OperationalError as exc:
            if "interrupt" in str(exc):
                raise LcmUnavailable("reading %s took longer than %.1f s" % (self.path, DEADLINE_S))
            if "readonly" in str(exc) and _hot_journal(self.path):
                raise LcmUnavailable(HOT_JOURNAL % (self.path, self.path.name))
            raise LcmUnavailable("cannot read %s: %s" % (self.path, exc))
        except sqlite3.Error as exc:
            raise LcmUnavailable("cannot read %s: %s" % (self.path, exc))
        finally:
            conn.close()

    def counts(self) -> Dict[str, int]:
        """Messages and sessions in the store (for doctor)."""
        def work(conn: sqlite3.Connection, _cols: Any) -> Dict[str, int]:
            n, s = conn.execute("SELECT count(*), count(DISTINCT session_id) FROM messages").fetchone()
            return {"messages": int(n or 0), "sessions": int(s or 0)}
        return self._run(work)

    def search(self, query: str, limit: int, offset: int = 0) -> Dict[str, Any]:
        """Messages holding every word, newest first: ``{"results": [...], "next_offset"}``."""
        terms = _terms(query)

        def work(conn: sqlite3.Connection, cols: Any) -> Dict[str, Any]:
            rows = self._matches(conn, cols, terms, limit + 1, offset)
            results = [self._hit(row, terms) for row in rows[:limit]]
            return {"results": results, "next_offset": offset + limit if len(rows) > limit else None}
        return self._run(work)

    def _matches(self, conn: sqlite3.Connection, cols: Any, terms: List[str], limit: int,
                 offset: int) -> List[tuple]:
        tool = "m.tool_name" if "tool_name" in cols else "''"      # older stores lack it
        select = "SELECT m.store_id, m.session_id, m.role, %s, m.timestamp, m.content FROM messages m " % tool
        fts = conn.execute("SELECT 1 FROM sqlite_master WHERE name='messages_fts'").fetchone()
        if fts and all(re.fullmatch(r"[A-Za-z0-9_]+", t) for t in terms):
            # FTS5 tokens are words: an ASCII word is found by prefix in the index
            return conn.execute(select + "JOIN messages_fts f ON f.rowid = m.store_id WHERE "
                                "messages_fts MATCH ? ORDER BY m.store_id DESC LIMIT ? OFFSET ?",
                                (_fts_query(terms), limit, offset)).fetchall()
        # Chinese runs and symbols are not separate FTS tokens: a substring scan (LIKE folds ASCII)
        where = " AND ".join("m.content LIKE ? ESCAPE '\\'" for _ in terms)
        likes = ["%" + re.sub(r"([\\%_])", r"\\\1", t) + "%" for t in terms]
        return conn.execute(select + "WHERE " + where + " ORDER BY m.store_id DESC LIMIT ? OFFSET ?",
                            (*likes, limit, offset)).fetchall()

    @staticmethod
    def _hit(row: tuple, terms: List[str]) -> Dict[str, Any]:
        store_id, session, role, tool_name, ts, content = row
        text = content if isinstance(content, str) else ""
        return {"key": KEY_PREFIX + str(store_id), "source": LABEL, "session": str(session or ""),
                "time": _when(ts), "role": str(role or ""), "tool_name": str(tool_name or ""),
                "chars": len(text), "snippet": _snippet(text, terms)}

    def read(self, key: str, offset: int, limit: int) -> Optional[Dict[str, Any]]:
        """``limit`` chars from ``offset`` of the message ``lcm-<store_id>``; None when absent."""
        match = KEY.fullmatch(key)
        if match is None:
            return None

        def work(conn: sqlite3.Connection, cols: Any) -> Optional[Dict[str, Any]]:
            tool = "tool_name" if "tool_name" in cols else "''"
            row = conn.execute("SELECT session_id, role, %s, timestamp, length(content), "
                               "substr(content, ?, ?) FROM messages WHERE store_id=?" % tool,
                               (offset + 1, limit, int(match.group(1)))).fetchone()
            if row is None:
                return None
            session, role, tool_name, ts, total, page = row
            return {"key": key, "kind": "message", "role": str(role or ""), "tool_call_id": "",
                    "tool_name": str(tool_name or ""), "content": page if isinstance(page, str) else "",
                    "total_chars": int(total or 0), "source": LABEL, "session": str(session or ""),
                    "time": _when(ts)}
        return self._run(work)
