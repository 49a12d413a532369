"""Capability defaults claim the basics only; every built-in kernel opted in
explicitly to what it used to get by default, so its resolved capability and the
coverage features it expects are exactly what they were before the change
(tests/data/capabilities.json.xz, recorded on the old defaults by tests/capability_snapshot.py
at d0559d8 and held by this test through the change, 64307f6). It keeps guarding every
built-in kernel's claim: a deliberate change of an adapter's capability re-records it
(``python3 tests/capability_snapshot.py | xz -9e > tests/data/capabilities.json.xz``, in the same
commit, saying why); a change of a default must not move it."""

import json
import lzma
from pathlib import Path

import pytest

from difftest import Capability, Problem

SNAPSHOT = Path(__file__).parent / "data" / "capabilities.json.xz"


@pytest.fixture(scope="module")
def now():
    from tests.capability_snapshot import resolved

    return resolved()


def test_every_builtin_kernel_resolves_to_its_recorded_capability(now):
    before = json.loads(lzma.decompress(SNAPSHOT.read_bytes()))
    for name, rec in before.items():
        if isinstance(rec, str):  # did not resolve when recorded (its package missing there)
            continue
        assert isinstance(now.get(name), dict), f"{name} no longer resolves: {now.get(name)}"
        cap = now[name]["capability"]
        changed = {f: (v, cap.get(f)) for f, v in rec["capability"].items() if cap.get(f) != v}
        assert not changed, (
            f"{name}: capability fields changed (recorded, now): {changed}; if deliberate, re-record "
            f"with python3 tests/capability_snapshot.py | xz -9e > tests/data/capabilities.json.xz"
        )


def _family(feature: str) -> str:
    return feature.split(":")[0].split("=")[0]


def test_every_builtin_kernel_expects_the_same_coverage_features(now):
    """Feature families added to strategies/coverage.py after the recording (e.g. layouts)
    cannot be compared and are left out; every recorded family must match exactly."""
    before = json.loads(lzma.decompress(SNAPSHOT.read_bytes()))
    before = {name: rec for name, rec in before.items() if not isinstance(rec, str)}
    known = {_family(f) for rec in before.values() for fs in rec["expected_features"].values() for f in fs}
    for name, rec in before.items():
        for profile, feats in rec["expected_features"].items():
            current = [f for f in now[name]["expected_features"][profile] if _family(f) in known]
            assert current == feats, (name, profile, set(current) ^ set(feats))


def test_the_defaults_claim_the_basics_only():
    c = Capability()
    assert not (c.gqa or c.causal or c.window or c.varlen or c.empty_seqs or c.pad_tail or c.sinks)
    assert c.equal_head_dims and c.aligns == ("bottom_right",) and c.seqlen_q_ne_k and c.softmax_scale
    dense = Problem(batch=2, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=2, head_dim_qk=16, head_dim_v=16)
    assert c.excludes(dense) is None
    for change, why in (
        (dict(heads_kv=1), "GQA"),
        (dict(causal=True), "causal"),
        (dict(window_left=2), "window"),
        (dict(sinks=True), "sinks"),
        (dict(head_dim_v=32), "head_dim"),
        (dict(softcap=5.0), "softcap"),
        (dict(alibi_slopes=(0.5, 0.25)), "ALiBi"),
        (dict(rel_bias=((0.5,), (0.25,))), "relative-position bias"),
        (dict(batch=1, seqlen_q=(3,), seqlen_k=(4,)), "varlen"),
    ):
        assert why in (c.excludes(dense.replace(**change).validate()) or ""), change


def test_unequal_head_dim_sets_need_the_opt_in():
    with pytest.raises(ValueError, match="equal_head_dims=False"):
        Capability(head_dims_qk=(192,), head_dims_v=(128,))
    assert Capability(head_dims_qk=(192,), head_dims_v=(128,), equal_head_dims=False).v_dims == (128,)


def test_negative_window_bounds_need_their_own_opt_in():
    """A kernel that declares windows is not drawn negative or crossed bounds unless it says so
    (flash-attn-4 before 4.0.0b30 read left + right < 0 as no window at all)."""
    window = Capability(window=True)
    assert window.excludes(Problem(window_left=3, window_right=0).validate()) is None
    for bounds in (
        dict(window_left=-2, window_right=4),
        dict(window_left=3, window_right=-1),
        dict(window_left=-3, window_right=1),
    ):
        assert "negative window" in window.excludes(Problem(**bounds).validate())
        assert Capability(window=True, negative_window=True).excludes(Problem(**bounds).validate()) is None


def test_an_unmasked_alibi_problem_needs_its_alignment_declared():
    """ALiBi's distance has the mask's diagonal (Problem.align): on unequal lengths even an
    unmasked ALiBi problem is outside a kernel whose ``aligns`` lack its align."""
    c = Capability(alibi=True, aligns=("bottom_right",))
    p = Problem(seqlen_q=5, seqlen_k=7, alibi_slopes=(0.5,))
    assert c.excludes(p.validate()) is None
    assert "ALiBi alignment top_left" in c.excludes(p.replace(align="top_left").validate())
    assert c.excludes(p.replace(align="top_left", seqlen_k=5).validate()) is None


def test_an_unmasked_relative_position_problem_needs_its_alignment_declared():
    """The table's distance has the mask's diagonal too: on unequal lengths an unmasked problem
    with a table is outside a kernel whose ``aligns`` lack its align."""
    c = Capability(rel_bias=True, aligns=("bottom_right",))
    p = Problem(seqlen_q=5, seqlen_k=7, rel_bias=((0.5, 0.0, 1.0),))
    assert c.excludes(p.validate()) is None
    assert "relative-position bias alignment top_left" in c.excludes(p.replace(align="top_left").validate())
    assert "relative-position bias unsupported" in Capability().excludes(p.validate())
