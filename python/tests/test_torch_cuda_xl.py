"""posenc.torch's attention with Transformer-XL's terms on CUDA tensors (u, v and W_R on the device) against
the CPU backend on the same inputs, forward and backward (every gradient: q, k, v, u, v, W_R); explicit
positions refused by name. Skipped where there is no CUDA device or posenc was built without its CUDA
backend."""
import math

import pytest
import torch

import posenc
import posenc.torch as pt

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and posenc.cuda_built()),
                                reason="needs a CUDA device and posenc's CUDA backend "
                                       "(scripts/gpu_check.sh runs it on a GPU machine)")


def _logit_move(q, v_b, w_r, d_model, base, Q, K, scale, unit):
    """The most a logit moves when the device rounds rproj_h(delta) = W_R,h R_delta to the storage type for
    its tensor cores, plus the table's own error (W_R R from two bf16 parts of each operand, fp32 sums: within
    t = 2^-15 + d_model 2^-24 of A = sum_e |W_R R|): scale * max over rows and deltas of
    sum_d |q_d| (unit |rproj_d| + t A_d) + |v_d| t A_d (every delta of the default positions, visible or not:
    a bound), in double."""
    H, D = q.shape[2], q.shape[3]
    deltas = torch.arange(1 - Q, K, dtype=torch.float64)
    w = base ** (-2.0 * torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    angles = deltas[:, None] * w[None, :]
    r = torch.cat([angles.sin(), angles.cos()], dim=1)  # (n, d_model)
    rproj = (w_r.double() @ r.T).reshape(H, D, -1)  # (H, D, n)
    magnitude = (w_r.double().abs() @ r.abs().T).reshape(H, D, -1)
    t = 2.0 ** -15 + d_model * 2.0 ** -24
    sums = torch.einsum("bqhd,hdn->bqhn", q.double().abs(), unit * rproj.abs() + t * magnitude)
    sums = sums + torch.einsum("hd,hdn->hn", v_b.double().abs(), t * magnitude)[None, None]
    return abs(scale) * sums.max().item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("B,Q,K,H,Hkv,D,causal", [(2, 70, 70, 4, 2, 64, True), (1, 3, 150, 4, 1, 128, False),
                                                  (1, 1, 1, 2, 2, 64, False)])
def test_attention_cuda_transformer_xl_forward_matches_cpu(dtype, B, Q, K, H, Hkv, D, causal):
    """The forward within one rounding of P (as every CUDA case) plus what rproj's rounding to the storage
    type moves each logit by: softmax weights within a factor e^(+-2 move), so out within
    (e^(2 move) - 1) max |v| more."""
    torch.manual_seed(12)
    d_model, base = 96, 10000.0
    q = torch.randn(B, Q, H, D, dtype=dtype)
    k, v = torch.randn(B, K, Hkv, D, dtype=dtype), torch.randn(B, K, Hkv, D, dtype=dtype)
    u_b, v_b = torch.randn(H, D) * 0.5, torch.randn(H, D) * 0.5
    w_r = torch.randn(H * D, d_model) * 0.1
    kwargs = dict(causal=causal, encoding="transformer_xl", transformer_xl_base=base)
    host = dict(transformer_xl_u=u_b, transformer_xl_v=v_b, transformer_xl_w_r=w_r)
    device = {name: t.cuda() for name, t in host.items()}
    out_cpu = pt.attention(q, k, v, **host, **kwargs)
    out_gpu = pt.attention(q.cuda(), k.cuda(), v.cuda(), **device, **kwargs)
    assert out_gpu.device.type == "cuda" and out_gpu.dtype == dtype
    unit = 2 ** -8 if dtype == torch.bfloat16 else 2 ** -11
    move = _logit_move(q, v_b, w_r, d_model, base, Q, K, 1 / math.sqrt(D), unit)
    vmax = v.float().abs().max().item()
    torch.testing.assert_close(out_gpu.cpu().float(), out_cpu.float(),
                               atol=2 * unit * vmax + math.expm1(2 * move) * vmax + 2e-5, rtol=2 * unit)
    again = pt.attention(q.cuda(), k.cuda(), v.cuda(), **device, **kwargs)
    assert torch.equal(again, out_gpu), "the forward differs between two calls"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_attention_cuda_transformer_xl_gradients_match_cpu(dtype):
    """Every gradient (q, k, v and the terms' u, v, W_R) against the CPU's on the same 16-bit inputs, with
    grouped heads and a causal mask; the same bits on a second GPU run. The GPU rounds P, dS and rproj to the
    storage type for its tensor cores: within 2^-6 of each gradient's largest, as the other GPU gradients."""
    torch.manual_seed(14)
    B, Q, K, H, Hkv, D, d_model = 2, 90, 90, 4, 2, 64, 48
    q = torch.randn(B, Q, H, D, dtype=dtype)
    k, v = torch.randn(B, K, Hkv, D, dtype=dtype), torch.randn(B, K, Hkv, D, dtype=dtype)
    u_b, v_b = torch.randn(H, D) * 0.5, torch.randn(H, D) * 0.5
    w_r = torch.randn(H * D, d_model) * 0.1
    kwargs = dict(causal=True, encoding="transformer_xl")
    results = []
    for device in ("cpu", "cuda", "cuda"):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v, u_b, v_b, w_r)]
        out = pt.attention(*leaves[:3], transformer_xl_u=leaves[3], transformer_xl_v=leaves[4],
                           transformer_xl_w_r=leaves[5], **kwargs)
        out.float().pow(2).sum().backward()
        results.append([t.grad.cpu().float() for t in leaves])
    for cpu, gpu, again in zip(*results):
        assert torch.equal(gpu, again), "a gradient differs between two runs"
        assert cpu.abs().max().item() > 1e-3, "nothing to compare"
        torch.testing.assert_close(gpu, cpu, atol=2 ** -6 * cpu.abs().max().item(), rtol=2 ** -6)


def test_attention_cuda_transformer_xl_refuses_explicit_positions():
    torch.manual_seed(13)
    H, D = 2, 64
    q, k, v = (torch.randn(1, 20, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    tables = dict(transformer_xl_u=torch.randn(H, D, device="cuda"),
                  transformer_xl_v=torch.randn(H, D, device="cuda"),
                  transformer_xl_w_r=torch.randn(H * D, 32, device="cuda"))
    with pytest.raises(ValueError, match="q_positions is given: transformer_xl on cuda"):
        pt.attention(q, k, v, causal=True, encoding="transformer_xl",
                     q_positions=torch.arange(20, device="cuda"), **tables)
