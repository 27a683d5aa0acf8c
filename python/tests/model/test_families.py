"""Every family of family_tables against transformers: each variant of its class default config, its
omitted keys and its model_type alone (family_harness.check_family compares them)."""
import re
import warnings

import pytest
import torch

import posenc
from family_harness import (
    VARIANTS,
    build,
    check_family,
    family_config,
    model_inputs,
    one_thread,  # noqa: F401  (an autouse fixture: one torch thread)
    plan,
    shrunk_kwargs,
    variant_applies,
)
from family_tables import FAMILIES, ILL_FORMED_DEFAULTS, ILL_FORMED_FULL_SIZE, SUPPORTED


def _flat_yarn_dict(model_type):
    """The yarn variant's config has one rope dict with a rope_type (not one per layer type)."""
    config = family_config(model_type, "yarn")
    built = config is not None and not isinstance(config, str)
    rp = getattr(config, "rope_parameters", None) if built else None
    return isinstance(rp, dict) and "rope_type" in rp


# The supported families whose yarn variant has a flat rope dict to add partial_rotary_factor to.
FLAT_YARN = [model_type for model_type in sorted(set(FAMILIES) & SUPPORTED) if _flat_yarn_dict(model_type)]
# The variants transformers 5.23 cannot build or run itself (family_config says why: a class that rejects
# the shrunk heads, a head_dim or partial rotation its modeling code ignores, a window argument given twice):
# nothing to compare posenc with. test_transformers_still_rejects checks that each still fails there, so
# that a transformers release that runs one brings it back into the comparison.
TRANSFORMERS_REJECTS = {
    ("apertus", "shape"), ("axk1", "shape"), ("blenderbot", "heads"), ("blenderbot-small", "heads"),
    ("cosmos3_edge_text", "shape"), ("cosmos3_edge_text", "yarn"), ("cwm", "shape"),
    ("deepseek_v3", "shape"), ("ernie4_5_vl_moe_text", "heads"), ("esm", "heads"), ("esmc", "shape"),
    ("falcon", "shape"), ("glm4_moe_lite", "shape"), ("glm4v_moe_text", "heads"),
    ("glm4v_moe_text", "shape"), ("glm_ocr_text", "heads"), ("glm_ocr_text", "shape"), ("gpt_oss", "shape"),
    ("helium", "heads"), ("helium", "shape"), ("higgs_audio_v2", "shape"), ("hunyuan_vl_text", "shape"),
    ("hunyuan_vl_text", "yarn"), ("longcat_flash", "shape"), ("marian", "heads"), ("ministral3", "shape"),
    ("mistral4", "shape"), ("openai_privacy_filter", "shape"), ("paddleocr_vl_text", "shape"),
    ("pegasus", "heads"), ("phi3", "yarn"), ("phi4_multimodal", "yarn"), ("phimoe", "yarn"),
    ("pix2struct_text_model", "heads"), ("qwen2_5_omni_text", "heads"), ("qwen2_5_vl_text", "heads"),
    ("qwen2_vl_text", "heads"), ("qwen3_omni_moe_text", "shape"), ("qwen4_exp_text", "shape"),
    ("qwen4_exp_text", "yarn"), ("solar_open", "shape"), ("step3p5", "window"), ("whisper", "heads"),
    ("youtu", "shape"), ("zaya", "window")}
# Every family with every variant its class defaults give something to change (variant_applies).
ALL_VARIANTS = [(model_type, variant) for model_type in sorted(FAMILIES) for variant in VARIANTS
                if variant_applies(model_type, variant)]
FAMILY_VARIANTS = [pytest.param(model_type, variant, id=f"{model_type}-{variant}")
                   for model_type, variant in ALL_VARIANTS
                   if (model_type, variant) not in TRANSFORMERS_REJECTS]


@pytest.mark.parametrize("model_type", FLAT_YARN)
def test_partial_rotation_of_a_scaled_rope_runs_in_transformers_or_is_refused(model_type):
    """The yarn variant with partial_rotary_factor 0.5 in its dict: every scaling init reads the factor
    (modeling_rope_utils.py), and a family whose apply_rotary_pos_emb rotates the whole head then fails at
    the first forward. posenc must plan it exactly where transformers runs it (the plan is then checked by
    the variants above), and refuse it where transformers fails."""
    rp = family_config(model_type, "yarn").rope_parameters
    text_cls, _ = FAMILIES[model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = text_cls(**shrunk_kwargs(text_cls), rope_parameters={**rp, "partial_rotary_factor": 0.5})
    try:
        model = build(config)
        with torch.no_grad():
            model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
        error = None
    except (RuntimeError, ValueError) as exc:
        error = exc
    if error is None:
        plan(config.to_dict())
    else:
        with pytest.raises(posenc.Error, match="partial_rotary_factor|rope_type|mrope_section|rotary_dim"):
            plan(config.to_dict())


@pytest.mark.parametrize("model_type,variant", FAMILY_VARIANTS)
def test_family_matches_transformers_or_is_refused(model_type, variant):
    config = family_config(model_type, variant)
    assert config is not None, f"{model_type} ({variant}): variant_applies and family_config disagree"
    assert not isinstance(config, str), f"{model_type}: {config} (add it to TRANSFORMERS_REJECTS)"
    try:
        plan(config.to_dict())
    except posenc.Error as exc:
        assert f"'{model_type}'" in str(exc), str(exc)
        if model_type in SUPPORTED and "its rotation covers all" in str(exc):
            # a scaled rope type's partial rotation on a whole-head family (gemma4_text's yarn variant keeps
            # the proportional dict's factor): refused where transformers fails too
            with pytest.raises((RuntimeError, ValueError)), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = build(config)
                model(**model_inputs(model, torch.ones(1, 2, dtype=torch.long)), use_cache=False)
            return
        if model_type in SUPPORTED:
            expected = ILL_FORMED_DEFAULTS.get(model_type, ())
            assert any(e in str(exc) for e in (expected if isinstance(expected, tuple) else (expected,))), \
                f"{model_type} ({variant}) refused: {exc}"
        return
    assert model_type in SUPPORTED, f"{model_type} is planned, yet its bare config is refused by name"
    check_family(model_type, config, variant)


def _without_each_key(config):
    """(key, dict without key) for every key whose absence the config class fills back with the same
    value (config.json files omit class defaults: save_pretrained writes the non-default keys)."""
    cls, d = type(config), config.to_dict()
    same = {k: v for k, v in d.items() if k != "transformers_version"}
    for k in d:
        if k in ("model_type", "transformers_version"):
            continue
        rest = {x: v for x, v in d.items() if x != k}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = cls(**{x: v for x, v in rest.items()
                               if x not in ("model_type", "transformers_version")})
        except Exception:
            continue
        if {x: v for x, v in again.to_dict().items() if x != "transformers_version"} == same:
            yield k, rest


@pytest.mark.parametrize("model_type", sorted(SUPPORTED & set(FAMILIES)))
def test_omitted_keys_take_the_class_defaults(model_type):
    """A key the config class would fill back with the same value may be absent from config.json:
    posenc's plan must not change (gptj's rotary_dim 64, mllama's cross_attention_layers, ...)."""
    for variant in VARIANTS:
        config = family_config(model_type, variant)
        if config is None or isinstance(config, str):
            continue
        try:
            want = [repr(a) for a in plan(config.to_dict()).layers]
        except posenc.Error:
            continue  # refused (ILL_FORMED_DEFAULTS): checked above
        for key, rest in _without_each_key(config):
            got = [repr(a) for a in plan(rest).layers]
            assert got == want, f"{model_type} ({variant}) without {key}"


@pytest.mark.parametrize("model_type", sorted(SUPPORTED & set(FAMILIES)))
def test_model_type_alone_is_the_class_default_config(model_type):
    """{"model_type": t} alone is the config class's default config (every size, head_dim, base and
    window from the class): posenc's plan must equal the plan of the class's full to_dict()."""
    text_cls, _ = FAMILIES[model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = text_cls().to_dict()
    try:
        want = [repr(a) for a in plan(full).layers]
    except posenc.Error as exc:
        assert model_type in ILL_FORMED_FULL_SIZE and ILL_FORMED_FULL_SIZE[model_type] in str(exc), str(exc)
        with pytest.raises(posenc.Error, match=re.escape(ILL_FORMED_FULL_SIZE[model_type])):
            plan({"model_type": model_type})
        return
    alone = plan({"model_type": model_type})
    assert [repr(a) for a in alone.layers] == want
    assert alone.num_heads == plan(full).num_heads


@pytest.mark.parametrize("model_type,variant", sorted(TRANSFORMERS_REJECTS))
def test_transformers_still_rejects(model_type, variant):
    """The variants left out of the comparison: transformers still cannot build or run them (if it can,
    they belong in test_family_matches_transformers_or_is_refused)."""
    assert (model_type, variant) in ALL_VARIANTS, f"{model_type} ({variant}) is no variant of the table"
    config = family_config(model_type, variant)
    assert isinstance(config, str), f"{model_type} ({variant}): transformers runs it now: compare it"
