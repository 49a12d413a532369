# Sourced by the phase scripts on the device machine: lanes (one GPU each) and packing results.
#   lane GPUS NAME command...   run a command on GPUS (CUDA_VISIBLE_DEVICES), log to $OUT/$call-NAME.log,
#                               killed after LANE_SECONDS so the call ends before the device limit
#   pack                        tar /tmp/camp/$call* into $OUT/$call-results.tgz and show the logs' tails
OUT=${OUT:-/tmp/out}
lane() {
  local gpu=$1 name=$2; shift 2
  ( export CUDA_VISIBLE_DEVICES=$gpu; timeout ${LANE_SECONDS:-540} "$@" ) > $OUT/$call-$name.log 2>&1
}
pack() {
  mkdir -p /tmp/camp; tar -C /tmp/camp -czf $OUT/$call-results.tgz $(cd /tmp/camp && ls -d $call* 2>/dev/null)
  ls -la $OUT; tail -n 25 $OUT/$call-*.log
}
