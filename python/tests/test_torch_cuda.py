"""posenc.torch on CUDA tensors: rope and its gradient, the tables, and the attention forward by posenc's CUDA
backend, against the CPU backend (and the attention against PyTorch's SDPA) on
the same inputs, on the current stream, under torch.compile(fullgraph=True). Skipped where there is no CUDA
device or posenc was built without its CUDA backend."""
import pytest
import torch

import posenc
import posenc.torch as pt

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and posenc.cuda_built()),
                                reason="needs a CUDA device and posenc's CUDA backend "
                                       "(scripts/gpu_check.sh runs it on a GPU machine)")

SETTINGS = [dict(base=10000.0), dict(base=500000.0, rotary_dim=32, layout="interleaved"),
            dict(base=1e6, max_position_embeddings=256,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("settings", SETTINGS)
def test_rope_cuda_matches_cpu_forward_and_backward(dtype, settings):
    torch.manual_seed(0)
    x = torch.randn(2, 37, 4, 64, dtype=dtype)
    positions = torch.arange(37) + 1000
    ulp = {torch.float32: 2e-6, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}[dtype]
    x_cpu = x.clone().requires_grad_()
    y_cpu = pt.rope(x_cpu, positions, **settings)
    x_gpu = x.cuda().requires_grad_()
    y_gpu = pt.rope(x_gpu, positions.cuda(), **settings)
    assert y_gpu.device.type == "cuda" and y_gpu.dtype == dtype
    torch.testing.assert_close(y_gpu.cpu().float(), y_cpu.float(), atol=4 * ulp, rtol=2 * ulp)
    g = torch.randn_like(y_cpu)
    y_cpu.backward(g)
    y_gpu.backward(g.cuda())
    torch.testing.assert_close(x_gpu.grad.cpu().float(), x_cpu.grad.float(), atol=4 * ulp, rtol=2 * ulp)


def test_rope_cuda_runs_on_the_current_stream_and_compiles():
    x = torch.randn(1, 16, 2, 32, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y = pt.rope(x, torch.arange(16, device="cuda"))
    stream.synchronize()
    compiled = torch.compile(lambda t: pt.rope(t, torch.arange(16, device="cuda")), fullgraph=True)
    torch.testing.assert_close(compiled(x), y, atol=0, rtol=0)


def test_rope_cuda_refuses_float64_and_mixed_devices():
    x = torch.randn(1, 4, 1, 8, device="cuda", dtype=torch.float64)
    with pytest.raises(ValueError, match="float64"):
        pt.rope(x, torch.arange(4, device="cuda"))
    with pytest.raises(ValueError, match="positions"):
        pt.rope(x.float(), torch.arange(4))


@pytest.mark.parametrize("bucketing", ["t5", "clipped"])
def test_relative_bias_cuda_matches_cpu_and_its_gradient_is_deterministic(bucketing):
    torch.manual_seed(1)
    rows = 32 if bucketing == "t5" else 2 * 16 + 1
    table = torch.randn(rows, 4)
    q, k = torch.arange(40) + 3, torch.arange(57)
    fn = (lambda t, qp, kp: pt.t5_bias(t, qp, kp)) if bucketing == "t5" else \
        (lambda t, qp, kp: pt.relative_bias(t, qp, kp, max_distance=16))
    t_cpu = table.clone().requires_grad_()
    b_cpu = fn(t_cpu, q, k)
    grads = []
    for _ in range(2):
        t_gpu = table.cuda().requires_grad_()
        b_gpu = fn(t_gpu, q.cuda(), k.cuda())
        torch.testing.assert_close(b_gpu.cpu(), b_cpu.detach(), atol=0, rtol=0)
        g = torch.randn(b_cpu.shape, generator=torch.Generator().manual_seed(2))
        b_gpu.backward(g.cuda())
        grads.append(t_gpu.grad.cpu())
    b_cpu.backward(g)
    assert torch.equal(grads[0], grads[1]), "the table gradient differs between runs"
    torch.testing.assert_close(grads[0], t_cpu.grad, atol=1e-5, rtol=1e-5)


def test_learned_cuda_matches_cpu():
    table = torch.randn(50, 24)
    positions = torch.randint(0, 50, (70,))
    t_cpu, t_gpu = table.clone().requires_grad_(), table.cuda().requires_grad_()
    out_cpu, out_gpu = pt.learned(t_cpu, positions), pt.learned(t_gpu, positions.cuda())
    torch.testing.assert_close(out_gpu.cpu(), out_cpu.detach(), atol=0, rtol=0)
    g = torch.randn(out_cpu.shape)
    out_cpu.backward(g)
    out_gpu.backward(g.cuda())
    torch.testing.assert_close(t_gpu.grad.cpu(), t_cpu.grad, atol=1e-5, rtol=1e-5)


def test_modules_on_cuda_match_cpu():
    torch.manual_seed(3)
    q, k = torch.randn(2, 24, 4, 64), torch.randn(2, 24, 2, 64)
    rotary = pt.RotaryEmbedding(64, base=5e5)
    for positions in (None, list(range(5, 29))):
        qc, kc = rotary(q, k, positions)
        qg, kg = rotary(q.cuda(), k.cuda(), positions)
        torch.testing.assert_close(qg.cpu(), qc, atol=4e-6, rtol=2e-6)
        torch.testing.assert_close(kg.cpu(), kc, atol=4e-6, rtol=2e-6)
    t5 = pt.T5RelativeBias(4)
    torch.testing.assert_close(t5.cuda()(17).cpu(), t5.cpu()(17), atol=0, rtol=0)
    table = pt.LearnedPositional(30, 8)
    torch.testing.assert_close(table.cuda()(12).cpu(), table.cpu()(12), atol=0, rtol=0)


ATTENTION_CASES = [dict(), dict(encoding="alibi"), dict(encoding="rope", base=10000.0), dict(softcap=20.0),
                   dict(window=24), dict(encoding="rope+alibi", base=500.0)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kwargs", ATTENTION_CASES)
def test_attention_cuda_forward_matches_cpu(dtype, kwargs):
    torch.manual_seed(3)
    q, k, v = torch.randn(2, 50, 4, 64, dtype=dtype), torch.randn(2, 50, 2, 64, dtype=dtype), \
        torch.randn(2, 50, 2, 64, dtype=dtype)
    out_cpu = pt.attention(q, k, v, causal=True, **kwargs)
    out_gpu = pt.attention(q.cuda(), k.cuda(), v.cuda(), causal=True, **kwargs)
    assert out_gpu.device.type == "cuda" and out_gpu.dtype == dtype
    # P rounded to the storage type for P V on the GPU: within one rounding of the values' scale.
    u = 2 ** -8 if dtype == torch.bfloat16 else 2 ** -11
    torch.testing.assert_close(out_gpu.cpu().float(), out_cpu.float(), atol=2 * u * v.abs().max().item(),
                               rtol=2 * u)


def test_attention_cuda_t5_table_on_the_device_and_sdpa():
    torch.manual_seed(4)
    q, k, v = (torch.randn(1, 70, 4, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    table = torch.randn(32, 4, device="cuda")
    out = pt.attention(q, k, v, causal=True, encoding="t5", relative_table=table)
    ref = pt.attention(q.cpu(), k.cpu(), v.cpu(), causal=True, encoding="t5", relative_table=table.cpu())
    torch.testing.assert_close(out.cpu().float(), ref.float(), atol=2 ** -6, rtol=2 ** -7)
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)
    plain = pt.attention(q, k, v, causal=True)
    torch.testing.assert_close(plain.float(), sdpa.float(), atol=2 ** -6, rtol=2 ** -7)
    compiled = torch.compile(lambda a, b, c: pt.attention(a, b, c, causal=True), fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), plain, atol=0, rtol=0)


@pytest.mark.parametrize("kwargs", [dict(), dict(encoding="rope+alibi", base=500.0),
                                    dict(softcap=10.0, window=20)])
def test_attention_cuda_backward_matches_cpu(kwargs):
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 60, 4, 64, dtype=torch.bfloat16) for _ in range(3))
    grads = []
    for device in ("cpu", "cuda"):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v)]
        out = pt.attention(*leaves, causal=True, **kwargs)
        out.float().pow(2).sum().backward()
        grads.append([t.grad.cpu().float() for t in leaves])
    for cpu, gpu in zip(*grads):
        torch.testing.assert_close(gpu, cpu, atol=2 ** -6 * cpu.abs().max().item(), rtol=2 ** -6)


def test_attention_cuda_table_and_sink_gradients_match_cpu_and_repeat():
    torch.manual_seed(6)
    q, k, v = (torch.randn(1, 70, 4, 64, dtype=torch.bfloat16) for _ in range(3))
    table, sinks = torch.randn(32, 4), torch.randn(4)
    results = []
    for device in ("cpu", "cuda", "cuda"):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v, table, sinks)]
        out = pt.attention(*leaves[:3], causal=True, encoding="t5", relative_table=leaves[3], sinks=leaves[4])
        out.float().pow(2).sum().backward()
        results.append([t.grad.cpu().float() for t in leaves])
    for cpu, gpu, again in zip(*results):
        assert torch.equal(gpu, again), "a gradient differs between two runs"
        torch.testing.assert_close(gpu, cpu, atol=2 ** -6 * cpu.abs().max().item(), rtol=2 ** -6)


def test_attention_cuda_shaw_forward_and_gradients_match_cpu():
    """Shaw's key and value terms on CUDA tensors (the first GPU implementation of either) against the CPU,
    with a_k and a_v rounded to bf16 as the tensor cores read them; then every gradient (q, k, v, a_k, a_v)
    against the CPU's, the same bits on a second GPU run."""
    torch.manual_seed(11)
    q, k, v = (torch.randn(1, 150, 4, 64, dtype=torch.bfloat16) for _ in range(3))
    L = 40
    a_k, a_v = (torch.randn(2 * L + 1, 64).bfloat16().float() for _ in range(2))
    kwargs = dict(causal=False, encoding="shaw", shaw_max_distance=L)
    out_cpu = pt.attention(q, k, v, shaw_a_k=a_k, shaw_a_v=a_v, **kwargs)
    out_gpu = pt.attention(q.cuda(), k.cuda(), v.cuda(), shaw_a_k=a_k.cuda(), shaw_a_v=a_v.cuda(), **kwargs)
    u = 2 ** -8
    scale = v.float().abs().max().item() + a_v.abs().max().item()
    torch.testing.assert_close(out_gpu.cpu().float(), out_cpu.float(), atol=2 * u * scale, rtol=2 * u)
    results = []
    for device in ("cpu", "cuda", "cuda"):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v, a_k, a_v)]
        out = pt.attention(*leaves[:3], shaw_a_k=leaves[3], shaw_a_v=leaves[4], **kwargs)
        out.float().pow(2).sum().backward()
        results.append([t.grad.cpu().float() for t in leaves])
    for cpu, gpu, again in zip(*results):
        assert torch.equal(gpu, again), "a gradient differs between two runs"
        torch.testing.assert_close(gpu, cpu, atol=2 ** -6 * cpu.abs().max().item(), rtol=2 ** -6)


def test_attention_cuda_refuses_float32_by_name():
    q = torch.randn(1, 8, 2, 64, device="cuda")
    with pytest.raises(ValueError, match="bf16 or f16"):
        pt.attention(q, q, q)


def test_attention_cuda_matches_transformers_t5_and_llama_layers():
    """transformers' own attention modules (eager, bf16 on the GPU) against posenc.torch.attention on the same
    projections: T5's bucketed bias with its table's gradient, Llama's grouped-query attention with yarn RoPE.
    bf16 throughout: within a few bf16 roundings of the outputs' scale."""
    from transformers import LlamaConfig, T5Config
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
    from transformers.models.t5.modeling_t5 import T5Attention

    torch.manual_seed(7)
    tol = dict(atol=2 ** -5, rtol=2 ** -6)
    t5 = T5Attention(T5Config(d_model=256, d_kv=64, num_heads=4, relative_attention_num_buckets=32,
                              relative_attention_max_distance=128, dropout_rate=0.0),
                     has_relative_attention_bias=True).eval().cuda().to(torch.bfloat16)
    h = torch.randn(2, 70, 256, device="cuda", dtype=torch.bfloat16)
    expected = t5(h)[0]
    q, k, v = (w(h).view(2, 70, 4, 64) for w in (t5.q, t5.k, t5.v))
    out = pt.attention(q, k, v, encoding="t5", relative_table=t5.relative_attention_bias.weight.float(),
                       scale=1.0, max_distance=128, bidirectional=True)
    torch.testing.assert_close(t5.o(out.reshape(2, 70, 256)).float(), expected.float(), **tol)

    config = LlamaConfig(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                         max_position_embeddings=64, attn_implementation="eager",
                         rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                          "original_max_position_embeddings": 64, "rope_theta": 5000.0})
    attn = LlamaAttention(config, layer_idx=0).eval().cuda().to(torch.bfloat16)
    B, T = 2, 90
    h = torch.randn(B, T, 256, device="cuda", dtype=torch.bfloat16)
    positions = torch.arange(T, device="cuda")[None].repeat(B, 1)
    cos, sin = LlamaRotaryEmbedding(config=config).cuda()(h, positions)
    mask = torch.full((T, T), float("-inf"), device="cuda").triu(1)[None, None].to(torch.bfloat16)
    expected = attn(h, position_embeddings=(cos, sin), attention_mask=mask)[0]
    q = attn.q_proj(h).view(B, T, 4, 64)
    k, v = attn.k_proj(h).view(B, T, 2, 64), attn.v_proj(h).view(B, T, 2, 64)
    d = config.to_dict()
    out = pt.attention(q, k, v, causal=True, encoding="rope", rope_config=posenc.RopeConfig.from_hf(d))
    torch.testing.assert_close(attn.o_proj(out.reshape(B, T, 256)).float(), expected.float(), **tol)


def test_attention_cuda_head_dims_of_gemma_2_and_mla():
    """Head dims beside 64 and 128: transformers' Gemma 2 layer (head_dim 256, logit softcap 50,
    query_pre_attn_scalar, eager, bf16 on the GPU) against posenc.torch.attention on its projections; and
    MLA's heads (DeepSeek-V3: q / k 192 with RoPE interleaved on the last 64 dims, v 128) on the GPU against
    the CPU, forward and the gradients of q, k, v."""
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention, Gemma2RotaryEmbedding

    torch.manual_seed(10)
    config = Gemma2Config(hidden_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=256,
                          query_pre_attn_scalar=144, attn_logit_softcapping=50.0, max_position_embeddings=128,
                          attn_implementation="eager", layer_types=["full_attention"], num_hidden_layers=1)
    attn = Gemma2Attention(config, layer_idx=0).eval().cuda().to(torch.bfloat16)
    B, T = 2, 70
    h = torch.randn(B, T, 512, device="cuda", dtype=torch.bfloat16)
    positions = torch.arange(T, device="cuda")[None].repeat(B, 1)
    cos, sin = Gemma2RotaryEmbedding(config=config).cuda()(h, positions)
    mask = torch.full((T, T), float("-inf"), device="cuda").triu(1)[None, None].to(torch.bfloat16)
    expected = attn(h, position_embeddings=(cos, sin), attention_mask=mask)[0]
    q = attn.q_proj(h).view(B, T, 4, 256)
    k, v = attn.k_proj(h).view(B, T, 2, 256), attn.v_proj(h).view(B, T, 2, 256)
    out = pt.attention(q, k, v, causal=True, encoding="rope", rope_config=posenc.RopeConfig.from_hf(
        config.to_dict()), scale=144 ** -0.5, softcap=50.0)
    torch.testing.assert_close(attn.o_proj(out.reshape(B, T, 1024)).float(), expected.float(),
                               atol=2 ** -5, rtol=2 ** -6)

    q, k = torch.randn(1, 60, 4, 192, dtype=torch.bfloat16), torch.randn(1, 60, 4, 192, dtype=torch.bfloat16)
    v = torch.randn(1, 60, 4, 128, dtype=torch.bfloat16)
    mla = dict(causal=True, encoding="rope", rope_config=posenc.rope_config(64, base=10000.0,
                                                                          layout="interleaved"),
               rope_offset=128, scale=192 ** -0.5)
    results = []
    for device in ("cpu", "cuda"):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v)]
        out = pt.attention(*leaves, **mla)
        out.float().pow(2).sum().backward()
        results.append([out.detach().cpu().float()] + [t.grad.cpu().float() for t in leaves])
    for cpu, gpu in zip(*results):
        torch.testing.assert_close(gpu, cpu, atol=2 ** -6 * cpu.abs().max().item(), rtol=2 ** -6)


def test_kv_cache_cuda_decodes_as_the_cpu_cache():
    """posenc.torch.KVCache (bf16 on the GPU) against posenc.KVCache (bf16 on the CPU, numpy) on the same
    inputs: a prefill, then token-by-token steps with RoPE and ALiBi; within the GPU's rounding of P."""
    import ml_dtypes
    import numpy as np

    torch.manual_seed(8)
    rope = posenc.rope_config(64, base=500.0)
    gpu = pt.KVCache(2, 2, 64, rope=rope, dtype=torch.bfloat16)
    cpu = posenc.KVCache(2, 2, 64, rope=rope, dtype="bfloat16")
    for step in range(12):
        T = 30 if step == 0 else 1
        k, v = torch.randn(2, T, 2, 64, dtype=torch.bfloat16), torch.randn(2, T, 2, 64, dtype=torch.bfloat16)
        q = torch.randn(2, T, 8, 64, dtype=torch.bfloat16)
        as_np = lambda t: t.float().numpy().astype(ml_dtypes.bfloat16)  # noqa: E731
        cpu.append(as_np(k), as_np(v))
        gpu.append(k.cuda(), v.cuda())
        want = cpu.attend(as_np(q), causal=True, encoding="alibi").astype(np.float32)
        got = gpu.attend(q.cuda(), causal=True, encoding="alibi").float().cpu().numpy()
        bound = 2 ** -8 * (np.abs(v.float()).max().item() + np.abs(want)) + 2e-5 * (1 + np.abs(want))
        assert (np.abs(got - want) <= bound).all(), f"step {step}"
    assert gpu.size == cpu.size == 41


def test_kv_cache_cuda_context_shift_and_rerotation_as_the_cpu_cache():
    """A context shift (erase_front, shift_positions) and LongRoPE's re-rotation on posenc.torch.KVCache
    against posenc.KVCache doing the same on the same bf16 inputs: the attention of new queries over the
    shifted or re-rotated cache agrees within the GPU's rounding of P."""
    import ml_dtypes
    import numpy as np

    D = 64
    scaling = {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 32,
               "short_factor": [1.0 + 0.1 * j for j in range(D // 2)],
               "long_factor": [2.0 + 0.5 * j for j in range(D // 2)]}
    as_np = lambda t: t.float().numpy().astype(ml_dtypes.bfloat16)  # noqa: E731
    for rope, edits in (
            (posenc.rope_config(D, base=500.0, layout="interleaved"),
             (("shift_positions", 1000), ("erase_front", 7), ("shift_positions", -1007))),
            (posenc.rope_config(D, rope_scaling=scaling, max_position_embeddings=128),
             (("rerotate", 30, 100),))):
        torch.manual_seed(9)
        gpu = pt.KVCache(2, 2, D, rope=rope, dtype=torch.bfloat16)
        cpu = posenc.KVCache(2, 2, D, rope=rope, dtype="bfloat16")
        k, v = torch.randn(2, 30, 2, D, dtype=torch.bfloat16), torch.randn(2, 30, 2, D, dtype=torch.bfloat16)
        cpu.append(as_np(k), as_np(v))
        gpu.append(k.cuda(), v.cuda())
        for name, *args in edits:
            getattr(cpu, name)(*args)
            getattr(gpu, name)(*args)
        assert gpu.size == cpu.size
        q = torch.randn(2, 3, 8, D, dtype=torch.bfloat16)
        qpos = np.array([40, 41, 42])
        want = cpu.attend(as_np(q), q_positions=qpos, causal=True).astype(np.float32)
        got = gpu.attend(q.cuda(), q_positions=torch.tensor(qpos), causal=True).float().cpu().numpy()
        bound = 2 ** -8 * (np.abs(v.float()).max().item() + np.abs(want)) + 2e-5 * (1 + np.abs(want))
        assert (np.abs(got - want) <= bound).all(), edits
