// bench_cuda.cu - times the CUDA Mesa op at flash-linear-attention's anchor shape (B=4, T=4096,
// H=16, K=V=128, chunk 64) for CG 30, 10 and no solve, forward and forward+backward (the
// backward's cuBLAS products in fp32 and in TF32; the forward uses no cuBLAS), plus the projection
// matmul and two memory-bound ops for the ceilings. Prints one markdown table. Times are the median of REPS runs after two warm-ups,
// measured with CUDA events around each call; inputs are random (unit q, k; gates as the layer
// makes them), never zeros. TF/s counts the op's matrix products (2 flops per multiply-add; the
// CG term is n_cg (4 C^2 K + 2 C K^2) per chunk: the CG loop's three products with the chunk's keys), not the elementwise work.
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
static double urand(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return ((rs * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0); }
static double nrand(void) { double u = urand() + 1e-300, v = urand(); return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v); }

#define CK(x) do { int r_ = (x); if (r_ != MN_OK) { printf("bench_cuda: %s failed: %s\n", #x, G.msg); exit(1); } } while (0)
static float* dev_from(const std::vector<float>& h) {
    float* d = NULL;
    CK(mn_cuda_malloc(&G, (void**)&d, h.size() * sizeof(float)));
    CK(mn_cuda_upload(&G, d, h.data(), h.size() * sizeof(float)));
    return d;
}
static float* dev_randn(size_t n, double sd) { std::vector<float> h(n); for (size_t i = 0; i < n; i++) h[i] = (float)(sd * nrand()); return dev_from(h); }

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
    double st = 2 * C * k * (k + v), cgf = cg > 0 ? cg * (4 * C * C * k + 2 * C * k * k) : 0, outf = 2 * C * C * k + 2 * C * C * v + 2 * C * k * v;
    double f = st + cgf + outf;
    // backward: B0 states again, B1 2CKV, B2 six-plus-two products, B3 the adjoint CG, B4 2CK^2, B5 six
    if (bwd) f += st + 2 * C * k * v + (6 * C * C * k + 4 * C * C * v + 6 * C * k * v) + cgf + 2 * C * k * k + (6 * C * C * k + 6 * C * k * k);
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
    printf("\nmesa decode step (mn_cuda_mesa_step: state update + CG + read-out), H=%zu K=V=%zu, states after %zu prefill tokens, %zu steps per pass, median of 5 passes\n\n", H, K, T0, NS);
    printf("| batch | CG | mean iters | max iters | us per step | tokens/s | fla decode step (reference figure) |\n|---|---|---|---|---|---|---|\n");
    for (int bi = 0; bi < 2; bi++) {
        size_t B = batches[bi], BH = B * H, n0 = B * T0 * H, ns = NS * BH;
        std::vector<float> hg(n0), hb(n0), sg(ns), sb(ns);
        for (size_t i = 0; i < n0; i++) { double mu = 0.5 + 5.5 * (double)(i % H) / (double)(H - 1), a = mu + nrand(); hg[i] = (float)((a < 0 ? a : 0) - log1p(exp(-fabs(a)))); hb[i] = (float)(1 / (1 + exp(-nrand()))); }
        for (size_t i = 0; i < ns; i++) { double mu = 0.5 + 5.5 * (double)(i % H) / (double)(H - 1), a = mu + nrand(); sg[i] = (float)((a < 0 ? a : 0) - log1p(exp(-fabs(a)))); sb[i] = (float)(1 / (1 + exp(-nrand()))); }
        float *pq = dev_randn(n0 * K, 1), *pk = dev_randn(n0 * K, 1), *pv = dev_randn(n0 * V, 1), *pg = dev_from(hg), *pb = dev_from(hb), *rs, *po, *w;
        float *sq = dev_randn(ns * K, 1), *sk = dev_randn(ns * K, 1), *sv = dev_randn(ns * V, 1), *gg = dev_from(sg), *gb = dev_from(sb);
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
        mn_cuda_dfree(w); mn_cuda_dfree(po); mn_cuda_dfree(pq); mn_cuda_dfree(pk); mn_cuda_dfree(pv); mn_cuda_dfree(pg); mn_cuda_dfree(pb); mn_cuda_dfree(rs);
        struct { const char* name; int cg, fla, jacobi; double tol; double anchor; } cfg[3] = {
            { "dynamic, tol 1e-4, max 30, Jacobi x0", 30, 0, 1, 1e-4, -1 },
            { "fixed 30, fla arithmetic, Jacobi x0", 30, 1, 1, 0, B == 1 ? 68.7 : 540.6 },
            { "fixed 10, fla arithmetic, Jacobi x0", 10, 1, 1, 0, B == 1 ? 29.9 : 231.4 } };
        for (int c = 0; c < 3; c++) {
            mn_mesa_opts o; memset(&o, 0, sizeof o);
            o.cg_iters = cfg[c].cg; o.fla = cfg[c].fla; o.jacobi = cfg[c].jacobi; o.cg_tol = cfg[c].tol;
            auto pass = [&] {
                for (size_t s = 0; s < NS; s++)
                    CK(mn_cuda_mesa_step(&G, out + s * BH * V, its + s * BH, hk, hv, sq + s * BH * K, sk + s * BH * K, sv + s * BH * V, gg + s * BH, gb + s * BH, lam, B, H, K, V, &o));
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
            printf("| %zu | %s | %.2f | %d | %.1f | %.0f | %s |\n", B, cfg[c].name, mean / (double)ns, mx, us, (double)B / (us * 1e-6), anc);
        }
        mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv); mn_cuda_dfree(gg); mn_cuda_dfree(gb);
        mn_cuda_dfree(hk); mn_cuda_dfree(hv); mn_cuda_dfree(hk0); mn_cuda_dfree(hv0); mn_cuda_dfree(out); mn_cuda_dfree(its);
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
    printf("\nattention, B=%zu T=%zu H=%zu D=%zu (fp32 in and out, fp16 tensor-core products), median of %d; workspace %.2f GB\n\n",
           B, T, H, D, REPS, wn * 4.0 / 1e9);
    printf("| op | window | ms | TF/s (FlashAttention's count) | issue target (1.5x torch flash SDPA) |\n|---|---|---|---|---|\n");
    const size_t wins[2] = { 0, 512 };
    for (int wi = 0; wi < 2; wi++) {
        const size_t W = wins[wi];
        const double sc = 1.0 / sqrt((double)D);
        const double fl = W ? 4.0 * B * H * D * ((double)T * W - W * (W - 1) / 2.0) : 4.0 * B * H * (double)T * T * D / 2;
        double ms = time_ms([&] { CK(mn_cuda_attention_forward(&G, out, lse, q, k, v, B, T, H, D, D, W, sc, work)); });
        printf("| attention fwd | %zu | %.3f | %.1f | %s |\n", W, ms, fl / (ms * 1e-3) / 1e12, W ? "-" : "0.75 ms");
        ms = time_ms([&] {
            CK(mn_cuda_attention_forward(&G, out, lse, q, k, v, B, T, H, D, D, W, sc, work));
            CK(mn_cuda_attention_backward(&G, dq, dk, dv, dout, out, lse, q, k, v, B, T, H, D, D, W, sc, work));
        });
        printf("| attention fwd+bwd | %zu | %.3f | %.1f | %s |\n", W, ms, 3.5 * fl / (ms * 1e-3) / 1e12, W ? "-" : "3.20 ms");
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
        float *kc, *vc, *sq = dev_randn(Bd * H * D, 1), *sk = dev_randn(Bd * H * D, 1), *sv = dev_randn(Bd * H * D, 1), *so;
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
        double ms = time_ms([&] { CK(mn_cuda_attention_step(&G, so, kc, vc, sq, sk, sv, Bd, L - 1, L, H, D, D, 0, 0.088)); });
        printf("| | %zu | %.1f | %.0f | %.0f |\n", Bd, ms * 1e3, Bd / (ms * 1e-3), 2.0 * nc * 4 / (ms * 1e-3) / 1e9);
        mn_cuda_dfree(kc); mn_cuda_dfree(vc); mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv); mn_cuda_dfree(so);
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
    float *out, *dq, *dk, *dv, *dg, *work;
    size_t wn = mn_cuda_gla_work_size(B, T, H, D, D, C);
    CK(mn_cuda_malloc(&G, (void**)&out, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dq, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&dk, n * 4)); CK(mn_cuda_malloc(&G, (void**)&dv, n * 4));
    CK(mn_cuda_malloc(&G, (void**)&dg, n * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    if (profile) {
        G.math = MN_CUDA_MATH_TF32;
        for (int gi = 0; gi < 3; gi++) {
            const size_t Gw = gi == 0 ? 0 : gi == 1 ? 1 : D;
            CK(mn_cuda_gla_forward(&G, out, NULL, q, k, v, gi ? g : NULL, NULL, B, T, H, D, D, Gw, 0.088, C, work));
            CK(mn_cuda_gla_backward(&G, dq, dk, dv, gi ? dg : NULL, NULL, dout, NULL, q, k, v, gi ? g : NULL, NULL, B,
                                    T, H, D, D, Gw, 0.088, C, work));
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
        }
    }
    G.math = MN_CUDA_MATH_FP32;
    mn_cuda_dfree(q); mn_cuda_dfree(k); mn_cuda_dfree(v); mn_cuda_dfree(dout); mn_cuda_dfree(g); mn_cuda_dfree(out);
    mn_cuda_dfree(dq); mn_cuda_dfree(dk); mn_cuda_dfree(dv); mn_cuda_dfree(dg); mn_cuda_dfree(work);
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

// (in progress) the benchmarks of the wip mixer families: bench_<family>()
#ifndef MN_WIP_SKIP_DELTA
#include "wip/delta_bench.cuh"
#endif
#ifndef MN_WIP_SKIP_SSD
#include "wip/ssd_bench.cuh"
#endif
#ifndef MN_WIP_SKIP_RGLRU
#include "wip/rglru_bench.cuh"
#endif
#ifndef MN_WIP_SKIP_MLSTM
#include "wip/mlstm_bench.cuh"
#endif
#ifndef MN_WIP_SKIP_SLSTM
#include "wip/slstm_bench.cuh"
#endif

int main(int argc, char** argv) {
    int profile = argc > 1 && !strcmp(argv[1], "profile");
    size_t B = argc > 4 ? (size_t)atol(argv[1]) : 4, T = argc > 4 ? (size_t)atol(argv[2]) : 4096, H = argc > 4 ? (size_t)atol(argv[3]) : 16, K = argc > 4 ? (size_t)atol(argv[4]) : 128, V = K;
    size_t BTH = B * T * H;
    cudaDeviceProp prop;
    if (mn_cuda_init(&G, 0) != MN_OK) { printf("bench_cuda: no usable CUDA device (%s)\n", G.msg); return 1; }
    cudaGetDeviceProperties(&prop, 0);
    printf("bench_cuda on %s (%d SMs), B=%zu T=%zu H=%zu K=V=%zu, median of %d\n\n", prop.name, G.sm_count, B, T, H, K, REPS);
#ifndef MN_WIP_SKIP_DELTA
    if (argc > 1 && !strcmp(argv[1], "delta")) { bench_delta(); mn_cuda_free(&G); return 0; }
#endif
#ifndef MN_WIP_SKIP_SSD
    if (argc > 1 && !strcmp(argv[1], "ssd")) { bench_ssd(); mn_cuda_free(&G); return 0; }
#endif
#ifndef MN_WIP_SKIP_RGLRU
    if (argc > 1 && !strcmp(argv[1], "rglru")) { bench_rglru(); mn_cuda_free(&G); return 0; }
#endif
#ifndef MN_WIP_SKIP_MLSTM
    if (argc > 1 && !strcmp(argv[1], "mlstm")) { bench_mlstm(); mn_cuda_free(&G); return 0; }
#endif
#ifndef MN_WIP_SKIP_SLSTM
    if (argc > 1 && !strcmp(argv[1], "slstm")) { bench_slstm(); mn_cuda_free(&G); return 0; }
#endif
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
    // inputs: q, k through the L2-norm op (unit rows), v ~ N(0,1), g = logsigmoid(N(2,1)), beta = sigmoid(N(0,1)), lambda in (0.25, 1)
    float *qr = dev_randn(BTH * K, 1), *kr = dev_randn(BTH * K, 1), *v = dev_randn(BTH * V, 1), *q, *k, *rstd, *g, *beta, *lam;
    std::vector<float> hg(BTH), hb(BTH), hl(H * K);
    for (size_t i = 0; i < BTH; i++) { double a = 2 + nrand(); hg[i] = (float)((a < 0 ? a : 0) - log1p(exp(-fabs(a)))); hb[i] = (float)(1 / (1 + exp(-nrand()))); }
    for (size_t i = 0; i < H * K; i++) hl[i] = (float)(0.25 + 0.75 * urand());
    g = dev_from(hg); beta = dev_from(hb); lam = dev_from(hl);
    CK(mn_cuda_malloc(&G, (void**)&q, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&k, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&rstd, BTH * 4));
    CK(mn_cuda_l2norm_forward(&G, q, rstd, qr, BTH, K)); CK(mn_cuda_l2norm_forward(&G, k, rstd, kr, BTH, K));
    float *out, *xs, *work, *dout = dev_randn(BTH * V, 1), *dq, *dk, *dv, *dg, *db, *dl;
    mn_mesa_opts o; memset(&o, 0, sizeof o);
    size_t wn = mn_cuda_mesa_work_size(B, T, H, K, V, &o);
    CK(mn_cuda_malloc(&G, (void**)&out, BTH * V * 4)); CK(mn_cuda_malloc(&G, (void**)&xs, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&work, wn * 4));
    CK(mn_cuda_malloc(&G, (void**)&dq, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&dk, BTH * K * 4)); CK(mn_cuda_malloc(&G, (void**)&dv, BTH * V * 4));
    CK(mn_cuda_malloc(&G, (void**)&dg, BTH * 4)); CK(mn_cuda_malloc(&G, (void**)&db, BTH * 4)); CK(mn_cuda_malloc(&G, (void**)&dl, H * K * 4));
    printf("workspace %.2f GB\n\n", wn * 4.0 / 1e9);
    if (profile) {                                   // one call of each, nothing else (ncu)
        o.cg_iters = 30;
        if (argc > 2 && !strcmp(argv[2], "fast")) {   // the fast setting at fla's CG 10
            o.cg_iters = 10; o.fla = 1; G.mesa_scan = MN_CUDA_SCAN_TF32; G.mesa_keep_states = 1;
        }
        CK(mn_cuda_mesa_forward(&G, out, xs, NULL, NULL, NULL, q, k, v, g, beta, lam, B, T, H, K, V, &o, work));
        CK(mn_cuda_mesa_backward(&G, dq, dk, dv, dg, db, dl, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g, beta, lam, NULL, NULL, B, T, H, K, V, &o, work));
        CK(mn_cuda_sync(&G));
        mn_cuda_free(&G);
        return 0;
    }
    printf("| op | cuBLAS | CG | ms | counted TFLOP | TF/s | issue target (fla Triton) |\n|---|---|---|---|---|---|---|\n");
    // one row: the op (forward, or forward + backward) at the current ctx settings, CG count cg
    // (fla = 1: fla's arithmetic, exactly cg iterations; 0: textbook, a row stops at float precision)
    auto row = [&](int bwd, int cg, int fla, const char* variant) {
        char cgname[64];
        o.cg_iters = cg; o.fla = fla;
        snprintf(cgname, sizeof cgname, "%d%s%s", cg, fla ? " fla" : "", variant);
        double ms = time_ms([&] {
            CK(mn_cuda_mesa_forward(&G, out, xs, NULL, NULL, NULL, q, k, v, g, beta, lam, B, T, H, K, V, &o, work));
            if (bwd) CK(mn_cuda_mesa_backward(&G, dq, dk, dv, dg, db, dl, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g, beta, lam, NULL, NULL, B, T, H, K, V, &o, work));
        });
        double fl = mesa_flops(B, T, H, K, V, cg, bwd);
        const char* tgt = cg == 30 ? (bwd ? "8.57 ms" : "3.30 ms") : cg == 10 ? (bwd ? "4.81 ms" : "1.53 ms") : "-";
        printf("| mesa %s | %s | %s | %.3f | %.3f | %.1f | %s |\n", bwd ? "fwd+bwd" : "fwd", bwd ? (G.math ? "tf32" : "fp32") : "-", cgname, ms, fl / 1e12, fl / (ms * 1e-3) / 1e12, tgt);
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
        { ", mma.sync CG", MN_CUDA_CG_MMA, MN_CUDA_SCAN_TF32X3, 0, 1 }, { ", TF32 scan", MN_CUDA_CG_WGMMA, MN_CUDA_SCAN_TF32, 0, 1 },
        { ", states kept", MN_CUDA_CG_WGMMA, MN_CUDA_SCAN_TF32X3, 1, 0 }, { ", TF32 scan, states kept", MN_CUDA_CG_WGMMA, MN_CUDA_SCAN_TF32, 1, 0 } };
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
            printf("| matmul %zux%zux%zu | %s | - | %.3f | %.3f | %.1f | - |\n", N, C, C, math ? "tf32" : "fp32", ms, 2.0 * N * C * C / 1e12, 2.0 * N * C * C / (ms * 1e-3) / 1e12);
        }
        G.math = MN_CUDA_MATH_FP32;
        double ms = time_ms([&] { CK(mn_cuda_rmsnorm_forward(&G, y, r, x, w, N, C, 1e-6)); });
        printf("| rmsnorm fwd (%zu,%zu): %.0f GB/s | - | - | %.3f | - | - | - |\n", N, C, 2.0 * N * C * 4 / (ms * 1e-3) / 1e9, ms);
        ms = time_ms([&] { CK(mn_cuda_swiglu_forward(&G, y, x, x, N * C)); });
        printf("| swiglu fwd (%zu): %.0f GB/s | - | - | %.3f | - | - | - |\n", N * C, 3.0 * N * C * 4 / (ms * 1e-3) / 1e9, ms);
    }
    mn_cuda_dfree(work);
    bench_step(lam, H, K);
    bench_attention();
    bench_gla(0);
    mn_cuda_free(&G);
    return 0;
}
