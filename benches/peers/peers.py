#!/usr/bin/env python3
"""Median times of the workloads W1-W8 in NumPy, ONNX Runtime and PyTorch (1 and 2
intra-op threads), one line each: `id peer median_ns`. Same data shapes, index distribution
and timing method (median of repeated calls) as examples/workloads.rs.

PyTorch runs its natural call for each workload (`F.embedding`, `index_select`, `gather`,
advanced indexing), allocating (`torch1`, `torch2`) and with `out=` where it has one
(`torch1_out`, `torch2_out`); every result is checked against NumPy's first.
"""

import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

rng = np.random.default_rng(20261122)


def median_ns(f, budget=1.5, tiny=False):
    f()
    if tiny:
        batch = 1000

        def g():
            for _ in range(batch):
                f()
    else:
        batch, g = 1, f
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 1_000_000):
        t = time.perf_counter_ns()
        g()
        times.append(time.perf_counter_ns() - t)
    times.sort()
    return times[len(times) // 2] / batch


def data(shape):
    n = int(np.prod(shape))
    return (np.arange(n) % 65521).astype(np.float32).reshape(shape)


def model(op, x, idx, **attrs):
    g = helper.make_graph(
        [helper.make_node(op, ["x", "i"], ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
         helper.make_tensor_value_info("i", TensorProto.INT64, idx.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def ort_runs(op, x, idx, **attrs):
    out = {}
    for threads in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(model(op, x, idx, **attrs), so, providers=["CPUExecutionProvider"])
        feeds = {"x": x, "i": idx}
        out[f"ort{threads}"] = lambda s=s, feeds=feeds: s.run(None, feeds)
    return out


def torch_runs(reference, call, out=None):
    """PyTorch's `call()` (and `out(o)` into a preallocated `o`, if given) on 1 and 2
    threads, after checking both against NumPy's result."""
    expect = reference()
    got = call().numpy()
    assert got.shape == expect.shape and np.array_equal(got, expect), "torch differs from numpy"
    runs = {}
    if out is not None:
        o = torch.empty(expect.shape, dtype=torch.float32)
        out(o)
        assert np.array_equal(o.numpy(), expect), "torch out= differs from numpy"
    for threads in (1, 2):  # main() sets the threads from the name
        runs[f"torch{threads}"] = call
        if out is not None:
            runs[f"torch{threads}_out"] = lambda: out(o)
    return runs


def workloads(want):
    def wanted(wid):
        return not want or any(wid.startswith(w) for w in want)

    if wanted("W1"):
        # W1 embed
        x = data((50000, 256)); i = rng.integers(0, 50000, (64, 512))
        o = np.empty((64, 512, 256), np.float32)
        tx, ti = torch.from_numpy(x), torch.from_numpy(i)
        yield "W1_embed", {"numpy": lambda: np.take(x, i, axis=0), "numpy_out": lambda: np.take(x, i, axis=0, out=o),
                           **ort_runs("Gather", x, i, axis=0),
                           **torch_runs(lambda: np.take(x, i, axis=0), lambda: F.embedding(ti, tx),
                                        lambda o: torch.index_select(tx, 0, ti.view(-1), out=o.view(-1, 256)))}, o.nbytes
    if wanted("W2"):
        # W2 midaxis
        x = data((64, 2048, 64)); i = rng.integers(0, 2048, (1024,))
        o = np.empty((64, 1024, 64), np.float32)
        tx, ti = torch.from_numpy(x), torch.from_numpy(i)
        yield "W2_midaxis", {"numpy": lambda: np.take(x, i, axis=1), "numpy_out": lambda: np.take(x, i, axis=1, out=o),
                             **ort_runs("Gather", x, i, axis=1),
                             **torch_runs(lambda: np.take(x, i, axis=1), lambda: torch.index_select(tx, 1, ti),
                                          lambda o: torch.index_select(tx, 1, ti, out=o))}, o.nbytes
    if wanted("W3") or wanted("W4"):
        # W3 / W4 elementwise
        for name, axis in (("W3_elem_last", 1), ("W4_elem_first", 0)):
            x = data((2048, 2048)); i = rng.integers(0, 2048, (2048, 2048))
            tx, ti = torch.from_numpy(x), torch.from_numpy(i)
            yield name, {"numpy": lambda x=x, i=i, axis=axis: np.take_along_axis(x, i, axis=axis),
                         **ort_runs("GatherElements", x, i, axis=axis),
                         **torch_runs(lambda x=x, i=i, axis=axis: np.take_along_axis(x, i, axis=axis),
                                      lambda tx=tx, ti=ti, axis=axis: torch.gather(tx, axis, ti),
                                      lambda o, tx=tx, ti=ti, axis=axis: torch.gather(tx, axis, ti, out=o))}, x.nbytes
    if wanted("W5"):
        # W5 nd pixels
        x = data((1024, 1024, 4)); i = rng.integers(0, 1024, (1_000_000, 2))
        tx, ty, tz = torch.from_numpy(x), torch.from_numpy(i[:, 0].copy()), torch.from_numpy(i[:, 1].copy())
        yield "W5_nd_pixels", {"numpy": lambda: x[i[:, 0], i[:, 1]], **ort_runs("GatherND", x, i),
                               **torch_runs(lambda: x[i[:, 0], i[:, 1]], lambda: tx[ty, tz])}, 1_000_000 * 16
    if wanted("W6"):
        # W6 batched
        x = data((32, 4096, 128)); i = rng.integers(0, 4096, (32, 512))
        b = np.arange(32)[:, None]
        tx, tb, ti = torch.from_numpy(x), torch.from_numpy(b), torch.from_numpy(i)
        yield "W6_batched", {"numpy": lambda: x[b, i], **ort_runs("GatherND", x, i[..., None], batch_dims=1),
                             **torch_runs(lambda: x[b, i], lambda: tx[tb, ti])}, 32 * 512 * 128 * 4
    if wanted("W7"):
        # W7 tiny
        x = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]], np.float32); i = np.array([3, 1])
        o = np.empty((2, 3), np.float32)
        tx, ti = torch.from_numpy(x), torch.from_numpy(i)
        yield "W7_tiny", {"numpy": lambda: np.take(x, i, axis=0), "numpy_out": lambda: np.take(x, i, axis=0, out=o),
                          **ort_runs("Gather", x, i, axis=0),
                          **torch_runs(lambda: np.take(x, i, axis=0), lambda: torch.index_select(tx, 0, ti),
                                       lambda o: torch.index_select(tx, 0, ti, out=o))}, o.nbytes
    if wanted("W8"):
        # W8 multiaxis: (x, y) pairs per image; ORT needs GatherND(batch_dims=1) on (y, x).
        x = data((8, 256, 256, 16)); i = rng.integers(0, 256, (8, 65536, 1, 2))
        n = np.arange(8)[:, None, None]
        yx = np.ascontiguousarray(i[..., ::-1]).reshape(8, 65536, 2)
        tx, tn = torch.from_numpy(x), torch.from_numpy(n)
        t1, t0 = torch.from_numpy(i[..., 1].copy()), torch.from_numpy(i[..., 0].copy())
        yield "W8_multiaxis", {"numpy": lambda: x[n, i[..., 1], i[..., 0], :],
                               **ort_runs("GatherND", x, yx, batch_dims=1),
                               **torch_runs(lambda: x[n, i[..., 1], i[..., 0], :], lambda: tx[tn, t1, t0, :])}, 8 * 65536 * 16 * 4


def main():
    want = sys.argv[1:]
    for wid, peers, out_bytes in workloads(want):
        if want and not any(wid.startswith(w) for w in want):
            continue
        tiny = wid == "W7_tiny"
        for peer, f in peers.items():
            if peer.startswith("torch"):
                torch.set_num_threads(int(peer[5]))
            print(f"{wid} {peer} {median_ns(f, tiny=tiny):.1f}", flush=True)
        src = np.ones(out_bytes // 4, np.float32); dst = np.empty_like(src)
        print(f"{wid} numpy_memcpy {median_ns(lambda: np.copyto(dst, src), tiny=tiny):.1f}", flush=True)


if __name__ == "__main__":
    main()
