"""How a host measures a request before it asks ``should_compress``.

The demo and replay driver stands in for the host, so it must pass the figure that host would
pass. A host that does not select context uses a whole-request ``chars / 4``. A host that
selects context anchors on the provider's last ``prompt_tokens`` + ``completion_tokens`` and
adds a rough estimate of only the messages appended since (CJK characters one token each, other
text UTF-8 bytes / 4); without a valid anchor (after a compaction) it falls back to the
whole-request rough figure. Passing the first figure to an engine set up for the second host
(its small-window trigger leaves less headroom) let the demo send over the window.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from ..context import blocks

# the hosts the driver emulates (the ``host`` of the demo and replay report)
NOT_SELECTING = "no-select-context"     # canvas through the hooks; a whole-request chars / 4
SELECTING = "selects-context"           # select_context per request; an anchored figure
HOSTS = (NOT_SELECTING, SELECTING)
# the code points a selecting host's estimate_tokens_rough counts as one token each
_CJK_DENSE = re.compile("[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def detected_host() -> str:
    """The host the engine set itself up for (the one this process can import)."""
    from ..hermes.host import running_host
    return SELECTING if running_host().selects_context else NOT_SELECTING


# what every host charges per image in its rough estimates (``_IMAGE_TOKEN_COST``; a selecting
# host before it learns a price from usage): never the base64 length, which would compact every turn
HOST_IMAGE_TOKENS = 1500


def _without_images(message: Any) -> Tuple[Any, int]:
    """``message`` with each image part's data stripped, as the hosts estimate it; its image count."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return message, 0
    parts = [{"image": "[stripped]"} if blocks.read_block(part).is_image else part
             for part in content]
    images = sum(1 for part in content if blocks.read_block(part).is_image)
    return (dict(message, content=parts) if images else message), images


def rough_request_chars(request: Dict[str, Any]) -> int:
    """A non-selecting host's rough pre-request estimate: characters / 4 of the whole request,
    images flat."""
    stripped = [_without_images(m) for m in request.get("messages") or ()]
    body = dict(request, messages=[m for m, _n in stripped])
    return (len(json.dumps(body, ensure_ascii=False, default=str)) // 4
            + HOST_IMAGE_TOKENS * sum(n for _m, n in stripped))


def rough_message_cjk(message: Any) -> int:
    stripped, images = _without_images(message)
    return rough_text_cjk(str(stripped)) + HOST_IMAGE_TOKENS * images


def rough_text_cjk(text: str) -> int:
    """A selecting host's ``estimate_tokens_rough``: CJK one token each, the rest UTF-8 bytes / 4."""
    if not text:
        return 0
    rest = _CJK_DENSE.sub("", text)
    return (len(text) - len(rest)) + (len(rest.encode("utf-8", "replace")) + 3) // 4


def rough_request_cjk(request: Dict[str, Any]) -> int:
    tools = json.dumps(request.get("tools") or [], ensure_ascii=False)
    return rough_text_cjk(tools) + sum(rough_message_cjk(m) for m in request.get("messages") or ())


class Pressure:
    """The request-size figure one host passes to ``should_compress``."""

    def __init__(self, host: str) -> None:
        if host not in HOSTS:
            raise ValueError("unknown host %r (known: %s)" % (host, ", ".join(HOSTS)))
        self.host = host
        self._anchor: Optional[Dict[str, int]] = None

    def priced(self, prompt_tokens: int, completion_tokens: int, messages_sent: int) -> None:
        """A provider reply priced the first ``messages_sent`` conversation messages."""
        self._anchor = {"prompt": prompt_tokens, "completion": completion_tokens,
                        "base": messages_sent}

    def forget(self) -> None:
        """A compaction rewrote the conversation: the anchor no longer matches."""
        self._anchor = None

    def anchored(self, messages: List[Dict[str, Any]]) -> Optional[int]:
        if self.host != SELECTING or self._anchor is None or len(messages) < self._anchor["base"]:
            return None
        delta = messages[self._anchor["base"]:]
        if delta and delta[0].get("role") == "assistant":   # the reply is in completion_tokens
            delta = delta[1:]
        return (self._anchor["prompt"] + self._anchor["completion"]
                + sum(rough_message_cjk(m) for m in delta))

    def rough(self, request: Dict[str, Any]) -> int:
        return rough_request_cjk(request) if self.host == SELECTING else rough_request_chars(request)

    def before_request(self, request: Dict[str, Any], messages: List[Dict[str, Any]]) -> int:
        """The pre-API pressure check's figure."""
        anchored = self.anchored(messages)
        return anchored if anchored is not None else self.rough(request)

    def after_tools(self, engine: Any, request: Dict[str, Any],
                    messages: List[Dict[str, Any]]) -> Optional[int]:
        """The post-tool check's figure; None when the host skips the check (a selecting host
        waits for real usage after a compaction)."""
        if self.host == SELECTING:
            if getattr(engine, "awaiting_real_usage_after_compression", False):
                return None
            anchored = self.anchored(messages)
            if anchored is not None:
                return anchored
        last = engine.last_prompt_tokens
        return last if last > 0 else (0 if last == -1 else self.rough(request))
