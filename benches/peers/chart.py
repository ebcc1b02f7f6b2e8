"""The speed chart of benches/peers/compare.sh: per workload, the crate, NumPy, ONNX Runtime
and PyTorch (1 and 2 threads) and a memcpy (1 and 2 threads), as multiples of the 1-thread memcpy of the
same bytes, on a log scale. Plain SVG, no plotting library.

    python chart.py OUT.svg FILE...   # FILEs of `id variant median_ns` lines
"""
import math
import sys
from datetime import date

out_path, paths = sys.argv[1], sys.argv[2:]
rows = {}
for path in paths:
    for line in open(path):
        wid, what, ns = line.split()
        rows.setdefault(wid, {})[what] = float(ns)

# (label, colour, the variants it shows: the first one present)
SERIES = [
    ("ndarray-gather", "#1b6ac9", ("into", "scatter")),
    ("NumPy", "#e8a33d", ("numpy", "numpy_bincount")),
    ("ONNX Runtime 1T", "#7a7a7a", ("ort1",)),
    ("ONNX Runtime 2T", "#b5b5b5", ("ort2",)),
    ("PyTorch 1T", "#c0392b", ("torch1",)),
    ("PyTorch 2T", "#f1948a", ("torch2",)),
    ("memcpy 1T", "#2e9e5b", ("memcpy",)),
    ("memcpy 2T", "#8fd19e", ("memcpy2",)),
]


def value(r, keys):
    if keys[0] == "numpy":  # NumPy's fastest way
        found = [r[k] for k in ("numpy", "numpy_out", "numpy_bincount") if k in r]
        return min(found) if found else None
    if keys[0].startswith("torch"):  # PyTorch's fastest way on that many threads
        found = [r[k] for k in (keys[0], keys[0] + "_out", keys[0] + "_bincount") if k in r]
        return min(found) if found else None
    for k in keys:
        if k in r:
            return r[k]
    return None


wids = [w for w in rows if rows[w].get("memcpy")]
lo, hi = 0.25, max(
    [4.0]
    + [value(rows[w], s[2]) / rows[w]["memcpy"] for w in wids for s in SERIES if value(rows[w], s[2])]
)
hi = 2 ** math.ceil(math.log2(hi))
bar, gap, left, width, top = 9, 12, 150, 560, 40
height = top + len(wids) * (len(SERIES) * bar + gap) + 84


def x(v):
    v = min(max(v, lo), hi)
    return left + width * math.log(v / lo) / math.log(hi / lo)


svg = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" height="{height}" '
    'font-family="sans-serif" font-size="11">',
    f'<rect width="100%" height="100%" fill="white"/>',
    f'<text x="{left}" y="18" font-size="13" font-weight="bold">Time as a multiple of a '
    f"1-thread memcpy of the same bytes (lower is faster; log scale)</text>",
]
tick = lo
while tick <= hi:
    svg.append(f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{height - 74}" stroke="#ddd"/>')
    svg.append(f'<text x="{x(tick):.1f}" y="{height - 60}" text-anchor="middle">{tick:g}x</text>')
    tick *= 2
y = top
for w in wids:
    r = rows[w]
    svg.append(f'<text x="{left - 8}" y="{y + len(SERIES) * bar / 2 + 4:.1f}" text-anchor="end">{w}</text>')
    for label, colour, keys in SERIES:
        v = value(r, keys)
        if v is not None:
            m = v / r["memcpy"]
            svg.append(
                f'<rect x="{left}" y="{y}" width="{x(m) - left:.1f}" height="{bar - 1}" fill="{colour}">'
                f"<title>{w} {label}: {m:.2f}x memcpy ({v / 1000:.1f} us)</title></rect>"
            )
        y += bar
    y += gap
# The legend in rows of four.
for k, (label, colour, _) in enumerate(SERIES):
    lx, ly = left + (k % 4) * 140, height - 42 + (k // 4) * 14
    svg.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{colour}"/>')
    svg.append(f'<text x="{lx + 14}" y="{ly + 9}">{label}</text>')
svg.append(
    f'<text x="{left}" y="{height - 4}" fill="#666">benches/peers/compare.sh, {date.today()}; '
    "gathers: the crate's _into call; scatters: its in-place call; NumPy's and PyTorch's fastest way</text>"
)
svg.append("</svg>")
open(out_path, "w").write("\n".join(svg) + "\n")
