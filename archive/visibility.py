"""Who may see what: the one decision of what a reader may read and be shown.

Every read path asks ``scope_of`` (or uses ``OPERATOR``) and reads only through the answer:
the recall tools (``tdai_read_cos``, ``tdai_offload_search``), hermes-lcm's old history, the
``/tencentdb-offload`` slash command's status, and the host's own command line (``status``,
``archive``, ``report``), which is the operator's.

- A conversation reads its own archive and its lineage's (the conversations it was branched
  from, ``hermes/lineage.py``), never another's.
- hermes-lcm's rows are keyed by Hermes' session id. In the CLI the whole ``lcm.db`` is the one
  user's own history and stays readable. In Hermes' messaging gateway one home serves many
  people: a conversation reads only the rows of its own lineage's session ids (its key, the ids
  aliased to it, its parents'), unless the operator opted in (``LCM_HISTORY_SHARED``).
- In the messaging gateway the slash command answers whoever sends it: no conversation is named
  there, and an error of a conversation is counted, not shown (its text may quote a chat id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, FrozenSet, Iterable, Optional, Sequence, Tuple

LCM_OWN_ONLY = ("this conversation's own sessions only: in Hermes' messaging gateway hermes-lcm's "
                "history holds every user's chats (TENCENTDB_OFFLOAD_LCM_HISTORY_SHARED=on opens "
                "all of it to every conversation)")


@dataclass(frozen=True)
class Scope:
    """What one reader may read. ``conversations``: archive keys, own first (None: every
    one); ``lcm_sessions``: hermes-lcm session ids (None: all); ``private``: conversations
    outside the scope are never named to this reader."""

    conversations: Optional[Tuple[str, ...]]
    lcm_sessions: Optional[FrozenSet[str]]
    private: bool
    lcm_note: str = ""

    def sees(self, conversation: Optional[str]) -> bool:
        """Whether this reader may see something of ``conversation`` (None or '': the process's
        own, no conversation's)."""
        if not conversation or self.conversations is None:
            return True
        return conversation in self.conversations

    @property
    def own(self) -> str:
        return self.conversations[0] if self.conversations else ""


# the host's operator (the command line on the host): everything, every name
OPERATOR = Scope(None, None, False)


def scope_of(conversation: str, lineage: Sequence[str] = (), *, shared_host: bool,
             lcm_shared: bool = False,
             session_ids: Callable[[Sequence[str]], Iterable[str]] = lambda keys: ()) -> Scope:
    """What ``conversation`` (with its ``lineage``, nearest first) may read. ``shared_host``:
    Hermes' messaging gateway (many people, one home). ``session_ids(keys)``: the Hermes session
    ids aliased to those conversations. ``conversation`` '' is nobody's: the slash command,
    which Hermes does not tell whose conversation sent it."""
    keys = tuple(k for k in (conversation, *lineage) if k)
    if not shared_host:
        return Scope(keys if conversation else None, None, False)
    if lcm_shared:
        return Scope(keys, None, True)
    own = frozenset(keys) | frozenset(session_ids(keys)) if keys else frozenset()
    return Scope(keys, own, True, LCM_OWN_ONLY)
