#!/usr/bin/env bash
# Issue 13 part 1 on ONE H200 (kind nvidia-h200), one call of <= 330 s: TileOPs GQA backward.
#   1. results/bugs/tileops/repro_tileops_nan_dq.py, the standalone NaN-dQ reproducer (7 cases in
#      parallel processes, <= 85 s), with only the TileOPs bundle on PYTHONPATH (not our tilelang);
#   2. beside it (niced, so the reproducer keeps its cores): `python -m difftest.kernels.tileops
#      --warm gqa` builds the edge corpus's 21 compile configurations plus the determinism
#      problems on 9 workers into one TileLang disk cache (<= 90 s);
#   3. scripts/device/survey.py tileops-gqa 200 with 20-run determinism: drawn cases reuse the
#      warmed shapes (new_compile_p 0.02, every edge configuration warm), so cases are cache
#      loads instead of one 10-40 s build each (P2: 24 cases in 220 s).
# A background packer refreshes $OUT/P5-results.tar.xz every 30 s, so a call cut short still
# returns what it had. Everything lands under /tmp/camp/P5 (logs/, repro/, *.cases.jsonl, ...).
#
#   run(kind="nvidia-h200", timeout_s=360, carry=[".device/tileops.tar.xz", ".device/fa3.tar.xz"],
#       command="bash scripts/device/tileops.sh")
# OP=mha (or gqa-bwd) campaigns that op instead (then under /tmp/camp/P5-mha, $OUT/P5-mha-results.tar.xz);
# REPRO=0 skips step 1 (then the warm-up runs alone, with all $JOBS jobs, default 16).
# GPU=N runs on that GPU (default 0); WARM_S bounds the warm-up (default 90 s); NAME names the
# result folder; CASE_TIMEOUT bounds a case (default 300 s: a hang costs that much);
# SURVEY_ARGS adds survey.py options (e.g. --det-first, --narrow ...); WARM_S=0 skips the warm-up. Called from x2.sh (environment already set up): setup and install are skipped.
set -o pipefail
T0=$(date +%s)  # the 330 s budget counts from here, unpacking included
SETUP=0; [ -n "$DIFFTEST_TILEOPS_SITE" ] || { source scripts/device/setup.sh > /dev/null; SETUP=1; }
OP=${OP:-gqa}; REPRO=${REPRO:-1}
[ -z "$NAME" ] && { NAME=P5; [ "$OP" != gqa ] && NAME=P5-$OP; }
R=/tmp/camp/$NAME; L=$R/logs; mkdir -p $L
export TILELANG_CACHE_DIR=/tmp/tlc-tileops-$OP CUDA_VISIBLE_DEVICES=${GPU:-0}
mkdir -p $TILELANG_CACHE_DIR
stamp() { echo "$(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a $L/timeline.txt; }
[ $SETUP = 1 ] && { python3 -m pip install -q --no-deps --no-build-isolation -e . > $L/pip.log 2>&1 || { tail $L/pip.log; exit 1; }; }
cp $OUT/env.txt $L/
pack() { tar -C /tmp/camp -cJf $OUT/.$NAME-results.tar.xz $NAME 2>/dev/null && mv $OUT/.$NAME-results.tar.xz $OUT/$NAME-results.tar.xz; }
PACKER=
[ $SETUP = 1 ] && { ( while sleep 30; do pack; done ) & PACKER=$!; }  # x2.sh packs for its calls
stamp "start (setup done)"

# 1. the standalone reproducer: TileOPs' bundle alone on the path, as a user would run it
JOBS=${JOBS:-16}
if [ "$REPRO" = 1 ]; then
  JOBS=9
  ( PYTHONPATH=/tmp/tileops_site REPRO_CASE_TIMEOUT_S=80 timeout 88 \
      python3 results/bugs/tileops/repro_tileops_nan_dq.py > $L/repro.jsonl 2> $L/repro.err
    stamp "repro exit $?" ) &
  RPID=$!
fi

# 2. warm-up beside it: edge corpus + the determinism problems (survey --det-runs runs them)
WARM_ARGS=()
while read -r j; do WARM_ARGS+=(--problem "$j"); done < <(python3 - <<'PY'
import json, sys
sys.path.insert(0, "scripts/device")
from campaigns import DET_PROBLEMS
for p in DET_PROBLEMS:
    print(json.dumps(p.to_dict()))
PY
)
if [ "${WARM_S:-90}" != 0 ]; then  # WARM_S=0: no warm-up (the survey builds what it draws)
  nice -n 10 timeout ${WARM_S:-90} python3 -m difftest.kernels.tileops --warm $OP --jobs $JOBS "${WARM_ARGS[@]}" \
    > $L/warm.log 2>&1
  stamp "warm exit $? ($(grep '^warmed' $L/warm.log | cut -c1-120))"
fi
[ -n "$RPID" ] && wait $RPID

# 3. the survey: what is left of the budget ($BUDGET, default 330 s); 60 s of it for one shrink (10 s + a build it may start),
#    20-run determinism on the two warmed det problems (a fresh worker) and the summary
LEFT=$(( ${BUDGET:-330} - ($(date +%s) - T0) - 10 ))
SECS=$(( LEFT - 60 )); [ $SECS -lt 40 ] && SECS=40 && LEFT=100
stamp "survey: ${LEFT}s left, drawing for ${SECS}s"
timeout $LEFT python3 scripts/device/survey.py --out $R --seconds $SECS --shrink 10 --max-shrinks 1 \
  --det-runs 20 --new-compile-p 0.02 --warm-configs 64 --timeout ${CASE_TIMEOUT:-300} $SURVEY_ARGS tileops-$OP 200 \
  > $L/tileops-$OP.log 2>&1
stamp "tileops-$OP survey exit $?"

[ -n "$PACKER" ] && { kill $PACKER 2> /dev/null; pack; }
[ -f $L/repro.jsonl ] && { echo "== repro"; cut -c1-400 $L/repro.jsonl; tail -n 3 $L/repro.err; }
echo "== warm"; tail -n 4 $L/warm.log | cut -c1-300
echo "== survey"; tail -n 6 $L/tileops-$OP.log | cut -c1-600
cat $L/timeline.txt
