#!/usr/bin/env bash
# H200 call D (2026-12-02, session 2): the correct-variant catalogue at scale on the host's CPU
# cores (one process per variant, the GPU hidden), beside: TileLang race stress (`difftest stress`,
# atomic dQ and the deterministic build), compute-sanitizer on cuDNN reproducers (`difftest
# sanitize`), cuDNN's nightly hunt again (the signature fix 93896f9), gpu campaigns of
# fa3 and tilelang-det whose report.json keep k_needed per case (the k re-derivation), and the
# standalone cuDNN dense d_qk 136..160 candidates (results/bugs/cudnn/repro_cudnn_sdpa.py).
set -u
T0=$(date +%s)
D=.device/callD
mkdir -p /tmp/site /tmp/o/variants
for b in $D/*.tar.xz; do tar -C /tmp/site -xJf $b; done
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit)"; nproc; gcc --version | head -1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('dew-flash-attn-cu13','tilelang','nvidia-cudnn-frontend','hypothesis'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
VB=${VB:-430}; GB=${GB:-360}
for v in $(python3 -m difftest variants --list | awk '{print $1}'); do
  ( CUDA_VISIBLE_DEVICES= DIFFTEST_TILELANG_DEVICE=cpu OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
      timeout $((VB+90)) python3 -m difftest variants --only $v --cases 30000 --per-variant-budget $VB \
      --shrink-budget 20 --out-dir /tmp/o/variants > /tmp/o/variants/$v.log 2>&1
    echo "variant $v exit $?" >> /tmp/o/exits.txt ) &
done
for k in fa3 tilelang-det; do
  ( timeout $((GB+120)) python3 -m difftest run -k $k -p gpu --device cuda --max-examples 3000 \
      --time-budget $GB --shrink-budget 20 --out /tmp/o/$k --db none -q > /tmp/o/$k.log 2>&1
    echo "$k exit $?" >> /tmp/o/exits.txt ) &
done
( timeout $((GB+120)) python3 -m difftest run -k cudnn -p nightly --device cuda --max-examples 3000 \
      --time-budget $GB --shrink-budget 20 --out /tmp/o/cudnn --db none -q > /tmp/o/cudnn.log 2>&1
  echo "cudnn exit $?" >> /tmp/o/exits.txt ) &
( timeout 240 python3 results/bugs/cudnn/repro_cudnn_sdpa.py dense_d136_v72 dense_d160_v120 dense_d136_v72_b1 \
      dense_d128_v72 thd_d200_v72 > /tmp/o/cudnn_dense.jsonl 2>&1; echo "cudnn_dense exit $?" >> /tmp/o/exits.txt
  for k in tilelang tilelang-det; do
    timeout 200 python3 -m difftest stress -k $k --device cuda --reps 100 --batch 60 --load 1 --head-dim 128 \
        --dtype bfloat16 --out /tmp/o/stress-$k > /tmp/o/stress-$k.log 2>&1; echo "stress $k exit $?" >> /tmp/o/exits.txt
  done ) &
( SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer | head -1)
  for r in results/bugs/cudnn/thd-dqk-gt192-dv-mid.dense-d136-v72.json results/bugs/cudnn/thd-dqk-gt192-dv-mid.json; do
    timeout 420 python3 -m difftest sanitize $r --timeout 100 --sanitizer $SAN > /tmp/o/sanitize-$(basename $r .json).log 2>&1
    echo "sanitize $(basename $r) exit $?" >> /tmp/o/exits.txt; cp ${r%.json}.sanitizer.json /tmp/o/ 2>/dev/null
  done ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt
cat /tmp/o/cudnn_dense.jsonl /tmp/o/stress-*.log /tmp/o/sanitize-*.log
for k in fa3 tilelang-det cudnn; do echo "== $k"; tail -25 /tmp/o/$k.log; done
python3 -m difftest variants --from-logs /tmp/o/variants/*.jsonl
cd /tmp/o && for k in fa3 tilelang-det cudnn; do xz -T0 -c $k/report.json > $k.report.json.xz; done
tar -cJf $OUT/variants.tar.xz variants; tar -cJf $OUT/callD.tar.xz --exclude=variants --exclude='*/runs/*/cases*' \
  *.log *.jsonl *.txt *.report.json.xz */runs/*/findings.json */runs/*/repro 2>/dev/null; ls -la $OUT
