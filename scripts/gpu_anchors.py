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


def t5_bucket(rel):  # T5's unidirectional buckets (transformers modeling_t5._relative_position_bucket)
    n = -torch.clamp(rel, max=0)
    exact = 16
    large = exact + (torch.log(n.float() / exact + 1e-6) / torch.log(torch.tensor(128 / exact))
                     * (32 - exact)).to(torch.int64)
    return torch.where(n < exact, n, torch.clamp(large, max=31))


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
    matmul_anchor()
    attention_anchors()
    attention_anchors(backward=True)
    decode_anchors()
    wide_head_anchors()  # last: Flex compiles once per head shape
    return 0


def matmul_anchor():
    """The limit of the attention figures: a bf16 matmul 8192^3 in the same run."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: a @ a, repeats=10)
    print(json.dumps({"op": "matmul", "impl": "torch", "shape": "8192^3", "dtype": "bf16", "ms": ms,
                      "tflops": 2 * 8192**3 / (ms * 1e-3) / 1e12}))


def decode_anchors():
    """Decoding: one query row against a 32k bf16 cache, 32 / 8 heads, batch 1 and 16 (SDPA, GQA)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for batch in (1, 16):
        kc, vc = (torch.randn(batch, 8, 32768, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        qd = torch.randn(batch, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        ms = median_ms(lambda qd=qd, kc=kc, vc=vc: sdpa(qd, kc, vc, enable_gqa=True), repeats=20)
        print(json.dumps({"op": "attention_decode", "impl": "sdpa", "variant": "none",
                          "shape": f"B{batch} K32768 H32/8 D128", "dtype": "bf16", "ms": ms,
                          "tb_per_s": 2 * kc.numel() * 2 / (ms * 1e-3) / 1e12}))


ATTENTION_SHAPE = "B4 H32 S4096 D128 causal"


def emit_attention(op, impl, variant, fn, flops, shape=ATTENTION_SHAPE):
    """One attention anchor's line: its median time and TFLOP/s, or the error of one that does not run here
    (reported, not fatal)."""
    try:
        ms = median_ms(fn, repeats=10)
    except Exception as e:
        print(json.dumps({"op": op, "impl": impl, "variant": variant, "shape": shape, "error": str(e)[:200]}))
        return
    print(json.dumps({"op": op, "impl": impl, "variant": variant, "shape": shape, "dtype": "bf16",
                      "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12}))


def wide_head_anchors():
    """Heads past 128, as bench_attention_cuda's last forward rows: Gemma's 256 (and its softcap 50) and
    MLA's q / k of 192 with v of 128, causal, B 4, H 32, S 4096: the SDPA backends that take them, Flex."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    b, h, s = 4, 32, 4096
    sdpa = torch.nn.functional.scaled_dot_product_attention
    flex = torch.compile(flex_attention, fullgraph=True)
    causal = create_block_mask(lambda b_, h_, qi, ki: qi >= ki, None, None, s, s)
    pairs = s * (s + 1) // 2
    for d, dv in ((256, 256), (192, 128)):
        shape = f"B4 H32 S4096 D{d} Dv{dv} causal"
        q, k = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        v = torch.randn(b, h, s, dv, device="cuda", dtype=torch.bfloat16)
        flops = 2 * b * h * (d + dv) * pairs
        backends = (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION))
        for impl, backend in backends:
            def run(backend=backend, q=q, k=k, v=v):
                with sdpa_kernel(backend):
                    return sdpa(q, k, v, is_causal=True)
            emit_attention("attention_forward", impl, "none", run, flops, shape)
        mods = {"none": None}
        if d == 256:
            mods["softcap"] = lambda score, b_, h_, qi, ki: 50 * torch.tanh(score / 50)
        for variant, mod in mods.items():
            emit_attention("attention_forward", "flex", variant,
                           lambda mod=mod, q=q, k=k, v=v: flex(q, k, v, score_mod=mod, block_mask=causal),
                           flops, shape)
        del q, k, v


def attention_anchors(backward=False):
    """The attention anchors of bench/cuda/bench_attention_cuda.cc's shape: SDPA's FlashAttention-2 and
    cuDNN backends, FlexAttention without a bias and with ALiBi and T5 buckets as score_mod; the forward also
    with a softcap and a sliding window as a block mask. With backward, a training step's forward and
    backward, T5's table taking a gradient (Flex accumulates it with atomics). TFLOP/s of the FLOPs done, as
    posenc counts: 4 B H D per visible pair forward, 10 more for the backward (FlashAttention-2's count).
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    b, h, s, d = 4, 32, 4096, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=backward)
               for _ in range(3))
    grad_out = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    per_pair = 14 if backward else 4
    op = "attention_forward_backward" if backward else "attention_forward"

    def emit(impl, variant, forward, window=s):
        flops = per_pair * b * h * d * sum(min(window, i + 1) for i in range(s))
        step = (lambda: forward().backward(grad_out)) if backward else forward
        emit_attention(op, impl, variant, step, flops)

    sdpa = torch.nn.functional.scaled_dot_product_attention
    backends = (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION))
    for impl, backend in backends:
        def run(backend=backend):
            with sdpa_kernel(backend):
                return sdpa(q, k, v, is_causal=True)
        emit(impl, "none", run)
    flex = torch.compile(flex_attention, fullgraph=True)
    causal = create_block_mask(lambda b_, h_, qi, ki: qi >= ki, None, None, s, s)
    slopes = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)], device="cuda")
    t5_table = torch.zeros(32, h, device="cuda", requires_grad=backward)
    mods = {
        "none": None,
        "alibi": lambda score, b_, h_, qi, ki: score + slopes[h_] * (ki - qi),
        "t5": lambda score, b_, h_, qi, ki: score + t5_table[t5_bucket(ki - qi), h_],
    }
    if not backward:
        mods["softcap"] = lambda score, b_, h_, qi, ki: 50 * torch.tanh(score / 50)
    for variant, mod in mods.items():
        emit("flex", variant, lambda mod=mod: flex(q, k, v, score_mod=mod, block_mask=causal))
    if not backward:
        window = create_block_mask(lambda b_, h_, qi, ki: (qi >= ki) & (qi - ki < 1024), None, None, s, s)
        emit("flex", "window1024", lambda: flex(q, k, v, block_mask=window), window=1024)


if __name__ == "__main__":
    sys.exit(main())
