"""End-to-end, Hermes 0.22: the host's compression pool refuses one compaction, then admits.

The request that compaction was for is cut for itself (``select_context``), and the next
compaction of the transcript takes the cut's bytes (``compaction/request_cut``). In a real 0.22
chat that left two store rows with the same "A → B tokens", and status, report and the
compaction counts counted the saving twice. Here: one row per kind, and every figure counts
the saving and what left once.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from test_side_by_side_cli import CONTEXT, read_turns  # noqa: E402
from tests.conftest import load_plugin  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"
REFUSE_ONCE = textwrap.dedent('''
    # the test's stand-in for a pool saturated at one moment: the first admissions refused (as
    # many as the flag file says: a turn start's compaction, then the one mid-turn), then all
    import os
    import agent.conversation_compression as _cc
    _admit, _flag = _cc._try_admit_compression_job, os.environ["TDO_REFUSE_ONCE"]

    def _once():
        try:
            left = int(open(_flag).read() or 1)
        except (FileNotFoundError, ValueError):
            return _admit()
        if left > 1:
            open(_flag, "w").write(str(left - 1))
        else:
            os.unlink(_flag)
        return False
    _cc._try_admit_compression_job = _once
''')

pytestmark = pytest.mark.skipif(not HERMES_VERSION.startswith("0.22"),
                                reason="the shared compression pool and select_context are 0.22's")


def test_a_cut_the_transcript_takes_is_counted_once(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(REFUSE_ONCE)
    flag = tmp_path / "refuse-once"
    flag.write_text("2")
    supply = harness.FileSupply(tmp_path / "files", tag="pro")
    with FakeLLM() as llm:
        home = harness.make_home(tmp_path, llm.url, context_length=CONTEXT,
                                 env={"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
        conv = harness.Conversation(llm, home, timeout=300,
                                    env={"PYTHONPATH": str(site), "TDO_REFUSE_ONCE": str(flag)})
        failed: list = []
        read_turns(conv, supply, 5, failed)
    assert not flag.exists(), "the host never asked for a compaction"
    read_store_view = sys.modules[load_plugin().__name__ + ".status.model"].read_store_view
    view = read_store_view(home / "tencentdb-offload", recent=100)
    kinds = [r["reason"] for r in reversed(view.compactions.recent)]
    assert "request" in kinds and "adopted" in kinds, kinds    # (measured: request, adopted, threshold)
    counted = [r for r in view.compactions.recent if r["reason"] != "adopted"]
    assert view.compactions.total == len(counted)
    assert view.compactions.tokens_saved == sum(max(0, r["tokens_before"] - r["tokens_after"]) for r in counted)
    for r in view.compactions.recent:
        if r["reason"] == "adopted":
            assert not r["left"] and r["archived"] == 0, r
