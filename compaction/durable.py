"""What a compaction tells the model it can read back is in the archive when it lands.

A mark that names a recall call (a trim's pointer, a Gateway cut's pointer, a digest's key, a
call's arguments) is checked in the store after the compaction's writes were flushed: held in
memory for a retry is not held (a restart loses it). A trimmed result whose text the store
lacks goes back whole while the list stays within its room, else it is trimmed without a
pointer; every other mark naming such a text says "not kept" in its place
(``context/durable_pointers``).
"""

from __future__ import annotations

from typing import Any, AbstractSet, Callable, Dict, Iterable, List, Optional, Set, Tuple

from .process_view import CompactionProcess
from ..context.departures import Departures, read_keys
from ..context.sealed import SealedWork

Message = Dict[str, Any]
UNHELD_HINT = ("the rest could not be archived (the plugin's store is not writable), so "
               "tdai_read_cos cannot return it")


def holder(rt: CompactionProcess, conversation: str) -> Callable[[str], bool]:
    """Whether the archive durably holds a key of ``conversation`` (unreadable: not held)."""
    seen: Dict[str, bool] = {}

    def held(key: str) -> bool:
        if key not in seen:
            try:
                seen[key] = rt.archive.holds(conversation, key)
            except Exception:
                seen[key] = False
        return seen[key]
    return held


def reason(error: str) -> str:
    """Why a text is not kept, in a few words a marker can carry."""
    low = error.lower()
    if not low:                 # nothing failed: the writes were slower than the wait
        return "not written in time"
    if "full" in low or "space" in low or "quota" in low or "too large" in low:
        return "disk full"
    if "locked" in low or "busy" in low:
        return "the archive was locked by another process"
    return "the archive could not be written"


def without_digests(gone: Departures, sealed: SealedWork) -> Departures:
    """``gone`` without the older digest pairs that left: the archive never keeps a digest
    (what it names is kept by its own keys), so none is a key to read back or to check."""
    theirs = [d for d in gone.items
              if not (d.kind == "tool_result" and sealed.is_digest(d.content))]
    own = {d.tool_call_id for d in gone.items} - {d.tool_call_id for d in theirs}
    return gone._replace(items=theirs, left_ids=gone.left_ids - own)


def named(gone: Optional[Departures], reused: AbstractSet[str],
          result: List[Message], sealed: SealedWork) -> List[str]:
    """Every key a mark of the compaction may name: what left (by its read-back key and its
    call id) and what the pointers in ``result`` name."""
    gone = without_digests(gone, sealed) if gone is not None else None
    keys = list(read_keys(gone, reused)) if gone is not None else []
    keys += [d.tool_call_id for d in (gone.items if gone is not None else ()) if d.tool_call_id]
    return list(dict.fromkeys(keys + sealed.pointed(result)))


def not_kept(rt: CompactionProcess, held: Callable[[str], bool], result: List[Message],
             keys: Iterable[str], conversation: str = "") -> Tuple[List[Message], Set[str]]:
    """``result`` with every mark naming one of ``keys`` the store does not hold saying so;
    and those keys (``conversation``: whose result it is)."""
    lost = {k for k in keys if k and not held(k)}
    if not lost:
        return result, lost
    error = rt.archive.last_error
    out, changed = rt.sealed.unkept(result, lost, reason(error))
    if changed:
        rt.note_error("%d message(s) say a text that left the context was not kept: the "
                      "archive does not hold it (%s)" % (changed, error or "not written in time"), conversation)
    return out, lost


def only_durable(run: Any, clean: List[Message], result: List[Message], room: int,
                 gone: Optional[Departures]) -> Tuple[List[Message], Set[str]]:
    """A trimmed result keeps its recall pointer only when the archive durably holds its
    text (committed, read back); else it goes back whole, newest first, while the list
    stays within ``room``: past it, a trim that promises no recall (Hermes' own session
    store keeps the text) so that the next requests are not refused. Then every other mark
    naming a text the archive does not hold says so (``not_kept``); and the keys of those."""
    rt = run.rt
    reused = run.reused(clean)
    keys = named(gone, reused, result, rt.sealed)
    if not keys:
        return result, set()
    rt.archive.flush(run.archive_wait())    # at once when the store is failing
    held = holder(rt, run.state.key)
    size = [sum(map(run.count, result))]
    left: List[Message] = []

    def fits(now: Message, original: Message) -> bool:
        grow = run.count(original) - run.count(now)
        if size[0] + grow > room:
            return False
        size[0] += grow
        return True

    def unheld(original: Message) -> Optional[Message]:
        short = rt.sealed.trim_result(original, rt.settings.trim_chars, hint=UNHELD_HINT)
        if short is not None:
            left.append(short)
        return short
    result, restored = rt.sealed.restore_pointers(result, clean, held, reused, fits, unheld)
    why = rt.archive.last_error or "not written"
    if restored:
        rt.note_error("%d trimmed tool result(s) kept whole: the archive does not hold "
                      "them (%s)" % (restored, why), run.state.key)
    if left:
        rt.note_error("%d tool result(s) trimmed without recall: the archive does not hold "
                      "them (%s) and whole they would not fit the window" % (len(left), why), run.state.key)
    return not_kept(rt, held, result, keys, run.state.key)
