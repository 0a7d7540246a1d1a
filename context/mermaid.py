"""The Gateway's Mermaid task map, read line by line and written back shorter for the model.

The canvas rides in every request after it is shown and is written again at every compaction,
so what it carries that tells the model nothing is paid for many times: the metadata line (its
goal and progress are shown as one line of their own), a timestamp in every node, the file's
number in front of every node id, one line per edge of a chain of steps, indentation. A long
task's map is cut by dropping its oldest finished steps, counted in a comment: the current
focus (the newest step, every one not "done") is what the model needs, and a cut that kept
the head lost exactly that.

Only lines that parse as a node or a plain edge are rewritten; anything else (a subgraph, a
class, an edge with a label, a shape this reader does not know) stays as the Gateway wrote
it. Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from . import restated

_META_RE = re.compile(r"%%\{(.*)\}%%", re.S)
_TIMESTAMP_RE = re.compile(r"<br\s*/?>\s*Timestamp:[^<\"\]]*", re.I)
_ID = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_NODE_RE = re.compile(r"(%s)\s*([\[({>].*)" % _ID, re.S)
_EDGE_RE = re.compile(r"(%s)\s*-->\s*(%s)" % (_ID, _ID))
_STATUS_RE = re.compile(r"status:\s*([A-Za-z]+)", re.I)
_SUMMARY_RE = re.compile(r"<br\s*/?>\s*summary:\s*", re.I)
_FILE_PREFIX_RE = re.compile(r"(\d+-)")
_KEYWORDS = frozenset(("flowchart", "graph", "subgraph", "classDef", "class", "style", "click",
                       "linkStyle", "direction", "end"))
DROPPED = "%%%% %d earlier finished steps not shown (the newest and the unfinished are)"


@dataclass(frozen=True)
class TaskMap:
    goal: str = ""
    progress: str = ""
    body: str = ""          # the Mermaid text the model reads
    dropped: int = 0        # finished steps cut for length


@dataclass
class _Line:
    text: str
    node: str = ""          # the id it defines ("" for other lines)
    done: bool = False


def read(content: str, max_chars: int) -> TaskMap:
    """``content`` as the model should read it; the oldest finished steps dropped while the
    body is over ``max_chars`` (what is still over after every one is dropped is the caller's
    to cut)."""
    lines = [ln.strip() for ln in content.strip().splitlines()]
    goal, progress = "", ""
    if lines and lines[0].startswith("%%{"):
        meta = _metadata(lines[0])
        if meta is not None:
            goal, progress = flat(meta.get("taskGoal")), flat(meta.get("progress"))
            lines = lines[1:]
    classified = [_classify(_TIMESTAMP_RE.sub("", ln)) for ln in lines if ln]
    prefix = _common_prefix(classified)
    parsed: List[_Line] = []
    edges: List[Tuple[str, str]] = []
    for kind, a, b in classified:
        if kind == "edge":
            edges.append((_short(a, prefix), _short(b, prefix)))
        elif kind == "node":
            name = _short(a, prefix)
            status = _STATUS_RE.search(b)
            parsed.append(_Line(name + _unrepeated(b), name,
                                bool(status) and status.group(1).lower() == "done"))
        else:
            parsed.append(_Line(a))
    body = _render(parsed, edges, set())
    over = len(body) - max_chars
    dropped: set = set()
    newest = next((ln for ln in reversed(parsed) if ln.node), None)
    for ln in parsed:                   # oldest first
        if over <= 0:
            break
        if ln.done and ln is not newest:
            dropped.add(ln.node)
            over -= len(ln.text) + 1
    if dropped:
        body = _render(parsed, edges, dropped)
    return TaskMap(goal, progress, body, len(dropped))


def _classify(line: str) -> Tuple[str, str, str]:
    """("edge", from, to), ("node", id, shape and label) or ("other", the line, "")."""
    edge = _EDGE_RE.fullmatch(line)
    if edge:
        return "edge", edge.group(1), edge.group(2)
    node = _node(line)
    return ("node",) + node if node else ("other", line, "")


def _node(line: str) -> Optional[Tuple[str, str]]:
    """(id, shape and label) of a line that only defines one node, else None."""
    m = _NODE_RE.fullmatch(line)
    if not m or m.group(1) in _KEYWORDS or line.startswith("%%"):
        return None
    outside_quotes = re.sub(r'"[^"]*"', "", m.group(2))
    if any(arrow in outside_quotes for arrow in ("--", "==", "-.", "~~", "&")):
        return None                     # a chain or an edge with its nodes: kept as written
    return m.group(1), m.group(2)


def _render(lines: List[_Line], edges: List[Tuple[str, str]], dropped: set) -> str:
    out = [ln.text for ln in lines if not (ln.node and ln.node in dropped)]
    if dropped:
        at = 1 if out and out[0].startswith(("flowchart", "graph")) else 0
        out.insert(at, DROPPED % len(dropped))
    chains: List[List[str]] = []
    for a, b in edges:
        if a in dropped or b in dropped:
            continue
        if chains and chains[-1][-1] == a:
            chains[-1].append(b)
        else:
            chains.append([a, b])
    out += [" --> ".join(chain) for chain in chains]
    return "\n".join(out)


def _unrepeated(label: str) -> str:
    """A node's label whose summary does not open by restating the step ("read_file: a.py" ...
    "summary: read_file a.py: <what it found>" keeps only what it found)."""
    m = _SUMMARY_RE.search(label)
    if not m:
        return label
    step = label[:m.start()].split("<br", 1)[0].lstrip("[({>\"")
    return label[:m.end()] + restated.beyond(label[m.end():], step)


def _metadata(line: str) -> Optional[Dict[str, object]]:
    if not _META_RE.fullmatch(line):
        return None
    try:
        meta = json.loads(line[2:-2])
    except (ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def flat(value: object, limit: int = 2_000) -> str:
    """One line of a metadata value, bounded before it is split (a goal may be megabytes)."""
    return " ".join(str(value)[:limit].split()) if isinstance(value, (str, int, float)) else ""


def _common_prefix(classified: List[Tuple[str, str, str]]) -> str:
    """The file's number every node id starts with ("003-"), when all of them do and only
    lines this reader rewrites name them."""
    ids = [i for kind, a, b in classified if kind != "other"
           for i in ((a, b) if kind == "edge" else (a,))]
    prefixes = {(_FILE_PREFIX_RE.match(i) or [""])[0] for i in ids}
    if len(prefixes) != 1:
        return ""
    prefix = prefixes.pop()
    # dropping it must not make two ids one, leave one empty, or orphan a reference to one
    shortened = {i[len(prefix):] for i in ids}
    named_elsewhere = re.compile(r"(?<![\w.-])" + re.escape(prefix))
    if "" in shortened or len(shortened) != len(set(ids)) or \
            any(kind == "other" and named_elsewhere.search(a) for kind, a, _ in classified):
        return ""
    return prefix


def _short(node_id: str, prefix: str) -> str:
    return node_id[len(prefix):] if prefix and node_id.startswith(prefix) else node_id
