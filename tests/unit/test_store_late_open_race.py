"""A store that opens late wires the Gateway client and its sender as one step (issue 51
item 14).

The writer thread opens such a store and then builds the client and the sender. It used to
publish the client before the sender existed: a hook in between (``pre_llm_call`` near the
trigger) called ``kick`` on None, and a ``close()`` in between left that sender running. The
writer thread is held here at the exact point where the sender is being built.
"""

import threading

from fakes.gateway import FakeGateway
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.runtime.process import Runtime
from tencentdb_offload.settings.config import load_settings

from helpers import env_for, wait_for

WRITER_THREAD = "tencentdb-offload-store"


class HeldRuntime(Runtime):
    """Pauses the writer thread when it builds the sender, until ``go`` is set."""

    def __init__(self, *args, **kwargs):
        self.building, self.go, self.built = threading.Event(), threading.Event(), []
        super().__init__(*args, **kwargs)

    def new_worker(self, *args, **kwargs):
        if threading.current_thread().name == WRITER_THREAD:
            self.building.set()
            self.go.wait()
        worker = super().new_worker(*args, **kwargs)
        self.built.append(worker)
        return worker


def _late_store(tmp_path, gw):
    env = env_for(tmp_path, gateway_url=gw.url)
    db = tmp_path / "home" / "tencentdb-offload" / "store.db"
    db.mkdir(parents=True)                  # a directory where the file should be
    settings, warnings = load_settings(env)
    rt = HeldRuntime(settings, warnings, env)
    assert rt.store is None and rt.worker is None
    db.rmdir()                              # the user fixes it; the next write opens it
    hooks = HookHandlers(rt)
    hooks.post_tool_call(tool_name="cat", args={}, result="text", session_id="s1",
                         tool_call_id="c1")
    assert rt.building.wait(30)
    return rt, hooks


def test_a_hook_while_the_sender_is_built_finds_both_or_neither(tmp_path):
    with FakeGateway() as gw:
        rt, hooks = _late_store(tmp_path, gw)
        try:
            state = rt.registry.for_session_id("s1")
            state.use_trigger(1_000)
            state.response_measured(900)            # near the trigger: the sender is kicked
            hooks.pre_llm_call(session_id="s1", user_message="go on", conversation_history=[])
            assert rt.client is None or rt.worker is not None
            assert not rt.errors, list(rt.errors)
            rt.go.set()
            assert rt.writer.flush(30), rt.writer.last_flush
            assert rt.client is not None and rt.worker is not None
        finally:
            rt.go.set()
            rt.close()


def test_a_close_while_the_sender_is_built_stops_it(tmp_path):
    with FakeGateway() as gw:
        rt, _hooks = _late_store(tmp_path, gw)
        closer = threading.Thread(target=rt.close)
        closer.start()
        try:
            assert wait_for(lambda: rt.closed, 30)
        finally:
            rt.go.set()
            closer.join(60)
        assert rt.built, "the sender was built"
        sender = rt.built[0]
        assert wait_for(lambda: not sender._thread.is_alive(), 30), "the sender still runs"
