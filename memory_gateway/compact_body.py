"""The ``/compact`` request body, encoded once so the compactor can size it before sending."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from .lone_surrogates import utf8


def encode_compact(session_id: str, messages: List[Dict[str, Any]], *, ratio: float,
                   context_window: int, total_tokens: int,
                   message_tokens: Optional[List[int]] = None, ascii_only: bool = True) -> bytes:
    """The /compact body. ASCII escapes encode ~1.7× faster; CJK text is then 2× the bytes,
    so a caller near the body limit asks again with ``ascii_only=False``."""
    body: Dict[str, Any] = {"session_id": session_id, "messages": messages,
                            "ratio": round(min(2.0, max(0.0, float(ratio))), 4),  # honest, ≤ 2
                            "context_window": int(max(1, context_window)),
                            "total_tokens": int(max(0, total_tokens))}
    if message_tokens is not None:
        body["message_tokens"] = [int(t) for t in message_tokens]
    text = json.dumps(body, ensure_ascii=ascii_only, separators=(",", ":"))
    return text.encode("ascii") if ascii_only else utf8(text)   # (lone surrogates escaped)
