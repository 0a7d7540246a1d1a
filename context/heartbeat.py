"""Heartbeat polls: which turns and tool steps are a scheduler's liveness poll, not work.

No supported Hermes ships a heartbeat of this kind (no heartbeat turn, no ``HEARTBEAT.md``
reader, no ``HEARTBEAT_OK``; its "heartbeats" are process liveness files and the kanban
worker's ``kanban_heartbeat`` tool, which is work). The shapes here are the OpenClaw-style poll
a scheduler may still send: the whole prompt is the poll, and its tool step reads the file
``HEARTBEAT.md``. A word alone is no sign, and a tool's name never is. Pure.
"""

from __future__ import annotations

import re
from typing import Any

HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_PROMPTS = ("Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. "
                     "Do not infer or repeat old tasks from prior chats. If nothing needs "
                     "attention, reply HEARTBEAT_OK.",)
_HEARTBEAT_TOKEN = "HEARTBEAT"
_HEARTBEAT_PATH_RE = re.compile(r'"(?:[^"\\]*/)?HEARTBEAT\.md"')


def is_heartbeat_prompt(text: Any) -> bool:
    """The whole prompt is a heartbeat poll: a known poll text, or one short line whose first
    word is the bare token ``HEARTBEAT``. A prompt that talks about heartbeats is work."""
    if not isinstance(text, str):
        return False
    words = text.split()
    if " ".join(words) in HEARTBEAT_PROMPTS:
        return True
    return bool(words) and words[0] == _HEARTBEAT_TOKEN and "\n" not in text.strip() \
        and len(text) <= 120


def is_heartbeat_call(name: str, args: Any) -> bool:
    """A heartbeat's tool step: its arguments name the file ``HEARTBEAT.md`` (a path whose last
    part is exactly that). The tool's name never matters. Any depth, never raises."""
    if isinstance(args, str):
        return HEARTBEAT_FILE in args and bool(_HEARTBEAT_PATH_RE.search(args))
    todo, seen = [args], 0
    while todo and seen < 10_000:
        value = todo.pop()
        seen += 1
        if isinstance(value, str):
            if value == HEARTBEAT_FILE or value.endswith("/" + HEARTBEAT_FILE):
                return True
        elif isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, (list, tuple)):
            todo.extend(value)
    return False
