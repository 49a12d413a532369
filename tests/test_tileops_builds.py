"""The TileOPs worker announces TileLang's builds and the adapter charges them to the
"compile" phase (kernels/tileops.py: ``report_builds`` on the worker side, ``read_reply`` on
the adapter's), so the isolation worker bounds them by compile_timeout_s, not timeout_s, and
the kernel's own call after its build (where GQADenseBwdOp hangs at seq_len 64) stays kernel
time. No TileOPs here: a stand-in ``tilelang.jit`` module with TileLang 0.1.12's two names
(``JITImpl.compile`` calls the module's ``compile``) writes into the same framing."""

import io
import os
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from difftest.execute import timing
from difftest.kernels import tileops


def fake_jit(log):
    jit = types.ModuleType("tilelang.jit")

    def compile(func=None):  # the module-level build, called from JITImpl.compile as in 0.1.12
        log.append("build")
        if func == "bad":
            raise RuntimeError("nvcc failed")
        return "kernel"

    class JITImpl:
        def compile(self, func):
            log.append("lower")
            return jit.compile(func)  # looked up at call time, as TileLang's global is

    jit.compile, jit.JITImpl = compile, JITImpl
    return jit


def frames(stream) -> list:
    stream.seek(0)
    out = []
    while True:
        try:
            out.append(tileops.recv(stream))
        except EOFError:
            return out


def test_the_outermost_build_is_announced_once_even_when_it_fails():
    log, proto = [], io.BytesIO()
    jit = fake_jit(log)
    assert tileops.report_builds(proto, jit)
    assert jit.JITImpl().compile("ok") == "kernel"  # JITImpl.compile -> compile: one build
    assert jit.compile("ok") == "kernel"  # a direct tilelang.compile: one build
    try:
        jit.JITImpl().compile("bad")
    except RuntimeError:
        pass
    assert log == ["lower", "build", "build", "lower", "build"]
    assert frames(proto) == [{"building": True}, {"building": False}] * 3


def test_a_tilelang_without_the_names_is_left_alone():
    jit = types.ModuleType("tilelang.jit")
    jit.compile = lambda f: f
    assert not tileops.report_builds(io.BytesIO(), jit)
    assert jit.compile(1) == 1


def _reply_after_a_build():
    stream = io.BytesIO()
    jit = fake_jit([])
    tileops.report_builds(stream, jit)
    jit.JITImpl().compile("ok")  # what the worker sends while serving a request ...
    tileops.send(stream, {"dq": 1})  # ... then its reply
    stream.seek(0)
    return stream


def test_the_adapter_charges_the_build_to_compile_and_returns_the_reply():
    told = []
    with timing.collect(timing.PhaseTimer(on_compile=told.append)) as t:
        with timing.phase("kernel"):
            assert tileops.read_reply(_reply_after_a_build()) == {"dq": 1}
    assert told == [True, False]  # what the isolation worker tells its parent
    assert "compile" in t.seconds and t._stack == []


def test_a_warm_thread_never_touches_the_process_timer():
    told, got = [], []
    with timing.collect(timing.PhaseTimer(on_compile=told.append)) as t:
        with timing.phase("truth"):
            th = threading.Thread(target=lambda: got.append(tileops.read_reply(_reply_after_a_build())))
            th.start()
            th.join()
            assert t._stack == ["truth"]
    assert got == [{"dq": 1}] and told == []


MIDDLE = r"""
import os, subprocess, sys, time
from difftest.kernels import tileops
child = subprocess.Popen([sys.executable, "-c", "from difftest.kernels import tileops; tileops.die_with_parent(); "
                          "print('armed', flush=True); import time; time.sleep(300)"],
                         env=tileops.worker_env(sys.argv[1]), stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "armed"
print(child.pid, flush=True)
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie not yet reaped is dead
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.slow
def test_the_tileops_worker_dies_with_the_killed_isolation_worker():
    """The isolation worker is SIGKILLed on a timeout; its TileOPs worker must not live on
    (building for nobody, or hung on the GPU). Stand-ins: a 'middle' process starts a child
    with the TileOPs worker's environment and arming; killing the middle kills the child."""
    repo = str(Path(__file__).resolve().parents[1])
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, repo], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": repo}
    )
    try:
        pid = int(middle.stdout.readline())
        assert not _gone(pid)
        middle.kill()
        middle.wait()
        for _ in range(300):  # the kernel delivers the signal at once; allow a loaded machine
            if _gone(pid):
                break
            time.sleep(0.1)
        alive = not _gone(pid)
        if alive:
            os.kill(pid, signal.SIGKILL)
        assert not alive, "the child outlived its killed parent"
    finally:
        middle.kill()


def test_starting_the_tileops_worker_is_set_up_time_not_the_kernel_s(monkeypatch):
    """The TileOPs worker's interpreter start (torch, TileLang, TileOPs imports) happens inside
    the first kernel call: it is charged to "worker_start", which the isolation worker reports
    like a build (timing.UNTIMED), so a loaded host's slow start is not a hang (R9 triaged a
    fresh worker's start past a 5 s timeout as "hang")."""
    seen = []

    class Started:
        def __init__(self, site):
            seen.append(list(timing.current()._stack))

    monkeypatch.setattr(tileops, "Worker", Started)
    monkeypatch.setattr(tileops, "_WORKERS", {})
    told = []
    with timing.collect(timing.PhaseTimer(on_compile=told.append)) as t:
        with timing.phase("kernel"):
            tileops.get_worker()
            tileops.get_worker()  # started once
    assert seen == [["kernel", "worker_start"]] and told == [True, False]
    assert "worker_start" in t.seconds
