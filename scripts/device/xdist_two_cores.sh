#!/bin/bash
# pytest -n 2 vs serial on two otherwise idle cores (issue 15, part 4). The shared 2-core CI
# host runs other sessions' jobs (load 3-12), so the speed-up cannot be measured there; on the
# device host, taskset pins the run to cores 0 and 1. Three runs of the same 4 campaigns:
#   serial | -n 2 (plugin limits each worker to cpu_count//workers = 1 torch thread) |
#   -n 2 with OMP_NUM_THREADS=2 (the old behaviour: each worker takes both cores).
# Usage (repository root): bash scripts/device/xdist_two_cores.sh [EXAMPLES]   -> $OUT/xdist_two_cores.txt
set -u
N=${1:-40}
W=$(mktemp -d)
cat > "$W/test_campaigns.py" <<PY
import pytest


@pytest.mark.parametrize("seed", range(4))
def test_campaign(difftest_campaign, seed):
    difftest_campaign("torch-blockwise", profile="ci", max_examples=$N, edge_cases=False, database=None, seed=seed)
PY
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUTF="${OUT:-.}/xdist_two_cores.txt"
run() {
  local label=$1 envset=$2; shift 2
  local t0; t0=$(date +%s.%N)
  (cd "$W" && if [ -n "$envset" ]; then export "$envset"; else unset OMP_NUM_THREADS; fi
   taskset -c 0,1 python3 -m pytest -q -p no:cacheprovider --difftest-out "$W/out" test_campaigns.py "$@") \
    > "$W/$label.log" 2>&1
  local rc=$?
  echo "$label rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s" \
       "(load $(cut -d' ' -f1 /proc/loadavg)): $(tail -1 "$W/$label.log")" | tee -a "$OUTF"
}
echo "$(date -u) cores 0,1 of $(nproc); $N examples x 4 campaigns" | tee "$OUTF"
run serial ""
run n2-limited "" -n 2
run n2-unlimited OMP_NUM_THREADS=2 -n 2
