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
