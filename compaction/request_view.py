"""What a request carries on a host that selects context, the same way for every request of a
conversation.

``select_context`` rebuilds every request from the stored history, so what it adds must not
move: a canvas that follows the newest user message, or changes whenever the Gateway redraws
it, rewrites an earlier message on every turn and breaks the provider's prompt cache from
there on. So the canvas is pinned: it stays on the user message it was first shown with, as it
was shown, until a compaction (a rewrite anyway) or its message leaving the context; then the
current canvas is pinned to the newest user message. A canvas is first shown only where that
costs nothing: on a turn's first request (its user message is new, nothing cached follows it)
or right after a compaction. Mid-turn, the newest user message already went out without it, and
adding it there would re-bill everything after it. "Right after" is the one request that
follows the compaction: with no canvas fetched by then (a new process), the one shown before
goes there; with none at all, the next turn's first request shows it. Older identical recall blocks of a memory
provider go too, keeping the first copy (the cached one).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from .ahead import content_key
from ..context.provenance import Seal
from ..session.state import SessionState
from ..context import canvas, recall_blocks
from ..context.messages import is_real_user, newest_real_user

Message = Dict[str, Any]
# Runtime.leave_for_next_process: (conversation, name, value)
LeaveForNextProcess = Callable[[str, str, Any], None]


def anchor_key(message: Message) -> str:
    """A short, storable name for the user message a canvas is pinned to."""
    text = content_key(message).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[:32]


def _anchor(messages: List[Message], key: str, seal: Seal) -> int:
    if not key:
        return -1
    return next((i for i in range(len(messages) - 1, -1, -1)
                 if is_real_user(messages[i], seal) and anchor_key(messages[i]) == key), -1)


def _unpin(state: SessionState, leave_for_next: Optional[LeaveForNextProcess]) -> None:
    """The request right after a compaction went without a canvas (none known yet): the
    chance to show one for free has passed; nothing stays pinned until the next turn's first
    request (mid-turn it would re-bill everything after the user message)."""
    with state.lock:
        state.canvas_repin = False
        state.pinned_anchor = state.pinned_canvas = ""
    if leave_for_next is not None:
        leave_for_next(state.key, "pin", ["", ""])


def _pin_anew(state: SessionState, clean: List[Message], block: str, seal: Seal,
              leave_for_next: Optional[LeaveForNextProcess]) -> int:
    """Where the current canvas goes now, or -1 while showing it would rewrite a sent message."""
    if state.canvas_repin and not block and not state.canvas_cleared:
        block = state.pinned_canvas     # none fetched yet: the one shown before the compaction
    at = newest_real_user(clean, seal=seal)
    if at < 0 or not block or not (state.canvas_repin or at == len(clean) - 1):
        if state.canvas_repin:
            _unpin(state, leave_for_next)
        return -1
    anchor = anchor_key(clean[at])
    with state.lock:
        state.pinned_anchor, state.canvas_repin = anchor, False
        shown = state.pinned_canvas != block
        if shown:
            state.pinned_canvas = block
            state.injected_canvas_hash = canvas.digest(block)
    if shown:
        state.record_canvas_shown()
    if leave_for_next is not None:
        leave_for_next(state.key, "pin", [anchor, block])
    return at


def build(state: SessionState, request: List[Message], block: str, seal: Seal,
          leave_for_next: Optional[LeaveForNextProcess] = None
          ) -> Tuple[Optional[List[Message]], int]:
    """(the request to send, or None for "as it is"; stale blocks removed). ``leave_for_next``
    keeps a new pin for the next process (``Runtime.leave_for_next_process``); None when the
    canvas is off, and so is a pin an earlier process left."""
    deduped, _copies = recall_blocks.keep_newest(request, oldest=True)
    clean, removed = canvas.strip_all(deduped, seal)
    same = None if removed == 0 and deduped is request else clean
    if not block and not state.pinned_canvas:
        if state.canvas_repin:
            _unpin(state, leave_for_next)
        return same, removed
    at = -1 if state.canvas_repin else _anchor(clean, state.pinned_anchor, seal)
    if at < 0 or not state.pinned_canvas:
        at = _pin_anew(state, clean, block, seal, leave_for_next)
        if at < 0:
            return same, removed
    return canvas.inject_at(clean, at, state.pinned_canvas, seal), removed
