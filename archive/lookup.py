"""Read-side queries of the archive for the recall tools: one conversation only, paged, folded.

Every query is scoped to a conversation: its key plus the Hermes session ids aliased to it
(a host may rotate the id at each compaction), never another conversation's rows. Pages are read
from the stored value in place (SQLite incremental blob I/O), so a page of a 50 MB result
costs a page, not 50 MB. Search folds case with Python's ``str.casefold`` (SQLite's
``lower``/``LIKE`` fold ASCII only), a row and a chunk at a time.
"""

from __future__ import annotations

import codecs
import sqlite3
from typing import Any, Dict, Generator, List, Optional, Set

from ..context import item_key, result_keys

# the conversation and the session ids aliased to it; two placeholders, both the key
SCOPE = "session IN (SELECT ? UNION SELECT session_id FROM aliases WHERE conversation=?)"
_CHUNK = 1 << 18            # bytes decoded at a time when walking to a non-ASCII offset
_SMALL = 64 * 1024          # chars up to which a row is searched whole, with its neighbours
_BATCH = 1 << 20            # chars of small rows fetched in one query
SNIPPET_BEFORE = 200
_SNIPPET = SNIPPET_BEFORE + 300


def read_page(conn: sqlite3.Connection, conversation: str, key: str,
              offset: int, limit: int) -> Optional[Dict[str, Any]]:
    """``limit`` chars from ``offset`` of an archived item of this conversation: a message by
    its ``msg-`` key (``context/item_key.py``), a tool result by its ``tool_call_id`` (the
    oldest with that id; ``other_keys`` lists the keys of newer texts under a reused id) or by
    ``<id>~<hash>`` (``context/result_keys.py``), exactly that text."""
    row, others = None, []
    if item_key.PATTERN.fullmatch(key):
        low = "msg:" + key[len(item_key.PREFIX):]
        row = conn.execute(
            "SELECT " + ITEM + " FROM archive WHERE item_key >= ? AND item_key < ? AND "
            + SCOPE + " ORDER BY id LIMIT 1", (low, low + "g", conversation, conversation)).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT " + ITEM + " FROM archive WHERE tool_call_id=? AND "
            + SCOPE + " ORDER BY id LIMIT 1", (key, conversation, conversation)).fetchone()
        if row is not None and limit:
            others = _other_keys(conn, conversation, key, row[0])
    if row is None and result_keys.split(key):
        row = _version(conn, conversation, key)
    if row is None:
        whole = _completed(conn, conversation, key)
        return read_page(conn, conversation, whole, offset, limit) if whole else None
    item = described(row)
    if others:
        item["other_keys"] = others
    item["content"] = page_of(conn, item.pop("id"), item["total_chars"], offset, limit)
    return item


ELLIPSES = ("\u2026", "...")
MIN_STEM = 4                # chars of a shortened key (after ``msg-``) needed to complete it


def _completed(conn: sqlite3.Connection, conversation: str, key: str) -> str:
    """The one key of this conversation that ``key`` begins when it ends in an ellipsis (an
    old digest line shortened to its width ends ``[call_52_…``), else ''."""
    stem = next((key[:-len(e)] for e in ELLIPSES if key.endswith(e)), "")
    hexes = stem[len(item_key.PREFIX):] if stem.startswith(item_key.PREFIX) else ""
    if hexes and len(hexes) >= MIN_STEM and all(c in "0123456789abcdef" for c in hexes):
        rows = conn.execute("SELECT DISTINCT item_key FROM archive WHERE item_key >= ? AND "
                            "item_key < ? AND " + SCOPE + " LIMIT 2",
                            ("msg:" + hexes, "msg:" + hexes + "g", conversation, conversation))
        keys = [readable_key(k, None) for (k,) in rows]
    elif len(stem) >= MIN_STEM:
        rows = conn.execute("SELECT DISTINCT tool_call_id FROM archive WHERE tool_call_id >= ? "
                            "AND tool_call_id < ? AND " + SCOPE + " LIMIT 2",
                            (stem, stem + "\U0010ffff", conversation, conversation))
        keys = [k for (k,) in rows]
    else:
        return ""
    return keys[0] if len(keys) == 1 and keys[0] != key else ""


def _other_keys(conn: sqlite3.Connection, conversation: str, tid: str, rowid: int) -> List[str]:
    """Keys of the other texts archived under a reused call id, newest first (at most 20)."""
    rows = conn.execute("SELECT item_key, tool_call_id FROM archive WHERE tool_call_id=? AND id<>? "
                        "AND " + SCOPE + " ORDER BY id DESC LIMIT 20",
                        (tid, rowid, conversation, conversation)).fetchall()
    return [readable_key(k, c) for k, c in rows]


def _version(conn: sqlite3.Connection, conversation: str, key: str) -> Any:
    """The row of ``<id>~<hash>``: stored under that key, or the id's first text (stored
    under the bare id before the id was known to be reused) when its hash matches."""
    row = conn.execute("SELECT " + ITEM + " FROM archive WHERE item_key=? AND " + SCOPE
                       + " ORDER BY id LIMIT 1", ("call:" + key, conversation, conversation)).fetchone()
    if row is not None:
        return row
    tid, want = result_keys.split(key) or ("", "")
    for row in conn.execute("SELECT " + ITEM + " FROM archive WHERE item_key=? AND " + SCOPE
                            + " ORDER BY id", ("call:" + tid, conversation, conversation)).fetchall():
        pieces = chunks(conn, row[0])
        try:
            if result_keys.hash_of_pieces(pieces) == want:
                return row
        finally:
            pieces.close()
    return None


# the columns ``described`` reads, in its order
ITEM = "id,item_key,kind,tool_call_id,tool_name,role,chars,created"


def readable_key(item_key_value: str, tool_call_id: Optional[str]) -> str:
    """The key the model is shown for a stored row: its call id, or ``msg-`` and 12 digits."""
    if item_key_value.startswith("call:") and tool_call_id:
        return item_key_value[5:]           # the call id, or "<id>~<hash>" for a reused id
    if item_key_value.startswith("msg:"):
        return item_key.PREFIX + item_key_value[4:4 + item_key.DIGITS]
    return item_key_value


def described(row: Any) -> Dict[str, Any]:
    """A row of ``ITEM`` as the recall tools and the ``archive`` command show it."""
    rowid, ikey, kind, call_id, tool_name, role, chars, created = row
    return {"id": rowid, "key": readable_key(ikey, call_id), "kind": kind,
            "tool_call_id": call_id or "", "tool_name": tool_name or "", "role": role or "",
            "total_chars": chars, "created": created}


def page_of(conn: sqlite3.Connection, rowid: int, chars: int, offset: int, limit: int) -> str:
    if offset >= chars:
        return ""
    limit = min(limit, chars - offset)      # more reads nothing more (and 20 digits overflow a C int)
    if hasattr(conn, "blobopen"):
        with conn.blobopen("archive", "content", rowid, readonly=True) as blob:
            if len(blob) == chars:            # one byte per char (ASCII): seek straight there
                blob.seek(offset)
                return blob.read(limit).decode("utf-8", "replace")
    return walk(chunks(conn, rowid), offset, limit)


def walk(pieces: Generator[str, None, None], offset: int, limit: int) -> str:
    """Skip ``offset`` chars of ``pieces``, keep ``limit``. Memory: a chunk."""
    skip, out, kept = offset, [], 0
    try:
        for text in pieces:
            if skip:
                cut = min(skip, len(text))
                text, skip = text[cut:], skip - cut
            if text:
                out.append(text[:limit - kept])
                kept += len(out[-1])
            if kept >= limit:
                break
    finally:
        pieces.close()          # releases the blob handle when the page is complete
    return "".join(out)


def chunks(conn: sqlite3.Connection, rowid: int, table: str = "archive",
           size: int = _CHUNK) -> Generator[str, None, None]:
    """An archived text (or ``table``'s ``content`` of that rowid: hermes-lcm's messages)
    decoded a chunk at a time through SQLite's incremental blob I/O; before Python 3.11 (no
    ``blobopen``) the whole value in one piece."""
    if not hasattr(conn, "blobopen"):
        yield str(conn.execute("SELECT content FROM %s WHERE rowid=?" % table, (rowid,)).fetchone()[0])
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    with conn.blobopen(table, "content", rowid, readonly=True) as blob:
        while True:
            data = blob.read(size)
            text = decoder.decode(data, final=not data)
            if text:
                yield text
            if not data:
                return


def prefix(conn: sqlite3.Connection, rowid: int, max_bytes: int) -> str:
    """The first ``max_bytes`` of an archived text (``substr`` would load the whole value
    first; a character cut in half at the end is dropped)."""
    if hasattr(conn, "blobopen"):
        with conn.blobopen("archive", "content", rowid, readonly=True) as blob:
            data = blob.read(max_bytes)
    else:
        data = conn.execute("SELECT substr(CAST(content AS BLOB), 1, ?) FROM archive WHERE id=?",
                            (max_bytes, rowid)).fetchone()[0]
    return bytes(data).decode("utf-8", "ignore")


def _locate(conn: sqlite3.Connection, rowid: int, words: List[str]) -> int:
    """1 + where the first word starts in the folded text when every word occurs, else 0."""
    return locate_in(chunks(conn, rowid), words)


def locate_in(pieces: Generator[str, None, None], words: List[str]) -> int:
    """1 + where the first (folded) word starts in the folded ``pieces`` when every word
    occurs, else 0. Folded a chunk at a time (the last few chars carried over, so a word
    across a chunk edge is still found): memory stays at a chunk whatever the text's size."""
    missing = set(range(len(words)))
    first, base, tail = -1, 0, ""
    keep = max(len(w) for w in words)
    try:
        for chunk in pieces:
            text = tail + fold(chunk)
            for i in sorted(missing):
                at = text.find(words[i])
                if at >= 0:
                    missing.discard(i)
                    first = base + at if i == 0 else first
            if not missing:
                break
            cut = max(0, len(text) - keep + 1)
            tail, base = text[cut:], base + cut
    finally:
        pieces.close()          # releases the blob handle when the words are found early
    return first + 1 if not missing else 0


def fold(text: str) -> str:
    """``text`` as search compares it: ``str.casefold`` (any case in every script: ß is ss);
    ASCII text by the faster ``lower``, which folds it the same."""
    return text.lower() if text.isascii() else text.casefold()


def found_in(folded: str, words: List[str]) -> int:
    """1 + where the first word starts when every word is in ``folded``, else 0."""
    at = folded.find(words[0])
    return at + 1 if at >= 0 and all(w in folded for w in words[1:]) else 0


_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb\u300c\u300d"
MAX_WORDS = 8


def words_of(query: str) -> List[str]:
    """The words of a query, at most ``MAX_WORDS``, without the quotes around them: a model
    that quotes a phrase ("connection refused") or a name (`app.py`) means its words."""
    words = [w.strip(_QUOTES) for w in query.split()]
    return [w for w in words if w][:MAX_WORDS] or query.split()[:MAX_WORDS]


def search(conn: sqlite3.Connection, conversation: str, words: List[str],
           limit: int) -> List[Dict[str, Any]]:
    """Items of this conversation containing every word (any case), newest first, with snippets."""
    folded = [fold(w) for w in words if w] or [""]
    # ids first (no content: ordering them sorts small rows), then the rows until ``limit``
    # match; the ids are read as they are needed: hits among the newest of 100,000 items
    # need not turn every item's row into Python
    cur = conn.execute("SELECT id,kind,tool_call_id,tool_name,role,chars,created,item_key "
                       "FROM archive WHERE " + SCOPE + " ORDER BY id DESC",
                       (conversation, conversation))
    out: List[Dict[str, Any]] = []
    small: List[tuple] = []                # small rows: fetched together (one query, not one each)
    size = 0
    try:
        for raw in iter(lambda: cur.fetchmany(500), []):
            for r in raw:
                row = r[:7] + (readable_key(r[7], r[2]),)
                if row[5] > _SMALL:        # a big row: folded a chunk at a time, after newer ones
                    _search_small(conn, small, folded, limit, out)
                    small, size = [], 0
                    at = _locate(conn, row[0], folded) if len(out) < limit else 0
                    if at:
                        out.append(dict(zip(_KEYS, row), snippet=page_of(
                            conn, row[0], row[5], snippet_start(at), _SNIPPET)))
                else:
                    small.append(row)
                    size += row[5]
                    if len(small) >= 500 or size >= _BATCH:
                        _search_small(conn, small, folded, limit, out)
                        small, size = [], 0
                if len(out) >= limit:
                    return out
        _search_small(conn, small, folded, limit, out)
        return out
    finally:
        cur.close()


_KEYS = ("id", "kind", "tool_call_id", "tool_name", "role", "chars", "created", "key")


def _search_small(conn: sqlite3.Connection, batch: List[tuple], folded: List[str], limit: int,
                  out: List[Dict[str, Any]]) -> None:
    """Add to ``out`` (up to ``limit``) the rows of ``batch`` holding every word."""
    if not batch or len(out) >= limit:
        return
    texts = dict(conn.execute("SELECT id,content FROM archive WHERE id IN (%s)"
                              % ",".join("?" * len(batch)), [r[0] for r in batch]))
    for row in batch:
        text = str(texts.get(row[0]) or "")
        at = found_in(fold(text), folded)
        if at and len(out) < limit:
            start = snippet_start(at)
            out.append(dict(zip(_KEYS, row), snippet=text[start:start + _SNIPPET]))


def snippet_start(at: int) -> int:
    # folding rarely changes lengths (ß -> ss), so the folded position is near enough
    return max(0, at - 1 - SNIPPET_BEFORE)


def aliased_ids(conn: sqlite3.Connection, conversations: List[str]) -> List[str]:
    """The Hermes session ids aliased to ``conversations`` (one's lineage: a handful)."""
    keys = conversations[:64]
    if not keys:
        return []
    return [r[0] for r in conn.execute("SELECT session_id FROM aliases WHERE conversation IN (%s) "
                                       "LIMIT 4096" % ",".join("?" * len(keys)), keys)]


def reused_ids(conn: sqlite3.Connection, conversation: str, ids: List[str]) -> Set[str]:
    """Of ``ids``, those with a second text kept apart (``call:<id>~<hash>``, ``result_keys``)."""
    found: Set[str] = set()
    for at in range(0, len(ids), 500):         # SQLite's bound-variable limit
        chunk = ids[at:at + 500]
        found.update(r[0] for r in conn.execute(
            "SELECT DISTINCT tool_call_id FROM archive WHERE session=? AND kind='tool_result' "
            "AND tool_call_id IN (%s) AND item_key != 'call:' || tool_call_id"
            % ",".join("?" * len(chunk)), [conversation] + chunk))
    return found
