"""Determinism gate: the same inputs, N calls, bitwise-equal outputs.

Only a kernel that claims determinism (``Capability.deterministic``) can fail it; for
any other kernel the same measurement is reported under ``determinism_info`` and passes.

Every run is an answer a user can get, so a rerun that differs from the first is judged
like the first (``RunTally``, one run at a time; ``rerun_verdicts`` over a list): a
nondeterministic kernel may differ from run to run, never be wrong on one of them.
(flash-attn3-jax's backward writes past two buffers; 20 runs of one problem differed by up
to +inf on the H200, while only the first run was judged.)
"""

import torch

from difftest.judge.gates import Verdict, used_rows
from difftest.model.problem import OUTPUTS
from difftest.vocab import Gate


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view (NaN-safe bitwise comparison), on t's own device: a host copy of every
    output of every run cost a CUDA case ~50 ms (measured on the H200)."""
    t = t.detach().contiguous()
    itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(itype)


class RunTally:
    """Repeated runs' outputs compared with the first bit for bit, one run at a time
    (``add``), so that a stress of thousands of repetitions holds two runs, not all of
    them: per output the elements that differed in any run, the runs in which it
    differed and the largest difference; and, given ``judge`` (Outputs -> the verdicts
    the first run got), every run that differs from the first in any bit judged like it."""

    def __init__(self, problem, first, judge=None):
        self.problem, self.judge, self._first = problem, judge, first
        self.runs = 1
        self._base, self._bits, self._differ, self.max_diff, self.differing_runs = {}, {}, {}, {}, {}
        for name in OUTPUTS:
            t0 = first.get(name)
            if t0 is None:
                continue
            base = t0 if name == "dsink" else t0[: used_rows(problem, name)]
            self._base[name], self._bits[name] = base, _bits(base)
            self._differ[name] = torch.zeros(self._bits[name].shape, dtype=torch.bool, device=base.device)
            self.max_diff[name], self.differing_runs[name] = 0.0, 0
        self.judged = 0  # differing runs judged
        self.failing_reruns = 0  # of those, runs the judge failed
        self.first_failing: list = []  # [(run number, failing Verdict)] of the first failing rerun

    def add(self, run) -> bool:
        """Compare run number ``runs + 1`` with the first, and judge it when it differs in
        any bit; True when it differs."""
        self.runs += 1
        differs = False
        masks = {}
        for name, b0 in self._bits.items():
            t = run.get(name)
            t = (t if name == "dsink" else t[: used_rows(self.problem, name)]).to(b0.device)
            masks[name] = (t, _bits(t) != b0)
        # whether each output differs, and whether the runs differ anywhere (outside the used
        # rows, say): one host read (each read is a device synchronisation on a GPU)
        anywhere = _differ_anywhere(run, self._first)
        flags = _read_bools([d.any() for _, d in masks.values()] + [anywhere])
        for (name, (t, d)), hit in zip(masks.items(), flags):
            if hit:  # only differing elements are read back
                differs = True
                self._differ[name] |= d
                self.differing_runs[name] += 1
                a, b = t.detach()[d].double(), self._base[name].detach()[d].double()
                self.max_diff[name] = max(
                    self.max_diff[name], float(torch.nan_to_num((a - b).abs(), nan=float("inf")).max())
                )
        differs = differs or flags[-1]
        if differs and self.judge is not None:
            self.judged += 1
            bad = [v for v in self.judge(run) if not v.passed]
            if bad:
                self.failing_reruns += 1
                self.first_failing = self.first_failing or [(self.runs, v) for v in bad]
        return differs

    def verdicts(self, claimed: bool = True) -> list[Verdict]:
        """One determinism verdict per output (``claimed``: the kernel claims determinism,
        else informational): elements that differ from the first run in any later run, in
        how many runs, and by how much."""
        out = []
        counts = _read_ints([differ.sum() for differ in self._differ.values()])  # one host read
        for (name, differ), n in zip(self._differ.items(), counts):
            k = self.differing_runs[name]
            msg = (
                f"{name}: determinism {'FAILED' if n else 'ok'}: {n} of {differ.numel()} elements differ "
                f"across {self.runs} runs"
                + (f" (in {k} of {self.runs - 1} reruns)" if k else "")
                + f" (max |diff| {self.max_diff[name]:.3g})"
            )
            out.append(
                Verdict(
                    name,
                    Gate.DETERMINISM if claimed else Gate.DETERMINISM_INFO,
                    n == 0 or not claimed,
                    {
                        "runs": self.runs,
                        "differing": n,
                        "elements": differ.numel(),
                        "max_diff": self.max_diff[name],
                        "differing_runs": k,
                    },
                    None,
                    msg,
                    "first run",
                )
            )
        return out

    def rerun_verdicts(self) -> list[Verdict]:
        """The failing verdicts of the first differing rerun the judge failed, each message
        naming the run and how many differing reruns failed; [] when none failed."""
        failing, runs = self.failing_reruns, self.runs
        for i, v in self.first_failing:
            v.numbers = {**v.numbers, "run": i, "runs": runs, "failing_reruns": failing}
            v.message = f"run {i} of {runs} ({failing} failing rerun{'s' if failing != 1 else ''}): {v.message}"
        return [v for _, v in self.first_failing]


def determinism_verdicts(problem, runs: list, claimed: bool = True) -> list[Verdict]:
    """``runs``: Outputs of repeated calls on identical inputs. One verdict per output:
    how many elements differ from the first run in any later run, in how many runs, and
    by how much. ``claimed``: the kernel claims determinism (else the verdicts are
    informational)."""
    tally = RunTally(problem, runs[0])
    for run in runs[1:]:
        tally.add(run)
    return tally.verdicts(claimed)


def same_bits(a, b) -> bool:
    """Whether two runs' Outputs are bitwise identical in every output both have."""
    for name in OUTPUTS:
        x, y = a.get(name), b.get(name)
        if x is None or y is None:
            continue
        if x.shape != y.shape or not torch.equal(_bits(x), _bits(y)):
            return False
    return True


def _differ_anywhere(a, b):
    """``not same_bits(a, b)``, unread: a bool (True where shapes differ) or a 0-dim tensor."""
    flags = []
    for name in OUTPUTS:
        x, y = a.get(name), b.get(name)
        if x is None or y is None:
            continue
        if x.shape != y.shape:
            return True
        flags.append((_bits(x) != _bits(y).to(x.device)).any())
    return torch.stack(flags).any() if flags else False


def _read_bools(flags: list) -> list[bool]:
    """Bools and 0-dim bool tensors read to the host in one transfer."""
    ts = [f for f in flags if isinstance(f, torch.Tensor)]
    vals = iter(torch.stack([t.to(ts[0].device) for t in ts]).tolist() if ts else [])
    return [bool(next(vals)) if isinstance(f, torch.Tensor) else bool(f) for f in flags]


def _read_ints(counts: list) -> list[int]:
    """0-dim integer tensors read to the host in one transfer."""
    return [int(c) for c in torch.stack(counts).tolist()] if counts else []


def rerun_verdicts(runs: list, judge) -> list[Verdict]:
    """The failing verdicts of the first rerun that differs from run 1 and fails ``judge``
    (a callable: Outputs -> the verdicts the first run got), each message naming the run and
    how many differing reruns failed; [] when every differing rerun passes. Bitwise copies
    of run 1 are not judged again."""
    first: list[tuple[int, Verdict]]  # (run number, its failing verdict)
    failing, first = 0, []
    for i, run in enumerate(runs[1:], 2):
        if same_bits(run, runs[0]):
            continue
        bad = [v for v in judge(run) if not v.passed]
        if bad:
            failing += 1
            first = first or [(i, v) for v in bad]
    for i, v in first:
        v.numbers = {**v.numbers, "run": i, "runs": len(runs), "failing_reruns": failing}
        v.message = f"run {i} of {len(runs)} ({failing} failing rerun{'s' if failing != 1 else ''}): {v.message}"
    return [v for _, v in first]
