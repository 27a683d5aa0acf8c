"""posenc for PyTorch: autograd Functions over the C++ forward and backward passes, and nn.Modules
that can replace a model's own positional code.

CPU tensors only (the C++ library's CPU backend; tensors cross as numpy views, no copy for
contiguous float32). The kernels compute in float32: float64 inputs are accepted and the results
come back in float64, with float32 accuracy (so torch.autograd.gradcheck needs eps ~1e-3 and
atol/rtol ~1e-3 rather than its double-precision defaults).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from . import absolute as _absolute
from . import bias as _bias
from ._checks import fail
from .attention import AttentionCall, canonical_params
from .rope import RopeConfig, rope as _rope_np, rope_backward as _rope_backward_np, rope_config

__all__ = [
    "rope", "attention", "t5_bias", "relative_bias", "alibi_bias", "learned", "sinusoidal", "RotaryEmbedding", "ALiBi",
    "T5RelativeBias", "ShawRelative", "LearnedPositional", "SinusoidalPositional",
]


def _np(name, t):
    """A float32 numpy view of a CPU tensor (a copy only for other dtypes or layouts)."""
    if not isinstance(t, torch.Tensor):
        fail(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        fail(f"{name}: posenc.torch runs on CPU tensors; got a tensor on {t.device}")
    return t.detach().to(torch.float32).contiguous().numpy()


def _positions(name, p):
    if p is None:
        return None
    if isinstance(p, torch.Tensor):
        if p.device.type != "cpu":
            fail(f"{name}: posenc.torch runs on CPU tensors; got a tensor on {p.device}")
        if p.is_floating_point():
            fail(f"{name}: dtype {p.dtype} is not an integer type")
        return p.detach().to(torch.int64).contiguous().numpy()
    return p


def _tensor(a, like):
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


class _RopeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, positions, kwargs):
        ctx.positions, ctx.kwargs = positions, kwargs
        return _tensor(_rope_np(_np("x", x), positions, **kwargs), x)

    @staticmethod
    def backward(ctx, grad):
        return _tensor(_rope_backward_np(_np("grad", grad), ctx.positions, **ctx.kwargs), grad), None, None


def rope(x, positions, **kwargs):
    """posenc.rope for a tensor x [batch, seq, heads, head_dim], differentiable in x."""
    return _RopeFunction.apply(x, _positions("positions", positions), kwargs)


_ATTENTION_TABLES = ("relative_table", "shaw_a_k", "shaw_a_v", "transformer_xl_u", "transformer_xl_v", "transformer_xl_w_r")


class _AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, options, q, k, v, *tables):
        params = dict(options["params"])
        given = [name for name, t in zip(_ATTENTION_TABLES, tables) if t is not None]
        params.update({name: _np(name, t) for name, t in zip(_ATTENTION_TABLES, tables) if t is not None})
        call = AttentionCall(tuple(q.shape), causal=options["causal"], scale=options["scale"], encoding=options["encoding"],
                             window=options["window"], **params)
        arrays = (_np("q", q), _np("k", k), _np("v", v))
        out, lse = call.forward(*arrays, **options["positions"])
        ctx.call, ctx.arrays, ctx.out, ctx.lse, ctx.options, ctx.given = call, arrays, out, lse, options, given
        return _tensor(out, q)

    @staticmethod
    def backward(ctx, grad):
        g = ctx.call.backward(*ctx.arrays, ctx.out, ctx.lse, _np("grad", grad), **ctx.options["positions"])
        tables = [_tensor(g[name], grad) if name in ctx.given else None for name in _ATTENTION_TABLES]
        return (None, _tensor(g["q"], grad), _tensor(g["k"], grad), _tensor(g["v"], grad), *tables)


def attention(q, k, v, *, causal=False, scale=None, encoding=None, q_positions=None, k_positions=None, window=0,
              cu_seqlens_q=None, cu_seqlens_k=None, **params):
    """posenc.attention on tensors q [B, Q, H, D], k, v [B, K, Hkv, D]; differentiable in q, k, v
    and the encoding's tables (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v,
    transformer_xl_w_r; the xl_* names are accepted too)."""
    params = canonical_params(params)
    tables = [params.pop(name, None) for name in _ATTENTION_TABLES]
    positions = {name: _positions(name, value) for name, value in (("q_positions", q_positions), ("k_positions", k_positions),
                                                                   ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k))}
    options = {"causal": causal, "scale": scale, "encoding": encoding, "window": window, "params": params, "positions": positions}
    return _AttentionFunction.apply(options, q, k, v, *tables)


class _RelativeBiasFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, q_positions, k_positions, options):
        ctx.saved = (q_positions, k_positions, options)
        t = _np("table", table)
        if options["bucketing"] == "t5":
            out = _bias.t5_bias(t, q_positions, k_positions, bidirectional=options["bidirectional"],
                                num_buckets=options["num_buckets"], max_distance=options["max_distance"])
        else:
            out = _bias.relative_bias(t, q_positions, k_positions, max_distance=options["max_distance"])
        return _tensor(out, table)

    @staticmethod
    def backward(ctx, grad):
        q_positions, k_positions, o = ctx.saved
        g = _bias.relative_bias_backward(_np("grad", grad), q_positions, k_positions, bucketing=o["bucketing"],
                                         num_buckets=o["num_buckets"], max_distance=o["max_distance"], bidirectional=o["bidirectional"])
        return _tensor(g, grad), None, None, None


def t5_bias(table, q_positions, k_positions, *, bidirectional=True, num_buckets=32, max_distance=128):
    """posenc.t5_bias as [heads, Q, K], differentiable in table [num_buckets, heads]."""
    options = {"bucketing": "t5", "bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    return _RelativeBiasFunction.apply(table, _positions("q_positions", q_positions), _positions("k_positions", k_positions), options)


def relative_bias(table, q_positions, k_positions, *, max_distance):
    """posenc.relative_bias (clipped distances) as [heads, Q, K], differentiable in table."""
    options = {"bucketing": "clipped", "bidirectional": True, "num_buckets": 32, "max_distance": max_distance}
    return _RelativeBiasFunction.apply(table, _positions("q_positions", q_positions), _positions("k_positions", k_positions), options)


def alibi_bias(n_heads, q_positions, k_positions, causal=True, **kwargs):
    """posenc.alibi_bias as a float32 tensor [heads, Q, K] (no parameters, no gradient)."""
    return torch.from_numpy(_bias.alibi_bias(n_heads, _positions("q_positions", q_positions), _positions("k_positions", k_positions),
                                             causal, **kwargs))


class _LearnedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, positions):
        ctx.positions, ctx.rows = positions, table.shape[0]
        return _tensor(_absolute.learned(_np("table", table), positions), table)

    @staticmethod
    def backward(ctx, grad):
        return _tensor(_absolute.learned_backward(_np("grad", grad), ctx.positions, ctx.rows), grad), None


def learned(table, positions):
    """table[positions] ([N, dim]), differentiable in table; a position past the table is an error."""
    return _LearnedFunction.apply(table, _positions("positions", positions))


def sinusoidal(positions, dim, base=10000.0, layout="interleaved", **kwargs):
    """posenc.sinusoidal as a float32 tensor [N, dim]."""
    return torch.from_numpy(_absolute.sinusoidal(_positions("positions", positions), dim, base, layout, **kwargs))


# ---------------------------------------------------------------------------------------- modules

def _arange(n):
    return torch.arange(int(n), dtype=torch.int64)


class RotaryEmbedding(torch.nn.Module):
    """Rotates q and k ([batch, seq, heads, head_dim]) by their positions; the HF configuration
    vocabulary (rope_scaling dict, partial rotary_dim, layout "half" or "interleaved")."""

    def __init__(self, head_dim, *, base=10000.0, rotary_dim=None, layout="half", rope_scaling=None, max_position_embeddings=None,
                 mrope_section=None):
        super().__init__()
        self.config = rope_config(head_dim, base=base, rotary_dim=rotary_dim, layout=layout, rope_scaling=rope_scaling,
                                        max_position_embeddings=max_position_embeddings, mrope_section=mrope_section)

    @classmethod
    def from_hf(cls, config):
        module = cls.__new__(cls)
        torch.nn.Module.__init__(module)
        module.config = RopeConfig.from_hf(config)
        return module

    def forward(self, q, k, positions=None):
        if positions is None:
            positions = _arange(q.shape[1])
        return rope(q, positions, config=self.config), rope(k, positions, config=self.config)


class ALiBi(torch.nn.Module):
    """ALiBi's bias [heads, Q, K] for query and key positions (BLOOM's slopes by default)."""

    def __init__(self, n_heads, *, causal=True, slopes="bloom", alibi_bias_max=8.0):
        super().__init__()
        self.n_heads, self.causal, self.kwargs = n_heads, causal, {"slopes": slopes, "alibi_bias_max": alibi_bias_max}
        self.register_buffer("slopes", torch.from_numpy(_bias.alibi_slopes(n_heads, **self.kwargs)), persistent=False)

    def forward(self, q_positions, k_positions=None):
        q_positions = _arange(q_positions) if isinstance(q_positions, int) else q_positions
        k_positions = q_positions if k_positions is None else k_positions
        return alibi_bias(self.n_heads, q_positions, k_positions, self.causal, **self.kwargs)


class T5RelativeBias(torch.nn.Module):
    """T5's learned bucketed bias: weight [num_buckets, heads] like HF's relative_attention_bias."""

    def __init__(self, n_heads, *, num_buckets=32, max_distance=128, bidirectional=True):
        super().__init__()
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.weight = torch.nn.Parameter(torch.randn(num_buckets, n_heads) * 0.02)

    def forward(self, q_positions, k_positions=None):
        q_positions = _arange(q_positions) if isinstance(q_positions, int) else q_positions
        k_positions = q_positions if k_positions is None else k_positions
        return t5_bias(self.weight, q_positions, k_positions, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
                       max_distance=self.max_distance)


class ShawRelative(torch.nn.Module):
    """Shaw et al.'s relative key and value representations inside attention: a_k and a_v
    [2 * max_distance + 1, head_dim] shared by the heads; forward(q, k, v) is the attention."""

    def __init__(self, head_dim, max_distance, *, values=True):
        super().__init__()
        rows = 2 * max_distance + 1
        self.a_k = torch.nn.Parameter(torch.randn(rows, head_dim) / math.sqrt(head_dim))
        self.a_v = torch.nn.Parameter(torch.randn(rows, head_dim) / math.sqrt(head_dim)) if values else None

    def forward(self, q, k, v, *, causal=False, **kwargs):
        return attention(q, k, v, causal=causal, encoding="shaw", shaw_a_k=self.a_k, shaw_a_v=self.a_v, **kwargs)


class LearnedPositional(torch.nn.Module):
    """A learned table [max_len, dim] (BERT, GPT-2's wpe): forward(positions) -> [N, dim]."""

    def __init__(self, max_len, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(max_len, dim) * 0.02)

    def forward(self, positions):
        return learned(self.weight, _arange(positions) if isinstance(positions, int) else positions)


class SinusoidalPositional(torch.nn.Module):
    """Vaswani et al.'s fixed encoding: forward(positions) -> [N, dim] float32 (no parameters)."""

    def __init__(self, dim, base=10000.0, layout="interleaved"):
        super().__init__()
        self.dim, self.base, self.layout = dim, base, layout

    def forward(self, positions):
        return sinusoidal(_arange(positions) if isinstance(positions, int) else positions, self.dim, self.base, self.layout)
