#!/usr/bin/env bash
# Instructions per tiny call under callgrind (W7, P7, S4, a tiny gather_reduce): each call
# run N and 2N times, the difference divided by N, so that start-up cancels out.
# Usage: benches/peers/tiny_calls.sh [BINARY]  (default: the release build of tiny_calls)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --release -p ndarray-gather-benches --example tiny_calls >&2
  bin=target/release/examples/tiny_calls
fi
n=2000
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for call in W7_into W7_alloc P7_into P7_apply S4 R_tiny; do
  a=$(count "$call" "$n")
  b=$(count "$call" $((2 * n)))
  echo "$call $(((b - a) / n))"
done
