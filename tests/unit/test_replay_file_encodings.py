"""A message file saved with a byte-order mark (Windows editors; PowerShell's UTF-8 and its
default UTF-16) is JSON all the same: ``replay`` reads it, never "not JSON"."""

from __future__ import annotations

import json

import pytest

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)

MESSAGES = [{"role": "user", "content": "héllo 你好"}, {"role": "assistant", "content": "hi"}] * 3


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
@pytest.mark.parametrize("jsonl", [False, True])
def test_a_file_with_a_byte_order_mark_is_replayed(home, tmp_path, encoding, jsonl):
    path = tmp_path / ("messages.jsonl" if jsonl else "messages.json")
    text = "\n".join(json.dumps(m) for m in MESSAGES) if jsonl else json.dumps(MESSAGES)
    path.write_text(text, encoding=encoding)
    rep = report_of(run_cli("replay", str(path), "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert rep["summary"]["messages_read"] == len(MESSAGES)
    assert rep["source"]["kind"] == ("jsonl" if jsonl else "json")
