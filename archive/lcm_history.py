"""hermes-lcm's ``lcm.db`` as read-only history: find it, search it, read one message in full.

Users switching from hermes-lcm (LCM-X) keep months of history in its SQLite store: a
``messages`` table (``store_id``, ``session_id``, ``role``, ``content``, ``tool_name``,
``timestamp``) with an FTS5 index ``messages_fts`` and a ``summary_nodes`` DAG. It lives at
``LCM_DATABASE_PATH`` when set, else ``$HERMES_HOME/lcm.db``. This module never writes it
(``archive/lcm_open.py`` opens it). Who may read which of its rows is decided by
``archive/visibility.py``: every call takes the session ids it may read (None: all).

LCM-X (hermes-lcm's name since v0.24; schema 5, with side tables such as ``message_relations``
and ``summary_node_provenance`` that are not read here) can keep a large tool output or payload
outside ``lcm.db``: the row then holds a one-line stub naming a JSON file in its payload folder
(``LCM_LARGE_OUTPUT_EXTERNALIZATION_PATH``, else ``$HERMES_HOME/lcm-large-outputs``), e.g.
``[Externalized tool output: tool=read_file; tool_call_id=…; chars=N; bytes=N; read it with
lcm_expand(externalized_ref="R"); ref=R]``. A hit on such a row says so and where the text is;
reading it reads that file's text (bounded), never the stub as if it were the message.

Search finds what the archive's search finds: every word (quotes around it dropped), in any
case in every script (``str.casefold``: ``STRASSE`` finds ``straße``), as a substring, newest
first (the FTS index folds only its own way and finds words by prefix, so it is not used).
Each call is bounded: a deadline of ``DEADLINE_S`` (a search then says how far it got; a read
or count gives ``LcmUnavailable``), and memory of one message's head (``SMALL`` chars) in
Python; a longer message is folded a chunk at a time, never selected whole.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Collection, Dict, Generator, Iterator, List, Mapping, Optional, Tuple

from ..hermes.config import hermes_home
from .lcm_open import LcmUnavailable, open_readonly
from .lookup import chunks, fold, found_in, locate_in, snippet_start, walk, words_of

__all__ = ["LcmHistory", "LcmUnavailable", "store_path", "unavailable", "KEY", "LABEL"]

LABEL = "hermes-lcm history"
KEY_PREFIX = "lcm-"
KEY = re.compile(r"lcm-([0-9]{1,18})")
PATH_VARS = ("LCM_DATABASE_PATH", "LCM_DB_PATH")   # hermes-lcm's own; the second an older spelling
NEEDED = {"store_id", "session_id", "role", "content", "timestamp"}
DEADLINE_S = 2.0            # a search stops here (and says so); a read gives up ("unavailable")
SMALL = 64 * 1024           # chars of a message the scan selects; the rest folded a chunk at a time
CHUNK = 1 << 20             # bytes of a long message read and folded at a time
BATCH = 200                 # rows fetched at a time
SNIPPET_BEFORE, SNIPPET = 200, 500


PAYLOAD_VAR = "LCM_LARGE_OUTPUT_EXTERNALIZATION_PATH"
PAYLOAD_DIR = "lcm-large-outputs"       # LCM-X's default folder, in the Hermes home
PAYLOAD_MAX = 16 << 20      # a payload file larger than this is named, not read
STUB_MAX = 512              # LCM-X's stubs are one line of at most this many characters
# "[Externalized tool output: …; ref=R]", "[GC'd externalized payload: …; ref=R]": ref= last
_STUB = re.compile(r"\[(?P<gc>GC'd externalized|Externalized) (?P<what>tool output|payload):"
                   r"(?P<fields>.*?;)?\s*ref=(?P<ref>[^;\]\s]+)\]")
_FIELD = re.compile(r"\s*(\w+)=([^;]*)")


def payload_dir(env: Mapping[str, str]) -> Path:
    """Where LCM-X writes the outputs it keeps outside ``lcm.db``."""
    value = (env.get(PAYLOAD_VAR) or "").strip()
    if value and "\0" not in value:
        return Path(value).expanduser()
    return hermes_home(env) / PAYLOAD_DIR


def stub_of(text: Any) -> Optional[Dict[str, Any]]:
    """The fields of an LCM-X stub when ``text`` is one and nothing else (the row's message
    lives in a payload file): ref, what, tool, tool_call_id, chars, kind, role; else None."""
    if not isinstance(text, str) or len(text) > STUB_MAX:
        return None
    found = _STUB.fullmatch(text.strip())
    ref = found.group("ref") if found else ""
    # a plain file name, as LCM-X itself requires: never a path out of its folder
    if not ref or "/" in ref or "\\" in ref or ref.startswith(".") or Path(ref).name != ref:
        return None
    fields = {k: v.strip() for k, v in (m.groups() for m in (_FIELD.match(f) for f in
                                                               (found.group("fields") or "").split(";")) if m)}
    try:
        chars = int(fields.get("chars", ""))
    except ValueError:
        chars = None
    return {"ref": ref, "what": found.group("what"), "collected": found.group("gc").startswith("GC"),
            "tool": fields.get("tool", "") if fields.get("tool") != "?" else "",
            "tool_call_id": fields.get("tool_call_id", "") if fields.get("tool_call_id") != "?" else "",
            "kind": fields.get("kind", ""), "role": fields.get("role", ""), "chars": chars}


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


class _TimeUp(Exception):
    """The call's deadline passed between two chunks of a long message."""


class _Timed:
    """A text's chunks under the call's deadline; ``ascii``: every chunk read so far was ASCII
    (a char offset there is a byte offset)."""

    def __init__(self, pieces: Generator[str, None, None], passed: Callable[[], bool]) -> None:
        self.pieces, self.passed, self.ascii = pieces, passed, True

    def __iter__(self) -> Iterator[str]:
        for piece in self.pieces:
            if self.passed():
                raise _TimeUp()
            self.ascii = self.ascii and piece.isascii()
            yield piece

    def close(self) -> None:
        self.pieces.close()


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


def _in_sessions(sessions: Optional[Collection[str]]) -> Tuple[str, List[str]]:
    """The SQL condition and its values for rows of ``sessions`` (None: every row)."""
    if sessions is None:
        return "1", []
    ids = sorted(sessions)
    return "session_id IN (%s)" % ",".join("?" * len(ids)), ids


class LcmHistory:
    """Read-only search and read of one hermes-lcm store; a connection per call, none kept."""

    def __init__(self, path: Path, payloads: Optional[Path] = None) -> None:
        self.path = Path(path)
        # LCM-X's payload folder: the environment's (``payload_dir``), else beside lcm.db
        self.payloads = Path(payloads) if payloads is not None else self.path.parent / PAYLOAD_DIR

    @classmethod
    def from_settings(cls, settings: Any, env: Mapping[str, str] = os.environ) -> Optional["LcmHistory"]:
        path = store_path(getattr(settings, "lcm_history", "auto"), env)
        return cls(path, payload_dir(env)) if path is not None else None

    def externalized(self, stub: Dict[str, Any]) -> Dict[str, Any]:
        """Where the text of a stubbed row lives, and a sentence saying so."""
        path = self.payloads / stub["ref"]
        exists = path.is_file()
        what = "tool output" if stub["what"] == "tool output" else "%s %s" % (
            stub["role"] or "message", "payload" if not stub["kind"] else stub["kind"].replace("_", " "))
        about = ", ".join(filter(None, (stub["tool"], "%s chars" % format(stub["chars"], ",")
                                        if stub["chars"] is not None else "")))
        text = ("[LCM-X kept this %s%s outside lcm.db; this row holds only its stub. The text is in "
                "%s%s]" % (what, " (%s)" % about if about else "", path,
                           "" if exists else " (not there now: LCM-X %s it)" % (
                               "collected" if stub["collected"] else "moved or deleted")))
        return {"ref": stub["ref"], "path": str(path), "exists": exists, "tool": stub["tool"],
                "tool_call_id": stub["tool_call_id"], "chars": stub["chars"], "text": text}

    def _payload(self, info: Dict[str, Any], sessions: Optional[Collection[str]]) -> Tuple[Optional[str], str]:
        """(the payload's text, '') or (None, why not): bounded, and, for a reader limited to
        some sessions, only a payload LCM-X wrote for one of them."""
        path = Path(info["path"])
        try:
            if path.stat().st_size > PAYLOAD_MAX:
                return None, "%s is larger than the %d MB read here" % (path, PAYLOAD_MAX >> 20)
            data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            return None, "%s is not there" % path
        except (OSError, ValueError) as exc:
            return None, "cannot read %s (%s)" % (path, getattr(exc, "strerror", None) or exc)
        text = data.get("content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            return None, "%s holds no text" % path
        if sessions is not None and str(data.get("session_id") or "") not in sessions:
            return None, "%s belongs to another conversation" % path
        return text, ""

    def exists(self) -> bool:
        return self.path.is_file()

    def _run(self, work: Any) -> Any:
        """``work(conn, columns, passed)`` on a read-only connection under the deadline
        (``passed()``: it has passed); a dict answer carries ``incomplete`` when the store's
        newest writes could not be read."""
        deadline = time.monotonic() + DEADLINE_S          # a private copy's time counts too
        conn, incomplete = open_readonly(self.path)
        passed = lambda: time.monotonic() > deadline        # noqa: E731
        conn.set_progress_handler(lambda: 1 if passed() else 0, 2_000)
        try:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
            if not NEEDED <= cols:
                raise LcmUnavailable("%s is not a hermes-lcm store (no messages table with %s)"
                                     % (self.path, ", ".join(sorted(NEEDED))))
            found = work(conn, cols, passed)
            if incomplete and isinstance(found, dict):
                found["incomplete"] = "; ".join(filter(None, (found.get("incomplete"), incomplete)))
            return found
        except _TimeUp:
            raise LcmUnavailable("reading %s took longer than %.1f s" % (self.path, DEADLINE_S))
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
        def work(conn: sqlite3.Connection, _cols: Any, _passed: Any) -> Dict[str, int]:
            n, s = conn.execute("SELECT count(*), count(DISTINCT session_id) FROM messages").fetchone()
            return {"messages": int(n or 0), "sessions": int(s or 0)}
        return self._run(work)

    def search(self, query: str, limit: int, offset: int = 0,
               sessions: Optional[Collection[str]] = None) -> Dict[str, Any]:
        """Messages of ``sessions`` (None: all) holding every word, newest first:
        ``{"results": [...], "next_offset"}``, and ``incomplete`` when the deadline stopped it
        before the oldest message."""
        words = [fold(w) for w in words_of(query)] or [""]

        def work(conn: sqlite3.Connection, cols: Any, passed: Callable[[], bool]) -> Dict[str, Any]:
            hits: List[Dict[str, Any]] = []
            seen, skipped, more, stopped = 0, 0, False, False
            try:
                for row, at, ascii_head in self._matches(conn, cols, words, sessions, passed):
                    seen += 1
                    if not at:
                        continue
                    if skipped < offset:
                        skipped += 1
                    elif len(hits) == limit:
                        more = True
                        break
                    else:
                        hits.append(self._hit(conn, row, at, ascii_head, passed))
            except (_TimeUp, sqlite3.OperationalError) as exc:
                if isinstance(exc, sqlite3.OperationalError) and "interrupt" not in str(exc):
                    raise
                stopped = True
            out: Dict[str, Any] = {"results": hits, "next_offset": offset + limit if more else None}
            if stopped:
                out["incomplete"] = ("searched the newest %d messages in %.1f s, the bound of one "
                                     "search; older ones were not searched (add words to narrow it)"
                                     % (seen, DEADLINE_S))
            return out
        if sessions is not None and not sessions:
            return {"results": [], "next_offset": None}
        return self._run(work)

    def _matches(self, conn: sqlite3.Connection, cols: Any, words: List[str],
                 sessions: Optional[Collection[str]], passed: Callable[[], bool]) -> Any:
        """(row, 1 + where the first word is or 0, whether the text up to there is ASCII) for
        each message, newest first. A message's first ``SMALL`` chars come with its row; a
        longer one is folded a chunk at a time."""
        tool = "tool_name" if "tool_name" in cols else "''"         # older stores lack it
        where, ids = _in_sessions(sessions)
        cur = conn.execute("SELECT store_id, session_id, role, %s, timestamp, substr(content, 1, ?) "
                           "FROM messages WHERE %s ORDER BY store_id DESC" % (tool, where),
                           (SMALL + 1, *ids))
        try:
            for rows in iter(lambda: cur.fetchmany(BATCH), []):
                for row in rows:
                    head = row[5] if isinstance(row[5], str) else ""
                    at, text = found_in(fold(head), words), None
                    if not at and len(head) > SMALL:
                        text = _Timed(chunks(conn, row[0], "messages", CHUNK), passed)
                        at = locate_in(text, words)      # type: ignore[arg-type]
                    yield row, at, text.ascii if text is not None else head.isascii()
        finally:
            cur.close()

    def _hit(self, conn: sqlite3.Connection, row: tuple, at: int, ascii_head: bool,
             passed: Callable[[], bool]) -> Dict[str, Any]:
        store_id, session, role, tool_name, ts, head = row
        head = head if isinstance(head, str) else ""
        stub = stub_of(head)
        if stub is not None:            # the message is elsewhere: say where, not the stub
            info = self.externalized(stub)
            return {"key": KEY_PREFIX + str(store_id), "source": LABEL, "session": str(session or ""),
                    "time": _when(ts), "role": str(role or ""), "tool_name": str(tool_name or stub["tool"]),
                    "chars": stub["chars"] if stub["chars"] is not None else len(head),
                    "externalized": {k: v for k, v in info.items() if k != "text"},
                    "snippet": info["text"]}
        start = snippet_start(at)
        if len(head) <= SMALL:          # the whole message came with its row
            text = head[start:start + SNIPPET]
            more, size = start + len(text) < len(head), {"chars": len(head)}
        elif ascii_head and hasattr(conn, "blobopen"):     # a char offset is a byte offset there
            with conn.blobopen("messages", "content", store_id, readonly=True) as blob:
                blob.seek(start)
                text = blob.read(SNIPPET).decode("utf-8", "ignore")
            more, size = True, {"chars_over": SMALL}
        else:
            text = walk(_Timed(chunks(conn, store_id, "messages", CHUNK), passed), start, SNIPPET)  # type: ignore
            more, size = True, {"chars_over": SMALL}
        return {"key": KEY_PREFIX + str(store_id), "source": LABEL, "session": str(session or ""),
                "time": _when(ts), "role": str(role or ""), "tool_name": str(tool_name or ""),
                **size, "snippet": ("…" if start else "") + text + ("…" if more else "")}

    def read(self, key: str, offset: int, limit: int,
             sessions: Optional[Collection[str]] = None) -> Optional[Dict[str, Any]]:
        """``limit`` chars from ``offset`` of the message ``lcm-<store_id>``; None when absent
        or not among ``sessions`` (None: all). Read a chunk at a time, whatever its size."""
        match = KEY.fullmatch(key)
        if match is None or sessions is not None and not sessions:
            return None

        def work(conn: sqlite3.Connection, cols: Any, passed: Callable[[], bool]) -> Optional[Dict[str, Any]]:
            tool = "tool_name" if "tool_name" in cols else "''"
            where, ids = _in_sessions(sessions)
            row = conn.execute("SELECT store_id, session_id, role, %s, timestamp, typeof(content) "
                               "FROM messages WHERE store_id=? AND %s" % (tool, where),
                               (int(match.group(1)), *ids)).fetchone()
            if row is None:
                return None
            store_id, session, role, tool_name, ts, kind = row
            head = conn.execute("SELECT substr(content, 1, ?) FROM messages WHERE store_id=? AND "
                                "typeof(content)='text'", (STUB_MAX + 1, store_id)).fetchone()
            stub = stub_of(head[0]) if head else None       # over STUB_MAX: no stub
            out: Dict[str, Any] = {"key": key, "kind": "message", "role": str(role or ""), "tool_call_id": "",
                                   "tool_name": str(tool_name or ""), "source": LABEL,
                                   "session": str(session or ""), "time": _when(ts)}
            if stub is not None:        # the text is in LCM-X's payload file: read that
                info = self.externalized(stub)
                text, why = self._payload(info, sessions) if info["exists"] else (None, "")
                out["tool_name"] = out["tool_name"] or stub["tool"]
                out["tool_call_id"] = stub["tool_call_id"]
                out["externalized"] = {k: v for k, v in info.items() if k != "text"}
                if text is not None:
                    out["externalized"]["read_from"] = info["path"]
                    out.update(content=text[offset:offset + limit], total_chars=len(text))
                    return out
                out["externalized"]["unread"] = why or info["text"]
                out.update(content=info["text"][offset:offset + limit], total_chars=len(info["text"]))
                return out
            page, total = ("", 0) if kind not in ("text", "blob") else _page_and_total(
                _Timed(chunks(conn, store_id, "messages", CHUNK), passed), offset, limit)  # type: ignore[arg-type]
            out.update(content=page, total_chars=total)
            return out
        return self._run(work)


def _page_and_total(pieces: Generator[str, None, None], offset: int, limit: int) -> Tuple[str, int]:
    """``limit`` chars from ``offset`` and the length of the whole text, a chunk in memory."""
    out: List[str] = []
    total = kept = 0
    try:
        for text in pieces:
            if kept < limit and total + len(text) > offset:
                part = text[max(0, offset - total):][:limit - kept]
                out.append(part)
                kept += len(part)
            total += len(text)
    finally:
        pieces.close()
    return "".join(out), total
