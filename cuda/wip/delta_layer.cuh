// ---- DeltaNet and Gated DeltaNet: "deltanet", "deltanet_neg", "gdn", "gdn_neg" (mesanet.h's
// mn__delta_rule_layer_forward / _backward, call for call) ----
//   q = l2norm(silu(conv4(x Wq))), k = l2norm(silu(conv4(x Wk))), v = silu(conv4(x Wv))
//   beta = sigmoid(x Wb) (x2 for the _neg rows);  GDN: g = -exp(A_log) softplus(x Wa + dt_bias)
//   o = delta rule (mn_cuda_delta_rule_*, scale D^-1/2, checkpoints every MN__DELTA_GC tokens);
//   GDN: x2 = res + RMSNormGated(o, x Wg) Wo ;  DeltaNet: x2 = res + RMSNorm_head(o) Wo
// The op's checkpoint interval is the GPU's own (the CPU's mesa_chunk only sets the CPU's chunks:
// the recurrence is the same for any interval).
#define MN__DELTA_NEG 1     // mesanet.h's MN__DELTA_RULE_NEG: beta in (0,2)
#define MN__DELTA_GATED 2   // mesanet.h's MN__DELTA_RULE_GATED: Gated DeltaNet
// The GPU op's chunk length (its checkpoint interval): 64 takes the chunkwise form (products of 64-row
// blocks, batched over all chunks); hs costs Dk Dv / GC floats per token and head (164 MB a layer at the
// anchor shape B=16, T=2048, 5 heads of 128), the op's workspace about 15 KB per token and head there.
#define MN__DELTA_GC 64
// parameter slots, in mesanet.h's mn__delta_rule_par_walk order
enum { MN__CD_Q = MN__CP_MIX, MN__CD_K, MN__CD_V, MN__CD_B, MN__CD_QC, MN__CD_KC, MN__CD_VC, MN__CD_NORM, MN__CD_O,
       MN__CD_END, MN__CD_A = MN__CD_END, MN__CD_ALOG, MN__CD_DT, MN__CD_G, MN__CD_GEND };
static const char* const mn__cp_delta[MN__CD_GEND - MN__CP_MIX] = {
    "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.b_proj.weight",
    "attn.q_conv1d.weight", "attn.k_conv1d.weight", "attn.v_conv1d.weight", "attn.o_norm.weight",
    "attn.o_proj.weight", "attn.a_proj.weight", "attn.A_log", "attn.dt_bias", "attn.g_proj.weight" };

static int mn__cm_delta_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->head_dim < 16 || c->head_dim > 128 || c->head_dim % 16 != 0)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU delta rule needs head_dim a multiple of 16 up "
                        "to 128", __LINE__);
    return MN_OK;
}
static size_t mn__cm_delta_work(const mn_config* c, size_t B, size_t T) {
    return mn_cuda_delta_rule_work_size(B, T, c->n_head, c->head_dim, c->head_dim, MN__DELTA_GC);
}
// the activations; hs holds the op's checkpoints after the first chunk (z0: the first starts from
// zeros), B floor((T-1) / GC) <= N / GC states per head: a bound from N = B T alone
static size_t mn__cm_delta_acts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_layer* y) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    mn__cm_delta_acts* a = &y->delta;
    MN__P(a->ql, N * HD); MN__P(a->kl, N * HD); MN__P(a->vl, N * HD); MN__P(a->vc, N * HD); MN__P(a->q, N * HD);
    MN__P(a->k, N * HD); MN__P(a->rq, N * H); MN__P(a->rk, N * H); MN__P(a->bl, N * H); MN__P(a->beta, N * H);
    MN__P(a->al, N * H); MN__P(a->g, N * H); MN__P(a->o, N * HD); MN__P(a->gl, N * HD); MN__P(a->on, N * HD);
    MN__P(a->ro, N * H); MN__P(a->hs, N / MN__DELTA_GC * HD * D);
    return off;
}
static size_t mn__cm_delta_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_delta_dacts* d = &dd->delta;
    MN__P(d->dql, N * HD); MN__P(d->dkl, N * HD); MN__P(d->dvl, N * HD); MN__P(d->dqc, N * HD); MN__P(d->dkc, N * HD);
    MN__P(d->dq, N * HD); MN__P(d->dk, N * HD); MN__P(d->dv, N * HD); MN__P(d->dbeta, N * H); MN__P(d->dg, N * H);
    MN__P(d->dbl, N * H); MN__P(d->dal, N * H); MN__P(d->dO, N * HD); MN__P(d->don, N * HD); MN__P(d->dgl, N * HD);
    return off;
}

// beta = sigmoid(bl) (x2: neg), in double as the CPU
__global__ void mn__k_delta_beta(float* beta, const float* bl, size_t n, int neg) {
    MN__FOR(i, n) {
        float s = (float)(1.0 / (1.0 + exp(-(double)bl[i])));
        beta[i] = neg ? 2.f * s : s;
    }
}
// forward: beta = m sigmoid(bl) (m = 2 for neg, else 1), so: dbl = dbeta m s (1 - s) (overwritten)
__global__ void mn__k_delta_beta_bwd(float* dbl, const float* dbeta, const float* bl, size_t n, int neg) {
    MN__FOR(i, n) {
        double s = 1.0 / (1.0 + exp(-(double)bl[i])), db = neg ? (double)(2.f * dbeta[i]) : (double)dbeta[i];
        dbl[i] = (float)(db * s * (1.0 - s));
    }
}
// GDN's decay g = -exp(A_log_h) softplus(al) (al = x Wa + dt_bias); al, g (N,H), A_log (H); in double as the CPU
__global__ void mn__k_delta_gate(float* g, const float* al, const float* A_log, size_t n, int H) {
    MN__FOR(i, n) {
        double x = al[i];
        float sp = (float)(x > 20 ? x : log1p(exp(x)));
        g[i] = sp * (float)-exp((double)A_log[i % H]);
    }
}
// forward: g = -e^{A_log} softplus(al), so: dal = dg (-e^{A_log}) sigmoid(al) (overwritten); the A_log
// gradient is mn__k_delta_alog_bwd's
__global__ void mn__k_delta_gate_bwd(float* dal, const float* dg, const float* al, const float* A_log, size_t n,
                                     int H) {
    MN__FOR(i, n) {
        double s = 1.0 / (1.0 + exp(-(double)al[i]));
        dal[i] = (float)(dg[i] * -exp((double)A_log[i % H]) * s);
    }
}
// dA_log_h += sum_n dg[n,h] g[n,h]: one block of 256 per head, in double, a fixed order (deterministic)
__global__ void mn__k_delta_alog_bwd(float* dA_log, const float* dg, const float* g, size_t N, int H) {
    __shared__ double red[256];
    const int h = blockIdx.x;
    double acc = 0.0;
    for (size_t n = threadIdx.x; n < N; n += 256) acc += (double)dg[n * H + h] * g[n * H + h];
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) dA_log[h] += (float)red[0];
}

static int mn__cm_delta_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_delta_acts* A = &Y->delta;
    const mn__cm_delta_dacts* D = &DD->delta;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    int var = mn__cm_variant(cm, l), gated = var & MN__DELTA_GATED;
    const float* in = Y->xn1;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CD_Q, in, A->ql, A->kl, A->vl, N));
    // the conv outputs of q and k go to the (not yet used) gradient buffers dqc, dkc: only the l2 norm reads them
    MN__TRY(mn_cuda_shortconv_forward(ctx, D->dqc, A->ql, MN__PAR(cm, l, MN__CD_QC), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_shortconv_forward(ctx, D->dkc, A->kl, MN__PAR(cm, l, MN__CD_KC), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->vc, A->vl, MN__PAR(cm, l, MN__CD_VC), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_l2norm_forward(ctx, A->q, A->rq, D->dqc, N * H, Dh));
    MN__TRY(mn_cuda_l2norm_forward(ctx, A->k, A->rk, D->dkc, N * H, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->bl, in, MN__PAR(cm, l, MN__CD_B), NULL, N, C, H));
    mn__k_delta_beta<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(A->beta, A->bl, N * H, var & MN__DELTA_NEG);
    MN__LAUNCHED();
    if (gated) {
        MN__TRY(mn_cuda_matmul_forward(ctx, A->al, in, MN__PAR(cm, l, MN__CD_A), MN__PAR(cm, l, MN__CD_DT), N, C, H));
        mn__k_delta_gate<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(A->g, A->al, MN__PAR(cm, l, MN__CD_ALOG),
                                                                            N * H, (int)H);
        MN__LAUNCHED();
    }
    MN__TRY(mn__delta_rule_forward(ctx, A->o, NULL, A->hs, A->q, A->k, A->vc, A->beta, gated ? A->g : NULL, NULL, B,
                                   T, H, Dh, Dh, MN__DELTA_GC, 1.0 / sqrt((double)Dh), cm->work, 1));
    if (gated) return mn__cm_gated_out_forward(cm, l, MN__CD_G, MN__CD_NORM, MN__CD_O, Y, A->gl, A->on, A->ro, A->o,
                                               res, N);
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->on, A->ro, A->o, MN__PAR(cm, l, MN__CD_NORM), N * H, Dh, c->norm_eps));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->on, MN__PAR(cm, l, MN__CD_O), N, HD, C);
}
// din (N,C) overwritten by its first writer (GDN: the g_proj path; DeltaNet: the b_proj backward);
// dq .. dg zeroed here (the op accumulates), every other buffer written by its first writer (acc 0)
static int mn__cm_delta_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                 float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_delta_acts* A = &Y->delta;
    const mn__cm_delta_dacts* D = &DD->delta;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    int var = mn__cm_variant(cm, l), gated = var & MN__DELTA_GATED;
    const float* in = Y->xn1;
    MN__CU(cudaMemsetAsync(D->dq, 0, (size_t)(D->dg + N * H - D->dq) * sizeof(float), MN__STREAM));
    if (gated)
        MN__TRY(mn__cm_gated_out_backward(cm, l, MN__CD_G, MN__CD_NORM, MN__CD_O, Y, din, D->don, D->dO, D->dgl, dout,
                                          A->gl, A->on, A->ro, A->o, N));
    else {
        MN__TRY(mn__matmul_backward(ctx, D->don, MN__GRD(cm, l, MN__CD_O), NULL, dout, A->on, MN__PAR(cm, l, MN__CD_O),
                                    N, HD, C, 0));
        MN__TRY(mn__rmsnorm_backward(ctx, D->dO, MN__GRD(cm, l, MN__CD_NORM), D->don, A->ro, A->o,
                                     MN__PAR(cm, l, MN__CD_NORM), N * H, Dh, 0));
    }
    MN__TRY(mn__delta_rule_backward(ctx, D->dq, D->dk, D->dv, D->dbeta, gated ? D->dg : NULL, NULL, D->dO, NULL, A->hs,
                                    A->q, A->k, A->vc, A->beta, gated ? A->g : NULL, B, T, H, Dh, Dh, MN__DELTA_GC,
                                    1.0 / sqrt((double)Dh), cm->work, 1));
    if (gated) {
        mn__k_delta_alog_bwd<<<(unsigned)H, 256, 0, MN__STREAM>>>(MN__GRD(cm, l, MN__CD_ALOG), D->dg, A->g, N, (int)H);
        MN__LAUNCHED();
        mn__k_delta_gate_bwd<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(D->dal, D->dg, A->al,
                                                                                MN__PAR(cm, l, MN__CD_ALOG), N * H,
                                                                                (int)H);
        MN__LAUNCHED();
        MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__CD_A), MN__GRD(cm, l, MN__CD_DT), D->dal, in,
                                    MN__PAR(cm, l, MN__CD_A), N, C, H, 1));
    }
    mn__k_delta_beta_bwd<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(D->dbl, D->dbeta, A->bl, N * H,
                                                                            var & MN__DELTA_NEG);
    MN__LAUNCHED();
    MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__CD_B), NULL, D->dbl, in, MN__PAR(cm, l, MN__CD_B), N, C,
                                H, gated ? 1 : 0));
    MN__TRY(mn__l2norm_backward(ctx, D->dqc, D->dq, A->q, A->rq, N * H, Dh, 0));
    MN__TRY(mn__l2norm_backward(ctx, D->dkc, D->dk, A->k, A->rk, N * H, Dh, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dql, MN__GRD(cm, l, MN__CD_QC), D->dqc, A->ql, MN__PAR(cm, l, MN__CD_QC), B,
                                   T, HD, 4, 1, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dkl, MN__GRD(cm, l, MN__CD_KC), D->dkc, A->kl, MN__PAR(cm, l, MN__CD_KC), B,
                                   T, HD, 4, 1, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dvl, MN__GRD(cm, l, MN__CD_VC), D->dv, A->vl, MN__PAR(cm, l, MN__CD_VC), B,
                                   T, HD, 4, 1, 0));
    return mn__cm_qkv_backward(cm, l, MN__CD_Q, in, din, D->dql, D->dkl, D->dvl, N, 1);
}

#define MN__CM_ROWS_DELTA                                                                                            \
    { "deltanet", 0, MN__CD_END - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check, mn__cm_delta_acts_layout,              \
      mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward, mn__cm_delta_backward },                    \
    { "deltanet_neg", MN__DELTA_NEG, MN__CD_END - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check,                       \
      mn__cm_delta_acts_layout, mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward,                    \
      mn__cm_delta_backward },                                                                                         \
    { "gdn", MN__DELTA_GATED, MN__CD_GEND - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check, mn__cm_delta_acts_layout,    \
      mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward, mn__cm_delta_backward },                    \
    { "gdn_neg", MN__DELTA_GATED | MN__DELTA_NEG, MN__CD_GEND - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check,         \
      mn__cm_delta_acts_layout, mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward,                    \
      mn__cm_delta_backward },
