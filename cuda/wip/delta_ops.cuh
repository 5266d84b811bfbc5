// >>delta_rule
// defines: mn_cuda_delta_rule_{forward,backward,step,work_size}
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
// This is the recurrent form; the chunkwise WY/UT form of the CPU (tensor-core products per chunk) is
// left for a later session: here the FLOPs are FFMA and the backward reads its states back once.

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
size_t mn_cuda_delta_rule_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    size_t stash = (B * H * Dv * Dk * chunk + 63) / 64 * 64;
    return stash + Dv / MN__DELTA_COLS / mn__delta_warps(Dv) * B * T * H * (2 * Dk + 2);
}
// The op's internal forms: z0 = 1 (the layers: h0 = zeros) leaves the first chunk's state, zero, out of
// hs: hs (B,H,NC-1,Dk,Dv), at most B T / chunk states, which the model's layout can bound from B T alone.
static int mn__delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                                  const float* v, const float* beta, const float* g, const float* h0, size_t B,
                                  size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, int z0) {
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
int mn_cuda_delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                               const float* v, const float* beta, const float* g, const float* h0, size_t B,
                               size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work) {
    (void)work;
    return mn__delta_rule_forward(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, 0);
}
static int mn__delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                   float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                   const float* k, const float* v, const float* beta, const float* g, size_t B,
                                   size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work,
                                   int z0) {
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
int mn_cuda_delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                const float* k, const float* v, const float* beta, const float* g, size_t B,
                                size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work) {
    return mn__delta_rule_backward(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H, Dk, Dv,
                                   chunk, scale, work, 0);
}
int mn_cuda_delta_rule_step(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k,
                            const float* v, const float* beta, const float* g, size_t B, size_t H, size_t Dk,
                            size_t Dv, double scale) {
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_step", B, 1, H, Dk, Dv, 1));
    dim3 grid((unsigned)(B * H), (unsigned)(Dv / MN__DELTA_COLS));
    MN__DELTA_DISPATCH(Dk, mn__k_delta_step, grid, out, state, q, k, v, beta, g, (int)Dv, (float)scale);
    MN__LAUNCHED();
    return MN_OK;
}
