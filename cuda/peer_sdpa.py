#!/usr/bin/env python3
"""peer_sdpa.py - the peer timings beside bench_cuda's attention rows (run both in one device call).

PyTorch's scaled_dot_product_attention, causal, at the shape of bench_cuda's attention rows (B=4,
T=4096, H=16, D=128, tensors in the (B,T,H,D) layout of mesanet.h seen as (B,H,T,D)): the flash
backend in bf16 (the issue's target, 0.50 ms forward and 2.13 ms forward+backward), and the math
backend (cuBLAS products plus a softmax, the T x T matrix in memory) in fp32 with TF32 products and
in bf16. Times: CUDA events around each call, median of 20 after 3 warm-ups, random inputs.
Prints one markdown table. Usage: python3 cuda/peer_sdpa.py [B T H D]
"""
import sys

import torch
import torch.nn.functional as F

from torch.nn.attention import SDPBackend, sdpa_kernel

from peer_time import median_ms   # cuda/peer_time.py


def main():
    B, T, H, D = (int(x) for x in sys.argv[1:5]) if len(sys.argv) > 4 else (4, 4096, 16, 128)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    flops = 4.0 * B * H * T * T * D / 2          # causal forward, counted as FlashAttention does
    print(f"peer_sdpa on {torch.cuda.get_device_name()}, torch {torch.__version__}, B={B} T={T} H={H} D={D}, causal\n")
    print("| peer | dtype | pass | ms | TF/s (fwd 2 B H T^2 D, bwd 2.5x) |\n|---|---|---|---|---|")
    cases = [("flash SDPA", SDPBackend.FLASH_ATTENTION, torch.bfloat16),
             ("math SDPA (cuBLAS + softmax)", SDPBackend.MATH, torch.float32),
             ("math SDPA (cuBLAS + softmax)", SDPBackend.MATH, torch.bfloat16)]
    for name, backend, dt in cases:
        q, k, v, do = (torch.randn(B, T, H, D, device="cuda", dtype=dt).transpose(1, 2) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        try:
            with sdpa_kernel(backend):
                def fwd():
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=True)

                def fwdbwd():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    o.backward(do)

                ms_f = median_ms(fwd)
                ms_fb = median_ms(fwdbwd)
            dtn = "fp32 (TF32 products)" if dt == torch.float32 else "bf16"
            print(f"| {name} | {dtn} | fwd | {ms_f:.3f} | {flops / ms_f / 1e9:.1f} |")
            print(f"| {name} | {dtn} | fwd+bwd | {ms_fb:.3f} | {3.5 * flops / ms_fb / 1e9:.1f} |")
        except Exception as e:                   # a backend this machine lacks: say so, go on
            print(f"| {name} | {dt} | - | failed: {type(e).__name__}: {str(e)[:80]} | - |")
        del q, k, v, do
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
