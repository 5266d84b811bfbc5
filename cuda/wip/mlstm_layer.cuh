// ---- the mLSTM layer "mlstm" (mesanet.h's mn__mlstm_layer_forward / _backward, xLSTM-7B's layout) ----
//   q, k, v = x W ; i = 15 tanh((x Wi^T + bi) / 15), f = 15 tanh((x Wf^T + bf) / 15) (soft-capped gates)
//   h = mLSTM(q, k, v, i, f) (scale 1/sqrt(D), eps 1e-6, exact backward) ; x2 = res + (RMSNorm_head(h)
//   sigmoid(x Wo^T)) Wout^T
// The op runs its recurrent kernels whatever cfg.mesa_chunk is (the chunkwise form's sums are the
// recurrence's). Saved: q, k, v, the gates before and after the cap, h, its norm and rstd, the output
// gate's pre-activation and the gated output.
enum { MN__CM_MLSTM_Q = MN__CP_MIX, MN__CM_MLSTM_I = MN__CM_MLSTM_Q + 3, MN__CM_MLSTM_IB, MN__CM_MLSTM_F,
       MN__CM_MLSTM_FB, MN__CM_MLSTM_OG, MN__CM_MLSTM_NORM, MN__CM_MLSTM_O, MN__CM_MLSTM_END };
static const char* const mn__cp_mlstm[MN__CM_MLSTM_END - MN__CP_MIX] = {
    "attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.igate_preact.weight", "attn.igate_preact.bias",
    "attn.fgate_preact.weight", "attn.fgate_preact.bias", "attn.ogate_preact.weight", "attn.multihead_norm.weight",
    "attn.out_proj.weight" };
#define MN__CM_MLSTM_CAP 15.0     // mesanet.h's MN__MLSTM_CAP: the gates' soft cap
#define MN__CM_MLSTM_EPS 1e-6     // the layer's normaliser eps

// g = cap tanh(gl / cap) for both gates (n each), in double as the CPU layer
__global__ void mn__k_mlstm_cap(float* ig, float* fg, const float* il, const float* fl, size_t n) {
    MN__FOR(i, n) {
        ig[i] = (float)(MN__CM_MLSTM_CAP * tanh((double)il[i] / MN__CM_MLSTM_CAP));
        fg[i] = (float)(MN__CM_MLSTM_CAP * tanh((double)fl[i] / MN__CM_MLSTM_CAP));
    }
}
// forward: g = cap tanh(gl / cap), so: dgl = dg (1 - tanh^2) (overwritten)
__global__ void mn__k_mlstm_cap_bwd(float* dil, float* dfl, const float* dig, const float* dfg, const float* il,
                                    const float* fl, size_t n) {
    MN__FOR(i, n) {
        double ti = tanh((double)il[i] / MN__CM_MLSTM_CAP), tf = tanh((double)fl[i] / MN__CM_MLSTM_CAP);
        dil[i] = (float)(dig[i] * (1.0 - ti * ti));
        dfl[i] = (float)(dfg[i] * (1.0 - tf * tf));
    }
}
// ho = hn sigmoid(ol)
__global__ void mn__k_mlstm_ogate(float* ho, const float* hn, const float* ol, size_t n) {
    MN__FOR(i, n) ho[i] = (float)(hn[i] / (1.0 + exp(-(double)ol[i])));
}
// forward: ho = hn s(ol), so: dhn = dho s ; dol = dho hn s (1 - s) (overwritten)
__global__ void mn__k_mlstm_ogate_bwd(float* dhn, float* dol, const float* dho, const float* hn, const float* ol,
                                      size_t n) {
    MN__FOR(i, n) {
        double s = 1.0 / (1.0 + exp(-(double)ol[i]));
        dhn[i] = (float)(dho[i] * s);
        dol[i] = (float)(dho[i] * hn[i] * s * (1.0 - s));
    }
}

static int mn__cm_mlstm_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->head_dim % 16 || c->head_dim < 16 || c->head_dim > 128)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU mLSTM op needs head_dim a multiple of 16 <= 128",
                        __LINE__);
    return MN_OK;
}
static size_t mn__cm_mlstm_work(const mn_config* c, size_t B, size_t T) {
    return mn_cuda_mlstm_work_size(B, T, c->n_head, c->head_dim, c->head_dim, 1);
}
static size_t mn__cm_mlstm_acts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_layer* y) {
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_mlstm_acts* a = &y->mlstm;
    MN__P(a->q, N * HD); MN__P(a->k, N * HD); MN__P(a->v, N * HD);
    MN__P(a->il, N * H); MN__P(a->fl, N * H); MN__P(a->ig, N * H); MN__P(a->fg, N * H);
    MN__P(a->h, N * HD); MN__P(a->hn, N * HD); MN__P(a->rs, N * H); MN__P(a->ol, N * HD); MN__P(a->ho, N * HD);
    return off;
}
static size_t mn__cm_mlstm_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_mlstm_dacts* d = &dd->mlstm;
    MN__P(d->dq, N * HD); MN__P(d->dk, N * HD); MN__P(d->dv, N * HD);
    MN__P(d->dil, N * H); MN__P(d->dfl, N * H); MN__P(d->dig, N * H); MN__P(d->dfg, N * H);
    MN__P(d->dh, N * HD); MN__P(d->dhn, N * HD); MN__P(d->dol, N * HD); MN__P(d->dho, N * HD);
    return off;
}
static int mn__cm_mlstm_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_mlstm_acts* A = &Y->mlstm;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    const float* in = Y->xn1;
    (void)DD;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CM_MLSTM_Q, in, A->q, A->k, A->v, N));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->il, in, MN__PAR(cm, l, MN__CM_MLSTM_I), MN__PAR(cm, l, MN__CM_MLSTM_IB), N,
                                   C, H));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->fl, in, MN__PAR(cm, l, MN__CM_MLSTM_F), MN__PAR(cm, l, MN__CM_MLSTM_FB), N,
                                   C, H));
    mn__k_mlstm_cap<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(A->ig, A->fg, A->il, A->fl, N * H);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_mlstm_forward(ctx, A->h, NULL, NULL, NULL, NULL, NULL, A->q, A->k, A->v, A->ig, A->fg, NULL, NULL,
                                  NULL, B, T, H, Dh, Dh, 1.0 / sqrt((double)Dh), MN__CM_MLSTM_EPS, 1, cm->work));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->hn, A->rs, A->h, MN__PAR(cm, l, MN__CM_MLSTM_NORM), N * H, Dh,
                                    c->norm_eps));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->ol, in, MN__PAR(cm, l, MN__CM_MLSTM_OG), NULL, N, C, HD));
    mn__k_mlstm_ogate<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(A->ho, A->hn, A->ol, N * HD);
    MN__LAUNCHED();
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->ho, MN__PAR(cm, l, MN__CM_MLSTM_O), N, HD, C);
}
static int mn__cm_mlstm_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                 float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_mlstm_acts* A = &Y->mlstm;
    const mn__cm_mlstm_dacts* D = &DD->mlstm;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    const float* in = Y->xn1;
    // every buffer written by its first writer (acc 0): dho by the out_proj backward, dhn and dol by the
    // gate's, din by the ogate_preact backward, dh by the norm's, dq..dfg by the op's, dil, dfl by the cap's
    MN__TRY(mn__matmul_backward(ctx, D->dho, MN__GRD(cm, l, MN__CM_MLSTM_O), NULL, dout, A->ho,
                                MN__PAR(cm, l, MN__CM_MLSTM_O), N, HD, C, 0));
    mn__k_mlstm_ogate_bwd<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(D->dhn, D->dol, D->dho, A->hn, A->ol,
                                                                            N * HD);
    MN__LAUNCHED();
    MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__CM_MLSTM_OG), NULL, D->dol, in,
                                MN__PAR(cm, l, MN__CM_MLSTM_OG), N, C, HD, 0));
    MN__TRY(mn__rmsnorm_backward(ctx, D->dh, MN__GRD(cm, l, MN__CM_MLSTM_NORM), D->dhn, A->rs, A->h,
                                 MN__PAR(cm, l, MN__CM_MLSTM_NORM), N * H, Dh, 0));
    MN__TRY(mn__mlstm_backward(ctx, D->dq, D->dk, D->dv, D->dig, D->dfg, NULL, NULL, D->dh, A->q, A->k, A->v, A->ig,
                               A->fg, NULL, NULL, NULL, B, T, H, Dh, Dh, 1.0 / sqrt((double)Dh), MN__CM_MLSTM_EPS, 1,
                               MN_MLSTM_BW_EXACT, cm->work, 0, A->h));   // A->h: the op's output, kept
    mn__k_mlstm_cap_bwd<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(D->dil, D->dfl, D->dig, D->dfg, A->il,
                                                                         A->fl, N * H);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CM_MLSTM_I), MN__GRD(cm, l, MN__CM_MLSTM_IB), D->dil,
                                    in, MN__PAR(cm, l, MN__CM_MLSTM_I), N, C, H));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CM_MLSTM_F), MN__GRD(cm, l, MN__CM_MLSTM_FB), D->dfl,
                                    in, MN__PAR(cm, l, MN__CM_MLSTM_F), N, C, H));
    return mn__cm_qkv_backward(cm, l, MN__CM_MLSTM_Q, in, din, D->dq, D->dk, D->dv, N, 1);
}

#define MN__CM_ROWS_MLSTM \
    { "mlstm", 0, MN__CM_MLSTM_END - MN__CP_MIX, mn__cp_mlstm, mn__cm_mlstm_check, mn__cm_mlstm_acts_layout, \
      mn__cm_mlstm_dacts_layout, mn__cm_mlstm_work, mn__cm_mlstm_forward, mn__cm_mlstm_backward },
