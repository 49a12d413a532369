#!/usr/bin/env bash
# Device call (2026-12-07, session 3): FA4 on the GPU with the engine after the coverage phase's fix
# (5ba0982), merge's recount and absorbed kernel errors. (1) Issue 39's time travel: one unattended `nightly`
# per beta (b25, b29, b30 in 3 shards, b36 and b40 in 2, as on 2026-12-06 s3-callA), nothing narrowed.
# (2) Issue 43: fa4-sparse, the block-sparse adapter's first GPU run, on b40 (2 shards) and b25 (the
# block-sparse backward's missing wait was fixed in b26); the b25 reproducers bisected over b25, b26, b40.
# Carry: .device/fa4.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .whl/fa4b25, .whl/fa4b26, .whl/fa4b29,
# .whl/fa4b30, .whl/fa4b40, .gpu. Writes $OUT (env.txt, summary.txt, fa4-reports.tar.xz, fa4-logs.tar.xz).
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 26 29 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
mkdir -p /tmp/fa4b36  # b36 is the bundle's own flash-attn-4
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL:$PWD PYTHONUNBUFFERED=1 DIFFTEST_THREADS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  for v in 25 26 29 30 36 40; do PYTHONPATH=/tmp/fa4b$v:$PYTHONPATH python3 -c "from importlib.metadata import version; print('fa4 b$v', version('flash-attn-4'), 'cutlass-dsl', version('nvidia-cutlass-dsl'), 'covertable', version('covertable'))"; done
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
B=${BUDGET:-400}
bg() { local name=$1 v=$2; shift 2
  ( PYTHONPATH=/tmp/fa4b$v:/tmp/site:$DSL:$PWD timeout $((B+90)) "$@" 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > /tmp/o/$name.log
    echo "$name exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
R="python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q"
for v in 25 29 30; do for i in 0 1 2; do bg b$v-$i $v $R -k fa4 --shard $i/3 --out /tmp/o/b$v-$i; done; done
for v in 36 40; do for i in 0 1; do bg b$v-$i $v $R -k fa4 --shard $i/2 --out /tmp/o/b$v-$i; done; done
S="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q -k fa4-sparse"
for i in 0 1; do bg sp40-$i 40 $S --shard $i/2 --out /tmp/o/sp40-$i; done
bg sp25-0 25 $S --out /tmp/o/sp25-0
wait
echo "campaigns done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary.txt; sort -t' ' -k5 -n /tmp/o/exits.txt >> $OUT/summary.txt
for k in b25 b29 b30 b36 b40 sp40 sp25; do
  python3 -m difftest merge /tmp/o/$k-*/report.json -o /tmp/o/$k.json > /tmp/o/merge-$k.log 2>&1
  python3 scripts/device/summarise_reports.py /tmp/o/$k.json $k >> $OUT/summary.txt 2>&1
done
cd /tmp/o && mkdir -p rep && cp b*.json sp*.json rep/ 2>/dev/null && tar -cJf $OUT/fa4-reports.tar.xz rep
tar -cJf $OUT/fa4-logs.tar.xz *.log *.txt */summary.md 2>/dev/null; cd - > /dev/null
for f in $(find /tmp/o/sp25-0 -path '*repro*' -name '*.json' | head -3); do
  [ $(( $(date +%s) - T0 )) -gt 520 ] && break
  echo "== bisect $f" >> $OUT/summary.txt; PYTHONPATH=/tmp/site:$DSL:$PWD timeout 60 python3 -m difftest bisect "$f" --fixed --versions /tmp/fa4b25 /tmp/fa4b26 /tmp/fa4b40 2>&1 | grep -v generate_mlir | tail -8 | cut -c1-300 >> $OUT/summary.txt
done
echo "elapsed $(( $(date +%s) - T0 )) s" >> $OUT/summary.txt; cat $OUT/summary.txt; ls -la $OUT
