#!/usr/bin/env python3
"""Median times of the workloads W1-W8 in NumPy and ONNX Runtime (1 and 2 intra-op
threads), one line each: `id peer median_ns`. Same data shapes, index distribution and
timing method (median of repeated calls) as examples/workloads.rs.
"""

import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
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


def workloads():
    # W1 embed
    x = data((50000, 256)); i = rng.integers(0, 50000, (64, 512))
    o = np.empty((64, 512, 256), np.float32)
    yield "W1_embed", {"numpy": lambda: np.take(x, i, axis=0), "numpy_out": lambda: np.take(x, i, axis=0, out=o),
                       **ort_runs("Gather", x, i, axis=0)}, o.nbytes
    # W2 midaxis
    x = data((64, 2048, 64)); i = rng.integers(0, 2048, (1024,))
    o = np.empty((64, 1024, 64), np.float32)
    yield "W2_midaxis", {"numpy": lambda: np.take(x, i, axis=1), "numpy_out": lambda: np.take(x, i, axis=1, out=o),
                         **ort_runs("Gather", x, i, axis=1)}, o.nbytes
    # W3 / W4 elementwise
    for name, axis in (("W3_elem_last", 1), ("W4_elem_first", 0)):
        x = data((2048, 2048)); i = rng.integers(0, 2048, (2048, 2048))
        yield name, {"numpy": lambda x=x, i=i, axis=axis: np.take_along_axis(x, i, axis=axis),
                     **ort_runs("GatherElements", x, i, axis=axis)}, x.nbytes
    # W5 nd pixels
    x = data((1024, 1024, 4)); i = rng.integers(0, 1024, (1_000_000, 2))
    yield "W5_nd_pixels", {"numpy": lambda: x[i[:, 0], i[:, 1]], **ort_runs("GatherND", x, i)}, 1_000_000 * 16
    # W6 batched
    x = data((32, 4096, 128)); i = rng.integers(0, 4096, (32, 512))
    b = np.arange(32)[:, None]
    yield "W6_batched", {"numpy": lambda: x[b, i], **ort_runs("GatherND", x, i[..., None], batch_dims=1)}, 32 * 512 * 128 * 4
    # W7 tiny
    x = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]], np.float32); i = np.array([3, 1])
    o = np.empty((2, 3), np.float32)
    yield "W7_tiny", {"numpy": lambda: np.take(x, i, axis=0), "numpy_out": lambda: np.take(x, i, axis=0, out=o),
                      **ort_runs("Gather", x, i, axis=0)}, o.nbytes
    # W8 multiaxis: (x, y) pairs per image; ORT needs GatherND(batch_dims=1) on (y, x).
    x = data((8, 256, 256, 16)); i = rng.integers(0, 256, (8, 65536, 1, 2))
    n = np.arange(8)[:, None, None]
    yx = np.ascontiguousarray(i[..., ::-1]).reshape(8, 65536, 2)
    yield "W8_multiaxis", {"numpy": lambda: x[n, i[..., 1], i[..., 0], :],
                           **ort_runs("GatherND", x, yx, batch_dims=1)}, 8 * 65536 * 16 * 4


def main():
    want = sys.argv[1:]
    for wid, peers, out_bytes in workloads():
        if want and not any(wid.startswith(w) for w in want):
            continue
        tiny = wid == "W7_tiny"
        for peer, f in peers.items():
            print(f"{wid} {peer} {median_ns(f, tiny=tiny):.1f}", flush=True)
        src = np.ones(out_bytes // 4, np.float32); dst = np.empty_like(src)
        print(f"{wid} numpy_memcpy {median_ns(lambda: np.copyto(dst, src), tiny=tiny):.1f}", flush=True)


if __name__ == "__main__":
    main()
