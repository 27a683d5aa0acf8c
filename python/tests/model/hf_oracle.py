"""What the model-reader tests share: the collection of real configs (tests/data/hf_configs) and the
transformers side of the comparison, a rotary module's frequencies as its forward computes them."""
import os

HF_CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "data", "hf_configs")


def hf_frequencies(rotary, layer_type, seq_len, streams):
    """(inv_freq, attention_scaling) of a transformers rotary module after a forward call whose largest
    position is seq_len - 1 (dynamic_rope_update picks longrope's short / long factors, or grows dynamic's
    base, from it). streams = 3: M-RoPE positions (one per axis). Modules with one set of buffers per layer
    type (layer_types and a dict rope_type: Gemma 3's) are read for `layer_type`; the others (ESM's empty
    dict included) have one set."""
    import torch  # (only the comparisons need it)

    x = torch.zeros(1, 1, 8)
    pos = torch.tensor([[seq_len - 1]])
    if streams == 3:
        pos = pos[None].expand(3, 1, 1)
    rope_type = getattr(rotary, "rope_type", None)
    if hasattr(rotary, "layer_types") and isinstance(rope_type, dict) and rope_type:
        rotary(x, pos, layer_type)
        return getattr(rotary, f"{layer_type}_inv_freq"), getattr(rotary, f"{layer_type}_attention_scaling")
    rotary(x, pos)
    return rotary.inv_freq, rotary.attention_scaling
