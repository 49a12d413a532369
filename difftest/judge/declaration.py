"""Declaration problems: failures that come from what a kernel claims, not from its maths.

Capability defaults claim the basics only, but a few of them are still claims a kernel may
not meet: ``seqlen_q_ne_k`` (seqlen_q != seqlen_k), ``softmax_scale`` (a custom scale),
``aligns`` (bottom-right when a mask meets unequal lengths) and ``outputs`` (every output,
LSE and dSink included). When a kernel's shrunk failure needs such a feature and the field
was left at its default, the likelier story is a wrong declaration, so the report says so
and names the field to change; likewise for an output the capability declares that the
kernel never returns. The claim itself is printed at the start of a run (``claim_line``)
and stored in the report (``claim_record``).
"""

import copy
from dataclasses import MISSING, asdict, fields, replace

from difftest.model.capability import Capability
from difftest.model.problem import OUTPUTS, Problem
from difftest.vocab import Status


def default_of(name: str):
    f = Capability.__dataclass_fields__[name]
    return f.default_factory() if f.default is MISSING else f.default  # type: ignore[operator]  # no default: a factory


def defaulted(cap: Capability, name: str) -> bool:
    """True when ``cap.name`` holds the default value (the kernel did not state it)."""
    return getattr(cap, name) == default_of(name)


def claim_record(cap: Capability) -> dict:
    """The capability as the report stores it, with the fields left at their defaults."""
    d = asdict(cap)
    return {"fields": d, "defaulted": [f.name for f in fields(Capability) if defaulted(cap, f.name)]}


def claim_line(name: str, cap: Capability) -> str:
    """One line: what ``name`` claims, features first (printed when a run starts)."""
    feats = [
        f
        for f, on in (
            ("GQA", cap.gqa),
            ("causal", cap.causal),
            ("window", cap.window),
            ("varlen", cap.varlen),
            ("empty seqs", cap.varlen and cap.empty_seqs),
            ("tail rows", cap.varlen and cap.pad_tail),
            ("sinks", cap.sinks),
            ("seqlen_q!=seqlen_k", cap.seqlen_q_ne_k),
            ("custom scale", cap.softmax_scale),
            ("poisoned buffers", cap.poison),
            ("deterministic", cap.deterministic),
            ("block-sparse", bool(cap.block_sparse)),
            ("top-k sparse", bool(cap.topk_sparse)),
        )
        if on
    ]
    if cap.causal or cap.window:
        feats.append("aligns " + "/".join(cap.aligns or ("square only",)))
    dims = ",".join(map(str, cap.head_dims_qk))
    dims += "" if cap.equal_head_dims else f" (v: {','.join(map(str, cap.v_dims))}, may differ)"
    return (
        f"{name} claims: {cap.device} {','.join(cap.dtypes)}; head dims {dims}; batch<={cap.max_batch} "
        f"seqlen {cap.min_seqlen_q}/{cap.min_seqlen_k}..{cap.max_seqlen} heads<={cap.max_heads}; "
        f"{', '.join(feats) or 'dense MHA only'}; layouts {','.join(cap.layouts)}; outputs {','.join(cap.outputs)}"
    )


def missing_output_message(name: str, expected) -> str:
    """The verdict text for an output the capability declares but the kernel did not return."""
    rest = tuple(o for o in (expected or OUTPUTS) if o != name)
    how = "the default, every output" if tuple(expected or OUTPUTS) == OUTPUTS else "as declared"
    return (
        f"{name}: declaration problem: Capability.outputs includes {name!r} ({how}) but the kernel returned "
        f"none; return it, or declare outputs={rest}"
    )


# (field, does the problem use the feature, the same problem without it, what to write)
def _without_unequal_lengths(p: Problem) -> Problem:
    if p.varlen:
        return p.replace(seqlen_k=tuple(p.seqlens_q))
    return p.replace(seqlen_k=p.seqlen_q)


CHECKS = (
    (
        "seqlen_q_ne_k",
        lambda p: p.seqlens_q != p.seqlens_k,
        _without_unequal_lengths,
        "seqlen_q_ne_k=False if the kernel needs seqlen_q == seqlen_k",
    ),
    (
        "aligns",
        lambda p: p.masked and p.seqlens_q != p.seqlens_k,
        lambda p: p.replace(align="top_left" if p.align == "bottom_right" else "bottom_right"),
        "aligns=('top_left',) if the kernel's mask starts at the top-left corner (torch SDPA's is_causal)",
    ),
    (
        "softmax_scale",
        lambda p: p.softmax_scale is not None,
        lambda p: p.replace(softmax_scale=None),
        "softmax_scale=False if the kernel always uses 1/sqrt(head_dim)",
    ),
)


# A failure whose every failed verdict is a budget verdict within this ratio of its limit is
# rounding-sized: a kernel that does not serve a feature (ignores the softmax scale, assumes
# seqlen_q == seqlen_k, the other alignment) errs by the size of the output, hundreds of limits
# at least, while a correct kernel's roundings on the edge of the budget sit near ratio 1. Such a
# failure passing without a feature says the feature moved the roundings, not that the kernel
# lacks it: no declaration hint (the budget is what to question).
ROUNDING_RATIO = 4.0


def rounding_sized(case) -> bool:
    """Every failed verdict of ``case`` is a budget verdict with ratio < ROUNDING_RATIO."""
    bad = [v for v in case.verdicts if not v.passed]
    return bool(bad) and all(v.gate == "budget" and v.numbers.get("ratio", float("inf")) < ROUNDING_RATIO for v in bad)


def diagnose(kernel, failure, run, first=None) -> list[str]:
    """Declaration problems behind a (shrunk) failing case: an output declared but never
    returned, or a feature claimed only by default without which the case passes, and
    so does ``first`` (the failure as first found, when it uses the feature too: a tiny
    shrunk case can pass without a feature by coincidence, e.g. an off-by-one diagonal
    that equals the other alignment at sq = sk + 1; a first failure that does not use the
    feature shows the bug without it). ``run(kernel, problem) ->
    CaseResult`` runs one case (the campaign's runner), with a widened capability for the
    alignment check (the other alignment is not claimed)."""
    if failure is None or failure.status not in (Status.FAILED, Status.ERROR):
        return []
    cap = kernel.capability
    out = []
    for v in failure.verdicts:
        if v.gate == "missing" and not v.passed:
            out.append(v.message)
    if failure.status == Status.FAILED and rounding_sized(failure):
        return out  # a rounding-sized failure is never blamed on a feature (ROUNDING_RATIO)
    p = failure.problem
    others = [first.problem] if first is not None and first.problem != p else []
    for name, used, without, how in CHECKS:
        if not defaulted(cap, name) or not used(p):
            continue

        def passes_without(x) -> bool:
            try:
                q = without(x).validate()
            except ValueError:
                return False
            probe = kernel
            if name == "aligns":  # try the other diagonal, which the kernel does not claim
                probe = copy.copy(kernel)
                probe.capability = replace(cap, aligns=(q.align,))
            return probe.capability.excludes(q) is None and run(probe, q).status == Status.PASSED

        # the first failure too must need the feature (else the bug shows without it)
        if passes_without(p) and all(used(x) and passes_without(x) for x in others):
            out.append(
                f"declaration problem? the case passes without {name} (left at its default, "
                f"{getattr(cap, name)!r}): declare {how}; if the kernel does serve it, this is a kernel bug"
            )
    return out
