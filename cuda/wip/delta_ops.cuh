// >>delta_rule
// defines: mn_cuda_delta_rule_{forward,backward,step,work_size}, mn_cuda_delta_rule_{forward,backward,step}_recurrent
//
// The gated delta rule (mesanet.h's >>delta_rule) on the GPU, recurrent form. Per head the state S
// (Dk,Dv) goes token by token through
//   S' = a S (a = e^g, 1 for DeltaNet) ; p = S'^T k ; u = beta (v - p) ; S = S' + k u^T ; o = scale S^T q.
// Every column j of S evolves on its own given k, beta, g (p_j and u_j involve column j alone), so
// the kernels split the value columns: one warp per (sequence, head, 8 columns), each lane one column
// and a quarter of the rows (lane = 4 c + r4: column 8 y + c, rows i = 4 r + r4, r < Dk/4), the
// state in registers. The sums over rows (p, o, du) are two shuffles inside a lane quad; nothing
// waits on another warp, so there is no __syncthreads and no shared memory.
//   forward  one pass over T; the state at the start of every chunk of `chunk` tokens goes to hs.
//   backward per chunk, last to first: the chunk's states S_{t-1} recomputed from its checkpoint
//            (hs) into the workspace (each lane its own values: coalesced, no synchronisation), then
//            the reverse recurrence of mesanet.h's mn_delta_rule_backward_naive with dS in registers:
//              dq += scale S_t do ; dS += scale q do^T ; du = dS^T k ; dk += dS u ; dv += beta du ;
//              dbeta += du.(v - p) ; dp = -beta du ; dS' = dS + k dp^T ; dk += S' dp ;
//              dg += <dS', S'> ; dS <- a dS'.
//            dv is one column's: the lane adds it directly. dq, dk, dbeta and dg are sums over all Dv
//            columns: each warp reduces its 8 (shuffles), the up to 4 warps of a block add theirs in
//            shared memory (8 tokens at a time), each block writes one partial per token, and a
//            second kernel adds the blocks' partials in a fixed order (deterministic, no atomics).
//   step     one token, the forward's arithmetic, the state read and written once.
// Precision: fp32 throughout (the CPU accumulates in double); expf for the decay. The tests' bounds
// (test_delta_all) say what to expect. Shapes: Dk a multiple of 16 up to 128 (the rows per lane a template
// parameter: 4..32 registers of state, as many of dS), Dv a multiple of 8, chunk 1..64.
// This recurrent form is the reference (mn_cuda_delta_rule_{forward,backward}_recurrent) and the default
// only where the chunkwise form below does not apply (chunk < 16, Dv not a multiple of 16, no workspace).

#define MN__DELTA_COLS 8        // value columns per warp
#define MN__DELTA_MAXC 64       // the longest checkpoint interval (the backward's workspace grows with it)
#define MN__DELTA_TG 8          // tokens whose partials the backward's warps add in shared memory at once

// sum_r x[r] y[r] over the lane's R rows (R a multiple of 4) in four running sums: a dependency
// chain of R/4 FMAs instead of R (the order is fixed, so still deterministic)
template <int R>
__device__ __forceinline__ float mn__delta_dot(const float* x, const float* y) {
    float s[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll
    for (int r = 0; r < R; r++) s[r & 3] = fmaf(x[r], y[r], s[r & 3]);
    return (s[0] + s[1]) + (s[2] + s[3]);
}
// one token of one lane's column slice: S (R rows of column j) <- a S + k u^T; returns u_j. kk: the
// lane's rows of k. Shared by the forward, the backward's recomputation and the step.
template <int R>
__device__ __forceinline__ float mn__delta_col_token(float* S, const float* kk, float a, float bt, float vj) {
#pragma unroll
    for (int r = 0; r < R; r++) S[r] *= a;
    float p = mn__delta_dot<R>(S, kk);
    p += __shfl_xor_sync(0xffffffffu, p, 1);          // p_j = sum over the quad's four row sets
    p += __shfl_xor_sync(0xffffffffu, p, 2);
    const float u = bt * (vj - p);
#pragma unroll
    for (int r = 0; r < R; r++) S[r] = fmaf(kk[r], u, S[r]);
    return u;
}
// the lane's rows of a (Dk) vector: x[4 r + r4]
template <int R>
__device__ __forceinline__ void mn__delta_rows(float* dst, const float* x, int r4) {
#pragma unroll
    for (int r = 0; r < R; r++) dst[r] = __ldg(x + 4 * r + r4);
}
__device__ __forceinline__ float mn__delta_quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Forward. grid (B*H, Dv/8), 32 threads. out (B,T,H,Dv); ht (B,H,Dk,Dv) or NULL; hs (B,H,NC,Dk,Dv)
// or NULL; q,k (B,T,H,Dk); v (B,T,H,Dv); beta, g (B,T,H) (g NULL: a = 1); h0 (B,H,Dk,Dv) or NULL.
template <int R>
__global__ void __launch_bounds__(32) mn__k_delta_fwd(float* out, float* ht, float* hs, const float* q, const float* k,
                                                      const float* v, const float* beta, const float* g,
                                                      const float* h0, int T, int H, int Dv, int C, int z0,
                                                      float scale) {
    const int Dk = 4 * R, bh = blockIdx.x, b = bh / H, h = bh % H, lane = threadIdx.x, r4 = lane & 3;
    const int j = blockIdx.y * MN__DELTA_COLS + (lane >> 2), NC = (T + C - 1) / C - z0;
    const size_t ns = (size_t)Dk * Dv, sb = (size_t)bh * ns;
    float S[R], kk[R], qq[R], kn[R], qn[R];
#pragma unroll
    for (int r = 0; r < R; r++) S[r] = h0 ? h0[sb + (size_t)(4 * r + r4) * Dv + j] : 0.f;
    // token t's inputs are loaded during token t-1 (their latency hidden behind its arithmetic)
    size_t row = (size_t)b * T * H + h;                      // (b,0,h) in (B,T,H)
    mn__delta_rows<R>(kk, k + row * Dk, r4);
    mn__delta_rows<R>(qq, q + row * Dk, r4);
    float gt = g ? g[row] : 0.f, bt = beta[row], vj = v[row * Dv + j];
    for (int t = 0; t < T; t++) {
        const size_t rn = row + H;                           // (b,t+1,h)
        float gn = 0.f, bn = 0.f, vn = 0.f;
        if (t + 1 < T) {
            mn__delta_rows<R>(kn, k + rn * Dk, r4);
            mn__delta_rows<R>(qn, q + rn * Dk, r4);
            gn = g ? g[rn] : 0.f; bn = beta[rn]; vn = v[rn * Dv + j];
        }
        if (hs && t % C == 0 && (t > 0 || !z0)) {            // the chunk-start state S_{t-1}
            float* dst = hs + ((size_t)bh * NC + t / C - z0) * ns + j;
#pragma unroll
            for (int r = 0; r < R; r++) dst[(size_t)(4 * r + r4) * Dv] = S[r];
        }
        mn__delta_col_token<R>(S, kk, g ? expf(gt) : 1.f, bt, vj);
        const float o = mn__delta_quad_sum(mn__delta_dot<R>(S, qq));
        if (r4 == 0) out[row * Dv + j] = scale * o;
        if (t + 1 < T) {
#pragma unroll
            for (int r = 0; r < R; r++) { kk[r] = kn[r]; qq[r] = qn[r]; }
            gt = gn; bt = bn; vj = vn; row = rn;
        }
    }
    if (ht) {
#pragma unroll
        for (int r = 0; r < R; r++) ht[sb + (size_t)(4 * r + r4) * Dv + j] = S[r];
    }
}

// Backward. grid (B*H, Dv/(8 NW)), NW warps of 32 threads (NW = 1, 2 or 4: warp w takes the 8 columns
// of slice NW y + w), dynamic shared memory MN__DELTA_TG NW (2 Dk + 2) floats. dv (B,T,H,Dv), dh0
// (B,H,Dk,Dv) or NULL accumulated; part (Dv/(8 NW), B*T*H, 2 Dk + 2) written: per block and token the
// partial dq (Dk), dk (Dk), dbeta, dg (0 when g is NULL) of its 8 NW columns; stash (B*H*Dv/8, C, R, 32):
// the chunk's states per warp, lane-interleaved; dout (B,T,H,Dv); dht (B,H,Dk,Dv) or NULL; hs
// (B,H,NC,Dk,Dv); the inputs as the forward's. The warps' partials of MN__DELTA_TG tokens at a time
// meet in shared memory and are added there (warp order: deterministic), one barrier pair per group.
template <int R>
__global__ void __launch_bounds__(128) mn__k_delta_bwd(float* part, float* dv, float* dh0, float* stash,
                                                      const float* dout, const float* dht, const float* hs,
                                                      const float* q, const float* k, const float* v,
                                                      const float* beta, const float* g, int T, int H, int Dv, int C,
                                                      int z0, float scale) {
    extern __shared__ float mn__delta_red[];                 // (MN__DELTA_TG, NW, W) the warps' partials
    const int Dk = 4 * R, W = 2 * Dk + 2, bh = blockIdx.x, b = bh / H, h = bh % H, lane = threadIdx.x & 31;
    const int NW = blockDim.x / 32, w = threadIdx.x / 32, sl = blockIdx.y * NW + w;
    const int r4 = lane & 3, j = sl * MN__DELTA_COLS + (lane >> 2), NC = (T + C - 1) / C;
    const size_t ns = (size_t)Dk * Dv, sb = (size_t)bh * ns, NH = (size_t)gridDim.x / H * T * H;
    float* st = stash + ((size_t)bh * gridDim.y * NW + sl) * (size_t)C * R * 32 + lane;
    float* pslice = part + (size_t)blockIdx.y * NH * W;
    float S[R], dS[R], kk[R], qq[R], dqp[R], dkp[R];
#pragma unroll
    for (int r = 0; r < R; r++) dS[r] = dht ? dht[sb + (size_t)(4 * r + r4) * Dv + j] : 0.f;
    for (int ci = NC - 1; ci >= 0; ci--) {
        const int t0 = ci * C, c = T - t0 < C ? T - t0 : C;
        if (z0 && ci == 0) {                                 // the layers' first chunk starts from zeros
#pragma unroll
            for (int r = 0; r < R; r++) S[r] = 0.f;
        } else {
            const float* src = hs + ((size_t)bh * (NC - z0) + ci - z0) * ns + j;
#pragma unroll
            for (int r = 0; r < R; r++) S[r] = src[(size_t)(4 * r + r4) * Dv];
        }
        for (int tt = 0; tt < c; tt++) {                     // recompute: stash S_{t-1}, step
            const size_t row = ((size_t)b * T + t0 + tt) * H + h;
#pragma unroll
            for (int r = 0; r < R; r++) st[(size_t)(tt * R + r) * 32] = S[r];
            mn__delta_rows<R>(kk, k + row * Dk, r4);
            mn__delta_col_token<R>(S, kk, g ? expf(g[row]) : 1.f, beta[row], v[row * Dv + j]);
        }
        for (int tt = c - 1; tt >= 0; tt--) {                // the reverse recurrence
            const size_t row = ((size_t)b * T + t0 + tt) * H + h;
#pragma unroll
            for (int r = 0; r < R; r++) S[r] = st[(size_t)(tt * R + r) * 32];   // S_{t-1}
            mn__delta_rows<R>(kk, k + row * Dk, r4);
            mn__delta_rows<R>(qq, q + row * Dk, r4);
            const float a = g ? expf(g[row]) : 1.f, bt = beta[row], doj = dout[row * Dv + j];
            float p[4] = { 0.f, 0.f, 0.f, 0.f };
#pragma unroll
            for (int r = 0; r < R; r++) p[r & 3] = fmaf(a * S[r], kk[r], p[r & 3]);
            const float pj = mn__delta_quad_sum((p[0] + p[1]) + (p[2] + p[3]));
            const float rj = v[row * Dv + j] - pj, u = bt * rj;
            // the read o = scale S_t^T q (S_t = a S_{t-1} + k u^T): dq += scale S_t do ; dS += scale q do^T
#pragma unroll
            for (int r = 0; r < R; r++) {
                dqp[r] = scale * fmaf(kk[r], u, a * S[r]) * doj;
                dS[r] = fmaf(scale * qq[r], doj, dS[r]);
            }
            // the write S_t = S' + k u^T: du = dS^T k ; dk += dS u
#pragma unroll
            for (int r = 0; r < R; r++) dkp[r] = dS[r] * u;
            const float du = mn__delta_quad_sum(mn__delta_dot<R>(dS, kk));
            if (r4 == 0) dv[row * Dv + j] += bt * du;
            // the delta u = beta (v - p): dbeta += du (v - p) ; dp = -beta du ; then the read p = S'^T k
            // and the decay S' = a S_{t-1}: dS' = dS + k dp^T ; dk += S' dp ; dg += <dS', S'> ; dS = a dS'
            float dbp = du * rj, dgp = 0.f;
            const float dp = -bt * du;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float sp = a * S[r], dsp = fmaf(kk[r], dp, dS[r]);
                dkp[r] = fmaf(sp, dp, dkp[r]);
                dgp = fmaf(dsp, sp, dgp);
                dS[r] = a * dsp;
            }
            dgp = mn__delta_quad_sum(dgp);                   // dbeta's term is already whole per column
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) {               // the sums over the warp's 8 columns
#pragma unroll
                for (int r = 0; r < R; r++) {
                    dqp[r] += __shfl_xor_sync(0xffffffffu, dqp[r], o);
                    dkp[r] += __shfl_xor_sync(0xffffffffu, dkp[r], o);
                }
                dbp += __shfl_xor_sync(0xffffffffu, dbp, o);
                dgp += __shfl_xor_sync(0xffffffffu, dgp, o);
            }
            const int m = c - 1 - tt, slot = m % MN__DELTA_TG;   // the m-th token of the chunk's reverse pass
            if (lane < 4) {                                  // column 0's quad holds the warp's sums
                float* P = mn__delta_red + ((size_t)slot * NW + w) * W;
#pragma unroll
                for (int r = 0; r < R; r++) { P[4 * r + r4] = dqp[r]; P[Dk + 4 * r + r4] = dkp[r]; }
                if (lane == 0) { P[2 * Dk] = dbp; P[2 * Dk + 1] = dgp; }
            }
            if (slot == MN__DELTA_TG - 1 || tt == 0) {       // flush tokens m - slot .. m: sum over the warps
                __syncthreads();
                for (int e = threadIdx.x; e < (slot + 1) * W; e += blockDim.x) {
                    const int s = e / W, col = e % W;        // slot s is the token tt' = c - 1 - (m - slot + s)
                    const size_t rs = ((size_t)b * T + t0 + (c - 1 - (m - slot + s))) * H + h;
                    float acc = 0.f;
                    for (int x = 0; x < NW; x++) acc += mn__delta_red[((size_t)s * NW + x) * W + col];
                    pslice[rs * W + col] = acc;
                }
                __syncthreads();
            }
        }
    }
    if (dh0) {
#pragma unroll
        for (int r = 0; r < R; r++) dh0[sb + (size_t)(4 * r + r4) * Dv + j] += dS[r];
    }
}
// The partials' sum in slice order: dq, dk (NH,Dk), dbeta, dg (NH) accumulated (dg may be NULL);
// part (NS, NH, 2 Dk + 2)
__global__ void mn__k_delta_bwd_sum(float* dq, float* dk, float* dbeta, float* dg, const float* part, size_t NH,
                                    int Dk, int NS) {
    const size_t W = 2 * (size_t)Dk + 2;
    MN__FOR(e, NH * W) {
        const size_t row = e / W, c = e % W;
        float s = 0.f;
        for (int sl = 0; sl < NS; sl++) s += part[(size_t)sl * NH * W + e];
        if (c < (size_t)Dk) dq[row * Dk + c] += s;
        else if (c < 2 * (size_t)Dk) dk[row * Dk + c - Dk] += s;
        else if (c == 2 * (size_t)Dk) dbeta[row] += s;
        else if (dg) dg[row] += s;
    }
}
// y (n) += x (n)
__global__ void mn__k_delta_add(float* y, const float* x, size_t n) { MN__FOR(i, n) y[i] += x[i]; }
// One token: grid (B*H, Dv/8), 32 threads; out (B,H,Dv), state (B,H,Dk,Dv) in/out, q,k (B,H,Dk),
// v (B,H,Dv), beta, g (B,H)
template <int R>
__global__ void __launch_bounds__(32) mn__k_delta_step(float* out, float* state, const float* q, const float* k,
                                                       const float* v, const float* beta, const float* g, int Dv,
                                                       float scale) {
    const int Dk = 4 * R, bh = blockIdx.x, lane = threadIdx.x, r4 = lane & 3;
    const int j = blockIdx.y * MN__DELTA_COLS + (lane >> 2);
    float* s = state + (size_t)bh * Dk * Dv + j;
    float S[R], kk[R], qq[R];
#pragma unroll
    for (int r = 0; r < R; r++) S[r] = s[(size_t)(4 * r + r4) * Dv];
    mn__delta_rows<R>(kk, k + (size_t)bh * Dk, r4);
    mn__delta_rows<R>(qq, q + (size_t)bh * Dk, r4);
    mn__delta_col_token<R>(S, kk, g ? expf(g[bh]) : 1.f, beta[bh], v[(size_t)bh * Dv + j]);
#pragma unroll
    for (int r = 0; r < R; r++) s[(size_t)(4 * r + r4) * Dv] = S[r];
    const float o = mn__delta_quad_sum(mn__delta_dot<R>(S, qq));
    if (r4 == 0) out[(size_t)bh * Dv + j] = scale * o;
}

// the shapes the kernels take (MN_OK or MN_ERR_CONFIG with the reason)
static int mn__delta_check(mn_cuda_ctx* ctx, const char* what, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                           size_t chunk) {
    if (Dk < 16 || Dk > 128 || Dk % 16 != 0)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "needs Dk a multiple of 16 up to 128", __LINE__);
    if (Dv < MN__DELTA_COLS || Dv % MN__DELTA_COLS != 0 || Dv / MN__DELTA_COLS > 65535)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "needs Dv a multiple of 8", __LINE__);
    if (chunk < 1 || chunk > MN__DELTA_MAXC)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "needs chunk in 1..64", __LINE__);
    if (B * H == 0 || B * H > 0x7fffffff || T > 0x7fffffff || H > 0x7fffffff)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "needs 0 < B*H < 2^31, T < 2^31", __LINE__);
    return MN_OK;
}
// the template instance for Dk = 4 R: R = 4, 8, ..., 32
#define MN__DELTA_DISPATCH(Dk, KERNEL, GRID, ...)                                                  \
    switch ((Dk) / 16) {                                                                          \
    case 1: KERNEL<4><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                           \
    case 2: KERNEL<8><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                           \
    case 3: KERNEL<12><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                          \
    case 4: KERNEL<16><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                          \
    case 5: KERNEL<20><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                          \
    case 6: KERNEL<24><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                          \
    case 7: KERNEL<28><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                          \
    default: KERNEL<32><<<GRID, 32, 0, MN__STREAM>>>(__VA_ARGS__); break;                         \
    }

// warps per backward block: 4, 2 or 1, the most that divide the Dv/8 column slices
static size_t mn__delta_warps(size_t Dv) {
    const size_t s = Dv / MN__DELTA_COLS;
    return s % 4 == 0 ? 4 : s % 2 == 0 ? 2 : 1;
}
// the backward's workspace: stash (B*H*Dv*Dk*chunk) then the partials (Dv/(8 NW), B*T*H, 2 Dk + 2)
static size_t mn__delta_rec_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    size_t stash = (B * H * Dv * Dk * chunk + 63) / 64 * 64;
    return stash + Dv / MN__DELTA_COLS / mn__delta_warps(Dv) * B * T * H * (2 * Dk + 2);
}
// The op's internal forms: z0 = 1 (the layers: h0 = zeros) leaves the first chunk's state, zero, out of
// hs: hs (B,H,NC-1,Dk,Dv), at most B T / chunk states, which the model's layout can bound from B T alone.
static int mn__delta_rule_forward_rec(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q,
                                      const float* k, const float* v, const float* beta, const float* g,
                                      const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                      size_t chunk, double scale, int z0) {
    if (z0 && h0) return mn__fail(ctx, MN_ERR_CONFIG, "mn__delta_rule_forward", "z0 needs h0 = zeros", __LINE__);
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_forward", B, T, H, Dk, Dv, chunk));
    if (T == 0) {                                    // no tokens: the final state is the initial one
        if (ht && h0) MN__CU(cudaMemcpyAsync(ht, h0, B * H * Dk * Dv * sizeof(float), cudaMemcpyDeviceToDevice,
                                             MN__STREAM));
        else if (ht) MN__CU(cudaMemsetAsync(ht, 0, B * H * Dk * Dv * sizeof(float), MN__STREAM));
        return MN_OK;
    }
    dim3 grid((unsigned)(B * H), (unsigned)(Dv / MN__DELTA_COLS));
    MN__DELTA_DISPATCH(Dk, mn__k_delta_fwd, grid, out, ht, hs, q, k, v, beta, g, h0, (int)T, (int)H, (int)Dv,
                       (int)chunk, z0, (float)scale);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_delta_rule_forward_recurrent(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q,
                                         const float* k, const float* v, const float* beta, const float* g,
                                         const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                         size_t chunk, double scale, float* work) {
    (void)work;
    return mn__delta_rule_forward_rec(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, 0);
}
static int mn__delta_rule_backward_rec(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                       float* dh0, const float* dout, const float* dht, const float* hs,
                                       const float* q, const float* k, const float* v, const float* beta,
                                       const float* g, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                       size_t chunk, double scale, float* work, int z0) {
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_backward", B, T, H, Dk, Dv, chunk));
    if (T == 0) {                                    // no tokens: h0 is the final state, dh0 += dht
        if (dh0 && dht) {
            mn__k_delta_add<<<mn__grid(ctx, B * H * Dk * Dv, 256), 256, 0, MN__STREAM>>>(dh0, dht, B * H * Dk * Dv);
            MN__LAUNCHED();
        }
        return MN_OK;
    }
    if ((!hs && !(z0 && T <= chunk)) || !work)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_delta_rule_backward", "needs hs and work", __LINE__);
    const size_t NW = mn__delta_warps(Dv), NS = Dv / MN__DELTA_COLS / NW;
    const size_t stash = (B * H * Dv * Dk * chunk + 63) / 64 * 64, smem = MN__DELTA_TG * NW * (2 * Dk + 2) * 4;
    float* part = work + stash;
    dim3 grid((unsigned)(B * H), (unsigned)NS);
    const unsigned nt = (unsigned)(32 * NW);
    switch (Dk / 16) {
#define MN__DELTA_BWD(RR)                                                                                 \
    mn__k_delta_bwd<RR><<<grid, nt, smem, MN__STREAM>>>(part, dv, dh0, work, dout, dht, hs, q, k, v, beta, g, \
                                                        (int)T, (int)H, (int)Dv, (int)chunk, z0, (float)scale)
    case 1: MN__DELTA_BWD(4); break;
    case 2: MN__DELTA_BWD(8); break;
    case 3: MN__DELTA_BWD(12); break;
    case 4: MN__DELTA_BWD(16); break;
    case 5: MN__DELTA_BWD(20); break;
    case 6: MN__DELTA_BWD(24); break;
    case 7: MN__DELTA_BWD(28); break;
    default: MN__DELTA_BWD(32); break;
#undef MN__DELTA_BWD
    }
    MN__LAUNCHED();
    mn__k_delta_bwd_sum<<<mn__grid(ctx, B * T * H * (2 * Dk + 2), 256), 256, 0, MN__STREAM>>>(
        dq, dk, dbeta, g ? dg : NULL, part, B * T * H, (int)Dk, (int)NS);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_delta_rule_backward_recurrent(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                          float* dh0, const float* dout, const float* dht, const float* hs,
                                          const float* q, const float* k, const float* v, const float* beta,
                                          const float* g, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                          size_t chunk, double scale, float* work) {
    return mn__delta_rule_backward_rec(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H, Dk,
                                       Dv, chunk, scale, work, 0);
}
// the recurrent form's step: one warp per 8 columns, the forward's arithmetic (mn__delta_col_token), so
// stepping through a sequence gives mn_cuda_delta_rule_forward_recurrent's outputs bit for bit
int mn_cuda_delta_rule_step_recurrent(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k,
                                      const float* v, const float* beta, const float* g, size_t B, size_t H,
                                      size_t Dk, size_t Dv, double scale) {
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_step_recurrent", B, 1, H, Dk, Dv, 1));
    dim3 grid((unsigned)(B * H), (unsigned)(Dv / MN__DELTA_COLS));
    MN__DELTA_DISPATCH(Dk, mn__k_delta_step, grid, out, state, q, k, v, beta, g, (int)Dv, (float)scale);
    MN__LAUNCHED();
    return MN_OK;
}
// The decode step for batches, bound by the state's traffic (read and written once): grid (B H,
// ceil(Dv/32)), 256 threads (8 warps); lane = value column j = 32 y + lane, warp w the rows i = w + 8 r
// (r < R = Dk/8), so every load and store of S is a whole 128-byte row segment (the recurrent step's
// warps touch 32 bytes of each of 128 rows). The sums over rows, p = S'^T k and o = S^T q, meet in shared
// memory (8 partials per column, added in warp order). out (B,H,Dv), state (B,H,Dk,Dv) in/out, q,k (B,H,Dk),
// v (B,H,Dv), beta, g (B,H) (g NULL: a = 1).
template <int R>
__global__ void __launch_bounds__(256) mn__k_delta_step_rows(float* out, float* state, const float* q,
                                                             const float* k, const float* v, const float* beta,
                                                             const float* g, int Dv, float scale) {
    __shared__ float red[8][32];
    const int Dk = 8 * R, bh = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int j = blockIdx.y * 32 + lane;
    const bool on = j < Dv;                                  // the columns past Dv only meet the barriers
    float* s = state + (size_t)bh * Dk * Dv + (on ? j : 0);
    const float *kb = k + (size_t)bh * Dk + w, *qb = q + (size_t)bh * Dk + w;
    float S[R], kk[R], ps[2] = { 0.f, 0.f };
#pragma unroll
    for (int r = 0; r < R; r++) S[r] = on ? s[(size_t)(w + 8 * r) * Dv] : 0.f;
#pragma unroll
    for (int r = 0; r < R; r++) kk[r] = __ldg(kb + 8 * r);
    const float a = g ? expf(g[bh]) : 1.f, bt = beta[bh], vj = on ? v[(size_t)bh * Dv + j] : 0.f;
#pragma unroll
    for (int r = 0; r < R; r++) {                            // the decay and the read p = S'^T k, this warp's rows
        S[r] *= a;
        ps[r & 1] = fmaf(S[r], kk[r], ps[r & 1]);
    }
    red[w][lane] = ps[0] + ps[1];
    __syncthreads();
    float p = 0.f;
#pragma unroll
    for (int x = 0; x < 8; x++) p += red[x][lane];
    const float u = bt * (vj - p);                           // the delta, then the write S = S' + k u^T and o
    float os[2] = { 0.f, 0.f };
#pragma unroll
    for (int r = 0; r < R; r++) {
        S[r] = fmaf(kk[r], u, S[r]);
        if (on) s[(size_t)(w + 8 * r) * Dv] = S[r];
        os[r & 1] = fmaf(S[r], __ldg(qb + 8 * r), os[r & 1]);
    }
    __syncthreads();                                         // every read of p's partials done
    red[w][lane] = os[0] + os[1];
    __syncthreads();
    if (w == 0 && on) {
        float o = 0.f;
#pragma unroll
        for (int x = 0; x < 8; x++) o += red[x][lane];
        out[(size_t)bh * Dv + j] = scale * o;
    }
}
int mn_cuda_delta_rule_step(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k,
                            const float* v, const float* beta, const float* g, size_t B, size_t H, size_t Dk,
                            size_t Dv, double scale) {
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_step", B, 1, H, Dk, Dv, 1));
    dim3 grid((unsigned)(B * H), (unsigned)((Dv + 31) / 32));
    switch (Dk / 16) {
#define MN__DELTA_STEP(RR)                                                                                         \
    mn__k_delta_step_rows<RR><<<grid, 256, 0, MN__STREAM>>>(out, state, q, k, v, beta, g, (int)Dv, (float)scale)
    case 1: MN__DELTA_STEP(2); break;
    case 2: MN__DELTA_STEP(4); break;
    case 3: MN__DELTA_STEP(6); break;
    case 4: MN__DELTA_STEP(8); break;
    case 5: MN__DELTA_STEP(10); break;
    case 6: MN__DELTA_STEP(12); break;
    case 7: MN__DELTA_STEP(14); break;
    default: MN__DELTA_STEP(16); break;
#undef MN__DELTA_STEP
    }
    MN__LAUNCHED();
    return MN_OK;
}

// ---- the chunkwise form (the default where it applies: chunk >= 16, Dv a multiple of 16, work given) ----
// mesanet.h's mn_delta_rule_forward / _backward (the WY/UT representation), product for product.
// Per chunk of C tokens (rows r) with chunk-start state S, gam_r = g_0 + .. + g_r, Gm_ij = e^(gam_i -
// gam_j) (j <= i): L = strict_tril(diag(beta) (K K^T .* Gm)), A = (I + L)^-1, W = A diag(beta e^gam) K,
// U = A diag(beta) V, V_new = U - W S, O = scale diag(e^gam) Q S + (scale Q K^T .* Gm) V_new and
// S <- e^gam_last S + (diag(e^(gam_last - gam)) K)^T V_new. The inputs are first gathered into a
// chunk-major layout (B,H,NC,C,D) with the last chunk padded by zero rows (k = v = q = dout = 0,
// beta = g = 0: a padded row has L = 0, W = U = V_new = 0 and leaves gam_last and the state as they
// are, so the padding changes nothing; its outputs are dropped by the scatter). Then every product of
// the CPU form is one strided batched cuBLAS GEMM over all B H NC chunks at once (mn__gemm, fp32
// math unless ctx->math asks for TF32), the masks, gates and the triangular inverse are small per-chunk
// kernels, and only the chunk-to-chunk recurrences run in order: mn__k_delta_chain, one block per
// (sequence, head, 16 value columns), the 16-column slice of S (or dS) in shared memory:
//   forward   V_new = U - W S ; S <- e^gam_last S + Kd^T V_new
//   backward  dV_new = P^T dO + Kd dS ; dS <- e^gam_last dS + Qg^T dO - W^T dV_new
// (the columns of S evolve independently given W and Kd, so the slices need no communication; P^T dO
// and Qg^T dO do not depend on dS and are batched products before the chain). The backward keeps every
// chunk's end-state gradient dS so that all the remaining adjoints are again batched products, and the
// per-row terms (the gate gradient G, dbeta, the scalings) are one per-chunk kernel, mn__k_delta_rows.
// Precision: fp32 (the CPU in double); results are scattered back with plain adds in a fixed order
// (deterministic, no atomics). Workspace (floats): per chunk 12 C Dk + 9 C Dv + 6 C^2 + 6 C + 3 Dk Dv,
// mn__delta_cws; about 15 KB a token and head at C = 64, D = 128.

#define MN__DELTA_CW 16         // value columns per block of the chain
#define MN__DELTA_MINC 16       // the shortest chunk the chunkwise form is chosen for by default

// the chunkwise form's workspace: (Z,C,Dk) x 12, (Z,C,Dv) x 9, (Z,C,C) x 6, (Z,C) x 6, (Z,Dk,Dv) x 3,
// Z = B H NC chunks; X doubles as the forward's output in chunk layout
typedef struct mn__delta_cws {
    float *Qc, *Kc, *Kg, *Qg, *Kd, *W, *dKd, *dQg, *dW, *dKg, *dQc, *dKc;   // (Z,C,Dk)
    float *Vc, *dOc, *Vb, *U, *Vn, *X, *dVn, *dVb, *dVc;                    // (Z,C,Dv)
    float *KK, *P, *L, *A, *dP, *dL;                                        // (Z,C,C)
    float *bc, *gam, *eg, *ed, *dbc, *dgc;                                  // (Z,C)
    float *Sst, *Y, *dSe;                                                   // (Z,Dk,Dv)
} mn__delta_cws;
// lays the workspace out at base (NULL: only the size); every piece starts at a multiple of 64 floats
static size_t mn__delta_cws_point(mn__delta_cws* w, float* base, size_t Z, size_t C, size_t Dk, size_t Dv) {
    size_t off = 0;
    float** ck[12] = { &w->Qc, &w->Kc, &w->Kg, &w->Qg, &w->Kd, &w->W, &w->dKd, &w->dQg, &w->dW, &w->dKg, &w->dQc,
                       &w->dKc };
    float** cv[9] = { &w->Vc, &w->dOc, &w->Vb, &w->U, &w->Vn, &w->X, &w->dVn, &w->dVb, &w->dVc };
    float** cc[6] = { &w->KK, &w->P, &w->L, &w->A, &w->dP, &w->dL };
    float** c1[6] = { &w->bc, &w->gam, &w->eg, &w->ed, &w->dbc, &w->dgc };
    float** ss[3] = { &w->Sst, &w->Y, &w->dSe };
    const size_t n[5] = { Z * C * Dk, Z * C * Dv, Z * C * C, Z * C, Z * Dk * Dv }, cnt[5] = { 12, 9, 6, 6, 3 };
    float*** all[5] = { ck, cv, cc, c1, ss };
    for (int s = 0; s < 5; s++)
        for (size_t i = 0; i < cnt[s]; i++) {
            *all[s][i] = base ? base + off : NULL;
            off += (n[s] + 63) / 64 * 64;
        }
    return off;
}
static size_t mn__delta_chunk_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    mn__delta_cws w;
    if (chunk < 1) return 0;
    return mn__delta_cws_point(&w, NULL, B * H * ((T + chunk - 1) / chunk), chunk, Dk, Dv);
}
// enough for either form at this chunk
size_t mn_cuda_delta_rule_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    size_t a = mn__delta_rec_work_size(B, T, H, Dk, Dv, chunk), b = mn__delta_chunk_work_size(B, T, H, Dk, Dv, chunk);
    return a > b ? a : b;
}
// does the default form take the chunkwise path at these shapes?
static int mn__delta_chunk_applies(size_t Dv, size_t chunk, const float* work) {
    return work && chunk >= MN__DELTA_MINC && chunk <= MN__DELTA_MAXC && Dv % MN__DELTA_CW == 0;
}

// dst (Z,C,D) = rows of src (B,T,H,D) in chunk order, zero rows past T; z = (b H + h) NC + n, t = n C + r
__global__ void mn__k_delta_gather(float* dst, const float* src, size_t Z, int T, int H, int D, int NC, int C) {
    MN__FOR(e, Z * C * D) {
        const size_t zr = e / D, z = zr / C;
        const int d = (int)(e % D), r = (int)(zr % C), n = (int)(z % NC), t = n * C + r;
        const size_t bh = z / NC, b = bh / H, h = bh % H;
        dst[e] = t < T ? src[((b * T + t) * H + h) * D + d] : 0.f;
    }
}
// dst (B,T,H,D) += src (Z,C,D) (acc), or = (acc 0): the inverse of the gather over the real rows
__global__ void mn__k_delta_scatter(float* dst, const float* src, size_t n, int T, int H, int D, int NC, int C,
                                    int acc) {
    MN__FOR(e, n) {
        const size_t bt = e / ((size_t)H * D), b = bt / T;
        const int t = (int)(bt % T), h = (int)(e / D % H), d = (int)(e % D);
        const size_t z = (b * H + h) * NC + t / C;
        const float x = src[(z * C + t % C) * D + d];
        dst[e] = acc ? dst[e] + x : x;
    }
}
// per chunk (one thread each): bc = beta (0 past T); gam the running sum of g (0 past T; g NULL: 0),
// summed in double as the CPU; eg = e^gam, ed = e^(gam_last - gam). beta, g (B,T,H); outputs (Z,C).
__global__ void mn__k_delta_gates(float* bc, float* gam, float* eg, float* ed, const float* beta, const float* g,
                                  size_t Z, int T, int H, int NC, int C) {
    MN__FOR(z, Z) {
        const size_t bh = z / NC, b = bh / H, h = bh % H, o = z * C;
        const int n = (int)(z % NC);
        double acc = 0.0;
        for (int r = 0; r < C; r++) {
            const int t = n * C + r;
            const size_t row = (b * T + t) * H + h;
            bc[o + r] = t < T ? beta[row] : 0.f;
            acc += (t < T && g) ? (double)g[row] : 0.0;
            gam[o + r] = (float)acc;
            eg[o + r] = expf(gam[o + r]);
        }
        for (int r = 0; r < C; r++) ed[o + r] = expf(gam[o + C - 1] - gam[o + r]);
    }
}
// per chunk (grid Z, 256 threads, C <= 64): P (C,C) *= Gm on j <= i, 0 above; L (C,C) = beta_i KK_ij
// Gm_ij on j < i, else 0; A (C,C) = (I + L)^-1 by forward substitution, row i of (I + L) A = I:
// A_ij = -sum_{j <= m < i} L_im A_mj (j < i), A_ii = 1, 0 above; rows in order, one barrier each.
__global__ void __launch_bounds__(256) mn__k_delta_tri(float* P, float* L, float* A, const float* KK,
                                                       const float* gam, const float* bc, int C) {
    __shared__ float Ls[MN__DELTA_MAXC * MN__DELTA_MAXC], As[MN__DELTA_MAXC * MN__DELTA_MAXC];
    const size_t z = blockIdx.x, base = z * C * C;
    const float *gz = gam + z * C, *bz = bc + z * C;
    for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
        const int i = e / C, j = e % C;
        const float gm = j <= i ? expf(gz[i] - gz[j]) : 0.f, l = j < i ? bz[i] * KK[base + e] * gm : 0.f;
        P[base + e] = j <= i ? P[base + e] * gm : 0.f;
        L[base + e] = l;
        Ls[e] = l;
        As[e] = i == j ? 1.f : 0.f;
    }
    __syncthreads();
    for (int i = 1; i < C; i++) {
        const int j = threadIdx.x;
        if (j < i) {
            float s = 0.f;
            for (int m = j; m < i; m++) s = fmaf(-Ls[i * C + m], As[m * C + j], s);
            As[i * C + j] = s;
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < C * C; e += blockDim.x) A[base + e] = As[e];
}
// the row scalings (Z,C,Dk): Kg = beta e^gam K, Qg = scale e^gam Q, Kd = e^(gam_last - gam) K; (Z,C,Dv):
// Vb = beta V
__global__ void mn__k_delta_scale(float* Kg, float* Qg, float* Kd, float* Vb, const float* Kc, const float* Qc,
                                  const float* Vc, const float* bc, const float* eg, const float* ed, size_t ZC,
                                  int Dk, int Dv, float scale) {
    MN__FOR(e, ZC * Dk) {
        const size_t zr = e / Dk;
        Kg[e] = bc[zr] * eg[zr] * Kc[e];
        Qg[e] = scale * eg[zr] * Qc[e];
        Kd[e] = ed[zr] * Kc[e];
    }
    MN__FOR(e, ZC * Dv) Vb[e] = bc[e / Dv] * Vc[e];
}
// The chunk-to-chunk recurrence, one block per (sequence and head, 16 value columns): grid (B H,
// Dv/16), exactly 256 threads (16 columns x 16 row groups: a thread takes the rows rw + 16 m, up to 4 of
// O1 and 8 of St, in registers), dynamic shared memory (Dk + C) 16 floats. Per
// chunk n (ascending, or descending when rev), z = bh NC + n:
//   Sst[z] = St (the state entering the chunk) ; O1 = A1 + s1 M1 St ; St <- e_last St + Y + s2 M2^T O1
// O1, A1 (Z,C,Dv); M1, M2 (Z,C,Dk); Y (Z,Dk,Dv) or NULL; eg (Z,C) (e_last its last entry); s0 (B H,Dk,Dv)
// the starting St or NULL (zeros); fin (B H,Dk,Dv) or NULL: the final St, written (acc 0) or added.
__global__ void __launch_bounds__(256) mn__k_delta_chain(float* O1, float* Sst, float* fin, const float* A1,
                                                         const float* M1, const float* M2, const float* Y,
                                                         const float* eg, const float* s0, int NC, int C, int Dk,
                                                         int Dv, float s1, float s2, int rev, int acc) {
    extern __shared__ float mn__delta_chs[];                 // St (Dk,16), then O1's slice (C,16)
    float *St = mn__delta_chs, *Ob = mn__delta_chs + (size_t)Dk * MN__DELTA_CW;
    const int cj = threadIdx.x % MN__DELTA_CW, rw = threadIdx.x / MN__DELTA_CW, RG = 256 / MN__DELTA_CW;
    const size_t bh = blockIdx.x, col = (size_t)blockIdx.y * MN__DELTA_CW + cj, ns = (size_t)Dk * Dv;
    for (int d = rw; d < Dk; d += RG) St[d * MN__DELTA_CW + cj] = s0 ? s0[bh * ns + (size_t)d * Dv + col] : 0.f;
    __syncthreads();
    for (int it = 0; it < NC; it++) {
        const size_t z = bh * NC + (rev ? NC - 1 - it : it);
        for (int d = rw; d < Dk; d += RG) Sst[z * ns + (size_t)d * Dv + col] = St[d * MN__DELTA_CW + cj];
        // O1 rows r = rw + 16 m (m < 4 covers C <= 64) = A1 + s1 M1 St: each St value read once for 4 rows
        float a[8] = { 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f };
        for (int d = 0; d < Dk; d++) {
            const float sv = St[d * MN__DELTA_CW + cj];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int r = rw + RG * m;
                if (r < C) a[m] = fmaf(__ldg(M1 + (z * C + r) * Dk + d), sv, a[m]);
            }
        }
#pragma unroll
        for (int m = 0; m < 4; m++) {
            const int r = rw + RG * m;
            if (r < C) {
                const size_t o = (z * C + r) * Dv + col;
                const float x = fmaf(s1, a[m], A1[o]);
                Ob[r * MN__DELTA_CW + cj] = x;
                O1[o] = x;
            }
        }
        __syncthreads();                                     // Ob complete; every read of St done
        const float el = eg[z * C + C - 1];
        // St rows d = rw + 16 m (m < 8 covers Dk <= 128) <- e_last St + Y + s2 (M2^T O1): each O1 value read once
#pragma unroll
        for (int m = 0; m < 8; m++) a[m] = 0.f;
        for (int r = 0; r < C; r++) {
            const float ov = Ob[r * MN__DELTA_CW + cj];
            const float* m2 = M2 + (z * C + r) * Dk;
#pragma unroll
            for (int m = 0; m < 8; m++) {
                const int d = rw + RG * m;
                if (d < Dk) a[m] = fmaf(__ldg(m2 + d), ov, a[m]);
            }
        }
#pragma unroll
        for (int m = 0; m < 8; m++) {
            const int d = rw + RG * m;
            if (d < Dk) {
                float x = el * St[d * MN__DELTA_CW + cj];
                if (Y) x += Y[z * ns + (size_t)d * Dv + col];
                St[d * MN__DELTA_CW + cj] = fmaf(s2, a[m], x);
            }
        }
        __syncthreads();                                     // St updated before the next chunk reads it
    }
    if (fin)
        for (int d = rw; d < Dk; d += RG) {
            float* p = fin + bh * ns + (size_t)d * Dv + col;
            *p = acc ? *p + St[d * MN__DELTA_CW + cj] : St[d * MN__DELTA_CW + cj];
        }
}
// hs <-> the chunk-start states Sst (B H NC,Dk,Dv): to_hs copies Sst into hs (B,H,NC-z0,Dk,Dv) (z0 drops
// every sequence's first state, zero), else fills Sst from hs (the first state zero under z0)
__global__ void mn__k_delta_hs(float* hs, float* Sst, size_t BH, int NC, size_t ns, int z0, int to_hs) {
    MN__FOR(e, BH * NC * ns) {
        const size_t z = e / ns, bh = z / NC;
        const int n = (int)(z % NC);
        const size_t he = (bh * (NC - z0) + n - z0) * ns + e % ns;
        if (to_hs) { if (n >= z0) hs[he] = Sst[e]; }
        else Sst[e] = n < z0 ? 0.f : hs[he];
    }
}
// The backward's per-row terms, one block per chunk (256 threads, a warp per row r), after every
// batched product: the gate gradient G_r = dL/dgam_r collects (as mesanet.h's backward)
//   + dQg_r.Qg_r + dKg_r.Kg_r - dKd_r.Kd_r + sum_j<=r dP_rj P_rj - sum_i>=r dP_ir P_ir
//   + sum_j<r dL_rj L_rj - sum_i>r dL_ir L_ir ;  G_last += e^gam_last <dSe, Sst> + sum_r dKd_r.Kd_r
// and dg_t = sum_{r >= t} G_r (dgc); dbeta_r = e^gam_r dKg_r.k_r + dVb_r.v_r + sum_j<r dL_rj KK_rj Gm_rj
// (dbc); dQc = scale e^gam dQg, dKc = e^(gam_last - gam) dKd + beta e^gam dKg, dVc = beta dVb (written);
// then, once every read is done, dP becomes D = scale dP .* Gm (j <= i) and dL becomes F = dL beta_i Gm
// (j < i), for the products dQ += D K, dK += D^T Q + F K + F^T K that follow.
__global__ void __launch_bounds__(256) mn__k_delta_rows(mn__delta_cws w, int C, int Dk, int Dv, float scale) {
    __shared__ float red[32], Gs[MN__DELTA_MAXC], Ks[MN__DELTA_MAXC];
    const size_t z = blockIdx.x, zc = z * C, cc = zc * C, ns = (size_t)Dk * Dv;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float part = 0.f;
    for (size_t e = threadIdx.x; e < ns; e += blockDim.x) part = fmaf(w.dSe[z * ns + e], w.Sst[z * ns + e], part);
    const float tot = mn__block_sum(part, red);
    const float *gz = w.gam + zc;
    for (int r = wp; r < C; r += nw) {
        const size_t rk = (zc + r) * Dk, rv = (zc + r) * Dv;
        const float er = w.eg[zc + r], br = w.bc[zc + r], dr = w.ed[zc + r];
        float a1 = 0.f, a2 = 0.f, a3 = 0.f, db = 0.f, dv = 0.f;
        for (int d = lane; d < Dk; d += 32) {
            const size_t e = rk + d;
            a1 = fmaf(w.dKd[e], w.Kd[e], a1);
            a2 = fmaf(w.dQg[e], w.Qg[e], a2);
            a3 = fmaf(w.dKg[e], w.Kg[e], a3);
            db = fmaf(w.dKg[e], w.Kc[e], db);
            w.dQc[e] = scale * er * w.dQg[e];
            w.dKc[e] = fmaf(dr, w.dKd[e], br * er * w.dKg[e]);
        }
        for (int d = lane; d < Dv; d += 32) {
            const size_t e = rv + d;
            dv = fmaf(w.dVb[e], w.Vc[e], dv);
            w.dVc[e] = br * w.dVb[e];
        }
        float gp = 0.f, dbl = 0.f;
        for (int j = lane; j < C; j += 32) {
            const size_t er_ = cc + (size_t)r * C + j, ec = cc + (size_t)j * C + r;   // (r,j) and (j,r)
            if (j <= r) gp = fmaf(w.dP[er_], w.P[er_], gp);
            if (j >= r) gp = fmaf(-w.dP[ec], w.P[ec], gp);
            if (j < r) {
                gp = fmaf(w.dL[er_], w.L[er_], gp);
                dbl = fmaf(w.dL[er_], w.KK[er_] * expf(gz[r] - gz[j]), dbl);
            }
            if (j > r) gp = fmaf(-w.dL[ec], w.L[ec], gp);
        }
        a1 = mn__warp_sum(a1); a2 = mn__warp_sum(a2); a3 = mn__warp_sum(a3);
        db = mn__warp_sum(db); dv = mn__warp_sum(dv); gp = mn__warp_sum(gp); dbl = mn__warp_sum(dbl);
        if (lane == 0) {
            Gs[r] = a2 + a3 - a1 + gp;
            Ks[r] = a1;
            w.dbc[zc + r] = er * db + dv + dbl;
        }
    }
    __syncthreads();                                         // G, Ks complete; every read of dP, dL done
    if (threadIdx.x == 0) {
        float s = 0.f, acc = 0.f;
        for (int r = 0; r < C; r++) s += Ks[r];
        Gs[C - 1] += s + w.eg[zc + C - 1] * tot;
        for (int r = C - 1; r >= 0; r--) { acc += Gs[r]; w.dgc[zc + r] = acc; }
    }
    for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
        const int i = e / C, j = e % C;
        const float gm = j <= i ? expf(gz[i] - gz[j]) : 0.f;
        w.dP[cc + e] = j <= i ? scale * w.dP[cc + e] * gm : 0.f;
        w.dL[cc + e] = j < i ? w.dL[cc + e] * w.bc[zc + i] * gm : 0.f;
    }
}

// the chunk form's passes 1-4 that do not involve the state (mesanet.h's mn__delta_chunk_prep): the
// gathers, gates, KK, P, L, A, the scalings, W and U
static int mn__delta_chunk_prep(mn_cuda_ctx* ctx, const mn__delta_cws* w, const float* q, const float* k,
                                const float* v, const float* beta, const float* g, size_t B, size_t T, size_t H,
                                size_t Dk, size_t Dv, size_t C, double scale) {
    const size_t NC = (T + C - 1) / C, Z = B * H * NC, CK = C * Dk, CV = C * Dv, CC = C * C;
    mn__k_delta_gather<<<mn__grid(ctx, Z * CK, 256), 256, 0, MN__STREAM>>>(w->Qc, q, Z, (int)T, (int)H, (int)Dk,
                                                                          (int)NC, (int)C);
    MN__LAUNCHED();
    mn__k_delta_gather<<<mn__grid(ctx, Z * CK, 256), 256, 0, MN__STREAM>>>(w->Kc, k, Z, (int)T, (int)H, (int)Dk,
                                                                          (int)NC, (int)C);
    MN__LAUNCHED();
    mn__k_delta_gather<<<mn__grid(ctx, Z * CV, 256), 256, 0, MN__STREAM>>>(w->Vc, v, Z, (int)T, (int)H, (int)Dv,
                                                                          (int)NC, (int)C);
    MN__LAUNCHED();
    mn__k_delta_gates<<<mn__grid(ctx, Z, 128), 128, 0, MN__STREAM>>>(w->bc, w->gam, w->eg, w->ed, beta, g, Z, (int)T,
                                                                     (int)H, (int)NC, (int)C);
    MN__LAUNCHED();
    // pass 1: KK = K K^T ; P = scale Q K^T (masked and decayed by the tri kernel)
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, Dk, 1.f, w->Kc, Dk, CK, w->Kc, Dk, CK, 0.f, w->KK, C, CC, Z));
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, Dk, (float)scale, w->Qc, Dk, CK, w->Kc, Dk, CK, 0.f, w->P, C, CC, Z));
    // pass 2: L and A = (I + L)^-1
    mn__k_delta_tri<<<(unsigned)Z, 256, 0, MN__STREAM>>>(w->P, w->L, w->A, w->KK, w->gam, w->bc, (int)C);
    MN__LAUNCHED();
    // pass 3: the scalings, W = A Kg, U = A Vb
    mn__k_delta_scale<<<mn__grid(ctx, Z * CK, 256), 256, 0, MN__STREAM>>>(w->Kg, w->Qg, w->Kd, w->Vb, w->Kc, w->Qc,
                                                                          w->Vc, w->bc, w->eg, w->ed, Z * C, (int)Dk,
                                                                          (int)Dv, (float)scale);
    MN__LAUNCHED();
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dk, C, 1.f, w->A, C, CC, w->Kg, Dk, CK, 0.f, w->W, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, C, 1.f, w->A, C, CC, w->Vb, Dv, CV, 0.f, w->U, Dv, CV, Z));
    return MN_OK;
}
static int mn__delta_chain(mn_cuda_ctx* ctx, float* O1, float* Sst, float* fin, const float* A1, const float* M1,
                           const float* M2, const float* Y, const float* eg, const float* s0, size_t BH, size_t NC,
                           size_t C, size_t Dk, size_t Dv, float s1, float s2, int rev, int acc) {
    const size_t smem = (Dk + C) * MN__DELTA_CW * sizeof(float);
    dim3 grid((unsigned)BH, (unsigned)(Dv / MN__DELTA_CW));
    mn__k_delta_chain<<<grid, 256, smem, MN__STREAM>>>(O1, Sst, fin, A1, M1, M2, Y, eg, s0, (int)NC, (int)C, (int)Dk,
                                                        (int)Dv, s1, s2, rev, acc);
    MN__LAUNCHED();
    return MN_OK;
}
// The chunkwise forward (mesanet.h's mn_delta_rule_forward); z0 as the recurrent form's
static int mn__delta_rule_forward_chunk(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q,
                                        const float* k, const float* v, const float* beta, const float* g,
                                        const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                        size_t C, double scale, float* work, int z0) {
    const size_t NC = (T + C - 1) / C, Z = B * H * NC, CK = C * Dk, CV = C * Dv, CC = C * C, ns = Dk * Dv;
    mn__delta_cws w;
    mn__delta_cws_point(&w, work, Z, C, Dk, Dv);
    MN__TRY(mn__delta_chunk_prep(ctx, &w, q, k, v, beta, g, B, T, H, Dk, Dv, C, scale));
    // passes 4 and 6 in chunk order: V_new = U - W S ; S <- e^gam_last S + Kd^T V_new (Sst: every chunk's S)
    MN__TRY(mn__delta_chain(ctx, w.Vn, w.Sst, ht, w.U, w.W, w.Kd, NULL, w.eg, h0, B * H, NC, C, Dk, Dv, -1.f, 1.f, 0,
                            0));
    // pass 5: O = Qg S + P V_new, all chunks at once, then back to (B,T,H,Dv)
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, Dk, 1.f, w.Qg, Dk, CK, w.Sst, Dv, ns, 0.f, w.X, Dv, CV, Z));
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, C, 1.f, w.P, C, CC, w.Vn, Dv, CV, 1.f, w.X, Dv, CV, Z));
    mn__k_delta_scatter<<<mn__grid(ctx, B * T * H * Dv, 256), 256, 0, MN__STREAM>>>(out, w.X, B * T * H * Dv, (int)T,
                                                                                   (int)H, (int)Dv, (int)NC, (int)C,
                                                                                   0);
    MN__LAUNCHED();
    if (hs) {
        mn__k_delta_hs<<<mn__grid(ctx, Z * ns, 256), 256, 0, MN__STREAM>>>(hs, w.Sst, B * H, (int)NC, ns, z0, 1);
        MN__LAUNCHED();
    }
    return MN_OK;
}
// The chunkwise backward (mesanet.h's mn_delta_rule_backward): passes 1-4 recomputed from hs, the dS
// chain in reverse chunk order, then the adjoints of all chunks at once
static int mn__delta_rule_backward_chunk(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                         float* dh0, const float* dout, const float* dht, const float* hs,
                                         const float* q, const float* k, const float* v, const float* beta,
                                         const float* g, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C,
                                         double scale, float* work, int z0) {
    const size_t NC = (T + C - 1) / C, Z = B * H * NC, CK = C * Dk, CV = C * Dv, CC = C * C, ns = Dk * Dv;
    const size_t nk = B * T * H * Dk, nv = B * T * H * Dv, nh = B * T * H;
    mn__delta_cws w;
    mn__delta_cws_point(&w, work, Z, C, Dk, Dv);
    MN__TRY(mn__delta_chunk_prep(ctx, &w, q, k, v, beta, g, B, T, H, Dk, Dv, C, scale));
    mn__k_delta_gather<<<mn__grid(ctx, Z * CV, 256), 256, 0, MN__STREAM>>>(w.dOc, dout, Z, (int)T, (int)H, (int)Dv,
                                                                          (int)NC, (int)C);
    MN__LAUNCHED();
    if (hs) {
        mn__k_delta_hs<<<mn__grid(ctx, Z * ns, 256), 256, 0, MN__STREAM>>>((float*)hs, w.Sst, B * H, (int)NC, ns, z0,
                                                                          0);
        MN__LAUNCHED();
    } else MN__CU(cudaMemsetAsync(w.Sst, 0, Z * ns * sizeof(float), MN__STREAM));   // z0 and one chunk
    // pass 4 recomputed: V_new = U - W S
    MN__CU(cudaMemcpyAsync(w.Vn, w.U, Z * CV * sizeof(float), cudaMemcpyDeviceToDevice, MN__STREAM));
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, Dk, -1.f, w.W, Dk, CK, w.Sst, Dv, ns, 1.f, w.Vn, Dv, CV, Z));
    // the parts of dV_new and dS that do not depend on dS: X = P^T dO, Y = Qg^T dO; then the chain
    MN__TRY(mn__gemm(ctx, 1, 0, C, Dv, C, 1.f, w.P, C, CC, w.dOc, Dv, CV, 0.f, w.X, Dv, CV, Z));
    MN__TRY(mn__gemm(ctx, 1, 0, Dk, Dv, C, 1.f, w.Qg, Dk, CK, w.dOc, Dv, CV, 0.f, w.Y, Dv, ns, Z));
    MN__TRY(mn__delta_chain(ctx, w.dVn, w.dSe, dh0, w.X, w.Kd, w.W, w.Y, w.eg, dht, B * H, NC, C, Dk, Dv, 1.f, -1.f,
                            1, 1));
    // pass 6: dKd = V_new dS_end^T ; pass 5: dQg = dO S^T, dP = dO V_new^T ; pass 4: dW = -dV_new S^T
    MN__TRY(mn__gemm(ctx, 0, 1, C, Dk, Dv, 1.f, w.Vn, Dv, CV, w.dSe, Dv, ns, 0.f, w.dKd, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 0, 1, C, Dk, Dv, 1.f, w.dOc, Dv, CV, w.Sst, Dv, ns, 0.f, w.dQg, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, Dv, 1.f, w.dOc, Dv, CV, w.Vn, Dv, CV, 0.f, w.dP, C, CC, Z));
    MN__TRY(mn__gemm(ctx, 0, 1, C, Dk, Dv, -1.f, w.dVn, Dv, CV, w.Sst, Dv, ns, 0.f, w.dW, Dk, CK, Z));
    // pass 3: dKg = A^T dW ; dVb = A^T dV_new ; dL = -(dKg W^T + dVb U^T)
    MN__TRY(mn__gemm(ctx, 1, 0, C, Dk, C, 1.f, w.A, C, CC, w.dW, Dk, CK, 0.f, w.dKg, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 1, 0, C, Dv, C, 1.f, w.A, C, CC, w.dVn, Dv, CV, 0.f, w.dVb, Dv, CV, Z));
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, Dk, -1.f, w.dKg, Dk, CK, w.W, Dk, CK, 0.f, w.dL, C, CC, Z));
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, Dv, -1.f, w.dVb, Dv, CV, w.U, Dv, CV, 1.f, w.dL, C, CC, Z));
    // the per-row terms, then dQ += D K ; dK += D^T Q + F K + F^T K
    mn__k_delta_rows<<<(unsigned)Z, 256, 0, MN__STREAM>>>(w, (int)C, (int)Dk, (int)Dv, (float)scale);
    MN__LAUNCHED();
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dk, C, 1.f, w.dP, C, CC, w.Kc, Dk, CK, 1.f, w.dQc, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 1, 0, C, Dk, C, 1.f, w.dP, C, CC, w.Qc, Dk, CK, 1.f, w.dKc, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dk, C, 1.f, w.dL, C, CC, w.Kc, Dk, CK, 1.f, w.dKc, Dk, CK, Z));
    MN__TRY(mn__gemm(ctx, 1, 0, C, Dk, C, 1.f, w.dL, C, CC, w.Kc, Dk, CK, 1.f, w.dKc, Dk, CK, Z));
    // back to (B,T,H,.), accumulating
    const float* src[5] = { w.dQc, w.dKc, w.dVc, w.dbc, w.dgc };
    float* dst[5] = { dq, dk, dv, dbeta, g ? dg : NULL };
    const size_t cnt[5] = { nk, nk, nv, nh, nh }, wd[5] = { Dk, Dk, Dv, 1, 1 };
    for (int i = 0; i < 5; i++) {
        if (!dst[i]) continue;
        mn__k_delta_scatter<<<mn__grid(ctx, cnt[i], 256), 256, 0, MN__STREAM>>>(dst[i], src[i], cnt[i], (int)T, (int)H,
                                                                               (int)wd[i], (int)NC, (int)C, 1);
        MN__LAUNCHED();
    }
    return MN_OK;
}
// The op's internal forms with z0 (see mn__delta_rule_forward_rec): the chunkwise form where it applies
static int mn__delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                                  const float* v, const float* beta, const float* g, const float* h0, size_t B,
                                  size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work,
                                  int z0) {
    if (T == 0 || !mn__delta_chunk_applies(Dv, chunk, work))
        return mn__delta_rule_forward_rec(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, z0);
    if (z0 && h0) return mn__fail(ctx, MN_ERR_CONFIG, "mn__delta_rule_forward", "z0 needs h0 = zeros", __LINE__);
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_forward", B, T, H, Dk, Dv, chunk));
    return mn__delta_rule_forward_chunk(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, work,
                                        z0);
}
static int mn__delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                   float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                   const float* k, const float* v, const float* beta, const float* g, size_t B,
                                   size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work,
                                   int z0) {
    if (T == 0 || !mn__delta_chunk_applies(Dv, chunk, work))
        return mn__delta_rule_backward_rec(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H,
                                           Dk, Dv, chunk, scale, work, z0);
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_backward", B, T, H, Dk, Dv, chunk));
    if (!hs && !(z0 && T <= chunk))
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_delta_rule_backward", "needs hs and work", __LINE__);
    return mn__delta_rule_backward_chunk(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H, Dk,
                                         Dv, chunk, scale, work, z0);
}
int mn_cuda_delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                               const float* v, const float* beta, const float* g, const float* h0, size_t B,
                               size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work) {
    return mn__delta_rule_forward(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, work, 0);
}
int mn_cuda_delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                const float* k, const float* v, const float* beta, const float* g, size_t B,
                                size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work) {
    return mn__delta_rule_backward(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H, Dk, Dv,
                                   chunk, scale, work, 0);
}
