"""Compaction through the Gateway: build an honest request, repair and verify the reply.

How ``context_window`` is chosen. The Gateway picks its level from
``r = total_tokens / context_window`` (mild ≥ 0.5, aggressive ≥ 0.85 with target 0.80·cw,
emergency ≥ 0.95 with target 0.75·cw) and runs the levels cumulatively: mild summaries first,
then truncation and deletion only while the total is still above the level's target. We
send ``context_window = ceil(target / 0.75)``, so the cascade's last step ends exactly at our
target (``COMPACT_RATIO × context_length``) and each step only runs if the previous one did
not get there. ``total_tokens`` and ``message_tokens`` are our calibrated estimates in the
provider's units; ``ratio`` is the honest ``total / context_length`` (clamped to 2).

The Gateway never decides what the model is told about itself: system messages in a reply
are ignored and the host's are kept as given; every other message must have a valid shape
(``reply_shape``) and come from our request (``reply_origin``: removed, a result replaced,
a canvas added, the current turn byte-identical), or the whole reply is refused
(``ReplyRefused``) and the engine compacts locally.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..context import canvas
from ..context.messages import HISTORY_TAG, RepairReport, is_tool_result, repair, role, text_of
from .client import COMPACT, RESET_MEANS_TOO_LARGE, GatewayClient, encode_compact
from .lone_surrogates import mend_results, utf8
from .errors import GatewayProtocolError, GatewayUnavailable, ReplyRefused
from .reply_origin import canvas_only, unfaithful
from .reply_shape import shape_problems
from ..context.tokens import Calibrator, TokenMemo

Message = Dict[str, Any]
CASCADE_END = 0.75
BODY_TIERS = (8_000, 2_000, 500)


def context_window_for(target_tokens: int) -> int:
    return max(1, int(math.ceil(target_tokens / CASCADE_END)))


def effective_level(report: Dict[str, Any]) -> str:
    """The deepest step that really changed something (the Gateway reports the level it
    *entered*, which is 'emergency' whenever the ratio is high even if mild did all the work)."""
    if report.get("emergencyDeleted"):
        return "emergency"
    if report.get("aggressiveDeleted"):
        return "aggressive"
    if report.get("mildReplacements"):
        return "mild"
    if report.get("fastPathReplaced") or report.get("fastPathDeleted"):
        return "replay"
    return str(report.get("resolvedLevel") or "fastpath")


@dataclass
class GatewayOutcome:
    messages: List[Message]
    report: Dict[str, Any]
    level: str
    canvas: str = ""
    body_trimmed: List[Message] = field(default_factory=list)


def strip_for_wire(messages: Sequence[Message]) -> Tuple[List[Message], Dict[str, Any]]:
    """Messages without host sidecars (``api_content``, ``_`` markers) and a map to put
    ``api_content`` back on messages the Gateway returns unchanged."""
    out: List[Message] = []
    sidecars: Dict[str, Any] = {}
    for m in messages:
        if "api_content" in m:
            sidecars[_content_key(m)] = m["api_content"]
        if "api_content" in m or any(k.startswith("_") for k in m):
            m = {k: v for k, v in m.items() if k != "api_content" and not k.startswith("_")}
        out.append(m)
    return out, sidecars


def mask_for_wire(client: GatewayClient, session_id: str,
                  wire: List[Message]) -> Tuple[List[Message], Dict[str, List[Message]]]:
    """``wire`` as it may leave the machine (``client.outbound``), and the originals of the
    messages masking changed, by the masked message's text, to put back those the Gateway
    returns as sent: the Gateway never holds a secret, the model keeps what it was shown."""
    sent = client.outbound(session_id, COMPACT, wire)
    originals: Dict[str, List[Message]] = {}
    for mine, theirs in zip(wire, sent):
        if theirs is not mine:
            originals.setdefault(_wire_key(theirs), []).append(mine)
    return sent, originals


def unmask(messages: List[Message], originals: Dict[str, List[Message]]) -> List[Message]:
    """``messages`` with each one that came back as masked and sent replaced by its original
    (in order, when two originals masked alike)."""
    if not originals:
        return messages
    left = {k: list(v) for k, v in originals.items()}
    out = []
    for m in messages:
        found = left.get(_wire_key(m))
        out.append(found.pop(0) if found else m)
    return out


def _wire_key(m: Message) -> str:
    return json.dumps({k: v for k, v in m.items() if not k.startswith("_")},
                      ensure_ascii=False, sort_keys=True, default=str)


def _content_key(m: Message) -> str:
    return m.get("role", "") + "\0" + json.dumps(m.get("content"), ensure_ascii=False,
                                                sort_keys=True, default=str)


def _json_size(messages: List[Message]) -> int:
    return len(utf8(json.dumps(messages, ensure_ascii=False, separators=(",", ":"))))


def shrink_to_body_limit(messages: List[Message], limit: int,
                         fixed_bytes: int) -> Tuple[List[Message], List[Message]]:
    """Truncate the largest tool results, tier by tier, until the JSON fits ``limit``.

    Sizes are measured once per message, so this is linear, not a re-serialisation per
    step. Returns (messages, originals of the truncated ones)."""
    from ..context.fallback import trim_result
    sizes = [len(utf8(json.dumps(m, ensure_ascii=False, separators=(",", ":")))) + 1
             for m in messages]
    total = fixed_bytes + sum(sizes)
    if total <= limit:
        return messages, []
    out = list(messages)
    originals: List[Message] = []
    order = sorted((i for i, m in enumerate(messages) if is_tool_result(m)),
                   key=lambda i: sizes[i], reverse=True)
    for tier in BODY_TIERS:
        for i in order:
            if total <= limit:
                break
            cut = trim_result(out[i], tier)
            if cut is None:
                continue
            new_size = len(utf8(json.dumps(cut, ensure_ascii=False, separators=(",", ":")))) + 1
            if new_size >= sizes[i]:
                continue
            if out[i] is messages[i]:
                originals.append(messages[i])
            total -= sizes[i] - new_size
            sizes[i] = new_size
            out[i] = cut
        if total <= limit:
            break
    return out, originals


def clean_reply(reply: List[Any], sent: Sequence[Message], sidecars: Dict[str, Any],
                host_systems: Sequence[Message] = (),
                originals: Optional[Dict[str, List[Message]]] = None) -> Tuple[List[Message], str]:
    """Check what the Gateway returned for ``sent``, then repair what it is known to break.

    Refused (``ReplyRefused``): a message of invalid shape, or anything not derived from
    ``sent``. Repaired, each answering a behaviour of the Gateway (v2.0.1):

    * its emergency level puts canvas messages at index 0, before the system message, and
      a reply may carry system messages of its own: the reply's are dropped, ``host_systems``
      go first, as given;
    * it inserts its active canvas as a user message (and may leave an older one): every
      canvas block is removed, the newest active one returned so the engine places it once;
    * history canvases are re-inserted on each aggressive pass: duplicates are dropped;
    * its truncation can cut an emoji in two (UTF-16): the lone half becomes U+FFFD;
    * it marks messages with ``_offloaded``/``_mmd*`` keys a provider would refuse: stripped;
    * its replay removes OpenAI tool results but leaves the ``tool_calls`` that issued them
      (only content-block calls are cleaned): dangling calls and orphan results are removed,
      and consecutive same-role messages merged (``messages.repair``);
    * it never sees the host's ``api_content``: restored on messages that came back unchanged;
    * it never sees a secret (``mask_for_wire``): ``originals`` are put back on messages that
      came back as masked and sent.
    """
    reply = mend_results(reply) if isinstance(reply, list) else reply
    problems = shape_problems(reply) or unfaithful(reply, sent)
    if problems:
        raise ReplyRefused("compact reply refused: %s" % problems)
    rep = RepairReport()
    newest_canvas = ""
    seen_history = set()
    kept: List[Any] = []
    for m in reply:
        if m.get("role") == "system":
            continue
        text = text_of(m) if role(m) == "user" else ""
        if m.get("_mmdContextMessage") or (text and canvas_only(m)):
            # the Gateway's canvas message, taken whole (a canvas cannot close it early); a
            # user message that merely contains our tags is the user's text and stays
            newest_canvas = canvas.gateway_block(m) or newest_canvas
            rep.add("canvas_blocks_removed")
            continue
        if HISTORY_TAG in text:
            if text in seen_history:
                rep.add("history_duplicates_removed")
                continue
            seen_history.add(text)
        kept.append(m)
    repaired = unmask(repair(kept, rep), originals or {})
    if sidecars:
        for i, m in enumerate(repaired):
            api = sidecars.get(_content_key(m))
            if api is not None:     # (our sealed canvas in it goes with the flow's strip)
                repaired[i] = dict(m, api_content=api)
    return list(host_systems) + repaired, newest_canvas


class GatewayCompactor:
    """One compaction through the Gateway; raises ``GatewayError`` so the caller compacts locally.

    Never changes the client: a body the Gateway cut off (a reset after a large body is how
    it enforces its limit) is retried once under a smaller limit local to this call.
    """

    def __init__(self, client: GatewayClient) -> None:
        self.client = client

    def run(self, session_id: str, messages: List[Message], *, target_tokens: int,
            context_length: int, calibrator: Calibrator, overhead_estimate: int,
            count: Optional[Callable[[Any], int]] = None) -> GatewayOutcome:
        wire, sidecars = strip_for_wire(messages)
        sent, originals = mask_for_wire(self.client, session_id, wire)     # once, not per try
        args = (session_id, messages, (sent, sidecars, originals), target_tokens, context_length,
                calibrator, overhead_estimate, count or TokenMemo())
        started = time.monotonic()
        try:
            return self._attempt(int(self.client.body_limit * 0.95), None, *args)
        except GatewayUnavailable as exc:
            if not exc.size_refusal:
                raise
            left = self.client.timeout - (time.monotonic() - started)   # one deadline for both
            return self._attempt(max(RESET_MEANS_TOO_LARGE, exc.body_bytes // 2), left, *args)

    def _attempt(self, limit: int, timeout: Optional[float], session_id: str,
                 messages: List[Message], prepared: Tuple[List[Message], Dict[str, Any], Any],
                 target_tokens: int, context_length: int, calibrator: Calibrator,
                 overhead_estimate: int, count: Callable[[Any], int]) -> GatewayOutcome:
        wire, sidecars, originals = prepared
        body_trimmed: List[Message] = []

        def encode(msgs: List[Message], ascii_only: bool = True) -> bytes:
            per_message = [count(m) for m in msgs]
            msg_tokens = [max(1, int(round(t * calibrator.slope))) for t in per_message]
            total = max(calibrator.to_real(overhead_estimate + sum(per_message)), sum(msg_tokens))
            return encode_compact(session_id, msgs, ratio=total / max(1, context_length),
                                  context_window=context_window_for(target_tokens),
                                  total_tokens=total, message_tokens=msg_tokens,
                                  ascii_only=ascii_only)

        body = encode(wire)                 # one serialisation when the body fits (usual)
        if len(body) > limit:               # CJK escapes take 6 bytes, UTF-8 3: try that first
            body = encode(wire, ascii_only=False)
        if len(body) > limit:
            wire, body_trimmed = shrink_to_body_limit(wire, limit, len(body) - _json_size(wire))
            body = encode(wire, ascii_only=False)
        data = self.client.compact_encoded(body, timeout)
        report = data.get("report") or {}
        if not isinstance(report, dict):
            raise GatewayProtocolError("compact report is not an object")
        host_systems = [m for m in messages if role(m) == "system"]
        repaired, block = clean_reply(data["messages"], wire, sidecars, host_systems, originals)
        return GatewayOutcome(repaired, report, effective_level(report), block,
                              unmask(body_trimmed, originals))
