"""posenc.torch's custom operators (torch.library): opcheck, torch.compile(fullgraph=True) with no
graph break, DistributedDataParallel on 2 CPU processes (gloo), and the attention options softcap,
sinks and chunk against transformers 5's own eager attention code (gpt-oss, Gemma 2, Llama 4's
chunked mask)."""
import os
import tempfile
import time

import pytest
import torch

import posenc.torch as pt

GRADCHECK = dict(eps=1e-3, atol=2e-3, rtol=2e-3)


def randn(*shape, seed=0, dtype=torch.float32, grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype, requires_grad=grad)


# ------------------------------------------------------------------------- softcap, sinks, chunk

@pytest.mark.parametrize("options", [{"softcap": 2.0}, {"sinks": True}, {"chunk": 3},
                                     {"softcap": 1.5, "sinks": True, "chunk": 4},
                                     {"sinks": True, "window": 3, "encoding": "rope+alibi"}])
def test_attention_options_gradcheck(options):
    options = dict(options)
    q, k, v = (randn(1, 6, 2, 4, seed=1, dtype=torch.float64), randn(1, 6, 1, 4, seed=2, dtype=torch.float64),
               randn(1, 6, 1, 4, seed=3, dtype=torch.float64))
    inputs = [q, k, v]
    if options.pop("sinks", False):
        inputs.append(randn(2, seed=4, dtype=torch.float64))

    def f(q, k, v, sinks=None):
        return pt.attention(q, k, v, causal=True, sinks=sinks, **options)

    assert torch.autograd.gradcheck(f, tuple(inputs), fast_mode=True, **GRADCHECK)


def test_bad_options_are_named():
    q = torch.randn(1, 3, 2, 4)
    for kwargs, name in (({"softcap": -1.0}, "softcap"), ({"chunk": 1.5}, "chunk"),
                         ({"window": 2.5}, "window"), ({"window": "1"}, "window"), ({"scale": -1.0}, "scale"),
                         ({"sinks": torch.zeros(3)}, "sinks"), ({"sinks": [0.0, 0.0]}, "sinks"),
                         ({"sinks": torch.tensor([0.0, float("nan")])}, "sinks")):
        with pytest.raises(ValueError, match=name):
            pt.attention(q, q, q, **kwargs)


class _Stub(torch.nn.Module):
    """What transformers' eager_attention_forward reads from its module."""

    def __init__(self, heads, kv_heads, head_dim, sinks=None):
        super().__init__()
        self.num_key_value_groups, self.head_dim, self.sinks = heads // kv_heads, head_dim, sinks
        self.eval()


def _additive(mask_fn, Q, K):
    allowed = mask_fn(torch.tensor(0), torch.tensor(0), torch.arange(Q)[:, None], torch.arange(K)[None, :])
    return torch.zeros(Q, K).masked_fill(~allowed, float("-inf"))[None, None]


def _compare(ours, theirs, inputs):
    torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=2e-5)
    g = torch.randn_like(ours)
    ga = torch.autograd.grad(ours, inputs, g)
    gb = torch.autograd.grad(theirs, inputs, g)
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, atol=5e-5, rtol=5e-5)


def _qkv(B, T, H, Hkv, D, seed):
    return randn(B, T, H, D,
                 seed=seed), randn(B, T, Hkv, D, seed=seed + 1), randn(B, T, Hkv, D, seed=seed + 2)


@pytest.mark.parametrize("window", [0, 4])
def test_sinks_and_window_match_gpt_oss_eager_attention(window):
    from transformers import masking_utils as mu
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward
    B, T, H, Hkv, D = 2, 9, 4, 2, 8
    q, k, v = _qkv(B, T, H, Hkv, D, 10)
    sinks = randn(H, seed=20)
    mask_fn = mu.sliding_window_causal_mask_function(window) if window else mu.causal_mask_function
    theirs, _ = eager_attention_forward(_Stub(H, Hkv, D, sinks), q.transpose(1, 2), k.transpose(1, 2),
                                        v.transpose(1, 2), _additive(mask_fn, T, T), scaling=D ** -0.5)
    ours = pt.attention(q, k, v, causal=True, window=window, sinks=sinks)
    _compare(ours, theirs, (q, k, v, sinks))


def test_softcap_matches_gemma2_eager_attention():
    from transformers import masking_utils as mu
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward
    B, T, H, Hkv, D = 2, 7, 4, 1, 8
    q, k, v = _qkv(B, T, H, Hkv, D, 30)
    q = (q * 4).detach().requires_grad_()  # large logits, so the cap matters
    theirs, _ = eager_attention_forward(_Stub(H, Hkv, D), q.transpose(1, 2), k.transpose(1, 2),
                                        v.transpose(1, 2), _additive(mu.causal_mask_function, T, T),
                                        scaling=0.25, softcap=1.5)
    ours = pt.attention(q, k, v, causal=True, scale=0.25, softcap=1.5)
    _compare(ours, theirs, (q, k, v))


def test_chunk_matches_llama4_chunked_causal_mask():
    from transformers import masking_utils as mu
    from transformers.models.gemma2.modeling_gemma2 import (
        eager_attention_forward,  # plain eager attention with a mask
    )
    B, T, H, Hkv, D = 1, 11, 2, 2, 8
    q, k, v = _qkv(B, T, H, Hkv, D, 40)
    mask_fn = mu.chunked_causal_mask_function(4, torch.zeros(1, dtype=torch.int64))
    theirs, _ = eager_attention_forward(_Stub(H, Hkv, D), q.transpose(1, 2), k.transpose(1, 2),
                                        v.transpose(1, 2), _additive(mask_fn, T, T), scaling=D ** -0.5)
    ours = pt.attention(q, k, v, causal=True, chunk=4)
    _compare(ours, theirs, (q, k, v))


def _hf_attention_layer(family, layer_type):
    """A tiny attention layer of transformers 5 built from its config class (random weights, eager
    attention) and its rotary embedding."""
    import importlib
    mod = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    cfg = importlib.import_module(f"transformers.models.{family}.configuration_{family}")
    Config, Attention, Rotary = {"gpt_oss": ("GptOssConfig", "GptOssAttention", "GptOssRotaryEmbedding"),
                                 "gemma2": ("Gemma2Config", "Gemma2Attention",
                                            "Gemma2RotaryEmbedding")}[family]
    extra = {"attn_logit_softcapping": 1.5, "query_pre_attn_scalar": 16} if family == "gemma2" else {}
    config = getattr(cfg, Config)(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=8, num_hidden_layers=2,
                                  layer_types=[layer_type, layer_type], sliding_window=4, vocab_size=64,
                                  **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(7)
    layer = getattr(mod, Attention)(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * (0.5 if p.ndim > 1 else 1.0))
    return mod, config, layer, getattr(mod, Rotary)(config)


@pytest.mark.parametrize("family,layer_type", [("gpt_oss", "sliding_attention"),
                                               ("gpt_oss", "full_attention"), ("gemma2", "sliding_attention"),
                                               ("gemma2", "full_attention")])
def test_hf_attention_layers_with_sinks_softcap_and_window(family, layer_type):
    """gpt-oss's GptOssAttention (learned sinks, sliding window) and Gemma 2's Gemma2Attention
    (attn_logit_softcapping, query_pre_attn_scalar, sliding window), run eagerly by transformers,
    against the same projections and rotation with posenc's fused attention: outputs and the
    gradients of every parameter (the sinks included) and of the input."""
    from transformers import masking_utils as mu
    mod, config, layer, rotary = _hf_attention_layer(family, layer_type)
    B, T, H, D = 2, 9, 4, 8
    x = torch.randn(B, T, 32, requires_grad=True)
    cos, sin = rotary(x, torch.arange(T)[None].expand(B, T))
    window = config.sliding_window if layer_type == "sliding_attention" else 0
    mask_fn = mu.sliding_window_causal_mask_function(window) if window else mu.causal_mask_function
    theirs, _ = layer(x, (cos, sin), _additive(mask_fn, T, T))

    def ours_fn(x):
        q = layer.q_proj(x).view(B, T, -1, D).transpose(1, 2)
        k = layer.k_proj(x).view(B, T, -1, D).transpose(1, 2)
        v = layer.v_proj(x).view(B, T, -1, D)
        q, k = mod.apply_rotary_pos_emb(q, k, cos, sin)
        options = ({"sinks": layer.sinks} if family == "gpt_oss"
                   else {"softcap": config.attn_logit_softcapping})
        out = pt.attention(q.transpose(1, 2), k.transpose(1, 2), v, causal=True, window=window,
                           scale=layer.scaling, **options)
        return layer.o_proj(out.reshape(B, T, H * D))

    ours = ours_fn(x)
    params = [x] + list(layer.parameters())
    torch.testing.assert_close(ours, theirs, atol=5e-5, rtol=5e-5)
    g = torch.randn_like(ours)
    for name, a, b in zip(["x"] + [n for n, _ in layer.named_parameters()],
                          torch.autograd.grad(ours, params, g), torch.autograd.grad(theirs, params, g)):
        torch.testing.assert_close(a, b, atol=2e-4, rtol=2e-4, msg=lambda m, name=name: f"{name}: {m}")


# ---------------------------------------------------------------------------------------- opcheck

def test_opcheck_every_operator():
    x, pos = randn(2, 5, 3, 8, seed=1), torch.tensor([[0, 3, 4, 9, 12], [1, 2, 3, 4, 5]])
    key = pt._settings_key(("rope_scaling", {"rope_type": "linear", "factor": 2.0}))
    torch.library.opcheck(torch.ops.posenc.rope.default, (x, pos, key))
    torch.library.opcheck(torch.ops.posenc.rope_backward.default, (x.detach(), pos, key))
    torch.library.opcheck(torch.ops.posenc.rope.default, (x, None, ""))
    table, qp, kp = randn(32, 3, seed=5), torch.arange(3, 7), torch.arange(7)
    for bucketing, rows, num_buckets, max_distance in (("t5", 32, 32, 64), ("clipped", 5, 32, 2)):
        torch.library.opcheck(torch.ops.posenc.relative_bias.default,
                              (table[:rows].detach().requires_grad_(), qp, kp, bucketing, False, num_buckets,
                               max_distance))
        grad = torch.randn(3, 4, 7)
        torch.library.opcheck(torch.ops.posenc.relative_bias_backward.default,
                              (grad, qp, kp, bucketing, False, num_buckets, max_distance, rows))
    torch.library.opcheck(torch.ops.posenc.learned.default, (randn(6, 4, seed=6), torch.tensor([5, 0, 5, 2])))
    torch.library.opcheck(torch.ops.posenc.learned_backward.default,
                          (torch.randn(4, 4), torch.tensor([5, 0, 5, 2]), 6))
    q, k, v = _qkv(1, 6, 4, 2, 8, 3)
    none7 = (None,) * 7
    sinks = randn(4, seed=9)
    table = randn(32, 4, seed=8)
    for tables, options in (
        (none7, (True, None, "", 0, 0.0, 0, "")),
        ((None,) * 6 + (sinks,), (True, 0.3, "rope", 3, 2.0, 4, "")),
        ((table,) + (None,) * 5 + (sinks,),
         (False, None, "t5", 0, 0.0, 0, pt._settings_key(("max_distance", 64))))):
        args = (q, k, v, *tables, None, None, None, None, *options)
        torch.library.opcheck(torch.ops.posenc.attention.default, args)
        out, lse = torch.ops.posenc.attention(*args)
        grad = torch.randn_like(out)
        detached = [t.detach() if isinstance(t, torch.Tensor) else t for t in args]
        torch.library.opcheck(torch.ops.posenc.attention_backward.default,
                              (*detached[:3], out.detach(), lse.detach(), grad, *detached[3:]))


# ---------------------------------------------------------------------------------- torch.compile

class TinyBlock(torch.nn.Module):
    def __init__(self, dim=16, heads=2, kv_heads=1):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = torch.nn.Linear(dim, dim)
        self.kv = torch.nn.Linear(dim, 2 * kv_heads * self.head_dim)
        self.o = torch.nn.Linear(dim, dim)
        self.rotary = pt.RotaryEmbedding(self.head_dim, rope_scaling={"rope_type": "linear", "factor": 2.0})
        self.sinks = torch.nn.Parameter(torch.zeros(heads))
        self.positions = pt.LearnedPositional(16, dim)
        self.t5 = pt.T5RelativeBias(heads, num_buckets=8, max_distance=16)

    def forward(self, x):
        B, T, _ = x.shape
        x = x + self.positions(T)
        q = self.q(x).view(B, T, self.heads, self.head_dim)
        k, v = self.kv(x).view(B, T, 2, self.kv_heads, self.head_dim).unbind(2)
        q, k = self.rotary(q, k)
        out = pt.attention(q, k, v, causal=True, window=5, softcap=20.0, sinks=self.sinks, encoding="t5",
                           relative_table=self.t5.weight, max_distance=16, bidirectional=False)
        return x + self.o(out.reshape(B, T, -1))


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    model = TinyBlock()
    x = torch.randn(2, 7, 16)
    eager = model(x)
    eager.square().sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    out.square().sum().backward()
    torch.testing.assert_close(out, eager, atol=1e-5, rtol=1e-5)
    for p, g in zip(model.parameters(), expected):
        torch.testing.assert_close(p.grad, g, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------- DDP

def _train(model, batches, steps=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        opt.zero_grad()
        model(batches[step]).square().mean().backward()
        opt.step()


def _ddp_worker(rank, world, state, data, result_dir):
    import torch.distributed as dist
    torch.set_num_threads(1)
    if os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the loopback interface only
    dist.init_process_group("gloo", init_method=f"file://{os.path.join(result_dir, 'rendezvous')}", rank=rank,
                            world_size=world, timeout=__import__("datetime").timedelta(seconds=60))
    try:
        model = TinyBlock()
        model.load_state_dict(state)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        per = data.shape[1] // world
        _train(ddp, [d[rank * per:(rank + 1) * per] for d in data])
        torch.save(model.state_dict(), os.path.join(result_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_distributed_data_parallel_two_processes():
    import torch.multiprocessing as mp
    torch.manual_seed(1)
    model = TinyBlock()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    data = torch.randn(2, 4, 6, 16)  # steps, batch, seq, dim
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.start_processes(_ddp_worker, args=(2, state, data, tmp), nprocs=2, join=False,
                                 start_method="spawn")
        deadline = time.monotonic() + 120
        while not ctx.join(timeout=1):  # raises if a worker failed
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                pytest.fail("DDP workers did not finish in 120 s")
        ranks = [torch.load(os.path.join(tmp, f"rank{r}.pt")) for r in range(2)]
    # mean loss over the whole batch = the mean of the two ranks' losses: DDP's averaged gradient
    _train(model, list(data))
    for name, value in model.state_dict().items():
        torch.testing.assert_close(ranks[0][name], ranks[1][name], atol=0, rtol=0)
        torch.testing.assert_close(ranks[0][name], value, atol=2e-6, rtol=1e-5)
