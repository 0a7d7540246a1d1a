"""The conversations a branched session came from: its copied history points into their archive.

Hermes' ``/branch`` copies the transcript into a new session whose ``parent_session_id`` (in its
state.db) names the one it came from. The copy carries the parent's digest lines and trims, and
their keys (``call_…``, ``msg-…``) are archived under the parent's conversation. The branch is a
conversation of its own (it diverges), so the recall tools only *read* its ancestors' items,
after its own. Parent links are Hermes' own lineage of one user's sessions (branches,
0.17's rotations, sub-agents), never another user's.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

MAX_DEPTH = 8               # a branch of a branch …: ancestors followed at most


def ancestors(session_db: Any, session_id: str,
              conversation_of: Callable[[str], str]) -> Tuple[str, ...]:
    """Conversation keys of ``session_id``'s ancestors in Hermes' session store, nearest first
    (its own conversation left out); () when the host gives no store or it cannot be read."""
    own = conversation_of(session_id)
    keys: List[str] = []
    seen, sid = {session_id}, session_id
    for _ in range(MAX_DEPTH):
        try:
            row = session_db.get_session(sid) if session_db is not None else None
        except Exception:        # a busy or foreign state.db: the branch reads its own items only
            break
        parent = row.get("parent_session_id") if isinstance(row, dict) else None
        if not isinstance(parent, str) or not parent or parent in seen:
            break
        seen.add(parent)
        key = conversation_of(parent)
        if key != own and key not in keys:
            keys.append(key)
        sid = parent
    return tuple(keys)


def bind(registry: Any, session_db: Any, session_id: str) -> str:
    """The conversation key of ``session_id``, its state told where its copied history may
    point (``SessionState.parents``)."""
    key = registry.conversation_of(session_id)
    parents = ancestors(session_db, session_id, registry.conversation_of)
    state = registry.get(key)
    with state.lock:
        state.parents = parents
    return key
