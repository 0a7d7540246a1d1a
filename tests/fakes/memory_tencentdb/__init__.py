"""A faithful test fake of TencentDB's ``memory_tencentdb`` Hermes memory provider (MemoryProvider).

Written from the published provider (TencentCloud/TencentDB-Agent-Memory,
``MemoryCore/hermes-plugin/memory/memory_tencentdb/``): same provider name, plugin.yaml shape,
environment variables (``MEMORY_TENCENTDB_GATEWAY_HOST`` / ``_PORT``, default 127.0.0.1:8420;
``MEMORY_TENCENTDB_GATEWAY_API_KEY`` else ``TDAI_GATEWAY_API_KEY``, else Bearer ``local``;
service id always ``default``), the same three tools (``memory_tencentdb_memory_search``,
``_conversation_search``, ``_read_scene``), the same system-prompt block, the same prefetch
(``/v3/atomic/search`` + ``/v3/core/read`` + ``/v3/scenario/ls`` formatted as
``<relevant-memories>`` / ``<user-core>`` / ``<scene-navigation>``; Hermes wraps it in
``<memory-context>``) and the same capture (``sync_turn`` -> ``/v3/conversation/add`` on a
background thread, joined at shutdown).

Deliberate differences, for tests: it never starts a Gateway (the real supervisor runs
``MEMORY_TENCENTDB_GATEWAY_CMD`` or a discovered ``server.ts``); no circuit breaker or watchdog;
and ``on_pre_compress`` returns ``$FAKE_MEMORY_TENCENTDB_PRE_COMPRESS`` when that is set (the
real provider inherits the ABC's ``""``), so a test can follow ``compress(memory_context=…)``.
Each call is appended to ``$FAKE_MEMORY_TENCENTDB_LOG`` (JSON lines) when that is set.

Install: copy this directory to ``$HERMES_HOME/plugins/memory_tencentdb/`` and set
``memory.provider: memory_tencentdb`` (a pip-installed Hermes looks nowhere else).
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

try:
    from agent.memory_provider import MemoryProvider
except ImportError:          # imported outside Hermes (unit tests of the fake's helpers)
    class MemoryProvider:    # type: ignore[no-redef]
        pass

NAME = "memory_tencentdb"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8420
TENANCY = ("team_id", "agent_id", "user_id")


def gateway_host() -> str:
    return (os.environ.get("MEMORY_TENCENTDB_GATEWAY_HOST") or "").strip() or DEFAULT_HOST


def gateway_port() -> int:
    raw = (os.environ.get("MEMORY_TENCENTDB_GATEWAY_PORT") or "").strip()
    try:
        port = int(raw)
    except ValueError:
        return DEFAULT_PORT
    return port if 1 <= port <= 65535 else DEFAULT_PORT


def gateway_api_key() -> Optional[str]:
    for var in ("MEMORY_TENCENTDB_GATEWAY_API_KEY", "TDAI_GATEWAY_API_KEY"):
        value = (os.environ.get(var) or "").strip()
        if value:
            return value
    return None


def _log(event: str, **fields: Any) -> None:
    path = os.environ.get("FAKE_MEMORY_TENCENTDB_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(fields, event=event), ensure_ascii=False) + "\n")


def _schema(name: str, description: str, props: Dict[str, Any], required: List[str]) -> Dict[str, Any]:
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": required}}


_QUERY = {"type": "string", "description": "What to look for."}
_LIMIT = {"type": "integer", "description": "Maximum number of results (default 5, max 20)."}
TOOLS = [
    _schema("memory_tencentdb_memory_search",
            "Search the user's long-term memories (preferences, past events, instructions, context from "
            "previous conversations). Returns memory records ranked by relevance.",
            {"query": _QUERY, "limit": _LIMIT,
             "type": {"type": "string", "enum": ["persona", "episodic", "instruction"],
                      "description": "Optional memory type filter."}}, ["query"]),
    _schema("memory_tencentdb_conversation_search",
            "Search past conversation history (raw dialogue records) when memory search lacks the answer "
            "or exact past words are needed.", {"query": _QUERY, "limit": _LIMIT}, ["query"]),
    _schema("memory_tencentdb_read_scene",
            "Read the full content of a scene block listed among the available scenes.",
            {"scene_id": {"type": "string", "description": "Scene file name, e.g. 'travel-plan.md'."}},
            ["scene_id"]),
]


def _limit(raw: Any) -> int:
    if raw is None or raw == "" or isinstance(raw, bool):
        return 5
    try:
        return min(20, max(1, int(float(raw))))
    except (TypeError, ValueError):
        return 5


class Client:
    """POSTs to the Gateway's /v3 routes with the provider's headers; returns the envelope."""

    def __init__(self, base_url: str, api_key: Optional[str], timeout: float = 10.0):
        self.base_url, self.api_key, self.timeout = base_url.rstrip("/"), api_key, timeout

    def headers(self) -> Dict[str, str]:
        return {"Content-Type": "application/json", "Authorization": "Bearer %s" % (self.api_key or "local"),
                "x-tdai-service-id": "default"}

    def post(self, path: str, body: Dict[str, Any]) -> Dict[str, Any]:
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode("utf-8"),
                                     headers=self.headers(), method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + "/health", timeout=2) as resp:
                return json.loads(resp.read().decode("utf-8")).get("status") in ("ok", "degraded")
        except Exception:
            return False


def _data(envelope: Dict[str, Any]) -> Dict[str, Any]:
    data = envelope.get("data") if isinstance(envelope, dict) else None
    return data if isinstance(data, dict) else {}


def format_recall(l1: Dict[str, Any], l3: Dict[str, Any], l2: Dict[str, Any]) -> str:
    """The prefetch text: L1 items, L3 persona, L2 scene list (each block only when non-empty)."""
    parts: List[str] = []
    items = _data(l1).get("items") or []
    if items:
        lines = ["- [%s] %s" % (m.get("type", "unknown"), m.get("content", "")) for m in items]
        parts.append("<relevant-memories>\nRelevant memories recalled for this conversation, for "
                     "reference only:\n\n" + "\n".join(lines) + "\n</relevant-memories>")
    core = _data(l3).get("content") or ""
    if core:
        parts.append("<user-core>\n%s\n</user-core>" % core)
    entries = _data(l2).get("entries") or []
    if entries:
        lines = ["- Scene: %s" % str(s.get("path", "")).replace(".md", "") for s in entries]
        parts.append("<scene-navigation>\nAvailable scenes:\n" + "\n".join(lines) + "\n</scene-navigation>")
    return "\n\n".join(parts)


class MemoryTencentdbProvider(MemoryProvider):
    def __init__(self) -> None:
        self._client: Optional[Client] = None
        self._session_id = ""
        self._tenancy = {k: "default" for k in TENANCY}
        self._initialized = False
        self._syncs: List[threading.Thread] = []

    @property
    def name(self) -> str:
        return NAME

    def _new_client(self, timeout: float = 10.0) -> Client:
        return Client("http://%s:%d" % (gateway_host(), gateway_port()), gateway_api_key(), timeout)

    def is_available(self) -> bool:
        if os.environ.get("MEMORY_TENCENTDB_GATEWAY_CMD") or os.environ.get("MEMORY_TENCENTDB_GATEWAY_PORT"):
            return True
        return self._new_client(2).healthy()

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self._session_id = session_id
        self._tenancy = {k: str(kwargs.get(k) or "default") for k in TENANCY}
        client = self._new_client()
        self._client = client if client.healthy() else None
        self._initialized = True
        _log("initialize", session_id=session_id, connected=self._client is not None)

    def system_prompt_block(self) -> str:
        if self._client is None:
            return ""
        t = self._tenancy
        return ("# memory-tencentdb Memory\nActive. Team: %s, Agent: %s, User: %s.\n"
                "Four-layer memory system (L0->L1->L2->L3) with automatic conversation capture, structured "
                "memory extraction, scene blocks, and persona synthesis.\n"
                "Use memory_tencentdb_memory_search to find specific memories, "
                "memory_tencentdb_conversation_search to search raw conversation history, "
                "memory_tencentdb_read_scene to read detailed scene content."
                % (t["team_id"], t["agent_id"], t["user_id"]))

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        if not query or self._client is None:
            return ""
        try:
            l1 = self._client.post("/v3/atomic/search", dict(self._tenancy, query=query, limit=5))
            l3 = self._client.post("/v3/core/read", dict(self._tenancy))
            l2 = self._client.post("/v3/scenario/ls", dict(self._tenancy))
        except Exception as exc:
            _log("prefetch_failed", error=str(exc))
            return ""
        text = format_recall(l1, l3, l2)
        _log("prefetch", query=query[:200], chars=len(text))
        return text

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Recall is synchronous in prefetch()."""

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  **kwargs: Any) -> None:
        if self._client is None:
            return
        now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
        body = dict(self._tenancy, session_id=session_id or self._session_id, messages=[
            {"role": "user", "content": user_content, "timestamp": now},
            {"role": "assistant", "content": assistant_content, "timestamp": now}])
        client = self._client

        def send() -> None:
            try:
                client.post("/v3/conversation/add", body)
            except Exception as exc:
                _log("sync_failed", error=str(exc))
        thread = threading.Thread(target=send, daemon=True, name="memory-tencentdb-sync")
        self._syncs = [t for t in self._syncs if t.is_alive()] + [thread]
        thread.start()

    def shutdown(self) -> None:
        for thread in self._syncs:
            thread.join(timeout=5)
        self._syncs = []
        self._client = None
        self._initialized = False

    def get_tool_schemas(self) -> List[Dict[str, Any]]:
        if self._client is not None or self._initialized or os.environ.get("MEMORY_TENCENTDB_GATEWAY_CMD") \
                or os.environ.get("MEMORY_TENCENTDB_GATEWAY_PORT"):
            return [dict(t) for t in TOOLS]
        return []

    def handle_tool_call(self, tool_name: str, args: Dict[str, Any], **kwargs: Any) -> str:
        _log("tool", name=tool_name, args=args)
        if self._client is None:
            return json.dumps({"error": "memory-tencentdb Gateway is not connected."})
        try:
            return self._tool(tool_name, args or {})
        except Exception as exc:
            return json.dumps({"error": "Tool call failed: %s" % exc})

    def _tool(self, tool_name: str, args: Dict[str, Any]) -> str:
        assert self._client is not None
        if tool_name in ("memory_tencentdb_memory_search", "memory_tencentdb_conversation_search"):
            if not args.get("query"):
                return json.dumps({"error": "Missing required parameter: query"})
            memory = tool_name == "memory_tencentdb_memory_search"
            body = dict(self._tenancy, query=args["query"], limit=_limit(args.get("limit")))
            if memory and args.get("type"):
                body["type"] = args["type"]
            items = _data(self._client.post("/v3/atomic/search" if memory else "/v3/conversation/search",
                                            body)).get("items") or []
            if not items:
                return "No memories found for this query." if memory else "No conversations found for this query."
            if memory:
                return "\n".join("- [%s] %s" % (m.get("type", "?"), m.get("content", "")) for m in items)
            return "\n".join("[%s] %s" % (m.get("role", "?"), m.get("content", "")) for m in items)
        if tool_name == "memory_tencentdb_read_scene":
            scene = str(args.get("scene_id") or "")
            if not scene:
                return "Error: scene_id is required"
            path = scene if scene.endswith(".md") else scene + ".md"
            content = _data(self._client.post("/v3/scenario/read", dict(self._tenancy, path=path))).get("content")
            return content or "Scene '%s' is empty or not found." % scene
        return json.dumps({"error": "Unknown tool: %s" % tool_name})

    def on_session_end(self, messages: List[Dict[str, Any]]) -> None:
        """The v3 pipeline ends sessions on its own timer: nothing to send."""

    def on_pre_compress(self, messages: List[Dict[str, Any]], **kwargs: Any) -> str:
        text = os.environ.get("FAKE_MEMORY_TENCENTDB_PRE_COMPRESS", "")
        _log("pre_compress", messages=len(messages or []), returned=len(text))
        return text

    def get_config_schema(self) -> List[Dict[str, Any]]:
        return [
            {"key": "gateway_cmd", "description": "Command that starts the Gateway",
             "env_var": "MEMORY_TENCENTDB_GATEWAY_CMD", "required": False},
            {"key": "gateway_host", "description": "Gateway host", "default": DEFAULT_HOST,
             "env_var": "MEMORY_TENCENTDB_GATEWAY_HOST"},
            {"key": "gateway_port", "description": "Gateway port", "default": str(DEFAULT_PORT),
             "env_var": "MEMORY_TENCENTDB_GATEWAY_PORT"},
            {"key": "gateway_api_key", "description": "Bearer token for the Gateway", "secret": True,
             "required": False, "env_var": "MEMORY_TENCENTDB_GATEWAY_API_KEY"},
        ]


def register(ctx: Any) -> None:
    ctx.register_memory_provider(MemoryTencentdbProvider())
