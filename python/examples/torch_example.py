# The PyTorch example of docs/python.md (run by python/tests/test_examples.py).
import torch

import posenc.torch as pt

# a model's config.json, as a dict or a path
config = {"hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0,
          "max_position_embeddings": 2048, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
rotary = pt.RotaryEmbedding.from_hf(config)
t5 = pt.T5RelativeBias(n_heads=4, num_buckets=32, max_distance=128)          # weight [32, 4], like HF T5
q = torch.randn(2, 100, 4, 64, requires_grad=True)                           # [batch, seq, heads, head_dim]
k = torch.randn(2, 100, 4, 64, requires_grad=True)
v = torch.randn(2, 100, 4, 64, requires_grad=True)
q_rot, k_rot = rotary(q, k)                                                  # positions 0..99 by default
out = pt.attention(q_rot, k_rot, v, causal=True, encoding="t5", relative_table=t5.weight, bidirectional=False)
out.sum().backward()                                                         # grads for q, k, v and t5.weight
print(out.shape, q.grad.shape, t5.weight.grad.abs().sum() > 0)
