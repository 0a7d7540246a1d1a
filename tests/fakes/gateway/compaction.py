"""Compaction as the Gateway does it (contract §4): fast path, mild, aggressive, emergency."""

from __future__ import annotations

import copy
import heapq
import math
import time
from typing import Any

from .messages import (
    _blocks, _is_assistant_with_tool_use, _is_mmd, _is_only_tool_use_assistant,
    _is_system_reminder, _is_tool_result, _is_tool_use_block, _last_user_index,
    _replace_with_summary, _role, _set_text_content, _strip_tool_use_blocks, _text_content,
    _tool_result_id, _tool_use_ids,
)
from .common import (
    AGGRESSIVE_RATIO, EMERGENCY_RATIO, MILD_RATIO, MILD_SCAN_RATIO, MILD_SCORE_FLOOR, MIN_KEEP,
    TRUNCATE_CHARS, TRUNCATE_NOTICE, _iso_now, _js_round, estimate_message_tokens, js_length,
    js_slice,
)
from .validate import validate_compact
from .stages import _Session


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
        n = js_length(_text_content(m))
        if n > TRUNCATE_CHARS:
            heap.append((-n, i))
    heapq.heapify(heap)
    rounds = 0
    while rounds < len(msgs) and freed < excess and heap:
        rounds += 1
        _n, best = heapq.heappop(heap)
        m = msgs[best]
        before = _text_content(m)
        _set_text_content(m, js_slice(before, TRUNCATE_CHARS) + TRUNCATE_NOTICE)
        new = estimate_message_tokens(m)
        freed += (tokens[best] - new) * scale
        tokens[best] = new
        if _text_content(m) == before:
            break    # already cut and still the largest: the Gateway repeats this no-op
        n = js_length(_text_content(m))
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


class _CompactRoute:
    """``POST /v2/offload/compact`` (a FakeGateway base: uses its lock, sessions, envelopes)."""

    # -- /v2/offload/compact ---------------------------------------------------
    def _compact(self, body: Any, rid: str):
        issues = validate_compact(body)
        if issues:
            return self._zod_error(issues, rid)
        request = copy.deepcopy(body)
        self._compact_work(body)
        with self._state_lock:
            sess = self._session(body["session_id"], create=True)
            data = self._run_compaction(sess, body)
            if self.tamper is not None:        # a lying Gateway: well-formed, not faithful
                data["messages"] = self.tamper(data["messages"])
            self._compacts.append((request, copy.deepcopy(data)))
        return self._ok(data, rid)

    def _compact_work(self, body: dict) -> None:
        """The time the real Gateway spends on a compaction of this size (``slow_compact``),
        after the test's gate opens (``hold_compacts``)."""
        if self.compact_gate is not None:
            self.compact_gate.wait(60)
        per_100k = self.compact_seconds_per_100k
        if per_100k <= 0:
            return
        seconds = per_100k * max(0, body.get("total_tokens") or 0) / 100_000
        with self._state_lock:
            self.compact_delays.append(seconds)
        time.sleep(seconds)

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
