// bench_cuda.cu - times the CUDA Mesa op at flash-linear-attention's anchor shape (B=4, T=4096,
// H=16, K=V=128, chunk 64) for CG 30, 10 and no solve, forward and forward+backward (the
// backward's cuBLAS products in fp32 and in TF32; the forward uses no cuBLAS), plus the projection
// matmul and two memory-bound ops for the ceilings. Prints one markdown table. Times are the
// median of REPS runs after two warm-ups, measured with CUDA events around each call; inputs are
// random (unit q, k; gates as the layer makes them), never zeros. TF/s counts the op's matrix
// products (2 flops per multiply-add; the CG term is n_cg (4 C^2 K + 2 C K^2) per chunk: the CG
// loop's three products with the chunk's keys), not the elementwise work.
// A second table times the decode step (mn_cuda_mesa_step, one layer's op: state update + solve +
// read-out) at batch 1 and 64, H=16, K=V=128, with the paper's dynamic CG (tol 1e-4) and with
// fla's fixed-count decode arithmetic, from states prefilled by the chunk forward over 512 tokens.
// Then the attention rows (bench_attention) and the GLA family's (bench_gla). Usage: bench_cuda [B T H K]
// | bench_cuda attn | bench_cuda gla (those rows alone) | bench_cuda glaprof (one call of each GLA member, for ncu)
// | bench_cuda profile [fast]  (one forward and one backward, for ncu: CG 30
// textbook, or with "fast" fla's CG 10 with the TF32 scan and the forward's states kept)
#include "cuda/mesanet_cuda.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <algorithm>
#include <vector>

#define REPS 10
static mn_cuda_ctx G;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27;
    return ((rs * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) {
    double u = urand() + 1e-300, v = urand();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#define CK(x) do { int r_ = (x); \
    if (r_ != MN_OK) { printf("bench_cuda: %s failed: %s\n", #x, G.msg); exit(1); } } while (0)
static float* dev_from(const std::vector<float>& h) {
    float* d = NULL;
    CK(mn_cuda_malloc(&G, (void**)&d, h.size() * sizeof(float)));
    CK(mn_cuda_upload(&G, d, h.data(), h.size() * sizeof(float)));
    return d;
}
static float* dev_randn(size_t n, double sd) {
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = (float)(sd * nrand());
    return dev_from(h);
}

// median milliseconds of REPS calls of fn (after 2 warm-ups)
template <class F> static double time_ms(F fn) {
    cudaEvent_t a, b;
    std::vector<float> t;
    cudaEventCreate(&a); cudaEventCreate(&b);
    for (int i = 0; i < 2; i++) fn();
    CK(mn_cuda_sync(&G));
    for (int i = 0; i < REPS; i++) {
        float ms;
        cudaEventRecord(a, (cudaStream_t)G.stream); fn(); cudaEventRecord(b, (cudaStream_t)G.stream);
        cudaEventSynchronize(b); cudaEventElapsedTime(&ms, a, b); t.push_back(ms);
    }
    CK(mn_cuda_sync(&G));
    cudaEventDestroy(a); cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// counted matrix flops of the op (see the top comment)
static double mesa_flops(size_t B, size_t T, size_t H, size_t K, size_t V, int cg, int bwd) {
    double C = 64, NCH = (double)((T + 63) / 64 * B * H), k = (double)K, v = (double)V;
    double st = 2 * C * k * (k + v), cgf = cg > 0 ? cg * (4 * C * C * k + 2 * C * k * k) : 0,
           outf = 2 * C * C * k + 2 * C * C * v + 2 * C * k * v;
    double f = st + cgf + outf;
    // backward: B0 states again, B1 2CKV, B2 six-plus-two products, B3 the adjoint CG, B4 2CK^2, B5 six
    if (bwd) f += st + 2 * C * k * v + (6 * C * C * k + 4 * C * C * v + 6 * C * k * v) + cgf + 2 * C * k * k +
                  (6 * C * C * k + 6 * C * k * k);
    return f * NCH;
}

// Decode step: states prefilled by the chunk forward (no solve: the states do not depend on it)
// over T0 = 512 tokens, then NS = 128 consecutive steps, each with its own tokens, timed as one
// stream of launches (events around the 128 steps; median over 5 passes from the same prefilled
// state). Gates per head h: g = logsigmoid(N(mu_h, 1)), mu_h = 0.5 + 5.5 h / (H-1), so gamma runs
// from ~0.6 (fast forgetting, well conditioned) to ~0.997 (slow forgetting, the step-hungry heads
// of the paper's Fig. 14); beta = sigmoid(N(0,1)); q, k unit rows; v ~ N(0,1).
static void bench_step(const float* lam, size_t H, size_t K) {
    const size_t T0 = 512, NS = 128, V = K, batches[2] = { 1, 64 };
    printf("\nmesa decode step (mn_cuda_mesa_step: state update + CG + read-out), H=%zu K=V=%zu, "
           "states after %zu prefill tokens, %zu steps per pass, median of 5 passes\n\n", H, K, T0, NS);
    printf("| batch | CG | mean iters | max iters | us per step | tokens/s | fla decode step (reference figure) |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int bi = 0; bi < 2; bi++) {
        size_t B = batches[bi], BH = B * H, n0 = B * T0 * H, ns = NS * BH;
        std::vector<float> hg(n0), hb(n0), sg(ns), sb(ns);
        for (size_t i = 0; i < n0; i++) {
            double mu = 0.5 + 5.5 * (double)(i % H) / (double)(H - 1), a = mu + nrand();
            hg[i] = (float)((a < 0 ? a : 0) - log1p(exp(-fabs(a)))); hb[i] = (float)(1 / (1 + exp(-nrand())));
        }
        for (size_t i = 0; i < ns; i++) {
            double mu = 0.5 + 5.5 * (double)(i % H) / (double)(H - 1), a = mu + nrand();
            sg[i] = (float)((a < 0 ? a : 0) - log1p(exp(-fabs(a)))); sb[i] = (float)(1 / (1 + exp(-nrand())));
        }
        float *pq = dev_randn(n0 * K, 1), *pk = dev_randn(n0 * K, 1), *pv = dev_randn(n0 * V, 1), *pg = dev_from(hg),
              *pb = dev_from(hb), *rs, *po, *w;
        float *sq = dev_randn(ns * K, 1), *sk = dev_randn(ns * K, 1), *sv = dev_randn(ns * V, 1), *gg = dev_from(sg),
              *gb = dev_from(sb);
        float *hk, *hv, *hk0, *hv0, *out;
        int* its;
        CK(mn_cuda_malloc(&G, (void**)&rs, n0 * 4));
        CK(mn_cuda_l2norm_forward(&G, pq, rs, pq, n0, K)); CK(mn_cuda_l2norm_forward(&G, pk, rs, pk, n0, K));
        CK(mn_cuda_l2norm_forward(&G, sq, rs, sq, ns, K)); CK(mn_cuda_l2norm_forward(&G, sk, rs, sk, ns, K));
        CK(mn_cuda_malloc(&G, (void**)&hk0, BH * K * K * 4)); CK(mn_cuda_malloc(&G, (void**)&hv0, BH * K * V * 4));
        CK(mn_cuda_malloc(&G, (void**)&hk, BH * K * K * 4)); CK(mn_cuda_malloc(&G, (void**)&hv, BH * K * V * 4));
        CK(mn_cuda_malloc(&G, (void**)&out, ns * V * 4)); CK(mn_cuda_malloc(&G, (void**)&its, ns * sizeof(int)));
        CK(mn_cuda_malloc(&G, (void**)&po, n0 * V * 4));
        mn_mesa_opts op; memset(&op, 0, sizeof op); op.cg_iters = -1;
        size_t wn = mn_cuda_mesa_work_size(B, T0, H, K, V, &op);
        CK(mn_cuda_malloc(&G, (void**)&w, wn * 4));
        cudaMemset(hk0, 0, BH * K * K * 4); cudaMemset(hv0, 0, BH * K * V * 4);
        CK(mn_cuda_mesa_forward(&G, po, NULL, NULL, hk0, hv0, pq, pk, pv, pg, pb, lam, B, T0, H, K, V, &op, w));
        CK(mn_cuda_sync(&G));
        mn_cuda_dfree(w); mn_cuda_dfree(po); mn_cuda_dfree(pq); mn_cuda_dfree(pk); mn_cuda_dfree(pv); mn_cuda_dfree(pg);
        mn_cuda_dfree(pb); mn_cuda_dfree(rs);
        struct { const char* name; int cg, fla, jacobi; double tol; double anchor; } cfg[3] = {
            { "dynamic, tol 1e-4, max 30, Jacobi x0", 30, 0, 1, 1e-4, -1 },
            { "fixed 30, fla arithmetic, Jacobi x0", 30, 1, 1, 0, B == 1 ? 68.7 : 540.6 },
            { "fixed 10, fla arithmetic, Jacobi x0", 10, 1, 1, 0, B == 1 ? 29.9 : 231.4 } };
        for (int c = 0; c < 3; c++) {
            mn_mesa_opts o; memset(&o, 0, sizeof o);
            o.cg_iters = cfg[c].cg; o.fla = cfg[c].fla; o.jacobi = cfg[c].jacobi; o.cg_tol = cfg[c].tol;
            auto pass = [&] {
                for (size_t s = 0; s < NS; s++)
                    CK(mn_cuda_mesa_step(&G, out + s * BH * V, its + s * BH, hk, hv, sq + s * BH * K, sk + s * BH * K,
                                         sv + s * BH * V, gg + s * BH, gb + s * BH, lam, B, H, K, V, &o));
            };
            std::vector<float> t;
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0); cudaEventCreate(&e1);
            for (int rep = 0; rep < 6; rep++) {         // pass 0 warms up
                float ms;
                cudaMemcpyAsync(hk, hk0, BH * K * K * 4, cudaMemcpyDeviceToDevice, (cudaStream_t)G.stream);
                cudaMemcpyAsync(hv, hv0, BH * K * V * 4, cudaMemcpyDeviceToDevice, (cudaStream_t)G.stream);
                cudaEventRecord(e0, (cudaStream_t)G.stream); pass(); cudaEventRecord(e1, (cudaStream_t)G.stream);
                CK(mn_cuda_sync(&G));
                cudaEventElapsedTime(&ms, e0, e1);
                if (rep) t.push_back(ms);
            }
            cudaEventDestroy(e0); cudaEventDestroy(e1);
            std::sort(t.begin(), t.end());
            double us = t[t.size() / 2] * 1e3 / (double)NS;
            std::vector<int> hi(ns);
            CK(mn_cuda_download(&G, hi.data(), its, ns * sizeof(int)));
            double mean = 0; int mx = 0;
            for (size_t i = 0; i < ns; i++) { mean += hi[i]; mx = hi[i] > mx ? hi[i] : mx; }
            char anc[32] = "-";
            if (cfg[c].anchor > 0) snprintf(anc, sizeof anc, "%.1f us", cfg[c].anchor);
            printf("| %zu | %s | %.2f | %d | %.1f | %.0f | %s |\n", B, cfg[c].name, mean / (double)ns, mx, us,
                   (double)B / (us * 1e-6), anc);
        }
        mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv); mn_cuda_dfree(gg); mn_cuda_dfree(gb);
        mn_cuda_dfree(hk); mn_cuda_dfree(hv); mn_cuda_dfree(hk0); mn_cuda_dfree(hv0); mn_cuda_dfree(out);
        mn_cuda_dfree(its);
    }
}

// Causal attention and SWA at the issue's shape (B=4, T=4096, H=16, D=128; fp32 tensors, which the op
// packs into fp16 tiles itself), forward and forward+backward, beside cuda/peer_sdpa.py's PyTorch rows
// (run it in the same call). TF/s counts as FlashAttention does: forward 4 B H T^2 D / 2 causal (B H T W
// 4 D for a window W), backward 2.5x that (these kernels execute 3.5x: S and dO V^T are recomputed in
// both backward kernels, which keeps them free of atomics). Then the decode step at a full cache.
static void bench_attention(void) {
    const size_t B = 4, T = 4096, H = 16, D = 128, n = B * T * H * D;
    float *q = dev_randn(n, 1), *k = dev_randn(n, 1), *v = dev_randn(n, 1), *dout = dev_randn(n, 1e-3);
    float *out, *lse, *dq, *dk, *dv, *work;
    size_t wn = mn_cuda_attention_work_size(B, T, H, D);
    CK(mn_cuda_malloc(&G, (void**)&out, n * 4)); CK(mn_cuda_malloc(&G, (void**)&lse, B * T * H * 4));
    CK(mn_cuda_malloc(&G, (void**)&dq, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dk, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&dv, n * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    printf("\nattention, B=%zu T=%zu H=%zu D=%zu (fp32 in and out, fp16 tensor-core products), median of %d; "
           "workspace %.2f GB\n\n",
           B, T, H, D, REPS, wn * 4.0 / 1e9);
    printf("| op | window | ms | TF/s (FlashAttention's count) | issue target (1.5x torch flash SDPA) |\n"
           "|---|---|---|---|---|\n");
    const size_t wins[2] = { 0, 512 };
    for (int wi = 0; wi < 2; wi++) {
        const size_t W = wins[wi];
        const double sc = 1.0 / sqrt((double)D);
        const double fl = W ? 4.0 * B * H * D * ((double)T * W - W * (W - 1) / 2.0) :
                              4.0 * B * H * (double)T * T * D / 2;
        double ms = time_ms([&] { CK(mn_cuda_attention_forward(&G, out, lse, q, k, v, B, T, H, D, D, W, sc, work)); });
        printf("| attention fwd | %zu | %.3f | %.1f | %s |\n", W, ms, fl / (ms * 1e-3) / 1e12, W ? "-" : "0.75 ms");
        ms = time_ms([&] {
            CK(mn_cuda_attention_forward(&G, out, lse, q, k, v, B, T, H, D, D, W, sc, work));
            CK(mn_cuda_attention_backward(&G, dq, dk, dv, dout, out, lse, q, k, v, B, T, H, D, D, W, sc, work));
        });
        printf("| attention fwd+bwd | %zu | %.3f | %.1f | %s |\n", W, ms, 3.5 * fl / (ms * 1e-3) / 1e12,
               W ? "-" : "3.20 ms");
    }
    mn_cuda_dfree(q); mn_cuda_dfree(k); mn_cuda_dfree(v); mn_cuda_dfree(dout); mn_cuda_dfree(out); mn_cuda_dfree(lse);
    mn_cuda_dfree(dq); mn_cuda_dfree(dk); mn_cuda_dfree(dv); mn_cuda_dfree(work);
    // decode: one token after 4095 cached ones per sequence, batch 1 and 64; the step reads the whole
    // K and V cache once: bytes / time against the copy rate
    printf("\n| attention decode step, H=%zu D=%zu, cache 4096 | batch | us per step | tokens/s | cache read GB/s |\n"
           "|---|---|---|---|---|\n", H, D);
    const size_t bs[2] = { 1, 64 };
    for (int bi = 0; bi < 2; bi++) {
        const size_t Bd = bs[bi], L = 4096, nc = Bd * L * H * D, n1 = L * H * D;
        float *kc, *vc, *sq = dev_randn(Bd * H * D, 1), *sk = dev_randn(Bd * H * D, 1),
              *sv = dev_randn(Bd * H * D, 1), *so;
        CK(mn_cuda_malloc(&G, (void**)&so, Bd * H * D * 4));
        CK(mn_cuda_malloc(&G, (void**)&kc, nc * 4)); CK(mn_cuda_malloc(&G, (void**)&vc, nc * 4));
        {   // one sequence's random cache, copied to every sequence (drawing 10^9 numbers on the host is slow)
            float *k1 = dev_randn(n1, 1), *v1 = dev_randn(n1, 1);
            for (size_t b = 0; b < Bd; b++) {
                cudaMemcpy(kc + b * n1, k1, n1 * 4, cudaMemcpyDeviceToDevice);
                cudaMemcpy(vc + b * n1, v1, n1 * 4, cudaMemcpyDeviceToDevice);
            }
            mn_cuda_dfree(k1); mn_cuda_dfree(v1);
        }
        double ms = time_ms([&] {
            CK(mn_cuda_attention_step(&G, so, kc, vc, sq, sk, sv, Bd, L - 1, L, H, D, D, 0, 0.088));
        });
        printf("| | %zu | %.1f | %.0f | %.0f |\n", Bd, ms * 1e3, Bd / (ms * 1e-3), 2.0 * nc * 4 / (ms * 1e-3) / 1e9);
        mn_cuda_dfree(kc); mn_cuda_dfree(vc); mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv);
        mn_cuda_dfree(so);
    }
}

// The GLA family (mn_cuda_gla_*): linear attention (G = 0), simple GLA (G = 1), GLA (G = Dk) at B=4,
// T=4096, H=16, D=128, chunk 64, forward and forward + backward, products in 3xTF32 (ctx->math fp32)
// and TF32; gates as the layers make them, logsigmoid(N(0,1)) / 16. TF/s counts the chunkwise form's
// matrix products as mesanet.h's mn_gla_forward states them: forward 2 C (Dk + Dv) + 4 Dk Dv per token
// and head, backward 6 C Dk + 4 C Dv + 10 Dk Dv more. Then the decode step (mn_cuda_gla_step) at
// batch 1 and 64: state bytes read and written against the copy rate. cuda/peer_gla.py times fla's
// chunk kernels at the same shape (run it in the same call).
// profile = 1: one TF32 forward and one backward of each member, nothing else (for ncu: bench_cuda glaprof).
static void bench_gla(int profile) {
    const size_t B = 4, T = 4096, H = 16, D = 128, n = B * T * H * D, C = 64;
    float *q = dev_randn(n, 1), *k = dev_randn(n, 1), *v = dev_randn(n, 1), *dout = dev_randn(n, 1), *g;
    {
        std::vector<float> hg(n);
        for (size_t i = 0; i < n; i++) {
            double a = nrand();
            hg[i] = (float)(((a < 0 ? a : 0) - log1p(exp(-fabs(a)))) / 16);
        }
        g = dev_from(hg);
    }
    float *out, *dq, *dk, *dv, *dg, *work, *keep;
    size_t wn = mn_cuda_gla_work_size(B, T, H, D, D, C), kn = mn_cuda_gla_keep_size(B, T, H, D, D);
    CK(mn_cuda_malloc(&G, (void**)&out, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dq, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&dk, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dv, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&dg, n * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    CK(mn_cuda_malloc(&G, (void**)&keep, kn * 4));
    if (profile) {                                // the kept form, as the model's layers run it
        G.math = MN_CUDA_MATH_TF32;
        for (int gi = 0; gi < 3; gi++) {
            const size_t Gw = gi == 0 ? 0 : gi == 1 ? 1 : D;
            CK(mn_cuda_gla_forward_keep(&G, out, NULL, keep, q, k, v, gi ? g : NULL, NULL, B, T, H, D, D, Gw, 0.088,
                                        C));
            CK(mn_cuda_gla_backward_keep(&G, dq, dk, dv, gi ? dg : NULL, NULL, dout, NULL, keep, q, k, v, B, T, H, D, D,
                                         Gw, 0.088, C, work));
        }
        CK(mn_cuda_sync(&G));
        G.math = MN_CUDA_MATH_FP32;
        return;
    }
    printf("\nGLA family, B=%zu T=%zu H=%zu D=%zu chunk %zu (fp32 in and out), median of %d; workspace %.2f GB\n\n",
           B, T, H, D, C, REPS, wn * 4.0 / 1e9);
    printf("| op | products | ms | counted TFLOP | TF/s | issue target (fla chunk_gla) |\n|---|---|---|---|---|---|\n");
    const double sc = 1.0 / sqrt((double)D), tok = (double)B * T * H, dd = (double)D;
    const double ff = tok * (2 * C * 2 * dd + 4 * dd * dd), fb = ff + tok * (6 * C * dd + 4 * C * dd + 10 * dd * dd);
    const char* names[3] = { "linattn (G 0)", "sgla (G 1)", "gla (G Dk)" };
    for (int m = 0; m < 2; m++) {
        G.math = m ? MN_CUDA_MATH_TF32 : MN_CUDA_MATH_FP32;
        for (int gi = 0; gi < 3; gi++) {
            const size_t Gw = gi == 0 ? 0 : gi == 1 ? 1 : D;
            const float* gp = gi ? g : NULL;
            auto fwd = [&] {
                CK(mn_cuda_gla_forward(&G, out, NULL, q, k, v, gp, NULL, B, T, H, D, D, Gw, sc, C, work));
            };
            double ms = time_ms(fwd);
            printf("| %s fwd | %s | %.3f | %.3f | %.1f | %s |\n", names[gi], m ? "tf32" : "3xtf32", ms, ff / 1e12,
                   ff / (ms * 1e-3) / 1e12, gi ? "0.72 ms" : "-");
            ms = time_ms([&] {
                fwd();
                CK(mn_cuda_gla_backward(&G, dq, dk, dv, gi ? dg : NULL, NULL, dout, NULL, q, k, v, gp, NULL, B, T, H,
                                        D, D, Gw, sc, C, work));
            });
            printf("| %s fwd+bwd | %s | %.3f | %.3f | %.1f | %s |\n", names[gi], m ? "tf32" : "3xtf32", ms, fb / 1e12,
                   fb / (ms * 1e-3) / 1e12, gi ? "3.25 ms" : "-");
            // the kept form (the model's layers): the backward reads the forward's states, scores and gates
            ms = time_ms([&] {
                CK(mn_cuda_gla_forward_keep(&G, out, NULL, keep, q, k, v, gp, NULL, B, T, H, D, D, Gw, sc, C));
                CK(mn_cuda_gla_backward_keep(&G, dq, dk, dv, gi ? dg : NULL, NULL, dout, NULL, keep, q, k, v, B, T, H,
                                             D, D, Gw, sc, C, work));
            });
            printf("| %s fwd+bwd, kept | %s | %.3f | %.3f | %.1f | %s |\n", names[gi], m ? "tf32" : "3xtf32", ms,
                   fb / 1e12, fb / (ms * 1e-3) / 1e12, gi ? "3.25 ms" : "-");
        }
    }
    G.math = MN_CUDA_MATH_FP32;
    mn_cuda_dfree(q); mn_cuda_dfree(k); mn_cuda_dfree(v); mn_cuda_dfree(dout); mn_cuda_dfree(g); mn_cuda_dfree(out);
    mn_cuda_dfree(dq); mn_cuda_dfree(dk); mn_cuda_dfree(dv); mn_cuda_dfree(dg); mn_cuda_dfree(work);
    mn_cuda_dfree(keep);
    printf("\n| GLA decode step, H=%zu D=%zu | G | batch | us per step | tokens/s | state GB/s (read + write) |\n"
           "|---|---|---|---|---|---|\n", H, D);
    const size_t bs[2] = { 1, 64 };
    for (int gi = 0; gi < 3; gi++)
        for (int bi = 0; bi < 2; bi++) {
            const size_t Bd = bs[bi], Gw = gi == 0 ? 0 : gi == 1 ? 1 : D, ns = Bd * H * D * D;
            float *st = dev_randn(ns, 1), *sq = dev_randn(Bd * H * D, 1), *sk = dev_randn(Bd * H * D, 1);
            float *sv = dev_randn(Bd * H * D, 1), *sg = dev_randn(Bd * H * D, 0.01), *so;
            CK(mn_cuda_malloc(&G, (void**)&so, Bd * H * D * 4));
            // gates near 0 (a decay ~1 keeps the state finite over the timed steps); the cost does not depend on them
            double ms = time_ms([&] {
                CK(mn_cuda_gla_step(&G, so, st, sq, sk, sv, Gw ? sg : NULL, Bd, H, D, D, Gw, sc));
            });
            printf("| | %s | %zu | %.1f | %.0f | %.0f |\n", names[gi], Bd, ms * 1e3, Bd / (ms * 1e-3),
                   2.0 * ns * 4 / (ms * 1e-3) / 1e9);
            mn_cuda_dfree(st); mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv); mn_cuda_dfree(sg);
            mn_cuda_dfree(so);
        }
}

// ---- the mixers after the GLA family: bench_<family>() (`bench_cuda delta|ssd|rglru|mlstm|slstm`) ----
// The delta rule (DeltaNet, Gated DeltaNet) at B=4, T=4096, H=16, Dk=Dv=128 and at the anchor layer
// (B=16, T=2048, H=5), fp32: the chunkwise form at chunk 64 (the layers' MN__DELTA_GC) and the recurrent
// form at checkpoints every 8 tokens; forward and forward+backward median ms, the FLOPs each form does
// and the bytes it moves (counted as below), and the decode step at batch 1 and 64 against the state
// traffic.
static void bench_delta_seq(size_t B, size_t T, size_t H, int chunked) {
    const size_t D = 128, C = chunked ? 64 : 8, nk = B * T * H * D, nh = B * T * H, NC = (T + C - 1) / C;
    float *q = dev_randn(nk, 1), *k = dev_randn(nk, 1), *v = dev_randn(nk, 1), *dout = dev_randn(nk, 1), *be, *g;
    {   // unit q, k rows (the layers l2-normalise them); beta = sigmoid(N(0,1)); g = -0.3 softplus(N(0,1))
        std::vector<float> hq(nk), hk(nk), hb(nh), hg(nh);
        for (size_t i = 0; i < nk; i++) { hq[i] = (float)nrand(); hk[i] = (float)nrand(); }
        for (size_t r = 0; r < nh; r++) {
            double sq = 0, sk = 0;
            for (size_t d = 0; d < D; d++) { sq += hq[r * D + d] * hq[r * D + d]; sk += hk[r * D + d] * hk[r * D + d]; }
            for (size_t d = 0; d < D; d++) { hq[r * D + d] /= (float)sqrt(sq); hk[r * D + d] /= (float)sqrt(sk); }
            hb[r] = (float)(1.0 / (1.0 + exp(-nrand())));
            hg[r] = (float)(-0.3 * log1p(exp(nrand())));
        }
        CK(mn_cuda_upload(&G, q, hq.data(), nk * 4)); CK(mn_cuda_upload(&G, k, hk.data(), nk * 4));
        be = dev_from(hb); g = dev_from(hg);
    }
    float *out, *hs, *dq, *dk, *dv, *db, *dg, *work;
    size_t wn = mn_cuda_delta_rule_work_size(B, T, H, D, D, C);
    CK(mn_cuda_malloc(&G, (void**)&out, nk * 4)); CK(mn_cuda_malloc(&G, (void**)&hs, B * H * NC * D * D * 4));
    CK(mn_cuda_malloc(&G, (void**)&dq, nk * 4)); CK(mn_cuda_malloc(&G, (void**)&dk, nk * 4));
    CK(mn_cuda_malloc(&G, (void**)&dv, nk * 4)); CK(mn_cuda_malloc(&G, (void**)&db, nh * 4));
    CK(mn_cuda_malloc(&G, (void**)&dg, nh * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    const double tok = (double)nh, dd = (double)D, sl = dd / 8, cc = (double)C;
    double ff, fb, bf, bb;
    if (chunked) {
        // FLOPs per token and head as mesanet.h's chunkwise form counts them: forward 6 C Dk + 4 C Dv +
        // 6 Dk Dv + C^2/3, backward (recomputing the forward's passes 1-4) 18 C Dk + 10 C Dv + 14 Dk Dv +
        // C^2/3. Bytes: q, k, v (and dout) read, out (dq, dk, dv) written, hs written (read), and every
        // workspace array the pass fills counted written once and read twice (per chunk: forward 6 C Dk +
        // 5 C Dv + 4 C^2 + 4 C + Dk Dv floats, backward all 12 C Dk + 9 C Dv + 6 C^2 + 6 C + 3 Dk Dv).
        ff = tok * (6 * cc * dd + 4 * cc * dd + 6 * dd * dd + cc * cc / 3);
        fb = ff + tok * (18 * cc * dd + 10 * cc * dd + 14 * dd * dd + cc * cc / 3);
        bf = 4 * (tok * 4 * dd + tok / cc * dd * dd + 3 * tok / cc * (11 * cc * dd + 4 * cc * cc + 4 * cc + dd * dd));
        bb = bf + 4 * (tok * 7 * dd + tok / cc * dd * dd + 3 * tok / cc * (21 * cc * dd + 6 * cc * cc + 6 * cc +
                                                                             3 * dd * dd));
    } else {
        // FLOPs per token, head and state entry: forward 7 (decay 1, p 2, write 2, read 2); backward 5 to
        // recompute the state and 23 in the reverse step (the kernel's FMAs and multiplies, 2 per FMA).
        // Bytes: the forward reads q, k once per 8-column slice (Dv/8 times) and v, writes out, writes hs
        // (Dk Dv per chunk); the backward reads hs, q, k twice per slice, v, dout, writes and reads back
        // the stash (the states, 2 Dk Dv per token) and the partials (Dv/8 x (2 Dk + 2) per token, written
        // and read once), and dv; the partials' sum adds dq, dk, dbeta, dg (read + write).
        ff = tok * 7 * dd * dd; fb = ff + tok * 28 * dd * dd;
        bf = 4 * (tok * (sl * 2 * dd + 2 * dd) + tok / cc * dd * dd);
        bb = bf + 4 * (tok / cc * dd * dd + tok * (sl * 4 * dd + 3 * dd) + tok * 2 * dd * dd +
                       tok * 2 * sl * (2 * dd + 2) + tok * 2 * (2 * dd + 2));
    }
    const char* names[2] = { "deltanet (g NULL)", "gdn (g)" };
    const double sc = 1.0 / sqrt(dd);
    for (int gi = 0; gi < 2; gi++) {
        const float* gp = gi ? g : NULL;
        auto fwd = [&] {
            if (chunked) CK(mn_cuda_delta_rule_forward(&G, out, NULL, hs, q, k, v, be, gp, NULL, B, T, H, D, D, C, sc,
                                                       work));
            else CK(mn_cuda_delta_rule_forward_recurrent(&G, out, NULL, hs, q, k, v, be, gp, NULL, B, T, H, D, D, C, sc,
                                                         NULL));
        };
        auto bwd = [&] {
            if (chunked) CK(mn_cuda_delta_rule_backward(&G, dq, dk, dv, db, gi ? dg : NULL, NULL, dout, NULL, hs, q, k,
                                                        v, be, gp, B, T, H, D, D, C, sc, work));
            else CK(mn_cuda_delta_rule_backward_recurrent(&G, dq, dk, dv, db, gi ? dg : NULL, NULL, dout, NULL, hs, q,
                                                          k, v, be, gp, B, T, H, D, D, C, sc, work));
        };
        const char* form = !chunked ? "recurrent, checkpoints 8"
                           : G.math == MN_CUDA_MATH_TF32 ? "chunkwise C 64, TF32 products" : "chunkwise C 64, fp32";
        double ms = time_ms(fwd);
        printf("| B=%zu T=%zu H=%zu | %s | %s fwd | %.3f | %.3f | %.1f | %.2f | %.0f |\n", B, T, H, form, names[gi], ms,
               ff / 1e12, ff / (ms * 1e-3) / 1e12, bf / 1e9, bf / (ms * 1e-3) / 1e9);
        ms = time_ms([&] { fwd(); bwd(); });
        printf("| B=%zu T=%zu H=%zu | %s | %s fwd+bwd | %.3f | %.3f | %.1f | %.2f | %.0f |\n", B, T, H, form, names[gi],
               ms, fb / 1e12, fb / (ms * 1e-3) / 1e12, bb / 1e9, bb / (ms * 1e-3) / 1e9);
        if (!chunked) continue;
        // the kept form (what the model's layers run): the backward reads the forward's intermediates from keep
        // instead of recomputing passes 1-4 and V_new, so it does 6 C Dk + 2 C Dv + C^2/3 + 2 Dk Dv fewer FLOPs
        // per token and head; bytes not counted
        float* keep;
        CK(mn_cuda_malloc(&G, (void**)&keep, mn_cuda_delta_rule_keep_size(B, T, H, D, D, C) * 4));
        const double fk = fb - tok * (6 * cc * dd + 2 * cc * dd + cc * cc / 3 + 2 * dd * dd);
        for (int ch = 0; ch < 2; ch++) {   // the chain on the tensor cores (the default), then on the FMA kernel
            G.delta_chain = ch ? MN_CUDA_CHAIN_FMA : MN_CUDA_CHAIN_TC;
            ms = time_ms([&] {
                CK(mn_cuda_delta_rule_forward_keep(&G, out, NULL, keep, q, k, v, be, gp, NULL, B, T, H, D, D, C, sc,
                                                   work));
                CK(mn_cuda_delta_rule_backward_keep(&G, dq, dk, dv, db, gi ? dg : NULL, NULL, dout, NULL, keep, B, T,
                                                    H, D, D, C, sc, work));
            });
            printf("| B=%zu T=%zu H=%zu | %s, kept%s | %s fwd+bwd | %.3f | %.3f | %.1f | - | - |\n", B, T, H, form,
                   ch ? ", FMA chain" : "", names[gi], ms, fk / 1e12, fk / (ms * 1e-3) / 1e12);
        }
        G.delta_chain = MN_CUDA_CHAIN_TC;
        mn_cuda_dfree(keep);
    }
    mn_cuda_dfree(q); mn_cuda_dfree(k); mn_cuda_dfree(v); mn_cuda_dfree(dout); mn_cuda_dfree(be); mn_cuda_dfree(g);
    mn_cuda_dfree(out); mn_cuda_dfree(hs); mn_cuda_dfree(dq); mn_cuda_dfree(dk); mn_cuda_dfree(dv); mn_cuda_dfree(db);
    mn_cuda_dfree(dg); mn_cuda_dfree(work);
}
static void bench_delta(void) {
    const size_t H = 16, D = 128;
    const double sc = 1.0 / sqrt((double)D);
    const char* names[2] = { "deltanet (g NULL)", "gdn (g)" };
    printf("\nDelta rule, Dk=Dv=128, median of %d (the chunkwise form's products follow ctx->math)\n\n", REPS);
    printf("| shape | form | op | ms | counted TFLOP | TF/s | counted GB | GB/s |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int f = 0; f < 3; f++) {                 // chunkwise in fp32, chunkwise with TF32 products, recurrent
        const int math = G.math;
        if (f == 1) G.math = MN_CUDA_MATH_TF32;
        bench_delta_seq(4, 4096, 16, f < 2);
        bench_delta_seq(16, 2048, 5, f < 2);
        G.math = math;
    }
    printf("\n| delta decode step, H=%zu D=%zu | step | batch | us per step | tokens/s | state GB/s (read + write) "
           "| of 4.3 TB/s |\n|---|---|---|---|---|---|---|\n", H, D);
    const size_t bs[2] = { 1, 64 };
    for (int gi = 0; gi < 2; gi++)
        for (int f = 0; f < 2; f++)
            for (int bi = 0; bi < 2; bi++) {
                const size_t Bd = bs[bi], nsd = Bd * H * D * D;
                // unit-free inputs: the cost does not depend on the values; beta small and g ~ 0 keep the state
                // finite
                float *st = dev_randn(nsd, 1), *sq = dev_randn(Bd * H * D, 0.09), *sk = dev_randn(Bd * H * D, 0.09);
                float *sv = dev_randn(Bd * H * D, 1), *sb = dev_randn(Bd * H, 0.01), *sg = dev_randn(Bd * H, 0.01);
                float* so;
                CK(mn_cuda_malloc(&G, (void**)&so, Bd * H * D * 4));
                double ms = time_ms([&] {
                    if (f) CK(mn_cuda_delta_rule_step_recurrent(&G, so, st, sq, sk, sv, sb, gi ? sg : NULL, Bd, H, D, D,
                                                                sc));
                    else CK(mn_cuda_delta_rule_step(&G, so, st, sq, sk, sv, sb, gi ? sg : NULL, Bd, H, D, D, sc));
                });
                double gbs = 2.0 * nsd * 4 / (ms * 1e-3) / 1e9;
                printf("| %s | %s | %zu | %.1f | %.0f | %.0f | %.0f %% |\n", names[gi],
                       f ? "recurrent (warp per 8 columns)" : "default (rows per warp)", Bd, ms * 1e3,
                       Bd / (ms * 1e-3), gbs, gbs / 4300 * 100);
                mn_cuda_dfree(st); mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv); mn_cuda_dfree(sb);
                mn_cuda_dfree(sg); mn_cuda_dfree(so);
            }
}
// ---- Mamba-2's SSD core (bench_cuda ssd) -------------------------------------------------------------
// B=4, T=4096, H=16 at Mamba-2's own head (P = 64, state N = 128: the recurrent kernels, both transitions)
// and at the layer's (P = N = head_dim = 128: the default form, i.e. the chunk form on the GLA op, for
// log-decays and signed transitions, and the recurrent kernels); then the default form at the anchor's
// shape (B=16, T=2048, 10 heads of 128: a Mamba-2 layer of d_model 640). Inputs: X, B, C ~ N(0,1);
// log-decays -U(0,1) (transitions 2 e^that - 1: about 0.8 % of them under the chunk form's 2^-8).
// TF/s counts the flops the kernels do: recurrent forward 5 P N a token and head (a S + x b, then the
// read-out), backward 3 P N (checkpoint pass) + 3 P N (the chunk's sub-chunk states) + 3 P N 3.5 (S_{t-1}
// recomputed, 3.5 steps on average) + 14 P N (the gradient terms); the chunkwise form its products (64-token
// chunks: states 2 C N P, read-out 2 C N P, scores 2 C^2 N, intra-chunk output 2 C^2 P per chunk; the
// backward 2.5 times that, as its eleven products; the signed transition's sign scan, flips and dA fix are
// not counted). GB/s: the tensors' bytes read and written once (B, C,
// X, A, y; the backward's inputs, its outputs read and written, the checkpoints written and read), the
// least the op can move. The decode step: batch 1 and 64, GB/s of the state read and written.
static void bench_ssd_shape(size_t B, size_t T, size_t H, size_t P, size_t N, int amode, int form) {
    size_t nx = B * T * H * P, na = B * T * H, nb = B * T * H * N, BTH = B * T * H;
    std::vector<float> ah(na);
    for (size_t i = 0; i < na; i++) {
        double la = -urand();
        ah[i] = (float)(amode == MN_SSD_TRANSITION ? 2.0 * exp(la) - 1.0 : la);
    }
    float *X = dev_randn(nx, 1), *Bm = dev_randn(nb, 1), *Cm = dev_randn(nb, 1), *dy = dev_randn(nx, 1);
    float *A = dev_from(ah), *y, *dX, *dA, *dB, *dC, *work;
    size_t wn = form ? mn_cuda_ssd_work_size_recurrent(B, T, H, P, N) : mn_cuda_ssd_work_size(B, T, H, P, N, 64);
    CK(mn_cuda_malloc(&G, (void**)&y, nx * 4)); CK(mn_cuda_malloc(&G, (void**)&dX, nx * 4));
    CK(mn_cuda_malloc(&G, (void**)&dA, na * 4)); CK(mn_cuda_malloc(&G, (void**)&dB, nb * 4));
    CK(mn_cuda_malloc(&G, (void**)&dC, nb * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    cudaMemset(dX, 0, nx * 4); cudaMemset(dA, 0, na * 4); cudaMemset(dB, 0, nb * 4); cudaMemset(dC, 0, nb * 4);
    auto fwd = [&]() {
        if (form) CK(mn_cuda_ssd_forward_recurrent(&G, y, NULL, X, A, Bm, Cm, NULL, B, T, H, P, N, amode));
        else CK(mn_cuda_ssd_forward(&G, y, NULL, X, A, Bm, Cm, NULL, B, T, H, P, N, 64, amode, work));
    };
    auto bwd = [&]() {
        if (form) CK(mn_cuda_ssd_backward_recurrent(&G, dX, dA, dB, dC, NULL, dy, NULL, X, A, Bm, Cm, NULL, B, T, H,
                                                    P, N, amode, work));
        else CK(mn_cuda_ssd_backward(&G, dX, dA, dB, dC, NULL, dy, NULL, X, A, Bm, Cm, NULL, B, T, H, P, N, 64,
                                     amode, work));
    };
    double tf = time_ms(fwd), tfb = time_ms([&]() { fwd(); bwd(); });
    double pn = (double)P * N, ff, fb, C = 64;
    if (form) { ff = 5 * pn * BTH; fb = (3 + 3 + 3 * 3.5 + 14) * pn * BTH; }
    else { ff = (4 * pn + 2 * C * (double)(N + P)) * BTH; fb = 2.5 * ff; }
    double bf = 4.0 * BTH * (2.0 * P + 2.0 * N + 1);                                   // X, A, B, C in; y out
    double bb = 4.0 * BTH * (2.0 * P + 2.0 * N + 1) + 4.0 * BTH * 2 * (P + 2.0 * N + 1)    // in; dX..dC r+w
                + (form ? 2.0 * 4 * B * H * ((T + 63) / 64) * pn : 0);                 // checkpoints w+r
    printf("| ssd %s %s | P %zu N %zu | %.3f | %.3f | %.2f | %.2f | %.0f | %.0f |\n",
           form ? "recurrent" : G.ssd_tf32 ? "default, TF32 + local dg" : "default",
           amode == MN_SSD_TRANSITION ? "transition" : "log-decay", P, N, tf, tfb,
           ff / (tf * 1e-3) / 1e12, (ff + fb) / (tfb * 1e-3) / 1e12, bf / (tf * 1e-3) / 1e9,
           (bf + bb) / (tfb * 1e-3) / 1e9);
    mn_cuda_dfree(X); mn_cuda_dfree(Bm); mn_cuda_dfree(Cm); mn_cuda_dfree(dy); mn_cuda_dfree(A); mn_cuda_dfree(y);
    mn_cuda_dfree(dX); mn_cuda_dfree(dA); mn_cuda_dfree(dB); mn_cuda_dfree(dC); mn_cuda_dfree(work);
}
static void bench_ssd_step(size_t Bd, size_t H, size_t P, size_t N, int amode) {
    size_t ns = Bd * H * P * N;
    std::vector<float> ah(Bd * H);
    for (size_t i = 0; i < ah.size(); i++) {
        double la = -urand();
        ah[i] = (float)(amode == MN_SSD_TRANSITION ? 2.0 * exp(la) - 1.0 : la);
    }
    float *st = dev_randn(ns, 1), *x = dev_randn(Bd * H * P, 1), *b = dev_randn(Bd * H * N, 1);
    float *c = dev_randn(Bd * H * N, 1), *a = dev_from(ah), *yo;
    CK(mn_cuda_malloc(&G, (void**)&yo, Bd * H * P * 4));
    double ms = time_ms([&]() { CK(mn_cuda_ssd_step(&G, yo, st, x, a, b, c, Bd, H, P, N, amode)); });
    double gbs = 2.0 * ns * 4 / (ms * 1e-3) / 1e9;
    printf("| ssd step %s | H %zu P %zu N %zu | %zu | %.1f | %.0f | %.0f | %.1f %% |\n",
           amode == MN_SSD_TRANSITION ? "transition" : "log-decay", H, P, N, Bd, ms * 1e3, Bd / (ms * 1e-3), gbs,
           gbs / 4300.0 * 100.0);
    mn_cuda_dfree(st); mn_cuda_dfree(x); mn_cuda_dfree(b); mn_cuda_dfree(c); mn_cuda_dfree(a); mn_cuda_dfree(yo);
}
static void bench_ssd(void) {
    const size_t B = 4, T = 4096, H = 16;
    printf("Mamba-2 SSD core, B=%zu T=%zu H=%zu (fp32 math: 3xTF32 on the GLA op)\n\n", B, T, H);
    printf("| op | head | fwd ms | fwd+bwd ms | fwd TF/s | fwd+bwd TF/s | fwd GB/s | fwd+bwd GB/s |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    bench_ssd_shape(B, T, H, 64, 128, MN_SSD_LOG_DECAY, 1);
    bench_ssd_shape(B, T, H, 64, 128, MN_SSD_TRANSITION, 1);
    bench_ssd_shape(B, T, H, 128, 128, MN_SSD_LOG_DECAY, 0);
    bench_ssd_shape(B, T, H, 128, 128, MN_SSD_TRANSITION, 0);
    bench_ssd_shape(B, T, H, 128, 128, MN_SSD_LOG_DECAY, 1);
    bench_ssd_shape(B, T, H, 128, 128, MN_SSD_TRANSITION, 1);
    printf("\nthe anchor's shape, B=16 T=2048 H=10 (one Mamba-2 layer of d_model 640)\n\n");
    printf("| op | head | fwd ms | fwd+bwd ms | fwd TF/s | fwd+bwd TF/s | fwd GB/s | fwd+bwd GB/s |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    bench_ssd_shape(16, 2048, 10, 128, 128, MN_SSD_LOG_DECAY, 0);
    bench_ssd_shape(16, 2048, 10, 128, 128, MN_SSD_TRANSITION, 0);
    G.math = MN_CUDA_MATH_TF32; G.ssd_tf32 = 1;    // ctx->ssd_tf32: the GLA op in TF32, the local gate gradient
    bench_ssd_shape(B, T, H, 128, 128, MN_SSD_LOG_DECAY, 0);
    bench_ssd_shape(16, 2048, 10, 128, 128, MN_SSD_LOG_DECAY, 0);
    bench_ssd_shape(16, 2048, 10, 128, 128, MN_SSD_TRANSITION, 0);
    G.math = MN_CUDA_MATH_FP32; G.ssd_tf32 = 0;
    printf("\n| decode | head | batch | us | tokens/s | GB/s (state r+w) | of 4.3 TB/s |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t Bd : { (size_t)1, (size_t)64 }) {
        bench_ssd_step(Bd, 16, 64, 128, MN_SSD_LOG_DECAY);
        bench_ssd_step(Bd, 16, 128, 128, MN_SSD_TRANSITION);
    }
}
// The RG-LRU op (mn_cuda_rglru_*), forward and forward + backward, median of REPS, at the issue's
// shape read as the RG-LRU's: B=4, T=4096, width W = 16 x 128 = 2048 in NH = 16 gate blocks of 128
// (the block-diagonal gates' "heads"), and at the anchor's Hawk layer (B=16, T=2048, W=640, NH=5);
// cuBLAS products in fp32 and TF32. Counted FLOPs: the gates' block products only, 4 B T W bw forward
// (two gates) and 8 B T W bw more backward (dx and dw of each); the scans' ~30 flops per entry are
// not counted. Counted bytes (floats of B T W each, weights aside): forward 10 (the products read x
// twice and write both pre-activations; the scan reads them and x, writes both gates and y); backward 21
// (the reverse scan reads dy, both gates, x, y_{t-1}, dx and writes dx, dZx, dZa; the products read dZ
// and read-write dx twice, read x and dZ twice more; the bias sums read dZx, dZa). Inputs: x ~ N(0,1),
// gate weights N(0, 1/bw), biases N(0,1), a_param as the ring init. Then the decode step at batch 1
// and 64 (W 2048, NH 16): the state read and written, and all bytes (state, x, y, and the gate weights
// read once) against the copy rate.
static void bench_rglru(void) {
    const size_t shapes[2][4] = { { 4, 4096, 2048, 16 }, { 16, 2048, 640, 5 } };   // B, T, W, NH
    printf("\nRG-LRU op (mn_cuda_rglru_*), median of %d; TF/s of the gates' block products, GB/s of the counted "
           "bytes\n\n", REPS);
    printf("| shape | products | fwd ms | fwd TF/s | fwd GB/s | fwd+bwd ms | fwd+bwd TF/s | fwd+bwd GB/s |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < 2; s++) {
        const size_t B = shapes[s][0], T = shapes[s][1], W = shapes[s][2], NH = shapes[s][3], bw = W / NH;
        const size_t n = B * T * W, nw = NH * bw * bw, wn = mn_cuda_rglru_work_size(B, T, W);
        std::vector<float> hap(W);
        for (size_t w = 0; w < W; w++) hap[w] = (float)log(exp(-0.5 * log(0.81 + 0.188 * urand())) - 1.0);
        float *x = dev_randn(n, 1), *dy = dev_randn(n, 1), *ap = dev_from(hap);
        float* wx = dev_randn(nw, 1 / sqrt((double)bw));
        float *wa = dev_randn(nw, 1 / sqrt((double)bw)), *bx = dev_randn(W, 1), *ba = dev_randn(W, 1);
        float *y, *gates, *dx, *dap, *dwx, *dbx, *dwa, *dba, *work;
        CK(mn_cuda_malloc(&G, (void**)&y, n * 4)); CK(mn_cuda_malloc(&G, (void**)&gates, 2 * n * 4));
        CK(mn_cuda_malloc(&G, (void**)&dx, n * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
        CK(mn_cuda_malloc(&G, (void**)&dap, W * 4)); CK(mn_cuda_malloc(&G, (void**)&dbx, W * 4));
        CK(mn_cuda_malloc(&G, (void**)&dba, W * 4)); CK(mn_cuda_malloc(&G, (void**)&dwx, nw * 4));
        CK(mn_cuda_malloc(&G, (void**)&dwa, nw * 4));
        const double ff = 4.0 * n * bw, fb = ff + 8.0 * n * bw, bf = 10.0 * n * 4, bb = bf + 21.0 * n * 4;
        for (int m = 0; m < 2; m++) {
            G.math = m ? MN_CUDA_MATH_TF32 : MN_CUDA_MATH_FP32;
            auto fwd = [&] {
                CK(mn_cuda_rglru_forward(&G, y, NULL, gates, x, ap, wx, bx, wa, ba, NULL, NULL, B, T, W, NH, 8.0));
            };
            double ms = time_ms(fwd), ms2 = time_ms([&] {
                fwd();
                CK(mn_cuda_rglru_backward(&G, dx, dap, dwx, dbx, dwa, dba, NULL, dy, NULL, y, gates, x, ap, wx, wa,
                                          NULL, NULL, B, T, W, NH, 8.0, work));
            });
            printf("| B=%zu T=%zu W=%zu NH=%zu | %s | %.3f | %.1f | %.0f | %.3f | %.1f | %.0f |\n", B, T, W, NH,
                   m ? "tf32" : "fp32", ms, ff / (ms * 1e-3) / 1e12, bf / (ms * 1e-3) / 1e9, ms2,
                   fb / (ms2 * 1e-3) / 1e12, bb / (ms2 * 1e-3) / 1e9);
        }
        G.math = MN_CUDA_MATH_FP32;
        mn_cuda_dfree(x); mn_cuda_dfree(dy); mn_cuda_dfree(ap); mn_cuda_dfree(wx); mn_cuda_dfree(wa);
        mn_cuda_dfree(bx); mn_cuda_dfree(ba); mn_cuda_dfree(y); mn_cuda_dfree(gates); mn_cuda_dfree(dx);
        mn_cuda_dfree(work); mn_cuda_dfree(dap); mn_cuda_dfree(dbx); mn_cuda_dfree(dba); mn_cuda_dfree(dwx);
        mn_cuda_dfree(dwa);
    }
    const size_t W = 2048, NH = 16, bw = W / NH, nw = NH * bw * bw, bs[2] = { 1, 64 };
    printf("\n| RG-LRU decode step, W=%zu NH=%zu | batch | us per step | tokens/s | state GB/s (read + write) | "
           "%% of 4.3 TB/s | all bytes GB/s (state, x, y, weights once) |\n|---|---|---|---|---|---|---|\n", W, NH);
    std::vector<float> hap(W);
    for (size_t w = 0; w < W; w++) hap[w] = (float)log(exp(-0.5 * log(0.81 + 0.188 * urand())) - 1.0);
    float *ap = dev_from(hap), *wx = dev_randn(nw, 1 / sqrt((double)bw)), *wa = dev_randn(nw, 1 / sqrt((double)bw));
    float *bx = dev_randn(W, 1), *ba = dev_randn(W, 1);
    for (int bi = 0; bi < 2; bi++) {
        const size_t Bd = bs[bi], ns = Bd * W;
        float *st = dev_randn(ns, 1), *sx = dev_randn(ns, 1), *so;
        CK(mn_cuda_malloc(&G, (void**)&so, ns * 4));
        double ms = time_ms([&] {
            CK(mn_cuda_rglru_step(&G, so, st, sx, ap, wx, bx, wa, ba, NULL, Bd, W, NH, 8.0, NULL));
        });
        double sgb = 2.0 * ns * 4 / (ms * 1e-3) / 1e9, agb = (4.0 * ns + 2.0 * nw + 3.0 * W) * 4 / (ms * 1e-3) / 1e9;
        printf("| | %zu | %.1f | %.0f | %.0f | %.1f %% | %.0f |\n", Bd, ms * 1e3, Bd / (ms * 1e-3), sgb,
               100.0 * sgb / 4300.0, agb);
        mn_cuda_dfree(st); mn_cuda_dfree(sx); mn_cuda_dfree(so);
    }
    mn_cuda_dfree(ap); mn_cuda_dfree(wx); mn_cuda_dfree(wa); mn_cuda_dfree(bx); mn_cuda_dfree(ba);
}
// mLSTM (mn_cuda_mlstm_*) at B=4, T=4096, H=16, D=128 (the issue's shape) and at the anchor's layer shape
// (B=16, T=2048, H=5, D=128), fp32 in and out, median of REPS, both forms. FLOPs counted, per token and head:
// the recurrent form's kernels 4 Dk Dv forward for the state update and read-out (2 + 2, the GLA convention)
// plus 4 Dk Dv for n, which every state column carries itself (its update and n.q), and for the backward
// the forward again plus three scans (dq, dv, dk) of 4 Dk Dv each; the chunk form's (C = 64, every
// intra-chunk block counted in full) 4 D^2 + 4 C D forward (chunk states and their read-out, the scores and
// their weighted sum), 10 D^2 + 10 C D for the GLA op's backward, so 18 D^2 + 18 C D forward and backward
// (the forward recomputed), the normaliser's vector scans not counted (O(D) a token). Bytes: what the
// kernels must move at least (q, k, v, the gates, out; the backward's reads of q, k, v, dout, the gates and
// its recomputed output, its writes of dq, dk, dv, di, df), a lower bound of the traffic. The decode step
// at batch 1 and 64: state bytes read and written (C and n), against the H200's 4.3 TB/s.
static void bench_mlstm_shape(size_t B, size_t T, size_t H, size_t D) {
    const size_t n = B * T * H * D, ng = B * T * H;
    std::vector<float> hf(ng), hi(ng);
    for (size_t i = 0; i < ng; i++) { hf[i] = (float)(4.5 + 1.5 * nrand()); hi[i] = (float)(2 * nrand()); }
    float *q = dev_randn(n, 1), *k = dev_randn(n, 1), *v = dev_randn(n, 1), *dout = dev_randn(n, 1);
    float *fg = dev_from(hf), *ig = dev_from(hi), *out, *dq, *dk, *dv, *di, *df, *work;
    const size_t wn = mn_cuda_mlstm_work_size(B, T, H, D, D, 64);
    CK(mn_cuda_malloc(&G, (void**)&out, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dq, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&dk, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dv, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&di, ng * 4)); CK(mn_cuda_malloc(&G, (void**)&df, ng * 4));
    CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    const double sc = 1.0 / sqrt((double)D), tok = (double)ng, dd = (double)D;
    const double ff = tok * 8 * dd * dd, fb = ff + tok * (8 + 12) * dd * dd;
    const double bf = 4.0 * (tok * (4 * dd + 2)), bb = bf + 4.0 * (tok * (7 * dd + 6));
    const double cf = tok * (4 * dd * dd + 4 * 64 * dd), cb = tok * (18 * dd * dd + 18 * 64 * dd);
    for (int chunk = 0; chunk < 2; chunk++) {
        const char* fm = chunk ? "chunk" : "recurrent";
        const double f1 = chunk ? cf : ff, f2 = chunk ? cb : fb;
        auto fwd = [&] {
            if (chunk)
                CK(mn_cuda_mlstm_forward_chunk(&G, out, NULL, NULL, NULL, q, k, v, ig, fg, NULL, B, T, H, D, D, sc,
                                               1e-6, 64, work));
            else
                CK(mn_cuda_mlstm_forward_recurrent(&G, out, NULL, NULL, NULL, NULL, NULL, q, k, v, ig, fg, NULL, NULL,
                                                   NULL, B, T, H, D, D, sc, 1e-6, 64, work));
        };
        double ms = time_ms(fwd);
        printf("| mlstm fwd %s, B %zu T %zu H %zu D %zu | %.3f | %.3f | %.2f | %.0f |\n", fm, B, T, H, D, ms,
               f1 / 1e12, f1 / (ms * 1e-3) / 1e12, bf / (ms * 1e-3) / 1e9);
        ms = time_ms([&] {
            fwd();
            if (chunk)
                CK(mn_cuda_mlstm_backward_chunk(&G, dq, dk, dv, di, df, dout, q, k, v, ig, fg, NULL, B, T, H, D, D, sc,
                                                1e-6, 64, MN_MLSTM_BW_EXACT, work));
            else
                CK(mn_cuda_mlstm_backward_recurrent(&G, dq, dk, dv, di, df, NULL, NULL, dout, q, k, v, ig, fg, NULL,
                                                    NULL, NULL, B, T, H, D, D, sc, 1e-6, 64, MN_MLSTM_BW_EXACT,
                                                    work));
        });
        printf("| mlstm fwd+bwd %s, B %zu T %zu H %zu D %zu | %.3f | %.3f | %.2f | %.0f |\n", fm, B, T, H, D, ms,
               f2 / 1e12, f2 / (ms * 1e-3) / 1e12, bb / (ms * 1e-3) / 1e9);
    }
    mn_cuda_dfree(q); mn_cuda_dfree(k); mn_cuda_dfree(v); mn_cuda_dfree(dout); mn_cuda_dfree(fg); mn_cuda_dfree(ig);
    mn_cuda_dfree(out); mn_cuda_dfree(dq); mn_cuda_dfree(dk); mn_cuda_dfree(dv); mn_cuda_dfree(di); mn_cuda_dfree(df);
    mn_cuda_dfree(work);
}
static void bench_mlstm(void) {
    printf("\nmLSTM (recurrent and chunk forms, fp32 math: 3xTF32 in the chunk form), median of %d\n\n", REPS);
    printf("| op | ms | counted TFLOP | TF/s | GB/s (lower bound) |\n|---|---|---|---|---|\n");
    bench_mlstm_shape(4, 4096, 16, 128);
    bench_mlstm_shape(16, 2048, 5, 128);            // one layer at the anchor configuration
    const size_t H = 16, D = 128, bs[2] = { 1, 64 };
    printf("\n| mLSTM decode step, H=%zu D=%zu | batch | us per step | tokens/s | state GB/s (read + write) | "
           "%% of 4.3 TB/s |\n|---|---|---|---|---|---|\n", H, D);
    for (int bi = 0; bi < 2; bi++) {
        const size_t Bd = bs[bi], ns = Bd * H * D * D;
        float *C = dev_randn(ns, 0.3), *nn = dev_randn(Bd * H * D, 0.3), *m = dev_randn(Bd * H, 1);
        float *sq = dev_randn(Bd * H * D, 1), *sk = dev_randn(Bd * H * D, 1), *sv = dev_randn(Bd * H * D, 1);
        float *si = dev_randn(Bd * H, 1), *sf = dev_randn(Bd * H, 1), *so;
        CK(mn_cuda_malloc(&G, (void**)&so, Bd * H * D * 4));
        double ms = time_ms([&] {
            CK(mn_cuda_mlstm_step(&G, so, C, nn, m, sq, sk, sv, si, sf, Bd, H, D, D, 1.0 / sqrt((double)D), 1e-6));
        });
        const double gbs = 2.0 * (ns + Bd * H * D) * 4 / (ms * 1e-3) / 1e9;
        printf("| | %zu | %.1f | %.0f | %.0f | %.0f %% |\n", Bd, ms * 1e3, Bd / (ms * 1e-3), gbs, gbs / 4300 * 100);
        mn_cuda_dfree(C); mn_cuda_dfree(nn); mn_cuda_dfree(m); mn_cuda_dfree(sq); mn_cuda_dfree(sk);
        mn_cuda_dfree(sv); mn_cuda_dfree(si); mn_cuda_dfree(sf); mn_cuda_dfree(so);
    }
}
// ---- the sLSTM (bench_cuda slstm) ----
// The op mn_cuda_slstm_* at the table's shape (B=4, T=4096, 16 heads of 128) and at its natural one,
// the anchor layer's (B=16, T=2048, 5 heads of 128 = hidden 640: xLSTM[7:1]'s sLSTM block), forward
// and forward+backward (the backward's two cuBLAS products in fp32, then TF32). Inputs random: x ~ N(0,1),
// R ~ N(0, 1/Dh), b ~ N(0, 0.25). Counted work, per token and unit (Hd = NH Dh units):
//   FLOPs: the forward's R y_{t-1} (8 Dh: 4 gates, Dh multiply-adds); the backward's recomputed
//   pre-activations, R^T draw and dR (3 x 8 Dh);
//   bytes (floats x 4): forward x read (4), y c n m written (4); backward: y_{t-1} built (2), x + b (8),
//   the recompute product (read y_{t-1} 1, raw read + written 8), the walk (raw 4, dx 4, dy y c n m 5 read;
//   raw 4, dx 4 written), dR's product (5): 45.
// Then the decode step (mn_cuda_slstm_step) at batch 1 and 64, 16 heads of 128: the state traffic is x
// (4 Hd) read and y, c, n, m (4 Hd) read and written per sequence; every (sequence, head) block also
// reads its head's R (4 Dh^2 floats), which dominates: both are printed, the share of 4.3 TB/s with R.
static void bench_slstm_op(size_t B, size_t T, size_t NH, size_t Dh, const char* label) {
    const size_t Hd = NH * Dh, N = B * T, nx = N * 4 * Hd, ns = N * Hd, nR = NH * 4 * Dh * Dh;
    const size_t wn = mn_cuda_slstm_work_size(B, T, NH, Dh);
    float *x = dev_randn(nx, 1), *R = dev_randn(nR, 1.0 / sqrt((double)Dh)), *b = dev_randn(4 * Hd, 0.5);
    float *dy = dev_randn(ns, 1), *y, *c, *n, *m, *dx, *dR, *db, *work;
    CK(mn_cuda_malloc(&G, (void**)&y, ns * 4)); CK(mn_cuda_malloc(&G, (void**)&c, ns * 4));
    CK(mn_cuda_malloc(&G, (void**)&n, ns * 4)); CK(mn_cuda_malloc(&G, (void**)&m, ns * 4));
    CK(mn_cuda_malloc(&G, (void**)&dx, nx * 4)); CK(mn_cuda_malloc(&G, (void**)&dR, nR * 4));
    CK(mn_cuda_malloc(&G, (void**)&db, 4 * Hd * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    cudaMemset(dx, 0, nx * 4); cudaMemset(dR, 0, nR * 4); cudaMemset(db, 0, 4 * Hd * 4);
    const double u = (double)N * Hd, ff = 8.0 * u * Dh, fb = ff + 24.0 * u * Dh;   // FLOPs
    const double bf = 8.0 * u * 4, bb = bf + 45.0 * u * 4;                             // bytes
    auto fwd = [&] { CK(mn_cuda_slstm_forward(&G, y, c, n, m, x, R, b, NULL, NULL, NULL, NULL, B, T, NH, Dh)); };
    double ms = time_ms(fwd);
    printf("| %s | fwd | - | %.3f | %.2f | %.2f | %.2f | %.0f |\n", label, ms, ff / 1e9, ff / (ms * 1e-3) / 1e12,
           bf / 1e9, bf / (ms * 1e-3) / 1e9);
    for (int mt = 0; mt < 2; mt++) {
        G.math = mt ? MN_CUDA_MATH_TF32 : MN_CUDA_MATH_FP32;
        ms = time_ms([&] {
            fwd();
            CK(mn_cuda_slstm_backward(&G, dx, dR, db, NULL, NULL, NULL, dy, y, c, n, m, x, R, b, NULL, NULL, NULL, NULL,
                                      B, T, NH, Dh, work));
        });
        printf("| %s | fwd+bwd | %s | %.3f | %.2f | %.2f | %.2f | %.0f |\n", label, mt ? "tf32" : "fp32", ms, fb / 1e9,
               fb / (ms * 1e-3) / 1e12, bb / 1e9, bb / (ms * 1e-3) / 1e9);
    }
    G.math = MN_CUDA_MATH_FP32;
    mn_cuda_dfree(x); mn_cuda_dfree(R); mn_cuda_dfree(b); mn_cuda_dfree(dy); mn_cuda_dfree(y); mn_cuda_dfree(c);
    mn_cuda_dfree(n); mn_cuda_dfree(m); mn_cuda_dfree(dx); mn_cuda_dfree(dR); mn_cuda_dfree(db); mn_cuda_dfree(work);
}

static void bench_slstm(void) {
    printf("sLSTM op (fused recurrent walks), median of %d; products = the backward's cuBLAS math\n\n", REPS);
    printf("| shape | pass | products | ms | counted GFLOP | TF/s | counted GB | GB/s |\n"
           "|---|---|---|---|---|---|---|---|\n");
    bench_slstm_op(4, 4096, 16, 128, "B=4 T=4096 NH=16 Dh=128");
    bench_slstm_op(16, 2048, 5, 128, "anchor layer B=16 T=2048 NH=5 Dh=128");
    const size_t NH = 16, Dh = 128, Hd = NH * Dh;
    printf("\n| sLSTM decode step, NH=%zu Dh=%zu | batch | us per step | tokens/s | state GB/s (x read, y c n m read + "
           "written) | GB/s with R | %% of 4.3 TB/s (with R) |\n|---|---|---|---|---|---|---|\n", NH, Dh);
    const size_t bs[2] = { 1, 64 };
    float *R = dev_randn(NH * 4 * Dh * Dh, 1.0 / sqrt((double)Dh)), *b = dev_randn(4 * Hd, 0.5);
    for (int bi = 0; bi < 2; bi++) {
        const size_t Bd = bs[bi];
        std::vector<float> hn(Bd * Hd);
        for (size_t i = 0; i < hn.size(); i++) hn[i] = (float)(1.0 + fabs(nrand()));   // n > 0: a running memory
        float *x = dev_randn(Bd * 4 * Hd, 1), *y = dev_randn(Bd * Hd, 0.5), *c = dev_randn(Bd * Hd, 1);
        float *n = dev_from(hn), *m = dev_randn(Bd * Hd, 1);
        double ms = time_ms([&] { CK(mn_cuda_slstm_step(&G, y, c, n, m, x, R, b, Bd, NH, Dh)); });
        const double st = 12.0 * Bd * Hd * 4, all = st + (double)Bd * NH * 4 * Dh * Dh * 4;
        printf("| | %zu | %.1f | %.0f | %.0f | %.0f | %.1f |\n", Bd, ms * 1e3, Bd / (ms * 1e-3), st / (ms * 1e-3) / 1e9,
               all / (ms * 1e-3) / 1e9, 100.0 * all / (ms * 1e-3) / 4.3e12);
        mn_cuda_dfree(x); mn_cuda_dfree(y); mn_cuda_dfree(c); mn_cuda_dfree(n); mn_cuda_dfree(m);
    }
    mn_cuda_dfree(R); mn_cuda_dfree(b);
}

int main(int argc, char** argv) {
    int profile = argc > 1 && !strcmp(argv[1], "profile");
    size_t B = argc > 4 ? (size_t)atol(argv[1]) : 4, T = argc > 4 ? (size_t)atol(argv[2]) : 4096,
           H = argc > 4 ? (size_t)atol(argv[3]) : 16, K = argc > 4 ? (size_t)atol(argv[4]) : 128, V = K;
    size_t BTH = B * T * H;
    cudaDeviceProp prop;
    if (mn_cuda_init(&G, 0) != MN_OK) { printf("bench_cuda: no usable CUDA device (%s)\n", G.msg); return 1; }
    cudaGetDeviceProperties(&prop, 0);
    printf("bench_cuda on %s (%d SMs), B=%zu T=%zu H=%zu K=V=%zu, median of %d\n\n",
           prop.name, G.sm_count, B, T, H, K, REPS);
    if (argc > 1 && !strcmp(argv[1], "delta")) { bench_delta(); mn_cuda_free(&G); return 0; }
    if (argc > 1 && !strcmp(argv[1], "ssd")) { bench_ssd(); mn_cuda_free(&G); return 0; }
    if (argc > 1 && !strcmp(argv[1], "rglru")) { bench_rglru(); mn_cuda_free(&G); return 0; }
    if (argc > 1 && !strcmp(argv[1], "mlstm")) { bench_mlstm(); mn_cuda_free(&G); return 0; }
    if (argc > 1 && !strcmp(argv[1], "slstm")) { bench_slstm(); mn_cuda_free(&G); return 0; }
    if (argc > 1 && !strcmp(argv[1], "attn")) {   // the attention rows alone
        bench_attention();
        mn_cuda_free(&G);
        return 0;
    }
    if (argc > 1 && (!strcmp(argv[1], "gla") || !strcmp(argv[1], "glaprof"))) {   // the GLA-family rows alone
        bench_gla(!strcmp(argv[1], "glaprof"));
        mn_cuda_free(&G);
        return 0;
    }
    // inputs: q, k through the L2-norm op (unit rows), v ~ N(0,1), g = logsigmoid(N(2,1)), beta = sigmoid(N(0,1)),
    // lambda in (0.25, 1)
    float *qr = dev_randn(BTH * K, 1), *kr = dev_randn(BTH * K, 1), *v = dev_randn(BTH * V, 1), *q, *k, *rstd, *g,
          *beta, *lam;
    std::vector<float> hg(BTH), hb(BTH), hl(H * K);
    for (size_t i = 0; i < BTH; i++) {
        double a = 2 + nrand();
        hg[i] = (float)((a < 0 ? a : 0) - log1p(exp(-fabs(a)))); hb[i] = (float)(1 / (1 + exp(-nrand())));
    }
    for (size_t i = 0; i < H * K; i++) hl[i] = (float)(0.25 + 0.75 * urand());
    g = dev_from(hg); beta = dev_from(hb); lam = dev_from(hl);
    CK(mn_cuda_malloc(&G, (void**)&q, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&k, BTH * K * 4));
    CK(mn_cuda_malloc(&G, (void**)&rstd, BTH * 4));
    CK(mn_cuda_l2norm_forward(&G, q, rstd, qr, BTH, K)); CK(mn_cuda_l2norm_forward(&G, k, rstd, kr, BTH, K));
    float *out, *xs, *work, *dout = dev_randn(BTH * V, 1), *dq, *dk, *dv, *dg, *db, *dl;
    mn_mesa_opts o; memset(&o, 0, sizeof o);
    size_t wn = mn_cuda_mesa_work_size(B, T, H, K, V, &o);
    CK(mn_cuda_malloc(&G, (void**)&out, BTH * V * 4)); CK(mn_cuda_malloc(&G, (void**)&xs, BTH * K * 4));
    CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    CK(mn_cuda_malloc(&G, (void**)&dq, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&dk, BTH * K * 4));
    CK(mn_cuda_malloc(&G, (void**)&dv, BTH * V * 4));
    CK(mn_cuda_malloc(&G, (void**)&dg, BTH * 4)); CK(mn_cuda_malloc(&G, (void**)&db, BTH * 4));
    CK(mn_cuda_malloc(&G, (void**)&dl, H * K * 4));
    printf("workspace %.2f GB\n\n", wn * 4.0 / 1e9);
    if (profile) {                                   // one call of each, nothing else (ncu)
        o.cg_iters = 30;
        if (argc > 2 && !strcmp(argv[2], "fast")) {   // the fast setting at fla's CG 10
            o.cg_iters = 10; o.fla = 1; G.mesa_scan = MN_CUDA_SCAN_TF32; G.mesa_keep_states = 1;
        }
        CK(mn_cuda_mesa_forward(&G, out, xs, NULL, NULL, NULL, q, k, v, g, beta, lam, B, T, H, K, V, &o, work));
        CK(mn_cuda_mesa_backward(&G, dq, dk, dv, dg, db, dl, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g, beta, lam,
                                 NULL, NULL, B, T, H, K, V, &o, work));
        CK(mn_cuda_sync(&G));
        mn_cuda_free(&G);
        return 0;
    }
    printf("| op | cuBLAS | CG | ms | counted TFLOP | TF/s | issue target (fla Triton) |\n"
           "|---|---|---|---|---|---|---|\n");
    // one row: the op (forward, or forward + backward) at the current ctx settings, CG count cg
    // (fla = 1: fla's arithmetic, exactly cg iterations; 0: textbook, a row stops at float precision)
    auto row = [&](int bwd, int cg, int fla, const char* variant) {
        char cgname[64];
        o.cg_iters = cg; o.fla = fla;
        snprintf(cgname, sizeof cgname, "%d%s%s", cg, fla ? " fla" : "", variant);
        double ms = time_ms([&] {
            CK(mn_cuda_mesa_forward(&G, out, xs, NULL, NULL, NULL, q, k, v, g, beta, lam, B, T, H, K, V, &o, work));
            if (bwd) CK(mn_cuda_mesa_backward(&G, dq, dk, dv, dg, db, dl, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g,
                                              beta, lam, NULL, NULL, B, T, H, K, V, &o, work));
        });
        double fl = mesa_flops(B, T, H, K, V, cg, bwd);
        const char* tgt = cg == 30 ? (bwd ? "8.57 ms" : "3.30 ms") : cg == 10 ? (bwd ? "4.81 ms" : "1.53 ms") : "-";
        printf("| mesa %s | %s | %s | %.3f | %.3f | %.1f | %s |\n", bwd ? "fwd+bwd" : "fwd",
               bwd ? (G.math ? "tf32" : "fp32") : "-", cgname, ms, fl / 1e12, fl / (ms * 1e-3) / 1e12, tgt);
    };
    struct { int cg, fla; } rows[5] = { { 30, 0 }, { 10, 0 }, { 30, 1 }, { 10, 1 }, { -1, 0 } };
    for (int c = 0; c < 5; c++) row(0, rows[c].cg, rows[c].fla, "");
    for (int math = 0; math < 2; math++) {
        G.math = math;
        for (int c = 0; c < 4; c++) row(1, rows[c].cg, rows[c].fla, "");
    }
    // A/B at fla's fixed counts: the mma.sync CG kernel with the cuBLAS backward (the previous
    // default), the plain-TF32 scan, and the backward reusing the forward's states (ctx->mesa_keep_states)
    struct { const char* tag; int cg, scan, keep, fwd; } var[4] = {
        { ", mma.sync CG", MN_CUDA_CG_MMA, MN_CUDA_SCAN_TF32X3, 0, 1 },
        { ", TF32 scan", MN_CUDA_CG_WGMMA, MN_CUDA_SCAN_TF32, 0, 1 },
        { ", states kept", MN_CUDA_CG_WGMMA, MN_CUDA_SCAN_TF32X3, 1, 0 },
        { ", TF32 scan, states kept", MN_CUDA_CG_WGMMA, MN_CUDA_SCAN_TF32, 1, 0 } };
    for (int vi = 0; vi < 4; vi++) {
        G.mesa_cg = var[vi].cg; G.mesa_scan = var[vi].scan; G.mesa_keep_states = var[vi].keep;
        G.math = MN_CUDA_MATH_FP32;
        for (int c = 2; c < 5 && var[vi].fwd; c++) row(0, rows[c].cg, rows[c].fla, var[vi].tag);
        G.math = MN_CUDA_MATH_TF32;
        for (int c = 2; c < 4; c++) row(1, rows[c].cg, rows[c].fla, var[vi].tag);
    }
    G.math = MN_CUDA_MATH_FP32; G.mesa_cg = MN_CUDA_CG_WGMMA; G.mesa_scan = MN_CUDA_SCAN_TF32X3; G.mesa_keep_states = 0;
    {   // ceilings: a d_model 2048 projection over the same tokens, and two memory-bound ops
        size_t N = B * T, C = 2048;
        float *x = dev_randn(N * C, 1), *w = dev_randn(C * C, 0.02), *y, *r;
        CK(mn_cuda_malloc(&G, (void**)&y, N * C * 4)); CK(mn_cuda_malloc(&G, (void**)&r, N * 4));
        for (int math = 0; math < 2; math++) {
            G.math = math;
            double ms = time_ms([&] { CK(mn_cuda_matmul_forward(&G, y, x, w, NULL, N, C, C)); });
            printf("| matmul %zux%zux%zu | %s | - | %.3f | %.3f | %.1f | - |\n", N, C, C, math ? "tf32" : "fp32", ms,
                   2.0 * N * C * C / 1e12, 2.0 * N * C * C / (ms * 1e-3) / 1e12);
        }
        G.math = MN_CUDA_MATH_FP32;
        double ms = time_ms([&] { CK(mn_cuda_rmsnorm_forward(&G, y, r, x, w, N, C, 1e-6)); });
        printf("| rmsnorm fwd (%zu,%zu): %.0f GB/s | - | - | %.3f | - | - | - |\n", N, C,
               2.0 * N * C * 4 / (ms * 1e-3) / 1e9, ms);
        ms = time_ms([&] { CK(mn_cuda_swiglu_forward(&G, y, x, x, N * C)); });
        printf("| swiglu fwd (%zu): %.0f GB/s | - | - | %.3f | - | - | - |\n", N * C,
               3.0 * N * C * 4 / (ms * 1e-3) / 1e9, ms);
    }
    mn_cuda_dfree(work);
    bench_step(lam, H, K);
    bench_attention();
    bench_gla(0);
    mn_cuda_free(&G);
    return 0;
}
