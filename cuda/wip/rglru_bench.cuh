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
