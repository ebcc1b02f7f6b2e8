#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600), JOBS at a time (default: the number of
# cores), each starting from its committed seeds (fuzz/seeds/<target>) and growing its
# corpus in fuzz/corpus/<target>. Logs go to fuzz/logs/<target>.log; the last line of each
# says how many inputs ran. Needs the nightly toolchain and cargo-fuzz:
#   cargo install cargo-fuzz
# A crash stops that target and leaves its input in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-600}"
jobs="${JOBS:-$(nproc)}"
targets=(multiaxis gather gather_elements gather_nd gather_batched take take_along_axis plan
  scatter_multiaxis scatter scatter_elements scatter_nd put_along_axis gather_reduce backward quant collection
  sample)
cargo +nightly fuzz build
mkdir -p logs
run() {
  local t="$1"
  mkdir -p "corpus/$t" "seeds/$t"
  cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 > "logs/$t.log" 2>&1
  echo "$t: $(grep -E '^stat::number_of_executed_units' "logs/$t.log" | awk '{print $2}') executions in ${secs}s"
}
export -f run
export secs
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run {}' || status=$?
exit "$status"
