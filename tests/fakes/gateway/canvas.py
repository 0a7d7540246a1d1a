"""Canvas (MMD) injection into compacted transcripts: the active task and the history."""

from __future__ import annotations

import math

from .common import _ACTIVE_INTRO, _ACTIVE_OUTRO, _HISTORY_INTRO, _js_hash6, _mmd_number, _task_goal
from .messages import _is_mmd, _role
from .stages import _Session


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


class _CanvasInjection:
    """History and active-canvas injection (a FakeGateway base)."""

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
