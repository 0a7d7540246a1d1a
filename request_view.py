"""What a 0.22 request carries, derived the same way for every request of a conversation.

``select_context`` rebuilds every request from the stored history, so what it adds must not
move: a canvas that follows the newest user message, or changes whenever the Gateway redraws
it, rewrites an earlier message on every turn and breaks the provider's prompt cache from
there on. So the canvas is pinned: it stays on the user message it was first shown with, as it
was shown, until a compaction (a rewrite anyway) or its message leaving the context; then the
current canvas is pinned to the newest user message. Older identical recall blocks of a memory
provider go too, keeping the first copy (the cached one).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .compaction_ahead import content_key
from .context import canvas, recall_blocks
from .context import messages as M

Message = Dict[str, Any]


def _anchor(messages: List[Message], key: str, seal: Any) -> int:
    if not key:
        return -1
    return next((i for i in range(len(messages) - 1, -1, -1)
                 if M.is_real_user(messages[i], seal) and content_key(messages[i]) == key), -1)


def build(state: Any, request: List[Message], block: str,
          seal: Any) -> Tuple[Optional[List[Message]], int]:
    """(the request to send, or None for "as it is"; stale blocks removed)."""
    deduped, _copies = recall_blocks.keep_newest(request, oldest=True)
    clean, removed = canvas.strip_all(deduped, seal)
    same = None if removed == 0 and deduped is request else clean
    if not block:
        return same, removed
    at = -1 if state.canvas_repin else _anchor(clean, state.pinned_anchor, seal)
    if at < 0 or not state.pinned_canvas:
        at = M.newest_real_user(clean, seal=seal)
        if at < 0:
            return same, removed
        with state.lock:
            state.pinned_anchor, state.canvas_repin = content_key(clean[at]), False
            if state.pinned_canvas != block:
                state.pinned_canvas = block
                state.injected_canvas_hash = canvas.digest(block)
                shown = True
            else:
                shown = False
        if shown:
            state.record_canvas_shown()
    return canvas.inject_at(clean, at, state.pinned_canvas, seal), removed
