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
