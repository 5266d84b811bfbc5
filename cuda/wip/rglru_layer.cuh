// ---- "hawk": Griffin's recurrent block (mesanet.h's mn__rglru_layer_*, call for call) ----
//   y = gelu_tanh(x Wy + by) ;  x' = conv4(x Wx + bx) + bconv ;  h = RG-LRU(x') (width C, n_head gate blocks)
//   x2 = res + (h * y) Wout + bout
// The parameter slots, in mn__rglru_par_walk's order (the names are checked against the CPU table).
enum { MN__RGLRU_CP_Y = MN__CP_MIX, MN__RGLRU_CP_YB, MN__RGLRU_CP_X, MN__RGLRU_CP_XB, MN__RGLRU_CP_CONV,
       MN__RGLRU_CP_CONVB, MN__RGLRU_CP_A, MN__RGLRU_CP_GXW, MN__RGLRU_CP_GXB, MN__RGLRU_CP_GAW, MN__RGLRU_CP_GAB,
       MN__RGLRU_CP_O, MN__RGLRU_CP_OB, MN__RGLRU_CP_END };
static const char* const mn__rglru_cp[MN__RGLRU_CP_END - MN__CP_MIX] = {
    "attn.linear_y.weight", "attn.linear_y.bias", "attn.linear_x.weight", "attn.linear_x.bias",
    "attn.conv_1d.weight", "attn.conv_1d.bias", "attn.rg_lru.a_param", "attn.rg_lru.input_gate.w",
    "attn.rg_lru.input_gate.b", "attn.rg_lru.a_gate.w", "attn.rg_lru.a_gate.b", "attn.linear_out.weight",
    "attn.linear_out.bias" };
#define MN__CM_RGLRU_C 8.0   // mesanet.h's MN__RGLRU_C: log a = -c ga softplus(a_param)

// the tanh GeLU of the y branch, fused with the product: hy = h gelu(yl) (N C entries), as mn_gelu_forward
__device__ __forceinline__ void mn__rglru_gelu(float x, float* y, float* dy) {
    const float k = 0.7978845608028654f, k3 = 0.044715f;
    float th = tanhf(k * (x + k3 * x * x * x));
    *y = 0.5f * x * (1.f + th);
    if (dy) *dy = 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * k * (1.f + 3.f * k3 * x * x);
}
__global__ void mn__k_rglru_hy(float* hy, const float* h, const float* yl, size_t n) {
    MN__FOR(i, n) { float g; mn__rglru_gelu(yl[i], &g, NULL); hy[i] = h[i] * g; }
}
// forward: hy = h gelu(yl), so: dh = dhy gelu(yl) ; dyl = dhy h gelu'(yl)  (both written)
__global__ void mn__k_rglru_hy_bwd(float* dh, float* dyl, const float* dhy, const float* h, const float* yl,
                                   size_t n) {
    MN__FOR(i, n) {
        float g, dg;
        mn__rglru_gelu(yl[i], &g, &dg);
        dh[i] = dhy[i] * g;
        dyl[i] = dhy[i] * h[i] * dg;
    }
}
// x2 (N,C) = res (N,C) + bias (C): the residual and the output bias in one pass, before x2 += hy Wout^T
__global__ void mn__k_rglru_res_bias(float* x2, const float* res, const float* bias, size_t N, size_t C) {
    MN__FOR(i, N * C) x2[i] = res[i] + bias[i % C];
}

static size_t mn__cm_rglru_acts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_layer* y) {
    size_t C = c->d_model;
    mn__cm_rglru_acts* a = &y->rglru;
    MN__P(a->yl, N * C); MN__P(a->xl, N * C); MN__P(a->xc, N * C); MN__P(a->h, N * C); MN__P(a->gates, 2 * N * C);
    MN__P(a->hy, N * C);
    return off;
}
static size_t mn__cm_rglru_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t C = c->d_model;
    mn__cm_rglru_dacts* d = &dd->rglru;
    MN__P(d->dhy, N * C); MN__P(d->dh, N * C); MN__P(d->dyl, N * C); MN__P(d->dxc, N * C); MN__P(d->dxl, N * C);
    return off;
}
static int mn__cm_rglru_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->n_head < 1 || c->d_model % c->n_head != 0)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "hawk needs n_head to divide d_model", __LINE__);
    return MN_OK;
}
static size_t mn__cm_rglru_work(const mn_config* c, size_t B, size_t T) {
    return mn_cuda_rglru_work_size(B, T, c->d_model);
}
static int mn__cm_rglru_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_rglru_acts* A = &Y->rglru;
    size_t N = B * T, C = c->d_model;
    (void)DD;
    MN__TRY(mn_cuda_matmul_forward(ctx, A->yl, Y->xn1, MN__PAR(cm, l, MN__RGLRU_CP_Y), MN__PAR(cm, l, MN__RGLRU_CP_YB),
                                   N, C, C));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->xl, Y->xn1, MN__PAR(cm, l, MN__RGLRU_CP_X), MN__PAR(cm, l, MN__RGLRU_CP_XB),
                                   N, C, C));
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->xc, A->xl, MN__PAR(cm, l, MN__RGLRU_CP_CONV), B, T, C, 4, 0));
    mn__k_add_bias<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(A->xc, MN__PAR(cm, l, MN__RGLRU_CP_CONVB), N, C);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_rglru_forward(ctx, A->h, NULL, A->gates, A->xc, MN__PAR(cm, l, MN__RGLRU_CP_A),
                                  MN__PAR(cm, l, MN__RGLRU_CP_GXW), MN__PAR(cm, l, MN__RGLRU_CP_GXB),
                                  MN__PAR(cm, l, MN__RGLRU_CP_GAW), MN__PAR(cm, l, MN__RGLRU_CP_GAB), NULL, NULL, B, T,
                                  C, c->n_head, MN__CM_RGLRU_C));
    mn__k_rglru_hy<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(A->hy, A->h, A->yl, N * C);
    MN__LAUNCHED();
    mn__k_rglru_res_bias<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(Y->x2, res,
                                                                            MN__PAR(cm, l, MN__RGLRU_CP_OB), N, C);
    MN__LAUNCHED();
    return mn__cm_matmul_add(ctx, Y->x2, A->hy, MN__PAR(cm, l, MN__RGLRU_CP_O), N, C, C);
}
static int mn__cm_rglru_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                 float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_rglru_acts* A = &Y->rglru;
    const mn__cm_rglru_dacts* D = &DD->rglru;
    size_t N = B * T, C = c->d_model;
    MN__TRY(mn__matmul_backward(ctx, D->dhy, MN__GRD(cm, l, MN__RGLRU_CP_O), MN__GRD(cm, l, MN__RGLRU_CP_OB), dout,
                                A->hy, MN__PAR(cm, l, MN__RGLRU_CP_O), N, C, C, 0));
    mn__k_rglru_hy_bwd<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(D->dh, D->dyl, D->dhy, A->h, A->yl, N * C);
    MN__LAUNCHED();
    MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__RGLRU_CP_Y), MN__GRD(cm, l, MN__RGLRU_CP_YB), D->dyl,
                                Y->xn1, MN__PAR(cm, l, MN__RGLRU_CP_Y), N, C, C, 0));
    MN__TRY(mn__rglru_backward(ctx, D->dxc, MN__GRD(cm, l, MN__RGLRU_CP_A), MN__GRD(cm, l, MN__RGLRU_CP_GXW),
                               MN__GRD(cm, l, MN__RGLRU_CP_GXB), MN__GRD(cm, l, MN__RGLRU_CP_GAW),
                               MN__GRD(cm, l, MN__RGLRU_CP_GAB), NULL, D->dh, NULL, A->h, A->gates, A->xc,
                               MN__PAR(cm, l, MN__RGLRU_CP_A), MN__PAR(cm, l, MN__RGLRU_CP_GXW),
                               MN__PAR(cm, l, MN__RGLRU_CP_GAW), NULL, NULL, B, T, C, c->n_head, MN__CM_RGLRU_C,
                               cm->work, 0));
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__RGLRU_CP_CONVB), D->dxc, NULL, NULL, N, C));
    MN__TRY(mn__shortconv_backward(ctx, D->dxl, MN__GRD(cm, l, MN__RGLRU_CP_CONV), D->dxc, A->xl,
                                   MN__PAR(cm, l, MN__RGLRU_CP_CONV), B, T, C, 4, 0, 0));
    return mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__RGLRU_CP_X), MN__GRD(cm, l, MN__RGLRU_CP_XB), D->dxl,
                               Y->xn1, MN__PAR(cm, l, MN__RGLRU_CP_X), N, C, C, 1);
}
#define MN__CM_ROWS_RGLRU                                                                                              \
    { "hawk", 0, MN__RGLRU_CP_END - MN__CP_MIX, mn__rglru_cp, mn__cm_rglru_check, mn__cm_rglru_acts_layout,          \
      mn__cm_rglru_dacts_layout, mn__cm_rglru_work, mn__cm_rglru_forward, mn__cm_rglru_backward },
