"""Hunt mode (profiles nightly and gpu; ``hunt=True``): the search never stops at a
failure. A failing case that the findings so far do not explain
(``signature.unexplained_gates``) is shrunk right there, toward a failure none explains,
within the shrink budget and ``finding_calls`` runs, then signed and kept as a ``Finding``,
or merged into the finding whose bug it is (``signature.same_identity``: one finding per
root cause, its needs widened to the smallest rule covering both), and the search goes on.
A case that misses a finding's rule by one head dim, dtype or alignment is first tried on
that finding's own Problem moved there (``signature.widening``): failing alike, the finding
widens, one run instead of a shrink and a signature. On a kernel with a compile key a
shrink builds at most ``SHRINK_BUILDS`` new configurations (none for an error of a kind a
finding has).

The budget goes to what no finding explains: a Problem a finding explains is not run
(``steer_every`` runs 1 in N of them instead, 0 all), and the coverage phase plans around
the findings. Failing cases left unexplained when the findings cap or the budget ran out
are counted and listed, with what would have them shrunk. Known findings (``--known``)
replay first, are listed, never shrunk, and neither stop nor fail the campaign."""

import dataclasses
from pathlib import Path

from difftest.execute.isolation import fresh_worker
from difftest.judge import triage
from difftest.judge.declaration import diagnose
from difftest.model.problem import Problem
from difftest.search.findings import Finding, Findings
from difftest.search.first_failure import FINISH_FLOOR_S
from difftest.search.shrinking import simplify
from difftest.search.signature import (
    MAX_VARIATIONS,
    RACE_CONFIRM,
    RACY,
    derive,
    escapes,
    failure_of,
    fold,
    merged,
    one_bug,
    root_gates,
    same_identity,
    unexplained_gates,
    widening,
)
from difftest.vocab import CampaignStatus, Status
from difftest.workdir import DEFAULT_OUT

# The share of what is left before the deadline one finding's shrink may take, so that its
# signature's variations still run inside the budget.
SHRINK_SHARE = 0.7
# The share of the whole budget one finding's shrink, and then its signature's variations, may
# each take (at least FINISH_FLOOR_S): a compile-bound kernel's shrink steps and variations
# compile, and a 420 s FA4 campaign once spent nearly all of it on its first findings, never
# reaching its coverage phase.
FINDING_SHARE = 0.05
# New builds one finding's shrink may make on a kernel that declares a compile key: a shrink
# step that moves a compiled field (a head dim, the dtype, the heads) is a compile, ~1-3 s on
# FA4, and a shrink walking the head dims down one at a time spent most of a 420 s campaign's
# budget there (simulated: tests/test_compile_bound.py). Lengths, batch and values shrink
# freely inside what is built; the signature's variations say which compiled fields matter.
SHRINK_BUILDS = 3
# Earlier failures tried as the case that left the kernel's process corrupt, for a wrong result that
# passes alone (``Hunt._culprit``): each costs a fresh worker process and two runs.
CULPRITS = 3


class Hunt:
    hunting = True

    def __init__(self, state):
        self.state = state
        self.explained_drawn = 0
        self.skipped = set()

    # ------------------------------------------------------------------ during the search
    def recorded(self, case) -> None:
        pass

    def visited(self, case) -> None:
        if case.failed:
            self.hunt(case)

    def steer(self, problem):
        """The Problem to run for a drawn or planned ``problem``: itself when no finding
        explains it (replayed and corner Problems always run), else a neighbour no finding
        explains (``signature.escapes``: one need undone, the draw's other features kept),
        else None (not run). ``steer_every`` N runs 1 in N explained Problems as they are,
        which checks the signature and can show a bug it hides; 0 runs them all. Each
        Problem not run is counted on its finding."""
        st = self.state
        every = st.settings.steer_every
        if every == 0 or problem in st.explicit:
            return problem
        who = [f for f in st.found if st.finding_explains(f, problem)]
        if not who:
            return problem
        if problem in self.skipped:
            return None
        self.explained_drawn += 1
        if every is not None and self.explained_drawn % every == 0:
            return problem
        cap = st.settings.kernel.capability
        for f in who:
            for sig in f.signatures:
                for q in escapes(sig, problem, cap):
                    if q not in st.seen and not st.explained_problem(q):
                        st.result.settings["steered"] = st.result.settings.get("steered", 0) + 1
                        return q
        self.skipped.add(problem)
        who[0].skipped += 1
        st.result.explained_skipped += 1
        return None

    def search_over(self) -> bool:
        return self.state.now() > self.state.search_end

    # ------------------------------------------------------------------ one finding
    def hunt(self, case) -> Finding | None:
        """``case`` failed: when no finding explains all of its failing gates, shrink it
        toward what none explains, sign it (signature.derive) and keep it as a new finding,
        unless it is the bug of one already found (then that finding's rule widens)."""
        st = self.state
        s = st.settings
        new = unexplained_gates(st.signatures(), case)
        if not new:
            return None
        if len(st.found) >= s.max_findings + sum(f.known for f in st.found) or st.now() > st.deadline:
            return None  # counted as unexplained at the end
        widened = self._widen(case, new)
        if widened is not None:
            return widened
        t = st.now()
        st.result.settings["hunt_attempts"] = st.result.settings.get("hunt_attempts", 0) + 1
        n_new = sum(not f.known for f in st.found) + 1
        source = st.known_problems.get(case.problem)  # a known failure-store Problem: not shrunk again
        writer = (
            None
            if source
            else Findings(
                s.kernel,
                s.config,
                (s.out_dir or Path(DEFAULT_OUT)) / "repro",
                s.database,
                s.spec,
                st.run_id,
                number=n_new,
            )
        )
        best, calls = case, 0
        if writer is not None:
            st.log_event("hunt", {"number": n_new, "problem": case.problem.to_dict()})
            writer.found(case, case)
            budget = min(
                s.shrink_budget, max(FINISH_FLOOR_S, FINDING_SHARE * st.time_budget), SHRINK_SHARE * (st.deadline - t)
            )
            # an error of a kind a finding has (exception and message shape) is most likely that
            # finding's bug met at another corner: its shrink builds nothing new, its signature
            # decides (same_identity below merges it, or keeps it as a bug of its own)
            alike = case.status == Status.ERROR and any(
                sig.error_type and sig.fails_alike(case) for sig in st.signatures()
            )
            best, calls = self._shrink_toward(case, new, writer, budget, 0 if alike else SHRINK_BUILDS)
        target = (unexplained_gates(st.signatures(), best) & new) or new
        # a wrong result only: a race (its determinism gate alone) passes a fresh run by chance, not by history
        steady = writer is not None and triage.classify(best) == triage.Kind.WRONG_RESULT
        clean = self._clean() if steady else None
        history = False
        if clean is not None:
            best, more, history = self._alone(case, best, new, target, writer, budget, clean)
            calls += more
        # the signature's variations get their own share: each compiles anew on a JIT kernel (FA4 on the
        # H100 spent ~200 of 240 s signing three findings, five seconds a variation)
        signed_by = min(st.deadline, st.now() + max(FINISH_FLOOR_S, FINDING_SHARE * st.time_budget))
        sig = derive(
            best,
            st.run_seen,
            s.kernel.capability,
            gates=target,
            budget_calls=0 if history else MAX_VARIATIONS,  # history: no variation measures a need
            deadline=lambda: st.now() > signed_by,
            rerun=st.case,
            clean=clean,
            hidden=lambda q: st.hidden_by_error(q, best),
        )
        if history:
            culprit = self._culprit(case, best, target, clean)
            sig = dataclasses.replace(sig, history=True, after=culprit.short() if culprit else "")
            if writer is not None and culprit is not None:  # its reproducer runs P first, in one process
                writer.before = (culprit,)
                writer.write(best)
        if clean is not None:  # the search goes on where the failing runs left nothing behind
            clean()
        if history:
            st.result.settings["history_dependent"] = st.result.settings.get("history_dependent", 0) + 1
        for f in st.found:
            if any(
                same_identity(x, sig, best.problem, f.best.problem if f.best is not None else None)
                for x in f.signatures
            ):
                if sig not in f.signatures:
                    f.variants.append(sig)  # the same bug, reached from elsewhere: it explains this too
                    if not f.known:
                        f.signature = merged(f.signature, sig)  # the smallest rule covering both
                if writer is not None:
                    writer.discard()  # its reproducer pair was only a candidate's
                    # the hunt is over: a new finding's line again (its variants now), else a mark
                    st.log_event(*(("merged", {"number": n_new}) if f.known else ("finding", f.log_record())))
                return f
        if writer is not None and writer.best is not best:
            writer.write(best)
        f = Finding(
            sig,
            first=case,
            best=best,
            known=source is not None,
            source=source or "",
            reproducer=writer.reproducer if writer else None,
            shrink={} if source else {"calls": calls, "seconds": round(st.now() - t, 2)},
            number=0 if source else n_new,
            trigger=case.problem,
        )
        st.found.append(f)
        if writer is not None:
            st.log_event("finding", f.log_record())
        if writer is not None and st.findings.best is None:
            st.findings = writer  # the first new finding's writer (interrupt handling, res.reproducer)
        return f

    def _alone(self, case, best, new: set, target: set, writer, budget: float, clean):
        """The shrunk wrong result ``best`` once more where nothing ran before it, else ``case``
        itself (a shrink run in a corrupted process can walk off the bug to where it only shows
        there: then shrunk again, each step after a failure in a fresh process). Returns (the best
        failing case, calls spent, whether neither fails alone: ``Signature.history``). A racing
        output is given RACE_CONFIRM fresh runs: a race passes one by chance, not by history."""
        st = self.state
        tries = RACE_CONFIRM if any(g.endswith(RACY) for g in target) else 1
        history, calls = False, 0
        for p in dict.fromkeys((best.problem, case.problem)):
            clean()
            for _ in range(tries):
                again = st.case(p)
                history = not (again.status == Status.FAILED and set(root_gates(again)) & target)
                if not history:
                    break
            st.result.settings["fresh_checks"] = st.result.settings.get("fresh_checks", 0) + 1
            if not history:
                if p != best.problem:
                    clean()
                    best, calls = self._shrink_toward(again, new, writer, budget, SHRINK_BUILDS, clean=clean)
                else:
                    best = again
                break
        return best, calls, history

    def _culprit(self, case, best, target: set, clean) -> Problem | None:
        """The Problem after which ``best``, passing alone, fails in a fresh process:
        tried among the findings' shrunk failures and the failing cases before ``case``, the most
        recent first, at most ``CULPRITS`` (each a fresh process and two runs); None when none."""
        st = self.state
        cases = st.result.cases
        before = next((i for i, c in enumerate(cases) if c is case), len(cases))
        tried: list = []
        for p in [f.best.problem for f in reversed(st.found) if not f.known and f.best is not None] + [
            c.problem for c in reversed(cases[:before]) if c.failed
        ]:
            if p == best.problem or p in tried:
                continue
            if len(tried) >= CULPRITS or st.now() > st.deadline:
                break
            tried.append(p)
            clean()
            st.case(p)
            again = st.case(best.problem)
            if again.status == Status.FAILED and set(root_gates(again)) & target:
                return p
        return None

    def _clean(self):
        """What starts the kernel's process afresh for a hunt's fresh-process checks, or None when
        they are off (``Campaign.fresh_process``; by default on where the kernel runs in a worker
        process on a GPU: a kernel writing out of bounds there corrupts the cases after it)."""
        s = self.state.settings
        on = s.fresh_process
        if on is None:
            device = s.config.device or s.kernel.capability.device
            on = s.config.isolate and str(device).startswith("cuda")
        if not (on and s.config.isolate):
            return None
        spec = getattr(s.kernel, "spec", None) or s.kernel.name
        return lambda: fresh_worker(spec)

    def _widen(self, case, gates: set) -> Finding | None:
        """The finding whose bug ``case`` shows at one more value of a choice (a head dim, a
        dtype: ``signature.widening``), tried on that finding's own shrunk Problem moved to the
        value; its signature widened to explain ``case``. None when no finding's is (the case
        is hunted as usual)."""
        st = self.state
        cap = st.settings.kernel.capability
        for f in st.found:
            if f.known or f.best is None:
                continue
            for i, sig in enumerate(f.signatures):
                if not sig.fails_alike(case) or (sig.error_type == "" and not set(sig.gates) & gates):
                    continue
                w = widening(sig, case.problem, f.best.problem, cap)
                if w is None or st.now() > st.deadline:
                    continue
                wider, q = w
                if not sig.fails_alike(st.run_seen(q)):
                    continue
                if i == 0:
                    f.signature = wider
                else:
                    f.variants[i - 1] = wider
                st.result.settings["widened"] = st.result.settings.get("widened", 0) + 1
                st.log_event("finding", f.log_record())
                if not unexplained_gates(st.signatures(), case) & gates:
                    return f
        return None

    def _shrink_toward(self, case, gates: set, writer, budget: float, builds: int, clean=None):
        """Shrink ``case`` keeping a failure on one of ``gates`` that no finding explains; on a
        kernel with a compile key, through at most ``builds`` configurations not built yet. With
        ``clean`` (a kernel whose failures corrupt its process), every step runs afresh (never
        replayed) and a step after a failing one in a fresh process: each verdict is its own."""
        st = self.state
        cap = st.settings.kernel.capability
        left = [builds]

        def affordable(p) -> bool:
            key = cap.compile_signature(p)
            if key in st.built or p in st.seen:
                return True
            if left[0] <= 0:
                return False
            left[0] -= 1
            return True

        failing = {case.problem: case}  # the run each accepted step failed in (a later rerun of it may pass)
        error = failure_of(case) if case.status == Status.ERROR else None  # its CUDA error or type, its message

        dirty = [False]  # the last step failed: with ``clean``, the next one starts a fresh process

        def still_fails(p):
            if st.hidden_by_error(p, case):  # another error raises there on every build: no verdict to get
                return False
            if clean is None:
                c = st.run_seen(p)
            else:
                if dirty[0]:
                    clean()
                c = st.case(p)
                dirty[0] = c.failed
            if not c.failed or not (unexplained_gates(st.signatures(), c) & gates):
                return False
            if error is not None and not error.fails_alike(c):
                return False
            writer.found(c, case)
            failing[p] = c
            return True

        best, calls = simplify(
            case.problem,
            still_fails,
            st.settings.kernel.capability,
            time_budget=max(0.0, budget),
            max_calls=st.settings.finding_calls,
            affordable=affordable if cap.compile_key else None,
        )
        return failing.get(best, case), calls

    # ------------------------------------------------------------------ after the search
    def failed(self, case) -> None:  # pragma: no cover - a hunt's search never raises a failure
        raise AssertionError("a hunt does not stop at a failure")

    def finish(self) -> None:
        """Failing cases the search left unexplained (met while shrinking another finding,
        or logged by a resumed run): hunted while the budget lasts."""
        st = self.state
        for case in list(st.result.cases):
            if st.now() > st.deadline:
                return
            if case.failed:
                self.hunt(case)

    def sign(self) -> None:
        """Every finding was signed when it was kept; findings a later merge made one bug are
        folded into one (``folded``)."""
        self.state.found[:] = folded(self.state.found)

    def verdict(self) -> None:
        """The campaign fails on a new finding, and on failing cases no finding explains
        (listed in the reason, with what would have them shrunk and signed)."""
        st = self.state
        res = st.result
        new = [f for f in st.found if not f.known]
        if new:
            res.status = CampaignStatus.FAILED
            res.failure, res.first_failure, res.reproducer = new[0].best, new[0].first, new[0].reproducer
            res.examples_to_fail = new[0].first_seen.get("case")
            res.seconds_to_fail = new[0].first_seen.get("seconds")
        if res.unexplained:
            cap = len(st.found) - sum(f.known for f in st.found) >= st.settings.max_findings
            why = (
                f"the findings cap ({st.settings.max_findings}) was reached"
                if cap
                else "the budget ran out before they were shrunk and signed"
            )
            how = "a larger --max-findings" if cap else "a larger --time-budget"
            res.reason = (
                f"{res.unexplained} failing cases no finding explains ({why}; {how} shrinks and signs "
                f"them, and --resume of this run keeps what it found): "
                + "; ".join(res.unexplained_cases[:3])
                + (" ..." if res.unexplained > 3 else "")
            )
        if not new and res.unexplained:  # failures the budget left unsigned still fail the campaign, unshrunk
            first = next(c for c in res.cases if c.failed and unexplained_gates(st.signatures(), c))
            res.status, res.failure, res.first_failure = CampaignStatus.FAILED, first, first
            st.findings.first = first
            st.findings.write(first)
            res.reproducer = st.findings.reproducer

    def interrupted(self, e) -> None:
        st = self.state
        res = st.result
        st.count_hits()  # every finding's reproducer was written when it was found
        new = [f for f in st.found if not f.known]
        res.findings = list(st.found)
        res.status = CampaignStatus.FAILED if new else CampaignStatus.INTERRUPTED
        if new:
            res.failure, res.first_failure, res.reproducer = new[0].best, new[0].first, new[0].reproducer

    def report(self, run) -> None:
        st = self.state
        res = st.result
        if res.failure is not None and st.now() < st.deadline:
            res.declaration = diagnose(st.settings.kernel, res.failure, run, res.first_failure)


def folded(found: list) -> list:
    """``found`` with every new finding that another new finding's rule, widened by what was
    merged into it since, now calls its bug (``signature.same_identity``) folded into the
    earlier of the two (``signature.fold``): its signatures become variants, the rule the
    smallest covering both. A finding is kept apart when it is signed, against the rules of
    that moment: cuDNN 9.19 on the H100 (2026-12-07) kept a dQ finding beside a dK/dV one of
    the same head-dim family because the dK/dV finding already explained the case's other
    gates; the dQ rule later took in dV, and both stayed. Known findings are never folded."""
    return fold(found, _one_bug, _folded_into)


def _one_bug(f, g) -> bool:
    if f.known or g.known:
        return False
    return any(one_bug(a, b, _shrunk(f, a), _shrunk(g, b)) for a in f.signatures for b in g.signatures)


def _shrunk(f, sig):
    """The shrunk Problem ``sig`` was signed at: the finding's own for its rule (variants keep none)."""
    return f.best.problem if sig is f.signature and f.best is not None else None


def _folded_into(f, g):
    f.variants.extend(v for v in g.signatures if v not in f.signatures)
    f.signature = merged(f.signature, g.signature)
    return f
