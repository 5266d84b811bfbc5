// bench: the machine's sgemm ceiling and the REF-S training/inference throughput, printed as a
// table and written to results/bench.md (with the machine, the command and the date).
//
// REF-S (anchors.md): byte vocab, d_model 256, 4 layers, 4 heads of 64, SwiGLU 688, T=256,
// batch 16, untied head, AdamW. FLOPs per token counted as anchors.md does: 6 x (matmul
// parameters, lm_head included, embeddings excluded) + 3 x the mixer's own forward matmuls
// (attention: q.k and p.v over the full T x T matrix = 4 T H D per layer).
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"
#include <sys/utsname.h>
#ifndef MN_USE_BLAS
#error "bench measures the sgemm ceiling with OpenBLAS: build with -DMN_USE_BLAS (make bench does)"
#endif

#ifdef _OPENMP
extern void openblas_set_num_threads(int);
#endif
// The machine's ceiling: OpenBLAS's own sgemm on all cores (its threads, not ours), best of reps.
static double sgemm_gflops(size_t n, int reps) {
    mn_real *a = (mn_real*)malloc(n * n * sizeof(mn_real)), *b = (mn_real*)malloc(n * n * sizeof(mn_real)), *c = (mn_real*)malloc(n * n * sizeof(mn_real));
    size_t i; double best = 1e30; int r;
    for (i = 0; i < n * n; i++) { a[i] = (mn_real)((i % 7) * 0.1); b[i] = (mn_real)((i % 5) * 0.1); }
#ifdef _OPENMP
    openblas_set_num_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f, c, (int)n);
    for (r = 0; r < reps; r++) {
        double t = ex_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f, c, (int)n);
        t = ex_now() - t;
        if (t < best) best = t;
    }
    free(a); free(b); free(c);
#ifdef _OPENMP
    openblas_set_num_threads(1);   // back to mn_gemm's arrangement (OpenMP splits, BLAS single-threaded)
#endif
    return 2.0 * n * n * n / best / 1e9;
}
static int cmpd(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }

int main(int argc, char** argv) {
    const char* pattern = argc > 1 ? argv[1] : "attn";
    const char* outpath = argc > 2 ? argv[2] : "results/bench.md";
    size_t B = 16, T = 256, N = B * T, i, warm = 2, reps = 7;
    mn_config c; memset(&c, 0, sizeof c);
    c.vocab_size = 256; c.d_model = 256; c.n_layer = 4; c.n_head = 4; c.head_dim = 64; c.d_ff = 688; c.max_seq_len = 256; c.pattern = pattern;
    mn_model m;
    if (mn_model_init(&m, &c) != MN_OK) return 1;
    int *tok = (int*)malloc(N * sizeof(int)), *tgt = (int*)malloc(N * sizeof(int));
    mn_rng r; mn_rng_seed(&r, 1);
    for (i = 0; i < N; i++) { tok[i] = (int)(mn_rng_u32(&r) % 256); tgt[i] = (int)(mn_rng_u32(&r) % 256); }

    printf("measuring sgemm ceiling...\n");
    double peak2048 = sgemm_gflops(2048, 3), peak1024 = sgemm_gflops(1024, 5), peak256 = sgemm_gflops(256, 50);

    // training step: forward + backward + clip + AdamW; median of `reps` after `warm` warm-ups
    double ts[16], tf[16], tb[16];
    mn_real loss;
    for (i = 0; i < warm + reps; i++) {
        double t0 = ex_now();
        mn_forward(&m, tok, tgt, B, T, &loss);
        double t1 = ex_now();
        mn_zero_grad(&m); mn_backward(&m);
        double t2 = ex_now();
        mn_clip_grad_norm(&m, 1.0); mn_adamw_step(&m, 1e-4, NULL);
        double t3 = ex_now();
        if (i >= warm) { ts[i - warm] = t3 - t0; tf[i - warm] = t1 - t0; tb[i - warm] = t2 - t1; }
    }
    qsort(ts, reps, sizeof(double), cmpd); qsort(tf, reps, sizeof(double), cmpd); qsort(tb, reps, sizeof(double), cmpd);
    double step = ts[reps / 2], fwd_only;
    {   // forward without targets (inference over a batch)
        double t[16];
        for (i = 0; i < warm + reps; i++) { double t0 = ex_now(); mn_forward(&m, tok, NULL, B, T, NULL); if (i >= warm) t[i - warm] = ex_now() - t0; }
        qsort(t, reps, sizeof(double), cmpd); fwd_only = t[reps / 2];
    }
    // generation: the recurrent step, one sequence, T tokens
    mn_state st; mn_state_init(&st, &m, 1);
    mn_real* logits = (mn_real*)malloc(256 * sizeof(mn_real));
    double tg0 = ex_now();
    for (i = 0; i < T; i++) mn_step(&m, &st, &tok[i], logits);
    double gen = (ex_now() - tg0) / (double)T;
    mn_state_free(&st);

    double fpt = (double)mn_flops_per_token(&m, T);   // forward
    double train_tps = N / step, train_gf = 3.0 * fpt * train_tps / 1e9;
    char when[64]; time_t now = time(NULL); strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    struct utsname u; uname(&u);
    const char* ct = getenv("OPENBLAS_CORETYPE");
    char table[4096];
    snprintf(table, sizeof table,
        "| quantity | value |\n|---|---|\n"
        "| sgemm ceiling 2048^3 / 1024^3 / 256^3 (GFLOP/s) | %.1f / %.1f / %.1f |\n"
        "| REF-S mixer | %s |\n| parameters | %zu |\n"
        "| FLOPs per token, train (3 x forward) | %.2f M |\n"
        "| train step (median of %zu), B=%zu T=%zu | %.1f ms (forward %.1f, backward %.1f, clip+AdamW %.1f) |\n"
        "| **train tokens/s** | **%.0f** |\n"
        "| train GFLOP/s | %.1f |\n"
        "| fraction of the 2048^3 sgemm ceiling | %.0f %% |\n"
        "| forward-only tokens/s (batch %zu x %zu) | %.0f |\n"
        "| generation tokens/s (recurrent step, 1 sequence, %zu tokens) | %.0f |\n",
        peak2048, peak1024, peak256, pattern, m.n_params, 3 * fpt / 1e6, reps, B, T, step * 1e3, tf[reps / 2] * 1e3, tb[reps / 2] * 1e3,
        (step - tf[reps / 2] - tb[reps / 2]) * 1e3, train_tps, train_gf, 100.0 * train_gf / peak2048, B, T, N / fwd_only, T, 1.0 / gen);
    printf("\n%s", table);
    FILE* f = fopen(outpath, "w");
    if (f) {
        fprintf(f, "# mesanet benchmark: REF-S\n\nMeasured %s on %s %s (%ld cores online), OPENBLAS_CORETYPE=%s.\n"
                   "Command: `make bench` (runs `./build/bench %s %s`).\n\n%s\n"
                   "Anchor (../shared/docs/anchors.md): PyTorch 1.13 eager trains REF-S with attention at 2,642 tokens/s "
                   "(3,078 with OPENBLAS_CORETYPE unset), 22.5 M FLOPs/token.\n",
                when, u.machine, u.release, sysconf(_SC_NPROCESSORS_ONLN), ct ? ct : "(unset)", pattern, outpath, table);
        fclose(f);
        printf("\nwritten to %s\n", outpath);
    }
    free(tok); free(tgt); free(logits); mn_model_free(&m);
    return 0;
}
