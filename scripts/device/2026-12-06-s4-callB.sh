#!/usr/bin/env bash
# Device call B (2026-12-06, session 4): (1) the case bench before (30f8f82) and after, alone and four side
# by side, for sdpa-efficient, sdpa-math, tilelang-det, fa3; (2) side by side: unseeded gpu campaigns of
# flex and flex-dynamic, tilelang and tilelang-det, and the softcap-approx-tanh variant on CUDA. Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/before
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
tar -C /tmp/before -xJf .device/before.tar.xz
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('tilelang','dew-flash-attn-cu13','triton','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
timeout ${BENCH_S:-300} python3 -m difftest bench --cases -k sdpa-efficient -k sdpa-math -k tilelang-det -k fa3 \
    --examples ${EXAMPLES:-400} --case-budget ${CASE_BUDGET:-20} --mode both --before /tmp/before \
    --json $OUT/cases.json --markdown $OUT/cases.md > /tmp/o/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - T0 )) s"; tail -40 /tmp/o/bench.log | cut -c1-220
B=${BUDGET:-190}
bg() { local name=$1; shift; ( timeout $((B+60)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
bg flex python3 -m difftest run -k flex -p gpu --device cuda --time-budget $B --db none --out /tmp/o/flex -q
bg flexdyn python3 -m difftest run -k flex-dynamic -p gpu --device cuda --time-budget $B --db none --out /tmp/o/flexdyn -q
bg tl python3 -m difftest run -k tilelang -p gpu --device cuda --time-budget $B --db none --out /tmp/o/tl -q
bg tldet python3 -m difftest run -k tilelang-det -p gpu --device cuda --time-budget $B --db none --out /tmp/o/tldet -q
bg tanh python3 -m difftest variants --device cuda -p gpu --cases 5000 --per-variant-budget $B --only softcap-approx-tanh --out /tmp/o/tanh.md
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for k in flex flexdyn tl tldet; do echo "== $k"; grep -E "^[a-z0-9-]+: |finding|configuration pairs|compile reuse|unexplained" /tmp/o/$k.log | cut -c1-300 | head -12; done
echo "== tanh"; cat /tmp/o/tanh.md 2>/dev/null | cut -c1-400; tail -2 /tmp/o/tanh.log | cut -c1-300
cd /tmp/o && for k in flex flexdyn tl tldet; do cp $k/report.json $OUT/report-$k.json 2>/dev/null; done
cp tanh.md $OUT/ 2>/dev/null; tar -cJf $OUT/callB-logs.tar.xz *.log *.md exits.txt 2>/dev/null; ls -la $OUT
