"""The memory (v3) routes the ``memory_tencentdb`` provider calls, as its client uses them.

Written from the provider's client (TencentCloud/TencentDB-Agent-Memory,
``MemoryCore/hermes-plugin/memory/memory_tencentdb/client.py``): every call is a POST with a
JSON body carrying ``team_id`` / ``agent_id`` / ``user_id``, the same ``Authorization: Bearer``
and ``x-tdai-service-id`` headers as offload V2, and an answer in the ``{code, message,
request_id, data}`` envelope. What the provider reads from ``data``:

* ``/v3/atomic/search``       -> ``items: [{type, content}]``   (L1, prefetch + memory_search)
* ``/v3/core/read``           -> ``content``                    (L3 persona, prefetch)
* ``/v3/scenario/ls``         -> ``entries: [{path}]``          (L2 scene list, prefetch)
* ``/v3/scenario/read``       -> ``content``                    (read_scene)
* ``/v3/conversation/add``    -> ``{accepted}``                 (sync_turn, L0 capture)
* ``/v3/conversation/search`` -> ``items: [{role, content}]``   (conversation_search)

Tests seed the stores with :meth:`_MemoryRoutes.seed_memory`; search is a case-insensitive
word match (the real one is a vector search: what matters here is the wire, not ranking).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

MEMORY_ROUTES = ("/v3/atomic/search", "/v3/core/read", "/v3/scenario/ls", "/v3/scenario/read",
                 "/v3/conversation/add", "/v3/conversation/search")
TENANCY = ("team_id", "agent_id", "user_id")


def _matches(query: str, text: str) -> bool:
    words = [w for w in str(query).lower().split() if len(w) > 2]
    low = str(text).lower()
    return any(w in low for w in words)


class _MemoryRoutes:
    """Mixin for FakeGateway: per-tenant L0-L3 stores and the v3 handlers."""

    def _memory_init(self) -> None:
        self._mem_lock = threading.Lock()
        self._mem: Dict[tuple, Dict[str, Any]] = {}

    def _tenant(self, body: Dict[str, Any]) -> Dict[str, Any]:
        if not hasattr(self, "_mem_lock"):
            self._memory_init()
        key = tuple(str(body.get(k) or "default") for k in TENANCY)
        return self._mem.setdefault(key, {"persona": "", "atomic": [], "scenes": {}, "conversation": []})

    def seed_memory(self, *, persona: str = "", atomic: Optional[List[Dict[str, str]]] = None,
                    scenes: Optional[Dict[str, str]] = None, **tenancy: str) -> None:
        """Give a tenant (default/default/default unless named) a persona, L1 items, scenes."""
        with self._lock_memory():
            store = self._tenant(tenancy)
            store["persona"] = persona
            store["atomic"] = list(atomic or [])
            store["scenes"] = dict(scenes or {})

    def captured_turns(self, **tenancy: str) -> List[Dict[str, Any]]:
        """Every L0 message ``/v3/conversation/add`` stored for the tenant, in order."""
        with self._lock_memory():
            return list(self._tenant(tenancy)["conversation"])

    def _lock_memory(self) -> threading.Lock:
        if not hasattr(self, "_mem_lock"):
            self._memory_init()
        return self._mem_lock

    def _memory_route(self, route: str, body: Any, rid: str):
        if not isinstance(body, dict):
            return 400, {"code": 400, "message": "body must be a JSON object", "request_id": rid}
        with self._lock_memory():
            store = self._tenant(body)
            limit = int(body.get("limit") or 5) if str(body.get("limit") or "5").isdigit() else 5
            if route == "/v3/atomic/search":
                items = [m for m in store["atomic"] if _matches(body.get("query", ""), m.get("content", ""))
                         and (not body.get("type") or m.get("type") == body.get("type"))]
                data: Dict[str, Any] = {"items": items[:limit]}
            elif route == "/v3/core/read":
                data = {"content": store["persona"]}
            elif route == "/v3/scenario/ls":
                data = {"entries": [{"path": p} for p in sorted(store["scenes"])]}
            elif route == "/v3/scenario/read":
                data = {"content": store["scenes"].get(str(body.get("path", "")), "")}
            elif route == "/v3/conversation/add":
                msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
                store["conversation"].extend(dict(m, session_id=body.get("session_id", "")) for m in msgs)
                data = {"accepted": len(msgs)}
            else:
                items = [m for m in store["conversation"] if _matches(body.get("query", ""), m.get("content", ""))]
                data = {"items": items[:limit]}
        return 200, {"code": 0, "message": "ok", "request_id": rid, "data": data}
