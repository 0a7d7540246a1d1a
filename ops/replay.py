"""Where ``replay`` reads a real session from: a Hermes session id (read-only from
``$HERMES_HOME/state.db``, tolerant of every supported release's schema, including the rows a
compaction replaced), a JSON or JSONL file of messages, or a Hermes session export. Never
writes anything."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..hermes.config import hermes_home
from ..common.humanize import plural
from ..archive.readonly import connect
from ..archive.seal_key import read_seal
from ..context.provenance import Seal
from ..context import blocks
from ..context import messages
from .env import CliError, effective_env, resolve_settings

Message = Dict[str, Any]

# --- replay sources -------------------------------------------------------------------

_KEEP = ("role", "content", "tool_calls", "tool_call_id", "name", "tool_name")
_DB_JSON = "\x00json:"


def _clean(m: Any, where: str) -> Message:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise CliError("%s is not a chat message (an object with a 'role')" % where)
    out = {k: m[k] for k in _KEEP if m.get(k) is not None}
    content = out.get("content")
    if isinstance(content, str) and content.startswith(_DB_JSON):
        try:
            out["content"] = json.loads(content[len(_DB_JSON):])
        except ValueError:
            pass
    if isinstance(out.get("tool_calls"), str):
        try:
            out["tool_calls"] = json.loads(out["tool_calls"])
        except ValueError:
            out.pop("tool_calls")
    if not out.get("tool_calls"):
        out.pop("tool_calls", None)
    out.setdefault("content", "" if out["role"] != "assistant" or "tool_calls" not in out else None)
    return out


def _from_export(items: List[Any], pick: Optional[str], name: str) -> Tuple[List[Message], str, Dict[str, Any]]:
    sessions = [s for s in items if isinstance(s, dict) and isinstance(s.get("messages"), list)]
    if pick:
        sessions = [s for s in sessions if pick in (s.get("id"), s.get("session_id"))]
        if not sessions:
            raise CliError("no session %r in %s" % (pick, name))
    if len(sessions) != 1:
        raise CliError("%s holds %d sessions; choose one with --session ID" % (name, len(sessions)))
    sess = sessions[0]
    rows = sess["messages"]
    # a newer Hermes exports every stored row with its flags: rewound rows, the rows a compaction
    # replaced and the copies it wrote back, as state.db holds them
    flagged = any(isinstance(m, dict) and "active" in m and "compacted" in m for m in rows)
    kept = [m for m in rows if not flagged or not isinstance(m, dict)
            or m.get("active") or m.get("compacted")]
    msgs = [_clean(m, "%s message %d" % (name, i + 1)) for i, m in enumerate(kept)]
    desc: Dict[str, Any] = {"kind": "hermes-export", "path": name,
                            "session_id": sess.get("id") or sess.get("session_id")}
    if flagged:
        msgs, rebuilt = _as_happened(msgs, [_stamp(m.get("timestamp")) for m in kept],
                                     sess.get("parent_session_id"),
                                     [bool(m.get("compacted")) for m in kept])
        desc.update(rebuilt, inactive_rows_skipped=len(rows) - len(kept),
                    compacted_rows=sum(1 for m in kept if m.get("compacted")))
    return msgs, str(sess.get("system_prompt") or ""), desc


def _stamp(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


# what ``archive export`` writes per line (``archive.browse.export``)
_ARCHIVE_ITEM_KEYS = frozenset(("key", "kind", "tool_call_id", "total_chars", "session", "content"))
_ARCHIVE_EXPORT = (
    "%s is an archive export (from `archive export`), not a conversation: its %d items are what "
    "the plugin archived from %s (tool results as they arrived, messages a compaction removed), "
    "without the assistant turns that called the tools, so it cannot be replayed. Replay the "
    "conversation itself: its Hermes session id (read from state.db) or `hermes sessions export`")


def _is_archive_item(value: Any) -> bool:
    return (isinstance(value, dict) and _ARCHIVE_ITEM_KEYS <= set(value)
            and value.get("kind") in ("tool_result", "message") and "role" in value)


def _from_file(path: Path, pick: Optional[str]) -> Tuple[List[Message], str, Dict[str, Any]]:
    try:
        raw = path.read_bytes()
        # a byte-order mark (Windows editors, PowerShell) says the encoding; json refuses it
        text = raw.decode("utf-16" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError("cannot read %s: %s" % (path, exc))
    try:
        data: Any = json.loads(text)
        kind = "json"
    except ValueError as whole:
        data, kind = [], "jsonl"
        lines = text.splitlines()
        for n, line in enumerate(lines, 1):
            if line.strip():
                try:
                    data.append(json.loads(line))
                except ValueError as part:
                    raise CliError(_unparsable(path, text, whole, line, part, n, len(lines)))
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise CliError("%s holds no messages (expected a list of messages, JSONL, or a Hermes "
                       "session export)" % path)
    if all(isinstance(x, dict) and isinstance(x.get("messages"), list) for x in data):
        return _from_export(data, pick, str(path))
    if all(_is_archive_item(x) for x in data):
        raise CliError(_ARCHIVE_EXPORT % (path, len(data), data[0].get("session")))
    msgs = [_clean(m, "%s item %d" % (path, i + 1)) for i, m in enumerate(data)]
    return msgs, "", {"kind": kind, "path": str(path)}


def _ends_inside(text: str, exc: ValueError) -> bool:
    """``text`` is JSON that stops early (the error is at its very end)."""
    return text.lstrip()[:1] in "[{" and (getattr(exc, "pos", -1) >= len(text.rstrip()) - 1
                                          or "Unterminated string" in str(exc))


def _unparsable(path: Path, text: str, whole: ValueError, line: str, part: ValueError,
                n: int, last: int) -> str:
    """Why a file is neither JSON nor JSONL; one that ends inside its JSON is said to be cut."""
    if n == 1 and _ends_inside(text, whole):
        return ("cannot parse %s: it ends inside its JSON, at character %s (cut off: a full disk, "
                "an interrupted copy?): %s" % (path, format(len(text.rstrip()), ","), whole))
    if n == last and n > 1 and _ends_inside(line, part):
        return ("cannot parse %s: its last line (%d) ends inside its JSON (cut off: a full disk, "
                "an interrupted copy?); the lines before it are whole" % (path, n))
    return ("cannot parse %s: not JSON, and line %d is not a JSON value (expected messages as "
            "JSON or JSONL)" % (path, n))


def _from_state_db(sid: str, db: Optional[Path] = None) -> Tuple[List[Message], str, Dict[str, Any]]:
    db = db or hermes_home(effective_env()) / "state.db"
    if not db.exists():
        raise CliError("%r is not a file, and there is no Hermes session database at %s" % (sid, db))
    try:
        conn = connect(db, timeout=10)
        return _read_session(conn, sid, db)
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK":
            raise CliError("cannot read %s: a write Hermes did not finish waits in %s-journal (a "
                           "hermes process was stopped mid-write); run `hermes sessions list` "
                           "once (it rolls that write back), then replay again" % (db, db.name))
        raise CliError("cannot read %s: %s" % (db, exc))


def _session_facts(conn: sqlite3.Connection, sid: str,
                   scols: List[str]) -> Tuple[str, Dict[str, int], Any]:
    """The session row's system prompt, usage and parent (each when the schema has it)."""
    system, parent = "", None
    if "system_prompt" in scols:
        row = conn.execute("SELECT system_prompt FROM sessions WHERE id=?", (sid,)).fetchone()
        system = (row[0] or "") if row else ""
    usage: Dict[str, int] = {}
    if "input_tokens" in scols and "api_call_count" in scols:
        row = conn.execute("SELECT input_tokens, api_call_count FROM sessions WHERE id=?",
                           (sid,)).fetchone()
        if row and row[0] and row[1]:
            usage = {"input_tokens": int(row[0]), "api_calls": int(row[1])}
    if "parent_session_id" in scols:
        row = conn.execute("SELECT parent_session_id FROM sessions WHERE id=?", (sid,)).fetchone()
        parent = row[0] if row else None
    return system, usage, parent


def _read_session(conn: sqlite3.Connection, sid: str, db: Path) -> Tuple[List[Message], str, Dict[str, Any]]:
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "messages" not in tables:
            raise CliError("%s has no messages table (not a Hermes session database?)" % db)
        cols = [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
        scols = [r[1] for r in conn.execute("PRAGMA table_info(sessions)")] if "sessions" in tables else []
        found = conn.execute("SELECT 1 FROM messages WHERE session_id=? LIMIT 1", (sid,)).fetchone()
        if found is None and "id" in scols:
            rows = conn.execute("SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' LIMIT 3",
                                (sid.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",)
                                ).fetchall()
            if len(rows) == 1:
                sid = rows[0][0]
            elif rows:      # a prefix of several: say which, not "no session"
                raise CliError("%r is the start of %s in %s (%s): give more of the id" % (
                    sid, "3 or more session ids" if len(rows) > 2 else "2 session ids", db,
                    ", ".join(r[0] for r in rows[:2]) + (", …" if len(rows) > 2 else "")))
        want = [c for c in ("role", "content", "tool_call_id", "tool_calls", "tool_name") if c in cols]
        # compacted=1 (where the schema has it): rows a compaction replaced, still on disk;
        # active=0 alone: rewound
        keep = ("active=1 OR compacted=1" if "compacted" in cols else "active=1") \
            if "active" in cols else "1"
        order = "id" if "id" in cols else "rowid"
        flag = "compacted" if "compacted" in cols else "0"
        stamp = "timestamp" if "timestamp" in cols else "0"
        rows = conn.execute("SELECT %s, %s, %s FROM messages WHERE session_id=? AND (%s) ORDER BY %s"
                            % (",".join(want), stamp, flag, keep, order), (sid,)).fetchall()
        if not rows:
            raise CliError("no session %r in %s (see `hermes sessions list`)" % (sid, db))
        system, usage, parent = _session_facts(conn, sid, scols)
        skipped = 0
        if "active" in cols:
            skipped = conn.execute("SELECT count(*) FROM messages WHERE session_id=? AND NOT (%s)"
                                   % keep, (sid,)).fetchone()[0]
    finally:
        conn.close()
    msgs = [_clean(dict(zip(want, r[:-2])), "message %d" % (i + 1)) for i, r in enumerate(rows)]
    original, rebuilt = _as_happened(msgs, [float(r[-2] or 0) for r in rows], parent,
                                     [bool(r[-1]) for r in rows] if "compacted" in cols else None)
    if "compacted" not in cols:
        rebuilt["live_compactions"] = None
    return original, system, {"kind": "hermes-session", "session_id": sid, "database": str(db),
                              "inactive_rows_skipped": skipped,
                              "compacted_rows": sum(1 for r in rows if r[-1]), **rebuilt, **usage}


def _as_happened(msgs: List[Message], stamps: List[float], parent: Any,
                 compacted: Optional[List[bool]] = None) -> Tuple[List[Message], Dict[str, Any]]:
    """The stream as it happened from stored rows (``original_stream``) and what the report
    says it could not reconstruct. Hermes writes its summary after the rows a compaction
    replaced (flagged compacted, where the schema has the flag) or at the start of the session
    that continues another (where the host starts a new session at each compaction): before
    either, text with its mark is the user's own."""
    env, _config, settings, _warnings = resolve_settings()
    first = compacted.index(True) + 1 if compacted and True in compacted else len(msgs)
    original, copies, summaries, runs = original_stream(
        msgs, stamps, read_seal(settings.resolved_store_dir(env)), 0 if parent else first)
    gaps = []
    if copies:
        gaps.append("%s that compactions wrote back (kept or shortened messages) skipped; the "
                    "originals are replayed" % plural(copies, "row"))
    if summaries:
        gaps.append("%s skipped (written by a compaction, not by the conversation)"
                    % plural(summaries, "compaction summary", "compaction summaries"))
    if parent:
        gaps.append("this session continues %s (this Hermes starts a new session at each "
                    "compaction): the turns before it are in that session" % parent)
    return original, {"rows_read": len(msgs), "not_reconstructed": gaps, "live_compactions": runs}


# Hermes' own compaction summaries (the host's text: its marks are all there is); ours are
# recognised by their seal, never by our prefix, which a user may paste into a turn
HOST_SUMMARY_MARKS = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]")


def is_summary(content: Any, seal: Optional[Seal], host: bool = True) -> bool:
    """A message a compaction wrote (Hermes' summary where ``host`` says one can be, or text
    this plugin sealed)."""
    return isinstance(content, str) and ((host and content.lstrip().startswith(HOST_SUMMARY_MARKS))
                                         or messages.is_plugin_text(content, seal))


def _key(m: Message) -> Any:
    """Identity of a message across the copies compactions write: tool results by call id,
    tool calls by their ids, other messages by role and text."""
    result = (next((b.id for b in blocks.tool_results(m) if b.id), "")
              if messages.role(m) == "tool" else "")
    if result:
        return ("result", result)
    calls = tuple(b.id for b in blocks.call_blocks(m.get("tool_calls")))
    if calls:
        return ("calls",) + calls
    return (m.get("role"), json.dumps(m.get("content"), sort_keys=True, default=str))


BATCH_S = 0.01      # rows a compaction writes back are inserted together, microseconds apart


def original_stream(msgs: List[Message], stamps: List[float], seal: Optional[Seal] = None,
                    host_from: int = 0) -> Tuple[List[Message], int, int, int]:
    """The conversation as it happened, from rows that include what compactions replaced.

    A compaction writes back the messages it kept (with their original timestamps, or all
    with the same new one) and a summary. A row is such a copy when its tool-call id was
    seen, when its timestamp goes back in time, or when it repeats an earlier text inside a
    batch of rows that holds such a copy; summaries carry Hermes' marker or our ``seal``.
    Each run of such rows is one compaction. Returns (messages, copies dropped, summaries dropped, compactions)."""
    n = len(msgs)
    keys = [_key(m) for m in msgs]
    strong = [k[0] in ("result", "calls") for k in keys]
    batch = [0] * n                     # batch number per row: stamps closer than BATCH_S
    for i in range(1, n):
        batch[i] = batch[i - 1] + (0 if abs(stamps[i] - stamps[i - 1]) < BATCH_S else 1)
    seen: set = set()
    copy_batches: set = set()
    for i in range(n):                  # batches holding a repeated tool call or result
        if strong[i] and keys[i] in seen:
            copy_batches.add(batch[i])
        seen.add(keys[i])
    out: List[Message] = []
    seen, latest = set(), float("-inf")
    copies = summaries = runs = 0
    dropped = False
    # a summary that travels as a tool pair (our digest): its call goes with its result, or
    # the call would stand unanswered; a call also answered by a plain result (a trimmed copy
    # beside the original) is the conversation's own and stays
    summary = [is_summary(m.get("content"), seal, i >= host_from) for i, m in enumerate(msgs)]
    answered = [(k[1], summary[i]) for i, k in enumerate(keys) if k[0] == "result"]
    summary_ids = {c for c, s in answered if s} - {c for c, s in answered if not s}
    for i, m in enumerate(msgs):
        if summary[i] or (keys[i][0] == "calls" and set(keys[i][1:]) <= summary_ids):
            summaries, runs, dropped = summaries + 1, runs + (not dropped), True
            continue
        repeated = keys[i] in seen
        if (repeated and (strong[i] or batch[i] in copy_batches)) or stamps[i] < latest:
            copies, runs, dropped = copies + 1, runs + (not dropped), True
            continue
        dropped = False
        seen.add(keys[i])
        latest = max(latest, stamps[i])
        out.append(m)
    return out, copies, summaries, runs


def load_source(src: str, pick: Optional[str]) -> Tuple[List[Message], str, Dict[str, Any]]:
    """(messages, system prompt, description) of a replay SOURCE."""
    msgs, system, desc = _load(src, pick)
    msgs, orphans = drop_orphan_results(msgs)
    if orphans:
        desc["orphan_results"] = orphans
        desc.setdefault("not_reconstructed", []).append(
            "%s answering no call in the session (its start cut off?) left out, as Hermes "
            "leaves them out of every request" % plural(orphans, "tool result"))
    msgs, stubbed = answer_unanswered(msgs)
    if stubbed:
        desc["stub_results"] = stubbed
        desc.setdefault("not_reconstructed", []).append(
            "%s the session never answered (a turn interrupted during a tool run?) answered "
            "with Hermes' own stub, %r, as Hermes does before every request"
            % (plural(stubbed, "tool call"), UNAVAILABLE))
    return msgs, system, desc


# what Hermes' pre-request sanitizer answers a call without a result with (every supported release)
UNAVAILABLE = "[Result unavailable — see context summary above]"


def drop_orphan_results(msgs: List[Message]) -> Tuple[List[Message], int]:
    """``msgs`` without the messages that only hold results of calls no message made."""
    called = {i for m in msgs for i in blocks.use_ids(m)}
    # a result without an id is no orphan to Hermes either: it goes out, and is judged
    kept = [m for m in msgs if not (blocks.only_results(m) and all(blocks.result_ids(m))
                                    and not set(blocks.result_ids(m)) & called)]
    return kept, len(msgs) - len(kept)


def answer_unanswered(msgs: List[Message]) -> Tuple[List[Message], int]:
    """``msgs`` with a stub result after each call no message answers; how many."""
    answered = {i for m in msgs for i in blocks.result_ids(m)}
    out: List[Message] = []
    waiting: List[str] = []
    stubbed = 0
    for m in msgs:
        if waiting and not blocks.result_ids(m):     # the call's own results are over
            out += [{"role": "tool", "tool_call_id": i, "content": UNAVAILABLE} for i in waiting]
            stubbed, waiting = stubbed + len(waiting), []
        out.append(m)
        waiting += [i for i in blocks.use_ids(m) if i not in answered]
    out += [{"role": "tool", "tool_call_id": i, "content": UNAVAILABLE} for i in waiting]
    return out, stubbed + len(waiting)


def _load(src: str, pick: Optional[str]) -> Tuple[List[Message], str, Dict[str, Any]]:
    path = Path(src).expanduser()
    if path.is_file() and _is_sqlite(path):     # a state.db (copied from another machine)
        if not pick:
            raise CliError("%s is a SQLite database (a Hermes state.db?): name the session to "
                           "replay with --session ID (`hermes sessions list`)" % src)
        return _from_state_db(pick, path)
    if path.is_file():
        return _from_file(path, pick)
    if path.exists():
        raise CliError("%s is not a file" % src)
    if "/" in src or src.lower().endswith((".json", ".jsonl")):
        raise CliError("no such file: %s" % src)
    return _from_state_db(src)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(str(path), "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False
