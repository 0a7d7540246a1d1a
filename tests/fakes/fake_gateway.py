"""A faithful fake of the TencentDB Agent Memory Gateway "offload V2" API, for tests.

Stdlib only. Mirrors the shared gateway-contract.md research notes (measured on the real
Gateway v2.0.1-beta.2), including its bugs, because the plugin must survive them:

* routes ``POST /v2/offload/{ingest,compact,query-mmd}`` (trailing slash tolerated),
  ``GET /health``; everything else 404 ``{"error": "Not found: <METHOD> <path>"}``;
* auth (Bearer always required, ``x-tdai-service-id`` required, optional API key),
  router envelopes vs. legacy error shapes, gzip/deflate bodies, a decompressed-body
  limit that answers with a connection *reset*;
* zod-like validation (400 with a JSON-serialised issues array as ``message``);
* deterministic, synchronous stand-ins for the LLM stages (L1 summaries, L1.5 task
  canvases, L2 canvas nodes) with the real boundary/string-comparison rule;
* compaction (§4) step by step: overhead, fast-path replay (incl. the OpenAI dangling
  ``tool_calls`` gap), mild / aggressive / emergency (incl. MMD messages put back at
  index 0, before the system message), history and active canvas injection;
* faults: ``refuse``, ``hang``, ``5xx``, ``409``, ``reset``, ``garbage``, ``wrong_shape``;
  ``latency_s`` delays every answer (a slow but healthy Gateway).

Usage::

    with FakeGateway(api_key="k") as gw:
        client = MyClient(gw.url, api_key="k")
        gw.set_fault("5xx", paths=("/v2/offload/compact",))

Manual run: ``python3 tests/fakes/fake_gateway.py [--port N] [--api-key K]``.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import heapq
import json
import math
import re
import secrets
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import traceback
import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

__all__ = ["FakeGateway", "Recorded", "estimate_message_tokens", "FAULT_KINDS"]

# ─── Constants (gateway defaults, contract §4) ──────────────────────────────────

INGEST, COMPACT, QUERY_MMD = "/v2/offload/ingest", "/v2/offload/compact", "/v2/offload/query-mmd"
FAULT_KINDS = frozenset({"refuse", "hang", "5xx", "409", "reset", "garbage", "wrong_shape"})

MILD_RATIO, AGGRESSIVE_RATIO, EMERGENCY_RATIO = 0.5, 0.85, 0.95
MILD_SCAN_RATIO, MILD_SCORE_FLOOR = 0.7, 4
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


# ─── Message model (ports of the Gateway's helpers; OpenAI, Anthropic, pi-ai) ───

def _role(m: dict) -> Any:
    r = m.get("role")
    if r is None and isinstance(m.get("message"), dict):
        r = m["message"].get("role")
    return r if r is not None else m.get("type")


def _blocks(m: dict) -> Any:
    """``msg.type === "message" ? msg.message.content : msg.content``."""
    if m.get("type") == "message" and isinstance(m.get("message"), dict):
        return m["message"].get("content")
    return m.get("content")


def _is_mmd(m: dict) -> bool:
    return bool(m.get("_mmdContextMessage")) or bool(m.get("_mmdInjection"))


def _tool_result_id(m: dict) -> str | None:
    if m.get("tool_call_id"):
        return m["tool_call_id"]
    if m.get("tool_use_id"):
        return m["tool_use_id"]
    if m.get("type") == "message" and isinstance(m.get("message"), dict) and m["message"].get("id"):
        return m["message"]["id"]
    if m.get("role") == "user" and isinstance(m.get("content"), list):
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id"):
                return b["tool_use_id"]
    return None


def _is_tool_result(m: dict) -> bool:
    if m.get("role") == "tool" or m.get("type") == "tool_result":
        return True
    inner = m["message"].get("role") if isinstance(m.get("message"), dict) else None
    if (inner if inner is not None else m.get("type")) in ("toolResult", "tool_result"):
        return True
    if m.get("role") == "user" and isinstance(m.get("content"), list):
        return any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
    return False


def _is_tool_use_block(b: Any) -> bool:
    return isinstance(b, dict) and b.get("type") in ("tool_use", "toolCall")


def _is_assistant_with_tool_use(m: dict) -> bool:
    if _role_no_type(m) != "assistant":
        return False
    if isinstance(m.get("tool_calls"), list) and m["tool_calls"]:
        return True
    content = _blocks(m)
    return isinstance(content, list) and any(_is_tool_use_block(b) for b in content)


def _is_only_tool_use_assistant(m: dict) -> bool:
    # OpenAI assistants (string content + tool_calls) never qualify: the real fast-path gap.
    if _role_no_type(m) != "assistant":
        return False
    content = _blocks(m)
    return isinstance(content, list) and bool(content) and all(_is_tool_use_block(b) for b in content)


def _role_no_type(m: dict) -> Any:
    r = m.get("role")
    if r is None and isinstance(m.get("message"), dict):
        r = m["message"].get("role")
    return r


def _tool_use_ids(m: dict) -> list[str]:
    ids = []
    if isinstance(m.get("tool_calls"), list):
        ids += [tc["id"] for tc in m["tool_calls"] if isinstance(tc, dict) and tc.get("id")]
    content = _blocks(m)
    if isinstance(content, list):
        ids += [b["id"] for b in content if _is_tool_use_block(b) and b.get("id")]
    return ids


def _strip_tool_use_blocks(m: dict, ids: set) -> None:
    """Remove content-block tool calls with these ids (never OpenAI ``tool_calls``: real gap)."""
    content = _blocks(m)
    if isinstance(content, list):
        content[:] = [b for b in content if not (_is_tool_use_block(b) and b.get("id") in ids)]


def _text_content(m: dict) -> str:
    c = m.get("content")
    if c is None and isinstance(m.get("message"), dict):
        c = m["message"].get("content")
    if c is None:
        c = ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        out = []
        for b in c:
            if isinstance(b, str):
                out.append(b)
            elif isinstance(b, dict) and b.get("type") == "text":
                out.append(b.get("text") or "")
            elif isinstance(b, dict) and b.get("type") == "tool_result":
                v = b.get("content")
                out.append(v if isinstance(v, str) else _js_json(v if v is not None else ""))
            elif isinstance(b, dict) and b.get("type") == "tool_use":
                inp = b.get("input")
                inp = inp if isinstance(inp, str) else _js_json(inp if inp is not None else {})
                out.append(f"{b.get('name') or ''}:{inp}")
            elif isinstance(b, dict) and b.get("text") is not None:
                out.append(str(b["text"]))
            else:
                out.append(_js_json(b if b is not None else ""))
        return "".join(out)
    return _js_json(c)


def _set_text_content(m: dict, text: str) -> None:
    if m.get("type") == "message" and isinstance(m.get("message"), dict):
        m["message"]["content"] = text
    elif m.get("role") == "user" and isinstance(m.get("content"), list):
        for b in m["content"]:  # Anthropic: first tool_result block, in place
            if isinstance(b, dict) and b.get("type") == "tool_result":
                b["content"] = text
                return
        m["content"] = text
    else:
        m["content"] = text


def _is_system_reminder(m: dict) -> bool:
    c = _blocks(m) if m.get("content") is None else m.get("content")
    if isinstance(c, str):
        return c.lstrip().startswith("<system-reminder>")
    if isinstance(c, list):
        for b in c:
            if isinstance(b, str) and b.lstrip().startswith("<system-reminder>"):
                return True
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) \
                    and b["text"].lstrip().startswith("<system-reminder>"):
                return True
    return False


def _last_user_index(msgs: list) -> int:
    """Start of the protected tail. Like the real one, any non-MMD role:user counts
    (so an Anthropic tool_result message can be the "last user message")."""
    for i in range(len(msgs) - 1, -1, -1):
        if _role(msgs[i]) == "user" and not _is_mmd(msgs[i]):
            return i
    return -1


def _summary_text(entry: dict) -> str:
    parts = [f"[Offloaded Tool Result | node: {entry.get('node_id') or 'N/A'}]",
             f"Summary: {entry.get('summary')}"]
    if entry.get("result_ref"):
        parts.append(_REF_LINE.format(ref=entry["result_ref"]))
    return "\n".join(parts)


def _replace_with_summary(m: dict, entry: dict) -> None:
    text = _summary_text(entry)
    if m.get("type") == "message" and isinstance(m.get("message"), dict):
        inner = m["message"]
        inner["content"] = [{"type": "text", "text": text}] if isinstance(inner.get("content"), list) else text
    elif m.get("role") == "user" and isinstance(m.get("content"), list):
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                b["content"] = text
                break
    elif isinstance(m.get("content"), list):
        m["content"] = [{"type": "text", "text": text}]
    else:
        m["content"] = text
    m["_offloaded"] = True


# ─── Compaction stages (contract §4) ────────────────────────────────────────────

def _fast_path(msgs: list, entries: dict, confirmed: list, deleted: list) -> tuple[int, int]:
    """Replay earlier decisions. Returns (replaced, deleted)."""
    confirmed_set, deleted_set = set(confirmed), set(deleted)
    if not confirmed_set and not deleted_set:
        return 0, 0
    to_delete: set[int] = set()
    replaced = 0
    for i, m in enumerate(msgs):
        tid = _tool_result_id(m)
        if tid and tid in deleted_set:
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                rids = [b["tool_use_id"] for b in m["content"]
                        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id")]
                if len(rids) > 1:  # Anthropic multi-block: drop only the deleted blocks
                    if all(r in deleted_set for r in rids):
                        to_delete.add(i)
                    else:
                        m["content"] = [b for b in m["content"] if not (
                            isinstance(b, dict) and b.get("type") == "tool_result"
                            and b.get("tool_use_id") in deleted_set)]
                    continue
            to_delete.add(i)
            continue
        if tid and tid in confirmed_set and _is_tool_result(m) and not m.get("_offloaded"):
            if tid in entries:
                _replace_with_summary(m, entries[tid])
                replaced += 1
        if not tid and _is_only_tool_use_assistant(m):
            ids = _tool_use_ids(m)
            if ids and all(x in deleted_set for x in ids):
                to_delete.add(i)
        if not tid and _is_assistant_with_tool_use(m) and not _is_only_tool_use_assistant(m):
            _strip_tool_use_blocks(m, deleted_set)
    removed = len(to_delete)
    msgs[:] = [m for i, m in enumerate(msgs) if i not in to_delete]

    # Orphan cleanup (content blocks and single results only; OpenAI tool_calls stay).
    use_ids: set = set()
    result_ids: set = set()
    for m in msgs:
        use_ids.update(_tool_use_ids(m))
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            result_ids.update(b["tool_use_id"] for b in m["content"] if isinstance(b, dict)
                              and b.get("type") == "tool_result" and b.get("tool_use_id"))
        tid = _tool_result_id(m)
        if tid:
            result_ids.add(tid)
    for m in msgs:
        if _is_assistant_with_tool_use(m):
            content = _blocks(m)
            if isinstance(content, list):
                content[:] = [b for b in content
                              if not (_is_tool_use_block(b) and b.get("id") and b["id"] not in result_ids)]
    kept = []
    for m in msgs:
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            m["content"] = [b for b in m["content"] if not (
                isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id")
                and b["tool_use_id"] not in use_ids)]
            if not m["content"]:
                removed += 1
                continue
        else:
            tid = _tool_result_id(m)
            if tid and tid not in use_ids and _is_tool_result(m):
                removed += 1
                continue
        kept.append(m)
    final = []
    for m in kept:
        content = _blocks(m)
        if _role(m) == "assistant" and isinstance(content, list) and not content:
            removed += 1
            continue
        final.append(m)
    msgs[:] = final
    return replaced, removed


def _mild(msgs: list, entries: dict) -> list[str]:
    """Replace tool results (first 70 %, score ≥ 4) by their L1 summary. Returns the ids."""
    scan_end = math.floor(len(msgs) * MILD_SCAN_RATIO)
    candidates = []
    for i in range(scan_end):
        m = msgs[i]
        if m.get("_offloaded") or _is_mmd(m):
            continue
        tid = _tool_result_id(m)
        if not tid or not _is_tool_result(m) or tid not in entries:
            continue
        candidates.append((m, entries[tid], tid))
    candidates.sort(key=lambda c: -(c[1].get("score") or 0))  # stable, like JS sort
    confirmed = []
    for m, entry, tid in candidates:
        if (entry.get("score") or 0) < MILD_SCORE_FLOOR:
            break
        if len(entry.get("summary") or "") + 50 >= len(_text_content(m)):
            continue  # a summary would not be smaller
        _replace_with_summary(m, entry)
        confirmed.append(tid)
    return confirmed


def _truncate_largest(msgs: list, tokens: list, excess: float, scale: float, skip_mmd: bool) -> float:
    """Phase 1 of aggressive/emergency: cut the largest tool results > 2000 chars
    (tail included) until `excess` client tokens are freed. Returns freed client tokens.

    The Gateway rescans for the largest each round; a heap gives the same picks (ties go to
    the lowest index) in O(n log n), so tests and benchmarks can send 10,000 messages."""
    freed = 0.0
    heap = []
    for i, m in enumerate(msgs):
        if (skip_mmd and _is_mmd(m)) or not _is_tool_result(m):
            continue
        n = len(_text_content(m))
        if n > TRUNCATE_CHARS:
            heap.append((-n, i))
    heapq.heapify(heap)
    rounds = 0
    while rounds < len(msgs) and freed < excess and heap:
        rounds += 1
        _n, best = heapq.heappop(heap)
        m = msgs[best]
        before = _text_content(m)
        _set_text_content(m, before[:TRUNCATE_CHARS] + TRUNCATE_NOTICE)
        new = estimate_message_tokens(m)
        freed += (tokens[best] - new) * scale
        tokens[best] = new
        if _text_content(m) == before:
            break    # already cut and still the largest: the Gateway repeats this no-op
        n = len(_text_content(m))
        if n > TRUNCATE_CHARS:
            heapq.heappush(heap, (-n, best))
    return freed


def _pick_head_deletions(msgs: list, tokens: list, protected: int, need: float) -> set:
    """Delete from the head: tool results first, then anything else; never system, MMD,
    <system-reminder>, the protected tail, nor below MIN_KEEP non-MMD messages."""
    chosen: set = set()
    freed = 0.0
    non_mmd = sum(1 for m in msgs if not _is_mmd(m))

    def deletable(i: int) -> bool:
        m = msgs[i]
        return not (_is_mmd(m) or _is_system_reminder(m) or _role(m) == "system")

    for only_results in (True, False):
        if freed >= need:
            break
        for i in range(protected):
            if freed >= need:
                break
            if i in chosen or not deletable(i) or (only_results and not _is_tool_result(msgs[i])):
                continue
            if non_mmd - len(chosen) - 1 < MIN_KEEP:   # chosen holds non-MMD indices only
                break
            chosen.add(i)
            freed += tokens[i]
    return chosen


def _ensure_pair_integrity(msgs: list, chosen: set) -> None:
    use_to_assistant: dict = {}
    result_to_idx: dict = {}
    for i, m in enumerate(msgs):
        for x in _tool_use_ids(m):
            use_to_assistant[x] = i
        tid = _tool_result_id(m)
        if tid:
            result_to_idx[tid] = i
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id"):
                    result_to_idx[b["tool_use_id"]] = i
    changed = True
    while changed:
        changed = False
        for use_id, r_idx in result_to_idx.items():
            a_idx = use_to_assistant.get(use_id)
            if a_idx is None:
                continue
            if r_idx in chosen and a_idx not in chosen:
                all_gone = all(result_to_idx.get(x) is not None and result_to_idx[x] in chosen
                               for x in _tool_use_ids(msgs[a_idx]))
                if all_gone:
                    chosen.add(a_idx)
                    changed = True
            if a_idx in chosen and r_idx not in chosen:
                chosen.add(r_idx)
                changed = True


def _drop_orphaned_assistants(msgs: list, chosen: set) -> None:
    """An assistant whose calls all lost their results goes too; a partial one loses
    the dangling content blocks (OpenAI tool_calls are left dangling: real gap)."""
    gone = {t for t in (_tool_result_id(msgs[i]) for i in chosen) if t}
    for j, m in enumerate(msgs):
        if j in chosen or not _is_assistant_with_tool_use(m):
            continue
        ids = _tool_use_ids(m)
        dangling = [x for x in ids if x in gone]
        if not dangling:
            continue
        if len(dangling) == len(ids):
            chosen.add(j)
        else:
            _strip_tool_use_blocks(m, set(dangling))


def _execute_deletions(msgs: list, tokens: list, chosen: set) -> tuple[list[str], float]:
    ids: list[str] = []
    freed = 0.0
    for idx in sorted(chosen, reverse=True):
        tid = _tool_result_id(msgs[idx])
        if tid:
            ids.append(tid)
        freed += tokens[idx]
        del msgs[idx]
        del tokens[idx]
    return ids, freed


def _shrink(msgs: list, tokens: list, target: int, client_total: float, skip_mmd: bool):
    """Shared aggressive/emergency body: truncate, then delete from the head.
    Returns (deleted count, deleted tool-result ids, remaining client tokens)."""
    token_sum = sum(tokens)
    if token_sum <= 0 and msgs:
        tokens[:] = [estimate_message_tokens(m) for m in msgs]
        token_sum = sum(tokens)
    current = client_total if client_total and client_total > 0 else token_sum
    if current <= target:
        return 0, [], current
    scale = current / token_sum if token_sum > 0 else 1
    excess = current - target
    last_user = _last_user_index(msgs)
    protected = last_user if last_user >= 0 else len(msgs)
    freed = _truncate_largest(msgs, tokens, excess, scale, skip_mmd)
    if freed >= excess:
        return 0, [], _js_round(current - freed)
    need = (excess - freed) / scale if token_sum > 0 else excess - freed
    chosen = _pick_head_deletions(msgs, tokens, protected, need)
    _ensure_pair_integrity(msgs, chosen)
    _drop_orphaned_assistants(msgs, chosen)
    count = len(chosen)
    ids, freed_local = _execute_deletions(msgs, tokens, chosen)
    return count, ids, _js_round(current - freed - freed_local * scale)


def _emergency(msgs: list, tokens: list, target: int, client_remaining: float):
    """Emergency: lift MMD messages out, shrink, put them back at INDEX 0 (before the
    system message: the real Gateway's bug), in reverse order, also on early exits."""
    lifted = []
    for i in range(len(msgs) - 1, -1, -1):
        if _is_mmd(msgs[i]):
            lifted.insert(0, (msgs.pop(i), tokens.pop(i)))
    if len(msgs) <= 2:
        result = (0, [], client_remaining)
    else:
        result = _shrink(msgs, tokens, target, client_remaining, skip_mmd=False)
    for m, t in lifted:
        msgs.insert(0, m)
        tokens.insert(0, t)
    return result


# ─── Canvas (MMD) injection ─────────────────────────────────────────────────────

def _canvas_text(tag: str, intro: str, outro: str | None, filename: str, content: str) -> str:
    goal = _task_goal(content)
    lines = [f"<{tag}>", intro, f"**任务目标:** {goal}" if goal else "", f"**任务文件:** {filename}",
             "```mermaid", content, "```", outro or "", f"</{tag}>"]
    return "\n".join(line for line in lines if line != "")


def active_canvas_text(filename: str, content: str) -> str:
    return _canvas_text("current_task_context", _ACTIVE_INTRO, _ACTIVE_OUTRO, filename, content)


def history_canvas_text(filename: str, content: str) -> str:
    return _canvas_text("history_task_context", _HISTORY_INTRO, None, filename, content)


def _has_block(m: dict, types: tuple) -> bool:
    c = m.get("content")
    return isinstance(c, list) and any(isinstance(b, dict) and b.get("type") in types for b in c)


def _adjust_for_tool_pair(msgs: list, idx: int) -> int:
    """Never insert between an assistant tool call and its result."""
    if idx <= 0 or idx >= len(msgs):
        return idx
    at = msgs[idx]
    role = _role(at)
    if role in ("tool", "toolResult", "tool_result") or (role == "user" and _has_block(at, ("tool_result", "toolResult"))):
        i = idx - 1
        while i >= 0:
            r = _role(msgs[i])
            if r == "assistant":
                return i
            if not (r in ("tool", "toolResult", "tool_result")
                    or (r == "user" and _has_block(msgs[i], ("tool_result", "toolResult")))):
                break
            i -= 1
    prev = msgs[idx - 1]
    if _role(prev) == "assistant" and _has_block(prev, ("tool_use", "toolUse")):
        return idx - 1
    return idx


def _active_insertion_point(msgs: list) -> int:
    if len(msgs) <= 2:
        return _adjust_for_tool_pair(msgs, min(1, len(msgs)))
    latest = -1
    for i in range(len(msgs) - 1, -1, -1):
        if _role(msgs[i]) == "user" and not _is_mmd(msgs[i]):
            latest = i
            break
    if latest >= 0:
        idx = latest if latest == len(msgs) - 1 else latest + 1
    else:  # no user message: before the trailing tool loop, at most 30 from the tail
        loop_start = len(msgs)
        for i in range(len(msgs) - 1, -1, -1):
            if _is_mmd(msgs[i]):
                continue
            if _role(msgs[i]) in ("toolResult", "tool", "assistant"):
                loop_start = i
            else:
                break
        idx = max(loop_start, max(1, len(msgs) - 30))
    idx = _adjust_for_tool_pair(msgs, idx)
    if idx == 0 and msgs and _role(msgs[0]) == "system":
        idx = 1
    return idx


def _history_insertion_point(msgs: list) -> int:
    for i, m in enumerate(msgs):
        if m.get("_mmdContextMessage") == "active":
            return i
    return _active_insertion_point(msgs)


def _remove_active(msgs: list) -> None:
    msgs[:] = [m for m in msgs if m.get("_mmdContextMessage") != "active"]


# ─── Request validation (zod-like issues) ───────────────────────────────────────

_MISSING = object()


def _type_name(v: Any) -> str:
    if v is _MISSING:
        return "undefined"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_integral(v: Any) -> bool:
    # zod .int() runs on JS numbers, so 100.0 is an integer there, 1.5 is not.
    return _is_number(v) and (isinstance(v, int) or float(v).is_integer())


def _bad_type(issues: list, path: list, expected: str, value: Any) -> None:
    received = _type_name(value)
    msg = "Required" if received == "undefined" else f"Expected {expected}, received {received}"
    issues.append({"code": "invalid_type", "expected": expected, "received": received,
                   "path": path, "message": msg})


def _check_session_id(body: dict, issues: list) -> None:
    v = body.get("session_id", _MISSING)
    if not isinstance(v, str):
        _bad_type(issues, ["session_id"], "string", v)
        return
    if len(v) < 1:
        issues.append({"code": "too_small", "minimum": 1, "type": "string", "inclusive": True,
                       "exact": False, "path": ["session_id"],
                       "message": "String must contain at least 1 character(s)"})
    if len(v) > 500:
        issues.append({"code": "too_big", "maximum": 500, "type": "string", "inclusive": True,
                       "exact": False, "path": ["session_id"],
                       "message": "sessionId must not exceed 500 characters"})
    if not _SESSION_ID_RE.fullmatch(v):
        issues.append({"code": "invalid_string", "validation": "regex", "path": ["session_id"],
                       "message": "Must only contain alphanumeric, underscore, hyphen, dot, or colon characters"})


def _check_number(issues: list, path: list, v: Any, *, integer: bool = False,
                  lo: float | None = None, hi: float | None = None) -> None:
    if not _is_number(v):
        _bad_type(issues, path, "number", v)
        return
    if integer and not _is_integral(v):
        issues.append({"code": "invalid_type", "expected": "integer", "received": "float",
                       "path": path, "message": "Expected integer, received float"})
    if lo is not None and v < lo:
        issues.append({"code": "too_small", "minimum": lo, "type": "number", "inclusive": True,
                       "exact": False, "path": path,
                       "message": f"Number must be greater than or equal to {lo}"})
    if hi is not None and v > hi:
        issues.append({"code": "too_big", "maximum": hi, "type": "number", "inclusive": True,
                       "exact": False, "path": path,
                       "message": f"Number must be less than or equal to {hi}"})


def validate_ingest(body: Any) -> list:
    if not isinstance(body, dict):
        issues: list = []
        _bad_type(issues, [], "object", body)
        return issues
    issues = []
    _check_session_id(body, issues)
    pairs = body.get("tool_pairs", _MISSING)
    if pairs is not _MISSING and not isinstance(pairs, list):
        _bad_type(issues, ["tool_pairs"], "array", pairs)
    for i, p in enumerate(pairs if isinstance(pairs, list) else []):
        base = ["tool_pairs", i]
        if not isinstance(p, dict):
            _bad_type(issues, base, "object", p)
            continue
        for key in ("tool_name", "tool_call_id", "timestamp"):
            if not isinstance(p.get(key, _MISSING), str):
                _bad_type(issues, base + [key], "string", p.get(key, _MISSING))
        for key in ("params", "result"):  # z.unknown(), but the key must be present (observed)
            if key not in p:
                _bad_type(issues, base + [key], "unknown", _MISSING)
        if "error" in p and not isinstance(p["error"], str):
            _bad_type(issues, base + ["error"], "string", p["error"])
        if "duration_ms" in p and not _is_number(p["duration_ms"]):
            _bad_type(issues, base + ["duration_ms"], "number", p["duration_ms"])
    prompt = body.get("prompt", _MISSING)
    if prompt is not _MISSING:
        if not isinstance(prompt, str):
            _bad_type(issues, ["prompt"], "string", prompt)
        elif not prompt.strip():
            issues.append({"code": "too_small", "minimum": 1, "type": "string", "inclusive": True,
                           "exact": False, "path": ["prompt"],
                           "message": "prompt must not be empty or whitespace-only"})
    recent = body.get("recent_messages", _MISSING)
    if recent is not _MISSING:
        if not isinstance(recent, list):
            _bad_type(issues, ["recent_messages"], "array", recent)
        else:
            for i, r in enumerate(recent):
                base = ["recent_messages", i]
                if not isinstance(r, dict):
                    _bad_type(issues, base, "object", r)
                    continue
                if r.get("role") not in ("user", "assistant"):
                    issues.append({"code": "invalid_enum_value", "options": ["user", "assistant"],
                                   "received": r.get("role"), "path": base + ["role"],
                                   "message": "Invalid enum value. Expected 'user' | 'assistant'"})
                if not isinstance(r.get("content", _MISSING), str):
                    _bad_type(issues, base + ["content"], "string", r.get("content", _MISSING))
    if not issues:
        has_pairs = isinstance(pairs, list) and len(pairs) > 0
        has_prompt = isinstance(prompt, str) and bool(prompt.strip())
        if not (has_pairs or has_prompt):
            issues.append({"code": "custom", "path": [],
                           "message": "Either tool_pairs must be non-empty or prompt must be provided"})
    return issues


def validate_compact(body: Any) -> list:
    issues: list = []
    if not isinstance(body, dict):
        _bad_type(issues, [], "object", body)
        return issues
    _check_session_id(body, issues)
    msgs = body.get("messages", _MISSING)
    if not isinstance(msgs, list):
        _bad_type(issues, ["messages"], "array", msgs)
    else:
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                _bad_type(issues, ["messages", i], "object", m)
            elif not (isinstance(m.get("role"), str) and m["role"]):
                issues.append({"code": "custom", "path": ["messages", i],
                               "message": "Each message must have a non-empty 'role' field"})
    _check_number(issues, ["ratio"], body.get("ratio", _MISSING), lo=0, hi=2)
    _check_number(issues, ["context_window"], body.get("context_window", _MISSING), integer=True, lo=1)
    _check_number(issues, ["total_tokens"], body.get("total_tokens", _MISSING), integer=True, lo=0)
    mt = body.get("message_tokens", _MISSING)
    if mt is not _MISSING:
        if not isinstance(mt, list):
            _bad_type(issues, ["message_tokens"], "array", mt)
        else:
            for i, v in enumerate(mt):
                if not _is_number(v):
                    _bad_type(issues, ["message_tokens", i], "number", v)
    return issues


def validate_query_mmd(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    issues: list = []
    _check_session_id(body, issues)
    limit = body.get("limit", _MISSING)
    if limit is not _MISSING:
        _check_number(issues, ["limit"], limit, integer=True, lo=1)
    return not issues


# ─── Per-session state (in-memory mirror of the on-disk files) ──────────────────

class _Session:
    def __init__(self, name: str, root: Path):
        self.name = name                       # sanitised id = storage dir name
        self.dir = root / "offload" / name
        self.entries: list[dict] = []          # entries.jsonl (node_id stays null there)
        self.known_ids: set = set()            # tool_call_ids of entries (L1 dedup)
        self.node_map: dict[str, str] = {}     # node-mapping.jsonl
        self.boundaries: list[dict] = []
        self.active: str | None = None
        self.last_l15: str | None = None
        self.mmds: dict[str, str] = {}         # filename -> content
        self.goals: dict[str, str] = {}        # filename -> taskGoal
        self.nodes: dict[str, list] = {}       # filename -> [(node_id, entry)]
        self.confirmed: list[str] = []         # compact-state.json
        self.deleted: list[str] = []
        self.last_compacted: str | None = None
        self.pairs: list[dict] = []            # observation only: accepted pairs as received
        self.prompts: list[str] = []           # observation only: accepted prompt-only ingests

    # -- disk ------------------------------------------------------------------
    def write(self, rel: str, text: str, append: bool = False) -> None:
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)

    def save_state(self) -> None:
        self.write("state.json", _js_json({"activeMmdFile": self.active, "boundaries": self.boundaries,
                                           "lastL15CreatedAt": self.last_l15}))

    def save_compact_state(self) -> None:
        self.write("compact-state.json", _js_json({
            "confirmedOffloadIds": self.confirmed, "deletedOffloadIds": self.deleted,
            "lastCompactedAt": self.last_compacted}))

    def load(self) -> None:
        """Rebuild from files so a new FakeGateway on the same data_dir sees old data."""
        def lines(rel: str) -> list:
            p = self.dir / rel
            if not p.exists():
                return []
            out = []
            for line in p.read_text(encoding="utf-8").splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
            return out

        self.entries = lines("entries.jsonl")
        for m in lines("node-mapping.jsonl"):
            self.node_map[m.get("tool_call_id")] = m.get("node_id")
        for rel, apply in (("state.json", self._apply_state), ("compact-state.json", self._apply_cstate)):
            p = self.dir / rel
            if p.exists():
                try:
                    apply(json.loads(p.read_text(encoding="utf-8")))
                except ValueError:
                    pass
        mdir = self.dir / "mmds"
        if mdir.is_dir():
            for p in sorted(mdir.glob("*.mmd")):
                self.mmds[p.name] = p.read_text(encoding="utf-8")
                self.goals[p.name] = _task_goal(self.mmds[p.name])
        by_id = {e.get("tool_call_id"): e for e in self.entries}
        for tcid, nid in self.node_map.items():
            fname = next((f for f in sorted(self.mmds) if f.split("-")[0] == str(nid).split("-")[0]), None)
            if fname and tcid in by_id:
                self.nodes.setdefault(fname, []).append((nid, by_id[tcid]))

    def _apply_state(self, s: dict) -> None:
        self.active = s.get("activeMmdFile")
        self.boundaries = list(s.get("boundaries") or [])
        self.last_l15 = s.get("lastL15CreatedAt")

    def _apply_cstate(self, s: dict) -> None:
        self.confirmed = list(s.get("confirmedOffloadIds") or [])
        self.deleted = list(s.get("deletedOffloadIds") or [])
        self.last_compacted = s.get("lastCompactedAt")

    # -- views -----------------------------------------------------------------
    def merged_entries(self) -> list[dict]:
        """Entries with node ids from node-mapping merged in (what compaction reads)."""
        out = []
        for e in self.entries:
            e = dict(e)
            if not e.get("node_id") and e.get("tool_call_id") in self.node_map:
                e["node_id"] = self.node_map[e["tool_call_id"]]
            out.append(e)
        return out

    def set_mmd(self, filename: str, content: str) -> None:
        self.mmds[filename] = content
        self.write(f"mmds/{filename}", content)

    def next_mmd_number(self) -> int:
        return max((_mmd_number(f) for f in self.mmds), default=0) + 1


# ─── HTTP plumbing ──────────────────────────────────────────────────────────────

@dataclass
class _Fault:
    kind: str
    every: int
    paths: frozenset | None
    status: int
    hang_seconds: float


def _norm_path(path: str) -> str:
    return path[:-1] if path.endswith("/") and len(path) > 1 else path


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # lets clear_fault()/start() re-bind the same port at once
    request_queue_size = 128  # the default 5 drops SYNs under parallel clients (1 s retransmit)

    def __init__(self, addr: tuple, gateway: "FakeGateway"):
        self.gateway = gateway
        super().__init__(addr, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), which can stall on a reverse DNS lookup.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, (OSError, ValueError)):  # client hang-ups are normal here
            traceback.print_exc()


class _Reset(Exception):
    """Raised inside a handler to drop the connection with a TCP reset."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive with Content-Length
    server_version = "FakeTDAIGateway/0.1"
    server: _Server

    def log_message(self, format, *args) -> None:  # noqa: A002 - quiet test output
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without NODELAY, Nagle + delayed ACK
        # add ~40 ms to every keep-alive exchange (the real Gateway has no such stall)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.gateway._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.gateway._track(self.connection, False)

    def do_GET(self) -> None:
        self.server.gateway._serve(self)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    # -- helpers used by FakeGateway._serve -----------------------------------
    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                total += size
                if total > _HARD_BODY_CAP:
                    raise _Reset()
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = 0
        if n > _HARD_BODY_CAP:
            raise _Reset()
        return self.rfile.read(n) if n > 0 else b""

    def reply(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def drop(self, reset: bool) -> None:
        """Close without a reply; with reset=True the peer sees ECONNRESET (SO_LINGER 0)."""
        self.close_connection = True
        try:
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.connection.close()  # real close happens once rfile/wfile close in finish()
        except OSError:
            pass


def _decode_body(raw: bytes, encoding: str, limit: int) -> tuple[bytes | None, str | None]:
    """Returns (bytes, None) or (None, 'encoding'|'corrupt'|'too_large')."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return (raw, None) if len(raw) <= limit else (None, "too_large")
    if enc in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif enc == "deflate":
        wbits = zlib.MAX_WBITS if raw[:1] == b"\x78" else -zlib.MAX_WBITS  # zlib or raw deflate
    else:
        return None, "encoding"
    try:
        d = zlib.decompressobj(wbits)
        out = d.decompress(raw, limit + 1)  # bounded: a bomb cannot blow up the fake
        if len(out) > limit or d.unconsumed_tail:
            return None, "too_large"
        out += d.flush()
        return (out, None) if len(out) <= limit else (None, "too_large")
    except zlib.error:
        return None, "corrupt"


def _parse_json(data: bytes) -> tuple[Any, bool]:
    if not data.strip():
        return {}, True
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant), True
    except (ValueError, UnicodeDecodeError):
        return None, False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN/Infinity


# ─── The fake ───────────────────────────────────────────────────────────────────

class FakeGateway:
    """In-process fake Gateway. See the module docstring; all state is thread-safe."""

    def __init__(self, api_key: str | None = None, body_limit: int = 1_048_576,
                 host: str = "127.0.0.1", port: int = 0, data_dir: str | None = None):
        self.api_key = api_key
        self.body_limit = body_limit
        self.host = host
        self.port = port
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fake-gateway-")  # removed at GC/exit
            self.data_dir = Path(self._tmp.name)
        else:
            self._tmp = None
            self.data_dir = Path(data_dir)
        self.requests: list[Recorded] = []
        self._compacts: list[tuple[dict, dict]] = []
        self._sessions: dict[str, _Session] = {}
        self._state_lock = threading.RLock()   # sessions, files, requests, compacts
        self._ctl_lock = threading.RLock()     # start/stop/bind
        self._fault_lock = threading.Lock()
        self._fault: _Fault | None = None
        self._fault_count = 0
        self._release = threading.Event()      # set → hung requests return
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._running = False
        self._conns: set = set()
        self._started_at = time.monotonic()
        self.latency_s = 0.0                   # added before every answer

    # -- lifecycle -------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "FakeGateway":
        with self._ctl_lock:
            if not self._running:
                self._running = True
                self._bind()
                if self._fault and self._fault.kind == "refuse":
                    self._unbind()
        return self

    def stop(self) -> None:
        with self._ctl_lock:
            self._running = False
            self._release_hangs()
            self._unbind()

    def __enter__(self) -> "FakeGateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _bind(self) -> None:
        if self._server is not None:
            return
        srv = _Server((self.host, self.port), self)
        self.port = srv.server_address[1]  # keep the port across refuse/restart
        self._server = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.005},
                                        name=f"fake-gateway-{self.port}", daemon=True)
        self._thread.start()

    def _unbind(self) -> None:
        srv, self._server = self._server, None
        if srv is not None:
            srv.shutdown()
            srv.server_close()
            if self._thread is not None:
                self._thread.join(timeout=2)
        # Pooled keep-alive connections must not keep being served by the old handlers.
        with self._state_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._state_lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _release_hangs(self) -> None:
        old, self._release = self._release, threading.Event()
        old.set()

    # -- faults ----------------------------------------------------------------
    def set_fault(self, kind: str | None, *, every: int = 1, paths: tuple | None = None,
                  status: int = 503, hang_seconds: float = 30.0) -> None:
        """Install a fault (None clears). Any change releases hung requests and
        restarts the `every` counter."""
        if kind is not None and kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if every < 1:
            raise ValueError("every must be >= 1")
        with self._ctl_lock:
            with self._fault_lock:
                self._fault = None if kind is None else _Fault(
                    kind, every, None if paths is None else frozenset(_norm_path(p) for p in paths),
                    status, hang_seconds)
                self._fault_count = 0
            self._release_hangs()
            if kind == "refuse":
                self._unbind()
            elif self._running:
                self._bind()

    def clear_fault(self) -> None:
        self.set_fault(None)

    def reset_counters(self) -> None:
        with self._fault_lock:
            self._fault_count = 0

    def _take_fault(self, path: str) -> _Fault | None:
        with self._fault_lock:
            f = self._fault
            if f is None or f.kind == "refuse":
                return None
            if f.paths is not None and _norm_path(path) not in f.paths:
                return None
            self._fault_count += 1
            return f if self._fault_count % f.every == 0 else None

    # -- observation -----------------------------------------------------------
    def _session(self, session_id: str, create: bool) -> _Session | None:
        name = sanitise_session_id(session_id)
        with self._state_lock:
            sess = self._sessions.get(name)
            if sess is None:
                sess = _Session(name, self.data_dir)
                if sess.dir.is_dir():
                    sess.load()
                elif not create:
                    return None
                self._sessions[name] = sess
            return sess

    def ingested_pairs(self, session_id: str) -> list[dict]:
        with self._state_lock:
            sess = self._session(session_id, create=False)
            return copy.deepcopy(sess.pairs) if sess else []

    def prompts(self, session_id: str) -> list[str]:
        """Prompt-only ingests accepted (also the internal ones L1.5 skips)."""
        with self._state_lock:
            sess = self._session(session_id, create=False)
            return list(sess.prompts) if sess else []

    def compact_calls(self, session_id: str | None = None) -> list[tuple[dict, dict]]:
        with self._state_lock:
            return [copy.deepcopy(c) for c in self._compacts
                    if session_id is None or c[0].get("session_id") == session_id]

    def entries(self, session_id: str) -> list[dict]:
        with self._state_lock:
            sess = self._session(session_id, create=False)
            return sess.merged_entries() if sess else []

    def session_dir(self, session_id: str) -> Path:
        return self.data_dir / "offload" / sanitise_session_id(session_id)

    def set_canvas(self, session_id: str, content: str, filename: str = "001-task.mmd") -> None:
        """Force an MMD and make it active (L2 later rewrites it from its own nodes)."""
        with self._state_lock:
            sess = self._session(session_id, create=True)
            sess.set_mmd(filename, content)
            sess.goals[filename] = _task_goal(content)
            sess.nodes[filename] = []
            sess.active = filename
            sess.save_state()

    # -- request handling ------------------------------------------------------
    def _serve(self, h: _Handler) -> None:
        if not self._running or self._server is None:
            h.drop(reset=False)  # refused/stopped: a pooled connection just dies
            return
        try:
            raw = h.read_body()
        except _Reset:
            h.drop(reset=True)
            return
        path = urlsplit(h.path).path
        headers = {k.lower(): v for k, v in h.headers.items()}
        rec = Recorded(h.command, path, headers, self._body_for_record(raw, headers))
        with self._state_lock:
            self.requests.append(rec)
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        fault = self._take_fault(path)
        if fault is not None:
            self._apply_fault(h, rec, fault, path)
            return
        try:
            outcome = self._route(h.command, path, headers, raw)
        except Exception:  # a bug in the fake: say so loudly, answer like the legacy handler
            traceback.print_exc()
            outcome = (500, self._legacy(500, "Internal server error"))
        if outcome is None:  # body over the limit: the real Gateway destroys the socket
            h.drop(reset=True)
            return
        status, obj = outcome
        rec.status = status
        h.reply(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"))

    def _body_for_record(self, raw: bytes, headers: dict) -> Any:
        data, err = _decode_body(raw, headers.get("content-encoding", ""), _HARD_BODY_CAP)
        if err or not data or not data.strip():
            return None
        obj, ok = _parse_json(data)
        return obj if ok else None

    def _apply_fault(self, h: _Handler, rec: Recorded, f: _Fault, path: str) -> None:
        rid = _request_id()
        if f.kind == "hang":
            self._release.wait(f.hang_seconds)
            h.drop(reset=False)
            return
        if f.kind == "reset":
            h.drop(reset=True)
            return
        if f.kind == "garbage":
            rec.status = 200
            h.reply(200, b"<html>oops", "text/html")
            return
        if f.kind == "5xx":
            status, obj = f.status, {"code": f.status, "message": "Storage unavailable", "request_id": rid}
        elif f.kind == "409":
            status, obj = 409, {"code": 409, "message": "Concurrent write conflict, please retry",
                                "request_id": rid}
        else:  # wrong_shape: 200 and code 0, but not the data a client expects
            status = 200
            obj = ({"code": 0, "message": "ok", "request_id": rid, "data": {"messages": "nope"}}
                   if _norm_path(path) == COMPACT else {"code": 0, "data": []})
        rec.status = status
        h.reply(status, json.dumps(obj).encode("utf-8"))

    @staticmethod
    def _legacy(status: int, message: str) -> dict:
        return {"error": message, "code": status, "message": message,
                "trace_id": str(uuid.uuid4()), "retryable": False}

    def _route(self, method: str, path: str, headers: dict, raw: bytes):
        """Returns (status, json object), or None to reset the connection."""
        if path == "/health" and method == "GET":
            return 200, self._health()
        if not path.startswith("/v2/offload/"):
            return 404, {"error": f"Not found: {method} {path}"}
        rid = _request_id()
        denied = self._auth(headers)
        if denied:
            return 401, {"code": 401, "message": denied, "request_id": rid}
        route = _norm_path(path)
        handlers: dict[str, Callable] = {INGEST: self._ingest, COMPACT: self._compact,
                                         QUERY_MMD: self._query_mmd}
        if method != "POST" or route not in handlers:
            return 404, {"error": f"Not found: {method} {path}"}
        data, err = _decode_body(raw, headers.get("content-encoding", ""), self.body_limit)
        if err == "too_large":
            return None
        if err == "encoding":
            return 415, self._legacy(415, f"Unsupported Content-Encoding: {headers.get('content-encoding')}")
        if err == "corrupt":
            return 400, self._legacy(400, "Invalid compressed body")
        body, ok = _parse_json(data)
        if not ok:
            return 400, self._legacy(400, "Invalid JSON body")
        return handlers[route](body, rid)

    def _auth(self, headers: dict) -> str | None:
        auth = headers.get("authorization", "")
        if self.api_key is not None:  # gateway-level key check, constant time like the real one
            if not auth.startswith("Bearer ") or not auth[7:].strip():
                return "Unauthorized: missing Bearer token"
            if not secrets.compare_digest(auth[7:].strip().encode(), self.api_key.encode()):
                return "Unauthorized: invalid token"
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return "Missing or invalid Authorization header. Expected: Bearer {api_key}"
        if not headers.get("x-tdai-service-id", "").strip():
            return "Missing x-tdai-service-id header"
        return None

    def _health(self) -> dict:
        return {"status": "ok", "version": "0.1.0", "uptime": int(time.monotonic() - self._started_at),
                "stores": {"vectorStore": True, "embeddingService": False},
                "services": {"timerScanner": {"scansCompleted": 0, "tasksEnqueued": 0, "scanErrors": 0,
                                              "isLeader": True, "nodeId": "scanner-fake"},
                             "pipelineWorker": {"tasksConsumed": 0, "tasksCompleted": 0, "tasksFailed": 0,
                                                "workerId": "worker-fake", "deadLetterCount": 0},
                             "stateBackend": "connected"}}

    @staticmethod
    def _ok(data: Any, rid: str) -> tuple[int, dict]:
        return 200, {"code": 0, "message": "ok", "request_id": rid, "data": data}

    @staticmethod
    def _zod_error(issues: list, rid: str) -> tuple[int, dict]:
        return 400, {"code": 400, "message": json.dumps(issues, indent=2, ensure_ascii=False), "request_id": rid}

    # -- /v2/offload/ingest ----------------------------------------------------
    def _ingest(self, body: Any, rid: str):
        issues = validate_ingest(body)
        if issues:
            return self._zod_error(issues, rid)
        sid = body["session_id"]
        pairs = body.get("tool_pairs", [])
        prompt = body.get("prompt")
        trimmed = prompt.strip() if isinstance(prompt, str) else None
        if _is_ignored_session(sid):
            return self._ok({}, rid)
        with self._state_lock:
            sess = self._session(sid, create=True)
            if pairs:
                sess.pairs.extend(copy.deepcopy(pairs))
                context = self._render_context(trimmed, body.get("recent_messages") or [])
                if context:
                    sess.write("recent-context.txt", context)
                self._run_l1(sess, pairs)
                self._run_l2(sess)
            else:
                sess.prompts.append(prompt)
                if not (trimmed.startswith("[Inter-session message]") or trimmed.startswith("Pre-compaction")):
                    self._run_l15(sess, trimmed)
        return self._ok({}, rid)

    @staticmethod
    def _render_context(prompt: str | None, recent: list) -> str:
        parts = []
        if recent:
            parts.append("历史消息，可作为参考：")
            parts += [f"[{'User' if m['role'] == 'user' else 'Assistant'}]: {m['content']}" for m in recent]
        if prompt:
            parts.append(f"\n最新user message：\n[User]: {prompt}")
        return "\n".join(parts)

    def _run_l1(self, sess: _Session, pairs: list) -> None:
        """Deterministic L1: one entry (+ ref file) per new tool_call_id."""
        if len(sess.known_ids) != len(sess.entries):     # entries reloaded from disk
            sess.known_ids = {e["tool_call_id"] for e in sess.entries}
        known = sess.known_ids
        for p in pairs:
            tcid = p["tool_call_id"]
            if tcid in known:
                continue
            known.add(tcid)
            result = p.get("result")
            text = result if isinstance(result, str) else ("" if result is None else _js_json(result))
            if not text and isinstance(p.get("error"), str):
                text = p["error"]
            ref = None
            if len(text) >= REF_MIN_CHARS:
                fname = sanitise_session_id(tcid) + ".md"
                ref = f"offload/{sess.name}/refs/{fname}"
                sess.write(f"refs/{fname}", f"# Tool Result: {p['tool_name']}\n\n**tool_call_id:** {tcid}\n"
                                            f"**Timestamp:** {p['timestamp']}\n\n---\n\n{text}")
            entry = {
                "tool_call_id": tcid,
                "tool_call": f"{p['tool_name']}: {_js_json(p.get('params'))[:80]}",
                "summary": f"{p['tool_name']} result: " + " ".join(text.split())[:120],
                "timestamp": p["timestamp"],
                "score": 8 if len(text) >= 200 else 3,
                "node_id": None,
                "result_ref": ref,
            }
            sess.entries.append(entry)
            sess.write("entries.jsonl", _js_json(entry) + "\n", append=True)

    def _run_l15(self, sess: _Session, prompt: str) -> None:
        """Deterministic L1.5: boundary now; new canvas if none is active or on 'NEW TASK:'."""
        now = _iso_now()
        if sess.active is None or prompt.startswith("NEW TASK:"):
            label = prompt[len("NEW TASK:"):].strip() if prompt.startswith("NEW TASK:") else prompt
            fname = f"{sess.next_mmd_number():03d}-{_slug(label)}.mmd"
            sess.set_mmd(fname, "")
            sess.goals[fname] = label[:80]
            sess.nodes[fname] = []
            sess.active = fname
            sess.last_l15 = now
        sess.boundaries.append({"targetMmd": sess.active, "timestamp": now})
        sess.save_state()

    def _run_l2(self, sess: _Session) -> None:
        """Deterministic L2: attach unmapped entries to the canvas of the latest boundary
        whose timestamp <= the entry's (plain STRING comparison, like the real one)."""
        if not sess.boundaries:
            return          # no boundary yet: no entry can get a node
        touched = []
        for e in sess.entries:
            if e["tool_call_id"] in sess.node_map:
                continue
            best = None
            for b in sess.boundaries:
                if b.get("targetMmd") and b["timestamp"] <= e["timestamp"] and (
                        best is None or b["timestamp"] >= best["timestamp"]):
                    best = b
            if best is None:
                continue  # before the first boundary (or odd format): never gets a node
            mmd = best["targetMmd"]
            nodes = sess.nodes.setdefault(mmd, [])
            nid = f"{mmd.split('-')[0]}-N{len(nodes) + 1}"
            nodes.append((nid, e))
            sess.node_map[e["tool_call_id"]] = nid
            sess.write("node-mapping.jsonl", _js_json({"tool_call_id": e["tool_call_id"], "node_id": nid}) + "\n",
                       append=True)
            if mmd not in touched:
                touched.append(mmd)
        for mmd in touched:
            sess.set_mmd(mmd, self._render_mmd(sess, mmd))

    @staticmethod
    def _render_mmd(sess: _Session, mmd: str) -> str:
        nodes = sess.nodes[mmd]
        goal = json.dumps(sess.goals.get(mmd, "")[:80], ensure_ascii=False)
        lines = [f'%%{{ "taskGoal": {goal}, "progress": "{len(nodes)} steps" }}%%', "flowchart TD"]
        for nid, e in nodes:
            label = f"{e['tool_call']}<br/>status: done<br/>summary: {e['summary'][:60]}"
            label = label.replace('"', "'").replace("\n", " ")  # keep the Mermaid string valid
            lines.append(f'  {nid}["{label}"]')
        lines += [f"  {a[0]} --> {b[0]}" for a, b in zip(nodes, nodes[1:])]
        return "\n".join(lines) + "\n"

    # -- /v2/offload/query-mmd -------------------------------------------------
    def _query_mmd(self, body: Any, rid: str):
        if not validate_query_mmd(body):
            return 400, {"code": 400, "message": "missing or invalid session_id in body", "request_id": rid}
        limit = body.get("limit")
        with self._state_lock:
            sess = self._session(body["session_id"], create=False)
            if sess is None:
                return self._ok({"mmds": [], "currentMmd": None}, rid)

            def item(name: str) -> dict:
                content = sess.mmds.get(name, "")
                return {"filename": name, "content": content,
                        "version": hashlib.md5(content.encode("utf-8")).hexdigest()[:12] if content else ""}

            if limit == 1 and sess.active:
                mmds = [item(sess.active)]
            else:
                names = sorted(sess.mmds)
                mmds = [item(n) for n in (names[:int(limit)] if limit else names)]
            return self._ok({"mmds": mmds, "currentMmd": sess.active}, rid)

    # -- /v2/offload/compact ---------------------------------------------------
    def _compact(self, body: Any, rid: str):
        issues = validate_compact(body)
        if issues:
            return self._zod_error(issues, rid)
        request = copy.deepcopy(body)
        with self._state_lock:
            sess = self._session(body["session_id"], create=True)
            data = self._run_compaction(sess, body)
            self._compacts.append((request, copy.deepcopy(data)))
        return self._ok(data, rid)

    def _run_compaction(self, sess: _Session, body: dict) -> dict:
        msgs: list = body["messages"]  # our own parsed copy: mutate freely
        cw = body["context_window"]
        total = body["total_tokens"]
        given = body.get("message_tokens")
        report = {"resolvedLevel": "fastpath", "originalCount": len(msgs), "compactedCount": 0,
                  "fastPathReplaced": 0, "fastPathDeleted": 0, "mildReplacements": 0,
                  "aggressiveDeleted": 0, "emergencyDeleted": 0, "mmdInjected": 0}
        entries = {e["tool_call_id"]: e for e in sess.merged_entries()}

        # 1. Overhead (system prompt, tool schemas) = client total - per-message counts.
        tokens = [given[i] if given is not None and i < len(given) else estimate_message_tokens(m)
                  for i, m in enumerate(msgs)]
        overhead = max(0, total - sum(tokens))

        # 2. Fast-path replay of earlier decisions.
        report["fastPathReplaced"], report["fastPathDeleted"] = _fast_path(msgs, entries, sess.confirmed, sess.deleted)
        if report["fastPathDeleted"] > 0:
            tokens = [estimate_message_tokens(m) for m in msgs]
            total = sum(tokens) + overhead

        # 3. Level from total / context_window (never from the `ratio` field).
        ratio = total / cw
        level = ("emergency" if ratio >= EMERGENCY_RATIO else "aggressive" if ratio >= AGGRESSIVE_RATIO
                 else "mild" if ratio >= MILD_RATIO else "fastpath")
        report["resolvedLevel"] = level

        # 4. Mild.
        if level != "fastpath":
            ids = _mild(msgs, entries)
            report["mildReplacements"] = len(ids)
            sess.confirmed += ids
            idset = set(ids)
            for i, m in enumerate(msgs):
                if _tool_result_id(m) in idset:
                    new = estimate_message_tokens(m)
                    total += new - tokens[i]
                    tokens[i] = new

        # 5. Aggressive (+ history canvases for what it deleted).
        remaining = total
        if level in ("aggressive", "emergency"):
            target = math.floor(cw * (AGGRESSIVE_RATIO - 0.05))  # same float maths as the real one
            if total > target:
                count, ids, remaining = _shrink(msgs, tokens, target, total, skip_mmd=True)
                report["aggressiveDeleted"] = count
                sess.deleted += ids
                if ids:
                    n = self._inject_history(sess, msgs, ids, entries, math.floor(cw * 0.1 / 4))
                    report["mmdInjected"] += n
                    if n:
                        tokens = [estimate_message_tokens(m) for m in msgs]

        # 6. Emergency.
        if level == "emergency":
            target = math.floor(cw * (AGGRESSIVE_RATIO - 0.10))
            count, ids, remaining = _emergency(msgs, tokens, target, remaining)
            report["emergencyDeleted"] = count
            sess.deleted += ids

        # 7. Active canvas, always last.
        report["mmdInjected"] += self._inject_active(sess, msgs)

        # 8. Persist compact-state.
        report["compactedCount"] = len(msgs)
        sess.last_compacted = _iso_now()
        sess.save_compact_state()
        return {"messages": msgs, "report": report}

    @staticmethod
    def _inject_history(sess: _Session, msgs: list, deleted_ids: list, entries: dict, budget: int) -> int:
        prefixes = {entries[i]["node_id"].split("-")[0] for i in deleted_ids
                    if i in entries and entries[i].get("node_id")}
        if not prefixes:
            return 0
        candidates = [f for f in sorted(sess.mmds) if f.split("-")[0] in prefixes and f != sess.active]
        injected, used = [], 0
        for fname in reversed(candidates):  # newest first within the budget
            content = sess.mmds.get(fname)
            if not content:
                continue
            text = history_canvas_text(fname, content)
            cost = math.ceil(len(text) / 4)
            if used + cost > budget:
                continue
            injected.append({"role": "user", "content": text, "_mmdInjection": True, "_mmdFilename": fname})
            used += cost
        if not injected:
            return 0
        msgs[:] = [m for m in msgs if not m.get("_mmdInjection")]
        at = _history_insertion_point(msgs)
        msgs[at:at] = list(reversed(injected))  # back to chronological order
        return len(injected)

    @staticmethod
    def _inject_active(sess: _Session, msgs: list) -> int:
        fname = sess.active
        if not fname:  # fallback: highest-numbered non-empty canvas
            for cand in sorted(sorted(sess.mmds), key=_mmd_number, reverse=True):
                if sess.mmds[cand].strip():
                    fname = cand
                    break
        content = sess.mmds.get(fname) if fname else None
        if not content:
            _remove_active(msgs)
            return 0
        version = _js_hash6(content)
        existing = next((i for i, m in enumerate(msgs) if m.get("_mmdContextMessage") == "active"), -1)
        if existing >= 0 and msgs[existing].get("_mmdVersion") == version:
            correct = _active_insertion_point([m for m in msgs if m.get("_mmdContextMessage") != "active"])
            if existing != correct:  # same canvas: only move it
                moved = msgs.pop(existing)
                msgs.insert(_active_insertion_point(msgs), moved)
            return 0
        _remove_active(msgs)
        msgs.insert(_active_insertion_point(msgs), {
            "role": "user", "content": active_canvas_text(fname, content),
            "_mmdContextMessage": "active", "_mmdVersion": version, "_mmdFilename": fname})
        return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fake TencentDB Agent Memory Gateway (offload V2)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--body-limit", type=int, default=1_048_576)
    args = ap.parse_args(argv)
    gw = FakeGateway(api_key=args.api_key, body_limit=args.body_limit, host=args.host,
                     port=args.port, data_dir=args.data_dir).start()
    print(f"listening on {gw.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        gw.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
