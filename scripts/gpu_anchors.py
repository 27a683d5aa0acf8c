#!/usr/bin/env python3
"""scripts/gpu_anchors.py: the PyTorch anchors of the CUDA benchmarks, timed in the same run as posenc's.

RoPE on q and k as transformers writes it (apply_rotary_pos_emb with rotate_half, eager) and the same
function under torch.compile, on the shapes of bench/cuda/bench_rope_cuda.cc, bytes counted the same way
(q and k read and written once); and the device-to-device copy of the same bytes. One JSON object a line.
"""
import json
import sys

import torch

SHAPES = [("B1 T32768 H32/8 D128", 1, 32768, 32, 8, 128), ("B8 T4096 H32/8 D128", 8, 4096, 32, 8, 128)]


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):  # transformers' modeling_llama.apply_rotary_pos_emb
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def median_ms(fn, repeats=30):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def main():
    if not torch.cuda.is_available():
        print("gpu_anchors: no CUDA device", file=sys.stderr)
        return 2
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}))
    compiled = torch.compile(apply_rotary_pos_emb, fullgraph=True)
    for name, b, t, h, kv, d in SHAPES:
        # (B, H, T, D) as transformers lays out q and k at this point; cos / sin (1, 1, T, D) in bf16.
        q = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, kv, t, d, device="cuda", dtype=torch.bfloat16)
        inv = 1.0 / (500000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d))
        ang = torch.arange(t, device="cuda", dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos().to(torch.bfloat16)[None, None], emb.sin().to(torch.bfloat16)[None, None]
        nbytes = 2 * (q.numel() + k.numel()) * q.element_size()
        for label, fn in (("torch_eager", apply_rotary_pos_emb), ("torch_compile", compiled)):
            ms = median_ms(lambda fn=fn, q=q, k=k, cos=cos, sin=sin: fn(q, k, cos, sin))
            print(json.dumps({"op": "rope_qk_forward", "impl": label, "shape": name, "dtype": "bf16",
                              "ms": ms, "tb_per_s": nbytes / (ms * 1e-3) / 1e12}))
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms = median_ms(lambda dst=dst, src=src: dst.copy_(src))
        print(json.dumps({"op": "copy", "impl": "torch", "shape": name, "ms": ms,
                          "tb_per_s": nbytes / (ms * 1e-3) / 1e12}))
        del q, k, src, dst
    return 0


if __name__ == "__main__":
    sys.exit(main())
