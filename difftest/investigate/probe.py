"""``difftest probe -k KERNEL``: what does the kernel really serve, next to what it declares?

The adapter is called across each dimension of a Capability, one small Problem per point,
everything else held at a base problem the declaration covers (batch 1, one head, a short
sequence, a declared head dim and dtype, no mask):

- ``dtype``: float32, float16, bfloat16;
- ``head_dim``: 8, 16, ... 512 (``--head-dim-step``, ``--max-head-dim``), plus 1, 2, 4 and the
  declared head dims that are not on that grid (a few, spread);
- ``head_dim_v``: unequal pairs (qk, v);
- ``gqa``: query heads per key/value head 2, 4 and 8 (and 6/2);
- ``mask``: causal with seqlen_q == seqlen_k, shorter and longer queries under both alignments,
  sliding windows (left, right, both, with causal);
- ``varlen``: packed batches, an empty query/key sequence, unused tail tokens;
- ``sinks``; ``layout``: every memory layout of difftest/model/layouts.py; ``scale``: custom
  softmax scales; ``seqlen``: 1, tile edges, seqlen_q != seqlen_k, and long sequences up to
  ``--max-seqlen``; ``batch``.

Each point is judged by the same gates as a campaign case (float64 truth, same-dtype
yardsticks) with the kernel in the isolated worker (a crash or hang costs that point
only), and classified:

- **served**: every gate passed;
- **refused**: the adapter raised ``ValueError`` or ``NotImplementedError`` (what Python code
  raises for an argument it does not take; an adapter that checks its own declaration
  raises ValueError) or ``KernelUnavailable``: a clean refusal, no result;
- **failed**: accepted, then a wrong result (the failed gates), another exception (a
  compile error, an assertion deep in the backward), a crash or a hang.

The declaration is not consulted before calling (the probe widens the runner's pre-check
only; the worker runs the registered adapter as it is, its own checks included), so a
point outside the declaration shows what the adapter does with a call it never claimed.
From the served points the probe prints a draft ``Capability`` and lists where it differs
from the declared one, and the contract violations: points accepted then failed (inside
the declaration: a kernel bug a campaign should find; outside: a call the adapter accepts
without serving it, where it should refuse), points declared but refused (the declaration
claims too much) and points served but not declared (it claims too little: untested
surface). Exit 0 when the draft equals the declaration on every probed field and nothing
was accepted then failed, 1 otherwise, 2 for bad input.
"""

import copy
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from difftest.errors import InputError
from difftest.execute import adapter as registry
from difftest.model.capability import Capability
from difftest.model.layouts import LAYOUTS
from difftest.model.problem import DTYPES, MAX_HEAD_DIM, Problem, ProblemError
from difftest.vocab import Status

SERVED, REFUSED, FAILED = "served", "refused", "failed"
REFUSALS = ("ValueError", "NotImplementedError", "KernelUnavailable")
DIMENSIONS = ("dtype", "head_dim", "head_dim_v", "gqa", "mask", "varlen", "sinks", "layout", "scale", "seqlen", "batch")
DEFAULT_MAX_SEQLEN = 4096
DEFAULT_TIMEOUT_S = 300.0
EXTRA_DIMS = 6  # declared head dims off the step grid that are probed too (spread over the declared list)


class ProbeError(InputError):
    """Bad input (an option, an unknown kernel, a kernel that cannot run here): one line, exit 2
    (``cli.main``)."""


@dataclass
class Point:
    dimension: str
    label: str
    problem: Problem
    declared: bool  # the declared capability covers the problem
    outcome: str = ""
    detail: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "dimension": self.dimension,
            "label": self.label,
            "problem": self.problem.short(),
            "declared": self.declared,
            "outcome": self.outcome,
            "detail": self.detail,
            "seconds": self.seconds,
        }


# ---------------------------------------------------------------- the points
def _pick(declared, wanted):
    """``wanted`` if declared, else the declared value nearest to it."""
    return wanted if wanted in declared else min(declared, key=lambda x: (abs(x - wanted), x))


def base_problem(cap: Capability) -> Problem:
    """The problem every point varies one dimension of: small, inside the declaration."""
    dtype = next((d for d in ("float16", "bfloat16", "float32") if d in cap.dtypes), cap.dtypes[0])
    d = _pick(cap.head_dims_qk, 64)
    dv = d if d in cap.v_dims else _pick(cap.v_dims, d)
    s = max(16, cap.min_seqlen_q, cap.min_seqlen_k)
    s = -(-s // cap.seqlen_multiple) * cap.seqlen_multiple
    return Problem(
        batch=1,
        seqlen_q=s,
        seqlen_k=s,
        heads_q=1,
        heads_kv=1,
        head_dim_qk=d,
        head_dim_v=dv,
        dtype=dtype,
        causal=cap.causal_required,
        align=cap.aligns[0] if cap.aligns else "bottom_right",
    )


def _spread(xs, n):
    xs = sorted(xs)
    if len(xs) <= n:
        return xs
    return sorted({xs[round(i * (len(xs) - 1) / (n - 1))] for i in range(n)})


def head_dims(cap: Capability, step: int, top: int) -> list[int]:
    grid = set(range(step, top + 1, step)) | {1, 2, 4}
    off = [d for d in cap.head_dims_qk if d not in grid and d <= top]
    return sorted(grid | set(_spread(off, EXTRA_DIMS)))


def points(
    cap: Capability,
    dimensions=DIMENSIONS,
    *,
    head_dim_step: int = 8,
    max_head_dim: int = MAX_HEAD_DIM,
    max_seqlen: int = DEFAULT_MAX_SEQLEN,
) -> list[Point]:
    base = base_problem(cap)
    s = base.seqlen_q
    out: list[Point] = []

    def add(dim, label, **changes):
        try:
            p = base.replace(**changes).validate()
        except ProblemError:
            return  # e.g. a layout that cannot hold this problem
        why = cap.excludes(p)
        out.append(Point(dim, label, p, why is None))

    if "dtype" in dimensions:
        for t in DTYPES:
            add("dtype", t, dtype=t)
    if "head_dim" in dimensions:
        for hd in head_dims(cap, head_dim_step, max_head_dim):
            add("head_dim", str(hd), head_dim_qk=hd, head_dim_v=hd)
    if "head_dim_v" in dimensions:
        for qk, v in ((64, 32), (32, 64), (128, 64), (64, 128), (192, 128), (40, 24)):
            add("head_dim_v", f"{qk}/{v}", head_dim_qk=qk, head_dim_v=v)
    if "gqa" in dimensions:
        for hq, hkv in ((2, 1), (4, 1), (8, 1), (4, 2), (6, 2)):
            add("gqa", f"{hq}/{hkv}", heads_q=hq, heads_kv=hkv)
    if "mask" in dimensions:
        short, long_ = max(1, s // 2), 2 * s
        add("mask", f"causal sq=sk={s}", causal=True)
        for align in ("bottom_right", "top_left"):
            add("mask", f"causal sq{short}<sk{long_} {align}", causal=True, align=align, seqlen_q=short, seqlen_k=long_)
            add("mask", f"causal sq{long_}>sk{short} {align}", causal=True, align=align, seqlen_q=long_, seqlen_k=short)
        add("mask", "window left 4", window_left=4, causal=cap.causal_required)
        add("mask", "window right 3", window_right=3, causal=cap.causal_required)
        add("mask", "window 4/3", window_left=4, window_right=3, causal=cap.causal_required)
        add("mask", "causal + window left 4", causal=True, window_left=4)
    if "varlen" in dimensions:
        m = cap.seqlen_multiple
        a, b = max(m, -(-5 // m) * m), max(m, -(-9 // m) * m)
        add("varlen", f"lengths {a},{b}", batch=2, seqlen_q=(a, b), seqlen_k=(a, b))
        add("varlen", f"q {a},{b} k {b},{a}", batch=2, seqlen_q=(a, b), seqlen_k=(b, a))
        add("varlen", f"empty sequence {a},0,{b}", batch=3, seqlen_q=(a, 0, b), seqlen_k=(a, 0, b))
        add("varlen", f"empty queries 0,{a} k {a},{a}", batch=2, seqlen_q=(0, a), seqlen_k=(a, a))
        add("varlen", f"tail 8 after {a},{b}", batch=2, seqlen_q=(a, b), seqlen_k=(a, b), pad_tail=8)
    if "sinks" in dimensions:
        add("sinks", "sink 0", sinks=True)
        add("sinks", "sink 5 causal", sinks=True, sink_center=5.0, causal=True)
    if "layout" in dimensions:
        for kind in LAYOUTS:
            if kind == "kv_broadcast":  # one K/V head expanded to the query heads: an MHA call to the kernel
                add("layout", f"{kind} h2/1", layout=kind, heads_q=2, heads_kv=1)
            else:
                add("layout", kind, layout=kind)
    if "scale" in dimensions:
        for sc in (0.01, 1.0, 10.0):
            add("scale", f"{sc:g}", softmax_scale=sc)
    if "seqlen" in dimensions:
        m = cap.seqlen_multiple
        edges = {1, m, cap.block_m - 1, cap.block_m, cap.block_m + 1, cap.block_n + 1, 2 * cap.block_n + 1}
        for n in sorted(e for e in edges if 1 <= e <= max_seqlen):
            add("seqlen", str(n), seqlen_q=n, seqlen_k=n)
        add("seqlen", f"sq1 sk{s + 1}", seqlen_q=1, seqlen_k=s + 1)
        add("seqlen", f"sq{s + 1} sk1", seqlen_q=s + 1, seqlen_k=1)
        longs = {cap.max_seqlen, 2 * cap.max_seqlen, 4 * cap.max_seqlen, 256, 1024, max_seqlen}
        for n in sorted(n for n in longs if s < n <= max_seqlen):
            n = -(-n // m) * m
            add("seqlen", f"{n} (long)", seqlen_q=n, seqlen_k=n)
    if "batch" in dimensions:
        add("batch", "3", batch=3)
        if cap.max_batch + 1 != 3:
            add("batch", f"{cap.max_batch + 1} (declared max + 1)", batch=cap.max_batch + 1)
    return out


# ---------------------------------------------------------------- running a point
def unbounded(cap: Capability) -> Capability:
    """``cap`` with every drawable field opened: the runner's pre-check then lets every
    point through to the adapter (outputs, device, poison, determinism stay the kernel's)."""
    return replace(
        cap,
        dtypes=DTYPES,
        head_dims_qk=tuple(range(1, MAX_HEAD_DIM + 1)),
        head_dims_v=None,
        equal_head_dims=False,
        max_batch=1 << 20,
        max_seqlen=1 << 30,
        min_seqlen_q=1,
        min_seqlen_k=1,
        seqlen_multiple=1,
        max_heads=1 << 20,
        gqa=True,
        seqlen_q_ne_k=True,
        causal=True,
        causal_required=False,
        aligns=("top_left", "bottom_right"),
        window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=True,
        sinks=True,
        softmax_scale=True,
        values=None,
        layouts=LAYOUTS,
    )


def classify(result) -> tuple[str, str]:
    status = str(result.status)
    reason = (result.reason or "").strip().splitlines()
    first = reason[0][:200] if reason else ""
    if re.match(r"RuntimeError: [A-Za-z_][\w.]*(Error|Exception)\b", first):
        first = first[len("RuntimeError: ") :]  # the worker's wrapper around the kernel's own exception
    if status == Status.PASSED:
        return SERVED, ""
    if status == Status.SKIPPED:  # KernelUnavailable raised by the adapter for this call (in this process)
        return REFUSED, first
    if status == Status.ERROR:
        if (result.error_type or "") in REFUSALS:
            return REFUSED, first
        return FAILED, first
    return FAILED, ", ".join(result.failed_gates)


UNBOUNDED = "unbounded:"  # module attribute prefix: ``difftest.investigate.probe:unbounded:SPEC``


def __getattr__(name):
    """``unbounded:SPEC``: a factory of kernel SPEC with its capability opened
    (``unbounded``), so an adapter that checks its own declaration lets the call through
    to the kernel. A ``module:attr`` spec, so the isolated worker builds the same."""
    if not name.startswith(UNBOUNDED):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def factory():
        k = copy.copy(registry.get(name[len(UNBOUNDED) :]))
        k.capability = unbounded(k.capability)
        k.spec = f"{__name__}:{name}"
        return k

    return factory


def probe(kernel, pts: list[Point], config, progress=None, past_adapter_checks: bool = False) -> list[Point]:
    """Run every point (the kernel in the shared worker process) and classify it. The
    adapter runs as registered, its own checks included, unless ``past_adapter_checks``:
    then its capability is opened in the worker too, so the call reaches the kernel."""
    # lazy: keeps torch off --help
    from difftest.judge.runner import run_case

    if past_adapter_checks:
        wide = registry.get(f"{__name__}:{UNBOUNDED}{getattr(kernel, 'spec', None) or kernel.name}")
    else:
        wide = copy.copy(kernel)
        wide.capability = unbounded(kernel.capability)
    for i, pt in enumerate(pts):
        t0 = time.perf_counter()
        pt.outcome, pt.detail = classify(run_case(wide, pt.problem, config))
        pt.seconds = round(time.perf_counter() - t0, 2)
        if progress:
            progress(i, len(pts), pt)
    return pts


# ---------------------------------------------------------------- the draft
def _served(pts, dim):
    return [p for p in pts if p.dimension == dim and p.outcome == SERVED]


def _probed(pts, dim):
    return [p for p in pts if p.dimension == dim]


def _set_field(declared, probed: dict) -> tuple:
    """A tuple field's draft: the declared values no point probed, and the probed values
    that were served. ``probed``: value -> served?"""
    keep = [x for x in declared if x not in probed]
    return tuple(sorted(set(keep) | {x for x, ok in probed.items() if ok}, key=lambda x: (str(type(x)), x)))


def _bound(pts, dim, value, declared: int, pivot: int, upper: bool) -> int:
    """A max_* (``upper``: the points above ``pivot``) or min_* (the points below it)
    field's draft: the declared bound, moved inside the first declared point of ``dim``
    that was not served (``value(point)``: its size)."""
    side = [p for p in pts if p.dimension == dim and (value(p) > pivot if upper else value(p) < pivot)]
    bad = sorted(value(p) for p in side if p.declared and p.outcome != SERVED)
    if not bad:
        return declared
    good = [value(p) for p in pts if p.dimension == dim and p.outcome == SERVED]
    if upper:
        below = [g for g in good if g < bad[0]]
        return max(below) if below else pivot
    above = [g for g in good if g > bad[-1]]
    return min(above) if above else pivot


def draft(cap: Capability, pts: list[Point]) -> tuple[Capability | None, dict]:
    """(a Capability of what was served, {field: (declared, draft)} for every probed field
    that differs). Fields and values no point probed keep the declared value."""
    ch = {}
    if _probed(pts, "dtype"):
        got = _set_field(cap.dtypes, {p.problem.dtype: p.outcome == SERVED for p in _probed(pts, "dtype")})
        ch["dtypes"] = tuple(
            [t for t in cap.dtypes if t in got] + [t for t in DTYPES if t in got and t not in cap.dtypes]
        )
    if _probed(pts, "head_dim"):
        ch["head_dims_qk"] = _set_field(
            cap.head_dims_qk, {p.problem.head_dim_qk: p.outcome == SERVED for p in _probed(pts, "head_dim")}
        )
        if cap.head_dims_v is not None and set(cap.head_dims_v) != set(cap.head_dims_qk):
            ch["head_dims_v"] = cap.head_dims_v  # separate v dims: not probed apart from the unequal pairs
    if _probed(pts, "head_dim_v"):
        ch["equal_head_dims"] = not _served(pts, "head_dim_v")
    if _probed(pts, "gqa"):
        ch["gqa"] = bool(_served(pts, "gqa"))
    if _probed(pts, "mask"):
        served = _served(pts, "mask")
        causal = [
            p for p in served if p.problem.causal and p.problem.window_left is None and p.problem.window_right is None
        ]
        ch["causal"] = bool(causal)
        if not causal:
            ch["causal_required"] = False
        aligns = {p.problem.align for p in served if p.problem.seqlen_q != p.problem.seqlen_k}
        ch["aligns"] = tuple(a for a in ("top_left", "bottom_right") if a in aligns) or cap.aligns
        ch["window"] = any(p.problem.window_left is not None or p.problem.window_right is not None for p in served)
    if _probed(pts, "varlen"):
        served = _served(pts, "varlen")
        ch["varlen"] = bool(served)
        ch["empty_seqs"] = any(0 in p.problem.seqlens_q + p.problem.seqlens_k for p in served)
        ch["pad_tail"] = any(p.problem.pad_tail for p in served)
    if _probed(pts, "sinks"):
        ch["sinks"] = bool(_served(pts, "sinks"))
    if _probed(pts, "layout"):
        got = _set_field(cap.layouts, {p.problem.layout.kind: p.outcome == SERVED for p in _probed(pts, "layout")})
        ch["layouts"] = tuple(k for k in LAYOUTS if k in got)
    if _probed(pts, "scale"):
        ch["softmax_scale"] = bool(_served(pts, "scale"))
    if _probed(pts, "seqlen"):

        def longest(p):
            return max(p.problem.max_seqlen_q, p.problem.max_seqlen_k)

        def shortest(p):
            return min(p.problem.seqlen_q, p.problem.seqlen_k)

        pivot = base_problem(cap).seqlen_q
        ch["max_seqlen"] = _bound(pts, "seqlen", longest, cap.max_seqlen, pivot, upper=True)
        least = _bound(pts, "seqlen", shortest, min(cap.min_seqlen_q, cap.min_seqlen_k), pivot, upper=False)
        ch["min_seqlen_q"], ch["min_seqlen_k"] = max(least, cap.min_seqlen_q), max(least, cap.min_seqlen_k)
        ne = [p for p in _probed(pts, "seqlen") if p.problem.seqlen_q != p.problem.seqlen_k]
        if ne:
            ch["seqlen_q_ne_k"] = any(p.outcome == SERVED for p in ne)
    if _probed(pts, "batch"):
        ch["max_batch"] = _bound(pts, "batch", lambda p: p.problem.batch, cap.max_batch, 1, upper=True)

    def same(old, new):
        return set(old) == set(new) if isinstance(old, tuple) and isinstance(new, tuple) else old == new

    diffs = {k: (getattr(cap, k), v) for k, v in ch.items() if not same(getattr(cap, k), v)}
    try:
        return replace(cap, **ch), diffs
    except ValueError:  # nothing served in some field (e.g. no dtype): no valid Capability
        return None, diffs


def violations(pts: list[Point], past_adapter_checks: bool = False) -> list[str]:
    """Points accepted then failed, and declared points refused. With the adapter's own
    checks opened (``past_adapter_checks``) a failure outside the declaration is the
    kernel not serving what the adapter never admits: listed by ``not_served``, not here."""
    out = []
    for p in pts:
        where = f"{p.dimension} {p.label} ({p.problem.short()})"
        if p.outcome == FAILED and p.declared:
            out.append(f"accepted then failed, inside the declaration (a kernel bug): {where}: {p.detail}")
        elif p.outcome == FAILED and not past_adapter_checks:
            out.append(
                f"accepted then failed, outside the declaration (the adapter accepts a call it cannot "
                f"serve: it should refuse it): {where}: {p.detail}"
            )
        elif p.outcome == REFUSED and p.declared:
            out.append(f"declared but refused: {where}: {p.detail}")
    return out


def not_served(pts: list[Point]) -> list[str]:
    """Points outside the declaration the kernel did not serve (refused or failed)."""
    return [
        f"{p.dimension} {p.label}: {p.outcome}" + (f" ({p.detail})" if p.detail else "")
        for p in pts
        if p.outcome != SERVED and not p.declared
    ]


def undeclared_served(pts: list[Point]) -> list[str]:
    return [f"{p.dimension} {p.label}" for p in pts if p.outcome == SERVED and not p.declared]


# ---------------------------------------------------------------- rendering
def _ranges(xs) -> str:
    """``1, 2, 4, 8..56 step 8, 59``: runs of three or more with one step folded."""
    xs = sorted(set(xs))
    parts, i = [], 0
    while i < len(xs):
        j = i + 1
        if j < len(xs):
            step = xs[j] - xs[i]
            while j + 1 < len(xs) and xs[j + 1] - xs[j] == step:
                j += 1
        if j - i >= 2:
            parts.append(f"{xs[i]}..{xs[j]}" + (f" step {step}" if step != 1 else ""))
            i = j + 1
        else:
            parts.append(str(xs[i]))
            i += 1
    return ", ".join(parts) or "-"


def direction(field: str, old, new) -> str:
    """'claims too much' (the declaration covers what the kernel does not serve) or
    'claims too little' (it serves more), or both, for one differing field."""
    if isinstance(old, tuple) and isinstance(new, tuple):
        less, more = [x for x in old if x not in new], [x for x in new if x not in old]
        out = []
        if less:
            out.append(f"claims too much: {_values(less)} not served")
        if more:
            out.append(f"claims too little: {_values(more)} served")
        return "; ".join(out)
    if isinstance(old, bool):
        wider = (new and not old) if field not in ("equal_head_dims", "causal_required") else (old and not new)
    elif field.startswith("min_"):
        wider = new < old
    else:
        wider = new > old
    return "claims too little" if wider else "claims too much"


def _values(xs) -> str:
    return _ranges(xs) if all(isinstance(x, int) for x in xs) else ", ".join(map(str, xs))


def render(kernel_name: str, cap: Capability, pts: list[Point]) -> str:
    lines = [f"probe {kernel_name}: {len(pts)} points, base {base_problem(cap).short()}"]
    for dim in DIMENSIONS:
        ps = _probed(pts, dim)
        if not ps:
            continue
        if dim == "head_dim":
            for outcome in (SERVED, REFUSED, FAILED):
                group = [p for p in ps if p.outcome == outcome]
                if group:
                    lines.append(f"  head_dim {outcome}: {_ranges(p.problem.head_dim_qk for p in group)}")
            for p in ps:
                if p.outcome != SERVED and (p.declared or p.outcome == FAILED):
                    lines.append(f"    {p.label}: {p.outcome}{' (declared)' if p.declared else ''}: {p.detail}")
            refused = [p for p in ps if p.outcome == REFUSED and not p.declared]
            if refused:
                lines.append(f"    refused (not declared), e.g. {refused[0].label}: {refused[0].detail}")
            continue
        for p in ps:
            mark = "declared" if p.declared else "not declared"
            tail = f": {p.detail}" if p.detail else ""
            lines.append(f"  {dim} {p.label}: {p.outcome} ({mark}){tail}")
    return "\n".join(lines)


def render_draft(cap: Capability, pts: list[Point], past_adapter_checks: bool = False) -> str:
    d, diffs = draft(cap, pts)
    lines = []
    if d is None:
        lines.append(
            "draft Capability: none (some probed field served nothing: "
            + ", ".join(f"{k}={v[1]!r}" for k, v in diffs.items())
            + ")"
        )
    else:
        probed = sorted(diffs)
        lines.append("draft Capability (fields the probe measured that differ from the declaration):")
        body = ", ".join(f"{k}={getattr(d, k)!r}" for k in probed)
        lines.append(
            f"    Capability({body}, <the rest as declared>)"
            if probed
            else "    identical to the declaration on every probed field"
        )
    for k, (old, new) in sorted(diffs.items()):
        lines.append(f"  {k}: {direction(k, old, new)} (declared {_short(old)}, probed {_short(new)})")
    v = violations(pts, past_adapter_checks)
    lines.append(f"contract violations: {len(v)}" + ("" if v else " (none)"))
    lines += [f"  - {x}" for x in v]
    gone = not_served(pts)
    if gone and past_adapter_checks:  # what the kernel itself does not serve, behind the adapter's check
        lines.append(
            f"not declared, not served ({len(gone)}): " + "; ".join(gone[:12]) + (" ..." if len(gone) > 12 else "")
        )
    extra = undeclared_served(pts)
    if extra:
        lines.append(
            f"served but not declared ({len(extra)}): " + "; ".join(extra[:40]) + (" ..." if len(extra) > 40 else "")
        )
    return "\n".join(lines)


def _short(v) -> str:
    return f"({_values(v)})" if isinstance(v, tuple) and v and all(isinstance(x, int) for x in v) else repr(v)


def jsonable(v):
    return list(v) if isinstance(v, tuple) else v


def writable(path) -> bool:
    p = Path(path)
    return not p.is_dir() and (p.parent.is_dir() or not p.parent.exists())
