#!/usr/bin/env bash
# H200 call A (2026-12-02): the production kernels' unseeded gpu campaigns (hunting) under
# the verdicts of 7d34fd5+, cuDNN's nightly hunt with its three known findings, the FA problem.
set -u
T0=$(date +%s)
D=${D:-.device/callA}
mkdir -p /tmp/site /tmp/o
for b in $D/*.tar.xz; do tar -C /tmp/site -xJf $b; done
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .device/commit 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('triton','jax','dew-flash-attn-cu13','tilelang','nvidia-cudnn-frontend','hypothesis'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
BUDGET=${BUDGET:-330}
for k in sdpa-efficient sdpa-math fa3 tilelang-det; do
  ( timeout $((BUDGET+120)) python3 -m difftest run -k $k -p gpu --device cuda --max-examples 3000 \
      --time-budget $BUDGET --shrink-budget 20 --out /tmp/o/$k --db none -q > /tmp/o/$k.log 2>&1
    echo "$k exit $?" >> /tmp/o/exits.txt ) &
done
( timeout $((BUDGET+120)) python3 -m difftest run -k cudnn -p nightly --device cuda --max-examples 3000 \
      --time-budget $BUDGET --shrink-budget 20 --out /tmp/o/cudnn --db none -q > /tmp/o/cudnn.log 2>&1
  echo "cudnn exit $?" >> /tmp/o/exits.txt ) &
( timeout 200 python3 results/h200/fa_shape.py fa3 sdpa-flash sdpa-efficient sdpa-cudnn cudnn tilelang-det > /tmp/o/fa_shape.log 2>&1
  echo "fa_shape exit $?" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt
cat /tmp/o/fa_shape.log | head -40
for k in sdpa-efficient sdpa-math fa3 tilelang-det cudnn; do echo "== $k"; tail -30 /tmp/o/$k.log; done
cd /tmp/o && find . -name "*.cases.jsonl" -size +20M -delete; tar -cJf $OUT/callA.tar.xz . 2>/dev/null; ls -la $OUT
