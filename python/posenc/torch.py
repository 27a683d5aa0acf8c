"""posenc for PyTorch: custom operators over the C++ forward and backward passes (torch.library:
posenc::rope, posenc::attention, posenc::relative_bias, posenc::learned and their backwards, with
fake implementations and autograd, so torch.compile(fullgraph=True) and DistributedDataParallel
work), and nn.Modules that can replace a model's own positional code.

CPU tensors (the C++ library's CPU backend; tensors cross as numpy views, no copy for contiguous
float32) and, for rope, relative_bias / t5_bias and learned, CUDA tensors when posenc was built with its
CUDA backend (posenc.cuda_built()): the kernels queue on the tensor's current stream, with no copy to the
host and no synchronization; attention too (bf16 / fp16; head dims multiples of 8 up to 256, v's may
differ from q's; gradients of q, k, v, the relative table and sinks; Shaw's terms forward only). float16
and bfloat16 q, k, v (attention) and x (rope) cross in their own storage and come back, with their
gradients, in their dtype (computed in fp32, rounded once); table
gradients are float32. The kernels compute in float32: float64 CPU inputs are accepted and the results
come back in float64, with float32 accuracy (so torch.autograd.gradcheck needs eps ~1e-3 and atol/rtol
~1e-3 rather than its double-precision defaults); CUDA tensors are float32, bfloat16 or float16.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from . import absolute as _absolute, bias as _bias
from ._checks import fail, integer, real
from .attention import AttentionCall, canonical_params
from .kv_cache import cache_attention_call
from .rope import RopeConfig, rope as _rope_np, rope_backward as _rope_backward_np, rope_config

__all__ = [
    "rope", "attention", "KVCache", "t5_bias", "relative_bias", "alibi_bias", "learned", "sinusoidal",
    "RotaryEmbedding", "ALiBi", "T5RelativeBias", "ShawRelative", "LearnedPositional", "SinusoidalPositional",
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


def _np_activation(name, t):
    """A numpy view of a CPU activation tensor in its own storage (float16; bfloat16 as ml_dtypes'
    bfloat16, through its int16 bits: no copy), or _np's float32 for other dtypes."""
    if isinstance(t, torch.Tensor) and t.dtype in (torch.bfloat16, torch.float16) and t.device.type == "cpu":
        t = t.detach()
        if t.dtype == torch.float16:
            return t.numpy()
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return _np(name, t)


def _tensor_activation(a, like):
    """A result of _np_activation's input back as a tensor of like's dtype (bfloat16 through its bits)."""
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return _tensor(a, like)


# ---------------------------------------------------------------------------- custom operators
#
# rope, attention, relative_bias and learned are torch.library custom operators (posenc::rope,
# posenc::rope_backward, posenc::attention, posenc::attention_backward, ...) with fake (shape-only)
# implementations and autograd formulas through the C++ backward passes, so torch.compile(fullgraph=True)
# traces them without a graph break, and DistributedDataParallel (and anything else built on the dispatcher)
# sees plain aten-like ops. Settings that are not tensors or numbers (rope arguments, a RopeConfig, alibi's
# slopes, ...) travel as a string key into _SETTINGS, a per-process registry; the key is made once per
# distinct setting (RotaryEmbedding makes its key when it is built).

_SETTINGS: dict = {}
_KEYS: dict = {}


def _fingerprint(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((k, _fingerprint(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("seq",) + tuple(_fingerprint(v) for v in value)
    return ("object", id(value))  # the registry keeps the object alive, so its id stays unique


@torch.compiler.assume_constant_result
def _settings_key(*items) -> str:
    """The registry key of a dict of settings ("" for none). Under torch.compile this runs while
    tracing (assume_constant_result), so the key is in the registry before the graph runs."""
    if not items:
        return ""
    settings = dict(items)
    fp = _fingerprint(settings)
    key = _KEYS.get(fp)
    if key is None:
        key = _KEYS[fp] = f"s{len(_SETTINGS)}"
        _SETTINGS[key] = dict(settings)
    return key


def _settings(key: str) -> dict:
    return _SETTINGS[key] if key else {}


def _rope_positions(positions, x):
    """None: 0 .. seq-1."""
    return np.arange(x.shape[1], dtype=np.int64) if positions is None else _positions("positions", positions)


@torch.library.custom_op("posenc::rope", mutates_args=())
def _rope_op(x: torch.Tensor, positions: torch.Tensor | None, settings: str) -> torch.Tensor:
    return _tensor_activation(_rope_np(_np_activation("x", x), _rope_positions(positions, x),
                                       **_settings(settings)), x)


_CUDA_STORAGE = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def _rope_cuda(x, positions, settings, backward):
    """rope or rope_backward of a CUDA tensor x [batch, seq, heads, head_dim] by posenc's CUDA backend."""
    from . import _core
    from .rope import _rope_of, _split_kwargs
    if not _core.cuda_built():
        fail("x: a CUDA tensor, but this build of posenc has no CUDA backend (build it where nvcc is found)")
    if x.dtype not in _CUDA_STORAGE:
        fail(f"x: dtype {x.dtype} on CUDA is not supported (float32, bfloat16 or float16)")
    if x.dim() != 4:
        fail(f"x: expected [batch, seq, heads, head_dim], got shape {tuple(x.shape)}")
    config, seq_len, kw = _split_kwargs(dict(_settings(settings)))
    r = _rope_of(config, x.shape[3], kw)
    if positions is None:
        positions = torch.arange(x.shape[1], device=x.device)
    if positions.device != x.device:
        fail(f"positions: on {positions.device}, expected x's device {x.device}")
    positions = positions.to(torch.int64)
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    with torch.cuda.device(x.device):
        r.apply_cuda(x.data_ptr(), out.data_ptr(), list(x.shape), list(x.stride()), list(out.stride()),
                     _CUDA_STORAGE[x.dtype], positions.data_ptr(), list(positions.shape),
                     list(positions.stride()), seq_len, backward,
                     torch.cuda.current_stream(x.device).cuda_stream)
    return out


@_rope_op.register_kernel("cuda")
def _(x, positions, settings):
    return _rope_cuda(x, positions, settings, backward=False)


@_rope_op.register_fake
def _(x, positions, settings):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("posenc::rope_backward", mutates_args=())
def _rope_backward_op(grad: torch.Tensor, positions: torch.Tensor | None, settings: str) -> torch.Tensor:
    return _tensor_activation(_rope_backward_np(_np_activation("grad", grad),
                                                _rope_positions(positions, grad),
                                                **_settings(settings)), grad)


@_rope_backward_op.register_kernel("cuda")
def _(grad, positions, settings):
    return _rope_cuda(grad, positions, settings, backward=True)


@_rope_backward_op.register_fake
def _(grad, positions, settings):
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


def _rope_setup(ctx, inputs, output):
    _, ctx.positions, ctx.settings = inputs


def _rope_grad(ctx, grad):
    return _rope_backward_op(grad, ctx.positions, ctx.settings), None, None


_rope_op.register_autograd(_rope_grad, setup_context=_rope_setup)


def _position_tensor(name, p):
    if p is None or isinstance(p, torch.Tensor):
        if p is not None and p.is_floating_point():
            fail(f"{name}: dtype {p.dtype} is not an integer type")
        return p
    return torch.as_tensor(_positions(name, p))


def rope(x, positions, **kwargs):
    """posenc.rope for a tensor x [batch, seq, heads, head_dim], differentiable in x (the custom
    operator posenc::rope)."""
    p = _position_tensor("positions", positions)
    if p is not None and not isinstance(positions, torch.Tensor) and isinstance(x, torch.Tensor):
        p = p.to(x.device)  # positions given as a list or an array follow x (to the GPU for a CUDA x)
    return _rope_op(x, p, _settings_key(*kwargs.items()))


_ATTENTION_TABLES = ("relative_table", "shaw_a_k", "shaw_a_v", "transformer_xl_u", "transformer_xl_v",
                     "transformer_xl_w_r", "sinks")
_POSITIONS = ("q_positions", "k_positions", "cu_seqlens_q", "cu_seqlens_k")


def _attention_call(q_shape, causal, scale, encoding, window, softcap, chunk, settings, tables):
    params = dict(_settings(settings))
    params.update({name: _np(name, t) for name, t in zip(_ATTENTION_TABLES, tables) if t is not None})
    return AttentionCall(tuple(q_shape), causal=causal, scale=scale, encoding=encoding or None, window=window,
                         softcap=softcap, chunk=chunk, **params)


def _positions_dict(positions):
    return {name: _positions(name, p) for name, p in zip(_POSITIONS, positions) if p is not None}


@torch.library.custom_op("posenc::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, relative_table: torch.Tensor | None,
                  shaw_a_k: torch.Tensor | None, shaw_a_v: torch.Tensor | None,
                  transformer_xl_u: torch.Tensor | None, transformer_xl_v: torch.Tensor | None,
                  transformer_xl_w_r: torch.Tensor | None, sinks: torch.Tensor | None,
                  q_positions: torch.Tensor | None, k_positions: torch.Tensor | None,
                  cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None, causal: bool,
                  scale: float | None, encoding: str, window: int, softcap: float, chunk: int,
                  settings: str) -> tuple[torch.Tensor, torch.Tensor]:
    tables = (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v,
              transformer_xl_w_r, sinks)
    call = _attention_call(q.shape, causal, scale, encoding, window, softcap, chunk, settings, tables)
    # float16 / bfloat16 q, k, v are read in their storage (no conversion copy); out in q's dtype.
    out, lse = call.forward(_np_activation("q", q), _np_activation("k", k), _np_activation("v", v),
                            **_positions_dict((q_positions, k_positions, cu_seqlens_q, cu_seqlens_k)))
    return _tensor_activation(out, q), torch.from_numpy(lse)


@_attention_op.register_fake
def _(q, k, v, *rest):
    return (q.new_empty(q.shape[:3] + v.shape[3:]),
            q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32))


@torch.library.custom_op("posenc::attention_backward", mutates_args=())
def _attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                           lse: torch.Tensor, grad: torch.Tensor, relative_table: torch.Tensor | None,
                           shaw_a_k: torch.Tensor | None, shaw_a_v: torch.Tensor | None,
                           transformer_xl_u: torch.Tensor | None, transformer_xl_v: torch.Tensor | None,
                           transformer_xl_w_r: torch.Tensor | None, sinks: torch.Tensor | None,
                           q_positions: torch.Tensor | None, k_positions: torch.Tensor | None,
                           cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None, causal: bool,
                           scale: float | None, encoding: str, window: int, softcap: float, chunk: int,
                           settings: str) -> list[torch.Tensor]:
    """[grad q, grad k, grad v] and the gradients of the tables given, in _ATTENTION_TABLES order."""
    tables = (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v,
              transformer_xl_w_r, sinks)
    call = _attention_call(q.shape, causal, scale, encoding, window, softcap, chunk, settings, tables)
    # 16-bit tensors in their storage; their gradients come back in the same dtype (rounded once).
    g = call.backward(_np_activation("q", q), _np_activation("k", k), _np_activation("v", v),
                      _np_activation("out", out), _np("lse", lse), _np_activation("grad", grad),
                      **_positions_dict((q_positions, k_positions, cu_seqlens_q, cu_seqlens_k)))
    return [_tensor_activation(g["q"], q), _tensor_activation(g["k"], k), _tensor_activation(g["v"], v)] + [
        _tensor(g[name], t) for name, t in zip(_ATTENTION_TABLES, tables) if t is not None]


@_attention_backward_op.register_fake
def _(q, k, v, out, lse, grad, *rest):
    tables = rest[:len(_ATTENTION_TABLES)]
    return [torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v)] + [
        torch.empty_like(t, memory_format=torch.contiguous_format) for t in tables if t is not None]


def _attention_setup(ctx, inputs, output):
    q, k, v = inputs[:3]
    tables = inputs[3:3 + len(_ATTENTION_TABLES)]
    rest = inputs[3 + len(_ATTENTION_TABLES):]
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, *tables, *rest[:len(_POSITIONS)])
    ctx.n_tables = len(_ATTENTION_TABLES)
    ctx.options = rest[len(_POSITIONS):]


def _attention_grad(ctx, grad, grad_lse):
    q, k, v, out, lse, *saved = ctx.saved_tensors
    tables, positions = saved[:ctx.n_tables], saved[ctx.n_tables:]
    g = _attention_backward_op(q, k, v, out, lse, grad.contiguous(), *tables, *positions, *ctx.options)
    it = iter(g[3:])
    table_grads = [next(it) if t is not None else None for t in tables]
    return (g[0], g[1], g[2], *table_grads) + (None,) * (len(_POSITIONS) + len(ctx.options))


_attention_op.register_autograd(_attention_grad, setup_context=_attention_setup)


def _attention_call_on_cuda(q, tables, causal, scale, encoding, window, softcap, chunk, settings):
    """The call checked from the tables' shapes (their values stay on the device: nothing is read back)."""
    params = dict(_settings(settings))
    params.update({name: np.zeros(tuple(t.shape), np.float32) for name, t in zip(_ATTENTION_TABLES, tables)
                   if t is not None})
    return AttentionCall(tuple(q.shape), causal=causal, scale=scale, encoding=encoding or None, window=window,
                         softcap=softcap, chunk=chunk, **params)


@_attention_op.register_kernel("cuda")
def _(q, k, v, relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v, transformer_xl_w_r,
      sinks, q_positions, k_positions, cu_seqlens_q, cu_seqlens_k, causal, scale, encoding, window, softcap,
      chunk, settings):
    """The forward on CUDA tensors: bf16 / fp16 q, k, v (posenc/attention.h on cuda), on the current
    stream."""
    tables = (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v, transformer_xl_w_r,
              sinks)
    device_tables = {name: _on_cuda(name, q, t).contiguous() for name, t in zip(_ATTENTION_TABLES, tables)
                     if t is not None}
    call = _attention_call_on_cuda(q, tables, causal, scale, encoding, window, softcap, chunk, settings)
    positions = {name: _on_cuda(name, q, p) for name, p in
                 zip(_POSITIONS, (q_positions, k_positions, cu_seqlens_q, cu_seqlens_k)) if p is not None}
    out = q.new_empty(q.shape[:3] + v.shape[3:])
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    with torch.cuda.device(q.device):
        call.core.forward_cuda(_cuda_spec(q), _cuda_spec(k), _cuda_spec(v), _cuda_spec(out), _cuda_spec(lse),
                               {n: _cuda_spec(p) for n, p in positions.items()},
                               {n: _cuda_spec(t) for n, t in device_tables.items()}, _stream(q))
    return out, lse


@_attention_backward_op.register_kernel("cuda")
def _(q, k, v, out, lse, grad, relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v,
      transformer_xl_w_r, sinks, q_positions, k_positions, cu_seqlens_q, cu_seqlens_k, causal, scale,
      encoding, window, softcap, chunk, settings):
    """The gradients of q, k, v and of the relative table, Shaw's tables, Transformer-XL's u, v and W_R and
    sinks on CUDA tensors."""
    tables = (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v, transformer_xl_w_r,
              sinks)
    device_tables = {name: _on_cuda(name, q, t).contiguous() for name, t in zip(_ATTENTION_TABLES, tables)
                     if t is not None}
    call = _attention_call_on_cuda(q, tables, causal, scale, encoding, window, softcap, chunk, settings)
    positions = {name: _on_cuda(name, q, p) for name, p in
                 zip(_POSITIONS, (q_positions, k_positions, cu_seqlens_q, cu_seqlens_k)) if p is not None}
    # Fresh tensors, written by the backward (accumulate=False): no zero fill, no read of one.
    grads = {name: torch.empty_like(t, memory_format=torch.contiguous_format)
             for name, t in (("q", q), ("k", k), ("v", v), *device_tables.items())}
    with torch.cuda.device(q.device):
        position_specs = {n: _cuda_spec(p) for n, p in positions.items()}
        call.core.backward_cuda(_cuda_spec(q), _cuda_spec(k), _cuda_spec(v), _cuda_spec(out), _cuda_spec(lse),
                                _cuda_spec(grad.contiguous()), position_specs,
                                {n: _cuda_spec(t) for n, t in device_tables.items()},
                                {n: _cuda_spec(g) for n, g in grads.items()}, _stream(q), accumulate=False)
    return [grads["q"], grads["k"], grads["v"]] + [grads[name] for name, t in zip(_ATTENTION_TABLES, tables)
                                                   if t is not None]


def attention(q, k, v, *, causal=False, scale=None, encoding=None, q_positions=None, k_positions=None,
              window=0, cu_seqlens_q=None, cu_seqlens_k=None, softcap=0.0, sinks=None, chunk=0,
              query_temperature=None, **params):
    """posenc.attention on tensors q [B, Q, H, D], k, v [B, K, Hkv, D]; differentiable in q, k, v,
    the encoding's tables (relative_table, shaw_a_k, shaw_a_v, transformer_xl_u, transformer_xl_v,
    transformer_xl_w_r; the xl_* names are accepted too) and sinks [H] (the custom operator
    posenc::attention). softcap > 0: Gemma 2's logit softcapping; sinks: gpt-oss's learned sink
    logits; chunk > 0: Llama 4's chunked attention; query_temperature, rope_offset and v heads of
    another size than q/k's: as posenc.attention. A real model's layer: **layer.attention_config()."""
    params = canonical_params(params)
    if query_temperature is not None:  # a setting (not a tensor): it travels in the settings key
        params["query_temperature"] = query_temperature
    tables = [params.pop(name, None) for name in _ATTENTION_TABLES[:-1]] + [sinks]
    for name, t in zip(_ATTENTION_TABLES, tables):
        if t is not None and not isinstance(t, torch.Tensor):
            fail(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    given = (q_positions, k_positions, cu_seqlens_q, cu_seqlens_k)
    positions = [_position_tensor(name, p) for name, p in zip(_POSITIONS, given)]
    if isinstance(q, torch.Tensor):  # positions given as lists or arrays follow q (to the GPU for a CUDA q)
        positions = [p if p is None or isinstance(g, torch.Tensor) else p.to(q.device)
                     for p, g in zip(positions, given)]
    # checked here as posenc.attention checks them (int() or float() would let 2.5 or "1" through)
    scale = None if scale is None else real("scale", scale, positive=True)
    window, chunk = integer("window", window, 0), integer("chunk", 0 if chunk is None else chunk, 0)
    softcap = 0.0 if softcap is None else real("softcap", softcap)
    out, _ = _attention_op(q, k, v, *tables, *positions, bool(causal), scale, encoding or "", window, softcap,
                           chunk, _settings_key(*params.items()))
    return out


@torch.library.custom_op("posenc::relative_bias", mutates_args=())
def _relative_bias_op(table: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor,
                      bucketing: str, bidirectional: bool, num_buckets: int,
                      max_distance: int) -> torch.Tensor:
    t, qp, kp = _np("table",
                    table), _positions("q_positions", q_positions), _positions("k_positions", k_positions)
    if bucketing == "t5":
        out = _bias.t5_bias(t, qp, kp, bidirectional=bidirectional, num_buckets=num_buckets,
                            max_distance=max_distance)
    else:
        out = _bias.relative_bias(t, qp, kp, max_distance=max_distance)
    return _tensor(out, table)


@_relative_bias_op.register_fake
def _(table, q_positions, k_positions, *options):
    return table.new_empty((table.shape[1], q_positions.shape[0], k_positions.shape[0]))


@torch.library.custom_op("posenc::relative_bias_backward", mutates_args=())
def _relative_bias_backward_op(grad: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor,
                               bucketing: str, bidirectional: bool, num_buckets: int, max_distance: int,
                               rows: int) -> torch.Tensor:
    g = _bias.relative_bias_backward(_np("grad", grad), _positions("q_positions", q_positions),
                                     _positions("k_positions", k_positions), bucketing=bucketing,
                                     num_buckets=num_buckets, max_distance=max_distance,
                                     bidirectional=bidirectional)
    if g.shape[0] != rows:
        fail(f"table: {rows} rows, but this bucketing has {g.shape[0]}")
    return _tensor(g, grad)


@_relative_bias_backward_op.register_fake
def _(grad, q_positions, k_positions, bucketing, bidirectional, num_buckets, max_distance, rows):
    return grad.new_empty((rows, grad.shape[0]))


def _cuda_spec(t):
    """(data pointer, shape, strides, dtype) of a CUDA tensor for posenc._core's *_cuda functions."""
    names = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int64: "i64"}
    if t.dtype not in names:
        fail(f"dtype {t.dtype} on CUDA is not supported (float32, bfloat16, float16; int64 positions)")
    return (t.data_ptr(), list(t.shape), list(t.stride()), names[t.dtype])


def _on_cuda(name, like, t):
    """t on like's CUDA device, as int64 positions or float32 tables; a tensor elsewhere is refused."""
    from . import _core
    if not _core.cuda_built():
        fail(f"{name}: a CUDA tensor, but this build of posenc has no CUDA backend "
             "(build it where nvcc is found)")
    if t.device != like.device:
        fail(f"{name}: on {t.device}, expected {like.device}")
    return t.to(torch.int64) if not t.is_floating_point() else t.to(torch.float32)


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream


@_relative_bias_op.register_kernel("cuda")
def _(table, q_positions, k_positions, bucketing, bidirectional, num_buckets, max_distance):
    from . import _core
    t = _on_cuda("table", table, table).contiguous()
    qp, kp = _on_cuda("q_positions", table, q_positions), _on_cuda("k_positions", table, k_positions)
    out = torch.empty((t.shape[1], qp.shape[0], kp.shape[0]), dtype=torch.float32, device=table.device)
    with torch.cuda.device(table.device):
        _core.relative_bias_cuda(_cuda_spec(t), _cuda_spec(qp), _cuda_spec(kp), _cuda_spec(out), bucketing,
                                 bidirectional, num_buckets, max_distance, _stream(table))
    return out.to(table.dtype)


@_relative_bias_backward_op.register_kernel("cuda")
def _(grad, q_positions, k_positions, bucketing, bidirectional, num_buckets, max_distance, rows):
    from . import _core
    g = grad if grad.dtype in (torch.float32, torch.bfloat16, torch.float16) else grad.float()
    qp, kp = _on_cuda("q_positions", grad, q_positions), _on_cuda("k_positions", grad, k_positions)
    expected = num_buckets if bucketing == "t5" else 2 * max_distance + 1
    if expected != rows:
        fail(f"table: {rows} rows, but this bucketing has {expected}")
    out = torch.zeros((rows, g.shape[0]), dtype=torch.float32, device=grad.device)
    with torch.cuda.device(grad.device):
        _core.relative_bias_backward_cuda(_cuda_spec(g), _cuda_spec(qp), _cuda_spec(kp), _cuda_spec(out),
                                          bucketing, bidirectional, num_buckets, max_distance, _stream(grad))
    return out.to(grad.dtype)


def _relative_bias_setup(ctx, inputs, output):
    table, *ctx.args = inputs
    ctx.rows = table.shape[0]


def _relative_bias_grad(ctx, grad):
    return (_relative_bias_backward_op(grad.contiguous(), *ctx.args, ctx.rows),) + (None,) * 6


_relative_bias_op.register_autograd(_relative_bias_grad, setup_context=_relative_bias_setup)


def _bias_positions(name, p, like=None):
    """Positions as a tensor; given as a list or an array, on like's device (the GPU for a CUDA table)."""
    t = _position_tensor(name, p if isinstance(p, torch.Tensor) else np.asarray(p))
    if not isinstance(p, torch.Tensor) and isinstance(like, torch.Tensor):
        t = t.to(like.device)
    return t


def t5_bias(table, q_positions, k_positions, *, bidirectional=True, num_buckets=32, max_distance=128):
    """posenc.t5_bias as [heads, Q, K], differentiable in table [num_buckets, heads]."""
    return _relative_bias_op(table, _bias_positions("q_positions", q_positions, table),
                             _bias_positions("k_positions", k_positions, table), "t5",
                             bool(bidirectional), int(num_buckets), int(max_distance))


def relative_bias(table, q_positions, k_positions, *, max_distance):
    """posenc.relative_bias (clipped distances) as [heads, Q, K], differentiable in table."""
    return _relative_bias_op(table, _bias_positions("q_positions", q_positions, table),
                             _bias_positions("k_positions", k_positions, table), "clipped",
                             True, 32, int(max_distance))


def alibi_bias(n_heads, q_positions, k_positions, causal=True, **kwargs):
    """posenc.alibi_bias as a float32 tensor [heads, Q, K] (no parameters, no gradient)."""
    return torch.from_numpy(_bias.alibi_bias(n_heads, _positions("q_positions", q_positions),
                                             _positions("k_positions", k_positions), causal, **kwargs))


@torch.library.custom_op("posenc::learned", mutates_args=())
def _learned_op(table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return _tensor(_absolute.learned(_np("table", table), _positions("positions", positions)), table)


@_learned_op.register_fake
def _(table, positions):
    return table.new_empty((positions.shape[0], table.shape[1]))


@torch.library.custom_op("posenc::learned_backward", mutates_args=())
def _learned_backward_op(grad: torch.Tensor, positions: torch.Tensor, rows: int) -> torch.Tensor:
    out = _absolute.learned_backward(_np("grad", grad), _positions("positions", positions), rows)
    return _tensor(out, grad)


@_learned_backward_op.register_fake
def _(grad, positions, rows):
    return grad.new_empty((rows, grad.shape[1]))


@_learned_op.register_kernel("cuda")
def _(table, positions):
    from . import _core
    t, p = _on_cuda("table", table, table), _on_cuda("positions", table, positions)
    out = torch.empty((p.shape[0], t.shape[1]), dtype=torch.float32, device=table.device)
    with torch.cuda.device(table.device):
        _core.learned_lookup_cuda(_cuda_spec(t), _cuda_spec(p), _cuda_spec(out), _stream(table))
    return out.to(table.dtype)


@_learned_backward_op.register_kernel("cuda")
def _(grad, positions, rows):
    from . import _core
    g = grad if grad.dtype in (torch.float32, torch.bfloat16, torch.float16) else grad.float()
    p = _on_cuda("positions", grad, positions)
    out = torch.zeros((rows, g.shape[1]), dtype=torch.float32, device=grad.device)
    with torch.cuda.device(grad.device):
        _core.learned_backward_cuda(_cuda_spec(g), _cuda_spec(p), _cuda_spec(out), _stream(grad))
    return out.to(grad.dtype)


def _learned_setup(ctx, inputs, output):
    table, ctx.positions = inputs
    ctx.rows = table.shape[0]


_learned_op.register_autograd(
    lambda ctx, grad: (_learned_backward_op(grad.contiguous(), ctx.positions, ctx.rows), None),
    setup_context=_learned_setup)


def learned(table, positions):
    """table[positions] ([N, dim]), differentiable in table; a position past the table is an error."""
    return _learned_op(table, _bias_positions("positions", positions, table))


def sinusoidal(positions, dim, base=10000.0, layout="interleaved", **kwargs):
    """posenc.sinusoidal as a float32 tensor [N, dim]."""
    return torch.from_numpy(_absolute.sinusoidal(_positions("positions", positions), dim, base, layout,
                                                 **kwargs))


# ---------------------------------------------------------------------------------------- modules

def _arange(n, device=None):
    """0 .. n-1 as int64 positions on `device` (a module's parameters' or its input's)."""
    return torch.arange(int(n), dtype=torch.int64, device=device)


def _on_device_of(positions, like):
    """Positions given as a list or an array (not a tensor), on like's device; tensors are left as given."""
    if positions is None or isinstance(positions, torch.Tensor):
        return positions
    return _position_tensor("positions", positions).to(like.device)


class RotaryEmbedding(torch.nn.Module):
    """Rotates q and k ([batch, seq, heads, head_dim]) by their positions; the HF configuration
    vocabulary (rope_scaling dict, partial rotary_dim, layout "half" or "interleaved")."""

    def __init__(self, head_dim, *, base=10000.0, rotary_dim=None, layout="half", rope_scaling=None,
                 max_position_embeddings=None, mrope_section=None):
        super().__init__()
        self.config = rope_config(head_dim, base=base, rotary_dim=rotary_dim, layout=layout,
                                  rope_scaling=rope_scaling, max_position_embeddings=max_position_embeddings,
                                  mrope_section=mrope_section)
        self._key = _settings_key(("config", self.config))

    @classmethod
    def from_hf(cls, config):
        module = cls.__new__(cls)
        torch.nn.Module.__init__(module)
        module.config = RopeConfig.from_hf(config)
        module._key = _settings_key(("config", module.config))
        return module

    def forward(self, q, k, positions=None):
        if positions is None:
            positions = _arange(q.shape[1], q.device)
        positions = _position_tensor("positions", _on_device_of(positions, q))
        return _rope_op(q, positions, self._key), _rope_op(k, positions, self._key)


class ALiBi(torch.nn.Module):
    """ALiBi's bias [heads, Q, K] for query and key positions (BLOOM's slopes by default)."""

    def __init__(self, n_heads, *, causal=True, slopes="bloom", alibi_bias_max=8.0):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.kwargs = {"slopes": slopes, "alibi_bias_max": alibi_bias_max}
        self.register_buffer("slopes", torch.from_numpy(_bias.alibi_slopes(n_heads, **self.kwargs)),
                             persistent=False)

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
        q_positions = _arange(q_positions,
                              self.weight.device) if isinstance(q_positions, int) else q_positions
        k_positions = q_positions if k_positions is None else k_positions
        return t5_bias(self.weight, q_positions, k_positions, bidirectional=self.bidirectional,
                       num_buckets=self.num_buckets, max_distance=self.max_distance)


class ShawRelative(torch.nn.Module):
    """Shaw et al.'s relative key and value representations inside attention: a_k and a_v
    [2 * max_distance + 1, head_dim] shared by the heads; forward(q, k, v) is the attention."""

    def __init__(self, head_dim, max_distance, *, values=True):
        super().__init__()
        rows = 2 * max_distance + 1
        self.a_k = torch.nn.Parameter(torch.randn(rows, head_dim) / math.sqrt(head_dim))
        self.a_v = torch.nn.Parameter(torch.randn(rows, head_dim) / math.sqrt(head_dim)) if values else None

    def forward(self, q, k, v, *, causal=False, **kwargs):
        return attention(q, k, v, causal=causal, encoding="shaw", shaw_a_k=self.a_k, shaw_a_v=self.a_v,
                         **kwargs)


class LearnedPositional(torch.nn.Module):
    """A learned table [max_len, dim] (BERT, GPT-2's wpe): forward(positions) -> [N, dim]."""

    def __init__(self, max_len, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(max_len, dim) * 0.02)

    def forward(self, positions):
        if isinstance(positions, int):
            positions = _arange(positions, self.weight.device)
        return learned(self.weight, positions)


class SinusoidalPositional(torch.nn.Module):
    """Vaswani et al.'s fixed encoding: forward(positions) -> [N, dim] float32 (no parameters)."""

    def __init__(self, dim, base=10000.0, layout="interleaved"):
        super().__init__()
        self.dim, self.base, self.layout = dim, base, layout

    def forward(self, positions):
        return sinusoidal(_arange(positions) if isinstance(positions, int) else positions, self.dim,
                          self.base, self.layout)


class KVCache:
    """posenc's KV cache on a CUDA device for torch tensors (posenc/kv_cache.h with Device::cuda): keys and
    values [B, size, Hkv, D] in bf16 or fp16 device memory, grown by doubling; append and attend queue on the
    current stream and read nothing back (posenc.KVCache is the CPU cache, over numpy arrays), but for
    positions: shift_positions reads their range back (to refuse a shift past 2^53 before anything changes),
    and with a rope whose frequencies depend on the length (dynamic, longrope, qwen_dynamic) append and attend
    read the largest (the frequencies of max(position) + 1, as the CPU cache takes them)."""

    def __init__(self, batch: int, kv_heads: int, head_dim: int, *, rope: RopeConfig | None = None,
                 dtype=torch.bfloat16, device="cuda"):
        from . import _core
        device = torch.device(device)
        if device.type != "cuda":
            fail(f"device: {device} is invalid: posenc.torch.KVCache lives on a CUDA device (posenc.KVCache "
                 "is the CPU cache)")
        if dtype not in (torch.bfloat16, torch.float16):
            fail(f"dtype: {dtype} is invalid: the CUDA cache stores torch.bfloat16 or torch.float16")
        if not _core.cuda_built():
            fail("device: cuda, but this build of posenc has no CUDA backend (build it where nvcc is found)")
        if rope is not None and not isinstance(rope, RopeConfig):
            fail(f"rope: expected a posenc.RopeConfig or None, got {type(rope).__name__}")
        self._device, self._dtype, self._rope = device, dtype, rope
        self._shape = (integer("batch", batch, 1), integer("kv_heads", kv_heads, 1),
                       integer("head_dim", head_dim, 1))
        with torch.cuda.device(device):
            self._core = _core.KVCache(*self._shape, rope, "bf16" if dtype == torch.bfloat16 else "f16",
                                       device="cuda")

    @property
    def size(self) -> int:
        """Tokens per batch row."""
        return self._core.size

    def _check(self, name, t):
        if not isinstance(t, torch.Tensor):
            fail(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.device != self._device:
            fail(f"{name}: on {t.device}, expected the cache's {self._device}")
        return t

    def append(self, k, v, positions=None) -> None:
        """k, v [B, T, Hkv, D] in the cache's dtype on its device; positions [T] or [B, T] (default: each
        row continues after its last position, 0, 1, 2, ... from empty)."""
        k, v = self._check("k", k), self._check("v", v)
        p = None if positions is None else _on_cuda("positions", k, _position_tensor("positions", positions)
                                                     .to(k.device))
        with torch.cuda.device(self._device):
            self._core.append_cuda(_cuda_spec(k), _cuda_spec(v), None if p is None else _cuda_spec(p),
                                   _stream(k))

    def _current_stream(self):
        return torch.cuda.current_stream(self._device).cuda_stream

    def shift_positions(self, delta: int) -> None:
        """Every cached position += delta; keys re-rotated in place by R(delta) (a context shift)."""
        with torch.cuda.device(self._device):
            self._core.shift_positions(integer("delta", delta), self._current_stream())

    def erase_front(self, n: int) -> None:
        """Drops the oldest n tokens of every batch row (positions kept: follow with shift_positions(-n))."""
        with torch.cuda.device(self._device):
            self._core.erase_front(integer("n", n, 0), self._current_stream())

    def rerotate(self, from_seq_len: int, to_seq_len: int) -> None:
        """Keys re-rotated from the frequencies of one sequence length to another's (LongRoPE's switch)."""
        with torch.cuda.device(self._device):
            self._core.rerotate(integer("from_seq_len", from_seq_len, 1),
                                integer("to_seq_len", to_seq_len, 1), self._current_stream())

    def attend(self, q, *, q_positions=None, return_lse=False, causal=False, scale=None, encoding=None,
               window=0, softcap=0.0, sinks=None, chunk=0, query_temperature=None, **params):
        """As posenc.KVCache.attend, for bf16 / fp16 q on the cache's device (tables such as relative_table
        and sinks on that device too). Returns out [B, T, H, D] in q's dtype (and lse [B, H, T] float32)."""
        q = self._check("q", q)
        tables = {name: _on_cuda(name, q, params.pop(name)).contiguous()
                  for name in ("relative_table",) if params.get(name) is not None}
        if sinks is not None:
            tables["sinks"] = _on_cuda("sinks", q, sinks).contiguous()
        shapes = {name: np.zeros(tuple(t.shape), np.float32) for name, t in tables.items()}
        call = cache_attention_call(self._rope, tuple(q.shape), causal=causal, scale=scale, encoding=encoding,
                                    window=window, softcap=softcap, chunk=chunk,
                                    query_temperature=query_temperature, **shapes, **params)
        B, T, H = q.shape[:3]
        out = q.new_empty((B, T, H, self._shape[2]))
        lse = torch.empty((B, H, T), dtype=torch.float32, device=q.device)
        qp = None if q_positions is None else _on_cuda(
            "q_positions", q, _position_tensor("q_positions", q_positions).to(q.device))
        with torch.cuda.device(self._device):
            self._core.attend_cuda(call.core, {n: _cuda_spec(t) for n, t in tables.items()}, _cuda_spec(q),
                                   _cuda_spec(out), None if qp is None else _cuda_spec(qp), _cuda_spec(lse),
                                   _stream(q))
        return (out, lse) if return_lse else out
