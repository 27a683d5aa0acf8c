"""bench/lab_vs_torch.py: the lab's training step beside the same model in PyTorch, in one run.

The model is `posenc lab`'s with encoding none (NoPE) at the scale asked for (bench_lab's context
gives the shape: small, the default protocol, is 2 pre-norm layers, d_model 64, 4 heads, MLP 256,
batch 32 x 64 tokens; medium is 4 layers, d_model 128, 4 heads, MLP 512, 32 x 128 tokens): GELU
(tanh), LayerNorm, the token embedding tied with the output and scaled by sqrt(d_model), causal
attention, mean cross-entropy; AdamW (weight decay on matrices) after clipping the gradient norm at 1.
PyTorch runs it eagerly (nn.Linear, nn.LayerNorm, scaled_dot_product_attention, torch.optim.AdamW) on
the same number of threads.

Rounds alternate: bench_lab's steps, then as many of PyTorch's, so that a machine shared with other
work slows both alike. Each side reports the median wall time of a step and its process's CPU time
per step (user + system, every thread: getrusage), the figure that other processes on the same cores
disturb least; the table gives each round, the load average before it, and the median ratios.
bench_lab also reports, from the same run, the fp32 FMA peak of the threads, its matrix products
beside OpenBLAS's sgemm and the core OpenBLAS chose for this CPU.

    python3 bench/lab_vs_torch.py [--bench build/release/bench/bench_lab] [--threads 2] [--rounds 5]
                                  [--scale small|medium]
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time


def cpu_description():
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return (f"{fields.get('model name', platform.processor())} ({fields.get('vendor_id', '?')}, family "
            f"{fields.get('cpu family', '?')}, model {fields.get('model', '?')}, {simd})")


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def torch_step_timer(threads, shape):
    import resource

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    V, C, L, H, FF, B, T = (shape[k]
                            for k in ("vocab", "d_model", "layers", "heads", "mlp", "batch", "length"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.fc_proj = nn.Linear(C, FF), nn.Linear(FF, C)

        def forward(self, x):
            q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.fc_proj(F.gelu(self.fc(self.norm2(x)), approximate="tanh"))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.normf = nn.LayerNorm(C)

        def forward(self, tokens, targets):
            x = self.wte(tokens) * math.sqrt(C)
            for block in self.blocks:
                x = block(x)
            logits = self.normf(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    torch.manual_seed(1)
    model = Model()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.95))
    tokens, targets = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def step():
        loss = model(tokens, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    for _ in range(10):
        step()

    def process_cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def timed(steps):  # the median wall time of a step, and this process's CPU time per step (ms)
        times = []
        cpu0 = process_cpu()
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return 1e3 * statistics.median(times), 1e3 * (process_cpu() - cpu0) / steps

    blas = "MKL" if torch.backends.mkl.is_available() else "its own BLAS"
    capability = torch.backends.cpu.get_cpu_capability()
    return timed, f"PyTorch {torch.__version__} ({blas}, CPU capability {capability})"


def run_bench(bench, threads, bench_filter, min_time):
    env = dict(os.environ, POSENC_NUM_THREADS=str(threads))
    command = [bench, f"--benchmark_filter={bench_filter}", "--benchmark_format=json",
               f"--benchmark_min_time={min_time}"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def parse_shape(text):  # bench_lab's context: "vocab 63 d_model 64 layers 2 ..."
    words = text.split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="build/release/bench/bench_lab")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", choices=["small", "medium"], default="small")
    args = parser.parse_args()
    if not os.path.exists(args.bench):
        sys.exit(f"lab_vs_torch: --bench {args.bench} does not exist (cmake --preset release "
                 "-DPOSENC_BUILD_BENCH=ON && cmake --build --preset release --target bench_lab)")
    limits = run_bench(args.bench, args.threads, "BM_lab_matmul", 0.2)
    context = limits["context"]
    shape = parse_shape(context[f"step_{args.scale}"])
    timed, torch_name = torch_step_timer(args.threads, shape)
    print(f"CPU: {cpu_description()}; {args.threads} threads")
    print(f"fp32 FMA peak (same run): {float(context['fma_peak_GFLOPs']):.0f} GFLOP/s; OpenBLAS core: "
          f"{context['openblas_core']}; {torch_name}")
    print(f"step ({args.scale}): {context[f'step_{args.scale}']}\n")
    print("| product, m x n x k | posenc GFLOP/s | OpenBLAS sgemm GFLOP/s | posenc / sgemm | posenc / peak |")
    print("|---|---|---|---|---|")
    for b in limits["benchmarks"]:
        print(f"| {b['label']} | {b['GFLOPs']:.0f} | {b['sgemm_GFLOPs']:.0f} | {b['vs_sgemm']:.2f} | "
              f"{b['vs_peak']:.2f} |")
    print("\n| round | load average | posenc ms/step (median, wall) | PyTorch ms/step (median, wall) | "
          "posenc CPU ms/step | PyTorch CPU ms/step | PyTorch / posenc, wall | PyTorch / posenc, CPU |")
    print("|---|---|---|---|---|---|---|---|")
    scale = ["small", "medium"].index(args.scale)
    ratios, cpu_ratios, loads = [], [], []
    for r in range(args.rounds):
        loads.append(load_average())
        step_filter = f"BM_lab_train_step/enc:0/scale:{scale}/"
        step = run_bench(args.bench, args.threads, step_filter, 2.0)["benchmarks"][0]
        ours, ours_cpu = step["ms_median"], step["cpu_ms_per_step"]
        theirs, theirs_cpu = timed(max(10, int(2000 / max(ours, 1))))
        ratios.append(theirs / ours)
        cpu_ratios.append(theirs_cpu / ours_cpu)
        print(f"| {r + 1} | {loads[-1]:.2f} | {ours:.1f} | {theirs:.1f} | {ours_cpu:.1f} | "
              f"{theirs_cpu:.1f} | {theirs / ours:.2f} | {theirs_cpu / ours_cpu:.2f} |")
    loads.append(load_average())
    print(f"\nmedian PyTorch / posenc: {statistics.median(cpu_ratios):.2f} in CPU time, "
          f"{statistics.median(ratios):.2f} in wall time; load average {min(loads):.2f}-{max(loads):.2f} "
          f"over the run on {os.cpu_count()} CPUs (other processes on these cores slow both; above the CPU "
          "count they share the cores with them, and wall times mean little)")


if __name__ == "__main__":
    main()
