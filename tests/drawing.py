"""Drawing a strategy's examples outside a property test (shared by the strategy tests)."""

from hypothesis import Phase, given, settings


def draw_many(strategy, n: int) -> list:
    """``n`` examples of ``strategy``, the same on every run (derandomized, no database)."""
    out = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None, phases=[Phase.generate])
    @given(strategy)
    def collect(p):
        out.append(p)

    collect()
    return out
