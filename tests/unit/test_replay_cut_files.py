"""A session file cut short (a full disk, an interrupted copy): ``replay`` said "not JSON, and
line 1 is not a JSON value" for a pretty-printed export whose line 1 is ``{``, and "line 24 is
not a JSON value" for a JSONL whose last line was cut, never that the file ends early. It now
says the file ends inside its JSON; anything else keeps the old reason."""

from __future__ import annotations

import json

import pytest

from test_cli import LOCAL, home, one_line_error, run_cli  # noqa: F401 (fixture)

MESSAGES = [{"role": "user", "content": "read it"}, {"role": "assistant", "content": "x" * 4000}] * 5


@pytest.mark.parametrize("shape", ["one line", "pretty"])
def test_a_cut_json_document(home, tmp_path, shape):
    text = json.dumps({"id": "s1", "messages": MESSAGES}, indent=2 if shape == "pretty" else None)
    path = tmp_path / "export.json"
    path.write_text(text[:len(text) // 2], encoding="utf-8")
    line = one_line_error(run_cli("replay", str(path), home=home, env=LOCAL), "ends inside its JSON")
    assert "line 1 is not" not in line


def test_a_jsonl_whose_last_line_was_cut(home, tmp_path):
    text = "\n".join(json.dumps(m) for m in MESSAGES)
    path = tmp_path / "session.jsonl"
    path.write_text(text[:-1000], encoding="utf-8")
    one_line_error(run_cli("replay", str(path), home=home, env=LOCAL),
                   "last line (10) ends inside its JSON")


def test_other_garbage_keeps_its_reason(home, tmp_path):
    path = tmp_path / "notes.json"
    path.write_text("these are my notes\n{\"role\": \"user\"}\n", encoding="utf-8")
    one_line_error(run_cli("replay", str(path), home=home, env=LOCAL),
                   "not JSON, and line 1 is not a JSON value")
