#!/usr/bin/env bash
# Device call (2026-12-07, session 5), all side by side on one GPU: issue 39's cuDNN 9.19 unattended `nightly` in 3
# shards after the budget-cut signature fix (ce3435b; bug 4, THD GQA decode statistics, was never met); issue 40's
# GPU variants short of 2,000 cases (tl-tiles-16x64 335, tl-atomic-dq-64x16 405, fp8-tensor-core-accumulator 807 on
# CUDA so far), two processes for each TileLang variant, and the first GPU run of the OOM handling beside them.
# Carry: .device/tilelang.tar.xz, .device/cudnn.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu.
# Writes $OUT (env.txt, summary.txt, wide-reports.tar.xz, wide-logs.tar.xz).
set -u
T0=$(date +%s)
T=$(mktemp -d)  # never a fixed /tmp path: a warm machine kept the last call's /tmp/o, whose logs joined this one's
mkdir -p $T/site $T/o
for b in tilelang cudnn; do tar -C $T/site -xJf .device/$b.tar.xz; done
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl $T/site
export PYTHONPATH=$T/site:$PWD PYTHONUNBUFFERED=1 DIFFTEST_THREADS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > $T/o/pip.log 2>&1 || tail -5 $T/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('tilelang', 'triton', 'nvidia-cudnn-frontend', 'hypothesis', 'covertable'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
B=${BUDGET:-420}
bg() { local name=$1; shift; ( timeout $((B+90)) "$@" > $T/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> $T/o/exits.txt ) & }
for i in 0 1 2; do bg cudnn-$i python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q -k cudnn --shard $i/3 --out $T/o/cudnn-$i; done
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --per-variant-budget $B --shrink-budget 20"
n=0; for v in tl-tiles-16x64 tl-tiles-16x64 tl-atomic-dq-64x16 tl-atomic-dq-64x16 fp8-tensor-core-accumulator; do
  n=$((n+1)); bg var$n $V --only $v --out-dir $T/o/variants$n --out $T/o/var$n.md; done
wait
echo "campaigns done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary.txt; sort -t' ' -k5 -n $T/o/exits.txt >> $OUT/summary.txt
python3 -m difftest merge $T/o/cudnn-*/report.json -o $T/o/cudnn.json > $T/o/merge-cudnn.log 2>&1 || tail -3 $T/o/merge-cudnn.log >> $OUT/summary.txt
python3 scripts/device/summarise_reports.py $T/o/cudnn.json cudnn >> $OUT/summary.txt 2>&1
echo "-- cudnn-0" >> $OUT/summary.txt; grep -E "memory|not judged|framework overhead|configuration pairs|rate:" $T/o/cudnn-0.log | cut -c1-220 | head -8 >> $OUT/summary.txt
for n in 1 2 3 4 5; do echo "-- var$n" >> $OUT/summary.txt; grep -v "^$" $T/o/var$n.md 2>/dev/null | cut -c1-400 | head -6 >> $OUT/summary.txt; tail -2 $T/o/var$n.log | cut -c1-300 >> $OUT/summary.txt; done
cd $T/o && mkdir -p rep && cp cudnn.json rep/; find cudnn-* -path "*repro*" -name "*.json" -size -200k -exec cp --parents {} rep/ \; 2>/dev/null; tar -cJf $OUT/wide-reports.tar.xz rep
tar -cJf $OUT/wide-logs.tar.xz *.log *.md *.txt variants* 2>/dev/null
echo "elapsed $(( $(date +%s) - T0 )) s" >> $OUT/summary.txt; cat $OUT/summary.txt; ls -la $OUT
