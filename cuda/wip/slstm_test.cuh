// ---- the sLSTM (xLSTM's scalar memory): the fused forward and backward walks, the decode step ------
// Against mesanet.h's mn_slstm_forward / _backward / _step in double, on fresh random inputs: gate
// pre-activations x ~ N(0,1), biases N(0, 0.5) (the forget block shifted by fmu: +3 is the layer's
// long-memory init), R ~ N(0, rsd^2 / Dh) (R y ~ rsd |y|: at rsd <= 1.5 the recurrence is contractive,
// so float rounding does not grow along the walk). Bounds, and why:
//   forward y, c, n, m: 3e-5 (fp32 against double through up to 200 dependent steps, each a 128-term
//   fp32 dot product and float exp/tanh: ~1e-6 per step, carried by c's memory f ~ 0.95);
//   backward (every gradient; dR and db sum B*T terms): 1e-4 in fp32; with ctx->math = TF32 the
//   pre-activations the backward recomputes and dR's product have 10-bit operands (~5e-4 each): 1e-2;
//   decode step (fp32 against double over at most 12 tokens): 1e-5.
typedef struct slstm_case {
    const char* name;
    size_t B, T, NH, Dh;
    int state;          // initial states y0, c0, n0, m0 and their gradients dy0, dc0, dn0
    double rsd, fmu;    // R's scale (see above), the forget bias shift
    int math;
} slstm_case;

static void test_slstm(const slstm_case* c) {
    size_t B = c->B, T = c->T, NH = c->NH, Dh = c->Dh, Hd = NH * Dh, G4 = 4 * Hd;
    size_t nx = B * T * G4, ns = B * T * Hd, n0 = B * Hd, nR = NH * 4 * Dh * Dh;
    int tf = c->math == MN_CUDA_MATH_TF32, st = c->state;
    double bf = 3e-5, bg = tf ? 1e-2 : 1e-4;
    char nm[200], tag[128];
    snprintf(tag, sizeof tag, "%s: B %zu T %zu NH %zu Dh %zu%s, %s", c->name, B, T, NH, Dh, st ? ", states" : "",
             tf ? "tf32" : "fp32");
    G.math = c->math;
    vf x = randn(nx, 0, 1), Rw = randn(nR, 0, c->rsd / sqrt((double)Dh)), b = randn(G4, 0, 0.5);
    vf dy = randn(ns, 0, 1);
    for (size_t u = Hd; u < 2 * Hd; u++) b[u] += (float)c->fmu;     // the forget gate's block of the bias
    vf y0, c0, nn0, m0;
    if (st) { y0 = randn(n0, 0, 0.5); c0 = randn(n0, 0, 1); nn0 = randu(n0, 0.5, 2); m0 = randn(n0, 0, 1); }
    vf px = randn(nx, 0, 1), pR = randn(nR, 0, 1), pb = randn(G4, 0, 1);
    vf py0 = randn(n0, 0, 1), pc0 = randn(n0, 0, 1), pn0 = randn(n0, 0, 1);
    vd X = tod(x), RD = tod(Rw), BD = tod(b), DY = tod(dy), Y0 = tod(y0), C0 = tod(c0), N0 = tod(nn0), M0 = tod(m0);
    vd y(ns), cc(ns), nn(ns), mm(ns), work(mn_slstm_work_size(B, NH, Dh));
    mn_slstm_forward(y.data(), cc.data(), nn.data(), mm.data(), X.data(), RD.data(), BD.data(), st ? Y0.data() : NULL,
                     st ? C0.data() : NULL, st ? N0.data() : NULL, st ? M0.data() : NULL, B, T, NH, Dh, work.data());
    vd dx = tod(px), dR = tod(pR), db = tod(pb), dy0 = tod(py0), dc0 = tod(pc0), dn0 = tod(pn0);
    mn_slstm_backward(dx.data(), dR.data(), db.data(), st ? dy0.data() : NULL, st ? dc0.data() : NULL,
                      st ? dn0.data() : NULL, DY.data(), y.data(), cc.data(), nn.data(), mm.data(), X.data(),
                      RD.data(), BD.data(), st ? Y0.data() : NULL, st ? C0.data() : NULL, st ? N0.data() : NULL,
                      st ? M0.data() : NULL, B, T, NH, Dh, work.data());
    float *gx = dev(x), *gR = dev(Rw), *gb = dev(b), *gdy = dev(dy);
    float *gy0 = st ? dev(y0) : NULL, *gc0 = st ? dev(c0) : NULL, *gn0 = st ? dev(nn0) : NULL;
    float *gm0 = st ? dev(m0) : NULL;
    float *gy = poison(ns), *gc = poison(ns), *gn = poison(ns), *gm = poison(ns);
    CK(mn_cuda_slstm_forward(&G, gy, gc, gn, gm, gx, gR, gb, gy0, gc0, gn0, gm0, B, T, NH, Dh));
    snprintf(nm, sizeof nm, "slstm fwd y (%s)", tag); check(nm, host(gy, ns), y, bf);
    snprintf(nm, sizeof nm, "slstm fwd c (%s)", tag); check(nm, host(gc, ns), cc, bf);
    snprintf(nm, sizeof nm, "slstm fwd n (%s)", tag); check(nm, host(gn, ns), nn, bf);
    snprintf(nm, sizeof nm, "slstm fwd m (%s)", tag); check(nm, host(gm, ns), mm, bf);
    size_t wn = mn_cuda_slstm_work_size(B, T, NH, Dh);
    float *gw = poison(wn), *gdx = dev(px), *gdR = dev(pR), *gdb = dev(pb);
    float *gdy0 = st ? dev(py0) : NULL, *gdc0 = st ? dev(pc0) : NULL, *gdn0 = st ? dev(pn0) : NULL;
    CK(mn_cuda_slstm_backward(&G, gdx, gdR, gdb, gdy0, gdc0, gdn0, gdy, gy, gc, gn, gm, gx, gR, gb, gy0, gc0, gn0, gm0,
                              B, T, NH, Dh, gw));
    vf r1[3] = { host(gdx, nx), host(gdR, nR), host(gdb, G4) };
    snprintf(nm, sizeof nm, "slstm bwd dx (%s)", tag); check_inc(nm, r1[0], px, dx, bg);
    snprintf(nm, sizeof nm, "slstm bwd dR (%s)", tag); check_inc(nm, r1[1], pR, dR, bg);
    snprintf(nm, sizeof nm, "slstm bwd db (%s)", tag); check_inc(nm, r1[2], pb, db, bg);
    if (st) {
        snprintf(nm, sizeof nm, "slstm bwd dy0 (%s)", tag); check_inc(nm, host(gdy0, n0), py0, dy0, bg);
        snprintf(nm, sizeof nm, "slstm bwd dc0 (%s)", tag); check_inc(nm, host(gdc0, n0), pc0, dc0, bg);
        snprintf(nm, sizeof nm, "slstm bwd dn0 (%s)", tag); check_inc(nm, host(gdn0, n0), pn0, dn0, bg);
    }
    {   // no atomics: a second backward from the same priors (and a re-poisoned workspace) gives the same bits
        CK(mn_cuda_upload(&G, gdx, px.data(), nx * 4)); CK(mn_cuda_upload(&G, gdR, pR.data(), nR * 4));
        CK(mn_cuda_upload(&G, gdb, pb.data(), G4 * 4));
        cudaMemset(gw, 0xFF, wn * sizeof(float));
        CK(mn_cuda_slstm_backward(&G, gdx, gdR, gdb, NULL, NULL, NULL, gdy, gy, gc, gn, gm, gx, gR, gb, gy0, gc0, gn0,
                                  gm0, B, T, NH, Dh, gw));
        vf a = host(gdx, nx), r = r1[0], v;
        v = host(gdR, nR); a.insert(a.end(), v.begin(), v.end()); r.insert(r.end(), r1[1].begin(), r1[1].end());
        v = host(gdb, G4); a.insert(a.end(), v.begin(), v.end()); r.insert(r.end(), r1[2].begin(), r1[2].end());
        snprintf(nm, sizeof nm, "slstm bwd dx, dR, db (%s)", tag); same_twice(nm, r, a);
    }
    mn_cuda_dfree(gx); mn_cuda_dfree(gR); mn_cuda_dfree(gb); mn_cuda_dfree(gdy); mn_cuda_dfree(gy0);
    mn_cuda_dfree(gc0); mn_cuda_dfree(gn0); mn_cuda_dfree(gm0); mn_cuda_dfree(gy); mn_cuda_dfree(gc);
    mn_cuda_dfree(gn); mn_cuda_dfree(gm); mn_cuda_dfree(gw); mn_cuda_dfree(gdx); mn_cuda_dfree(gdR);
    mn_cuda_dfree(gdb); mn_cuda_dfree(gdy0); mn_cuda_dfree(gdc0); mn_cuda_dfree(gdn0);
    G.math = MN_CUDA_MATH_FP32;
}

// The decode step, batched, against mn_slstm_step in double from random states (n > 0: a running
// memory), P consecutive tokens: the worst output y, then the states c, n, m. fp32 against double: 1e-5.
static void test_slstm_step(size_t B, size_t NH, size_t Dh, size_t P) {
    char nm[160];
    size_t Hd = NH * Dh, n0 = B * Hd, nR = NH * 4 * Dh * Dh;
    vf Rw = randn(nR, 0, 1.0 / sqrt((double)Dh)), b = randn(4 * Hd, 0, 0.5);
    for (size_t u = Hd; u < 2 * Hd; u++) b[u] += 3.f;
    vf y0 = randn(n0, 0, 0.5), c0 = randn(n0, 0, 1), nn0 = randu(n0, 0.5, 2), m0 = randn(n0, 0, 1);
    vd RD = tod(Rw), BD = tod(b), Y = tod(y0), Cs = tod(c0), Ns = tod(nn0), Ms = tod(m0);
    vd work(mn_slstm_work_size(B, NH, Dh));
    float *gR = dev(Rw), *gb = dev(b), *gy = dev(y0), *gc = dev(c0), *gn = dev(nn0), *gm = dev(m0);
    double worst = 0;
    int fin = 1;
    for (size_t p = 0; p < P; p++) {
        vf x = randn(4 * n0, 0, 1);
        vd X = tod(x);
        mn_slstm_step(Y.data(), Cs.data(), Ns.data(), Ms.data(), X.data(), RD.data(), BD.data(), B, NH, Dh,
                      work.data());
        float* gx = dev(x);
        CK(mn_cuda_slstm_step(&G, gy, gc, gn, gm, gx, gR, gb, B, NH, Dh));
        vf hy = host(gy, n0);
        double se = 0, sr = 0;
        for (size_t i = 0; i < n0; i++) {
            if (!isfinite(hy[i])) fin = 0;
            se += (hy[i] - Y[i]) * (hy[i] - Y[i]); sr += Y[i] * Y[i];
        }
        if (sqrt(se / sr) > worst) worst = sqrt(se / sr);
        mn_cuda_dfree(gx);
    }
    snprintf(nm, sizeof nm, "slstm step: %zu tokens, B %zu NH %zu Dh %zu, worst y rms %.2e (bound 1e-5)", P, B, NH, Dh,
             worst);
    expect(fin && worst <= 1e-5, nm);
    snprintf(nm, sizeof nm, "slstm step: state c (B %zu NH %zu Dh %zu)", B, NH, Dh); check(nm, host(gc, n0), Cs, 1e-5);
    snprintf(nm, sizeof nm, "slstm step: state n (B %zu NH %zu Dh %zu)", B, NH, Dh); check(nm, host(gn, n0), Ns, 1e-5);
    snprintf(nm, sizeof nm, "slstm step: state m (B %zu NH %zu Dh %zu)", B, NH, Dh); check(nm, host(gm, n0), Ms, 1e-5);
    mn_cuda_dfree(gR); mn_cuda_dfree(gb); mn_cuda_dfree(gy); mn_cuda_dfree(gc); mn_cuda_dfree(gn); mn_cuda_dfree(gm);
}

static void test_slstm_all(void) {
    static const slstm_case cases[] = {
        //  name              B  T    NH Dh   st rsd  fmu  math
        { "Dh16 states",      2, 37,  3, 16,  1, 1.0, 0.0, MN_CUDA_MATH_FP32 },   // registers only (KR = Dh)
        { "Dh32 grid",        2, 100, 4, 32,  0, 1.0, 3.0, MN_CUDA_MATH_FP32 },   // issue 19's heads of 32
        { "Dh48 T1",          3, 1,   2, 48,  1, 1.0, 0.0, MN_CUDA_MATH_FP32 },   // one step: only the states
        { "Dh64 states",      3, 70,  2, 64,  1, 1.0, 1.0, MN_CUDA_MATH_FP32 },   // KR = 64, nothing shared
        { "Dh80 states",      1, 50,  2, 80,  1, 1.0, 0.0, MN_CUDA_MATH_FP32 },   // 16 columns in shared memory
        { "Dh112",            1, 40,  1, 112, 0, 1.0, 3.0, MN_CUDA_MATH_FP32 },
        { "Dh128 anchor",     2, 200, 2, 128, 0, 1.0, 3.0, MN_CUDA_MATH_FP32 },   // the anchor's heads, T > 128
        { "Dh128 states R1.5", 1, 60, 3, 128, 1, 1.5, 0.0, MN_CUDA_MATH_FP32 },   // a stronger recurrence
        { "Dh128 states tf32", 2, 100, 2, 128, 1, 1.0, 3.0, MN_CUDA_MATH_TF32 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_slstm(&cases[i]);
    test_slstm_step(3, 2, 64, 12);
    test_slstm_step(2, 3, 128, 8);
    test_slstm_step(5, 4, 32, 10);
    {   // what the kernels do not take
        float* p = poison(64);
        expect(mn_cuda_slstm_forward(&G, p, p, p, p, p, p, p, NULL, NULL, NULL, NULL, 1, 8, 1, 8) == MN_ERR_CONFIG,
               "slstm forward with Dh = 8 returns MN_ERR_CONFIG");
        expect(mn_cuda_slstm_forward(&G, p, p, p, p, p, p, p, NULL, NULL, NULL, NULL, 1, 8, 1, 40) == MN_ERR_CONFIG,
               "slstm forward with Dh = 40 (not a multiple of 16) returns MN_ERR_CONFIG");
        expect(mn_cuda_slstm_forward(&G, p, p, p, p, p, p, p, NULL, NULL, NULL, NULL, 1, 8, 1, 144) == MN_ERR_CONFIG,
               "slstm forward with Dh = 144 returns MN_ERR_CONFIG");
        expect(mn_cuda_slstm_backward(&G, p, p, p, NULL, NULL, NULL, p, p, p, p, p, p, p, p, NULL, NULL, NULL, NULL, 1,
                                      8, 1, 20, p) == MN_ERR_CONFIG,
               "slstm backward with Dh = 20 returns MN_ERR_CONFIG");
        expect(mn_cuda_slstm_step(&G, p, p, p, p, p, p, p, 1, 1, 256) == MN_ERR_CONFIG,
               "slstm step with Dh = 256 returns MN_ERR_CONFIG");
        mn_cuda_dfree(p);
    }
}

// the whole model: the sLSTM layer alone (heads of 32, the synthetic grid's) and beside attention
// (heads of 128, the anchor's); fp32 cuBLAS, so the bounds of the fp32 GLA cases, and the attention
// cases' where its fp16 products take part
#define MN__TEST_MODELS_SLSTM                                                                                      \
    { "slstm H4x32", "slstm", 0, 128, 2, 4, 32, 352, 2, 150, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5, 1e-4, 5e-3,       \
      5e-3 },   /* the input-gate weight's gradient, a sum over the tokens that cancels: 3.0e-3 (run 3) */ \
    { "slstm,attn H2x128 cap", "slstm,attn", 0, 256, 2, 2, 128, 688, 2, 130, 30, 0, MN_CUDA_MATH_FP32, 30.0, 1e-4,  \
      6e-3, 1e-2, 2e-2 },
