// The delta rule (DeltaNet, Gated DeltaNet) at B=4, T=4096, H=16, Dk=Dv=128, checkpoints every 8
// tokens (the layers' MN__DELTA_GC), fp32; forward and forward+backward median ms, the FLOPs the
// recurrent kernels do and the bytes they move (counted from the kernels, see below), and the decode
// step at batch 1 and 64 against the state traffic.
static void bench_delta(void) {
    const size_t B = 4, T = 4096, H = 16, D = 128, C = 8, nk = B * T * H * D, nh = B * T * H;
    const size_t ns = B * H * D * D, NC = (T + C - 1) / C;
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
    printf("\nDelta rule (recurrent fp32 kernels), B=%zu T=%zu H=%zu Dk=Dv=%zu, checkpoints every %zu tokens, "
           "median of %d; hs %.2f GB, workspace %.2f GB\n\n", B, T, H, D, C, REPS, B * H * NC * D * D * 4.0 / 1e9,
           wn * 4.0 / 1e9);
    printf("| op | ms | counted TFLOP | TF/s | counted GB | GB/s |\n|---|---|---|---|---|---|\n");
    // FLOPs per token, head and state entry: forward 7 (decay 1, p 2, write 2, read 2); backward 5 to
    // recompute the state and 23 in the reverse step (the kernel's FMAs and multiplies, 2 per FMA).
    // Bytes: the forward reads q, k once per 8-column slice (Dv/8 times) and v, writes out, writes hs
    // (Dk Dv per chunk); the backward reads hs, q, k twice per slice, v, dout, writes and reads back
    // the stash (the states, 2 Dk Dv per token) and the partials (Dv/8 x (2 Dk + 2) per token, written
    // and read once), and dv; the partials' sum adds dq, dk, dbeta, dg (read + write).
    const double tok = (double)nh, dd = (double)D, sl = dd / 8;
    const double ff = tok * 7 * dd * dd, fb = ff + tok * 28 * dd * dd;
    const double bf = 4 * (tok * (sl * 2 * dd + 2 * dd) + tok / C * dd * dd);
    const double bb = bf + 4 * (tok / C * dd * dd + tok * (sl * 4 * dd + 3 * dd) + tok * 2 * dd * dd +
                                tok * 2 * sl * (2 * dd + 2) + tok * 2 * (2 * dd + 2));
    const char* names[2] = { "deltanet (g NULL)", "gdn (g)" };
    const double sc = 1.0 / sqrt(dd);
    for (int gi = 0; gi < 2; gi++) {
        const float* gp = gi ? g : NULL;
        auto fwd = [&] {
            CK(mn_cuda_delta_rule_forward(&G, out, NULL, hs, q, k, v, be, gp, NULL, B, T, H, D, D, C, sc, NULL));
        };
        double ms = time_ms(fwd);
        printf("| %s fwd | %.3f | %.3f | %.1f | %.2f | %.0f |\n", names[gi], ms, ff / 1e12, ff / (ms * 1e-3) / 1e12,
               bf / 1e9, bf / (ms * 1e-3) / 1e9);
        ms = time_ms([&] {
            fwd();
            CK(mn_cuda_delta_rule_backward(&G, dq, dk, dv, db, gi ? dg : NULL, NULL, dout, NULL, hs, q, k, v, be, gp, B,
                                           T, H, D, D, C, sc, work));
        });
        printf("| %s fwd+bwd | %.3f | %.3f | %.1f | %.2f | %.0f |\n", names[gi], ms, fb / 1e12,
               fb / (ms * 1e-3) / 1e12, bb / 1e9, bb / (ms * 1e-3) / 1e9);
    }
    mn_cuda_dfree(q); mn_cuda_dfree(k); mn_cuda_dfree(v); mn_cuda_dfree(dout); mn_cuda_dfree(be); mn_cuda_dfree(g);
    mn_cuda_dfree(out); mn_cuda_dfree(hs); mn_cuda_dfree(dq); mn_cuda_dfree(dk); mn_cuda_dfree(dv); mn_cuda_dfree(db);
    mn_cuda_dfree(dg); mn_cuda_dfree(work);
    (void)ns;
    printf("\n| delta decode step, H=%zu D=%zu | | batch | us per step | tokens/s | state GB/s (read + write) "
           "| of 4.3 TB/s |\n|---|---|---|---|---|---|---|\n", H, D);
    const size_t bs[2] = { 1, 64 };
    for (int gi = 0; gi < 2; gi++)
        for (int bi = 0; bi < 2; bi++) {
            const size_t Bd = bs[bi], nsd = Bd * H * D * D;
            // unit-free inputs: the cost does not depend on the values; beta small and g ~ 0 keep the state finite
            float *st = dev_randn(nsd, 1), *sq = dev_randn(Bd * H * D, 0.09), *sk = dev_randn(Bd * H * D, 0.09);
            float *sv = dev_randn(Bd * H * D, 1), *sb = dev_randn(Bd * H, 0.01), *sg = dev_randn(Bd * H, 0.01), *so;
            CK(mn_cuda_malloc(&G, (void**)&so, Bd * H * D * 4));
            double ms = time_ms([&] {
                CK(mn_cuda_delta_rule_step(&G, so, st, sq, sk, sv, sb, gi ? sg : NULL, Bd, H, D, D, sc));
            });
            double gbs = 2.0 * nsd * 4 / (ms * 1e-3) / 1e9;
            printf("| | %s | %zu | %.1f | %.0f | %.0f | %.0f %% |\n", names[gi], Bd, ms * 1e3, Bd / (ms * 1e-3), gbs,
                   gbs / 4300 * 100);
            mn_cuda_dfree(st); mn_cuda_dfree(sq); mn_cuda_dfree(sk); mn_cuda_dfree(sv); mn_cuda_dfree(sb);
            mn_cuda_dfree(sg); mn_cuda_dfree(so);
        }
}
