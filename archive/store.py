"""SQLite archive of everything that leaves the context; it holds the outbox (``outbox.py``).

One connection per thread (WAL, so readers never wait for the writer). Hooks never touch
SQLite themselves: they hand rows to ``StoreWriter`` (``writer.py``), one background thread
that commits them in batches, so a 1 MB tool result costs the hook a queue put, not a disk
write. A store that cannot be opened degrades to "no archive" with a clear error, never a raise.
"""

from __future__ import annotations

import json
import reprlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..common.text import clean_text
from .outbox import OUTBOX_SCHEMA, Outbox, migrate_outbox, sized
from . import lookup, repair
from .stats import StoreStats, decode_event, read_stats
from ..context import item_key, result_keys
from ..common.per_thread import PerThread
from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload.store")

SCHEMA = """
CREATE TABLE IF NOT EXISTS archive(
  id INTEGER PRIMARY KEY,
  session TEXT NOT NULL,
  item_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  tool_call_id TEXT, tool_name TEXT, role TEXT, args TEXT,
  content TEXT NOT NULL,
  chars INTEGER NOT NULL,
  created REAL NOT NULL,
  UNIQUE(session, item_key));
CREATE INDEX IF NOT EXISTS archive_call ON archive(tool_call_id);
CREATE INDEX IF NOT EXISTS archive_created ON archive(created);
CREATE TABLE IF NOT EXISTS aliases(
  session_id TEXT PRIMARY KEY,
  conversation TEXT NOT NULL,
  created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS aliases_conversation ON aliases(conversation, session_id);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY,
  ts REAL NOT NULL,
  session TEXT,
  kind TEXT NOT NULL,
  data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS handover(
  conversation TEXT NOT NULL,
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  at REAL NOT NULL,
  PRIMARY KEY(conversation, name));
CREATE TABLE IF NOT EXISTS counters(
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL);
"""

SCHEMA_VERSION = repair.SCHEMA_VERSION
# A host that rotates session ids resumes a rotated one for months: its alias goes only with its rows
_ALIAS_IN_USE = " AND conversation NOT IN (SELECT session FROM archive UNION SELECT conversation FROM handover)"


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
        """The stored ``item_key``; ``readable_key`` is what the model is shown."""
        if self.tool_call_id and self.kind == "tool_result":
            return "call:" + clean_text(self.tool_call_id)
        return "msg:" + item_key.digest(self.role, self.content)

    @property
    def readable_key(self) -> str:
        if self.tool_call_id and self.kind == "tool_result":
            return self.tool_call_id
        return item_key.message_key(self.role, self.content)


def _args_text(args: Any) -> str:
    """Tool-call arguments as stored (JSON, at most 4,000 chars: enough to recognise a call;
    arguments too deep for json are kept as a bounded repr, never an error)."""
    try:
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        text = reprlib.repr(args)
    return text[:4000]


class StoreError(Exception):
    """The archive could not be used; the message says why and what to do."""


class Store:
    """Synchronous access to the database; safe from any thread."""

    BUSY_TIMEOUT_S = 10.0       # how long a write waits for another process's transaction

    def __init__(self, directory: Path, unconfigured: bool = False) -> None:
        """``unconfigured``: this process runs with no Gateway configured (rows an older
        version queued are taken to be such rows: ``migrate_outbox``)."""
        self.directory = Path(directory)
        self.unconfigured = unconfigured
        self.path = self.directory / "store.db"
        self.last_error = ""
        self.recoveries: List[str] = []     # what was found broken while live and done about it
        self.generation = 0                 # bumped by a recovery: older connections are stale
        self._identity: Optional[Tuple[repair.Ident, repair.Ident]] = None
        self._anchor: Optional[sqlite3.Connection] = None   # the file as opened, for a salvage
        self._produced: repair.Ident = None     # the file the last recovery made
        self._repairing = threading.RLock()
        self._conns: PerThread[Tuple[sqlite3.Connection, int]] = PerThread(lambda c: c[0].close())
        self._open_checked()

    # -- connections ------------------------------------------------------------------
    def _open_checked(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._start()
        except sqlite3.DatabaseError as exc:
            full = repair.no_space(self.directory, exc)     # a full disk is no corrupt store
            if full:
                raise StoreError("cannot open %s: %s" % (self.path, full)) from exc
            if repair.is_broken(exc) or "disk I/O error" in str(exc):
                # a lost WAL leaves an -shm that fails every open: set the pair aside first
                self._quarantine(exc, repair.SUFFIXES[1:] if "I/O" in str(exc) else repair.SUFFIXES)
                try:
                    self._start()
                except sqlite3.DatabaseError as again:
                    self._quarantine(again, repair.SUFFIXES)
                    self._start()
            else:   # a name too long is "unable to open database file" too: say which
                why = repair.path_too_long(self.path) or exc
                raise StoreError("cannot open %s: %s" % (self.path, why)) from exc
        except OSError as exc:
            raise StoreError("cannot create %s: %s" % (self.directory, exc)) from exc

    def _start(self) -> None:
        """Create (or open) the file and remember which file it is."""
        repair.while_locked(self._create, self.BUSY_TIMEOUT_S)
        self._anchor = self._connect()
        self._anchor.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL
        self._identity = repair.identity(self.path)

    def _create(self) -> None:
        conn = self._conn(create=True)
        self._refuse(conn, SCHEMA)          # a store we do not know is left as it is
        conn.executescript(SCHEMA + OUTBOX_SCHEMA)
        migrate_outbox(conn, self.unconfigured)
        self._refuse(conn, OUTBOX_SCHEMA)
        if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
            conn.execute("PRAGMA user_version=%d" % SCHEMA_VERSION)

    def _refuse(self, conn: sqlite3.Connection, schema: str) -> None:
        problem = repair.schema_problem(conn, schema, SCHEMA_VERSION)
        if problem:
            raise StoreError("%s %s" % (self.path, problem))

    def _quarantine(self, exc: Exception, suffixes: Tuple[str, ...]) -> None:
        """Move a corrupt database aside (kept for inspection) and start a new one."""
        self.close()
        aside = repair.quarantine(self.path, "corrupt", suffixes)
        self.last_error = ("store was corrupt (%s); moved to %s and started a new one"
                           % (exc, aside or "(nothing to move)"))
        log.warning("tencentdb-offload: %s", self.last_error)

    def _conn(self, create: bool = False) -> sqlite3.Connection:
        entry = self._conns.get()
        if entry is not None and entry[1] == self.generation:
            return entry[0]
        with self._repairing:       # a new connection never opens while a recovery swaps files
            self.check()            # and the file must still be the one we use
            conn = self._connect(create)
            self._conns.put((conn, self.generation))
        return conn

    def _connect(self, create: bool = False) -> sqlite3.Connection:
        # only opening or recovering creates the file: an empty store.db a reader made would be
        # taken for the store ("no such table") and SQLite deletes a WAL beside an empty file
        where = str(self.path) if create else self.path.absolute().as_uri() + "?mode=rw"
        conn = sqlite3.connect(where, uri=not create, timeout=self.BUSY_TIMEOUT_S,
                               isolation_level=None, check_same_thread=False)
        # switching to WAL answers "locked" at once (no busy wait) while another process
        # creates or recovers the file: a second process starting is normal, so wait
        repair.while_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"), self.BUSY_TIMEOUT_S)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=%d" % int(self.BUSY_TIMEOUT_S * 1000))
        # after a checkpoint the WAL shrinks back: a burst must not leave a copy on disk
        conn.execute("PRAGMA journal_size_limit=%d" % (4 << 20))
        return conn

    # -- the file changed under the running process (archive/repair.py) ----------------
    def check(self) -> bool:
        """Whether ``store.db`` (or its WAL) is still the file this store opened; if not,
        recover. True when a recovery ran. Costs two ``stat`` calls."""
        want = self._identity
        if want is None:
            return False
        db, wal = repair.identity(self.path)
        if db == want[0] and (wal == want[1] or want[1] is None):
            return False
        what = ("deleted" if db is None else "replaced" if db != want[0] else
                "left without its WAL" if wal is None else "given another WAL")
        self.recover("store.db was %s while in use" % what, replaced=db not in (None, want[0]))
        return True

    def recover(self, reason: str, replaced: bool = False) -> bool:
        """Keep the broken file, restore what the open copy still holds (or adopt a good store
        another process put there) and carry on; the writer re-sends what it holds. False
        when the broken file is this process's last recovery: no pile of copies of it."""
        with self._repairing:
            now, damaged = repair.identity(self.path), reason.startswith("the store failed")
            if self._identity is not None and self._identity == now and not damaged:
                return True         # another thread recovered meanwhile
            if damaged and now[0] is not None and now[0] == self._produced:
                self.last_error = "%s; the store recovered here is damaged too" % reason
                return False
            self.generation += 1    # first: no connection to the old file is handed out again
            self._identity = None
            done = self._replace_file(replaced)
            self._start()
            self._produced = self._identity[0] if self._identity else None
            text = "%s %s: %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), reason, done)
            self.recoveries = (self.recoveries + [text])[-10:]
            self.last_error = text
            log.warning("tencentdb-offload: %s", text)
            return True

    def _replace_file(self, replaced: bool) -> str:
        """Put a working file at ``store.db``; says what was done."""
        if replaced and repair.usable(self.path):
            self._drop_connections()
            return "another good store is there now; using it"
        tmp = self.path.with_name(self.path.name + ".salvage-" + repair.stamp())
        saved = repair.salvage(self._anchor, tmp, SCHEMA + OUTBOX_SCHEMA)
        self._drop_connections()
        aside = repair.quarantine(self.path, "broken")
        if saved < 0:
            return "kept as %s; started a new store" % (aside or "-")
        tmp.rename(self.path)
        return "%s; restored %d archived items from the open copy" % (
            "kept as " + aside if aside else "nothing left to keep", saved)

    def _drop_connections(self) -> None:
        # every connection on the old file closes before a new file takes the name: the last
        # one to close deletes "store.db-wal" by name, which must not be the new file's
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None
        self._conns.close_all()

    def close(self) -> None:
        # closed, the store no longer watches its file: when the last connection closes,
        # SQLite itself checkpoints and deletes the WAL, which is not a lost WAL
        self._identity = None
        self._conns.close_all()
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None

    def transaction(self, ops: Iterable[Callable[[sqlite3.Connection], Any]]) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                op(conn)
        except BaseException:
            if conn.in_transaction:     # SQLite rolls back by itself on "disk full"
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @property
    def outbox(self) -> Outbox:
        """The rows waiting for the Gateway, in this store. (Made on each use: held by the
        store, it would make a reference cycle, and a store dropped unclosed would keep its
        connections open until a garbage collection.)"""
        return Outbox(self._conn, self.transaction)

    # -- archive ----------------------------------------------------------------------
    @staticmethod
    def op_archive(session: str, items: List[ArchiveItem], now: float,
                   mask: Any = None) -> Callable:
        # rows (hashes, argument JSON; ``mask``: secrets masked at rest) built on the writer thread
        insert = ("INSERT OR IGNORE INTO archive(session,item_key,kind,tool_call_id,tool_name,"
                  "role,args,content,chars,created) VALUES (?,?,?,?,?,?,?,?,?,?)")

        def op(conn: sqlite3.Connection) -> None:
            for it in items:
                text, args = (clean_text(mask(t) if mask else t) for t in (it.content, _args_text(it.args)))
                row = [session, it.key, it.kind, clean_text(it.tool_call_id) or None,
                       clean_text(it.tool_name), clean_text(it.role), args, text, len(text), now]
                if conn.execute(insert, row).rowcount or not it.key.startswith("call:"):
                    continue
                # a reused call id with another text: kept under "<id>~<hash>" (result_keys)
                if conn.execute("SELECT content IS NOT ? FROM archive WHERE session=? AND "
                                "item_key=?", (text, session, it.key)).fetchone()[0]:
                    row[1] = "call:" + result_keys.suffixed(row[3], text)
                    conn.execute(insert, row)
        return sized(op, sum(len(it.content) for it in items))

    def read_page(self, conversation: str, key: str, offset: int = 0,
                  limit: int = 20_000) -> Optional[Dict[str, Any]]:
        """A page of an archived item of this conversation (never another's), by the key the
        model was shown: a ``tool_call_id``, or ``msg-…`` for a message."""
        return lookup.read_page(self._conn(), conversation, clean_text(key), offset, limit)

    def holds(self, conversation: str, key: str) -> bool:
        """Whether the archive durably holds this item of this conversation (committed)."""
        return lookup.read_page(self._conn(), conversation, key, 0, 0) is not None

    def search(self, conversation: str, query: str, limit: int = 5) -> List[Dict[str, Any]]:
        """This conversation's items containing every word of ``query``, any case, newest first."""
        return lookup.search(self._conn(), conversation, lookup.words_of(query), limit)

    def reused_ids(self, conversation: str, ids: Iterable[str]) -> Set[str]:
        """Of ``ids``, those archived with more than one text (by any process)."""
        return lookup.reused_ids(self._conn(), conversation, list(ids))

    # -- aliases: one conversation across Hermes' session-id rotations ------------------
    def get_alias(self, session_id: str) -> Optional[str]:
        row = self._conn().execute("SELECT conversation FROM aliases WHERE session_id=?", (session_id,)).fetchone()
        return row[0] if row else None

    def aliases_of(self, conversations: Iterable[str]) -> List[str]:
        return lookup.aliased_ids(self._conn(), list(conversations))

    # -- what one process leaves for the next on the same conversation (canvas pin,
    #    calibration): a restarted gateway or the next --resume turn starts where it stopped
    @staticmethod
    def op_handover(conversation: str, name: str, value: Any, now: float) -> Callable:
        text = clean_text(json.dumps(value, ensure_ascii=False, default=str))
        row = (clean_text(conversation), name, text, now)
        return lambda c: c.execute(
            "INSERT OR REPLACE INTO handover(conversation,name,value,at) VALUES (?,?,?,?)", row)

    def get_handover(self, conversation: str) -> Dict[str, Any]:
        rows = self._conn().execute("SELECT name, value FROM handover WHERE conversation=?",
                                    (clean_text(conversation),)).fetchall()
        out: Dict[str, Any] = {}
        for name, value in rows:
            try:
                out[name] = json.loads(value)
            except ValueError:           # a damaged row is a lost cache saving, no more
                continue
        return out

    # -- events (compactions, errors) for status across processes -----------------------
    @staticmethod
    def op_event(session: str, kind: str, data: Dict[str, Any], now: float) -> Callable:
        text = clean_text(json.dumps(data, ensure_ascii=False, default=str))
        return lambda c: c.execute("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)",
                                   (now, session, kind, text))

    def events(self, kind: Optional[str] = None, limit: int = 20) -> List[Dict[str, Any]]:
        where, args = ("WHERE kind=? ", (kind, limit)) if kind else ("", (limit,))
        rows = self._conn().execute("SELECT ts,session,kind,data FROM events %sORDER BY id DESC "
                                    "LIMIT ?" % where, args).fetchall()
        return [decode_event(*r) for r in rows]

    # -- housekeeping -----------------------------------------------------------------
    def stats(self) -> StoreStats:
        return read_stats(self._conn(), self.directory, self.recoveries)

    def reclaim(self, retention_days: int, now: Optional[float] = None,
                keep_since: Optional[float] = None) -> Dict[str, int]:
        """Delete archive, outbox, alias, event and handover rows older than ``retention_days``; rows
        created at or after ``keep_since`` (the calling process's start) always stay, and so
        does an alias whose conversation still has rows."""
        if retention_days <= 0:
            return {}
        cutoff = (now or time.time()) - retention_days * 86_400
        if keep_since is not None:
            cutoff = min(cutoff, keep_since)
        counts: Dict[str, int] = {}

        def op(conn: sqlite3.Connection) -> None:
            for table, col in (("archive", "created"), ("outbox", "created"), ("events", "ts"),
                               ("handover", "at"), ("aliases", "created")):
                cur = conn.execute("DELETE FROM %s WHERE %s < ?%s" % (
                    table, col, _ALIAS_IN_USE if table == "aliases" else ""), (cutoff,))
                counts[table] = cur.rowcount
        self.transaction([op])
        return counts
