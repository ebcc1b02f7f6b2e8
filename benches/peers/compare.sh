#!/usr/bin/env bash
# One-command peer comparison: the workloads W1-W8 in ndarray-gather, NumPy and ONNX
# Runtime (1 and 2 intra-op threads) on this machine, in one run, as one table.
#
#   benches/peers/compare.sh            # all workloads
#   benches/peers/compare.sh W1 W7      # some
#
# Python packages install into benches/peers/.venv from PyPI on first use. CI does not
# run this. Medians in microseconds; ratios crate / fastest peer (< 1 is faster).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy onnx onnxruntime
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && cargo build --quiet --release --example workloads)
# Peers and crate take turns per workload, so that a slow spell of this (shared, noisy)
# machine hits both sides of a ratio rather than one.
ids=("$@")
[ ${#ids[@]} -eq 0 ] && ids=(W1 W2 W3 W4 W5 W6 W7 W8)
for id in "${ids[@]}"; do
  # OPENBLAS_CORETYPE slows a current numpy; nothing here uses BLAS, but unset it anyway.
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/peers.py" "$id" >> "$tmp/peers.txt"
  "$root/target/release/examples/workloads" "$id" >> "$tmp/crate.txt"
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%Y-%m-%d)"
"$venv/bin/python" - "$tmp/crate.txt" "$tmp/peers.txt" <<'PY'
import sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        wid, what, ns = line.split()
        rows.setdefault(wid, {})[what] = float(ns)
cols = ["alloc", "into", "memcpy", "memcpy2", "numpy", "numpy_out", "ort1", "ort2"]
print("| workload | crate alloc | crate into | memcpy 1T | memcpy 2T | numpy | numpy out= | ORT 1T | ORT 2T | into / best peer | alloc / numpy | into / memcpy |")
print("|---|" + "---:|" * 11)
for wid, r in rows.items():
    peers = [r[p] for p in ("numpy", "numpy_out", "ort1", "ort2") if p in r]
    best = min(peers)
    cell = lambda k: f"{r[k] / 1000:.3f}" if k in r else "-"
    print(f"| {wid} | " + " | ".join(cell(k) for k in cols)
          + f" | {r['into'] / best:.2f} | {r['alloc'] / r['numpy']:.2f} | {r['into'] / r['memcpy']:.2f} |")
print("\ntimes in microseconds (medians); memcpy 1T = one thread copying the output's bytes,"
      " memcpy 2T = two threads copying half each (one spawned for it)")
PY
