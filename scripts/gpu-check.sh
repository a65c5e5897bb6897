#!/usr/bin/env bash
# GPU check: run on a machine with an NVIDIA GPU (the device tool's H200, or your own box):
#   bash scripts/gpu-check.sh OUTDIR
# Runs from the source tree (PYTHONPATH=src) with the machine's own python3 and torch;
# installs nothing from the network. Writes logs and JSON into OUTDIR (flat: at most a
# handful of files). Budget: < 10 minutes on a fresh machine; each step has its own limit.
set -uo pipefail
OUT="${1:?usage: scripts/gpu-check.sh OUTDIR}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=120
PY="${PYTHON:-python3}"
status=0
: >"$OUT/summary.txt"

step() {  # step NAME LIMIT_S CMD...: run with a time limit, log to OUT/NAME.log
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name: $*" | tee -a "$OUT/summary.txt"
  timeout --signal=INT --kill-after=15 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc after $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  # doctor/lint exit 1 when they find something: that is a result, not a failure.
  [ $rc -le 1 ] || status=1
  return 0
}

# ... and the torch build pitstop names when a command needs torch (a cuXXX variant for
# this driver, from the doctor's DR003 command: docs/install.md).
{ nvidia-smi; "$PY" -c "import torch;print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
  "$PY" -c "from pitstop.deps import torch_install_hint as h; print('pitstop advises:', h())"; } \
  >"$OUT/machine.txt" 2>&1

# 1. Every CUDA-only test (pitstop.train's sync-free step, prefetcher streams, real OOM,
#    doctor on a real NVML, bench and profile CUDA paths).
step cuda-tests 300 "$PY" -m pytest -q -m cuda -p no:cacheprovider -o addopts="" tests
# 2. The doctor on a real GPU, importing torch to test CUDA init and cuDNN.
step doctor 90 "$PY" -m pitstop doctor --torch --json -o "$OUT/doctor.json"
"$PY" -m pitstop doctor --torch >"$OUT/doctor.txt" 2>&1
# 3. The ladder on the GPU.
step bench 240 "$PY" -m pitstop bench --quick --device cuda --json "$OUT/bench.json"
# 4. profile of the pitstop.train example on the GPU (syncs, GPU busy time).
step profile 90 "$PY" -m pitstop profile --steps 20 --warmup 3 --out /tmp/pitstop-gpu-profile \
  -- "$PY" examples/train_pitstop.py --device cuda --steps 40
cp /tmp/pitstop-gpu-profile/profile.json "$OUT/profile.json" 2>/dev/null
# 5. monitor beside a training run: one snapshot (GPM on Hopper), a short recording with
#    its verdicts, the plot of it, and a real NVML value set for the monitor's tests.
"$PY" examples/train_pitstop.py --device cuda --steps 100000 >"$OUT/monitor-train.log" 2>&1 &
train_pid=$!
sleep 15  # past CUDA init and the first batches
step monitor-once 60 "$PY" -m pitstop monitor --once --json --interval 1
cp "$OUT/monitor-once.log" "$OUT/monitor.json"
step monitor-record 60 "$PY" -m pitstop monitor --record "$OUT/monitor-record.jsonl" --interval 0.5 --duration 20
step monitor-plot 60 "$PY" -m pitstop plot "$OUT/monitor-record.jsonl" -o "$OUT/monitor-record.png"
step record-nvml 60 "$PY" scripts/record_nvml.py "$OUT/nvml-recorded.json" --frames 10 \
  --bind-pid "$train_pid" --what "examples/train_pitstop.py --device cuda"
kill "$train_pid" 2>/dev/null; wait "$train_pid" 2>/dev/null

# At most 8 files in OUT: the JSON results stay, logs and the rest go into one archive.
( cd "$OUT" && tar -czf logs.tar.gz --remove-files -- *.log doctor.txt monitor-record.* nvml-recorded.json 2>/dev/null )
exit $status
