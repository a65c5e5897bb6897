#!/usr/bin/env bash
# GPU check: run on a machine with an NVIDIA GPU (the device tool's H200, or your own box):
#   bash scripts/gpu-check.sh OUTDIR
# Runs from the source tree (PYTHONPATH=src) with the machine's own python3 and torch;
# installs nothing from the network. Writes into OUTDIR (flat, at most 8 files): summary.txt,
# machine.txt, the JSON results, and every step's log bundled in logs.tar.gz.
# Budget: every step has its own limit, and all of them together stop at
# GPU_CHECK_BUDGET_S (default 540 s: the device tool runs one command for at most 600 s);
# a step with under 20 s left is skipped and says so, and the archive is still written.
set -uo pipefail
OUT="${1:?usage: scripts/gpu-check.sh OUTDIR}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=120
PY="${PYTHON:-python3}"
status=0
BUDGET="${GPU_CHECK_BUDGET_S:-540}"
: >"$OUT/summary.txt"
LOGS="$(mktemp -d)"
trap 'tar -czf "$OUT/logs.tar.gz" -C "$LOGS" . && rm -rf "$LOGS"' EXIT

step() {  # step NAME LIMIT_S CMD...: run with a time limit, log to LOGS/NAME.log (-> logs.tar.gz)
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS left=$((BUDGET - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "== $name: skipped, the check's budget of ${BUDGET} s is spent" | tee -a "$OUT/summary.txt"
    status=1
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "== $name (limit ${limit} s): $*" | tee -a "$OUT/summary.txt"
  timeout --signal=INT --kill-after=15 "$limit" "$@" >"$LOGS/$name.log" 2>&1
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
#    doctor on a real NVML, bench and profile CUDA paths: profile's syncs and device time,
#    and tests/profile/test_profile_cuda.py: a hand-written update rule with the bf16 A/B
#    measured on the GPU, LBFGS closures, a Python get_batch feeding the GPU).
step cuda-tests 200 "$PY" -m pytest -q -m cuda -p no:cacheprovider -o addopts="" tests
# 2. The doctor on a real GPU, importing torch to test CUDA init and cuDNN.
step doctor 90 "$PY" -m pitstop doctor --torch --json -o "$OUT/doctor.json"
"$PY" -m pitstop doctor --torch >"$LOGS/doctor.txt" 2>&1
# 3. The ladder on the GPU.
step bench 150 "$PY" -m pitstop bench --quick --device cuda --json "$OUT/bench.json"
# 4. profile of the pitstop.train example on the GPU (syncs, GPU busy time).
step profile 90 "$PY" -m pitstop profile --steps 20 --warmup 3 --out /tmp/pitstop-gpu-profile \
  -- "$PY" examples/train_pitstop.py --device cuda --steps 40
cp /tmp/pitstop-gpu-profile/profile.json "$OUT/profile.json" 2>/dev/null
cp /tmp/pitstop-gpu-profile/report.html "$LOGS/profile-report.html" 2>/dev/null
# 5. monitor beside a training run: one snapshot (GPM on Hopper), a short recording with
#    its verdicts, the plot of it, and a real NVML value set for the monitor's tests.
"$PY" examples/train_pitstop.py --device cuda --steps 100000 >"$LOGS/monitor-train.log" 2>&1 &
train_pid=$!
sleep 15  # past CUDA init and the first batches
step monitor-once 60 "$PY" -m pitstop monitor --once --json --interval 1
cp "$LOGS/monitor-once.log" "$OUT/monitor.json"
step monitor-record 60 "$PY" -m pitstop monitor --record "$LOGS/monitor-record.jsonl" --interval 0.5 --duration 20
step monitor-plot 60 "$PY" -m pitstop plot "$LOGS/monitor-record.jsonl" -o "$LOGS/monitor-record.png"
step record-nvml 60 "$PY" scripts/record_nvml.py "$LOGS/nvml-recorded.json" --frames 10 \
  --bind-pid "$train_pid" --what "examples/train_pitstop.py --device cuda"
kill "$train_pid" 2>/dev/null; wait "$train_pid" 2>/dev/null
# 6. pitstop tune model on the example model: precision (TF32, bf16, fp16+scaler),
#    cudnn.benchmark, channels_last, fused AdamW/SGD, batch size with real CUDA memory
#    peaks and out-of-memory recovery, torch.compile amortised over --steps.
step tune 130 "$PY" -m pitstop tune model --model examples/tune_example.py:model --device cuda \
  --budget 100s --steps 20000 --json "$OUT/tune.json"
# 7. pitstop tune loader on the example dataset for the GPU: pinned memory is tried, the
#    batches are copied to the device inside each trial (its JSON goes into the archive).
step tune-loader 90 "$PY" -m pitstop tune loader --dataset examples/tune_example.py:dataset \
  --device cuda --budget 45s --out "$LOGS/pitstop-loader.json" --json "$LOGS/tune-loader.json"

# OUT holds at most 8 files: summary.txt, machine.txt, doctor/bench/profile/monitor/tune
# JSON and logs.tar.gz (every log, recording, plot and the rest, written to LOGS and
# bundled by the EXIT trap above, also when a step fails).
exit $status
