"""The fake Gateway's constants, request record, small helpers and token estimate."""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


# ─── Constants (gateway defaults, contract §4) ──────────────────────────────────

INGEST, COMPACT, QUERY_MMD = "/v2/offload/ingest", "/v2/offload/compact", "/v2/offload/query-mmd"
FAULT_KINDS = frozenset({"refuse", "hang", "5xx", "409", "reset", "garbage", "wrong_shape",
                         "proxy_404",    # an ingress's HTML "default backend" page
                         "route_404"})   # its own JSON 404, as while its routes are not mounted

MILD_RATIO, AGGRESSIVE_RATIO, EMERGENCY_RATIO = 0.5, 0.85, 0.95
MILD_SCAN_RATIO, MILD_SCORE_FLOOR = 0.7, 4
# The real Gateway's /compact on a 2-core machine under load (six agents compacting at once,
# level emergency, ~100K tokens): 3.2 s median. FakeGateway.slow_compact() scales it by size.
REAL_COMPACT_SECONDS_PER_100K = 3.2
MIN_KEEP = 10  # non-MMD messages that aggressive/emergency always keep
TRUNCATE_CHARS = 2000
TRUNCATE_NOTICE = f"\n\n[... content truncated, only first {TRUNCATE_CHARS} characters retained ...]"
REF_MIN_CHARS = 20  # shorter results get no refs/<id>.md (like the real L1)

_SESSION_ID_RE = re.compile(r"[a-zA-Z0-9_.\-:]+")  # used with fullmatch (JS `$` ≠ Python `$`)
_IGNORED_SESSION_RE = re.compile(r"memory-.*-session-\d+")
_UNSAFE_NAME_RE = re.compile(r"[^a-zA-Z0-9._-]")
_MMD_META_RE = re.compile(r"^%%\{\s*(.*?)\s*\}%%")
_HARD_BODY_CAP = 64 * 1024 * 1024  # never buffer more than this, whatever body_limit says

_ACTIVE_INTRO = "【当前活跃任务的mermaid流程图】这是你最近正在执行的任务的阶段性记录。"
_ACTIVE_OUTRO = '标记为 "doing" 的节点是近期焦点，"done" 的已完成。请参考此保持方向感，避免重复已完成的工作。'
_HISTORY_INTRO = "【历史任务记录】以下是此前完成的任务的概要。"
_REF_LINE = '原始工具结果已存档，如需查看完整内容请调用 tdai_read_cos(path="{ref}")'


@dataclass
class Recorded:
    """One request as the fake saw it. ``status`` is None when no reply was sent."""

    method: str
    path: str
    headers: dict
    body: Any
    status: int | None = None


# ─── Small helpers ──────────────────────────────────────────────────────────────

def _iso_now() -> str:
    """Server clock like JS ``new Date().toISOString()``: ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _request_id() -> str:
    return "req-" + secrets.token_hex(8)


def _js_json(value: Any) -> str:
    """JSON.stringify look-alike (compact, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _js_round(x: float) -> int:
    return int(math.floor(x + 0.5))  # Math.round, not banker's rounding


def sanitise_session_id(session_id: str) -> str:
    """Storage dir name: every char outside [a-zA-Z0-9._-] → '_' (so a:b and a_b collide).
    Ids valid on the wire can exceed a file-name limit (500 > 255 bytes); those get a
    shortened, hashed name so the fake keeps working where a local-disk Gateway would fail."""
    name = _UNSAFE_NAME_RE.sub("_", session_id)
    if len(name) > 200:
        name = name[:180] + "~" + hashlib.md5(name.encode()).hexdigest()[:16]
    return name


def _is_ignored_session(session_id: str) -> bool:
    return bool(_IGNORED_SESSION_RE.search(session_id)) or "subagent" in session_id


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:30].strip("-")
    return s or "task"


def _mmd_number(filename: str) -> int:
    head = filename.split("-")[0]
    return int(head) if head.isdigit() else 0  # parseInt(...) || 0


def _task_goal(content: str) -> str:
    m = _MMD_META_RE.match(content)
    if not m:
        return ""
    try:
        meta = json.loads("{" + m.group(1) + "}")
        return str(meta.get("taskGoal") or "")
    except (ValueError, AttributeError):
        return ""


def _js_hash6(text: str) -> str:
    """The real ``_mmdVersion``: 32-bit JS string hash over UTF-16 units, base36, 6 chars."""
    h = 0
    data = text.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = ((h << 5) - h + (data[i] | (data[i + 1] << 8))) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    h = abs(h)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        h, r = divmod(h, 36)
        out = digits[r] + out
        if h == 0:
            break
    return out.rjust(6, "0")[:6]


# ─── Token counting (stand-in for the server's tiktoken) ────────────────────────

_CJK_RUNS = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def estimate_text_tokens(text: str) -> int:
    cjk = 0 if text.isascii() else sum(map(len, _CJK_RUNS.findall(text)))
    return max(1, math.ceil(cjk / 1.7 + (len(text) - cjk) / 4))


def _clip_long_strings(value: Any) -> Any:
    # The real counter's JSON replacer: strings > 50,000 chars are cut before counting.
    if isinstance(value, str):
        return value[:50000] + "...[truncated]" if len(value) > 50000 else value
    if isinstance(value, list):
        return [_clip_long_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _clip_long_strings(v) for k, v in value.items()}
    return value


def _visible_text(msg: dict) -> str:
    """``"<role>\\n<content text>"`` (+ OpenAI tool_calls names/arguments), as the server counts."""
    inner = msg.get("message") if isinstance(msg.get("message"), dict) else {}
    role = msg.get("role") if msg.get("role") is not None else inner.get("role", "")
    raw = msg.get("content") if msg.get("content") is not None else inner.get("content", "")
    if raw is None:
        raw = ""
    if isinstance(raw, str):
        content = raw
    elif isinstance(raw, list):
        parts: list[str] = []
        for b in raw:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif isinstance(b, dict) and b.get("type") in ("tool_use", "toolCall"):
                parts.append(str(b.get("name") or b.get("toolName") or ""))
                for key in ("arguments", "input"):
                    if b.get(key):
                        v = b[key]
                        parts.append(v if isinstance(v, str) else _js_json(_clip_long_strings(v)))
            elif isinstance(b, dict) and b.get("type") == "tool_result":
                c = b.get("content")
                if isinstance(c, str):
                    parts.append(c)
                elif c:
                    parts.append(_js_json(_clip_long_strings(c)))
            else:
                parts.append(_js_json(_clip_long_strings(b)))
        content = "\n".join(parts)
    else:
        content = _js_json(_clip_long_strings(raw))
    tool_calls = msg.get("tool_calls")
    if isinstance(tool_calls, list):
        tc_parts = []
        for tc in tool_calls:
            fn = tc.get("function", tc) if isinstance(tc, dict) else {}
            fn = fn if isinstance(fn, dict) else {}
            if fn.get("name"):
                tc_parts.append(str(fn["name"]))
            if fn.get("arguments"):
                a = fn["arguments"]
                tc_parts.append(a if isinstance(a, str) else _js_json(_clip_long_strings(a)))
        if tc_parts:
            content += "\n" + "\n".join(tc_parts)
    return f"{role if role is not None else ''}\n{content}"


def estimate_message_tokens(msg: dict) -> int:
    """Per-message count the fake uses where the real Gateway runs tiktoken o200k_base:
    ceil(CJK/1.7 + other/4) on ``"<role>\\n<content text>"`` plus 4 framing tokens."""
    return estimate_text_tokens(_visible_text(msg)) + 4


def js_slice(text: str, n: int) -> str:
    """JavaScript's ``text.slice(0, n)``, as the real Gateway truncates: ``n`` UTF-16 code
    units, so an emoji (two units) cut in two leaves its high surrogate alone."""
    return text.encode("utf-16-le", "surrogatepass")[:2 * n].decode("utf-16-le", "surrogatepass")


def js_length(text: str) -> int:
    """JavaScript's ``text.length``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_LONE = re.compile("[\ud800-\udfff]")


def js_json(obj: Any) -> bytes:
    """``JSON.stringify`` as UTF-8: a lone surrogate goes out as its ``\\uXXXX`` escape."""
    text = json.dumps(obj, ensure_ascii=False)
    return _LONE.sub(lambda m: "\\u%04x" % ord(m.group()), text).encode("utf-8")
