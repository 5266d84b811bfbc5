// ---- Mamba-2's SSD core (mn_cuda_ssd_*): every form, both transitions, the decode step ----------------
// Against mesanet.h's recurrent form in double (the definition, one token at a time). Bounds:
//   recurrent form (fp32 FMA chains; the states' rounding errors grow like a random walk over T and the
//   read-outs sum N of them): y, ht 1e-5; dX, dB, dC, dh0 1e-4 (dS runs over the whole sequence too);
//   dA 2e-4 (a sum over all P N entries of S o dS per token, with cancellation);
//   chunk form on the GLA op (3xTF32 whatever ctx->math, so a TF32 context keeps these bounds too): the
//   GLA tests' bounds, the same numbers. Its signed transitions' dA = dg / a magnifies the op's absolute dg
//   error (~4e-6 of dA's rms, measured on the log-decay cases) by 1/|a| for |a| >= 2^-8 (rms over a's
//   spread: ~13x), and tokens below it take the exact chunk formula: within 2e-4 still;
//   the recurrent form in a TF32 context: fp32 too (it has no TF32 path); the GPU's two forms against each
//   other (new against old) at the same bounds.
// The decode step (fp32 against double over several tokens): 1e-5, the state too.
typedef struct ssd_case {
    const char* name;
    size_t B, T, H, P, N;
    int amode;            // MN_SSD_LOG_DECAY or MN_SSD_TRANSITION
    int form;             // 0 mn_cuda_ssd_forward / _backward, 1 the _recurrent ones, 2 the _chunk ones
    int state;            // initial state and final-state gradient
    double lo, hi;        // log-decays A*dt ~ -U(lo, hi); transitions a = 2 exp(that) - 1
    int math;
    int tiny;             // transitions: 1 in 29 (b,t,h) a = 0, as many at +-1e-5, +-3e-3 (under 2^-8), -1
} ssd_case;
// whether the default form takes the chunk form for this case (mn__ssd_chunked's shapes; no states)
static int ssd_chunk_case(const ssd_case* c) {
    return c->form == 2 || (c->form == 0 && !c->state && c->P == c->N && (c->P == 64 || c->P == 128));
}
static void test_ssd_op(const ssd_case* c) {
    size_t B = c->B, T = c->T, H = c->H, P = c->P, N = c->N;
    size_t nx = B * T * H * P, na = B * T * H, nb = B * T * H * N, ns = B * H * P * N;
    int tf = c->math == MN_CUDA_MATH_TF32, ck = ssd_chunk_case(c);
    const char* fn = c->form == 1 ? "recurrent" : c->form == 2 ? "chunk" : ck ? "default=chunk" : "default=recurrent";
    double bo = 1e-5, bg = 1e-4, ba = 2e-4;
    char nm[220], tag[160];
    snprintf(tag, sizeof tag, "%s: B %zu T %zu H %zu P %zu N %zu, %s, %s%s%s", c->name, B, T, H, P, N,
             c->amode == MN_SSD_TRANSITION ? "transition" : "log-decay", fn,
             c->state ? ", states" : "", tf ? ", tf32" : "");
    G.math = c->math;
    vf X = randn(nx, 0, 1), Bm = randn(nb, 0, 1), Cm = randn(nb, 0, 1), dy = randn(nx, 0, 1), A(na);
    for (size_t i = 0; i < na; i++) {
        double la = -(c->lo + (c->hi - c->lo) * mn_rng_uniform(&R));
        A[i] = (float)(c->amode == MN_SSD_TRANSITION ? 2.0 * exp(la) - 1.0 : la);
        if (c->tiny && c->amode == MN_SSD_TRANSITION) {
            const float sg = i % 2 ? -1.f : 1.f;
            if (i % 29 == 0) A[i] = 0.f;
            if (i % 29 == 7) A[i] = sg * 1e-5f;
            if (i % 29 == 13) A[i] = sg * 3e-3f;
            if (i % 29 == 19) A[i] = -1.f;
        }
    }
    vf h0 = c->state ? randn(ns, 0, 1) : vf(), dht = c->state ? randn(ns, 0, 1) : vf();
    vf pX = randn(nx, 0, 1), pA = randn(na, 0, 1), pB = randn(nb, 0, 1), pC = randn(nb, 0, 1), ph = randn(ns, 0, 1);
    vd Xd = tod(X), Ad = tod(A), Bd = tod(Bm), Cd = tod(Cm), H0 = tod(h0), DHT = tod(dht), DY = tod(dy);
    vd y(nx), ht(ns), dX = tod(pX), dA = tod(pA), dB = tod(pB), dC = tod(pC), dh0 = tod(ph);
    vd rw(mn_ssd_work_size_recurrent(T, P, N));
    mn_ssd_forward_recurrent(y.data(), ht.data(), Xd.data(), Ad.data(), Bd.data(), Cd.data(),
                             c->state ? H0.data() : NULL, B, T, H, P, N, c->amode);
    mn_ssd_backward_recurrent(dX.data(), dA.data(), dB.data(), dC.data(), dh0.data(), DY.data(),
                              c->state ? DHT.data() : NULL, Xd.data(), Ad.data(), Bd.data(), Cd.data(),
                              c->state ? H0.data() : NULL, B, T, H, P, N, c->amode, rw.data());
    size_t wn = c->form == 1 ? mn_cuda_ssd_work_size_recurrent(B, T, H, P, N)
                : c->form == 2 ? mn_cuda_ssd_work_size_chunk(B, T, H, P, N) : mn_cuda_ssd_work_size(B, T, H, P, N, 64);
    float *gX = dev(X), *gA = dev(A), *gB = dev(Bm), *gC = dev(Cm), *gdy = dev(dy);
    float *gh0 = c->state ? dev(h0) : NULL, *gdht = c->state ? dev(dht) : NULL, *gy = poison(nx), *ght = poison(ns);
    float *gw = poison(wn), *gdX = dev(pX), *gdA = dev(pA), *gdB = dev(pB), *gdC = dev(pC), *gdh = dev(ph);
    // the chunk form writes no final state: ht asked for only with states (or from the recurrent form)
    float* htp = c->state || c->form == 1 ? ght : NULL;
    if (c->form == 1) CK(mn_cuda_ssd_forward_recurrent(&G, gy, htp, gX, gA, gB, gC, gh0, B, T, H, P, N, c->amode));
    else if (c->form == 2) CK(mn_cuda_ssd_forward_chunk(&G, gy, gX, gA, gB, gC, B, T, H, P, N, c->amode, gw));
    else CK(mn_cuda_ssd_forward(&G, gy, htp, gX, gA, gB, gC, gh0, B, T, H, P, N, 64, c->amode, gw));
    snprintf(nm, sizeof nm, "ssd fwd y (%s)", tag); check(nm, host(gy, nx), y, bo);
    if (htp) { snprintf(nm, sizeof nm, "ssd fwd ht (%s)", tag); check(nm, host(ght, ns), ht, bo); }
    cudaMemset(gw, 0xFF, wn * sizeof(float));
    if (c->form == 1)
        CK(mn_cuda_ssd_backward_recurrent(&G, gdX, gdA, gdB, gdC, gdh, gdy, gdht, gX, gA, gB, gC, gh0, B, T, H, P, N,
                                          c->amode, gw));
    else if (c->form == 2)
        CK(mn_cuda_ssd_backward_chunk(&G, gdX, gdA, gdB, gdC, gdy, gX, gA, gB, gC, B, T, H, P, N, c->amode, gw));
    else
        CK(mn_cuda_ssd_backward(&G, gdX, gdA, gdB, gdC, c->state ? gdh : NULL, gdy, gdht, gX, gA, gB, gC, gh0, B, T,
                                H, P, N, 64, c->amode, gw));
    snprintf(nm, sizeof nm, "ssd bwd dX (%s)", tag); check_inc(nm, host(gdX, nx), pX, dX, bg);
    snprintf(nm, sizeof nm, "ssd bwd dA (%s)", tag); check_inc(nm, host(gdA, na), pA, dA, ba);
    snprintf(nm, sizeof nm, "ssd bwd dB (%s)", tag); check_inc(nm, host(gdB, nb), pB, dB, bg);
    snprintf(nm, sizeof nm, "ssd bwd dC (%s)", tag); check_inc(nm, host(gdC, nb), pC, dC, bg);
    if (c->form == 1 || c->state) {
        snprintf(nm, sizeof nm, "ssd bwd dh0 (%s)", tag); check_inc(nm, host(gdh, ns), ph, dh0, bg);
    }
    if (ck) {   // new against old: the GPU's recurrent form on the same inputs and priors
        size_t rn = mn_cuda_ssd_work_size_recurrent(B, T, H, P, N);
        float *ry = poison(nx), *rw2 = poison(rn), *rdX = dev(pX), *rdA = dev(pA), *rdB = dev(pB), *rdC = dev(pC);
        CK(mn_cuda_ssd_forward_recurrent(&G, ry, NULL, gX, gA, gB, gC, NULL, B, T, H, P, N, c->amode));
        CK(mn_cuda_ssd_backward_recurrent(&G, rdX, rdA, rdB, rdC, NULL, gdy, NULL, gX, gA, gB, gC, NULL, B, T, H, P, N,
                                          c->amode, rw2));
        snprintf(nm, sizeof nm, "ssd chunk vs recurrent y (%s)", tag); check(nm, host(gy, nx), tod(host(ry, nx)), bo);
        snprintf(nm, sizeof nm, "ssd chunk vs recurrent dX (%s)", tag);
        check_inc(nm, host(gdX, nx), pX, tod(host(rdX, nx)), bg);
        snprintf(nm, sizeof nm, "ssd chunk vs recurrent dA (%s)", tag);
        check_inc(nm, host(gdA, na), pA, tod(host(rdA, na)), ba);
        snprintf(nm, sizeof nm, "ssd chunk vs recurrent dB (%s)", tag);
        check_inc(nm, host(gdB, nb), pB, tod(host(rdB, nb)), bg);
        snprintf(nm, sizeof nm, "ssd chunk vs recurrent dC (%s)", tag);
        check_inc(nm, host(gdC, nb), pC, tod(host(rdC, nb)), bg);
        mn_cuda_dfree(ry); mn_cuda_dfree(rw2); mn_cuda_dfree(rdX); mn_cuda_dfree(rdA); mn_cuda_dfree(rdB);
        mn_cuda_dfree(rdC);
    }
    mn_cuda_dfree(gX); mn_cuda_dfree(gA); mn_cuda_dfree(gB); mn_cuda_dfree(gC); mn_cuda_dfree(gdy);
    mn_cuda_dfree(gh0); mn_cuda_dfree(gdht); mn_cuda_dfree(gy); mn_cuda_dfree(ght); mn_cuda_dfree(gw);
    mn_cuda_dfree(gdX); mn_cuda_dfree(gdA); mn_cuda_dfree(gdB); mn_cuda_dfree(gdC); mn_cuda_dfree(gdh);
    G.math = MN_CUDA_MATH_FP32;
}

// The decode step, batched, against mn_ssd_step in double from a random state over S consecutive tokens:
// the worst output, then the state. fp32 against double: 1e-5.
static void test_ssd_step(size_t B, size_t H, size_t P, size_t N, int amode, size_t S) {
    char nm[200];
    size_t ns = B * H * P * N, ny = B * H * P;
    double worst = 0;
    int fin = 1;
    vf s0 = randn(ns, 0, 1);
    vd St = tod(s0), ref(ny);
    float *gs = dev(s0), *gy = poison(ny);
    for (size_t k = 0; k < S; k++) {
        vf x = randn(ny, 0, 1), b = randn(B * H * N, 0, 1), cc = randn(B * H * N, 0, 1), a(B * H);
        for (size_t i = 0; i < a.size(); i++) {
            double la = -3.0 * mn_rng_uniform(&R);
            a[i] = (float)(amode == MN_SSD_TRANSITION ? 2.0 * exp(la) - 1.0 : la);
        }
        vd Xd = tod(x), Ad = tod(a), Bd = tod(b), Cd = tod(cc);
        mn_ssd_step(ref.data(), St.data(), Xd.data(), Ad.data(), Bd.data(), Cd.data(), B, H, P, N, amode);
        float *gx = dev(x), *ga = dev(a), *gb = dev(b), *gc = dev(cc);
        cudaMemset(gy, 0xFF, ny * sizeof(float));
        CK(mn_cuda_ssd_step(&G, gy, gs, gx, ga, gb, gc, B, H, P, N, amode));
        vf ho = host(gy, ny);
        double se = 0, sr = 0;
        for (size_t i = 0; i < ny; i++) {
            if (!isfinite(ho[i])) fin = 0;
            se += (ho[i] - ref[i]) * (ho[i] - ref[i]); sr += ref[i] * ref[i];
        }
        if (sqrt(se / sr) > worst) worst = sqrt(se / sr);
        mn_cuda_dfree(gx); mn_cuda_dfree(ga); mn_cuda_dfree(gb); mn_cuda_dfree(gc);
    }
    const char* mode = amode == MN_SSD_TRANSITION ? "transition" : "log-decay";
    snprintf(nm, sizeof nm, "ssd step: %zu tokens, B %zu H %zu P %zu N %zu %s, worst y rms %.2e (bound 1e-5)", S, B, H,
             P, N, mode, worst);
    expect(fin && worst <= 1e-5, nm);
    snprintf(nm, sizeof nm, "ssd step: state (B %zu H %zu P %zu N %zu %s)", B, H, P, N, mode);
    check(nm, host(gs, ns), St, 1e-5);
    mn_cuda_dfree(gs); mn_cuda_dfree(gy);
}

static void test_ssd_all(void) {
    const int LD = MN_SSD_LOG_DECAY, TR = MN_SSD_TRANSITION, F32 = MN_CUDA_MATH_FP32, T32 = MN_CUDA_MATH_TF32;
    const ssd_case cases[] = {
        // default form: the chunk form (P == N in {64, 128}, no states), else the recurrent kernels;
        // "strong": log-decays down to -8 a token (the state forgets within a few tokens)
        //  name                    B  T     H  P    N    amode form st lo   hi    math tiny
        { "default D64",            2, 200,  3, 64,  64,  LD,   0,   0, 0.0, 1.0,  F32, 0 },   // T past the last chunk
        { "default D128",           1, 300,  2, 128, 128, LD,   0,   0, 0.0, 0.5,  F32, 0 },
        { "default D128 strong",    1, 200,  2, 128, 128, LD,   0,   0, 0.0, 8.0,  F32, 0 },
        { "default D64 tf32",       2, 150,  2, 64,  64,  LD,   0,   0, 0.0, 1.0,  T32, 0 },   // still 3xTF32
        { "default states",         2, 130,  2, 64,  64,  LD,   0,   1, 0.0, 1.0,  F32, 0 },   // -> recurrent
        { "default transition",     2, 130,  2, 64,  64,  TR,   0,   0, 0.0, 3.0,  F32, 0 },   // -> chunk (signs)
        { "default tr. states",     2, 130,  2, 64,  64,  TR,   0,   1, 0.0, 3.0,  F32, 0 },   // -> recurrent
        { "default P64 N128",       1, 100,  2, 64,  128, LD,   0,   0, 0.0, 1.0,  F32, 0 },   // -> recurrent
        // the chunk form itself: signed transitions a = 2 e^{-U} - 1 in (-0.9, 1) ("flips": (-1, -0.9), the
        // sign alternates every token), exact zeros and tiny |a| (dA by the chunk formula), a TF32 context
        { "chunk tr D128",          1, 300,  2, 128, 128, TR,   2,   0, 0.0, 3.0,  F32, 0 },
        { "chunk tr D64 flips",     2, 150,  2, 64,  64,  TR,   2,   0, 3.0, 8.0,  F32, 0 },
        { "chunk tr D64 tiny",      2, 200,  3, 64,  64,  TR,   2,   0, 0.0, 3.0,  F32, 1 },
        { "chunk tr D128 tiny",     1, 190,  2, 128, 128, TR,   2,   0, 0.0, 3.0,  F32, 1 },
        { "chunk tr D128 slow",     1, 257,  2, 128, 128, TR,   2,   0, 0.0, 0.05, F32, 0 },   // a near 1
        { "chunk tr D64 tf32",      2, 150,  2, 64,  64,  TR,   2,   0, 0.0, 3.0,  T32, 1 },   // still 3xTF32
        { "chunk log D128",         2, 130,  2, 128, 128, LD,   2,   0, 0.0, 1.0,  F32, 0 },
        { "chunk tr T1",            1, 1,    2, 64,  64,  TR,   2,   0, 0.0, 3.0,  F32, 1 },   // one token
        // the recurrent kernels: 16-row tiles, columns n = lane + 32 j, checkpoints every 64, sub-chunks of 8
        { "rec P64 N128 states",    2, 203,  2, 64,  128, LD,   1,   1, 0.0, 1.0,  F32, 0 },   // Mamba-2's head
        { "rec transition",         2, 203,  2, 64,  128, TR,   1,   1, 0.0, 3.0,  F32, 0 },   // a in (-0.9, 1)
        { "rec transition slow",    1, 300,  2, 32,  32,  TR,   1,   1, 0.0, 0.05, F32, 0 },   // a near 1
        { "rec transition tiny",    1, 150,  2, 64,  64,  TR,   1,   1, 0.0, 3.0,  F32, 1 },
        { "rec D128 log",           1, 150,  3, 128, 128, LD,   1,   0, 0.0, 1.0,  F32, 0 },
        { "rec P16 N48",            3, 70,   2, 16,  48,  TR,   1,   1, 0.0, 3.0,  F32, 0 },   // one tile; lanes past N
        { "rec P48 N16",            2, 64,   2, 48,  16,  LD,   1,   1, 0.0, 2.0,  F32, 0 },   // T one whole chunk
        { "rec T7",                 1, 7,    2, 32,  64,  TR,   1,   1, 0.0, 3.0,  F32, 0 },   // one short sub-chunk
        { "rec T1",                 2, 1,    1, 16,  16,  LD,   1,   1, 0.0, 1.0,  F32, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_ssd_op(&cases[i]);
    test_ssd_step(3, 2, 64, 128, MN_SSD_LOG_DECAY, 12);
    test_ssd_step(2, 3, 64, 128, MN_SSD_TRANSITION, 12);
    test_ssd_step(2, 2, 128, 128, MN_SSD_LOG_DECAY, 8);
    test_ssd_step(1, 3, 20, 40, MN_SSD_TRANSITION, 6);     // P not a multiple of 8, N not of 32
    {   // what the kernels do not take
        float* p = poison(4096);
        expect(mn_cuda_ssd_forward_recurrent(&G, p, NULL, p, p, p, p, NULL, 1, 8, 1, 24, 64, LD) == MN_ERR_CONFIG,
               "ssd recurrent with P = 24 returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_forward_recurrent(&G, p, NULL, p, p, p, p, NULL, 1, 8, 1, 64, 144, LD) == MN_ERR_CONFIG,
               "ssd recurrent with N = 144 returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_forward(&G, p, NULL, p, p, p, p, NULL, 1, 8, 1, 64, 64, 64, 7, p) == MN_ERR_CONFIG,
               "ssd with amode 7 returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_forward(&G, p, NULL, p, p, p, p, NULL, 1, 8, 1, 64, 64, 0, LD, p) == MN_ERR_CONFIG,
               "ssd with chunk 0 returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_backward_recurrent(&G, p, p, p, p, NULL, p, NULL, p, p, p, p, NULL, 1, 8, 1, 64, 64, TR,
                                              NULL) == MN_ERR_CONFIG,
               "ssd recurrent backward without its workspace returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_forward_chunk(&G, p, p, p, p, p, 1, 8, 1, 64, 128, TR, p) == MN_ERR_CONFIG,
               "ssd chunk with P 64 N 128 returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_backward_chunk(&G, p, p, p, p, p, p, p, p, p, 1, 8, 1, 32, 32, TR, p) == MN_ERR_CONFIG,
               "ssd chunk backward with P = N = 32 returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_forward_chunk(&G, p + 1, p, p, p, p, 1, 8, 1, 64, 64, LD, p) == MN_ERR_CONFIG,
               "ssd chunk with a misaligned y returns MN_ERR_CONFIG");
        expect(mn_cuda_ssd_step(&G, p, p, p, p, p, p, 1, 1, 64, 64, 2) == MN_ERR_CONFIG,
               "ssd step with amode 2 returns MN_ERR_CONFIG");
        mn_cuda_dfree(p);
    }
}

// the whole model: fp32 products (the chunk form in 3xTF32, the recurrent kernels in fp32) with fp32 cuBLAS
// are fp32-level, as the GLA family's cases: loss 1e-5, logits 1e-4; gradients 2e-3 (dt_bias, A_log and D
// are one number per head summed over every token and channel); a TF32 hybrid with the TF32 bounds. Head 64
// and 128 (P = N = head_dim) run the chunk form for both variants (mamba2_neg: the signed transition);
// head 32 the recurrent kernels.
#define MN__TEST_MODELS_SSD                                                                                       \
    { "mamba2 H2x64", "mamba2", 0, 128, 2, 2, 64, 352, 2, 150, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5, 1e-4, 2e-3,    \
      3e-3 },                                                                                                     \
    { "mamba2_neg H2x64 cap", "mamba2_neg", 0, 128, 2, 2, 64, 352, 2, 150, 30, 0, MN_CUDA_MATH_FP32, 30.0, 1e-5,  \
      1e-4, 2e-3, 3e-3 },                                                                                         \
    { "mamba2 H2x32 (recurrent)", "mamba2", 0, 64, 2, 2, 32, 176, 2, 100, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5,    \
      1e-4, 2e-3, 3e-3 },                                                                                         \
    { "mamba2,attn H2x64", "mamba2,attn", 0, 128, 2, 2, 64, 352, 2, 130, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-4,     \
      6e-3, 1e-2, 2e-2 },                                                                                         \
    { "mamba2_neg H2x128", "mamba2_neg", 0, 256, 2, 2, 128, 688, 2, 150, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5,       \
      1e-4, 2e-3, 3e-3 },                                                                                         \
    { "mamba2_neg,mamba2 H2x128 tf32", "mamba2_neg,mamba2", 0, 256, 2, 2, 128, 688, 2, 100, 30, 0,                 \
      MN_CUDA_MATH_TF32, 0.0, 3e-4, 1e-2, 2e-2, 3e-2 },
