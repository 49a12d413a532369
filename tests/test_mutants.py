"""The mutant catalogue, the kill table and the grid baseline.

Each mutant's fault is shown to be REAL: on its hand-picked Problem the clean kernel
passes every gate, the mutant fails, and the mutant's outputs differ from the clean
kernel's. The CI gate (whole catalogue under the ci profile, zero survivors, within its
budget) is marked slow: CI runs it once through ``difftest mutants --profile ci``.
"""

import inspect
import sys
import time
import types

import pytest
import torch

from difftest.commands import mutants as mutants_front
from difftest.execute.adapter import KernelAdapter
from difftest.judge.runner import run_case
from difftest.kernels import mutants as catalogue
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.measure import grid as grid_mod
from difftest.measure import mutants as mutants_cmd
from difftest.model.inputs import lay_out, make_inputs
from difftest.model.problem import Problem
from difftest.model.profiles import get_profile

NAMES = sorted(catalogue.MUTANTS)
CI_TOTAL_BUDGET_S = get_profile("ci").mutant_total_s


def test_catalogue_has_20_plus_mutants_covering_every_bug_class():
    assert len(catalogue.MUTANTS) >= 20
    covered = {m.bug_class for m in catalogue.MUTANTS.values()}
    assert covered == set(catalogue.BUG_CLASSES), set(catalogue.BUG_CLASSES) - covered
    for m in catalogue.MUTANTS.values():
        assert m.description and m.example is not None, m.name
        k = m.make()
        assert isinstance(k, KernelAdapter) and k.name == m.name
        assert k.capability.deterministic  # every mutant claims what the clean kernel claims


@pytest.mark.parametrize("name", NAMES)
def test_each_mutant_is_a_small_deviation(name):
    """One or two overridden hooks of the clean kernel (the blockwise kernel, or the correct
    variant the mutant names as its clean one), nothing rewritten wholesale."""
    m = catalogue.MUTANTS[name]
    cls, clean = type(m.make()), type(m.make_clean())
    assert issubclass(cls, clean) and issubclass(clean, BlockwiseAttention)
    own = [n for n, v in vars(cls).items() if inspect.isfunction(v) and n != "__init__"]
    assert 1 <= len(own) <= 2, own
    assert all(hasattr(clean, n) for n in own), f"{own}: not hooks of the clean kernel"


@pytest.mark.parametrize("name", NAMES)
def test_each_fault_is_real(name):
    m = catalogue.MUTANTS[name]
    p = m.example
    clean = run_case(m.make_clean(), p)
    assert clean.status == "passed", clean.render()
    bad = run_case(m.make(), p)
    assert bad.status == "failed", bad.render()
    # and the mutant computes something different from the clean kernel (over three calls:
    # a second-call or reduction-order fault shows on a later call)
    x = lay_out(make_inputs(p))  # what a kernel receives: the Problem's memory layout
    ref = m.make_clean().run(x)
    k = m.make()
    differs = False
    for _ in range(3):
        got = k.run(x)
        for n, t in ref.items():
            g = got.get(n)
            if not torch.equal(g.contiguous().view(torch.uint8), t.contiguous().view(torch.uint8)):
                differs = True
    assert differs, f"{name} gives the clean kernel's bits on its own example"


def test_fault_stays_hidden_outside_its_trigger():
    """The conditional faults really are conditional: off their trigger they pass."""
    quiet = {
        "gqa-head-modulo": Problem(seqlen_q=12, seqlen_k=12, heads_q=4, heads_kv=1),  # MQA: h % 1 == h // 4
        "dq-workspace-not-zeroed": Problem(seqlen_q=8, seqlen_k=8),  # first call of a fresh kernel
        "lse-batch-offset-missing": Problem(batch=1, seqlen_q=8, seqlen_k=8),
        "odd-last-head-dropped": Problem(seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=2),
        "no-max-subtraction": Problem(seqlen_q=8, seqlen_k=8),
        "causal-align-swapped-bwd": Problem(seqlen_q=12, seqlen_k=12, causal=True),
    }
    for name, p in quiet.items():
        k = catalogue.MUTANTS[name].make()
        case = run_case(k, p, _one_run())
        assert case.status == "passed", case.render()


def _one_run():
    from difftest.judge.runner import RunConfig

    return RunConfig(determinism_runs=1)


def test_extra_sources_merge_lazily_and_skip_cleanly(monkeypatch):
    monkeypatch.setattr(catalogue, "EXTRA_SOURCES", ("difftest.kernels.no_such_mutants_module",))
    assert catalogue.all_mutants() == catalogue.MUTANTS
    assert "difftest.kernels.no_such_mutants_module" in catalogue.skipped_sources()

    fake = types.ModuleType("fake_tl_mutants")
    entry = catalogue.Mutant("tl-fake", "tail-blocks", "a fake TileLang mutant", BlockwiseAttention, source="tilelang")
    fake.MUTANTS = {"tl-fake": entry, "dsink-missing": entry}
    monkeypatch.setitem(sys.modules, "fake_tl_mutants", fake)
    monkeypatch.setattr(catalogue, "EXTRA_SOURCES", ("fake_tl_mutants",))
    merged = catalogue.all_mutants()
    assert merged["tl-fake"] is entry
    assert merged["dsink-missing"] is catalogue.MUTANTS["dsink-missing"]  # never shadows ours
    assert "fake_tl_mutants:dsink-missing" in catalogue.skipped_sources()


def test_unknown_mutant_names_the_known_ones():
    with pytest.raises(KeyError, match="known mutants"):
        catalogue.get("no-such-mutant")
    with pytest.raises(KeyError, match="known mutants"):
        mutants_cmd.run_mutants(["no-such-mutant"])


# ----------------------------------------------------------------------------- command
def test_command_kills_a_mutant_and_writes_the_table(tmp_path, capsys):
    import argparse

    p = argparse.ArgumentParser()
    mutants_front.add_arguments(p)
    out = tmp_path / "mutants.md"
    args = p.parse_args(
        [
            "--only",
            "dk-missing-scale",
            "--per-mutant-budget",
            "30",
            "--shrink-budget",
            "5",
            "--out",
            str(out),
            "--out-dir",
            str(tmp_path / "runs"),
        ]
    )
    assert mutants_front.command(args) == 0
    text = out.read_text()
    assert "| dk-missing-scale | scale | killed |" in text
    assert "dk:budget" in text and "1/1 killed" in text


def test_a_survivor_fails_the_run(monkeypatch, tmp_path):
    """The gate can fail: a 'mutant' that is the clean kernel survives, exit status 1."""
    clean = catalogue.Mutant("not-a-fault", "tail-blocks", "the clean kernel", BlockwiseAttention, Problem())
    monkeypatch.setattr(catalogue, "all_mutants", lambda: {"not-a-fault": clean})
    report = mutants_cmd.run_mutants(
        None, "quick", per_mutant_budget=3, shrink_budget=1, max_examples=3, out_dir=tmp_path
    )
    assert [r.status for r in report.rows] in (["survived"], ["spurious"])
    assert not report.ok and report.kills == 0
    assert "0/1 killed" in mutants_cmd.render_markdown(report)


def test_spurious_kill_is_not_counted(tmp_path):
    """A kill the clean kernel shares (a flaky gate, not the fault) counts as a survivor."""

    class BrokenClean(BlockwiseAttention):
        def dq_heads(self, p):
            return []

    entry = catalogue.Mutant(
        "spurious",
        "scale",
        "fails like its clean kernel",
        catalogue.MUTANTS["dk-missing-scale"].factory,
        Problem(),
        clean=BrokenClean,
    )
    row = mutants_cmd.run_mutant(entry, "quick", per_mutant_budget=20, shrink_budget=2, out_dir=tmp_path)
    assert row.status == "spurious" and row.clean_passes is False


def test_over_budget_fails_the_run():
    r = mutants_cmd.MutantReport("ci", 1.0, 1.0, time_budget=0.5)
    r.rows.append(mutants_cmd.MutantRow("m", "scale", "blockwise", "killed", seconds=0.1, elapsed=2.0))
    assert r.over_budget and not r.ok and not r.survivors
    r.time_budget = 5.0
    assert r.ok


def test_grid_comparison_rule():
    def report(kills, gkills, secs, gsecs):
        r = mutants_cmd.MutantReport("ci", 10, 5, 100, grid=True)
        for i in range(3):
            r.rows.append(
                mutants_cmd.MutantRow(
                    f"m{i}",
                    "tail-blocks",
                    "blockwise",
                    "killed" if i < kills else "survived",
                    seconds=secs,
                    grid_status="killed" if i < gkills else "survived",
                    grid_seconds=gsecs,
                )
            )
        return r

    assert report(3, 2, 5.0, 1.0).beats_grid()  # more kills wins
    assert not report(2, 3, 1.0, 5.0).beats_grid()
    assert report(2, 2, 1.0, 5.0).beats_grid()  # same kills, faster
    assert not report(2, 2, 5.0, 1.0).beats_grid()


# ----------------------------------------------------------------------------- grid
def test_grid_is_flashattention_shaped():
    cells = grid_mod.grid_problems()
    assert cells[0].dtype == "float16" and cells[1].dtype == "bfloat16"  # dtype varies fastest
    assert (cells[0].seqlen_q, cells[0].seqlen_k) == (113, 203)  # the pair varies slowest
    assert {c.dtype for c in cells} == {"float16", "bfloat16"}
    assert {(c.heads_q, c.heads_kv) for c in cells} == {(9, 9), (9, 1), (9, 3)}
    assert all(c.align == "bottom_right" and c.values == "normal" and c.pad_tail == 0 for c in cells)
    assert all(c.head_dim_qk == c.head_dim_v for c in cells)
    varlen = [c for c in cells if c.varlen]
    assert varlen and all(min(c.seqlens_q) >= 1 and min(c.seqlens_k) >= 1 for c in varlen)
    assert grid_mod.grid_problems() == cells  # fixed: the same grid every run
    # a kernel capped below FA2's 9 heads gets FA3's 6 (6/1/2), not a grid skipped wholesale
    small = grid_mod.grid_problems(max_heads=8)
    assert {(c.heads_q, c.heads_kv) for c in small} == {(6, 6), (6, 1), (6, 2)}


def test_grid_runs_in_order_until_a_failure_or_the_budget():
    small = [Problem(seqlen_q=8, seqlen_k=16, seed=i) for i in range(3)] + [Problem(seqlen_q=8, seqlen_k=40)]
    killed = grid_mod.run_grid(catalogue.MUTANTS["tail-key-tile-skipped-bwd"].make(), 60, problems=small)
    assert killed.failed and killed.examples_to_fail == 4 and len(killed.cases) == 4
    clean = grid_mod.run_grid(BlockwiseAttention(), 60, problems=small)
    assert not clean.failed and clean.exhausted
    starved = grid_mod.run_grid(BlockwiseAttention(), 0.0, problems=small)
    assert not starved.cases and not starved.exhausted


# ----------------------------------------------------------------------------- CI gate
@pytest.mark.slow
def test_ci_gate_whole_catalogue_zero_survivors_within_budget(tmp_path):
    t0 = time.perf_counter()
    report = mutants_cmd.run_mutants(None, "ci", out_dir=tmp_path)
    elapsed = time.perf_counter() - t0
    survivors = [(r.name, r.status, r.reason) for r in report.survivors]
    assert not survivors, mutants_cmd.render_markdown(report)
    print(f"\nwhole catalogue: {elapsed:.0f} s (budget {CI_TOTAL_BUDGET_S} s; not asserted: wall clock)")


def test_mutant_beyond_the_profile_is_shown_but_not_a_survivor():
    """A mutant the catalogue expects of the gpu profile (its trigger lies beyond what ci
    draws) runs under ci and shows its outcome, without failing the ci gate."""
    assert catalogue.MUTANTS["dq-cast-before-scale"].profile == "gpu"
    report = mutants_cmd.run_mutants(["dq-cast-before-scale"], "quick", per_mutant_budget=3, shrink_budget=3)
    row = report.rows[0]
    assert not row.expected and row.expected_of == "gpu" and report.survivors == []
    if not row.killed:
        assert "survived (expected of gpu)" in mutants_cmd.render_markdown(report)
    with pytest.raises(ValueError, match="allowed"):
        catalogue.mutant("sinks", Problem(), profile="nightly")


def test_mutants_takes_the_same_profile_flag_as_run():
    """`difftest run -p gpu` and `difftest mutants -p gpu` spell the profile alike (the short
    form was refused by mutants: an H200 call lost its mutant run to it)."""
    import argparse

    from difftest.commands.mutants import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    assert p.parse_args(["-p", "gpu"]).profile == "gpu"


def test_mutants_device_reaches_every_campaign_and_the_table(monkeypatch, tmp_path):
    """`difftest mutants --device cpu` hands the device to the campaigns (the H200 run uses
    --device cuda to run the blockwise catalogue on the GPU) and the table says which device."""
    import argparse

    seen = []
    real = mutants_cmd.run_mutant

    def spy(entry, profile, **kw):
        seen.append(kw["config"].device if kw.get("config") else None)
        return real(entry, profile, **kw)

    monkeypatch.setattr(mutants_cmd, "run_mutant", spy)
    p = argparse.ArgumentParser()
    mutants_front.add_arguments(p)
    out = tmp_path / "m.md"
    args = p.parse_args(
        [
            "--only",
            "dk-missing-scale",
            "--device",
            "cpu",
            "--per-mutant-budget",
            "30",
            "--shrink-budget",
            "5",
            "--out",
            str(out),
        ]
    )
    assert mutants_front.command(args) == 0
    assert seen == ["cpu"]
    assert "device cpu for every mutant" in out.read_text()


def test_mutants_device_cuda_without_cuda_is_a_usage_error(monkeypatch):
    import argparse

    import torch

    from difftest.argcheck import UsageError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    p = argparse.ArgumentParser()
    mutants_front.add_arguments(p)
    with pytest.raises(UsageError, match="--device cuda"):
        mutants_front.command(p.parse_args(["--only", "dk-missing-scale", "--device", "cuda"]))


NEW_DIMENSION = {  # mutant: its example off the dimension only it needs (no cap; non-negative sides)
    "softcap-ignored-bwd": dict(softcap=None),
    "softcap-fa4-b8-formula": dict(softcap=None),
    "softcap-derivative-missing": dict(softcap=None),
    "softcap-derivative-of-raw-logit": dict(softcap=None),
    "softcap-before-scale": dict(softcap=None),
    "crossed-window-as-full": dict(window_left=3, window_right=1),
    "negative-window-clamped": dict(window_left=2, window_right=4),
    "alibi-ignored-bwd": dict(alibi_slopes=None),
    "alibi-slope-of-kv-head": dict(alibi_slopes=None),
    "alibi-distance-top-left": dict(alibi_slopes=None),
    "alibi-causal-column-bias": dict(alibi_slopes=None),
    "relpos-ignored-bwd": dict(rel_bias=None),
    "relpos-row-of-kv-head": dict(rel_bias=None),
    "relpos-distance-sign-flipped": dict(rel_bias=None),
    "relpos-distance-top-left": dict(rel_bias=None),
    "relpos-clamp-right-only": dict(rel_bias=None),
}
ALIBI_MUTANTS = sorted(n for n in NEW_DIMENSION if n.startswith("alibi-"))
RELPOS_MUTANTS = sorted(n for n in NEW_DIMENSION if n.startswith("relpos-"))
# problems without ALiBi where each ALiBi mutant's hook would matter if it leaked: GQA with a
# bottom-right causal mask on unequal lengths, a varlen batch across tiles, sinks and a softcap
WITHOUT_ALIBI = [
    Problem(batch=2, seqlen_q=9, seqlen_k=30, heads_q=4, heads_kv=2, causal=True, head_dim_qk=16, head_dim_v=16),
    Problem(
        batch=2,
        seqlen_q=(40, 3),
        seqlen_k=(17, 35),
        heads_q=2,
        heads_kv=1,
        sinks=True,
        softcap=2.0,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float16",
    ),
]


@pytest.mark.parametrize("name", sorted(NEW_DIMENSION))
def test_new_dimension_mutants_hide_without_it(name):
    """These faults are killed only by the new dimensions: their own example with the cap or
    the ALiBi slopes removed, or its window sides made non-negative, passes every gate (so the old Problem
    model could not have found them; the FlashAttention-style grid, which has neither,
    does not: results/softcap.md)."""
    m = catalogue.MUTANTS[name]
    off = m.example.replace(**NEW_DIMENSION[name]).validate()
    case = run_case(m.make(), off, _one_run())
    assert case.status == "passed", case.render()
    assert run_case(m.make(), m.example, _one_run()).status == "failed"


# the kill is these campaigns' claim, not its shrink (2 s, 10 before): a mutant is killed by its
# first failure, the clean kernel passing the Problem the shrink reached in its seconds
KILL_SHRINK_S = 2


@pytest.mark.slow
def test_ci_pairs_every_dimension_with_a_tile_edge_so_a_first_tile_only_fault_is_killed():
    """ci covers every value once and then every value with each length class: dSink summed
    over the first query tile only (a fault past the first tile) survived ci's draws on
    6ecc778 (186 cases, no sinks past a tile edge), killed at example 99 in the table before."""
    report = mutants_cmd.run_mutants(["dsink-first-tile-only"], "ci", per_mutant_budget=60, shrink_budget=KILL_SHRINK_S)
    assert report.rows[0].killed, mutants_cmd.render_markdown(report)


@pytest.mark.parametrize("name", ALIBI_MUTANTS)
def test_alibi_mutants_are_the_clean_kernel_bit_for_bit_without_alibi(name):
    """Only ALiBi kills them: on problems without it (GQA, causal bottom-right, varlen, sinks,
    a softcap) each computes the clean kernel's outputs exactly."""
    m = catalogue.MUTANTS[name]
    assert m.bug_class == "alibi"
    for p in WITHOUT_ALIBI:
        x = make_inputs(p.validate())
        got, want = m.make().run(x), m.make_clean().run(x)
        for n in ("o", "lse", "dq", "dk", "dv"):
            assert torch.equal(getattr(got, n), getattr(want, n)), (name, n, p.short())


@pytest.mark.slow
def test_a_ci_campaign_kills_every_alibi_mutant_from_its_coverage_rows():
    """Unattended, no hand-picked problem: ci's coverage phase plans ALiBi (a configuration
    dimension where declared), so each ALiBi mutant dies within its budget (about a second each
    on an idle 2-core box; 17-49 s when only the draws and the edge corpus reached ALiBi)."""
    report = mutants_cmd.run_mutants(ALIBI_MUTANTS, "ci", per_mutant_budget=60, shrink_budget=KILL_SHRINK_S)
    assert all(r.killed for r in report.rows), mutants_cmd.render_markdown(report)


@pytest.mark.parametrize("name", RELPOS_MUTANTS)
def test_relpos_mutants_are_the_clean_kernel_bit_for_bit_without_a_table(name):
    """Only the relative-position table kills them: on problems without one (the ALiBi ones
    above, and one with ALiBi) each computes the clean kernel's outputs exactly."""
    m = catalogue.MUTANTS[name]
    assert m.bug_class == "relpos"
    for p in WITHOUT_ALIBI + [WITHOUT_ALIBI[0].replace(alibi_slopes=(0.5, 0.25, 0.125, 1.0))]:
        x = make_inputs(p.validate())
        got, want = m.make().run(x), m.make_clean().run(x)
        for n in ("o", "lse", "dq", "dk", "dv"):
            assert torch.equal(getattr(got, n), getattr(want, n)), (name, n, p.short())


@pytest.mark.slow
def test_a_ci_campaign_kills_every_relpos_mutant_from_its_coverage_rows():
    """Unattended, no hand-picked problem: ci's coverage phase plans the relative-position table
    (the configuration dimension relpos where declared) and its edge corners run first, so each
    relpos mutant dies within its budget (results/relpos.md)."""
    report = mutants_cmd.run_mutants(RELPOS_MUTANTS, "ci", per_mutant_budget=60, shrink_budget=KILL_SHRINK_S)
    assert all(r.killed for r in report.rows), mutants_cmd.render_markdown(report)
