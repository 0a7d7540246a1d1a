"""``/tencentdb-offload flush`` with no Gateway configured (the default URL, nothing ever
answered): it says nothing was sent because of local mode, even with an empty outbox."""

from __future__ import annotations

from types import SimpleNamespace

from tencentdb_offload.host import command


def test_flush_in_local_mode_never_claims_delivery(monkeypatch):
    unused = SimpleNamespace(looks_unused=True)
    monkeypatch.setattr(command.GatewayView, "of", classmethod(lambda cls, client, settings: unused))
    runtime = SimpleNamespace(worker=object(), client=object(), settings=None,
                              store=SimpleNamespace(outbox=SimpleNamespace(backlog=lambda: 0)),
                              flush=lambda session, timeout: True,
                              flush_writes=lambda timeout: True)
    text = command.flush_text(runtime)
    assert "delivered" not in text
    assert text.startswith("archive writes saved to disk; nothing sent: local mode")
