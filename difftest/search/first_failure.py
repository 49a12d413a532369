"""First-failure mode (profiles quick and ci, and the gate's baselines): the first failure
ends the search. Hypothesis, where the failure was drawn, and then ``shrinking.simplify``
shrink it, and it is signed (``signature.derive``) so reports and the gate name it as a
hunt would. Other failures seen meanwhile stay in the result's cases; a failure a known
finding (``--known``) explains neither stops nor is shrunk."""

from difftest.judge.declaration import diagnose
from difftest.search.findings import Finding
from difftest.search.result import CaseFailed, same_failure
from difftest.search.shrinking import simplify
from difftest.search.signature import MAX_VARIATIONS, derive, same_identity
from difftest.vocab import CampaignStatus

# Seconds the simplify walk and the signature's variations each get after a first failure
# when the shrink budget is spent already ("at least a few seconds"), inside the campaign's budget.
FINISH_FLOOR_S = 5.0


class FirstFailure:
    hunting = False

    def __init__(self, state):
        self.state = state

    # ------------------------------------------------------------------ during the search
    def recorded(self, case) -> None:
        """A new case ran: one that fails the first failure's way updates the reproducer and
        the store when it is simpler (findings.Findings.found)."""
        st = self.state
        first = st.result.first_failure
        if case.failed and first is not None and not st.known_covers(case) and same_failure(first, case):
            st.findings.found(case, first)

    def visited(self, case) -> None:
        """The search met ``case`` (run now or before): the first failure's kind ends it."""
        first = self.state.result.first_failure
        if case.failed and first is not None and not self.state.known_covers(case) and same_failure(first, case):
            raise CaseFailed(case)

    def steer(self, problem):
        return problem

    def search_over(self) -> bool:
        st = self.state
        if st.failed_at is None:
            return st.now() > st.search_end
        return st.now() > min(st.failed_at + st.settings.shrink_budget, st.deadline)

    def _finish_by(self) -> float:
        """Seconds in by which the simplify walk or the signature stops: what is left of the
        shrink budget, at least FINISH_FLOOR_S, never past the campaign's deadline."""
        st = self.state
        return min(
            st.deadline, st.now() + max(FINISH_FLOOR_S, (st.failed_at or 0.0) + st.settings.shrink_budget - st.now())
        )

    # ------------------------------------------------------------------ after the search
    def failed(self, case) -> None:
        """The search ended on ``case``: walk down through simpler Problems that fail the same
        way (Hypothesis can stall in a local minimum, and never shrinks an explicit Problem)."""
        st = self.state
        res = st.result
        res.status = CampaignStatus.FAILED

        def still_fails(p):
            return same_failure(case, st.run_seen(p))

        best, _ = simplify(
            case.problem, still_fails, st.settings.kernel.capability, time_budget=max(0.0, self._finish_by() - st.now())
        )
        res.failure = st.seen.get(best, case)

    def finish(self) -> None:
        pass

    def verdict(self) -> None:
        pass  # the status was set where the search ended (failed)

    def sign(self) -> None:
        """The one shrunk failure gets its signature now (variations in what is left of the
        shrink budget), so reports and the gate name it the same way a hunt does."""
        st = self.state
        res = st.result
        if res.failure is None:
            return
        over = self._finish_by()
        sig = derive(
            res.failure,
            st.run_seen,
            st.settings.kernel.capability,
            budget_calls=MAX_VARIATIONS,
            deadline=lambda: st.now() > over,
            rerun=st.case,
        )
        if not any(same_identity(s, sig, res.failure.problem) for f in st.found for s in f.signatures):
            st.found.append(
                Finding(
                    sig,
                    first=res.first_failure,
                    best=res.failure,
                    reproducer=st.findings.reproducer,
                    shrink={"seconds": round(st.now() - (st.failed_at or 0.0), 2)},
                )
            )

    def interrupted(self, e) -> None:
        st = self.state
        res, findings = st.result, st.findings
        if res.first_failure is not None and (findings.best is None or findings.reproducer is None):
            findings.first = findings.first or res.first_failure  # the signal cut its write short
            findings.write(findings.best or res.first_failure)
        if findings.best is not None:
            res.status, res.failure = CampaignStatus.FAILED, findings.best
        else:
            res.status = CampaignStatus.INTERRUPTED
        res.reproducer = findings.reproducer

    def report(self, run) -> None:
        """The shrunk failure's reproducer (written at its shrink step, usually) and the
        declaration problems behind it, while the budget lasts."""
        st = self.state
        res = st.result
        if res.failure is None:
            return
        if st.findings.best is not res.failure:
            st.findings.first = st.findings.first or res.first_failure
            st.findings.write(res.failure)
        res.reproducer = st.findings.reproducer
        if res.findings and not res.findings[-1].known:
            res.findings[-1].reproducer = res.reproducer
        res.declaration = (
            diagnose(st.settings.kernel, res.failure, run, res.first_failure) if st.now() < st.deadline else []
        )
