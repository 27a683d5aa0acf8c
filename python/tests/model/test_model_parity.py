"""posenc.ModelPositions (a real model's per-layer plan from its config.json) against transformers
5.23's own code, built from the REAL configs in tests/data/hf_configs (SOURCES.md): each family's
config class reads the file, its rotary module (model.model.rotary_emb's class, per layer type
where the family has one) gives inv_freq and the attention factor, its apply_rotary_pos_emb the
applied rotation, and its attention modules the softmax scale, sliding window and sinks.

No weights: the rotary modules are built on the CPU from the full config (they hold only inv_freq);
the whole model is built on the meta device (shapes only, no memory), at its real size, for its
attention modules' attributes.

Where transformers differs from the authors' code, a test against the authors' formula, written
out here with its citation (DeepSeek-V3's yarn; Phi-3's longrope switch; Gemma 3's local base).
"""
import glob
import importlib
import json
import math
import os
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModel

import posenc
from hf_oracle import HF_CONFIGS, hf_frequencies

DATA = HF_CONFIGS
FILES = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(DATA, "*.json")))
# remote-code families (their code lives in the model's repository, not in transformers 5.23's
# CONFIG_MAPPING): planned from the authors' files and checked against them in test_model_remote.py.
REMOTE = {"chatglm", "qwen", "minicpmv", "internlm", "internlm2", "stablelm_epoch", "RefinedWeb", "minicpm",
          "baichuan"}
# families with a parity test of their own: deepseek_v4 (test_model_deepseek_v4.py: its rotary module keys
# its frequencies by rope label, main / compress, not by layer type).
REFUSED = {"deepseek_v4"}
# configs transformers 5 cannot build as written: the flat GLM-4.1V copy (Glm4vConfig reads text_config
# only; test_glm4v_flat_config_against_transformers_text_config compares it on its text_config form).
UNMODELED = {"glm4v"}
# attention without any positional encoding (Nemotron-H's layers: Mamba, MLP, MoE and NoPE attention)
NOPE = {"nemotron_h"}
ABSOLUTE = {"gpt2", "bert", "t5", "bloom", "mpt", "gpt_neo", "gpt_bigcode", "opt", "roberta", "distilbert",
            "mobilebert"}
# encoders with attention code of their own (test_encoder_real_configs_against_transformers)
ENCODERS = {"roformer", "albert", "mpnet"}
# encoder-decoders with absolute tables (test_encoder_decoder_real_configs_against_transformers)
SEQ2SEQ = {"whisper", "bart", "mbart", "blenderbot", "m2m_100", "marian", "pegasus"}


def load(name):
    with open(os.path.join(DATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


def kind(d):
    """model_type; for remote-code files saved without one (MiniCPM's), the type auto_map's class names."""
    return d.get("model_type") or d["auto_map"]["AutoConfig"].split(".")[-1].removesuffix("Config").lower()


# flat copies of wrapper configs (the text model's keys at the top level): transformers 5.23 reads text_config
# only, so the parity tests build it from those keys as text_config, the file's meaning, which posenc reads
# (with a warning, test_flat_copies_are_read_with_a_warning).
FLAT_COPIES = {"llama4__Llama-4-Scout-ktransformers-flattened"}
WRAPPER_KEYS = {"model_type", "architectures", "transformers_version", "boi_token_index", "eoi_token_index",
                "image_token_index", "vision_config", "torch_dtype"}


def plan(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", posenc.PositionWarning)
        return posenc.ModelPositions.from_hf(os.path.join(DATA, name + ".json"))


_HF = {}


def hf(name):
    """(config, text config, meta-device model) of transformers 5 for a real config file."""
    if name not in _HF:
        d = load(name)
        if kind(d) in REMOTE:
            pytest.skip(f"{d['model_type']}: remote code, not in transformers")
        if (d.get("rope_scaling") or {}).get("type") == "su":
            # Early Phi-3 releases: 5.23 cannot load them (standardize_rope_params does not know "su",
            # so original_max_position_embeddings never reaches the dict; Phi3Config renames "su" to
            # longrope after it). posenc reads them as longrope, as Phi-3's own code and transformers
            # 4.x: compared with 5.23 on the same config with the type renamed.
            with pytest.raises(KeyError, match="original_max_position_embeddings"):
                AutoConfig.for_model(**d)
            d = {**d, "rope_scaling": {**d["rope_scaling"], "type": "longrope"}}
        if kind(d) == "kimi_k2":  # remote DeepseekV3Config (auto_map): deepseek_v3, as Kimi_K25Config does
            d = {**d, "model_type": "deepseek_v3"}
        if name in FLAT_COPIES:
            d = {**{k: v for k, v in d.items() if k in WRAPPER_KEYS},
                 "text_config": {k: v for k, v in d.items() if k not in WRAPPER_KEYS}}
        try:
            config = AutoConfig.for_model(**d)
        except ValueError as exc:  # model_type unknown to transformers 5.23
            pytest.skip(f"{d['model_type']}: {exc}")
        config._attn_implementation = "eager"
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModel.from_config(config)
        _HF[name] = (config, config.get_text_config(), model)
    return _HF[name]


def text_rotary(model):
    """The text model's rotary module (on meta) and the family's modeling module."""
    for mod in model.modules():
        cls = type(mod).__name__
        if cls.endswith("RotaryEmbedding") and "Vision" not in cls:
            return mod, importlib.import_module(type(mod).__module__)
    return None, None


def cpu_rotary(meta_rotary):
    return type(meta_rotary)(config=meta_rotary.config)


# files transformers 5.23 cannot load, which posenc refuses too
# (test_files_transformers_cannot_load_are_refused)
CANNOT_LOAD = {"zaya__zaya1"}  # "rope_scaling": false replaces rope_parameters (PreTrainedConfig's setter)


def model_files(excluded=frozenset()):
    """The real configs of families with attention that posenc models (rope_files: with RoPE)."""
    return [name for name in FILES if name not in CANNOT_LOAD and
            kind(load(name)) not in REMOTE | ABSOLUTE | SEQ2SEQ | ENCODERS | REFUSED | UNMODELED | excluded]


@pytest.mark.parametrize("name", sorted(CANNOT_LOAD))
def test_files_transformers_cannot_load_are_refused(name):
    with pytest.raises(Exception):  # noqa: B017  (whichever error: transformers cannot load it)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            AutoConfig.for_model(**load(name))
    with pytest.raises(posenc.Error, match="is not supported"):
        plan(name)


def rope_files():
    return model_files(NOPE)


def seq_lens(m, layer):
    s = layer.rope.scaling
    original = s.original_max_position_embeddings or m.max_position_embeddings
    return sorted({1, original, 2 * original, m.max_position_embeddings})


# gptj has no rotary module but a fixed sin/cos table (create_sinusoidal_positions), checked by
# test_gptj_sincos_table_and_rotation.
@pytest.mark.parametrize("name", [name for name in rope_files() if kind(load(name)) != "gptj"])
def test_inv_freq_and_attention_factor_per_layer(name):
    m = plan(name)
    config, text, model = hf(name)
    meta_rotary, _ = text_rotary(model)
    assert meta_rotary is not None, f"{name}: no rotary module in transformers' model"
    rotary = cpu_rotary(meta_rotary)
    rope_layers = [layer for layer in m.layers if layer.position == "rope"]
    assert rope_layers, name
    checked = set()
    for layer in rope_layers:
        key = (layer.layer_type, layer.rope.base, layer.rope.scaling.rope_type)
        if key in checked:  # layers of one type share the rotary module's frequencies
            continue
        checked.add(key)
        for seq_len in seq_lens(m, layer):
            want, want_factor = hf_frequencies(rotary, layer.layer_type, seq_len,
                                               layer.rope.num_position_streams)
            got, got_factor = layer.inv_freq(seq_len)
            assert got.shape == tuple(want.shape), (name, layer.layer, seq_len)
            np.testing.assert_allclose(got, want.double().numpy(), rtol=2e-6,
                                       err_msg=f"{name} layer {layer.layer} seq_len {seq_len}")
            assert got_factor == pytest.approx(float(want_factor), rel=1e-6), (name, layer.layer, seq_len)


def hf_attention_modules(model):
    out = {}
    for name, mod in model.named_modules():
        cls = type(mod).__name__
        # gptj divides by scale_attn; ModernBertAttention passes scaling=self.head_dim**-0.5 (its forward)
        scaled = hasattr(mod, "scaling") or hasattr(mod, "scale_attn") or cls == "ModernBertAttention"
        if cls.endswith("Attention") and "Vision" not in cls and scaled and hasattr(mod, "layer_idx"):
            index = mod.layer_idx
            if index is None and ".layer." in name:  # EsmSelfAttention: built without its index
                index = int(name.split(".layer.")[1].split(".")[0])
            out.setdefault(index, mod)
    return out


def hf_scaling(attn):
    if type(attn).__name__ == "ModernBertAttention":
        return attn.head_dim ** -0.5
    if type(attn).__name__ == "EsmSelfAttention":  # q scaled before RoPE, the kernel by 1.0 (its forward)
        assert attn.scaling == 1.0
        return attn.attention_head_size ** -0.5
    return attn.scaling if hasattr(attn, "scaling") else 1.0 / attn.scale_attn  # modeling_gptj.py _attn


def hf_window(attn, text, i):
    if hasattr(attn, "is_sliding"):  # exaone4
        return (attn.sliding_window or 0) if attn.is_sliding else 0
    if hasattr(attn, "sliding_window"):
        return attn.sliding_window or 0
    layer_types = getattr(text, "layer_types", None)
    if layer_types is not None:
        return (text.sliding_window or 0) if layer_types[i] == "sliding_attention" else 0
    return getattr(text, "sliding_window", None) or 0


@pytest.mark.parametrize("name", model_files())
def test_attention_scale_window_sinks_layer_types(name):
    m = plan(name)
    config, text, model = hf(name)
    attns = hf_attention_modules(model)
    assert m.num_layers == text.num_hidden_layers
    layer_types = getattr(text, "layer_types", None)
    for layer in m.layers:
        if layer_types is not None:
            assert layer.layer_type == layer_types[layer.layer], (name, layer.layer)
        attn = attns.get(layer.layer)
        if attn is None:  # linear-attention / convolution layers (qwen3_next, lfm2): no softmax attention
            assert layer.position == "none", (name, layer.layer, layer.layer_type)
            assert not layer.softmax_attention, (name, layer.layer, layer.layer_type)
            continue
        assert layer.softmax_attention, (name, layer.layer, layer.layer_type)
        a = layer.attention
        assert a.softmax_scale == pytest.approx(hf_scaling(attn), rel=1e-12), (name, layer.layer)
        assert a.window == hf_window(attn, text, layer.layer), (name, layer.layer)
        assert a.sinks == (getattr(attn, "sinks", None) is not None), (name, layer.layer)  # (mimo: None)
        # cross-attention (mllama) sees the vision tokens without a causal mask
        causal = False if "CrossAttention" in type(attn).__name__ else getattr(attn, "is_causal", True)
        if config.model_type == "paligemma":  # is_causal False (use_bidirectional_attention, set by
            # PaliGemmaConfig), but PaliGemmaModel hands every layer create_causal_mask with the prefix
            # bidirectional (modeling_paligemma.py PaliGemmaModel.forward): causal, the prefix reported in a
            # warning
            assert not causal and any("prefix-LM" in w for w in m.warnings), name
            causal = True
        assert a.causal == causal, (name, layer.layer)


def test_llama4_nope_layers_chunks_and_temperature():
    for name in [f for f in FILES if f.startswith("llama4__")]:
        m = plan(name)
        _, text, _ = hf(name)
        for layer in m.layers:
            uses_rope = bool(text.no_rope_layers[layer.layer])  # 1 = RoPE (modeling_llama4.py)
            assert (layer.position == "rope") == uses_rope, (name, layer.layer)
            assert layer.attention.chunk == (text.attention_chunk_size if uses_rope else 0)
            t = layer.attention.temperature
            if not uses_rope and text.attn_temperature_tuning:
                assert t.kind == "llama4" and t.scale == text.attn_scale and t.floor_scale == text.floor_scale
                p = 123456
                want = 1 + text.attn_scale * math.log(1 + math.floor((p + 1) / text.floor_scale))
                assert t.factor(p) == pytest.approx(want)


# ---------------------------------------------------------------- the applied rotation

ROTATION = ["llama3__Llama-3.1-8B-Instruct", "gemma3__gemma-3-4b-it", "deepseek-v3__DeepSeek-V3",
            "cohere__c4ai-command-r-v01", "gpt-oss__gpt-oss-120b", "qwen2-vl__Qwen2-VL-2B-Instruct-AWQ",
            "qwen2.5-vl__Qwen2.5-VL-7B-Instruct", "glm4-moe__GLM-4.5", "phi2__phi-2",
            "olmo3__Olmo-3.1-32B-Instruct", "exaone4__EXAONE-4.0-32B",
            "mistral3__Devstral-Small-2-24B-Instruct", "gpt-neox__gpt-neox-20b",
            "phi3__Phi-3-mini-128k-instruct", "deepseek-v2__DeepSeek-V2-Lite", "minicpm3__MiniCPM3-4B",
            "gemma__codegemma-7b-it", "qwen3-vl__Qwen3-VL-Embedding-8B", "qwen1.5__CodeQwen1.5-7B",
            "gemma4__gemma-4-E2B-it", "gemma4__gemma-4-31B-it", "starcoder2__starcoder2-7b",
            "phi3__Phi-3-medium-128k-instruct-su", "laguna__Laguna-XS.2-FP8", "esm__esm2_t6_8M_UR50D",
            "qwen3_moe__Qwen3-Coder-30B-A3B-Instruct", "paligemma__paligemma-3b-pt-224"]


def layers_to_rotate(m):
    """One layer per distinct RoPE setup (gemma3: local and global)."""
    seen, out = set(), []
    for layer in m.layers:
        if layer.position == "rope" and layer.layer_type not in seen:
            seen.add(layer.layer_type)
            out.append(layer)
    return out


@pytest.mark.parametrize("name", ROTATION)
def test_applied_rotation(name):
    m = plan(name)
    config, text, model = hf(name)
    meta_rotary, family = text_rotary(model)
    rotary = cpu_rotary(meta_rotary)
    torch.manual_seed(0)
    for layer in layers_to_rotate(m):
        rc = layer.rope
        lo, hi = layer.rotary_dims
        D = rc.head_dim  # the RopeConfig's head: the rotated range and the pass-through dims after it
        B, H, T = 2, 3, 24
        q, k = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
        pos = torch.sort(torch.randint(0, min(m.max_position_embeddings, 8192), (B, T)), dim=1).values
        seq_len = int(pos.max()) + 1
        if rc.num_position_streams == 3:  # mrope: temporal, height, width streams differ
            pos3 = torch.stack([pos, pos // 2, pos // 3])
            hf_pos, pe_pos = pos3, pos3.numpy()
        else:
            hf_pos, pe_pos = pos, pos.numpy()
        x = torch.zeros(1, 1, 8)
        per_type = isinstance(getattr(rotary, "rope_type", None), dict)
        R = rc.effective_rotary_dim
        if text.model_type == "deepseek_v2":
            # modeling_deepseek_v2.py: the rotary returns freqs_cis (complex, R / 2), apply_rotary_emb
            # multiplies the (2j, 2j + 1) pairs as complex numbers and keeps them interleaved
            freqs_cis = rotary(x, hf_pos)
            assert freqs_cis.shape[-1] == R // 2, (name, layer.layer)
            q_hf, k_hf = family.apply_rotary_emb(q, k, freqs_cis)
            q_pe = posenc.rope(q.transpose(1, 2).numpy(), pe_pos, config=rc, seq_len=seq_len)
            k_pe = posenc.rope(k.transpose(1, 2).numpy(), pe_pos, config=rc, seq_len=seq_len)
            torch.testing.assert_close(torch.from_numpy(q_pe).transpose(1, 2), q_hf, atol=2e-3, rtol=1e-4)
            torch.testing.assert_close(torch.from_numpy(k_pe).transpose(1, 2), k_hf, atol=2e-3, rtol=1e-4)
            continue
        per_type = per_type and bool(rotary.rope_type)  # (esm: an empty dict, one set of buffers)
        cos, sin = rotary(x, hf_pos, layer.layer_type) if per_type else rotary(x, hf_pos)
        # gpt_oss's rotary returns cos/sin of R / 2 (its _apply_rotary_emb splits halves), others of R
        assert cos.shape[-1] in (R, R // 2), (name, layer.layer)
        interleave_v3 = text.model_type == "deepseek_v3" and getattr(text, "rope_interleave", True)
        apply = family.apply_rotary_pos_emb_interleave if interleave_v3 else family.apply_rotary_pos_emb
        if text.model_type == "gemma4_text":  # modeling_gemma4.py: apply_rotary_pos_emb(x, cos, sin), per x
            q_hf, k_hf = apply(q, cos, sin), apply(k, cos, sin)
        elif text.model_type in ("glm4_moe", "phi"):  # partial rotary: the models pass the first R dims
            q_hf, k_hf = apply(q[..., :R], k[..., :R], cos, sin)
            q_hf, k_hf = torch.cat([q_hf, q[..., R:]], -1), torch.cat([k_hf, k[..., R:]], -1)
        else:
            q_hf, k_hf = apply(q, k, cos, sin)
        q_pe = posenc.rope(q.transpose(1, 2).numpy(), pe_pos, config=rc, seq_len=seq_len)
        k_pe = posenc.rope(k.transpose(1, 2).numpy(), pe_pos, config=rc, seq_len=seq_len)
        q_pe, k_pe = torch.from_numpy(q_pe).transpose(1, 2), torch.from_numpy(k_pe).transpose(1, 2)
        if interleave_v3:
            # V3 writes the rotated pairs back de-interleaved, [x_even' | x_odd'] (include/posenc/model.h):
            # the q.k products agree with posenc's interleaved layout as they are ...
            torch.testing.assert_close(q_pe @ k_pe.transpose(-1, -2), q_hf @ k_hf.transpose(-1, -2),
                                       atol=2e-3, rtol=1e-4)
            # ... and the tensors after that permutation.
            q_pe = torch.cat([q_pe[..., 0::2], q_pe[..., 1::2]], -1)
            k_pe = torch.cat([k_pe[..., 0::2], k_pe[..., 1::2]], -1)
        # HF: fp32 angles position * inv_freq (errors ~ position * 2^-24 rad at position 8192)
        torch.testing.assert_close(q_pe, q_hf, atol=2e-3, rtol=1e-4, msg=f"{name} layer {layer.layer}")
        torch.testing.assert_close(k_pe, k_hf, atol=2e-3, rtol=1e-4, msg=f"{name} layer {layer.layer}")
        assert lo + R <= hi or lo + rc.effective_rotary_dim == hi


def test_gptj_sincos_table_and_rotation():
    """GPT-J (modeling_gptj.py): create_sinusoidal_positions(n_positions, rotary_dim) is the fp32
    table [sin | cos] of position * 10000^(-2i/64), gathered by position; apply_rotary_pos_emb with
    rotate_every_two rotates the (2j, 2j + 1) pairs of the first rotary_dim dims of (B, S, H, D)."""
    from transformers.models.gptj import modeling_gptj as gptj

    name = "gpt-j__gpt-j-6b"
    m = plan(name)
    _, text, model = hf(name)
    layer = m.layers[0]
    rc = layer.rope
    R = text.rotary_dim
    assert layer.rotary_dims == (0, R) and rc.layout == "interleaved" and rc.effective_rotary_dim == R
    table = gptj.create_sinusoidal_positions(text.n_positions, R).double().numpy()
    inv_freq, factor = layer.inv_freq()
    assert factor == 1.0
    angles = np.arange(text.n_positions)[:, None] * inv_freq[None, :]
    # fp32 angles in the table: error ~ position * 2^-24 rad at position 2047
    np.testing.assert_allclose(table, np.concatenate([np.sin(angles), np.cos(angles)], 1), atol=2e-4, rtol=0)
    torch.manual_seed(0)
    B, T, H, D = 2, 24, 3, text.n_embd // text.n_head
    q = torch.randn(B, T, H, D)
    pos = torch.sort(torch.randint(0, text.n_positions, (B, T)), dim=1).values
    sincos = torch.from_numpy(table).float()[pos]  # (B, T, 2 * R / 2)
    sin, cos = torch.split(sincos, R // 2, dim=-1)
    q_hf = torch.cat([gptj.apply_rotary_pos_emb(q[..., :R], sin, cos), q[..., R:]], -1)
    q_pe = torch.from_numpy(posenc.rope(q.numpy(), pos.numpy(), config=rc))
    torch.testing.assert_close(q_pe, q_hf, atol=2e-3, rtol=1e-4)


def test_mpt_alibi_slopes_and_scale():
    """MPT (modeling_mpt.py build_mpt_alibi_tensor(num_heads, max_seq_len, alibi_bias_max=8): the
    bias slope_h * (j - (L - 1)), added after softmax_scale = 1/sqrt(d_model / n_heads); the config's
    attn_config.alibi_bias_max is not passed). posenc's slopes for 32 heads equal it (MPT's
    gen_slopes at alibi_bias_max 8 = BLOOM's rule)."""
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    name = "mpt__mpt-7b-instruct"
    m = plan(name)
    _, text, model = hf(name)
    assert {layer.position for layer in m.layers} == {"alibi"}
    assert m.num_layers == text.n_layers and m.max_position_embeddings == text.max_seq_len
    scale = 1 / math.sqrt(text.d_model / text.n_heads)
    assert all(layer.attention.softmax_scale == pytest.approx(scale, rel=1e-12) for layer in m.layers)
    bias = build_mpt_alibi_tensor(text.n_heads, 3).double().numpy()  # (H, 1, 3): slope * [-2, -1, 0]
    np.testing.assert_allclose(posenc.alibi_slopes(text.n_heads), -bias[:, 0, 1], rtol=1e-6)


def test_deepseek_v3_rotates_the_last_64_dims_of_192():
    m = plan("deepseek-v3__DeepSeek-V3")
    d = load("deepseek-v3__DeepSeek-V3")
    for layer in m.layers:
        assert layer.rotary_dims == (d["qk_nope_head_dim"], d["qk_nope_head_dim"] + d["qk_rope_head_dim"])
        assert layer.qk_head_dim == 192 and layer.rope.head_dim == 64 and layer.rope.layout == "interleaved"


# ---------------------------------------------------------------- the authors' formulas

def test_deepseek_v3_yarn_and_softmax_scale_against_the_authors_code():
    """deepseek-ai/DeepSeek-V3 inference/model.py (commit 1ea5a1a7): precompute_freqs_cis and
    MLA.__init__, written out. The authors apply yarn and the mscale^2 softmax factor only when the
    run's max_seq_len > original_seq_len (4096; ModelArgs default max_seq_len 16384), with
    mscale = 0.1 * mscale * ln(factor) + 1 and cos/sin unscaled; transformers 5 always applies
    them (DeepseekV3Attention: yarn_apply_mscale with mscale_all_dim; the rotary's attention factor
    get_mscale(f, mscale) / get_mscale(f, mscale_all_dim) = 1 for this config). posenc follows
    transformers; the two agree whenever the authors' run is longer than 4096 tokens."""
    d = load("deepseek-v3__DeepSeek-V3")
    s = d["rope_scaling"]
    dim, base, factor = d["qk_rope_head_dim"], d["rope_theta"], s["factor"]
    beta_fast, beta_slow, orig = s["beta_fast"], s["beta_slow"], s["original_max_position_embeddings"]

    def find_correction_dim(num_rotations):
        return dim * math.log(orig / (num_rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(find_correction_dim(beta_fast)), 0)
    high = min(math.ceil(find_correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    smooth = 1 - ramp
    freqs = freqs / factor * (1 - smooth) + freqs * smooth
    qk_head_dim = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    mscale = 0.1 * s["mscale_all_dim"] * math.log(factor) + 1.0  # ModelArgs.mscale = the config's (1.0)
    softmax_scale = qk_head_dim ** -0.5 * mscale * mscale

    layer = plan("deepseek-v3__DeepSeek-V3").layers[0]
    got, attention_factor = layer.inv_freq()
    np.testing.assert_allclose(got, freqs.double().numpy(), rtol=2e-6)
    assert attention_factor == 1.0  # the authors' freqs_cis = polar(1, angle)
    assert layer.attention.softmax_scale == pytest.approx(softmax_scale, rel=1e-12)


def test_gemma3_local_base_against_the_authors_code():
    """google-deepmind/gemma: gemma/gm/nn/_config.py (the Gemma 3 4B/12B/27B presets:
    local_base_frequency=10_000, global_base_frequency=1_000_000, global_scale_factor=8.0,
    GEMMA3_ATTENTION_PATTERN = five local sliding layers, then one global) and
    gemma/gm/nn/_modules.py Attention (rope_base_frequency / rope_scale_factor per layer type; the
    angle is position / base^(2i/D) / scale_factor, i.e. linear scaling on the global layers only).
    transformers 5 reads rope_local_base_freq (default 10000) for the sliding layers and the legacy
    rope_scaling (linear 8) for the full-attention layers only: it agrees with the authors here."""
    for name in ("gemma3__gemma-3-4b-it", "gemma3__gemma-3-27b-it"):
        m = plan(name)
        for layer in m.layers:
            rc = layer.rope
            D = rc.head_dim
            j = np.arange(0, D, 2) / D
            if layer.layer_type == "sliding_attention":
                want = 1.0 / 10_000.0 ** j
            else:
                want = 1.0 / 1_000_000.0 ** j / 8.0
            np.testing.assert_allclose(layer.inv_freq()[0], want, rtol=1e-6,
                                       err_msg=f"{name} layer {layer.layer}")
            # pattern: every 6th layer global (layer i sliding iff (i + 1) % 6 != 0)
            assert (layer.layer_type == "sliding_attention") == ((layer.layer + 1) % 6 != 0)


def test_phi3_longrope_switch_with_minicpm_v4_real_longrope_config():
    """A real longrope config (openbmb/MiniCPM-V-4: remote code, MiniCPM's LongRoPE) through
    transformers 5's Phi-3 classes, and the switch of Microsoft's Phi-3 reference
    (microsoft/Phi-3-mini-128k-instruct modeling_phi3.py Phi3LongRoPEScaledRotaryEmbedding.forward:
    seq_len = max(position_ids) + 1; long factors iff seq_len > original_max_position_embeddings;
    scaling_factor = sqrt(1 + ln(max_position_embeddings / original) / ln(original)), 1 if the
    ratio <= 1). transformers 5 switches the same way per forward call; posenc by seq_len.
    MiniCPM-V-4's original (32786) exceeds max_position_embeddings (32768): the short factors at
    every length and an attention factor of 1."""
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    d = load("minicpmv__MiniCPM-V-4")
    s = d["rope_scaling"]
    head_dim = d["head_dim"]
    config = Phi3Config(hidden_size=head_dim * d["num_attention_heads"],
                        num_attention_heads=d["num_attention_heads"],
                        num_key_value_heads=d["num_key_value_heads"],
                        max_position_embeddings=d["max_position_embeddings"],
                        original_max_position_embeddings=s["original_max_position_embeddings"],
                        rope_parameters={"rope_type": "longrope", "short_factor": s["short_factor"],
                                         "long_factor": s["long_factor"], "rope_theta": d["rope_theta"]})
    rotary = Phi3RotaryEmbedding(config=config)
    rc = posenc.RopeConfig.from_hf(d)
    orig, maxpos = s["original_max_position_embeddings"], d["max_position_embeddings"]
    base = 1.0 / d["rope_theta"] ** (np.arange(0, head_dim, 2) / head_dim)
    ratio = maxpos / orig
    ref_factor = 1.0 if ratio <= 1.0 else math.sqrt(1 + math.log(ratio) / math.log(orig))
    for seq_len in (1, 4096, maxpos, 2 * orig):
        rotary(torch.zeros(1, 1, 8), torch.tensor([[seq_len - 1]]))
        got, factor = posenc.rope_inv_freq(config=rc, seq_len=seq_len)
        np.testing.assert_allclose(got, rotary.inv_freq.double().numpy(), rtol=2e-6)
        assert factor == pytest.approx(rotary.attention_scaling, rel=1e-6)
        ext = np.asarray(s["long_factor"] if seq_len > orig else s["short_factor"])
        np.testing.assert_allclose(got, base / ext, rtol=2e-6)  # Microsoft's reference
        assert factor == pytest.approx(ref_factor)


@pytest.mark.parametrize("name", ["phi3__Phi-3-mini-128k-instruct", "phi3__Phi-3-medium-128k-instruct-su"])
def test_longrope_without_factor_shows_max_over_original(name):
    """A longrope dict without factor: transformers 5 takes factor = max_position_embeddings / original
    (_compute_longrope_parameters), from which the attention factor comes; the plan shows that factor."""
    m = plan(name)
    s = m.layers[0].rope.scaling
    assert "factor" not in (load(name).get("rope_scaling") or {})
    assert s.factor == m.max_position_embeddings / s.original_max_position_embeddings == 32
    _, factor = m.layers[0].inv_freq(m.max_position_embeddings)
    assert factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(s.original_max_position_embeddings)))


def test_phimoe_longrope_mscale_against_transformers_and_the_authors_code():
    """Phi-3.5-MoE's RoPE (model_type phimoe): longrope whose cos/sin are multiplied by
    short_mscale up to the original context and long_mscale past it (both 1.243163121016122 in the
    released config). The authors' rule (transformers 4.46 modeling_phimoe.py, contributed with the
    model: PhimoeRotaryEmbedding.forward passes seq_len = max(position_ids) + 1 to the longrope init,
    which takes long_factor iff seq_len > original_max_position_embeddings; vLLM's
    Phi3LongRoPEScaledRotaryEmbedding, which serves phimoe, the same): inv_freq = 1 / (factor_i *
    base^(2i/d)). transformers 5.23's forward calls the init without seq_len: the short factors at
    every length (docs/conventions.md). posenc follows the authors; both agree up to the original
    context. (Shrunk head and contexts; the factor lists are invented, 1 / 16 of the real length.)"""
    from transformers import PhimoeConfig
    from transformers.models.phimoe.modeling_phimoe import PhimoeRotaryEmbedding

    head_dim, orig, maxpos, mscale = 8, 64, 2048, 1.243163121016122
    short, long = [1.0, 1.04, 1.05, 1.06], [1.02, 3.5, 11.0, 31.0]
    d = {"model_type": "phimoe", "hidden_size": 4 * head_dim, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": maxpos,
         "rope_theta": 1e4,
         "rope_scaling": {"type": "longrope", "short_factor": short, "long_factor": long,
                          "short_mscale": mscale, "long_mscale": mscale,
                          "original_max_position_embeddings": orig}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = PhimoeConfig(**{k: v for k, v in d.items() if k != "model_type"})
    rotary = PhimoeRotaryEmbedding(config=config)
    m = posenc.ModelPositions.from_hf(d)
    rope = m.layers[0].rope
    base = 1.0 / 1e4 ** (np.arange(0, head_dim, 2) / head_dim)
    for seq_len in (1, orig, orig + 1, maxpos):
        got, factor = posenc.rope_inv_freq(config=rope, seq_len=seq_len)
        pos = torch.tensor([[seq_len - 1]])
        cos, sin = rotary(torch.zeros(1, 1, head_dim), pos)
        hf_angle = torch.atan2(sin, cos)[0, 0, :head_dim // 2].double().numpy()
        assert factor == pytest.approx(mscale)
        assert float(torch.hypot(cos, sin).max()) == pytest.approx(mscale, rel=1e-6)
        authors = base / np.asarray(long if seq_len > orig else short)
        np.testing.assert_allclose(got, authors, rtol=2e-6)
        wrapped = np.angle(np.exp(1j * (seq_len - 1) * got))
        if seq_len <= orig:  # transformers 5.23 agrees with the authors (and posenc)
            np.testing.assert_allclose(hf_angle, wrapped, atol=2e-4)
        else:  # 5.23: short factors past the original context
            np.testing.assert_allclose(hf_angle,
                                       np.angle(np.exp(1j * (seq_len - 1) * base / np.asarray(short))),
                                       atol=2e-4)
            assert not np.allclose(hf_angle, wrapped, atol=1e-2)


# ---------------------------------------------------------------- absolute families, refusals, API

@pytest.mark.parametrize("name,position", [("gpt2__gpt2-large", "learned"),
                                           ("bert__bert-base-uncased-finetuned-seqcls", "learned"),
                                           ("t5__t5-small", "t5"), ("t5__flan-t5-base", "t5"),
                                           ("gpt-bigcode__starcoderbase-7b", "learned"),
                                           ("gpt-neo__gpt-neo-125M", "learned"), ("opt__opt-125m", "learned"),
                                           ("opt__opt-350m", "learned"), ("roberta__roberta-base", "learned"),
                                           ("distilbert__distilbert-base-uncased-finetuned-sst-2-english",
                                            "learned"),
                                           ("distilbert__distilbert-base-uncased-finetune", "learned"),
                                           ("mobilebert__mobilebert-uncased-finetune-ner", "learned"),
                                           ("mobilebert__mobilebert-uncased-finetuned-seqcls", "learned")])
def test_absolute_and_t5_families(name, position):
    m = plan(name)
    config, text, model = hf(name)
    assert {layer.position for layer in m.layers} == {position}
    if position == "learned":
        text_max = getattr(text, "max_position_embeddings", getattr(text, "n_positions", None))
        # RoBERTa's 514 rows hold 512 positions (rows 0 and 1: none, the padding row)
        offset = m.learned_position_offset if name.startswith("roberta") else 0
        assert m.max_position_embeddings == text_max - offset
        table = next(mod for n, mod in model.named_modules()
                     if n.endswith(("wpe", "position_embeddings", "embed_positions")))
        # OPT: OPTLearnedPositionalEmbedding has max_position_embeddings + 2 rows, read at position + 2
        assert table.num_embeddings == m.max_position_embeddings + m.learned_position_offset
        # RoBERTa: padding_idx = pad_token_id; position 0 reads row pad + 1
        # (create_position_ids_from_input_ids)
        padding = getattr(table, "padding_idx", None)
        assert getattr(table, "offset", 0 if padding is None else padding + 1) == m.learned_position_offset
    else:
        assert m.t5_num_buckets == text.relative_attention_num_buckets
        assert m.t5_max_distance == text.relative_attention_max_distance
    if position == "t5":  # encoder layers, then decoder layers (bidirectional, then causal)
        assert m.num_layers == text.num_layers + text.num_decoder_layers
        causal = [False] * text.num_layers + [True] * text.num_decoder_layers
        assert [layer.attention.causal for layer in m.layers] == causal
        assert {layer.attention.softmax_scale for layer in m.layers} == {1.0}  # T5Attention: no scaling
    else:
        assert m.num_layers == text.num_hidden_layers
    if name.startswith("distilbert__"):  # modeling_distilbert.py: is_causal False, scaling head_dim^-0.5
        assert not any(layer.attention.causal for layer in m.layers)
        assert {layer.attention.softmax_scale for layer in m.layers} == {(text.dim // text.n_heads) ** -0.5}
    if name.startswith("mobilebert__"):  # heads of true_hidden_size, the 128-wide bottleneck
        # (MobileBertSelfAttention.__init__)
        attns = [mod for mod in model.modules() if type(mod).__name__ == "MobileBertSelfAttention"]
        assert len(attns) == m.num_layers and text.true_hidden_size == text.intra_bottleneck_size == 128
        for layer, attn in zip(m.layers, attns):
            assert layer.qk_head_dim == layer.v_head_dim == attn.attention_head_size == 32, \
                (name, layer.layer)
            assert layer.attention.softmax_scale == pytest.approx(attn.scaling, rel=1e-12), \
                (name, layer.layer)
            assert layer.attention.causal == attn.is_causal == False, (name, layer.layer)  # noqa: E712
    if name.startswith("opt__"):  # the query is scaled by head_dim^-0.5 before the kernel (modeling_opt.py)
        head_dim = text.hidden_size // text.num_attention_heads
        assert {layer.attention.softmax_scale for layer in m.layers} == {head_dim ** -0.5}
        assert all(layer.attention.causal for layer in m.layers)


@pytest.mark.parametrize("name", [n for n in FILES if kind(load(n)) in SEQ2SEQ])
def test_encoder_decoder_real_configs_against_transformers(name):
    """Each real encoder-decoder config with its stacks cut to 2 layers (vocabulary 256, token ids
    below it except M2M100's pad_token_id, whose row offset it is; d_model, heads, tables as the file
    has them) against its transformers model (family_harness.check_seq2seq: scale and mask per
    layer, the rows each stack's position module adds); the cut plan is the file's plan's first two
    encoder and first two decoder layers."""
    from family_harness import check_seq2seq, seq2seq_inputs
    d = load(name)
    small = {k: v for k, v in d.items()  # (whisper-large-v3's re-save: dtype float16; fp32 here)
             if k not in ("num_hidden_layers", "forced_decoder_ids", "dtype", "torch_dtype")}
    small.update(encoder_layers=2, decoder_layers=2, vocab_size=256)
    if "decoder_vocab_size" in d:
        small["decoder_vocab_size"] = 256
    for k, v in d.items():
        if k.endswith("_token_id") and isinstance(v, int) and v >= 256:
            small[k] = 3
    full, m = plan(name), posenc.ModelPositions.from_hf(small, warn=False)
    enc = sum(layer.layer_type == "encoder" for layer in full.layers)
    keep = [0, 1, enc, enc + 1]
    def fields(layer):
        a = layer.attention
        return (layer.layer_type, layer.position, layer.qk_head_dim, a.causal, a.window, a.softmax_scale)
    assert [fields(full.layers[i]) for i in keep] == [fields(layer) for layer in m.layers]
    for field in ("max_position_embeddings", "encoder_max_position_embeddings", "learned_position_offset",
                  "sinusoidal"):
        assert getattr(full, field) == getattr(m, field), field
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(**small)
        config._attn_implementation = "eager"
        torch.manual_seed(0)
        model = AutoModel.from_config(config).eval()
    check_seq2seq(d["model_type"], model, m, seq2seq_inputs(config))


@pytest.mark.parametrize("decoder", [False, True])
@pytest.mark.parametrize("name", [n for n in FILES if kind(load(n)) in ENCODERS])
def test_encoder_real_configs_against_transformers(name, decoder):
    """RoFormer, ALBERT and MPNet real configs cut to 2 layers (vocabulary 256) against their transformers
    models (encoder_checks.py: per attention call the mask, scale, rotation or bucket bias, the learned
    table), and once more with is_decoder (a causal mask for RoFormer; ALBERT and MPNet stay
    bidirectional); the cut plan is the file's plan's first two layers."""
    from encoder_checks import ENCODER_CHECKS
    d = load(name)
    small = {**d, "num_hidden_layers": 2, "vocab_size": 256, "is_decoder": decoder}
    full, m = plan(name), posenc.ModelPositions.from_hf(small, warn=False)
    if not decoder:
        head = [repr(layer) for layer in full.layers[:2 * (m.num_layers // 2)]][:2]
        assert head == [repr(layer) for layer in m.layers][:2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(**small)
        config._attn_implementation = "eager"
        torch.manual_seed(0)
        model = AutoModel.from_config(config).eval()
    ENCODER_CHECKS[d["model_type"]](model, m, f"{name} (is_decoder {decoder})")
    assert any(layer.attention.causal for layer in m.layers) == (decoder and d["model_type"] == "roformer")


@pytest.mark.parametrize("decoder", [False, True])
@pytest.mark.parametrize("name", [n for n in FILES if kind(load(n)) == "mobilebert"])
def test_mobilebert_real_configs_against_transformers(name, decoder):
    """The real MobileBERT configs cut to 2 layers (vocabulary 256) run in transformers: per layer the q and
    k heads its attention function receives, the scale, the mask (bidirectional, is_decoder or not) and
    the learned table (family_harness.check_mobilebert); the cut plan is the file's first two layers."""
    from family_harness import check_mobilebert
    d = load(name)
    small = {**d, "num_hidden_layers": 2, "vocab_size": 256, "is_decoder": decoder}
    full, m = plan(name), posenc.ModelPositions.from_hf(small, warn=False)
    assert [repr(layer) for layer in full.layers[:2]] == [repr(layer) for layer in m.layers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(**small)
    check_mobilebert(config, f"{name} (is_decoder {decoder})")


def test_esm_learned_positions_against_transformers():
    """ESM's "absolute" form (ESM-1b: pad_token_id 1): position p reads row p + 2 of the table
    (create_position_ids_from_input_ids), 1026 rows hold 1024 positions; the ESM-2 config with its
    position_embedding_type switched, cut to 2 layers."""
    d = {**load("esm__esm2_t6_8M_UR50D"), "position_embedding_type": "absolute", "num_hidden_layers": 2}
    m = posenc.ModelPositions.from_hf(d, warn=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(**d)
        torch.manual_seed(0)
        model = AutoModel.from_config(config).eval()
    table = model.embeddings.position_embeddings
    assert {layer.position for layer in m.layers} == {"learned"}
    assert table.num_embeddings == m.max_position_embeddings + m.learned_position_offset
    assert table.padding_idx + 1 == m.learned_position_offset
    ids = torch.tensor([[5, 6, 7, 8]])  # no padding: rows 2, 3, 4, 5
    from transformers.models.esm.modeling_esm import create_position_ids_from_input_ids
    assert create_position_ids_from_input_ids(ids, config.pad_token_id).tolist() == \
        [[p + m.learned_position_offset for p in range(4)]]
    assert model.encoder.layer[0].attention.self.position_embedding_type == "absolute"
    assert not any(layer.attention.causal for layer in m.layers)


def test_bloom_alibi_slopes_and_scale():
    """BLOOM (modeling_bloom.py build_alibi_tensor; BloomAttention.inv_norm_factor = head_dim^-0.5)."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    m = plan("bloom__bloom-3b")
    config, text, model = hf("bloom__bloom-3b")
    assert {layer.position for layer in m.layers} == {"alibi"}
    assert m.num_layers == text.n_layer
    head_dim = text.hidden_size // text.n_head
    assert all(layer.attention.softmax_scale == pytest.approx(head_dim ** -0.5) for layer in m.layers)
    mask = torch.ones(1, 3)
    # (batch * heads, 1, T) = slope_h * position: the slopes at position 1
    hf_slopes = build_alibi_tensor(mask, text.n_head, torch.float32)[:, 0, 1].double().numpy()
    np.testing.assert_allclose(posenc.alibi_slopes(text.n_head), hf_slopes, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(FLAT_COPIES))
def test_flat_copies_are_read_with_a_warning(name):
    """As written, transformers 5.23 cannot load the flat copy (Llama4Config builds text_config from its
    class defaults and then fails on the top-level rope_scaling); posenc plans it as the text model the file
    means, and says that transformers would not."""
    d = load(name)
    with pytest.raises(Exception), warnings.catch_warnings():  # noqa: B017  (whichever error)
        warnings.simplefilter("ignore")
        AutoConfig.for_model(**d)
    with pytest.warns(UserWarning, match=f"model_type '{d['model_type']}' without text_config"):
        posenc.ModelPositions.from_hf(os.path.join(DATA, name + ".json"))


def test_glm4v_flat_config_against_transformers_text_config():
    """GLM-4.1V, a flat copy (no text_config): posenc reads the top-level keys as the text model's, with a
    warning (transformers 5 reads text_config only and would build the class defaults, which cannot run).
    Compared with transformers' Glm4vTextRotaryEmbedding and apply_rotary_pos_emb built from those keys as
    the text_config: M-RoPE sections [8, 12, 12] over the frequencies (recomposition_frequencies), GLM's
    pairs (2j, 2j + 1) (rotate_half_llm), the first 64 of 128 dims rotated, three distinct streams."""
    from transformers.models.glm4v import modeling_glm4v as g

    name = "glm4v__GLM-4.1V-9B-Thinking"
    d = load(name)
    with pytest.warns(UserWarning, match="without text_config"):
        m = posenc.ModelPositions.from_hf(os.path.join(DATA, name + ".json"))
    assert m.model_type == "glm4v_text" and m.num_layers == 40 and m.max_position_embeddings == 65536
    text = {k: v for k, v in d.items() if k not in ("model_type", "architectures", "transformers_version")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tc = AutoConfig.for_model("glm4v", text_config=text).get_text_config()
    rotary = g.Glm4vTextRotaryEmbedding(tc)
    torch.manual_seed(0)
    B, H, T, D = 2, 3, 24, tc.hidden_size // tc.num_attention_heads
    q, k = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    pos = torch.sort(torch.randint(0, 8192, (B, T)), dim=1).values
    pos3 = torch.stack([pos, pos // 2, pos // 3])
    cos, sin = rotary(torch.zeros(1, 1, 8), pos3)
    q_hf, k_hf = g.apply_rotary_pos_emb(q, k, cos, sin)
    for layer in (m.layers[0], m.layers[-1]):
        rc = layer.rope
        assert layer.rotary_dims == (0, 64) and rc.layout == "interleaved"
        assert list(rc.mrope_section) == [8, 12, 12]
        for x, want in ((q, q_hf), (k, k_hf)):
            got = posenc.rope(x.transpose(1, 2).numpy(), pos3.numpy(), config=rc, seq_len=int(pos.max()) + 1)
            # HF: fp32 angles position * inv_freq (errors ~ position * 2^-24 rad at position 8192)
            torch.testing.assert_close(torch.from_numpy(got).transpose(1, 2), want, atol=2e-3, rtol=1e-4)


def test_gpt_neo_local_layers_and_unscaled_attention():
    """GPT-Neo 125M: attention_types [[["global", "local"], 6]] -> local odd layers whose mask keeps the
    window_size latest keys (the bias buffer of modeling_gpt_neo.py GPTNeoSelfAttention.__init__), and no
    1/sqrt(d) in _attn."""
    m = plan("gpt-neo__gpt-neo-125M")
    config, text, model = hf("gpt-neo__gpt-neo-125M")
    assert [layer.layer_type for layer in m.layers] == [
        "sliding_attention" if t == "local" else "full_attention" for t in text.attention_layers]
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention

    t = 300  # past the window of 256
    for layer, kind in zip(m.layers, text.attention_layers):
        a = layer.attention
        assert a.softmax_scale == 1.0 and a.causal
        attn = GPTNeoSelfAttention(text, kind, layer.layer)  # on the CPU: its mask buffer has data
        assert not hasattr(attn, "scaling") and not hasattr(attn, "scale_attn")  # _attn: q k^T unscaled
        i, j = np.arange(t)[:, None], np.arange(t)[None, :]
        want = (j <= i) & ((i - j < a.window) if a.window else True)
        np.testing.assert_array_equal(attn.bias[0, 0, :t, :t].numpy(), want)


def test_gpt_neo_saved_gpt_j_fork_is_refused():
    """rotary = true: GPT-J's development fork saved as gpt_neo; transformers' GPTNeo ignores the key."""
    with pytest.raises(posenc.Error, match="model_type 'gpt_neo' is not supported with rotary = true"):
        posenc.ModelPositions.from_hf(os.path.join(DATA, "gpt-neo__gpt-j-6B-rotary-fork.json"))


def test_refused_family_raises_posenc_error_with_the_library_message():
    with pytest.raises(posenc.Error,
                       match="model_type 'internlm' is not supported: InternLM \\(1\\)'s remote code"):
        posenc.ModelPositions.from_hf({"model_type": "internlm", "hidden_size": 4096,
                                       "num_attention_heads": 32})
    with pytest.raises(posenc.Error):
        posenc.ModelPositions.from_hf({"model_type": "llama", "hidden_size": "big"})
    with pytest.raises(posenc.Error, match="cannot read"):
        posenc.ModelPositions.from_hf("/nonexistent/config.json")


def test_warnings_are_emitted_one_per_key():
    d = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
         "max_position_embeddings": 128, "rope_theta": 10000.0, "rope_magic_knob": 3}
    with pytest.warns(posenc.PositionWarning) as record:
        m = posenc.ModelPositions.from_hf(d)
    assert m.warnings and len(record) == len(m.warnings)
    assert all("rope_magic_knob" in str(r.message) for r in record)


def test_dict_and_path_agree_and_layer_api():
    name = "gemma3__gemma-3-4b-it"
    a, b = plan(name), posenc.ModelPositions.from_hf(load(name))
    assert a.model_type == b.model_type == "gemma3_text" and a.num_layers == b.num_layers == 34
    layer = a.layers[5]
    assert layer.layer == 5 and layer.layer_type == "full_attention" and layer.position == "rope"
    assert layer.rotary_dims == (0, 256) and layer.qk_head_dim == 256
    assert layer.attention.window == 0 and a.layers[0].attention.window == 1024
    assert layer.attention.softmax_scale == 256 ** -0.5 and layer.attention.softcap is None
    assert layer.attention_factor() == 1.0
    # the RopeConfig works with posenc.rope
    x = np.random.default_rng(0).standard_normal((1, 4, 2, 256)).astype(np.float32)
    assert posenc.rope(x, np.arange(4), config=layer.rope).shape == x.shape
    assert "LayerPlan(layer=5" in repr(layer)


@pytest.mark.parametrize("name",
                         ["ministral3__Devstral-2-123B-Instruct", "mistral3__Devstral-Small-2-24B-Instruct"])
def test_ministral3_query_temperature_against_transformers(name):
    """Ministral3Attention.forward: query *= get_llama_4_attn_scale(position_ids, beta,
    rope_parameters["original_max_position_embeddings"]), after RoPE (modeling_ministral3.py)."""
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

    m = plan(name)
    _, text, _ = hf(name)
    beta = text.rope_parameters["llama_4_scaling_beta"]
    orig = text.rope_parameters["original_max_position_embeddings"]
    positions = torch.tensor([[0, 1, orig - 1, orig, 3 * orig + 5, m.max_position_embeddings - 1]])
    want = get_llama_4_attn_scale(positions, beta, orig).flatten().double().numpy()
    for layer in m.layers:
        t = layer.attention.temperature
        assert t.kind == "ministral3" and t.scale == beta and t.floor_scale == orig
        got = np.array([t.factor(int(p)) for p in positions.flatten()])
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_llama4_temperature_against_transformers_formula():
    """Llama4TextAttention.forward (NoPE layers): attn_scales = log1p(floor((p + 1) / floor_scale))
    * attn_scale + 1, computed in float32 there; p = cache position."""
    for name in [f for f in FILES if f.startswith("llama4__")]:
        m = plan(name)
        _, text, _ = hf(name)
        p = torch.tensor([0, 1, 8190, 8191, 8192, 10**6, 10**7], dtype=torch.float32)
        want = torch.log1p(torch.floor((p + 1.0) / text.floor_scale)) * text.attn_scale + 1.0
        want = want.double().numpy()
        for layer in m.layers:
            if layer.position == "none":
                got = np.array([layer.attention.temperature.factor(int(x)) for x in p])
                np.testing.assert_allclose(got, want, rtol=1e-6)


def test_proportional_rope_type_against_transformers():
    """Gemma 4's p-RoPE (modeling_rope_utils.py _compute_proportional_rope_parameters), reachable
    from Python through RopeScaling.rope_type = "proportional" and .proportion."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16, max_position_embeddings=64,
                         rope_parameters={"rope_type": "proportional", "rope_theta": 10000.0,
                                          "partial_rotary_factor": 0.5})
    want, want_factor = ROPE_INIT_FUNCTIONS["proportional"](config, "cpu")
    rc = posenc.rope_config(16, base=10000.0)
    s = rc.scaling
    s.rope_type, s.proportion = "proportional", 0.5
    rc.scaling = s
    got, factor = posenc.rope_inv_freq(config=rc)
    np.testing.assert_allclose(got, want.double().numpy(), rtol=1e-6)
    assert factor == want_factor
