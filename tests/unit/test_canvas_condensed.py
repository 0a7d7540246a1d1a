"""The canvas as the model reads it: what the Gateway's Mermaid carries that tells the model
nothing is left out (it is written again at every compaction and read by every request), and
a long task loses its oldest finished steps, never its current focus."""

import random
import re

from tencentdb_offload.context import canvas, mermaid
from tencentdb_offload.context.provenance import Seal

SEAL = Seal(b"m" * 32)
HOOK_SPILL_CHARS = 10_000       # Hermes shows a hook's longer context as a file path


def within_spill_limit(block):
    return len(canvas.sealed(block, SEAL)) <= HOOK_SPILL_CHARS

# the real Gateway's shape (gateway contract §3, L2): metadata line, one node per step,
# indented, numbered by file, a timestamp in each, one edge line per link
META = ('%%{ "taskGoal": "Refactor the API module", "progress": "85", '
        '"createdTime": "2026-12-07T15:58:44.337Z", "updatedTime": "2026-12-07T15:58:57.257Z" }%%')


def node(i, status="done", summary=None):
    summary = summary or "read_file src/m%d.py: it defines parse() and load()" % i
    return ('    003-N%d["read_file: src/m%d.py<br/>status: %s<br/>summary: %s<br/>'
            'Timestamp: 2026-12-07T15:58:%02d.337Z"]' % (i, i, status, summary, i % 60))


def gateway_canvas(n, doing=(), statuses=None):
    lines = [META, "flowchart TD"]
    for i in range(1, n + 1):
        lines.append(node(i, (statuses or {}).get(i, "doing" if i in doing else "done")))
        if i > 1:
            lines.append("    003-N%d --> 003-N%d" % (i - 1, i))
    return "\n".join(lines)


def test_what_tells_the_model_nothing_is_left_out_and_every_step_stays():
    raw = gateway_canvas(15, doing=(15,))
    task = mermaid.read(raw, 100_000)
    assert (task.goal, task.progress, task.dropped) == ("Refactor the API module", "85", 0)
    body = task.body
    assert "Timestamp" not in body and "%%{" not in body and "003-" not in body
    assert not any(line.startswith(" ") for line in body.splitlines())
    for i in range(1, 16):                              # each step, its status and its finding
        assert re.search(r'^N%d\["read_file: src/m%d.py<br/>status: %s<br/>summary: it defines '
                         r'parse\(\) and load\(\)"\]$' % (i, i, "doing" if i == 15 else "done"),
                         body, re.M), i
    assert " --> ".join("N%d" % i for i in range(1, 16)) in body.splitlines()
    block = canvas.format_block("003-refactor-api.mmd", raw)
    assert "Goal: Refactor the API module (progress 85%)" in block
    assert len(block) < 0.7 * len(raw)


def test_a_long_task_loses_its_oldest_finished_steps_never_its_focus():
    statuses = {2: "blocked", 40: "doing"}
    raw = gateway_canvas(120, statuses=statuses)
    block = canvas.format_block("003-refactor-api.mmd", raw)
    assert within_spill_limit(block)
    shown = {int(n) for n in re.findall(r"^N(\d+)\[", block, re.M)}
    assert {2, 40, 120} <= shown and 1 not in shown
    done_shown = sorted(shown - set(statuses))
    # only the oldest finished steps went: every finished step newer than one shown is shown
    assert done_shown == list(range(done_shown[0], 121))
    gone = 120 - len(shown)
    assert "%% {} earlier finished steps not shown".format(gone) in block
    for a, b in re.findall(r"N(\d+) --> N(\d+)", block):    # no edge to a step not shown
        assert {int(a), int(b)} <= shown
    assert "of the canvas not shown" not in block            # nothing cut mid-line


def test_the_newest_step_stays_even_finished_and_too_long_alone():
    huge = '003-N1["a<br/>status: done"]\n003-N2["b ' + "word " * 100_000 + '<br/>status: done"]'
    task = mermaid.read(huge, 1000)
    assert task.dropped == 1 and "\nN2[\"b word" in task.body
    block = canvas.format_block("003-x.mmd", huge)
    assert 'N2["b word' in block and "of the canvas not shown" in block
    assert within_spill_limit(block)


def test_lines_it_does_not_know_stay_as_the_gateway_wrote_them():
    raw = "\n".join([
        "flowchart LR",
        "  subgraph phase1 [Plan]",
        '    A["plan<br/>status: done"]',
        "  end",
        "  A -->|then| B",
        "  B --- C",
        "  C & D --> E",
        '  E["fix<br/>status: doing"] --> F',
        "  classDef done fill:#9f9",
        "  %% a comment",
        "  style A fill:#f9f",
        '  G["later<br/>status: done"]',
    ])
    body = mermaid.read(raw, 100_000).body
    for kept in ("subgraph phase1 [Plan]", "end", "A -->|then| B", "B --- C", "C & D --> E",
                 'E["fix<br/>status: doing"] --> F', "classDef done fill:#9f9", "%% a comment",
                 "style A fill:#f9f"):
        assert kept in body.splitlines(), kept
    short = mermaid.read(raw, 10)           # A is the one older finished step of its own
    assert short.dropped == 1 and 'A["plan' not in short.body and 'G["later' in short.body


def test_ids_that_would_collide_keep_their_file_number():
    raw = '001-N1["a<br/>status: done"]\n001-N1x["b"]\nN1["c"]\n001-N1 --> N1'
    assert mermaid.read(raw, 1000).body.splitlines()[:3] == [
        '001-N1["a<br/>status: done"]', '001-N1x["b"]', 'N1["c"]']


def test_ids_named_by_a_line_it_does_not_rewrite_keep_their_file_number():
    raw = '003-N1["a<br/>status: done"]\n003-N2["b"]\n003-N1 --> 003-N2\nstyle 003-N1 fill:#f9f'
    body = mermaid.read(raw, 1000).body
    assert body.splitlines() == ['003-N1["a<br/>status: done"]', '003-N2["b"]',
                                 "style 003-N1 fill:#f9f", "003-N1 --> 003-N2"]


def test_metadata_that_is_not_json_is_kept_and_a_huge_goal_is_bounded():
    odd = '%%{ init: {"theme": "dark"} }%%\nflowchart TD\n  A --> B'
    task = mermaid.read(odd, 1000)
    assert task.goal == "" and task.body.startswith("%%{ init:")
    huge = '%%{ "taskGoal": "' + "g " * 1_000_000 + '", "progress": "3 steps" }%%\nA --> B'
    block = canvas.format_block("001-x.mmd", huge)
    assert "Goal: g g g" in block and "(progress 3 steps)" in block
    assert within_spill_limit(block)


def test_a_summary_that_does_not_restate_its_step_is_kept_whole():
    for summary, shown in (("read_file src/m1.py: it defines parse()", "it defines parse()"),
                           ("Read src/m1.py and found parse()", "Read src/m1.py and found parse()"),
                           ("read_file src/m1.py", "read_file src/m1.py"),
                           ("read_file src/m1.pyc: other file", "read_file src/m1.pyc: other file")):
        body = mermaid.read(node(1, summary=summary), 10_000).body
        assert body.endswith("summary: %s\"]" % shown), (summary, body)


def test_any_text_reads_without_error_and_within_the_bound_with_every_line_accounted():
    rng = random.Random(55)
    parts = ['A["x<br/>status: done"]', "B", "-->", " ", "\n", '"', "[", "]", "%%{", "}%%",
             "<br/>", "Timestamp:", "status: done", "001-", "subgraph", "end", "&", "|", "é"]
    for _ in range(400):
        raw = "".join(rng.choice(parts) for _ in range(rng.randint(0, 60)))
        task = mermaid.read(raw, rng.randint(0, 400))
        assert isinstance(task.body, str) and task.dropped >= 0
        block = canvas.format_block("001-x.mmd", raw)
        assert block.startswith(canvas.OPEN) and block.endswith(canvas.CLOSE)


def test_the_canvas_the_gateway_injects_reads_as_the_one_fetched():
    raw = gateway_canvas(6, doing=(6,))
    framed = ("<current_task_context>\n" + canvas.GATEWAY_PREAMBLE + "\n**任务目标:** Refactor the "
              "API module\n**任务文件:** 003-refactor-api.mmd\n```mermaid\n" + raw + "\n```\n"
              '标记为 "doing" 的节点是近期焦点，"done" 的已完成。\n</current_task_context>')
    msg = {"role": "user", "_mmdContextMessage": "active", "content": framed}
    assert canvas.gateway_block(msg) == canvas.format_block("003-refactor-api.mmd", raw)
    no_meta = framed.replace(META + "\n", "")        # the goal from its framing then
    assert "Goal: Refactor the API module\n" in canvas.gateway_block(dict(msg, content=no_meta))
