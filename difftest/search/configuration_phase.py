"""The coverage phase: every configuration corner a capability claims, run on schedule.

Real kernel bugs live at one corner of the configuration space (a head dim with a dtype, a
GQA ratio with a head dim, an empty key sequence), and random draws reach a corner by luck.
Between the explicit Problems and the value search, a campaign plans the capability's
configuration dimensions (``strategies.configurations``) as covering arrays and runs one
Problem per row, the cheapest that realises it, in stages:

1. every value of every dimension once (t = 1), before the edge corpus; a profile of strength
   1 (ci) then pairs every value with each class of ``length`` (short, tile edge, long), as
   most attention bugs live past the first tile;
2. every pair of values (t = 2), first without ``head_dim_v`` (its pairs with
   ``head_dim_qk`` are |qk| x |v| rows by themselves), then with it;
3. at strength 3, every triple of the dimensions of at most ``SMALL_DIMENSION`` values.

The profile's ``coverage`` is the highest stage (quick 0, ci 1, nightly and gpu 3); a row
runs only while it still covers a tuple no case of the campaign has covered, so the edge
corpus and earlier rows count. The phase is re-planned around every finding: a row a
finding explains is realised otherwise (other lengths, another value of a dimension the row
needs for nothing new) or, where every realisation is explained, its tuples are counted as
explained by a finding instead of run. What the cases covered is measured from the Problems
that ran (``pair_report``), not from the plan, and reported per pair of dimensions.
"""

import time
from functools import lru_cache
from itertools import combinations, islice

from difftest.search.plan_cache import PlanCache
from difftest.search.shard import owns
from difftest.strategies.compile import corpus_configs, corpus_only
from difftest.strategies.configurations import (
    NA,
    VARIANTS,
    claimed_pairs,
    decoding_only,
    dimensions,
    in_build,
    pair_text,
    pairs_of,
    plan,
    realise,
    realise_first,
    values_of,
    witness,
)
from difftest.strategies.values import DTYPE_ORDER, SCALES, clamp_scale, value_kinds
from difftest.vocab import Status

# the dimension whose every pair a strength-1 profile (ci) still covers: the lengths' classes
# (short, a tile edge, long), as most attention bugs live past the first tile
TILE_DIMENSION = "length"
SMALL_DIMENSION = 8  # a dimension of at most this many values takes part in the t = 3 stage
MISSING_LISTED = 5000  # missing pairs a report lists by name (the gate compares them)
SHARD_WINDOW = 16  # planned rows a shard chooses its next one among
VALUES_STAGE = "values past a tile edge"  # every value kind at its mildest rung, on rows of these lengths
VALUE_LENGTHS = ("tile_edge",)  # ("long" too doubled the stage's cost on the CPU main job, for no kill more)
# A compile-bound kernel's row that built a configuration is followed by value problems in that
# configuration (other value kinds, scales and seeds, other lengths where its compile key allows),
# while their seconds stay within VALUE_SHARE of what the build cost: a build is paid once and a
# warm call is cheap, so the values at each corner come almost free, as many as the build is dear.
# VALUES_PER_BUILD bounds only a build whose warm cases take milliseconds; at 8 it held a simulated
# flex (20 s builds, 0.2 s cases: the share pays for 25) to ~5 cases a compile key (results/compile-bound.md).
VALUE_SHARE = 0.25
VALUES_PER_BUILD = 256


@lru_cache(maxsize=64)
def _claimed(capability, profile, dims: tuple, strength: int) -> tuple[frozenset, frozenset]:
    claimed, illegal = claimed_pairs(capability, profile, dims, strength)
    return frozenset(claimed), frozenset(illegal)


def _best_first(rows, gain, window: int):
    """``rows`` in the order of the largest ``gain`` among the next ``window`` (1: as planned)."""
    buf = list(islice(rows, window))
    while buf:
        i = max(range(len(buf)), key=lambda j: gain(buf[j]))
        yield buf.pop(i)
        buf.extend(islice(rows, 1))


def _mapped(need, value, names: set):
    """A finding's need as (dimensions, predicate of a plan row), or None where no dimension
    says it (a bound, a tail, a value kind)."""
    if need == "causal":
        return ("mask",), lambda r: r["mask"] in ("causal", "causal_window")
    if need == "window":
        return ("mask",), lambda r: r["mask"].startswith("window") or r["mask"] == "causal_window"
    if need == "sinks":
        return ("sinks",), lambda r: r["sinks"] is True
    if need == "gqa":
        return ("group",), lambda r: r["group"] != 1
    if need == "varlen":
        return ("batching",), lambda r: r["batching"].startswith("varlen")
    if need == "pad_tail":
        return ("batching",), lambda r: r["batching"] == "varlen_pad_tail"
    if need in ("empty_q", "empty_k"):
        return ("batching",), lambda r, b=f"varlen_{need}": r["batching"] == b
    if need == "dims_differ" and {"head_dim_qk", "head_dim_v"} <= names:
        return ("head_dim_qk", "head_dim_v"), lambda r: r["head_dim_qk"] != r["head_dim_v"]
    if need == "alibi" and "alibi" in names:
        return ("alibi",), lambda r: r["alibi"] == "slopes"
    if need == "relpos" and "relpos" in names:
        return ("relpos",), lambda r: r["relpos"] != "none"
    if need == "softmax_scale" and "softmax_scale" in names:
        return ("softmax_scale",), lambda r: r["softmax_scale"] == "custom"
    if need in ("head_dim_qk", "dtype", "layout", "align") and need in names:
        return (need,), lambda r, allowed=frozenset(value): r[need] in allowed
    return None


class ConfigurationPhase:
    """The coverage phase of one campaign's search (``campaign.Search``)."""

    def __init__(self, search, strength: int):
        self.search = search
        c = search.c
        self.cap, self.prof = c.kernel.capability, c.profile
        self.strength = strength
        self.dims = dimensions(self.cap, self.prof)
        self.claimed, self.illegal = (
            _claimed(self.cap, self.prof, self.dims, 2) if len(self.dims) >= 2 else (frozenset(), frozenset())
        )
        self.explained: set = set()  # tuples every realisation of which a finding explains
        self.unrealised: set = set()  # tuples no realisation of the planned row reached
        self.values: dict = {}  # Problem -> values_of, cached
        self.rows = 0  # rows run
        self.realised_as: dict = {}  # the configuration ``_realise`` realised last (the row, or one moved)
        self.builds = 0  # rows of a compile-bound kernel that built a new configuration
        self.value_problems = 0  # run in a configuration a row built (``_values_in``)
        self.stage = None  # the stage reached: "t=1", "t=2 without head_dim_v", "t=2", "t=3"
        self.seconds_planning = 0.0
        self.plans = PlanCache(search.c.plan_cache)  # plans this campaign took before (a seeded run's)
        self.turn = 0  # the value kind the next row gets (round robin)
        # ci's CPU JIT kernels build only the corpus's configurations, before the run (strategies/compile.py):
        # the rows take those too
        self.corpus = (
            {self.cap.compile_signature(p) for p in corpus_configs(self.cap, self.prof)}
            if corpus_only(self.cap, self.prof)
            else None
        )

    # ------------------------------------------------------------------ the stages
    def run(self, strengths=(1, 2, 3)) -> None:
        """The stages of these strengths (a campaign runs t = 1 before the edge corpus, whose
        every problem a compile-bound kernel builds anew, and the rest after it)."""
        if self.strength <= 0 or not self.dims:
            return
        for name, t, dims in self._stages():
            if t in strengths:
                self.stage = name
                if name == VALUES_STAGE:
                    self._value_kinds()
                else:
                    self._stage(t, dims)

    def _stages(self):
        yield "t=1", 1, self.dims
        if self.strength == 1 and any(d.name == TILE_DIMENSION for d in self.dims):
            # every value of every dimension once more past a tile edge: a fault of one feature
            # beyond the first tile (a sink's gradient summed over the first query tile only)
            yield f"t=2 with {TILE_DIMENSION}", 2, self.dims
        if any(d.name == TILE_DIMENSION for d in self.dims):
            yield VALUES_STAGE, 2, self.dims
        if self.strength >= 2 and len(self.dims) >= 2:
            rest = tuple(d for d in self.dims if d.name != "head_dim_v")
            if len(rest) != len(self.dims) and len(rest) >= 2:
                yield "t=2 without head_dim_v", 2, rest
            yield "t=2", 2, self.dims
        small = tuple(d for d in self.dims if len(d.values) <= SMALL_DIMENSION)
        if self.strength >= 3 and len(small) >= 3:
            yield "t=3", 3, small

    def _targets(self, t: int, dims) -> tuple[set, set]:
        """(claimed, illegal) tuples of strength ``t`` over ``dims`` (at strength 1's pair
        stage, the pairs of ``TILE_DIMENSION`` alone)."""
        names = {d.name for d in dims}
        if t == 2:
            star = self.strength == 1
            return (
                {
                    p
                    for p in self.claimed
                    if {n for n, _ in p} <= names
                    and (not star or p[0][0] == TILE_DIMENSION or p[1][0] == TILE_DIMENSION)
                },
                {p for p in self.illegal if {n for n, _ in p} <= names},
            )
        if t == 1:
            singles = {(x,) for p in self.claimed for x in p if x[0] in names}
            return singles, set()
        t0 = time.perf_counter()
        claimed, illegal = _claimed(self.cap, self.prof, tuple(dims), t)
        self.seconds_planning += time.perf_counter() - t0
        return set(claimed), set(illegal)

    def _stage(self, t: int, dims) -> None:
        claimed, illegal = self._targets(t, dims)
        if t >= 2:
            illegal |= {p for p in self.illegal if {n for n, _ in p} <= {d.name for d in dims}}
        targets = claimed - self._covered(t, dims) - self.explained - self.unrealised
        # a shard plans rows for its own tuples (the other shards cover theirs: shard.owns)
        shard = self.search.c.shard
        targets = {tup for tup in targets if owns(pair_text(tup), shard)}
        while targets:
            t0 = time.perf_counter()
            kw: dict = dict(
                strength=t,
                covered=self._covered_rows(dims),
                illegal=illegal if t <= 2 else (),
                avoid=self._avoid(dims),
                salt=f"{self.search.c.seed}:{t}:{len(targets)}",
            )
            rows = self.plans.plan(dims, **kw, make=lambda dims=dims, kw=kw: plan(dims, **kw))
            self.seconds_planning += time.perf_counter() - t0
            try:
                progressed, replan = self._take(self._timed(rows), dims, t, targets, shard)
            finally:
                rows.save()
            if replan:
                targets -= self._covered(t, dims) | self.explained | self.unrealised
                continue
            if not progressed:
                self._mop_up(targets, dims, t)
                return
            targets -= self._covered(t, dims)

    def _timed(self, rows):
        """``rows`` with the time covertable takes to make each one counted as planning (a plan
        is a lazy generator: its rows are made while the cases run)."""
        it = iter(rows)
        while True:
            t0 = time.perf_counter()
            try:
                row = next(it)
            except StopIteration:
                return
            finally:
                self.seconds_planning += time.perf_counter() - t0
            yield row

    def _take(self, rows, dims, t: int, targets: set, shard) -> tuple[bool, bool]:
        """Run the rows of a plan that cover targets (``targets`` shrinks as they run):
        (whether a row covered a target, whether a new finding asks for a new plan). A plan
        whose rows covered none leaves the rest to the mop-up: planning again would realise
        the same rows again."""
        progressed, found = False, len(self.search.st.found)

        def gain(row):
            return len(pairs_of({n: {v} for n, v in row.items()}, dims, t) & targets)

        # the plan covers every tuple; a shard owns a share of them, so it takes the row of
        # the most tuples of its own among the next SHARD_WINDOW the plan offers
        for row in _best_first(iter(rows), gain, SHARD_WINDOW if shard else 1):
            new = pairs_of({n: {v} for n, v in row.items()}, dims, t) & targets
            if not new:
                continue
            p = self._realise(row, new, dims)
            if p is None:
                targets -= self.explained | self.unrealised
                continue
            left = len(targets)
            for q in self._run(p, self.realised_as):
                targets -= pairs_of(self._values(q), dims, t)
            progressed |= len(targets) < left  # a row counts as progress by the tuples it covered
            if len(self.search.st.found) != found:
                return progressed, True  # re-plan around the new finding
        return progressed, False

    def _mop_up(self, targets: set, dims, t: int) -> None:
        """Tuples no planned row reached (the plan's constraints keep rows a finding explains
        away, or three dimensions conflict): each realised alone where no finding explains it
        and run, else counted as explained by a finding or as unrealised."""
        done = set()
        for tup in sorted(targets, key=repr):
            if tup in done:
                continue
            p = self._realise(dict(tup), {tup}, dims)
            if p is not None:
                self._run(p)
                done |= pairs_of(self._values(p), dims, t)

    # ------------------------------------------------------------------ one row
    def _run(self, problem, row: dict | None = None) -> list:
        """Run a row's Problem (and, after a new build, value problems in its configuration);
        returns the Problems run."""
        search = self.search
        key = self.cap.compile_signature(problem) if self.cap.compile_key else None
        built = key is not None and key not in search.st.built
        case = search.visit(problem)  # BudgetSpent once the search's share of the budget is spent
        self.rows += 1
        if case is not None:
            search.st.mode.visited(case)
            self.builds += built
            if built and row is not None and case.status == Status.PASSED:
                return [problem, *self._values_in(row, problem, case.seconds)]
        return [problem]

    def _values_in(self, row: dict, built, build_s: float) -> list:
        """Value problems in the configuration the row ``built`` (``build_s`` seconds with its
        build): the first measures a warm case; the next run while their seconds, each
        expected to take as long as the last, stay within VALUE_SHARE of what the build cost
        beyond a warm case (VALUES_PER_BUILD at most; a value problem that built anew, the
        compile key missing what it changed, spends the share at once). Each is the row
        realised anew (the next value kind and scale, a new seed, other lengths and windows),
        on the build's compile key where that realisation's is another (``in_build``: a key
        naming the lengths, Flex's, kept 4 of 32 realisations before). A failure ends them (the
        hunt takes it)."""
        st, key = self.search.st, self.cap.compile_signature(built)
        allowance = last = spent = 0.0  # seconds the values may take after the first; the last one's; spent
        ran: list = []
        i = 0
        while len(ran) < VALUES_PER_BUILD and i < 4 * max(len(ran), VARIANTS):
            if ran and spent + last > allowance:
                break
            i += 1
            free = {**self._free(row), "seed": (built.seed + 7919 * i) % 2**31}
            p = realise(row, self.cap, self.prof, variant=i - 1, free=free)
            if p is not None and self.cap.compile_signature(p) != key:
                p = in_build(built, p, self.cap, self.prof)
            if p is None or p in st.seen or st.explained_problem(p) or self.cap.compile_signature(p) != key:
                continue
            case = self.search.visit(p)
            ran.append(p)
            self.value_problems += 1
            if case is None:
                continue
            st.mode.visited(case)
            if case.status != Status.PASSED:
                break
            last = max(case.seconds, 1e-3)
            if len(ran) == 1:
                allowance = VALUE_SHARE * max(0.0, build_s - last)
            else:
                spent += last
        return ran

    def _realise(self, row: dict, new: set, dims):
        """The cheapest Problem realising ``row`` that no finding explains; else with one
        dimension moved to another value (first one the row's new tuples do not involve,
        then any: the row still covers what it can); else None. A single tuple that cannot
        be realised goes to the explained tuples (a finding explains every realisation) or
        the unrealised ones; a row of several is left to the mop-up, tuple by tuple."""
        keep = {n for tup in new for n, _ in tup}
        if any(set(need_dims) <= keep and holds(row) for need_dims, holds in self._avoid(self.dims)):
            self.explained |= new  # a finding explains every Problem with these values
            return None
        free = self._free(row)
        t = len(next(iter(new)))

        def covers(p) -> bool:
            """``p`` exercises one of the new tuples at least (a row may hold values no Problem
            has together, ``n/a`` alignment under a window, as the t = 3 plans know no illegal
            triples: its realisation has other values)."""
            return not new.isdisjoint(pairs_of(self._values(p), dims, t))

        def accept(p) -> bool:
            return self._fresh(p) and covers(p)

        p = realise_first(row, self.cap, self.prof, free=free, accept=accept)
        if p is not None:
            self.realised_as = row
            return p
        movable = [d for d in self.dims if d.name not in keep]
        if len(new) > 1:  # a row of several new tuples still covers the others with one of them moved,
            # the dimension of the fewest new tuples first
            count = {d.name: sum(d.name in {n for n, _ in tup} for tup in new) for d in self.dims if d.name in keep}
            movable += sorted((d for d in self.dims if d.name in keep), key=lambda d: count[d.name])
        for d in movable:
            for v in d.values:
                if v == row.get(d.name) or v == NA:
                    continue
                moved = {**row, d.name: v}
                p = realise_first(moved, self.cap, self.prof, free=free, accept=accept, variants=2)
                if p is not None:
                    self.realised_as = moved
                    return p
        if len(new) == 1:
            # a tuple alone: any completion of it (the t = 3 stage's claimed triples were found so)
            p = witness(dict(next(iter(new))), self.cap, self.prof, self.dims, accept=accept)
            if p is not None:
                self.realised_as = self._row_of(p)
                return p
            if witness(dict(next(iter(new))), self.cap, self.prof, self.dims, accept=covers) is not None:
                self.explained |= new
            else:
                self.unrealised |= new
        return None

    def _fresh(self, p) -> bool:
        """``p`` has not run, no finding explains it, and (ci's CPU JIT kernels) its
        configuration is one the corpus built."""
        st = self.search.st
        return (
            p not in st.seen
            and not st.explained_problem(p)
            and (self.corpus is None or self.cap.compile_signature(p) in self.corpus)
        )

    def _value_kinds(self) -> None:
        """Every value kind at its mildest rung on a row of each ``VALUE_LENGTHS`` class, where
        no case of the campaign ran it yet: a structured kind's fault (exact key ties meeting
        the online softmax's rescale, near-constant keys) needs keys spread over several tiles,
        and ci's draws gave tied keys 6 of 217 cases, mostly short."""
        lengths = next(d.values for d in self.dims if d.name == TILE_DIMENSION)
        done = set()
        for p in self._ran():
            if p.values in SCALES and p.value_scale == SCALES[p.values][0][0]:
                done |= {(p.values, cls) for cls in self._values(p).get(TILE_DIMENSION, ())}
        dtype = next(d for d in DTYPE_ORDER if d in self.cap.dtypes)  # the one realise_first takes
        for kind in value_kinds(self.cap):
            for cls in VALUE_LENGTHS:
                if cls not in lengths or (kind, cls) in done:
                    continue
                row = {TILE_DIMENSION: cls}
                free = {"values": kind, "value_scale": clamp_scale(kind, SCALES[kind][0][0], dtype)}
                p = realise_first(row, self.cap, self.prof, free=free, accept=self._fresh)
                if p is not None:
                    self._run(p, row)

    def _free(self, row: dict) -> dict:
        """The next value kind in turn, at the next rung of its ladder of scales."""
        kinds = value_kinds(self.cap)
        kind = kinds[self.turn % len(kinds)]
        ladder = SCALES[kind][0]
        scale = ladder[(self.turn // len(kinds)) % len(ladder)]
        dtype = row.get("dtype") or next(iter(self.cap.dtypes))
        self.turn += 1
        return {"values": kind, "value_scale": clamp_scale(kind, scale, dtype)}

    # ------------------------------------------------------------------ what ran
    def _values(self, p) -> dict:
        v = self.values.get(p)
        if v is None:
            v = self.values[p] = values_of(p, self.cap, self.dims)
        return v

    def _ran(self):
        return [p for p, c in self.search.st.seen.items() if c.status != Status.SKIPPED]

    def _covered(self, t: int, dims) -> set:
        out = set()
        for p in self._ran():
            out |= pairs_of(self._values(p), dims, t)
        return out

    def _row_of(self, p) -> dict:
        """The configuration ``p`` realises: its first value of each dimension it has one of."""
        v = self._values(p)
        return {d.name: min(v[d.name], key=d.values.index) for d in self.dims if v.get(d.name)}

    def _covered_rows(self, dims) -> list[dict]:
        """One row per Problem that ran: its first value of each dimension (a preset of the plan);
        not a decoding step's, whose other tuples still need a row (configurations.pairs_of)."""
        rows = []
        for p in self._ran():
            v = self._values(p)
            if all(v.get(d.name) for d in dims) and not decoding_only(v):
                row = self._row_of(p)
                rows.append({d.name: row[d.name] for d in dims})
        return rows

    def _avoid(self, dims) -> list:
        """Each finding whose every need a dimension says, as (dimensions, predicate): a row
        it holds for is planned no more."""
        names = {d.name for d in dims}
        out = []
        for f in self.search.st.found:
            for sig in f.signatures:
                mapped = [_mapped(n, v, names) for n, v in sig.needs]
                if not sig.needs or any(m is None for m in mapped):
                    continue
                need_dims = tuple(sorted({n for m in mapped for n in m[0]}))
                preds = [m[1] for m in mapped]
                out.append((need_dims, lambda r, preds=preds: all(pr(r) for pr in preds)))
        return out

    def record(self) -> dict:
        """What the phase did, for the campaign's settings."""
        return {
            "strength": self.strength,
            "stage": self.stage,
            "rows": self.rows,
            "builds": self.builds,
            "value_problems": self.value_problems,
            "dimensions": [str(d) for d in self.dims],
            "explained_tuples": len(self.explained),
            "unrealised_tuples": len(self.unrealised),
            "seconds_planning": round(self.seconds_planning, 2),
        }


def pair_report(phase: ConfigurationPhase, cases) -> dict:
    """The t = 2 coverage of the cases that ran, against the pairs the capability claims:
    {"strength", "dimensions", "claimed", "covered", "explained", "by_dimensions": {"a x b":
    [covered, claimed]}, "missing": [pair text...], "phase": phase.record()}."""
    dims = phase.dims
    if len(dims) < 2:
        return {}
    hit = set()
    for c in cases:
        if c.status != Status.SKIPPED:
            hit |= pairs_of(phase._values(c.problem), dims, 2)
    hit &= phase.claimed
    by = {}
    for a, b in combinations(dims, 2):
        by[f"{a.name} x {b.name}"] = [0, 0]
    for pair in phase.claimed:
        row = by[" x ".join(n for n, _ in pair)]
        row[1] += 1
        row[0] += pair in hit
    missing = phase.claimed - hit
    return {
        "strength": 2,
        "dimensions": [d.name for d in dims],
        "claimed": len(phase.claimed),
        "covered": len(hit),
        "explained": len(missing & phase.explained),
        "by_dimensions": {k: v for k, v in by.items() if v[1]},
        "missing": sorted(pair_text(p) for p in missing)[:MISSING_LISTED],
        "phase": phase.record(),
    }
