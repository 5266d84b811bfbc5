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
