"""T5Gemma (transformers 5.23 models/t5gemma: an encoder and a decoder of Gemma 2 layers) against posenc's
plan (src/model/t5gemma.cc), on shrunk models run with eager attention: per self-attention layer the
scale, softcap and mask its attention function receives and the q / k rotation (apply_rotary_pos_emb's
inputs and outputs against posenc.rope); the decoder's cross-attention unrotated, unmasked, with the
decoder's scale and softcap."""
import sys
import warnings

import numpy as np
import pytest
import torch
from transformers import T5GemmaConfig, T5GemmaEncoderModel, T5GemmaModel

import posenc

T = 10


def stack(**kw):
    """A shrunk T5GemmaModuleConfig (positional fields at their defaults unless given)."""
    return {**dict(hidden_size=64, intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, vocab_size=256), **kw}


def allowed(mask, t):
    if mask is None:
        return torch.ones(t, t, dtype=torch.bool)
    m = mask[0, 0, -t:, -t:]
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


def planned(a, t):
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    ok = np.ones((t, t), bool)
    if a.causal:
        ok &= j <= i
    if a.window:
        ok &= np.abs(i - j) < a.window
    return torch.from_numpy(ok)


def run(model, decoder):
    """Per attention module name: the eager_attention_forward call and the rotation it applied."""
    module = sys.modules[type(model).__module__]
    names = {mod: name for name, mod in model.named_modules()}
    calls, rotations, current = {}, {}, [None]

    def attend(orig):
        def wrapper(mod, query, key, value, attention_mask, *args, **kwargs):
            calls[names[mod]] = dict(mask=attention_mask, **{k: v for k, v in kwargs.items()
                                                              if not torch.is_tensor(v)})
            return orig(mod, query, key, value, attention_mask, *args, **kwargs)
        return wrapper

    def rotate(orig):
        def wrapper(q, k, cos, sin, *args, **kwargs):
            q2, k2 = orig(q, k, cos, sin, *args, **kwargs)
            rotations[current[0]] = (q.clone(), k.clone(), q2.clone(), k2.clone())
            return q2, k2
        return wrapper

    hooks = [mod.register_forward_pre_hook(lambda m, *_: current.__setitem__(0, names[m]))
             for mod in model.modules() if type(mod).__name__.endswith("Attention")]
    originals = module.eager_attention_forward, module.apply_rotary_pos_emb
    module.eager_attention_forward, module.apply_rotary_pos_emb = attend(originals[0]), rotate(originals[1])
    try:
        torch.manual_seed(1)
        ids = torch.randint(1, 256, (1, T))
        inputs = dict(input_ids=ids, decoder_input_ids=ids) if decoder else dict(input_ids=ids)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(**inputs, use_cache=False)
    finally:
        module.eager_attention_forward, module.apply_rotary_pos_emb = originals
        for h in hooks:
            h.remove()
    return calls, rotations


def check(config_dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = T5GemmaConfig(**{k: v for k, v in config_dict.items() if k != "model_type"})
    config._attn_implementation = "eager"
    config.encoder._attn_implementation = config.decoder._attn_implementation = "eager"
    decoder = config.is_encoder_decoder
    torch.manual_seed(0)
    model = (T5GemmaModel if decoder else T5GemmaEncoderModel)(config).eval()
    m = posenc.ModelPositions.from_hf(config.to_dict(), warn=False)
    calls, rotations = run(model, decoder)
    n_enc = config.encoder.num_hidden_layers
    assert m.num_layers == n_enc + (config.decoder.num_hidden_layers if decoder else 0)
    for layer in m.layers:
        enc = layer.layer < n_enc
        name = (f"encoder.layers.{layer.layer}.self_attn" if enc
                else f"decoder.layers.{layer.layer - n_enc}.self_attn")
        assert layer.layer_type == ("encoder" if enc else "decoder"), name
        call, a = calls[name], layer.attention
        assert a.softmax_scale == pytest.approx(call["scaling"], rel=1e-12), name
        assert (a.softcap or None) == call.get("softcap"), name
        assert torch.equal(allowed(call["mask"], T), planned(a, T)), f"{name}: mask"
        q, k, q_hf, k_hf = rotations[name]
        assert layer.position == "rope" and layer.rotary_dims == (0, q.shape[-1]), name
        for x, want in ((q, q_hf), (k, k_hf)):
            got = posenc.rope(x.transpose(1, 2).numpy(), np.arange(T), config=layer.rope, seq_len=T)
            torch.testing.assert_close(torch.from_numpy(got).transpose(1, 2), want, atol=1e-5, rtol=1e-5,
                                       msg=lambda msg, name=name: f"{name}: {msg}")
        if not enc:  # the cross-attention: no rotation, every encoder key, the decoder's scale and softcap
            cross = name.replace("self_attn", "cross_attn")
            assert cross in calls and cross not in rotations, cross
            assert calls[cross]["scaling"] == pytest.approx(a.softmax_scale, rel=1e-12)
            assert calls[cross].get("softcap") == (a.softcap or None)
            assert allowed(calls[cross]["mask"], T).all(), cross
    return m


def test_t5gemma_default_stacks_against_transformers():
    """The class's layer pattern (sliding on even layers), sliding_window 3 to show in T keys: the encoder's
    symmetric |q - k| <= 3 (posenc window 4), the decoder's 3 causal keys."""
    m = check(dict(encoder=stack(sliding_window=3), decoder=stack(sliding_window=3)))
    assert [layer.attention.window for layer in m.layers] == [4, 0, 4, 3, 0, 3]
    assert m.max_position_embeddings == m.encoder_max_position_embeddings == 8192


def test_t5gemma_stacks_of_their_own_against_transformers():
    """Each stack reads its own keys: layer counts, windows, bases, query_pre_attn_scalar, softcap."""
    m = check(dict(encoder=stack(num_hidden_layers=2, sliding_window=2,
                                 rope_parameters={"rope_type": "default", "rope_theta": 5e4}),
                   decoder=stack(num_hidden_layers=4, sliding_window=5, query_pre_attn_scalar=64,
                                 attn_logit_softcapping=20.0,
                                 layer_types=["full_attention", "sliding_attention"] * 2)))
    assert [layer.rope.base for layer in m.layers] == [5e4] * 2 + [1e4] * 4
    assert [layer.attention.window for layer in m.layers] == [3, 0, 0, 5, 0, 5]
    assert {layer.attention.softcap for layer in m.layers[2:]} == {20.0}


def test_t5gemma_encoder_alone_against_transformers():
    """is_encoder_decoder false: T5GemmaEncoderModel, the encoder's layers alone."""
    m = check(dict(encoder=stack(sliding_window=3), decoder=stack(), is_encoder_decoder=False))
    assert {layer.layer_type for layer in m.layers} == {"encoder"} and m.encoder_max_position_embeddings == 0


def test_t5gemma_missing_stack_and_errors_name_it():
    """A missing stack is T5GemmaModuleConfig's defaults (26 layers); errors and warnings name the stack."""
    m = posenc.ModelPositions.from_hf({"model_type": "t5gemma", "encoder": stack()}, warn=False)
    assert m.num_layers == 3 + 26
    with pytest.raises(posenc.Error, match=r"decoder\.num_attention_heads = 0 is invalid"):
        posenc.ModelPositions.from_hf({"model_type": "t5gemma", "decoder": stack(num_attention_heads=0)})
    with pytest.raises(posenc.Error, match=r"encoder = 3 is invalid: must be an object"):
        posenc.ModelPositions.from_hf({"model_type": "t5gemma", "encoder": 3})
    with pytest.warns(posenc.PositionWarning, match=r"^encoder: key 'rope_magic'"):
        posenc.ModelPositions.from_hf({"model_type": "t5gemma", "encoder": {**stack(), "rope_magic": 1}})
