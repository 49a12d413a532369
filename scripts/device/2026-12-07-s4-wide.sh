#!/usr/bin/env bash
# Device call (2026-12-07, session 4), all side by side on one GPU: issue 40's unseeded `gpu` campaigns short of
# 2,000 cases (fa3 1,892, tilelang 1,135, tilelang-det 882) and three GPU variants short of it
# (fp8-tensor-core-accumulator, tl-tiles-16x64, tl-atomic-dq-64x16); issue 39's cuDNN 9.19 unattended `nightly`
# in 2 shards (bug 3, THD d_qk > 192 with mid d_v, was not its own finding). Carry: .device/tilelang.tar.xz,
# .device/fa3.tar.xz, .device/cudnn.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu.
# Writes $OUT (env.txt, summary.txt, wide-reports.tar.xz, wide-logs.tar.xz).
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
for b in tilelang fa3 cudnn; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
for w in .whl/covertable-3.2.0-py3-none-any.whl; do python3 -m zipfile -e $w /tmp/site; done
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DIFFTEST_THREADS=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('tilelang', 'dew-flash-attn-cu13', 'triton', 'fla-core', 'nvidia-cudnn-frontend', 'hypothesis', 'covertable'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
B=${BUDGET:-400}
bg() { local name=$1; shift; ( timeout $((B+90)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
R="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q"
bg fa3-0 $R -k fa3 --out /tmp/o/fa3-0
for i in 0 1 2 3; do bg tl-$i $R -k tilelang --shard $i/4 --out /tmp/o/tl-$i; done
for i in 0 1 2 3 4; do bg tldet-$i $R -k tilelang-det --shard $i/5 --out /tmp/o/tldet-$i; done
for i in 0 1; do bg cudnn-$i python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q -k cudnn --shard $i/2 --out /tmp/o/cudnn-$i; done
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --per-variant-budget $B --out-dir /tmp/o/variants"
n=0; for v in fp8-tensor-core-accumulator tl-tiles-16x64 tl-atomic-dq-64x16; do n=$((n+1)); bg var$n $V --only $v --out /tmp/o/var$n.md; done
wait
echo "campaigns done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary.txt; sort -t' ' -k5 -n /tmp/o/exits.txt >> $OUT/summary.txt
for k in tl tldet cudnn; do python3 -m difftest merge /tmp/o/$k-*/report.json -o /tmp/o/$k.json > /tmp/o/merge-$k.log 2>&1; done
for k in tl tldet cudnn; do python3 scripts/device/summarise_reports.py /tmp/o/$k.json $k >> $OUT/summary.txt 2>&1; done
for k in fa3-0; do python3 scripts/device/summarise_reports.py /tmp/o/$k/report.json $k >> $OUT/summary.txt 2>&1; done
for k in fa3-0 tl-0 tldet-0 cudnn-0; do echo "-- $k" >> $OUT/summary.txt; grep -E "^[a-z0-9-]+: (passed|failed|error)|framework overhead|^  (kernel|compile|truth|inputs|gates|yardsticks|search) |configuration pairs|rate:" /tmp/o/$k.log | cut -c1-220 | head -12 >> $OUT/summary.txt; done
for n in 1 2 3; do echo "-- var$n" >> $OUT/summary.txt; grep -v "^$" /tmp/o/var$n.md 2>/dev/null | cut -c1-400 | head -4 >> $OUT/summary.txt; tail -2 /tmp/o/var$n.log | cut -c1-300 >> $OUT/summary.txt; done
cd /tmp/o && mkdir -p rep && for k in fa3-0; do cp $k/report.json rep/$k.json 2>/dev/null; done
cp tl.json tldet.json cudnn.json rep/; find cudnn-* -path "*repro*" -name "*.json" -size -200k -exec cp --parents {} rep/ \; 2>/dev/null; tar -cJf $OUT/wide-reports.tar.xz rep
tar -cJf $OUT/wide-logs.tar.xz *.log *.md *.txt variants 2>/dev/null
echo "elapsed $(( $(date +%s) - T0 )) s" >> $OUT/summary.txt; cat $OUT/summary.txt; ls -la $OUT
