"""The message work that writes the plugin's own text or tells it from others', under one seal.

Every piece of it needs the installation's seal (``provenance.py``): to seal what it writes
(a trim, a digest, a canvas) and to recognise what an earlier call or process wrote. The
runtime binds its seal here once, and compaction asks this object instead of handing the seal
down through every step. There is no default: without the runtime's seal, a stand-in would
take a digest an earlier process wrote for someone else's text.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import canvas, departures, digest, durable_pointers, focus, read_backs, recall_blocks
from .fallback import CompactResult, local_compact, trim_result
from .messages import is_plugin_text, is_real_user, newest_real_user
from .notes import Notes
from .provenance import Seal

Message = Dict[str, Any]


class SealedWork:
    """One seal, bound once per runtime: the local compaction, the digest's note pair, the
    canvas, what left and the recall marks, each sealed or recognised by it."""

    def __init__(self, seal: Seal) -> None:
        if not isinstance(seal, Seal):
            raise TypeError("the plugin's own text needs the runtime's seal, not %r" % (seal,))
        self.seal = seal

    # -- recognising our own text --------------------------------------------------------
    def is_ours(self, text: Any) -> bool:
        return is_plugin_text(text, self.seal)

    def is_digest(self, text: Any) -> bool:
        return self.seal.is_ours(text, digest.KIND)

    def is_real_user(self, message: Message) -> bool:
        return is_real_user(message, self.seal)

    def newest_real_user(self, messages: Sequence[Message]) -> int:
        return newest_real_user(messages, seal=self.seal)

    # -- the canvas and recall copies ----------------------------------------------------
    def without_our_blocks(self, messages: List[Message]) -> Tuple[List[Message], int, List[str]]:
        """What a compaction works on (and what is prepared ahead): no canvas blocks of ours,
        one copy of each recall block (Hermes resends every turn's); canvases and copies removed."""
        clean, canvas_removed = self.strip_canvas(messages)
        clean, copies = recall_blocks.keep_newest(clean)
        return clean, canvas_removed, copies

    def strip_canvas(self, messages: Sequence[Any]) -> Tuple[List[Any], int]:
        return canvas.strip_all(messages, self.seal)

    def strip_canvas_text(self, text: str) -> Tuple[str, int]:
        return canvas.strip(text, self.seal)

    def holds_canvas(self, message: Any) -> bool:
        return canvas.holds_block(message, self.seal)

    def keep_newest_canvas(self, messages: List[Message]) -> Tuple[Optional[List[Message]], int]:
        return canvas.keep_newest(messages, self.seal)

    def sealed_canvas(self, text: str) -> str:
        return canvas.sealed(text, self.seal)

    def inject_canvas(self, messages: List[Message], block: str) -> List[Message]:
        return canvas.inject(messages, block, self.seal)

    def inject_canvas_at(self, messages: List[Message], at: int, block: str) -> List[Message]:
        return canvas.inject_at(messages, at, block, self.seal)

    # -- the local compaction and what it writes -----------------------------------------
    def local_compact(self, messages: Sequence[Message], budget: int, **options: Any) -> CompactResult:
        return local_compact(messages, budget, seal=self.seal, **options)

    def trim_result(self, message: Message, limit: int, hint: str = "") -> Optional[Message]:
        return trim_result(message, limit, seal=self.seal, hint=hint)

    def note_pair(self, messages: Sequence[Message], notes: Notes) -> List[Message]:
        return digest.note_pair(messages, notes, seal=self.seal)

    def keep_read_backs(self, original: Sequence[Message], reply: List[Message]) -> List[Message]:
        return read_backs.restore(original, reply, self.seal)

    # -- what left, and the marks that name it -------------------------------------------
    def what_left(self, before: List[Message], after: List[Message],
                  extra: List[Message] = ()) -> departures.Departures:
        return departures.find(before, after, extra, seal=self.seal)

    def merged_only(self, before: List[Message], via: List[Message],
                    after: List[Message]) -> List[departures.Departed]:
        return departures.merged_only(before, via, after, seal=self.seal)

    def focus_archived(self, before: Sequence[Message], after: Sequence[Message],
                       words: Sequence[str]) -> Tuple[str, ...]:
        return focus.archived(before, after, words, self.seal)

    def pointed(self, result: Sequence[Message]) -> List[str]:
        return durable_pointers.pointed(result, self.seal)

    def unkept(self, messages: Sequence[Any], lost: AbstractSet[str], why: str
               ) -> Tuple[List[Any], int]:
        return durable_pointers.unkept(messages, lost, why, self.seal)

    def restore_pointers(self, result: List[Message], before: Sequence[Message],
                         held: Callable[[str], bool], reused: AbstractSet[str],
                         fits: Callable[[Message, Message], bool],
                         unheld: Callable[[Message], Optional[Message]]
                         ) -> Tuple[List[Message], int]:
        return durable_pointers.restore(result, before, self.seal, held, reused, fits, unheld)
