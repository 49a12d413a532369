#!/usr/bin/env bash
# Issue 15: time a new user's journey from `pip install` to a shrunk failure of a planted bug
# in a fresh adapter, one step at a time, in a throw-away virtualenv (system site packages,
# so torch/hypothesis are not downloaded) on a fresh clone of REPO (default: this checkout).
#   bash scripts/journey.sh [REPO] [WORKDIR]      -> prints one line per step and the total
# The planted bug is a causal off-by-one (query i also sees key i + offset + 1), the kind
# of bug the issue's user planted; the skeleton's capability is opted into causal first.
set -euo pipefail
REPO=${1:-$(cd "$(dirname "$0")/.." && pwd)}
W=${2:-$(mktemp -d)}
rm -rf "$W" && mkdir -p "$W" && cd "$W"
T0=$(date +%s.%N)
step() {  # step LABEL command...
  local t0; t0=$(date +%s.%N)
  "${@:2}" > "$W/$1.log" 2>&1 || { echo "$1 failed:"; tail -n 20 "$W/$1.log"; exit 1; }
  printf '%-44s %6.1f s\n' "$1" "$(echo "$(date +%s.%N) - $t0" | bc)"
}
echo "journey $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), repo $REPO"
step "git clone" git clone -q "$REPO" difftest
step "venv (system site packages)" python3 -m venv --system-site-packages venv
# shellcheck disable=SC1091
source venv/bin/activate
step "pip install -e difftest[test]" python3 -m pip install -q -e "difftest[test]"
step "difftest new-adapter myattn" difftest new-adapter myattn
# the user's edits: claim causal, then plant the bug (one line each)
sed -i 's/        max_seqlen=128,/        max_seqlen=128, causal=True,/' myattn/myattn/adapter.py
sed -i 's/tril(diagonal=sk - sq)/tril(diagonal=sk - sq + 1)/' myattn/myattn/kernel.py
grep -q "causal=True" myattn/myattn/adapter.py && grep -q "sk - sq + 1" myattn/myattn/kernel.py
step "pip install -e myattn" python3 -m pip install -q -e myattn
set +e
t0=$(date +%s.%N)
difftest run -k myattn -p quick --out out > run.log 2>&1
rc=$?
set -e
printf '%-44s %6.1f s  (exit %s)\n' "difftest run -k myattn -p quick" "$(echo "$(date +%s.%N) - $t0" | bc)" "$rc"
printf '%-44s %6.1f s\n' "total" "$(echo "$(date +%s.%N) - $T0" | bc)"
grep -m1 -E "shrunk|minimal|FAILED|failed" run.log || true
ls out/repro/*.json 2>/dev/null | head -n 1
