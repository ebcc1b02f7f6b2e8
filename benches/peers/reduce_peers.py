#!/usr/bin/env python3
"""Median times of the gather-reduce workloads B1-B4, G1-G4, R1 in PyTorch (CPU, 1 and 2
intra-op threads), one line each: `id peer median_ns` with peer `torch1` / `torch2`, as
examples/reduce_workloads.rs prints the crate's. The data has the workloads' shapes and
distributions (seeded; not the crate's very values).

Tables and features are allocated as PyTorch users get them (`torch.empty` and friends:
64-byte aligned, 4 KiB pages). The bags run a second time as `torch1_crate` /
`torch2_crate` on a table laid out as the crate's user-allocated `Array` is: 16 bytes past a
cache line (a 256-byte row spans 5 lines, not 4) and in 4 KiB pages (a table from
`torch.from_numpy` would be in huge pages: NumPy advises its large arrays).

  B*  F.embedding_bag(idx, table, offsets, mode=..., per_sample_weights=w)
  G1  zeros.index_add_(0, dst, x.index_select(0, src))
  G2  zeros.index_reduce_(0, dst, x[src], "mean", include_self=False)
  G3  zeros.index_reduce_(0, dst, x[src], "amax", include_self=False) (no argmax in torch)
  G4  torch.sparse.mm(adjacency as CSR, built once, untimed; `torch_build` times it), x)
  R1  torch.segment_reduce(data, "sum", lengths=l)
  T1  B1's embedding_bag backward (autograd.grad of the bags, forward untimed): `torch*`
      with sparse=True (a sparse gradient), `torch*_dense` with sparse=False (a fresh
      dense [1M, 64] gradient)
  T2  T1 with mode="mean"
  T3  G2's x[src] + index_reduce_(mean, include_self=False) backward into x's gradient
  Q1  B1's bags over B1's table as Int8 rows: quantized::embedding_bag_byte_rowwise_offsets
  Q2  the same over Int4 rows: embedding_bag_4bit_rowwise_offsets
  Q3  the same over B1's table in half floats: F.embedding_bag on a float16 / bfloat16 table
  K1  a DLRM batch: 26 tables of 64 (6 of 1M rows, 20 of 20k-200k), B = 4096, 1-20 ids
      per (feature, sample), Sum: 26 F.embedding_bag calls + torch.cat
  K2  K1 on Int8 rows: 26 quantized::embedding_bag_byte_rowwise_offsets calls + torch.cat
  R2  200_000 rows of 4 values into 20_000 by random ids: zeros.index_add_(0, dst, values)
  Q4  B1's table quantized: `torch*_int8` / `_int4` embedding_bag_byte / 4bit_prepack
  B5  a [200_000, 32] table, 8 batches of 4096 Zipf(1.1)-skewed bags of 1-50 ids in turn:
      `torch*` F.embedding_bag (forward), `torch*_step` embedding_bag(sparse=True),
      backward and an optim.SGD step
  O1  B1's table, a new batch of B1's bags each step: `torch*_step` embedding_bag(sparse=True),
      backward, torch.optim.Adagrad; O3 the same with SparseAdam
  A1  G1's graph, a GAT layer's message passing, 4 heads of 16 (GATConv's): torch-geometric's
      utils.softmax(scores, dst) and utils.scatter(alpha[..., None] * x[src], dst, sum),
      forward and autograd backward (`h.backward(grad_h)`) to scores and x; `torch*_fwd` the
      forward alone (torch-geometric installs into the bench venv, pure Python)
"""

import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261126)
WIDTH = 64


def median_ns(call, budget=1.5):
    call()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 10_000):
        t = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - t)
    times.sort()
    return float(times[len(times) // 2])


def values(rows):
    return (rng.random((rows, WIDTH), dtype=np.float32) * 100).round() / 2


def table(rows):
    """As PyTorch users allocate: torch's allocator (64-byte aligned, 4 KiB pages)."""
    t = torch.empty((rows, WIDTH))
    t.copy_(torch.from_numpy(values(rows)))
    return t


def like_crate(t):
    """A copy of `t` laid out as the crate's `Array` is: glibc's 16 bytes past a page, 4 KiB
    pages (NumPy's huge-page advice switched off for this one allocation)."""
    advise = np._core.multiarray._set_madvise_hugepage(False)
    try:
        a = np.empty(tuple(t.shape), np.float32)
    finally:
        np._core.multiarray._set_madvise_hugepage(advise)
    a[...] = t.numpy()
    return torch.from_numpy(a)


def bags():
    lens = rng.integers(1, 65, size=16384)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return torch.from_numpy(starts), int(lens.sum()), torch.from_numpy(lens.astype(np.int64))


def skewed_batches(rows, count):
    """B5's batches, as benches/reduce_workloads.rs draws them (Zipf(1.1) ranks spread over
    the rows by the same permutation; numpy's generator, not the crate's values)."""
    w = 1.0 / np.arange(1, rows + 1, dtype=np.float64) ** 1.1
    cdf = np.cumsum(w)
    out = []
    for _ in range(count):
        lens = rng.integers(1, 51, size=4096)
        ranks = np.searchsorted(cdf, rng.random(int(lens.sum())) * cdf[-1]) + 1
        ids = (ranks * 104_729 + 17) % rows
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        out.append((torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(starts.astype(np.int64))))
    return out


def calls(wid):
    if wid.startswith("Q1") or wid.startswith("Q2"):
        t = table(1_000_000)
        q = torch.ops.quantized
        packed = q.embedding_bag_byte_prepack(t) if wid.startswith("Q1") else q.embedding_bag_4bit_prepack(t)
        op = q.embedding_bag_byte_rowwise_offsets if wid.startswith("Q1") else q.embedding_bag_4bit_rowwise_offsets
        starts, n, _ = bags()
        idx = torch.from_numpy(rng.integers(0, 1_000_000, size=n).astype(np.int64))
        return {"": lambda: op(packed, idx, starts, False, 0, False, None, None, False)}
    if wid.startswith("Q3"):
        t = table(1_000_000)
        h, b = t.half(), t.bfloat16()
        starts, n, _ = bags()
        idx = torch.from_numpy(rng.integers(0, 1_000_000, size=n).astype(np.int64))
        return {"_f16": lambda: F.embedding_bag(idx, h, starts, mode="sum"),
                "_bf16": lambda: F.embedding_bag(idx, b, starts, mode="sum")}
    if wid.startswith("K"):
        sizes = [1_000_000 if t < 6 else 20_000 + int(rng.integers(0, 180_001)) for t in range(26)]
        batch = 4096
        tables = [table(n) for n in sizes]
        feats = []
        for n in sizes:
            lens = rng.integers(1, 21, size=batch)
            offs = torch.from_numpy(np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64))
            ids = torch.from_numpy(rng.integers(0, n, size=int(lens.sum())).astype(np.int64))
            feats.append((ids, offs))
        if wid.startswith("K2"):
            q = torch.ops.quantized
            packed = [q.embedding_bag_byte_prepack(t) for t in tables]
            del tables
            op = q.embedding_bag_byte_rowwise_offsets
            return {"": lambda: torch.cat([op(p, i, o, False, 0, False, None, None, False)
                                           for p, (i, o) in zip(packed, feats)], dim=1)}
        return {"": lambda: torch.cat([F.embedding_bag(i, t, o, mode="sum")
                                       for t, (i, o) in zip(tables, feats)], dim=1)}
    if wid.startswith("Q4"):
        t = table(1_000_000)
        q = torch.ops.quantized
        return {"_int8": lambda: q.embedding_bag_byte_prepack(t), "_int4": lambda: q.embedding_bag_4bit_prepack(t)}
    if wid.startswith("B5"):
        rows = 200_000
        t = torch.empty((rows, 32))
        t.copy_(torch.from_numpy((rng.random((rows, 32), dtype=np.float32) * 100).round() / 2))
        batches = skewed_batches(rows, 8)
        turn = [0]

        def batch():
            turn[0] = (turn[0] + 1) % len(batches)
            return batches[turn[0]]

        def forward():
            ids, starts = batch()
            return F.embedding_bag(ids, t, starts, mode="sum")

        param = torch.nn.Parameter(t.clone())
        opt = torch.optim.SGD([param], lr=0.01)

        def step():
            ids, starts = batch()
            opt.zero_grad()
            out = F.embedding_bag(ids, param, starts, mode="sum", sparse=True)
            out.backward(out.detach() * 1e-6)
            opt.step()

        return {"": forward, "_step": step}
    if wid.startswith("O"):
        # O1 / O3: B1's table, a new batch of B1's bags each step (one of 8), sparse=True,
        # then torch.optim.Adagrad (O1) or SparseAdam (O3).
        starts, n, _ = bags()
        batches = [torch.from_numpy(rng.integers(0, 1_000_000, size=n).astype(np.int64)) for _ in range(8)]
        g = table(len(starts)) * 1e-3 - 0.5
        param = torch.nn.Parameter(table(1_000_000))
        opt = (torch.optim.SparseAdam if wid.startswith("O3") else torch.optim.Adagrad)([param], lr=0.01)
        turn = [0]

        def train():
            turn[0] = (turn[0] + 1) % len(batches)
            opt.zero_grad()
            out = F.embedding_bag(batches[turn[0]], param, starts, mode="sum", sparse=True)
            out.backward(g)
            opt.step()

        return {"_step": train}
    if wid.startswith("T3"):
        nodes, edges = 100_000, 1_000_000
        x = table(nodes).requires_grad_()
        src = torch.from_numpy(rng.integers(0, nodes, size=edges).astype(np.int64))
        dst = torch.from_numpy(rng.integers(0, nodes, size=edges).astype(np.int64))
        h = torch.zeros(nodes, WIDTH).index_reduce_(0, dst, x[src], "mean", include_self=False)
        g = table(nodes)
        return {"": lambda: torch.autograd.grad(h, x, g, retain_graph=True)}
    if wid.startswith("T"):
        starts, n, _ = bags()
        idx = torch.from_numpy(rng.integers(0, 1_000_000, size=n).astype(np.int64))
        mode = "mean" if wid.startswith("T2") else "sum"
        g = table(len(starts))
        runs = {}
        for suffix, sparse in (("", True), ("_dense", False)):
            t = table(1_000_000).requires_grad_()
            y = F.embedding_bag(idx, t, starts, mode=mode, sparse=sparse)
            runs[suffix] = (lambda y=y, t=t: torch.autograd.grad(y, t, g, retain_graph=True))
        return runs
    if wid.startswith("B"):
        t = table(1_000_000)
        starts, n, _ = bags()
        idx = torch.from_numpy(rng.integers(0, 1_000_000, size=n).astype(np.int64))
        w = torch.from_numpy((0.25 + (np.arange(n) % 7) * 0.125).astype(np.float32))
        mode = {"B3": "mean", "B4": "max"}.get(wid[:2], "sum")
        psw = w if wid.startswith("B2") else None
        tc = like_crate(t)
        return {
            "": lambda: F.embedding_bag(idx, t, starts, mode=mode, per_sample_weights=psw),
            "_crate": lambda: F.embedding_bag(idx, tc, starts, mode=mode, per_sample_weights=psw),
        }
    if wid.startswith("A1"):
        from torch_geometric.utils import scatter, softmax

        nodes, edges, heads, d = 100_000, 1_000_000, 4, 16
        x = table(nodes).reshape(nodes, heads, d).clone().requires_grad_(True)
        src = torch.from_numpy(rng.integers(0, nodes, size=edges).astype(np.int64))
        dst = torch.from_numpy(rng.integers(0, nodes, size=edges).astype(np.int64))
        scores = torch.from_numpy(rng.standard_normal((edges, heads)).astype(np.float32)).requires_grad_(True)
        grad_h = torch.randn(nodes, heads, d)

        def forward():
            alpha = softmax(scores, dst, num_nodes=nodes)
            return scatter(alpha.unsqueeze(-1) * x[src], dst, 0, dim_size=nodes, reduce="sum")

        def layer():
            x.grad, scores.grad = None, None
            forward().backward(grad_h)

        def fwd():
            with torch.no_grad():
                forward()

        return {"": layer, "_fwd": fwd}
    if wid.startswith("R2"):
        values = torch.from_numpy(rng.standard_normal((200_000, 4)).astype(np.float32))
        dst = torch.from_numpy(rng.integers(0, 20_000, size=200_000).astype(np.int64))
        return {"": lambda: torch.zeros(20_000, 4).index_add_(0, dst, values)}
    if wid.startswith("G"):
        nodes, edges = 100_000, 1_000_000
        x = table(nodes)
        src = torch.from_numpy(rng.integers(0, nodes, size=edges).astype(np.int64))
        dst = torch.from_numpy(rng.integers(0, nodes, size=edges).astype(np.int64))
        if wid.startswith("G1"):
            return {"": lambda: torch.zeros(nodes, WIDTH).index_add_(0, dst, x.index_select(0, src))}
        if wid.startswith("G2"):
            return {"": lambda: torch.zeros(nodes, WIDTH).index_reduce_(0, dst, x[src], "mean", include_self=False)}
        if wid.startswith("G3"):
            return {"": lambda: torch.zeros(nodes, WIDTH).index_reduce_(0, dst, x[src], "amax", include_self=False)}

        def build():
            coo = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.ones(edges), (nodes, nodes))
            return coo.coalesce().to_sparse_csr()

        adj = build()
        return {"": lambda: torch.sparse.mm(adj, x), "_build": build}
    starts, n, lens = bags()
    data = table(n)
    return {"": lambda: torch.segment_reduce(data, "sum", lengths=lens, unsafe=True)}


def main(ids):
    import warnings
    warnings.filterwarnings("ignore")
    for wid in ids:
        runs = calls(wid)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for suffix, call in runs.items():
                if suffix == "_build" and threads == 2:
                    continue
                name = "torch_build" if suffix == "_build" else f"torch{threads}{suffix}"
                print(f"{wid} {name} {median_ns(call):.1f}", flush=True)


if __name__ == "__main__":
    all_ids = ["B1_bag_sum", "B2_bag_weighted", "B3_bag_mean", "B4_bag_max", "G1_graph_sum",
               "G2_graph_mean", "G3_graph_max_arg", "G4_graph_plan", "R1_segment_sum",
               "T1_bag_sum_backward", "T2_bag_mean_backward", "T3_graph_mean_backward",
               "B5_small_skewed_bags", "Q4_quantize", "Q1_int8_bags", "Q2_int4_bags", "Q3_half_bags",
               "K1_dlrm_batch", "K2_int8_dlrm", "O1_bag_step", "O3_adam_step", "A1_attention_layer",
               "R2_narrow_ids"]
    want = sys.argv[1:]
    main([i for i in all_ids if not want or any(i.startswith(w) for w in want)])
