#!/usr/bin/env python3
"""peer_gla.py - the peer timings beside bench_cuda's GLA-family rows (run both in one device call).

flash-linear-attention's chunk kernels at the shape of bench_cuda's rows (B=4, T=4096, H=16, D=128,
the (B,T,H,D) layout): chunk_gla (per-channel gate, the issue's target 0.72 ms forward and 3.25 ms
forward+backward), chunk_simple_gla (one gate per head) and chunk_linear_attn, in bf16 (fla's usual
dtype) and fp32; gates logsigmoid(N(0,1)) / 16 as the layers make them. Times: CUDA events around
each call, median of 20 after 3 warm-ups. A kernel that does not run on this machine prints why.
Prints one markdown table. Usage: python3 cuda/peer_gla.py [B T H D [NAMES [DTYPES]]] (NAMES: a comma list of
the kernels to time, e.g. chunk_gla,chunk_simple_gla, default all three; DTYPES: bf16,fp32 (default) or one of
them). Each (kernel, dtype) costs minutes of Triton compilation and autotuning on its first run on a machine, and
one process compiles them one after the other: cuda/gpu_checks.sh peers warms them up in one process each, at
once (the compiled kernels land in the shared TRITON_CACHE_DIR), then times them all in one run alone.
"""
import sys

import torch
import torch.nn.functional as F

from peer_time import median_ms   # cuda/peer_time.py


def kernels():
    """(name, function(q, k, v, g) -> output, gate shape per (B,T,H,D) or None) for the fla kernels found."""
    out = []
    try:
        from fla.ops.gla import chunk_gla
        out.append(("chunk_gla", lambda q, k, v, g: chunk_gla(q, k, v, g)[0], "channel"))
    except Exception as e:                       # not installed, or an import-time failure: say so
        print(f"chunk_gla unavailable: {type(e).__name__}: {str(e)[:100]}")
    try:
        from fla.ops.simple_gla import chunk_simple_gla
        out.append(("chunk_simple_gla", lambda q, k, v, g: chunk_simple_gla(q, k, v, g)[0], "head"))
    except Exception as e:
        print(f"chunk_simple_gla unavailable: {type(e).__name__}: {str(e)[:100]}")
    try:
        from fla.ops.linear_attn import chunk_linear_attn
        out.append(("chunk_linear_attn", lambda q, k, v, g: chunk_linear_attn(q, k, v, normalize=False)[0], None))
    except Exception as e:
        print(f"chunk_linear_attn unavailable: {type(e).__name__}: {str(e)[:100]}")
    return out


def main():
    B, T, H, D = (int(x) for x in sys.argv[1:5]) if len(sys.argv) > 4 else (4, 4096, 16, 128)
    only = sys.argv[5].split(",") if len(sys.argv) > 5 else None
    known = {"bf16": torch.bfloat16, "fp32": torch.float32}
    names = sys.argv[6].split(",") if len(sys.argv) > 6 else ["bf16", "fp32"]
    if any(n not in known for n in names):
        sys.exit(f"peer_gla: DTYPES is a comma list of bf16, fp32 (got {sys.argv[6]})")
    torch.manual_seed(0)
    print(f"peer_gla on {torch.cuda.get_device_name()}, torch {torch.__version__}, B={B} T={T} H={H} D={D}\n")
    print("| peer | dtype | pass | ms |\n|---|---|---|---|")
    for name, fn, gate in kernels():
        if only is not None and name not in only:
            continue
        for dt in (known[n] for n in names):
            q, k, v, do = (torch.randn(B, T, H, D, device="cuda", dtype=dt) for _ in range(4))
            g = None
            if gate is not None:
                shape = (B, T, H, D) if gate == "channel" else (B, T, H)
                g = (F.logsigmoid(torch.randn(shape, device="cuda", dtype=torch.float32)) / 16).to(dt)
            for t in (q, k, v) + ((g,) if g is not None else ()):
                t.requires_grad_(True)
            try:
                def fwd():
                    with torch.no_grad():
                        fn(q, k, v, g)

                def fwdbwd():
                    fn(q, k, v, g).backward(do)

                ms_f = median_ms(fwd)
                ms_fb = median_ms(fwdbwd)
                print(f"| {name} | {str(dt)[6:]} | fwd | {ms_f:.3f} |")
                print(f"| {name} | {str(dt)[6:]} | fwd+bwd | {ms_fb:.3f} |")
            except Exception as e:               # a kernel this machine's Triton refuses: say so, go on
                print(f"| {name} | {str(dt)[6:]} | - | failed: {type(e).__name__}: {str(e)[:80]} |")
            del q, k, v, do, g
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
