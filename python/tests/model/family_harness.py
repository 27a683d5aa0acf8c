"""The harness of the family tests: posenc.ModelPositions for EVERY decoder text family of transformers
5.23, from each config class's defaults: posenc's per-layer plan must equal what transformers' own model
does, or posenc must refuse the model_type by name (posenc.Error). A wrong number is worse than an error.

The families (family_tables): every model_type of MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and MODEL_FOR_MASKED_LM_MAPPING_NAMES (the encoders) and
OTHER_HEADS, by the model_type of its text config (multimodal wrappers: get_text_config(); each wrapper's
own dict must then give the plan of its text config).
Each family's config is its class default with the sizes shrunk (6 layers, 4 heads, 2 kv heads,
small MLP / experts / vocabulary; head_dim and every positional field left at the default), and a
second variant with rope_type "yarn" (factor 4) where the config has rope_parameters, and a third with
a sliding window short enough to show in the mask (3 keys; use_sliding_window on, max_window_layers 3)
where the config has sliding_window; a "shape" variant (another base, partial_rotary_factor 0.5,
head_dim 32) and a "heads" variant (twice the heads: hidden / heads is no longer the class's head_dim,
so a family that derives head_dim and one that fixes it are told apart).

What is compared, per layer, with a tiny CPU model built from that config (eager attention):
- inv_freq and attention_scaling of the family's own rotary module (per layer type, or per layer
  where the attention owns it) after calls whose largest position is 0, original - 1, 2 original - 1;
- the applied rotation: the q/k the family's attention hands to its attention function, against
  posenc.rope applied to the same layer's q/k without rotation (the layer run again with cos = 1,
  sin = 0), on posenc's rotated range [lo, hi) with its layout; NoPE layers must be unrotated;
- the attention function's arguments: scaling, sliding_window, softcap; the attention mask
  (causal / bidirectional); layer_types; sinks.
"""
import importlib
import sys
import warnings

import numpy as np
import pytest
import torch
import transformers
from transformers.models.auto import modeling_auto

import posenc
from encoder_checks import ENCODER_CHECKS
from family_tables import BACKBONES, FAMILIES, FAMILY_KWARGS, HEADS, KV_HEADS, LAYERS, SEQ2SEQ, SUPPORTED, T
from hf_oracle import hf_frequencies

transformers.utils.logging.set_verbosity_error()


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one intra-op thread is fastest (and fair on a shared 2-core machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------ configs and models


def attr(c, name, default=None):
    """getattr, reading the global value of a per-layer attribute (gemma4's head_dim: transformers
    raises AmbiguousGlobalPerLayerAttributeError on a plain read)."""
    read = getattr(c, "_getattr_without_heterogeneous_validation", None)
    return read(name, default) if read else getattr(c, name, default)


def has_attr(c, name):
    missing = object()
    return attr(c, name, missing) is not missing


def shrunk_kwargs(text_cls):
    """Class defaults with the sizes shrunk; head_dim and the positional fields untouched."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = text_cls()
    hidden = attr(c, "hidden_size", None)
    heads = attr(c, "num_attention_heads", None)
    head_dim = attr(c, "head_dim", None) or (hidden // heads if hidden and heads else None)
    kw = {}

    def put(name, value):
        if has_attr(c, name) and attr(c, name) is not None:
            kw[name] = value

    put("num_hidden_layers", LAYERS)
    if attr(c, "attention_types", None):  # gpt_neo: the layer list is expanded from it
        kw["attention_types"] = [[["global", "local"], LAYERS // 2]]
    put("num_attention_heads", HEADS)
    if has_attr(c, "num_key_value_heads"):  # (None in Nemotron's class defaults: the model needs it)
        kv = attr(c, "num_key_value_heads", None)
        kw["num_key_value_heads"] = HEADS if kv is None or kv == heads else KV_HEADS
    if head_dim:
        put("hidden_size", HEADS * head_dim)
        if attr(c, "head_dim", None) is None and has_attr(c, "head_dim"):
            kw["head_dim"] = head_dim  # derived before: keep it as the class had it
    for name in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
                 "ffn_hidden_size", "n_inner", "expert_intermediate_size"):
        put(name, 32)
    for name in ("q_lora_rank", "kv_lora_rank"):
        put(name, 32)
    for name, value in vars(c).items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 4 and \
                ("expert" in name and "per_tok" not in name or name in ("n_group", "topk_group")):
            kw[name] = 4 if "expert" in name else 1
    if has_attr(c, "num_experts_per_tok"):
        kw["num_experts_per_tok"] = 2
    for name in ("n_routed_experts", "n_shared_experts"):  # dots1: None by default, needed by the model
        if has_attr(c, name) and attr(c, name) is None:
            kw[name] = 4 if name == "n_routed_experts" else 1
    if has_attr(c, "vocabulary_map") and attr(c, "vocabulary_map") is None:  # chameleon's image token
        kw["vocabulary_map"] = {"<image>": 255}
    kw.update(FAMILY_KWARGS.get(c.model_type, {}))
    put("n_group", 1)
    put("topk_group", 1)
    put("vocab_size", 256)
    put("vocab_size_per_layer_input", 256)  # gemma4: per-layer embeddings (vocab x layers x 256)
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        put(name, 0)
    return kw


def _yarn(rope_parameters, max_pos):
    """The default rope dict(s) with rope_type yarn, factor 4, original context max / 4 (per layer
    type: the full-attention one)."""
    if not isinstance(rope_parameters, dict) or not max_pos:
        return None
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": max_pos // 4}
    if "rope_type" in rope_parameters:
        return {**rope_parameters, **yarn}
    if isinstance(rope_parameters.get("full_attention"), dict):
        return {**rope_parameters, "full_attention": {**rope_parameters["full_attention"], **yarn}}
    return None


_CONFIGS = {}


VARIANTS = ("default", "yarn", "window", "shape", "heads")


def family_config(model_type, variant):
    key = (model_type, variant)
    if key not in _CONFIGS:
        text_cls, _ = FAMILIES[model_type]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                kw = shrunk_kwargs(text_cls)
                config = text_cls(**kw)
            except Exception:  # the class rejects the shrunk sizes: its defaults (a refused family)
                if model_type in SUPPORTED:  # (a full-size model of a supported family would be built)
                    raise
                kw, config = {}, text_cls()
            if variant == "window":
                window = {k: v for k, v in (("sliding_window", 3), ("use_sliding_window", True),
                                            ("max_window_layers", 3),
                                            ("window_size", 3)) if has_attr(config, k)}
                try:  # (gpt_neo: window_size)
                    has_window = bool({"sliding_window", "window_size"} & set(window))
                    config = text_cls(**kw, **window) if has_window else None
                except Exception as exc:
                    config = f"transformers rejects the window variant: {exc!r:.200}"
            if variant == "shape":  # head_dim not hidden / heads, partial rotation, another base
                try:
                    rp = getattr(config, "rope_parameters", None)
                    rp = {**rp, "rope_theta": 12345.0, "partial_rotary_factor": 0.5} \
                        if isinstance(rp, dict) and "rope_type" in rp else None
                    shape = {"head_dim": 32} if attr(config, "head_dim") else {}
                    if model_type == "dbrx":  # the authors' base (attn_config), which 5.23 ignores: the same
                        shape["attn_config"] = {**kw["attn_config"], "rope_theta": 12345.0}
                    config = text_cls(**{**kw, **shape}, rope_parameters=rp) if rp else None
                    # Some families cannot run it (head_dim or the factor ignored): a 2-token trial, only
                    # for the families posenc supports (the others are refused by name whatever the
                    # config, and some, e.g. blt, do not shrink and would exhaust the memory).
                    if config is not None and model_type in SUPPORTED:
                        model = build(config)
                        model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
                except Exception as exc:
                    config = f"transformers rejects the shape variant: {exc!r:.200}"
            if variant == "heads":  # hidden / heads halves; an explicit head_dim stays (posenc must tell)
                heads = {"num_attention_heads": 2 * HEADS} if "num_attention_heads" in kw else {}
                if heads and "num_key_value_heads" in kw:
                    same = kw["num_key_value_heads"] == HEADS
                    heads["num_key_value_heads"] = 2 * HEADS if same else KV_HEADS
                try:
                    config = text_cls(**{**kw, **heads}) if heads and model_type in SUPPORTED else None
                    if config is not None:  # (a 2-token trial, as the shape variant)
                        model = build(config)
                        model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
                except Exception as exc:
                    config = f"transformers rejects the heads variant: {exc!r:.200}"
            if variant == "yarn":
                rp = _yarn(getattr(config, "rope_parameters", None),
                           getattr(config, "max_position_embeddings", None))
                try:
                    config = None if rp is None else text_cls(**kw, rope_parameters=rp)
                except Exception as exc:  # e.g. phi3: yarn becomes longrope, which needs factor lists
                    config = f"transformers rejects the yarn variant: {exc!r:.200}"
        _CONFIGS[key] = config
    return _CONFIGS[key]


def variant_applies(model_type, variant):
    """Whether family_config(model_type, variant) is a config to check rather than None: the class's
    defaults have something the variant changes (a window, rope_parameters with a rope_type, a yarn-able
    rope dict, heads of a supported family). Read from the class defaults alone, without building a model,
    so that the tests are parametrized with the variants that can run."""
    if variant == "default":
        return True
    text_cls, _ = FAMILIES[model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kw = shrunk_kwargs(text_cls)
            config = text_cls(**kw)
        except Exception:
            if model_type in SUPPORTED:  # family_config raises: the test reports it
                return True
            kw, config = {}, text_cls()
    if variant == "window":
        return has_attr(config, "sliding_window") or has_attr(config, "window_size")
    if variant == "shape":
        rp = getattr(config, "rope_parameters", None)
        return isinstance(rp, dict) and "rope_type" in rp
    if variant == "heads":
        return "num_attention_heads" in kw and model_type in SUPPORTED
    if variant == "yarn":
        return _yarn(getattr(config, "rope_parameters", None),
                     getattr(config, "max_position_embeddings", None)) is not None
    raise ValueError(f"variant = {variant!r} is invalid: expected one of {VARIANTS}")


def _model_class(config):
    name = BACKBONES.get(config.model_type) or modeling_auto.MODEL_MAPPING_NAMES.get(config.model_type)
    if name and hasattr(transformers, name):  # (VoxtralRealtimeTextModel: mapped, not exported)
        return getattr(transformers, name)
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    for obj in vars(module).values():  # e.g. MllamaTextModel: a text model without an auto mapping
        if isinstance(obj, type) and issubclass(obj, transformers.PreTrainedModel) and \
                getattr(obj, "config_class", None) is type(config) and obj.__name__.endswith("Model") and \
                not obj.__name__.endswith("PreTrainedModel"):  # (the base class: no forward)
            return obj
    raise LookupError(f"{config.model_type}: no model class")


def build(config):
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _model_class(config)(config)
    if hasattr(model, "set_default_language"):  # xmod: one adapter per language, none chosen by default
        model.set_default_language(config.languages[0])
    # A parameter its model's init leaves as torch.empty memory (some submodules of a few families) holds
    # whatever the allocator had, NaN included, so the outcome would depend on the tests run before: such
    # tensors get seeded normal values instead.
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for t in model.parameters():  # (buffers such as causal masks hold -inf on purpose)
            if t.is_floating_point() and not torch.isfinite(t).all():
                t.copy_(torch.randn(t.shape, generator=generator, dtype=torch.float32).mul_(0.02).to(t.dtype))
    return model.eval()


def plan(d):
    return posenc.ModelPositions.from_hf(d, warn=False)


def layer_index(name):
    parts = name.split(".")
    for i, (a, b) in enumerate(zip(parts, parts[1:])):
        if a in ("layers", "layer", "h", "blocks") and b.isdigit():
            # longcat_flash: two attention sublayers per decoder layer, self_attn.0 / .1 (layers 2i, 2i + 1)
            sub = parts[i + 2:i + 4]
            if len(sub) == 2 and sub[0] == "self_attn" and sub[1].isdigit():
                return 2 * int(b) + int(sub[1])
            return int(b)
    return None


# ------------------------------------------------------------------ capturing the attention calls


class Capture:
    """Wraps every attention module's eager_attention_forward: records, per layer, the q and k it
    receives (after RoPE), the mask and its keyword arguments."""

    def __init__(self, model):
        self.model = model
        self.names = {mod: name for name, mod in model.named_modules()}
        self.calls = {}
        self.modules = {}
        for name, mod in model.named_modules():
            cls = type(mod).__name__
            vision_tower = "Vision" in cls and "VisionText" not in cls  # (Granite4VisionTextAttention: text)
            attention = cls.endswith(("Attention", "MLA"))  # (LongcatFlashMLA)
            if attention and not vision_tower and layer_index(name) is not None:
                self.modules.setdefault(layer_index(name), mod)
        self.patched = []
        for mod in {sys.modules[type(m).__module__] for m in self.modules.values()}:
            orig = getattr(mod, "eager_attention_forward", None)
            if orig is not None:
                self.patched.append((mod, orig))
                mod.eager_attention_forward = self._wrap(orig)

    def _wrap(self, orig):
        def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
            i = layer_index(self.names.get(module, ""))
            self.calls[i] = dict(query=query.detach().clone(), key=key.detach().clone(),
                                 mask=None if attention_mask is None else attention_mask.detach().clone(),
                                 kwargs={k: v for k, v in kwargs.items() if not torch.is_tensor(v)})
            return orig(module, query, key, value, attention_mask, *args, **kwargs)
        return wrapper

    def close(self):
        for mod, orig in self.patched:
            mod.eager_attention_forward = orig


class ApplyCapture:
    """For families whose attention has no eager_attention_forward (gptj, falcon, bloom, mpt): the
    inputs and outputs of the family's apply_rotary_pos_emb, per layer."""

    def __init__(self, modules):
        self.layer, self.calls, self.patched, self.hooks = None, {}, [], []
        for i, mod in modules.items():
            self.hooks.append(mod.register_forward_pre_hook(lambda *_, i=i: setattr(self, "layer", i)))
        for mod in {sys.modules[type(m).__module__] for m in modules.values()}:
            orig = getattr(mod, "apply_rotary_pos_emb", None)
            if orig is not None:
                self.patched.append((mod, orig))
                mod.apply_rotary_pos_emb = self._wrap(orig)

    def _wrap(self, orig):
        def wrapper(*args, **kwargs):
            out = orig(*args, **kwargs)
            pairs = zip(args[:2], out) if isinstance(out, tuple) else [(args[0], out)]
            self.calls.setdefault(self.layer,
                                  []).extend((a.detach().clone(), b.detach().clone()) for a, b in pairs)
            return out
        return wrapper

    def close(self):
        for mod, orig in self.patched:
            mod.apply_rotary_pos_emb = orig
        for h in self.hooks:
            h.remove()


def learned_offset(table):
    """The row of position 0: OPT / BioGPT add `offset` (2); the RoBERTa family's table has
    padding_idx = pad_token_id and position 0 reads row pad + 1 (create_position_ids_from_input_ids)."""
    if hasattr(table, "offset"):
        return table.offset
    padding = getattr(table, "padding_idx", None)
    return 0 if padding is None else padding + 1


def check_sinusoidal_table(m, model, where):
    """The fixed table the model adds to its embeddings against posenc.sinusoidal with the plan's
    ModelPositions.sinusoidal: CTRL's pos_encoding (position p at row p), XGLM's and Kosmos-2's
    embed_positions.weights (row p + 2; Kosmos-2: p + pad_token_id + 1). transformers builds both with fp32
    angles: ~position * 2^-24 rad (the first 1024 rows)."""
    s = m.sinusoidal
    assert s is not None and s["dim"] == model.config.hidden_size, where
    table = getattr(model, "pos_encoding", None)
    if table is None:  # (Kosmos2TextModel: model.embed_positions)
        table = next(mod for n, mod in model.named_modules() if n.split(".")[-1] == "embed_positions").weights
    n = min(table.shape[0] - s["offset"], 1024)
    want = table[s["offset"]:s["offset"] + n].double().numpy()
    got = posenc.sinusoidal(np.arange(n), s["dim"], s["base"], s["layout"], frequencies=s["frequencies"],
                            offset=s["offset"])
    np.testing.assert_allclose(got, want, atol=2e-4, err_msg=where)


def check_legacy(model_type, m, model, ids, pos, modules):
    """Scale from the attention module's attribute; the rotation from apply_rotary_pos_emb's
    inputs and outputs (its input is the rotated slice [0, R) the attention cut: checked to be
    posenc's width)."""
    cap = ApplyCapture(modules)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(input_ids=ids, position_ids=pos, use_cache=False)
    finally:
        cap.close()
    for layer in m.layers:
        where = f"{model_type} layer {layer.layer}"
        attn = modules[layer.layer]
        attn = getattr(attn, "attention", attn)  # gpt_neo: GPTNeoAttention wraps GPTNeoSelfAttention
        attn = getattr(attn, "self", attn)  # megatron-bert, rembert: *Attention wraps *SelfAttention
        scale = next((float(getattr(attn, n)) for n in ("scaling", "inv_norm_factor", "softmax_scale")
                      if getattr(attn, n, None) is not None), None)
        if scale is None and hasattr(attn, "scale_attn"):
            scale = 1 / float(attn.scale_attn)  # gptj: _attn divides by sqrt(head_dim)
        if scale is None and hasattr(attn, "attention_head_size"):
            # megatron-bert, rembert: scores / sqrt(head) (MegatronBertSelfAttention.forward,
            # RemBertSelfAttention.forward)
            scale = attn.attention_head_size ** -0.5
        if scale is None and model_type == "openai-gpt":  # modeling_openai.py _attn: w / sqrt(head) if scale
            scale = (attn.split_size // attn.n_head) ** -0.5 if attn.scale else 1.0
        if scale is None and hasattr(attn, "norm_factor"):  # gpt_neox_japanese: baddbmm alpha 1 / norm_factor
            scale = 1 / float(attn.norm_factor)
        if scale is None and model_type == "gpt_neo":
            scale = 1.0  # modeling_gpt_neo.py _attn: q k^T, no scaling attribute
        assert layer.attention.softmax_scale == pytest.approx(scale, rel=1e-6), where
        bias = getattr(attn, "bias", None)  # a (1, 1, P, P) bool mask buffer (gpt_neo's local window)
        if torch.is_tensor(bias) and bias.dtype == torch.bool and bias.dim() == 4:
            assert torch.equal(bias[0, 0, :T, :T], posenc_mask(layer.attention, T)), f"{where}: mask"
        if layer.position == "sinusoidal":
            check_sinusoidal_table(m, model, where)
        calls = cap.calls.get(layer.layer, [])
        if layer.position != "rope":
            assert not calls, f"{where}: rotated in transformers"
            continue
        assert calls, f"{where}: no apply_rotary_pos_emb call"
        lo, hi = layer.rotary_dims
        for x, y in calls:
            if model_type in ("gptj", "codegen"):  # (B, T, H, R): _split_heads keeps heads third
                x, y = x.transpose(1, 2), y.transpose(1, 2)
            assert lo == 0 and x.shape[-1] == hi - lo, where
            full = torch.zeros(*x.shape[:-1], layer.rope.head_dim)
            full[..., :x.shape[-1]] = x
            want = expected_rotation(full, layer, pos.numpy(), int(pos.max()) + 1)[..., :x.shape[-1]]
            torch.testing.assert_close(y.float(), want.float(), atol=2e-3 * max(1.0, float(x.abs().max())),
                                       rtol=1e-4, msg=lambda msg, where=where: f"{where}: {msg}")


def identity_rope_hook(module, args, kwargs):
    """Forward pre-hook: this layer's position_embeddings become cos = 1, sin = 0 (no rotation)."""
    if kwargs.get("position_embeddings", False) is None:  # a NoPE layer (granite_swa's base 0)
        return args, kwargs
    pe = kwargs.get("position_embeddings")
    positional = args[1] if len(args) > 1 else None  # (qwen4_exp's decoder passes it second, by position)
    if pe is None and isinstance(positional,
                                 tuple) and len(positional) == 2 and all(map(torch.is_tensor, positional)):
        cos, sin = positional
        return (args[0], (torch.ones_like(cos), torch.zeros_like(sin)), *args[2:]), kwargs
    if pe is None:
        raise AssertionError(f"{type(module).__name__}: no position_embeddings keyword to neutralize")
    if torch.is_tensor(pe):  # complex freqs_cis (llama4): e^(i angle) -> 1
        kwargs["position_embeddings"] = torch.ones_like(pe)
    else:
        cos, sin = pe
        kwargs["position_embeddings"] = (torch.ones_like(cos), torch.zeros_like(sin))
    return args, kwargs


def identity_rotary_output(module, args, out):
    """Forward hook on a layer's own rotary module (recurrent_gemma): cos = 1, sin = 0."""
    cos, sin = out
    return torch.ones_like(cos), torch.zeros_like(sin)


def model_inputs(model, ids):
    """input_ids, or what a text model that cannot start from them takes instead (the same every call)."""
    c = model.config
    # no token embedding: the thinker's states come in (the talker); CSM sums its codebooks' embeddings
    if c.model_type in ("qwen3_omni_moe_talker_text", "csm"):
        return dict(inputs_embeds=torch.randn(*ids.shape, c.hidden_size,
                                              generator=torch.Generator().manual_seed(0)))
    # voxtral_realtime_text: each layer's ada_rms_norm of the delay tokens' time embedding
    if c.model_type == "voxtral_realtime_text":
        return dict(input_ids=ids, t_cond=torch.zeros(1, 1, c.hidden_size))  # (VoxtralRealtimeModel.forward)
    return dict(input_ids=ids)


def run(model, ids, pos, identity_layer=None, capture=None):
    handle = None
    if identity_layer is not None:
        attn = capture.modules[identity_layer]
        own = getattr(attn, "rotary_emb", None)  # a rotary module per attention layer
        handle = own.register_forward_hook(identity_rotary_output) if own is not None else \
            attn.register_forward_pre_hook(identity_rope_hook, with_kwargs=True)
    try:
        capture.calls = {}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(**model_inputs(model, ids), position_ids=pos, use_cache=False)
        return capture.calls
    finally:
        if handle is not None:
            handle.remove()


# ------------------------------------------------------------------ transformers' rotary modules


def rotary_modules(model):
    out = {}
    own = type(model).__name__.removesuffix("Model")  # (HiggsAudioV2RotaryEmbedding: the model's own)
    for name, mod in model.named_modules():
        cls = type(mod).__name__
        rest = cls.removeprefix(own)
        tower = any(s in rest for s in ("Vision", "Audio", "Vit")) and "VisionText" not in rest
        if cls.endswith("RotaryEmbedding") and not tower:
            out[name] = mod
    return out


def rotary_for_layer(rotaries, i, base=None):
    own = [m for n, m in rotaries.items() if layer_index(n) == i]
    shared = [m for n, m in rotaries.items() if layer_index(n) is None]
    # granite_swa: one shared module per distinct base (rotary_embs.k): the layer's base picks it
    by_base = [m for m in shared if base is not None and
               (getattr(getattr(m, "config", None), "rope_parameters", None) or {}).get("rope_theta") == base]
    return (own or by_base or shared or [None])[0]


# ------------------------------------------------------------------ the checks


def expected_rotation(x, layer, pos, seq_len):
    """x: (B, H, T, D) torch, unrotated -> posenc's rotation of the layer's range, (B, H, T, D)."""
    rc = layer.rope
    lo = layer.rotary_dims[0]
    width = rc.head_dim  # the RopeConfig's head: the rotated range (and pass-through dims after it)
    xs = x.transpose(1, 2).double().numpy().astype(np.float32)
    out = xs.copy()
    positions = np.stack([pos] * 3) if rc.num_position_streams == 3 else pos
    out[..., lo:lo + width] = posenc.rope(np.ascontiguousarray(xs[..., lo:lo + width]), positions, config=rc,
                                          seq_len=seq_len)
    return torch.from_numpy(out).transpose(1, 2)


def assert_rotation(name, got, pre, layer, pos, seq_len, permuted, after):
    if layer.position != "rope":
        torch.testing.assert_close(got, pre, atol=1e-6, rtol=1e-6,
                                   msg=f"{name}: no RoPE in posenc, rotated in transformers")
        return
    lo, hi = layer.rotary_dims
    if permuted:
        # DeepSeek-V3's apply_rotary_pos_emb_interleave reads pairs (2j, 2j + 1) and writes
        # [x_even' | x_odd'] (include/posenc/model.h): with cos = 1, sin = 0 it still permutes, so
        # the unrotated run gave [x_even | x_odd]; posenc's interleaved rotation, then that permutation.
        r = pre[..., lo:hi]
        half = (hi - lo) // 2
        pre = torch.cat([pre[..., :lo], torch.stack([r[..., :half], r[..., half:]], -1).flatten(-2),
                         pre[..., hi:]], -1)
    want = expected_rotation(pre, layer, pos, seq_len)
    if permuted:
        r = want[..., lo:hi]
        want = torch.cat([want[..., :lo], r[..., 0::2], r[..., 1::2], want[..., hi:]], -1)
    if after is not None:  # a norm the family applies after RoPE (llama4's L2, hunyuan's RMS norms)
        with torch.no_grad():
            want = after(want.float())
    tol = dict(atol=2e-3 * max(1.0, float(pre.abs().max())), rtol=1e-4)
    torch.testing.assert_close(got.float(), want.float(), **tol, msg=lambda m: f"{name}: {m}")


def allowed_mask(mask, t):
    """HF's 4-D attention mask (float, -inf/min where masked; or bool) -> (t, t) bool, True = attends."""
    if mask is None:
        return None
    m = mask[0, 0, -t:, -t:]
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


def posenc_mask(a, t):
    i = np.arange(t)[:, None]
    j = np.arange(t)[None, :]
    ok = np.ones((t, t), bool)
    if a.causal:
        ok &= j <= i
    if a.window:  # |q - k| < window (causal: the window keys up to the query)
        ok &= np.abs(i - j) < a.window
    if a.chunk:
        ok &= i // a.chunk == j // a.chunk
    return torch.from_numpy(ok)


PERMUTED_WRITE_BACK = {"deepseek_v3", "youtu", "axk1", "axk2", "glm4_moe_lite", "bailing_hybrid", "mistral4",
                       "deepseek_v32", "glm_moe_dsa", "longcat_flash", "dots3_note_text"}


def seq2seq_stacks(model):
    """{"encoder" | "decoder": the stack module} of an encoder-decoder model or of its decoder alone."""
    return {name.split(".")[-1]: mod for name, mod in model.named_modules()
            if name.split(".")[-1] in ("encoder", "decoder") and hasattr(mod, "embed_positions")}


def check_seq2seq(model_type, model, m, inputs):
    """Each stack's self-attention layer by layer (scale, causal or bidirectional mask) and the rows
    its position module hands to the embeddings, against the plan (src/model/seq2seq.cc)."""
    stacks = seq2seq_stacks(model)
    planned = sorted({layer.layer_type for layer in m.layers})
    assert sorted(stacks) == planned, f"{model_type}: stacks {sorted(stacks)}, planned {planned}"
    layers = {}  # plan layer index -> transformers' self-attention module
    first = {t: min(layer.layer for layer in m.layers if layer.layer_type == t) for t in planned}
    for t, stack in stacks.items():
        for i, block in enumerate(stack.layers):
            layers[first[t] + i] = block.self_attn
    assert len(layers) == m.num_layers, f"{model_type}: {len(layers)} attention layers in transformers"
    calls, positions, patched = {}, {}, []
    names = {mod: i for i, mod in layers.items()}

    # whisper, mvp: q_proj(x) * self.scaling, then an unscaled product (whisper's function gets 1.0)
    prescaled = model_type in ("whisper", "mvp")

    def wrap(orig):  # the scaling the attention function receives (where the family has one: not mvp)
        def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
            if module in names:
                scaling = kwargs.get("scaling", module.scaling)
                if prescaled:
                    assert scaling == 1.0, f"{model_type}: the query was scaled already"
                    scaling = module.scaling
                calls[names[module]]["scaling"] = scaling
            return orig(module, query, key, value, attention_mask, *args, **kwargs)
        return wrapper

    def record(module, args, kwargs):  # the mask the self-attention receives; mvp: q * self.scaling
        calls[names[module]] = dict(mask=kwargs.get("attention_mask"), scaling=module.scaling)

    for mod in {sys.modules[type(a).__module__] for a in layers.values()}:
        if hasattr(mod, "eager_attention_forward"):
            patched.append((mod, mod.eager_attention_forward))
            mod.eager_attention_forward = wrap(mod.eager_attention_forward)
    hooks = [stack.embed_positions.register_forward_hook(
        lambda mod, args, out, t=t: positions.__setitem__(t, out.detach().clone()))
        for t, stack in stacks.items()]
    hooks += [a.register_forward_pre_hook(record, with_kwargs=True) for a in layers.values()]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(**inputs, use_cache=False)
    finally:
        for mod, orig in patched:
            mod.eager_attention_forward = orig
        for h in hooks:
            h.remove()
    for layer in m.layers:
        where = f"{model_type} layer {layer.layer} ({layer.layer_type})"
        call, a = calls[layer.layer], layer.attention
        assert a.softmax_scale == pytest.approx(call["scaling"], rel=1e-12), where
        assert layer.qk_head_dim == layers[layer.layer].head_dim, where
        hf_mask = allowed_mask(call["mask"], T)
        if hf_mask is None:  # no mask: every key (the encoder without padding)
            assert not a.causal and not a.window, f"{where}: no mask in transformers"
        else:
            assert torch.equal(hf_mask, posenc_mask(a, T)), f"{where}: mask"
    for t, stack in stacks.items():
        where = f"{model_type} {t}"
        method = next(layer.position for layer in m.layers if layer.layer_type == t)
        got = positions[t].reshape(-1, positions[t].shape[-1]).double()
        n = got.shape[0]  # positions 0 .. n - 1 (whisper's encoder: every row of its table)
        rows = m.encoder_max_position_embeddings if t == "encoder" else m.max_position_embeddings
        table = stack.embed_positions
        if method == "learned":
            off = m.learned_position_offset
            assert table.num_embeddings == rows + off, where
            torch.testing.assert_close(got, table.weight[off:off + n].double(),
                                       msg=lambda msg, where=where: f"{where}: {msg}")
            continue
        assert method == "sinusoidal", where
        if hasattr(table, "num_embeddings") and model_type != "m2m_100" and model_type != "nllb-moe":
            assert table.num_embeddings == rows, f"{where}: a fixed table of {rows} rows"
        s = m.sinusoidal
        want = posenc.sinusoidal(np.arange(n), s["dim"], s["base"], s["layout"], frequencies=s["frequencies"],
                                 offset=s["offset"])
        np.testing.assert_allclose(got.numpy(), want, atol=2e-4, err_msg=where)


def seq2seq_inputs(config, decoder=True):
    torch.manual_seed(1)
    ids = torch.randint(1, config.vocab_size, (1, T))
    if not decoder:  # the decoder alone (*ForCausalLM)
        return dict(input_ids=ids)
    if config.model_type == "whisper":
        inputs = dict(input_features=torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions))
    else:
        inputs = dict(input_ids=ids)
    return {**inputs, "decoder_input_ids": ids}


def check_deepseek_v4(config, m, variant):
    """The plan against the config class and rotary module (their attention: test_model_deepseek_v4.py)."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    assert [layer.layer_type for layer in m.layers] == list(config.layer_types), variant
    rotary = DeepseekV4RotaryEmbedding(config)
    for layer in m.layers:
        label = "main" if layer.layer_type == "sliding_attention" else "compress"
        np.testing.assert_allclose(layer.inv_freq(1 << 20)[0],
                                   getattr(rotary, f"{label}_inv_freq").double().numpy(), rtol=2e-6,
                                   err_msg=f"deepseek_v4 ({variant}) layer {layer.layer}")
        assert layer.inv_freq()[1] == pytest.approx(getattr(rotary, f"{label}_attention_scaling"))
        assert layer.attention.window == config.sliding_window and layer.attention.sinks
        assert layer.rotary_dims[1] == config.head_dim
        assert layer.rotary_dims[1] - layer.rotary_dims[0] == getattr(rotary, f"{label}_inv_freq").numel() * 2
        assert layer.attention.softmax_scale == pytest.approx(config.head_dim ** -0.5)
        if layer.compressed is not None:
            assert layer.compressed["rate"] == config.compress_rates[layer.layer_type]


def check_family(model_type, config, variant="default"):
    d = config.to_dict()
    m = plan(d)
    if model_type in SEQ2SEQ:
        return check_seq2seq(model_type, build(config), m, seq2seq_inputs(config))
    if model_type in ENCODER_CHECKS:  # their own attention code (python/tests/model/encoder_checks.py)
        return ENCODER_CHECKS[model_type](build(config), m, f"{model_type} ({variant})")
    if model_type == "deepseek_v4":  # compressed keys and rotated values: no eager_attention_forward call
        return check_deepseek_v4(config, m, variant)
    text = config
    model = build(config)
    capture = Capture(model)
    try:
        torch.manual_seed(1)
        ids = torch.randint(1, config.vocab_size, (1, T))
        # positions: consecutive (gaps would read as packed sequences in transformers' masks), from a
        # few thousand (fp32 angles stay exact to ~1e-4)
        # (recurrent_gemma states no maximum; its RG-LRU resets where a position is 0)
        pos = min((m.max_position_embeddings or 1 << 20) - T, 3001) + torch.arange(T)[None]
        seq_len = int(pos.max()) + 1
        try:
            rotated = run(model, ids, pos, capture=capture)
        except (RuntimeError, TypeError) as exc:  # transformers' own forward fails (gemma4 + yarn)
            if variant == "default":
                raise
            pytest.skip(f"transformers cannot run the {variant} variant: {exc!r:.200}")
        # xlstm builds num_blocks blocks whatever num_hidden_layers says
        assert m.num_layers == (text.num_blocks if model_type == "xlstm" else text.num_hidden_layers)
        if not any(layer.softmax_attention for layer in m.layers):  # mamba, rwkv: no attention at all
            assert not rotated and not rotary_modules(model), f"{model_type}: transformers attends"
            assert all(layer.position == "none" for layer in m.layers), model_type
            return
        if not rotated:  # no eager_attention_forward in this family's modeling file
            return check_legacy(model_type, m, model, ids, pos, capture.modules)
        layer_types = getattr(text, "layer_types", None)
        rotaries = rotary_modules(model)
        seen = set()  # the rotation and frequencies: once per distinct plan (layers of a type share code)
        for layer in m.layers:
            i = layer.layer
            where = f"{model_type} layer {i} ({layer.layer_type})"
            if layer_types is not None:
                assert layer.layer_type == layer_types[i], where
            call = rotated.get(i)
            if call is None:  # linear attention, convolution: no softmax attention in transformers
                assert layer.position == "none", f"{where}: transformers calls no attention here"
                if layer.layer_type != "cross_attention":  # (mllama: no image in this run)
                    assert not layer.softmax_attention, f"{where}: transformers calls no attention here"
                continue
            assert layer.softmax_attention, f"{where}: transformers attends here"
            a = layer.attention
            kw = call["kwargs"]
            attn = capture.modules[i]
            scaling = kw.get("scaling", getattr(attn, "scaling", None))
            if model_type == "esm":  # q is multiplied by head^-0.5 before RoPE, the kernel uses 1.0
                assert scaling == 1.0, where  # (EsmSelfAttention.forward: the same scores)
                scaling = attn.self.attention_head_size ** -0.5
            if model_type in ("opt", "kosmos_2_5_text_model"):  # q times self.scaling first, the kernel 1.0
                scaling = attn.scaling  # (OPTAttention.forward, Kosmos2_5TextAttention.forward)
            if model_type == "openai_privacy_filter":  # q and k each times head_dim^-0.25 after RoPE, the
                assert scaling == 1.0, where           # kernel then 1.0 (modeling_openai_privacy_filter.py)
                scaling = attn.scaling ** 2
            if model_type.startswith("muse_"):  # the normed q times qk_scale_factor before RoPE (linear in q)
                scaling = scaling * config.qk_scale_factor  # (modeling_muse_glimmer.py MuseGlimmerAttention)
            assert a.softmax_scale == pytest.approx(scaling, rel=1e-12), where
            assert (a.softcap or None) == kw.get("softcap"), where
            if "sliding_window" in kw:
                assert a.window == (kw["sliding_window"] or 0), where
            assert a.sinks == (getattr(attn, "sinks", None) is not None), where  # (mimo: None on full layers)
            hf_mask = allowed_mask(call["mask"], T)
            if hf_mask is not None:
                assert torch.equal(hf_mask, posenc_mask(a, T)), f"{where}: mask"
            else:  # no mask tensor: eager attention attends to every key (bert without is_decoder; a window
                # wider than the T keys: modernbert's sliding layers)
                assert posenc_mask(a, T).all(), f"{where}: no mask in transformers"
            if layer.position == "learned":  # the table: max_position_embeddings + offset rows
                table = next(mod for n, mod in model.named_modules()
                             if n.endswith(("wpe", "embed_positions", "position_embeddings")))
                assert table.num_embeddings == m.max_position_embeddings + m.learned_position_offset, where
                assert learned_offset(table) == m.learned_position_offset, where
            if layer.position == "sinusoidal":
                check_sinusoidal_table(m, model, where)
            if layer.position in ("learned", "alibi", "t5", "sinusoidal"):
                continue  # no rotation
            key = (layer.layer_type, layer.position, repr(layer.rope), layer.rotary_dims)
            if key in seen:
                continue
            if layer.position == "none" and not rotaries:  # no rotary module: nothing can rotate
                continue
            seen.add(key)
            # the rotation: this layer once more, without RoPE
            plain = run(model, ids, pos, identity_layer=i, capture=capture)[i]
            permuted = model_type in PERMUTED_WRITE_BACK and getattr(text, "rope_interleave", True)
            after = dict.fromkeys(("query", "key"))
            if model_type == "llama4_text" and text.use_qk_norm:  # an L2 norm (cancels any attention factor)
                after = dict.fromkeys(("query", "key"),
                                      lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
            if model_type == "nanochat":  # weightless RMS norms after RoPE (NanoChatAttention.forward)
                eps = text.rms_norm_eps
                after = dict.fromkeys(("query", "key"),
                                      lambda x, eps=eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                                                          + eps))
            # hunyuan_v1: RMS norms after RoPE (modeling_hunyuan_v1_dense.py HunYuanDenseV1Attention.forward)
            if model_type.startswith("hunyuan_v1"):
                after = {"query": attn.query_layernorm, "key": attn.key_layernorm}
            for t in ("query", "key"):
                assert_rotation(f"{where} {t}", call[t], plain[t], layer, pos.numpy(), seq_len, permuted,
                                after[t])
            # the frequencies of the family's rotary module at several lengths
            if layer.position == "rope":
                rotary = rotary_for_layer(rotaries, i, layer.rope.base)
                scaled = getattr(text, "rope_scaling_layers",
                                 None)  # molmo2: the others take the unscaled module
                if model_type == "molmo2_text" and scaled is not None and i not in scaled:
                    rotary = next(r for n, r in rotaries.items() if n.endswith("rotary_emb_unscaled"))
                assert rotary is not None, f"{where}: no rotary module in transformers"
                s = layer.rope.scaling
                original = s.original_max_position_embeddings or m.max_position_embeddings or 4096
                for n in sorted({1, original, 2 * original}):
                    want, want_factor = hf_frequencies(rotary, layer.layer_type, n,
                                                       layer.rope.num_position_streams)
                    if layer.rope.multimodal == "mrope_alternating_hw":  # ERNIE's buffer: the first 2h
                        hw = 2 * layer.rope.mrope_section[0]  # frequencies even then odd (pre-permuted)
                        natural = want.clone()
                        natural[:hw][0::2], natural[:hw][1::2] = want[:hw // 2], want[hw // 2:hw]
                        want = natural
                    got, got_factor = layer.inv_freq(n)
                    assert got.shape == tuple(want.shape), f"{where} seq_len {n}"
                    np.testing.assert_allclose(got, want.double().numpy(), rtol=2e-6,
                                               err_msg=f"{where} seq_len {n}")
                    assert got_factor == pytest.approx(float(want_factor), rel=1e-6), f"{where} seq_len {n}"
    finally:
        capture.close()


def check_mobilebert(config, where):
    """MobileBERT's heads split true_hidden_size (modeling_mobilebert.py MobileBertSelfAttention.__init__):
    the q and k its attention function receives, per layer, against the plan's head; then the family's checks
    (scale, mask, the learned table)."""
    m = plan(config.to_dict())
    model = build(config)
    capture = Capture(model)
    try:
        torch.manual_seed(1)
        ids = torch.randint(1, config.vocab_size, (1, T))
        calls = run(model, ids, torch.arange(T)[None], capture=capture)
    finally:
        capture.close()
    assert sorted(calls) == list(range(m.num_layers)), where
    for layer in m.layers:
        q, k = calls[layer.layer]["query"], calls[layer.layer]["key"]
        assert q.shape[1] == k.shape[1] == m.num_heads, f"{where} layer {layer.layer}"
        assert q.shape[-1] == k.shape[-1] == layer.qk_head_dim == layer.v_head_dim, \
            f"{where} layer {layer.layer}"
    check_family("mobilebert", config)
