#!/usr/bin/env bash
# One-command peer comparison: the gather workloads W1-W8 (with the prepared gathers
# P3-P8) and the scatter workloads S1-S5, S8 in ndarray-gather, NumPy, ONNX Runtime and
# PyTorch (1 and 2 intra-op threads), and the gather-reduce workloads B1-B4, G1-G4, R1 in
# ndarray-gather, PyTorch (1 and 2 intra-op threads) and hand-written fused Rust loops,
# on this machine, in one run, as tables and a chart (benches/peers/speed.svg, shown in
# the README; gathers and scatters).
#
#   benches/peers/compare.sh            # all workloads
#   benches/peers/compare.sh W1 W7 S5   # some
#   benches/peers/compare.sh B1 G1 G4   # gather-reduces only
#
# Python packages install into benches/peers/.venv from PyPI on first use (torch's default
# wheel pulls CUDA libraries, about 3 GB; only its CPU side runs). CI does not run this. Medians in microseconds; ratios crate / fastest peer (< 1 is faster).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy onnx onnxruntime
fi
if ! "$venv/bin/python" -c "import torch" 2> /dev/null; then
  "$venv/bin/pip" install --quiet torch
fi
if ! "$venv/bin/python" -c "import torch_geometric" 2> /dev/null; then
  "$venv/bin/pip" install --quiet torch-geometric
fi
# torchvision for I3 (its roi_align), without pulling another torch.
if ! "$venv/bin/python" -c "import torchvision" 2> /dev/null; then
  "$venv/bin/pip" install --quiet --no-deps torchvision==0.29.2 pillow
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && cargo build --quiet --release --example workloads --example scatter_workloads --example reduce_workloads)
# Peers and crate take turns per workload, so that a slow spell of this (shared, noisy)
# machine hits both sides of a ratio rather than one.
ids=("$@")
[ ${#ids[@]} -eq 0 ] && ids=(W1 W2 W3 W4 W5 W6 W7 W8 S1 S2 S3 S4 S5 S8 B1 B2 B3 B4 G1 G2 G3 G4 R1)
touch "$tmp/peers.txt" "$tmp/crate.txt" "$tmp/speers.txt" "$tmp/scrate.txt" "$tmp/rpeers.txt" "$tmp/rcrate.txt"
for id in "${ids[@]}"; do
  # OPENBLAS_CORETYPE slows a current numpy; nothing here uses BLAS, but unset it anyway.
  case "$id" in
    A* | B* | G* | R*)
      "$venv/bin/python" "$here/reduce_peers.py" "$id" >> "$tmp/rpeers.txt"
      "$root/target/release/examples/reduce_workloads" "$id" >> "$tmp/rcrate.txt"
      # The crate on one thread too (its speed-up on two).
      RAYON_NUM_THREADS=1 "$root/target/release/examples/reduce_workloads" "$id" \
        | awk '$2 == "into" || $2 == "plan_into" || ($1 ~ /^G3/ && $2 == "alloc") { print $1, "crate1", $3 }' >> "$tmp/rcrate.txt" ;;
    S*)
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/scatter_peers.py" "$id" >> "$tmp/speers.txt"
      # (`S1_`: the workload itself, not S1p, its plan, which has no peer here.)
      sid=$id; [[ $id == *_* ]] || sid="${id}_"
      "$root/target/release/examples/scatter_workloads" "$sid" >> "$tmp/scrate.txt" ;;
    *)
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/peers.py" "$id" >> "$tmp/peers.txt"
      # The crate on inputs (and `_into` outputs) as users allocate them, then on inputs
      # advised into transparent huge pages (the README's recipe), `_into` only.
      NDARRAY_GATHER_INPUTS=plain "$root/target/release/examples/workloads" "$id" >> "$tmp/crate.txt"
      NDARRAY_GATHER_INPUTS=huge "$root/target/release/examples/workloads" "$id" \
        | awk '$2 == "into" { print $1, "into_huge", $3 }' >> "$tmp/crate.txt" ;;
  esac
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%Y-%m-%d)"
"$venv/bin/python" - "$tmp/crate.txt" "$tmp/peers.txt" "$tmp/scrate.txt" "$tmp/speers.txt" "$tmp/rcrate.txt" "$tmp/rpeers.txt" <<'PY'
import sys
def load(*paths):
    rows = {}
    for path in paths:
        for line in open(path):
            wid, what, ns = line.split()
            rows.setdefault(wid, {})[what] = float(ns)
    return rows
rows = load(sys.argv[1], sys.argv[2])
if rows:
    # PyTorch per thread count: the faster of its allocating call and its out= call.
    for r in rows.values():
        for n in (1, 2):
            forms = [r[k] for k in (f"torch{n}", f"torch{n}_out") if k in r]
            if forms:
                r[f"torch{n}best"] = min(forms)
    cols = ["alloc", "into", "into_huge", "plan_into", "plan_alloc", "plan_build", "memcpy", "memcpy2", "numpy", "numpy_out", "ort1", "ort2", "torch1best", "torch2best"]
    print("| workload | crate alloc | crate into | into, huge-page inputs | plan into | plan alloc | plan build | memcpy 1T | memcpy 2T | numpy | numpy out= | ORT 1T | ORT 2T | torch 1T | torch 2T | into / best peer | best peer | huge-page into / best peer | alloc / numpy | alloc / into | into / memcpy | plan into / into | plan build / alloc |")
    print("|---|" + "---:|" * 16 + "---|" + "---:|" * 6)
    for wid, r in rows.items():
        peers = {p: r[p] for p in ("numpy", "numpy_out", "ort1", "ort2", "torch1best", "torch2best") if p in r}
        best_name = min(peers, key=peers.get)
        best = peers[best_name]
        cell = lambda k: f"{r[k] / 1000:.3f}" if k in r else "-"
        print(f"| {wid} | " + " | ".join(cell(k) for k in cols)
              + f" | {r['into'] / best:.2f} | {best_name.replace('best', '')} | {r['into_huge'] / best:.2f} | {r['alloc'] / r['numpy']:.2f}"
              + f" | {r['alloc'] / r['into']:.2f} | {r['into'] / r['memcpy']:.2f}"
              + f" | {r['plan_into'] / r['into']:.2f} | {r['plan_build'] / r['alloc']:.2f} |")
    print("\ntimes in microseconds (medians); inputs and `_into` outputs are plain allocations as users make"
          " them (NumPy advises its own arrays into huge pages, so the peers read theirs from huge pages), except"
          " `into, huge-page inputs`: the crate on inputs made with the README's recipe;"
          " memcpy 1T = one thread copying the output's bytes,"
          " memcpy 2T = two threads copying half each (one spawned for it); plan into = GatherPlan::apply_into"
          " (P3-P8), its plan built once; plan alloc = GatherPlan::apply; torch = the faster of PyTorch's"
          " allocating call (F.embedding, index_select, gather, advanced indexing) and its out= call")
orders = {w: r for w, r in rows.items() if "into_f_out" in r}
if orders:
    print("\n| workload | crate into (C order) | into a Fortran-order out | F out / C | from a transposed input | transposed / C |")
    print("|---|" + "---:|" * 5)
    for wid, r in orders.items():
        t = r.get("into_t_in")
        tcells = f"{t / 1000:.3f} | {t / r['into']:.2f}" if t else "- | -"
        print(f"| {wid} | {r['into'] / 1000:.3f} | {r['into_f_out'] / 1000:.3f} | {r['into_f_out'] / r['into']:.2f} | {tcells} |")
    print("\nmemory order: the same `_into` call (lowered views, plain inputs) into a Fortran-order output, or"
          " (W3) from a C-order array's transposed view into a C-order output")
srows = load(sys.argv[3], sys.argv[4])
if srows:
    cols = ["scatter", "memcpy", "numpy", "numpy_bincount", "ort1", "ort2", "torch1", "torch2", "torch1_bincount", "torch2_bincount"]
    print("\n| workload | crate | memcpy 1T | numpy | np.bincount | ORT 1T | ORT 2T | torch 1T | torch 2T | torch.bincount 1T | torch.bincount 2T | crate / best peer | best peer | crate / memcpy |")
    print("|---|" + "---:|" * 11 + "---|---:|")
    for wid, r in srows.items():
        peers = {p: r[p] for p in cols[2:] if p in r}
        best_name = min(peers, key=peers.get)
        cell = lambda k: f"{r[k] / 1000:.3f}" if k in r else "-"
        mem = f"{r['scatter'] / r['memcpy']:.2f}" if r.get("memcpy") else "-"
        print(f"| {wid} | " + " | ".join(cell(k) for k in cols) + f" | {r['scatter'] / peers[best_name]:.2f} | {best_name} | {mem} |")
    print("\nscatter times in microseconds (medians), destination reset untimed; memcpy 1T = one thread"
          " copying the updates' bytes (S5: the indices'); ORT returns a new tensor, so its times include"
          " copying the data; torch: index_add_ (S1, S4, S5), scatter_add_ (S2), index_put_ (S3; S8 with"
          " accumulate=True), in place like NumPy")
rrows = load(sys.argv[5], sys.argv[6])
if rrows:
    print("\n| workload | crate | crate alloc | plan build | hand 1T | hand 2T | torch 1T | torch 2T | torch build"
          " | torch 1T, crate's layout | torch 2T, crate's layout | memcpy 1T"
          " | crate / best torch | crate / best torch, crate's layout | crate / hand 2T | crate 1T / 2T |")
    print("|---|" + "---:|" * 15)
    for wid, r in rrows.items():
        main = r.get("plan_into", r.get("into", r.get("alloc")))
        cell = lambda k: f"{r[k] / 1000:.3f}" if k in r else "-"
        best = lambda *ks: min((r[k] for k in ks if k in r), default=None)
        torch, torch_crate = best("torch1", "torch2"), best("torch1_crate", "torch2_crate")
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
        print(f"| {wid} | {main / 1000:.3f} | " + " | ".join(cell(k) for k in ("alloc", "plan_build", "hand1", "hand2", "torch1", "torch2", "torch_build", "torch1_crate", "torch2_crate", "memcpy"))
              + f" | {ratio(main, torch)} | {ratio(main, torch_crate)} | {ratio(main, r.get('hand2'))} | {ratio(r.get('crate1'), main)} |")
    print("\ngather-reduce times in microseconds (medians); crate = the `_into` call (G3: the allocating"
          " gather_reduce_arg; G4: the plan's apply_into, its plan built once), on the default 2 threads;"
          " hand = the fused loop a user writes (2T: two threads, each owning half the outputs);"
          " torch: B embedding_bag, G1 index_select + index_add_, G2 / G3 index_reduce_, G4 sparse.mm"
          " (CSR built once: torch build), R1 segment_reduce, on tables torch allocates (64-byte aligned);"
          " crate's layout: the bags on a table laid out as a user's Array (16 bytes past a cache line,"
          " 4 KiB pages), as the crate reads it")
PY
# The chart shown in the README, from the same run.
# (Only when the run has gathers: a run of gather-reduces alone leaves the chart as it is.)
if [ -s "$tmp/crate.txt" ]; then
  "$venv/bin/python" "$here/chart.py" "$here/speed.svg" "$tmp/crate.txt" "$tmp/peers.txt" "$tmp/scrate.txt" "$tmp/speers.txt"
  echo "chart: benches/peers/speed.svg"
fi
