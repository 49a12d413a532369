"""The coverage phase's covering arrays (strategies/covering_array.py): covertable's greedy
generator with its constraints answered from a table per constraint plans the same rows as
covertable itself, and asks each constraint's function once per tuple of its dimensions'
values (covertable 3.2 asked it on every check: millions of calls a nightly campaign with
findings, most of its planning time)."""

import random
from collections import Counter
from itertools import combinations

import pytest
from covertable import make_async
from hypothesis import given, settings
from hypothesis import strategies as st

from difftest.strategies.configurations import Dimension, plan
from difftest.strategies.covering_array import covering_rows, supported


@st.composite
def _problems(draw):
    """Factors, strength, forbidden tuples as fn constraints (some predicates of two or three
    dimensions, like a finding's needs), presets and a salt."""
    n = draw(st.integers(3, 6))
    factors = {f"d{i}": [f"v{i}.{j}" for j in range(draw(st.integers(2, 4)))] for i in range(n)}
    names = list(factors)
    rng = random.Random(draw(st.integers(0, 2**32)))
    constraints = []
    for _ in range(draw(st.integers(0, 6))):
        dims = rng.sample(names, rng.choice((1, 2, 2, 3)))
        bad = {tuple(rng.choice(factors[d]) for d in dims) for _ in range(rng.randint(1, 4))}

        def legal(row, dims=tuple(dims), bad=frozenset(bad)):
            return tuple(row[d] for d in dims) not in bad

        constraints.append({"operator": "fn", "requires": list(dims), "evaluate": legal})
    presets = [
        {d: rng.choice(vs) for d, vs in factors.items() if rng.random() < 0.8} for _ in range(draw(st.integers(0, 3)))
    ]
    strength = draw(st.sampled_from((2, 2, 3)))
    return factors, strength, constraints, presets, draw(st.text("0123456789:", max_size=6))


@pytest.mark.skipif(not supported(), reason="covertable is not the version the controller overrides")
@settings(max_examples=150, deadline=None)
@given(_problems())
@pytest.mark.slow
def test_the_tabled_controller_plans_the_rows_covertable_plans(problem):
    factors, strength, constraints, presets, salt = problem
    kw = dict(strength=strength, salt=salt, presets=presets)
    ours = list(covering_rows(factors, constraints=constraints, **kw))
    theirs = list(make_async(factors, constraints=constraints or None, **kw))
    assert ours == theirs


def test_a_plan_asks_each_avoided_predicate_once_per_tuple_of_its_values():
    dims = (
        Dimension("a", (1, 2, 3)),
        Dimension("b", ("x", "y", "z", "w")),
        Dimension("c", (True, False)),
        Dimension("d", ("p", "q", "r")),
    )
    calls: Counter = Counter()

    def needs_a1_with_x(row):
        calls[(row["a"], row["b"])] += 1
        return row["a"] == 1 and row["b"] == "x"

    illegal = {(("c", True), ("d", "r"))}
    rows = list(plan(dims, strength=2, illegal=illegal, avoid=[(("a", "b"), needs_a1_with_x)], salt="7"))
    assert calls and max(calls.values()) == 1, calls  # covertable 3.2 asked dozens of times a tuple
    assert not any(r["a"] == 1 and r["b"] == "x" for r in rows)
    assert not any(r["c"] is True and r["d"] == "r" for r in rows)
    wanted = {
        ((m.name, u), (n.name, w))
        for m, n in combinations(dims, 2)
        for u in m.values
        for w in n.values
        if ((m.name, u), (n.name, w)) not in illegal and not (m.name == "a" and n.name == "b" and (u, w) == (1, "x"))
    }
    assert wanted <= {((m.name, r[m.name]), (n.name, r[n.name])) for r in rows for m, n in combinations(dims, 2)}
