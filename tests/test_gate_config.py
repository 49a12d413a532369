"""GateConfig's k: an output's k is "set" by being named (``--k``, a config), never by a
value: ``--k dq=1.5`` gives every dtype 1.5 even though 1.5 is also DEFAULT_K's dq (the
largest per-dtype default); unset outputs keep their calibrated per-dtype k. Reports and
reproducers written before keep their meaning."""

import pytest

from difftest.commands.cli import build_parser
from difftest.commands.run import config_from_args
from difftest.judge.gates import DEFAULT_K, DEFAULT_K_BY_DTYPE, GateConfig
from difftest.model.problem import OUTPUTS


def _gates(*argv):
    argv = ["run", *argv]
    return config_from_args(build_parser(argv).parse_args(argv)).gates


@pytest.mark.parametrize("out", ["dq", "dk"])
def test_k_equal_to_the_default_is_still_set_for_every_dtype(out):
    value = DEFAULT_K[out]
    lower = [dt for dt, t in DEFAULT_K_BY_DTYPE.items() if t[out] != value]
    assert lower, f"every dtype's {out} k is DEFAULT_K's: this test would not tell set from unset"
    g = _gates("--k", f"{out}={value:g}")
    assert all(g.k_for(dt, out) == value for dt in DEFAULT_K_BY_DTYPE), {dt: g.k_for(dt, out) for dt in lower}
    other = _gates("--k", f"{out}={value + 0.1:g}")
    assert all(other.k_for(dt, out) == pytest.approx(value + 0.1) for dt in DEFAULT_K_BY_DTYPE)


def test_unset_outputs_keep_their_per_dtype_k():
    g = _gates("--k", "dq=4")
    for dt, table in DEFAULT_K_BY_DTYPE.items():
        for out in OUTPUTS:
            assert g.k_for(dt, out) == (4.0 if out == "dq" else table[out])
    assert GateConfig().k == {} and GateConfig().k_for("float32", "dv") == DEFAULT_K_BY_DTYPE["float32"]["dv"]


def test_set_k_survives_the_round_trip_through_a_report():
    g = GateConfig(k={"dq": DEFAULT_K["dq"]})
    back = GateConfig.from_dict(g.to_dict())
    assert back.k == {"dq": DEFAULT_K["dq"]} and back.k_for("float32", "dq") == DEFAULT_K["dq"]


def test_a_config_written_before_reads_as_it_did():
    """Before, to_dict listed every output's k; a default there meant "not set"."""
    old = {
        "k": {**DEFAULT_K, "dv": 7.0},
        "floor_ulps": 2.0,
        "floor_magnitude": 1.0,
        "standards": {},
        "check_nonfinite": True,
    }
    g = GateConfig.from_dict(old)
    assert g.k == {"dv": 7.0}
    assert g.k_for("float32", "dq") == DEFAULT_K_BY_DTYPE["float32"]["dq"] and g.k_for("float16", "dv") == 7.0
