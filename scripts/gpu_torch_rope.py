#!/usr/bin/env python3
"""scripts/gpu_torch_rope.py: posenc.torch.rope on CUDA tensors, timed as bench/cuda/bench_rope_cuda.cc times
the C++ call, so that scripts/gpu_table.py can set the two side by side (the custom operator's own cost:
argument checks, the output's allocation, the launch from Python; no copies or synchronizations are
expected). q and k [B, T, H, D] bf16, base 5e5, positions 0 .. T-1 on the device; q and k rotated by one
call each, out of place: bytes = q and k read once and written once, as the C++ figure counts them.
One JSON object a line; run by scripts/gpu_check.sh once posenc is built on that machine.
"""
import json
import sys

import torch
from gpu_anchors import SHAPES, median_ms  # the C++ benchmark's shapes, timed the same way


def main():
    if not torch.cuda.is_available():
        print("gpu_torch_rope: no CUDA device", file=sys.stderr)
        return 2
    import posenc.torch as pt
    for name, b, t, h, kv, d in SHAPES:
        q = torch.randn(b, t, h, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, t, kv, d, device="cuda", dtype=torch.bfloat16)
        positions = torch.arange(t, device="cuda")
        nbytes = 2 * (q.numel() + k.numel()) * q.element_size()

        def both(q=q, k=k, positions=positions):
            return pt.rope(q, positions, base=5e5), pt.rope(k, positions, base=5e5)

        ms = median_ms(both)
        print(json.dumps({"op": "rope_qk_forward", "impl": "posenc_torch", "shape": name, "dtype": "bf16",
                          "ms": ms, "tb_per_s": nbytes / (ms * 1e-3) / 1e12}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
