#!/usr/bin/env bash
# Device call B (2026-12-06, session 5): unseeded `gpu` campaigns toward >= 2,000 cases for the production
# kernels short of it (fa3, tilelang, tilelang-det, flex, fla-attn), flex-dynamic's first GPU campaign
# (>= 1,000 cases), and the GPU variants short of 2,000 in one run; all side by side. Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
for w in .whl/covertable-3.2.0-py3-none-any.whl .whl/retest/fla_core-*.whl .whl/retest/einops-*.whl; do python3 -m zipfile -e $w /tmp/site; done
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
B=${BUDGET:-450}
bg() { local name=$1; shift; ( timeout $((B+70)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
R="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q"
bg fa3-0 $R -k fa3 --shard 0/2 --out /tmp/o/fa3-0
bg fa3-1 $R -k fa3 --shard 1/2 --out /tmp/o/fa3-1
bg tl-0 $R -k tilelang --shard 0/2 --out /tmp/o/tl-0
bg tl-1 $R -k tilelang --shard 1/2 --out /tmp/o/tl-1
bg tldet-0 $R -k tilelang-det --shard 0/2 --out /tmp/o/tldet-0
bg tldet-1 $R -k tilelang-det --shard 1/2 --out /tmp/o/tldet-1
bg flex $R -k flex --out /tmp/o/flex
bg flexdyn-0 $R -k flex-dynamic --shard 0/2 --out /tmp/o/flexdyn-0
bg flexdyn-1 $R -k flex-dynamic --shard 1/2 --out /tmp/o/flexdyn-1
bg fla $R -k fla-attn --out /tmp/o/fla
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --per-variant-budget $B --out-dir /tmp/o/variants"
bg var1 $V --only delta-from-stored-o --out /tmp/o/var1.md
bg var2 $V --only lse-log2-stored --out /tmp/o/var2.md
bg var3 $V --only lse-only-backward --out /tmp/o/var3.md
bg var4 $V --only scaled-ds-stored --out /tmp/o/var4.md
bg var5 $V --only sequential-fp32-gemm-one-tile --out /tmp/o/var5.md
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; sort -t' ' -k5 -n /tmp/o/exits.txt
for k in fa3-0 fa3-1 tl-0 tl-1 tldet-0 tldet-1 flex flexdyn-0 flexdyn-1 fla; do echo "== $k"; grep -E "^[a-z0-9-]+: |finding|needs|configuration pairs|compile|unexplained" /tmp/o/$k.log | cut -c1-300 | head -14; done
for v in 1 2 3 4 5; do echo "== var$v"; cat /tmp/o/var$v.md 2>/dev/null | cut -c1-220 | grep -v "^$" | head -6; tail -1 /tmp/o/var$v.log | cut -c1-300; done
cd /tmp/o && mkdir -p rep && for k in fa3-0 fa3-1 tl-0 tl-1 tldet-0 tldet-1 flex flexdyn-0 flexdyn-1 fla; do cp $k/report.json rep/$k.json 2>/dev/null; done
tar -cJf $OUT/callB-reports.tar.xz rep; tar -cJf $OUT/callB-logs.tar.xz *.log *.md exits.txt 2>/dev/null; ls -la $OUT
