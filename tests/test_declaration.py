"""Declaration problems: an output declared but never returned, and a failure
that needs a feature claimed only by default, are reported naming the Capability field to
change; a run states the claim and the report stores it."""

import dataclasses

from difftest import Capability
from difftest.judge.declaration import claim_line, claim_record, defaulted
from difftest.judge.triage import Kind, classify
from difftest.oracles.reference import reference
from difftest.search.campaign import run_campaign
from tests.kernels_for_tests import RefKernel


class NoDsink(RefKernel):
    """Serves sinks but returns no dSink, while its capability keeps the default outputs."""

    name = "test-no-dsink"
    spec = "tests.test_declaration:NoDsink"
    capability = Capability(dtypes=("float32",), head_dims_qk=(8,), max_seqlen=8, max_heads=2, max_batch=1, sinks=True)

    def corrupt(self, inputs, out):
        out.dsink = None
        return out


class TopLeftOnly(RefKernel):
    """A correct causal kernel whose mask is top-left (torch SDPA's is_causal), declared
    with causal=True and the default aligns (bottom-right)."""

    name = "test-top-left"
    spec = "tests.test_declaration:TopLeftOnly"
    capability = Capability(
        dtypes=("float32",), head_dims_qk=(8,), max_seqlen=12, max_heads=2, max_batch=1, causal=True
    )

    def forward(self, inputs, out=None):
        top_left = dataclasses.replace(inputs, problem=inputs.problem.replace(align="top_left"))
        return reference(top_left, "float32"), None


class CausalOneKeyTooMany(RefKernel):
    """A causal bug (every query sees one key past the diagonal), declared causal=True with
    the default aligns: a kernel bug, not a declaration problem, although at sq = sk + 1
    it coincides with the top-left diagonal."""

    name = "test-causal-plus-one"
    spec = "tests.test_declaration:CausalOneKeyTooMany"
    capability = TopLeftOnly.capability

    def forward(self, inputs, out=None):
        p = inputs.problem
        if p.causal:
            p = p.replace(causal=False, window_right=1)
        return reference(dataclasses.replace(inputs, problem=p), "float32"), None


def test_declared_output_never_returned_is_a_declaration_problem_naming_the_field(tmp_path):
    res = run_campaign(NoDsink(), "quick", max_examples=4, out_dir=tmp_path, database=None, edge_cases=False)
    assert res.failed
    bad = [v for v in res.failure.verdicts if not v.passed]
    assert [v.gate for v in bad] == ["missing"] and bad[0].output == "dsink"
    assert "Capability.outputs" in bad[0].message and "outputs=('o', 'lse', 'dq', 'dk', 'dv')" in bad[0].message
    assert classify(res.failure) == Kind.DECLARATION
    assert any("declaration problem" in d for d in res.declaration)


def test_failure_needing_a_default_claim_names_the_field_to_change(tmp_path):
    res = run_campaign(TopLeftOnly(), "quick", max_examples=30, out_dir=tmp_path, database=None)
    assert res.failed and res.failure.problem.causal and res.failure.problem.seqlen_q != res.failure.problem.seqlen_k
    assert any("without aligns" in d and "aligns=('top_left',)" in d for d in res.declaration), res.declaration
    assert res.settings["capability"]["fields"]["aligns"] == ("bottom_right",)
    assert "aligns" in res.settings["capability"]["defaulted"]


def test_a_correctly_declared_kernel_gets_no_declaration_notes(tmp_path):
    fixed = TopLeftOnly()
    fixed.capability = dataclasses.replace(TopLeftOnly.capability, aligns=("top_left",))
    res = run_campaign(fixed, "quick", max_examples=30, out_dir=tmp_path, database=None)
    assert not res.failed and res.declaration == []


def test_claim_line_and_record_show_what_was_left_at_default():
    c = Capability(gqa=True, causal=True, varlen=True, pad_tail=True)
    line = claim_line("k", c)
    assert line.startswith("k claims: cpu float32,float16") and "GQA" in line and "tail rows" in line
    assert "aligns bottom_right" in line and "sinks" not in line
    rec = claim_record(c)
    assert "gqa" not in rec["defaulted"] and "sinks" in rec["defaulted"] and rec["fields"]["causal"] is True
    assert defaulted(c, "aligns") and not defaulted(c, "causal")


def test_a_mask_bug_is_not_blamed_on_the_declaration(tmp_path):
    res = run_campaign(CausalOneKeyTooMany(), "quick", max_examples=30, out_dir=tmp_path, database=None)
    assert res.failed and res.failure.problem.causal
    assert not any("aligns" in d for d in res.declaration), (
        res.failure.problem.short(),
        res.first_failure.problem.short(),
        res.declaration,
    )
