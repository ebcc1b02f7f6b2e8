#!/usr/bin/env bash
# A user program's release rebuild after a touch of its `main.rs` (issue 74's build-time
# figure): one f32 `gather_reduce`, then the same with a `QTable::gather_reduce` (feature
# `quant` of the program). Prints seconds; CI does not run this.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
cp "$root/benches/build_time/main.rs" "$dir/src/main.rs"
cat > "$dir/Cargo.toml" << TOML
[package]
name = "build-time"
version = "0.1.0"
edition = "2024"
[dependencies]
ndarray = "0.17"
ndarray-gather = { path = "$root" }
[features]
quant = []
TOML
cd "$dir"
for features in "" "--features quant"; do
  cargo build --quiet --release $features
  touch src/main.rs
  start=$(date +%s.%N)
  cargo build --quiet --release $features
  echo "rebuild ${features:-f32 only}: $(echo "$(date +%s.%N) - $start" | bc) s"
done
