"""Adapters that fault the way production kernels do, for the robustness tests: a
segfault, a hang, ``os._exit``, a sticky CUDA-like error, an unbounded allocation.
Each is correct (the float32 reference) until ``seqlen_k > 16``, so a campaign sees
passing cases first and shrinking has an edge to find (seqlen_k 17). Importable by
``module:attr`` spec so the isolation worker rebuilds them.

``SlowRef`` / ``SlowWrongDk`` sleep ``DIFFTEST_TEST_SLEEP`` seconds per call and append
every call (kernel name, Problem) to ``DIFFTEST_TEST_CALLS`` (when set): the kill-and-resume tests
use it to see which cases actually ran in which process. The sleep is only there so that a
test's signal lands mid-campaign: ``DIFFTEST_TEST_SLEEPERS`` (kernel names, comma-separated)
limits it to those kernels, and once the file ``DIFFTEST_TEST_WAKE`` names exists (the test
creates it when its signal has landed) no kernel sleeps any more."""

import ctypes
import os
import resource
import time

import torch

from tests.kernels_for_tests import SMALL, RefKernel

EDGE = 16


def _faulty(problem) -> bool:
    return problem.max_seqlen_k > EDGE


class Segfaults(RefKernel):
    name = "faulty-segfault"
    spec = "tests.faulty_kernels:Segfaults"

    def corrupt(self, inputs, out):
        if _faulty(inputs.problem):
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        return out


class Hangs(RefKernel):
    name = "faulty-hang"
    spec = "tests.faulty_kernels:Hangs"

    def corrupt(self, inputs, out):
        if _faulty(inputs.problem):
            time.sleep(3600)
        return out


class ExitsProcess(RefKernel):
    name = "faulty-exit"
    spec = "tests.faulty_kernels:ExitsProcess"

    def corrupt(self, inputs, out):
        if _faulty(inputs.problem):
            os._exit(3)
        return out


class CudaLikeError(RefKernel):
    name = "faulty-cuda-error"
    spec = "tests.faulty_kernels:CudaLikeError"

    def corrupt(self, inputs, out):
        if _faulty(inputs.problem):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return out


class AllocatesWithoutBound(RefKernel):
    """Allocates 64 MiB blocks until the allocation fails. The test's bound: the address
    space of this process is capped at its current size + 512 MiB while it allocates
    (RLIMIT_AS), and restored after, so the machine never feels it."""

    name = "faulty-alloc"
    spec = "tests.faulty_kernels:AllocatesWithoutBound"
    headroom = 512 * 2**20

    def corrupt(self, inputs, out):
        if not _faulty(inputs.problem):
            return out
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            vsize = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (vsize + self.headroom, hard))
        blocks = []
        try:
            while True:
                blocks.append(torch.ones(16 * 2**20, dtype=torch.float32))  # 64 MiB, touched
        finally:
            blocks.clear()
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _sleep_s(kernel: str) -> float:
    sleepers, wake = os.environ.get("DIFFTEST_TEST_SLEEPERS"), os.environ.get("DIFFTEST_TEST_WAKE")
    if (sleepers and kernel not in sleepers.split(",")) or (wake and os.path.exists(wake)):
        return 0.0
    return float(os.environ.get("DIFFTEST_TEST_SLEEP", "0"))


class SlowRef(RefKernel):
    """Correct; sleeps and records each call (see the module docstring)."""

    name = "slow-ref"
    spec = "tests.faulty_kernels:SlowRef"
    capability = SMALL

    def corrupt(self, inputs, out):
        calls = os.environ.get("DIFFTEST_TEST_CALLS")
        if calls:
            with open(calls, "a") as f:
                f.write(f"{self.name} {inputs.problem.to_json()}\n")
        time.sleep(_sleep_s(self.name))
        return out


class SlowWrongDk(SlowRef):
    """dK 5% off when seqlen_k > 16 (shrinks to seqlen_k 17); sleeps and records calls."""

    name = "slow-wrong-dk"
    spec = "tests.faulty_kernels:SlowWrongDk"

    def corrupt(self, inputs, out):
        out = SlowRef.corrupt(self, inputs, out)
        if _faulty(inputs.problem):
            out.dk = out.dk * 1.05
        return out


class SlowRefToo(SlowRef):
    """SlowRef under another name: a second campaign beside SlowRef's (``--jobs 2``)."""

    name = "slow-ref-too"
    spec = "tests.faulty_kernels:SlowRefToo"


class SlowTwoBugs(SlowRef):
    """Two independent faults, two findings of a hunt: dK 5% off when seqlen_k > 16 (as
    SlowWrongDk) and dQ 5% off with attention sinks; sleeps and records calls."""

    name = "slow-two-bugs"
    spec = "tests.faulty_kernels:SlowTwoBugs"

    def corrupt(self, inputs, out):
        out = SlowRef.corrupt(self, inputs, out)
        if _faulty(inputs.problem):
            out.dk = out.dk * 1.05
        if inputs.problem.sinks:
            out.dq = out.dq * 1.05
        return out
