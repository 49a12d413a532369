#!/usr/bin/env bash
# Device call A (2026-12-07): unseeded `gpu` campaigns toward >= 2,000 cases for the production kernels short
# of it (fa3, tilelang, tilelang-det, flex, sdpa-flash, fla-attn with FLA_TILELANG=0, issue 40), the new
# adapters' first GPU runs (flex-dynamic after its donated-buffer fix, fla-nsa; issue 43), the four GPU
# variants never run to 2,000 (prescaled-q, fp8-tensor-core-accumulator, the two TileLang variants), and the
# two fla NSA and two jvp-flash-attention draft reports' scripts (issue 44). All side by side on one GPU. Carry: .device/tilelang.tar.xz,
# .device/fa3.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .whl/retest, .whl/jvp, .whl/hunt, .gpu. Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/site-fla
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for w in .whl/retest/fla_core-*.whl .whl/retest/einops-*.whl; do python3 -m zipfile -e $w /tmp/site; python3 -m zipfile -e $w /tmp/site-fla; done
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('tilelang','dew-flash-attn-cu13','triton','fla-core','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
# Every draft report's script (issue 44), one after the other beside the campaigns; read at the end.
bash scripts/device/2026-12-07-drafts.sh /tmp/o/drafts prep; bash scripts/device/2026-12-07-drafts.sh /tmp/o/drafts 1 & bash scripts/device/2026-12-07-drafts.sh /tmp/o/drafts 2 &
B=${BUDGET:-380}
bg() { local name=$1; shift; ( timeout $((B+60)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
R="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q"
bg fa3-0 $R -k fa3 --shard 0/2 --out /tmp/o/fa3-0
bg fa3-1 $R -k fa3 --shard 1/2 --out /tmp/o/fa3-1
for i in 0 1; do bg tl-$i $R -k tilelang --shard $i/2 --out /tmp/o/tl-$i; done
for i in 0 1; do bg tldet-$i $R -k tilelang-det --shard $i/2 --out /tmp/o/tldet-$i; done
bg flex $R -k flex --out /tmp/o/flex
bg flexdyn-0 $R -k flex-dynamic --shard 0/2 --out /tmp/o/flexdyn-0
bg flexdyn-1 $R -k flex-dynamic --shard 1/2 --out /tmp/o/flexdyn-1
bg fla env FLA_TILELANG=0 $R -k fla-attn --out /tmp/o/fla
bg nsa env FLA_TILELANG=0 $R -k fla-nsa --out /tmp/o/nsa
bg sdpaflash $R -k sdpa-flash --out /tmp/o/sdpaflash
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --per-variant-budget $B --out-dir /tmp/o/variants"
bg var1 $V --only prescaled-q --out /tmp/o/var1.md
bg var2 $V --only fp8-tensor-core-accumulator --out /tmp/o/var2.md
bg var3 $V --only tl-tiles-16x64 --out /tmp/o/var3.md
bg var4 $V --only tl-atomic-dq-64x16 --out /tmp/o/var4.md
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; sort -t' ' -k5 -n /tmp/o/exits.txt
cat /tmp/o/drafts/drafts.txt; for f in /tmp/o/drafts/*.out; do echo "== $f"; tail -8 $f | cut -c1-250; done
M="python3 -m difftest merge"
for k in fa3 tl tldet flexdyn; do $M /tmp/o/$k-*/report.json -o /tmp/o/$k.json > /tmp/o/merge-$k.log 2>&1; echo "== merged $k"; tail -4 /tmp/o/merge-$k.log | cut -c1-300; done
for k in fa3-0 fa3-1 tl-0 tl-1 tldet-0 tldet-1 flex flexdyn-0 flexdyn-1 fla nsa sdpaflash; do echo "== $k"; grep -E "^[a-z0-9-]+: (passed|failed)|^  finding|needs|configuration pairs|compile reuse|unexplained|unavailable|refus|^  (kernel|compile|truth|inputs) " /tmp/o/$k.log | cut -c1-300 | head -16; done
for v in 1 2 3 4; do echo "== var$v"; grep -v "^$" /tmp/o/var$v.md 2>/dev/null | cut -c1-400 | head -4; tail -1 /tmp/o/var$v.log | cut -c1-300; done
cd /tmp/o && mkdir -p rep && for k in fa3-0 fa3-1 tl-0 tl-1 tldet-0 tldet-1 flex flexdyn-0 flexdyn-1 fla nsa sdpaflash; do cp $k/report.json rep/$k.json 2>/dev/null; done
cp fa3.json tl.json tldet.json flexdyn.json rep/ 2>/dev/null
tar -cJf $OUT/callA-reports.tar.xz rep; tar -cJf $OUT/callA-logs.tar.xz *.log *.md *.txt drafts variants 2>/dev/null; ls -la $OUT
