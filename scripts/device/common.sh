# Sourced by the device call scripts (x2.sh, one.sh) after they set $call: unpacks the carried
# bundles (setup.sh), installs difftest and any carried wheels, and defines
#   stamp MSG          a UTC-stamped line in $L/timeline.txt
#   pack               refreshes $OUT/$call-results.tar.xz (a background packer runs it every 40 s,
#                      so a call cut short still returns what it had)
#   timed_run NAME GPU TIMEOUT ARGS...   `difftest run --device cuda ARGS` with its wall time
#   lanes_done         waits for every background lane (not the packer)
#   finish             packs the results and prints each log's tail and the timeline
# and $R (this call's results), $L (its logs), $S (a survey command line).
set -o pipefail
source scripts/device/setup.sh > /dev/null
R=/tmp/camp/$call; L=$R/logs; mkdir -p $L
python3 -m pip install -q --no-deps --no-build-isolation -e . > $L/pip.log 2>&1 || { tail $L/pip.log; exit 1; }
# carried wheels: .whl/ (the Triton packages) and .device/fa3jax/ (flash-attn3-jax and einops)
for w in .whl .device/fa3jax; do
  ls $w/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    $w/*.whl >> $L/pip.log 2>&1
done
cp $OUT/env.txt $L/
pack() { tar -C /tmp/camp -cJf $OUT/.$call-results.tar.xz $(cd /tmp/camp && ls -d $call $call-* 2>/dev/null) && mv $OUT/.$call-results.tar.xz $OUT/$call-results.tar.xz; }
( while sleep 40; do pack; done ) &
PACKER=$!
stamp() { echo "$(date -u +%T) $*" | tee -a $L/timeline.txt; }
S="python3 scripts/device/survey.py --shrink 25 --max-shrinks 2"
# a difftest run, timed: NAME GPU TIMEOUT args...
timed_run() {
  local name=$1 gpu=$2 t=$3; shift 3
  local t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$gpu timeout $t python3 -m difftest run --device cuda "$@" > $L/$name.log 2>&1
  local rc=$?
  stamp "$name exit $rc wall $(python3 -c "import time;print(round(time.time()-$t0,1))") s"
}
lanes_done() { wait $(jobs -p | grep -v "^$PACKER$"); }
finish() {
  stamp "end $call"
  kill $PACKER 2> /dev/null; pack
  for f in $L/*.log; do echo "== $f"; tail -n 4 $f; done | cut -c1-300
  cat $L/timeline.txt
}
