#!/usr/bin/env bash
# Device call (2026-12-07, session 4): FA4 with the block-sparse strides fix (28c13cd) and the signature wording
# (b4ab194). (1) Issue 43: fa4-sparse, unseeded `gpu`, on b40 (3 shards; the block-sparse backward with two or
# more blocks a side has never run) and b25 (2 shards; the missing wait fixed in b26); every b25 reproducer
# with a non-finite or budget failure bisected --fixed over b25, b26, b40. (2) `difftest bisect --fixed` of
# the crossed window (scripts/device/crossed-window-fa4.json: window -2/0, the b30 fix) over b25..b40.
# (3) Issue 39: one unattended `nightly` on b25 (4 shards), b29 and b30 (2 each), reproducers returned for
# triage. Carry: .device/fa4.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .whl/fa4b25, .whl/fa4b26,
# .whl/fa4b29, .whl/fa4b30, .whl/fa4b40, .gpu. Writes $OUT (env.txt, summary.txt, fa4-reports.tar.xz).
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 26 29 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL:$PWD PYTHONUNBUFFERED=1 DIFFTEST_THREADS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  for v in 25 26 29 30 40; do PYTHONPATH=/tmp/fa4b$v:$PYTHONPATH python3 -c "from importlib.metadata import version; print('fa4 b$v', version('flash-attn-4'), 'cutlass-dsl', version('nvidia-cutlass-dsl'))"; done
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
B=${BUDGET:-430}
bg() { local name=$1 v=$2; shift 2
  ( PYTHONPATH=/tmp/fa4b$v:/tmp/site:$DSL:$PWD timeout $((B+60)) "$@" 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > /tmp/o/$name.log
    echo "$name exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
( echo "== bisect --fixed crossed window"; timeout 300 python3 -m difftest bisect scripts/device/crossed-window-fa4.json --fixed \
    --versions /tmp/fa4b25 /tmp/fa4b26 /tmp/fa4b29 /tmp/fa4b30 /tmp/fa4b40 --json /tmp/o/bisect-window.json 2>&1 \
    | grep -v generate_mlir | tail -14 | cut -c1-300 ) > /tmp/o/bisect-window.txt 2>&1 &
R="python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q -k fa4"
for i in 0 1 2 3; do bg b25-$i 25 $R --shard $i/4 --out /tmp/o/b25-$i; done
for v in 29 30; do for i in 0 1; do bg b$v-$i $v $R --shard $i/2 --out /tmp/o/b$v-$i; done; done
S="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q -k fa4-sparse"
for i in 0 1 2; do bg sp40-$i 40 $S --shard $i/3 --out /tmp/o/sp40-$i; done
for i in 0 1; do bg sp25-$i 25 $S --shard $i/2 --out /tmp/o/sp25-$i; done
wait
echo "campaigns done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary.txt; sort -t' ' -k5 -n /tmp/o/exits.txt >> $OUT/summary.txt
cat /tmp/o/bisect-window.txt >> $OUT/summary.txt
for k in b25 b29 b30 sp40 sp25; do
  python3 -m difftest merge /tmp/o/$k-*/report.json -o /tmp/o/$k.json > /tmp/o/merge-$k.log 2>&1
  python3 scripts/device/summarise_reports.py /tmp/o/$k.json $k >> $OUT/summary.txt 2>&1
done
for f in $(grep -l '"nonfinite\|budget' $(find /tmp/o/sp25-* -path '*repro*' -name '*.json') 2>/dev/null | head -3); do
  [ $(( $(date +%s) - T0 )) -gt 540 ] && break
  echo "== bisect --fixed $f" >> $OUT/summary.txt; timeout 50 python3 -m difftest bisect "$f" --fixed --versions /tmp/fa4b25 /tmp/fa4b26 /tmp/fa4b40 2>&1 | grep -v generate_mlir | tail -6 | cut -c1-300 >> $OUT/summary.txt
done
cd /tmp/o && mkdir -p rep && cp b*.json sp*.json rep/ 2>/dev/null
for d in b25-* b29-* b30-* sp40-* sp25-*; do [ -d $d ] && find $d -path '*repro*' -name '*.json' -size -200k -exec cp --parents {} rep/ \; ; done
tar -cJf $OUT/fa4-reports.tar.xz rep *.log *.txt 2>/dev/null; cd - > /dev/null
echo "elapsed $(( $(date +%s) - T0 )) s" >> $OUT/summary.txt; cat $OUT/summary.txt | cut -c1-400; ls -la $OUT
