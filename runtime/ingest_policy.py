"""Session policy for the ingest worker: what it sends for a session, what a canvas changes.

The worker (``runtime/ingest.py``) only does the Gateway I/O. What accompanies a
session's tool pairs (the turn's prompt and recent messages the hooks recorded), when a
session's canvas is worth asking for (rows of it were accepted, or the hooks asked), and
where a fetched canvas goes (the session's current canvas block) is decided here, from the
session registry. A session evicted from the registry still has its rows delivered, under
its Gateway id, without a prompt or a canvas.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Set

from ..context import canvas as canvas_block
from .ingest import Canvas, CanvasDue, Outgoing
from ..memory_gateway.session_ids import gateway_session_id
from ..session.state import SessionRegistry


class SessionIngestPolicy:
    def __init__(self, registry: SessionRegistry, canvas: bool = True,
                 on_answer: Optional[Callable[[], Any]] = None) -> None:
        self.registry = registry
        self.canvas_enabled = canvas
        self.on_answer = on_answer or (lambda: None)     # the Gateway took rows: it exists

    def outgoing(self, session: str) -> Outgoing:
        state = self.registry.peek(session)
        if state is None:
            return Outgoing(gateway_session_id(session))
        with state.lock:
            return Outgoing(state.gateway_id, state.prompt, tuple(state.recent))

    def accepted(self, session: str) -> None:
        self.on_answer()
        state = self.registry.peek(session)
        if state is not None:
            state.ask_canvas()

    def canvases_due(self, delivered: Set[str]) -> List[CanvasDue]:
        if not self.canvas_enabled:
            return []
        return [CanvasDue(s.key, s.gateway_id, s.canvas_ask()) for s in self.registry.all()
                if s.canvas_wanted or s.key in delivered]

    def canvas(self, due: CanvasDue, found: Optional[Canvas]) -> None:
        state = self.registry.peek(due.session)
        if state is not None:
            state.canvas_fetched(due.ask, None if found is None else
                                 canvas_block.format_block(found.filename, found.content)
                                 if found.content.strip() else "")
