"""Per-session state on disk and the ingest stages (L1, L1.5, L2) and query-mmd."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from .common import (
    REF_MIN_CHARS, _is_ignored_session, _iso_now, _js_json, _mmd_number, _slug, _task_goal,
    sanitise_session_id,
)
from .validate import validate_ingest, validate_query_mmd


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


class _IngestRoutes:
    """``POST /v2/offload/ingest`` and ``query-mmd`` (a FakeGateway base)."""

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
