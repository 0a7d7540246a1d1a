"""The Gateway session id of a conversation: one id per conversation, never shared.

The Gateway accepts ``[A-Za-z0-9_.:-]{1,500}`` but stores a session in a directory named
after the id with every character outside ``[A-Za-z0-9._-]`` replaced by ``_``, so ``a:b``
and ``a_b`` share one directory (canvas, summaries, archived results). It silently ignores
ids containing ``subagent`` or matching ``memory-*-session-N``.

The mapping (injective, stable, within those rules):

* a *plain* conversation key, one made only of ``[A-Za-z0-9._-]``, at most 180 characters,
  without ``subagent`` (any case), and for which ``hermes-<key>`` does not match
  ``memory-.*-session-\\d+``, maps to ``hermes-<key>`` (the id every earlier version gave it,
  so existing sessions keep their Gateway data);
* every other key maps to ``hermes.<readable>.<hash>``: ``readable`` is the key with unsafe
  characters as ``-`` (runs collapsed, at most 120 characters, ``subagent`` written
  ``sub-agent``, ``session`` as ``sess`` if the ignored form would appear), ``hash`` the first
  32 hex digits of SHA-256 of the whole key (UTF-8). Such ids start ``hermes.``, plain ones
  ``hermes-``, so the two kinds never meet; within each kind distinct keys give distinct ids
  (identity, or a 128-bit hash of the whole key). At most 161 characters.

An empty key is the conversation ``default`` (what the registry calls a session without id).
Earlier versions cut keys at 180 characters and wrote every unsafe character as ``-``, so
``chat:alice``, ``chat/alice`` and ``chat-alice`` shared a Gateway session; those keys now
have their own (a non-plain key starts a fresh Gateway session once, after the upgrade).
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "hermes-"              # plain keys, unchanged since the first version
HASHED = "hermes."              # every other key
PLAIN_MAX = 180
READABLE_MAX = 120
HASH_HEX = 32
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,%d}" % PLAIN_MAX)
_SUBAGENT = re.compile("subagent", re.I)
_IGNORED = re.compile(r"memory-.*-session-\d+")     # the Gateway's own (case-sensitive) test


def gateway_session_id(conversation: str) -> str:
    """The Gateway session id for a conversation key (see the module docstring)."""
    key = conversation or "default"
    if (_PLAIN.fullmatch(key) and not _SUBAGENT.search(key)
            and not _IGNORED.search(PREFIX + key)):
        return PREFIX + key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX]
    readable = _UNSAFE.sub("-", key)
    readable = re.sub("-{2,}", "-", readable).strip("-.")[:READABLE_MAX].strip("-.")
    readable = _SUBAGENT.sub("sub-agent", readable)
    out = HASHED + (readable + "." if readable else "") + digest
    if _IGNORED.search(out):
        out = HASHED + readable.replace("session", "sess") + "." + digest
    return out
