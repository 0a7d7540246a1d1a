"""The recall tools the engine gives the model: read and search what left the context.

``tdai_read_cos`` is the name the Gateway's own offload notes tell the model to call, so a
summary written by the Gateway ("call tdai_read_cos(path=...)") works as-is. Every archived
item has a key the model is shown: a tool result its ``tool_call_id``, a message ``msg-…``
(``context/item_key.py``); both read in full, paged. Both tools
answer from the local archive first; a Gateway that offers ``read-ref`` is asked only for
refs the archive does not hold. Handlers return JSON strings, errors included.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..common.peer_text import plugin_logger
from ..common.text import clean_text
from ..context.read_backs import RECALL_TOOL as READ
from ..memory_gateway.session_ids import gateway_session_id
from .lcm_history import KEY as LCM_KEY, LcmHistory, LcmUnavailable, unavailable
from .store import Store
from .visibility import Scope, scope_of

log = plugin_logger("tencentdb_offload.recall")

SEARCH = "tdai_offload_search"
DEFAULT_PAGE = 20_000
MAX_PAGE = 100_000

# What the two tools hold, said in both descriptions: a model that also has long-term memory
# tools (memory_tencentdb_*) must know this archive is a different thing.
SCOPE = ("Holds only THIS conversation's own compacted tool outputs and messages (what was "
         "moved out of the context to save space), not long-term memories; memory tools "
         "(memory_tencentdb_*) do not hold these.")

SCHEMAS: List[Dict[str, Any]] = [
    {
        "name": READ,
        "description": (
            "Read back in full a tool output or message of this conversation that was "
            "compacted out of the context. Pass the key shown in the archive notice or after a "
            "trimmed text (a tool_call_id, or msg-... for a message), or the path from an "
            "'[Offloaded Tool Result]' summary. Long items are paged: call again with "
            "offset=next_offset. " + SCOPE),
        "parameters": {
            "type": "object",
            "properties": {
                "key": {"type": "string",
                        "description": "key of the archived item: msg-... or a tool_call_id"},
                "tool_call_id": {"type": "string", "description": "id of the archived tool call"},
                "path": {"type": "string",
                         "description": "archive path such as offload/<session>/refs/<id>.md"},
                "offset": {"type": "integer", "description": "character offset to start at (default 0)"},
                "limit": {"type": "integer",
                          "description": "characters to return (default 20000, max 100000; "
                                         "fewer when the host could not show them whole: "
                                         "go on from next_offset)"},
            },
        },
    },
    {
        "name": SEARCH,
        "description": (
            "Search this conversation's compacted tool outputs and messages by words: use it "
            "for something said or returned earlier in this conversation that is no longer in "
            "the context. Returns matching items with a snippet and the key to read in full "
            "with " + READ + ". " + SCOPE + " After a switch from hermes-lcm, its old history "
            "(read-only; in a messaging gateway only this conversation's own sessions) is "
            "searched too and returned apart, under lcm_history, each hit with its session and "
            "time and an lcm-... key for " + READ + "."),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words that must all appear"},
                "limit": {"type": "integer", "description": "maximum results (default 5, max 20)"},
                "history_offset": {"type": "integer",
                                   "description": "hermes-lcm history results to skip (the "
                                                  "next_offset of the previous answer)"},
            },
            "required": ["query"],
        },
    },
]


MAX_QUERY = 1_000           # chars of a search query (8 words are used)
# Hermes' limit on one tool answer (tools/budget_config.py), a margin below it
HOST_SHARE, HOST_MIN, HOST_MAX, HOST_MARGIN = 0.15, 8_000, 100_000, 256
MIN_PAGE = 1_000            # chars a page keeps however long the rest of the answer is
# a recall waits this long for the archive's queued writes: a first attempt stuck on another
# process's write lock takes the busy timeout (10 s), and the answer then says what waits
FLUSH_WAIT_S = 1.0
MAX_ID = 256               # chars of a tool_call_id in a Gateway ref (a file name there)
ECHO = 120                 # chars of a model-supplied value repeated in an answer
# a ref as the Gateway writes it: offload/<session dir>/refs/<tool_call_id>.md
_REF = re.compile(r"offload/([^/]+)/refs/([^/\\\x00-\x1f]{1,%d})\.md" % MAX_ID)


_MARKS = "[](){}<>\"'`\u201c\u201d\u2018\u2019"     # around a key a model copied or quoted


def _echo(value: Any) -> str:
    """A model-supplied value, capped: a 10 MB id must not come back as a 10 MB error."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= ECHO:
        return repr(text)
    return "%r… (%d chars)" % (text[:ECHO], len(text))


def _answer(value: Dict[str, Any]) -> str:
    """A tool's JSON answer as UTF-8 can carry it: a lone surrogate (a model's "\\ud800" in a
    query, a Gateway's ref) would fail the host's next request to the provider."""
    return clean_text(json.dumps(value, ensure_ascii=False))


def _error(message: str, **extra: Any) -> str:
    return _answer({"ok": False, "error": message, **extra})


def _int(value: Any, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(value)))
    except (TypeError, ValueError, OverflowError):
        return default


def ref_of_session(path: str, gateway_session: str) -> str:
    """The tool_call_id a ref names when it is a well-formed ref of this session, else ''.

    The Gateway names a session's directory after its id with every char outside
    ``[A-Za-z0-9._-]`` replaced; ``memory_gateway.session_ids.gateway_session_id`` makes ids of those chars only,
    so the directory is the id itself.
    """
    match = _REF.fullmatch(path)
    if match is None or match.group(1) != gateway_session:
        return ""
    call_id = match.group(2)
    return "" if call_id in (".", "..") else call_id


class RecallTools:
    """Tool handlers over the archive. ``store`` may be None (archive unavailable).

    Every answer comes from the calling conversation only: its archive (with the session
    ids aliased to it), or refs of its own Gateway session.
    """

    def __init__(self, store: Optional[Store], flush: Callable[[float], Any],
                 read_ref: Optional[Callable[[str, str], Optional[Dict[str, Any]]]] = None,
                 history: Optional[LcmHistory] = None) -> None:
        self.store = store
        self.flush = flush
        self.read_ref = read_ref
        self.history = history          # hermes-lcm's lcm.db, read-only (None: off)

    def handle(self, name: str, args: Any, reader: Union[Scope, str], gateway_session: str,
               parents: Sequence[str] = (), window: int = 0) -> str:
        """``reader``: what the calling conversation may read (``archive/visibility.py``), or
        its key in a single-user host (``parents``: the conversations it was branched from,
        read after its own: its copied history points into their archive). ``window``: the
        model's context length (the host's limit on one tool answer follows it)."""
        scope = reader if isinstance(reader, Scope) else scope_of(reader, parents, shared_host=False)
        if not isinstance(args, dict):
            return _error("arguments must be a JSON object")
        if not scope.conversations:         # the operator's scope is not a conversation's
            return _error("recall answers a conversation only")
        try:
            if name == READ:
                return self._read(args, scope, gateway_session, window)
            if name == SEARCH:
                return self._search(args, scope)
        except Exception as exc:  # a tool call must always get an answer, the log the cause
            log.warning("tencentdb-offload: the %s tool failed: %s", name, exc, exc_info=True)
            return _error("%s failed: %s" % (name, _echo(str(exc))))
        return _error("unknown tool %s" % _echo(name))

    def _read(self, args: Dict[str, Any], scope: Scope, gateway_session: str,
              window: int = 0) -> str:
        keys = scope.conversations or ()
        call_id = _text(args.get("key")) or _text(args.get("tool_call_id"))
        path = _text(args.get("path"))
        ref_id = ref_of_session(path, gateway_session) if path else ""
        if not call_id and not path:
            return _error(_not_a_key(args) or "pass key (msg-... or a tool_call_id) or path "
                                              "(offload/<session>/refs/<id>.md)")
        if not call_id and not _REF.fullmatch(path):
            return _error("path %s is not an archive path; expected "
                          "offload/<session>/refs/<tool_call_id>.md" % _echo(path))
        # a branch's copied summaries name its parent's Gateway session: the archive reads
        # those refs too; only refs of this session go to the Gateway
        parent_ref = "" if call_id or ref_id else _parent_ref(path, keys[1:])
        wanted = call_id or ref_id or parent_ref
        offset = _int(args.get("offset"), 0, 0, 1 << 40)
        limit = _int(args.get("limit"), DEFAULT_PAGE, 1, MAX_PAGE)
        item = None
        if self.history is not None and LCM_KEY.fullmatch(wanted):
            try:
                item = self.history.read(wanted, offset, limit, scope.lcm_sessions)
            except LcmUnavailable as exc:
                return _error(unavailable(str(exc)))
        flushed = None
        # any length: the archive keeps ids as the provider made them (some carry KBs of state)
        if item is None and wanted and self.store is not None:
            flushed = self.flush(FLUSH_WAIT_S)
            # exactly as given first: an id may hold any char; then as copied with its marks
            for candidate in filter(None, (wanted, _unwrapped(wanted))):
                for key in keys[1:] if parent_ref else keys:
                    item = item or self.store.read_page(key, candidate, offset, limit)
        if item is None and ref_id and self.read_ref is not None:
            item = self._remote(gateway_session, path, ref_id, offset, limit)
        if item is None:
            if self.store is None:
                return _error("the archive is unavailable (see /tencentdb-offload status)")
            if flushed is False:        # it may be among the writes held in memory
                return _error("nothing archived under %s yet: writes are waiting to be written "
                              "(the store is busy or failing; see /tencentdb-offload status)"
                              % _echo(wanted), hint="try again in a while")
            # another conversation's item reads exactly like a missing one
            return _error("nothing archived under %s in this conversation"
                          % _echo(wanted or path),
                          hint="use tdai_offload_search to find this conversation's "
                               "compacted items and their keys")
        return _page_answer(item, offset, host_limit(window))

    def _remote(self, gateway_session: str, path: str, call_id: str, offset: int,
                limit: int) -> Optional[Dict[str, Any]]:
        """A ref of this session from the Gateway's read-ref, when it has one."""
        assert self.read_ref is not None
        remote = self.read_ref(gateway_session, path)
        if not remote:
            return None
        text = str(remote.get("content") or remote.get("text") or "")
        return {"tool_call_id": call_id, "tool_name": str(remote.get("tool_name") or ""),
                "content": text[offset:offset + limit], "total_chars": len(text),
                "source": "gateway"}

    def _search(self, args: Dict[str, Any], scope: Scope) -> str:
        keys = scope.conversations or ()
        query = _text(args.get("query"))
        if not query:
            # a list of words or phrases is not an empty query: say what to pass instead
            return _error(_not_a_query(args.get("query")) or "query must not be empty")
        if len(query) > MAX_QUERY:
            return _error("query is %d chars; use at most %d (a few words)"
                          % (len(query), MAX_QUERY))
        history = self._history(query, args, scope)
        if self.store is None and not history:
            return _error("the archive is unavailable (see /tencentdb-offload status)")
        limit = _int(args.get("limit"), 5, 1, 20)
        results: List[Dict[str, Any]] = []
        held: Dict[str, str] = {}
        if self.store is not None:
            # the newest items may be among the writes held in memory
            if self.flush(FLUSH_WAIT_S) is False:
                held = {"note": "some items are still waiting to be written (the store is busy "
                                "or failing; see /tencentdb-offload status): search again in a "
                                "while if what you look for is not here"}
            results = [{"key": h["key"], "kind": h["kind"], "role": h["role"],
                        "tool_call_id": h["tool_call_id"] or "", "tool_name": h["tool_name"] or "",
                        "chars": h["chars"], "snippet": h["snippet"]}
                       for key in keys for h in self.store.search(key, query, limit)][:limit]
        found = results or (history.get("lcm_history") or {}).get("results")
        return _answer({"ok": True, "query": query, "count": len(results),
                           "results": results,
                           "read_in_full": READ + "(key=<key>)" if found else "",
                           "scope": "this conversation's compacted tool outputs and messages",
                           **held, **history})

    def _history(self, query: str, args: Dict[str, Any], scope: Scope) -> Dict[str, Any]:
        """hermes-lcm's history for the answer: results, or why it cannot be read; {} when
        there is none. Never raises: a broken lcm.db must not cost the turn."""
        if self.history is None or not self.history.exists():
            return {}
        limit = _int(args.get("limit"), 5, 1, 20)
        try:
            found = self.history.search(query, limit, _int(args.get("history_offset"), 0, 0, 1 << 31),
                                        scope.lcm_sessions)
        except LcmUnavailable as exc:
            return {"lcm_history_unavailable": unavailable(str(exc))}
        except Exception as exc:  # whatever the file holds, the turn goes on
            return {"lcm_history_unavailable": unavailable(_echo(str(exc)))}
        whose = scope.lcm_note or "every earlier session"
        return {"lcm_history": {"source": "hermes-lcm history (read-only, before the switch; "
                                          "%s)" % whose,
                                "count": len(found["results"]), **found}}


def host_limit(window: int) -> int:
    """Characters of one tool answer that Hermes shows the model whole: over it (15 % of the
    window at 4 chars a token, 8,000–100,000; an older Hermes: 100,000) the answer is saved to a
    file and the model sees its first 1,500 characters."""
    share = int(window * 4 * HOST_SHARE) if isinstance(window, int) and window > 0 else HOST_MAX
    return max(HOST_MIN, min(share, HOST_MAX)) - HOST_MARGIN


def _page_answer(item: Dict[str, Any], offset: int, room: int) -> str:
    """The answer for a page of ``item`` from ``offset``, the page shortened until the whole
    answer fits ``room``: what ``returned`` and ``next_offset`` say is what the model sees."""
    page, total = item["content"], item["total_chars"]
    value = {"ok": True, "key": item.get("key", item["tool_call_id"]),
             "kind": item.get("kind", "tool_result"), "role": item.get("role", ""),
             "tool_call_id": item["tool_call_id"], "tool_name": item["tool_name"],
             "offset": offset, "returned": 0, "total_chars": total, "next_offset": None,
             "source": item.get("source", "archive"), "content": "",
             **{k: item[k] for k in ("session", "time", "incomplete", "externalized") if k in item},
             **_reused(item)}
    while True:
        nxt = offset + len(page)
        value.update(content=page, returned=len(page), next_offset=nxt if nxt < total else None)
        text = _answer(value)
        if len(text) <= room or len(page) <= MIN_PAGE:     # a page always moves the offset on
            return text
        # escapes make a char up to 6 in JSON: shrink in proportion, then a little more
        page = page[:max(MIN_PAGE, min(len(page) - 1, len(page) * room // len(text) - 64))]


def _not_a_key(args: Dict[str, Any]) -> str:
    """Why a key the model did pass is not one (a list of keys, an object), else ''."""
    for name in ("key", "tool_call_id", "path"):
        if isinstance(args.get(name), (list, dict)):
            return "%s must be one string, not %s: call %s once per item" % (
                name, "a list" if isinstance(args[name], list) else "an object", READ)
    return ""


def _unwrapped(key: str) -> str:
    """``key`` without the marks around it when it has some, else '': a model copies a digest
    line's ``[call_1]`` or a note's ``(msg-…)`` with its brackets, or quotes the id."""
    bare = key.strip(_MARKS).strip()
    return bare if bare != key else ""


def _not_a_query(value: Any) -> str:
    """Why a query the model did pass is not one (a list, an object), else ''."""
    if isinstance(value, (list, dict)):
        return ("query must be one string of words (an item holding every word is found), not "
                "%s: call %s once per search" % ("a list" if isinstance(value, list)
                                                  else "an object", SEARCH))
    return ""


def _parent_ref(path: str, parents: Sequence[str]) -> str:
    """The tool_call_id a ref of a parent conversation's Gateway session names, else ''."""
    for key in parents:
        found = ref_of_session(path, gateway_session_id(key))
        if found:
            return found
    return ""


def _reused(item: Dict[str, Any]) -> Dict[str, Any]:
    """For a call id the provider reused: the keys of its other results, so none is hidden."""
    keys = item.get("other_keys")
    if not keys:
        return {}
    return {"other_keys": keys,
            "note": "this call id was reused: this is its first result; each key in "
                    "other_keys (newest first) reads one of the others"}


def _text(value: Any) -> str:
    """A string argument, trimmed; anything else (numbers, null) as text, never an object."""
    if value is None or isinstance(value, (dict, list)):
        return ""
    return str(value).strip()
