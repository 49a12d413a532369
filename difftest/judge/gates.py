"""Gates: pure functions from (kernel result, float64 truth, same-dtype reference) to a
Verdict per output, each carrying the measured numbers.

- ``budget``: max|got - truth| <= k * max|ref - truth| + floor, where ref is the same
  computation done naively in the Problem's dtype (how much error rounding alone
  makes, FlashAttention's rule) and
      floor = floor_ulps * eps(dtype) * max(max|truth|, 1) + expm1(floor_ulps * eps32 * (1 + |S|)) * T
  The first term is FA3's "2x the dtype's rounding at the reference's magnitude" (held
  at magnitude >= 1: a truth of exactly 0, e.g. dQ with one visible key, still comes
  from O(1) terms). The second is what no correct kernel avoids when it recomputes
  P = exp(S - LSE) in float32 from a stored LSE: S - LSE off by (1 + |S|) eps32 logit
  units for logits of size |S| (|S|: the larger of |LSE| and the size of the terms a
  logit sums, ``logit_magnitude``), so P off by the factor exp of that, carried by T,
  the largest absolute sum of the terms forming one element (e.g. scale * sum_j P_ij
  (|dP_ij| + |Delta_i|) |K_j| for dQ), which dwarfs the result when terms cancel
  (mixed-magnitude dO, saturated softmax). It dominates float32 problems and large
  logits, and is negligible for fp16/bf16 at normal values.
  Plus sqrt(n) u32 T for the float32 accumulator that sums an element's n terms
  (``sum_length``) in whatever order a correct kernel adds them: a GPU SGEMM thread's
  sequential chain errs several times the CPU BLAS's blocked order, and the probabilistic
  bound of any order is sqrt(n) u (lambda = 1; the worst case, n u, would pass fp16
  accumulation bugs at long sequences). The logits' rounding (|S| above) grows the same
  way with the head dim (``dot_growth``).
  FP8 Problems (difftest/model/fp8.py) keep the formula with an FP8 yardstick
  (oracles/fp8.py, which stores P, dS and every output in the format) and one change in the
  floor's first term: one ulp of the format at the tensor's own magnitude,
  eps(fp8) * max|truth|, with no ``floor_magnitude``: a per-tensor scale makes FP8 storage
  relative to the tensor, whatever its size, and what a correct kernel may add to the
  yardstick's error is one output rounding that falls the other way (the yardstick's
  error already holds the format's rounding of every output).
  A declared design's yardsticks (``oracles.design_yardsticks``, built only where a budget gate
  fails) may carry ``design_floor``, the design's own error bound propagated to each output
  (oracles/approx_tanh.py: the approximate tanh's), added to the floor (``design_floor``).
  Reported: ``ratio`` = error / limit (> 1 fails; campaigns climb it with
  hypothesis.target) and ``k_needed``, the smallest k that would pass, so k can be set
  from data rather than guessed (``difftest calibrate``).
- ``elementwise``: the form kernel teams state: |got - truth| <= atol + rtol*|truth| on at
  least ``required_ratio`` of the elements, and max|got - truth| <= max_abs.
- ``nonfinite``: NaN/Inf parity: a non-finite value in the kernel where the truth is
  finite fails, and the reverse (equal infinities match).
- Dtype limits (``dtype_limited``): a non-finite or saturated (+-max finite) kernel value
  where the truth is finite is judged against what a correct kernel in the output dtype
  can produce. It is accepted where the flash-style same-dtype yardstick is non-finite at
  that element (NaN there, or an infinity of the yardstick's sign), or where it is an
  infinity or saturated value of the truth's sign and |truth| plus the output's error
  budget (the budget gate's limit) reaches the dtype's overflow threshold (largest
  finite value: fp16 65504, bf16 ~3.39e38), or where a dS the element sums is at the
  input dtype's overflow edge within a correct kernel's roundings (the yardstick's
  ``overflow_edge``: dQ and dK rows), or, for dK/dV of a GQA problem, where a query
  head's partial before the group sum reaches the threshold (a kernel that stores per-head
  gradients in the output dtype, ``_partials_limited``). Such elements are counted per output as
  ``overflow_limited`` in the nonfinite and budget verdicts (never silently) and left
  out of the error measurement. A NaN where truth and yardstick are finite still fails.
Every verdict names the reference it was judged against (``Verdict.reference``).
- ``poison``: outputs were pre-filled with a marked NaN; any survivor is a region the
  kernel never wrote.
Only the rows that belong to sequences are compared (unused tail tokens are ignored).
"""

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from difftest.errors import InputError
from difftest.judge.declaration import missing_output_message
from difftest.model.outputs import Outputs, is_poison
from difftest.model.problem import FP8_DTYPES, OUTPUTS, Problem
from difftest.oracles.per_head_partials import per_head_partials
from difftest.vocab import Gate

if TYPE_CHECKING:  # annotations only
    from difftest.model.outputs import Outputs

# FP8's LSE k is 2, not 1: against Hopper's FP8 accumulator (oracles/tensor_core.py) the yardstick
# models the hardware's error in size (cuDNN's LSE error / the model's on the H200: 1.00-1.06), not
# bit for bit (57-61% of its GEMM's elements equal), so one realisation may fall either way
FP8_K = {"o": 2.0, "lse": 2.0, "dq": 4.5, "dk": 4.5, "dv": 2.0, "dsink": 2.0}

# The budget's k per dtype and output, calibrated (results/calibration.md, 2026-11-30): the
# largest k_needed measured over correct kernels (CPU: torch-blockwise, sdpa-cpu-math,
# sdpa-cpu-flash; H200: tilelang, tilelang-det, fa4, fa3, flex, sdpa-*), times a
# margin of 2, at least 1 (a kernel may always err as much as the yardstick), rounded up
# to 0.5. bfloat16 dK/dV were held at 3 until sdpa-cpu-flash's k_needed of 6 there was
# triaged: a floor gap at huge logits (a logit's rounding scales with its terms, and P's
# error with exp of that: ``logit_magnitude``, ``budget_limit``); with the floor fixed the
# CPU runs measure bf16 dK <= 0.354, dV 0 (results/calibration.md, run 3), so 1. Almost
# every measured k_needed is 0 (the error is under the floor): the floor decides most verdicts.
DEFAULT_K_BY_DTYPE = {
    "float16": {"o": 1.0, "lse": 1.0, "dq": 1.5, "dk": 1.5, "dv": 1.0, "dsink": 1.0},
    "bfloat16": {"o": 1.0, "lse": 1.0, "dq": 1.5, "dk": 1.0, "dv": 1.0, "dsink": 1.0},
    "float32": {"o": 1.0, "lse": 1.0, "dq": 1.0, "dk": 1.0, "dv": 1.0, "dsink": 1.0},
    # FP8 (results/fp8.md): set from the CPU emulation fp8-current-scaling (kernels/variants.py)
    # against the FP8 yardstick, 2x its largest k_needed, as above; no GPU FP8 kernel measured yet
    **{d: dict(FP8_K) for d in FP8_DTYPES},
}
# per output: the loosest 16/32-bit dtype's k (what a config without a dtype states, and what reports
# record as the defaults); FP8's wider k applies to FP8 problems only, never loosening the others
DEFAULT_K = {n: max(t[n] for d, t in DEFAULT_K_BY_DTYPE.items() if d not in FP8_DTYPES) for n in OUTPUTS}
# the second reference's k (FA3 as a yardstick) is not calibrated: the original defaults
SECOND_REFERENCE_K = {"o": 2.0, "lse": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dsink": 3.0}
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float8_e4m3fn": 2.0**-3, "float8_e5m2": 2.0**-2}
# the outputs an FP8 kernel stores in the format (LSE and dSink stay float32)
FP8_STORED = ("o", "dq", "dk", "dv")


@dataclass(frozen=True)
class Standard:
    """An elementwise tolerance as kernel teams state it."""

    atol: float = 1e-2
    rtol: float = 1e-2
    max_abs: float = float("inf")
    required_ratio: float = 1.0

    def __post_init__(self) -> None:
        for n in ("atol", "rtol", "max_abs"):
            if not getattr(self, n) >= 0:
                raise InputError(f"Standard.{n}={getattr(self, n)!r}: allowed a float >= 0")
        if not 0.0 <= self.required_ratio <= 1.0:
            raise InputError(f"Standard.required_ratio={self.required_ratio!r}: allowed a float in [0, 1]")

    @classmethod
    def parse(cls, text: str) -> "Standard":
        """'atol=1e-2,rtol=1e-2,max_abs=0.5,ratio=0.999' (any subset)."""
        kw = {}
        names = {
            "atol": "atol",
            "rtol": "rtol",
            "max_abs": "max_abs",
            "ratio": "required_ratio",
            "required_ratio": "required_ratio",
        }
        for part in filter(None, (x.strip() for x in text.split(","))):
            key, _, val = part.partition("=")
            if key not in names or not val:
                raise InputError(f"standard item {part!r}: allowed keys {sorted(names)} as key=value")
            kw[names[key]] = float(val)
        return cls(**kw)


@dataclass
class GateConfig:
    # k set for an output (``--k``, a config): applies to every dtype. An output absent here
    # takes its calibrated k for the problem's dtype (``k_by_dtype``), else DEFAULT_K: "not
    # set" is absence, never a value, so ``--k dq=1.5`` means 1.5 even where 1.5 is a default.
    k: dict[str, float] = field(default_factory=dict)
    floor_ulps: float = 2.0  # budget floor in units of eps(dtype) * max(max|truth|, floor_magnitude)
    floor_magnitude: float = 1.0
    standards: dict = field(default_factory=dict)  # output -> Standard (elementwise gate on)
    check_nonfinite: bool = True
    second_reference_k: dict = field(default_factory=lambda: dict(SECOND_REFERENCE_K))
    # calibrated k per dtype and output, for the outputs ``k`` leaves unset (see ``k_for``)
    k_by_dtype: dict[str, dict[str, float]] = field(
        default_factory=lambda: {d: dict(t) for d, t in DEFAULT_K_BY_DTYPE.items()}
    )

    def k_for(self, dtype: str, name: str) -> float:
        """The budget's k for output ``name`` of a ``dtype`` problem."""
        if name in self.k:
            return self.k[name]
        return self.k_by_dtype.get(dtype, {}).get(name, DEFAULT_K[name])

    def __post_init__(self) -> None:
        for d in (self.k, self.standards, self.second_reference_k):
            bad = [n for n in d if n not in OUTPUTS]
            if bad:
                raise InputError(f"GateConfig keys {bad}: allowed outputs {OUTPUTS}")
        for dt, d in self.k_by_dtype.items():
            bad = [n for n in d if n not in OUTPUTS]
            if dt not in EPS or bad:
                raise InputError(
                    f"GateConfig.k_by_dtype[{dt!r}] keys {bad}: allowed dtypes {sorted(EPS)}, outputs {OUTPUTS}"
                )
        for what, d in (
            ("k", self.k),
            ("second_reference_k", self.second_reference_k),
            *((f"k_by_dtype[{dt!r}]", t) for dt, t in self.k_by_dtype.items()),
        ):
            for n, v in d.items():  # nan or <= 0 would fail every case (false alarms in the store)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                    raise InputError(f"{what} for {n} = {v!r}: allowed a finite number > 0")
        for n in ("floor_ulps", "floor_magnitude"):
            v = getattr(self, n)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise InputError(f"GateConfig.{n} = {v!r}: allowed a finite number >= 0")
        for n, s in list(self.standards.items()):
            if isinstance(s, str):
                self.standards[n] = Standard.parse(s)
            elif isinstance(s, dict):
                self.standards[n] = Standard(**s)

    # written by to_dict: ``k`` holds only the outputs whose k was set. A dict without it
    # (written before) listed every output's k, a default meaning "not set" (``from_dict``).
    K_SET_ONLY = "k_set_only"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["standards"] = {n: asdict(s) for n, s in self.standards.items()}
        d[self.K_SET_ONLY] = True
        return d

    @classmethod
    def listed_k(cls, d: dict) -> dict:
        """A saved config's ``k`` as configs written before listed it (every output; a
        default where none was set), so two reports of either age compare output by output."""
        k = d["k"] if isinstance(d.get("k"), dict) else {}
        return {**DEFAULT_K, **k} if d.get(cls.K_SET_ONLY) else dict(k)

    @classmethod
    def from_dict(cls, d: dict) -> "GateConfig":
        d = dict(d)
        if not d.pop(cls.K_SET_ONLY, False) and isinstance(d.get("k"), dict):
            # an older report or reproducer: its k listed every output, those equal to the
            # default standing for "not set" (the per-dtype calibration applied): read them so
            d["k"] = {n: v for n, v in d["k"].items() if v != DEFAULT_K.get(n)}
        return cls(**d)


@dataclass
class Verdict:
    output: str
    gate: Gate
    passed: bool
    numbers: dict = field(default_factory=dict)
    worst: dict | None = None  # {"seq", "token", "head", "dim", "got", "truth"}
    message: str = ""
    reference: str = ""  # what the output was judged against ("float64 truth", "float32 truth", ...)

    def __post_init__(self) -> None:
        self.gate = Gate(self.gate)  # a name read back from a report must be one of ours

    @property
    def label(self) -> str:
        return f"{self.output}:{self.gate}"

    def to_dict(self) -> dict:
        # by hand, not dataclasses.asdict: asdict deep-copies every number, and a report
        # serialises each verdict three times (case log, run state, report.json); the
        # warm main job spent ~10% of its wall time there
        return {
            "output": self.output,
            "gate": self.gate,
            "passed": self.passed,
            "numbers": dict(self.numbers),
            "worst": None if self.worst is None else dict(self.worst),
            "message": self.message,
            "reference": self.reference,
        }


# ------------------------------------------------------------------------- helpers
def used_rows(problem: Problem, name: str) -> int:
    """Rows of a packed output that belong to sequences (the rest is pad_tail)."""
    if name in ("o", "lse", "dq"):
        return problem.total_q - problem.pad_tail
    if name in ("dk", "dv"):
        return problem.total_k - problem.pad_tail
    return problem.heads_q  # dsink


def locate(problem: Problem, name: str, flat_index: int, shape: tuple[int, ...]) -> dict:
    """Map a flat index of a packed output to (sequence, token, head, dim)."""
    idx = []
    for s in reversed(shape):
        idx.append(flat_index % s)
        flat_index //= s
    idx = idx[::-1]
    if name == "dsink":
        return {"head": idx[0]}
    row = idx[0]
    cu = problem.cu_seqlens_q if name in ("o", "lse", "dq") else problem.cu_seqlens_k
    seq = max(b for b in range(problem.batch) if cu[b] <= row) if row < cu[-1] else None
    loc = {"seq": seq, "token": row - cu[seq] if seq is not None else row, "head": idx[1]}
    if len(idx) > 2:
        loc["dim"] = idx[2]
    return loc


def prepared(problem: Problem, name: str, t: torch.Tensor, device: Any) -> torch.Tensor:
    """The used rows of ``t`` in float64 on ``device``: the truth's device, so on a GPU
    the comparisons run there (on the host they cost seconds per case at long lengths).
    Moved in its own dtype, then widened where it lands: a CPU output bound for the GPU
    crosses the bus at 2 bytes per element instead of being widened by the host's
    threads and sent at 8."""
    t = t.detach()
    if name != "dsink":
        t = t[: used_rows(problem, name)]
    return t.to(device).to(torch.float64)


def _read(*scalars: Any) -> list[Any]:  # floats; None where a None was given
    """0-dim tensors (or numbers) read to the host in ONE transfer: each ``float()`` or
    ``.item()`` of a CUDA tensor is a device synchronisation, and a case ran ~90 of them
    before. Values go through float64 (indices exact below 2^53)."""
    ts = [x for x in scalars if isinstance(x, torch.Tensor)]
    if not ts:
        return [None if x is None else float(x) for x in scalars]
    dev = ts[0].device
    groups: dict = {}  # one stack per dtype, widened once: a case reads ~60 numbers (a few launches, not 60)
    for x in ts:
        groups.setdefault(x.dtype, []).append(x.detach().reshape(()).to(device=dev))
    order = list(groups)
    flat = torch.cat([torch.stack(groups[dt]).to(torch.float64) for dt in order]).tolist()
    start, at = 0, {}
    for dt in order:
        at[dt] = iter(flat[start : start + len(groups[dt])])
        start += len(groups[dt])
    return [next(at[x.dtype]) if isinstance(x, torch.Tensor) else None if x is None else float(x) for x in scalars]


def _at_max(x: torch.Tensor, got: torch.Tensor, truth: Any) -> tuple:
    """(max of x, its first flat index, got and truth there) as 0-dim tensors, unread."""
    flat = x.reshape(-1)
    i = torch.argmax(torch.nan_to_num(flat, nan=float("inf"))).reshape(1)
    # index_select, not t[i]: indexing with a tensor reads the index to the host (a sync)
    return (flat.index_select(0, i), i, got.reshape(-1).index_select(0, i), truth.reshape(-1).index_select(0, i))


def _loc(problem: Problem, name: str, shape: tuple[int, ...], i: Any, got_v: Any, truth_v: Any) -> dict:
    loc = locate(problem, name, int(i), shape)
    loc["got"], loc["truth"] = got_v, truth_v
    return loc


def _worst(
    problem: Problem, name: str, diff: torch.Tensor, got: torch.Tensor, truth: Any, shape: tuple[int, ...]
) -> dict | None:
    if diff.numel() == 0:
        return None
    _, i, g, t = _read(*_at_max(diff, got, truth))
    return _loc(problem, name, shape, i, g, t)


def _fmt_loc(loc: dict | None) -> str:
    if not loc:
        return ""
    where = ", ".join(f"{k}={loc[k]}" for k in ("seq", "token", "head", "dim") if k in loc)
    return f" worst at ({where}): got {loc['got']:.6g}, truth {loc['truth']:.6g}"


def finite_pair(got: torch.Tensor, truth: Any, both: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    both = torch.isfinite(got) & torch.isfinite(truth) if both is None else both
    return torch.where(both, got, 0.0), torch.where(both, truth, 0.0)


# ------------------------------------------------------------------------- gates
TRUTH = "float64 truth"


def sum_length(problem: Problem, name: str | None) -> int:
    """How many terms a float32 accumulator adds into one element of output ``name``: the
    keys a row sums (O, LSE, dQ), the query rows of a whole GQA group (dK, dV), every query
    row (dSink); 0 for no name."""
    if name is None:
        return 0
    sq, sk = max(problem.seqlens_q, default=0), max(problem.seqlens_k, default=0)
    return {
        "o": sk,
        "lse": sk,
        "dq": sk,
        "dk": sq * problem.group,
        "dv": sq * problem.group,
        "dsink": problem.total_q,
    }.get(name, 0)


def budget_limit(
    problem: Problem,
    truth: Any,
    ref: Any,
    k: float,
    floor_ulps: float,
    floor_magnitude: float = 1.0,
    logit_scale: float = 0.0,
    terms: float = 0.0,
    name: str | None = None,
    design_floor: float = 0.0,
) -> dict:
    """The budget gate's limit for one output: k * (the yardstick's error vs truth) + floor.
    ``ref``: one reference tensor or a list; the yardstick is the largest of their errors.
    ``name``: the output, for the float32 accumulation term (``sum_length``).
    ``design_floor``: added to the floor (``design_floor``: a declared design's own bound).
    Returns {"limit", "ref_err", "floor", "scale"} (scale: max|truth| over finite elements)."""
    t = torch.where(torch.isfinite(truth), truth, 0.0)
    errs, mags = [], []
    for one in ref if isinstance(ref, (list, tuple)) else [ref]:
        r, t2 = finite_pair(one, truth)
        errs.append((r - t2).abs().max() if r.numel() else 0.0)
        mags.append(r.abs().max() if r.numel() else 0.0)
    *read, scale = _read(*errs, *mags, t.abs().max() if t.numel() else 0.0)  # one host read
    errs, ref_scale = read[: len(errs)], max(read[len(errs) :], default=0.0)
    return limit_from(
        problem, errs, scale, k, floor_ulps, floor_magnitude, logit_scale, terms, name, design_floor, ref_scale
    )


def limit_from(
    problem: Problem,
    errs: list[Any],
    scale: float,
    k: float,
    floor_ulps: float,
    floor_magnitude: float = 1.0,
    logit_scale: float = 0.0,
    terms: float = 0.0,
    name: str | None = None,
    design_floor: float = 0.0,
    ref_scale: float = 0.0,
) -> dict:
    """``budget_limit``'s arithmetic on the numbers read back: ``errs``, the yardsticks'
    largest errors against the truth, and ``scale``, max|truth| over finite elements.
    ``design_floor``: a declared design's bound on what it may add (``design_floor``).
    ``ref_scale``: the yardsticks' largest finite |value| where they and the truth are finite:
    the dtype's rounding is taken at the larger of it and ``scale``. A kernel as good as a
    yardstick sits by it, and both round their result at its magnitude: where a declared design
    is far from the truth (prescaled-q's dK at 4.4 where the truth is 0.046, bfloat16, a
    saturated softcap: 2 of 5,004 CPU nightly cases of the correct variant on 2026-12-07, one
    bfloat16 ulp apart, 4.40625 against 4.375), the truth's magnitude under-states it."""
    ref_err = max([0.0] + list(errs))
    # the dtype's rounding of the result, plus float32 rounding of P = exp(S - LSE), carried
    # by the terms that form each element (their absolute sum ``terms`` can dwarf a result
    # that cancels): S - LSE off by delta = floor_ulps * eps32 * (1 + |S|) logit units makes
    # P off by a factor e^delta, a relative error expm1(delta): delta at ordinary logits, far
    # more at |S| ~ 1e7 in float32, where one ulp of S is a whole logit unit
    delta = min(floor_ulps * EPS["float32"] * (1.0 + logit_scale), 50.0)
    if problem.dtype in FP8_DTYPES:  # one ulp of the format at the tensor's magnitude (module docstring),
        # plus float32's floor (LSE and dSink are float32; a truth of 0 keeps a limit above 0)
        floor = (EPS[problem.dtype] * scale if name in FP8_STORED else 0.0) + floor_ulps * EPS["float32"] * max(
            scale, floor_magnitude
        )
    else:
        floor = floor_ulps * EPS[problem.dtype] * max(scale, ref_scale, floor_magnitude)
    floor += math.expm1(delta) * max(terms, scale)
    # a float32 accumulator over n terms, in whatever order a correct kernel adds them (a GPU
    # SGEMM thread's sequential chain errs ~4x the CPU BLAS's blocked order: results/variants.md):
    # sqrt(n) u32 of the terms' absolute sum (the probabilistic bound, lambda = 1)
    floor += math.sqrt(sum_length(problem, name)) * EPS["float32"] / 2 * max(terms, scale)
    floor += design_floor
    return {"limit": k * ref_err + floor, "ref_err": ref_err, "floor": floor, "scale": scale}


def design_floor(refs: list, name: str) -> float:
    """The largest ``design_floor`` any yardstick in ``refs`` carries for output ``name``: a
    declared design's propagated bound on how far its own approximation may move the output
    (oracles/approx_tanh.py, ``tanh_error_floor``), built only with that design's yardsticks
    (``oracles.design_yardsticks``), so it widens no other kernel's budget. 0.0: none."""
    return float(max([0.0] + [(getattr(x, "design_floor", None) or {}).get(name, 0.0) for x in refs]))


def budget_gate(
    problem: Problem,
    name: str,
    got: torch.Tensor,
    truth: Any,
    ref: Any,
    k: float,
    floor_ulps: float,
    floor_magnitude: float = 1.0,
    gate: Gate = Gate.BUDGET,
    ref_label: str = "same-dtype ref",
    logit_scale: float = 0.0,
    terms: float = 0.0,
    *,
    limited: torch.Tensor | None = None,
    reference: str = TRUTH,
    bounds: dict | None = None,
) -> Verdict:
    """``ref``: one reference tensor or a list; the yardstick is the largest of their errors.
    ``limited``: bool mask of elements accepted at the dtype's limits (``dtype_limited``):
    left out of the error and counted as ``overflow_limited``. ``bounds``: ``budget_limit``'s
    result when the caller already has it."""
    shape = got.shape
    # on the host a test is cheaper than the pass; on a GPU the pass is cheaper than the sync
    if limited is not None and (limited.is_cuda or bool(limited.any())):
        got = torch.where(limited, truth, got)
    b = bounds or budget_limit(problem, truth, ref, k, floor_ulps, floor_magnitude, logit_scale, terms, name)
    # the count, the error and where it is largest: one host read
    n_lim, err, i, g_i, t_i = _read(limited.sum() if limited is not None else 0, *_budget_error(got, truth))
    return _budget_verdict(
        problem,
        name,
        shape,
        k,
        b,
        int(n_lim),
        err,
        i,
        g_i,
        t_i,
        gate=gate,
        ref_label=ref_label,
        logit_scale=logit_scale,
        terms=terms,
        reference=reference,
    )


def _budget_error(got: torch.Tensor, truth: Any, both: torch.Tensor | None = None) -> tuple:
    """(max |got - truth| over elements finite in both, its first flat index, got and truth
    there), unread. ``both``: the mask of elements finite in both, when the caller has it."""
    g, t = finite_pair(got, truth, both)
    diff = (g - t).abs()
    return _at_max(diff, g, t) if diff.numel() else (0.0, 0, 0.0, 0.0)


def _budget_verdict(
    problem: Problem,
    name: str,
    shape: tuple[int, ...],
    k: float,
    b: dict,
    n_lim: int,
    err: Any,
    i: Any,
    g_i: Any,
    t_i: Any,
    *,
    gate: Gate = Gate.BUDGET,
    ref_label: str = "same-dtype ref",
    logit_scale: float = 0.0,
    terms: float = 0.0,
    reference: str = TRUTH,
) -> Verdict:
    """The budget verdict from its numbers read back (``b``: ``budget_limit``'s bounds)."""
    ref_err, floor, limit, scale = b["ref_err"], b["floor"], b["limit"], b["scale"]
    ratio = err / limit
    k_needed = max(0.0, err - floor) / ref_err if ref_err > 0 else (0.0 if err <= floor else float("inf"))
    passed = err <= limit
    worst = _loc(problem, name, shape, i, g_i, t_i) if err > 0 else None
    msg = (
        f"{name}: {gate} {'ok' if passed else 'FAILED'}: max|err|={err:.3g} vs {ref_label} "
        f"{ref_err:.3g} (limit {k:g}x + floor {floor:.3g} = {limit:.3g}, ratio {ratio:.3g}, "
        f"k needed {k_needed:.3g})"
    )
    if n_lim:
        msg += f"; {n_lim} overflow-limited elements left out"
    if not passed:
        msg += _fmt_loc(worst)
    numbers = {
        "err": err,
        "ref_err": ref_err,
        "floor": floor,
        "k": k,
        "limit": limit,
        "ratio": ratio,
        "k_needed": k_needed,
        "logit_scale": logit_scale,
        "terms": terms,
        "max_abs_truth": scale,
    }
    if n_lim:
        numbers["overflow_limited"] = n_lim
    return Verdict(name, gate, passed, numbers, worst, msg, reference)


def elementwise_gate(
    problem: Problem, name: str, got: torch.Tensor, truth: Any, std: Standard, *, reference: str = TRUTH
) -> Verdict:
    shape = got.shape
    g, t = finite_pair(got, truth)
    diff = (g - t).abs()
    tol = std.atol + std.rtol * t.abs()
    n = diff.numel()
    excess = (diff - tol).reshape(-1)
    within, err, _, i, g_i, t_i = (
        _read((diff <= tol).sum(), diff.max(), *_at_max(excess, g, t)) if n else (0, 0.0, 0.0, 0, 0.0, 0.0)
    )  # one host read
    within = int(within)
    ratio = within / n if n else 1.0
    passed = ratio >= std.required_ratio and err <= std.max_abs
    worst = _loc(problem, name, shape, i, g_i, t_i) if n and not passed else None
    msg = (
        f"{name}: elementwise {'ok' if passed else 'FAILED'}: {ratio:.4%} within atol={std.atol:g}+rtol={std.rtol:g}"
        f" (need {std.required_ratio:.4%}), max|err|={err:.3g} (limit {std.max_abs:g})"
    )
    if reference != TRUTH:
        msg += f" vs the {reference}"
    if not passed:
        msg += _fmt_loc(worst)
    return Verdict(
        name,
        Gate.ELEMENTWISE,
        passed,
        {
            "within_ratio": ratio,
            "required_ratio": std.required_ratio,
            "err": err,
            "atol": std.atol,
            "rtol": std.rtol,
            "max_abs": std.max_abs,
        },
        worst,
        msg,
        reference,
    )


def overflow_threshold(dtype: torch.dtype) -> float:
    """The largest finite value of ``dtype``: a true value within rounding of it may be
    stored as an infinity (fp16 65504, bf16 ~3.39e38)."""
    return float(torch.finfo(dtype).max)


def dtype_limited(
    got: torch.Tensor,
    truth: Any,
    yardstick: Any,
    out_dtype: torch.dtype,
    limit: float,
    edge: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bool mask: elements where the kernel holds a non-finite or saturated (|got| >= the
    dtype's largest finite value) value, the truth is finite, and a correct kernel storing
    ``out_dtype`` can hold that value there:
      (a) the flash-style same-dtype ``yardstick`` (None: not used) is non-finite at that
          element, and the kernel's value is NaN, the yardstick's is NaN, or both have the
          same sign; or
      (b) the kernel's value is an infinity or saturated value of the truth's sign (not
          NaN) and |truth| + ``limit`` (the output's error budget) reaches the threshold; or
      (c) ``edge`` (a bool mask broadcast to ``got``; None: not used) holds there: a dS this
          element sums is at the input dtype's overflow edge within what a correct kernel's
          roundings move it (the yardstick's ``overflow_edge``, oracles/chunked.py), so a
          correct kernel may store an infinity there, of either sign, or NaN (inf - inf).
    A NaN where truth and yardstick are finite and no dS is at the edge is never accepted.
    Rule (d), a GQA problem's per-head dK/dV partials at the edge, needs the inputs: it is
    ``_partials_limited``, applied by ``check_outputs``."""
    fmax = overflow_threshold(out_dtype)
    cand = torch.isfinite(truth) & (~torch.isfinite(got) | (got.abs() >= fmax))
    if not cand.is_cuda and not bool(cand.any()):  # a shortcut on the host; on a GPU the read costs more
        return cand
    ok = cand & ~torch.isnan(got) & (torch.sign(got) == torch.sign(truth)) & (truth.abs() + limit >= fmax)
    if yardstick is not None:
        y_bad = ~torch.isfinite(yardstick)
        ok |= cand & y_bad & (torch.isnan(got) | torch.isnan(yardstick) | (torch.sign(got) == torch.sign(yardstick)))
    if edge is not None:
        ok |= cand & edge
    return ok  # type: ignore[no-any-return]  # torch types these operators Any


def nonfinite_gate(
    problem: Problem,
    name: str,
    got: torch.Tensor,
    truth: Any,
    out_dtype: torch.dtype | None = None,
    *,
    limited: torch.Tensor | None = None,
    reference: str = TRUTH,
) -> Verdict:
    """Non-finite values must match: NaN for NaN, an infinity for one of the same sign.
    ``limited``: elements accepted at the dtype's limits (``dtype_limited``), counted as
    ``overflow_limited``. Without it, ``out_dtype`` (the dtype the kernel stores ``name``
    in) accepts an infinity of the truth's sign where |truth| reaches the dtype's largest
    finite value (found on the H200: fp16 dQ of 7e4 > 65504 stored as inf)."""
    gf, tf = torch.isfinite(got), torch.isfinite(truth)
    if limited is None:
        limited = dtype_limited(got, truth, None, out_dtype, 0.0) if out_dtype is not None else torch.zeros_like(gf)
    bad = _nonfinite_mask(got, truth, gf & tf) & ~limited
    # n_lim: the saturated finite ones are counted by the budget gate too; one host read for all
    counts = _read(bad.sum(), torch.isnan(got).sum(), (limited & ~(gf & tf)).sum(), limited.sum())
    return _nonfinite_verdict(
        problem,
        name,
        got,
        truth,
        bad,
        *(int(c) for c in counts),  # type: ignore[call-arg,arg-type]
        out_dtype,
        reference,
    )  # (counts: 4 numbers; mypy cannot count a *generator)


def _nonfinite_mask(got: torch.Tensor, truth: Any, both: torch.Tensor) -> torch.Tensor:
    """Elements non-finite on either side (``both``: finite on both), unless both hold the
    same value (NaN for NaN, an infinity of the same sign). Where one side is not finite,
    ``got == truth`` holds exactly for two infinities of one sign: the same mask as
    isinf & isinf & equal signs, in a third of the operations."""
    return ~both & ~((got == truth) | (torch.isnan(got) & torch.isnan(truth)))  # type: ignore[no-any-return]  # torch types these operators Any


def _finite(t: torch.Tensor) -> torch.Tensor:
    """``torch.isfinite(t)`` of a float tensor, in two operations instead of its four
    (|t| < inf is False for NaN and both infinities, True for every finite value)."""
    return t.abs() < math.inf


def _nonfinite_verdict(
    problem: Problem,
    name: str,
    got: torch.Tensor,
    truth: Any,
    bad: torch.Tensor,
    n_bad: int,
    n_nan: int,
    n_lim: int,
    n_lim_all: int,
    out_dtype: torch.dtype | None,
    reference: str = TRUTH,
) -> Verdict:
    """The nonfinite verdict from its counts read back; on a failure the first bad element
    (``bad``, a mask over ``got``) is read too."""
    shape = got.shape
    passed = n_bad == 0
    worst = None
    if not passed:  # a second read, on failures only
        i = torch.argmax(bad.reshape(-1).to(torch.uint8)).reshape(1)
        worst = _loc(
            problem, name, shape, *_read(i, got.reshape(-1).index_select(0, i), truth.reshape(-1).index_select(0, i))
        )
    msg = f"{name}: nonfinite {'ok' if passed else 'FAILED'}: {n_bad} elements non-finite in one of kernel/truth only"
    if n_lim_all:
        thr = overflow_threshold(out_dtype) if out_dtype is not None else float("nan")
        msg += (
            f"; {n_lim_all} overflow-limited ({n_lim} non-finite, {n_lim_all - n_lim} saturated) accepted: "
            f"a correct {str(out_dtype).replace('torch.', '')} kernel can store them (|truth| + budget "
            f">= {thr:.6g}, or the flash-style yardstick is non-finite there, or a dS they sum is at the "
            f"dtype's overflow edge)"
        )
    if not passed:
        msg += _fmt_loc(worst)
    numbers = {"mismatched": n_bad, "nan_in_kernel": n_nan}
    if n_lim_all:
        numbers["overflow_limited"] = n_lim_all
    return Verdict(name, Gate.NONFINITE, passed, numbers, worst, msg, reference)


def poison_gate(problem: Problem, name: str, got_raw: torch.Tensor) -> Verdict:
    """``got_raw`` in the kernel's own dtype (the poison pattern is dtype-specific)."""
    t, mask = _poison_mask(problem, name, got_raw)
    return _poison_verdict(problem, name, t, mask, int(_read(mask.sum())[0]))


def _poison_mask(problem: Problem, name: str, got_raw: torch.Tensor) -> tuple:
    """(the used rows of ``got_raw``, the mask of their elements still holding the poison)."""
    t = got_raw.detach()
    if name != "dsink":
        t = t[: used_rows(problem, name)]
    return t, is_poison(t)  # where the output lies: no copy of it to the host


def _poison_verdict(problem: Problem, name: str, t: torch.Tensor, mask: torch.Tensor, n: int) -> Verdict:
    """The poison verdict from the count read back; on a failure the first element is read."""
    worst = None
    if n:  # a second read, on failures only
        i = _read(torch.argmax(mask.reshape(-1).to(torch.uint8)))[0]
        worst = _loc(problem, name, t.shape, i, float("nan"), float("nan"))
    msg = f"{name}: poison {'ok' if not n else 'FAILED'}: {n} of {t.numel()} elements never written"
    if n:
        assert worst is not None
        where = ", ".join(f"{k}={worst[k]}" for k in ("seq", "token", "head", "dim") if k in worst)
        msg += f"; first at ({where})"
    return Verdict(name, Gate.POISON, n == 0, {"unwritten": n, "elements": t.numel()}, worst, msg, "poison pattern")


def shape_verdict(problem: Problem, name: str, got: torch.Tensor, expected_shape: tuple[int, ...]) -> Verdict | None:
    if tuple(got.shape) != tuple(expected_shape):
        return Verdict(
            name,
            Gate.SHAPE,
            False,
            {"got": list(got.shape), "expected": list(expected_shape)},
            None,
            f"{name}: shape {tuple(got.shape)} != expected {tuple(expected_shape)}",
            "declared shapes",
        )
    return None


def _terms(truth: Any, name: str) -> float:
    """Largest absolute sum of the terms forming one element of ``name`` (recorded by the
    chunked oracle as ``truth.magnitude``; 0 when unknown: the result's size is used)."""
    mag = getattr(truth, "magnitude", None) or {}
    return float(mag.get(name, 0.0))


def logit_magnitude(problem: Problem, truth: Any, inputs: Any | None = None) -> float:
    """The size of the logits' rounding, in logit units per eps32: the larger of max |LSE|
    over rows that see something (LSE lies within log(seqlen_k) of each row's maximum
    logit) and, given the inputs, the size of the terms a logit sums (``logit_terms``).

    A kernel's float32 logit S = scale * sum_d q_d k_d carries rounding of order eps32 times
    the sum of the |terms|, not times |S|: with large, cancelling q and k (|S| ~ 1e6 from
    terms ~ 1e7) a correct flash kernel, whose backward recomputes S in another summation
    order than the forward that stored the LSE, gets P = exp(S - LSE) a few fp32 ulps of
    1e7 off — tens of percent — and so do its gradients (torch's CPU flash kernel in bf16,
    results/calibration.md: dV 38.8 off where the |LSE|-only floor allowed 33.8).

    The terms' size is scaled by ``dot_growth(head_dim_qk)``: a dot product of D terms in
    float32, summed in any order, errs by ~sqrt(D) u of its absolute terms (the
    probabilistic bound, Higham & Mary 2019), more than the floor's 2 ulps past D = 16
    (torch-blockwise's fp32 O at D = 80 and logits ~144: 1.22x over the unscaled floor)."""
    return _logit_value(problem, inputs, *_read(*_logit_scalars(problem, truth, inputs)))


def _logit_scalars(problem: Problem, truth: Any, inputs: Any) -> tuple:
    """``logit_magnitude``'s device numbers, unread: the product of the largest q and k
    norms (None without inputs) and max |LSE| over rows that see something (None without
    an LSE)."""
    qk = _norm_product(inputs) if inputs is not None else None
    lse = None if truth.lse is None else truth.lse[: used_rows(problem, "lse")].double()
    # no boolean-mask indexing (a sync of its own)
    lm = torch.where(torch.isfinite(lse), lse.abs(), 0.0).max() if lse is not None and lse.numel() else None
    return qk, lm


def _logit_value(problem: Problem, inputs: Any, qk: Any, lm: Any) -> float:
    """``logit_magnitude`` from ``_logit_scalars``' numbers read back."""
    terms = (0.0 if qk is None else qk * problem.scale) * dot_growth(problem.head_dim_qk) if inputs is not None else 0.0
    return terms if lm is None else max(lm, terms)


def dot_growth(n: int, floor_ulps: float = 2.0) -> float:
    """How many times the budget floor's ``floor_ulps`` eps32 (= 2 floor_ulps u) the rounding
    of an n-term float32 dot product reaches: sqrt(n) u of its absolute terms, at least 1."""
    return max(1.0, math.sqrt(max(n, 1)) / (2.0 * floor_ulps))


def logit_terms(problem: Problem, inputs: Any) -> float:
    """scale * max_i |q_i|_2 * max_j |k_j|_2 over every token and head: by Cauchy-Schwarz at
    least scale * sum_d |q_id| |k_jd| for any query/key pair, the absolute size of the terms
    one logit sums (one host sync)."""
    qk = _norm_product(inputs)
    return 0.0 if qk is None else _read(qk)[0] * problem.scale


def _norm_product(inputs: Any) -> torch.Tensor | None:
    """max_i |q_i|_2 * max_j |k_j|_2 (unread), None where q or k is absent or empty."""
    q, k = inputs.q, inputs.k
    if q is None or k is None or q.numel() == 0 or k.numel() == 0:
        return None
    qn = torch.linalg.vector_norm(q.double(), dim=-1).max()
    kn = torch.linalg.vector_norm(k.double(), dim=-1).max()
    return qn * kn  # type: ignore[no-any-return]  # torch types these operators Any


def check_outputs(
    problem: Problem,
    got: "Outputs",
    truth: "Outputs",
    ref: Any,
    config: GateConfig | None = None,
    *,
    poisoned: bool = False,
    expected: tuple[str, ...] | None = None,
    yardstick: Any | None = None,
    standard_truth: Any | None = None,
    standard_label: str = TRUTH,
    inputs: Any | None = None,
) -> list[Verdict]:
    """Every gate on every output the kernel produced (``expected``: outputs it declared).
    ``ref``: the same-dtype reference Outputs, or a list of them (largest error wins).
    ``yardstick``: the flash-style same-dtype reference, for the dtype-limit rule
    (``dtype_limited``); None: only |truth| + budget counts. ``standard_truth``: the
    reference the elementwise standard is judged against (``--truth float32``), named
    ``standard_label``; None: the float64 truth, which the budget always uses.
    ``inputs``: the problem's Inputs, for the size of the logits' terms (``logit_magnitude``).

    Every output's numbers are read back to the host together, in one transfer (on a GPU
    each read is a synchronisation: a case made ~25 of them): ``_Judged`` computes them
    assuming no element is left to the dtype-limit rule, and counts the elements the rule
    would look at (non-finite or saturated kernel values where the truth is finite). An
    output with such elements, or with an elementwise standard, is judged again the long way
    (``_judge_output``, reading its own numbers): the same verdicts either way."""
    config = config or GateConfig()
    shapes = Outputs.shapes(problem)
    refs = [x for x in (ref if isinstance(ref, (list, tuple)) else [ref]) if x is not None]
    steps: list[Verdict | _Judged] = []  # per output: its Verdict (missing, wrong shape), or the output to judge
    for name in OUTPUTS:
        t_truth = truth.get(name)
        if t_truth is None or name not in shapes:
            continue
        g_raw = got.get(name)
        if g_raw is None:
            if expected is not None and name in expected:
                steps.append(
                    Verdict(
                        name, Gate.MISSING, False, {}, None, missing_output_message(name, expected), "declared outputs"
                    )
                )
            continue
        bad_shape = shape_verdict(problem, name, g_raw, shapes[name])
        steps.append(
            bad_shape or _Judged(problem, name, g_raw, t_truth, refs, poisoned, quick=name not in config.standards)
        )
    judged = [x for x in steps if isinstance(x, _Judged)]
    values = iter(_read(*_logit_scalars(problem, truth, inputs), *(x for j in judged for x in j.scalars)))
    logit_scale = _logit_value(problem, inputs, next(values), next(values))
    partials: dict
    verdicts, partials = [], {}  # partials: per-query-head dK/dV, computed once if a kernel's dK or dV needs them
    for step in steps:
        if isinstance(step, Verdict):
            verdicts.append(step)
            continue
        step.take(values)
        if step.quick and not step.candidates:
            verdicts += step.verdicts(config, logit_scale, _terms(truth, step.name))
        else:
            verdicts += _judge_output(
                problem,
                step.name,
                step.g_raw,
                truth,
                refs,
                config,
                poisoned,
                yardstick,
                standard_truth,
                standard_label,
                inputs,
                logit_scale,
                partials,
            )
    return verdicts


class _Judged:
    """One output's gate numbers as unread device scalars, for ``check_outputs``' single
    host read: the poison count, the yardsticks' errors and max|truth| (``budget_limit``),
    the elements the dtype-limit rule would look at (``candidates``), the nonfinite counts
    and the budget's error with where it is largest, each computed with no element limited,
    which is what the gates compute when there are no candidates (``dtype_limited`` is then
    all False). ``take`` reads them back; ``verdicts`` builds the verdicts with the gates' own
    builders. ``quick=False`` (an elementwise standard): nothing is computed here."""

    def __init__(
        self,
        problem: Problem,
        name: str,
        g_raw: torch.Tensor,
        t_truth: torch.Tensor,
        refs: Any,
        poisoned: bool,
        quick: bool,
    ) -> None:
        self.problem, self.name, self.g_raw, self.poisoned, self.quick = problem, name, g_raw, poisoned, quick
        self.scalars = []
        if not quick:
            return
        dev = t_truth.device
        self.g = g = prepared(problem, name, g_raw, dev)
        self.t = t = prepared(problem, name, t_truth, dev)
        rs = [prepared(problem, name, x.get(name), dev) for x in refs if x.get(name) is not None] or [t]
        if poisoned:
            self.pt, self.pmask = _poison_mask(problem, name, g_raw)
            self.scalars.append(self.pmask.sum())
        g_abs, t_abs = g.abs(), t.abs()
        gf, tf = g_abs < math.inf, t_abs < math.inf  # isfinite (``_finite``)
        both = gf & tf
        # budget_limit: each yardstick's largest error where it and the truth are finite, max|truth|
        # and the yardsticks' largest |value| there (limit_from's ref_scale), on one mask each
        ref_ok = [_finite(r) & tf for r in rs]
        self.scalars += [torch.where(m, r - t, 0.0).abs().max() if r.numel() else 0.0 for r, m in zip(rs, ref_ok)]
        self.scalars.append(torch.where(tf, t_abs, 0.0).max() if t.numel() else 0.0)
        self.scalars += [torch.where(m, r, 0.0).abs().max() if r.numel() else 0.0 for r, m in zip(rs, ref_ok)]
        self.n_refs = len(rs)
        self.design_floor = design_floor(refs, name)
        fmax = overflow_threshold(g_raw.dtype)
        self.scalars.append((tf & (~gf | (g_abs >= fmax))).sum())  # dtype_limited's candidates
        self.bad = _nonfinite_mask(g, t, both)
        self.scalars += [self.bad.sum(), torch.isnan(g).sum()]
        self.scalars += list(_budget_error(g, t, both))

    def take(self, values: Iterator[Any]) -> None:
        """Read this output's numbers from ``values`` (an iterator over the read-back
        scalars, in the order of ``scalars``)."""
        if not self.quick:
            return
        self.unwritten = int(next(values)) if self.poisoned else 0
        self.errs = [next(values) for _ in range(self.n_refs)]
        self.scale = next(values)
        self.ref_scale = max([next(values) for _ in range(self.n_refs)], default=0.0)
        self.candidates = int(next(values))
        self.n_bad, self.n_nan = int(next(values)), int(next(values))
        self.err, self.i, self.g_i, self.t_i = (next(values) for _ in range(4))

    def verdicts(self, config: GateConfig, logit_scale: float, terms: float) -> list[Verdict]:
        p, name = self.problem, self.name
        out = [_poison_verdict(p, name, self.pt, self.pmask, self.unwritten)] if self.poisoned else []
        if config.check_nonfinite:
            out.append(
                _nonfinite_verdict(p, name, self.g, self.t, self.bad, self.n_bad, self.n_nan, 0, 0, self.g_raw.dtype)
            )
        k = config.k_for(p.dtype, name)
        b = limit_from(
            p,
            self.errs,
            self.scale,
            k,
            config.floor_ulps,
            config.floor_magnitude,
            logit_scale,
            terms,
            name,
            self.design_floor,
            self.ref_scale,
        )
        out.append(
            _budget_verdict(
                p,
                name,
                self.g.shape,
                k,
                b,
                0,
                self.err,
                self.i,
                self.g_i,
                self.t_i,
                logit_scale=logit_scale,
                terms=terms,
                reference=f"{TRUTH} (yardstick: same-dtype refs)",
            )
        )
        return out


def _judge_output(
    problem: Problem,
    name: str,
    g_raw: torch.Tensor,
    truth: Any,
    refs: Any,
    config: GateConfig,
    poisoned: bool,
    yardstick: Any,
    standard_truth: Any,
    standard_label: str,
    inputs: Any,
    logit_scale: float,
    partials: dict,
) -> list[Verdict]:
    """Every gate on output ``name``, the long way: the dtype-limit rule applied, each gate
    reading its own numbers (``check_outputs`` takes it for an output with elements the rule
    looks at, or with an elementwise standard)."""
    verdicts = []
    t_truth = truth.get(name)
    if poisoned:
        verdicts.append(poison_gate(problem, name, g_raw))
    dev = t_truth.device
    g, t = prepared(problem, name, g_raw, dev), prepared(problem, name, t_truth, dev)
    r = [prepared(problem, name, x.get(name), dev) for x in refs if x.get(name) is not None] or t
    k = config.k_for(problem.dtype, name)
    terms = _terms(truth, name)
    y = yardstick.get(name) if yardstick is not None else None
    y = prepared(problem, name, y, dev) if y is not None else None
    bounds = budget_limit(
        problem, t, r, k, config.floor_ulps, config.floor_magnitude, logit_scale, terms, name, design_floor(refs, name)
    )
    limited = dtype_limited(g, t, y, g_raw.dtype, bounds["limit"], _edge(problem, name, yardstick, dev))
    if name in ("dk", "dv") and problem.group > 1 and inputs is not None:
        limited = limited | _partials_limited(
            problem, name, g, t, g_raw.dtype, bounds["limit"], limited, inputs, partials
        )
    if config.check_nonfinite:
        verdicts.append(nonfinite_gate(problem, name, g, t, g_raw.dtype, limited=limited))
    verdicts.append(
        budget_gate(
            problem,
            name,
            g,
            t,
            r,
            k,
            config.floor_ulps,
            config.floor_magnitude,
            logit_scale=logit_scale,
            terms=terms,
            limited=limited,
            bounds=bounds,
            reference=f"{TRUTH} (yardstick: same-dtype refs)",
        )
    )
    if name in config.standards:
        st = standard_truth.get(name) if standard_truth is not None else None
        if st is None:
            verdicts.append(elementwise_gate(problem, name, torch.where(limited, t, g), t, config.standards[name]))
        else:
            st = prepared(problem, name, st, dev)
            verdicts.append(
                elementwise_gate(
                    problem, name, torch.where(limited, st, g), st, config.standards[name], reference=standard_label
                )
            )
    return verdicts


def _partials_limited(
    problem: Problem,
    name: str,
    got: torch.Tensor,
    truth: Any,
    out_dtype: torch.dtype,
    limit: float,
    limited: torch.Tensor,
    inputs: Any,
    cache: dict,
) -> torch.Tensor:
    """Rule (d) of ``dtype_limited`` for dK/dV of a GQA problem: a non-finite or saturated
    value where the truth is finite is accepted where some query head's partial of that
    element (``oracles.per_head_partials``: what a kernel storing per-head gradients before
    the group sum holds) plus the output's budget ``limit`` reaches the dtype's overflow
    threshold, with an infinity of such a partial's sign (NaN where partials of both signs
    reach it: inf - inf). Computed only when such a value is left unaccepted."""
    fmax = overflow_threshold(out_dtype)
    cand = torch.isfinite(truth) & (~torch.isfinite(got) | (got.abs() >= fmax)) & ~limited
    if not bool(cand.any()):
        return cand
    if "dk" not in cache:
        cache.update(per_head_partials(inputs.to(truth.device)))
    part = cache[name][: used_rows(problem, name)].to(truth.device)  # [rows, heads_q, dim]
    part = part.view(part.shape[0], problem.heads_kv, problem.group, part.shape[-1])
    at = part.abs() + limit >= fmax
    pos, neg = (at & (part > 0)).any(dim=2), (at & (part < 0)).any(dim=2)
    sign_ok = torch.where(got > 0, pos, torch.where(got < 0, neg, pos & neg))
    return cand & torch.where(torch.isnan(got), pos & neg, sign_ok)


def _edge(problem: Problem, name: str, yardstick: Any, device: Any) -> torch.Tensor | None:
    """The yardstick's ``overflow_edge`` rows of ``name`` (dq, dk), as a mask over its used
    rows broadcast across the head dim; None where it has none."""
    rows = (getattr(yardstick, "overflow_edge", None) or {}).get(name)
    return None if rows is None else rows[: used_rows(problem, name)].to(device).unsqueeze(-1)


def check_second_reference(
    problem: Problem, got: "Outputs", truth: "Outputs", second: Any, config: GateConfig, label: str
) -> list[Verdict]:
    """The kernel must also stay within k x (the second reference's error vs truth)."""
    verdicts = []
    for name in OUTPUTS:
        g, t, s = got.get(name), truth.get(name), second.get(name)
        if g is None or t is None or s is None:
            continue
        dev = t.device
        g, t, s = prepared(problem, name, g, dev), prepared(problem, name, t, dev), prepared(problem, name, s, dev)
        v = budget_gate(
            problem,
            name,
            g,
            t,
            s,
            config.second_reference_k.get(name, SECOND_REFERENCE_K[name]),
            config.floor_ulps,
            config.floor_magnitude,
            gate=Gate.SECOND_REFERENCE,
            ref_label=label,
            logit_scale=logit_magnitude(problem, truth),
            terms=_terms(truth, name),
            reference=f"{TRUTH} (yardstick: {label})",
        )
        verdicts.append(v)
    return verdicts
