"""The recall tools the engine gives the model: read and search what left the context.

``tdai_read_cos`` is the name the Gateway's own offload notes tell the model to call, so a
summary written by the Gateway ("call tdai_read_cos(path=...)") works as-is. Both tools
answer from the local archive first; a Gateway that offers ``read-ref`` is asked only for
refs the archive does not hold. Handlers return JSON strings, errors included.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional

READ = "tdai_read_cos"
SEARCH = "tdai_offload_search"
DEFAULT_PAGE = 20_000
MAX_PAGE = 100_000
_REF = re.compile(r"refs/([^/]+?)(?:\.md)?$")

SCHEMAS: List[Dict[str, Any]] = [
    {
        "name": READ,
        "description": (
            "Read the full text of a tool result or message that was moved out of the "
            "context to save space. Pass the tool_call_id shown in an archive notice, or the "
            "path from an '[Offloaded Tool Result]' summary. Long items are paged: call again "
            "with offset=next_offset."),
        "parameters": {
            "type": "object",
            "properties": {
                "tool_call_id": {"type": "string", "description": "id of the archived tool call"},
                "path": {"type": "string",
                         "description": "archive path such as offload/<session>/refs/<id>.md"},
                "offset": {"type": "integer", "description": "character offset to start at (default 0)"},
                "limit": {"type": "integer",
                          "description": "characters to return (default 20000, max 100000)"},
            },
        },
    },
    {
        "name": SEARCH,
        "description": (
            "Search the archived (offloaded) tool results and messages of this conversation "
            "by words. Returns matching items with a snippet and the tool_call_id to read in full."),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words that must all appear"},
                "limit": {"type": "integer", "description": "maximum results (default 5, max 20)"},
            },
            "required": ["query"],
        },
    },
]


def _error(message: str, **extra: Any) -> str:
    return json.dumps({"ok": False, "error": message, **extra}, ensure_ascii=False)


def _int(value: Any, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(value)))
    except (TypeError, ValueError):
        return default


def ref_to_call_id(path: str) -> str:
    match = _REF.search(path.strip())
    return match.group(1) if match else ""


class RecallTools:
    """Tool handlers over the archive. ``store`` may be None (archive unavailable)."""

    def __init__(self, store: Any, flush: Callable[[], None],
                 read_ref: Optional[Callable[[str, str], Optional[Dict[str, Any]]]] = None) -> None:
        self.store = store
        self.flush = flush
        self.read_ref = read_ref

    def handle(self, name: str, args: Any, session_key: str, gateway_session: str) -> str:
        if not isinstance(args, dict):
            return _error("arguments must be a JSON object")
        try:
            if name == READ:
                return self._read(args, session_key, gateway_session)
            if name == SEARCH:
                return self._search(args, session_key)
        except Exception as exc:  # a tool call must always get an answer
            return _error("%s failed: %s" % (name, exc))
        return _error("unknown tool %r" % name)

    def _read(self, args: Dict[str, Any], session_key: str, gateway_session: str) -> str:
        call_id = str(args.get("tool_call_id") or "").strip()
        path = str(args.get("path") or "").strip()
        if not call_id and path:
            call_id = ref_to_call_id(path)
        if not call_id:
            return _error("pass tool_call_id or path (offload/<session>/refs/<id>.md)")
        offset = _int(args.get("offset"), 0, 0, 1 << 40)
        limit = _int(args.get("limit"), DEFAULT_PAGE, 1, MAX_PAGE)
        item = None
        if self.store is not None:
            self.flush()
            item = self.store.read_item(session_key, call_id)
        if item is None and self.read_ref is not None and path:
            remote = self.read_ref(gateway_session, path)
            if remote:
                text = remote.get("content") or remote.get("text") or ""
                item = {"tool_call_id": call_id, "tool_name": remote.get("tool_name", ""),
                        "content": str(text), "source": "gateway"}
        if item is None:
            if self.store is None:
                return _error("the archive is unavailable (see /tencentdb-offload status)")
            return _error("nothing archived under %r" % call_id,
                          hint="use tdai_offload_search to find archived items")
        text = item["content"]
        page = text[offset:offset + limit]
        nxt = offset + len(page)
        return json.dumps({
            "ok": True, "tool_call_id": call_id, "tool_name": item.get("tool_name", ""),
            "offset": offset, "returned": len(page), "total_chars": len(text),
            "next_offset": nxt if nxt < len(text) else None,
            "source": item.get("source", "archive"), "content": page,
        }, ensure_ascii=False)

    def _search(self, args: Dict[str, Any], session_key: str) -> str:
        query = str(args.get("query") or "").strip()
        if not query:
            return _error("query must not be empty")
        if self.store is None:
            return _error("the archive is unavailable (see /tencentdb-offload status)")
        limit = _int(args.get("limit"), 5, 1, 20)
        self.flush()
        hits = self.store.search(session_key, query, limit)
        first = query.split()[0].lower()
        results = []
        for h in hits:
            text = h["content"]
            at = max(0, text.lower().find(first))
            start = max(0, at - 200)
            results.append({"tool_call_id": h["tool_call_id"], "tool_name": h["tool_name"],
                            "kind": h["kind"], "role": h["role"], "chars": h["chars"],
                            "snippet": text[start:at + 300]})
        return json.dumps({"ok": True, "query": query, "count": len(results),
                           "results": results}, ensure_ascii=False)
