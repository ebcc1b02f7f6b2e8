#!/usr/bin/env python3
"""Median times of the scatter workloads S1-S5, S8 in NumPy, ONNX Runtime and PyTorch
(1 and 2 intra-op threads), one line each: `id peer median_ns`, as
examples/scatter_workloads.rs prints the crate's.

PyTorch runs its natural in-place call (`index_add_`, `scatter_add_`, `index_put_`,
`bincount`) on 1 and 2 threads (`torch1`, `torch2`), on the same reset destination as
NumPy, and its result is checked against NumPy's first (sums to float rounding: the order
of the additions differs; S3's replace on the cells written once, duplicates being
undefined in both).

NumPy scatters in place: the destination is reset before every call and the reset is not
timed. ONNX Runtime's Scatter* return a new tensor: its times include copying `data` into
that output, which is part of the operator there. ORT's ScatterND(none) leaves duplicates
undefined; the crate makes the last one win.
"""

import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

rng = np.random.default_rng(20261123)


def median_ns(call, reset=None, budget=1.5, tiny=False):
    """Median time of `call`; `reset` runs untimed before each call (for tiny calls: in
    batches of 1000, resets timed apart and subtracted)."""
    reset = reset or (lambda: None)
    if tiny:
        batch = 1000

        def both():
            for _ in range(batch):
                reset()
                call()

        def resets():
            for _ in range(batch):
                reset()

        return max(median_ns(both, budget=budget) - median_ns(resets, budget=budget), 0.0) / batch
    reset(); call()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 1_000_000):
        reset()
        t = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - t)
    times.sort()
    return float(times[len(times) // 2])


def data(shape):
    idx = np.indices(shape).sum(axis=0) if len(shape) > 0 else 0
    return ((idx % 251) * 0.01).astype(np.float32)


ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE}


def ort_runs(op, x, idx, upd, **attrs):
    g = helper.make_graph(
        [helper.make_node(op, ["x", "i", "u"], ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", ONNX_TYPE[x.dtype], x.shape),
         helper.make_tensor_value_info("i", TensorProto.INT64, idx.shape),
         helper.make_tensor_value_info("u", ONNX_TYPE[upd.dtype], upd.shape)],
        [helper.make_tensor_value_info("y", ONNX_TYPE[x.dtype], None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    out = {}
    for threads in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        feeds = {"x": x, "i": idx, "u": upd}
        out[f"ort{threads}"] = (lambda s=s, feeds=feeds: s.run(None, feeds), None)
    return out


def in_place(pristine, f):
    """A call of `f(x)` on a working copy of `pristine`, and the reset of that copy."""
    x = pristine.copy()
    return (lambda: f(x), lambda: np.copyto(x, pristine))


def torch_runs(pristine, numpy_f, torch_f, written_once=None):
    """`torch_f(t)` in place on a working copy of `pristine` (`t` shares its memory), on 1
    and 2 threads, after checking one call against `numpy_f` on another copy."""
    expect = pristine.copy()
    numpy_f(expect)
    x = pristine.copy()
    t = torch.from_numpy(x)
    got = torch_f(t)
    got = x if got is None or got.data_ptr() == t.data_ptr() else got.numpy()
    if written_once is not None:
        got, expect = got[written_once], expect[written_once]
    assert got.shape == expect.shape and np.allclose(got, expect, rtol=1e-5, atol=1e-3), "torch differs from numpy"
    reset = lambda: np.copyto(x, pristine)
    runs = {f"torch{n}": (lambda: torch_f(t), reset) for n in (1, 2)}
    # `torch{n}_own`: the destination in torch's own allocation (64-byte aligned, 4 KiB
    # pages), as a PyTorch user's tensor is; NumPy advises huge pages for its large arrays.
    own = torch.empty(tuple(t.shape), dtype=t.dtype)
    own.copy_(t)
    source = torch.from_numpy(pristine)
    runs.update({f"torch{n}_own": (lambda: torch_f(own), lambda: own.copy_(source)) for n in (1, 2)})
    return runs


WANT = sys.argv[1:]


def wanted(wid):
    return not WANT or any(wid.startswith(w) for w in WANT)


def workloads():
    if wanted("S1"):
        # S1 embedding gradient: np.add.at(t, ids, rows)
        t = np.zeros((50000, 256), np.float32); i = rng.integers(0, 50000, (64, 512)); u = data((64, 512, 256))
        ti, tu = torch.from_numpy(i.reshape(-1)), torch.from_numpy(u.reshape(-1, 256))
        yield "S1_embed_grad", {"numpy": in_place(t, lambda x: np.add.at(x, i, u)),
                                **ort_runs("ScatterND", t, i[..., None], u, reduction="add"),
                                **torch_runs(t, lambda x: np.add.at(x, i, u), lambda x: x.index_add_(0, ti, tu))}
    if wanted("S2"):
        # S2 GatherElements backward along the last axis
        x0 = data((2048, 2048)); i = rng.integers(0, 2048, (2048, 2048)); u = data((2048, 2048))
        rows = np.arange(2048)[:, None]
        ti, tu = torch.from_numpy(i), torch.from_numpy(u)
        yield "S2_elem_add", {"numpy": in_place(x0, lambda x: np.add.at(x, (rows, i), u)),
                              **ort_runs("ScatterElements", x0, i, u, axis=1, reduction="add"),
                              **torch_runs(x0, lambda x: np.add.at(x, (rows, i), u), lambda x: x.scatter_add_(1, ti, tu))}
    if wanted("S3"):
        # S3 points splatted into an image, the last duplicate wins
        x0 = data((1024, 1024, 4)); i = rng.integers(0, 1024, (1_000_000, 2)); u = data((1_000_000, 4))
        y, xx = i[:, 0], i[:, 1]

        def splat(x):
            x[y, xx] = u
        ty, tx, tu = torch.from_numpy(y.copy()), torch.from_numpy(xx.copy()), torch.from_numpy(u)
        flat = y * 1024 + xx
        once = np.bincount(flat, minlength=1024 * 1024).reshape(1024, 1024) == 1
        yield "S3_nd_replace", {"numpy": in_place(x0, splat), **ort_runs("ScatterND", x0, i, u),
                                **torch_runs(x0, splat, lambda x: x.index_put_((ty, tx), tu), written_once=once)}
    if wanted("S4"):
        # S4 tiny
        x0 = data((16,)); i = rng.integers(0, 16, (8,)); u = data((8,))
        ti, tu = torch.from_numpy(i), torch.from_numpy(u)
        yield "S4_tiny", {"numpy": in_place(x0, lambda x: np.add.at(x, i, u)),
                          **ort_runs("ScatterElements", x0, i, u, axis=0, reduction="add"),
                          **torch_runs(x0, lambda x: np.add.at(x, i, u), lambda x: x.index_add_(0, ti, tu))}
    if wanted("S5"):
        # S5 histogram of 16M values into 1024 bins, f64
        h = np.zeros(1024); i = rng.integers(0, 1024, (16_777_216,))
        ti, ones = torch.from_numpy(i), torch.ones(i.shape, dtype=torch.float64)
        counts = np.bincount(i, minlength=1024)
        assert np.array_equal(torch.bincount(ti, minlength=1024).numpy(), counts), "torch differs from numpy"
        yield "S5_histogram", {"numpy_bincount": (lambda: np.bincount(i, minlength=1024), None),
                               "numpy": in_place(h, lambda x: np.add.at(x, i, 1.0)),
                               **ort_runs("ScatterElements", h, i, np.ones(i.shape), axis=0, reduction="add"),
                               **torch_runs(h, lambda x: np.add.at(x, i, 1.0), lambda x: x.index_add_(0, ti, ones)),
                               **{f"torch{n}_bincount": (lambda: torch.bincount(ti, minlength=1024), None) for n in (1, 2)}}
    if wanted("S8"):
        # S8 backward of W8: (x, y) pairs per image
        t = np.zeros((8, 256, 256, 16), np.float32); i = rng.integers(0, 256, (8, 65536, 1, 2))
        u = data((8, 65536, 1, 16))
        n = np.arange(8)[:, None, None]
        nyx = np.concatenate([np.broadcast_to(n[..., None], (8, 65536, 1, 1)), i[..., 1:2], i[..., 0:1]], axis=-1)
        tn, t1, t0 = (torch.from_numpy(np.ascontiguousarray(a)) for a in (n, i[..., 1], i[..., 0]))
        tu = torch.from_numpy(u)
        yield "S8_multiaxis_grad", {"numpy": in_place(t, lambda x: np.add.at(x, (n, i[..., 1], i[..., 0]), u)),
                                    **ort_runs("ScatterND", t, np.ascontiguousarray(nyx), u, reduction="add"),
                                    **torch_runs(t, lambda x: np.add.at(x, (n, i[..., 1], i[..., 0]), u),
                                                 lambda x: x.index_put_((tn, t1, t0), tu, accumulate=True))}


def main():
    for wid, peers in workloads():
        for peer, (call, reset) in peers.items():
            if peer.startswith("torch"):
                torch.set_num_threads(int(peer[5]))
            # np.add.at over 16M indices takes seconds: a few runs only.
            budget = 0.5 if wid == "S5_histogram" and peer == "numpy" else 1.5
            ns = median_ns(call, reset, budget=budget, tiny=wid == "S4_tiny")
            print(f"{wid} {peer} {ns:.1f}", flush=True)


if __name__ == "__main__":
    main()
