# The numpy example of docs/python.md (run by python/tests/test_examples.py).
import numpy as np

import posenc

pe = posenc.sinusoidal(np.arange(128), 64)                   # [128, 64] float32, Vaswani et al.
inv_freq, attn_factor = posenc.rope_inv_freq(                # what HF's ROPE_INIT_FUNCTIONS return
    128, base=1e6, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                 "original_max_position_embeddings": 32768},
    max_position_embeddings=32768)
q = np.random.randn(1, 256, 8, 128).astype(np.float32)       # [batch, seq, heads, head_dim]
k = np.random.randn(1, 256, 2, 128).astype(np.float32)       # grouped-query: 2 key/value heads
v = np.random.randn(1, 256, 2, 128).astype(np.float32)
q_rot = posenc.rope(q, np.arange(256), base=1e6)             # a rotated copy (posenc.rope_ rotates in place)
out = posenc.attention(q, k, v, causal=True, encoding="rope+alibi", base=1e6)  # fused: no [256, 256] scores
buckets = posenc.t5_buckets(np.arange(-5, 6))                # T5's _relative_position_bucket
try:
    posenc.rope(q, np.arange(256), rotary_dim=130)
except ValueError as e:                                      # posenc.Error is a ValueError
    print(e)
print(out.shape, attn_factor, buckets)
