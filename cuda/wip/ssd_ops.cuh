// >>ssd
// defines: mn_cuda_ssd_{forward,backward,work_size}[_recurrent|_chunk], mn_cuda_ssd_step
// Mamba-2's SSD core as mesanet.h's >>ssd: per head h_t = a_t h_{t-1} + X_t B_t^T (P,N), y_t = h_t C_t,
// with a_t = exp(A_t) (MN_SSD_LOG_DECAY) or a_t = A_t of any sign (MN_SSD_TRANSITION, the [-1,1] variant).
//
// Default form: the chunkwise form (mn_cuda_ssd_forward_chunk / _backward_chunk) wherever its shapes allow
// (P == N in {64, 128}, no initial or final state, 16-byte aligned tensors, B*H <= 65535), else the
// recurrent form. The chunkwise form runs the tensor-core GLA op (G = 1, q = C, k = B, v = X, scale 1;
// deterministic) in 3xTF32 whatever ctx->math:
//   log-decays: the core is simple GLA with the gate g = A as it stands;
//   signed transitions a_t (any sign, |a| <= 1 as Mamba-2's; larger works while the state stays finite):
//     with the running sign sg_t = prod_{l<=t} sign(a_l) (+-1) and b_t = sum_{l<=t} log|a_l|, a span's
//     product is prod_{j<l<=i} a_l = sg_i sg_j e^{b_i - b_j}, so y_i = sum_{j<=i} prod (C_i.B_j) X_j is the
//     log-decay core on C' = sg C, B' = sg B, g = log|a| exactly (then S_t = sg_t S'_t, dS_t = sg_t dS'_t).
//     Backward: dC = sg dC', dB = sg dB', dX as it comes; the signs are piecewise constant, so
//     dA_t = dg_t d log|a_t| / da_t = dg_t / a_t. The op's dg_t is a sum over the rest of the sequence that
//     cancels down to a_t <S_{t-1}, dS_t>: its absolute error (~1e-6 of the terms) over a small |a_t| would
//     grow without bound, so for |a_t| < 2^-8 (MN__SSD_TINY) dA_t is computed instead as <S_{t-1}, dS_t>
//     from the op's saved chunk states (mn__k_ssd_sfix: no division; a chunk without such a token costs
//     nothing). log|a| is floored at -24 (MN__SSD_GMIN): a transition of exactly 0 decays by e^-24 ~ 4e-11
//     instead of 0, far below fp32's resolution (6e-8) of the terms it meets; the floor is no lower because
//     the op's cumulative gates from the chunk start would grow with it, and the differences it forms of
//     them lose ~1 ulp of that size per token (fp32 ulp 1.5e-5 past 128); natural |a| >= ~1e-7 (the
//     resolution of 2 e^x - 1) stay above it anyway. Cost over the log-decay path: the
//     sign scan, B' and C' written (forward and backward), dB and dC flipped twice in place, dA's division.
//
// Recurrent form. Every entry h[p,n] is its own scalar recurrence, so the state can be cut anywhere:
// one block of 128 threads per (sequence, head, 16 rows of P); warp w holds rows p0 + 4w + i (i < 4),
// lane l the columns n = l + 32 j (j < 4, so N <= 128), 16 state values in registers per thread.
// The inputs of 16 tokens (X's 16 rows, a, B, C) are staged in shared memory at a time; y_t[p] is a
// warp sum over n. The sums over p (dB, dC) and over the whole state (da) cross the P/16 blocks of a
// head: each block reduces its 16 rows in shared memory, then adds them with atomics, so those
// gradients' last bits may differ between runs (dX, dh0 are owned rows: plain adds).
// The backward needs S_{t-1} and S_t while it walks t backwards with dS: the states are recomputed.
// Pass 1 (the forward kernel without y) saves the state entering every 64-token chunk (workspace:
// B H ceil(T/64) P N floats); pass 2 walks the chunks backwards: it steps the chunk's checkpoint forward
// once, keeping the state entering each of its 8-token sub-chunks in shared memory (8 x 16 x N), then
// walks each sub-chunk backwards, recomputing S_{t-1} from the sub-chunk's entering state (3.5 steps a
// token on average). The recomputed states are bitwise those of the forward (the same fmaf chain).
// All math in fp32 (exp(A) by expf); the tests hold it to the double CPU recurrence at 1e-5 (outputs)
// and 1e-4 / 2e-4 (gradients / dA).
// Decode step: one warp per (sequence, head, row p), lanes over n: the state row read and written once.

#define MN__SSD_RT 16      // rows of P per block of the recurrent kernels (4 warps x 4 rows)
#define MN__SSD_NJ 4       // columns per lane (n = lane + 32 j): N <= 128
#define MN__SSD_ST 16      // tokens staged at a time by the forward kernel
#define MN__SSD_CK 64      // the backward's checkpoint interval (tokens)
#define MN__SSD_SUB 8      // its sub-chunks (MN__SSD_CK / MN__SSD_SUB entering states in shared memory)
#define MN__SSD_NS (MN__SSD_CK / MN__SSD_SUB)

typedef struct mn__ssd_args {
    float* y;                   // (B,T,H,P) or NULL (the checkpoint pass)
    float *ht, *ck;             // (B,H,P,N) final state or NULL; (B,H,NC,P,N) checkpoints or NULL
    float *dX, *dA, *dB, *dC, *dh0;      // (B,T,H,P), (B,T,H) or NULL, (B,T,H,N) x2, (B,H,P,N) or NULL
    const float *dy, *dht;               // (B,T,H,P), (B,H,P,N) or NULL
    const float *X, *A, *Bm, *Cm, *h0;   // (B,T,H,P), (B,T,H), (B,T,H,N) x2, (B,H,P,N) or NULL
    unsigned B, T, H, P, N, NC;          // NC = ceil(T / MN__SSD_CK)
    int amode;
} mn__ssd_args;

// the transition a_t from what A holds
__device__ __forceinline__ float mn__ssd_tr(float A, int amode) { return amode == MN_SSD_TRANSITION ? A : expf(A); }
static size_t mn__ssd_nck(size_t T) { return (T + MN__SSD_CK - 1) / MN__SSD_CK; }

// Forward: y (when a.y) and ht (when a.ht); a.ck non-NULL: the state entering every MN__SSD_CK-token
// chunk (the backward's pass 1). Grid (P/16, B*H), 128 threads.
__global__ void __launch_bounds__(128) mn__k_ssd_fwd(mn__ssd_args a) {
    __shared__ float xs[MN__SSD_ST][MN__SSD_RT], as[MN__SSD_ST], bs[MN__SSD_ST][128], cs[MN__SSD_ST][128];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t H = a.H, P = a.P, N = a.N, T = a.T, bh = blockIdx.y, b = bh / H, h = bh % H;
    const size_t p0 = (size_t)blockIdx.x * MN__SSD_RT, hs = bh * P * N;   // this head's (P,N) state
    float s[4][MN__SSD_NJ];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < MN__SSD_NJ; j++) {
            size_t p = p0 + 4 * w + i, n = lane + 32 * j;
            s[i][j] = n < N && a.h0 ? a.h0[hs + p * N + n] : 0.f;
        }
    for (size_t t0 = 0; t0 < T; t0 += MN__SSD_ST) {
        const size_t L = T - t0 < MN__SSD_ST ? T - t0 : MN__SSD_ST;
        __syncthreads();                            // the previous tokens' reads are done
        for (size_t e = threadIdx.x; e < L * N; e += blockDim.x) {
            size_t tt = e / N, n = e % N, r = (b * T + t0 + tt) * H + h;
            bs[tt][n] = a.Bm[r * N + n];
            if (a.y) cs[tt][n] = a.Cm[r * N + n];
        }
        for (size_t e = threadIdx.x; e < L * MN__SSD_RT; e += blockDim.x) {
            size_t tt = e / MN__SSD_RT, i = e % MN__SSD_RT, r = (b * T + t0 + tt) * H + h;
            xs[tt][i] = a.X[r * P + p0 + i];
        }
        if (threadIdx.x < L) as[threadIdx.x] = mn__ssd_tr(a.A[(b * T + t0 + threadIdx.x) * H + h], a.amode);
        __syncthreads();
        for (size_t tt = 0; tt < L; tt++) {
            const size_t t = t0 + tt;
            if (a.ck && t % MN__SSD_CK == 0) {      // the state entering chunk t / MN__SSD_CK, S_{t-1}
                float* ck = a.ck + (bh * a.NC + t / MN__SSD_CK) * P * N;
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < MN__SSD_NJ; j++) {
                        size_t p = p0 + 4 * w + i, n = lane + 32 * j;
                        if (n < N) ck[p * N + n] = s[i][j];
                    }
            }
            const float at = as[tt];
            float bj[MN__SSD_NJ], cj[MN__SSD_NJ];
#pragma unroll
            for (int j = 0; j < MN__SSD_NJ; j++) {
                size_t n = lane + 32 * j;
                bj[j] = n < N ? bs[tt][n] : 0.f;
                cj[j] = n < N && a.y ? cs[tt][n] : 0.f;
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float x = xs[tt][4 * w + i];
                float acc = 0.f;
#pragma unroll
                for (int j = 0; j < MN__SSD_NJ; j++) {     // S = a S + x b^T, then y = S c
                    s[i][j] = fmaf(at, s[i][j], x * bj[j]);
                    acc = fmaf(s[i][j], cj[j], acc);
                }
                if (a.y) {
                    acc = mn__warp_sum(acc);
                    if (lane == i) a.y[((b * T + t) * H + h) * P + p0 + 4 * w + i] = acc;
                }
            }
        }
    }
    if (a.ht) {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < MN__SSD_NJ; j++) {
                size_t p = p0 + 4 * w + i, n = lane + 32 * j;
                if (n < N) a.ht[hs + p * N + n] = s[i][j];
            }
    }
}

// shared memory of the backward kernel (floats): the sub-chunks' entering states (NS,16,N), the staged
// X (SUB,16), a (SUB), B, C (SUB,N), dy (SUB,16), and the per-warp partial sums of dC, dB (SUB,4,N)
// and da (SUB,4)
static size_t mn__ssd_bwd_smem(size_t N) {
    return (MN__SSD_NS * MN__SSD_RT * N + 2 * MN__SSD_SUB * MN__SSD_RT + MN__SSD_SUB + 2 * MN__SSD_SUB * N +
            2 * MN__SSD_SUB * 4 * N + MN__SSD_SUB * 4) * sizeof(float);
}
// Stages tokens u0 .. u0+L-1 of head (b,h): X's 16 rows, a, B, and with C (when cs) C and dy
__device__ __forceinline__ void mn__ssd_stage(const mn__ssd_args& a, size_t b, size_t h, size_t p0, size_t u0,
                                              size_t L, float* xs, float* as, float* bs, float* cs, float* dys) {
    const size_t H = a.H, P = a.P, N = a.N, T = a.T;
    for (size_t e = threadIdx.x; e < L * N; e += blockDim.x) {
        size_t tt = e / N, n = e % N, r = (b * T + u0 + tt) * H + h;
        bs[tt * N + n] = a.Bm[r * N + n];
        if (cs) cs[tt * N + n] = a.Cm[r * N + n];
    }
    for (size_t e = threadIdx.x; e < L * MN__SSD_RT; e += blockDim.x) {
        size_t tt = e / MN__SSD_RT, i = e % MN__SSD_RT, r = (b * T + u0 + tt) * H + h;
        xs[e] = a.X[r * P + p0 + i];
        if (cs) dys[e] = a.dy[r * P + p0 + i];
    }
    if (threadIdx.x < L) as[threadIdx.x] = mn__ssd_tr(a.A[(b * T + u0 + threadIdx.x) * H + h], a.amode);
}
// one step of the 16 x N state tile from the staged token tt: S = a S + x b^T
__device__ __forceinline__ void mn__ssd_advance(float (*s)[MN__SSD_NJ], const float* xs, const float* as,
                                                const float* bs, size_t tt, size_t N, int w, int lane) {
    const float at = as[tt];
#pragma unroll
    for (int j = 0; j < MN__SSD_NJ; j++) {
        size_t n = lane + 32 * j;
        float bj = n < N ? bs[tt * N + n] : 0.f;
#pragma unroll
        for (int i = 0; i < 4; i++) s[i][j] = fmaf(at, s[i][j], xs[tt * MN__SSD_RT + 4 * w + i] * bj);
    }
}

// Backward (pass 2; a.ck from pass 1). Walking t backwards with dS = dL/dS_t (dht at T-1), as mesanet.h:
//   dC_t += S_t^T dy_t ; dS += dy_t C_t^T ; dX_t += dS B_t ; dB_t += dS^T X_t ;
//   da_t = <S_{t-1}, dS>, dA_t += a_t da_t (log-decays) or da_t (transitions) ; dS = a_t dS ; dh0 += dS.
// Grid (P/16, B*H), 128 threads, mn__ssd_bwd_smem(N) bytes of dynamic shared memory.
__global__ void __launch_bounds__(128) mn__k_ssd_bwd(mn__ssd_args a) {
    extern __shared__ float sm[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t H = a.H, P = a.P, N = a.N, T = a.T, bh = blockIdx.y, b = bh / H, h = bh % H;
    const size_t p0 = (size_t)blockIdx.x * MN__SSD_RT, hs = bh * P * N;
    float* sub = sm;                                    // (NS,16,N) the sub-chunks' entering states
    float* xs = sub + MN__SSD_NS * MN__SSD_RT * N;      // (SUB,16)
    float* as = xs + MN__SSD_SUB * MN__SSD_RT;          // (SUB)
    float* bs = as + MN__SSD_SUB;                       // (SUB,N)
    float* cs = bs + MN__SSD_SUB * N;                   // (SUB,N)
    float* dys = cs + MN__SSD_SUB * N;                  // (SUB,16)
    float* rC = dys + MN__SSD_SUB * MN__SSD_RT;         // (SUB,4,N)
    float* rB = rC + MN__SSD_SUB * 4 * N;               // (SUB,4,N)
    float* rA = rB + MN__SSD_SUB * 4 * N;               // (SUB,4)
    float d[4][MN__SSD_NJ], s[4][MN__SSD_NJ];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < MN__SSD_NJ; j++) {
            size_t p = p0 + 4 * w + i, n = lane + 32 * j;
            d[i][j] = n < N && a.dht ? a.dht[hs + p * N + n] : 0.f;
        }
    for (size_t c = a.NC; c-- > 0;) {
        const size_t t0 = c * MN__SSD_CK, L = T - t0 < MN__SSD_CK ? T - t0 : MN__SSD_CK;
        const size_t nsub = (L + MN__SSD_SUB - 1) / MN__SSD_SUB;
        const float* ck = a.ck + (bh * a.NC + c) * P * N;
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < MN__SSD_NJ; j++) {
                size_t p = p0 + 4 * w + i, n = lane + 32 * j;
                s[i][j] = n < N ? ck[p * N + n] : 0.f;
            }
        // the chunk forward once: the state entering each sub-chunk into sub (each thread its own entries)
        for (size_t k = 0; k < nsub; k++) {
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < MN__SSD_NJ; j++) {
                    size_t n = lane + 32 * j;
                    if (n < N) sub[(k * MN__SSD_RT + 4 * w + i) * N + n] = s[i][j];
                }
            if (k + 1 == nsub) break;
            __syncthreads();
            mn__ssd_stage(a, b, h, p0, t0 + k * MN__SSD_SUB, MN__SSD_SUB, xs, as, bs, NULL, NULL);
            __syncthreads();
            for (size_t tt = 0; tt < MN__SSD_SUB; tt++) mn__ssd_advance(s, xs, as, bs, tt, N, w, lane);
        }
        // the sub-chunks backwards
        for (size_t k = nsub; k-- > 0;) {
            const size_t u0 = t0 + k * MN__SSD_SUB, Lk = T - u0 < MN__SSD_SUB ? T - u0 : MN__SSD_SUB;
            __syncthreads();                            // the previous staging and partial sums are consumed
            mn__ssd_stage(a, b, h, p0, u0, Lk, xs, as, bs, cs, dys);
            __syncthreads();
            for (size_t tt = Lk; tt-- > 0;) {
                float sp[4][MN__SSD_NJ];                // S_{t-1}: the sub-chunk's entering state, tt steps on
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < MN__SSD_NJ; j++) {
                        size_t n = lane + 32 * j;
                        sp[i][j] = n < N ? sub[(k * MN__SSD_RT + 4 * w + i) * N + n] : 0.f;
                    }
                for (size_t v = 0; v < tt; v++) mn__ssd_advance(sp, xs, as, bs, v, N, w, lane);
                const float at = as[tt];
                float bj[MN__SSD_NJ], cj[MN__SSD_NJ], pc[MN__SSD_NJ], pb[MN__SSD_NJ], da = 0.f;
#pragma unroll
                for (int j = 0; j < MN__SSD_NJ; j++) {
                    size_t n = lane + 32 * j;
                    bj[j] = n < N ? bs[tt * N + n] : 0.f;
                    cj[j] = n < N ? cs[tt * N + n] : 0.f;
                    pc[j] = 0.f; pb[j] = 0.f;
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float x = xs[tt * MN__SSD_RT + 4 * w + i], g = dys[tt * MN__SSD_RT + 4 * w + i];
                    float dx = 0.f;
#pragma unroll
                    for (int j = 0; j < MN__SSD_NJ; j++) {
                        float st = fmaf(at, sp[i][j], x * bj[j]);     // S_t
                        pc[j] = fmaf(st, g, pc[j]);                   // dC_t: S_t^T dy_t (this warp's rows)
                        d[i][j] = fmaf(g, cj[j], d[i][j]);            // dS += dy_t C_t^T
                        dx = fmaf(d[i][j], bj[j], dx);                // dX_t = dS B_t
                        pb[j] = fmaf(d[i][j], x, pb[j]);              // dB_t: dS^T X_t (this warp's rows)
                        da = fmaf(sp[i][j], d[i][j], da);             // da_t = <S_{t-1}, dS>
                        d[i][j] *= at;                                // dS = a_t dS: dL/dS_{t-1}
                    }
                    dx = mn__warp_sum(dx);
                    if (lane == i) a.dX[((b * T + u0 + tt) * H + h) * P + p0 + 4 * w + i] += dx;
                }
#pragma unroll
                for (int j = 0; j < MN__SSD_NJ; j++) {
                    size_t n = lane + 32 * j;
                    if (n < N) { rC[(tt * 4 + w) * N + n] = pc[j]; rB[(tt * 4 + w) * N + n] = pb[j]; }
                }
                da = mn__warp_sum(da);
                if (lane == 0) rA[tt * 4 + w] = da;
            }
            __syncthreads();
            // the block's 16 rows summed (warps in order), then added to the head's sums
            for (size_t e = threadIdx.x; e < Lk * N; e += blockDim.x) {
                size_t tt = e / N, n = e % N, r = (b * T + u0 + tt) * H + h;
                const float* c4 = rC + tt * 4 * N + n;
                const float* b4 = rB + tt * 4 * N + n;
                atomicAdd(a.dC + r * N + n, ((c4[0] + c4[N]) + c4[2 * N]) + c4[3 * N]);
                atomicAdd(a.dB + r * N + n, ((b4[0] + b4[N]) + b4[2 * N]) + b4[3 * N]);
            }
            if (a.dA && threadIdx.x < Lk) {
                size_t tt = threadIdx.x, r = (b * T + u0 + tt) * H + h;
                float s4 = ((rA[tt * 4] + rA[tt * 4 + 1]) + rA[tt * 4 + 2]) + rA[tt * 4 + 3];
                atomicAdd(a.dA + r, a.amode == MN_SSD_TRANSITION ? s4 : as[tt] * s4);
            }
        }
    }
    if (a.dh0) {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < MN__SSD_NJ; j++) {
                size_t p = p0 + 4 * w + i, n = lane + 32 * j;
                if (n < N) a.dh0[hs + p * N + n] += d[i][j];
            }
    }
}

// Decode step: one warp per (sequence x head, row p); grid (B*H, ceil(P/8)), 256 threads
__global__ void mn__k_ssd_step(float* y, float* state, const float* X, const float* A, const float* Bm,
                               const float* Cm, size_t P, size_t N, int amode) {
    const size_t bh = blockIdx.x, p = (size_t)blockIdx.y * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (p >= P) return;                             // the whole warp: p is the warp's
    const float at = mn__ssd_tr(A[bh], amode), x = X[bh * P + p];
    float* s = state + (bh * P + p) * N;
    const float *bb = Bm + bh * N, *cc = Cm + bh * N;
    float acc = 0.f;
    for (size_t n = lane; n < N; n += 32) {
        float v = fmaf(at, s[n], x * bb[n]);
        s[n] = v;
        acc = fmaf(v, cc[n], acc);
    }
    acc = mn__warp_sum(acc);
    if (lane == 0) y[bh * P + p] = acc;
}

// ---- the chunkwise form's signed-transition kernels (see the top of the section) ------------------
#define MN__SSD_GMIN (-24.f)       // floor of log|a|: a transition of 0 decays by e^-24
#define MN__SSD_TINY 0.00390625f   // |a| < 2^-8: dA by mn__k_ssd_sfix, not dg / a

// The running sign sg (B,T,H) = prod_{l<=t} sign(a_l) (a < 0 a flip; 0 counts as +) and g (B,T,H) =
// max(log|a|, MN__SSD_GMIN) (NaN stays NaN). One block of 256 threads per (sequence, head), tiles of 256
// tokens: the flips' parity up to each token from a warp ballot, the earlier warps' and tiles' parities.
__global__ void __launch_bounds__(256) mn__k_ssd_sign(float* sg, float* g, const float* A, unsigned T_, unsigned H_) {
    __shared__ unsigned wpar[8], carry;
    const size_t T = T_, H = H_, bh = blockIdx.x, b = bh / H, h = bh % H;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const unsigned le = lane == 31 ? 0xffffffffu : (2u << lane) - 1u;   // the lanes up to this one
    if (threadIdx.x == 0) carry = 0;
    for (size_t t0 = 0; t0 < T; t0 += 256) {
        const size_t t = t0 + threadIdx.x, r = (b * T + t) * H + h;
        const float a = t < T ? A[r] : 1.f;
        const unsigned neg = __ballot_sync(0xffffffffu, a < 0.f);
        if (lane == 0) wpar[w] = __popc(neg) & 1u;
        __syncthreads();                            // wpar and carry published
        unsigned par = carry ^ (__popc(neg & le) & 1u);
        for (int v = 0; v < w; v++) par ^= wpar[v];
        if (t < T) {
            const float l = logf(fabsf(a));         // -inf for 0, NaN for NaN
            sg[r] = par ? -1.f : 1.f;
            g[r] = l < MN__SSD_GMIN ? MN__SSD_GMIN : l;
        }
        __syncthreads();                            // every read of wpar and carry done
        if (threadIdx.x == 0) {
            unsigned c = carry;
            for (int v = 0; v < 8; v++) c ^= wpar[v];
            carry = c;
        }
        __syncthreads();                            // before the next tile's wpar
    }
}
// o1 = sg i1, o2 = sg i2 over n entries, sg one value per N of them (per (b,t,h)): B' and C' (out of
// place), dB and dC (in place: o == i)
__global__ void mn__k_ssd_flip(float* o1, float* o2, const float* i1, const float* i2, const float* sg, size_t n,
                               size_t N) {
    MN__FOR(i, n) {
        const float s = sg[i / N];
        o1[i] = s * i1[i];
        o2[i] = s * i2[i];
    }
}
// dA (B,T,H) += dg / a where |a| >= MN__SSD_TINY (NaN too: it propagates); the others by mn__k_ssd_sfix
__global__ void mn__k_ssd_sda(float* dA, const float* dg, const float* A, size_t n) {
    MN__FOR(r, n) {
        const float a = A[r];
        if (!(fabsf(a) < MN__SSD_TINY)) dA[r] += dg[r] / a;
    }
}
// dA (B,T,H) += <S_{t-1}, dS_t> for the tokens with |a_t| < MN__SSD_TINY, from the GLA op's workspace
// after its backward: S (B H, NT+1, D, D) the state entering each chunk, dS (B H, NT, D, D) the gradient
// leaving it (from the later chunks), gam (B,T,H) the cumulative log-gates from each chunk's start. In the
// sign-flipped system (q = C', k = B', v = X, dout = dy), for token t = row r of chunk n (gam_{-1} = 0, L
// the chunk's last row):
//   S'_{t-1} = e^{gam_{r-1}} S_n + sum_{s<r} e^{gam_{r-1} - gam_s} k_s v_s^T
//   dS'_t   = e^{gam_L - gam_r} dS_n + sum_{r<=i<=L} e^{gam_i - gam_r} q_i dout_i^T
// (every exponent <= 0 for |a| <= 1, and the one of token t itself, log|a_t|, is in none), and
// <S_{t-1}, dS_t> = sg_{t-1} sg_t <S'_{t-1}, dS'_t> = sign(a_t) <S'_{t-1}, dS'_t>. One block of 512 threads
// per (chunk, sequence x head); a chunk without a tiny |a| returns at once. The chunk's q, k, v, dout
// are staged in shared memory (4 x 64 x D floats); thread entries idx = d D + e of the state (key d,
// value e: a warp's 32 share d). fp32, sums of <= 64 terms per entry, then a block sum.
static size_t mn__ssd_sfix_smem(size_t D) { return 4 * MN__GC * D * sizeof(float); }
__global__ void __launch_bounds__(512) mn__k_ssd_sfix(float* dA, const float* A, const float* q, const float* k,
                                                     const float* v, const float* dout, const float* S,
                                                     const float* dS, const float* gam, unsigned T_, unsigned H_,
                                                     unsigned NT_, unsigned D_) {
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __shared__ float sgam[MN__GC], swt[MN__GC], red[32];
    __shared__ int sfl[MN__GC];
    const size_t T = T_, H = H_, NT = NT_, D = D_, n = blockIdx.x, bh = blockIdx.y, b = bh / H, h = bh % H;
    const size_t t0 = n * MN__GC, E = D * D;
    const int nr = (int)(T - t0 < MN__GC ? T - t0 : MN__GC), tid = threadIdx.x;
    int fl = 0;
    if (tid < MN__GC) {
        fl = tid < nr && fabsf(A[(b * T + t0 + tid) * H + h]) < MN__SSD_TINY;
        sfl[tid] = fl;
        sgam[tid] = tid < nr ? gam[(b * T + t0 + tid) * H + h] : 0.f;
    }
    if (!__syncthreads_or(fl)) return;              // the whole block: no tiny |a| in this chunk
    float *sq = (float*)mn__smem, *sk = sq + MN__GC * D, *sv = sk + MN__GC * D, *so = sv + MN__GC * D;
    for (size_t e = tid; e < (size_t)nr * D; e += blockDim.x) {
        const size_t s = e / D, c = e % D, at = ((b * T + t0 + s) * H + h) * D + c;
        sq[e] = q[at]; sk[e] = k[at]; sv[e] = v[at]; so[e] = dout[at];
    }
    const float *Sn = S + (bh * (NT + 1) + n) * E, *Dn = dS + (bh * NT + n) * E, gL = sgam[nr - 1];
    for (int r = 0; r < nr; r++) {
        if (!sfl[r]) continue;                      // the same for every thread
        const float gr1 = r ? sgam[r - 1] : 0.f, gr = sgam[r], eS = expf(gr1), eD = expf(gL - gr);
        __syncthreads();                            // the staging, or the previous token's weights, consumed
        if (tid < nr) swt[tid] = tid < r ? expf(gr1 - sgam[tid]) : expf(sgam[tid] - gr);
        __syncthreads();
        float acc = 0.f;
        for (size_t idx = tid; idx < E; idx += blockDim.x) {
            const size_t d = idx / D, c = idx % D;
            float st = eS * Sn[idx], ds = eD * Dn[idx];
            for (int s = 0; s < r; s++) st = fmaf(swt[s] * sk[s * D + d], sv[s * D + c], st);
            for (int i = r; i < nr; i++) ds = fmaf(swt[i] * sq[i * D + d], so[i * D + c], ds);
            acc = fmaf(st, ds, acc);
        }
        acc = mn__block_sum(acc, red);
        if (tid == 0) {
            const size_t at = (b * T + t0 + r) * H + h;
            dA[at] += A[at] < 0.f ? -acc : acc;
        }
    }
}

// ---- drivers ----------------------------------------------------------------------------------
static int mn__ssd_check(mn_cuda_ctx* ctx, const char* who, size_t B, size_t H, size_t P, size_t N, int amode) {
    if (amode != MN_SSD_LOG_DECAY && amode != MN_SSD_TRANSITION)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "amode must be MN_SSD_LOG_DECAY or MN_SSD_TRANSITION", __LINE__);
    if (P == 0 || P % 16 || P > 128 || N == 0 || N % 16 || N > 128)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs P and N multiples of 16 up to 128", __LINE__);
    if (B * H == 0 || B * H > 65535) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs 0 < B*H <= 65535", __LINE__);
    return MN_OK;
}
static mn__ssd_args mn__ssd_args_of(const float* X, const float* A, const float* Bm, const float* Cm,
                                    const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, int amode) {
    mn__ssd_args a;
    memset(&a, 0, sizeof a);
    a.X = X; a.A = A; a.Bm = Bm; a.Cm = Cm; a.h0 = h0;
    a.B = (unsigned)B; a.T = (unsigned)T; a.H = (unsigned)H; a.P = (unsigned)P; a.N = (unsigned)N;
    a.NC = (unsigned)mn__ssd_nck(T); a.amode = amode;
    return a;
}
size_t mn_cuda_ssd_work_size_recurrent(size_t B, size_t T, size_t H, size_t P, size_t N) {
    return B * H * mn__ssd_nck(T) * P * N;
}
// the chunkwise form's workspace: the GLA op's, then (signed transitions) B', C' (B,T,H,N) and sg, g,
// dg (B,T,H), each from a 64-float boundary (16-byte aligned for the GLA op's loads)
typedef struct mn__ssd_sws { float *bs, *cs, *sg, *g, *dg; } mn__ssd_sws;
static size_t mn__ssd_slayout(mn__ssd_sws* w, float* base, size_t B, size_t T, size_t H, size_t N) {
    size_t off = mn_cuda_gla_work_size(B, T, H, N, N, MN__GC), nb = B * T * H * N, na = B * T * H;
#define MN__SSP(ptr, n) do { w->ptr = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)
    MN__SSP(bs, nb); MN__SSP(cs, nb); MN__SSP(sg, na); MN__SSP(g, na); MN__SSP(dg, na);
#undef MN__SSP
    return off;
}
size_t mn_cuda_ssd_work_size_chunk(size_t B, size_t T, size_t H, size_t P, size_t N) {
    mn__ssd_sws w;
    (void)P;
    return mn__ssd_slayout(&w, NULL, B, T, H, N);
}
size_t mn_cuda_ssd_work_size(size_t B, size_t T, size_t H, size_t P, size_t N, size_t C) {
    size_t r = mn_cuda_ssd_work_size_recurrent(B, T, H, P, N);
    (void)C;
    if (P == N && (P == 64 || P == 128)) {
        size_t g = mn_cuda_ssd_work_size_chunk(B, T, H, P, N);
        if (g > r) r = g;
    }
    return r;
}
int mn_cuda_ssd_forward_recurrent(mn_cuda_ctx* ctx, float* y, float* ht, const float* X, const float* A,
                                  const float* Bm, const float* Cm, const float* h0, size_t B, size_t T, size_t H,
                                  size_t P, size_t N, int amode) {
    MN__TRY(mn__ssd_check(ctx, "mn_cuda_ssd_forward_recurrent", B, H, P, N, amode));
    if (T > 0xffffffffu) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_forward_recurrent", "T too large", __LINE__);
    mn__ssd_args a = mn__ssd_args_of(X, A, Bm, Cm, h0, B, T, H, P, N, amode);
    a.y = y; a.ht = ht;
    mn__k_ssd_fwd<<<dim3((unsigned)(P / MN__SSD_RT), (unsigned)(B * H)), 128, 0, MN__STREAM>>>(a);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_ssd_backward_recurrent(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, float* dh0,
                                   const float* dy, const float* dht, const float* X, const float* A,
                                   const float* Bm, const float* Cm, const float* h0, size_t B, size_t T, size_t H,
                                   size_t P, size_t N, int amode, float* work) {
    static int smem_set = 0;
    const char* who = "mn_cuda_ssd_backward_recurrent";
    MN__TRY(mn__ssd_check(ctx, who, B, H, P, N, amode));
    if (T > 0xffffffffu) return mn__fail(ctx, MN_ERR_CONFIG, who, "T too large", __LINE__);
    if (T > 0 && !work) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs the workspace", __LINE__);
    if (!smem_set) {   // the largest shape's (N = 128): every smaller N fits under it
        MN__CU(cudaFuncSetAttribute(mn__k_ssd_bwd, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)mn__ssd_bwd_smem(128)));
        smem_set = 1;
    }
    mn__ssd_args a = mn__ssd_args_of(X, A, Bm, Cm, h0, B, T, H, P, N, amode);
    const dim3 grid((unsigned)(P / MN__SSD_RT), (unsigned)(B * H));
    a.ck = work;                                    // pass 1: the checkpoints
    mn__k_ssd_fwd<<<grid, 128, 0, MN__STREAM>>>(a);
    MN__LAUNCHED();
    a.dX = dX; a.dA = dA; a.dB = dB; a.dC = dC; a.dh0 = dh0; a.dy = dy; a.dht = dht;
    mn__k_ssd_bwd<<<grid, 128, mn__ssd_bwd_smem(N), MN__STREAM>>>(a);
    MN__LAUNCHED();
    return MN_OK;
}
// what the chunkwise form takes: either amode, P == N in {64, 128}, T > 0, B*H <= 65535, the tensors in
// p (np of them) 16-byte aligned; writes the reason into *why when it does not (NULL: none)
static int mn__ssd_chunked(int amode, size_t B, size_t T, size_t H, size_t P, size_t N, const void* const* p, int np,
                           const char** why) {
    const char* r = NULL;
    if (amode != MN_SSD_LOG_DECAY && amode != MN_SSD_TRANSITION)
        r = "amode must be MN_SSD_LOG_DECAY or MN_SSD_TRANSITION";
    else if (P != N || (P != 64 && P != 128)) r = "needs P == N in {64, 128}";
    else if (T == 0 || B * H == 0 || B * H > 65535) r = "needs T > 0 and 0 < B*H <= 65535";
    for (int i = 0; !r && i < np; i++)
        if ((uintptr_t)p[i] % 16) r = "tensors must be 16-byte aligned";
    if (why) *why = r;
    return r == NULL;
}
// The chunkwise form runs in 3xTF32 whatever ctx->math: Mamba-2's decays (dt A, down to ~ -2 per token) make
// A's gradient a sum over the sequence that largely cancels; with plain TF32 products it measured 17x its size
// (H200 run 1, the TF32 model case). ctx->math is set to FP32 for the call and restored on every path.
static int mn__ssd_fwd_chunk(mn_cuda_ctx* ctx, float* y, const float* X, const float* A, const float* Bm,
                             const float* Cm, size_t B, size_t T, size_t H, size_t N, int amode, float* work) {
    if (amode == MN_SSD_LOG_DECAY)                  // simple GLA: q = C, k = B, v = X, g = A
        return mn_cuda_gla_forward(ctx, y, NULL, Cm, Bm, X, A, NULL, B, T, H, N, N, 1, 1.0, MN__GC, work);
    mn__ssd_sws w;
    mn__ssd_slayout(&w, work, B, T, H, N);
    const size_t nb = B * T * H * N;
    mn__k_ssd_sign<<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(w.sg, w.g, A, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__k_ssd_flip<<<mn__grid(ctx, nb, 256), 256, 0, MN__STREAM>>>(w.bs, w.cs, Bm, Cm, w.sg, nb, N);
    MN__LAUNCHED();
    return mn_cuda_gla_forward(ctx, y, NULL, w.cs, w.bs, X, w.g, NULL, B, T, H, N, N, 1, 1.0, MN__GC, work);
}
static int mn__ssd_bwd_chunk(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, const float* dy,
                             const float* X, const float* A, const float* Bm, const float* Cm, size_t B, size_t T,
                             size_t H, size_t N, int amode, float* work) {
    static int smem_set = 0;
    if (amode == MN_SSD_LOG_DECAY)
        return mn_cuda_gla_backward(ctx, dC, dB, dX, dA, NULL, dy, NULL, Cm, Bm, X, A, NULL, B, T, H, N, N, 1, 1.0,
                                    MN__GC, work);
    mn__ssd_sws w;
    mn__ssd_slayout(&w, work, B, T, H, N);
    const size_t nb = B * T * H * N, na = B * T * H, NT = (T + MN__GC - 1) / MN__GC;
    const unsigned gb = mn__grid(ctx, nb, 256);
    mn__k_ssd_sign<<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(w.sg, w.g, A, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__k_ssd_flip<<<gb, 256, 0, MN__STREAM>>>(w.bs, w.cs, Bm, Cm, w.sg, nb, N);
    MN__LAUNCHED();
    // dB, dC flipped in place, the op adds dB', dC', flipped back: dB + sg dB' (sg^2 = 1 exactly)
    mn__k_ssd_flip<<<gb, 256, 0, MN__STREAM>>>(dB, dC, dB, dC, w.sg, nb, N);
    MN__LAUNCHED();
    if (dA) MN__CU(cudaMemsetAsync(w.dg, 0, na * sizeof(float), MN__STREAM));
    MN__TRY(mn_cuda_gla_backward(ctx, dC, dB, dX, dA ? w.dg : NULL, NULL, dy, NULL, w.cs, w.bs, X, w.g, NULL, B, T, H,
                                 N, N, 1, 1.0, MN__GC, work));
    mn__k_ssd_flip<<<gb, 256, 0, MN__STREAM>>>(dB, dC, dB, dC, w.sg, nb, N);
    MN__LAUNCHED();
    if (!dA) return MN_OK;
    mn__k_ssd_sda<<<mn__grid(ctx, na, 256), 256, 0, MN__STREAM>>>(dA, w.dg, A, na);
    MN__LAUNCHED();
    if (!smem_set) {   // the largest shape's (N = 128)
        MN__CU(cudaFuncSetAttribute(mn__k_ssd_sfix, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)mn__ssd_sfix_smem(128)));
        smem_set = 1;
    }
    mn__gla_ws gw;                                  // the op's states, state gradients and cumulative gates
    mn__gla_layout(&gw, work, B, T, H, N);
    mn__k_ssd_sfix<<<dim3((unsigned)NT, (unsigned)(B * H)), 512, mn__ssd_sfix_smem(N), MN__STREAM>>>(
        dA, A, w.cs, w.bs, X, dy, gw.S, gw.dS, gw.gam, (unsigned)T, (unsigned)H, (unsigned)NT, (unsigned)N);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_ssd_forward_chunk(mn_cuda_ctx* ctx, float* y, const float* X, const float* A, const float* Bm,
                              const float* Cm, size_t B, size_t T, size_t H, size_t P, size_t N, int amode,
                              float* work) {
    const void* al[5] = { y, X, Bm, Cm, work };
    const char* why;
    if (!mn__ssd_chunked(amode, B, T, H, P, N, al, 5, &why))
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_forward_chunk", why, __LINE__);
    const int math = ctx->math;
    ctx->math = MN_CUDA_MATH_FP32;
    const int r = mn__ssd_fwd_chunk(ctx, y, X, A, Bm, Cm, B, T, H, N, amode, work);
    ctx->math = math;
    return r;
}
int mn_cuda_ssd_backward_chunk(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, const float* dy,
                               const float* X, const float* A, const float* Bm, const float* Cm, size_t B, size_t T,
                               size_t H, size_t P, size_t N, int amode, float* work) {
    const void* al[5] = { dy, X, Bm, Cm, work };
    const char* why;
    if (!mn__ssd_chunked(amode, B, T, H, P, N, al, 5, &why))
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_backward_chunk", why, __LINE__);
    const int math = ctx->math;
    ctx->math = MN_CUDA_MATH_FP32;
    const int r = mn__ssd_bwd_chunk(ctx, dX, dA, dB, dC, dy, X, A, Bm, Cm, B, T, H, N, amode, work);
    ctx->math = math;
    return r;
}
int mn_cuda_ssd_forward(mn_cuda_ctx* ctx, float* y, float* ht, const float* X, const float* A, const float* Bm,
                        const float* Cm, const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C,
                        int amode, float* work) {
    const void* al[5] = { y, X, Bm, Cm, work };
    if (C < 1) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_forward", "chunk length C must be >= 1", __LINE__);
    if (!ht && !h0 && mn__ssd_chunked(amode, B, T, H, P, N, al, 5, NULL))
        return mn_cuda_ssd_forward_chunk(ctx, y, X, A, Bm, Cm, B, T, H, P, N, amode, work);
    return mn_cuda_ssd_forward_recurrent(ctx, y, ht, X, A, Bm, Cm, h0, B, T, H, P, N, amode);
}
int mn_cuda_ssd_backward(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, float* dh0, const float* dy,
                         const float* dht, const float* X, const float* A, const float* Bm, const float* Cm,
                         const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C, int amode,
                         float* work) {
    const void* al[5] = { dy, X, Bm, Cm, work };
    if (C < 1) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_backward", "chunk length C must be >= 1", __LINE__);
    if (!dht && !dh0 && !h0 && mn__ssd_chunked(amode, B, T, H, P, N, al, 5, NULL))
        return mn_cuda_ssd_backward_chunk(ctx, dX, dA, dB, dC, dy, X, A, Bm, Cm, B, T, H, P, N, amode, work);
    return mn_cuda_ssd_backward_recurrent(ctx, dX, dA, dB, dC, dh0, dy, dht, X, A, Bm, Cm, h0, B, T, H, P, N, amode,
                                          work);
}
int mn_cuda_ssd_step(mn_cuda_ctx* ctx, float* y, float* state, const float* X, const float* A, const float* Bm,
                     const float* Cm, size_t B, size_t H, size_t P, size_t N, int amode) {
    if (amode != MN_SSD_LOG_DECAY && amode != MN_SSD_TRANSITION)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_step", "amode must be MN_SSD_LOG_DECAY or MN_SSD_TRANSITION",
                        __LINE__);
    if (B * H == 0 || B * H > 0x7fffffff || P == 0 || (P + 7) / 8 > 65535 || N == 0)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_step", "needs 0 < B*H < 2^31, 0 < P <= 524280, N > 0",
                        __LINE__);
    mn__k_ssd_step<<<dim3((unsigned)(B * H), (unsigned)((P + 7) / 8)), 256, 0, MN__STREAM>>>(y, state, X, A, Bm, Cm,
                                                                                          P, N, amode);
    MN__LAUNCHED();
    return MN_OK;
}
