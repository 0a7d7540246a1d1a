"""SQLite archive of everything that leaves the context, and the durable ingest outbox.

One connection per thread (WAL, so readers never wait for the writer). Hooks never touch
SQLite themselves: they hand rows to ``StoreWriter``, one background thread that commits
them in batches, so a 1 MB tool result costs the hook a queue put, not a disk write.
A store that cannot be opened or written degrades to "no archive" with a clear error; it
never raises into a turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import lookup

log = logging.getLogger("tencentdb_offload.store")

SCHEMA = """
CREATE TABLE IF NOT EXISTS archive(
  id INTEGER PRIMARY KEY,
  session TEXT NOT NULL,
  item_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  tool_call_id TEXT,
  tool_name TEXT,
  role TEXT,
  args TEXT,
  content TEXT NOT NULL,
  chars INTEGER NOT NULL,
  created REAL NOT NULL,
  UNIQUE(session, item_key));
CREATE INDEX IF NOT EXISTS archive_call ON archive(tool_call_id);
CREATE INDEX IF NOT EXISTS archive_created ON archive(created);
CREATE TABLE IF NOT EXISTS outbox(
  id INTEGER PRIMARY KEY,
  session TEXT NOT NULL,
  kind TEXT NOT NULL,
  payload TEXT NOT NULL,
  created REAL NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  dead INTEGER NOT NULL DEFAULT 0,
  last_error TEXT);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox(dead, session, id);
CREATE TABLE IF NOT EXISTS aliases(
  session_id TEXT PRIMARY KEY,
  conversation TEXT NOT NULL,
  created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY,
  ts REAL NOT NULL,
  session TEXT,
  kind TEXT NOT NULL,
  data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters(
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL);
"""


@dataclass
class ArchiveItem:
    kind: str                   # "tool_result" | "message"
    content: str
    tool_call_id: str = ""
    tool_name: str = ""
    role: str = ""
    args: Any = ""              # text or the call's argument object (serialised when written)

    @property
    def key(self) -> str:
        if self.tool_call_id and self.kind == "tool_result":
            return "call:" + self.tool_call_id
        digest = hashlib.sha1((self.role + "\0" + self.content).encode("utf-8", "replace"))
        return "msg:" + digest.hexdigest()


def _args_text(args: Any) -> str:
    """Tool-call arguments as stored (JSON, at most 4,000 chars: enough to recognise a call)."""
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
    return text[:4000]


class StoreError(Exception):
    """The archive could not be used; the message says why and what to do."""


class Store:
    """Synchronous access to the database; safe from any thread."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / "store.db"
        self.last_error = ""
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: List[sqlite3.Connection] = []
        self._open_checked()

    # -- connections ------------------------------------------------------------------
    def _open_checked(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):
                self._quarantine(exc)
                conn = self._conn()
                conn.executescript(SCHEMA)
            else:
                raise StoreError("cannot open %s: %s" % (self.path, exc)) from exc
        except OSError as exc:
            raise StoreError("cannot create %s: %s" % (self.directory, exc)) from exc

    def _quarantine(self, exc: Exception) -> None:
        """Move a corrupt database aside (kept for inspection) and start a new one."""
        self.close()
        aside = self.path.with_name("store.db.corrupt-%d" % int(time.time()))
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                src.rename(Path(str(aside) + suffix))
        self.last_error = ("store was corrupt (%s); moved to %s and started a new one"
                           % (exc, aside.name))
        log.warning("tencentdb-offload: %s", self.last_error)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(str(self.path), timeout=10, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    def transaction(self, ops: Iterable[Callable[[sqlite3.Connection], Any]]) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                op(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- archive ----------------------------------------------------------------------
    @staticmethod
    def op_archive(session: str, items: List[ArchiveItem], now: float) -> Callable:
        # rows (content hashes, argument JSON) are built on the writer thread, not the caller's
        def op(conn: sqlite3.Connection) -> None:
            rows = [(session, it.key, it.kind, it.tool_call_id or None, it.tool_name, it.role,
                     _args_text(it.args), it.content, len(it.content), now) for it in items]
            conn.executemany(
                "INSERT OR IGNORE INTO archive(session,item_key,kind,tool_call_id,tool_name,"
                "role,args,content,chars,created) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        return op

    def archive(self, session: str, items: List[ArchiveItem]) -> None:
        if items:
            self.transaction([self.op_archive(session, items, time.time())])

    def read_page(self, conversation: str, tool_call_id: str, offset: int = 0,
                  limit: int = 20_000) -> Optional[Dict[str, Any]]:
        """A page of an archived tool result of this conversation (never another's)."""
        return lookup.read_page(self._conn(), conversation, tool_call_id, offset, limit)

    def search(self, conversation: str, query: str, limit: int = 5) -> List[Dict[str, Any]]:
        """This conversation's items containing every word of ``query``, any case, newest first."""
        return lookup.search(self._conn(), conversation, query.split()[:8], limit)

    def count_archived(self, session: str) -> int:
        row = self._conn().execute("SELECT count(*) FROM archive WHERE session=?",
                                   (session,)).fetchone()
        return int(row[0])

    # -- outbox -----------------------------------------------------------------------
    @staticmethod
    def op_enqueue(session: str, kind: str, payload: Dict[str, Any], now: float) -> Callable:
        # serialised on the writer thread, not the hook's: a 1 MB result costs ~1 ms to dump
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO outbox(session,kind,payload,created) VALUES (?,?,?,?)",
                         (session, kind, json.dumps(payload, ensure_ascii=False, default=str), now))
        return op

    def pending(self, session: Optional[str] = None, limit: int = 200) -> List[Tuple]:
        """Undelivered rows (id, session, kind, payload, attempts, payload bytes), oldest first."""
        conn = self._conn()
        if session is None:
            q = ("SELECT id,session,kind,payload,attempts FROM outbox WHERE dead=0 "
                 "ORDER BY id LIMIT ?")
            rows = conn.execute(q, (limit,)).fetchall()
        else:
            q = ("SELECT id,session,kind,payload,attempts FROM outbox WHERE dead=0 AND session=? "
                 "ORDER BY id LIMIT ?")
            rows = conn.execute(q, (session, limit)).fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4], len(r[3])) for r in rows]

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

    def backlog(self, session: Optional[str] = None) -> int:
        if session is None:
            row = self._conn().execute("SELECT count(*) FROM outbox WHERE dead=0").fetchone()
        else:
            row = self._conn().execute("SELECT count(*) FROM outbox WHERE dead=0 AND session=?",
                                       (session,)).fetchone()
        return int(row[0])

    # -- aliases: one conversation across Hermes' session-id rotations ------------------
    def set_alias(self, session_id: str, conversation: str) -> None:
        self.transaction([lambda c: c.execute(
            "INSERT OR REPLACE INTO aliases(session_id,conversation,created) VALUES (?,?,?)",
            (session_id, conversation, time.time()))])

    def get_alias(self, session_id: str) -> Optional[str]:
        row = self._conn().execute("SELECT conversation FROM aliases WHERE session_id=?",
                                   (session_id,)).fetchone()
        return row[0] if row else None

    # -- events (compactions, errors) for status across processes -----------------------
    @staticmethod
    def op_event(session: str, kind: str, data: Dict[str, Any], now: float) -> Callable:
        text = json.dumps(data, ensure_ascii=False, default=str)
        return lambda c: c.execute("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)",
                                   (now, session, kind, text))

    def events(self, kind: Optional[str] = None, limit: int = 20) -> List[Dict[str, Any]]:
        if kind:
            rows = self._conn().execute(
                "SELECT ts,session,kind,data FROM events WHERE kind=? ORDER BY id DESC LIMIT ?",
                (kind, limit)).fetchall()
        else:
            rows = self._conn().execute(
                "SELECT ts,session,kind,data FROM events ORDER BY id DESC LIMIT ?",
                (limit,)).fetchall()
        return [{"ts": r[0], "session": r[1], "kind": r[2], **json.loads(r[3])} for r in rows]

    # -- housekeeping -----------------------------------------------------------------
    def stats(self) -> Dict[str, Any]:
        conn = self._conn()
        items, chars = conn.execute("SELECT count(*), coalesce(sum(chars),0) FROM archive").fetchone()
        sessions = conn.execute("SELECT count(DISTINCT session) FROM archive").fetchone()[0]
        backlog = conn.execute("SELECT count(*) FROM outbox WHERE dead=0").fetchone()[0]
        dead = conn.execute("SELECT count(*) FROM outbox WHERE dead=1").fetchone()[0]
        row = conn.execute("SELECT value FROM counters WHERE name='delivered'").fetchone()
        size = sum(p.stat().st_size for p in self.directory.glob("store.db*") if p.is_file())
        return {"archived_items": items, "archived_chars": chars, "archived_sessions": sessions,
                "outbox_backlog": backlog, "outbox_dead": dead,
                "delivered": row[0] if row else 0, "db_bytes": size, "path": str(self.path)}

    def reclaim(self, retention_days: int, now: Optional[float] = None) -> Dict[str, int]:
        """Delete archive, outbox, alias and event rows older than ``retention_days``."""
        if retention_days <= 0:
            return {}
        cutoff = (now or time.time()) - retention_days * 86_400
        counts: Dict[str, int] = {}

        def op(conn: sqlite3.Connection) -> None:
            for table, col in (("archive", "created"), ("outbox", "created"),
                               ("aliases", "created"), ("events", "ts")):
                cur = conn.execute("DELETE FROM %s WHERE %s < ?" % (table, col), (cutoff,))
                counts[table] = cur.rowcount
        self.transaction([op])
        return counts


class StoreWriter:
    """Background thread that commits queued store operations in batches.

    ``submit`` is what hooks call: it only puts on a queue. ``flush`` waits until everything
    submitted before it is committed (used before reads that must see fresh rows).
    """

    IDLE_S = 60.0

    def __init__(self, store: Optional[Store], on_commit: Optional[Callable[[], None]] = None,
                 on_idle: Optional[Callable[[], None]] = None) -> None:
        self.store = store
        self.on_commit = on_commit
        self.on_idle = on_idle      # housekeeping (retention) runs here, off every hot path
        self.last_error = ""
        self.failed_ops = 0
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._submitted = 0
        self._done = 0
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="tencentdb-offload-store",
                                        daemon=True)
        self._thread.start()

    def submit(self, *ops: Callable[[sqlite3.Connection], Any]) -> None:
        with self._cond:
            self._submitted += 1
        self._queue.put(ops)

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._submitted
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return True

    def pending(self) -> int:
        with self._cond:
            return self._submitted - self._done

    def _run(self) -> None:
        if self.on_idle is not None:
            self._idle()
        while True:
            try:
                first = self._queue.get(timeout=self.IDLE_S)
            except queue.Empty:
                self._idle()
                continue
            if first is None:
                break
            batch = [first]
            while len(batch) < 512:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._stop = True
                    break
                batch.append(nxt)
            self._commit(batch)
            with self._cond:
                self._done += len(batch)
                self._cond.notify_all()
            if self.on_commit is not None:
                try:
                    self.on_commit()
                except Exception:  # the callback only wakes another thread
                    pass
            if self._stop:
                break

    def _idle(self) -> None:
        if self.on_idle is None:
            return
        try:
            self.on_idle()
        except Exception as exc:
            self.last_error = "housekeeping failed: %s" % exc

    def _commit(self, batch: List[Tuple[Callable, ...]]) -> None:
        if self.store is None:
            self.failed_ops += len(batch)
            return
        ops = [op for group in batch for op in group]
        try:
            self.store.transaction(ops)
        except Exception as exc:
            # One bad row must not lose the batch: retry each group alone.
            for group in batch:
                try:
                    self.store.transaction(list(group))
                except Exception as one:
                    self.failed_ops += 1
                    self.last_error = "store write failed: %s" % one
                    log.warning("tencentdb-offload: %s", self.last_error)
            if not self.last_error:
                self.last_error = "store batch failed and was retried: %s" % exc

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        self._queue.put(None)
        self._thread.join(timeout)
