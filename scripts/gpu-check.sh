#!/usr/bin/env bash
# GPU check: run on a machine with an NVIDIA GPU (the device tool's H200, or your own box):
#   bash scripts/gpu-check.sh OUTDIR
# Runs from the source tree (PYTHONPATH=src) with the machine's own torch; installs
# nothing from the network. Writes logs and JSON into OUTDIR. Finishes in < 10 minutes.
set -uo pipefail
OUT="${1:?usage: scripts/gpu-check.sh OUTDIR}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
status=0

step() {  # step NAME TIMEOUT CMD...: run, log to OUT/NAME.log, remember failures
  local name=$1 limit=$2; shift 2
  echo "== $name: $*" | tee -a "$OUT/summary.txt"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc" | tee -a "$OUT/summary.txt"
  [ $rc -le 1 ] || status=1
  return 0
}

{ nvidia-smi; "$PY" -c "import torch;print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"; } \
  >"$OUT/machine.txt" 2>&1
step cuda-tests 300 "$PY" -m pytest -q -m cuda -p no:cacheprovider tests
step doctor 60 "$PY" -m pitstop doctor --json
cp "$OUT/doctor.log" "$OUT/doctor.json" 2>/dev/null
if "$PY" -c "import pitstop.bench.command" 2>/dev/null; then
  step bench 240 "$PY" -m pitstop bench --quick --device cuda --json "$OUT/bench.json"
fi
cat "$OUT/summary.txt"
exit $status
