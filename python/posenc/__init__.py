"""posenc: positional encodings for Transformers, computed by a C++ library.

numpy API (float32 arrays in and out, int64 positions; errors raise posenc.Error, a ValueError
naming the argument): sinusoidal, binary, learned, rope, rope_, rope_backward, rope_inv_freq,
RopeConfig.from_hf, alibi_slopes, alibi_bias, t5_buckets, t5_bias, relative_bias, attention,
ModelPositions.from_hf (a real model's per-layer plan from its config.json), KVCache (decoding),
mrope_positions and mrope_decode_positions (Qwen2-VL / Qwen2.5-VL / Qwen3-VL position ids for text with
images and videos).
PyTorch: posenc.torch (autograd functions and nn.Modules). Plots: python3 -m posenc.plot.
"""
from ._checks import Error
from ._core import (
    bf16_dot_products,
    cuda_built,
    cuda_device_count,
    num_threads,
    set_bf16_dot_products,
    set_num_threads,
)
from .absolute import binary, learned, learned_backward, sinusoidal, sinusoidal_frequencies
from .attention import attention, attention_backward
from .bias import alibi_bias, alibi_slopes, relative_bias, relative_bias_backward, t5_bias, t5_buckets
from .kv_cache import KVCache
from .model import LayerPlan, ModelPositions, PositionWarning
from .mrope import mrope_decode_positions, mrope_positions
from .rope import RopeConfig, RopeScaling, rope, rope_, rope_backward, rope_config, rope_inv_freq

__version__ = "0.1.0"
__all__ = [
    "Error", "sinusoidal", "sinusoidal_frequencies", "binary", "learned", "learned_backward", "rope", "rope_",
    "rope_backward", "rope_inv_freq", "rope_config", "RopeConfig", "RopeScaling", "alibi_slopes",
    "alibi_bias", "t5_buckets", "t5_bias", "relative_bias", "relative_bias_backward", "attention",
    "attention_backward", "ModelPositions", "LayerPlan", "PositionWarning", "KVCache", "mrope_positions",
    "mrope_decode_positions", "set_num_threads", "num_threads", "cuda_built", "cuda_device_count",
    "set_bf16_dot_products", "bf16_dot_products",
]
