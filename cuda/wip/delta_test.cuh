// ---- the delta rule (DeltaNet / Gated DeltaNet): mn_cuda_delta_rule_* against mesanet.h's naive
// (recurrent) form in double ----
// The GPU runs fp32 end to end; the CPU accumulates in double. Inputs as the layers make them: q, k
// unit rows (the layers l2-normalise them), beta = m sigmoid(N(0,1)) with m = 1, or 2 for the
// negative-eigenvalue range, g = -gmul softplus(N(0,1)) (the layer's g is -e^{A_log} softplus(.)).
// Every case runs the default form (chunkwise where it applies: chunk >= 16 and Dv a multiple of 16)
// and the recurrent form, each against the CPU's naive form, and where the default is chunkwise the two
// against each other at the same bounds.
// Bounds (RMS relative, as check): out, ht, hs 2e-5: fp32 rounding of a contracting recurrence (each
// step multiplies by e^g (I - beta k k^T), norm <= 1, so rounding does not grow; set before the first
// GPU run: a CPU emulation of the kernels, 32 threads a warp meeting at barriers for the shuffles,
// gave ~1e-7 on every tensor at T <= 37; the chunkwise form's kernels, emulated likewise with the
// products in double, gave 1e-7 .. 3e-6 at T <= 130); dq, dk, dv, dh0 1e-4 (the reverse recurrence adds one
// more fp32 pass and the partials' sums); dbeta, dg 3e-4: one number per token from sums over Dk x Dv
// terms that largely cancel. The chunkwise form's products are fp32 cuBLAS GEMMs (G.math is fp32 here).
typedef struct delta_case {
    const char* name;
    size_t B, T, H, Dk, Dv;
    int gated, neg, state;   // g given; beta in (0,2); initial state and final-state gradient
    size_t chunk;            // the checkpoint interval of hs
    double gmul;             // g = -gmul softplus(N(0,1))
} delta_case;
static void test_delta(const delta_case* c) {
    size_t B = c->B, T = c->T, H = c->H, Dk = c->Dk, Dv = c->Dv, C = c->chunk, NC = (T + C - 1) / C;
    size_t nk = B * T * H * Dk, nv = B * T * H * Dv, nh = B * T * H, ns = B * H * Dk * Dv;
    double scale = 1.0 / sqrt((double)Dk);
    char nm[240], tag[160];
    snprintf(tag, sizeof tag, "%s: B %zu T %zu H %zu Dk %zu Dv %zu chunk %zu%s%s%s", c->name, B, T, H, Dk, Dv, C,
             c->gated ? ", gated" : "", c->neg ? ", beta in (0,2)" : "", c->state ? ", states" : "");
    vf q = randn(nk, 0, 1), k = randn(nk, 0, 1), v = randn(nv, 0, 1), dy = randn(nv, 0, 1), be(nh), g(nh);
    unit_rows(q, B * T * H, Dk); unit_rows(k, B * T * H, Dk);
    for (size_t i = 0; i < nh; i++) {
        double x = mn_rng_normal(&R), y = mn_rng_normal(&R);
        be[i] = (float)((c->neg ? 2.0 : 1.0) / (1.0 + exp(-x)));
        g[i] = (float)(-c->gmul * (y > 20 ? y : log1p(exp(y))));
    }
    vf h0 = c->state ? randn(ns, 0, 1) : vf(), dht = c->state ? randn(ns, 0, 1) : vf();
    vf pq = randn(nk, 0, 1), pk = randn(nk, 0, 1), pv = randn(nv, 0, 1), pb = randn(nh, 0, 1), pg = randn(nh, 0, 1);
    vf ph = randn(ns, 0, 1);
    vd Q = tod(q), K = tod(k), Vd = tod(v), Bd = tod(be), Gd = tod(g), H0 = tod(h0), DHT = tod(dht), DY = tod(dy);
    vd out(nv), ht(ns), states(ns * T), dstate(ns);
    vd dq = tod(pq), dk = tod(pk), dv = tod(pv), db = tod(pb), dg = tod(pg), dh0 = tod(ph);
    const double* Gp = c->gated ? Gd.data() : NULL;
    mn_delta_rule_forward_naive(out.data(), ht.data(), states.data(), Q.data(), K.data(), Vd.data(), Bd.data(), Gp,
                                c->state ? H0.data() : NULL, B, T, H, Dk, Dv, scale);
    mn_delta_rule_backward_naive(dq.data(), dk.data(), dv.data(), db.data(), c->gated ? dg.data() : NULL, dh0.data(),
                                 dstate.data(), DY.data(), c->state ? DHT.data() : NULL, states.data(), Q.data(),
                                 K.data(), Vd.data(), Bd.data(), Gp, B, T, H, Dk, Dv, scale);
    vd hs(B * H * NC * Dk * Dv);                     // the chunk-start states, from the naive form's S_{t-1}
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t ci = 0; ci < NC; ci++)
            memcpy(hs.data() + (bh * NC + ci) * Dk * Dv, states.data() + (bh * T + ci * C) * Dk * Dv,
                   Dk * Dv * sizeof(double));
    size_t wn = mn_cuda_delta_rule_work_size(B, T, H, Dk, Dv, C);
    float *gq = dev(q), *gk = dev(k), *gv = dev(v), *gb = dev(be), *gg = c->gated ? dev(g) : NULL, *gdy = dev(dy);
    float *gh0 = c->state ? dev(h0) : NULL, *gdht = c->state ? dev(dht) : NULL;
    float *gout = poison(nv), *ght = poison(ns), *ghs = poison(B * H * NC * Dk * Dv), *gw = poison(wn);
    float *gdq = dev(pq), *gdk = dev(pk), *gdv = dev(pv), *gdb = dev(pb), *gdg = dev(pg), *gdh = dev(ph);
    float* const outs[6] = { gdq, gdk, gdv, gdb, gdg, gdh };
    const size_t ns6[6] = { nk, nk, nv, nh, nh, ns };
    // the default form (chunkwise where it applies: chunk >= 16 and Dv a multiple of 16, work given), then
    // the recurrent form; each against the CPU, then the two against each other
    const int chunked = C >= 16 && Dv % 16 == 0;
    vf fw[2][3], bw[2][6];
    for (int f = 0; f < 2; f++) {
        const char* form = f ? "recurrent" : chunked ? "chunkwise" : "default = recurrent";
        if (f) {                                     // fresh poison and priors for the second form
            cudaMemset(gout, 0xFF, nv * 4); cudaMemset(ght, 0xFF, ns * 4); cudaMemset(ghs, 0xFF, hs.size() * 4);
            cudaMemset(gw, 0xFF, wn * 4);
            CK(mn_cuda_upload(&G, gdq, pq.data(), nk * 4)); CK(mn_cuda_upload(&G, gdk, pk.data(), nk * 4));
            CK(mn_cuda_upload(&G, gdv, pv.data(), nv * 4)); CK(mn_cuda_upload(&G, gdb, pb.data(), nh * 4));
            CK(mn_cuda_upload(&G, gdg, pg.data(), nh * 4)); CK(mn_cuda_upload(&G, gdh, ph.data(), ns * 4));
        }
        if (f) CK(mn_cuda_delta_rule_forward_recurrent(&G, gout, ght, ghs, gq, gk, gv, gb, gg, gh0, B, T, H, Dk, Dv, C,
                                                       scale, NULL));
        else CK(mn_cuda_delta_rule_forward(&G, gout, ght, ghs, gq, gk, gv, gb, gg, gh0, B, T, H, Dk, Dv, C, scale, gw));
        fw[f][0] = host(gout, nv); fw[f][1] = host(ght, ns); fw[f][2] = host(ghs, hs.size());
        snprintf(nm, sizeof nm, "delta fwd %s out (%s)", form, tag); check(nm, fw[f][0], out, 2e-5);
        snprintf(nm, sizeof nm, "delta fwd %s ht (%s)", form, tag); check(nm, fw[f][1], ht, 2e-5);
        snprintf(nm, sizeof nm, "delta fwd %s hs (%s)", form, tag); check(nm, fw[f][2], hs, 2e-5);
        auto bwd = [&] {
            if (f) CK(mn_cuda_delta_rule_backward_recurrent(&G, gdq, gdk, gdv, gdb, gdg, gdh, gdy, gdht, ghs, gq, gk,
                                                            gv, gb, gg, B, T, H, Dk, Dv, C, scale, gw));
            else CK(mn_cuda_delta_rule_backward(&G, gdq, gdk, gdv, gdb, gdg, gdh, gdy, gdht, ghs, gq, gk, gv, gb, gg, B,
                                                T, H, Dk, Dv, C, scale, gw));
        };
        bwd();
        vf* r1 = bw[f];
        for (int i = 0; i < 6; i++) r1[i] = host(outs[i], ns6[i]);
        snprintf(nm, sizeof nm, "delta bwd %s dq (%s)", form, tag); check_inc(nm, r1[0], pq, dq, 1e-4);
        snprintf(nm, sizeof nm, "delta bwd %s dk (%s)", form, tag); check_inc(nm, r1[1], pk, dk, 1e-4);
        snprintf(nm, sizeof nm, "delta bwd %s dv (%s)", form, tag); check_inc(nm, r1[2], pv, dv, 1e-4);
        snprintf(nm, sizeof nm, "delta bwd %s dbeta (%s)", form, tag); check_inc(nm, r1[3], pb, db, 3e-4);
        if (c->gated) {
            snprintf(nm, sizeof nm, "delta bwd %s dg (%s)", form, tag); check_inc(nm, r1[4], pg, dg, 3e-4);
        } else {      // DeltaNet: dg untouched
            size_t diff = 0;
            for (size_t i = 0; i < nh; i++) diff += memcmp(&r1[4][i], &pg[i], sizeof(float)) != 0;
            snprintf(nm, sizeof nm, "delta bwd %s leaves dg alone without g (%s)", form, tag); expect(diff == 0, nm);
        }
        snprintf(nm, sizeof nm, "delta bwd %s dh0 (%s)", form, tag); check_inc(nm, r1[5], ph, dh0, 1e-4);
        {   // no atomics: a second backward from the same priors gives the same bits
            CK(mn_cuda_upload(&G, gdq, pq.data(), nk * 4)); CK(mn_cuda_upload(&G, gdk, pk.data(), nk * 4));
            CK(mn_cuda_upload(&G, gdv, pv.data(), nv * 4)); CK(mn_cuda_upload(&G, gdb, pb.data(), nh * 4));
            CK(mn_cuda_upload(&G, gdg, pg.data(), nh * 4)); CK(mn_cuda_upload(&G, gdh, ph.data(), ns * 4));
            cudaMemset(gw, 0xFF, wn * sizeof(float));
            bwd();
            vf a, r, x;
            for (int i = 0; i < 6; i++) {
                x = host(outs[i], ns6[i]);
                a.insert(a.end(), x.begin(), x.end()); r.insert(r.end(), r1[i].begin(), r1[i].end());
            }
            snprintf(nm, sizeof nm, "delta bwd %s (%s)", form, tag); same_twice(nm, r, a);
        }
    }
    if (chunked) {   // the chunkwise form against the recurrent one: both are within the bounds above of the CPU
        const char* fn[3] = { "out", "ht", "hs" };
        const char* bn[6] = { "dq", "dk", "dv", "dbeta", "dg", "dh0" };
        const double bb[6] = { 1e-4, 1e-4, 1e-4, 3e-4, 3e-4, 1e-4 };
        for (int i = 0; i < 3; i++) {
            snprintf(nm, sizeof nm, "delta fwd chunkwise vs recurrent %s (%s)", fn[i], tag);
            check(nm, fw[0][i], tod(fw[1][i]), 2e-5);
        }
        for (int i = 0; i < 6; i++) {
            if (i == 4 && !c->gated) continue;
            snprintf(nm, sizeof nm, "delta bwd chunkwise vs recurrent %s (%s)", bn[i], tag);
            check(nm, bw[0][i], tod(bw[1][i]), bb[i]);
        }
    }
    mn_cuda_dfree(gq); mn_cuda_dfree(gk); mn_cuda_dfree(gv); mn_cuda_dfree(gb); mn_cuda_dfree(gg); mn_cuda_dfree(gdy);
    mn_cuda_dfree(gh0); mn_cuda_dfree(gdht); mn_cuda_dfree(gout); mn_cuda_dfree(ght); mn_cuda_dfree(ghs);
    mn_cuda_dfree(gw); mn_cuda_dfree(gdq); mn_cuda_dfree(gdk); mn_cuda_dfree(gdv); mn_cuda_dfree(gdb);
    mn_cuda_dfree(gdg); mn_cuda_dfree(gdh);
}

// The decode step, batched, against mn_delta_rule_step in double from a random state, P consecutive
// tokens: the default step (rows of the state per warp) and the recurrent form's step, each from its own
// copy of the state: the worst output of each against the CPU, the two against each other, then the
// states. fp32 against double, one step at a time: 1e-5.
static void test_delta_step(size_t B, size_t H, size_t Dk, size_t Dv, int gated, int neg, size_t P) {
    char nm[200], tag[120];
    double scale = 1.0 / sqrt((double)Dk), worst[3] = { 0, 0, 0 };
    size_t ns = B * H * Dk * Dv, no = B * H * Dv;
    snprintf(tag, sizeof tag, "B %zu H %zu Dk %zu Dv %zu%s%s", B, H, Dk, Dv, gated ? " gated" : "", neg ? " neg" : "");
    vf s0 = randn(ns, 0, 1);
    vd S = tod(s0), ref(no);
    float *gs[2] = { dev(s0), dev(s0) }, *gout[2] = { poison(no), poison(no) };
    int fin = 1;
    for (size_t p = 0; p < P; p++) {
        vf q = randn(B * H * Dk, 0, 1), k = randn(B * H * Dk, 0, 1), v = randn(B * H * Dv, 0, 1), be(B * H), g(B * H);
        unit_rows(q, B * H, Dk); unit_rows(k, B * H, Dk);
        for (size_t i = 0; i < B * H; i++) {
            double x = mn_rng_normal(&R), y = mn_rng_normal(&R);
            be[i] = (float)((neg ? 2.0 : 1.0) / (1.0 + exp(-x)));
            g[i] = (float)(-0.3 * log1p(exp(y)));
        }
        vd Qd = tod(q), Kd = tod(k), Vd = tod(v), Bd = tod(be), Gd = tod(g);
        mn_delta_rule_step(ref.data(), S.data(), Qd.data(), Kd.data(), Vd.data(), Bd.data(), gated ? Gd.data() : NULL,
                           B, H, Dk, Dv, scale);
        float *gq = dev(q), *gk = dev(k), *gv = dev(v), *gb = dev(be), *gg = gated ? dev(g) : NULL;
        vf ho[2];
        for (int f = 0; f < 2; f++) {
            cudaMemset(gout[f], 0xFF, no * sizeof(float));
            if (f) CK(mn_cuda_delta_rule_step_recurrent(&G, gout[f], gs[f], gq, gk, gv, gb, gg, B, H, Dk, Dv, scale));
            else CK(mn_cuda_delta_rule_step(&G, gout[f], gs[f], gq, gk, gv, gb, gg, B, H, Dk, Dv, scale));
            ho[f] = host(gout[f], no);
        }
        double se[3] = { 0, 0, 0 }, sr = 0;
        for (size_t i = 0; i < no; i++) {
            if (!isfinite(ho[0][i]) || !isfinite(ho[1][i])) fin = 0;
            se[0] += (ho[0][i] - ref[i]) * (ho[0][i] - ref[i]); se[1] += (ho[1][i] - ref[i]) * (ho[1][i] - ref[i]);
            se[2] += (ho[0][i] - ho[1][i]) * (ho[0][i] - ho[1][i]); sr += ref[i] * ref[i];
        }
        for (int x = 0; x < 3; x++) if (sqrt(se[x] / sr) > worst[x]) worst[x] = sqrt(se[x] / sr);
        mn_cuda_dfree(gq); mn_cuda_dfree(gk); mn_cuda_dfree(gv); mn_cuda_dfree(gb); mn_cuda_dfree(gg);
    }
    snprintf(nm, sizeof nm, "delta step: %zu tokens, %s, worst out rms %.2e (bound 1e-5)", P, tag, worst[0]);
    expect(fin && worst[0] <= 1e-5, nm);
    snprintf(nm, sizeof nm, "delta step recurrent: %zu tokens, %s, worst out rms %.2e (bound 1e-5)", P, tag,
             worst[1]);
    expect(fin && worst[1] <= 1e-5, nm);
    snprintf(nm, sizeof nm, "delta step vs recurrent step: %zu tokens, %s, worst out rms %.2e (bound 1e-5)", P, tag,
             worst[2]);
    expect(fin && worst[2] <= 1e-5, nm);
    vf st[2] = { host(gs[0], ns), host(gs[1], ns) };
    snprintf(nm, sizeof nm, "delta step: state (%s)", tag); check(nm, st[0], S, 1e-5);
    snprintf(nm, sizeof nm, "delta step recurrent: state (%s)", tag); check(nm, st[1], S, 1e-5);
    snprintf(nm, sizeof nm, "delta step vs recurrent step: state (%s)", tag); check(nm, st[0], tod(st[1]), 1e-5);
    mn_cuda_dfree(gs[0]); mn_cuda_dfree(gs[1]); mn_cuda_dfree(gout[0]); mn_cuda_dfree(gout[1]);
}

static void test_delta_all(void) {
    static const delta_case cases[] = {
        //  name                  B  T     H  Dk   Dv   gated neg state chunk gmul
        { "deltanet",             2, 100,  3, 64,  64,  0,    0,  1,    16,   0 },
        { "deltanet_neg D128",    1, 150,  2, 128, 128, 0,    1,  1,    16,   0 },
        { "gdn",                  2, 100,  2, 64,  64,  1,    0,  1,    16,   0.3 },
        { "gdn_neg D128 chunk 64", 1, 203, 2, 128, 128, 1,    1,  0,    64,   0.3 },
        { "gdn D32 chunk 7",      3, 77,   4, 32,  32,  1,    0,  1,    7,    0.3 },
        { "gdn_neg D16 Dv48 chunk 1", 2, 50, 2, 16, 48, 1,    1,  1,    1,    0.3 },
        { "gdn D96 Dv128 strong", 1, 120,  2, 96,  128, 1,    0,  1,    16,   3 },    // decays to e^-50 in a chunk
        { "deltanet D48 Dv24 T5", 1, 5,    1, 48,  24,  0,    0,  1,    16,   0 },    // T shorter than a chunk
        { "gdn D128 T1024",       1, 1024, 1, 128, 128, 1,    0,  0,    16,   0.05 },
        { "deltanet_neg D80 Dv8", 2, 64,   2, 80,  8,   0,    1,  1,    32,   0 },    // one column slice
        // the chunkwise form: chunk lengths that are not powers of 2, a last chunk of one row, T one chunk
        { "gdn D32 Dv48 chunk 20", 2, 77,  3, 32,  48,  1,    0,  1,    20,   0.3 },
        { "gdn_neg D64 chunk 32 T33", 2, 33, 2, 64, 64,  1,    1,  1,    32,   0.3 },
        { "deltanet_neg D128 T64 chunk 64", 1, 64, 2, 128, 128, 0, 1, 1,  64,   0 },
        { "gdn D16 chunk 16 T300", 1, 300, 2, 16,  16,  1,    0,  1,    16,   0.3 },
        { "gdn D112 Dv32 chunk 48 strong", 2, 100, 1, 112, 32, 1, 0, 1,  48,   3 },   // e^gam underflows
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_delta(&cases[i]);
    test_delta_step(3, 2, 64, 64, 0, 0, 20);
    test_delta_step(2, 3, 128, 128, 1, 0, 20);
    test_delta_step(64, 2, 128, 128, 1, 1, 5);
    test_delta_step(2, 2, 32, 48, 0, 1, 10);
    test_delta_step(1, 3, 112, 16, 1, 0, 10);
    test_delta_step(2, 2, 48, 40, 1, 1, 8);         // a partial 32-column block (Dv 40)
    test_delta_step(3, 1, 16, 72, 0, 0, 8);
    {   // what the kernels do not take
        float* p = poison(4096);
        expect(mn_cuda_delta_rule_forward(&G, p, p, p, p, p, p, p, NULL, NULL, 1, 8, 1, 40, 40, 16, 1.0, NULL) ==
               MN_ERR_CONFIG, "delta rule with Dk = 40 returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_forward(&G, p, p, p, p, p, p, p, NULL, NULL, 1, 8, 1, 144, 64, 16, 1.0, NULL) ==
               MN_ERR_CONFIG, "delta rule with Dk = 144 returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_forward(&G, p, p, p, p, p, p, p, NULL, NULL, 1, 8, 1, 64, 12, 16, 1.0, NULL) ==
               MN_ERR_CONFIG, "delta rule with Dv = 12 returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_forward(&G, p, p, p, p, p, p, p, NULL, NULL, 1, 8, 1, 64, 64, 65, 1.0, NULL) ==
               MN_ERR_CONFIG, "delta rule with chunk 65 returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_backward(&G, p, p, p, p, NULL, NULL, p, NULL, NULL, p, p, p, p, NULL, 1, 8, 1, 64, 64,
                                           16, 1.0, p) == MN_ERR_CONFIG,
               "delta rule backward without hs returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_backward_recurrent(&G, p, p, p, p, NULL, NULL, p, NULL, NULL, p, p, p, p, NULL, 1, 8,
                                                     1, 64, 64, 16, 1.0, p) == MN_ERR_CONFIG,
               "delta rule backward (recurrent) without hs returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_forward(&G, p, p, p, p, p, p, p, NULL, NULL, 1, 8, 1, 144, 64, 16, 1.0, p) ==
               MN_ERR_CONFIG, "delta rule (chunkwise: work given) with Dk = 144 returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_step(&G, p, p, p, p, p, p, NULL, 1, 1, 8, 64, 1.0) == MN_ERR_CONFIG,
               "delta rule step with Dk = 8 returns MN_ERR_CONFIG");
        expect(mn_cuda_delta_rule_step_recurrent(&G, p, p, p, p, p, p, NULL, 1, 1, 64, 12, 1.0) == MN_ERR_CONFIG,
               "delta rule step (recurrent) with Dv = 12 returns MN_ERR_CONFIG");
        mn_cuda_dfree(p);
    }
    {   // the model takes the delta layers at head_dim 32 and refuses 40 (not a multiple of 16)
        mn_config c; memset(&c, 0, sizeof c);
        mn_cuda_model gm;
        c.vocab_size = 256; c.d_model = 64; c.n_layer = 2; c.n_head = 2; c.head_dim = 32; c.d_ff = 128;
        c.max_seq_len = 64; c.pattern = "gdn,deltanet_neg"; c.seed = 1;
        int e = mn_cuda_model_init(&gm, &G, &c);
        expect(e == MN_OK, "mn_cuda_model_init of gdn,deltanet_neg with head_dim 32 succeeds");
        if (e == MN_OK) mn_cuda_model_free(&gm);
        c.d_model = 80; c.head_dim = 40;
        e = mn_cuda_model_init(&gm, &G, &c);
        expect(e == MN_ERR_CONFIG, "mn_cuda_model_init of gdn,deltanet_neg with head_dim 40 returns MN_ERR_CONFIG");
        if (e == MN_OK) mn_cuda_model_free(&gm);
    }
}

// the whole model (fp32 cuBLAS; the op fp32): the GLA family's bounds; a Mesa hybrid with Mesa's
#define MN__TEST_MODELS_DELTA                                                                                       \
    { "deltanet H2x64", "deltanet", 0, 128, 2, 2, 64, 352, 2, 150, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5, 1e-4, 1e-3,    \
      3e-3 },                                                                                                       \
    { "gdn_neg H2x128", "gdn_neg", 0, 256, 2, 2, 128, 688, 2, 130, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5, 1e-4, 1e-3,    \
      3e-3 },                                                                                                       \
    { "deltanet_neg,gdn H4x32 cap", "deltanet_neg,gdn", 0, 128, 2, 4, 32, 352, 3, 101, 30, 0, MN_CUDA_MATH_FP32, 30.0, \
      1e-5, 1e-4, 1e-3, 3e-3 },                                                                                     \
    { "gdn,mesa H2x128 cg10", "gdn,mesa", 0, 256, 2, 2, 128, 688, 2, 130, 10, 1, MN_CUDA_MATH_FP32, 0.0, 1e-4, 6e-3,  \
      1e-2, 2e-2 },
