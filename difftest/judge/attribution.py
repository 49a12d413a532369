"""Forward or backward? When a backward output (dQ, dK, dV, dSink) fails, judge it again
against a float64 backward built from the kernel's OWN forward statistics (P from the
kernel's LSE, Delta = rowsum(dO * O_kernel): oracles/own_stats.py), as seed
001's golden does, and say in the failed verdict where the error comes from:

- ``forward``: the backward output is within the same budget of that reference (and
  has non-finite values exactly where it has them): the backward did what a correct one
  does with the statistics it was handed, so the error comes from the forward's O/LSE;
- ``stored-rounding``: the same, but the kernel's O and LSE pass their own gates: the
  forward is right within its dtype, and the backward did what a correct one does with
  the O and LSE as stored (FlashAttention's Delta = rowsum(dO * O) from the stored O): the
  error is how the stored statistics' rounding propagates, which no output, feature or
  forward is to blame for (a budget that fails it is too tight for correct kernels);
- ``backward``: it is not: the backward is wrong even given its own statistics;
- ``unknown``: the kernel returned no O or LSE, or the reference could not be built.

The verdict gets ``numbers["source"]`` and ``numbers["own_stats_err"]`` and a message
suffix; nothing passes or fails because of it.
"""

import torch

from difftest.judge.gates import _finite_pair, _prep

BACKWARD = ("dq", "dk", "dv", "dsink")
REFERENCE = "float64 backward from the kernel's own O and LSE"


def _failed_backward(verdicts) -> dict:
    out = {}
    for v in verdicts:
        if not v.passed and v.output in BACKWARD and v.gate in ("budget", "elementwise", "nonfinite"):
            out.setdefault(v.output, []).append(v)
    return out


def _mark(verdicts, source, text, err=None):
    for v in verdicts:
        v.numbers["source"] = source
        if err is not None:
            v.numbers["own_stats_err"] = err
        v.message += f"; source: {text}"


def attribute(problem, inputs, got, truth, verdicts) -> None:
    """Annotate the failed backward verdicts of one case (see the module docstring)."""
    failed = _failed_backward(verdicts)
    if not failed:
        return
    if got.get("o") is None or got.get("lse") is None:
        for vs in failed.values():
            _mark(vs, "unknown", "unknown (the kernel returns no O/LSE to rebuild its backward from)")
        return
    from difftest.oracles.own_stats import own_stats_backward

    dev = truth.dq.device if truth.dq is not None else inputs.device
    try:
        own = own_stats_backward(inputs.to(dev), got.o.to(dev), got.lse.to(dev))
    except Exception as e:  # never lets an attribution end a case
        for vs in failed.values():
            _mark(vs, "unknown", f"unknown (the own-statistics reference failed: {type(e).__name__}: {e})")
        return
    limits = {v.output: v.numbers["limit"] for v in verdicts if v.gate == "budget" and "limit" in v.numbers}
    fwd_ok = {n: all(v.passed for v in verdicts if v.output == n) and any(v.output == n for v in verdicts)
              for n in ("o", "lse")}
    for name, vs in failed.items():
        g_raw, o_raw = got.get(name), own.get(name)
        if g_raw is None or o_raw is None or name not in limits:
            _mark(vs, "unknown", "unknown (no budget to judge the own-statistics reference by)")
            continue
        g, o = _prep(problem, name, g_raw, dev), _prep(problem, name, o_raw, dev)
        same_nonfinite = bool(torch.equal(torch.isfinite(g), torch.isfinite(o)))
        gf, of = _finite_pair(g, o)
        err = float((gf - of).abs().max()) if gf.numel() else 0.0
        lim = limits[name]
        if same_nonfinite and err <= lim and fwd_ok["o"] and fwd_ok["lse"]:
            _mark(vs, "stored-rounding", f"the rounding of the stored O/LSE, which pass their own gates: within "
                                         f"the budget of the {REFERENCE} (max|err| {err:.3g} <= limit {lim:.3g}), "
                                         f"as a correct kernel's backward is; no forward bug", err)
        elif same_nonfinite and err <= lim:
            _mark(vs, "forward", f"the forward statistics: within the budget of the {REFERENCE} "
                                 f"(max|err| {err:.3g} <= limit {lim:.3g})", err)
        else:
            why = f"max|err| {err:.3g} > limit {lim:.3g}" if err > lim else "non-finite where it is finite"
            _mark(vs, "backward", f"the backward itself: wrong even against the {REFERENCE} ({why})", err)


__all__ = ["BACKWARD", "REFERENCE", "attribute"]
