// >>cuda_rglru
// defines: mn_cuda_rglru_{forward,backward,step,work_size}
//
// The RG-LRU of Griffin / Hawk (mesanet.h >>rglru) on the GPU. The recurrence is diagonal: every
// channel of every sequence is its own scalar scan h_t = a_t h_{t-1} + b_t, so there is nothing to
// multiply on the tensor cores inside it and no chunkwise form is needed: one thread per
// (sequence, channel) walks t, and the work per token is ~30 flops against ~24 bytes moved, well
// below the H200's ratio (~15 flops per byte in fp32): bandwidth-bound, as it should be.
//   - the gates' pre-activations: per gate, the NH block products Z_h (BT,bw) = X_h (BT,bw) w[h] (bw,bw)
//     as ONE strided-batched cuBLAS call (the blocks are bw columns apart in rows W apart), written
//     straight into the gates buffer;
//   - the forward scan (mn__k_rglru_fwd): adds the biases, takes the sigmoids (saved in place, as the
//     CPU saves the gates), and runs the recurrence. Threads are consecutive channels, so every load
//     and store of a step is one coalesced row segment. Only the h chain is sequential: each thread
//     first loads MN__RGLRU_U steps' inputs (independent loads, all in flight), then computes them.
//     The parallelism is B W threads (10240 at the anchor's Hawk layer: 160 blocks of 64, ~1.2 per SM),
//     so the bandwidth comes from the loads each thread keeps in flight, not from occupancy; a
//     time-chunked two-level scan (chunk products, then a carry pass) would add parallelism for small
//     B W at the price of a second read, and is left for when a profile asks for it;
//   - the backward (mn__k_rglru_bwd): the reverse scan with d = dy_t + a_{t+1} d_{t+1}, the same
//     tiling walking t down; it writes dx's direct term and the gates' pre-activation gradients
//     dZx, dZa (workspace) and a per-(sequence, channel) partial of the a_param gradient; then the
//     block products dx += dZ w^T, dw += X^T dZ (batched cuBLAS again), the bias gradients as
//     deterministic column sums (mn__colsum), and the a_param gradient summed over the sequences in a
//     fixed order (mn__k_rglru_dparam): no atomics, the same bits every run;
//   - the decode step (mn__k_rglru_step): one launch, a block per (gate block, 32 of its columns, 8
//     sequences): the 8 sequences' inputs of the block in shared memory, a warp per slice of the rows
//     (its 32 lanes the columns: coalesced), so a block reads each of its weights once for its 8
//     sequences; at batch 1 the step moves the gate weights (2 W bw floats), not the state (W).
// Precision: fp32 throughout (the CPU: double). 1 - a^2 is formed as -expm1(2 log a) (no cancellation
// as a -> 1, where the CPU's 1 - exp(2 log a) in double is exact enough), softplus(a_param) once per
// thread in double; the a_param gradient's sum over time in double. The square root's derivative is
// clipped as the reference's (1 / sqrt(max(4u, 1e-6))). cuBLAS products fp32 or TF32 by ctx->math.

#define MN__RGLRU_THREADS 64    // threads per block of the scans: consecutive channels (B W / 64 blocks)
#define MN__RGLRU_U 16          // time steps loaded ahead per tile of a scan
#define MN__RGLRU_BB 8          // sequences per block of the decode step

__device__ __forceinline__ float mn__rglru_sigmoid(float z) { return 1.f / (1.f + expf(-z)); }
// torch's softplus (threshold 20) and its derivative, in double as the CPU
__device__ __forceinline__ double mn__rglru_softplus(double x) { return x > 20 ? x : log1p(exp(x)); }
__device__ __forceinline__ double mn__rglru_dsoftplus(double x) { return x > 20 ? 1.0 : 1.0 / (1.0 + exp(-x)); }
// is token t of sequence b a reset? (segment_pos given: where it is 0; else t = 0 without h0)
__device__ __forceinline__ int mn__rglru_reset(const int* segpos, const float* h0, size_t b, size_t t, size_t T) {
    return segpos ? segpos[b * T + t] == 0 : (t == 0 && h0 == NULL);
}

// Forward scan: thread i = b W + w of the B W (sequence, channel) pairs. gates (2,B,T,W) holds the
// pre-activations on entry (x W of each block, from cuBLAS) and the sigmoids on exit; y (B,T,W);
// x (B,T,W); a_param, bx, ba (W); h0, ht (B,W) or NULL (may alias: read first, written last).
__global__ void __launch_bounds__(MN__RGLRU_THREADS) mn__k_rglru_fwd(float* __restrict__ y, float* ht,
                                                                    float* __restrict__ gates,
                                                                    const float* __restrict__ x,
                                                                    const float* __restrict__ a_param,
                                                                    const float* __restrict__ bx,
                                                                    const float* __restrict__ ba, const float* h0,
                                                                    const int* __restrict__ segpos, size_t B,
                                                                    size_t T, size_t W, float c) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= B * W) return;
    const size_t b = i / W, w = i % W, base = b * T * W + w;   // token t of this pair: base + t W
    float* gx = gates;
    float* ga = gates + B * T * W;
    const float csp = c * (float)mn__rglru_softplus(a_param[w]), bxw = bx[w], baw = ba[w];
    float hp = h0 ? h0[i] : 0.f;
    for (size_t t0 = 0; t0 < T; t0 += MN__RGLRU_U) {
        float zx[MN__RGLRU_U], za[MN__RGLRU_U], xv[MN__RGLRU_U];
        int rs[MN__RGLRU_U];
#pragma unroll
        for (int u = 0; u < MN__RGLRU_U; u++) {        // the tile's inputs first: independent loads
            size_t t = t0 + u, j = base + t * W;
            zx[u] = za[u] = xv[u] = 0.f; rs[u] = 0;
            if (t < T) { zx[u] = gx[j]; za[u] = ga[j]; xv[u] = x[j]; rs[u] = mn__rglru_reset(segpos, h0, b, t, T); }
        }
#pragma unroll
        for (int u = 0; u < MN__RGLRU_U; u++) {
            size_t t = t0 + u, j = base + t * W;
            if (t >= T) break;
            float g = mn__rglru_sigmoid(zx[u] + bxw), r = mn__rglru_sigmoid(za[u] + baw), xg = xv[u] * g, h;
            if (rs[u]) h = xg;                          // a := 0, multiplier := 1
            else {
                float la = -csp * r;                    // log a_t = -c ga softplus(a_param)
                h = expf(la) * hp + sqrtf(-expm1f(2.f * la)) * xg;
            }
            gx[j] = g; ga[j] = r; y[j] = h;
            hp = h;
        }
    }
    if (ht) ht[i] = hp;                                 // T = 0: h0 (or 0), as the CPU
}

// Backward scan (see mesanet.h's mn_rglru_backward for the derivation), walking t down with
// d = dL/dh_t = dy_t + carry, carry = a_{t+1} d_{t+1} (dht at the end):
//   dx_t = d g m ; dZx = d x m g (1 - g) ; du = d x g / sqrt(max(4u, 1e-6)) ; dla = a d h_{t-1} - 2 a^2 du ;
//   dZa = -c sp dla r (1 - r) ; dsp += -c r dla ; carry = a d   (m = sqrt(u), u = 1 - a^2, r = ga)
// and at a reset dx_t = d g, dZx = d x g (1 - g), dZa = 0, carry = 0. dx (B,T,W) written (acc = 0) or
// added to (acc = 1) with the direct term; dzx, dza (B,T,W) written; part (B,W) the thread's dsp;
// dh0 (B,W) += the final carry (when given); h_{t-1} is the saved y_{t-1} (h0 or 0 before t = 0).
__global__ void __launch_bounds__(MN__RGLRU_THREADS) mn__k_rglru_bwd(float* __restrict__ dx, float* __restrict__ dzx,
                                                                    float* __restrict__ dza,
                                                                    float* __restrict__ part, float* dh0,
                                                                    const float* __restrict__ dy, const float* dht,
                                                                    const float* __restrict__ y,
                                                                    const float* __restrict__ gates,
                                                                    const float* __restrict__ x,
                                                                    const float* __restrict__ a_param,
                                                                    const float* h0, const int* __restrict__ segpos,
                                                                    size_t B, size_t T, size_t W, float c, int acc) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= B * W) return;
    const size_t b = i / W, w = i % W, base = b * T * W + w;
    const float* gx = gates;
    const float* ga = gates + B * T * W;
    const float csp = c * (float)mn__rglru_softplus(a_param[w]), hz = h0 ? h0[i] : 0.f;
    float carry = dht ? dht[i] : 0.f;
    double dsp = 0.0;
    for (size_t t1 = T; t1 > 0; t1 -= t1 < MN__RGLRU_U ? t1 : MN__RGLRU_U) {   // tile t1-1, t1-2, .. (>= 0)
        float dv[MN__RGLRU_U], gv[MN__RGLRU_U], rv[MN__RGLRU_U], xv[MN__RGLRU_U], hv[MN__RGLRU_U], dxo[MN__RGLRU_U];
        int rs[MN__RGLRU_U];
#pragma unroll
        for (int u = 0; u < MN__RGLRU_U; u++) {
            dv[u] = gv[u] = rv[u] = xv[u] = hv[u] = dxo[u] = 0.f; rs[u] = 0;
            if ((size_t)u < t1) {
                size_t t = t1 - 1 - u, j = base + t * W;
                dv[u] = dy[j]; gv[u] = gx[j]; rv[u] = ga[j]; xv[u] = x[j];
                hv[u] = t > 0 ? y[j - W] : hz;
                rs[u] = mn__rglru_reset(segpos, h0, b, t, T);
                if (acc) dxo[u] = dx[j];
            }
        }
#pragma unroll
        for (int u = 0; u < MN__RGLRU_U; u++) {
            if ((size_t)u >= t1) break;
            size_t j = base + (t1 - 1 - u) * W;
            float d = dv[u] + carry, g = gv[u], xx = xv[u], ddx, zx, za;
            if (rs[u]) {
                ddx = d * g; zx = d * xx * g * (1.f - g); za = 0.f; carry = 0.f;
            } else {
                float r = rv[u], la = -csp * r, a = expf(la), a2 = expf(2.f * la), uu = -expm1f(2.f * la);
                float m = sqrtf(uu), du = d * xx * g / sqrtf(fmaxf(4.f * uu, 1e-6f));
                float dla = a * d * hv[u] - 2.f * a2 * du;
                ddx = d * g * m; zx = d * xx * m * g * (1.f - g); za = -csp * dla * r * (1.f - r);
                dsp += (double)(-c * r * dla);
                carry = a * d;
            }
            dx[j] = dxo[u] + ddx; dzx[j] = zx; dza[j] = za;
        }
    }
    if (dh0) dh0[i] += carry;
    part[i] = (float)dsp;
}
// da_param (W) += softplus'(a_param) sum_b part[b,w], the sequences in order (deterministic)
__global__ void mn__k_rglru_dparam(float* da_param, const float* part, const float* a_param, size_t B, size_t W) {
    MN__FOR(w, W) {
        double s = 0.0;
        for (size_t b = 0; b < B; b++) s += part[b * W + w];
        da_param[w] += (float)(s * mn__rglru_dsoftplus(a_param[w]));
    }
}

// Decode step: block (h, tile, s) takes columns tile 32 .. tile 32 + 31 of gate block h for sequences
// s BB .. s BB + nb - 1. xs (BB,bw): those sequences' inputs of the block (zero rows past nb). Thread
// (lane, slice) sums the rows i = slice, slice + SL, .. of its column j = tile 32 + lane for both gates:
// z[bb] = sum_i xs[bb,i] w[h,i,j] (a warp reads 32 consecutive weights of a row: coalesced; each weight
// read once per block); the SL slices' partials meet in shared memory, slice 0 adds them in order
// (deterministic) and takes the recurrence's one step for channel w = h bw + j of each sequence.
// y, state (B,W); gates (2,B,W) or NULL; x (B,W); segpos (B) or NULL.
#define MN__RGLRU_SL 8          // row slices of the decode step's block (blockDim 32 x SL)
__global__ void __launch_bounds__(32 * MN__RGLRU_SL) mn__k_rglru_step(float* __restrict__ y, float* __restrict__ state,
                                                                     float* __restrict__ gates,
                                                                     const float* __restrict__ x,
                                                                     const float* __restrict__ a_param,
                                                                     const float* __restrict__ wx,
                                                                     const float* __restrict__ bx,
                                                                     const float* __restrict__ wa,
                                                                     const float* __restrict__ ba,
                                                                     const int* __restrict__ segpos, size_t B,
                                                                     size_t W, size_t bw, float c) {
    extern __shared__ float mn__rglru_xs[];
    __shared__ float red[2][MN__RGLRU_SL][MN__RGLRU_BB][32];
    const size_t tiles = (bw + 31) / 32, h = blockIdx.x / tiles, j = blockIdx.x % tiles * 32 + threadIdx.x;
    const size_t b0 = blockIdx.y * (size_t)MN__RGLRU_BB;
    const size_t nb = B - b0 < MN__RGLRU_BB ? B - b0 : MN__RGLRU_BB;
    for (size_t k = threadIdx.y * 32 + threadIdx.x; k < MN__RGLRU_BB * bw; k += 32 * MN__RGLRU_SL) {
        size_t bb = k / bw, ii = k % bw;
        mn__rglru_xs[k] = bb < nb ? x[(b0 + bb) * W + h * bw + ii] : 0.f;
    }
    __syncthreads();
    float zx[MN__RGLRU_BB], za[MN__RGLRU_BB];
#pragma unroll
    for (int bb = 0; bb < MN__RGLRU_BB; bb++) zx[bb] = za[bb] = 0.f;
    if (j < bw) {
        const float *wxc = wx + h * bw * bw + j, *wac = wa + h * bw * bw + j;   // w[h,i,j] at i bw
        for (size_t ii = threadIdx.y; ii < bw; ii += MN__RGLRU_SL) {
            float wxi = wxc[ii * bw], wai = wac[ii * bw];
#pragma unroll
            for (int bb = 0; bb < MN__RGLRU_BB; bb++) {
                float xi = mn__rglru_xs[bb * bw + ii];   // the same address across the warp: a broadcast
                zx[bb] += xi * wxi; za[bb] += xi * wai;
            }
        }
    }
#pragma unroll
    for (int bb = 0; bb < MN__RGLRU_BB; bb++) {
        red[0][threadIdx.y][bb][threadIdx.x] = zx[bb]; red[1][threadIdx.y][bb][threadIdx.x] = za[bb];
    }
    __syncthreads();
    if (threadIdx.y != 0 || j >= bw) return;
    const size_t w = h * bw + j;
    const float csp = c * (float)mn__rglru_softplus(a_param[w]), bxw = bx[w], baw = ba[w];
#pragma unroll
    for (int bb = 0; bb < MN__RGLRU_BB; bb++) {
        if ((size_t)bb >= nb) break;
        float sx = 0.f, sa = 0.f;
        for (int sl = 0; sl < MN__RGLRU_SL; sl++) {
            sx += red[0][sl][bb][threadIdx.x]; sa += red[1][sl][bb][threadIdx.x];
        }
        size_t k = (b0 + bb) * W + w;
        float g = mn__rglru_sigmoid(sx + bxw), r = mn__rglru_sigmoid(sa + baw);
        float xg = mn__rglru_xs[bb * bw + j] * g, hn;
        if (segpos && segpos[b0 + bb] == 0) hn = xg;
        else {
            float la = -csp * r;
            hn = expf(la) * state[k] + sqrtf(-expm1f(2.f * la)) * xg;
        }
        y[k] = hn; state[k] = hn;
        if (gates) { gates[k] = g; gates[B * W + k] = r; }
    }
}

size_t mn_cuda_rglru_work_size(size_t B, size_t T, size_t W) { return 2 * B * T * W + B * W; }

static int mn__rglru_check(mn_cuda_ctx* ctx, const char* who, size_t W, size_t NH) {
    if (NH < 1 || W % NH != 0)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs NH >= 1 gate blocks that divide the width W", __LINE__);
    return MN_OK;
}
// the gates' block products: Z (BT,W) = BD(X; w) for every block h at once (a batch of NH products
// (BT,bw) x (bw,bw), operands and results bw columns apart in rows W apart)
static int mn__rglru_gates_gemm(mn_cuda_ctx* ctx, float* Z, const float* X, const float* w, size_t BT, size_t W,
                                size_t NH) {
    size_t bw = W / NH;
    return mn__gemm(ctx, 0, 0, BT, bw, bw, 1.f, X, W, bw, w, bw, bw * bw, 0.f, Z, W, bw, NH);
}

int mn_cuda_rglru_forward(mn_cuda_ctx* ctx, float* y, float* ht, float* gates, const float* x, const float* a_param,
                          const float* wx, const float* bx, const float* wa, const float* ba, const float* h0,
                          const int* segment_pos, size_t B, size_t T, size_t W, size_t NH, double c) {
    size_t BT = B * T, n = B * W;
    MN__TRY(mn__rglru_check(ctx, "mn_cuda_rglru_forward", W, NH));
    if (n == 0) return MN_OK;
    MN__TRY(mn__rglru_gates_gemm(ctx, gates, x, wx, BT, W, NH));
    MN__TRY(mn__rglru_gates_gemm(ctx, gates + BT * W, x, wa, BT, W, NH));
    mn__k_rglru_fwd<<<(unsigned)((n + MN__RGLRU_THREADS - 1) / MN__RGLRU_THREADS), MN__RGLRU_THREADS, 0,
                      MN__STREAM>>>(y, ht, gates, x, a_param, bx, ba, h0, segment_pos, B, T, W, (float)c);
    MN__LAUNCHED();
    return MN_OK;
}

// acc = 0: dx is written, not added to (the model's first writer of that buffer); the public
// function accumulates like the CPU
static int mn__rglru_backward(mn_cuda_ctx* ctx, float* dx, float* da_param, float* dwx, float* dbx, float* dwa,
                              float* dba, float* dh0, const float* dy, const float* dht, const float* y,
                              const float* gates, const float* x, const float* a_param, const float* wx,
                              const float* wa, const float* h0, const int* segment_pos, size_t B, size_t T, size_t W,
                              size_t NH, double c, float* work, int acc) {
    size_t BT = B * T, n = B * W, bw;
    MN__TRY(mn__rglru_check(ctx, "mn_cuda_rglru_backward", W, NH));
    if (n == 0) return MN_OK;
    bw = W / NH;
    float *dzx = work, *dza = work + BT * W, *part = work + 2 * BT * W;
    mn__k_rglru_bwd<<<(unsigned)((n + MN__RGLRU_THREADS - 1) / MN__RGLRU_THREADS), MN__RGLRU_THREADS, 0,
                      MN__STREAM>>>(dx, dzx, dza, part, dh0, dy, dht, y, gates, x, a_param, h0, segment_pos, B, T,
                                    W, (float)c, acc);
    MN__LAUNCHED();
    // forward: Z = X_h w[h] + b[h] per block, so: dX_h += dZ_h w[h]^T ; dw[h] += X_h^T dZ_h ; db += colsum dZ
    MN__TRY(mn__gemm(ctx, 0, 1, BT, bw, bw, 1.f, dzx, W, bw, wx, bw, bw * bw, 1.f, dx, W, bw, NH));
    MN__TRY(mn__gemm(ctx, 0, 1, BT, bw, bw, 1.f, dza, W, bw, wa, bw, bw * bw, 1.f, dx, W, bw, NH));
    if (dwx) MN__TRY(mn__gemm(ctx, 1, 0, bw, bw, BT, 1.f, x, W, bw, dzx, W, bw, 1.f, dwx, bw, bw * bw, NH));
    if (dwa) MN__TRY(mn__gemm(ctx, 1, 0, bw, bw, BT, 1.f, x, W, bw, dza, W, bw, 1.f, dwa, bw, bw * bw, NH));
    if (dbx && BT) MN__TRY(mn__colsum(ctx, dbx, dzx, NULL, NULL, BT, W));
    if (dba && BT) MN__TRY(mn__colsum(ctx, dba, dza, NULL, NULL, BT, W));
    if (da_param) {
        mn__k_rglru_dparam<<<mn__grid(ctx, W, 256), 256, 0, MN__STREAM>>>(da_param, part, a_param, B, W);
        MN__LAUNCHED();
    }
    return MN_OK;
}
int mn_cuda_rglru_backward(mn_cuda_ctx* ctx, float* dx, float* da_param, float* dwx, float* dbx, float* dwa,
                           float* dba, float* dh0, const float* dy, const float* dht, const float* y,
                           const float* gates, const float* x, const float* a_param, const float* wx, const float* wa,
                           const float* h0, const int* segment_pos, size_t B, size_t T, size_t W, size_t NH, double c,
                           float* work) {
    return mn__rglru_backward(ctx, dx, da_param, dwx, dbx, dwa, dba, dh0, dy, dht, y, gates, x, a_param, wx, wa, h0,
                              segment_pos, B, T, W, NH, c, work, 1);
}

int mn_cuda_rglru_step(mn_cuda_ctx* ctx, float* y, float* state, const float* x, const float* a_param,
                       const float* wx, const float* bx, const float* wa, const float* ba, const int* segment_pos,
                       size_t B, size_t W, size_t NH, double c, float* work) {
    MN__TRY(mn__rglru_check(ctx, "mn_cuda_rglru_step", W, NH));
    size_t bw = W / NH, tiles = (bw + 31) / 32, nblk = (B + MN__RGLRU_BB - 1) / MN__RGLRU_BB;
    // the inputs' tile (BB bw floats, 16 KB at bw 512) and the partials (16 KB) within the 48 KB default
    if (bw > 512) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_rglru_step", "gate blocks wider than 512", __LINE__);
    if (nblk > 65535 || NH * tiles > 0x7fffffff)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_rglru_step", "more than 524280 sequences", __LINE__);
    if (B * W == 0) return MN_OK;
    dim3 grid((unsigned)(NH * tiles), (unsigned)nblk), block(32, MN__RGLRU_SL);
    mn__k_rglru_step<<<grid, block, MN__RGLRU_BB * bw * sizeof(float), MN__STREAM>>>(
        y, state, work, x, a_param, wx, bx, wa, ba, segment_pos, B, W, bw, (float)c);
    MN__LAUNCHED();
    return MN_OK;
}
