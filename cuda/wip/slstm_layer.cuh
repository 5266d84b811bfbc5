// ---- the sLSTM layer "slstm" (mesanet.h's mn__slstm_layer_forward / _backward), width C, NH = n_head
// heads of Dh = C/NH units (the layer's own split, not cfg.head_dim):
//   xc = silu(conv4(x) + b_conv) ; i, f pre-activations from xc and z, o from x, each through a
//   block-diagonal per-head linear W[h] (Dh,Dh) ; (y, c, n, m) = the sLSTM cell (R, b) ;
//   x2 = res + RMSNorm_head(y) (no output projection, as the CPU layer)
enum { MN__CSLSTM_CONV = MN__CP_MIX, MN__CSLSTM_CONVB, MN__CSLSTM_WI, MN__CSLSTM_WF, MN__CSLSTM_WZ, MN__CSLSTM_WO,
       MN__CSLSTM_R, MN__CSLSTM_B, MN__CSLSTM_NORM, MN__CSLSTM_END };
static const char* const mn__cp_slstm[MN__CSLSTM_END - MN__CP_MIX] = {
    "attn.conv1d.weight", "attn.conv1d.bias", "attn.igate.weight", "attn.fgate.weight", "attn.zgate.weight",
    "attn.ogate.weight", "attn.slstm_cell.recurrent_kernel", "attn.slstm_cell.bias", "attn.group_norm.weight" };

static size_t mn__cm_slstm_acts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_layer* y) {
    size_t C = c->d_model;
    mn__cm_slstm_acts* a = &y->slstm;
    MN__P(a->xcp, N * C); MN__P(a->xc, N * C); MN__P(a->x, 4 * N * C); MN__P(a->y, N * C); MN__P(a->c, N * C);
    MN__P(a->n, N * C); MN__P(a->m, N * C); MN__P(a->rs, N * c->n_head);
    return off;
}
static size_t mn__cm_slstm_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t C = c->d_model;
    mn__cm_slstm_dacts* d = &dd->slstm;
    MN__P(d->dy, N * C); MN__P(d->dx, 4 * N * C); MN__P(d->dxc, N * C); MN__P(d->dxcp, N * C);
    return off;
}
static int mn__cm_slstm_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->n_head == 0 || c->d_model % c->n_head != 0)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU sLSTM needs d_model a multiple of n_head",
                        __LINE__);
    return mn__slstm_check(ctx, "mn_cuda_model (sLSTM heads)", 1, c->n_head, c->d_model / c->n_head);
}
static size_t mn__cm_slstm_work(const mn_config* c, size_t B, size_t T) {
    return mn_cuda_slstm_work_size(B, T, c->n_head, c->d_model / c->n_head);
}

// xcp (N,C) += b_conv ; xc = silu(xcp)
__global__ void mn__k_cm_slstm_act(float* xcp, float* xc, const float* bias, size_t N, size_t C) {
    MN__FOR(e, N * C) { float a = xcp[e] + bias[e % C]; xcp[e] = a; xc[e] = a / (1.f + expf(-a)); }
}
// forward: xc = silu(xcp), so: dxcp = dxc s (1 + xcp (1 - s)), s = sigmoid(xcp) (overwritten)
__global__ void mn__k_cm_slstm_act_bwd(float* dxcp, const float* dxc, const float* xcp, size_t n) {
    MN__FOR(e, n) { float a = xcp[e], s = 1.f / (1.f + expf(-a)); dxcp[e] = dxc[e] * s * (1.f + a * (1.f - s)); }
}
// x2 = res + o (the residual add of the CPU model's mn_residual_forward)
__global__ void mn__k_cm_slstm_add(float* x2, const float* res, const float* o, size_t n) {
    MN__FOR(e, n) x2[e] = res[e] + o[e];
}
// Block-diagonal linear into a column block of a row-major output with row stride ldo:
// out[n, h Dh + j] = sum_i u[n, h Dh + i] W[h][j][i], u (N,C), W (NH,Dh,Dh): one product batched over heads
static int mn__cm_slstm_bd_forward(mn_cuda_ctx* ctx, float* out, size_t ldo, const float* u, const float* W,
                                   size_t N, size_t NH, size_t Dh) {
    return mn__gemm(ctx, 0, 1, N, Dh, Dh, 1.f, u, NH * Dh, Dh, W, Dh, Dh * Dh, 0.f, out, ldo, Dh, NH);
}
// its backward: du (N,C) = (acc 0) or += (acc 1) dout W per head ; dW[h] += dout[:, h]^T u[:, h]
static int mn__cm_slstm_bd_backward(mn_cuda_ctx* ctx, float* du, float* dW, const float* dout, size_t ldo,
                                    const float* u, const float* W, size_t N, size_t NH, size_t Dh, int acc) {
    MN__TRY(mn__gemm(ctx, 0, 0, N, Dh, Dh, 1.f, dout, ldo, Dh, W, Dh, Dh * Dh, acc ? 1.f : 0.f, du, NH * Dh, Dh, NH));
    return mn__gemm(ctx, 1, 0, Dh, Dh, N, 1.f, dout, ldo, Dh, u, NH * Dh, Dh, 1.f, dW, Dh, Dh * Dh, NH);
}

// The forward normed output goes to the (not yet used) gradient buffer dy before the residual add.
static int mn__cm_slstm_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_slstm_acts* A = &Y->slstm;
    const mn__cm_slstm_dacts* D = &DD->slstm;
    size_t N = B * T, C = c->d_model, NH = c->n_head, Dh = C / NH;
    const float* in = Y->xn1;
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->xcp, in, MN__PAR(cm, l, MN__CSLSTM_CONV), B, T, C, 4, 0));
    mn__k_cm_slstm_act<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(A->xcp, A->xc,
                                                                          MN__PAR(cm, l, MN__CSLSTM_CONVB), N, C);
    MN__LAUNCHED();
    MN__TRY(mn__cm_slstm_bd_forward(ctx, A->x + 0 * C, 4 * C, A->xc, MN__PAR(cm, l, MN__CSLSTM_WI), N, NH, Dh));
    MN__TRY(mn__cm_slstm_bd_forward(ctx, A->x + 1 * C, 4 * C, A->xc, MN__PAR(cm, l, MN__CSLSTM_WF), N, NH, Dh));
    MN__TRY(mn__cm_slstm_bd_forward(ctx, A->x + 2 * C, 4 * C, in, MN__PAR(cm, l, MN__CSLSTM_WZ), N, NH, Dh));
    MN__TRY(mn__cm_slstm_bd_forward(ctx, A->x + 3 * C, 4 * C, in, MN__PAR(cm, l, MN__CSLSTM_WO), N, NH, Dh));
    MN__TRY(mn_cuda_slstm_forward(ctx, A->y, A->c, A->n, A->m, A->x, MN__PAR(cm, l, MN__CSLSTM_R),
                                  MN__PAR(cm, l, MN__CSLSTM_B), NULL, NULL, NULL, NULL, B, T, NH, Dh));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, D->dy, A->rs, A->y, MN__PAR(cm, l, MN__CSLSTM_NORM), N * NH, Dh,
                                    c->norm_eps));
    mn__k_cm_slstm_add<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(Y->x2, res, D->dy, N * C);
    MN__LAUNCHED();
    return MN_OK;
}
// every gradient buffer written by its first writer (acc 0): dy by the norm's backward, dx by the
// cell's, dxc by the igate's, din by the zgate's (then += ogate, conv), dxcp by the silu's
static int mn__cm_slstm_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                 float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_slstm_acts* A = &Y->slstm;
    const mn__cm_slstm_dacts* D = &DD->slstm;
    size_t N = B * T, C = c->d_model, NH = c->n_head, Dh = C / NH;
    const float* in = Y->xn1;
    MN__TRY(mn__rmsnorm_backward(ctx, D->dy, MN__GRD(cm, l, MN__CSLSTM_NORM), dout, A->rs, A->y,
                                 MN__PAR(cm, l, MN__CSLSTM_NORM), N * NH, Dh, 0));
    MN__TRY(mn__slstm_backward(ctx, D->dx, MN__GRD(cm, l, MN__CSLSTM_R), MN__GRD(cm, l, MN__CSLSTM_B), NULL, NULL, NULL,
                               D->dy, A->y, A->c, A->n, A->m, A->x, MN__PAR(cm, l, MN__CSLSTM_R),
                               MN__PAR(cm, l, MN__CSLSTM_B), NULL, NULL, NULL, NULL, B, T, NH, Dh, cm->work, 0));
    MN__TRY(mn__cm_slstm_bd_backward(ctx, D->dxc, MN__GRD(cm, l, MN__CSLSTM_WI), D->dx + 0 * C, 4 * C, A->xc,
                                     MN__PAR(cm, l, MN__CSLSTM_WI), N, NH, Dh, 0));
    MN__TRY(mn__cm_slstm_bd_backward(ctx, D->dxc, MN__GRD(cm, l, MN__CSLSTM_WF), D->dx + 1 * C, 4 * C, A->xc,
                                     MN__PAR(cm, l, MN__CSLSTM_WF), N, NH, Dh, 1));
    MN__TRY(mn__cm_slstm_bd_backward(ctx, din, MN__GRD(cm, l, MN__CSLSTM_WZ), D->dx + 2 * C, 4 * C, in,
                                     MN__PAR(cm, l, MN__CSLSTM_WZ), N, NH, Dh, 0));
    MN__TRY(mn__cm_slstm_bd_backward(ctx, din, MN__GRD(cm, l, MN__CSLSTM_WO), D->dx + 3 * C, 4 * C, in,
                                     MN__PAR(cm, l, MN__CSLSTM_WO), N, NH, Dh, 1));
    mn__k_cm_slstm_act_bwd<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(D->dxcp, D->dxc, A->xcp, N * C);
    MN__LAUNCHED();
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__CSLSTM_CONVB), D->dxcp, NULL, NULL, N, C));
    return mn__shortconv_backward(ctx, din, MN__GRD(cm, l, MN__CSLSTM_CONV), D->dxcp, in,
                                  MN__PAR(cm, l, MN__CSLSTM_CONV), B, T, C, 4, 0, 1);
}

#define MN__CM_ROWS_SLSTM                                                                                        \
    { "slstm", 0, MN__CSLSTM_END - MN__CP_MIX, mn__cp_slstm, mn__cm_slstm_check, mn__cm_slstm_acts_layout,          \
      mn__cm_slstm_dacts_layout, mn__cm_slstm_work, mn__cm_slstm_forward, mn__cm_slstm_backward },
