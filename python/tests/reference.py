"""Naive double-precision references for the Python tests: plain formulas and loops, written from
the papers, independent of posenc's code paths."""
from __future__ import annotations

import math

import numpy as np


def sinusoidal(positions, dim, base=10000.0, layout="interleaved"):
    out = np.zeros((len(positions), dim))
    for n, p in enumerate(positions):
        for i in range(dim // 2):
            w = base ** (-2.0 * i / dim)
            s, c = math.sin(p * w), math.cos(p * w)
            if layout == "interleaved":
                out[n, 2 * i], out[n, 2 * i + 1] = s, c
            else:
                out[n, i], out[n, dim // 2 + i] = s, c
    return out


def rope(x, positions, inv_freq, layout="half", attention_factor=1.0):
    """x [B, T, H, D] rotated; positions [T] or [B, T]; pairs per layout; the rest passes."""
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    B, T, H, D = x.shape
    R = 2 * len(inv_freq)
    pos = np.broadcast_to(np.asarray(positions), (B, T))
    for b in range(B):
        for t in range(T):
            for j, f in enumerate(inv_freq):
                angle = float(pos[b, t]) * f
                c, s = math.cos(angle) * attention_factor, math.sin(angle) * attention_factor
                a, bb = (j, j + R // 2) if layout == "half" else (2 * j, 2 * j + 1)
                xa, xb = x[b, t, :, a], x[b, t, :, bb]
                out[b, t, :, a] = xa * c - xb * s
                out[b, t, :, bb] = xb * c + xa * s
            if attention_factor != 1.0:
                out[b, t, :, R:] = x[b, t, :, R:]
    return out


def attention(q, k, v, causal, scale, bias=None, q_positions=None, k_positions=None, shaw_a_k=None,
              shaw_a_v=None, extra_logits=None, softcap=0.0, sinks=None, chunk=0, window=0):
    """Materialised softmax attention in double. bias [H, Q, K] added after scaling; Shaw's terms
    with r = clip(k - q) rows; extra_logits [B, H, Q, K] (e.g. Transformer-XL's terms) scaled with
    q . k; GQA by repeating k/v heads. softcap: tanh(x / cap) * cap on the scaled logits before the
    bias and the mask (Gemma 2's eager attention); sinks [H]: a logit column joined to each row's
    softmax, then dropped (gpt-oss's eager attention); chunk: keys of the query's chunk only
    (floor(q / chunk) == floor(k / chunk), Llama 4); window: |q - k| < window."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    B, Q, H, D = q.shape
    K, Hkv = k.shape[1], k.shape[2]
    qp = np.arange(K - Q, K) if q_positions is None else np.asarray(q_positions)
    kp = np.arange(K) if k_positions is None else np.asarray(k_positions)
    out = np.zeros((B, Q, H, v.shape[3]))
    for b in range(B):
        for h in range(H):
            g = h // (H // Hkv)
            logits = q[b, :, h] @ k[b, :, g].T
            if shaw_a_k is not None:
                kmax = (shaw_a_k.shape[0] - 1) // 2
                r = np.clip(kp[None, :] - qp[:, None], -kmax, kmax) + kmax
                logits = logits + np.einsum("id,ijd->ij", q[b, :, h], np.asarray(shaw_a_k, np.float64)[r])
            if extra_logits is not None:
                logits = logits + extra_logits[b, h]
            logits = logits * scale
            if softcap:
                logits = np.tanh(logits / softcap) * softcap
            if bias is not None:
                logits = logits + bias[h]
            if causal:
                logits = np.where(kp[None, :] <= qp[:, None], logits, -np.inf)
            if chunk:
                logits = np.where(kp[None, :] // chunk == qp[:, None] // chunk, logits, -np.inf)
            if window:
                logits = np.where(np.abs(qp[:, None] - kp[None, :]) < window, logits, -np.inf)
            if sinks is not None:
                logits = np.concatenate([logits, np.full((Q, 1), float(sinks[h]))], axis=1)
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            if sinks is not None:
                p = p[:, :-1]
            out[b, :, h] = p @ v[b, :, g]
            if shaw_a_v is not None:
                kmax = (shaw_a_v.shape[0] - 1) // 2
                r = np.clip(kp[None, :] - qp[:, None], -kmax, kmax) + kmax
                out[b, :, h] += np.einsum("ij,ijd->id", p, np.asarray(shaw_a_v, np.float64)[r])
    return out


def finite_difference(f, x, grad_out, h=1e-6):
    """d sum(f(x) * grad_out) / dx by central differences, in double."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + h
        up = np.sum(f(x) * grad_out)
        flat[i] = saved - h
        down = np.sum(f(x) * grad_out)
        flat[i] = saved
        g.reshape(-1)[i] = (up - down) / (2 * h)
    return g
