#!/usr/bin/env python3
"""Median times of the interpolating gathers I1 and I2 in PyTorch (CPU, 1 and 2 intra-op
threads), one line each: `id peer median_ms`, as benches/sample.rs measures the crate's.

  I1  F.grid_sample(x, grid, bilinear, zeros, align_corners=False): x [8, 64, 128, 128]
      NCHW (`torch*`) and channels-last (`torch*_cl`); grid F.affine_grid of a rotation
      of 10 degrees, scale 0.9, shift 0.05
  I2  its backward (autograd.grad to x and grid, forward untimed)
"""
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def median_ms(f, rounds=15):
    f()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    only = sys.argv[1:]
    x = torch.randn(8, 64, 128, 128)
    a, s = math.radians(10), 0.9
    theta = torch.tensor([[s * math.cos(a), -s * math.sin(a), 0.05],
                          [s * math.sin(a), s * math.cos(a), 0.05]]).expand(8, 2, 3)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False).contiguous()
    x_cl = x.contiguous(memory_format=torch.channels_last)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        if not only or "I1" in only:
            print(f"I1 torch{threads} {median_ms(lambda: F.grid_sample(x, grid, align_corners=False)):.2f}")
            print(f"I1 torch{threads}_cl {median_ms(lambda: F.grid_sample(x_cl, grid, align_corners=False)):.2f}")
        if not only or "I2" in only:
            xg, gg = x.clone().requires_grad_(), grid.clone().requires_grad_()
            y = F.grid_sample(xg, gg, align_corners=False)
            g_y = torch.randn_like(y)
            def back():
                torch.autograd.grad(y, (xg, gg), g_y, retain_graph=True)
            print(f"I2 torch{threads} {median_ms(back):.2f}")


if __name__ == "__main__":
    main()
