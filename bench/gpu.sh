#!/usr/bin/env bash
# The benchmarks of docs/benchmarks.md on a CUDA GPU, in under 10 minutes:
#   1. drafters side by side and against transformers' generate / assisted / prompt lookup, with the
#      recording overhead (python -m core bench --compare-hf --overhead);
#   2. the batch-size study up to batch 64 (--batch-sweep): throughput per drafter and the target's
#      forward latency against query tokens x batch;
#   3. batched greedy decoding checked per request against model.generate() at every batch size;
#   4. the learned drafters (eagle3 and hybrid, fixed k and auto) side by side.
# Results go to docs/benchmarks/<preset>-cuda/ (bench.json, bench.md, bench.html, batch_check.*,
# hardware.txt naming the GPU; step 4 in learned/).
#
#   bash bench/gpu.sh                      # preset tiny
#   PRESET=gemma-270m bash bench/gpu.sh    # any preset, folder or hub id
#   bash bench/gpu.sh --cpu-smoke          # no GPU: run every step tiny-sized on CPU, into a temporary folder
set -euo pipefail
cd "$(dirname "$0")/.."

PRESET="${PRESET:-tiny}"
PYTHON="${PYTHON:-python}"
SMOKE=0
[ "${1:-}" = "--cpu-smoke" ] && SMOKE=1

if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu; OUT="$(mktemp -d)"; SIZES=1,2; TOKENS=8; REPEATS=1; CHECK_SIZES=1,2; LIMIT=600
    grep -v '^#' assets/prompts/heldout.txt | head -2 > "$OUT/prompts.txt"
    PROMPTS=(--prompts "$OUT/prompts.txt")
else
    if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
        echo "bench/gpu.sh: no CUDA device is visible to torch $("$PYTHON" -c 'import torch; print(torch.__version__)')." >&2
        echo "  Install the CUDA build of torch 2.13 on a machine with an NVIDIA GPU, or run" >&2
        echo "  'bash bench/gpu.sh --cpu-smoke' to check the script's steps on CPU (numbers meaningless)." >&2
        exit 2
    fi
    DEVICE=cuda; OUT="docs/benchmarks/${PRESET}-cuda"; SIZES=1,2,4,8,16,32,64; TOKENS=64; REPEATS=2
    CHECK_SIZES=1,2,4,8,16,32,64; LIMIT=330; PROMPTS=()
fi
mkdir -p "$OUT"
start=$(date +%s)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    "$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)"
    if [ "$DEVICE" = cuda ]; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
            || "$PYTHON" -c "import torch; print(torch.cuda.get_device_name(0))"
    else
        echo "CPU smoke run, $(nproc) cores"
    fi
} > "$OUT/hardware.txt"
cat "$OUT/hardware.txt"

BENCH=(-m core bench --preset "$PRESET" --device "$DEVICE" --drafters none,draft,ngram --compare-hf --overhead
       --batch-sweep "$SIZES" --repeats "$REPEATS" --max-new-tokens "$TOKENS" --out "$OUT" ${PROMPTS[@]+"${PROMPTS[@]}"})
echo "== 1+2. $PYTHON ${BENCH[*]}"
timeout "$LIMIT" "$PYTHON" "${BENCH[@]}"

CHECK=(bench/batch_check.py --preset "$PRESET" --device "$DEVICE" --batch-sizes "$CHECK_SIZES"
       --max-new-tokens 32 --out "$OUT/batch_check.json")
echo "== 3. $PYTHON ${CHECK[*]}"
status=0
timeout 120 "$PYTHON" "${CHECK[@]}" > "$OUT/batch_check.md" || status=$?
cat "$OUT/batch_check.md"
if [ "$status" != 0 ]; then
    # bf16 matrix products need not round alike at every batch size: a near-tie can flip a greedy token
    echo "batch check: some request differs from generate() or a block leaked (status $status); see $OUT/batch_check.md" >&2
fi
LEARNED=(-m core bench --preset "$PRESET" --device "$DEVICE" --drafters none,eagle3,eagle3:auto,hybrid,hybrid:auto
         --repeats "$REPEATS" --max-new-tokens "$TOKENS" --out "$OUT/learned" ${PROMPTS[@]+"${PROMPTS[@]}"})
echo "== 4. $PYTHON ${LEARNED[*]}"
timeout 150 "$PYTHON" "${LEARNED[@]}" || echo "learned drafters: not finished (status $?)" >&2

echo "done in $(( $(date +%s) - start )) s; results in $OUT"
exit "$status"
