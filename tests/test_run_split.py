"""The run's own time split (difftest/run/split.py): its phases follow one another from the
process's start to the report and add up to the run's wall time; each campaign shows its
interval and its wait for JIT builds. ``difftest run`` prints it (tests/test_lanes.py checks
the block in a serial and a side-by-side run). No wall-clock assertion: a fake clock."""

import os
import subprocess
import sys

import pytest

from difftest.run.split import PHASES, RunSplit, process_age_s


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


def test_phases_follow_one_another_from_the_process_start_and_add_up_to_the_wall_time():
    clock = Clock()
    split = RunSplit(clock=clock, age_s=lambda: 1.5)  # the interpreter started 1.5 s before the plan
    clock.t += 0.5
    split.enter("campaigns")
    split.campaign_started("tilelang-det")
    split.campaign_started("torch-blockwise")
    clock.t += 4.0
    split.campaign_ended("torch-blockwise")
    clock.t += 6.0
    split.campaign_ended("tilelang-det", {"built": 25, "waited_s": 5.25})
    split.enter("reports")
    clock.t += 0.75
    assert split.phases() == {"start": 2.0, "campaigns": 10.0, "reports": 0.75}
    text = split.render()
    lines = text.splitlines()
    assert lines[0] == "run time split of 12.8 s (since the process started):"
    assert [ln.split()[0] for ln in lines[1:] if not ln.startswith("    ")] == ["start", "campaigns", "reports"]
    assert "tilelang-det" in text and "0.00 ->  10.00 s  (waited 5.25 s for its builds)" in text
    assert "torch-blockwise" in text and "0.00 ->   4.00 s" in text and "waited 0.00" not in text


def test_a_serial_run_shows_its_prebuild_and_a_campaign_under_way_has_no_end():
    clock = Clock()
    split = RunSplit(clock=clock, age_s=lambda: None)  # no /proc: from the plan's start
    clock.t += 1.0
    split.enter("prebuild")
    clock.t += 3.0
    split.enter("campaigns")
    split.campaign_started("sdpa-cpu-math")
    clock.t += 2.0
    assert split.phases() == {"start": 1.0, "prebuild": 3.0, "campaigns": 2.0}
    text = split.render()
    assert "since the run's plan started" in text and "prebuild" in text and "->    ... s" in text


def test_an_unknown_phase_is_refused():
    with pytest.raises(ValueError, match="allowed"):
        RunSplit().enter("lunch")
    assert PHASES == ("start", "prebuild", "campaigns", "reports")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux /proc")
def test_the_process_age_counts_the_interpreter_start():
    code = "import time; time.sleep(0.3); from difftest.run.split import process_age_s; print(process_age_s())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    age = float(out.stdout)
    assert 0.25 <= age < 120  # the sleep and the interpreter's start, in ticks of 1/CLK_TCK s
    mine = process_age_s()
    assert mine is not None and mine >= 0.0
