#!/usr/bin/env bash
# The chat-trained Gemma drafters (docs/gemma.md, "The drafters shipped"; each part's command, time and
# held-out numbers in assets/gemma-270m/MODEL_CARD.md), as one resumable background job: the three data parts,
# then eagle3 (hybrid's EAGLE-3 part too) and eagle trained on all three.
#
#   setsid nohup bash core/train/chat_drafters.sh >/dev/null 2>&1 &      # start, or resume
#   tail -f ~/.cache/speculative-decoding-lab/jobs/chat-drafters.log      # follow it
#
# It runs from a snapshot of the commit it was started from (later edits to the checkout do not
# change the data or the training half-way), at nice 19, with a lock so that only one copy runs.
# Each data part continues from the shards it already has, a finished part is skipped in seconds,
# and each training run checkpoints every 100 steps and resumes (core.train.scaling), so running
# this again after a stop or a reboot goes on where it stopped. DATA_ONLY=1 stops after the data.
# To pause it while timing something else: kill -STOP -- -<process group in the log>; to go on:
# kill -CONT -- -<process group>. The trained weights stay in the cache (the log names the folder)
# until copied into assets/gemma-270m with a model card.
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/speculative-decoding-lab"
jobs="$cache/jobs"
threads="${THREADS:-2}"
steps="${STEPS:-3000}"
mkdir -p "$jobs"
log="$jobs/chat-drafters.log"

exec 9>"$jobs/chat-drafters.lock"
if ! flock -n 9; then
    echo "chat-drafters: another copy is running (lock $jobs/chat-drafters.lock)" >&2
    exit 1
fi

repo="$(cd "$(dirname "$0")/../.." && pwd)"
commit="$(git -C "$repo" rev-parse --short=12 HEAD)"
src="$jobs/src-$commit"
if [ ! -d "$src" ]; then
    mkdir -p "$src.partial"
    git -C "$repo" archive HEAD | tar -x -C "$src.partial"
    mv "$src.partial" "$src"
fi

say() { echo "$(date -u +%FT%TZ) $*" >>"$log"; }
say "chat-drafters: start, process group $$, commit $commit, $threads threads"
cd "$src"
parts=(
    "a --budget-tokens 786432 --distill-share 1 --chat-share 1"  # chat-style continuations
    "b --budget-tokens 262144"                                   # the book-style mix
    "c --budget-tokens 196608 --distill-share 1 --chat-share 0 --seed 1"  # document continuations
)
folders=()
for part in "${parts[@]}"; do
    read -r name args <<<"$part"
    say "chat-drafters: data part $name"
    # shellcheck disable=SC2086
    nice -n 19 python -m core.train.drafter_data --preset gemma-270m --threads "$threads" $args >>"$log" 2>&1
    # shellcheck disable=SC2086
    folders+=("$(python -m core.train.drafter_data --preset gemma-270m $args --print-folder 2>>"$log")")
done
data="$(IFS=,; echo "${folders[*]}")"
say "chat-drafters: data done: $data"
if [ "${DATA_ONLY:-0}" = 1 ]; then
    exit 0
fi

# eagle3 goes on from eagle3-chat (trained on part of this data); eagle from the eagle shipped
# before this job's (the 8,192-token one, kept in git history: assets/gemma-270m/eagle now holds
# the result). Each starting point is copied once into the cache, so a run's cache key (it names
# the digest of the weights it starts from) stays the same and a finished run is found again.
# starting_point DIR KIND REVISION FOLDER: assets/gemma-270m/FOLDER at REVISION as DIR/KIND, once.
starting_point() {
    [ -f "$1/$2/model.safetensors" ] && return
    rm -rf "$1.partial" "$1"
    mkdir -p "$1.partial/$2"
    for file in config.json model.safetensors; do
        if ! git -C "$repo" show "$3:assets/gemma-270m/$4/$file" >"$1.partial/$2/$file"; then
            say "chat-drafters: the $2 to start from is in commit $3, which this clone lacks (git fetch --unshallow)"
            exit 1
        fi
    done
    mv "$1.partial" "$1"
}
init="$jobs/init-eagle3-chat"
starting_point "$init" eagle3 83c768c08c4facc00015120e602edb1a4b322e8a eagle3-chat  # the last commit with it
init_eagle="$jobs/init-eagle"
starting_point "$init_eagle" eagle af487f484f950ff5aab626554f01659fd290e522 eagle  # the last commit with it
train() {
    say "chat-drafters: training $1 ($steps steps)"
    nice -n 19 python -m core.train.scaling --data "$data" --steps "$steps" --fractions 1 --drafters "$1" \
        --threads "$threads" --draft-vocab 16384 --lr 1e-3 --init "$2" --out "$jobs/chat-drafters-$1.json" \
        >>"$log" 2>&1
}
train eagle3 "$init"
train eagle "$init_eagle"
say "chat-drafters: done; results in $jobs/chat-drafters-*.json, weights under $cache/scaling/"
