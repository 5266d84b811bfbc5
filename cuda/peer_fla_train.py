#!/usr/bin/env python3
"""peer_fla_train.py - flash-linear-attention's MesaNet trained at the 40M anchor, beside train_cuda --anchor.

The peer of `./build/train_cuda --anchor --bench 1` (run both in one device call): fla's MesaNetForCausalLM
with hidden 640, 8 layers, 5 heads of 128, SwiGLU MLP 1792, vocabulary 256, CG 30 in training, batch 16 x
2048 random bytes, AdamW (lr 1e-3, betas 0.9 / 0.98, weight decay 0.1) and gradient clipping at 1, in the
arithmetic fla trains with: bf16 autocast over fp32 master weights (--dtype bf16, default), or fp32 with
TF32 products (--dtype fp32, train_cuda's default arithmetic). Tokens/s over --steps timed steps after
--warm steps (the first ones compile and autotune fla's Triton kernels), each step synchronised.
Usage: PYTHONPATH=.fla python3 cuda/peer_fla_train.py [--dtype bf16|fp32] [--steps 12] [--warm 4]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warm", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    a = ap.parse_args()
    from fla.models.mesa_net import MesaNetConfig, MesaNetForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    cfg = MesaNetConfig(hidden_size=640, num_hidden_layers=8, num_heads=5, head_dim=128, intermediate_size=1792,
                        vocab_size=256, max_position_embeddings=a.seq, max_cg_step_training=30,
                        max_cg_step_decoding=30, fuse_cross_entropy=True)
    model = MesaNetForCausalLM(cfg).cuda()
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.1, fused=True)
    x = torch.randint(0, 256, (a.batch, a.seq), device="cuda")   # labels = the inputs: the model shifts them

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            out = model(input_ids=x, labels=x)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    t0 = time.time()
    for _ in range(a.warm):
        step()
    torch.cuda.synchronize()
    t_warm = time.time() - t0
    t0 = time.time()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = time.time() - t0
    tps = a.batch * a.seq * a.steps / dt
    print(f"peer_fla_train: fla MesaNetForCausalLM, {n / 1e6:.2f} M parameters, {a.dtype}, B={a.batch} T={a.seq}, "
          f"CG 30: {tps:.0f} tokens/s over {a.steps} steps after {a.warm} warm-up ({t_warm:.1f} s), "
          f"{1e3 * dt / a.steps:.1f} ms per step, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
