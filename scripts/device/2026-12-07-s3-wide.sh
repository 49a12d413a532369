#!/usr/bin/env bash
# Device call (2026-12-07, session 3), all side by side on one GPU: issue 40's unseeded `gpu` campaigns of the
# production kernels short of 2,000 cases (fa3, tilelang, tilelang-det, flex, sdpa-flash, fla-attn with
# FLA_TILELANG=0) and the four GPU variants short of it (prescaled-q, fp8-tensor-core-accumulator,
# tl-tiles-16x64, tl-atomic-dq-64x16); issue 43's first GPU runs of flex-dynamic (ALiBi, relative position)
# and fla-nsa; issue 39's cuDNN 9.19 unattended `nightly`; issue 44's two drafts and the adasplash sanitizer
# run. Carry: .device/tilelang.tar.xz, .device/fa3.tar.xz, .device/cudnn.tar.xz (the nvidia-cudnn-frontend
# 1.32.0 wheel unzipped, xz: 5.6 MB), .whl/covertable-3.2.0-py3-none-any.whl, .whl/retest,
# .whl/hunt, .gpu. Writes $OUT (env.txt, summary.txt, wide-reports.tar.xz, wide-logs.tar.xz).
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
for b in tilelang fa3 cudnn; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
for w in .whl/covertable-3.2.0-py3-none-any.whl .whl/retest/*.whl; do python3 -m zipfile -e $w /tmp/site; done
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
# the drafts (issue 44): one after another, each with only its own package, beside the campaigns
drafts() {
  local d=/tmp/o/drafts; mkdir -p $d /tmp/site-fsa /tmp/site-ebt /tmp/site-ada
  python3 -m zipfile -e .whl/hunt/flash_sparse_attn-*.whl /tmp/site-fsa
  python3 -m zipfile -e .whl/hunt/ebt_flash_attention-*.whl /tmp/site-ebt
  python3 -m zipfile -e .whl/hunt/adasplash-*.whl /tmp/site-ada
  one() { local s=$1 dir=$2 n=$3 lim=$4 pre=""; [ "${5:-}" = san ] && pre="compute-sanitizer --tool memcheck --print-limit 5"
    local t=$(date +%s)
    ( cd results/bugs/$dir && PYTHONPATH=$s timeout $lim $pre python3 $n.py > $d/$dir-$n${5:+.$5}.out 2>&1 ); local rc=$?
    echo "$dir/$n${5:+ ($5)} exit $rc in $(( $(date +%s) - t )) s" >> $d/drafts.txt; }
  one /tmp/site-fsa flash-sparse-attn repro_kernel_cache_seqlen1 120
  one /tmp/site-ebt ebt-flash repro_noncausal_tail_keys 240
  one /tmp/site-ada adasplash repro_bwd_preprocess_oob 240 san
}
drafts &
B=${BUDGET:-400}
bg() { local name=$1; shift; ( timeout $((B+90)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
R="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q"
for i in 0 1; do bg fa3-$i $R -k fa3 --shard $i/2 --out /tmp/o/fa3-$i; done
for i in 0 1; do bg tl-$i $R -k tilelang --shard $i/2 --out /tmp/o/tl-$i; done
for i in 0 1; do bg tldet-$i $R -k tilelang-det --shard $i/2 --out /tmp/o/tldet-$i; done
bg cudnn python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q -k cudnn --out /tmp/o/cudnn
bg flex $R -k flex --out /tmp/o/flex
for i in 0 1; do bg flexdyn-$i $R -k flex-dynamic --shard $i/2 --out /tmp/o/flexdyn-$i; done
bg fla env FLA_TILELANG=0 $R -k fla-attn --out /tmp/o/fla
bg nsa env FLA_TILELANG=0 $R -k fla-nsa --out /tmp/o/nsa
bg sdpaflash $R -k sdpa-flash --out /tmp/o/sdpaflash
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --per-variant-budget $B --out-dir /tmp/o/variants"
n=0; for v in prescaled-q fp8-tensor-core-accumulator tl-tiles-16x64 tl-atomic-dq-64x16; do n=$((n+1)); bg var$n $V --only $v --out /tmp/o/var$n.md; done
wait
echo "campaigns done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary.txt; sort -t' ' -k5 -n /tmp/o/exits.txt >> $OUT/summary.txt
for k in fa3 tl tldet flexdyn; do python3 -m difftest merge /tmp/o/$k-*/report.json -o /tmp/o/$k.json > /tmp/o/merge-$k.log 2>&1; done
for k in fa3 tl tldet flexdyn; do python3 scripts/device/summarise_reports.py /tmp/o/$k.json $k >> $OUT/summary.txt 2>&1; done
for k in cudnn flex fla nsa sdpaflash; do python3 scripts/device/summarise_reports.py /tmp/o/$k/report.json $k >> $OUT/summary.txt 2>&1; done
for k in fa3-0 fa3-1 tl-0 tl-1 tldet-0 tldet-1 cudnn flex flexdyn-0 flexdyn-1 fla nsa sdpaflash; do echo "-- $k" >> $OUT/summary.txt; grep -E "^[a-z0-9-]+: (passed|failed|error)|framework overhead|^  (kernel|compile|truth|inputs|gates|yardsticks|search) |configuration pairs|rate:" /tmp/o/$k.log | cut -c1-220 | head -12 >> $OUT/summary.txt; done
for n in 1 2 3 4; do echo "-- var$n" >> $OUT/summary.txt; grep -v "^$" /tmp/o/var$n.md 2>/dev/null | cut -c1-400 | head -4 >> $OUT/summary.txt; tail -2 /tmp/o/var$n.log | cut -c1-300 >> $OUT/summary.txt; done
echo "-- drafts" >> $OUT/summary.txt; cat /tmp/o/drafts/drafts.txt >> $OUT/summary.txt 2>&1
for f in /tmp/o/drafts/*.out; do echo "== $f" >> $OUT/summary.txt; tail -12 $f | cut -c1-250 >> $OUT/summary.txt; done
cd /tmp/o && mkdir -p rep && for k in fa3-0 fa3-1 tl-0 tl-1 tldet-0 tldet-1 cudnn flex flexdyn-0 flexdyn-1 fla nsa sdpaflash; do cp $k/report.json rep/$k.json 2>/dev/null; done
cp fa3.json tl.json tldet.json flexdyn.json rep/ 2>/dev/null; tar -cJf $OUT/wide-reports.tar.xz rep
tar -cJf $OUT/wide-logs.tar.xz *.log *.md *.txt drafts variants 2>/dev/null
echo "elapsed $(( $(date +%s) - T0 )) s" >> $OUT/summary.txt; cat $OUT/summary.txt; ls -la $OUT
