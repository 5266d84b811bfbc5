#!/usr/bin/env python3
"""gla_local_dg.py - the chunk-local gate gradient of simple GLA (one log-gate per token), checked in float64.

Simple GLA: S_t = e^{g_t} S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, loss sum_t <o_t, do_t>. The usual gate
gradient is a reverse cumulative sum over the whole sequence, dg_t = sum_{s>=t} (q_s.dq_s - k_s.dk_s), whose
terms cancel; in low-precision products (TF32) its error grows with T. Directly, dg_t = e^{g_t} <S_{t-1}, dS_t>,
and splitting S_{t-1} and dS_t at the chunk boundaries gives a form whose sums stay inside one chunk: with the
chunk's start state S0, the gradient dSe of the state after its last token, b_i = g_0 + .. + g_i (from the
chunk start) and b_l the last of them,
    dg_t = e^{b_l} <S0, dSe> + sum_{i>=t} u_i + sum_{j<t} w_j + sum_{i>=t>j} M_ij
    u_i = e^{b_i} q_i^T S0 do_i            (q_i . the inter-chunk part of dq_i)
    w_j = e^{b_l - b_j} k_j^T dSe v_j      (k_j . the inter-chunk part of dk_j)
    M_ij = e^{b_i - b_j} (q_i . k_j)(do_i . v_j), j < i   (P .* dP of the chunk, strictly lower part)
This script compares it with central finite differences of the loss. Usage: python3 reference/gla_local_dg.py
(prints the largest difference and the largest gradient; exit status 1 if they disagree beyond 1e-6 relative).
"""
import sys

import numpy as np


def forward_loss(q, k, v, do, g):
    S = np.zeros((q.shape[1], v.shape[1]))
    loss = 0.0
    for t in range(q.shape[0]):
        S = np.exp(g[t]) * S + np.outer(k[t], v[t])
        loss += (S.T @ q[t]) @ do[t]
    return loss


def local_dg(q, k, v, do, g, C):
    T, K = q.shape
    starts, S = [], np.zeros((K, v.shape[1]))
    for t in range(T):                       # the state entering every chunk
        if t % C == 0:
            starts.append(S.copy())
        S = np.exp(g[t]) * S + np.outer(k[t], v[t])
    dg, dSe = np.zeros(T), np.zeros_like(S)
    for n in reversed(range(len(starts))):
        r = slice(n * C, min(T, (n + 1) * C))
        Q, Kc, Vc, dO, b = q[r], k[r], v[r], do[r], np.cumsum(g[r])
        S0, bl, L = starts[n], b[-1], len(b)
        c1 = np.exp(bl) * np.sum(S0 * dSe)
        u = np.exp(b) * np.einsum("ik,kv,iv->i", Q, S0, dO)
        w = np.exp(bl - b) * np.einsum("jk,kv,jv->j", Kc, dSe, Vc)
        M = np.tril((Q @ Kc.T) * np.exp(b[:, None] - b[None, :]) * (dO @ Vc.T), -1)
        G = 0.0                              # running sum_{i>=t>j} M_ij
        for t in range(L):
            if t > 0:
                G += M[t:, t - 1].sum() - M[t - 1, :t - 1].sum()
            dg[n * C + t] = c1 + u[t:].sum() + w[:t].sum() + G
        dSe = np.exp(bl) * dSe + np.einsum("i,ik,iv->kv", np.exp(b), Q, dO)   # to the previous chunk's end
    return dg


def main():
    rng = np.random.default_rng(0)
    T, K, V, C = 100, 8, 6, 32               # a last chunk of 4 tokens
    q, k = rng.standard_normal((T, K)), rng.standard_normal((T, K))
    v, do = rng.standard_normal((T, V)), rng.standard_normal((T, V))
    g = -0.3 * np.log1p(np.exp(rng.standard_normal(T)))
    eps, E = 1e-6, np.eye(T)
    num = np.array([(forward_loss(q, k, v, do, g + eps * E[t]) - forward_loss(q, k, v, do, g - eps * E[t])) / (2 * eps)
                    for t in range(T)])
    err, top = np.abs(local_dg(q, k, v, do, g, C) - num).max(), np.abs(num).max()
    print(f"chunk-local dg against finite differences: max |difference| {err:.3e}, max |dg| {top:.3e}")
    return 0 if err <= 1e-6 * top else 1


if __name__ == "__main__":
    sys.exit(main())
