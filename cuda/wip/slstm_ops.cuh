// >>cuda_slstm
// defines: mn_cuda_slstm_{work_size,forward,backward,step}
//
// xLSTM's sLSTM (mesanet.h's >>slstm), per unit, with gates ~i,~f,~z,~o = x_t + b + R y_{t-1} (R
// block-diagonal over heads):
//   m_t = max(~i, m_{t-1} + logsigmoid(~f))   (= ~i where n_{t-1} == 0)
//   i = min(e^{~i - m_t}, 1) ; f = min(e^{m_{t-1} + logsigmoid(~f) - m_t}, 1)
//   c_t = f c_{t-1} + i tanh(~z) ; n_t = f n_{t-1} + i ; y_t = sigmoid(~o) c_t / n_t
// The recurrence is sequential through y_{t-1}, so it runs fused over time: ONE launch, one thread
// block per (sequence, head) walking the T steps, with the head's R on chip for the whole walk.
// Thread r of the 4 Dh threads owns gate row r = g Dh + j of the head; R's row r is split between its
// registers (the first KR = min(Dh, 64) columns) and shared memory (the other Dh - KR, stored column
// by column so that the block's threads read consecutive words): at Dh = 128 that is 64 registers a
// thread (half the register file at 512 threads) and 128 KB of shared memory. Each step:
//   1. every thread: raw[r] = x_t[r] + b[r] + R[r,:] . y_{t-1} (y_{t-1} in shared memory, read as
//      float4 broadcasts; x_{t+1} is loaded while step t computes);       __syncthreads
//   2. the Dh unit threads: the pointwise cell from raw's four gates and their states (registers),
//      y, c, n, m written to global memory and y_t to shared memory;      __syncthreads
// The backward recomputes every step's pre-activations at once (they need only the saved y: one
// cuBLAS product per gate, batched over heads, into the workspace), then one launch walks the steps
// backwards: thread p = g Dh + i owns column i of gate block g of R (registers + shared memory as
// above), the unit threads compute the four gate gradients of their unit (written over the
// recomputed pre-activations and into dx), and every thread forms its share of R^T draw, the carry
// into y_{t-1} (the four gate blocks' partial sums added by the unit threads); each unit thread also sums
// its gate gradients over the steps (db's share of its sequence). dR = sum_t draw_t^T y_{t-1} is then one
// batched cuBLAS product per gate over the saved gradients, db a deterministic column sum of the
// sequences' shares: no atomics, the same bits every run.
// The decode step has its own kernel (one block per head and group of 8 sequences: R read once for the
// group, see mn__k_slstm_step).
// Precision: fp32 throughout (exp, tanh, logsigmoid in float; the carries in registers); the two
// backward products follow ctx->math (TF32 when asked).

#define MN__SLSTM_KR(DH) ((DH) < 64 ? (DH) : 64)   // columns of R a thread keeps in registers
// dynamic shared memory (bytes) of both kernels: R's shared part (Dh - KR, 4Dh), two (4Dh) vectors, one (Dh)
static size_t mn__slstm_smem(size_t Dh) {
    size_t ks = Dh - (Dh < 64 ? Dh : 64);
    return (ks * 4 * Dh + 2 * 4 * Dh + Dh) * sizeof(float);
}
static int mn__slstm_check(mn_cuda_ctx* ctx, const char* what, size_t B, size_t NH, size_t Dh) {
    if (Dh < 16 || Dh > 128 || Dh % 16 != 0)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "needs Dh a multiple of 16 in [16, 128]", __LINE__);
    if (B * NH > 0x7fffffff) return mn__fail(ctx, MN_ERR_CONFIG, what, "needs B*NH < 2^31", __LINE__);
    if (mn__slstm_smem(Dh) > ctx->smem_optin)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "the head's R does not fit in shared memory", __LINE__);
    return MN_OK;
}

// the recomputed pre-activations (B,T,4Hd), y_{t-1} (B,T,Hd), the sequences' bias gradients (B,4Hd)
size_t mn_cuda_slstm_work_size(size_t B, size_t T, size_t NH, size_t Dh) { return (5 * T + 4) * B * NH * Dh; }

__device__ __forceinline__ float mn__slstm_logsig(float x) { return fminf(x, 0.f) - log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ float mn__slstm_sig(float x) { return 1.f / (1.f + expf(-x)); }

// sum_k w[k] v[k] over the Dh entries of a row held as rr[0..KR) (registers) and Rs[k G4 + r], k < Dh - KR
// (shared memory), v (Dh) in shared memory, 16-byte aligned; four partial sums for the FMA pipeline
template <int DH>
__device__ __forceinline__ float mn__slstm_dot(const float* rr, const float* Rs, const float* v, int r) {
    constexpr int G4 = 4 * DH, KR = MN__SLSTM_KR(DH), KS = DH - KR;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll
    for (int k = 0; k < KR; k += 4) {
        float4 q = *(const float4*)(v + k);
        a0 = fmaf(rr[k], q.x, a0); a1 = fmaf(rr[k + 1], q.y, a1);
        a2 = fmaf(rr[k + 2], q.z, a2); a3 = fmaf(rr[k + 3], q.w, a3);
    }
#pragma unroll 4
    for (int k = 0; k < KS; k += 4) {
        float4 q = *(const float4*)(v + KR + k);
        a0 = fmaf(Rs[k * G4 + r], q.x, a0); a1 = fmaf(Rs[(k + 1) * G4 + r], q.y, a1);
        a2 = fmaf(Rs[(k + 2) * G4 + r], q.z, a2); a3 = fmaf(Rs[(k + 3) * G4 + r], q.w, a3);
    }
    return (a0 + a1) + (a2 + a3);
}

extern __shared__ float4 mn__slstm_sh4[];

// The forward walk: block = (sequence b, head h), 4 Dh threads. y, c, n, m (B,T,Hd) written; x (B,T,4Hd);
// R (NH,4Dh,Dh); bias (4Hd); y0, c0, n0, m0 (B,Hd) or NULL (zeros). Every initial state is read before
// the first write and a block touches only its own head's units, so with T = 1 the outputs may be the
// initial states.
template <int DH>
__global__ void __launch_bounds__(4 * DH) mn__k_slstm_fwd(float* y, float* c, float* n, float* m, const float* x,
                                                          const float* R, const float* bias, const float* y0,
                                                          const float* c0, const float* n0, const float* m0,
                                                          unsigned NH, size_t T) {
    constexpr int G4 = 4 * DH, KR = MN__SLSTM_KR(DH), KS = DH - KR;
    float* Rs = (float*)mn__slstm_sh4;           // (KS,G4) R's columns KR.. of every row, column-major
    float* ys = Rs + KS * G4;                    // (DH) y_{t-1} of the head
    float* raw = ys + DH;                        // (G4) the step's pre-activations, gate-major
    const int r = threadIdx.x, g = r / DH, j = r % DH;
    const size_t b = blockIdx.x / NH, h = blockIdx.x % NH, Hd = (size_t)NH * DH, G = 4 * Hd;
    const float* Rr = R + (h * G4 + r) * DH;     // row r of the head's R
    float rr[KR];
#pragma unroll
    for (int k = 0; k < KR; k++) rr[k] = Rr[k];
    for (int k = 0; k < KS; k++) Rs[k * G4 + r] = Rr[KR + k];
    const size_t col = (size_t)g * Hd + h * DH + j;   // this row's column of x and bias
    const float bb = bias[col];
    const size_t s0 = b * Hd + h * DH + r;        // unit r's index into (B,Hd) (r < DH)
    float cs = 0.f, ns = 0.f, ms = 0.f;           // unit r's c, n, m (r < DH)
    if (r < DH) {
        ys[r] = y0 ? y0[s0] : 0.f;
        if (c0) cs = c0[s0];
        if (n0) ns = n0[s0];
        if (m0) ms = m0[s0];
    }
    const float* xr = x + b * T * G + col;        // x[b, t, col] = xr[t G]
    float xn = xr[0];
    __syncthreads();
    for (size_t t = 0; t < T; t++) {
        const float xt = xn;
        if (t + 1 < T) xn = xr[(t + 1) * G];      // the next step's input, in flight during this one
        raw[r] = (xt + bb) + mn__slstm_dot<DH>(rr, Rs, ys, r);
        __syncthreads();
        if (r < DH) {
            const float ri = raw[r], rf = raw[DH + r], rz = raw[2 * DH + r], ro = raw[3 * DH + r];
            const float lf = mn__slstm_logsig(rf), mnew = ns == 0.f ? ri : fmaxf(ri, ms + lf);
            const float ig = fminf(expf(ri - mnew), 1.f), fg = fminf(expf(ms + lf - mnew), 1.f);
            cs = fg * cs + ig * tanhf(rz);
            ns = fg * ns + ig;
            ms = mnew;
            const float yv = mn__slstm_sig(ro) * cs / ns;
            const size_t o = (b * T + t) * Hd + h * DH + r;
            y[o] = yv; c[o] = cs; n[o] = ns; m[o] = ms;
            ys[r] = yv;
        }
        __syncthreads();
    }
}

// One unit's values at step t that the backward reads: the pre-activations (then their gradients'
// slots), the priors of dx, the states after and before the step, the upstream gradient.
typedef struct mn__slstm_bv { float r[4], dx[4], c, n, m, y, dy, cp, np, mp; } mn__slstm_bv;
__device__ __forceinline__ void mn__slstm_bload(mn__slstm_bv* v, const float* raw, const float* dx, const float* dy,
                                                const float* y, const float* c, const float* n, const float* m,
                                                const float* c0, const float* n0, const float* m0, size_t o, size_t q,
                                                size_t s0, size_t Hd, size_t t, int acc) {
#pragma unroll
    for (int g = 0; g < 4; g++) { v->r[g] = raw[q + g * Hd]; v->dx[g] = acc ? dx[q + g * Hd] : 0.f; }
    v->c = c[o]; v->n = n[o]; v->m = m[o]; v->y = y[o]; v->dy = dy[o];
    if (t) { v->cp = c[o - Hd]; v->np = n[o - Hd]; v->mp = m[o - Hd]; }
    else { v->cp = c0 ? c0[s0] : 0.f; v->np = n0 ? n0[s0] : 0.f; v->mp = m0 ? m0[s0] : 0.f; }
}

// The backward walk (mesanet.h's mn_slstm_backward, step for step): block = (b, h), 4 Dh threads.
// raw (B,T,4Hd): in, the recomputed pre-activations x + b + R y_{t-1}; out, their gradients draw.
// dx (B,T,4Hd) += draw (acc 1) or = draw (acc 0); dbp (B,4Hd) = sum over t of draw (written); dy0, dc0,
// dn0 (B,Hd) += the carries past t = 0, or NULL; dy, y, c, n, m (B,T,Hd); R (NH,4Dh,Dh); c0, n0, m0 (B,Hd)
// or NULL. Walking t backwards, with
// dyt = dy_t + (R^T draw_{t+1}) and the carries dc, dn:
//   y = sig(~o) c / n:  d~o = dyt c / n sig' ; dc += dyt sig / n ; dn -= dyt y / n
//   c = f c_{t-1} + i tanh(~z), n = f n_{t-1} + i:  d~z = dc i (1 - tanh^2) ; d~i = (dc tanh(~z) + dn) i ;
//   d~f = (dc c_{t-1} + dn n_{t-1}) f sigmoid(-~f) ; dc <- dc f ; dn <- dn f
// (m held fixed: y does not depend on it while the clamps do not bind, as on the CPU).
template <int DH>
__global__ void __launch_bounds__(4 * DH) mn__k_slstm_bwd(float* dx, float* dbp, float* dy0, float* dc0, float* dn0,
                                                          float* raw, const float* dy, const float* y, const float* c,
                                                          const float* n, const float* m, const float* R,
                                                          const float* c0, const float* n0, const float* m0,
                                                          unsigned NH, size_t T, int acc) {
    constexpr int G4 = 4 * DH, KR = MN__SLSTM_KR(DH), KS = DH - KR;
    float* Rs = (float*)mn__slstm_sh4;           // (KS,G4): Rs[k G4 + p] = R[h][g DH + KR + k][i]
    float* dr = Rs + KS * G4;                    // (G4) the step's draw, gate-major
    float* part = dr + G4;                       // (G4) each gate block's share of R^T draw
    const int p = threadIdx.x, g = p / DH, i = p % DH;
    const size_t b = blockIdx.x / NH, h = blockIdx.x % NH, Hd = (size_t)NH * DH, G = 4 * Hd;
    const float* Rc = R + (h * G4 + (size_t)g * DH) * DH + i;   // column i of gate block g: Rc[j DH]
    float rc[KR];
#pragma unroll
    for (int k = 0; k < KR; k++) rc[k] = Rc[(size_t)k * DH];
    for (int k = 0; k < KS; k++) Rs[k * G4 + p] = Rc[(size_t)(KR + k) * DH];
    const size_t s0 = b * Hd + h * DH + p;        // unit p's index into (B,Hd) (p < DH)
    float dcs = 0.f, dns = 0.f, dyr = 0.f;        // the carries dc, dn and R^T draw of the step after
    float dbs[4] = { 0.f, 0.f, 0.f, 0.f };        // unit p's gate gradients summed over the steps
    mn__slstm_bv cur, nxt;
    if (p < DH) {
        const size_t t = T - 1;
        mn__slstm_bload(&nxt, raw, dx, dy, y, c, n, m, c0, n0, m0, (b * T + t) * Hd + h * DH + p,
                        (b * T + t) * G + h * DH + p, s0, Hd, t, acc);
    }
    __syncthreads();
    for (size_t t = T; t-- > 0;) {
        if (p < DH) {
            const size_t o = (b * T + t) * Hd + h * DH + p, q = (b * T + t) * G + h * DH + p;
            cur = nxt;
            if (t) mn__slstm_bload(&nxt, raw, dx, dy, y, c, n, m, c0, n0, m0, o - Hd, q - G, s0, Hd, t - 1, acc);
            const float ip = fminf(expf(cur.r[0] - cur.m), 1.f);
            const float fp = fminf(expf(cur.mp + mn__slstm_logsig(cur.r[1]) - cur.m), 1.f);
            const float og = mn__slstm_sig(cur.r[3]), tz = tanhf(cur.r[2]), dyt = cur.dy + dyr;
            const float dc = dcs + dyt * og / cur.n, dn = dns - dyt * cur.y / cur.n;
            float d[4];
            d[3] = dyt * cur.c / cur.n * og * (1.f - og);
            d[2] = dc * ip * (1.f - tz * tz);
            d[0] = (dc * tz + dn) * ip;
            d[1] = (dc * cur.cp + dn * cur.np) * fp * (1.f / (1.f + expf(cur.r[1])));
            dcs = dc * fp;
            dns = dn * fp;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                raw[q + k * Hd] = d[k];
                dx[q + k * Hd] = cur.dx[k] + d[k];
                dr[k * DH + p] = d[k];
                dbs[k] += d[k];
            }
        }
        __syncthreads();
        // forward: raw_t += R y_{t-1}, so y_{t-1}'s gradient from this step is R^T draw_t:
        // part[g DH + i] = sum_j R[h][g DH + j][i] draw[g DH + j]
        part[p] = mn__slstm_dot<DH>(rc, Rs, dr + g * DH, p);
        __syncthreads();
        if (p < DH) dyr = (part[p] + part[DH + p]) + (part[2 * DH + p] + part[3 * DH + p]);
    }
    if (p < DH) {
#pragma unroll
        for (int k = 0; k < 4; k++) dbp[b * G + k * Hd + h * DH + p] = dbs[k];
        if (dy0) dy0[s0] += dyr;
        if (dc0) dc0[s0] += dcs;
        if (dn0) dn0[s0] += dns;
    }
}

// yp (B,T,Hd) = y shifted one step: yp[b,t] = y[b,t-1], yp[b,0] = y0[b] (zeros when NULL)
__global__ void mn__k_slstm_prev(float* yp, const float* y, const float* y0, size_t B, size_t T, size_t Hd) {
    MN__FOR(e, B * T * Hd) {
        size_t u = e % Hd, bt = e / Hd, t = bt % T, b = bt / T;
        yp[e] = t ? y[e - Hd] : y0 ? y0[b * Hd + u] : 0.f;
    }
}
// raw (N,G) = x + bias (G) broadcast over rows
__global__ void mn__k_slstm_xb(float* raw, const float* x, const float* bias, size_t N, size_t G) {
    MN__FOR(e, N * G) raw[e] = x[e] + bias[e % G];
}

template <int DH>
static int mn__slstm_fwd_launch(mn_cuda_ctx* ctx, float* y, float* c, float* n, float* m, const float* x,
                                const float* R, const float* b, const float* y0, const float* c0, const float* n0,
                                const float* m0, size_t B, size_t T, size_t NH) {
    const size_t smem = mn__slstm_smem(DH);
    if (smem > 48 * 1024)
        MN__CU(cudaFuncSetAttribute(mn__k_slstm_fwd<DH>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    mn__k_slstm_fwd<DH><<<(unsigned)(B * NH), 4 * DH, smem, MN__STREAM>>>(y, c, n, m, x, R, b, y0, c0, n0, m0,
                                                                          (unsigned)NH, T);
    MN__LAUNCHED();
    return MN_OK;
}
template <int DH>
static int mn__slstm_bwd_launch(mn_cuda_ctx* ctx, float* dx, float* dbp, float* dy0, float* dc0, float* dn0,
                                float* raw, const float* dy, const float* y, const float* c, const float* n,
                                const float* m, const float* R, const float* c0, const float* n0, const float* m0,
                                size_t B, size_t T, size_t NH, int acc) {
    const size_t smem = mn__slstm_smem(DH);
    if (smem > 48 * 1024)
        MN__CU(cudaFuncSetAttribute(mn__k_slstm_bwd<DH>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    mn__k_slstm_bwd<DH><<<(unsigned)(B * NH), 4 * DH, smem, MN__STREAM>>>(dx, dbp, dy0, dc0, dn0, raw, dy, y, c, n, m,
                                                                          R, c0, n0, m0, (unsigned)NH, T, acc);
    MN__LAUNCHED();
    return MN_OK;
}
// one instantiation per head size (multiples of 16 up to 128); the caller has checked Dh
#define MN__SLSTM_DISPATCH(F, ...)                                            \
    switch (Dh) {                                                             \
    case 16: return F<16>(__VA_ARGS__);  case 32: return F<32>(__VA_ARGS__);  \
    case 48: return F<48>(__VA_ARGS__);  case 64: return F<64>(__VA_ARGS__);  \
    case 80: return F<80>(__VA_ARGS__);  case 96: return F<96>(__VA_ARGS__);  \
    case 112: return F<112>(__VA_ARGS__); default: return F<128>(__VA_ARGS__); \
    }

static int mn__slstm_bwd_launch_any(mn_cuda_ctx* ctx, float* dx, float* dbp, float* dy0, float* dc0, float* dn0,
                                    float* raw, const float* dy, const float* y, const float* c, const float* n,
                                    const float* m, const float* R, const float* c0, const float* n0, const float* m0,
                                    size_t B, size_t T, size_t NH, size_t Dh, int acc) {
    MN__SLSTM_DISPATCH(mn__slstm_bwd_launch, ctx, dx, dbp, dy0, dc0, dn0, raw, dy, y, c, n, m, R, c0, n0, m0, B, T, NH,
                       acc);
}

int mn_cuda_slstm_forward(mn_cuda_ctx* ctx, float* y, float* c, float* n, float* m, const float* x, const float* R,
                          const float* b, const float* y0, const float* c0, const float* n0, const float* m0, size_t B,
                          size_t T, size_t NH, size_t Dh) {
    MN__TRY(mn__slstm_check(ctx, "mn_cuda_slstm_forward", B, NH, Dh));
    if (B * T * NH == 0) return MN_OK;
    MN__SLSTM_DISPATCH(mn__slstm_fwd_launch, ctx, y, c, n, m, x, R, b, y0, c0, n0, m0, B, T, NH);
}

// The backward with the model's flag: acc 0 writes dx (its first writer), 1 accumulates.
static int mn__slstm_backward(mn_cuda_ctx* ctx, float* dx, float* dR, float* db, float* dy0, float* dc0, float* dn0,
                              const float* dy, const float* y, const float* c, const float* n, const float* m,
                              const float* x, const float* R, const float* b, const float* y0, const float* c0,
                              const float* n0, const float* m0, size_t B, size_t T, size_t NH, size_t Dh, float* work,
                              int acc) {
    MN__TRY(mn__slstm_check(ctx, "mn_cuda_slstm_backward", B, NH, Dh));
    if (B * T * NH == 0) return MN_OK;
    const size_t Hd = NH * Dh, G = 4 * Hd, N = B * T, DD = Dh * Dh;
    float* raw = work;                           // (N,G) pre-activations, then their gradients
    float* yp = work + N * G;                    // (N,Hd) y_{t-1}
    float* dbp = yp + N * Hd;                    // (B,G) each sequence's share of db
    mn__k_slstm_prev<<<mn__grid(ctx, N * Hd, 256), 256, 0, MN__STREAM>>>(yp, y, y0, B, T, Hd); MN__LAUNCHED();
    mn__k_slstm_xb<<<mn__grid(ctx, N * G, 256), 256, 0, MN__STREAM>>>(raw, x, b, N, G); MN__LAUNCHED();
    // raw[:, g Hd + h Dh + j] += sum_i yp[:, h Dh + i] R[h][g Dh + j][i]: per gate, batched over heads
    for (size_t g = 0; g < 4; g++)
        MN__TRY(mn__gemm(ctx, 0, 1, N, Dh, Dh, 1.f, yp, Hd, Dh, R + g * DD, Dh, 4 * DD, 1.f, raw + g * Hd, G, Dh, NH));
    MN__TRY(mn__slstm_bwd_launch_any(ctx, dx, dbp, dy0, dc0, dn0, raw, dy, y, c, n, m, R, c0, n0, m0, B, T, NH, Dh,
                                     acc));
    // forward: raw = x + b + R y_{t-1}, so: db += sum over rows of draw (the sequences' shares summed) ;
    // dR[h][g Dh + j][i] += sum over rows of draw[:, g Hd + h Dh + j] yp[:, h Dh + i]
    MN__TRY(mn__colsum(ctx, db, dbp, NULL, NULL, B, G));
    for (size_t g = 0; g < 4; g++)
        MN__TRY(mn__gemm(ctx, 1, 0, Dh, Dh, N, 1.f, raw + g * Hd, G, Dh, yp, Hd, Dh, 1.f, dR + g * DD, Dh, 4 * DD, NH));
    return MN_OK;
}
int mn_cuda_slstm_backward(mn_cuda_ctx* ctx, float* dx, float* dR, float* db, float* dy0, float* dc0, float* dn0,
                           const float* dy, const float* y, const float* c, const float* n, const float* m,
                           const float* x, const float* R, const float* b, const float* y0, const float* c0,
                           const float* n0, const float* m0, size_t B, size_t T, size_t NH, size_t Dh, float* work) {
    return mn__slstm_backward(ctx, dx, dR, db, dy0, dc0, dn0, dy, y, c, n, m, x, R, b, y0, c0, n0, m0, B, T, NH, Dh,
                              work, 1);
}
// The decode step (B sequences, one token): block = (head h, group of MN__SLSTM_SG sequences), 4 Dh
// threads, thread r owning gate row r = g Dh + j as in the walk. R's row is streamed from global memory
// (L2-resident: 4 Dh^2 floats a head) once per block and used for the group's sequences from registers, so
// a batch of 64 reads R 8 times instead of 64; y_{t-1} of the group (MN__SLSTM_SG, Dh) and the
// pre-activations (MN__SLSTM_SG, 4Dh) in shared memory. The states y, c, n, m (B,Hd) are updated in place:
// a block reads (into shared memory, before its first write) only its own head's units of its own
// sequences, so no other block sees a value it writes. x (B,4Hd); R (NH,4Dh,Dh), bias (4Hd).
#define MN__SLSTM_SG 8
template <int DH, bool V4>
__global__ void __launch_bounds__(4 * DH) mn__k_slstm_step(float* y, float* c, float* n, float* m, const float* x,
                                                           const float* R, const float* bias, unsigned NH, size_t B) {
    constexpr int G4 = 4 * DH, S = MN__SLSTM_SG;
    __shared__ __align__(16) float ys[S][DH];   // y_{t-1} of the group's sequences (zeros past B)
    __shared__ float raw[S][G4];               // their pre-activations
    const int r = threadIdx.x;
    const size_t h = blockIdx.x, b0 = (size_t)blockIdx.y * S, Hd = (size_t)NH * DH, G = 4 * Hd;
    for (int e = r; e < S * DH; e += G4) {
        size_t bs = b0 + e / DH;
        ys[e / DH][e % DH] = bs < B ? y[bs * Hd + h * DH + e % DH] : 0.f;
    }
    __syncthreads();
    const float* Rr = R + (h * G4 + r) * DH;   // row r of the head's R
    float acc[S];
#pragma unroll
    for (int s = 0; s < S; s++) acc[s] = 0.f;
#pragma unroll 4
    for (int k = 0; k < DH; k += 4) {
        float w0, w1, w2, w3;
        if constexpr (V4) { float4 q = *(const float4*)(Rr + k); w0 = q.x; w1 = q.y; w2 = q.z; w3 = q.w; }
        else { w0 = Rr[k]; w1 = Rr[k + 1]; w2 = Rr[k + 2]; w3 = Rr[k + 3]; }
#pragma unroll
        for (int s = 0; s < S; s++) {
            float4 v = *(const float4*)(&ys[s][k]);
            acc[s] = fmaf(w3, v.w, fmaf(w2, v.z, fmaf(w1, v.y, fmaf(w0, v.x, acc[s]))));
        }
    }
    const int g = r / DH, j = r % DH;
    const size_t col = (size_t)g * Hd + h * DH + j;
    const float bb = bias[col];
#pragma unroll
    for (int s = 0; s < S; s++) raw[s][r] = b0 + s < B ? (x[(b0 + s) * G + col] + bb) + acc[s] : 0.f;
    __syncthreads();
    for (int e = r; e < S * DH; e += G4) {     // the cells: unit j of sequence b0 + s
        const int s = e / DH, u = e % DH;
        const size_t bs = b0 + s;
        if (bs >= B) continue;
        const size_t o = bs * Hd + h * DH + u;
        const float ri = raw[s][u], rf = raw[s][DH + u], rz = raw[s][2 * DH + u], ro = raw[s][3 * DH + u];
        const float cp = c[o], np = n[o], mp = m[o];
        const float lf = mn__slstm_logsig(rf), mnew = np == 0.f ? ri : fmaxf(ri, mp + lf);
        const float ig = fminf(expf(ri - mnew), 1.f), fg = fminf(expf(mp + lf - mnew), 1.f);
        const float cn = fg * cp + ig * tanhf(rz), nn = fg * np + ig;
        y[o] = mn__slstm_sig(ro) * cn / nn; c[o] = cn; n[o] = nn; m[o] = mnew;
    }
}
template <int DH>
static int mn__slstm_step_launch(mn_cuda_ctx* ctx, float* y, float* c, float* n, float* m, const float* x,
                                 const float* R, const float* b, size_t B, size_t NH) {
    const dim3 grid((unsigned)NH, (unsigned)((B + MN__SLSTM_SG - 1) / MN__SLSTM_SG));
    if ((uintptr_t)R % 16 == 0)
        mn__k_slstm_step<DH, true><<<grid, 4 * DH, 0, MN__STREAM>>>(y, c, n, m, x, R, b, (unsigned)NH, B);
    else mn__k_slstm_step<DH, false><<<grid, 4 * DH, 0, MN__STREAM>>>(y, c, n, m, x, R, b, (unsigned)NH, B);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_slstm_step(mn_cuda_ctx* ctx, float* y, float* c, float* n, float* m, const float* x, const float* R,
                       const float* b, size_t B, size_t NH, size_t Dh) {
    MN__TRY(mn__slstm_check(ctx, "mn_cuda_slstm_step", B, NH, Dh));
    if (B * NH == 0) return MN_OK;
    if (NH > 0x7fffffff || (B + MN__SLSTM_SG - 1) / MN__SLSTM_SG > 65535)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_slstm_step", "needs NH < 2^31, B <= 524280", __LINE__);
    MN__SLSTM_DISPATCH(mn__slstm_step_launch, ctx, y, c, n, m, x, R, b, B, NH);
}
