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
           form ? "recurrent" : "default", amode == MN_SSD_TRANSITION ? "transition" : "log-decay", P, N, tf, tfb,
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
    printf("\n| decode | head | batch | us | tokens/s | GB/s (state r+w) | of 4.3 TB/s |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t Bd : { (size_t)1, (size_t)64 }) {
        bench_ssd_step(Bd, 16, 64, 128, MN_SSD_LOG_DECAY);
        bench_ssd_step(Bd, 16, 128, 128, MN_SSD_TRANSITION);
    }
}
