"""difftest probe: test kernels whose true support differs from their declaration (one
refuses a head dim it declares, one is silently wrong at a declared head dim, one serves
GQA it never declared, one crashes at a head dim it does not declare, one refuses all it
does not declare) must each come out as served / refused / failed where they really are,
with the draft Capability and the contract violations saying so."""

import json
import os
import signal

import pytest

from difftest.commands import cli
from difftest.investigate import probe as P
from difftest.judge.runner import RunConfig
from difftest.model.capability import Capability
from tests.kernels_for_tests import RefKernel, full_capability

DIMS = (16, 32, 48, 64)
CAP = full_capability(dtypes=("float32", "float16"), head_dims_qk=DIMS, max_seqlen=64, max_heads=8, max_batch=4)


class RefusesDeclared48(RefKernel):
    """Declares head dim 48, raises its refusal there."""

    name = "probe-refuses-48"
    spec = "tests.test_probe:RefusesDeclared48"
    capability = CAP

    def forward(self, inputs, out=None):
        if inputs.problem.head_dim_qk == 48:
            raise ValueError("head_dim 48 is not supported by this kernel")
        return super().forward(inputs, out)


class WrongAtDeclared32(RefKernel):
    """Declares head dim 32, returns dQ 1.5x too large there."""

    name = "probe-wrong-32"
    spec = "tests.test_probe:WrongAtDeclared32"
    capability = CAP

    def corrupt(self, inputs, out):
        if inputs.problem.head_dim_qk == 32:
            out.dq = out.dq * 1.5
        return out


class ServesUndeclaredGqa(RefKernel):
    """Serves GQA (the reference does) but declares none."""

    name = "probe-undeclared-gqa"
    spec = "tests.test_probe:ServesUndeclaredGqa"
    capability = Capability(dtypes=("float32",), head_dims_qk=DIMS, max_seqlen=64, gqa=False)


class CrashesAt24(RefKernel):
    """Kills its process at head dim 24 (not declared): one point lost, the rest run."""

    name = "probe-crash-24"
    spec = "tests.test_probe:CrashesAt24"
    capability = CAP

    def corrupt(self, inputs, out):
        if inputs.problem.head_dim_qk == 24:
            os.kill(os.getpid(), signal.SIGKILL)
        return out


class ChecksItsDeclaration(RefKernel):
    """Refuses every call outside its declaration, as the SDPA CPU adapters do."""

    name = "probe-self-check"
    spec = "tests.test_probe:ChecksItsDeclaration"
    capability = CAP

    def forward(self, inputs, out=None):
        why = self.capability.excludes(inputs.problem)
        if why:
            raise ValueError(f"{self.name} does not support {inputs.problem.short()}: {why}")
        return super().forward(inputs, out)


CONFIG = RunConfig(isolate=True, timeout_s=120, determinism_runs=1)


def _probe(kernel, dims=("head_dim",), **kw):
    pts = P.points(kernel.capability, dims, **{"head_dim_step": 8, "max_head_dim": 64, **kw})
    return P.probe(kernel, pts, CONFIG)


def _by_dim(pts):
    return {p.problem.head_dim_qk: p for p in pts if p.dimension == "head_dim"}


def test_a_declared_head_dim_the_kernel_refuses():
    k = RefusesDeclared48()
    pts = _by_dim(_probe(k))
    assert pts[48].outcome == P.REFUSED and pts[48].declared and "head_dim 48" in pts[48].detail
    assert all(pts[d].outcome == P.SERVED for d in (16, 32, 64))
    assert pts[24].outcome == P.SERVED and not pts[24].declared  # the reference serves every dim
    draft, diffs = P.draft(k.capability, list(pts.values()))
    assert 48 not in draft.head_dims_qk and {16, 32, 64, 8, 24} <= set(draft.head_dims_qk)
    assert "head_dims_qk" in diffs
    assert any(v.startswith("declared but refused: head_dim 48") for v in P.violations(list(pts.values())))


def test_a_declared_head_dim_the_kernel_gets_wrong():
    k = WrongAtDeclared32()
    pts = _by_dim(_probe(k))
    assert pts[32].outcome == P.FAILED and "dq:budget" in pts[32].detail
    v = P.violations(list(pts.values()))
    assert len(v) == 1 and "inside the declaration (a kernel bug)" in v[0] and "head_dim 32" in v[0]
    draft, _ = P.draft(k.capability, list(pts.values()))
    assert 32 not in draft.head_dims_qk


def test_undeclared_gqa_that_is_served_widens_the_draft():
    k = ServesUndeclaredGqa()
    pts = _probe(k, ("gqa", "dtype"))
    assert all(p.outcome == P.SERVED for p in pts)  # the reference serves float16 too
    draft, diffs = P.draft(k.capability, pts)
    assert draft.gqa and diffs["gqa"] == (False, True)
    assert set(draft.dtypes) == {"float32", "float16", "bfloat16"}
    assert "gqa 2/1" in P.undeclared_served(pts)
    assert P.violations(pts) == []


def test_a_crash_costs_one_point():
    k = CrashesAt24()
    pts = _by_dim(_probe(k))
    assert pts[24].outcome == P.FAILED and "SIGKILL" in pts[24].detail, pts[24].detail
    assert [d for d, p in pts.items() if p.outcome != P.SERVED] == [24]  # every point after it ran
    v = P.violations(list(pts.values()))
    assert len(v) == 1 and "outside the declaration (the adapter accepts a call it cannot serve" in v[0]
    assert P.violations(list(pts.values()), past_adapter_checks=True) == []  # opened on purpose: the kernel's limit
    assert P.not_served(list(pts.values()))[0].startswith("head_dim 24: failed")


def test_an_adapter_that_checks_its_declaration_matches_it():
    k = ChecksItsDeclaration()
    pts = _probe(k, ("head_dim", "sinks", "varlen"))
    for p in pts:
        assert p.outcome == (P.SERVED if p.declared else P.REFUSED), (p.label, p.outcome, p.detail)
    draft, diffs = P.draft(k.capability, pts)
    assert diffs == {} and P.violations(pts) == []
    assert set(draft.head_dims_qk) == set(DIMS)


def test_past_adapter_checks_reaches_the_kernel():
    """With the adapter's own check opened too, the kernel behind it (the reference,
    which serves everything) shows through: what it serves beyond the declaration."""
    k = ChecksItsDeclaration()
    pts = P.probe(
        k,
        P.points(k.capability, ("head_dim", "sinks"), head_dim_step=8, max_head_dim=64),
        CONFIG,
        past_adapter_checks=True,
    )
    assert all(p.outcome == P.SERVED for p in pts), [(p.label, p.detail) for p in pts if p.outcome != P.SERVED]
    draft, diffs = P.draft(k.capability, pts)
    assert diffs["head_dims_qk"][1] == (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
    assert "claims too little: 1, 2, 4, 8..56 step 16 served" == P.direction("head_dims_qk", *diffs["head_dims_qk"])


def test_points_cover_every_dimension_inside_the_problem_model():
    cap = CAP
    pts = P.points(cap)
    dims = {p.dimension for p in pts}
    assert dims == set(P.DIMENSIONS)
    hd = sorted(p.problem.head_dim_qk for p in pts if p.dimension == "head_dim")
    assert set(range(8, 513, 8)) <= set(hd) and max(hd) == 512
    layouts = {p.problem.layout.kind for p in pts if p.dimension == "layout"}
    from difftest.model.layouts import LAYOUTS

    assert layouts == set(LAYOUTS)
    assert any(0 in p.problem.seqlens_q for p in pts if p.dimension == "varlen")
    assert any(p.problem.window_left is not None for p in pts if p.dimension == "mask")
    assert max(p.problem.max_seqlen_q for p in pts if p.dimension == "seqlen") == P.DEFAULT_MAX_SEQLEN
    for p in pts:
        p.problem.validate()
    assert cap.excludes(P.base_problem(cap)) is None


def test_probe_command_prints_the_draft_and_exits_1_on_a_violation(tmp_path, capsys):
    out = tmp_path / "probe.json"
    rc = cli.main(
        [
            "probe",
            "-k",
            "tests.test_probe:WrongAtDeclared32",
            "--dimensions",
            "head_dim",
            "--max-head-dim",
            "64",
            "--head-dim-step",
            "16",
            "--json",
            str(out),
            "-q",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 1
    assert "head_dim failed: 32" in text and "contract violations: 1" in text and "draft Capability" in text
    d = json.loads(out.read_text())
    assert d["differences"]["head_dims_qk"][1] == [1, 2, 4, 16, 48, 64]
    assert len(d["violations"]) == 1


@pytest.mark.parametrize(
    "args, words",
    [
        (["-k", "torch-blockwise", "--dimensions", "head_dim,bogus"], "--dimensions"),
        (["-k", "no-such-kernel"], "unknown kernel"),
        (["-k", "torch-blockwise", "--max-head-dim", "1024"], "--max-head-dim"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words, capsys):
    rc = cli.main(["probe", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and words in err[0], err
