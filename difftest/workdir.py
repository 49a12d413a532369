"""difftest's one working folder, ``.difftest/`` in the directory a run starts from.

Everything a run writes goes under it unless told otherwise: the failure store and
Hypothesis's example database (``examples/``), Hypothesis's own cache (``hypothesis/``,
instead of a ``.hypothesis/`` beside it) and the reports, case logs and reproducers
(``out/``, or ``--out DIR``). One folder to add to ``.gitignore``. The paths live here
only, so a change of layout (e.g. per-run output folders) is one edit.
"""

WORKDIR = ".difftest"
DEFAULT_OUT = f"{WORKDIR}/out"  # reports, case logs, reproducers (--out, --difftest-out)
DEFAULT_DB = f"{WORKDIR}/examples"  # failure store + Hypothesis example database (--db)
HYPOTHESIS_HOME = f"{WORKDIR}/hypothesis"  # Hypothesis's storage (constants cache etc.)


def claim_hypothesis_home() -> None:
    """Point Hypothesis's storage at ``.difftest/hypothesis`` (the CLI calls this; a user's
    own pytest session keeps Hypothesis's default)."""
    # lazy: keeps Hypothesis off --help
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(HYPOTHESIS_HOME)
