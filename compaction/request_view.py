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
from ..context.sealed import SealedWork
from ..session.state import SessionState
from ..context import canvas, recall_blocks

Message = Dict[str, Any]
# Runtime.leave_for_next_process: (conversation, name, value)
LeaveForNextProcess = Callable[[str, str, Any], None]


def anchor_key(message: Message) -> str:
    """A short, storable name for the user message a canvas is pinned to."""
    text = content_key(message).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[:32]


class RequestView:
    """How one process's requests carry the canvas: its seal bound, and where a new pin is
    kept for the next process (``Runtime.leave_for_next_process``; None when the canvas is off,
    and so is a pin an earlier process left)."""

    def __init__(self, sealed: SealedWork,
                 leave_for_next: Optional[LeaveForNextProcess] = None) -> None:
        self.sealed = sealed
        self.leave_for_next = leave_for_next

    def build(self, state: SessionState, request: List[Message], block: str
              ) -> Tuple[Optional[List[Message]], int]:
        """(the request to send, or None for "as it is"; stale blocks removed)."""
        deduped, _copies = recall_blocks.keep_newest(request, oldest=True)
        clean, removed = self.sealed.strip_canvas(deduped)
        same = None if removed == 0 and deduped is request else clean
        if not block and not state.pinned_canvas:
            if state.canvas_repin:
                self._unpin(state)
            return same, removed
        at = -1 if state.canvas_repin else self._anchor(clean, state.pinned_anchor)
        if at < 0 or not state.pinned_canvas:
            at = self._pin_anew(state, clean, block)
            if at < 0:
                return same, removed
        return self.sealed.inject_canvas_at(clean, at, state.pinned_canvas), removed

    def _anchor(self, messages: List[Message], key: str) -> int:
        if not key:
            return -1
        return next((i for i in range(len(messages) - 1, -1, -1)
                     if self.sealed.is_real_user(messages[i]) and anchor_key(messages[i]) == key),
                    -1)

    def _unpin(self, state: SessionState) -> None:
        """The request right after a compaction went without a canvas (none known yet): the
        chance to show one for free has passed; nothing stays pinned until the next turn's
        first request (mid-turn it would re-bill everything after the user message)."""
        with state.lock:
            state.canvas_repin = False
            state.pinned_anchor = state.pinned_canvas = ""
        if self.leave_for_next is not None:
            self.leave_for_next(state.key, "pin", ["", ""])

    def _pin_anew(self, state: SessionState, clean: List[Message], block: str) -> int:
        """Where the current canvas goes now, or -1 while showing it would rewrite a sent
        message."""
        if state.canvas_repin and not block and not state.canvas_cleared:
            block = state.pinned_canvas     # none fetched yet: the one shown before the compaction
        at = self.sealed.newest_real_user(clean)
        if at < 0 or not block or not (state.canvas_repin or at == len(clean) - 1):
            if state.canvas_repin:
                self._unpin(state)
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
        if self.leave_for_next is not None:
            self.leave_for_next(state.key, "pin", [anchor, block])
        return at
