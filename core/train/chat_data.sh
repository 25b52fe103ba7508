#!/usr/bin/env bash
# The data of the chat-trained Gemma drafters (docs/gemma.md, "Data for the chat-trained
# drafters"): three resumable parts, built one after another in the background.
#
#   setsid nohup bash core/train/chat_data.sh >/dev/null 2>&1 &      # start, or resume
#   tail -f ~/.cache/speculative-decoding-lab/jobs/chat-data.log      # follow it
#
# It builds from a snapshot of the commit it was started from (later edits to the checkout do
# not change the data half-way), at nice 19, with a lock so that only one copy runs. Each part
# continues from the shards it already has and a finished part is skipped in seconds, so running
# this again after a stop or a reboot resumes the build. To pause it while timing something
# else: kill -STOP -- -<pid in the log>; to go on: kill -CONT -- -<pid>.
set -euo pipefail

cache="${SDLAB_CACHE:-$HOME/.cache/speculative-decoding-lab}"
jobs="$cache/jobs"
threads="${THREADS:-2}"
mkdir -p "$jobs"
log="$jobs/chat-data.log"

exec 9>"$jobs/chat-data.lock"
if ! flock -n 9; then
    echo "chat-data: another copy is running (lock $jobs/chat-data.lock)" >&2
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
say "chat-data: start, process group $$, commit $commit, $threads threads"
cd "$src"
run() {
    say "chat-data: part $1"
    shift
    nice -n 19 python -m core.train.drafter_data --preset gemma-270m --threads "$threads" "$@" \
        >>"$log" 2>&1
}
run a --budget-tokens 786432 --distill-share 1 --chat-share 1
run b --budget-tokens 262144
run c --budget-tokens 196608 --distill-share 1 --chat-share 0 --seed 1
say "chat-data: done"
