#!/usr/bin/env python3
"""K1 / K2 on FBGEMM's table-batched modules (CPU), one line each: `id peer median_ns`, as
reduce_peers.py prints PyTorch's. Needs its own venv (FBGEMM's CPU wheel 1.9 loads with
PyTorch 2.14.1): `python3 -m venv benches/peers/.venv-fbgemm`, `pip install numpy
torch==2.14.1`, then `pip install --no-deps fbgemm-gpu-cpu==1.9.*`. Never in CI.

  K1  SplitTableBatchedEmbeddingBagsCodegen forward (PoolingMode.SUM, host tables)
  K2  IntNBitTableBatchedEmbeddingBagsCodegen (INT8 rows) forward
  O1  B1's table (1M x 64), a new batch of B1's bags each step: the TBE's forward and
      backward with EXACT_ROWWISE_ADAGRAD (its fused update)
  O2  K1's 26 tables and batch: the same step
"""

import sys

import numpy as np
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reduce_peers import median_ns  # noqa: E402

rng = np.random.default_rng(20261126)
WIDTH, BATCH = 64, 4096


def batch():
    sizes = [1_000_000 if t < 6 else 20_000 + int(rng.integers(0, 180_001)) for t in range(26)]
    lens = rng.integers(1, 21, size=26 * BATCH)
    ids = np.concatenate([rng.integers(0, sizes[f], size=int(lens[f * BATCH:(f + 1) * BATCH].sum()))
                          for f in range(26)])
    offsets = np.concatenate([[0], np.cumsum(lens)])
    return sizes, torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(offsets.astype(np.int64))


def step(wid):
    """O1 / O2: a TBE training step with EXACT_ROWWISE_ADAGRAD, a new batch each step (O1)."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    if wid.startswith("O1"):
        lens = rng.integers(1, 65, size=16384)
        sizes = [1_000_000]
        batches = [torch.from_numpy(rng.integers(0, 1_000_000, size=int(lens.sum())).astype(np.int64))
                   for _ in range(8)]
        offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
        bags = 16384
    else:
        sizes, idx, offsets = batch()
        batches, bags = [idx], BATCH
    emb = SplitTableBatchedEmbeddingBagsCodegen(
        [(n, WIDTH, EmbeddingLocation.HOST, ComputeDevice.CPU) for n in sizes],
        optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.01, pooling_mode=PoolingMode.SUM,
    )
    g = torch.from_numpy(rng.random((bags, WIDTH * len(sizes)), dtype=np.float32) * 1e-3)
    turn = [0]

    def call():
        turn[0] = (turn[0] + 1) % len(batches)
        emb(batches[turn[0]], offsets).backward(g)

    return call


def main(ids):
    sizes, idx, offsets = batch()
    for wid in ids:
        if wid.startswith("O"):
            call = step(wid)
            for threads in (1, 2):
                torch.set_num_threads(threads)
                print(f"{wid} fbgemm{threads} {median_ns(call, budget=6):.1f}", flush=True)
            continue
        if wid.startswith("K1"):
            emb = SplitTableBatchedEmbeddingBagsCodegen(
                [(n, WIDTH, EmbeddingLocation.HOST, ComputeDevice.CPU) for n in sizes],
                pooling_mode=PoolingMode.SUM,
            )
            call = lambda: emb(idx, offsets)  # noqa: E731
        else:
            from fbgemm_gpu.split_embedding_configs import SparseType
            from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
                IntNBitTableBatchedEmbeddingBagsCodegen,
            )
            emb = IntNBitTableBatchedEmbeddingBagsCodegen(
                [("", n, WIDTH, SparseType.INT8, EmbeddingLocation.HOST) for n in sizes],
                device="cpu",
                pooling_mode=PoolingMode.SUM,
            )
            emb.fill_random_weights()
            i32, o32 = idx.int(), offsets.int()
            call = lambda: emb(i32, o32)  # noqa: E731
        with torch.no_grad():
            for threads in (1, 2):
                torch.set_num_threads(threads)
                print(f"{wid} fbgemm{threads} {median_ns(call):.1f}", flush=True)


if __name__ == "__main__":
    main([w for w in ["K1_dlrm_batch", "K2_int8_dlrm", "O1_bag_step", "O2_dlrm_step"] if len(sys.argv) < 2 or any(w.startswith(a) for a in sys.argv[1:])])
