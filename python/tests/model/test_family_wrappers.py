"""Multimodal and other wrappers: each wrapper's own config gives the plan of its text config, its text
class wins over the text config's model_type, its default text type fills a missing one, and its
flat form is read as its class reads it (or warned)."""
import copy
import re
import warnings

import pytest
import transformers
from transformers.models.auto import configuration_auto

import posenc
from family_harness import (
    one_thread,  # noqa: F401  (an autouse fixture: one torch thread)
    plan,
)
from family_tables import WRAPPERS


@pytest.mark.parametrize("wrapper,text_type", WRAPPERS)
def test_wrapper_gives_its_text_config_plan(wrapper, text_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = configuration_auto.CONFIG_MAPPING[wrapper]()
    outer, inner = config.to_dict(), config.get_text_config().to_dict()
    try:
        want = plan(inner)
    except posenc.Error:
        with pytest.raises(posenc.Error, match=f"'?({text_type}|{wrapper})('|'s )"):
            plan(outer)
        return
    try:
        got = plan(outer)
    except posenc.Error as exc:  # a wrapper without text_config (vision-encoder-decoder): refused by name
        assert f"'{wrapper}'" in str(exc), str(exc)
        return
    assert got.model_type == want.model_type and got.num_layers == want.num_layers
    assert [repr(a) for a in got.layers] == [repr(b) for b in want.layers]


def _text_class_wrappers():
    """(wrapper, text model_type) for every config class whose sub_configs_defaults names a concrete class
    for text_config (not AutoConfig): SubConfigSpec.create_subconfig (configuration_utils.py) builds
    text_config with that class whatever model_type the dict has or lacks."""
    out = []
    for mt, cls in configuration_auto.CONFIG_MAPPING.items():
        spec = (getattr(cls, "sub_configs_defaults", None) or {}).get("text_config")
        if spec is not None and isinstance(spec.config_class, type) and \
                issubclass(spec.config_class, transformers.PreTrainedConfig):
            out.append((mt, spec.config_class.model_type))
    return sorted(out)


TEXT_CLASS_WRAPPERS = _text_class_wrappers()


def _outcome(d):
    """posenc's plan of d as comparable values, or its error message without the text_config. prefix."""
    try:
        m = plan(d)
    except posenc.Error as exc:
        return "error", str(exc).replace("text_config.", "")
    return m.model_type, m.num_layers, [repr(a) for a in m.layers]


def test_text_class_wrappers_are_found():
    found = dict(TEXT_CLASS_WRAPPERS)
    for wrapper, text_type in [("aria", "aria_text"), ("deepseek_ocr2", "deepseek_ocr2_text"),
                               ("emu3", "emu3_text_model"), ("granite_docling", "granite_docling_text"),
                               ("pix2struct", "pix2struct_text_model"), ("molmo2", "molmo2_text"),
                               ("qwen2_5_omni_thinker", "qwen2_5_omni_text"),
                               ("qwen3_5_moe", "qwen3_5_moe_text"), ("qwen3_vl_moe", "qwen3_vl_moe_text"),
                               ("gemma3", "gemma3_text")]:
        assert found.get(wrapper) == text_type, (wrapper, found.get(wrapper))


@pytest.mark.parametrize("wrapper,text_type", TEXT_CLASS_WRAPPERS)
def test_wrapper_text_class_wins_over_text_config_model_type(wrapper, text_type):
    """A wrapper with a concrete text class builds a text_config without model_type, and one whose model_type
    names another family, as that class (configuration_utils.py SubConfigSpec.create_subconfig; to_dict writes
    the class's model_type): posenc's plan of the wrapper's dict must be the plan of
    get_text_config().to_dict() (or the same refusal), with a warning naming an ignored model_type
    (Step3p7Config.__post_init__ pops it silently, configuration_step3p7.py)."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        untyped = {k: v for k, v in cls().text_config.to_dict().items() if k != "model_type"}
    for given in (None, "llama"):
        text = {**copy.deepcopy(untyped), **({"model_type": given} if given else {})}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(text_config=copy.deepcopy(text))
        inner = config.get_text_config().to_dict()
        assert type(config.get_text_config()).model_type == inner["model_type"] == text_type
        want = _outcome(inner)
        got = _outcome({**config.to_dict(), "text_config": text})
        assert got == want, (given, got, want)
        if want[0] == "error":
            assert re.search(rf"'?({re.escape(text_type)}|{re.escape(wrapper)})('|'s )", got[1]), got[1]
            continue
        warned = [w for w in plan({**config.to_dict(), "text_config": text}).warnings if "is ignored" in w]
        if given and wrapper != "step3p7":
            assert any(f'text_config.model_type = "{given}" is ignored' in w and f"'{text_type}'" in w
                       for w in warned), warned
        else:
            assert not any("model_type" in w for w in warned), warned


def _default_text_wrappers():
    """(wrapper, default text model_type) for every config class whose sub_configs_defaults gives text_config
    an AutoConfig spec: SubConfigSpec.create_subconfig (configuration_utils.py) builds a text_config
    dict as the class of its own model_type, or of the spec's default model_type where it has none."""
    out = []
    for mt, cls in configuration_auto.CONFIG_MAPPING.items():
        spec = (getattr(cls, "sub_configs_defaults", None) or {}).get("text_config")
        if spec is not None and not (isinstance(spec.config_class, type) and
                                     issubclass(spec.config_class, transformers.PreTrainedConfig)):
            out.append((mt, spec.model_type))
    return sorted(out)


DEFAULT_TEXT_WRAPPERS = _default_text_wrappers()


# Text config keys a wrapper's validate_architecture needs (the default text class's values fail it).
WRAPPER_TEXT_KEYS = {"gemma4_assistant": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}}


def test_default_text_wrappers_are_found():
    found = dict(DEFAULT_TEXT_WRAPPERS)
    for wrapper, text_type in [("llava", "llama"), ("mistral3", "mistral"), ("paligemma", "gemma"),
                               ("internvl", "qwen2"), ("voxtral", "llama"), ("idefics2", "mistral"),
                               ("blip-2", "opt"), ("shieldgemma2", "gemma3_text"),
                               ("sam3", "clip_text_model"),
                               ("exaone4_5", "exaone4")]:
        assert found.get(wrapper) == text_type, (wrapper, found.get(wrapper))
    assert not set(found) & {w for w, _ in TEXT_CLASS_WRAPPERS}


@pytest.mark.parametrize("wrapper,default_type", DEFAULT_TEXT_WRAPPERS)
def test_wrapper_default_text_type_fills_a_missing_model_type(wrapper, default_type):
    """A wrapper with an AutoConfig text spec builds a text_config without model_type as its default type
    (LlavaConfig: llama): posenc's plan of {"model_type": wrapper, "text_config": dict without model_type}
    must be the plan of get_text_config().to_dict() (or the same refusal, naming the text family). A present
    model_type keeps winning. Exaone4_5_Config.__post_init__ fails without one (configuration_exaone4_5.py):
    refused."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = cls(text_config=copy.deepcopy(WRAPPER_TEXT_KEYS[wrapper])) if wrapper in WRAPPER_TEXT_KEYS \
            else cls()
    untyped = {k: v for k, v in base.get_text_config().to_dict().items() if k != "model_type"}
    got = _outcome({"model_type": wrapper, "text_config": copy.deepcopy(untyped)})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(text_config=copy.deepcopy(untyped))
    except KeyError:
        assert wrapper == "exaone4_5"
        assert got[0] == "error" and f"'{wrapper}'" in got[1], got
        return
    inner = config.get_text_config().to_dict()
    assert type(config.get_text_config()).model_type == inner["model_type"] == default_type
    want = _outcome(inner)
    assert got == want, (got[:2], want[:2])
    if want[0] == "error":
        assert re.search(rf"'{re.escape(default_type)}'|'{re.escape(want[1].split(chr(39))[1])}'", got[1])
        assert f"'{wrapper}'" not in got[1], got[1]
    # Sparse dicts, untyped and of another family: the keys the class fills back (voxtral, glmasr, pe_audio
    # fill theirs from the spec's init_kwargs, kWrapperTextKwargs) must be the ones posenc plans with.
    other = "mistral" if default_type == "llama" else "llama"
    for sparse in ({"num_hidden_layers": 2}, {"model_type": other, "num_hidden_layers": 2}):
        text = {**WRAPPER_TEXT_KEYS.get(wrapper, {}), **sparse}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inner = cls(text_config=copy.deepcopy(text)).get_text_config().to_dict()
        except Exception:  # the wrapper validates its text model (gemma4_assistant): no other family
            continue
        assert inner["model_type"] == sparse.get("model_type", default_type)
        assert _outcome({"model_type": wrapper, "text_config": text}) == _outcome(inner), sparse


def _wrapper_text(wrapper):
    """The keys of the text config of the wrapper class's defaults, or None where they cannot be tested flat:
    the class cannot be built from its defaults, or its text config has no max_position_embeddings to mark
    the flat keys by (clvp_encoder, pix2struct_text_model)."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            base = cls(text_config=copy.deepcopy(WRAPPER_TEXT_KEYS.get(wrapper))) \
                if wrapper in WRAPPER_TEXT_KEYS else cls()
        except Exception:
            return None
    text = {k: v for k, v in base.get_text_config().to_dict().items() if k != "model_type"}
    return text if isinstance(text.get("max_position_embeddings"), int) else None


FLAT_WRAPPERS = [(wrapper, text_type)
                 for wrapper, text_type in sorted(set(TEXT_CLASS_WRAPPERS) | set(DEFAULT_TEXT_WRAPPERS))
                 if _wrapper_text(wrapper) is not None]


@pytest.mark.parametrize("wrapper,text_type", FLAT_WRAPPERS)
def test_flat_wrapper_config_is_read_as_its_class_reads_it_or_warned(wrapper, text_type):
    """A wrapper's config saved flat (the text model's keys at the top level, no text_config). Qwen2-VL's
    class and a few others build text_config from those keys (wrapper_reads_flat_keys): posenc's plan must be
    the plan of get_text_config().to_dict(), without a warning. The others ignore them and build their text
    class's defaults (a Llama 4 config flattened for another engine): where the wrapper's own type names a
    text model in posenc's table, posenc reads the keys as the file means them and must say that transformers
    would not; other wrappers (llava, blip-2: keys of their own at the top level) are refused by name.
    RopeConfig.from_hf reads the flat form by the same rules (never by the generic ones where it is
    planned)."""
    cls = configuration_auto.CONFIG_MAPPING[wrapper]
    text = _wrapper_text(wrapper)
    text["max_position_embeddings"] *= 2  # read from the flat keys, or the class default
    flat = {**text, "model_type": wrapper}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inner = cls(**copy.deepcopy(flat)).get_text_config()
    except Exception:  # the class cannot take its own text keys flat (fuyu): posenc refuses or warns below
        inner = None
    reads = inner is not None and inner.max_position_embeddings == text["max_position_embeddings"]
    got = _outcome(flat)
    if wrapper == "fuyu":  # FuyuConfig forwards some keys only: refused flat, by name
        assert got[0] == "error" and "'fuyu' without text_config" in got[1], got
        return
    # refused by name (exaone4_5: a typed text_config only)
    if got[0] == "error" and f"'{wrapper}'" in got[1]:
        assert not reads or wrapper == "fuyu", got[1]
        return
    with warnings.catch_warnings(record=True) as rope_warnings:
        warnings.simplefilter("always")
        try:
            posenc.RopeConfig.from_hf(copy.deepcopy(flat))
        except posenc.Error:
            pass
    messages = [str(w.message) for w in rope_warnings]
    assert not any("generic rules" in w for w in messages), messages
    # The same plan, or the same refusal, as the text model's own dict.
    assert got == _outcome(inner.to_dict() if reads else {**text, "model_type": text_type}), got[:2]
    if got[0] == "error":
        return
    warned = [w for w in plan(flat).warnings if "without text_config" in w]
    if reads:
        assert not warned, warned
    else:
        assert any(f"model_type '{wrapper}' without text_config" in w
                   and "transformers 5 reads text_config only" in w for w in warned), warned
