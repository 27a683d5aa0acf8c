"""posenc.torch: autograd Functions pass torch.autograd.gradcheck (fp32 kernels: eps 1e-3 and
1e-3 tolerances, see posenc.torch's docstring), modules compute what the functions compute, and
the seeds' PyTorch snippets (written here the way the seeds write them) agree with posenc."""
import math

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt

GRADCHECK = dict(eps=1e-3, atol=2e-3, rtol=2e-3)


def double(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("kwargs", [{}, {"layout": "interleaved"}, {"rotary_dim": 4},
                                    {"rope_scaling": {"rope_type": "yarn", "factor": 4.0},
                                     "max_position_embeddings": 16}])
def test_rope_gradcheck(kwargs):
    x = double(2, 3, 2, 6)
    pos = torch.tensor([[0, 5, 9], [1, 2, 30]])
    assert torch.autograd.gradcheck(lambda t: pt.rope(t, pos, **kwargs), (x,), **GRADCHECK)


@pytest.mark.parametrize("encoding",
                         [None, "rope+alibi", "t5", "relative", "shaw", "rope+shaw", "transformer_xl"])
def test_attention_gradcheck(encoding):
    q, k, v = double(1, 4, 2, 6, seed=1), double(1, 4, 1, 6, seed=2), double(1, 4, 1, 6, seed=3)
    tables = {}
    if encoding == "t5":
        tables["relative_table"] = double(32, 2, seed=4)
    if encoding == "relative":
        tables["relative_table"] = double(5, 2, seed=4)
    if encoding and "shaw" in encoding:
        tables["shaw_a_k"], tables["shaw_a_v"] = double(5, 6, seed=5), double(5, 6, seed=6)
    if encoding == "transformer_xl":
        tables["transformer_xl_u"] = double(2, 6, seed=7)
        tables["transformer_xl_v"] = double(2, 6, seed=8)
        tables["transformer_xl_w_r"] = double(12, 4, seed=9)
    names = list(tables)

    def f(q, k, v, *ts):
        return pt.attention(q, k, v, causal=True, encoding=encoding, **dict(zip(names, ts)))

    assert torch.autograd.gradcheck(f, (q, k, v, *tables.values()), **GRADCHECK)


def test_bias_and_learned_gradcheck():
    qp, kp = torch.arange(3, 7), torch.arange(7)
    assert torch.autograd.gradcheck(lambda t: pt.t5_bias(t, qp, kp, bidirectional=False), (double(32, 3),),
                                    **GRADCHECK)
    assert torch.autograd.gradcheck(lambda t: pt.relative_bias(t, qp, kp, max_distance=2), (double(5, 3),),
                                    **GRADCHECK)
    assert torch.autograd.gradcheck(lambda t: pt.learned(t, torch.tensor([3, 0, 3])), (double(4, 5),),
                                    **GRADCHECK)


def test_modules_match_the_functions():
    torch.manual_seed(0)
    q, k = torch.randn(2, 5, 4, 16), torch.randn(2, 5, 4, 16)
    rq, rk = pt.RotaryEmbedding(16, rope_scaling={"rope_type": "linear", "factor": 2.0})(q, k)
    np.testing.assert_array_equal(rq.numpy(),
                                  posenc.rope(q.numpy(), np.arange(5),
                                              rope_scaling={"rope_type": "linear", "factor": 2.0}))
    np.testing.assert_array_equal(pt.ALiBi(4)(5).numpy(), posenc.alibi_bias(4, np.arange(5), np.arange(5)))
    t5 = pt.T5RelativeBias(4, num_buckets=8, max_distance=16)
    np.testing.assert_array_equal(t5(5).detach().numpy(),
                                  posenc.t5_bias(t5.weight.detach().numpy(), np.arange(5), np.arange(5),
                                                 num_buckets=8, max_distance=16))
    learned = pt.LearnedPositional(10, 3)
    np.testing.assert_array_equal(learned(4).detach().numpy(), learned.weight.detach().numpy()[:4])
    np.testing.assert_array_equal(pt.SinusoidalPositional(8)(3).numpy(), posenc.sinusoidal(np.arange(3), 8))
    shaw = pt.ShawRelative(16, 3)
    out = shaw(q, k, k, causal=True)
    out.sum().backward()
    assert shaw.a_k.grad is not None and shaw.a_v.grad is not None and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="position 10"):
        learned(torch.tensor([10]))


# ---- the seeds' PyTorch snippets, copied from the seeds (000, 003), against posenc ----

def seed_positional_encoding(seq_len, d_model):  # seed 000
    pe = torch.zeros(seq_len, d_model)
    position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class SeedRelativePositionBias(torch.nn.Module):  # seed 000: distance k - q, no clipping, [qlen, klen, heads]
    def __init__(self, num_heads, max_position=512):
        super().__init__()
        self.relative_bias = torch.nn.Embedding(2 * max_position - 1, num_heads)

    def forward(self, qlen, klen):
        context_position = torch.arange(qlen, dtype=torch.long)[:, None]
        memory_position = torch.arange(klen, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position + (self.relative_bias.num_embeddings // 2)
        return self.relative_bias(relative_position)


def seed_rotary_positional_embedding(x, theta):  # seed 000: interleaved pairs in, halves out
    cos_theta = torch.cos(theta)
    sin_theta = torch.sin(theta)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.cat([x1 * cos_theta - x2 * sin_theta, x1 * sin_theta + x2 * cos_theta], dim=-1)


class SeedRelPosAttention(torch.nn.Module):  # seed 003 (Shaw's key term; rows indexed by q - k)
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.W_q = torch.nn.Linear(d_model, d_model)
        self.W_k = torch.nn.Linear(d_model, d_model)
        self.W_v = torch.nn.Linear(d_model, d_model)
        self.W_o = torch.nn.Linear(d_model, d_model)
        self.rel_emb = torch.nn.Embedding(2 * max_len - 1, self.d_k)
        self.max_len = max_len

    def forward(self, x):
        B, L, _ = x.size()
        Q = self.W_q(x).view(B, L, self.n_heads, self.d_k).transpose(1, 2)
        K = self.W_k(x).view(B, L, self.n_heads, self.d_k).transpose(1, 2)
        V = self.W_v(x).view(B, L, self.n_heads, self.d_k).transpose(1, 2)
        content_score = torch.matmul(Q, K.transpose(-2, -1))
        rel_pos = torch.arange(L).unsqueeze(1) - torch.arange(L).unsqueeze(0)
        rel_pos += self.max_len - 1
        R = self.rel_emb(rel_pos)
        pos_score = torch.einsum("bhld,lmd->bhlm", Q, R)
        scores = (content_score + pos_score) / math.sqrt(self.d_k)
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, V)
        out = out.transpose(1, 2).contiguous().view(B, L, -1)
        return self.W_o(out)


def test_seed_snippets_agree_with_posenc():
    torch.manual_seed(3)
    np.testing.assert_allclose(pt.SinusoidalPositional(512)(50).numpy(),
                               seed_positional_encoding(50, 512).numpy(), atol=2e-5)
    # seed 000's bias table has 2 * max_position - 1 rows for distances k - q: posenc's clipped
    # bias with max_distance = max_position - 1 (identical while |k - q| < max_position)
    bias = SeedRelativePositionBias(4, max_position=6)
    got = pt.relative_bias(bias.relative_bias.weight, torch.arange(6), torch.arange(6), max_distance=5)
    np.testing.assert_allclose(got.permute(1, 2, 0).detach().numpy(), bias(6, 6).detach().numpy(), atol=1e-7)
    # seed 000's rotary snippet reads interleaved pairs (GPT-J) and writes the rotated pairs as two
    # halves: posenc's interleaved layout, de-interleaved (q . k is the same either way)
    x, pos, dim = torch.randn(1, 12, 2, 32), torch.arange(12), 32
    theta = pos[None, :, None, None].float() * (1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))
    out = pt.rope(x, pos, layout="interleaved")
    deinterleaved = torch.cat([out[..., ::2], out[..., 1::2]], dim=-1)
    np.testing.assert_allclose(deinterleaved.numpy(), seed_rotary_positional_embedding(x, theta).numpy(),
                               atol=2e-5)
    # seed 003's RelPosAttention: rows indexed by q - k; posenc's Shaw tables by k - q, so the
    # same table reversed; key term only (no a_v)
    seed = SeedRelPosAttention(d_model=32, n_heads=2, max_len=8)
    h = torch.randn(2, 8, 32)
    qkv = [w(h).view(2, 8, 2, 16) for w in (seed.W_q, seed.W_k, seed.W_v)]
    out = pt.attention(*qkv, encoding="shaw", shaw_a_k=torch.flip(seed.rel_emb.weight, [0]))
    np.testing.assert_allclose(seed.W_o(out.reshape(2, 8, 32)).detach().numpy(), seed(h).detach().numpy(),
                               atol=2e-5)
    # a materialised biased softmax attention (ALiBi, Press et al.'s slopes) against the fused kernel
    q, k, v = (torch.randn(1, 2, 7, 16) for _ in range(3))
    slopes = torch.tensor([2.0 ** (-8 * (i + 1) / 2) for i in range(2)])
    p = torch.arange(7)
    alibi = -slopes[:, None, None] * (p[None, :, None] - p[None, None, :])
    scores = (q @ k.transpose(-1, -2) / 4.0 + alibi).masked_fill(p[None, :] > p[:, None], float("-inf"))
    expected = scores.softmax(-1) @ v
    got = pt.attention(*(t.transpose(1, 2) for t in (q, k, v)), causal=True, encoding="alibi")
    np.testing.assert_allclose(got.transpose(1, 2).numpy(), expected.numpy(), atol=2e-5)


def test_rotated_values_through_the_custom_operator():
    """rotate_values (DeepSeek-V4's K = V) reaches posenc::attention through the settings key: the forward
    and the gradients equal posenc.attention / attention_backward's (which test_numpy_api.py checks against
    a double reference and central differences)."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 5, h, 8)).astype(np.float32) for h in (2, 1, 1))
    params = dict(causal=True, encoding="rope", base=1e4, rotary_dim=4, rotate_values=True)
    out, lse = posenc.attention(q, k, v, return_lse=True, **params)
    g = rng.standard_normal(out.shape).astype(np.float32)
    want = posenc.attention_backward(q, k, v, out, lse, g, **params)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    got = pt.attention(tq, tk, tv, **params)
    np.testing.assert_array_equal(got.detach().numpy(), out)
    got.backward(torch.from_numpy(g))
    for name, t in (("q", tq), ("k", tk), ("v", tv)):
        np.testing.assert_allclose(t.grad.numpy(), want[name], rtol=1e-6, atol=1e-7, err_msg=name)
