"""Secrets masked where text leaves the machine or persists in the context.

Hermes' built-in compressor masks everything that crosses its compaction boundary with its own
redactor, strictly (``hermes/redact.py`` calls it so). ``strict`` is that call followed by the
plugin's own pattern set (``common/secret_patterns``), which alone masks outside Hermes (or
where Hermes' redactor would not: an older one without ``force`` while the user turned
redaction off). ``Redactor`` applies it to a JSON
body bound for the Gateway: every string but the ids and names the Gateway keys on, and call
arguments held as an object through their JSON text (where a name like ``"api_key"`` says a
value is secret).
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Tuple

from ..common import secret_patterns
from ..hermes.redact import host_redactor

# strings the Gateway keys on, never text: masking one would break the exchange
KEYS_KEPT = frozenset({"session_id", "tool_call_id", "tool_use_id", "id", "call_id", "role",
                       "type", "name", "tool_name", "timestamp", "result_ref", "filename"})
OBJECT_TEXT = frozenset({"params", "input", "arguments", "args"})   # call arguments as objects


_HOST, _HOST_NOTE = host_redactor()


def source() -> str:
    """Which redactor masks, in words for status and doctor."""
    if _HOST is not None:
        return _HOST_NOTE + ", then the plugin's own patterns"
    return "the plugin's own patterns (%s)" % _HOST_NOTE


def strict(text: str) -> str:
    """``text`` masked as Hermes' compressor masks what crosses its compaction boundary, then
    by the plugin's patterns: Hermes' passes depend on a text's context (its redactor left
    ``aws_secret_access_key = …`` in an ``env`` dump), ours catch that and a key block the
    plugin cut before its END line, and leave Hermes' masks as they are. A JSON text (a
    ``terminal`` result is ``{"output": "…\\n…"}``) is masked string by string, decoded: its
    escaped line breaks would join every line into one value, and a field named like a secret
    (``"password": "…"``) has its value masked; it is re-encoded only when something changed."""
    if not isinstance(text, str) or not text:
        return text
    if text[:1] in "{[":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, (dict, list)):
            out, changed = _json_strict(data, "")
            return json.dumps(out, ensure_ascii=False) if changed else text
    return _plain_strict(text)


def _json_strict(value: Any, key: str) -> Tuple[Any, bool]:
    if isinstance(value, str):
        out = strict(value)
        if out == value and key and value.strip() and secret_patterns.secret_name(key):
            out = secret_patterns.mask_value(value)
        return out, out != value
    if isinstance(value, dict):
        pairs = [(k, _json_strict(v, str(k))) for k, v in value.items()]
        return {k: v for k, (v, _c) in pairs}, any(c for _k, (_v, c) in pairs)
    if isinstance(value, list):
        items = [_json_strict(v, key) for v in value]
        return [v for v, _c in items], any(c for _v, c in items)
    return value, False


def _plain_strict(text: str) -> str:
    if "\\n" in text and "\n" not in text:
        # a piece of JSON (a result cut to a size, quoted in recent messages): its line breaks
        # are escapes, read as breaks (a value never runs on into the next line), put back after
        return _plain_strict(text.replace("\\n", "\n")).replace("\n", "\\n")
    if _HOST is not None:
        try:
            out = _HOST(text)
            text = out if isinstance(out, str) else text
        except Exception:   # noqa: BLE001 - a host redactor that fails: ours masks alone
            pass
    return secret_patterns.redact(text)


class Redactor:
    """``strict`` over a Gateway request body; off when the user turned redaction off.

    Its ``remembering()`` twin remembers texts of ``MEMO_FROM`` characters or more with their
    mask (up to ``MEMO_CHARS`` in all, the oldest forgotten first), for ``/compact``: each one
    sends again the messages the last one kept, and Hermes' redactor costs 10-150 ms per 100 KB.
    Ingest results are new every time: remembering them would only hold them in memory."""

    MEMO_FROM, MEMO_CHARS = 512, 16_000_000

    def __init__(self, enabled: bool = True, mask: Callable[[str], str] = strict) -> None:
        self.enabled = enabled
        self._mask = mask
        self._remember = False
        self._memo: "OrderedDict[str, str]" = OrderedDict()
        self._memo_chars = 0
        self._lock = threading.Lock()

    def remembering(self) -> "Redactor":
        """This redactor, remembering long texts (the memo is shared by both)."""
        twin = copy.copy(self)
        twin._remember = True
        return twin

    def text(self, text: str) -> Tuple[str, int]:
        """``text`` masked, and 1 if that changed it (else 0)."""
        if not self.enabled or not isinstance(text, str) or not text:
            return text, 0
        out = self._remembered(text) if self._remember and len(text) >= self.MEMO_FROM \
            else self._mask(text)
        return (text, 0) if out == text else (out, 1)

    def _remembered(self, text: str) -> str:
        with self._lock:
            out = self._memo.get(text)
            if out is not None:
                self._memo.move_to_end(text)
                return out
        out = self._mask(text)          # (outside the lock: the sender and a compaction mask at once)
        with self._lock:
            if text not in self._memo:
                self._memo[text] = out
                self._memo_chars += len(text)
                while self._memo_chars > self.MEMO_CHARS and self._memo:
                    self._memo_chars -= len(self._memo.popitem(last=False)[0])
        return out

    def value(self, obj: Any, key: str = "") -> Tuple[Any, int]:
        """``obj`` (a JSON value) with its texts masked, and how many changed. Unchanged parts
        are the same objects; a changed one is a copy (the caller's value is never altered)."""
        if not self.enabled:
            return obj, 0
        if isinstance(obj, str):
            return (obj, 0) if key in KEYS_KEPT else self.text(obj)
        if key in OBJECT_TEXT and isinstance(obj, (dict, list)):
            return self._object_text(obj)
        return self._walk(obj, key)

    def _walk(self, obj: Any, key: str) -> Tuple[Any, int]:
        if isinstance(obj, dict):
            changed: Dict[str, Any] = {}
            n = 0
            for k, v in obj.items():
                new, c = self.value(v, k)
                if c:
                    changed[k], n = new, n + c
            return ({**obj, **changed}, n) if n else (obj, 0)
        if isinstance(obj, list):
            items: List[Any] = []
            n = 0
            for v in obj:
                new, c = self.value(v, key) if not isinstance(v, str) else self.text(v)
                items.append(new)
                n += c
            return (items, n) if n else (obj, 0)
        return obj, 0

    def _object_text(self, obj: Any) -> Tuple[Any, int]:
        """Arguments held as an object, masked as the host masks them: as their JSON text,
        where a field's name tells a secret; read back as an object when still JSON."""
        text = json.dumps(obj, ensure_ascii=False, default=str)
        out, n = self.text(text)
        if not n:
            return obj, 0
        try:
            return json.loads(out), n
        except ValueError:      # a mask took an escape with it: each string on its own
            return self._walk(obj, "")
