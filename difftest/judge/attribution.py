"""Forward or backward, and which correct design? When a backward output (dQ, dK, dV,
dSink) fails against the float64 truth, judge it again against a float64 backward built
from the kernel's OWN forward statistics (P from the kernel's LSE, Delta = rowsum(dO *
O_kernel): oracles/own_stats.py), as a golden-reference test does, and say where the error
comes from (``ErrorSource``):

- ``stored-rounding``: within the output's budget of that reference (non-finite exactly
  where it is), and the kernel's O and LSE pass their own gates. The forward is right in
  its dtype, and the backward did exactly what a correct one does with the O and LSE as
  stored: FlashAttention 2/3/4's Delta = rowsum(dO * O) from the stored fp16/bf16 O, whose
  rounding a saturated softmax and mixed-magnitude dO amplify far past what the same-dtype
  yardstick's own rounding shows (FA3 and FA4 fail the truth together, with identical
  outputs, on such problems: results/variants.md). That is a correct kernel, so the
  budget and nonfinite verdicts **pass**, judged against that reference (``reference``,
  ``numbers["source"]``, the truth's ratio kept as ``numbers["truth_ratio"]``): never silently;
- ``forward``: within that budget, but the kernel's O or LSE fails its gate: the backward
  did what a correct one does with the statistics it was handed, the error comes from the
  forward (the verdict stays failed);
- ``backward``: not within it: the backward is wrong even given its own statistics;
- ``unknown``: the kernel returned no O or LSE, or the reference could not be built.

A team's elementwise standard is stated against the truth and stays failed (annotated).
The failed verdicts get ``numbers["source"]``, ``numbers["own_stats_err"]`` and a message
suffix.
"""

import torch

from difftest.judge.gates import finite_pair, prepared
from difftest.oracles.own_stats import own_stats_backward
from difftest.vocab import ErrorSource, Gate

BACKWARD = ("dq", "dk", "dv", "dsink")
REFERENCE = "float64 backward from the kernel's own O and LSE"
# the gates a correct design's verdict is re-judged by (a team's elementwise standard is not)
DESIGN_GATES = (Gate.BUDGET, Gate.NONFINITE)


def _failed_backward(verdicts) -> dict:
    out: dict[str, list] = {}
    for v in verdicts:
        if not v.passed and v.output in BACKWARD and v.gate in (Gate.BUDGET, Gate.ELEMENTWISE, Gate.NONFINITE):
            out.setdefault(v.output, []).append(v)
    return out


def _mark(verdicts, source, text, err=None):
    for v in verdicts:
        v.numbers["source"] = source
        if err is not None:
            v.numbers["own_stats_err"] = err
        v.message += f"; source: {text}"


def _pass_as_design(v, err, lim):
    """A budget or nonfinite verdict of a correct design: passed against the own-statistics reference."""
    n = v.numbers
    if v.gate == Gate.BUDGET:
        n["truth_ratio"], n["truth_k_needed"] = n.get("ratio"), n.get("k_needed")
        ref_err, floor = n.get("ref_err", 0.0), n.get("floor", 0.0)
        n["ratio"] = err / lim if lim > 0 else (0.0 if err == 0 else float("inf"))
        n["k_needed"] = max(0.0, err - floor) / ref_err if ref_err > 0 else 0.0
    v.passed, v.worst, v.reference = True, None, REFERENCE
    v.message = (
        f"{v.output}: {v.gate} ok against the {REFERENCE} (max|err| {err:.3g} <= limit {lim:.3g}); "
        f"against the float64 truth: {v.message.split(': ', 2)[-1]}"
    )


def attribute(problem, inputs, got, truth, verdicts) -> None:
    """Annotate the failed backward verdicts of one case and pass a correct design's
    (see the module docstring)."""
    failed = _failed_backward(verdicts)
    if not failed:
        return
    if got.get("o") is None or got.get("lse") is None:
        for vs in failed.values():
            _mark(vs, ErrorSource.UNKNOWN, "unknown (the kernel returns no O/LSE to rebuild its backward from)")
        return

    dev = truth.dq.device if truth.dq is not None else inputs.device
    try:
        own = own_stats_backward(inputs.to(dev), got.o.to(dev), got.lse.to(dev))
    except Exception as e:  # never lets an attribution end a case
        for vs in failed.values():
            _mark(vs, ErrorSource.UNKNOWN, f"unknown (the own-statistics reference failed: {type(e).__name__}: {e})")
        return
    limits = {v.output: v.numbers["limit"] for v in verdicts if v.gate == Gate.BUDGET and "limit" in v.numbers}
    fwd_ok = {
        n: all(v.passed for v in verdicts if v.output == n) and any(v.output == n for v in verdicts)
        for n in ("o", "lse")
    }
    for name, vs in failed.items():
        g_raw, o_raw = got.get(name), own.get(name)
        if g_raw is None or o_raw is None or name not in limits:
            _mark(vs, ErrorSource.UNKNOWN, "unknown (no budget to judge the own-statistics reference by)")
            continue
        g, o = prepared(problem, name, g_raw, dev), prepared(problem, name, o_raw, dev)
        same_nonfinite = bool(torch.equal(torch.isfinite(g), torch.isfinite(o)))
        gf, of = finite_pair(g, o)
        err = float((gf - of).abs().max()) if gf.numel() else 0.0
        lim = limits[name]
        if same_nonfinite and err <= lim and fwd_ok["o"] and fwd_ok["lse"]:
            _mark(
                vs,
                ErrorSource.STORED_ROUNDING,
                f"the rounding of the stored O/LSE, which pass their own gates: within the budget of the "
                f"{REFERENCE} (max|err| {err:.3g} <= limit {lim:.3g}), as a correct kernel's backward is "
                f"(FlashAttention's Delta from the stored O); no forward bug",
                err,
            )
            for v in vs:
                if v.gate in DESIGN_GATES:
                    _pass_as_design(v, err, lim)
        elif same_nonfinite and err <= lim:
            _mark(
                vs,
                ErrorSource.FORWARD,
                f"the forward statistics: within the budget of the {REFERENCE} (max|err| {err:.3g} <= limit {lim:.3g})",
                err,
            )
        else:
            why = f"max|err| {err:.3g} > limit {lim:.3g}" if err > lim else "non-finite where it is finite"
            _mark(vs, ErrorSource.BACKWARD, f"the backward itself: wrong even against the {REFERENCE} ({why})", err)


__all__ = ["BACKWARD", "DESIGN_GATES", "REFERENCE", "attribute"]
