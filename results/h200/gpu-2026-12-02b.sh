#!/usr/bin/env bash
# H200 call B (2026-12-02): FA4 4.0.0b36's unattended nightly hunts (deterministic and fast
# backward, no --narrow) under the engine of 04c08c0+, the FA problem on both, and a bisect of
# each open FA4 finding across flash-attn-4 4.0.0b26..b36.
set -u
T0=$(date +%s)
D=${D:-.device/callB}
mkdir -p /tmp/site /tmp/o
for b in $D/*.tar.xz; do tar -C /tmp/site -xJf $b; done
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .device/commit 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)
for m in ('flash-attn-4','nvidia-cutlass-dsl','quack-kernels','hypothesis'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
BUDGET=${BUDGET:-420}
for k in fa4 fa4-fast; do
  ( timeout $((BUDGET+100)) python3 -m difftest run -k $k -p nightly --device cuda --max-examples 5000 \
      --time-budget $BUDGET --shrink-budget 25 --out /tmp/o/$k --db none -q > /tmp/o/$k.log 2>&1
    echo "$k exit $?" >> /tmp/o/exits.txt ) &
done
( timeout 300 python3 results/h200/fa_shape.py fa4 fa4-fast > /tmp/o/fa_shape.log 2>&1
  echo "fa_shape exit $?" >> /tmp/o/exits.txt ) &
# each open FA4 finding's reproducer bisected across the betas b26..b36 (wheels carried)
for r in hdim8-zero-grads hdim48-72-80-wrong-grads sink-lse-inf late-rejections.d104; do
  ( timeout $((BUDGET+60)) python3 -m difftest bisect results/bugs/fa4/$r.json --versions $D/fa4wheels/*.whl \
      --timeout 240 --work /tmp/bisect-$r --json /tmp/o/bisect-$r.json > /tmp/o/bisect-$r.log 2>&1
    echo "bisect $r exit $?" >> /tmp/o/exits.txt ) &
done
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt
cat /tmp/o/fa_shape.log | grep -v Warning | head -30
for f in /tmp/o/bisect-*.log; do echo "== $f"; tail -15 $f; done
for k in fa4 fa4-fast; do echo "== $k"; grep -v "claims:" /tmp/o/$k.log | tail -45; done
cd /tmp/o && find . -name "*.cases.jsonl" -size +20M -delete; tar -cJf $OUT/callB.tar.xz --exclude="*.html" . 2>/dev/null; ls -la $OUT
