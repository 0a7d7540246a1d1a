"""The readable key of an archived message (``msg-`` and 12 hex digits), known before it is written.

The model is shown this key in a notice or a trimmed text and reads the message back in full
with ``tdai_read_cos(key=...)``. It is a hash of the role and the exact text (the archive's own
``item_key`` is ``msg:`` and the whole SHA-1 of the same), so whoever writes a notice derives it
without waiting for the asynchronous archive write, every process derives the same one, and
rows archived before keys were shown have one too. Tool results keep their ``tool_call_id``.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "msg-"
DIGITS = 12
PATTERN = re.compile(r"msg-[0-9a-f]{%d}" % DIGITS)


def digest(role: str, text: str) -> str:
    """The full hex SHA-1 of a message as archived (role, NUL, text)."""
    return hashlib.sha1((role + "\0" + text).encode("utf-8", "replace")).hexdigest()


def message_key(role: str, text: str) -> str:
    """The key the model is shown for a message with this role and text."""
    return PREFIX + digest(role, text)[:DIGITS]
