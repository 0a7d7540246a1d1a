"""The demo report states each fact once: the per-turn table's compaction figures are the
compaction list's (same records, same precision), and "largest context sent" is the largest
figure of the table's "largest sent" column."""

import contextlib
import io
import re

from tencentdb_offload.ops import main

NUMBER = r"([\d,]+)"


def _demo_text(tmp_path, monkeypatch, *argv):
    for name in list(__import__("os").environ):
        if name.startswith(("TENCENTDB_OFFLOAD_", "HERMES_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo"] + list(argv)) == 0
    return out.getvalue()


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def test_table_list_and_summary_agree(tmp_path, monkeypatch):
    text = _demo_text(tmp_path, monkeypatch, "--turns", "24", "--context-length", "64000")
    rows = re.findall(r"^\s*(\d+)\s+\d+\s+\d+\s+%s\s+(?:%s -> %s|-)" % (NUMBER, NUMBER, NUMBER),
                      text, re.M)
    assert len(rows) == 24, text
    listed = {}
    for turn, before, after in re.findall(r"^  turn (\d+) \([^)]*\): [^:]*: %s → %s" % (NUMBER, NUMBER),
                                          text, re.M):
        first = listed.setdefault(int(turn), [_n(before), _n(after)])
        first[1] = _n(after)                      # several in one turn: first before, last after
    tabled = {int(t): [_n(b), _n(a)] for t, _sent, b, a in rows if b}
    assert listed and tabled == listed
    largest = re.search(r"largest context sent[^:]*: %s tokens" % NUMBER, text).group(1)
    assert _n(largest) == max(_n(sent) for _t, sent, _b, _a in rows)


def test_an_invalid_threshold_is_named_at_the_top_and_never_credited(tmp_path, monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith(("TENCENTDB_OFFLOAD_", "HERMES_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TENCENTDB_OFFLOAD_THRESHOLD", "75")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--turns", "3"]) == 0
    lines = out.getvalue().splitlines()
    trigger = next(i for i, line in enumerate(lines) if line.startswith("compaction at"))
    assert "from TENCENTDB_OFFLOAD_THRESHOLD" not in lines[trigger]
    warned = [i for i, line in enumerate(lines)
              if "TENCENTDB_OFFLOAD_THRESHOLD" in line and "invalid" in line and "default" in line]
    assert warned and warned[0] < trigger, lines[:8]


def test_archived_results_are_the_sessions_own(tmp_path, monkeypatch):
    # 40 turns: later compactions remove earlier digests (tool-result-shaped, written by us),
    # which once counted as results "as they arrived": "166 of 160"
    text = _demo_text(tmp_path, monkeypatch)
    got = re.search(r"every tool result as it arrived \(%s of %s\) and %s messages? a compaction removed"
                    % (NUMBER, NUMBER, NUMBER), text)
    assert got, text
    assert _n(got.group(1)) == _n(got.group(2)), got.group(0)
    items = re.search(r"archived: %s items" % NUMBER, text).group(1)
    assert _n(items) == _n(got.group(1)) + _n(got.group(3))
