"""Small adapters used by the engine's own tests: a correct one (the float32
reference), and deliberately broken ones. Importable by 'module:attr' spec so the
isolation worker and written reproducers can rebuild them."""

import os
import signal
import time

import torch

from difftest import Capability, KernelAdapter
from difftest.oracles.reference import reference

# Every opt-in feature (what Capability() claimed before its defaults became the basics):
# the engine's own test kernels serve them all.
ALL_FEATURES = dict(
    equal_head_dims=False,
    gqa=True,
    causal=True,
    aligns=("top_left", "bottom_right"),
    window=True,
    varlen=True,
    empty_seqs=True,
    pad_tail=True,
    sinks=True,
)


def full_capability(**kw) -> Capability:
    """A Capability that opts in to every feature, then ``kw``."""
    return Capability(**{**ALL_FEATURES, **kw})


SMALL = Capability(
    dtypes=("float32", "float16"), head_dims_qk=(8, 16), max_seqlen=48, max_heads=4, max_batch=2, **ALL_FEATURES
)


class RefKernel(KernelAdapter):
    """The float32 reference as a kernel: passes every gate."""

    name = "test-ref32"
    spec = "tests.kernels_for_tests:RefKernel"
    capability = SMALL

    def corrupt(self, inputs, out):
        return out

    def forward(self, inputs, out=None):
        return reference(inputs, "float32"), None

    def backward(self, inputs, fwd, ctx, out=None):
        dt = inputs.q.dtype
        res = fwd.clone()
        for n in ("o", "dq", "dk", "dv"):
            setattr(res, n, getattr(res, n).to(dt))
        return self.corrupt(inputs, res)


class WrongDkForLongGqa(RefKernel):
    """dK wrong only when seqlen_k > 32 and the GQA group > 1 (shrinks to sk=33, group 2)."""

    name = "test-dk-long-gqa"
    spec = "tests.kernels_for_tests:WrongDkForLongGqa"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.max_seqlen_k > 32 and p.group > 1:
            out.dk = out.dk * 1.05
        return out


class CrashOnLongQ(RefKernel):
    """Kills its own process (like a segfault) when seqlen_q > 20."""

    name = "test-crash"
    spec = "tests.kernels_for_tests:CrashOnLongQ"

    def corrupt(self, inputs, out):
        if inputs.problem.max_seqlen_q > 20:
            os.kill(os.getpid(), signal.SIGKILL)
        return out


class HangOnGqa(RefKernel):
    """Never returns when heads_q != heads_kv."""

    name = "test-hang"
    spec = "tests.kernels_for_tests:HangOnGqa"

    def corrupt(self, inputs, out):
        if inputs.problem.group > 1:
            time.sleep(3600)
        return out


class RaisesOnCausal(RefKernel):
    name = "test-raises"
    spec = "tests.kernels_for_tests:RaisesOnCausal"

    def corrupt(self, inputs, out):
        if inputs.problem.causal:
            raise RuntimeError("illegal memory access (simulated)")
        return out


class PoisonAware(RefKernel):
    """Writes into the given buffers but leaves the last head of dK unwritten."""

    name = "test-unwritten"
    spec = "tests.kernels_for_tests:PoisonAware"
    capability = Capability(
        dtypes=("float32",), head_dims_qk=(8, 16), max_seqlen=48, max_heads=4, max_batch=2, poison=True, **ALL_FEATURES
    )
    skip_last_head = True

    def corrupt(self, inputs, out):
        return out

    def run(self, inputs, out=None):
        res = RefKernel.run(self, inputs)
        if out is None:
            return res
        for n, t in res.items():
            dst = out.get(n)
            if n == "dk" and self.skip_last_head:
                dst[:, :-1] = t[:, :-1]
            else:
                dst.copy_(t)
        return out


class PoisonAwareCorrect(PoisonAware):
    name = "test-written"
    spec = "tests.kernels_for_tests:PoisonAwareCorrect"
    skip_last_head = False


class Flaky(RefKernel):
    """Claims determinism but adds run-to-run noise to dQ (an atomics-order bug)."""

    name = "test-nondeterministic"
    spec = "tests.kernels_for_tests:Flaky"
    capability = Capability(
        dtypes=("float32",),
        head_dims_qk=(8, 16),
        max_seqlen=48,
        max_heads=4,
        max_batch=2,
        deterministic=True,
        **ALL_FEATURES,
    )

    def corrupt(self, inputs, out):
        out.dq = out.dq + torch.randn_like(out.dq) * 1e-7 * out.dq.abs()
        return out


class RacingDq(Flaky):
    """Claims determinism; every third call in its process returns dQ 1.5x too large (a race that
    corrupts one run in three): a fresh process's first case passes, its next one fails."""

    name = "test-racing-dq"
    spec = "tests.kernels_for_tests:RacingDq"
    calls = 0

    def corrupt(self, inputs, out):
        RacingDq.calls += 1
        if RacingDq.calls % 3 == 0:
            out.dq = out.dq * 1.5
        return out


class WrongOnRerun(RefKernel):
    """Claims no determinism; right on its first call in a process, then every other call
    returns dQ with one NaN (a buffer overrun whose victim depends on placement)."""

    name = "test-wrong-on-rerun"
    spec = "tests.kernels_for_tests:WrongOnRerun"
    calls = 0

    def corrupt(self, inputs, out):
        WrongOnRerun.calls += 1
        if WrongOnRerun.calls % 2 == 0:
            out.dq = out.dq.clone()
            out.dq.view(-1)[0] = float("nan")
        return out


class CorruptsItsProcess(RefKernel):
    """dQ wrong where the head dims differ, and in every call after such a call, whatever its
    Problem: a kernel writing out of bounds corrupts the memory of the cases after it (cuDNN
    9.19 on the H100, 2026-12-07). Right in a fresh process until it meets unequal head dims."""

    name = "test-corrupts-its-process"
    spec = "tests.kernels_for_tests:CorruptsItsProcess"
    capability = Capability(
        dtypes=("float32",), head_dims_qk=(8, 16), max_seqlen=24, max_heads=2, max_batch=1, equal_head_dims=False
    )
    corrupted = False  # this process's state: set by the first call with unequal head dims

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.head_dim_qk != p.head_dim_v:
            CorruptsItsProcess.corrupted = True
        if CorruptsItsProcess.corrupted:
            out.dq = out.dq * 1.5
        return out


class DialectError(RuntimeError):
    """Stands for CuTe DSL's CUDADialectError: one exception class for every CUDA runtime error."""


class TwoCudaErrors(RefKernel):
    """Two device faults behind one exception class, told apart by the CUDA error its message
    names: an illegal address at head dim 8, an invalid launch where a key sequence is empty
    (FA4 4.0.0b25 on the H100)."""

    name = "test-two-cuda-errors"
    spec = "tests.kernels_for_tests:TwoCudaErrors"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.head_dim_qk == 8:
            raise DialectError("error: cudaErrorIllegalAddress (error code: 700)")
        if p.varlen and 0 in p.seqlen_k:
            raise DialectError("error: CUDA launch failed: cudaErrorInvalidValue")
        return out


class AcceleratorError(RuntimeError):
    """Stands for torch's sticky CUDA error type."""


class MLIRError(RuntimeError):
    """Stands for a CuTe DSL build error."""


class TwoKindsOfError(RefKernel):
    """Two different kernel errors: a sticky-CUDA-like error for heads_q >= 3, a build
    error for head_dim 16 (with fewer heads). A shrink must stay with the first kind."""

    name = "test-two-errors"
    spec = "tests.kernels_for_tests:TwoKindsOfError"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.heads_q >= 3:
            raise AcceleratorError("CUDA error: an illegal memory access was encountered")
        if p.head_dim_qk == 16:
            raise MLIRError("Operation creation failed")
        return out


class InfAtLargestDq(RefKernel):
    """Stores a value of the truth's sign (an infinity by default) at dQ's largest element
    and is otherwise correct: what a correct fp16 kernel stores when its rounding carries a
    true value within its error budget of 65504 over the threshold, and a wrong result
    anywhere else."""

    name = "test-inf-at-largest-dq"
    spec = "tests.kernels_for_tests:InfAtLargestDq"
    fill = float("inf")

    def corrupt(self, inputs, out):
        flat = out.dq.view(-1)
        i = int(flat.float().abs().argmax())
        sign = 1.0 if float(flat[i]) >= 0 else -1.0
        flat[i] = self.fill if self.fill != self.fill else sign * self.fill
        return out


class NanAtLargestDq(InfAtLargestDq):
    """A NaN at dQ's largest element (never what a correct kernel stores where the truth
    and the flash-style yardstick are finite)."""

    name = "test-nan-at-largest-dq"
    spec = "tests.kernels_for_tests:NanAtLargestDq"
    fill = float("nan")


class SaturatedLargestDq(InfAtLargestDq):
    """Clamps dQ's largest element to the largest finite fp16 value (saturating store)."""

    name = "test-saturated-largest-dq"
    spec = "tests.kernels_for_tests:SaturatedLargestDq"
    fill = 65504.0


class EnvSwitchedDk(RefKernel):
    """Correct unless the environment variable ``DIFFTEST_TEST_PLANTED_BUG`` is "dk" when it
    runs: then dK is 5% off, and dV too (a bug switched on by ``monkeypatch.setenv``; dV
    because a one-key problem, Hypothesis's first draw, has dK exactly 0)."""

    name = "test-env-switched-dk"
    spec = "tests.kernels_for_tests:EnvSwitchedDk"
    ENV = "DIFFTEST_TEST_PLANTED_BUG"

    def corrupt(self, inputs, out):
        if os.environ.get(self.ENV) == "dk":
            out.dk = out.dk * 1.05
            out.dv = out.dv * 1.05
        return out


def run_problems_in_child(code: str, problems: dict, cuda: bool, **env) -> dict:
    """Run ``code`` (a script taking the device and the problems' JSON as arguments and printing
    ``RESULT<json>``) in a child process: compiled on CUDA, else with TRITON_INTERPRET=1 from the
    start, so a Triton package it imports is interpreted there and nothing in this process is.
    Returns the parsed result; skips the test where the child says the kernel is unavailable."""
    import json
    import subprocess
    import sys

    import pytest

    env = {**os.environ, "OMP_NUM_THREADS": "2", **env}
    if not cuda:
        env["TRITON_INTERPRET"] = "1"
    probs = {n: p.to_dict() for n, p in problems.items()}
    r = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, "cuda" if cuda else "cpu", json.dumps(probs)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stderr[-3000:]
    out = json.loads(line[-1][len("RESULT") :])
    if out["unavailable"]:
        pytest.skip(out["unavailable"])
    return out
