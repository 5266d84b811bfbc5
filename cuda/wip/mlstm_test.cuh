// ---- mLSTM (mn_cuda_mlstm_*) against mesanet.h's chunkwise mn_mlstm_forward / _backward and mn_mlstm_step ----
// Bounds, and why: the GPU runs the recurrence in fp32 (one FMA chain per state entry over T tokens, read-outs
// summing Dk or Dv terms), the gates and stabiliser in double like the CPU: outputs, normaliser and final
// states 2e-5 (float rounding growing ~sqrt(T) over up to 1000 tokens, the division by a normaliser that can
// sit near its floor); the stabiliser and m_T 1e-6 (double arithmetic rounded once to float); gradients of
// q, k, v and the initial state 1e-4 (three fp32 scans and the recomputed forward); the gate gradients 3e-4
// (suffix sums of q.dq - k.dk over the sequence, which largely cancel); the decode step 2e-5 for its output
// and 1e-5 for its states (one token's fp32 update per call).
typedef struct mlstm_case {
    const char* name;
    size_t B, T, H, Dk, Dv;
    int state;                    // 0 none, 1 random C0, n0, m0 (and their gradients), 2 m0 = -inf, zero C0, n0
    double imu, isd, fmu, fsd;    // input / forget gate pre-activations ~ N(mu, sd)
    int mode;                     // MN_MLSTM_BW_EXACT or MN_MLSTM_BW_DETACH
    double eps;                   // the normaliser's eps (the layer's 1e-6; large: the stabiliser's gradient counts)
} mlstm_case;
static void test_mlstm(const mlstm_case* c) {
    const size_t B = c->B, T = c->T, H = c->H, Dk = c->Dk, Dv = c->Dv, BH = B * H;
    const size_t nk = B * T * H * Dk, nv = B * T * H * Dv, ng = B * T * H, ns = BH * Dk * Dv, nn = BH * Dk;
    const double scale = 1.0 / sqrt((double)Dk), eps = c->eps;
    const int st = c->state == 1, minf = c->state == 2;
    char nm[220], tag[160];
    snprintf(tag, sizeof tag, "%s: B %zu T %zu H %zu Dk %zu Dv %zu%s%s, eps %g", c->name, B, T, H, Dk, Dv,
             st ? ", states" : minf ? ", m0 -inf" : "", c->mode == MN_MLSTM_BW_DETACH ? ", detach" : "", eps);
    vf q = randn(nk, 0, 1), k = randn(nk, 0, 1), v = randn(nv, 0, 1), dy = randn(nv, 0, 1);
    vf ig = randn(ng, c->imu, c->isd), fg = randn(ng, c->fmu, c->fsd);
    vf C0 = st ? randn(ns, 0, 0.3) : vf(), n0 = st ? randn(nn, 0, 0.3) : vf(), m0;
    if (st) m0 = randn(BH, 0, 1);
    if (minf) m0 = vf(BH, -INFINITY);
    const int hm0 = st || minf;
    vf pq = randn(nk, 0, 1), pk = randn(nk, 0, 1), pv = randn(nv, 0, 1), pi = randn(ng, 0, 1), pf = randn(ng, 0, 1);
    vf pC = randn(ns, 0, 1), pn = randn(nn, 0, 1);
    vd Q = tod(q), K = tod(k), V = tod(v), I = tod(ig), F = tod(fg), DY = tod(dy), Cd = tod(C0), Nd = tod(n0);
    vd Md = tod(m0);
    vd out(nv), norm(ng), stab(ng), Ct(ns), nt(nn), mt(BH);
    vd dq = tod(pq), dk = tod(pk), dv = tod(pv), di = tod(pi), df = tod(pf), dC = tod(pC), dn = tod(pn);
    vd work(mn_mlstm_work_size(B, T, H, Dk, Dv, 64));
    const double *rC0 = st ? Cd.data() : NULL, *rn0 = st ? Nd.data() : NULL, *rm0 = hm0 ? Md.data() : NULL;
    mn_mlstm_forward(out.data(), norm.data(), stab.data(), Ct.data(), nt.data(), mt.data(), Q.data(), K.data(),
                     V.data(), I.data(), F.data(), rC0, rn0, rm0, B, T, H, Dk, Dv, scale, eps, 64, work.data());
    mn_mlstm_backward(dq.data(), dk.data(), dv.data(), di.data(), df.data(), st ? dC.data() : NULL,
                      st ? dn.data() : NULL, DY.data(), Q.data(), K.data(), V.data(), I.data(), F.data(), rC0, rn0,
                      rm0, B, T, H, Dk, Dv, scale, eps, 64, c->mode, work.data());
    const size_t wn = mn_cuda_mlstm_work_size(B, T, H, Dk, Dv, 64);
    float *gq = dev(q), *gk = dev(k), *gv = dev(v), *gdy = dev(dy), *gi = dev(ig), *gf = dev(fg);
    float *gC0 = st ? dev(C0) : NULL, *gn0 = st ? dev(n0) : NULL, *gm0 = hm0 ? dev(m0) : NULL;
    float *gout = poison(nv), *gnorm = poison(ng), *gstab = poison(ng), *gCt = poison(ns), *gnt = poison(nn);
    float *gmt = poison(BH), *gw = poison(wn);
    float *gdq = dev(pq), *gdk = dev(pk), *gdv = dev(pv), *gdi = dev(pi), *gdf = dev(pf);
    float *gdC = st ? dev(pC) : NULL, *gdn = st ? dev(pn) : NULL;
    CK(mn_cuda_mlstm_forward_recurrent(&G, gout, gnorm, gstab, gCt, gnt, gmt, gq, gk, gv, gi, gf, gC0, gn0, gm0, B, T,
                                       H, Dk, Dv, scale, eps, 64, gw));
    snprintf(nm, sizeof nm, "mlstm fwd out (%s)", tag); check(nm, host(gout, nv), out, 2e-5);
    snprintf(nm, sizeof nm, "mlstm fwd norm (%s)", tag); check(nm, host(gnorm, ng), norm, 2e-5);
    snprintf(nm, sizeof nm, "mlstm fwd stab (%s)", tag); check(nm, host(gstab, ng), stab, 1e-6);
    snprintf(nm, sizeof nm, "mlstm fwd Ct (%s)", tag); check(nm, host(gCt, ns), Ct, 2e-5);
    snprintf(nm, sizeof nm, "mlstm fwd nt (%s)", tag); check(nm, host(gnt, nn), nt, 2e-5);
    snprintf(nm, sizeof nm, "mlstm fwd mt (%s)", tag); check(nm, host(gmt, BH), mt, 1e-6);
    if (st) {   // the final state in place of the initial one (nt = n0 is read by every column block)
        float *iC = dev(C0), *in_ = dev(n0), *im = dev(m0), *o2 = poison(nv);
        cudaMemset(gw, 0xFF, wn * sizeof(float));
        CK(mn_cuda_mlstm_forward_recurrent(&G, o2, NULL, NULL, iC, in_, im, gq, gk, gv, gi, gf, iC, in_, im, B, T, H,
                                           Dk, Dv, scale, eps, 64, gw));
        vf a = host(iC, ns), b = host(in_, nn), m2 = host(im, BH);
        a.insert(a.end(), b.begin(), b.end());
        a.insert(a.end(), m2.begin(), m2.end());
        vd r = Ct;
        r.insert(r.end(), nt.begin(), nt.end());
        r.insert(r.end(), mt.begin(), mt.end());
        snprintf(nm, sizeof nm, "mlstm fwd in place Ct, nt, mt (%s)", tag); check(nm, a, r, 2e-5);
        snprintf(nm, sizeof nm, "mlstm fwd out, norm and stab NULL (%s)", tag); check(nm, host(o2, nv), out, 2e-5);
        mn_cuda_dfree(iC); mn_cuda_dfree(in_); mn_cuda_dfree(im); mn_cuda_dfree(o2);
    }
    cudaMemset(gw, 0xFF, wn * sizeof(float));
    CK(mn_cuda_mlstm_backward_recurrent(&G, gdq, gdk, gdv, gdi, gdf, gdC, gdn, gdy, gq, gk, gv, gi, gf, gC0, gn0, gm0,
                                        B, T, H, Dk, Dv, scale, eps, 64, c->mode, gw));
    vf r1[5] = { host(gdq, nk), host(gdk, nk), host(gdv, nv), host(gdi, ng), host(gdf, ng) };
    snprintf(nm, sizeof nm, "mlstm bwd dq (%s)", tag); check_inc(nm, r1[0], pq, dq, 1e-4);
    snprintf(nm, sizeof nm, "mlstm bwd dk (%s)", tag); check_inc(nm, r1[1], pk, dk, 1e-4);
    snprintf(nm, sizeof nm, "mlstm bwd dv (%s)", tag); check_inc(nm, r1[2], pv, dv, 1e-4);
    snprintf(nm, sizeof nm, "mlstm bwd di (%s)", tag); check_inc(nm, r1[3], pi, di, 3e-4);
    snprintf(nm, sizeof nm, "mlstm bwd df (%s)", tag); check_inc(nm, r1[4], pf, df, 3e-4);
    if (st) {
        snprintf(nm, sizeof nm, "mlstm bwd dC0 (%s)", tag); check_inc(nm, host(gdC, ns), pC, dC, 1e-4);
        snprintf(nm, sizeof nm, "mlstm bwd dn0 (%s)", tag); check_inc(nm, host(gdn, nn), pn, dn, 1e-4);
    }
    {   // no atomics: a second backward from the same priors gives the same bits
        CK(mn_cuda_upload(&G, gdq, pq.data(), nk * 4)); CK(mn_cuda_upload(&G, gdk, pk.data(), nk * 4));
        CK(mn_cuda_upload(&G, gdv, pv.data(), nv * 4)); CK(mn_cuda_upload(&G, gdi, pi.data(), ng * 4));
        CK(mn_cuda_upload(&G, gdf, pf.data(), ng * 4));
        CK(mn_cuda_mlstm_backward_recurrent(&G, gdq, gdk, gdv, gdi, gdf, NULL, NULL, gdy, gq, gk, gv, gi, gf, gC0, gn0,
                                            gm0, B, T, H, Dk, Dv, scale, eps, 64, c->mode, gw));
        vf a, r;
        for (int j = 0; j < 5; j++) r.insert(r.end(), r1[j].begin(), r1[j].end());
        float* gp[5] = { gdq, gdk, gdv, gdi, gdf };
        size_t np[5] = { nk, nk, nv, ng, ng };
        for (int j = 0; j < 5; j++) { vf x = host(gp[j], np[j]); a.insert(a.end(), x.begin(), x.end()); }
        snprintf(nm, sizeof nm, "mlstm bwd dq, dk, dv, di, df (%s)", tag); same_twice(nm, r, a);
    }
    mn_cuda_dfree(gq); mn_cuda_dfree(gk); mn_cuda_dfree(gv); mn_cuda_dfree(gdy); mn_cuda_dfree(gi); mn_cuda_dfree(gf);
    mn_cuda_dfree(gC0); mn_cuda_dfree(gn0); mn_cuda_dfree(gm0); mn_cuda_dfree(gout); mn_cuda_dfree(gnorm);
    mn_cuda_dfree(gstab); mn_cuda_dfree(gCt); mn_cuda_dfree(gnt); mn_cuda_dfree(gmt); mn_cuda_dfree(gw);
    mn_cuda_dfree(gdq); mn_cuda_dfree(gdk); mn_cuda_dfree(gdv); mn_cuda_dfree(gdi); mn_cuda_dfree(gdf);
    mn_cuda_dfree(gdC); mn_cuda_dfree(gdn);
}

// The decode step, batched, against mn_mlstm_step in double from a random state, P consecutive tokens: the
// worst output, then the states C, n, m.
static void test_mlstm_step(size_t B, size_t H, size_t Dk, size_t Dv, size_t P) {
    char nm[200];
    const double scale = 1.0 / sqrt((double)Dk), eps = 1e-6;
    const size_t BH = B * H, ns = BH * Dk * Dv, nn = BH * Dk;
    vf C0 = randn(ns, 0, 0.3), n0 = randn(nn, 0, 0.3), m0 = randn(BH, 0, 1);
    vd Cs = tod(C0), Ns = tod(n0), Ms = tod(m0), ref(BH * Dv);
    float *gC = dev(C0), *gn = dev(n0), *gm = dev(m0), *gout = poison(BH * Dv);
    double worst = 0;
    int fin = 1;
    for (size_t p = 0; p < P; p++) {
        vf q = randn(BH * Dk, 0, 1), k = randn(BH * Dk, 0, 1), v = randn(BH * Dv, 0, 1);
        vf ig = randn(BH, 0, 2), fg = randn(BH, 2, 1.5);
        vd Qd = tod(q), Kd = tod(k), Vd = tod(v), Id = tod(ig), Fd = tod(fg);
        mn_mlstm_step(ref.data(), Cs.data(), Ns.data(), Ms.data(), Qd.data(), Kd.data(), Vd.data(), Id.data(),
                      Fd.data(), B, H, Dk, Dv, scale, eps);
        float *gq = dev(q), *gk = dev(k), *gv = dev(v), *gi = dev(ig), *gf = dev(fg);
        cudaMemset(gout, 0xFF, BH * Dv * sizeof(float));
        CK(mn_cuda_mlstm_step(&G, gout, gC, gn, gm, gq, gk, gv, gi, gf, B, H, Dk, Dv, scale, eps));
        vf ho = host(gout, BH * Dv);
        double se = 0, sr = 0;
        for (size_t i = 0; i < ho.size(); i++) {
            if (!isfinite(ho[i])) fin = 0;
            se += (ho[i] - ref[i]) * (ho[i] - ref[i]); sr += ref[i] * ref[i];
        }
        if (sqrt(se / sr) > worst) worst = sqrt(se / sr);
        mn_cuda_dfree(gq); mn_cuda_dfree(gk); mn_cuda_dfree(gv); mn_cuda_dfree(gi); mn_cuda_dfree(gf);
    }
    snprintf(nm, sizeof nm, "mlstm step: %zu tokens, B %zu H %zu Dk %zu Dv %zu, worst out rms %.2e (bound 2e-5)", P, B,
             H, Dk, Dv, worst);
    expect(fin && worst <= 2e-5, nm);
    snprintf(nm, sizeof nm, "mlstm step: state C (B %zu H %zu Dk %zu Dv %zu)", B, H, Dk, Dv);
    check(nm, host(gC, ns), Cs, 1e-5);
    snprintf(nm, sizeof nm, "mlstm step: state n (B %zu H %zu Dk %zu Dv %zu)", B, H, Dk, Dv);
    check(nm, host(gn, nn), Ns, 1e-5);
    snprintf(nm, sizeof nm, "mlstm step: state m (B %zu H %zu Dk %zu Dv %zu)", B, H, Dk, Dv);
    check(nm, host(gm, BH), Ms, 1e-5);
    mn_cuda_dfree(gC); mn_cuda_dfree(gn); mn_cuda_dfree(gm); mn_cuda_dfree(gout);
}

// The chunk form (mn_cuda_mlstm_*_chunk, the default where it applies) on the cases it takes (no C0, n0;
// Dk == Dv in {64, 128}), in fp32 math (3xTF32 products): against the CPU in double like the recurrent form,
// and against the recurrent form on the GPU. Bounds: outputs and normaliser 3e-5 (the GLA op's 1e-5 for
// its numerator, then the division by a normaliser near its floor), the stabiliser and m_T 1e-6 (the same
// double gate kernel as the recurrent form); dq, dk, dv 2e-4 (the GLA op's backward, 1e-4 in its own test,
// plus the normaliser's vector scans); di, df 5e-4 (the recurrent form's suffix sums of q.dq - k.dk, with
// k.dk from the 3xTF32 gradient); chunk vs recurrent the sum of both forms' bounds. Then the default picks
// it (bitwise equal to _chunk, deterministic twice), and gates spanning more than 40 make _chunk refuse
// (nothing written) while the default falls back to the recurrent form (equal to it bitwise).
static void test_mlstm_chunk(const mlstm_case* c) {
    const size_t B = c->B, T = c->T, H = c->H, D = c->Dk, BH = B * H, nk = B * T * H * D, ng = B * T * H;
    const double scale = 1.0 / sqrt((double)D), eps = c->eps;
    const int minf = c->state == 2, saved = G.math;
    char nm[240], tag[160];
    G.math = MN_CUDA_MATH_FP32;
    snprintf(tag, sizeof tag, "chunk %s: B %zu T %zu H %zu D %zu%s%s, eps %g", c->name, B, T, H, D,
             minf ? ", m0 -inf" : "", c->mode == MN_MLSTM_BW_DETACH ? ", detach" : "", eps);
    vf q = randn(nk, 0, 1), k = randn(nk, 0, 1), v = randn(nk, 0, 1), dy = randn(nk, 0, 1);
    vf ig = randn(ng, c->imu, c->isd), fg = randn(ng, c->fmu, c->fsd), m0 = minf ? vf(BH, -INFINITY) : vf();
    vf pq = randn(nk, 0, 1), pk = randn(nk, 0, 1), pv = randn(nk, 0, 1), pi = randn(ng, 0, 1), pf = randn(ng, 0, 1);
    vd Q = tod(q), K = tod(k), V = tod(v), I = tod(ig), F = tod(fg), DY = tod(dy), Md = tod(m0);
    vd out(nk), norm(ng), stab(ng), Ct(BH * D * D), nt(BH * D), mt(BH);
    vd dq = tod(pq), dk = tod(pk), dv = tod(pv), di = tod(pi), df = tod(pf);
    vd work(mn_mlstm_work_size(B, T, H, D, D, 64));
    const double* rm0 = minf ? Md.data() : NULL;
    mn_mlstm_forward(out.data(), norm.data(), stab.data(), Ct.data(), nt.data(), mt.data(), Q.data(), K.data(),
                     V.data(), I.data(), F.data(), NULL, NULL, rm0, B, T, H, D, D, scale, eps, 64, work.data());
    mn_mlstm_backward(dq.data(), dk.data(), dv.data(), di.data(), df.data(), NULL, NULL, DY.data(), Q.data(),
                      K.data(), V.data(), I.data(), F.data(), NULL, NULL, rm0, B, T, H, D, D, scale, eps, 64, c->mode,
                      work.data());
    const size_t wn = mn_cuda_mlstm_work_size(B, T, H, D, D, 64);
    float *gq = dev(q), *gk = dev(k), *gv = dev(v), *gdy = dev(dy), *gi = dev(ig), *gf = dev(fg);
    float *gm0 = minf ? dev(m0) : NULL, *gw = poison(wn);
    float *gout = poison(nk), *gnorm = poison(ng), *gstab = poison(ng), *gmt = poison(BH);
    float *rout = poison(nk), *rnorm = poison(ng), *rstab = poison(ng);
    CK(mn_cuda_mlstm_forward_chunk(&G, gout, gnorm, gstab, gmt, gq, gk, gv, gi, gf, gm0, B, T, H, D, D, scale, eps,
                                   64, gw));
    vf co = host(gout, nk), cn = host(gnorm, ng);
    snprintf(nm, sizeof nm, "mlstm fwd out (%s)", tag); check(nm, co, out, 3e-5);
    snprintf(nm, sizeof nm, "mlstm fwd norm (%s)", tag); check(nm, cn, norm, 3e-5);
    snprintf(nm, sizeof nm, "mlstm fwd stab (%s)", tag); check(nm, host(gstab, ng), stab, 1e-6);
    snprintf(nm, sizeof nm, "mlstm fwd mt (%s)", tag); check(nm, host(gmt, BH), mt, 1e-6);
    cudaMemset(gw, 0xFF, wn * sizeof(float));
    CK(mn_cuda_mlstm_forward_recurrent(&G, rout, rnorm, rstab, NULL, NULL, NULL, gq, gk, gv, gi, gf, NULL, NULL, gm0,
                                       B, T, H, D, D, scale, eps, 64, gw));
    snprintf(nm, sizeof nm, "mlstm fwd out, chunk vs recurrent (%s)", tag); check(nm, co, tod(host(rout, nk)), 5e-5);
    snprintf(nm, sizeof nm, "mlstm fwd norm, chunk vs recurrent (%s)", tag);
    check(nm, cn, tod(host(rnorm, ng)), 5e-5);
    {   // the default form is the chunk form here: the same bits
        float* o2 = poison(nk);
        CK(mn_cuda_mlstm_forward(&G, o2, NULL, NULL, NULL, NULL, NULL, gq, gk, gv, gi, gf, NULL, NULL, gm0, B, T, H, D,
                                 D, scale, eps, 64, gw));
        snprintf(nm, sizeof nm, "mlstm fwd default = chunk (%s)", tag); same_twice(nm, co, host(o2, nk));
        mn_cuda_dfree(o2);
    }
    float *gdq = dev(pq), *gdk = dev(pk), *gdv = dev(pv), *gdi = dev(pi), *gdf = dev(pf);
    cudaMemset(gw, 0xFF, wn * sizeof(float));
    CK(mn_cuda_mlstm_backward_chunk(&G, gdq, gdk, gdv, gdi, gdf, gdy, gq, gk, gv, gi, gf, gm0, B, T, H, D, D, scale,
                                    eps, 64, c->mode, gw));
    vf r1[5] = { host(gdq, nk), host(gdk, nk), host(gdv, nk), host(gdi, ng), host(gdf, ng) };
    snprintf(nm, sizeof nm, "mlstm bwd dq (%s)", tag); check_inc(nm, r1[0], pq, dq, 2e-4);
    snprintf(nm, sizeof nm, "mlstm bwd dk (%s)", tag); check_inc(nm, r1[1], pk, dk, 2e-4);
    snprintf(nm, sizeof nm, "mlstm bwd dv (%s)", tag); check_inc(nm, r1[2], pv, dv, 2e-4);
    snprintf(nm, sizeof nm, "mlstm bwd di (%s)", tag); check_inc(nm, r1[3], pi, di, 5e-4);
    snprintf(nm, sizeof nm, "mlstm bwd df (%s)", tag); check_inc(nm, r1[4], pf, df, 5e-4);
    const vf* pr[5] = { &pq, &pk, &pv, &pi, &pf };
    float* gp[5] = { gdq, gdk, gdv, gdi, gdf };
    const size_t np[5] = { nk, nk, nk, ng, ng };
    const char* gn[5] = { "dq", "dk", "dv", "di", "df" };
    const double gb[5] = { 3e-4, 3e-4, 3e-4, 8e-4, 8e-4 };
    {   // the recurrent form from the same priors, as the reference of the chunk form's increments
        for (int j = 0; j < 5; j++) CK(mn_cuda_upload(&G, gp[j], pr[j]->data(), np[j] * 4));
        CK(mn_cuda_mlstm_backward_recurrent(&G, gdq, gdk, gdv, gdi, gdf, NULL, NULL, gdy, gq, gk, gv, gi, gf, NULL,
                                            NULL, gm0, B, T, H, D, D, scale, eps, 64, c->mode, gw));
        for (int j = 0; j < 5; j++) {
            snprintf(nm, sizeof nm, "mlstm bwd %s, chunk vs recurrent (%s)", gn[j], tag);
            check_inc(nm, r1[j], *pr[j], tod(host(gp[j], np[j])), gb[j]);
        }
    }
    {   // the default backward is the chunk form here, and deterministic: the same bits as _chunk
        for (int j = 0; j < 5; j++) CK(mn_cuda_upload(&G, gp[j], pr[j]->data(), np[j] * 4));
        CK(mn_cuda_mlstm_backward(&G, gdq, gdk, gdv, gdi, gdf, NULL, NULL, gdy, gq, gk, gv, gi, gf, NULL, NULL, gm0, B,
                                  T, H, D, D, scale, eps, 64, c->mode, gw));
        vf a, r;
        for (int j = 0; j < 5; j++) {
            r.insert(r.end(), r1[j].begin(), r1[j].end());
            vf x = host(gp[j], np[j]);
            a.insert(a.end(), x.begin(), x.end());
        }
        snprintf(nm, sizeof nm, "mlstm bwd default = chunk (%s)", tag); same_twice(nm, r, a);
    }
    mn_cuda_dfree(gq); mn_cuda_dfree(gk); mn_cuda_dfree(gv); mn_cuda_dfree(gdy); mn_cuda_dfree(gi); mn_cuda_dfree(gf);
    mn_cuda_dfree(gm0); mn_cuda_dfree(gw); mn_cuda_dfree(gout); mn_cuda_dfree(gnorm); mn_cuda_dfree(gstab);
    mn_cuda_dfree(gmt); mn_cuda_dfree(rout); mn_cuda_dfree(rnorm); mn_cuda_dfree(rstab);
    for (int j = 0; j < 5; j++) mn_cuda_dfree(gp[j]);
    G.math = saved;
}
// Input gates spanning more than the chunk form's range (one head's gate 50 above the rest): _chunk returns
// MN_ERR_CONFIG and writes nothing, the default gives the recurrent form's bits (forward and backward).
static void test_mlstm_chunk_range(void) {
    const size_t B = 1, T = 100, H = 2, D = 64, nk = B * T * H * D, ng = B * T * H;
    const double scale = 0.125;
    vf q = randn(nk, 0, 1), k = randn(nk, 0, 1), v = randn(nk, 0, 1), dy = randn(nk, 0, 1);
    vf ig = randn(ng, 0, 1), fg = randn(ng, 3, 1);
    ig[2 * 37 + 1] = 50.f;                            // token 37 of head 1
    const size_t wn = mn_cuda_mlstm_work_size(B, T, H, D, D, 64);
    float *gq = dev(q), *gk = dev(k), *gv = dev(v), *gdy = dev(dy), *gi = dev(ig), *gf = dev(fg), *gw = poison(wn);
    float *o1 = poison(nk), *o2 = poison(nk), *g1[5], *g2[5];
    expect(mn_cuda_mlstm_forward_chunk(&G, o1, NULL, NULL, NULL, gq, gk, gv, gi, gf, NULL, B, T, H, D, D, scale, 1e-6,
                                       64, gw) == MN_ERR_CONFIG,
           "mlstm chunk forward with input gates spanning > 40 returns MN_ERR_CONFIG");
    vf h1 = host(o1, nk);
    size_t fin = 0;
    for (size_t i = 0; i < nk; i++) fin += isfinite(h1[i]) != 0;
    expect(fin == 0, "mlstm chunk forward refused: out untouched (still the NaN poison)");
    CK(mn_cuda_mlstm_forward(&G, o1, NULL, NULL, NULL, NULL, NULL, gq, gk, gv, gi, gf, NULL, NULL, NULL, B, T, H, D, D,
                             scale, 1e-6, 64, gw));
    CK(mn_cuda_mlstm_forward_recurrent(&G, o2, NULL, NULL, NULL, NULL, NULL, gq, gk, gv, gi, gf, NULL, NULL, NULL, B,
                                       T, H, D, D, scale, 1e-6, 64, gw));
    same_twice("mlstm fwd default = recurrent when the gates span > 40", host(o1, nk), host(o2, nk));
    const size_t np[5] = { nk, nk, nk, ng, ng };
    for (int j = 0; j < 5; j++) { g1[j] = poison(np[j]); g2[j] = poison(np[j]); }
    expect(mn_cuda_mlstm_backward_chunk(&G, g1[0], g1[1], g1[2], g1[3], g1[4], gdy, gq, gk, gv, gi, gf, NULL, B, T, H,
                                        D, D, scale, 1e-6, 64, MN_MLSTM_BW_EXACT, gw) == MN_ERR_CONFIG,
           "mlstm chunk backward with input gates spanning > 40 returns MN_ERR_CONFIG");
    for (int j = 0; j < 5; j++) { cudaMemset(g1[j], 0, np[j] * 4); cudaMemset(g2[j], 0, np[j] * 4); }
    CK(mn_cuda_mlstm_backward(&G, g1[0], g1[1], g1[2], g1[3], g1[4], NULL, NULL, gdy, gq, gk, gv, gi, gf, NULL, NULL,
                              NULL, B, T, H, D, D, scale, 1e-6, 64, MN_MLSTM_BW_EXACT, gw));
    CK(mn_cuda_mlstm_backward_recurrent(&G, g2[0], g2[1], g2[2], g2[3], g2[4], NULL, NULL, gdy, gq, gk, gv, gi, gf,
                                        NULL, NULL, NULL, B, T, H, D, D, scale, 1e-6, 64, MN_MLSTM_BW_EXACT, gw));
    vf a, r;
    for (int j = 0; j < 5; j++) {
        vf x = host(g1[j], np[j]), y = host(g2[j], np[j]);
        a.insert(a.end(), x.begin(), x.end());
        r.insert(r.end(), y.begin(), y.end());
    }
    same_twice("mlstm bwd default = recurrent when the gates span > 40", a, r);
    mn_cuda_dfree(gq); mn_cuda_dfree(gk); mn_cuda_dfree(gv); mn_cuda_dfree(gdy); mn_cuda_dfree(gi); mn_cuda_dfree(gf);
    mn_cuda_dfree(gw); mn_cuda_dfree(o1); mn_cuda_dfree(o2);
    for (int j = 0; j < 5; j++) { mn_cuda_dfree(g1[j]); mn_cuda_dfree(g2[j]); }
}

static void test_mlstm_all(void) {
    static const mlstm_case cases[] = {
        // "layer": the layer's gates (forget bias 3..6: long memory); "strong": fast decays and large input
        // gates (the stabiliser jumps); "floor": m ~ -4, so e^{-m} ~ 55 beats |n.q| and the normaliser sits on
        // its floor (its gradient goes through m alone); "eps 0.5": eps e^{m} matters, so the gradient through
        // the stabiliser (dmu, ~eps) is checked, not lost under the bounds
        //  name            B  T     H  Dk   Dv   state imu isd fmu  fsd  mode  eps
        { "layer",          2, 200,  3, 64,  64,  0,    0,  2,  4,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "states",         2, 150,  2, 64,  64,  1,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "strong D128",    1, 300,  2, 128, 128, 1,    0,  4,  0,   2,   MN_MLSTM_BW_EXACT, 1e-6 },
        { "floor",          2, 100,  2, 32,  32,  0,    -4, 1,  -1,  1,   MN_MLSTM_BW_EXACT, 1e-6 },
        { "m0 -inf",        1, 77,   3, 64,  32,  2,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "Dk32 Dv128",     2, 65,   2, 32,  128, 1,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "D16",            3, 50,   2, 16,  16,  1,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "Dk48 Dv80 T1",   2, 1,    2, 48,  80,  1,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "Dk112 Dv96",     1, 40,   1, 112, 96,  0,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "detach",         2, 200,  2, 64,  64,  1,    0,  2,  2,   1.5, MN_MLSTM_BW_DETACH, 1e-6 },
        { "eps 0.5",        2, 120,  2, 64,  64,  1,    0,  3,  1,   2,   MN_MLSTM_BW_EXACT, 0.5 },
        { "eps 0.5 floor",  1, 90,   2, 32,  64,  0,    -4, 1,  -1,  1,   MN_MLSTM_BW_EXACT, 0.5 },
        { "T1000 D128",     1, 1000, 2, 128, 128, 0,    0,  2,  4,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_mlstm(&cases[i]);
    // the chunk form on the cases it takes, plus one over several chunks with strong gates (imu 0, isd 4:
    // the stabiliser jumps, spans near 30 as the layer's cap allows) and one at the anchor's head count
    static const mlstm_case chunk_cases[] = {
        //  name            B  T     H  Dk   Dv   state imu isd fmu  fsd  mode  eps
        { "layer",          2, 200,  3, 64,  64,  0,    0,  2,  4,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "strong D128",    1, 300,  2, 128, 128, 0,    0,  4,  0,   2,   MN_MLSTM_BW_EXACT, 1e-6 },
        { "floor",          2, 100,  2, 64,  64,  0,    -4, 1,  -1,  1,   MN_MLSTM_BW_EXACT, 1e-6 },
        { "m0 -inf",        1, 77,   3, 64,  64,  2,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "T64",            1, 64,   2, 128, 128, 0,    0,  2,  2,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "detach",         2, 200,  2, 64,  64,  0,    0,  2,  2,   1.5, MN_MLSTM_BW_DETACH, 1e-6 },
        { "eps 0.5",        2, 120,  2, 64,  64,  0,    0,  3,  1,   2,   MN_MLSTM_BW_EXACT, 0.5 },
        { "eps 0.5 floor",  1, 90,   2, 64,  64,  0,    -4, 1,  -1,  1,   MN_MLSTM_BW_EXACT, 0.5 },
        { "T1000 D128",     1, 1000, 2, 128, 128, 0,    0,  2,  4,   1.5, MN_MLSTM_BW_EXACT, 1e-6 },
        { "H5 T333",        2, 333,  5, 128, 128, 0,    0,  3,  3,   2,   MN_MLSTM_BW_EXACT, 1e-6 },
    };
    for (size_t i = 0; i < sizeof chunk_cases / sizeof chunk_cases[0]; i++) test_mlstm_chunk(&chunk_cases[i]);
    test_mlstm_chunk_range();
    test_mlstm_step(3, 2, 64, 64, 20);
    test_mlstm_step(2, 3, 128, 128, 20);
    test_mlstm_step(2, 2, 100, 36, 10);          // Dk, Dv not multiples of 16 (the step takes any <= 128)
    test_mlstm_step(64, 2, 32, 32, 5);
    {   // what the kernels do not take
        float* p = poison(64);
        expect(mn_cuda_mlstm_forward(&G, p, NULL, NULL, NULL, NULL, NULL, p, p, p, p, p, NULL, NULL, NULL, 1, 8, 1, 24,
                                     32, 1.0, 1e-6, 64, p) == MN_ERR_CONFIG,
               "mlstm with Dk = 24 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_forward(&G, p, NULL, NULL, NULL, NULL, NULL, p, p, p, p, p, NULL, NULL, NULL, 1, 8, 1, 64,
                                     144, 1.0, 1e-6, 64, p) == MN_ERR_CONFIG,
               "mlstm with Dv = 144 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_forward(&G, p, NULL, NULL, NULL, NULL, NULL, p, p, p, p, p, NULL, NULL, NULL, 1, 8, 1, 64,
                                     64, 1.0, 1e-6, 0, p) == MN_ERR_CONFIG, "mlstm with chunk 0 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_forward(&G, p, NULL, NULL, NULL, NULL, NULL, p, p, p, p, p, NULL, NULL, NULL, 1, 0, 1, 64,
                                     64, 1.0, 1e-6, 64, p) == MN_ERR_CONFIG, "mlstm with T = 0 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_backward(&G, p, p, p, p, p, NULL, NULL, p, p, p, p, p, p, NULL, NULL, NULL, 1, 8, 1, 64,
                                      64, 1.0, 1e-6, 64, 2, p) == MN_ERR_CONFIG,
               "mlstm backward with mode 2 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_forward_chunk(&G, p, NULL, NULL, NULL, p, p, p, p, p, NULL, 1, 8, 1, 32, 32, 1.0, 1e-6,
                                           64, p) == MN_ERR_CONFIG,
               "mlstm chunk form with D = 32 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_backward_chunk(&G, p, p, p, p, p, p, p, p, p, p, p, NULL, 1, 8, 1, 64, 128, 1.0, 1e-6, 64,
                                            MN_MLSTM_BW_EXACT, p) == MN_ERR_CONFIG,
               "mlstm chunk backward with Dk 64, Dv 128 returns MN_ERR_CONFIG");
        expect(mn_cuda_mlstm_step(&G, p, p, p, p, p, p, p, p, p, 1, 1, 129, 64, 1.0, 1e-6) == MN_ERR_CONFIG,
               "mlstm step with Dk = 129 returns MN_ERR_CONFIG");
        mn_cuda_dfree(p);
    }
}

// the whole-model cases (test_model): the op in fp32 (the GLA family's bounds), a 4 x 32 head shape (the
// synthetic grid's), the soft-capped logits, a TF32 case, and a hybrid with attention (its fp16 bounds)
#define MN__TEST_MODELS_MLSTM \
    { "mlstm H2x64", "mlstm", 0, 128, 2, 2, 64, 352, 2, 150, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-5, 1e-4, 1e-3, \
      3e-3 }, \
    { "mlstm H4x32 cap", "mlstm", 0, 128, 2, 4, 32, 352, 2, 130, 30, 0, MN_CUDA_MATH_FP32, 30.0, 1e-5, 1e-4, 1e-3, \
      3e-3 }, \
    /* TF32 projections: the input-gate bias gradient, a sum over the tokens that cancels, measured 6.9e-2  */ \
    /* (H200 run 20, the recurrent op in fp32): its small-tensor bound 1.5e-1                                */ \
    { "mlstm H2x128 tf32", "mlstm", 0, 256, 2, 2, 128, 688, 2, 100, 30, 0, MN_CUDA_MATH_TF32, 0.0, 3e-4, 1e-2, 2e-2, \
      1.5e-1 }, \
    { "mlstm,attn H2x128", "mlstm,attn", 0, 256, 2, 2, 128, 688, 2, 130, 30, 0, MN_CUDA_MATH_FP32, 0.0, 1e-4, 6e-3, \
      1e-2, 2e-2 },
