"""Runner: one (kernel, Problem) case -> a structured CaseResult.

Skips with the reason when the kernel's capability excludes the Problem or the kernel
is unavailable here; otherwise runs the kernel (optionally in an isolated worker
process) and the references (``oracles.references``: the float64 truth and the
same-dtype yardsticks), applies every gate, and
optionally repeats the call for the determinism gate and checks a second reference
(FA3). A kernel exception, crash or timeout is a case with status "error", never a
crash of the campaign; the exception's type is recorded where it is caught
(``CaseResult.error_type``), so shrinking can follow it without re-reading the text.

Isolated, the case is handed to the worker and the references are computed here while the
kernel runs there: the two processes use both cores of a small machine (the CPU main job),
and the outcome is the same as in sequence (a kernel error still makes the case an error;
a failed reference is reported only when the kernel succeeded, as before).
"""

import dataclasses
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from difftest import oracles
from difftest.errors import InputError, exception_text
from difftest.execute import adapter as registry
from difftest.execute.adapter import KernelAdapter, KernelUnavailable
from difftest.execute.isolation import COMPILE_TIMEOUT_S, release_device_memory, shared_worker
from difftest.execute.timing import phase
from difftest.judge import breakdown, device_memory, triage
from difftest.judge.attribution import attribute
from difftest.judge.determinism import RunTally
from difftest.judge.gates import GateConfig, Verdict, check_outputs, check_second_reference
from difftest.model.inputs import lay_out, make_inputs
from difftest.model.layouts import CONTIGUOUS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem
from difftest.vocab import RATIO_CAP, ErrorOrigin, FailureKind, Gate, Status

if TYPE_CHECKING:  # annotations only
    from difftest.model.inputs import Inputs


@dataclass
class RunConfig:
    gates: GateConfig = field(default_factory=GateConfig)
    device: str | None = None  # None: the kernel's capability.device
    poison: bool = True  # NaN-poison output buffers when the kernel accepts them
    determinism_runs: int | None = None  # None: 2 for kernels that claim determinism, else 1
    second_reference: str | None = None  # registry name of a second reference kernel (e.g. "fa3")
    isolate: bool = False  # run the kernel in a worker process (crash/hang safe)
    timeout_s: float = 600.0  # per kernel call, with isolate (JIT builds excluded: compile_timeout_s)
    compile_timeout_s: float = COMPILE_TIMEOUT_S  # a case's JIT builds in all, with isolate (isolation.BuildTimeout)
    chunk_threshold: int | None = None  # score elements above which the chunked truth is used
    truth: str = "float64"  # the reference of the elementwise standard: float64 or float32 (the budget keeps float64)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["gates"] = self.gates.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        d = dict(d)
        d["gates"] = GateConfig.from_dict(d.get("gates", {}))
        return cls(**d)


@dataclass
class CaseResult:
    kernel: str
    problem: Problem
    status: Status
    reason: str = ""
    verdicts: list = field(default_factory=list)
    seconds: float = 0.0
    kernel_seconds: float = 0.0
    notes: list = field(default_factory=list)
    input_digest: str = ""
    error_type: str = ""  # status "error": the exception's class name where it was caught
    error_origin: str = ""  # status "error": ErrorOrigin.DIFFTEST when a reference of ours failed, else the kernel

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.status == Status.ERROR:
            self.error_origin = triage.error_origin(self)
            self.error_type = triage.plain_error_type(self.error_type)

    @property
    def failed(self) -> bool:
        return self.status.failed

    @property
    def failure_kind(self) -> FailureKind | None:
        if self.status == Status.ERROR:
            return FailureKind.ERROR
        return FailureKind.GATE if self.status == Status.FAILED else None

    @property
    def failed_gates(self) -> list[str]:
        return [v.label for v in self.verdicts if not v.passed]

    @property
    def worst_ratio(self) -> float:
        """Largest budget ratio over outputs (1.0 = at the limit's k=1 point). Kept once
        computed, for as long as the status and the verdict list are the ones it was computed
        from (a verdict's ratio is set when the gate makes it): a campaign reads every
        finished case's ratio after each new case (its progress line), which made the
        search quadratic in the cases (~12 s of a 2,200-case GPU campaign)."""
        key = (self.status, id(self.verdicts), len(self.verdicts))
        cached: tuple[tuple, float] | None = self.__dict__.get("_worst")
        if cached is not None and cached[0] == key:
            return cached[1]
        ratios = [v.numbers.get("ratio", 0.0) for v in self.verdicts if v.gate in (Gate.BUDGET, Gate.SECOND_REFERENCE)]
        r = max(ratios, default=0.0)
        r = RATIO_CAP if self.status == Status.ERROR or not math.isfinite(r) else min(r, RATIO_CAP)
        self.__dict__["_worst"] = (key, r)
        return r

    def ratios(self) -> dict:
        return {v.output: v.numbers["ratio"] for v in self.verdicts if v.gate == Gate.BUDGET}

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "problem": self.problem.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "failed_gates": self.failed_gates,
            "worst_ratio": self.worst_ratio,
            "seconds": round(self.seconds, 4),
            "kernel_seconds": round(self.kernel_seconds, 4),
            "notes": self.notes,
            "input_digest": self.input_digest,
            "triage": str(triage.classify(self)),
            "overflow_limited": triage.overflow_limited(self),
            "verdicts": [v.to_dict() for v in self.verdicts],
            **({"error_type": self.error_type} if self.error_type else {}),
            **({"error_origin": self.error_origin} if self.error_origin else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "CaseResult":
        return cls(
            kernel=d["kernel"],
            problem=Problem.from_dict(d["problem"]),
            status=d["status"],
            reason=d.get("reason", ""),
            verdicts=[Verdict(**v) for v in d.get("verdicts", [])],
            seconds=d.get("seconds", 0.0),
            kernel_seconds=d.get("kernel_seconds", 0.0),
            notes=d.get("notes", []),
            input_digest=d.get("input_digest", ""),
            error_type=d.get("error_type", ""),
            error_origin=d.get("error_origin", ""),
        )

    def render(self, verbose: bool = False) -> str:
        lines = [f"[{self.status.upper()}] {self.kernel} on {self.problem.short()}"]
        if self.failed:
            lines.append(f"  triage: {triage.classify(self)}")
        if self.reason:
            lines.append(f"  reason: {self.reason.strip()}")
        for v in self.verdicts:
            if verbose or not v.passed:
                lines.append(f"  {v.message}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


TRUTHS = ("float64", "float32")  # what a team's elementwise standard may be stated against


def error_type(e: BaseException) -> str:
    """The class name of the exception ``e`` stands for: an exception raised on behalf of
    another (a worker process's error re-raised here) names it in ``e.error_type``."""
    return getattr(e, "error_type", None) or type(e).__name__


def call_kernel(
    kernel: KernelAdapter, problem: Problem, inputs: "Inputs", device: str, poison: bool, runs: int, config: "RunConfig"
) -> list:
    """The kernel's runs in this process (run_case sends isolated cases to the worker itself)."""
    results = []
    with phase("inputs"):
        laid_out = lay_out(inputs)  # the kernel sees the Problem's memory layout; references do not
    for i in range(runs):
        with phase("inputs"):
            out = Outputs.poisoned(problem, inputs.q.dtype, device) if poison else None
        with phase("kernel" if i == 0 else "determinism"):
            results.append(kernel.run(laid_out, out))
            if inputs.q.is_cuda:
                torch.cuda.synchronize()  # the kernel's own GPU time
    return results


def _references(inputs: "Inputs", config: RunConfig) -> tuple[Any, tuple[str, str] | None]:
    """(references, None), or (None, (error_type, reason)) when a reference fails."""
    try:
        # the standard's own truth only when a standard is judged against another than float64
        standard = config.truth if config.gates.standards and config.truth != "float64" else None
        if standard is not None and standard not in TRUTHS:
            raise InputError(f"RunConfig.truth={config.truth!r}: allowed {TRUTHS}")
        return oracles.references(inputs, config.chunk_threshold, standard=standard), None
    except Exception as e:
        return None, (
            error_type(e),
            f"difftest error: the reference failed ({type(e).__name__}: {e})\n" + traceback.format_exc(limit=4),
        )


@dataclass
class CaseParts:
    """What ``run_case(..., parts=CaseParts())`` leaves behind once the kernel ran and the
    references were computed (else every field stays None): the first run's Outputs, the
    judge (Outputs -> the verdicts the first run got), the inputs, the device and whether
    output buffers were poisoned. A caller that repeats the call itself (race stress,
    judge/stress.py) compares and judges its repetitions with them, one at a time."""

    first: Outputs | None = None
    judge: "Callable[[Outputs], list[Verdict]] | None" = None
    inputs: "Inputs | None" = None
    device: str | None = None
    poison: bool | None = None


def run_case(
    kernel: KernelAdapter, problem: Problem, config: RunConfig | None = None, *, parts: CaseParts | None = None
) -> CaseResult:
    config = config or RunConfig()
    t0 = time.perf_counter()
    cap = kernel.capability
    why = cap.excludes(problem)
    if why:
        return CaseResult(kernel.name, problem, Status.SKIPPED, f"outside capability: {why}")
    why = kernel.available()
    if why:
        return CaseResult(kernel.name, problem, Status.SKIPPED, f"unavailable: {why}")
    device = config.device or cap.device
    result = _attempt(kernel, problem, config, device, t0, parts)
    if device_memory.retryable(result):
        release_device_memory()  # once more with this process's cached blocks given back
        result = _attempt(kernel, problem, config, device, time.perf_counter(), parts)
        if device_memory.retryable(result):
            device_memory.skipped(result)
    return result


def _attempt(
    kernel: KernelAdapter, problem: Problem, config: RunConfig, device: str, t0: float, parts: CaseParts | None
) -> CaseResult:
    """One try at the case: its inputs, the kernel's runs, the references, the gates. difftest's
    own tensors running out of device memory is this try's result (device_memory.py), not an
    exception that ends the campaign."""
    try:
        with phase("inputs"):
            inputs = make_inputs(problem, device)
            digest = inputs.digest_later()  # hashed beside the case, waited for at its end
        result = CaseResult(kernel.name, problem, Status.PASSED)
        try:
            return _run(kernel, problem, config, inputs, result, device, t0, parts)
        finally:
            result.input_digest = digest()
    except torch.OutOfMemoryError as e:
        out: CaseResult = device_memory.own_failure(kernel.name, problem, e, CaseResult)
        out.seconds = time.perf_counter() - t0
        return out


def _run(
    kernel: KernelAdapter,
    problem: Problem,
    config: RunConfig,
    inputs: "Inputs",
    result: CaseResult,
    device: str,
    t0: float,
    parts: CaseParts | None = None,
) -> CaseResult:
    """run_case after its inputs: the kernel's runs, the references, the gates."""
    cap = kernel.capability
    poison = config.poison and cap.poison
    runs = config.determinism_runs if config.determinism_runs is not None else (2 if cap.deterministic else 1)
    runs = max(1, runs)
    t1 = time.perf_counter()
    refs: Any = None  # oracles.References
    refs_error: tuple[str, str] | None = None
    try:
        if config.isolate:  # the kernel runs in the worker while this process computes the references
            worker = shared_worker()
            sent = worker.send(getattr(kernel, "spec", None) or kernel.name, problem, device, poison, runs)
            refs, refs_error = _references(inputs, config)
            got_runs = worker.receive(
                sent,
                config.timeout_s,
                waited_from=time.perf_counter(),
                compile_timeout_s=config.compile_timeout_s,
                device=inputs.device,
            )
            t1 = time.perf_counter() - sum(worker.last_seconds.values())  # the worker's own seconds
        else:
            got_runs = call_kernel(kernel, problem, inputs, device, poison, runs, config)
    except KernelUnavailable as e:
        result.status, result.reason = Status.SKIPPED, f"unavailable: {e}"
        result.seconds = time.perf_counter() - t0
        return result
    except Exception as e:  # the kernel's own failure is a case result
        result.status = Status.ERROR
        result.reason = exception_text(e)
        result.error_type = error_type(e)
        if not config.isolate:
            result.reason += "\n" + "".join(traceback.format_exc(limit=4))
        result.seconds = time.perf_counter() - t0
        return result
    result.kernel_seconds = (time.perf_counter() - t1) / runs
    got = got_runs[0]
    if refs is None and refs_error is None:
        refs, refs_error = _references(inputs, config)
    if refs_error is not None:  # a bug of difftest's own, reported as such without ending the campaign
        result.status, result.error_type, result.reason = Status.ERROR, *refs_error
        result.error_origin = ErrorOrigin.DIFFTEST
        result.seconds = time.perf_counter() - t0
        return result
    if refs.note:
        result.notes.append(refs.note)
    with phase("gates"):
        more: list = []  # the further designs' yardsticks (References.more), built at most once a case

        def check(outputs: Outputs, yardsticks: list) -> list[Verdict]:
            return check_outputs(
                problem,
                outputs,
                refs.truth,
                yardsticks,
                config.gates,
                poisoned=poison,
                expected=cap.outputs,
                yardstick=refs.flash,
                standard_truth=refs.standard,
                standard_label=f"{config.truth} truth",
                inputs=inputs,
            )

        # the gates (with further designs' yardsticks where one fails), then the backward
        # re-judged from its own statistics
        def judge(outputs: Outputs) -> list[Verdict]:
            verdicts = check(outputs, refs.yardsticks)
            if (refs.more is not None or cap.designs) and any(not v.passed and v.gate == Gate.BUDGET for v in verdicts):
                if not more:
                    if refs.more is not None:
                        more.extend(refs.more())
                        result.notes.append(refs.more_note)
                    with phase("yardsticks"):
                        more.extend(oracles.design_yardsticks(cap.designs, inputs, cap.block_m, refs.flash))
                    if cap.designs:
                        result.notes.append(
                            f"judged also with the yardsticks of the designs it declares: {', '.join(cap.designs)}"
                        )
                verdicts = check(outputs, refs.yardsticks + more)
            attribute(problem, inputs, outputs, refs.truth, verdicts)
            return verdicts

        result.verdicts = judge(got)
        breakdown.attach(problem, got, refs.truth, result.verdicts, cap)  # which heads/sequences/tiles
        if runs > 1:  # nondeterminism of a kernel that never claimed determinism is reported, not failed,
            # but every run must be right
            tally = RunTally(problem, got, judge)
            for run in got_runs[1:]:
                tally.add(run)
            result.verdicts += tally.verdicts(claimed=cap.deterministic)
            failing = {v.label for v in result.verdicts if not v.passed}  # run 1's, not repeated
            result.verdicts += [v for v in tally.rerun_verdicts() if v.label not in failing]
        if parts is not None:  # the caller repeats the call itself (judge/stress.py)
            parts.first, parts.judge, parts.inputs, parts.device, parts.poison = got, judge, inputs, device, poison
    if config.second_reference:
        with phase("second_ref"):
            result.verdicts += _second_reference(problem, inputs, got, refs.truth, config, result.notes)
    if any(not v.passed for v in result.verdicts):
        result.status = Status.FAILED
    result.seconds = time.perf_counter() - t0
    return result


def _second_reference(
    problem: Problem, inputs: "Inputs", got: Outputs, truth: Outputs, config: RunConfig, notes: list[str]
) -> list:
    assert config.second_reference is not None  # the caller asked for one
    second = registry.get(config.second_reference)
    # a yardstick, not the kernel under test: it runs the same values laid out contiguously
    logical = problem.replace(layout=CONTIGUOUS)
    why = second.capability.excludes(logical) or second.available()
    if why:
        notes.append(
            f"second reference {second.name} cannot run this case ({why}); judged against the float64 truth only"
        )
        return []
    try:
        ref2 = second.run(dataclasses.replace(inputs, problem=logical).to(second.capability.device))
    except Exception as e:
        notes.append(f"second reference {second.name} raised {type(e).__name__}: {e}; float64 truth only")
        return []
    return check_second_reference(problem, got, truth, ref2.to(inputs.device), config.gates, second.name)
