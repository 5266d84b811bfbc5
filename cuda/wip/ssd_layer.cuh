// ---- the Mamba-2 layers "mamba2" and "mamba2_neg" (mesanet.h's mn__ssd_layer_forward / _backward) ----
//   [z | x | B | C | dt] = xn W_in^T ;  [x | B | C] = silu(conv4([x | B | C]) + b_conv)
//   Delta = softplus(dt + dt_bias), A = -exp(A_log) ;  SSD on X = x Delta, log-decay A Delta, B, C per head
//   y = SSD + D x ;  x2 = res + RMSNorm(y silu(z)) W_out^T
// "mamba2_neg" (variant 1): the transition a = 2 exp(A Delta) - 1 in (-1,1), a signed transition; "mamba2"
// the log-decay A Delta. Both through mn_cuda_ssd_forward / _backward: the chunk form on the GLA op for
// head_dim 64, 128 (the signed one as log|a| on sign-flipped B, C), else the recurrent kernels.
// Softplus, exp and the transition in double, as the CPU.
enum { MN__CSSD_IN = MN__CP_MIX, MN__CSSD_CONV, MN__CSSD_CONVB, MN__CSSD_DTB, MN__CSSD_ALOG, MN__CSSD_D,
       MN__CSSD_NORM, MN__CSSD_OUT, MN__CSSD_END };
static const char* const mn__cp_ssd[MN__CSSD_END - MN__CP_MIX] = {
    "attn.in_proj.weight", "attn.conv1d.weight", "attn.conv1d.bias", "attn.dt_bias", "attn.A_log", "attn.D",
    "attn.norm.weight", "attn.out_proj.weight" };
typedef struct mn__cm_ssd_dims { size_t DI, P, Hm, Ns, W_in, Wc; } mn__cm_ssd_dims;
static mn__cm_ssd_dims mn__cm_ssd_dims_of(const mn_config* c) {   // mesanet.h's mn__ssd_layer_dims
    mn__cm_ssd_dims d;
    d.DI = 2 * c->d_model; d.P = c->head_dim; d.Hm = d.P ? d.DI / d.P : 0; d.Ns = c->head_dim;
    d.W_in = 2 * d.DI + 2 * d.Ns + d.Hm; d.Wc = d.DI + 2 * d.Ns;
    return d;
}
static size_t mn__cm_ssd_acts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_layer* y) {
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    mn__cm_ssd_acts* a = &y->ssd;
    MN__P(a->zx, N * d.W_in); MN__P(a->xbci, N * d.Wc); MN__P(a->xbcp, N * d.Wc); MN__P(a->xbc, N * d.Wc);
    MN__P(a->dtp, N * d.Hm); MN__P(a->delta, N * d.Hm); MN__P(a->at, N * d.Hm); MN__P(a->xt, N * d.DI);
    MN__P(a->bh, N * d.Hm * d.Ns); MN__P(a->ch, N * d.Hm * d.Ns);
    MN__P(a->y, N * d.DI); MN__P(a->yz, N * d.DI); MN__P(a->yn, N * d.DI); MN__P(a->rs, N);
    return off;
}
static size_t mn__cm_ssd_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    mn__cm_ssd_dacts* g = &dd->ssd;
    MN__P(g->dzx, N * d.W_in); MN__P(g->dxbci, N * d.Wc); MN__P(g->dxbcp, N * d.Wc); MN__P(g->dxbc, N * d.Wc);
    MN__P(g->dyn, N * d.DI); MN__P(g->dyz, N * d.DI); MN__P(g->dy, N * d.DI); MN__P(g->dxt, N * d.DI);
    MN__P(g->dat, N * d.Hm); MN__P(g->dbh, N * d.Hm * d.Ns); MN__P(g->dch, N * d.Hm * d.Ns);
    MN__P(g->tD, N * d.DI); MN__P(g->tA, N * d.Hm); MN__P(g->tdt, N * d.Hm); MN__P(g->sD, d.DI);
    return off;
}
static int mn__cm_ssd_check(mn_cuda_ctx* ctx, const mn_config* c) {
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    if (d.P == 0 || d.P % 16 || d.P > 128 || d.DI % d.P)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model",
                        "the GPU Mamba-2 layer needs head_dim a multiple of 16 up to 128 dividing 2 d_model", __LINE__);
    return MN_OK;
}
static size_t mn__cm_ssd_work(const mn_config* c, size_t B, size_t T) {
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    return mn_cuda_ssd_work_size(B, T, d.Hm, d.P, d.Ns, MN__GC);
}

// xbcp (n = N*Wc) += b_conv; xbc = silu(xbcp)
__global__ void mn__k_ssd_convact(float* xbcp, float* xbc, const float* bias, size_t n, size_t Wc) {
    MN__FOR(i, n) {
        float a = xbcp[i] + bias[i % Wc];
        xbcp[i] = a;
        xbc[i] = (float)((double)a / (1.0 + exp(-(double)a)));
    }
}
// per (token n, head h): dtp = dt + dt_bias, Delta = softplus(dtp), at = A Delta or 2 e^{A Delta} - 1
__global__ void mn__k_ssd_dt(float* dtp, float* delta, float* at, const float* zx, const float* dt_bias,
                             const float* A_log, size_t N, size_t Hm, size_t dt_col, size_t W_in, int neg) {
    MN__FOR(r, N * Hm) {
        size_t n = r / Hm, h = r % Hm;
        float u = zx[n * W_in + dt_col + h] + dt_bias[h];
        double dl = (float)(u > 20 ? (double)u : log1p(exp((double)u)));
        double la = -exp((double)A_log[h]) * dl;                    // the log-decay A Delta
        dtp[r] = u; delta[r] = (float)dl;
        at[r] = (float)(neg ? 2.0 * exp(la) - 1.0 : la);
    }
}
// X (N,Hm,P) = x Delta (x: xbc's first DI columns); B, C (N,Wc columns DI.., DI+Ns..) copied to every head
__global__ void mn__k_ssd_heads(float* xt, float* bh, float* ch, const float* xbc, const float* delta, size_t N,
                                size_t Hm, size_t P, size_t Ns, size_t Wc) {
    const size_t DI = Hm * P;
    MN__FOR(i, N * DI) { size_t n = i / DI, j = i % DI; xt[i] = xbc[n * Wc + j] * delta[n * Hm + j / P]; }
    MN__FOR(i, N * Hm * Ns) {
        size_t n = i / (Hm * Ns), j = i % Ns;
        bh[i] = xbc[n * Wc + DI + j];
        ch[i] = xbc[n * Wc + DI + Ns + j];
    }
}
// y (N,DI) += D x ; yz = y z sigmoid(z) (z: zx's first DI columns)
__global__ void mn__k_ssd_skip(float* y, float* yz, const float* zx, const float* xbc, const float* Dp, size_t N,
                               size_t DI, size_t P, size_t W_in, size_t Wc) {
    MN__FOR(i, N * DI) {
        size_t n = i / DI, j = i % DI;
        float v = y[i] + Dp[j / P] * xbc[n * Wc + j];
        double z = zx[n * W_in + j];
        y[i] = v;
        yz[i] = (float)(v * z / (1.0 + exp(-z)));
    }
}
// forward: yz = y z s(z), y = ssd + D x, so (all written, not added): dy = dyz z s ; dz = dyz y s (1 + z (1 - s));
// dx (xbc's first DI columns) = D dy ; tD = dy x (dD's terms, summed over tokens and the head's columns)
__global__ void mn__k_ssd_skip_bwd(float* dy, float* dzx, float* dxbc, float* tD, const float* dyz, const float* y,
                                   const float* zx, const float* xbc, const float* Dp, size_t N, size_t DI, size_t P,
                                   size_t W_in, size_t Wc) {
    MN__FOR(i, N * DI) {
        size_t n = i / DI, j = i % DI;
        double z = zx[n * W_in + j], s = 1.0 / (1.0 + exp(-z)), g = dyz[i];
        float gy = (float)(g * z * s);
        dy[i] = gy;
        dzx[n * W_in + j] = (float)(g * y[i] * s * (1.0 + z * (1.0 - s)));
        dxbc[n * Wc + j] = Dp[j / P] * gy;
        tD[i] = gy * xbc[n * Wc + j];
    }
}
// dD[h] += sum of the head's P column sums sD (DI)
__global__ void mn__k_ssd_headsum(float* dD, const float* sD, size_t Hm, size_t P) {
    MN__FOR(h, Hm) {
        float s = 0.f;
        for (size_t p = 0; p < P; p++) s += sD[h * P + p];
        dD[h] += s;
    }
}
// per (token n, head h), one warp: forward at = A Delta (or 2 e^{A Delta} - 1), X = x Delta, A = -e^{A_log},
// Delta = softplus(dtp), so: dla = dat (or dat 2 e^{A Delta}), ddelta = -e^{A_log} dla + sum_p dX x,
// tA = -e^{A_log} Delta dla (A_log's term), ddelta *= sigmoid(dtp) -> dzx's dt column and tdt (written)
__global__ void mn__k_ssd_dt_bwd(float* dzx, float* tA, float* tdt, const float* dat, const float* dxt,
                                 const float* xbc, const float* delta, const float* dtp, const float* A_log, size_t N,
                                 size_t Hm, size_t P, size_t dt_col, size_t W_in, size_t Wc, int neg) {
    const size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    const int lane = threadIdx.x & 31;
    for (size_t r = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5); r < N * Hm; r += warps) {
        size_t n = r / Hm, h = r % Hm;
        float acc = 0.f;
        for (size_t p = lane; p < P; p += 32) acc += dxt[r * P + p] * xbc[n * Wc + h * P + p];
        acc = mn__warp_sum(acc);
        if (lane == 0) {
            double dl = delta[r], ea = exp((double)A_log[h]);
            double dla = neg ? dat[r] * 2.0 * exp(-ea * dl) : (double)dat[r];
            double dd = dla * -ea + acc;
            tA[r] = (float)(dla * -ea * dl);
            dd *= 1.0 / (1.0 + exp(-(double)dtp[r]));
            dzx[n * W_in + dt_col + h] = (float)dd;
            tdt[r] = (float)dd;
        }
    }
}
// dx (xbc's first DI columns) += dX Delta ; dB, dC (xbc's columns DI..DI+2Ns) = the heads' sums (written)
__global__ void mn__k_ssd_heads_bwd(float* dxbc, const float* dxt, const float* delta, const float* dbh,
                                    const float* dch, size_t N, size_t Hm, size_t P, size_t Ns, size_t Wc) {
    const size_t DI = Hm * P;
    MN__FOR(i, N * DI) { size_t n = i / DI, j = i % DI; dxbc[n * Wc + j] += dxt[i] * delta[n * Hm + j / P]; }
    MN__FOR(i, N * 2 * Ns) {
        size_t n = i / (2 * Ns), j = i % (2 * Ns);
        const float* src = j < Ns ? dbh + n * Hm * Ns + j : dch + n * Hm * Ns + (j - Ns);
        float s = 0.f;
        for (size_t h = 0; h < Hm; h++) s += src[h * Ns];
        dxbc[n * Wc + DI + j] = s;
    }
}
// forward xbc = silu(xbcp): dxbcp = dxbc s (1 + a (1 - s)) (written)
__global__ void mn__k_ssd_convact_bwd(float* dxbcp, const float* dxbc, const float* xbcp, size_t n) {
    MN__FOR(i, n) {
        double a = xbcp[i], s = 1.0 / (1.0 + exp(-a));
        dxbcp[i] = (float)(dxbc[i] * s * (1.0 + a * (1.0 - s)));
    }
}

static int mn__cm_ssd_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                              const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_ssd_acts* A = &Y->ssd;
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    size_t N = B * T, C = c->d_model, dt_col = 2 * d.DI + 2 * d.Ns;
    int neg = mn__cm_variant(cm, l) & 1;
    (void)DD;
    MN__TRY(mn_cuda_matmul_forward(ctx, A->zx, Y->xn1, MN__PAR(cm, l, MN__CSSD_IN), NULL, N, C, d.W_in));
    MN__CU(cudaMemcpy2DAsync(A->xbci, d.Wc * sizeof(float), A->zx + d.DI, d.W_in * sizeof(float),
                             d.Wc * sizeof(float), N, cudaMemcpyDeviceToDevice, MN__STREAM));
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->xbcp, A->xbci, MN__PAR(cm, l, MN__CSSD_CONV), B, T, d.Wc, 4, 0));
    mn__k_ssd_convact<<<mn__grid(ctx, N * d.Wc, 256), 256, 0, MN__STREAM>>>(A->xbcp, A->xbc,
                                                                          MN__PAR(cm, l, MN__CSSD_CONVB), N * d.Wc,
                                                                          d.Wc);
    MN__LAUNCHED();
    mn__k_ssd_dt<<<mn__grid(ctx, N * d.Hm, 256), 256, 0, MN__STREAM>>>(A->dtp, A->delta, A->at, A->zx,
                                                                     MN__PAR(cm, l, MN__CSSD_DTB),
                                                                     MN__PAR(cm, l, MN__CSSD_ALOG), N, d.Hm, dt_col,
                                                                     d.W_in, neg);
    MN__LAUNCHED();
    mn__k_ssd_heads<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(A->xt, A->bh, A->ch, A->xbc, A->delta, N,
                                                                        d.Hm, d.P, d.Ns, d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_ssd_forward(ctx, A->y, NULL, A->xt, A->at, A->bh, A->ch, NULL, B, T, d.Hm, d.P, d.Ns, MN__GC,
                                neg ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY, cm->work));
    mn__k_ssd_skip<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(A->y, A->yz, A->zx, A->xbc,
                                                                       MN__PAR(cm, l, MN__CSSD_D), N, d.DI, d.P,
                                                                       d.W_in, d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->yn, A->rs, A->yz, MN__PAR(cm, l, MN__CSSD_NORM), N, d.DI, c->norm_eps));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->yn, MN__PAR(cm, l, MN__CSSD_OUT), N, d.DI, C);
}
// every gradient buffer written by its first writer (acc 0 or a kernel that writes); the op's four
// outputs accumulate, so they are zeroed first; din by the in_proj backward
static int mn__cm_ssd_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD, float* din,
                               const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_ssd_acts* A = &Y->ssd;
    const mn__cm_ssd_dacts* D = &DD->ssd;
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    size_t N = B * T, C = c->d_model, dt_col = 2 * d.DI + 2 * d.Ns;
    int neg = mn__cm_variant(cm, l) & 1;
    MN__TRY(mn__matmul_backward(ctx, D->dyn, MN__GRD(cm, l, MN__CSSD_OUT), NULL, dout, A->yn,
                                MN__PAR(cm, l, MN__CSSD_OUT), N, d.DI, C, 0));
    MN__TRY(mn__rmsnorm_backward(ctx, D->dyz, MN__GRD(cm, l, MN__CSSD_NORM), D->dyn, A->rs, A->yz,
                                 MN__PAR(cm, l, MN__CSSD_NORM), N, d.DI, 0));
    mn__k_ssd_skip_bwd<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(D->dy, D->dzx, D->dxbc, D->tD, D->dyz,
                                                                           A->y, A->zx, A->xbc,
                                                                           MN__PAR(cm, l, MN__CSSD_D), N, d.DI, d.P,
                                                                           d.W_in, d.Wc);
    MN__LAUNCHED();
    MN__CU(cudaMemsetAsync(D->sD, 0, d.DI * sizeof(float), MN__STREAM));
    MN__TRY(mn__colsum(ctx, D->sD, D->tD, NULL, NULL, N, d.DI));
    mn__k_ssd_headsum<<<1, 32, 0, MN__STREAM>>>(MN__GRD(cm, l, MN__CSSD_D), D->sD, d.Hm, d.P);
    MN__LAUNCHED();
    MN__CU(cudaMemsetAsync(D->dxt, 0, N * d.DI * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(D->dat, 0, N * d.Hm * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(D->dbh, 0, N * d.Hm * d.Ns * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(D->dch, 0, N * d.Hm * d.Ns * sizeof(float), MN__STREAM));
    MN__TRY(mn_cuda_ssd_backward(ctx, D->dxt, D->dat, D->dbh, D->dch, NULL, D->dy, NULL, A->xt, A->at, A->bh, A->ch,
                                 NULL, B, T, d.Hm, d.P, d.Ns, MN__GC, neg ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY,
                                 cm->work));
    mn__k_ssd_dt_bwd<<<mn__grid(ctx, N * d.Hm * 32, 256), 256, 0, MN__STREAM>>>(D->dzx, D->tA, D->tdt, D->dat, D->dxt,
                                                                              A->xbc, A->delta, A->dtp,
                                                                              MN__PAR(cm, l, MN__CSSD_ALOG), N, d.Hm,
                                                                              d.P, dt_col, d.W_in, d.Wc, neg);
    MN__LAUNCHED();
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__CSSD_ALOG), D->tA, NULL, NULL, N, d.Hm));
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__CSSD_DTB), D->tdt, NULL, NULL, N, d.Hm));
    mn__k_ssd_heads_bwd<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(D->dxbc, D->dxt, A->delta, D->dbh,
                                                                            D->dch, N, d.Hm, d.P, d.Ns, d.Wc);
    MN__LAUNCHED();
    mn__k_ssd_convact_bwd<<<mn__grid(ctx, N * d.Wc, 256), 256, 0, MN__STREAM>>>(D->dxbcp, D->dxbc, A->xbcp, N * d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__CSSD_CONVB), D->dxbcp, NULL, NULL, N, d.Wc));
    MN__TRY(mn__shortconv_backward(ctx, D->dxbci, MN__GRD(cm, l, MN__CSSD_CONV), D->dxbcp, A->xbci,
                                   MN__PAR(cm, l, MN__CSSD_CONV), B, T, d.Wc, 4, 0, 0));
    MN__CU(cudaMemcpy2DAsync(D->dzx + d.DI, d.W_in * sizeof(float), D->dxbci, d.Wc * sizeof(float),
                             d.Wc * sizeof(float), N, cudaMemcpyDeviceToDevice, MN__STREAM));
    return mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__CSSD_IN), NULL, D->dzx, Y->xn1,
                               MN__PAR(cm, l, MN__CSSD_IN), N, C, d.W_in, 0);
}

#define MN__CM_ROWS_SSD                                                                                          \
    { "mamba2", 0, MN__CSSD_END - MN__CP_MIX, mn__cp_ssd, mn__cm_ssd_check, mn__cm_ssd_acts_layout,              \
      mn__cm_ssd_dacts_layout, mn__cm_ssd_work, mn__cm_ssd_forward, mn__cm_ssd_backward },                       \
    { "mamba2_neg", 1, MN__CSSD_END - MN__CP_MIX, mn__cp_ssd, mn__cm_ssd_check, mn__cm_ssd_acts_layout,          \
      mn__cm_ssd_dacts_layout, mn__cm_ssd_work, mn__cm_ssd_forward, mn__cm_ssd_backward },
