#!/usr/bin/env python3
"""Median times of the interpolating gathers I1 and I2 in PyTorch (CPU, 1 and 2 intra-op
threads), one line each: `id peer median_ms`, as benches/sample.rs measures the crate's.

  I1  F.grid_sample(x, grid, bilinear, zeros, align_corners=False): x [8, 64, 128, 128]
      NCHW (`torch*`) and channels-last (`torch*_cl`); grid F.affine_grid of a rotation
      of 10 degrees, scale 0.9, shift 0.05
      and ONNX Runtime's GridSample (opset 16; `ort`, its default threads)
  I2  its backward (autograd.grad to x and grid, forward untimed)
  I3  torchvision.ops.roi_align(x [2, 256, 64, 64], 512 boxes of sides 4-48 px, (7, 7),
      1.0, sampling_ratio=2, aligned=True) (`torch*`) and its backward (`torch*_back`);
      ONNX Runtime's RoiAlign (opset 16, half_pixel; `ort`, its default threads)
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
        if (not only or "I1" in only) and threads == 2:
            import onnxruntime as ort
            from onnx import TensorProto, helper
            node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode="bilinear", padding_mode="zeros",
                                    align_corners=0)
            fl = TensorProto.FLOAT
            graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", fl, list(x.shape)),
                                                    helper.make_tensor_value_info("grid", fl, list(grid.shape))],
                                      [helper.make_tensor_value_info("Y", fl, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
            model.ir_version = 8
            sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            feeds = {"X": x.numpy(), "grid": grid.numpy()}
            print(f"I1 ort {median_ms(lambda: sess.run(None, feeds)):.2f}")
        if not only or "I2" in only:
            xg, gg = x.clone().requires_grad_(), grid.clone().requires_grad_()
            y = F.grid_sample(xg, gg, align_corners=False)
            g_y = torch.randn_like(y)
            def back():
                torch.autograd.grad(y, (xg, gg), g_y, retain_graph=True)
            print(f"I2 torch{threads} {median_ms(back):.2f}")
    if not only or "I3" in only:
        i3()


def i3():
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper
    from torchvision.ops import roi_align
    rng = np.random.default_rng(3)
    x = torch.randn(2, 256, 64, 64)
    wh = rng.uniform(4, 48, (512, 2))
    xy = rng.uniform(0, 1, (512, 2)) * (64 - wh)
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    batch = (np.arange(512) % 2).astype(np.int64)
    rois = torch.tensor(np.concatenate([batch[:, None].astype(np.float32), boxes], axis=1))
    for threads in (1, 2):
        torch.set_num_threads(threads)
        print(f"I3 torch{threads} {median_ms(lambda: roi_align(x, rois, (7, 7), 1.0, 2, True)):.2f}")
        xg = x.clone().requires_grad_()
        y = roi_align(xg, rois, (7, 7), 1.0, 2, True)
        g = torch.randn_like(y)
        print(f"I3 torch{threads}_back {median_ms(lambda: torch.autograd.grad(y, xg, g, retain_graph=True)):.2f}")
    node = helper.make_node("RoiAlign", ["X", "rois", "b"], ["Y"], mode="avg", output_height=7, output_width=7,
                            sampling_ratio=2, spatial_scale=1.0, coordinate_transformation_mode="half_pixel")
    fl = TensorProto.FLOAT
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", fl, [2, 256, 64, 64]),
                                            helper.make_tensor_value_info("rois", fl, [512, 4]),
                                            helper.make_tensor_value_info("b", TensorProto.INT64, [512])],
                              [helper.make_tensor_value_info("Y", fl, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"X": x.numpy(), "rois": boxes, "b": batch}
    print(f"I3 ort {median_ms(lambda: sess.run(None, feeds)):.2f}")


if __name__ == "__main__":
    main()
