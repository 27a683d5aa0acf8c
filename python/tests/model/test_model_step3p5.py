"""Step 3.5's text model (model_type step3p5; Step3p7Config's text_config) against transformers 5.23's own
modules, in each config form its config class converts (configuration_step3p7.py __post_init__): the hub
form's per-layer lists padded with the MTP layer's entry, rope_scaling merged into full_attention (a legacy
"type" left unconverted), a flat rope_parameters it does not read, per-layer head counts, bidirectional
attention. Each form runs the families harness's whole check (family_harness.check_family: frequencies,
attention factors, windows, scale, and the rotation captured from a forward pass)."""
import warnings

import pytest

import posenc

pytest.importorskip("torch")
from family_harness import check_family  # noqa: E402
from family_tables import FAMILY_KWARGS, LAYERS  # noqa: E402

HUB_FORM = FAMILY_KWARGS["step3p5"]


def text_config(**changes):
    from transformers.models.step3p7.configuration_step3p7 import Step3p7TextConfig

    kw = dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              num_hidden_layers=LAYERS, vocab_size=128, **HUB_FORM)
    kw.update(changes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Step3p7TextConfig(**{k: v for k, v in kw.items() if v is not None})


@pytest.mark.parametrize("name,changes", [
    ("hub form", {}),
    ("sliding heads", dict(attention_other_setting={"num_attention_heads": 2, "num_attention_groups": 2})),
    ("legacy type", dict(rope_scaling={"type": "linear", "factor": 2.0})),
    ("yarn", dict(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                "original_max_position_embeddings": 512})),
    ("one base", dict(rope_theta=5e5, partial_rotary_factors=None)),
    ("bidirectional", dict(use_bidirectional_attention=True)),
    ("query scalar", dict(query_pre_attn_scalar=64)),
])
def test_step3p5_forms_against_transformers(name, changes):
    config = text_config(**changes)
    check_family("step3p5", config, name)


def test_hub_form_as_saved_and_as_given_plan_alike():
    """The file StepFun ships (padded lists, rope_theta per layer) and the one transformers saves
    (rope_parameters per type, per_layer_config) give one plan."""
    d = dict(model_type="step3p5", hidden_size=64, num_attention_heads=4, head_dim=16,
             num_hidden_layers=LAYERS, **HUB_FORM)
    given = posenc.ModelPositions.from_hf(d)
    saved = posenc.ModelPositions.from_hf(text_config().to_dict())
    assert [lay.layer_type for lay in given.layers] == [lay.layer_type for lay in saved.layers]
    for a, b in zip(given.layers, saved.layers):
        assert a.rotary_dims == b.rotary_dims and a.attention.window == b.attention.window
        for seq_len in (1, 16, 32, 4096):
            ga, fa = a.inv_freq(seq_len)
            gb, fb = b.inv_freq(seq_len)
            assert (ga == gb).all() and fa == fb


def test_wrapper_reads_its_text_config():
    inner = dict(hidden_size=64, num_attention_heads=4, head_dim=16, num_hidden_layers=LAYERS, **HUB_FORM)
    wrapped = posenc.ModelPositions.from_hf({"model_type": "step3p7", "text_config": inner})
    alone = posenc.ModelPositions.from_hf(dict(inner, model_type="step3p5"))
    assert wrapped.model_type == "step3p5"
    assert [lay.rope.base for lay in wrapped.layers] == [lay.rope.base for lay in alone.layers]
