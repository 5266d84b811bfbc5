// mesanet_cuda.cu - the CUDA translation unit of mesanet.h (see mesanet_cuda.h for the contract,
// the precision of each stage and the supported shapes).
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -c (make cuda).
//
// Sections (grep for the anchor; each is named by the prefix it holds, as in mesanet.h):
//   >>cuda            mn_cuda_{init,free,malloc,upload,download,sync}: errors, context, memory; the
//                     row-major cuBLAS wrapper, the tensor-core and async-copy building blocks, the
//                     deterministic column sums
//   >>cuda_matmul     mn_cuda_matmul_*: projections through cuBLAS
//   >>cuda_ops        embedding, RMSNorm, SwiGLU, short conv, L2 norm, RoPE, cross-entropy
//   >>cuda_optim      AdamW, gradient-norm clipping
//   >>cuda_attention  mn_cuda_attention_*: causal softmax attention and SWA, flash-style (fp16 tensor
//                     cores, online softmax, never the T x T matrix), and the decode step with a KV cache
//   >>cuda_mesa       mn_cuda_mesa_*: the Mesa op, chunkwise (decay, state scans, the CG kernel, the
//                     fused backward, the drivers), the decode step, then the tested alternatives
//   >>cuda_gla        mn_cuda_gla_*: linear attention, simple GLA, GLA, chunkwise on the tensor cores
//                     (state scans, scores, output, the backward's passes), the decode step, gated RMSNorm
//   >>cuda_delta_rule mn_cuda_delta_rule_*: DeltaNet / Gated DeltaNet, chunkwise (WY/UT form, batched cuBLAS
//                     products) and the recurrent reference form, the decode step
//   >>cuda_ssd        mn_cuda_ssd_*: Mamba-2's SSD, both transitions through the GLA op (signed ones by a
//                     running sign) and the recurrent reference form, the decode step
//   >>cuda_rglru      mn_cuda_rglru_*: Hawk's RG-LRU (gates through cuBLAS, the diagonal scan), decode step
//   >>cuda_mlstm      mn_cuda_mlstm_*: xLSTM's mLSTM, chunkwise (the numerator through the GLA op, the
//                     normaliser scan, the stabiliser) and the recurrent reference form, the decode step
//   >>cuda_slstm      mn_cuda_slstm_*: xLSTM's sLSTM, the recurrence fused over time (one launch a pass)
//   >>cuda_model      mn_cuda_model_*: the model of mesanet.h (forward, backward, clip, AdamW,
//                     checkpoints), its mixers in one table like the CPU's
// The default path of each section reads first; the alternatives a setting selects come after it.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include "mesanet_cuda.h"

#ifndef MN_CUDA_LOG
#define MN_CUDA_LOG(...) fprintf(stderr, __VA_ARGS__)
#endif

// >>cuda
// defines: mn_cuda_init/free/strerror/malloc/dfree/upload/download/sync, mn__gemm, mn__gemm_bf16 (bf16 operands)

// One line into ctx->msg and the log, then the code back to the caller (never exit()).
static int mn__fail(mn_cuda_ctx* ctx, int code, const char* what, const char* detail, int line) {
    // the call's text is cut at 100 characters, the reason at 100: one line fits ctx->msg
    if (ctx) snprintf(ctx->msg, sizeof ctx->msg, "mesanet_cuda.cu:%d: %.100s: %.100s", line, what, detail);
    MN_CUDA_LOG("mesanet_cuda.cu:%d: %.100s: %.100s\n", line, what, detail);
    return code;
}
#define MN__CU(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) return mn__fail(ctx, MN_ERR_CUDA, #call, cudaGetErrorString(e_), __LINE__); } while (0)
#define MN__CB(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) return mn__fail(ctx, MN_ERR_CUBLAS, #call, cublasGetStatusString(s_), __LINE__); \
} while (0)
#define MN__TRY(expr) do { int r_ = (expr); if (r_ != MN_OK) return r_; } while (0)
// ctx->math is fp32 while a guard lives, then what it was: the mixers whose gate gradients are sums that cancel
// (Mamba-2's and mLSTM's use of the GLA op) run the op's products in 3xTF32 in every mode
struct mn__math_fp32 {
    mn_cuda_ctx* ctx; int math;
    explicit mn__math_fp32(mn_cuda_ctx* c) : ctx(c), math(c->math) { c->math = MN_CUDA_MATH_FP32; }
    ~mn__math_fp32() { ctx->math = math; }
};
#define MN__LAUNCHED() MN__CU(cudaGetLastError())
#define MN__STREAM ((cudaStream_t)ctx->stream)

const char* mn_cuda_strerror(int code) {
    switch (code) {
    case MN_OK: return "ok";
    case MN_ERR_CONFIG: return "invalid configuration (or a shape the CUDA kernels do not support)";
    case MN_ERR_ALLOC: return "out of memory";
    case MN_ERR_RANGE: return "value out of range";
    case MN_ERR_CUDA: return "CUDA runtime error";
    case MN_ERR_CUBLAS: return "cuBLAS error";
    default: return "unknown error";
    }
}

int mn_cuda_init(mn_cuda_ctx* ctx, int device) {
    cudaDeviceProp prop;
    cublasHandle_t h;
    int n = 0, optin = 0;
    memset(ctx, 0, sizeof *ctx);
    ctx->device = device;
    MN__CU(cudaGetDeviceCount(&n));
    if (device < 0 || device >= n) return mn__fail(ctx, MN_ERR_CUDA, "mn_cuda_init", "no such CUDA device", __LINE__);
    MN__CU(cudaSetDevice(device));
    MN__CU(cudaGetDeviceProperties(&prop, device));
    MN__CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    ctx->sm_count = prop.multiProcessorCount;
    ctx->smem_optin = (size_t)optin;
    MN__CB(cublasCreate(&h));
    ctx->cublas = (void*)h;
    MN__CB(cublasSetStream(h, MN__STREAM));
    MN__CU(cudaMalloc((void**)&ctx->scratch, 8 * sizeof(double)));
    return MN_OK;
}
void mn_cuda_free(mn_cuda_ctx* ctx) {
    if (ctx->cublas) cublasDestroy((cublasHandle_t)ctx->cublas);
    if (ctx->scratch) cudaFree(ctx->scratch);
    if (ctx->tmp) cudaFree(ctx->tmp);
    if (ctx->bf_tmp) cudaFree(ctx->bf_tmp);
    if (ctx->sk_tmp) cudaFree(ctx->sk_tmp);
    ctx->cublas = NULL; ctx->scratch = NULL; ctx->tmp = NULL; ctx->tmp_cap = 0;
    ctx->bf_tmp = NULL; ctx->bf_tmp_cap = 0; ctx->sk_tmp = NULL;
    memset(ctx->bf_src, 0, sizeof ctx->bf_src);
}
int mn_cuda_malloc(mn_cuda_ctx* ctx, void** p, size_t bytes) {
    *p = NULL;
    if (cudaMalloc(p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return mn__fail(ctx, MN_ERR_ALLOC, "cudaMalloc", "out of device memory", __LINE__);
    }
    return MN_OK;
}
void mn_cuda_dfree(void* p) { if (p) cudaFree(p); }
int mn_cuda_upload(mn_cuda_ctx* ctx, void* dst, const void* src, size_t bytes) {
    MN__CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, MN__STREAM));
    MN__CU(cudaStreamSynchronize(MN__STREAM));
    return MN_OK;
}
int mn_cuda_download(mn_cuda_ctx* ctx, void* dst, const void* src, size_t bytes) {
    MN__CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, MN__STREAM));
    MN__CU(cudaStreamSynchronize(MN__STREAM));
    return MN_OK;
}
int mn_cuda_sync(mn_cuda_ctx* ctx) {
    MN__CU(cudaStreamSynchronize(MN__STREAM));
    MN__CU(cudaGetLastError());
    return MN_OK;
}

// Grid for a grid-stride loop over n items: enough blocks to fill the chip, no more.
static unsigned mn__grid(const mn_cuda_ctx* ctx, size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads, cap = (size_t)(ctx->sm_count > 0 ? ctx->sm_count : 1) * 32;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}
#define MN__FOR(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// Row-major C = alpha op(A) op(B) + beta C, as mesanet.h's mn_gemm, batched with constant strides
// (elements) between the batch's matrices. cuBLAS is column-major, and a row-major matrix is its
// transpose in column-major, so this computes C^T = op(B)^T op(A)^T: B and A trade places.
// Exact fp32 in fp32 mode, TF32 tensor cores in the TF32 and bf16 modes: bf16 mode is TF32 mode with bf16
// projections, so a product it does not take to bf16 (a mixer's batched products, a projection too narrow for
// the bf16 kernels) runs at TF32's 10 mantissa bits, still finer than bf16's 8 (exact fp32 there made bf16
// training slower than TF32: Mamba-2 185k vs 221k tokens/s, sLSTM 177k vs 252k, H100 run 35).
static int mn__gemm_call(mn_cuda_ctx* ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float* A,
                         size_t lda, size_t sA, const float* B, size_t ldb, size_t sB, float beta, float* Cm,
                         size_t ldc, size_t sC, size_t batch) {
    cublasComputeType_t ct = ctx->math == MN_CUDA_MATH_FP32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    MN__CB(cublasGemmStridedBatchedEx((cublasHandle_t)ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      (int)N, (int)M, (int)K, &alpha, B, CUDA_R_32F, (int)ldb, (long long)sB, A,
                                      CUDA_R_32F, (int)lda, (long long)sA,
                                      &beta, Cm, CUDA_R_32F, (int)ldc, (long long)sC, (int)batch, ct,
                                      CUBLAS_GEMM_DEFAULT));
    return MN_OK;
}
// Split-K for a batch of small products over a long K (the weight gradients of block-diagonal layers: sLSTM's
// dR and gate weights, (Dh x Dh) per head summed over every token). cuBLAS's batched kernels give each (64 x 64)
// tile of each matrix one thread block that walks all of K (run 37's sLSTM profile: 20 blocks on 132 SMs, 323 us
// a product, 18 % of the step); here each matrix's K is cut into S slices, one batched product writes the S
// partial products (ctx->sk_tmp), and mn__k_sk_sum adds them in slice order (deterministic, no atomics).
#define MN__SK_CAP ((size_t)1 << 22)   // floats of ctx->sk_tmp (16 MB), allocated on first need
static size_t mn__gemm_slices(const mn_cuda_ctx* ctx, size_t M, size_t N, size_t K, size_t batch) {
    size_t tiles = ((M + 63) / 64) * ((N + 63) / 64), sm = ctx->sm_count > 0 ? (size_t)ctx->sm_count : 1, S;
    if (batch < 2 || K < 4096 || 4 * tiles * batch > sm) return 1;   // enough blocks, or short K: as it is
    S = (sm + tiles - 1) / tiles;                                     // one launch's blocks fill the chip
    if (S > K / 512) S = K / 512;                                     // slices of at least 512
    if (S > MN__SK_CAP / (M * N) - 1) S = MN__SK_CAP / (M * N) - 1;   // the partials fit (+1: the remainder)
    return S < 2 ? 1 : S;
}
// C (M,N) rows ldc apart = sum over the partials P (S,M,N) in order + beta C (beta 0: C not read)
__global__ void mn__k_sk_sum(float* C, size_t ldc, const float* P, size_t S, size_t M, size_t N, float beta) {
    MN__FOR(e, M * N) {
        float s = 0.f;
        for (size_t k = 0; k < S; k++) s += P[k * M * N + e];
        float* c = C + (e / N) * ldc + e % N;
        *c = beta == 0.f ? s : beta * *c + s;
    }
}
static int mn__gemm_split(mn_cuda_ctx* ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                          const float* A, size_t lda, size_t sA, const float* B, size_t ldb, size_t sB, float beta,
                          float* Cm, size_t ldc, size_t sC, size_t batch, size_t S) {
    // slices of `chunk` (a multiple of 32, so a slice's first column stays 16-byte aligned), then the remainder
    size_t chunk = ((K + S - 1) / S + 31) / 32 * 32, full = K / chunk, rem = K - full * chunk;
    size_t parts = full + (rem > 0), cA = ta ? chunk * lda : chunk, cB = tb ? chunk : chunk * ldb;
    if (!ctx->sk_tmp && cudaMalloc((void**)&ctx->sk_tmp, MN__SK_CAP * sizeof(float)) != cudaSuccess) {
        cudaGetLastError(); ctx->sk_tmp = NULL;
        return mn__fail(ctx, MN_ERR_ALLOC, "cudaMalloc", "out of device memory (split-K scratch)", __LINE__);
    }
    for (size_t i = 0; i < batch; i++) {   // one matrix at a time: its slices are the batched product
        const float *Ai = A + i * sA, *Bi = B + i * sB;
        MN__TRY(mn__gemm_call(ctx, ta, tb, M, N, chunk, alpha, Ai, lda, cA, Bi, ldb, cB, 0.f, ctx->sk_tmp, N, M * N,
                              full));
        if (rem)
            MN__TRY(mn__gemm_call(ctx, ta, tb, M, N, rem, alpha, Ai + full * cA, lda, 0, Bi + full * cB, ldb, 0, 0.f,
                                  ctx->sk_tmp + full * M * N, N, 0, 1));
        mn__k_sk_sum<<<mn__grid(ctx, M * N, 256), 256, 0, MN__STREAM>>>(Cm + i * sC, ldc, ctx->sk_tmp, parts, M, N,
                                                                        beta);
        MN__LAUNCHED();
    }
    return MN_OK;
}
static int mn__gemm(mn_cuda_ctx* ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float* A,
                    size_t lda, size_t sA, const float* B, size_t ldb, size_t sB, float beta, float* Cm, size_t ldc,
                    size_t sC, size_t batch) {
    const size_t lim = (size_t)0x7fffffff;
    if (M == 0 || N == 0 || batch == 0) return MN_OK;
    if (M > lim || N > lim || K > lim || lda > lim || ldb > lim || ldc > lim || batch > lim)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn__gemm", "dimension beyond cuBLAS's int range", __LINE__);
    size_t S = mn__gemm_slices(ctx, M, N, K, batch);
    if (S > 1) return mn__gemm_split(ctx, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, Cm, ldc, sC, batch, S);
    return mn__gemm_call(ctx, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, Cm, ldc, sC, batch);
}

// Warp and block sums (blockDim.x a multiple of 32, at most 1024; every thread gets the total).
__device__ __forceinline__ float mn__warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float mn__warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ float mn__block_sum(float v, float* sh /*(32)*/) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = mn__warp_sum(v);
    __syncthreads();                               // sh may still be read by a previous call
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.f;
    return mn__warp_sum(v);
}
__device__ float mn__block_max(float v, float* sh /*(32)*/) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = mn__warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return mn__warp_max(v);
}

// ---- tensor-core and async-copy building blocks (the attention kernels, the Mesa CG and scans) ----
// cp.async: 16 bytes (zero-filled when ok = 0: nothing is read), 4 bytes; commit; wait for all but N
// groups. The copies land in shared memory without passing through registers, so a tile's next
// operands travel while the current ones are multiplied.
__device__ __forceinline__ void mn__cp16z(void* sdst, const void* gsrc, bool ok) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(sdst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(a), "l"(gsrc), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void mn__cp16(void* sdst, const void* gsrc) { mn__cp16z(sdst, gsrc, true); }
__device__ __forceinline__ void mn__cp4(void* sdst, const void* gsrc) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(sdst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(a), "l"(gsrc) : "memory");
}
__device__ __forceinline__ void mn__cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void mn__cp_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
__device__ __forceinline__ void mn__cp_wait_all(void) { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// ldmatrix: four 8 x 8 fp16 matrices from shared memory into the mma fragment layout (.trans: transposed)
__device__ __forceinline__ void mn__ldsm4(uint32_t (&r)[4], const __half* p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}
__device__ __forceinline__ void mn__ldsm4t(uint32_t (&r)[4], const __half* p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}
// c (16x8, fp32) += a (16x16, fp16, row) b (16x8, fp16, col). Fragments (g = lane/4, q = lane%4):
// c0,c1 row g, columns 2q, 2q+1; c2,c3 row g+8; a0 (g, 2q..), a1 (g+8, 2q..), a2 (g, 8+2q..),
// a3 (g+8, 8+2q..) as half2 pairs; so two adjacent m16n8 accumulators, rounded to half2, ARE the A
// fragment of the next product over those 16 columns (the attention kernels use this for P).
__device__ __forceinline__ void mn__mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// ldmatrix lane addresses. A (16x16 at row0,k0 of a row-major array): lanes 0-15 rows, 16-31 +8
// columns. B n-major (Bt[n][k], 2 n-tiles): lanes 8i..8i+7 give n rows of matrix i, which covers
// n + 8 (i/2), k + 8 (i%2). B k-major (B[k][n], .trans): matrix i covers k + 8 (i%2), n + 8 (i/2).
__device__ __forceinline__ const __half* mn__a_addr(const __half* s, int ld, int row0, int k0, int lane) {
    return s + (size_t)(row0 + (lane & 15)) * ld + k0 + ((lane >> 4) << 3);
}
__device__ __forceinline__ const __half* mn__bn_addr(const __half* s, int ld, int n0, int k0, int lane) {
    return s + (size_t)(n0 + (lane & 7) + ((lane >> 4) << 3)) * ld + k0 + (((lane >> 3) & 1) << 3);
}
__device__ __forceinline__ const __half* mn__bk_addr(const __half* s, int ld, int k0, int n0, int lane) {
    return s + (size_t)(k0 + (lane & 7) + (((lane >> 3) & 1) << 3)) * ld + n0 + ((lane >> 4) << 3);
}
// half2 of two floats as the 32-bit register an mma fragment takes
__device__ __forceinline__ uint32_t mn__h2(float a, float b) {
    __half2 u = __floats2half2_rn(a, b);
    return *(uint32_t*)&u;
}
// Power of two hs with hs * mx <= 1 (1 for zero or non-finite mx): the exact scale that brings an
// operand's largest entry into fp16's range before the cast.
__device__ __forceinline__ float mn__mscale(float mx) {
    return mx > 0.f && mx < 3.0e38f ? exp2f(-ceilf(log2f(mx))) : 1.f;
}

// ---- the context's reduction scratch ----
// ctx->tmp (ctx->tmp_cap floats) holds the partial sums of the deterministic column reductions
// below. Grown on first need: cudaFree synchronises the device first, so a kernel still reading
// the old buffer finishes before it goes; every user runs on ctx->stream, one after another, so
// one buffer serves them all. mn_cuda_model_reserve grows it up front (a step never allocates).
static int mn__tmp(mn_cuda_ctx* ctx, size_t n, float** p) {
    if (n > ctx->tmp_cap) {
        if (ctx->tmp) cudaFree(ctx->tmp);
        ctx->tmp = NULL; ctx->tmp_cap = 0;
        if (cudaMalloc((void**)&ctx->tmp, n * sizeof(float)) != cudaSuccess) {
            cudaGetLastError(); ctx->tmp = NULL;
            return mn__fail(ctx, MN_ERR_ALLOC, "cudaMalloc", "out of device memory (reduction scratch)", __LINE__);
        }
        ctx->tmp_cap = n;
    }
    if (p) *p = ctx->tmp;
    return MN_OK;
}

// ---- bf16 operands (ctx->math = MN_CUDA_MATH_BF16: the projections of >>cuda_matmul) ----
// dst (n) = src (n) rounded to bf16, to nearest even: 8 significant bits, fp32's exponent range (so
// no scaling is needed: what is finite in fp32 stays finite, tiny gradients keep their size)
__global__ void mn__k_bf16(__nv_bfloat16* dst, const float* src, size_t n) {
    MN__FOR(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}
// the same four at a time: src 16-byte aligned, dst 8-byte aligned, n4 = n / 4
__global__ void mn__k_bf16x4(__nv_bfloat162* dst, const float4* src, size_t n4) {
    MN__FOR(i, n4) {
        float4 v = src[i];
        dst[2 * i] = __floats2bfloat162_rn(v.x, v.y);
        dst[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
    }
}
static int mn__to_bf16(mn_cuda_ctx* ctx, __nv_bfloat16* dst, const float* src, size_t n) {
    if (n == 0) return MN_OK;
    if (n % 4 == 0 && (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 8 == 0)
        mn__k_bf16x4<<<mn__grid(ctx, n / 4, 256), 256, 0, MN__STREAM>>>((__nv_bfloat162*)dst, (const float4*)src,
                                                                         n / 4);
    else mn__k_bf16<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(dst, src, n);
    MN__LAUNCHED();
    return MN_OK;
}
// The registered bf16 image of the n floats from p (the model's weights or its layer input: see
// ctx->bf_src), or NULL: p's range must lie inside one registered array and its image start on 16 bytes
// (cuBLAS's tensor-core kernels read 16-byte rows; the model's tensors start on 16 floats, so they do)
#define MN__BF_SLOTS 4
static const __nv_bfloat16* mn__bf_find(const mn_cuda_ctx* ctx, const float* p, size_t n) {
    for (int i = 0; i < MN__BF_SLOTS; i++) {
        uintptr_t a = (uintptr_t)ctx->bf_src[i], q = (uintptr_t)p;
        if (!a || q < a || (q - a) % sizeof(float) || n > ctx->bf_n[i] || (q - a) / sizeof(float) > ctx->bf_n[i] - n)
            continue;
        const __nv_bfloat16* img = (const __nv_bfloat16*)ctx->bf_img[i] + (q - a) / sizeof(float);
        return (uintptr_t)img % 16 == 0 ? img : NULL;
    }
    return NULL;
}
static void mn__bf_register(mn_cuda_ctx* ctx, int slot, const float* src, size_t n, void* img) {
    ctx->bf_src[slot] = src; ctx->bf_n[slot] = n; ctx->bf_img[slot] = img;
}
// bf16 values of scratch an operand of n floats needs: none when registered, else n rounded up to
// 64 (every operand then starts on 128 bytes)
static size_t mn__bf_need(const mn_cuda_ctx* ctx, const float* p, size_t n) {
    return mn__bf_find(ctx, p, n) ? 0 : (n + 63) / 64 * 64;
}
// ctx->bf_tmp grown to n bf16 values (as mn__tmp: cudaFree waits for the kernels still reading it)
static int mn__bf_scratch(mn_cuda_ctx* ctx, size_t n, __nv_bfloat16** p) {
    if (n > ctx->bf_tmp_cap) {
        if (ctx->bf_tmp) cudaFree(ctx->bf_tmp);
        ctx->bf_tmp = NULL; ctx->bf_tmp_cap = 0;
        if (cudaMalloc(&ctx->bf_tmp, n * sizeof(__nv_bfloat16)) != cudaSuccess) {
            cudaGetLastError(); ctx->bf_tmp = NULL;
            return mn__fail(ctx, MN_ERR_ALLOC, "cudaMalloc", "out of device memory (bf16 operand scratch)", __LINE__);
        }
        ctx->bf_tmp_cap = n;
    }
    if (p) *p = (__nv_bfloat16*)ctx->bf_tmp;
    return MN_OK;
}
// The bf16 operand of the n floats at p: its registered image, else its conversion into *s (which then
// moves past it; the caller sized the scratch with mn__bf_need)
static int mn__bf_operand(mn_cuda_ctx* ctx, const float* p, size_t n, __nv_bfloat16** s, const __nv_bfloat16** out) {
    const __nv_bfloat16* img = mn__bf_find(ctx, p, n);
    if (img) { *out = img; return MN_OK; }
    MN__TRY(mn__to_bf16(ctx, *s, p, n));
    *out = *s; *s += (n + 63) / 64 * 64;
    return MN_OK;
}
// Row-major C (M,N) fp32 = alpha op(A) op(B) + beta C, A and B bf16, products on the tensor cores with
// fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F); the operands trade places as in mn__gemm.
// cublasGemmEx's rules: m, n, k, the leading dimensions in int, each leading dimension at least its
// column-major rows (here: the row-major widths, so lda >= K or M as transposed, ...), k >= 1 for
// nonzero leading dimensions; the callers pass 16-byte aligned operands with widths a multiple of 8.
static int mn__gemm_bf16(mn_cuda_ctx* ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                         const __nv_bfloat16* A, size_t lda, const __nv_bfloat16* B, size_t ldb, float beta, float* Cm,
                         size_t ldc) {
    const size_t lim = (size_t)0x7fffffff;
    if (M == 0 || N == 0) return MN_OK;
    if (M > lim || N > lim || K > lim || lda > lim || ldb > lim || ldc > lim)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn__gemm_bf16", "dimension beyond cuBLAS's int range", __LINE__);
    if (K == 0 || lda < (ta ? M : K) || ldb < (tb ? K : N) || ldc < N)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn__gemm_bf16", "empty inner dimension or leading dimension too small",
                        __LINE__);
    MN__CB(cublasGemmEx((cublasHandle_t)ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                        (int)N, (int)M, (int)K, &alpha, B, CUDA_R_16BF, (int)ldb, A, CUDA_R_16BF, (int)lda, &beta, Cm,
                        CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return MN_OK;
}

// ---- deterministic column sums: dst (C) += sum over the rows n < N of f(n, c) ----
// Two passes and no atomics, so every run gives the same bits. Pass 1 (mn__k_colpart): the rows
// are cut into S slices of R rows (R >= 16, S <= 512: enough blocks to fill the chip at N = 32768);
// a thread takes one column (or 4, as a float4, when C % 4 == 0 and the rows are 16-byte aligned)
// and walks its slice's rows in order, 4 rows' loads in flight, writing the slice's sum to part
// (S,C). Pass 2 (mn__k_colfinish): the S partials of each column summed in a fixed order and added
// to dst. f is dy[n,c] (bias gradients) or dy[n,c] x[n,c] rstd[n] (RMSNorm's weight gradient).
#define MN__COL_SLICES 512
static size_t mn__col_rows(size_t N) { size_t r = (N + MN__COL_SLICES - 1) / MN__COL_SLICES; return r < 16 ? 16 : r; }
// part's floats
static size_t mn__col_tmp(size_t N, size_t C) { return (N + mn__col_rows(N) - 1) / mn__col_rows(N) * C; }

template <int VEC> __device__ __forceinline__ void mn__ldv(float* r, const float* p) {
    if constexpr (VEC == 4) { float4 q = *(const float4*)p; r[0] = q.x; r[1] = q.y; r[2] = q.z; r[3] = q.w; }
    else r[0] = *p;
}
// part[s, c..c+VEC) = sum over the rows of slice s (R rows from s R), in row order, of f: MODE 0 dy,
// 1 dy x rstd, 2 dy x rstd silu(z) (the gated RMSNorm's weight)
template <int MODE> __device__ __forceinline__ float mn__colterm(float d, float e, float r, float f) {
    if constexpr (MODE == 2) return d * e * r * (f / (1.f + expf(-f)));
    else if constexpr (MODE == 1) return d * e * r;
    else return d;
}
template <int VEC, int MODE>
__global__ void mn__k_colpart(float* part, const float* dy, const float* x, const float* rstd, const float* z, size_t N,
                              size_t C, size_t R) {
    size_t c = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * VEC, n = blockIdx.y * R, n1 = n + R < N ? n + R : N;
    if (c >= C) return;
    float acc[VEC], d[4][VEC], e[4][VEC], f[4][VEC], r[4];
    for (int k = 0; k < VEC; k++) acc[k] = 0.f;
    for (; n + 4 <= n1; n += 4) {                  // four rows' loads first, then the adds in row order
        for (int i = 0; i < 4; i++) {
            mn__ldv<VEC>(d[i], dy + (n + i) * C + c);
            if constexpr (MODE >= 1) { mn__ldv<VEC>(e[i], x + (n + i) * C + c); r[i] = rstd[n + i]; }
            if constexpr (MODE == 2) mn__ldv<VEC>(f[i], z + (n + i) * C + c);
        }
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < VEC; k++) acc[k] += mn__colterm<MODE>(d[i][k], e[i][k], r[i], f[i][k]);
    }
    for (; n < n1; n++) {
        mn__ldv<VEC>(d[0], dy + n * C + c);
        if constexpr (MODE >= 1) { mn__ldv<VEC>(e[0], x + n * C + c); r[0] = rstd[n]; }
        if constexpr (MODE == 2) mn__ldv<VEC>(f[0], z + n * C + c);
        for (int k = 0; k < VEC; k++) acc[k] += mn__colterm<MODE>(d[0][k], e[0][k], r[0], f[0][k]);
    }
    for (int k = 0; k < VEC; k++) part[blockIdx.y * C + c + k] = acc[k];
}
// dst[c] += sum_{s<S} part[s,c]. Block (32 columns, 16 lanes): lane y sums the slices y, y+16, ...
// in order, then lane 0 adds the 16 lane sums in order: a fixed tree, the same bits every run.
__global__ void mn__k_colfinish(float* dst, const float* part, size_t S, size_t C) {
    __shared__ float sh[16][32];
    size_t c = blockIdx.x * (size_t)32 + threadIdx.x;
    float acc = 0.f;
    if (c < C) for (size_t s = threadIdx.y; s < S; s += 16) acc += part[s * C + c];
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.f;
        for (int y = 0; y < 16; y++) t += sh[y][threadIdx.x];
        dst[c] += t;
    }
}
static int mn__colfinish(mn_cuda_ctx* ctx, float* dst, const float* part, size_t S, size_t C) {
    mn__k_colfinish<<<(unsigned)((C + 31) / 32), dim3(32, 16), 0, MN__STREAM>>>(dst, part, S, C); MN__LAUNCHED();
    return MN_OK;
}
// dst (C) += column sums of dy (N,C) (x NULL), or of dy x rstd with x (N,C), rstd (N), or (z non-NULL)
// of dy x rstd silu(z) with z (N,C)
static int mn__colsum3(mn_cuda_ctx* ctx, float* dst, const float* dy, const float* x, const float* rstd,
                       const float* z, size_t N, size_t C) {
    if (N == 0 || C == 0) return MN_OK;
    size_t R = mn__col_rows(N), S = (N + R - 1) / R;
    int vec = C % 4 == 0 && (uintptr_t)dy % 16 == 0 && (!x || (uintptr_t)x % 16 == 0) && (!z || (uintptr_t)z % 16 == 0);
    size_t cols = vec ? C / 4 : C;                 // threads per slice
    unsigned threads = cols >= 256 ? 256 : (unsigned)((cols + 31) / 32 * 32);
    dim3 grid((unsigned)((cols + threads - 1) / threads), (unsigned)S);
    float* part;
    MN__TRY(mn__tmp(ctx, S * C, &part));
    if (vec && z) mn__k_colpart<4, 2><<<grid, threads, 0, MN__STREAM>>>(part, dy, x, rstd, z, N, C, R);
    else if (z) mn__k_colpart<1, 2><<<grid, threads, 0, MN__STREAM>>>(part, dy, x, rstd, z, N, C, R);
    else if (vec && x) mn__k_colpart<4, 1><<<grid, threads, 0, MN__STREAM>>>(part, dy, x, rstd, z, N, C, R);
    else if (vec) mn__k_colpart<4, 0><<<grid, threads, 0, MN__STREAM>>>(part, dy, x, rstd, z, N, C, R);
    else if (x) mn__k_colpart<1, 1><<<grid, threads, 0, MN__STREAM>>>(part, dy, x, rstd, z, N, C, R);
    else mn__k_colpart<1, 0><<<grid, threads, 0, MN__STREAM>>>(part, dy, x, rstd, z, N, C, R);
    MN__LAUNCHED();
    return mn__colfinish(ctx, dst, part, S, C);
}
static int mn__colsum(mn_cuda_ctx* ctx, float* dst, const float* dy, const float* x, const float* rstd, size_t N,
                      size_t C) {
    return mn__colsum3(ctx, dst, dy, x, rstd, NULL, N, C);
}
static int mn__colsum_gated(mn_cuda_ctx* ctx, float* dst, const float* dy, const float* x, const float* rstd,
                            const float* z, size_t N, size_t C) {
    return mn__colsum3(ctx, dst, dy, x, rstd, z, N, C);
}

// >>cuda_matmul
// defines: mn_cuda_matmul_{forward,backward}

// out (N,OC) += bias (OC) broadcast over rows
__global__ void mn__k_add_bias(float* out, const float* bias, size_t N, size_t OC) {
    MN__FOR(i, N * OC) out[i] += bias[i % OC];
}

// bf16 mode takes a projection of these widths to the bf16 tensor cores: IC and OC multiples of 8, so
// every bf16 row (the leading dimension of each operand is IC or OC) is a whole number of 16 bytes, the
// tensor-core kernels' unit. Others (the Mesa gates, OC = H) take mn__gemm's TF32. ld (0: OC) is the row
// stride of out / dout, the one operand OC wide: what must be a multiple of 8 is that stride, not OC (Mamba-2's
// in_proj, 2 DI + 2 N + H wide, writes rows padded to a multiple of 8 and so takes the bf16 path).
static int mn__bf_ok(const mn_cuda_ctx* ctx, size_t IC, size_t OC, size_t ld = 0) {
    return ctx->math == MN_CUDA_MATH_BF16 && IC > 0 && OC > 0 && IC % 8 == 0 && (ld ? ld : OC) % 8 == 0;
}
// out (N,OC) = inp (N,IC) W (OC,IC)^T + beta out: the product of every projection (beta 1: the model's
// residual add), bf16 operands in bf16 mode (mn__bf_ok), else mn__gemm's fp32 / TF32; out's rows ld >= OC
// floats apart (0: OC)
static int mn__matmul_product(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, size_t N, size_t IC,
                              size_t OC, float beta, size_t ld = 0) {
    if (ld == 0) ld = OC;
    if (!mn__bf_ok(ctx, IC, OC, ld) || N == 0)
        return mn__gemm(ctx, 0, 1, N, OC, IC, 1.f, inp, IC, 0, weight, IC, 0, beta, out, ld, 0, 1);
    __nv_bfloat16* s;
    const __nv_bfloat16 *xb, *wb;
    MN__TRY(mn__bf_scratch(ctx, mn__bf_need(ctx, inp, N * IC) + mn__bf_need(ctx, weight, OC * IC), &s));
    MN__TRY(mn__bf_operand(ctx, inp, N * IC, &s, &xb));
    MN__TRY(mn__bf_operand(ctx, weight, OC * IC, &s, &wb));
    return mn__gemm_bf16(ctx, 0, 1, N, OC, IC, 1.f, xb, IC, wb, IC, beta, out, ld);
}

int mn_cuda_matmul_forward(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, const float* bias,
                           size_t N, size_t IC, size_t OC) {
    // out = inp W^T: row-major (N,IC) x (OC,IC)^T
    MN__TRY(mn__matmul_product(ctx, out, inp, weight, N, IC, OC, 0.f));
    if (bias) { mn__k_add_bias<<<mn__grid(ctx, N * OC, 256), 256, 0, MN__STREAM>>>(out, bias, N, OC); MN__LAUNCHED(); }
    return MN_OK;
}
// forward: out = inp W^T + b, so: dinp += dout W ; dW += dout^T inp ; db += colsum(dout).
// The model's backward passes acc = 0 where it is the first writer of an activation gradient
// (dinp = dout W, cuBLAS beta 0: the buffer needs no zeroing and is not read); the public launcher
// accumulates like every CPU backward. The row kernels below take the same flag.
// In bf16 mode (mn__bf_ok) dout is converted once for both products, the weight and inp only when no
// registered image holds them; dweight accumulates in fp32 (beta 1) and dbias sums the fp32 dout.
// dout's rows ld >= OC floats apart (0: OC; its bf16 image keeps that stride, the pad columns never read);
// dbias needs ld = OC.
static int mn__matmul_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, size_t N, size_t IC, size_t OC, int acc,
                               size_t ld = 0) {
    if (ld == 0) ld = OC;
    if (dbias && ld != OC) return mn__fail(ctx, MN_ERR_CONFIG, "mn__matmul_backward", "dbias with strided dout",
                                           __LINE__);
    if (mn__bf_ok(ctx, IC, OC, ld) && N > 0 && (dinp || dweight)) {
        __nv_bfloat16* s;
        const __nv_bfloat16 *db, *wb = NULL, *xb = NULL;
        const size_t nd = (N - 1) * ld + OC;   // dout's extent: its last row ends at OC (pad columns never read)
        size_t need = mn__bf_need(ctx, dout, nd) + (dinp ? mn__bf_need(ctx, weight, OC * IC) : 0) +
                      (dweight ? mn__bf_need(ctx, inp, N * IC) : 0);
        MN__TRY(mn__bf_scratch(ctx, need, &s));
        MN__TRY(mn__bf_operand(ctx, dout, nd, &s, &db));
        if (dinp) MN__TRY(mn__bf_operand(ctx, weight, OC * IC, &s, &wb));
        if (dweight) MN__TRY(mn__bf_operand(ctx, inp, N * IC, &s, &xb));
        if (dinp) MN__TRY(mn__gemm_bf16(ctx, 0, 0, N, IC, OC, 1.f, db, ld, wb, IC, acc ? 1.f : 0.f, dinp, IC));
        if (dweight) MN__TRY(mn__gemm_bf16(ctx, 1, 0, OC, IC, N, 1.f, db, ld, xb, IC, 1.f, dweight, IC));
    } else {
        if (dinp)
            MN__TRY(mn__gemm(ctx, 0, 0, N, IC, OC, 1.f, dout, ld, 0, weight, IC, 0, acc ? 1.f : 0.f, dinp, IC, 0, 1));
        if (dweight) MN__TRY(mn__gemm(ctx, 1, 0, OC, IC, N, 1.f, dout, ld, 0, inp, IC, 0, 1.f, dweight, IC, 0, 1));
    }
    if (dbias) MN__TRY(mn__colsum(ctx, dbias, dout, NULL, NULL, N, OC));
    return MN_OK;
}
int mn_cuda_matmul_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, size_t N, size_t IC, size_t OC) {
    return mn__matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, N, IC, OC, 1);
}

// >>cuda_ops
// defines: mn_cuda_{embedding,rmsnorm,swiglu,shortconv,l2norm,rope,crossentropy}_{forward,backward}

__global__ void mn__k_embedding_fwd(float* out, const int* tokens, const float* wte, size_t N, size_t C) {
    MN__FOR(i, N * C) out[i] = wte[(size_t)tokens[i / C] * C + i % C];
}
// Large vocabularies: one atomic add per element (the order of the adds varies between runs).
__global__ void mn__k_embedding_bwd(float* dwte, const float* dout, const int* tokens, size_t N, size_t C) {
    MN__FOR(i, N * C) atomicAdd(dwte + (size_t)tokens[i / C] * C + i % C, dout[i]);
}
// V <= 1024, deterministic: block (column tile of 128, vocabulary row v, segment z of the tokens)
// walks its segment in chunks of 128 tokens (one per thread, coalesced, the next chunk's in flight),
// lists the chunk's positions whose token is v in order (warp ballots, prefix counts), and each
// thread (column) adds those dout rows in that order, 4 loads in flight. One segment: the sums go
// straight to dwte (V,C); S > 1 segments (a frequent token's rows spread over S blocks): to part
// (S,V,C), then mn__k_colfinish adds them in a fixed order.
// The segments: at least MN__EMB_SEG tokens each, enough that the grid has about MN__EMB_BLOCKS blocks (a small
// vocabulary, e.g. the synthetic tasks' 4-70 tokens, would otherwise run a few dozen blocks: 115 us a step, ncu,
// session 12), at most max(16, that) and part <= 4M floats. S depends on N, C and V alone, not on the device, so
// a run's sums are the same on every GPU.
#define MN__EMB_SEG 256
#define MN__EMB_BLOCKS 512
__global__ void __launch_bounds__(128) mn__k_embedding_bwd_det(float* dwte, float* part, const float* dout,
                                                               const int* tokens, size_t N, size_t C, size_t V,
                                                               size_t seg) {
    __shared__ unsigned mask[4];                    // the chunk's hits, one word per warp
    __shared__ int list[128];                       // the chunk's hit positions, in order
    size_t c = blockIdx.x * (size_t)128 + threadIdx.x, v = blockIdx.y, n0 = blockIdx.z * seg,
        n1 = n0 + seg < N ? n0 + seg : N;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    float acc = 0.f;
    int tok = n0 + threadIdx.x < n1 ? tokens[n0 + threadIdx.x] : -1;
    for (size_t base = n0; base < n1; base += 128) {
        int hit = tok == (int)v;
        size_t nn = base + 128 + threadIdx.x;
        int next = nn < n1 ? tokens[nn] : -1;
        unsigned m = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) mask[wid] = m;
        __syncthreads();
        int before = 0, total = 0;
        for (int k = 0; k < 4; k++) { int p = __popc(mask[k]); before += k < wid ? p : 0; total += p; }
        if (hit) list[before + __popc(m & ((1u << lane) - 1u))] = threadIdx.x;
        __syncthreads();
        if (c < C) {
            const float* d = dout + base * C + c;
            int i = 0;
            for (; i + 4 <= total; i += 4) {
                float a0 = d[(size_t)list[i] * C], a1 = d[(size_t)list[i + 1] * C], a2 = d[(size_t)list[i + 2] * C],
                    a3 = d[(size_t)list[i + 3] * C];
                acc += a0; acc += a1; acc += a2; acc += a3;
            }
            for (; i < total; i++) acc += d[(size_t)list[i] * C];
        }
        __syncthreads();                           // mask and list are rewritten by the next chunk
        tok = next;
    }
    if (c < C) {
        if (part) part[(blockIdx.z * V + v) * C + c] = acc;
        else dwte[v * C + c] += acc;
    }
}
// segments of the deterministic path (the rule above MN__EMB_SEG)
static size_t mn__emb_segs(size_t N, size_t C, size_t V) {
    size_t S = (N + MN__EMB_SEG - 1) / MN__EMB_SEG, cap = V * C > 0 ? ((size_t)1 << 22) / (V * C) : 1,
        most = V ? MN__EMB_BLOCKS / (V * ((C + 127) / 128)) : 1;
    if (most < 16) most = 16;
    if (S > most) S = most;
    if (S > cap) S = cap;
    return S < 1 ? 1 : S;
}
static size_t mn__emb_tmp(size_t N, size_t C, size_t V) {
    size_t S = mn__emb_segs(N, C, V);
    return V <= 1024 && S > 1 ? S * V * C : 0;
}
int mn_cuda_embedding_forward(mn_cuda_ctx* ctx, float* out, const int* tokens, const float* wte, size_t N, size_t C) {
    if (N * C == 0) return MN_OK;
    mn__k_embedding_fwd<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(out, tokens, wte, N, C); MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_embedding_backward(mn_cuda_ctx* ctx, float* dwte, const float* dout, const int* tokens, size_t N, size_t C,
                               size_t V) {
    if (N * C * V == 0) return MN_OK;
    if (V > 1024) {
        mn__k_embedding_bwd<<<mn__grid(ctx, N * C, 256), 256, 0, MN__STREAM>>>(dwte, dout, tokens, N, C);
        MN__LAUNCHED();
        return MN_OK;
    }
    size_t S = mn__emb_segs(N, C, V), seg = (N + S - 1) / S;
    float* part = NULL;
    if (S > 1) MN__TRY(mn__tmp(ctx, S * V * C, &part));
    dim3 grid((unsigned)((C + 127) / 128), (unsigned)V, (unsigned)S);
    mn__k_embedding_bwd_det<<<grid, 128, 0, MN__STREAM>>>(dwte, part, dout, tokens, N, C, V, seg); MN__LAUNCHED();
    return part ? mn__colfinish(ctx, dwte, part, S, V * C) : MN_OK;
}

// RMSNorm, one warp per row: rstd = 1/sqrt(mean(x^2) + eps), y = x rstd w
__global__ void mn__k_rmsnorm_fwd(float* out, float* rstd, const float* inp, const float* w, size_t N, size_t C,
                                  float eps) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float* x = inp + row * C;
    float ss = 0.f;
    for (size_t c = lane; c < C; c += 32) ss += x[c] * x[c];
    ss = mn__warp_sum(ss);
    float r = 1.f / sqrtf(ss / (float)C + eps);
    for (size_t c = lane; c < C; c += 32) out[row * C + c] = x[c] * r * w[c];
    if (lane == 0) rstd[row] = r;
}
// forward: y = w x r, so with xh = x r, gd = dy w: dx += r (gd - xh mean(gd xh)); dw += sum over
// rows of dy x r (mn__colsum: two passes, deterministic)
__global__ void mn__k_rmsnorm_bwd(float* dinp, const float* dout, const float* rstd, const float* inp, const float* w,
                                  size_t N, size_t C, int acc) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + row * C, *dy = dout + row * C;
    float r = rstd[row], dot = 0.f;
    for (size_t c = lane; c < C; c += 32) dot += dy[c] * w[c] * x[c] * r;
    dot = mn__warp_sum(dot) / (float)C;
    for (size_t c = lane; c < C; c += 32) {
        float g = r * (dy[c] * w[c] - x[c] * r * dot);
        dinp[row * C + c] = acc ? dinp[row * C + c] + g : g;
    }
}
// The same two passes with the row held in registers, float4 loads: C = 128 nv, nv <= MN__RMS_V, 16-byte aligned
// rows (the model's norms: d_model 640 and Mamba-2's 1,280 inner width). The scalar kernels above read each row
// twice (the second pass mostly from L2: 8 warps' rows of 2.5-5 KB a block outgrow L1): in run 37's Mamba-2
// profile the backward averaged 205 us a launch, about half the memory rate. Same math, per-lane sums grouped by
// float4 instead of by stride.
#define MN__RMS_V 10
__global__ void __launch_bounds__(256) mn__k_rmsnorm_fwd4(float* out, float* rstd, const float* inp, const float* w,
                                                          size_t N, int nv, float eps) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const size_t C = (size_t)nv * 128;
    const float4 *x = (const float4*)(inp + row * C), *w4 = (const float4*)w;
    float4 xv[MN__RMS_V];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < MN__RMS_V; i++)
        if (i < nv) {
            xv[i] = x[lane + 32 * i];
            ss += xv[i].x * xv[i].x + xv[i].y * xv[i].y + xv[i].z * xv[i].z + xv[i].w * xv[i].w;
        }
    ss = mn__warp_sum(ss);
    const float r = 1.f / sqrtf(ss / (float)C + eps);
    float4* o = (float4*)(out + row * C);
#pragma unroll
    for (int i = 0; i < MN__RMS_V; i++)
        if (i < nv) {
            const float4 a = xv[i], b = w4[lane + 32 * i];
            o[lane + 32 * i] = make_float4(a.x * r * b.x, a.y * r * b.y, a.z * r * b.z, a.w * r * b.w);
        }
    if (lane == 0) rstd[row] = r;
}
__global__ void __launch_bounds__(256) mn__k_rmsnorm_bwd4(float* dinp, const float* dout, const float* rstd,
                                                          const float* inp, const float* w, size_t N, int nv, int acc) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const size_t C = (size_t)nv * 128;
    const float4 *x = (const float4*)(inp + row * C), *dy = (const float4*)(dout + row * C), *w4 = (const float4*)w;
    float4 xv[MN__RMS_V], gv[MN__RMS_V];          // x and gd = dy w
    const float r = rstd[row];
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < MN__RMS_V; i++)
        if (i < nv) {
            const float4 d = dy[lane + 32 * i], b = w4[lane + 32 * i];
            xv[i] = x[lane + 32 * i];
            gv[i] = make_float4(d.x * b.x, d.y * b.y, d.z * b.z, d.w * b.w);
            dot += gv[i].x * xv[i].x * r + gv[i].y * xv[i].y * r + gv[i].z * xv[i].z * r + gv[i].w * xv[i].w * r;
        }
    dot = mn__warp_sum(dot) / (float)C;
    float4* o = (float4*)(dinp + row * C);
#pragma unroll
    for (int i = 0; i < MN__RMS_V; i++)
        if (i < nv) {
            const float4 a = xv[i], gd = gv[i];
            float4 g = make_float4(r * (gd.x - a.x * r * dot), r * (gd.y - a.y * r * dot), r * (gd.z - a.z * r * dot),
                                   r * (gd.w - a.w * r * dot));
            if (acc) { const float4 p = o[lane + 32 * i]; g.x += p.x; g.y += p.y; g.z += p.z; g.w += p.w; }
            o[lane + 32 * i] = g;
        }
}
static bool mn__rms_vec(size_t C, const void* a, const void* b, const void* c, const void* d) {
    return C % 128 == 0 && C / 128 <= MN__RMS_V &&
           ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) % 16 == 0;
}
int mn_cuda_rmsnorm_forward(mn_cuda_ctx* ctx, float* out, float* rstd, const float* inp, const float* weight, size_t N,
                            size_t C, double eps) {
    if (N == 0) return MN_OK;
    if (mn__rms_vec(C, out, inp, weight, NULL))
        mn__k_rmsnorm_fwd4<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(out, rstd, inp, weight, N, (int)(C / 128),
                                                                           (float)eps);
    else mn__k_rmsnorm_fwd<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(out, rstd, inp, weight, N, C, (float)eps);
    MN__LAUNCHED();
    return MN_OK;
}
static int mn__rmsnorm_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, const float* dout, const float* rstd,
                                const float* inp, const float* weight, size_t N, size_t C, int acc) {
    if (N == 0) return MN_OK;
    if (mn__rms_vec(C, dinp, dout, inp, weight))
        mn__k_rmsnorm_bwd4<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(dinp, dout, rstd, inp, weight, N,
                                                                           (int)(C / 128), acc);
    else mn__k_rmsnorm_bwd<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(dinp, dout, rstd, inp, weight, N, C, acc);
    MN__LAUNCHED();
    return mn__colsum(ctx, dweight, dout, inp, rstd, N, C);
}
int mn_cuda_rmsnorm_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, const float* dout, const float* rstd,
                             const float* inp, const float* weight, size_t N, size_t C) {
    return mn__rmsnorm_backward(ctx, dinp, dweight, dout, rstd, inp, weight, N, C, 1);
}

// SwiGLU: out = silu(g) u; backward du += dout g s(g), dg += dout u s(g) (1 + g (1 - s(g)))
__global__ void mn__k_swiglu_fwd(float* out, const float* gate, const float* up, size_t n) {
    MN__FOR(i, n) { float g = gate[i]; out[i] = g / (1.f + expf(-g)) * up[i]; }
}
__global__ void mn__k_swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                 size_t n, int acc) {
    MN__FOR(i, n) {
        float g = gate[i], s = 1.f / (1.f + expf(-g));
        float du = dout[i] * g * s, dg = dout[i] * up[i] * s * (1.f + g * (1.f - s));
        dup[i] = acc ? dup[i] + du : du;
        dgate[i] = acc ? dgate[i] + dg : dg;
    }
}
int mn_cuda_swiglu_forward(mn_cuda_ctx* ctx, float* out, const float* gate, const float* up, size_t n) {
    if (n == 0) return MN_OK;
    mn__k_swiglu_fwd<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(out, gate, up, n); MN__LAUNCHED();
    return MN_OK;
}
static int mn__swiglu_backward(mn_cuda_ctx* ctx, float* dgate, float* dup, const float* dout, const float* gate,
                               const float* up, size_t n, int acc) {
    if (n == 0) return MN_OK;
    mn__k_swiglu_bwd<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(dgate, dup, dout, gate, up, n, acc); MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_swiglu_backward(mn_cuda_ctx* ctx, float* dgate, float* dup, const float* dout, const float* gate,
                            const float* up, size_t n) {
    return mn__swiglu_backward(ctx, dgate, dup, dout, gate, up, n, 1);
}

// Causal depthwise conv: a_t[c] = sum_{j<K} w[c,j] x_{t-K+1+j}[c] (zero left padding per
// sequence), y = act(a) (silu or identity); x, y (B,T,Ch), w (Ch,K), 1 <= K <= 16.
// A thread takes one channel c and a run of MN__CONV_RUN consecutive steps of one sequence
// (adjacent threads = adjacent channels: every load is coalesced; block = 32 channels x 8 runs),
// with c's weights in registers and the last KM inputs in a register window slid one step at a
// time: one load of x per step instead of K, and no index division per element. KM (a template
// constant, so the windows stay in registers) is 4 (the model's K, and any K <= 4) or 16; the
// window's slots before the K taps are skipped (predicated), so the sums are the same terms in
// the same order as a loop over j < K.
// Mamba-2's form (mn__shortconv_fwd / the backward's bias and ld arguments): x's rows ld >= Ch floats
// apart (read straight out of the in_proj output), a_t += bias[c], and silu = 2: SiLU in double (as its
// former separate pass and the CPU). The defaults (ld = Ch, no bias, silu 0 / 1) give the same bits as before.
#define MN__CONV_RUN 32
static size_t mn__conv_blocks_y(size_t B, size_t T) {   // grid.y: blocks of 8 runs (grid-stride beyond 65535)
    size_t runs = B * ((T + MN__CONV_RUN - 1) / MN__CONV_RUN), y = (runs + 7) / 8;
    return y < 1 ? 1 : y > 65535 ? 65535 : y;
}
// dw partials
static size_t mn__conv_tmp(size_t B, size_t T, size_t Ch, size_t K) { return mn__conv_blocks_y(B, T) * Ch * K; }
// silu = 2's activation: double, as the CPU's Mamba-2 layer (and mn__k_ssd_convact, the decode step's)
__device__ __forceinline__ float mn__conv_act(float a, int silu) {
    return silu == 2 ? (float)((double)a / (1.0 + exp(-(double)a))) : silu ? a / (1.f + expf(-a)) : a;
}
// its backward for silu 1 or 2: da (the output's gradient) times silu'(a), s (1 + a (1 - s)) with s = sigmoid(a)
__device__ __forceinline__ float mn__conv_act_grad(float da, float a, int silu) {
    if (silu == 2) {
        double sd = 1.0 / (1.0 + exp(-(double)a));
        return (float)(da * sd * (1.0 + a * (1.0 - sd)));
    }
    float s = 1.f / (1.f + expf(-a));
    return da * (s * (1.f + a * (1.f - s)));
}
// a_t = sum over the K taps of the window (wr, xw as below): slots m >= KM-K, in order
template <int KM> __device__ __forceinline__ float mn__conv_dot(const float* wr, const float* xw, int K) {
    float a = 0.f;
#pragma unroll
    for (int m = 0; m < KM; m++) if (m >= KM - K) a += wr[m] * xw[m];
    return a;
}
// Registers of thread c: wr[m] = w[c, m-(KM-K)] (the taps aligned to the window's end, for a_t),
// wv[j] = w[c, j] (for the backward's dx); and the x window of step t0-1: xw[m] = x_{t0-KM+m}, zero
// before the sequence (only the last K-1 slots matter).
template <int KM> __device__ __forceinline__ void mn__conv_init_w(float* wr, float* wv, const float* w, size_t c,
                                                                  int K) {
#pragma unroll
    for (int m = 0; m < KM; m++) {
        wr[m] = m >= KM - K ? w[c * K + m - (KM - K)] : 0.f;
        wv[m] = m < K ? w[c * K + m] : 0.f;
    }
}
template <int KM> __device__ __forceinline__ void mn__conv_init_x(float* xw, const float* x, size_t t0, size_t Ch,
                                                                  int K) {
#pragma unroll
    for (int m = 0; m < KM; m++) xw[m] = m > KM - K && t0 + m >= (size_t)KM ? x[(t0 + m - KM) * Ch] : 0.f;
}
template <int KM>
__global__ void __launch_bounds__(256) mn__k_conv_fwd(float* __restrict__ out, const float* __restrict__ inp,
                                                      const float* __restrict__ w, const float* __restrict__ bias,
                                                      size_t B, size_t T, size_t Ch, size_t ld, int K, int silu) {
    size_t c = blockIdx.x * (size_t)32 + threadIdx.x, nrun = (T + MN__CONV_RUN - 1) / MN__CONV_RUN;
    if (c >= Ch) return;
    float wr[KM], wv[KM], xw[KM];
    mn__conv_init_w<KM>(wr, wv, w, c, K);
    const float bc = bias ? bias[c] : 0.f;
    for (size_t run = blockIdx.y * (size_t)8 + threadIdx.y; run < B * nrun; run += (size_t)gridDim.y * 8) {
        size_t b = run / nrun, t0 = run % nrun * MN__CONV_RUN, t1 = t0 + MN__CONV_RUN < T ? t0 + MN__CONV_RUN : T;
        const float* x = inp + b * T * ld + c;      // rows ld apart, out's Ch
        float* y = out + b * T * Ch + c;
        mn__conv_init_x<KM>(xw, x, t0, ld, K);
        for (size_t t = t0; t < t1; t++) {
#pragma unroll
            for (int m = 0; m < KM - 1; m++) xw[m] = xw[m + 1];
            xw[KM - 1] = x[t * ld];
            float a = mn__conv_dot<KM>(wr, xw, K);
            if (bias) a += bc;                      // not a + 0.f: -0 stays -0 without a bias
            y[t * Ch] = mn__conv_act(a, silu);
        }
    }
}
// forward: y_t = act(a_t), so da_t = dy_t act'(a_t) (silu: s (1 + a (1 - s)), s = sigmoid(a)) and
//   dx_s += sum_j w_j da_{s+K-1-j}   (terms with s+K-1-j >= T are zero: nothing past the end)
//   dw[c,j] += sum_{b,t} x_{t-K+1+j} da_t
// One fused kernel, threads as the forward: thread (c, run [t0,t1)) walks t = t0 .. t1+K-2,
// computing a_t and da_t ONCE per step (da_t = 0 for t >= T), keeping the last KM da's in a second
// register window; at step t it finishes dx_{t-K+1} (when >= t0) and, for t < t1, adds
// x_{t-K+1+j} da_t to its dw sums. dw: the 8 runs of a block are summed in a fixed order (shared
// memory) into part (gridDim.y, Ch*K), then mn__k_colfinish adds those rows in a fixed order:
// deterministic, no atomics. The bias's gradient (partb non-NULL: sum_{b,t} da_t) the same way into
// partb (gridDim.y, Ch). x and dx rows ld floats apart (dout's Ch).
template <int KM>
__global__ void __launch_bounds__(256) mn__k_conv_bwd(float* __restrict__ dinp, float* __restrict__ part,
                                                      float* __restrict__ partb, const float* __restrict__ dout,
                                                      const float* __restrict__ inp, const float* __restrict__ w,
                                                      const float* __restrict__ bias, size_t B, size_t T, size_t Ch,
                                                      size_t ld, int K, int silu, int acc) {
    __shared__ float sh[8][KM][32];                 // the block's dw sums: run lane, tap slot, channel
    __shared__ float shb[8][32];                    // and its bias sums
    size_t c = blockIdx.x * (size_t)32 + threadIdx.x, nrun = (T + MN__CONV_RUN - 1) / MN__CONV_RUN;
    float wr[KM], wv[KM], xw[KM], daw[KM], accw[KM];   // accw[m]: dw[c, m-(KM-K)]
#pragma unroll
    for (int m = 0; m < KM; m++) accw[m] = 0.f;
    float accb = 0.f;
    if (c < Ch) mn__conv_init_w<KM>(wr, wv, w, c, K);
    const float bc = bias && c < Ch ? bias[c] : 0.f;
    for (size_t run = blockIdx.y * (size_t)8 + threadIdx.y; c < Ch && run < B * nrun; run += (size_t)gridDim.y * 8) {
        size_t b = run / nrun, t0 = run % nrun * MN__CONV_RUN, t1 = t0 + MN__CONV_RUN < T ? t0 + MN__CONV_RUN : T;
        const float *x = inp + b * T * ld + c, *dy = dout + b * T * Ch + c;
        float* dx = dinp + b * T * ld + c;
        mn__conv_init_x<KM>(xw, x, t0, ld, K);
#pragma unroll
        for (int m = 0; m < KM; m++) daw[m] = 0.f;  // da before t0: never used (dx_s, s >= t0, reads da_{s..s+K-1})
        for (size_t t = t0; t < t1 + K - 1; t++) {
#pragma unroll
            for (int m = 0; m < KM - 1; m++) { xw[m] = xw[m + 1]; daw[m] = daw[m + 1]; }
            float da = 0.f;
            xw[KM - 1] = 0.f;
            if (t < T) {
                xw[KM - 1] = x[t * ld];
                da = dy[t * Ch];
                if (silu) {                         // a recomputed (with the bias), SiLU's derivative
                    float a = mn__conv_dot<KM>(wr, xw, K);
                    if (bias) a += bc;
                    da = mn__conv_act_grad(da, a, silu);
                }
            }
            daw[KM - 1] = da;
            if (t < t1) {
#pragma unroll
                for (int m = 0; m < KM; m++) if (m >= KM - K) accw[m] += xw[m] * da;
                accb += da;
            }
            if (t + 1 >= t0 + K) {                 // s = t-K+1 >= t0: dx_s = sum_j w_j da_{t-j}
                float g = 0.f;
#pragma unroll
                for (int j = 0; j < KM; j++) if (j < K) g += wv[j] * daw[KM - 1 - j];
                dx[(t + 1 - K) * ld] = acc ? dx[(t + 1 - K) * ld] + g : g;   // each dx_s written once
            }
        }
    }
#pragma unroll
    for (int m = 0; m < KM; m++) sh[threadIdx.y][m][threadIdx.x] = accw[m];
    shb[threadIdx.y][threadIdx.x] = accb;
    __syncthreads();
    if (partb && threadIdx.y == 1 && c < Ch) {    // a second lane row, beside row 0's dw sums
        float s = 0.f;
        for (int y = 0; y < 8; y++) s += shb[y][threadIdx.x];
        partb[blockIdx.y * Ch + c] = s;
    }
    if (threadIdx.y == 0 && c < Ch)
        for (int j = 0; j < K; j++) {
            float s = 0.f;
            for (int y = 0; y < 8; y++) s += sh[y][KM - K + j][threadIdx.x];
            part[blockIdx.y * Ch * K + c * K + j] = s;
        }
}
// out (B,T,Ch) = act(conv(inp) + bias): inp's rows ld >= Ch floats apart; bias (Ch) or NULL (see above)
static int mn__shortconv_fwd(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, const float* bias,
                             size_t B, size_t T, size_t Ch, size_t ld, size_t K, int silu) {
    if (B * T * Ch == 0) return MN_OK;
    if (K < 1 || K > 16) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_shortconv_forward",
                                         "kernel size K outside [1, 16]", __LINE__);
    dim3 grid((unsigned)((Ch + 31) / 32), (unsigned)mn__conv_blocks_y(B, T)), block(32, 8);
    if (K <= 4) mn__k_conv_fwd<4><<<grid, block, 0, MN__STREAM>>>(out, inp, weight, bias, B, T, Ch, ld, (int)K, silu);
    else mn__k_conv_fwd<16><<<grid, block, 0, MN__STREAM>>>(out, inp, weight, bias, B, T, Ch, ld, (int)K, silu);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_shortconv_forward(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, size_t B, size_t T,
                              size_t Ch, size_t K, int silu) {
    return mn__shortconv_fwd(ctx, out, inp, weight, NULL, B, T, Ch, Ch, K, silu);
}
// Mamba-2's extras (defaults: none): bias (Ch) as the forward's, its gradient added into dbias (Ch) from the
// kernel's partials (no column-sum pass); inp and dinp rows ld floats apart (0: Ch)
static int mn__shortconv_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, const float* dout, const float* inp,
                                  const float* weight, size_t B, size_t T, size_t Ch, size_t K, int silu, int acc,
                                  const float* bias = NULL, float* dbias = NULL, size_t ld = 0) {
    if (B * T * Ch == 0) return MN_OK;
    if (K < 1 || K > 16) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_shortconv_backward",
                                         "kernel size K outside [1, 16]", __LINE__);
    if (ld == 0) ld = Ch;
    dim3 grid((unsigned)((Ch + 31) / 32), (unsigned)mn__conv_blocks_y(B, T)), block(32, 8);
    float *part, *partb;
    MN__TRY(mn__tmp(ctx, mn__conv_tmp(B, T, Ch, K) + (dbias ? mn__conv_tmp(B, T, Ch, 1) : 0), &part));
    partb = dbias ? part + mn__conv_tmp(B, T, Ch, K) : NULL;   // (grid.y, Ch) after the dw rows
    if (K <= 4) mn__k_conv_bwd<4><<<grid, block, 0, MN__STREAM>>>(dinp, part, partb, dout, inp, weight, bias, B, T, Ch,
                                                                  ld, (int)K, silu, acc);
    else mn__k_conv_bwd<16><<<grid, block, 0, MN__STREAM>>>(dinp, part, partb, dout, inp, weight, bias, B, T, Ch, ld,
                                                            (int)K, silu, acc);
    MN__LAUNCHED();
    if (dbias) MN__TRY(mn__colfinish(ctx, dbias, partb, grid.y, Ch));
    return mn__colfinish(ctx, dweight, part, grid.y, Ch * K);
}
int mn_cuda_shortconv_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, const float* dout, const float* inp,
                               const float* weight, size_t B, size_t T, size_t Ch, size_t K, int silu) {
    return mn__shortconv_backward(ctx, dinp, dweight, dout, inp, weight, B, T, Ch, K, silu, 1);
}

// L2 norm per row (fla l2norm): y = x / sqrt(x.x + 1e-6); backward dx += r (dy - y (y.dy))
__global__ void mn__k_l2norm_fwd(float* out, float* rstd, const float* inp, size_t N, size_t D) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float* x = inp + row * D;
    float ss = 0.f;
    for (size_t d = lane; d < D; d += 32) ss += x[d] * x[d];
    float r = 1.f / sqrtf(mn__warp_sum(ss) + 1e-6f);
    for (size_t d = lane; d < D; d += 32) out[row * D + d] = x[d] * r;
    if (lane == 0) rstd[row] = r;
}
__global__ void mn__k_l2norm_bwd(float* dinp, const float* dout, const float* out, const float* rstd, size_t N,
                                 size_t D, int acc) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *y = out + row * D, *dy = dout + row * D;
    float dot = 0.f;
    for (size_t d = lane; d < D; d += 32) dot += y[d] * dy[d];
    dot = mn__warp_sum(dot);
    for (size_t d = lane; d < D; d += 32) {
        float g = rstd[row] * (dy[d] - y[d] * dot);
        dinp[row * D + d] = acc ? dinp[row * D + d] + g : g;
    }
}
int mn_cuda_l2norm_forward(mn_cuda_ctx* ctx, float* out, float* rstd, const float* inp, size_t N, size_t D) {
    if (N == 0) return MN_OK;
    mn__k_l2norm_fwd<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(out, rstd, inp, N, D); MN__LAUNCHED();
    return MN_OK;
}
static int mn__l2norm_backward(mn_cuda_ctx* ctx, float* dinp, const float* dout, const float* out, const float* rstd,
                               size_t N, size_t D, int acc) {
    if (N == 0) return MN_OK;
    mn__k_l2norm_bwd<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(dinp, dout, out, rstd, N, D, acc); MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_l2norm_backward(mn_cuda_ctx* ctx, float* dinp, const float* dout, const float* out, const float* rstd,
                            size_t N, size_t D) {
    return mn__l2norm_backward(ctx, dinp, dout, out, rstd, N, D, 1);
}

// RoPE, as mesanet.h's mn_rope_forward (non-interleaved, "rotate half"): dims (i, i + D/2) of every
// row at position p = pos0 + t rotate by phi = p theta^(-2i/D),
//   y_i = x_i cos phi - x_{i+D/2} sin phi,  y_{i+D/2} = x_{i+D/2} cos phi + x_i sin phi,
// the angle, its cosine and sine and the rotation in double as on the CPU (a float angle is off by
// ~1e-4 rad at p ~ 4000). A thread per (t, i) computes that position's sine and cosine once and rotates
// the rows of its slice of the B H rows at that position (blockIdx.y: slice blockIdx.y of rows_per rows).
// The slices matter when T is short and B H large (the synthetic tasks: T <= 128, B H = 512): one slice
// would give T D / 2 = 4096 threads walking 512 rows each (session 9's ncu: 282 us a call, 45 % of a
// Transformer cell's GPU time); the launch makes enough slices for ~2048 threads per SM, 8 rows a slice at least.
// sign = -1 rotates back (the backward: the inverse rotation); acc = 1 adds the result to out; out may
// alias inp when acc = 0 (each thread reads its pair first).
__global__ void mn__k_rope(float* out, const float* inp, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                           double theta, double sign, int acc, size_t rows_per) {
    const size_t half = D / 2, BH = B * H, r0 = blockIdx.y * rows_per;
    const size_t r1 = r0 + rows_per < BH ? r0 + rows_per : BH;
    MN__FOR(idx, T * half) {
        const size_t t = idx / half, i = idx % half;
        const double phi = (double)(pos0 + t) * pow(theta, -2.0 * (double)i / (double)D);
        const double cs = cos(phi), sn = sign * sin(phi);
        for (size_t r = r0; r < r1; r++) {
            const size_t b = r / H, h = r % H, o = ((b * T + t) * H + h) * D;
            const double x1 = inp[o + i], x2 = inp[o + i + half];
            const float y1 = (float)(x1 * cs - x2 * sn), y2 = (float)(x2 * cs + x1 * sn);
            if (acc) { out[o + i] += y1; out[o + i + half] += y2; }
            else { out[o + i] = y1; out[o + i + half] = y2; }
        }
    }
}
static int mn__rope(mn_cuda_ctx* ctx, float* out, const float* inp, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                    double theta, double sign, int acc) {
    if (D % 2) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_rope", "RoPE needs an even head dimension", __LINE__);
    if (B * T * H * D == 0) return MN_OK;
    // slices of the B H rows: enough that the grid has ~2048 threads per SM, at least 8 rows a slice
    size_t BH = B * H, pairs = T * (D / 2), want = (size_t)(ctx->sm_count > 0 ? ctx->sm_count : 1) * 2048;
    size_t ns = want / pairs < 1 ? 1 : want / pairs, rows_per;
    if (ns > (BH + 7) / 8) ns = (BH + 7) / 8;
    if (ns > 65535) ns = 65535;
    rows_per = (BH + ns - 1) / ns;
    ns = (BH + rows_per - 1) / rows_per;
    dim3 grid(mn__grid(ctx, pairs, 256), (unsigned)ns);
    mn__k_rope<<<grid, 256, 0, MN__STREAM>>>(out, inp, B, T, H, D, pos0, theta, sign, acc, rows_per);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_rope_forward(mn_cuda_ctx* ctx, float* out, const float* inp, size_t B, size_t T, size_t H, size_t D,
                         size_t pos0, double theta) {
    return mn__rope(ctx, out, inp, B, T, H, D, pos0, theta, 1.0, 0);
}
int mn_cuda_rope_backward(mn_cuda_ctx* ctx, float* dinp, const float* dout, size_t B, size_t T, size_t H, size_t D,
                          size_t pos0, double theta) {
    return mn__rope(ctx, dinp, dout, B, T, H, D, pos0, theta, -1.0, 1);
}

// Cross-entropy with optional soft-cap z = c tanh(l/c), one block per row:
// loss = logsumexp(z) - z[target]; dl += dloss (softmax(z) - onehot) (1 - tanh^2(l/c))
__device__ __forceinline__ float mn__cap(float l, float c) { return c > 0.f ? c * tanhf(l / c) : l; }
__global__ void mn__k_xent_fwd(float* losses, const float* logits, const int* targets, size_t V, float cap) {
    __shared__ float sh[32];
    size_t n = blockIdx.x;
    const float* z = logits + n * V;
    float mx = -INFINITY, sum = 0.f;
    if (targets[n] < 0) { if (threadIdx.x == 0) losses[n] = 0.f; return; }
    for (size_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, mn__cap(z[v], cap));
    mx = mn__block_max(mx, sh);
    for (size_t v = threadIdx.x; v < V; v += blockDim.x) sum += expf(mn__cap(z[v], cap) - mx);
    sum = mn__block_sum(sum, sh);
    if (threadIdx.x == 0) losses[n] = mx + logf(sum) - mn__cap(z[targets[n]], cap);
}
__global__ void mn__k_xent_bwd(float* dlogits, const float* dlosses, const float* logits, const int* targets, size_t V,
                               float cap) {
    __shared__ float sh[32];
    size_t n = blockIdx.x;
    const float* z = logits + n * V;
    float mx = -INFINITY, sum = 0.f;
    int y = targets[n];
    if (y < 0) return;
    for (size_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, mn__cap(z[v], cap));
    mx = mn__block_max(mx, sh);
    for (size_t v = threadIdx.x; v < V; v += blockDim.x) sum += expf(mn__cap(z[v], cap) - mx);
    sum = mn__block_sum(sum, sh);
    float dl = dlosses[n], inv = 1.f / sum;
    for (size_t v = threadIdx.x; v < V; v += blockDim.x) {
        float p = expf(mn__cap(z[v], cap) - mx) * inv - (v == (size_t)y ? 1.f : 0.f);
        if (cap > 0.f) { float th = tanhf(z[v] / cap); p *= 1.f - th * th; }
        dlogits[n * V + v] += dl * p;
    }
}
int mn_cuda_crossentropy_forward(mn_cuda_ctx* ctx, float* losses, const float* logits, const int* targets, size_t N,
                                 size_t V, double softcap) {
    if (N == 0) return MN_OK;
    if (N > 0x7fffffff) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_crossentropy_forward", "N beyond the grid",
                                        __LINE__);
    mn__k_xent_fwd<<<(unsigned)N, 256, 0, MN__STREAM>>>(losses, logits, targets, V, (float)softcap); MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_crossentropy_backward(mn_cuda_ctx* ctx, float* dlogits, const float* dlosses, const float* logits,
                                  const int* targets, size_t N, size_t V, double softcap) {
    if (N == 0) return MN_OK;
    if (N > 0x7fffffff) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_crossentropy_backward", "N beyond the grid",
                                        __LINE__);
    mn__k_xent_bwd<<<(unsigned)N, 256, 0, MN__STREAM>>>(dlogits, dlosses, logits, targets, V, (float)softcap);
    MN__LAUNCHED();
    return MN_OK;
}

// >>cuda_optim
// defines: mn_cuda_adamw_update, mn_cuda_clip_grad_norm

// AdamW in PyTorch's order, arithmetic in double as mn_adamw_update (memory-bound: free)
__global__ void mn__k_adamw(float* p, const float* g, float* m, float* v, size_t n, double lr, double b1, double b2,
                            double eps, double wd, double bc1, double bc2) {
    MN__FOR(i, n) {
        double gi = g[i], mi = b1 * m[i] + (1.0 - b1) * gi, vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        m[i] = (float)mi; v[i] = (float)vi;
        p[i] = (float)(p[i] * (1.0 - lr * wd) - lr * (mi / bc1) / (sqrt(vi / bc2) + eps));
    }
}
int mn_cuda_adamw_update(mn_cuda_ctx* ctx, float* p, const float* g, float* m, float* v, size_t n, double lr,
                         double beta1, double beta2, double eps, double wd, uint64_t t) {
    if (n == 0) return MN_OK;
    double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
    mn__k_adamw<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2);
    MN__LAUNCHED();
    return MN_OK;
}

// sum of squares in double: per-thread, per-warp, one atomic per warp into ss
__global__ void mn__k_sumsq(double* ss, const float* g, size_t n) {
    double acc = 0.0;
    MN__FOR(i, n) acc += (double)g[i] * g[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(ss, acc);
}
// scale to max_norm when the (finite) norm exceeds it; the decision is made on the device so the
// host need not wait for the norm
__global__ void mn__k_clip(float* g, size_t n, const double* ss, double max_norm) {
    double norm = sqrt(*ss);
    if (!(norm <= 1e300) || !(max_norm > 0) || !(norm > max_norm)) return;
    float s = (float)(max_norm / norm);
    MN__FOR(i, n) g[i] *= s;
}
int mn_cuda_clip_grad_norm(mn_cuda_ctx* ctx, float* grads, size_t n, double max_norm, double* norm) {
    MN__CU(cudaMemsetAsync(ctx->scratch, 0, sizeof(double), MN__STREAM));
    if (n) { mn__k_sumsq<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(ctx->scratch, grads, n); MN__LAUNCHED(); }
    if (n) {
        mn__k_clip<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(grads, n, ctx->scratch, max_norm);
        MN__LAUNCHED();
    }
    if (norm) {
        double ss = 0;
        MN__TRY(mn_cuda_download(ctx, &ss, ctx->scratch, sizeof ss));
        *norm = sqrt(ss);
        if (!(*norm <= 1e300)) *norm = NAN;
    }
    return MN_OK;
}

// >>cuda_attention
// defines: mn_cuda_attention_work_size, mn_cuda_attention_forward, mn_cuda_attention_backward,
//          mn_cuda_attention_step
//
// Causal softmax attention and SWA, as mesanet.h's >>attention: per batch b and head h,
//   o_t = sum_{s in W(t)} p_ts v_s,  p_ts = exp(scale q_t.k_s - lse_t),  lse_t = log sum_{s in W(t)} e^{scale q_t.k_s},
// W(t) = {s <= t} (window 0) or {t-W < s <= t} (SWA, the token itself included).
// Flash-style: a block owns 128 rows (8 warps of 16) and streams 64-row tiles of the other side through
// shared memory, two stages deep (cp.async), the online softmax in registers; no T x T matrix exists.
//   forward  (block = 128 queries, key tiles streamed): S = Q K^T, each row's running max m and sum l,
//            O <- O e^{m_old - m_new} + P V; saves lse = m + log l (B,T,H), the contract of
//            mn_attention_forward_naive.
//   backward (recomputes P from lse, Delta_t = do_t.o_t): dV += P^T dO, dS = P (dO V^T - Delta),
//            dK += scale dS^T Q in one kernel (block = 128 keys, query tiles streamed), dQ += scale dS K
//            in another (block = 128 queries); each writes its outputs once: no atomics, the same bits
//            every run.
// Every product is an fp16 tensor-core mma (m16n8k16, fp32 accumulation), softmax and rescaling in fp32.
// Cost per (b,h), causal: forward 2 T^2 D flops (half of S and of P V), backward 7 T^2 D (S and
// dO V^T in both kernels, then P^T dO, dS^T Q, dS K); SWA: T W in place of T^2 / 2. Memory: fp16
// copies of q, k, v (and dO) in the workspace, 2 D bytes per token and tensor; K and V tiles are read
// once per 128-query block (mostly from L2).
// fp16 range: every 64-row tile of q, k, v, dO of a head is stored times a power of two that brings its
// largest |entry| to <= 1 (its factor r: x = r x16); the products take the factors back as scalars
// (a per-tile constant on S and dO V^T), and P and dS enter their products scaled by ratios of these
// factors to the head's largest (m: mq, mk, mv, mdo), so every fp16 operand lies in [-2D, 2D] and no
// gradient underflows however small the loss makes it. All the factors are exact powers of two.
// Supported: Dk = Dv in {64, 128}, B H <= 65535, 16-byte aligned rows; anything else MN_ERR_CONFIG.

#define MN__AT 64     // rows of a streamed tile (and of a scale tile)
#define MN__AB 128    // rows a block owns (8 warps x 16)

typedef struct mn__attn_ws {
    __half *q, *k, *v, *dO;     // (B*H, Tp, D) fp16, rows past T zero
    float* r;                   // (4, B*H, NT) tile factors of q, k, v, dO (0 for an all-zero tile)
    float* m;                   // (4, B*H) the largest factor of each head (1 when all are 0)
    float *L2, *Dl;             // (B*H, Tp) lse in log2 units (+inf past T), Delta
    size_t Tp, NT;              // T rounded up to 128, tiles of 64
} mn__attn_ws;
static size_t mn__attn_layout(mn__attn_ws* w, float* base, size_t B, size_t T, size_t H, size_t D) {
    size_t BH = B * H, Tp = (T + MN__AB - 1) / MN__AB * MN__AB, NT = Tp / MN__AT, off = 0;
    float *q, *k, *v, *o;
#define MN__PIECE(ptr, n) do { (ptr) = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)
    MN__PIECE(q, BH * Tp * D / 2); MN__PIECE(k, BH * Tp * D / 2); MN__PIECE(v, BH * Tp * D / 2);
    MN__PIECE(o, BH * Tp * D / 2);
    MN__PIECE(w->r, 4 * BH * NT); MN__PIECE(w->m, 4 * BH); MN__PIECE(w->L2, BH * Tp); MN__PIECE(w->Dl, BH * Tp);
#undef MN__PIECE
    w->q = (__half*)q; w->k = (__half*)k; w->v = (__half*)v; w->dO = (__half*)o; w->Tp = Tp; w->NT = NT;
    return off;
}
size_t mn_cuda_attention_work_size(size_t B, size_t T, size_t H, size_t D) {
    mn__attn_ws w;
    return mn__attn_layout(&w, NULL, B, T, H, D);
}

// ---- packing: fp32 (B,T,H,D) -> scaled fp16 tiles ------------------------------------------------
typedef struct mn__attn_pack_args {
    const float* src[4];        // q, k, v, dout (B,T,H,D)
    __half* dst[4];             // (B*H, Tp, D)
    float* r;                   // (4, B*H, NT)
    const float *o, *lse;       // backward (z = 3): the forward's output (B,T,H,D) and lse (B,T,H)
    float *L2, *Dl;             // (B*H, Tp) written with z = 3
    unsigned B, T, H, Tp, NT;
} mn__attn_pack_args;
// One block per 64-row tile n of head bh of tensor z (blockIdx.z): the tile's largest |x| (block
// max), s = the power of two with s max <= 1, dst = fp16(s x), r = 1/s. With z = 3 (dO) also
// Delta_t = dO_t . o_t (fp32, from the unscaled rows) and L2_t = lse_t log2(e).
template <int D>
__global__ void __launch_bounds__(256) mn__k_attn_pack(mn__attn_pack_args A) {
    constexpr int PER = MN__AT * D / 4 / 256, RW = D / 4;   // float4 per thread; threads per row
    __shared__ float red[8];
    const int z = blockIdx.z, tid = threadIdx.x, lane = tid & 31;
    const unsigned n = blockIdx.x, bh = blockIdx.y, b = bh / A.H, h = bh % A.H;
    // (selected, not indexed: a run-time index into the parameter block would copy it to local memory)
    const float* src = z == 0 ? A.src[0] : z == 1 ? A.src[1] : z == 2 ? A.src[2] : A.src[3];
    float4 x[PER];
    float mx = 0.f;
#pragma unroll
    for (int m = 0; m < PER; m++) {
        const int idx = tid + 256 * m, row = idx / RW, c4 = idx % RW;
        const unsigned t = n * MN__AT + row;
        x[m] = t < A.T ? *(const float4*)(src + (((size_t)b * A.T + t) * A.H + h) * D + 4 * c4)
                       : make_float4(0.f, 0.f, 0.f, 0.f);
        mx = fmaxf(mx, fmaxf(fmaxf(fabsf(x[m].x), fabsf(x[m].y)), fmaxf(fabsf(x[m].z), fabsf(x[m].w))));
    }
    mx = mn__warp_max(mx);
    if (lane == 0) red[tid >> 5] = mx;
    __syncthreads();
    mx = red[0];
    for (int i = 1; i < 8; i++) mx = fmaxf(mx, red[i]);
    const float s = mn__mscale(mx);                    // 1 for an all-zero tile
    __half* dst = (z == 0 ? A.dst[0] : z == 1 ? A.dst[1] : z == 2 ? A.dst[2] : A.dst[3]) +
                  ((size_t)bh * A.Tp + n * MN__AT) * D;
#pragma unroll
    for (int m = 0; m < PER; m++) {
        const int idx = tid + 256 * m, row = idx / RW, c4 = idx % RW;
        uint2 u = make_uint2(mn__h2(x[m].x * s, x[m].y * s), mn__h2(x[m].z * s, x[m].w * s));
        *(uint2*)(dst + (size_t)row * D + 4 * c4) = u;
    }
    if (tid == 0) A.r[((size_t)z * gridDim.y + bh) * A.NT + n] = mx > 0.f ? 1.f / s : 0.f;
    if (z != 3) return;                                // block-uniform
#pragma unroll
    for (int m = 0; m < PER; m++) {
        const int idx = tid + 256 * m, row = idx / RW, c4 = idx % RW;
        const unsigned t = n * MN__AT + row;
        float4 o = t < A.T ? *(const float4*)(A.o + (((size_t)b * A.T + t) * A.H + h) * D + 4 * c4)
                           : make_float4(0.f, 0.f, 0.f, 0.f);
        float d = x[m].x * o.x + x[m].y * o.y + x[m].z * o.z + x[m].w * o.w;
#pragma unroll
        for (int off = RW / 2; off >= 1; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);   // a row's RW lanes
        if (c4 == 0) {
            A.Dl[(size_t)bh * A.Tp + t] = d;
            A.L2[(size_t)bh * A.Tp + t] = t < A.T ? A.lse[((size_t)b * A.T + t) * A.H + h] * 1.4426950408889634f
                                                  : INFINITY;
        }
    }
}
// m[i] = the largest of the NT factors r[i, .] (1 if all are 0), i over (tensor, head)
__global__ void mn__k_attn_rmax(float* m, const float* r, size_t n, size_t NT) {
    MN__FOR(i, n) {
        float mx = 0.f;
        for (size_t t = 0; t < NT; t++) mx = fmaxf(mx, r[i * NT + t]);
        m[i] = mx > 0.f ? mx : 1.f;
    }
}

// ---- the three kernels ------------------------------------------------------------------------
typedef struct mn__attn_args {
    const __half *q, *k, *v, *dO;            // (B*H, Tp, D) fp16 tiles
    const float *r, *m;                      // tile factors (4, B*H, NT), head maxima (4, B*H)
    const float *L2, *Dl;                    // (B*H, Tp)
    float *out, *lse;                        // forward: (B,T,H,D), (B,T,H) written
    float *dq, *dk, *dv;                     // backward: (B,T,H,D), accumulated (acc) or written
    int T, H, Tp, NT, W, acc;                // W: window (0: full causal)
    float c, scale;                          // c = scale log2(e): scores in log2 units
} mn__attn_args;

// The key range of a 128-query block and the per-warp tests. Key s is valid for query t when
// s <= t and (W == 0 or s > t - W).
__device__ __forceinline__ void mn__attn_krange(int q0, int T, int W, int& jlo, int& jhi) {
    jlo = W && q0 + 1 > W ? (q0 + 1 - W) / MN__AT : 0;
    jhi = min((q0 + MN__AB - 1) / MN__AT, (T - 1) / MN__AT);
}
// no valid (t, s) with t in [t0, t0+nt), s in [s0, s0+ns)
__device__ __forceinline__ bool mn__attn_none(int t0, int nt, int s0, int ns, int W) {
    return s0 > t0 + nt - 1 || (W && s0 + ns - 1 + W <= t0);
}
// some (t, s) in those ranges invalid (the tile needs the element mask)
__device__ __forceinline__ bool mn__attn_partial(int t0, int nt, int s0, int ns, int W) {
    return s0 + ns - 1 > t0 || (W && s0 + W <= t0 + nt - 1);
}
__device__ __forceinline__ bool mn__attn_ok(int t, int s, int W) { return s <= t && (!W || s + W > t); }

// quad reductions: the 4 lanes that hold one accumulator row
__device__ __forceinline__ float mn__qmax(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// rows x D fp16 from global (row stride D) into shared memory (row stride D + 8), cp.async
template <int D, int NTH = 256>
__device__ __forceinline__ void mn__attn_tile(__half* dst, const __half* src, int rows) {
    for (int idx = threadIdx.x; idx < rows * D / 8; idx += NTH) {
        const int row = idx / (D / 8), c8 = (idx % (D / 8)) * 8;
        mn__cp16(dst + row * (D + 8) + c8, src + (size_t)row * D + c8);
    }
}
// acc (16 x 64, 8 n-tiles) = A (16 x D, rows 16 w of sA) B^T, B's 64 rows at sB (both stride D + 8)
template <int D>
__device__ __forceinline__ void mn__attn_abt(float (&acc)[8][4], const __half* sA, int w, const __half* sB, int lane) {
#pragma unroll
    for (int t = 0; t < 8; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        uint32_t af[4];
        mn__ldsm4(af, mn__a_addr(sA, D + 8, 16 * w, 16 * ks, lane));
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t bf[4];
            mn__ldsm4(bf, mn__bn_addr(sB, D + 8, 16 * np, 16 * ks, lane));
            mn__mma(acc[2 * np], af, bf[0], bf[1]);
            mn__mma(acc[2 * np + 1], af, bf[2], bf[3]);
        }
    }
}
// acc (16 x D) += F (16 x 64 as A fragments: pf[kk] covers columns 16 kk ..) B, B (64 x D) at sB
template <int D>
__device__ __forceinline__ void mn__attn_pb(float (&acc)[D / 8][4], const uint32_t (&pf)[4][4], const __half* sB,
                                            int lane) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int np = 0; np < D / 16; np++) {
            uint32_t bf[4];
            mn__ldsm4t(bf, mn__bk_addr(sB, D + 8, 16 * kk, 16 * np, lane));
            mn__mma(acc[2 * np], pf[kk], bf[0], bf[1]);
            mn__mma(acc[2 * np + 1], pf[kk], bf[2], bf[3]);
        }
}
// the 16 x D accumulator rows r0, r1 (< T) of a (B,T,H,D) tensor: dst (+)= f acc
template <int D>
__device__ __forceinline__ void mn__attn_store(float* dst, const float (&acc)[D / 8][4], float f0, float f1, int r0,
                                               int r1, const mn__attn_args& A, size_t b, size_t h, int acc_mode) {
    const int q4 = threadIdx.x & 3;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int row = half ? r1 : r0;
        const float f = half ? f1 : f0;
        if (row >= A.T) continue;
        float* p = dst + ((b * A.T + row) * A.H + h) * D;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            float2 u = make_float2(acc[j][2 * half] * f, acc[j][2 * half + 1] * f);
            float2* d = (float2*)(p + 8 * j + 2 * q4);
            if (acc_mode) { float2 o = *d; u.x += o.x; u.y += o.y; }
            *d = u;
        }
    }
}

template <int D> static size_t mn__attn_smem_fwd(void) { return (size_t)(MN__AB + 4 * MN__AT) * (D + 8) * 2; }
template <int D> static size_t mn__attn_smem_bwd(void) {
    return (size_t)(2 * MN__AB + 4 * MN__AT) * (D + 8) * 2 + 4 * MN__AT * sizeof(float);
}

// Forward: block (query block ib, head bh) of 4 warps, 2 blocks per multiprocessor; warp w owns the
// queries q0 + 32 w .. +31 as two m16 tiles, so every K and V fragment it reads from shared memory
// feeds two products (16 rows a warp, 8 warps a block: 1.89 ms instead of 1.66 at bench_cuda's shape,
// cuda/results.md). Each 64-key tile is taken in two halves of 32 keys, each one online-softmax step:
// S = Q K^T (2 x 4 n-tiles), the row max and sum, O <- O e^{m_old - m_new} + P V.
template <int D>
__global__ void __launch_bounds__(128, 2) mn__k_attn_fwd(mn__attn_args A) {
    constexpr int SK = D + 8, NO = D / 8, NTH = 128;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __half* sQ = (__half*)mn__smem;                  // (128, SK)
    __half* sK = sQ + MN__AB * SK;                   // 2 stages x (64, SK)
    __half* sV = sK + 2 * MN__AT * SK;               // 2 stages x (64, SK)
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, q4 = lane & 3;
    const int NB = (A.T + MN__AB - 1) / MN__AB, ib = NB - 1 - (int)blockIdx.x;   // the longest rows first
    const size_t bh = blockIdx.y, b = bh / A.H, h = bh % A.H, base = bh * (size_t)A.Tp * D;
    const int q0 = ib * MN__AB, wr0 = q0 + 32 * w;
    int jlo, jhi;
    mn__attn_krange(q0, A.T, A.W, jlo, jhi);
    mn__attn_tile<D, NTH>(sQ, A.q + base + (size_t)q0 * D, MN__AB);
    mn__attn_tile<D, NTH>(sK, A.k + base + (size_t)jlo * MN__AT * D, MN__AT);
    mn__attn_tile<D, NTH>(sV, A.v + base + (size_t)jlo * MN__AT * D, MN__AT);
    mn__cp_commit();
    const size_t NT = A.NT;
    const float* rk = A.r + (1 * gridDim.y + bh) * NT;
    const float* rv = A.r + (2 * gridDim.y + bh) * NT;
    // the warp's 32 rows lie in one 64-row scale tile of q
    const float aq = A.c * A.r[bh * NT + 2 * ib + (w >> 1)], mv = A.m[2 * gridDim.y + bh];
    float o[2][NO][4], m[2][2], l[2][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        m[r][0] = m[r][1] = -INFINITY; l[r][0] = l[r][1] = 0.f;
#pragma unroll
        for (int j = 0; j < NO; j++) o[r][j][0] = o[r][j][1] = o[r][j][2] = o[r][j][3] = 0.f;
    }
    for (int j = jlo; j <= jhi; j++) {
        const int st = (j - jlo) & 1;
        mn__cp_wait<0>();                           // this thread's copies of tile j have landed ...
        __syncthreads();                            // ... and everyone's; everyone is done with tile j-1
        if (j < jhi) {
            const size_t nx = (size_t)(j + 1) * MN__AT * D;
            mn__attn_tile<D, NTH>(sK + (st ^ 1) * MN__AT * SK, A.k + base + nx, MN__AT);
            mn__attn_tile<D, NTH>(sV + (st ^ 1) * MN__AT * SK, A.v + base + nx, MN__AT);
        }
        mn__cp_commit();
        const __half *cK = sK + st * MN__AT * SK, *cV = sV + st * MN__AT * SK;
        const float a = aq * rk[j], ratio = rv[j] / mv;   // ratio = rv_j / mv <= 1: a power of two
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int kh = j * MN__AT + 32 * hh;             // keys kh .. kh+31
            if (mn__attn_none(wr0, 32, kh, 32, A.W)) continue;   // warp-uniform: no barrier below
            float s[2][4][4];
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int t = 0; t < 4; t++) s[r][t][0] = s[r][t][1] = s[r][t][2] = s[r][t][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {            // S = Q K^T (fp16 units)
                uint32_t af[2][4];
                mn__ldsm4(af[0], mn__a_addr(sQ, SK, 32 * w, 16 * ks, lane));
                mn__ldsm4(af[1], mn__a_addr(sQ, SK, 32 * w + 16, 16 * ks, lane));
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    uint32_t bf[4];
                    mn__ldsm4(bf, mn__bn_addr(cK, SK, 32 * hh + 16 * np, 16 * ks, lane));
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        mn__mma(s[r][2 * np], af[r], bf[0], bf[1]);
                        mn__mma(s[r][2 * np + 1], af[r], bf[2], bf[3]);
                    }
                }
            }
            const bool mask = mn__attn_partial(wr0, 32, kh, 32, A.W);
            uint32_t pf[2][2][4];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int r0 = wr0 + 16 * r + g, r1 = r0 + 8;
                float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
                for (int t = 0; t < 4; t++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float x = s[r][t][e] * a;
                        if (mask && !mn__attn_ok(e < 2 ? r0 : r1, kh + 8 * t + 2 * q4 + (e & 1), A.W)) x = -INFINITY;
                        s[r][t][e] = x;
                        if (e < 2) x0 = fmaxf(x0, x); else x1 = fmaxf(x1, x);
                    }
                x0 = fmaxf(m[r][0], mn__qmax(x0)); x1 = fmaxf(m[r][1], mn__qmax(x1));
                const float b0 = x0 == -INFINITY ? 0.f : x0, b1 = x1 == -INFINITY ? 0.f : x1;   // exp2 references
                const float c0 = exp2f(m[r][0] - b0), c1 = exp2f(m[r][1] - b1);               // 0 while m = -inf
                m[r][0] = x0; m[r][1] = x1; l[r][0] *= c0; l[r][1] *= c1;
#pragma unroll
                for (int jj = 0; jj < NO; jj++) {
                    o[r][jj][0] *= c0; o[r][jj][1] *= c0; o[r][jj][2] *= c1; o[r][jj][3] *= c1;
                }
                // P (fp32 for l), then P rv_j / mv as the A fragments of P V
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const float p0 = exp2f(s[r][t][0] - b0), p1 = exp2f(s[r][t][1] - b0), p2 = exp2f(s[r][t][2] - b1),
                                p3 = exp2f(s[r][t][3] - b1);
                    l[r][0] += p0 + p1; l[r][1] += p2 + p3;
                    pf[r][t >> 1][2 * (t & 1)] = mn__h2(p0 * ratio, p1 * ratio);
                    pf[r][t >> 1][2 * (t & 1) + 1] = mn__h2(p2 * ratio, p3 * ratio);
                }
            }
#pragma unroll
            for (int kk = 0; kk < 2; kk++)                   // O += P V (units of mv)
#pragma unroll
                for (int np = 0; np < D / 16; np++) {
                    uint32_t bf[4];
                    mn__ldsm4t(bf, mn__bk_addr(cV, SK, 32 * hh + 16 * kk, 16 * np, lane));
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        mn__mma(o[r][2 * np], pf[r][kk], bf[0], bf[1]);
                        mn__mma(o[r][2 * np + 1], pf[r][kk], bf[2], bf[3]);
                    }
                }
        }
    }
    mn__cp_wait_all();
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int r0 = wr0 + 16 * r + g, r1 = r0 + 8;
        float l0 = l[r][0], l1 = l[r][1];
        l0 += __shfl_xor_sync(0xffffffffu, l0, 1); l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
        l1 += __shfl_xor_sync(0xffffffffu, l1, 1); l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
        // every row < T saw its own key, so l > 0 there; rows past T are not written
        mn__attn_store<D>(A.out, o[r], mv / l0, mv / l1, r0, r1, A, b, h, 0);
        if (q4 == 0) {
            if (r0 < A.T) A.lse[(b * A.T + r0) * A.H + h] = (m[r][0] + log2f(l0)) * 0.6931471805599453f;
            if (r1 < A.T) A.lse[(b * A.T + r1) * A.H + h] = (m[r][1] + log2f(l1)) * 0.6931471805599453f;
        }
    }
}

// Backward, dK and dV: block (key block kb, head bh); warp w owns keys k0 + 16 w .. +15 (the rows of
// its accumulators: S^T = K Q^T, dP^T = V dO^T), query tiles i streamed with their L2 and Delta.
// Units: dV = mdo sum_i (P^T rdo_i/mdo) dO16_i; dS16 = P (dP16 rv rdo_i - Delta) rq_i / U with
// U = mdo mv mq, so dK = scale U sum_i dS16^T Q16_i.
template <int D>
__global__ void __launch_bounds__(256, 1) mn__k_attn_bwd_kv(mn__attn_args A) {
    constexpr int SK = D + 8, NO = D / 8;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __half* sK = (__half*)mn__smem;                  // (128, SK)
    __half* sV = sK + MN__AB * SK;                   // (128, SK)
    __half* sQ = sV + MN__AB * SK;                   // 2 stages x (64, SK)
    __half* sO = sQ + 2 * MN__AT * SK;               // 2 stages x (64, SK): dO
    float* sL = (float*)(sO + 2 * MN__AT * SK);      // 2 stages x 64: L2
    float* sD = sL + 2 * MN__AT;                     // 2 stages x 64: Delta
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, q4 = lane & 3;
    const size_t bh = blockIdx.y, b = bh / A.H, h = bh % A.H, base = bh * (size_t)A.Tp * D, BH = gridDim.y;
    const int kb = blockIdx.x, k0 = kb * MN__AB, wk0 = k0 + 16 * w, s0 = wk0 + g, s1 = s0 + 8;
    const int NTT = (A.T + MN__AT - 1) / MN__AT, ilo = k0 / MN__AT;
    const int ihi = A.W ? min((k0 + MN__AB - 1 + A.W - 1) / MN__AT, NTT - 1) : NTT - 1;
    auto load = [&](int i, int st) {
        mn__attn_tile<D>(sQ + st * MN__AT * SK, A.q + base + (size_t)i * MN__AT * D, MN__AT);
        mn__attn_tile<D>(sO + st * MN__AT * SK, A.dO + base + (size_t)i * MN__AT * D, MN__AT);
        if (tid < MN__AT / 4) mn__cp16(sL + st * MN__AT + 4 * tid, A.L2 + bh * A.Tp + i * MN__AT + 4 * tid);
        else if (tid < MN__AT / 2)
            mn__cp16(sD + st * MN__AT + 4 * (tid - 16), A.Dl + bh * A.Tp + i * MN__AT + 4 * (tid - 16));
    };
    mn__attn_tile<D>(sK, A.k + base + (size_t)k0 * D, MN__AB);
    mn__attn_tile<D>(sV, A.v + base + (size_t)k0 * D, MN__AB);
    load(ilo, 0);
    mn__cp_commit();
    const size_t NT = A.NT;
    const float *rq = A.r + bh * NT, *rdo = A.r + (3 * BH + bh) * NT;
    const float rk = A.r[(BH + bh) * NT + 2 * kb + (w >> 2)], rv = A.r[(2 * BH + bh) * NT + 2 * kb + (w >> 2)];
    const float mq = A.m[bh], mv = A.m[2 * BH + bh], mdo = A.m[3 * BH + bh], iu = 1.f / (mdo * mv * mq);
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) {
        dk[j][0] = dk[j][1] = dk[j][2] = dk[j][3] = 0.f;
        dv[j][0] = dv[j][1] = dv[j][2] = dv[j][3] = 0.f;
    }
    for (int i = ilo; i <= ihi; i++) {
        const int st = (i - ilo) & 1, t0 = i * MN__AT;
        mn__cp_wait<0>();
        __syncthreads();
        if (i < ihi) load(i + 1, st ^ 1);
        mn__cp_commit();
        // queries t in [t0, t0+64) against this warp's keys: none valid when every t < every s, or
        // every t >= s + W
        if (t0 + MN__AT - 1 < wk0 || (A.W && t0 >= wk0 + 15 + A.W)) continue;
        const __half *cQ = sQ + st * MN__AT * SK, *cO = sO + st * MN__AT * SK;
        const float *cL = sL + st * MN__AT, *cD = sD + st * MN__AT;
        float pt[8][4], sc[8][4];
        mn__attn_abt<D>(pt, sV, w, cO, lane);                 // dP^T = V dO^T (fp16 units)
        mn__attn_abt<D>(sc, sK, w, cQ, lane);                 // S^T = K Q^T
        const float a = A.c * rk * rq[i], ri = rdo[i], rho = ri / mdo, be = rq[i] * iu, al = rv * ri * be;
        const bool mask = t0 < wk0 + 15 || (A.W && t0 + MN__AT - 1 >= wk0 + A.W);
        uint32_t pf[4][4], df[4][4];
#pragma unroll
        for (int t = 0; t < 8; t++) {
            float p[4], d[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = 8 * t + 2 * q4 + (e & 1);          // query t0 + col
                p[e] = exp2f(sc[t][e] * a - cL[col]);
                if (mask && !mn__attn_ok(t0 + col, e < 2 ? s0 : s1, A.W)) p[e] = 0.f;
                d[e] = p[e] * (pt[t][e] * al - cD[col] * be);
            }
            pf[t >> 1][2 * (t & 1)] = mn__h2(p[0] * rho, p[1] * rho);
            pf[t >> 1][2 * (t & 1) + 1] = mn__h2(p[2] * rho, p[3] * rho);
            df[t >> 1][2 * (t & 1)] = mn__h2(d[0], d[1]);
            df[t >> 1][2 * (t & 1) + 1] = mn__h2(d[2], d[3]);
        }
        mn__attn_pb<D>(dv, pf, cO, lane);                     // dV += P^T dO
        mn__attn_pb<D>(dk, df, cQ, lane);                     // dK += dS^T Q
    }
    mn__cp_wait_all();
    const float fk = A.scale * mdo * mv * mq;
    mn__attn_store<D>(A.dk, dk, fk, fk, s0, s1, A, b, h, A.acc);
    mn__attn_store<D>(A.dv, dv, mdo, mdo, s0, s1, A, b, h, A.acc);
}

// Backward, dQ: block (query block ib, head bh) as the forward, key tiles streamed.
// dS16 = P (dP16 rdo rv_j - Delta) rk_j / U with U = mdo mv mk, dQ = scale U sum_j dS16 K16_j.
template <int D>
__global__ void __launch_bounds__(256, 1) mn__k_attn_bwd_q(mn__attn_args A) {
    constexpr int SK = D + 8, NO = D / 8;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __half* sQ = (__half*)mn__smem;                  // (128, SK)
    __half* sO = sQ + MN__AB * SK;                   // (128, SK): dO
    __half* sK = sO + MN__AB * SK;                   // 2 stages x (64, SK)
    __half* sV = sK + 2 * MN__AT * SK;               // 2 stages x (64, SK)
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, q4 = lane & 3;
    const int NB = (A.T + MN__AB - 1) / MN__AB, ib = NB - 1 - (int)blockIdx.x;
    const size_t bh = blockIdx.y, b = bh / A.H, h = bh % A.H, base = bh * (size_t)A.Tp * D, BH = gridDim.y;
    const int q0 = ib * MN__AB, wr0 = q0 + 16 * w, r0 = wr0 + g, r1 = r0 + 8;
    int jlo, jhi;
    mn__attn_krange(q0, A.T, A.W, jlo, jhi);
    mn__attn_tile<D>(sQ, A.q + base + (size_t)q0 * D, MN__AB);
    mn__attn_tile<D>(sO, A.dO + base + (size_t)q0 * D, MN__AB);
    mn__attn_tile<D>(sK, A.k + base + (size_t)jlo * MN__AT * D, MN__AT);
    mn__attn_tile<D>(sV, A.v + base + (size_t)jlo * MN__AT * D, MN__AT);
    mn__cp_commit();
    const size_t NT = A.NT;
    const float *rk = A.r + (BH + bh) * NT, *rv = A.r + (2 * BH + bh) * NT;
    const int tq = 2 * ib + (w >> 2);
    const float rq = A.r[bh * NT + tq], rdo = A.r[(3 * BH + bh) * NT + tq];
    const float mk = A.m[BH + bh], mv = A.m[2 * BH + bh], mdo = A.m[3 * BH + bh], iu = 1.f / (mdo * mv * mk);
    const float L0 = A.L2[bh * A.Tp + r0], L1 = A.L2[bh * A.Tp + r1];
    const float D0 = A.Dl[bh * A.Tp + r0], D1 = A.Dl[bh * A.Tp + r1];
    float dq[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.f;
    for (int j = jlo; j <= jhi; j++) {
        const int st = (j - jlo) & 1, k0 = j * MN__AT;
        mn__cp_wait<0>();
        __syncthreads();
        if (j < jhi) {
            mn__attn_tile<D>(sK + (st ^ 1) * MN__AT * SK, A.k + base + (size_t)(k0 + MN__AT) * D, MN__AT);
            mn__attn_tile<D>(sV + (st ^ 1) * MN__AT * SK, A.v + base + (size_t)(k0 + MN__AT) * D, MN__AT);
        }
        mn__cp_commit();
        if (mn__attn_none(wr0, 16, k0, MN__AT, A.W)) continue;
        const __half *cK = sK + st * MN__AT * SK, *cV = sV + st * MN__AT * SK;
        float sc[8][4], dp[8][4];
        mn__attn_abt<D>(dp, sO, w, cV, lane);                 // dP = dO V^T (fp16 units)
        mn__attn_abt<D>(sc, sQ, w, cK, lane);                 // S = Q K^T
        const float a = A.c * rq * rk[j], be = rk[j] * iu, al = rdo * rv[j] * be;
        const bool mask = mn__attn_partial(wr0, 16, k0, MN__AT, A.W);
        uint32_t df[4][4];
#pragma unroll
        for (int t = 0; t < 8; t++) {
            float d[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = exp2f(sc[t][e] * a - (e < 2 ? L0 : L1));
                if (mask && !mn__attn_ok(e < 2 ? r0 : r1, k0 + 8 * t + 2 * q4 + (e & 1), A.W)) p = 0.f;
                d[e] = p * (dp[t][e] * al - (e < 2 ? D0 : D1) * be);
            }
            df[t >> 1][2 * (t & 1)] = mn__h2(d[0], d[1]);
            df[t >> 1][2 * (t & 1) + 1] = mn__h2(d[2], d[3]);
        }
        mn__attn_pb<D>(dq, df, cK, lane);                     // dQ += dS K
    }
    mn__cp_wait_all();
    const float fq = A.scale * mdo * mv * mk;
    mn__attn_store<D>(A.dq, dq, fq, fq, r0, r1, A, b, h, A.acc);
}

// ---- drivers ----------------------------------------------------------------------------------
static int mn__attn_check(mn_cuda_ctx* ctx, const char* who, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                          const void* const* p, int np) {
    if (Dk != Dv || (Dk != 64 && Dk != 128))
        return mn__fail(ctx, MN_ERR_CONFIG, who, "the CUDA attention needs Dk == Dv in {64, 128}", __LINE__);
    if (B * H > 65535 || T >= ((size_t)1 << 30))
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs B * H <= 65535 and T < 2^30", __LINE__);
    for (int i = 0; i < np; i++)
        if ((uintptr_t)p[i] % 16) return mn__fail(ctx, MN_ERR_CONFIG, who, "tensors must be 16-byte aligned", __LINE__);
    return MN_OK;
}
template <int D>
static int mn__attn_launch(mn_cuda_ctx* ctx, int which, const mn__attn_args& a, size_t B, size_t H) {
    static int attr[3] = { 0, 0, 0 };
    const size_t smem = which ? mn__attn_smem_bwd<D>() : mn__attn_smem_fwd<D>();
    const unsigned NB = (unsigned)((a.T + MN__AB - 1) / MN__AB);
    dim3 grid(NB, (unsigned)(B * H));
    const cudaFuncAttribute big = cudaFuncAttributeMaxDynamicSharedMemorySize;
    if (!attr[which]) {                                // (more than 48 KB of shared memory: opt in once)
        if (which == 0) MN__CU(cudaFuncSetAttribute(mn__k_attn_fwd<D>, big, (int)smem));
        if (which == 1) MN__CU(cudaFuncSetAttribute(mn__k_attn_bwd_kv<D>, big, (int)smem));
        if (which == 2) MN__CU(cudaFuncSetAttribute(mn__k_attn_bwd_q<D>, big, (int)smem));
        attr[which] = 1;
    }
    if (which == 0) mn__k_attn_fwd<D><<<grid, 128, smem, MN__STREAM>>>(a);
    else if (which == 1) mn__k_attn_bwd_kv<D><<<grid, 256, smem, MN__STREAM>>>(a);
    else mn__k_attn_bwd_q<D><<<grid, 256, smem, MN__STREAM>>>(a);
    MN__LAUNCHED();
    return MN_OK;
}
// packs the first `count` of q, k, v, dout (count 4: with Delta and L2) and takes the head maxima
static int mn__attn_pack(mn_cuda_ctx* ctx, const mn__attn_ws* w, int count, const float* q, const float* k,
                         const float* v, const float* dout, const float* out, const float* lse, size_t B, size_t T,
                         size_t H, size_t D) {
    mn__attn_pack_args p;
    memset(&p, 0, sizeof p);
    p.src[0] = q; p.src[1] = k; p.src[2] = v; p.src[3] = dout;
    p.dst[0] = w->q; p.dst[1] = w->k; p.dst[2] = w->v; p.dst[3] = w->dO;
    p.r = w->r; p.o = out; p.lse = lse; p.L2 = w->L2; p.Dl = w->Dl;
    p.B = (unsigned)B; p.T = (unsigned)T; p.H = (unsigned)H; p.Tp = (unsigned)w->Tp; p.NT = (unsigned)w->NT;
    dim3 grid((unsigned)w->NT, (unsigned)(B * H), (unsigned)count);
    if (D == 128) mn__k_attn_pack<128><<<grid, 256, 0, MN__STREAM>>>(p);
    else mn__k_attn_pack<64><<<grid, 256, 0, MN__STREAM>>>(p);
    MN__LAUNCHED();
    // the head maxima of the tensors packed
    mn__k_attn_rmax<<<mn__grid(ctx, count * B * H, 256), 256, 0, MN__STREAM>>>(w->m, w->r, count * B * H, w->NT);
    MN__LAUNCHED();
    return MN_OK;
}
static mn__attn_args mn__attn_args_of(const mn__attn_ws* w, size_t T, size_t H, size_t window, double scale) {
    mn__attn_args a;
    memset(&a, 0, sizeof a);
    a.q = w->q; a.k = w->k; a.v = w->v; a.dO = w->dO; a.r = w->r; a.m = w->m; a.L2 = w->L2; a.Dl = w->Dl;
    a.T = (int)T; a.H = (int)H; a.Tp = (int)w->Tp; a.NT = (int)w->NT; a.W = (int)(window < T ? window : 0);
    a.c = (float)(scale * 1.4426950408889634); a.scale = (float)scale;
    return a;
}

int mn_cuda_attention_forward(mn_cuda_ctx* ctx, float* out, float* lse, const float* q, const float* k,
                              const float* v, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window,
                              double scale, float* work) {
    const void* p[6] = { out, q, k, v, work, NULL };
    MN__TRY(mn__attn_check(ctx, "mn_cuda_attention_forward", B, T, H, Dk, Dv, p, 5));
    if (B * T * H == 0) return MN_OK;
    mn__attn_ws w;
    mn__attn_layout(&w, work, B, T, H, Dk);
    MN__TRY(mn__attn_pack(ctx, &w, 3, q, k, v, NULL, NULL, NULL, B, T, H, Dk));
    mn__attn_args a = mn__attn_args_of(&w, T, H, window, scale);
    a.out = out; a.lse = lse;
    return Dk == 128 ? mn__attn_launch<128>(ctx, 0, a, B, H) : mn__attn_launch<64>(ctx, 0, a, B, H);
}
// acc = 0: dq, dk, dv are written (the model's first writers), 1: accumulated (the public contract)
static int mn__attention_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, const float* dout,
                                  const float* out, const float* lse, const float* q, const float* k, const float* v,
                                  size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale,
                                  float* work, int acc) {
    const void* p[9] = { dq, dk, dv, dout, out, q, k, v, work };
    MN__TRY(mn__attn_check(ctx, "mn_cuda_attention_backward", B, T, H, Dk, Dv, p, 9));
    if (B * T * H == 0) return MN_OK;
    mn__attn_ws w;
    mn__attn_layout(&w, work, B, T, H, Dk);
    MN__TRY(mn__attn_pack(ctx, &w, 4, q, k, v, dout, out, lse, B, T, H, Dk));
    mn__attn_args a = mn__attn_args_of(&w, T, H, window, scale);
    a.dq = dq; a.dk = dk; a.dv = dv; a.acc = acc;
    if (Dk == 128) { MN__TRY(mn__attn_launch<128>(ctx, 1, a, B, H)); return mn__attn_launch<128>(ctx, 2, a, B, H); }
    MN__TRY(mn__attn_launch<64>(ctx, 1, a, B, H));
    return mn__attn_launch<64>(ctx, 2, a, B, H);
}
int mn_cuda_attention_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, const float* dout, const float* out,
                               const float* lse, const float* q, const float* k, const float* v, size_t B, size_t T,
                               size_t H, size_t Dk, size_t Dv, size_t window, double scale, float* work) {
    return mn__attention_backward(ctx, dq, dk, dv, dout, out, lse, q, k, v, B, T, H, Dk, Dv, window, scale, work, 1);
}

// ---- the decode step (mn_cuda_attention_step) ----------------------------------------------------
// mn_attention_step of mesanet.h for B sequences at the same position pos in one launch: one block
// (8 warps) per (sequence b, head h). The new k, v go into the ring slot pos % L first (token pos
// attends to itself); warp w then takes the keys s = lo + w, lo + w + 8, ... <= pos with its own
// running max and sum (lane l holds dims E l .. E l + E-1, E = D/32), and the 8 partial softmaxes are
// merged in shared memory. fp32 throughout. (One block per (b, h): a long cache at batch 1 leaves
// most of the chip idle; the step is a correctness path, the throughput is the chunk kernels'.)
template <int D>
__global__ void __launch_bounds__(256) mn__k_attn_step(float* out, float* kc, float* vc, const float* q, const float* k,
                                                       const float* v, unsigned H, unsigned L, unsigned pos,
                                                       unsigned lo, float scale) {
    constexpr int E = D / 32;
    __shared__ float sm[8], sl[8], sacc[8][D];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const size_t bh = blockIdx.x, b = bh / H, h = bh % H, slot = pos % L;
    if (tid < D) {
        kc[((b * L + slot) * H + h) * D + tid] = k[bh * D + tid];
        vc[((b * L + slot) * H + h) * D + tid] = v[bh * D + tid];
    }
    __syncthreads();                                   // the block's writes are visible to the block
    float qv[E], acc[E], m = -INFINITY, l = 0.f;
#pragma unroll
    for (int e = 0; e < E; e++) { qv[e] = q[bh * D + E * lane + e]; acc[e] = 0.f; }
    for (unsigned s = lo + w; s <= pos; s += 8) {
        const size_t row = ((b * L + s % L) * H + h) * D + E * lane;
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < E; e++) d += qv[e] * kc[row + e];
        d = mn__warp_sum(d) * scale;
        const float mn = fmaxf(m, d), c = expf(m - mn), p = expf(d - mn);   // c = 0 while m = -inf
        l = l * c + p;
#pragma unroll
        for (int e = 0; e < E; e++) acc[e] = acc[e] * c + p * vc[row + e];
        m = mn;
    }
#pragma unroll
    for (int e = 0; e < E; e++) sacc[w][E * lane + e] = acc[e];
    if (lane == 0) { sm[w] = m; sl[w] = l; }
    __syncthreads();
    if (tid < D) {
        float M = -INFINITY, num = 0.f, den = 0.f;
        for (int i = 0; i < 8; i++) M = fmaxf(M, sm[i]);
        for (int i = 0; i < 8; i++) {
            if (sm[i] == -INFINITY) continue;          // a warp with no key
            const float f = expf(sm[i] - M);
            num += sacc[i][tid] * f; den += sl[i] * f;
        }
        out[bh * D + tid] = num / den;
    }
}
int mn_cuda_attention_step(mn_cuda_ctx* ctx, float* out, float* kcache, float* vcache, const float* q, const float* k,
                           const float* v, size_t B, size_t pos, size_t cache_len, size_t H, size_t Dk, size_t Dv,
                           size_t window, double scale) {
    const size_t lo = window && pos + 1 > window ? pos + 1 - window : 0;
    if (Dk != Dv || (Dk != 64 && Dk != 128))
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_attention_step", "needs Dk == Dv in {64, 128}", __LINE__);
    if (cache_len == 0 || pos - lo >= cache_len || pos >= 0xffffffffu || cache_len >= 0xffffffffu)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_attention_step",
                        "cache_len must hold the window (pos + 1 tokens for full attention)", __LINE__);
    if (B * H == 0) return MN_OK;
    if (B * H > 0x7fffffff) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_attention_step", "B * H beyond the grid",
                                            __LINE__);
    if (Dk == 128)
        mn__k_attn_step<128><<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(out, kcache, vcache, q, k, v, (unsigned)H,
                                                                      (unsigned)cache_len, (unsigned)pos, (unsigned)lo,
                                                                      (float)scale);
    else
        mn__k_attn_step<64><<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(out, kcache, vcache, q, k, v, (unsigned)H,
                                                                     (unsigned)cache_len, (unsigned)pos, (unsigned)lo,
                                                                     (float)scale);
    MN__LAUNCHED();
    return MN_OK;
}

// >>cuda_mesa
// defines: mn_cuda_mesa_work_size, mn_cuda_mesa_forward, mn_cuda_mesa_backward, mn_cuda_mesa_step
//
// The op, per batch b and head h (mesanet.h >>mesa): H_t = gamma_t H_{t-1} + beta_t k_t k_t^T,
// S_t = gamma_t S_{t-1} + beta_t k_t v_t^T (gamma_t = e^{g_t}), x_t = (H_t + diag lambda)^-1 q_t by
// CG, o_t = S_t^T x_t. Chunkwise, with chunks of C = 64 tokens: H_n, S_n the states entering chunk n,
// b_a = sum_{i<=a} g_i the local cumsum of the log-decays, Gam_a = e^{b_a}, e_a = e^{b_last - b_a},
// GamC = e^{b_last} (b_last = b_{C-1}) and the decay matrix M[a,j] = e^{b_a - b_j} beta_j (j <= a):
//   states  H_{n+1} = GamC H_n + Kc^T diag(e beta) Kc,   S_{n+1} = GamC S_n + Kc^T diag(e beta) Vc;
//   solves  A(X) = ((X Kc^T) . M) Kc + diag(Gam) X H_n + X diag(lambda) = Q   (row by row, by CG);
//   output  O = ((X Kc^T) . M) Vc + diag(Gam) X S_n.
// Cost per token and head (K = Dk, V = Dv): 2K(K+V) flops for the states, n_cg (4CK + 2K^2) for the
// CG solve, 2C(K+V) + 2KV for the output; memory: the inputs once, the chunk-start states
// (K(K+V) floats per chunk and head) once written and once read.
// The backward differentiates the solve implicitly (the gradient of x = A^-1 q is an adjoint solve
// with the same symmetric A), in the passes mesanet.h's mn_mesa_backward names:
//   B0 recompute the chunk-start states; B1 the state gradients dSe at every chunk END, the same scan
//   run in reverse (dSe_{n-1} = GamC dSe_n + (diag(Gam) X)^T dO); B2 per chunk: xbar = diag(Gam) dO
//   S_n^T + (dO Vc^T . M) Kc (the adjoint right-hand side), dv, and the kv part of dk, dbeta, dg;
//   B3 the adjoint solve dQ = A^-1 xbar; B4 the reverse scan for dHe with -(diag(Gam) dQ, X); B5 per
//   chunk: the kk part of dk, dbeta, dg, and dlambda = -sum dQ . X. The decay gradients are first
//   taken with respect to b (db), then dg_t = sum_{s >= t in the chunk} db_s.
// On the GPU:
//   - forward, three launches: the decay data per chunk (mn__k_mesa_decay), the states at every chunk
//     start (mn__k_mesa_scan_tc, reading k and v in place), and one block per chunk that solves its 64
//     systems by CG and computes its output (mn__k_mesa_cg, fp16 tensor cores), reading q, k, v and
//     writing out and xs in place;
//   - backward: B1 and B4 are the scan kernel in reverse, B3 the CG kernel without its output stage,
//     B2 and B5 one fused wgmma kernel each (mn__mesa_backward_wg) with Dk = Dv = 128; every other
//     shape takes the cuBLAS backward of the alternatives below. States are laid out (slot, B*H, ...)
//     so that slot n of chunk i = n*B*H + b*H + h is at offset i*(K*K);
//   - with ctx->mesa_keep_states the backward skips B0 when its workspace still holds the states from
//     the forward of the same inputs (a host-side stamp says so);
//   - the decode step (mn_cuda_mesa_step) is one block per (sequence, head), after the drivers;
//   - tested alternatives (the FFMA scan, the mma.sync CG products, the cuBLAS backward) sit in their
//     own subsection at the end of this section, each with the setting that selects it.
// Zero padding makes the partial last chunk need no special case: a padded row has q = k = v
// = 0, beta = 0 and g = 0, so it adds nothing to any state or product, its system has q = 0 and
// stops at once, and its decay-gradient entries are 0 (the b_last term may sit on row C-1
// because the reverse cumsum of db over the chunk reaches every valid row from there).

#define MN__MC 64   // chunk length of the GPU Mesa kernels

static const mn_mesa_opts* mn__mesa_opts(const mn_mesa_opts* o, mn_mesa_opts* tmp) {
    if (o) *tmp = *o; else memset(tmp, 0, sizeof(*tmp));
    if (tmp->cg_iters == 0) tmp->cg_iters = 30;
    if (tmp->chunk == 0) tmp->chunk = 64;
    return tmp;
}

// Workspace of one call: float pointers into the caller's block, each piece 256-byte aligned.
typedef struct mn__mesa_ws {
    float *Qp, *Kp, *Vp, *Xp;          // (NCH,C,K|V) packed q (or dout in the backward), k, v, x
    float *T1, *T2, *T3, *T4, *T5;     // (NCH,C,max(K,V)) per-chunk temporaries
    float *dQ, *dKp, *dVp;             // (NCH,C,K|V) adjoint solves and packed gradients
    // (NCH,C) b (cumsum of g), beta, exp(b), exp(b_last-b), e*beta, db, dbeta, dg
    float *cb, *bp, *Gam, *e, *eb, *db, *dbp, *dgp;
    float *GamC;                       // (NCH) exp(b_last)
    float *M, *Mp, *A1, *A2, *A3;      // (NCH,C,C) decay matrices with/without beta, C x C temporaries
    float *Hs, *Ss;                    // (NC+1,B*H,K,K), (NC+1,B*H,K,V): states at chunk starts, then the final
    float *dHe, *dSe;                  // (NC,B*H,K,K), (NC,B*H,K,V): state gradients at chunk ends
    float *lp;                         // (NCH,K) per-chunk partial dlambda
    size_t total;                      // floats
} mn__mesa_ws;

static size_t mn__mesa_layout(mn__mesa_ws* w, float* base, size_t B, size_t T, size_t H, size_t K, size_t V) {
    size_t C = MN__MC, NC = (T + C - 1) / C, BH = B * H, NCH = NC * BH, KV = K > V ? K : V, off = 0;
#define MN__PIECE(ptr, n) do { (ptr) = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)
    MN__PIECE(w->Qp, NCH * C * KV); MN__PIECE(w->Kp, NCH * C * K); MN__PIECE(w->Vp, NCH * C * V); MN__PIECE(w->Xp,
            NCH * C * K);
    MN__PIECE(w->T1, NCH * C * KV); MN__PIECE(w->T2, NCH * C * KV); MN__PIECE(w->T3, NCH * C * KV);
    MN__PIECE(w->T4, NCH * C * KV); MN__PIECE(w->T5, NCH * C * KV);
    MN__PIECE(w->dQ, NCH * C * K); MN__PIECE(w->dKp, NCH * C * K); MN__PIECE(w->dVp, NCH * C * V);
    MN__PIECE(w->cb, NCH * C); MN__PIECE(w->bp, NCH * C); MN__PIECE(w->Gam, NCH * C); MN__PIECE(w->e, NCH * C);
    MN__PIECE(w->eb, NCH * C); MN__PIECE(w->db, NCH * C); MN__PIECE(w->dbp, NCH * C); MN__PIECE(w->dgp, NCH * C);
    MN__PIECE(w->GamC, NCH);
    MN__PIECE(w->M, NCH * C * C); MN__PIECE(w->Mp, NCH * C * C); MN__PIECE(w->A1, NCH * C * C);
    MN__PIECE(w->A2, NCH * C * C); MN__PIECE(w->A3, NCH * C * C);
    MN__PIECE(w->Hs, (NC + 1) * BH * K * K); MN__PIECE(w->Ss, (NC + 1) * BH * K * V);
    MN__PIECE(w->dHe, NC * BH * K * K); MN__PIECE(w->dSe, NC * BH * K * V);
    MN__PIECE(w->lp, NCH * K);
#undef MN__PIECE
    w->total = off;
    return off;
}

size_t mn_cuda_mesa_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o) {
    mn__mesa_ws w;
    (void)o;
    return mn__mesa_layout(&w, NULL, B, T, H, Dk, Dv);
}
// The kept form (mn_cuda_mesa_forward_keep / _backward_keep): the chunk-start states H_n and S_n live in the
// caller's keep block instead of the workspace, so a backward after other layers' calls on the same workspace
// still finds them and skips B0. keep = [Hs (NC+1,B*H,K,K) | Ss (NC+1,B*H,K,V)], each piece 64-float aligned.
// One function sizes the block and points w->Hs, w->Ss into it (w NULL: the size only).
static size_t mn__mesa_keep_layout(mn__mesa_ws* w, const float* keep, size_t B, size_t T, size_t H, size_t K,
                                   size_t V) {
    size_t NC = (T + MN__MC - 1) / MN__MC, BH = B * H, hs = ((NC + 1) * BH * K * K + 63) / 64 * 64;
    if (w) { w->Hs = (float*)keep; w->Ss = (float*)keep + hs; }
    return hs + ((NC + 1) * BH * K * V + 63) / 64 * 64;
}
size_t mn_cuda_mesa_keep_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv) {
    return mn__mesa_keep_layout(NULL, NULL, B, T, H, Dk, Dv);
}

// One block of 64 threads per chunk, reading g and beta in place (rows past T: 0): the local cumsum
// b_a = sum_{i<=a} g_i (sequential, in double, as the CPU), Gam_a = exp(b_a), e_a = exp(b_last - b_a),
// eb = e beta, GamC = exp(b_last), cb = b and bp = beta (packed), and when M != NULL
//   Mp[a,j] = exp(b_a - b_j) (j <= a, else 0),  M[a,j] = Mp[a,j] beta_j
// (the wgmma kernels build M and Mp from cb and bp themselves: mn__mesa_mfill, the same arithmetic).
__global__ void mn__k_mesa_decay(float* Gam, float* e, float* eb, float* GamC, float* M, float* Mp, float* cb,
                                 float* bp, const float* g, const float* beta, unsigned B, unsigned T, unsigned H) {
    __shared__ float sb[MN__MC], sbeta[MN__MC];
    const size_t i = blockIdx.x, BH = (size_t)B * H, n = i / BH, bh = i % BH, t = n * MN__MC + threadIdx.x;
    const size_t src = ((bh / H) * T + t) * H + bh % H;
    int a = threadIdx.x;
    sb[a] = t < T ? g[src] : 0.f; sbeta[a] = t < T ? beta[src] : 0.f;
    bp[i * MN__MC + a] = sbeta[a];
    __syncthreads();
    if (a == 0) { double acc = 0; for (int r = 0; r < MN__MC; r++) { acc += sb[r]; sb[r] = (float)acc; } }
    __syncthreads();
    float ba = sb[a], bl = sb[MN__MC - 1], ea = expf(bl - ba);
    cb[i * MN__MC + a] = ba;
    Gam[i * MN__MC + a] = expf(ba); e[i * MN__MC + a] = ea; eb[i * MN__MC + a] = ea * sbeta[a];
    if (a == 0) GamC[i] = expf(bl);
    for (int r = 0; r < MN__MC && M; r++) {         // row r, column a: coalesced
        float mp = a <= r ? expf(sb[r] - ba) : 0.f;
        Mp[(i * MN__MC + r) * MN__MC + a] = mp;
        M[(i * MN__MC + r) * MN__MC + a] = mp * sbeta[a];
    }
}
// M (and Mp unless NULL) of chunk i into shared memory, row stride ld, from cb and bp, exactly as
// mn__k_mesa_decay computes them. sb: 2C floats of shared scratch. All threads; the caller's next
// barrier publishes the matrices.
__device__ __forceinline__ void mn__mesa_mfill(float* sM, float* sMp, int ld, const float* cb, const float* bp,
                                               size_t i, float* sb) {
    const int tid = threadIdx.x;
    if (tid < MN__MC) { sb[tid] = cb[i * MN__MC + tid]; sb[MN__MC + tid] = bp[i * MN__MC + tid]; }
    __syncthreads();
    for (int idx = tid; idx < MN__MC * MN__MC; idx += blockDim.x) {
        const int r = idx / MN__MC, a = idx % MN__MC;
        const float mp = a <= r ? expf(sb[r] - sb[a]) : 0.f;
        if (sMp) sMp[r * ld + a] = mp;
        sM[r * ld + a] = mp * sb[MN__MC + a];
    }
}

// Token-row addressing shared by the fused kernels: row (b, h, chunk n, row a) of a tensor sits at
// p + b sb + h sh + n sn + a st (elements), its D entries contiguous. The same kernels read the
// caller's (B,T,H,D) tensors in place and the packed (NC,B*H,C,D) ones; rows with t = nC + a >= T
// read as zero and are not written, unless all = 1 (packed arrays hold every row of every chunk).
typedef struct mn__rows { float* p; size_t sb, sh, sn, st; int all; } mn__rows;
static mn__rows mn__rows_bthd(const float* p, size_t T, size_t H, size_t D) {
    mn__rows r = { (float*)p, T * H * D, D, MN__MC * H * D, H * D, 0 };
    return r;
}
static mn__rows mn__rows_packed(const float* p, size_t B, size_t H, size_t D) {
    mn__rows r = { (float*)p, H * MN__MC * D, MN__MC * D, B * H * MN__MC * D, D, 1 };
    return r;
}
__device__ __forceinline__ float* mn__row(const mn__rows& r, size_t b, size_t h, size_t n, size_t a) {
    return r.p + b * r.sb + h * r.sh + n * r.sn + a * r.st;
}

// ---- state scans: one kernel for the states and for their gradients ----------------------------
// One block owns a tile of one head's state (K x N) and walks the chunks in order, the tile in
// registers:
//   forward (the states):      E_0 = init,      E_{n+1} = GamC_n E_n + sum_a w_a Y_a^T Z_a  (slots 0..NC)
//   reverse (B1, B4):          E_{NC-1} = init, E_{n-1} = GamC_n E_n + sum_a w_a Y_a^T Z_a  (slots NC-1..0)
//                              and out0 += GamC_0 E_0 + sum_{a in chunk 0} w_a Y_a^T Z_a
// with w = wsign * (e beta) for the states, wsign * Gam for the gradients (packed (NCH,C) arrays).
// Each slot holds the value entering the chunk (forward) or leaving it (reverse).
typedef struct mn__scan_job {
    float* S;              // slots (NC+1 forward / NC reverse, B*H, K, N)
    const float* init;     // (B*H,K,N) or NULL (zeros)
    float* out0;           // reverse only: (B*H,K,N) accumulated, or NULL
    mn__rows Y, Z;         // the K side and the N side of each token's rank-one term
    int N;                 // columns of the state
} mn__scan_job;

// The scan on the tensor cores in "3xTF32" (ctx->mesa_scan = MN_CUDA_SCAN_TF32X3, the default; without
// the split below for MN_CUDA_SCAN_TF32). A chunk's update (wY)^T Z of the block's tile (64 x 64, or
// 128 x 128 for the forward's two states) is mma.sync m16n8k8 with TF32 operands and fp32 accumulation:
// A[m][t] = w_t Y[t][m] (the tile's rows m, the chunk's tokens t), B[t][n] = Z[t][n]. TF32 keeps 10
// mantissa bits (~3e-4), too coarse for states that the tests hold to 1e-5 and that a long decode
// keeps accumulating, so each operand x is split x = hi + lo with hi = tf32(x), lo = tf32(x - hi),
// and the product is lo*hi + hi*lo + hi*hi (the lo*lo term, ~2^-22 relative, is dropped):
// fp32-level accuracy for three tensor-core products.
// Feeding it: the FFMA kernel (the alternatives below; and a first version of this one, measured at
// 0.68 ms against the FMA kernel's 0.79 ms for the forward at the anchor shape) is latency-bound, not arithmetic-bound:
// one
// chunk prefetched in registers, and GamC read from memory on the critical path of every chunk.
// Here a 3-stage cp.async pipeline keeps two chunks in flight while the third is multiplied; a stage
// holds the raw fp32 tiles of Y and Z (rows past T zero-filled by the copy), the chunk's 64 weights
// w and its GamC. w_t scaling and the hi/lo split happen on the fragments, after the shared loads.
// Warp w owns rows 16 (w%4) .. +15 and columns 32 (w/4) .. +31 of the tile: 4 n-tiles of 8,
// acc[j] = rows g, g+8 (g = lane/4) x columns 8j + 2(lane%4) + {0,1}, as the mma accumulator.
__device__ __forceinline__ uint32_t mn__tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void mn__split(float x, uint32_t& hi, uint32_t& lo) {
    hi = mn__tf32(x);
    lo = mn__tf32(x - __uint_as_float(hi));
}
// c (16x8, fp32) += a (16x8, tf32, row) b (8x8, tf32, col)
__device__ __forceinline__ void mn__mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#define MN__SST 3           // pipeline stages
// One stage of the W-wide scan: the Y tile (C x 64W, row stride 64W + 8: fragment loads hit 32
// distinct banks), the Z tile (same), w (C), GamC (+pad), floats
template <int W> __host__ __device__ constexpr int mn__scan_sld(void) { return 64 * W + 8; }
template <int W> __host__ __device__ constexpr int mn__scan_stage(void) {
    return 2 * MN__MC * mn__scan_sld<W>() + MN__MC + 4;
}
template <int W> static size_t mn__scan_tc_smem(void) { return (size_t)MN__SST * mn__scan_stage<W>() * sizeof(float); }

// X3 = false: plain TF32 (one product per fragment pair, operands rounded to 10 mantissa bits).
// W: the block's tile is 64W x 64W (W = 1: 2 blocks per SM; W = 2: one block, k read once for H).
// Warp w owns rows 16W (w%4) .. +16W-1 (W m-tiles) and columns 32W (w/4) .. +32W-1 (4W n-tiles).
// When a job's Y and Z are the same rows at the same offset (H = sum w k k^T over a diagonal
// tile), only Z is copied and Y's fragments are read from it.
template <bool REV, bool X3, int W>
__global__ void __launch_bounds__(256, 3 - W) mn__k_mesa_scan_tc(mn__scan_job j0, mn__scan_job j1, const float* w,
                                                                 float wsign, const float* GamC, unsigned B, unsigned H,
                                                                 unsigned T, int K) {
    constexpr int TW = 64 * W, SLD = mn__scan_sld<W>(), STILE = MN__MC * SLD, SSTR = mn__scan_stage<W>();
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float* sbase = (float*)mn__smem;               // stage s at sbase + s * SSTR
    const mn__scan_job J = blockIdx.z ? j1 : j0;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2, gq = lane >> 2,
        t4 = lane & 3, N = J.N;
    const int r0 = (int)(blockIdx.x / (N / TW)) * TW, c0 = (int)(blockIdx.x % (N / TW)) * TW;
    const bool same = r0 == c0 && J.Y.p == J.Z.p && J.Y.sb == J.Z.sb && J.Y.sh == J.Z.sh && J.Y.sn == J.Z.sn &&
                      J.Y.st == J.Z.st;
    const size_t bh = blockIdx.y, b = bh / H, h = bh % H, BH = (size_t)B * H, NC = (T + MN__MC - 1) / MN__MC,
        E = (size_t)K * N;
    // this thread's accumulator entries: rows r0 + 16W wm + 16 mi + gq (+8), columns c0 + 32W wn + 8 j + 2 t4 (+1)
    const size_t base = bh * E + (size_t)(r0 + TW / 4 * wm + gq) * N + c0 + TW / 2 * wn + 2 * t4, off8 = (size_t)8 * N;
    // chunks in processing order: forward 0 .. NC-1; reverse NC-1 down to 1 (or 0 when the
    // initial-state gradient is wanted)
    const long count = REV ? (long)NC - (J.out0 ? 0 : 1) : (long)NC;
    float acc[W][4 * W][4];
#pragma unroll
    for (int mi = 0; mi < W; mi++)
#pragma unroll
        for (int j = 0; j < 4 * W; j++) {
            const size_t at = base + (size_t)16 * mi * N + 8 * j;
            float2 u = make_float2(0.f, 0.f), u8 = u;
            if (J.init) { u = *(const float2*)(J.init + at); u8 = *(const float2*)(J.init + at + off8); }
            acc[mi][j][0] = u.x; acc[mi][j][1] = u.y; acc[mi][j][2] = u8.x; acc[mi][j][3] = u8.y;
        }
    auto chunk = [&](long s) -> size_t { return REV ? NC - 1 - (size_t)s : (size_t)s; };
    auto issue = [&](long s) {                     // chunk s's tiles, weights and GamC into stage s % SST
        if (s < count) {
            const size_t n = chunk(s);
            float* st = sbase + (s % MN__SST) * SSTR;
#pragma unroll
            for (int m = 0; m < 4 * W; m++) {
                const int idx = tid + 256 * m, a = idx / (TW / 4), c4 = (idx % (TW / 4)) * 4;
                const bool ok = n * MN__MC + a < T;   // rows past T: zero-filled, nothing read
                if (!same) mn__cp16z(st + a * SLD + c4, mn__row(J.Y, b, h, n, ok ? a : 0) + r0 + c4, ok);
                mn__cp16z(st + STILE + a * SLD + c4, mn__row(J.Z, b, h, n, ok ? a : 0) + c0 + c4, ok);
            }
            if (tid < MN__MC / 4) mn__cp16z(st + 2 * STILE + 4 * tid, w + (n * BH + bh) * MN__MC + 4 * tid, true);
            else if (tid == MN__MC / 4) mn__cp4(st + 2 * STILE + MN__MC, GamC + n * BH + bh);
        }
        mn__cp_commit();                           // an empty group past the end keeps the count uniform
    };
    auto store = [&](float* dst) {
#pragma unroll
        for (int mi = 0; mi < W; mi++)
#pragma unroll
            for (int j = 0; j < 4 * W; j++) {
                float* o = dst + base + (size_t)16 * mi * N + 8 * j;
                *(float2*)o = make_float2(acc[mi][j][0], acc[mi][j][1]);
                *(float2*)(o + off8) = make_float2(acc[mi][j][2], acc[mi][j][3]);
            }
    };
    auto compute = [&](const float* st) {          // acc = GamC acc + (w Y)^T Z over the chunk's 64 tokens
        const float *sZ = st + STILE, *sY = same ? sZ : st, *sw = st + 2 * STILE;
        const float gc = sw[MN__MC];
#pragma unroll
        for (int mi = 0; mi < W; mi++)
#pragma unroll
            for (int j = 0; j < 4 * W; j++) {
                acc[mi][j][0] *= gc;
                acc[mi][j][1] *= gc;
                acc[mi][j][2] *= gc;
                acc[mi][j][3] *= gc;
            }
#pragma unroll
        for (int ks = 0; ks < MN__MC / 8; ks++) {
            const int k0 = 8 * ks + t4;
            const float w0 = wsign * sw[k0], w1 = wsign * sw[k0 + 4];
            // A fragment (row m, col t): a0 (gq, t4), a1 (gq+8, t4), a2 (gq, t4+4), a3 (gq+8, t4+4)
            uint32_t ah[W][4], al[W][4];
#pragma unroll
            for (int mi = 0; mi < W; mi++) {
                const int m0 = TW / 4 * wm + 16 * mi + gq;
                const float a4[4] = { w0 * sY[k0 * SLD + m0], w0 * sY[k0 * SLD + m0 + 8], w1 * sY[(k0 + 4) * SLD + m0],
                        w1 * sY[(k0 + 4) * SLD + m0 + 8] };
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (X3) mn__split(a4[e], ah[mi][e], al[mi][e]);
                    else ah[mi][e] = mn__tf32(a4[e]);
                }
            }
#pragma unroll
            for (int j = 0; j < 4 * W; j++) {
                const int n0 = TW / 2 * wn + 8 * j + gq;   // B fragment: b0 (t4, gq), b1 (t4+4, gq)
                if (X3) {
                    uint32_t bh0, bl0, bh1, bl1;
                    mn__split(sZ[k0 * SLD + n0], bh0, bl0);
                    mn__split(sZ[(k0 + 4) * SLD + n0], bh1, bl1);
#pragma unroll
                    for (int mi = 0; mi < W; mi++) {
                        mn__mma_tf32(acc[mi][j], al[mi], bh0, bh1);  // small terms first
                        mn__mma_tf32(acc[mi][j], ah[mi], bl0, bl1);
                        mn__mma_tf32(acc[mi][j], ah[mi], bh0, bh1);
                    }
                } else {
                    const uint32_t b0 = mn__tf32(sZ[k0 * SLD + n0]), b1 = mn__tf32(sZ[(k0 + 4) * SLD + n0]);
#pragma unroll
                    for (int mi = 0; mi < W; mi++) mn__mma_tf32(acc[mi][j], ah[mi], b0, b1);
                }
            }
        }
    };
#pragma unroll
    for (int s = 0; s < MN__SST - 1; s++) issue(s);
    if (REV) store(J.S + (NC - 1) * BH * E);       // the slot of the last chunk: the gradient leaving it
    for (long s = 0; s < count; s++) {
        mn__cp_wait<MN__SST - 2>();                // this thread's copies of stage s have landed
        __syncthreads();                           // everyone's have; everyone is done with stage s-1
        issue(s + MN__SST - 1);                    // refills stage (s-1) % SST
        const size_t n = chunk(s);
        if (!REV) store(J.S + n * BH * E);         // the state entering chunk n
        compute(sbase + (s % MN__SST) * SSTR);
        if (REV) {
            if (n >= 1) store(J.S + (n - 1) * BH * E);
            else {
#pragma unroll
                for (int mi = 0; mi < W; mi++)
#pragma unroll
                    for (int j = 0; j < 4 * W; j++) {
                        const size_t at = base + (size_t)16 * mi * N + 8 * j;
                        float2* o0 = (float2*)(J.out0 + at);
                        float2* o8 = (float2*)(J.out0 + at + off8);
                        float2 u = *o0, u8 = *o8;
                        *o0 = make_float2(u.x + acc[mi][j][0], u.y + acc[mi][j][1]);
                        *o8 = make_float2(u8.x + acc[mi][j][2], u8.y + acc[mi][j][3]);
                    }
            }
        }
    }
    if (!REV) store(J.S + NC * BH * E);
    mn__cp_wait_all();                             // no copy outlives the block
}

template <bool REV, bool X3, int W>
static int mn__scan_tc_launch(mn_cuda_ctx* ctx, dim3 grid, const mn__scan_job& j0, const mn__scan_job& j1,
                              const float* w, float wsign, const float* GamC, size_t B, size_t T, size_t H, size_t K) {
    static int attr = 0;
    const size_t smem = mn__scan_tc_smem<W>();
    if (!attr) {
        MN__CU(cudaFuncSetAttribute(mn__k_mesa_scan_tc<REV, X3, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem));
        attr = 1;
    }
    mn__k_mesa_scan_tc<REV, X3, W><<<grid, 256, smem, MN__STREAM>>>(j0, j1, w, wsign, GamC, (unsigned)B, (unsigned)H,
                                                                    (unsigned)T, (int)K);
    MN__LAUNCHED();
    return MN_OK;
}
// (the tested alternatives, at the end of this section)
static int mn__mesa_scan_ffma(mn_cuda_ctx* ctx, int reverse, dim3 grid, const mn__scan_job& j0, const mn__scan_job& j1,
                              const float* w, float wsign, const float* GamC, size_t B, size_t T, size_t H, size_t K);
// Launches the scan (forward or reverse) for up to two states at once (j1 NULL: one), on the
// kernel ctx->mesa_scan selects. Two states with sizes multiples of 128 (the forward's H and S)
// take the 128 x 128 tiles: 2 B H blocks, one wave at the anchor shape, k read once for H;
// otherwise 64 x 64 tiles, two blocks per SM.
static int mn__mesa_scan(mn_cuda_ctx* ctx, int reverse, const mn__scan_job* j0, const mn__scan_job* j1, const float* w,
                         float wsign, const float* GamC, size_t B, size_t T, size_t H, size_t K) {
    if (K % 64 || j0->N % 64 || (j1 && (j1->N % 64 || j1->N != j0->N))) return mn__fail(ctx, MN_ERR_CONFIG, "mesa scan",
            "state sizes must be multiples of 64", __LINE__);
    const int W = j1 && K % 128 == 0 && j0->N % 128 == 0 && ctx->mesa_scan != MN_CUDA_SCAN_FFMA ? 2 : 1;
    dim3 grid((unsigned)((K / (64 * W)) * (j0->N / (64 * W))), (unsigned)(B * H), j1 ? 2 : 1);
    const mn__scan_job& J1 = j1 ? *j1 : *j0;
    if (ctx->mesa_scan == MN_CUDA_SCAN_FFMA) return mn__mesa_scan_ffma(ctx, reverse, grid, *j0, J1, w, wsign, GamC, B,
                                                                       T, H, K);
    const bool x3 = ctx->mesa_scan != MN_CUDA_SCAN_TF32;
    switch ((reverse ? 4 : 0) + (x3 ? 2 : 0) + (W == 2)) {
    case 0: return mn__scan_tc_launch<false, false, 1>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    case 1: return mn__scan_tc_launch<false, false, 2>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    case 2: return mn__scan_tc_launch<false, true, 1>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    case 3: return mn__scan_tc_launch<false, true, 2>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    case 4: return mn__scan_tc_launch<true, false, 1>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    case 5: return mn__scan_tc_launch<true, false, 2>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    case 6: return mn__scan_tc_launch<true, true, 1>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    default: return mn__scan_tc_launch<true, true, 2>(ctx, grid, *j0, J1, w, wsign, GamC, B, T, H, K);
    }
}

// ---- the batched CG solve: one thread block (8 warps) per chunk ------------------------------
// Row a of the chunk's 64 systems is (H_t + diag lambda) x_a = rhs_a with t the row's token, and
//   A(P) = ((P Kc^T) . M) Kc + diag(Gam) P H_n + P diag(lambda)            (the solve above)
// is three products on the tensor cores (fp16 operands, fp32 accumulation, mma.sync m16n8k16):
//   GEMM1  S1 (C,C) = P Kc^T          A = P (smem)      B = Kc rows (n-major: ldmatrix)
//   GEMM3  AP (C,K) = P H_n           A = P             B = H_n (k-major: ldmatrix.trans)
//   GEMM2  AP += (S1 . M) Kc          A = S1.M (smem)   B = Kc (k-major: ldmatrix.trans)
// Warp w owns rows 16 (w%4) .. +15; in GEMM1 columns 32 (w/4) .. +31, in AP columns (K/2)(w/4) ..
// +K/2-1. x, r, p (fp32) live in registers in exactly the accumulator layout of AP, so the CG
// updates are register-local; the per-row dots are reduced over the quad (shuffles) and the two
// column halves (shared memory). Each row keeps its own alpha, delta and stopping point, as
// mn__mesa_chunk_cg in mesanet.h, whose iteration this reproduces step for step.
// The forward then computes the output in the same block with the same three products:
//   O = ((X Kc^T) . M) Vc + diag(Gam) X S_n                                 (the output above)
// Scaling for fp16: the fp16 copy of row a of P is p_a * s_a, s_a a power of two near 1/||p_a||
// (||p||^2 tracked as delta + cb^2 ||p_old||^2, using r_new . p_old = 0); H_n is stored times hs,
// a power of two with hs * max diag(H_n) <= 1 (|H_ij| <= max diag for PSD H); in the output stage
// X rows, S_n and Vc get such scales from their norms / largest entries. All scales are exact
// in binary and divided out in fp32, so they change nothing but the fp16 range.

// Power of two near 1/sqrt(pn) (1 for zero or non-finite pn).
__device__ __forceinline__ float mn__pscale(float pn) {
    int ex;
    if (!(pn > 0.f) || !(pn < 3.0e38f)) return 1.f;
    frexpf(pn, &ex);
    return ldexpf(1.f, -(ex >> 1));
}
// Row sums of a (C rows) x (K cols) register tile: v0, v1 are a thread's partial sums for its
// rows r0 = 16 wm + lane/4 and r0 + 8; returns the totals in v0, v1 (same in every thread of the
// row). buf (2,C) is shared; one barrier.
__device__ __forceinline__ void mn__rowsum(float& v0, float& v1, float* buf, int wm, int wn, int lane) {
    v0 += __shfl_xor_sync(0xffffffffu, v0, 1); v0 += __shfl_xor_sync(0xffffffffu, v0, 2);
    v1 += __shfl_xor_sync(0xffffffffu, v1, 1); v1 += __shfl_xor_sync(0xffffffffu, v1, 2);
    int row = 16 * wm + (lane >> 2);
    if ((lane & 3) == 0) { buf[wn * MN__MC + row] = v0; buf[wn * MN__MC + row + 8] = v1; }
    __syncthreads();
    v0 = buf[row] + buf[MN__MC + row];
    v1 = buf[row + 8] + buf[MN__MC + row + 8];
}
// ---- the same products with Hopper's warpgroup MMA (wgmma, sm_90a; ctx->mesa_cg = MN_CUDA_CG_WGMMA) --
// Each warpgroup (warps 0-3, 4-7) is one m64 tile: warpgroup wn owns columns K/2 wn .. of AP, the
// same columns its threads already hold in x, r, p (the accumulator layout of wgmma m64nNk16 is the
// mma.sync one, warp q of the group holding rows 16q .. 16q+15). B operands (and P) sit in shared
// memory in the no-swizzle "core matrix" layout the tensor cores read directly: 8 rows x 8 halfs
// (16 bytes) contiguous, core matrices along k 128 bytes apart (LBO), along rows kd * 16 + 32 bytes
// apart (SBO), element (row, k) of a matrix with kd columns at mn__cm(row, k, kd). So a warpgroup
// reads each B tile once (mma.sync: once per warp), and S1 = P Kc^T never goes through shared
// memory: both warpgroups compute all of it (its columns are GEMM2's k dimension), scale it by M and
// feed it to GEMM2 as register A fragments.
// Each group of 8 rows takes kd * 8 + 16 halfs: 32 bytes of padding shift consecutive row groups by 8
// banks, so the transposing stores (2-byte, one per row group per lane group) do not collide.
__device__ __forceinline__ int mn__cm(int r, int k, int kd) {
    return (r >> 3) * (kd * 8 + 16) + (k >> 3) * 64 + (r & 7) * 8 + (k & 7);
}
#define MN__CMSIZE(R, KD) ((R) * (KD) + 2 * (R))   // halfs of an R x KD core-matrix operand
__device__ __forceinline__ uint64_t mn__wg_desc(const __half* p, int kd) {
    uint64_t a = ((uint64_t)__cvta_generic_to_shared(p) & 0x3FFFF) >> 4;      // swizzle mode 0 (bits 62-63)
    return a | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)((kd * 16 + 32) >> 4) << 32);
}
__device__ __forceinline__ void mn__wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void mn__wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void mn__wg_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// shared-memory stores that the tensor cores (the async proxy) read next: each writer, before the barrier
__device__ __forceinline__ void mn__fence_async(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// d (64 x 64, the accumulator layout above, float[8][4] per thread) (+)= A B on the tensor cores,
// one warpgroup: A (64 x 16) and B (16 x 64) from shared memory (descriptors), or A from registers
// (4 x half2 per thread, the mma.sync A-fragment layout). acc = 0: d = A B.
__device__ __forceinline__ void mn__wgmma_ss(float (&d)[8][4], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
                     "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
                     "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
                     "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
                     "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                     "+f"(d[7][2]), "+f"(d[7][3])
                 : "l"(da), "l"(db), "r"(acc) : "memory");
}
__device__ __forceinline__ void mn__wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
                     "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
                     "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
                     "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
                     "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
                     "+f"(d[7][2]), "+f"(d[7][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc) : "memory");
}
// After a wait: ties every accumulator register to this point, so no read of d moves above it.
__device__ __forceinline__ void mn__wg_pin(float (&d)[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; j++) asm volatile("" : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]),
                                             "+f"(d[j][3]) :: "memory");
}

// Building blocks on one warpgroup (issue only; the caller commits and waits):
//   d (=|+=) A B^T  with A (64 x KD) at sA and B^T's rows n0 .. n0+63 at sB, core-matrix layout, kd = KD
//   d (+)= af B^T   with A in registers (af: the 64 x 64 fp16 fragments, k = the chunk's tokens) and
//                   B^T's rows n0 .. n0+63 at sB (kd = C)
template <int KD> __device__ __forceinline__ void mn__wg_abt(float (&d)[8][4], const __half* sA, const __half* sB,
                                                             int n0, int acc) {
#pragma unroll
    for (int ks = 0; ks < KD / 16; ks++)
        mn__wgmma_ss(d, mn__wg_desc(sA + ks * 128, KD), mn__wg_desc(sB + mn__cm(n0, 16 * ks, KD), KD), acc || ks);
}
__device__ __forceinline__ void mn__wg_rbt(float (&d)[8][4], const uint32_t (&af)[MN__MC / 16][4], const __half* sB,
                                           int n0, int acc) {
#pragma unroll
    for (int ks = 0; ks < MN__MC / 16; ks++)
        mn__wgmma_rs(d, af[ks], mn__wg_desc(sB + mn__cm(n0, 16 * ks, MN__MC), MN__MC), acc || ks);
}
// af = fp16(s . W) as wgmma A fragments: s a 64 x 64 accumulator (rows r0, r1 = this thread's, columns
// 8j + qc, +1), W (C,ld) fp32 in shared memory, or its transpose when TW.
template <bool TW>
__device__ __forceinline__ void mn__wg_frags(uint32_t (&af)[MN__MC / 16][4], const float (&s)[8][4], const float* sW,
                                             int ld, int r0, int r1, int qc) {
#pragma unroll
    for (int ks = 0; ks < MN__MC / 16; ks++) {
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int j = 2 * ks + hh, col = 8 * j + qc;
            float2 m0, m1;
            if (TW) {
                m0 = make_float2(sW[col * ld + r0], sW[(col + 1) * ld + r0]);
                m1 = make_float2(sW[col * ld + r1], sW[(col + 1) * ld + r1]);
            }
            else { m0 = *(const float2*)&sW[r0 * ld + col]; m1 = *(const float2*)&sW[r1 * ld + col]; }
            __half2 u0 = __floats2half2_rn(s[j][0] * m0.x, s[j][1] * m0.y),
                    u1 = __floats2half2_rn(s[j][2] * m1.x, s[j][3] * m1.y);
            af[ks][2 * hh] = *(uint32_t*)&u0; af[ks][2 * hh + 1] = *(uint32_t*)&u1;
        }
    }
}
// q0, q1 += sign * this thread's part of rows r0, r1 of sum_j a[r][j] W[r][j] c[r][j] (a, c 64 x 64
// accumulators; W (C,ld) fp32 in shared memory, or its transpose when TW): the row sums of E
// (TW = false) or of E^T, i.e. E's column sums (TW = true), before the quad reduction
template <bool TW>
__device__ __forceinline__ void mn__wg_rowdot3(float& q0, float& q1, const float (&a)[8][4], const float (&c)[8][4],
                                               const float* sW, int ld, int r0, int r1, int qc, float sign) {
    float u0 = 0.f, u1 = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int col = 8 * j + qc;
        float2 m0, m1;
        if (TW) {
            m0 = make_float2(sW[col * ld + r0], sW[(col + 1) * ld + r0]);
            m1 = make_float2(sW[col * ld + r1], sW[(col + 1) * ld + r1]);
        }
        else { m0 = *(const float2*)&sW[r0 * ld + col]; m1 = *(const float2*)&sW[r1 * ld + col]; }
        u0 += a[j][0] * m0.x * c[j][0] + a[j][1] * m0.y * c[j][1];
        u1 += a[j][2] * m1.x * c[j][2] + a[j][3] * m1.y * c[j][3];
    }
    q0 += sign * u0; q1 += sign * u1;
}
// wait for all but N groups, then pin the accumulators
template <int N> __device__ __forceinline__ void mn__wg_done(float (&d)[8][4]) { mn__wg_wait<N>(); mn__wg_pin(d); }

template <int K>
__device__ __forceinline__ void mn__cg_apply_mma(float (&acc)[K / 16][4], const __half* sP, const __half* sK,
                                                 const __half* sB3, const __half* sB2, __half* sS, const float* sM,
                                                 float g0, float g1, int wm, int wn, int lane);
// The step both CG kernels share, on 64 rows P (fp16 in sP) for this thread's columns:
//   acc = diag(g) (P B3) + fp16((P Kc^T) . M) B2
// in the CG iteration B3 = H_n (times hs), B2 = Kc; in the output stage B3 = S_n, B2 = Vc. mma.sync
// form: sP, sK, sB3 (k-major), sB2 (k-major) row-major with padded strides, S1 through sS. wgmma form:
// core-matrix layouts, sK = Kc (rows tokens), sB3 = B3^T (rows its columns), sB2 = B2^T (rows its
// columns, kd = C). Ends with every warp past its reads of the operands (wgmma: this warpgroup).
template <int K, bool WG>
__device__ __forceinline__ void mn__cg_apply(float (&acc)[K / 16][4], const __half* sP, const __half* sK,
                                             const __half* sB3, const __half* sB2, __half* sS, const float* sM,
                                             float g0, float g1, int wm, int wn, int lane) {
    constexpr int C = MN__MC, SK = K + 8, SC = C + 8, NT = K / 16, KH = K / 2;
    if constexpr (WG) {
        static_assert(K == 128, "the wgmma form is written for K = 128 (m64n64 per warpgroup)");
        const int qc = (lane & 3) * 2, r0 = 16 * wm + (lane >> 2), r1 = r0 + 8;
        float s1[8][4];
        mn__wg_fence();
        mn__wg_abt<K>(s1, sP, sK, 0, 0);              // S1 = P Kc^T
        mn__wg_commit();
        mn__wg_abt<K>(acc, sP, sB3, KH * wn, 0);      // P B3
        mn__wg_commit();
        mn__wg_done<1>(s1);                           // S1 ready; P B3 still running
        uint32_t af[C / 16][4];
        mn__wg_frags<false>(af, s1, sM, SC, r0, r1, qc);
        mn__wg_done<0>(acc);
#pragma unroll
        for (int j = 0; j < NT; j++) { acc[j][0] *= g0; acc[j][1] *= g0; acc[j][2] *= g1; acc[j][3] *= g1; }
        mn__wg_fence();
        mn__wg_rbt(acc, af, sB2, KH * wn, 1);         // += fp16(S1 . M) B2
        mn__wg_commit();
        mn__wg_done<0>(acc);
        (void)sS; (void)SK;
    } else {
        mn__cg_apply_mma<K>(acc, sP, sK, sB3, sB2, sS, sM, g0, g1, wm, wn, lane);
    }
}

// ---- register tiles: several operands in flight at once -----------------------------------------
// An R x CC fp32 matrix spread over the block's 256 threads in whole 8-float row pieces: piece m of a
// thread is row r, columns c .. c+7 (mn__tile_at). Loading all of a kernel's operands into tiles
// before the first store keeps every global read of a chunk in flight together (one round trip),
// instead of one round trip per operand.
template <int R, int CC> struct mn__tile { float v[R * CC / 2048][8]; };
template <int CC> __device__ __forceinline__ void mn__tile_at(int m, int& r, int& c) {
    const int item = threadIdx.x + 256 * m;
    r = (item >> 3) / (CC / 8) * 8 + (item & 7); c = 8 * ((item >> 3) % (CC / 8));
}
// rows >= nvalid read as zeros; rows 16-byte aligned
template <int R, int CC> __device__ __forceinline__ void mn__tile_load(mn__tile<R, CC>& t, const float* src, size_t lds,
                                                                       int nvalid) {
#pragma unroll
    for (int m = 0; m < R * CC / 2048; m++) {
        int r, c; mn__tile_at<CC>(m, r, c);
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b4 = a;
        if (r < nvalid) {
            a = *(const float4*)(src + (size_t)r * lds + c);
            b4 = *(const float4*)(src + (size_t)r * lds + c + 4);
        }
        t.v[m][0] = a.x; t.v[m][1] = a.y; t.v[m][2] = a.z; t.v[m][3] = a.w; t.v[m][4] = b4.x; t.v[m][5] = b4.y;
        t.v[m][6] = b4.z; t.v[m][7] = b4.w;
    }
}
template <int R, int CC> __device__ __forceinline__ float mn__tile_max(const mn__tile<R, CC>& t) {
    float mx = 0.f;
#pragma unroll
    for (int m = 0; m < R * CC / 2048; m++)
#pragma unroll
        for (int e = 0; e < 8; e++) mx = fmaxf(mx, fabsf(t.v[m][e]));
    return mx;
}
// dst[mn__cm(r, c, CC)] = sc * tile: 16-byte stores, a quarter-warp fills one core matrix
template <int R, int CC> __device__ __forceinline__ void mn__tile_store(const mn__tile<R, CC>& t, __half* dst,
                                                                        float sc) {
#pragma unroll
    for (int m = 0; m < R * CC / 2048; m++) {
        int r, c; mn__tile_at<CC>(m, r, c);
        __half2 u[4];
#pragma unroll
        for (int e = 0; e < 4; e++) u[e] = __floats2half2_rn(t.v[m][2 * e] * sc, t.v[m][2 * e + 1] * sc);
        *(uint4*)&dst[mn__cm(r, c, CC)] = *(const uint4*)u;
    }
}
// dst[mn__cm(c, r, R)] = sc * tile: the transpose (2-byte stores)
template <int R, int CC> __device__ __forceinline__ void mn__tile_store_t(const mn__tile<R, CC>& t, __half* dst,
                                                                          float sc) {
#pragma unroll
    for (int m = 0; m < R * CC / 2048; m++) {
        int r, c; mn__tile_at<CC>(m, r, c);
#pragma unroll
        for (int e = 0; e < 8; e++) dst[mn__cm(c + e, r, R)] = __float2half_rn(t.v[m][e] * sc);
    }
}
// m[q] = the block's largest m[q], then the power-of-two scale that brings it to <= 1; one barrier.
// red: 32 floats of shared scratch, not to be reused before the block's next barrier.
__device__ __forceinline__ void mn__block_scales4(float (&m)[4], float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int q = 0; q < 4; q++) { float v = mn__warp_max(m[q]); if (lane == 0) red[warp * 4 + q] = v; }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < 4; q++) {
        float v = red[q];
        for (int w = 1; w < 8; w++) v = fmaxf(v, red[w * 4 + q]);
        m[q] = mn__mscale(v);
    }
}
// row r, columns c, c+1 of a core-matrix fp16 operand (kd columns), as floats
__device__ __forceinline__ float2 mn__cm2(const __half* s, int r, int c, int kd) {
    return __half22float2(*(const __half2*)&s[mn__cm(r, c, kd)]);
}

// floats of the wgmma CG kernel's output-stage prefetch: raw S_n (K,K+4), then raw Vc (C,K+4)
template <int K> __host__ __device__ constexpr int mn__cg_stage(void) { return (K + MN__MC) * (K + 4); }
template <int K> static size_t mn__cg_smem(void) {
    return (size_t)(3 * MN__MC * (K + 8) + K * (K + 8) + MN__MC * (MN__MC + 8)) * sizeof(__half)
         + (size_t)(MN__MC * (MN__MC + 8) + 4 * MN__MC + 32) * sizeof(float);
}

typedef struct mn__cg_args {
    mn__rows rhs, kk, vv;     // right-hand sides (q, or xbar in the backward), keys, values (output only)
    mn__rows xo, oo;          // solves X, and (output stage) O
    int* iters;               // (B,T,H) or NULL
    const float *Hs, *Ss, *cb, *bp, *Gam, *lamb;  // (NCH slots,K,K), (NCH slots,K,V), (NCH,C) x3, (H,K)
    unsigned B, H, T;
    int n_iter, fla, output;  // n_iter < 0: no solve (x = rhs)
    float stop, eps;          // squared relative residual where a row stops; fla's 1e-5 (else 0)
} mn__cg_args;

template <int K>
__device__ __forceinline__ void mn__cg_load_mma(__half* sK, __half* sH, const float* Hg, const mn__rows& kk,
                                                size_t b, size_t h, size_t n, unsigned T, bool solve,
                                                const float* misc);
__device__ float mn__load_f16_scaled(__half* dst, int ld, const float* src, size_t lds, const mn__rows* tok, size_t b,
                                     size_t h, size_t n, unsigned T, int rows, int cols, float* red8);
// Where (row, col) of a C x K fp16 operand sits in the CG kernel's shared memory.
template <int K, bool WG> __device__ __forceinline__ int mn__pidx(int row, int col) {
    return WG ? mn__cm(row, col, K) : row * (K + 8) + col;
}

// One block per chunk i = n B H + b H + h: X = A^-1 RHS for its 64 rows, and with output = 1 the
// chunk's output O. stop = tolerance^2 (or float eps^2 for a fixed count); fla = 1: no stopping
// and eps = 1e-5 in the alpha and beta denominators, as fla.
// WG: the products by wgmma (core-matrix layouts; sV then holds Kc^T, and Vc^T in the output stage).
template <int K, bool WG>
__global__ void __launch_bounds__(256, 1) mn__k_mesa_cg(mn__cg_args A) {
    // SR: prefetch rows (mn__cg_stage), 4 banks apart
    constexpr int C = MN__MC, SK = K + 8, SC = C + 8, NT = K / 16, KH = K / 2, SR = K + 4;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __half* sK = (__half*)mn__smem;               // (C,SK)  Kc
    __half* sP = sK + C * SK;                     // (C,SK)  P (then X), row-scaled
    __half* sH = sP + C * SK;                     // (K,SK)  H_n * hs (then S_n * ss; WG: S_n^T)
    __half* sV = sH + K * SK;                     // (C,SK)  Vc * sv (output stage); WG: Kc^T (K,C), then Vc^T
    __half* sS = sV + C * SK;                     // (C,SC)  (P Kc^T) . M, row-scaled (not WG)
    float* sM = (float*)(sS + C * SC);            // (C,SC)  M
    float* red = sM + C * SC;                     // (2 buffers, 2 halves, C)
    float* misc = red + 4 * C;                    // [0] hs, [..32] scratch
    float* stS = misc + 32;                       // WG, output stage: (K,K+4) raw S_n, prefetched (cp.async)
    float* stV = stS + K * SR;                    //                   (C,K+4) raw Vc
    const size_t i = blockIdx.x, BH = (size_t)A.B * A.H, n = i / BH, bh = i % BH, b = bh / A.H, h = bh % A.H;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
    const int qc = (lane & 3) * 2, r0 = 16 * wm + (lane >> 2), r1 = r0 + 8;
    const bool v0ok = A.rhs.all || n * C + r0 < A.T, v1ok = A.rhs.all || n * C + r1 < A.T;

    // ---- load the chunk: Kc and H_n to fp16, M to fp32 (16-byte loads) ----
    const float* Hg = A.Hs + i * (size_t)K * K;
    const bool solve = A.n_iter >= 0;             // no solve (x = q): H_n is never read
    if (warp == 0) {
        float mx = 0.f;
#pragma unroll
        for (int d = lane; d < K && solve; d += 32) mx = fmaxf(mx, fabsf(Hg[(size_t)d * K + d]));
        mx = mn__warp_max(mx);
        if (lane == 0) misc[0] = mn__mscale(mx);
    }
    // ---- registers: x = 0, r = p = rhs, in the AP accumulator layout (loads issued first: they are in
    // flight with the chunk's operands below) ----
    float x[NT][4], r[NT][4], p[NT][4], lam[NT][2];
    {
        const float *R0 = mn__row(A.rhs, b, h, n, r0), *R1 = mn__row(A.rhs, b, h, n, r1);
#pragma unroll
        for (int j = 0; j < NT; j++) {
            int col = KH * wn + 8 * j + qc;
            float2 u0 = v0ok ? *(const float2*)&R0[col] : make_float2(0.f, 0.f),
                u1 = v1ok ? *(const float2*)&R1[col] : make_float2(0.f, 0.f);
            r[j][0] = u0.x; r[j][1] = u0.y; r[j][2] = u1.x; r[j][3] = u1.y;
            lam[j][0] = A.lamb[(size_t)h * K + col]; lam[j][1] = A.lamb[(size_t)h * K + col + 1];
        }
    }
    const float gam0 = A.Gam[i * C + r0], gam1 = A.Gam[i * C + r1];
    // (red is free until the first rowsum; that barrier publishes sM)
    mn__mesa_mfill(sM, NULL, SC, A.cb, A.bp, i, red);
    if constexpr (WG) {                               // Kc, Kc^T (GEMM2's B) and H_n (= H_n^T) in core-matrix layout
        const int kval = A.kk.all || (n + 1) * C <= A.T ? C : (int)(A.T - n * C);
        mn__tile<C, K> tk;                            // both in flight at once
        mn__tile<K, K> th;
        mn__tile_load(tk, mn__row(A.kk, b, h, n, 0), A.kk.st, kval);
        if (solve) mn__tile_load(th, Hg, K, K);
        __syncthreads();                              // hs
        mn__tile_store(tk, sK, 1.f); mn__tile_store_t(tk, sV, 1.f);
        if (solve) mn__tile_store(th, sH, misc[0]);
        mn__fence_async();                            // (the first rowsum's barrier publishes them)
        if (A.output) {                               // the output stage's S_n and Vc, raw, in flight during the solve
            const float* Sg = A.Ss + i * (size_t)K * K;
            const int vval = A.vv.all || (n + 1) * C <= A.T ? C : (int)(A.T - n * C);
            for (int idx = tid; idx < K * K / 4; idx += 256) {
                int rr = idx / (K / 4), cc = (idx % (K / 4)) * 4;
                mn__cp16z(stS + rr * SR + cc, Sg + (size_t)rr * K + cc, true);
            }
            for (int idx = tid; idx < C * K / 4; idx += 256) {
                int rr = idx / (K / 4), cc = (idx % (K / 4)) * 4;
                mn__cp16z(stV + rr * SR + cc, mn__row(A.vv, b, h, n, rr < vval ? rr : 0) + cc, rr < vval);
            }
            mn__cp_commit();
        }
    } else {
        mn__cg_load_mma<K>(sK, sH, Hg, A.kk, b, h, n, A.T, solve, misc);
    }
    const float hs = misc[0], gh0 = gam0 / hs, gh1 = gam1 / hs;
    float d0 = 0.f, d1 = 0.f;
#pragma unroll
    for (int j = 0; j < NT; j++) {
#pragma unroll
        for (int c = 0; c < 4; c++) { p[j][c] = r[j][c]; x[j][c] = A.n_iter < 0 ? r[j][c] : 0.f; }
        d0 += r[j][0] * r[j][0] + r[j][1] * r[j][1];
        d1 += r[j][2] * r[j][2] + r[j][3] * r[j][3];
    }
    mn__rowsum(d0, d1, red + 2 * C, wm, wn, lane);   // delta = r.r (this barrier also publishes sK, sH, sM)
    const float dz0 = d0, dz1 = d1;                  // delta_0
    float pn0 = d0, pn1 = d1;                        // ||p||^2
    int done0 = 0, done1 = 0, it0 = 0, it1 = 0;

    for (int it = 0; it < A.n_iter; it++) {
        // a row stops once ||r||^2 <= stop ||r0||^2 (never in fla mode), as the CPU loop
        if (!A.fla) { if (!done0 && d0 <= A.stop * dz0) done0 = 1; if (!done1 && d1 <= A.stop * dz1) done1 = 1; }
        const float s0 = mn__pscale(pn0), s1 = mn__pscale(pn1);
#pragma unroll
        for (int j = 0; j < NT; j++) {
            int col = KH * wn + 8 * j + qc;
            *(__half2*)&sP[mn__pidx<K, WG>(r0, col)] = __floats2half2_rn(p[j][0] * s0, p[j][1] * s0);
            *(__half2*)&sP[mn__pidx<K, WG>(r1, col)] = __floats2half2_rn(p[j][2] * s1, p[j][3] * s1);
        }
        if (WG) mn__fence_async();
        // one barrier publishes sP and tells whether any row of the block is still running (every
        // read of the previous sP ended before the rowsum barriers of the previous iteration)
        if (!__syncthreads_or(!done0 || !done1)) break;
        float acc[NT][4] = {};
        // GEMM1 S1 = P Kc^T, times M; GEMM3 P H_n, times Gam / hs; GEMM2 += (S1 . M) Kc
        mn__cg_apply<K, WG>(acc, sP, sK, sH, WG ? sV : sK, sS, sM, gh0, gh1, wm, wn, lane);
        // AP = acc / s + lambda p (fp32), and p.Ap
        const float is0 = 1.f / s0, is1 = 1.f / s1;
        float pa0 = 0.f, pa1 = 0.f;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            acc[j][0] = acc[j][0] * is0 + lam[j][0] * p[j][0];
            acc[j][1] = acc[j][1] * is0 + lam[j][1] * p[j][1];
            acc[j][2] = acc[j][2] * is1 + lam[j][0] * p[j][2];
            acc[j][3] = acc[j][3] * is1 + lam[j][1] * p[j][3];
            pa0 += p[j][0] * acc[j][0] + p[j][1] * acc[j][1];
            pa1 += p[j][2] * acc[j][2] + p[j][3] * acc[j][3];
        }
        mn__rowsum(pa0, pa1, red, wm, wn, lane);
        // alpha = delta / p.Ap ; x += alpha p ; r -= alpha Ap
        int act0 = !done0, act1 = !done1;
        if (!A.fla) {                                 // converged below float resolution
            if (act0 && !(pa0 > 0.f)) { done0 = 1; act0 = 0; }
            if (act1 && !(pa1 > 0.f)) { done1 = 1; act1 = 0; }
        }
        const float al0 = act0 ? d0 / (pa0 + A.eps) : 0.f, al1 = act1 ? d1 / (pa1 + A.eps) : 0.f;
        float dn0 = 0.f, dn1 = 0.f;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            if (act0) {
                x[j][0] += al0 * p[j][0]; x[j][1] += al0 * p[j][1];
                r[j][0] -= al0 * acc[j][0]; r[j][1] -= al0 * acc[j][1];
            }
            if (act1) {
                x[j][2] += al1 * p[j][2]; x[j][3] += al1 * p[j][3];
                r[j][2] -= al1 * acc[j][2]; r[j][3] -= al1 * acc[j][3];
            }
            dn0 += r[j][0] * r[j][0] + r[j][1] * r[j][1];
            dn1 += r[j][2] * r[j][2] + r[j][3] * r[j][3];
        }
        mn__rowsum(dn0, dn1, red + 2 * C, wm, wn, lane);
        // p = r + (delta_new / delta) p
        if (act0) {
            float cb = dn0 / (d0 + A.eps);
#pragma unroll
            for (int j = 0; j < NT; j++) { p[j][0] = r[j][0] + cb * p[j][0]; p[j][1] = r[j][1] + cb * p[j][1]; }
            pn0 = dn0 + cb * cb * pn0; d0 = dn0; it0++;
        }
        if (act1) {
            float cb = dn1 / (d1 + A.eps);
#pragma unroll
            for (int j = 0; j < NT; j++) { p[j][2] = r[j][2] + cb * p[j][2]; p[j][3] = r[j][3] + cb * p[j][3]; }
            pn1 = dn1 + cb * cb * pn1; d1 = dn1; it1++;
        }
    }
    // ---- the solves out ----
    {
        float *X0 = mn__row(A.xo, b, h, n, r0), *X1 = mn__row(A.xo, b, h, n, r1);
        bool w0 = A.xo.all || n * C + r0 < A.T, w1 = A.xo.all || n * C + r1 < A.T;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            int col = KH * wn + 8 * j + qc;
            if (w0) *(float2*)&X0[col] = make_float2(x[j][0], x[j][1]);
            if (w1) *(float2*)&X1[col] = make_float2(x[j][2], x[j][3]);
        }
    }
    if (A.iters && wn == 0 && (lane & 3) == 0) {
        if (n * C + r0 < A.T) A.iters[(b * A.T + n * C + r0) * A.H + h] = it0;
        if (n * C + r1 < A.T) A.iters[(b * A.T + n * C + r1) * A.H + h] = it1;
    }
    if (!A.output) return;                            // block-uniform

    // ---- output stage: O = ((X Kc^T) . M) Vc + diag(Gam) X S_n (V == K) ----
    float xn0 = 0.f, xn1 = 0.f;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        xn0 += x[j][0] * x[j][0] + x[j][1] * x[j][1];
        xn1 += x[j][2] * x[j][2] + x[j][3] * x[j][3];
    }
    mn__rowsum(xn0, xn1, red, wm, wn, lane);          // also: every thread is past the CG loop
    const float sx0 = mn__pscale(xn0), sx1 = mn__pscale(xn1);
#pragma unroll
    for (int j = 0; j < NT; j++) {
        int col = KH * wn + 8 * j + qc;
        *(__half2*)&sP[mn__pidx<K, WG>(r0, col)] = __floats2half2_rn(x[j][0] * sx0, x[j][1] * sx0);
        *(__half2*)&sP[mn__pidx<K, WG>(r1, col)] = __floats2half2_rn(x[j][2] * sx1, x[j][3] * sx1);
    }
    if (WG) mn__fence_async();                        // (the loads' barriers publish sP)
    float ss, sv;
    if constexpr (WG) {                               // S_n^T, Vc^T: GEMM3's and GEMM2's B, both in flight at once
        mn__tile<K, K> ts;
        mn__tile<C, K> tv;
        mn__cp_wait_all();                            // this thread's prefetch has landed ...
        __syncthreads();                              // ... and everyone's
        mn__tile_load(ts, stS, SR, K);             // (rows 4 floats apart in banks: no conflicts)
        mn__tile_load(tv, stV, SR, C);
        float sc[4] = { mn__tile_max(ts), mn__tile_max(tv), 0.f, 0.f };
        mn__block_scales4(sc, misc);
        ss = sc[0]; sv = sc[1];
        mn__tile_store_t(ts, sH, ss); mn__tile_store_t(tv, sV, sv);
        mn__fence_async();
        __syncthreads();
    } else {
        ss = mn__load_f16_scaled(sH, SK, A.Ss + i * (size_t)K * K, K, NULL, b, h, n, A.T, K, K, misc);
        sv = mn__load_f16_scaled(sV, SK, NULL, 0, &A.vv, b, h, n, A.T, C, K, misc);
    }
    const float o0 = gam0 * sv / ss, o1 = gam1 * sv / ss;   // to the scale of the other term
    float acc[NT][4] = {};
    mn__cg_apply<K, WG>(acc, sP, sK, sH, sV, sS, sM, o0, o1, wm, wn, lane);   // o0 X S_n + ((X Kc^T) . M) Vc
    {
        const float u0 = 1.f / (sx0 * sv), u1 = 1.f / (sx1 * sv);
        float *O0 = mn__row(A.oo, b, h, n, r0), *O1 = mn__row(A.oo, b, h, n, r1);
        bool w0 = A.oo.all || n * C + r0 < A.T, w1 = A.oo.all || n * C + r1 < A.T;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            int col = KH * wn + 8 * j + qc;
            if (w0) *(float2*)&O0[col] = make_float2(acc[j][0] * u0, acc[j][1] * u0);
            if (w1) *(float2*)&O1[col] = make_float2(acc[j][2] * u1, acc[j][3] * u1);
        }
    }
}

// Solves every chunk's systems (and with out != NULL computes the output). rhs, kk, vv, xo, oo:
// row descriptors; iters (B,T,H) or NULL.
static int mn__mesa_cg(mn_cuda_ctx* ctx, mn__rows rhs, mn__rows kk, mn__rows vv, mn__rows xo, mn__rows oo, int output,
                       int* iters, const mn__mesa_ws* w, const float* lamb, size_t B, size_t T, size_t H, size_t K,
                       const mn_mesa_opts* op) {
    size_t NCH = (T + MN__MC - 1) / MN__MC * B * H;
    mn__cg_args a;
    memset(&a, 0, sizeof a);
    a.rhs = rhs; a.kk = kk; a.vv = vv; a.xo = xo; a.oo = oo; a.iters = iters;
    a.Hs = w->Hs; a.Ss = w->Ss; a.cb = w->cb; a.bp = w->bp; a.Gam = w->Gam; a.lamb = lamb;
    a.B = (unsigned)B; a.H = (unsigned)H; a.T = (unsigned)T;
    a.n_iter = op->cg_iters; a.fla = op->fla; a.output = output;
    a.stop = op->cg_tol > 0 ? (float)(op->cg_tol * op->cg_tol) : 1.1920929e-07f * 1.1920929e-07f;
    a.eps = op->fla ? 1e-5f : 0.f;
    if (NCH > 0x7fffffff || T > 0xffffffffu)
        return mn__fail(ctx, MN_ERR_CONFIG, "mesa cg", "too many chunks for one grid", __LINE__);
    if (K == 128 && ctx->mesa_cg == MN_CUDA_CG_WGMMA) {
        static int attr = 0;
        const size_t stage = (size_t)mn__cg_stage<128>() * sizeof(float),
            smem = mn__cg_smem<128>() + (output ? stage : 0);
        if (!attr) {
            MN__CU(cudaFuncSetAttribute(mn__k_mesa_cg<128, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)(mn__cg_smem<128>() + stage)));
            attr = 1;
        }
        mn__k_mesa_cg<128, true><<<(unsigned)NCH, 256, smem, MN__STREAM>>>(a);
    } else if (K == 128) {
        static int attr = 0;
        size_t smem = mn__cg_smem<128>();
        if (!attr) {
            MN__CU(cudaFuncSetAttribute(mn__k_mesa_cg<128, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
            attr = 1;
        }
        mn__k_mesa_cg<128, false><<<(unsigned)NCH, 256, smem, MN__STREAM>>>(a);
    } else {
        static int attr = 0;
        size_t smem = mn__cg_smem<64>();
        if (!attr) {
            MN__CU(cudaFuncSetAttribute(mn__k_mesa_cg<64, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
            attr = 1;
        }
        mn__k_mesa_cg<64, false><<<(unsigned)NCH, 256, smem, MN__STREAM>>>(a);
    }
    MN__LAUNCHED();
    return MN_OK;
}

// ---- fused backward on wgmma (K = V = 128): B2 in one kernel -----------------------------------
// One block (two warpgroups) per chunk does what the eight cuBLAS products and mn__k_mesa_b2a/b2b
// below do, without their per-chunk temporaries: every product on the tensor cores from fp16
// operands in shared memory (core-matrix layout, each operand times its own power-of-two scale,
// undone in fp32), the C x C products (both warpgroups compute all of them) feeding the C x K ones
// as register A fragments, and the row sums of E = Sx . M . Do and of E^T (its column sums) taken
// from the accumulators. Warpgroup wn owns output columns K/2 wn .. of every C x K product.
//   Sx = X Kc^T, Do = dO Vc^T, E = Sx . M . Do, T1 = dO S_n^T:
//   xbar = diag(Gam) T1 + (Do . M) Kc                     (the adjoint solve's right-hand side)
//   dKb  = (Do . Mp)^T X + diag(e) Vc dSe^T :  dk = diag(beta) dKb (written), dbeta += dKb . k
//   dv  += (Sx . M)^T dO + diag(e beta) Kc dSe
//   db_a = Gam_a x_a . T1_a + sum_j E[a,j] - sum_a' E[a',a] - w_a,  w_a = e_a beta_a (Kc dSe)_a . v_a,
//   db_last += sum w + GamC <S_n, dSe> ; dg += revcumsum(db)          (pass B2)
// A K x K state (fp32 at src) into fp16 shared memory (core-matrix layout, rows k) times its own
// power-of-two scale, which it returns. All threads; ends with the async-proxy fence and a barrier.
template <int K>
__device__ __forceinline__ float mn__mesa_state_load(__half* dst, const float* src, float* misc) {
    mn__tile<K, K> t;
    mn__tile_load(t, src, K, K);
    float sc[4] = { mn__tile_max(t), 0.f, 0.f, 0.f };
    __syncthreads();                         // misc free again
    mn__block_scales4(sc, misc);
    mn__tile_store(t, dst, sc[0]);
    mn__fence_async();
    __syncthreads();
    return sc[0];
}
// The second phase of B2 and B5: the chunk-end state gradient G (K x K fp32 at src) replaces the
// state's fp16 copy in sSt (scale s_old), and f += <state, G> is taken from that copy on the way;
// G goes to sSt (rows k) and G^T to sGt (2 K x K halfs over two C x K operands). Returns G's scale.
// All threads; ends with the async-proxy fence and a barrier.
template <int K>
__device__ __forceinline__ float mn__mesa_grad_swap(__half* sSt, __half* sGt, const float* src, float s_old, float& f,
                                                    float* misc) {
    mn__tile<K, K> tg;
    mn__tile_load(tg, src, K, K);
    float fp = 0.f;
#pragma unroll
    for (int m = 0; m < K * K / 2048; m++) {
        int r, c; mn__tile_at<K>(m, r, c);
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            float2 u = mn__cm2(sSt, r, c + e, K);
            fp += u.x * tg.v[m][e] + u.y * tg.v[m][e + 1];
        }
    }
    f += fp / s_old;
    float sc[4] = { mn__tile_max(tg), 0.f, 0.f, 0.f };
    mn__block_scales4(sc, misc);             // its barrier: every read of sSt is done
    mn__tile_store(tg, sSt, sc[0]); mn__tile_store_t(tg, sGt, sc[0]);
    mn__fence_async();
    __syncthreads();
    return sc[0];
}

// The chunk's last decay-gradient terms, then in place sdb_t <- sum_{s>=t} sdb_s (its share of dg):
// db[C-1] += last + sum w (one thread).
__device__ __forceinline__ void mn__mesa_db_revcum(float* sdb, const float* sw, float last) {
    for (int a = 0; a < MN__MC; a++) last += sw[a];
    sdb[MN__MC - 1] += last;
    float acc = 0.f;
    for (int a = MN__MC - 1; a >= 0; a--) { acc += sdb[a]; sdb[a] = acc; }
}
typedef struct mn__b2_args {
    mn__rows X, Kr, Vr, dO;                  // xs, k, v, dout
    mn__rows xbar, dKp, dv;                  // written (packed), written (packed), accumulated
    float *dbp, *dgp;                        // (NCH,C) written
    const float *Ss, *dSe, *cb, *Gam, *e, *eb, *bp, *GamC;
    unsigned B, H, T;
} mn__b2_args;
static size_t mn__b2_smem(size_t K) {
    return (7 * (MN__MC * K + 2 * K) + K * K + 2 * K) * sizeof(__half) +
           (2 * MN__MC * (MN__MC + 8) + 12 * MN__MC + 32) * sizeof(float);
}

// quad sums (the 4 lanes of a row in the accumulator layout)
__device__ __forceinline__ float mn__qsum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <int K>
__global__ void __launch_bounds__(256, 1) mn__k_mesa_b2_wg(mn__b2_args A) {
    constexpr int C = MN__MC, SC = C + 8, KH = K / 2, CK = MN__CMSIZE(K, C), NQ = 5;   // CK: a C x K or K x C operand
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __half* sX = (__half*)mn__smem;          // (C,K) X            core-matrix layout, rows tokens | later
    __half* sD = sX + CK;                    // (C,V) dO                                          | sdk (fp32)
    __half* sK = sD + CK;                    // (C,K) Kc
    __half* sV = sK + CK;                    // (C,V) Vc
    __half* sXt = sV + CK;                   // (K,C) X^T          | later (V,K) dSe^T over sXt and sDt
    __half* sDt = sXt + CK;                  // (V,C) dO^T
    __half* sKt = sDt + CK;                  // (K,C) Kc^T
    __half* sS = sKt + CK;                   // (K,V) S_n          | later (K,V) dSe
    float* sM = (float*)(sS + MN__CMSIZE(K, K));   // (C,SC) M
    float* sMp = sM + C * SC;                // (C,SC) Mp
    float* red = sMp + C * SC;               // (2 halves, NQ sums, C) row sums to exchange
    float* sdb = red + 2 * NQ * C;           // (C) db
    float* sw = sdb + C;                     // (C) w
    float* misc = sw + C;                    // (32) scratch
    const size_t i = blockIdx.x, BH = (size_t)A.B * A.H, n = i / BH, bh = i % BH, b = bh / A.H, h = bh % A.H;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
    const int qc = (lane & 3) * 2, r0 = 16 * wm + (lane >> 2), r1 = r0 + 8;
    const int nval = (n + 1) * C <= A.T ? C : (int)(A.T - n * C);
    const bool ok0 = r0 < nval, ok1 = r1 < nval;
    const float *Sn = A.Ss + i * (size_t)K * K, *dS = A.dSe + i * (size_t)K * K;
    // the rows' scalars now, in flight with the tiles below (a load in mid-kernel is a round trip)
    const float gam0 = A.Gam[i * C + r0], gam1 = A.Gam[i * C + r1], be0 = A.bp[i * C + r0], be1 = A.bp[i * C + r1];
    const float e0 = A.e[i * C + r0], e1 = A.e[i * C + r1], eb0 = A.eb[i * C + r0], eb1 = A.eb[i * C + r1],
        gamC = A.GamC[i];
    float sx, sk, sd, sv, ss;
    {   // every operand of the first phase in flight at once, then one barrier for their scales
        mn__tile<C, K> tx, tk, td, tv;
        mn__tile_load(tx, mn__row(A.X, b, h, n, 0), A.X.st, nval);
        mn__tile_load(tk, mn__row(A.Kr, b, h, n, 0), A.Kr.st, nval);
        mn__tile_load(td, mn__row(A.dO, b, h, n, 0), A.dO.st, nval);
        mn__tile_load(tv, mn__row(A.Vr, b, h, n, 0), A.Vr.st, nval);
        mn__mesa_mfill(sM, sMp, SC, A.cb, A.bp, i, red);   // (the scales' barrier publishes them)
        float sc[4] = { mn__tile_max(tx), mn__tile_max(tk), mn__tile_max(td), mn__tile_max(tv) };
        mn__block_scales4(sc, misc);
        sx = sc[0]; sk = sc[1]; sd = sc[2]; sv = sc[3];
        mn__tile_store(tx, sX, sx); mn__tile_store_t(tx, sXt, sx);
        mn__tile_store(tk, sK, sk); mn__tile_store_t(tk, sKt, sk);
        mn__tile_store(td, sD, sd); mn__tile_store_t(td, sDt, sd);
        mn__tile_store(tv, sV, sv);
    }
    ss = mn__mesa_state_load<K>(sS, Sn, misc);
    float q[NQ][2] = {};                     // row sums: Gam x.T1, T2.k, e T3.k, w, and (half 0) E rows - E columns

    // Sx, Do (scaled sx sk, sd sv) -> row sums of E; fp16(Do . M) for xbar
    float ca[8][4], cb[8][4], acc[8][4];
    uint32_t af[C / 16][4], ag[C / 16][4];
    mn__wg_fence();
    mn__wg_abt<K>(ca, sX, sK, 0, 0); mn__wg_commit();
    mn__wg_abt<K>(cb, sD, sV, 0, 0); mn__wg_commit();
    mn__wg_abt<K>(acc, sD, sS, KH * wn, 0); mn__wg_commit();   // T1 (scaled sd ss), this half's columns
    mn__wg_done<1>(ca); mn__wg_pin(cb);
    const float eu = 1.f / (sx * sk * sd * sv);
    mn__wg_rowdot3<false>(q[4][0], q[4][1], ca, cb, sM, SC, r0, r1, qc, 1.f);
    mn__wg_frags<false>(af, cb, sM, SC, r0, r1, qc);
    // xbar = Gam T1 + (Do . M) Kc, to the scale sd sv sk of the second term; the db term Gam x . T1
    // (x from its fp16 copy)
    mn__wg_done<0>(acc);
    const float g0 = gam0 * (sv * sk / ss), g1 = gam1 * (sv * sk / ss);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int col = KH * wn + 8 * j + qc;
        float2 u0 = mn__cm2(sX, r0, col, K), u1 = mn__cm2(sX, r1, col, K);
        q[0][0] += u0.x * acc[j][0] + u0.y * acc[j][1]; q[0][1] += u1.x * acc[j][2] + u1.y * acc[j][3];
        acc[j][0] *= g0; acc[j][1] *= g0; acc[j][2] *= g1; acc[j][3] *= g1;
    }
    q[0][0] *= gam0 / (sx * sd * ss); q[0][1] *= gam1 / (sx * sd * ss);
    mn__wg_fence();
    mn__wg_rbt(acc, af, sKt, KH * wn, 1); mn__wg_commit();
    // meanwhile: Sx^T, Do^T (rows j) on the same operands -> column sums of E; fp16 (Do.Mp)^T, (Sx.M)^T
    mn__wg_abt<K>(ca, sK, sX, 0, 0); mn__wg_commit();
    mn__wg_abt<K>(cb, sV, sD, 0, 0); mn__wg_commit();
    mn__wg_done<2>(acc);
    {
        const float xu = 1.f / (sd * sv * sk);
        float *o0 = mn__row(A.xbar, b, h, n, r0), *o1 = mn__row(A.xbar, b, h, n, r1);   // packed: every row
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = KH * wn + 8 * j + qc;
            *(float2*)(o0 + col) = make_float2(acc[j][0] * xu, acc[j][1] * xu);
            *(float2*)(o1 + col) = make_float2(acc[j][2] * xu, acc[j][3] * xu);
        }
    }
    mn__wg_done<0>(ca); mn__wg_pin(cb);
    mn__wg_rowdot3<true>(q[4][0], q[4][1], ca, cb, sM, SC, r0, r1, qc, -1.f);
    q[4][0] *= eu; q[4][1] *= eu;
    mn__wg_frags<true>(af, cb, sMp, SC, r0, r1, qc);     // (Do . Mp)^T, scaled sv sd
    mn__wg_frags<true>(ag, ca, sM, SC, r0, r1, qc);      // (Sx . M)^T, scaled sk sx
    // T2 = (Do . Mp)^T X (scaled sv sd sx): dk part beta T2, dbeta part T2 . k ; dv part (Sx . M)^T dO in cb
    mn__wg_fence();
    mn__wg_rbt(acc, af, sXt, KH * wn, 0); mn__wg_commit();
    mn__wg_rbt(cb, ag, sDt, KH * wn, 0); mn__wg_commit();
    mn__wg_done<1>(acc);
    const float tu = 1.f / (sv * sd * sx);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int col = KH * wn + 8 * j + qc;
        float2 k0 = mn__cm2(sK, r0, col, K), k1 = mn__cm2(sK, r1, col, K);
        acc[j][0] *= tu; acc[j][1] *= tu; acc[j][2] *= tu; acc[j][3] *= tu;
        q[1][0] += acc[j][0] * k0.x + acc[j][1] * k0.y; q[1][1] += acc[j][2] * k1.x + acc[j][3] * k1.y;
    }
    q[1][0] /= sk; q[1][1] /= sk;
    mn__wg_done<0>(cb);
    // dSe (rows k) and dSe^T (rows v) replace S_n and X^T, dO^T; <S_n, dSe> from S_n's fp16 copy on the way
    float f = 0.f;
    __syncthreads();                         // both warpgroups are past their reads of sX, sD, sXt, sDt
    // (32 per thread, interleaved) beta T2, kept for the dk store; over sX and sD
    float* sdk = (float*)sX;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        sdk[((4 * j + 0) << 8) + tid] = be0 * acc[j][0]; sdk[((4 * j + 1) << 8) + tid] = be0 * acc[j][1];
        sdk[((4 * j + 2) << 8) + tid] = be1 * acc[j][2]; sdk[((4 * j + 3) << 8) + tid] = be1 * acc[j][3];
    }
    const float sg = mn__mesa_grad_swap<K>(sS, sXt, dS, ss, f, misc);
    mn__wg_fence();
    mn__wg_abt<K>(acc, sV, sS, KH * wn, 0); mn__wg_commit();    // T3 = Vc dSe^T (scaled sv sg)
    mn__wg_abt<K>(ca, sK, sXt, KH * wn, 0); mn__wg_commit();    // T4 = Kc dSe (scaled sk sg)
    mn__wg_done<0>(acc); mn__wg_pin(ca);
    {
        float *dk0 = mn__row(A.dKp, b, h, n, r0), *dk1 = mn__row(A.dKp, b, h, n, r1);
        float *dv0 = mn__row(A.dv, b, h, n, r0), *dv1 = mn__row(A.dv, b, h, n, r1);
        const float t3u = 1.f / (sv * sg), t4u = 1.f / (sk * sg), pu = 1.f / (sk * sx * sd);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = KH * wn + 8 * j + qc;
            float2 k0 = mn__cm2(sK, r0, col, K), k1 = mn__cm2(sK, r1, col, K), v0 = mn__cm2(sV, r0, col, K),
                v1 = mn__cm2(sV, r1, col, K);
            float a0 = acc[j][0] * t3u, a1 = acc[j][1] * t3u, a2 = acc[j][2] * t3u, a3 = acc[j][3] * t3u;
            float c0 = ca[j][0] * t4u, c1 = ca[j][1] * t4u, c2 = ca[j][2] * t4u, c3 = ca[j][3] * t4u;
            q[2][0] += e0 * (a0 * k0.x + a1 * k0.y); q[2][1] += e1 * (a2 * k1.x + a3 * k1.y);
            q[3][0] += eb0 * (c0 * v0.x + c1 * v0.y); q[3][1] += eb1 * (c2 * v1.x + c3 * v1.y);
            *(float2*)(dk0 + col) = make_float2(sdk[((4 * j + 0) << 8) + tid] + be0 * e0 * a0,
                                                sdk[((4 * j + 1) << 8) + tid] + be0 * e0 * a1);
            *(float2*)(dk1 + col) = make_float2(sdk[((4 * j + 2) << 8) + tid] + be1 * e1 * a2,
                                                sdk[((4 * j + 3) << 8) + tid] + be1 * e1 * a3);
            // dv += (Sx . M)^T dO + diag(e beta) T4: each entry has one adder in this kernel (red.add, no round trip)
            if (ok0) {
                atomicAdd(dv0 + col, cb[j][0] * pu + eb0 * c0);
                atomicAdd(dv0 + col + 1, cb[j][1] * pu + eb0 * c1);
            }
            if (ok1) {
                atomicAdd(dv1 + col, cb[j][2] * pu + eb1 * c2);
                atomicAdd(dv1 + col + 1, cb[j][3] * pu + eb1 * c3);
            }
        }
        q[2][0] /= sk; q[2][1] /= sk; q[3][0] /= sv; q[3][1] /= sv;
    }
    // the row sums: over the quad, then the two halves through shared memory
#pragma unroll
    for (int t = 0; t < NQ; t++) {
        float a = mn__qsum(q[t][0]), c = mn__qsum(q[t][1]);
        if ((lane & 3) == 0 && (t < 4 || wn == 0)) { red[(wn * NQ + t) * C + r0] = a; red[(wn * NQ + t) * C + r1] = c; }
    }
    f = mn__block_sum(f, misc);              // its barriers publish red
    if (tid < C) {
        const int a = tid;
        const float s0 = red[0 * C + a] + red[(NQ + 0) * C + a], sb = red[1 * C + a] + red[(NQ + 1) * C + a];
        const float se = red[2 * C + a] + red[(NQ + 2) * C + a], w = red[3 * C + a] + red[(NQ + 3) * C + a];
        A.dbp[i * C + a] = sb + se;
        sw[a] = w; sdb[a] = s0 + red[4 * C + a] - w;
    }
    __syncthreads();
    if (tid == 0) mn__mesa_db_revcum(sdb, sw, gamC * f);
    __syncthreads();
    if (tid < C) A.dgp[i * C + tid] = sdb[tid];
}

// ---- fused backward on wgmma: B5 and every final write -----------------------------------------
// One block per chunk after the adjoint solve dQ (packed) and the B4 scan (dHe), as the six cuBLAS
// products and mn__k_mesa_b5a/b5b plus the unpacking do on the unfused path (same scaling scheme as
// B2 above). Sx = X Kc^T, Dq = dQ Kc^T, E = Sx . M . Dq:
//   db_a  = -sum_j E[a,j] + sum_a' E[a',a] - Gam_a dq_a . (X H_n^T)_a - w_a,  w_a = e_a beta_a (Kc dHe)_a . k_a
//   dKb   = -(Dq . Mp)^T X + diag(e) Kc dHe^T
//   dk   += dKp (B2's part) + diag(beta) dKb - (Sx . M)^T dQ + diag(e beta) Kc dHe
//   dbeta += dbp (B2's) + dKb . k ;  dg += dgp (B2's) + revcumsum(db), db_last += sum w + GamC <H_n, dHe>
//   dq   += dQ ;  lp (this chunk's dlambda) = -colsum(dQ . X)                    (pass B5)
typedef struct mn__b5_args {
    mn__rows X, Kr, dQ, dKp;                 // xs, k, the adjoint solves (packed), B2's dk part (packed)
    mn__rows dq, dk;                         // accumulated (caller's layout)
    float *dbeta, *dg, *lp;                  // (B,T,H) accumulated, (B,T,H) accumulated, (NCH,K) written
    const float *dbp, *dgp;                  // (NCH,C) B2's dbeta and dg parts
    const float *Hs, *dHe, *cb, *Gam, *e, *eb, *bp, *GamC;
    unsigned B, H, T;
} mn__b5_args;
static size_t mn__b5_smem(size_t K) {
    return (5 * (MN__MC * K + 2 * K) + K * K + 2 * K) * sizeof(__half) +
           (2 * MN__MC * (MN__MC + 8) + 10 * MN__MC + 2 * K + 32) * sizeof(float);
}

template <int K>
__global__ void __launch_bounds__(256, 1) mn__k_mesa_b5_wg(mn__b5_args A) {
    constexpr int C = MN__MC, SC = C + 8, KH = K / 2, CK = MN__CMSIZE(K, C), NQ = 4;   // CK: a C x K or K x C operand
    extern __shared__ __align__(16) unsigned char mn__smem[];
    __half* sX = (__half*)mn__smem;          // (C,K) X            core-matrix layout, rows tokens
    __half* sQ = sX + CK;                    // (C,K) dQ
    __half* sK = sQ + CK;                    // (C,K) Kc
    __half* sXt = sK + CK;                   // (K,C) X^T          | later (K,K) dHe^T over sXt and sQt
    __half* sQt = sXt + CK;                  // (K,C) dQ^T
    __half* sH = sQt + CK;                   // (K,K) H_n          | later dHe
    float* sM = (float*)(sH + MN__CMSIZE(K, K));   // (C,SC) M
    float* sMp = sM + C * SC;                // (C,SC) Mp
    float* red = sMp + C * SC;               // (2 halves, NQ sums, C)
    float* sdb = red + 2 * NQ * C;           // (C)
    float* sw = sdb + C;                     // (C)
    float* slp = sw + C;                     // (2, K) column sums of the two row halves
    float* misc = slp + 2 * K;               // (32)
    const size_t i = blockIdx.x, BH = (size_t)A.B * A.H, n = i / BH, bh = i % BH, b = bh / A.H, h = bh % A.H;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
    const int qc = (lane & 3) * 2, r0 = 16 * wm + (lane >> 2), r1 = r0 + 8;
    const int nval = (n + 1) * C <= A.T ? C : (int)(A.T - n * C);
    const bool ok0 = r0 < nval, ok1 = r1 < nval;
    const float *Hn = A.Hs + i * (size_t)K * K, *dH = A.dHe + i * (size_t)K * K;
    // the rows' scalars now, in flight with the tiles below (a load in mid-kernel is a round trip)
    const float gam0 = A.Gam[i * C + r0], gam1 = A.Gam[i * C + r1], be0 = A.bp[i * C + r0], be1 = A.bp[i * C + r1];
    const float e0 = A.e[i * C + r0], e1 = A.e[i * C + r1], eb0 = A.eb[i * C + r0], eb1 = A.eb[i * C + r1],
        gamC = A.GamC[i];
    const float dbp = tid < C ? A.dbp[i * C + tid] : 0.f, dgp = tid < C ? A.dgp[i * C + tid] : 0.f;
    float sx, sq, sk, sh;
    {
        mn__tile<C, K> tx, tq, tk;
        mn__tile_load(tx, mn__row(A.X, b, h, n, 0), A.X.st, nval);
        mn__tile_load(tq, mn__row(A.dQ, b, h, n, 0), A.dQ.st, nval);
        mn__tile_load(tk, mn__row(A.Kr, b, h, n, 0), A.Kr.st, nval);
        mn__mesa_mfill(sM, sMp, SC, A.cb, A.bp, i, red);   // (the scales' barrier publishes them)
        // dq += dQ (one adder per entry: red.add), and -colsum(dQ . X): a thread's pieces all have the
        // same 8 columns; lanes 8c' .. 8c'+7 of a warp share them, and warps w, w + 4
        float cs[8] = {};
#pragma unroll
        for (int m = 0; m < C * K / 2048; m++) {
            int r, c; mn__tile_at<K>(m, r, c);
            float* dqr = mn__row(A.dq, b, h, n, r < nval ? r : 0);
#pragma unroll
            for (int e = 0; e < 8; e++) {
                cs[e] -= tq.v[m][e] * tx.v[m][e];
                if (r < nval) atomicAdd(dqr + c + e, tq.v[m][e]);
            }
        }
#pragma unroll
        for (int e = 0; e < 8; e++) {
            cs[e] += __shfl_xor_sync(0xffffffffu, cs[e], 1); cs[e] += __shfl_xor_sync(0xffffffffu, cs[e], 2);
            cs[e] += __shfl_xor_sync(0xffffffffu, cs[e], 4);
            if ((lane & 7) == 0) slp[(tid >> 7) * K + 8 * ((tid >> 3) & 15) + e] = cs[e];
        }
        float sc[4] = { mn__tile_max(tx), mn__tile_max(tq), mn__tile_max(tk), 0.f };
        mn__block_scales4(sc, misc);         // its barrier also publishes slp
        sx = sc[0]; sq = sc[1]; sk = sc[2];
        mn__tile_store(tx, sX, sx); mn__tile_store_t(tx, sXt, sx);
        mn__tile_store(tq, sQ, sq); mn__tile_store_t(tq, sQt, sq);
        mn__tile_store(tk, sK, sk);
        if (tid < K) A.lp[i * K + tid] = slp[tid] + slp[K + tid];
    }
    sh = mn__mesa_state_load<K>(sH, Hn, misc);
    float q[NQ][2] = {};                     // row sums: E rows - E columns (half 0), Gam dq.(X H^T), dKb.k, w

    float ca[8][4], cb[8][4], acc[8][4];
    uint32_t af[C / 16][4], ag[C / 16][4];
    mn__wg_fence();
    mn__wg_abt<K>(ca, sX, sK, 0, 0); mn__wg_commit();          // Sx (scaled sx sk)
    mn__wg_abt<K>(cb, sQ, sK, 0, 0); mn__wg_commit();          // Dq (scaled sq sk)
    mn__wg_abt<K>(acc, sX, sH, KH * wn, 0); mn__wg_commit();   // X H_n^T (scaled sx sh), this half's columns
    mn__wg_done<1>(ca); mn__wg_pin(cb);
    const float eu = 1.f / (sx * sk * sq * sk);
    mn__wg_rowdot3<false>(q[0][0], q[0][1], ca, cb, sM, SC, r0, r1, qc, 1.f);
    mn__wg_done<0>(acc);
    {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = KH * wn + 8 * j + qc;
            float2 u0 = mn__cm2(sQ, r0, col, K), u1 = mn__cm2(sQ, r1, col, K);
            q[1][0] += u0.x * acc[j][0] + u0.y * acc[j][1]; q[1][1] += u1.x * acc[j][2] + u1.y * acc[j][3];
        }
        q[1][0] *= gam0 / (sq * sx * sh); q[1][1] *= gam1 / (sq * sx * sh);
    }
    // Sx^T, Dq^T (rows j) -> column sums of E; fp16 (Dq . Mp)^T, (Sx . M)^T
    mn__wg_fence();
    mn__wg_abt<K>(ca, sK, sX, 0, 0); mn__wg_commit();
    mn__wg_abt<K>(cb, sK, sQ, 0, 0); mn__wg_commit();
    mn__wg_done<0>(ca); mn__wg_pin(cb);
    mn__wg_rowdot3<true>(q[0][0], q[0][1], ca, cb, sM, SC, r0, r1, qc, -1.f);
    q[0][0] *= eu; q[0][1] *= eu;
    mn__wg_frags<true>(af, cb, sMp, SC, r0, r1, qc);     // (Dq . Mp)^T, scaled sk sq
    mn__wg_frags<true>(ag, ca, sM, SC, r0, r1, qc);      // (Sx . M)^T, scaled sk sx
    mn__wg_fence();
    mn__wg_rbt(acc, af, sXt, KH * wn, 0); mn__wg_commit();    // (Dq . Mp)^T X   (scaled sk sq sx)
    mn__wg_rbt(cb, ag, sQt, KH * wn, 0); mn__wg_commit();     // (Sx . M)^T dQ   (scaled sk sx sq)
    mn__wg_done<0>(acc); mn__wg_pin(cb);
    const float u = 1.f / (sk * sq * sx);
#pragma unroll
    for (int j = 0; j < 8; j++) {                // dKb's first term t = -(Dq.Mp)^T X; cb <- beta t - (Sx.M)^T dQ
        const int col = KH * wn + 8 * j + qc;
        float2 k0 = mn__cm2(sK, r0, col, K), k1 = mn__cm2(sK, r1, col, K);
        float t0 = -acc[j][0] * u, t1 = -acc[j][1] * u, t2 = -acc[j][2] * u, t3 = -acc[j][3] * u;
        q[2][0] += t0 * k0.x + t1 * k0.y; q[2][1] += t2 * k1.x + t3 * k1.y;
        cb[j][0] = be0 * t0 - cb[j][0] * u; cb[j][1] = be0 * t1 - cb[j][1] * u;
        cb[j][2] = be1 * t2 - cb[j][2] * u; cb[j][3] = be1 * t3 - cb[j][3] * u;
    }
    // dHe (rows k') and dHe^T replace H_n and X^T, dQ^T; <H_n, dHe> from H_n's fp16 copy on the way
    float f = 0.f;
    __syncthreads();                         // both warpgroups are past their reads of sH, sXt, sQt
    float2 dkp[8][2];                        // B2's dk part, read with the dHe tile (one round trip)
    {
        const float *p0 = mn__row(A.dKp, b, h, n, r0), *p1 = mn__row(A.dKp, b, h, n, r1);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            dkp[j][0] = *(const float2*)(p0 + KH * wn + 8 * j + qc);
            dkp[j][1] = *(const float2*)(p1 + KH * wn + 8 * j + qc);
        }
    }
    const float sg = mn__mesa_grad_swap<K>(sH, sXt, dH, sh, f, misc);
    mn__wg_fence();
    mn__wg_abt<K>(acc, sK, sH, KH * wn, 0); mn__wg_commit();    // Kc dHe^T (scaled sk sg)
    mn__wg_abt<K>(ca, sK, sXt, KH * wn, 0); mn__wg_commit();    // Kc dHe   (scaled sk sg)
    mn__wg_done<0>(acc); mn__wg_pin(ca);
    {
        const float v = 1.f / (sk * sg);
        float *dk0 = mn__row(A.dk, b, h, n, ok0 ? r0 : 0), *dk1 = mn__row(A.dk, b, h, n, ok1 ? r1 : 0);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = KH * wn + 8 * j + qc;
            float2 k0 = mn__cm2(sK, r0, col, K), k1 = mn__cm2(sK, r1, col, K), d0 = dkp[j][0], d1 = dkp[j][1];
            float a0 = acc[j][0] * v, a1 = acc[j][1] * v, a2 = acc[j][2] * v, a3 = acc[j][3] * v;
            float c0 = ca[j][0] * v, c1 = ca[j][1] * v, c2 = ca[j][2] * v, c3 = ca[j][3] * v;
            q[2][0] += e0 * (a0 * k0.x + a1 * k0.y); q[2][1] += e1 * (a2 * k1.x + a3 * k1.y);
            q[3][0] += eb0 * (c0 * k0.x + c1 * k0.y); q[3][1] += eb1 * (c2 * k1.x + c3 * k1.y);
            if (ok0) {
                atomicAdd(dk0 + col, d0.x + cb[j][0] + be0 * e0 * a0 + eb0 * c0);
                atomicAdd(dk0 + col + 1, d0.y + cb[j][1] + be0 * e0 * a1 + eb0 * c1);
            }
            if (ok1) {
                atomicAdd(dk1 + col, d1.x + cb[j][2] + be1 * e1 * a2 + eb1 * c2);
                atomicAdd(dk1 + col + 1, d1.y + cb[j][3] + be1 * e1 * a3 + eb1 * c3);
            }
        }
        q[2][0] /= sk; q[2][1] /= sk; q[3][0] /= sk; q[3][1] /= sk;
    }
#pragma unroll
    for (int t = 0; t < NQ; t++) {
        float a = mn__qsum(q[t][0]), c = mn__qsum(q[t][1]);
        if ((lane & 3) == 0 && (t > 0 || wn == 0)) { red[(wn * NQ + t) * C + r0] = a; red[(wn * NQ + t) * C + r1] = c; }
    }
    f = mn__block_sum(f, misc);              // its barriers publish red
    if (tid < C) {
        const int a = tid;
        const float gs = red[1 * C + a] + red[(NQ + 1) * C + a], dkb = red[2 * C + a] + red[(NQ + 2) * C + a],
            w = red[3 * C + a] + red[(NQ + 3) * C + a];
        sw[a] = w; sdb[a] = -red[a] - gs - w;
        if (a < nval) A.dbeta[(b * A.T + n * C + a) * A.H + h] += dbp + dkb;
    }
    __syncthreads();
    if (tid == 0) mn__mesa_db_revcum(sdb, sw, gamC * f);
    __syncthreads();
    if (tid < nval) A.dg[(b * A.T + n * C + tid) * A.H + h] += dgp + sdb[tid];
}

// dlamb (H,K) += sum over chunks n and batch b of lp (NC,B,H,K)
__global__ void mn__k_mesa_dlamb(float* dlamb, const float* lp, size_t NC, size_t B, size_t H, size_t K) {
    MN__FOR(idx, H * K) {
        size_t h = idx / K, k = idx % K;
        float s = 0.f;
        for (size_t nb = 0; nb < NC * B; nb++) s += lp[(nb * H + h) * K + k];
        dlamb[idx] += s;
    }
}

// ---- drivers ----------------------------------------------------------------------------------
static int mn__mesa_check(mn_cuda_ctx* ctx, const mn_mesa_opts* op, size_t Dk, size_t Dv) {
    if (Dk != Dv || (Dk != 64 && Dk != 128)) return mn__fail(ctx, MN_ERR_CONFIG, "mesa",
                                                             "the CUDA kernels need Dk == Dv in {64, 128}", __LINE__);
    if (op->chunk != MN__MC) return mn__fail(ctx, MN_ERR_CONFIG, "mesa", "the CUDA kernels need chunk 64", __LINE__);
    if (op->solver != MN_MESA_CG) return mn__fail(ctx, MN_ERR_CONFIG, "mesa", "the CUDA kernels solve by CG only",
                                                  __LINE__);
    if (op->jacobi) return mn__fail(ctx, MN_ERR_CONFIG, "mesa", "the CUDA chunkwise CG starts at x0 = 0 (jacobi = 0)",
                                    __LINE__);
    return MN_OK;
}
// Packs g and beta and builds the decay data (shared by the forward and the backward).
// mm: also the C x C decay matrices M, Mp (the cuBLAS backward reads them; the kernels build their own)
static int mn__mesa_prepare(mn_cuda_ctx* ctx, const mn__mesa_ws* w, const float* g, const float* beta, size_t B,
                            size_t T, size_t H, int mm) {
    size_t NCH = (T + MN__MC - 1) / MN__MC * B * H;
    mn__k_mesa_decay<<<(unsigned)NCH, MN__MC, 0, MN__STREAM>>>(w->Gam, w->e, w->eb, w->GamC, mm ? w->M : NULL, w->Mp,
                                                               w->cb, w->bp, g, beta, (unsigned)B, (unsigned)T,
                                                               (unsigned)H);
    MN__LAUNCHED();
    return MN_OK;
}
// State pass (the forward's states): H_{n+1} = GamC H_n + Kt^T Kc, S_{n+1} = GamC S_n + Kt^T Vc with
// Kt = diag(e beta) Kc, both states in one launch; slots 0..NC of w->Hs, w->Ss.
static int mn__mesa_states(mn_cuda_ctx* ctx, const mn__mesa_ws* w, const float* hkk0, const float* hkv0, mn__rows kr,
                           mn__rows vr, size_t B, size_t T, size_t H, size_t K, size_t V) {
    mn__scan_job jh = { w->Hs, hkk0, NULL, kr, kr, (int)K }, js = { w->Ss, hkv0, NULL, kr, vr, (int)V };
    return mn__mesa_scan(ctx, 0, &jh, &js, w->eb, 1.f, w->GamC, B, T, H, K);
}

// ctx->mesa_keep_states: the forward stamps its workspace with a hash of its inputs (pointers, shapes),
// the backward recomputes the states only if its own inputs do not match the stamp of its workspace.
static uint64_t mn__mesa_hash(const void* const* p, int np, const size_t* z, int nz) {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < np; i++) { x ^= (uint64_t)(uintptr_t)p[i]; x *= 0x100000001B3ull; x ^= x >> 29; }
    for (int i = 0; i < nz; i++) { x ^= (uint64_t)z[i]; x *= 0x100000001B3ull; x ^= x >> 29; }
    return x | 1;                                     // never 0 (an empty slot)
}
static uint64_t mn__mesa_stamp(const float* work, const float* k, const float* v, const float* g, const float* beta,
                               const float* hkk0, const float* hkv0, size_t B, size_t T, size_t H, size_t K, size_t V) {
    const void* p[7] = { work, k, v, g, beta, hkk0, hkv0 };
    const size_t z[5] = { B, T, H, K, V };
    return mn__mesa_hash(p, 7, z, 5);
}
static void mn__mesa_stamp_set(mn_cuda_ctx* ctx, const float* work, uint64_t stamp) {
    int slot = (int)(((uintptr_t)work >> 8) % 16);
    ctx->mesa_stamp[slot][0] = (uint64_t)(uintptr_t)work; ctx->mesa_stamp[slot][1] = stamp;
}
static int mn__mesa_stamp_ok(const mn_cuda_ctx* ctx, const float* work, uint64_t stamp) {
    int slot = (int)(((uintptr_t)work >> 8) % 16);
    return ctx->mesa_keep_states && ctx->mesa_stamp[slot][0] == (uint64_t)(uintptr_t)work &&
           ctx->mesa_stamp[slot][1] == stamp;
}

// keep NULL: mn_cuda_mesa_forward; else the kept form's forward (the states into keep, the workspace unstamped)
static int mn__mesa_forward(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv, const float* q,
                            const float* k, const float* v, const float* g, const float* beta, const float* lamb,
                            size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, float* work,
                            float* keep) {
    mn_mesa_opts tmp;
    const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, NC = (T + MN__MC - 1) / MN__MC, BH = B * H;
    mn__mesa_ws w;
    MN__TRY(mn__mesa_check(ctx, op, Dk, Dv));
    if (B * T * H == 0) return MN_OK;
    mn__mesa_layout(&w, work, B, T, H, K, V);
    if (keep) mn__mesa_keep_layout(&w, keep, B, T, H, K, V);
    mn__rows qr = mn__rows_bthd(q, T, H, K), kr = mn__rows_bthd(k, T, H, K), vr = mn__rows_bthd(v, T, H, V);
    MN__TRY(mn__mesa_prepare(ctx, &w, g, beta, B, T, H, 0));
    MN__TRY(mn__mesa_states(ctx, &w, hkk, hkv, kr, vr, B, T, H, K, V));         // step 1: states, read in place
    // the states in w (slots 0 .. NC-1) are what a backward recomputes first; with keep_states it may
    // take them (hkk/hkv are read here as the initial states and overwritten below with the final); in the
    // kept form they are in keep, not in the workspace, whose stamp is cleared
    mn__mesa_stamp_set(ctx, work, ctx->mesa_keep_states && !keep ? mn__mesa_stamp(work, k, v, g, beta, hkk, hkv, B, T,
                                                                                  H, K, V) : 0);
    // steps 2 and 3 in one kernel: X = A^-1 Q, then O = ((X Kc^T) . M) Vc + diag(Gam) X S_n
    MN__TRY(mn__mesa_cg(ctx, qr, kr, vr, xs ? mn__rows_bthd(xs, T, H, K) : mn__rows_packed(w.Xp, B, H, K),
                        mn__rows_bthd(out, T, H, V), 1, iters, &w, lamb, B, T, H, K, op));
    if (hkk) MN__CU(cudaMemcpyAsync(hkk, w.Hs + NC * BH * K * K, BH * K * K * sizeof(float), cudaMemcpyDeviceToDevice,
                                    MN__STREAM));
    if (hkv) MN__CU(cudaMemcpyAsync(hkv, w.Ss + NC * BH * K * V, BH * K * V * sizeof(float), cudaMemcpyDeviceToDevice,
                                    MN__STREAM));
    return MN_OK;
}
int mn_cuda_mesa_forward(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv, const float* q,
                         const float* k, const float* v, const float* g, const float* beta, const float* lamb, size_t B,
                         size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, float* work) {
    return mn__mesa_forward(ctx, out, xs, iters, hkk, hkv, q, k, v, g, beta, lamb, B, T, H, Dk, Dv, o, work, NULL);
}
int mn_cuda_mesa_forward_keep(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv,
                              float* keep, const float* q, const float* k, const float* v, const float* g,
                              const float* beta, const float* lamb, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                              const mn_mesa_opts* o, float* work) {
    if (!keep) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mesa_forward_keep", "needs keep", __LINE__);
    return mn__mesa_forward(ctx, out, xs, iters, hkk, hkv, q, k, v, g, beta, lamb, B, T, H, Dk, Dv, o, work, keep);
}

// The fused backward (Dk = Dv = 128, ctx->mesa_cg = MN_CUDA_CG_WGMMA): B0 and the scans as above,
// B2 and B5 one wgmma kernel each; nothing is packed: the kernels read xs, k, v, dout in place and
// add into the caller's gradients, and only xbar, dQ and B2's dk, dbeta, dg parts go through the
// workspace.
static int mn__mesa_backward_wg(mn_cuda_ctx* ctx, const mn__mesa_ws* w, float* dq, float* dk, float* dv, float* dg,
                                float* dbeta, float* dlamb, float* dhkk0, float* dhkv0,
                                const float* dout, const float* dhkk, const float* dhkv, const float* xs,
                                const float* k, const float* v, const float* lamb,
                                const float* hkk0, const float* hkv0, size_t B, size_t T, size_t H, size_t K,
                                const mn_mesa_opts* op, int keep) {
    const size_t NC = (T + MN__MC - 1) / MN__MC, NCH = NC * B * H;
    const mn__rows Xr = mn__rows_bthd(xs, T, H, K), Kr = mn__rows_bthd(k, T, H, K), Vr = mn__rows_bthd(v, T, H, K),
        dOr = mn__rows_bthd(dout, T, H, K);
    const mn__rows dQr = mn__rows_packed(w->dQ, B, H, K), xbar = mn__rows_packed(w->T1, B, H, K),
        dKp = mn__rows_packed(w->dKp, B, H, K);
    static int attr = 0;
    if (!attr) {
        MN__CU(cudaFuncSetAttribute(mn__k_mesa_b2_wg<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)mn__b2_smem(128)));
        MN__CU(cudaFuncSetAttribute(mn__k_mesa_b5_wg<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)mn__b5_smem(128)));
        attr = 1;
    }
    if (!keep) MN__TRY(mn__mesa_states(ctx, w, hkk0, hkv0, Kr, Vr, B, T, H, K, K));            // B0
    {   // B1: dSe
        mn__scan_job j = { w->dSe, dhkv, dhkv0, Xr, dOr, (int)K };
        MN__TRY(mn__mesa_scan(ctx, 1, &j, NULL, w->Gam, 1.f, w->GamC, B, T, H, K));
    }
    {   // B2
        mn__b2_args a;
        a.X = Xr; a.Kr = Kr; a.Vr = Vr; a.dO = dOr; a.xbar = xbar; a.dKp = dKp; a.dv = mn__rows_bthd(dv, T, H, K);
        a.dbp = w->dbp; a.dgp = w->dgp; a.Ss = w->Ss; a.dSe = w->dSe; a.cb = w->cb; a.Gam = w->Gam; a.e = w->e;
        a.eb = w->eb; a.bp = w->bp; a.GamC = w->GamC;
        a.B = (unsigned)B; a.H = (unsigned)H; a.T = (unsigned)T;
        mn__k_mesa_b2_wg<128><<<(unsigned)NCH, 256, mn__b2_smem(128), MN__STREAM>>>(a); MN__LAUNCHED();
    }
    MN__TRY(mn__mesa_cg(ctx, xbar, Kr, Vr, dQr, dQr, 0, NULL, w, lamb, B, T, H, K, op));        // B3: dQ = A^-1 xbar
    {   // B4: dHe
        mn__scan_job j = { w->dHe, dhkk, dhkk0, dQr, Xr, (int)K };
        MN__TRY(mn__mesa_scan(ctx, 1, &j, NULL, w->Gam, -1.f, w->GamC, B, T, H, K));
    }
    {   // B5 and the final writes
        mn__b5_args a;
        a.X = Xr; a.Kr = Kr; a.dQ = dQr; a.dKp = dKp; a.dq = mn__rows_bthd(dq, T, H, K); a.dk = mn__rows_bthd(dk, T, H,
                K);
        a.dbeta = dbeta; a.dg = dg; a.lp = w->lp; a.dbp = w->dbp; a.dgp = w->dgp;
        a.Hs = w->Hs; a.dHe = w->dHe; a.cb = w->cb; a.Gam = w->Gam; a.e = w->e; a.eb = w->eb; a.bp = w->bp;
        a.GamC = w->GamC;
        a.B = (unsigned)B; a.H = (unsigned)H; a.T = (unsigned)T;
        mn__k_mesa_b5_wg<128><<<(unsigned)NCH, 256, mn__b5_smem(128), MN__STREAM>>>(a); MN__LAUNCHED();
    }
    mn__k_mesa_dlamb<<<mn__grid(ctx, H * K, 256), 256, 0, MN__STREAM>>>(dlamb, w->lp, NC, B, H, K); MN__LAUNCHED();
    return MN_OK;
}

static int mn__mesa_backward_cublas(mn_cuda_ctx* ctx, const mn__mesa_ws* wp, float* dq, float* dk, float* dv, float* dg,
                                    float* dbeta, float* dlamb, float* dhkk0, float* dhkv0, const float* dout,
                                    const float* dhkk, const float* dhkv, const float* xs, const float* k,
                                    const float* v, const float* lamb, const float* hkk0, const float* hkv0,
                                    size_t B, size_t T, size_t H, size_t K, size_t V, const mn_mesa_opts* op, int keep);
// Backward, passes B0-B5 (the top of this section; mn_mesa_backward in mesanet.h, line for line).
// keptp NULL: mn_cuda_mesa_backward; else the kept form's backward (the states read from keptp, B0 skipped)
static int mn__mesa_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dbeta, float* dlamb,
                             float* dhkk0, float* dhkv0, const float* dout, const float* dhkk, const float* dhkv,
                             const float* xs, const float* k, const float* v, const float* g, const float* beta,
                             const float* lamb, const float* hkk0, const float* hkv0, size_t B, size_t T, size_t H,
                             size_t Dk, size_t Dv, const mn_mesa_opts* o, float* work, const float* keptp) {
    mn_mesa_opts tmp;
    const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv;
    mn__mesa_ws w;
    MN__TRY(mn__mesa_check(ctx, op, Dk, Dv));
    if (B * T * H == 0) return MN_OK;
    mn__mesa_layout(&w, work, B, T, H, K, V);
    const int fused = K == 128 && V == 128 && ctx->mesa_cg == MN_CUDA_CG_WGMMA;
    MN__TRY(mn__mesa_prepare(ctx, &w, g, beta, B, T, H, !fused));
    // B0 (the chunk-start states) is skipped when the workspace already holds them for these inputs;
    // after B0 it holds them either way. The kept form reads them from keptp (and leaves the workspace unstamped).
    const uint64_t stamp = mn__mesa_stamp(work, k, v, g, beta, hkk0, hkv0, B, T, H, K, V);
    const int keep = keptp ? 1 : mn__mesa_stamp_ok(ctx, work, stamp);
    if (keptp) mn__mesa_keep_layout(&w, keptp, B, T, H, K, V);
    mn__mesa_stamp_set(ctx, work, ctx->mesa_keep_states && !keptp ? stamp : 0);
    if (fused)
        return mn__mesa_backward_wg(ctx, &w, dq, dk, dv, dg, dbeta, dlamb, dhkk0, dhkv0, dout, dhkk, dhkv, xs, k, v,
                                    lamb, hkk0, hkv0, B, T, H, K, op, keep);
    return mn__mesa_backward_cublas(ctx, &w, dq, dk, dv, dg, dbeta, dlamb, dhkk0, dhkv0, dout, dhkk, dhkv, xs, k, v,
                                    lamb, hkk0, hkv0, B, T, H, K, V, op, keep);
}
int mn_cuda_mesa_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dbeta, float* dlamb,
                          float* dhkk0, float* dhkv0, const float* dout, const float* dhkk, const float* dhkv,
                          const float* xs, const float* q, const float* k, const float* v, const float* g,
                          const float* beta, const float* lamb, const float* hkk0, const float* hkv0, size_t B,
                          size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, float* work) {
    (void)q;   // the implicit backward needs x, not q
    return mn__mesa_backward(ctx, dq, dk, dv, dg, dbeta, dlamb, dhkk0, dhkv0, dout, dhkk, dhkv, xs, k, v, g, beta, lamb,
                             hkk0, hkv0, B, T, H, Dk, Dv, o, work, NULL);
}
int mn_cuda_mesa_backward_keep(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dbeta,
                               float* dlamb, float* dhkk0, float* dhkv0, const float* dout, const float* dhkk,
                               const float* dhkv, const float* keep, const float* xs, const float* k, const float* v,
                               const float* g, const float* beta, const float* lamb, const float* hkk0,
                               const float* hkv0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                               const mn_mesa_opts* o, float* work) {
    if (!keep) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mesa_backward_keep", "needs keep", __LINE__);
    return mn__mesa_backward(ctx, dq, dk, dv, dg, dbeta, dlamb, dhkk0, dhkv0, dout, dhkk, dhkv, xs, k, v, g, beta, lamb,
                             hkk0, hkv0, B, T, H, Dk, Dv, o, work, keep);
}

// ---- the decode step (mn_cuda_mesa_step) --------------------------------------------------------
// mn_mesa_step of mesanet.h, iteration for iteration, for B sequences in one launch: one thread
// block of 8 warps per (sequence b, head h), the whole system on one multiprocessor, fp32 throughout.
//   - H (K x K) lives in registers for the whole solve: warp w holds rows R w .. R w + R-1 (R = K/8),
//     lane l columns CW l .. CW l + CW-1 (CW = K/32), so a warp's load of a row is one contiguous,
//     coalesced segment; the update H = e^g H + beta k k^T happens on load and H goes straight back.
//   - A matrix-vector product: each thread multiplies its R x CW block by its CW entries of the
//     vector, then a halving butterfly over the warp (R/2 + R/4 + ... + 1 shuffles, then log2(32/R)
//     more) leaves row R w + l / (32/R) complete in lane l (each row in 32/R lanes, bitwise equal).
//   - CG's vectors are per row, in those lanes: x, r, p in registers. Each iteration needs two block
//     reductions (p.Ap, r.r: warp butterflies, 8 partials through shared memory, summed in a fixed
//     order so every thread holds the same value and the stopping test is block-uniform) and one
//     broadcast of the new r through shared memory, from which every thread rebuilds ITS columns of
//     p = r + cb p with the same fma as the row owners: two barriers per iteration.
//   - S (K x V) is copied to shared memory by cp.async at the start, so its transfer overlaps the
//     solve; after it, S = e^g S + beta k v^T goes back to memory and out = S^T x is summed over the
//     warps' row blocks in shared memory.
// Stopping: as the CPU loop: before each iteration, stop when delta <= tol^2 delta_0 (tol = the
// float epsilon for a fixed count), and after A p when p.Ap <= 0; never in fla mode. The Jacobi
// guess is q / (diag H_t + lambda) as the CPU step (fla's Triton kernel adds 1e-5 to that
// denominator).


// v[R] partial row sums of one warp -> the total of row lane / (32/R) in lane (see above). Written
// as compile-time recursion: a runtime-halving loop is not unrolled and puts v in local memory.
template <int HALF, int OFF, int R>
__device__ __forceinline__ void mn__halve(float (&v)[R], int lane) {
    if constexpr (HALF >= 1) {
        const bool up = (lane & OFF) != 0;          // the upper lane keeps rows [HALF, 2 HALF)
#pragma unroll
        for (int i = 0; i < HALF; i++) {
            float send = up ? v[i] : v[i + HALF], keep = up ? v[i + HALF] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, OFF);
        }
        mn__halve<HALF / 2, OFF / 2, R>(v, lane);
    } else {                                        // the 32/R lanes of a row: butterfly, bitwise equal sums
#pragma unroll
        for (int o = OFF; o >= 1; o /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
    }
}
template <int R>
__device__ __forceinline__ float mn__rowreduce(float (&v)[R], int lane) {
    mn__halve<R / 2, 16, R>(v, lane);
    return v[0];
}

typedef struct mn__step_args {
    float *out, *hkk, *hkv;
    int* iters;
    const float *q, *k, *v, *g, *beta, *lamb;
    // (B*H, K) CG starts, then (B*H) flags (nonzero: start at that row; 0: the head's Jacobi guess): the
    // Woodbury step's (mn_cuda_mesa_step_woodbury); NULL: x0 = 0 or the Jacobi guess, as jacobi says
    const float* x0;
    // (B*H, K) each head's previous solution in (a zero row: none, a new sequence), this token's out; NULL: none.
    // wmode: how a previous solution starts CG (mesanet.h's mn__mesa_warm): MN_MESA_WARM x_{t-1}, _SCALED
    // c x_{t-1}, _BLEND a x_{t-1} + b x_J, the coefficients minimising the error's A-norm; 0: not at all
    float* xs;
    int wmode;
    unsigned H, V;
    int n_iter, fla, jacobi;
    int warm;               // 1: the stop is relative to ||q|| (r_0 at x0 = 0), the CPU's opts.warm; 0: ||r_0||
    float stop, eps;        // squared relative residual where a system stops; fla's 1e-5 (else 0)
} mn__step_args;

template <int K> static size_t mn__step_smem(size_t V) { return ((size_t)K * V + 6 * K + 9 * V + 16) * sizeof(float); }

template <int K>
__global__ void __launch_bounds__(256, 2) mn__k_mesa_step(mn__step_args A) {
    constexpr int R = K / 8, CW = K / 32, LPR = 32 / R;   // rows per warp, columns per lane, lanes per row
    extern __shared__ __align__(16) unsigned char mn__smem[];
    const int V = (int)A.V;
    float* sS = (float*)mn__smem;                  // (K,V) S, then S_t
    float *sq = sS + K * V, *sk = sq + K, *sl = sk + K, *sdg = sl + K, *svx = sdg + K, *svr = svx + K;
    float *sv = svr + K, *sout = sv + V, *sred = sout + 8 * V;   // (V), (8,V) per-warp outputs, (2,8) partial sums
    const size_t bh = blockIdx.x, h = bh % A.H;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, c0 = lane * CW;
    float* Hg = A.hkk + bh * K * K;
    float* Sg = A.hkv + bh * (size_t)K * V;

    for (int idx = tid; idx < K * V / 4; idx += 256) mn__cp16(sS + 4 * idx, Sg + 4 * idx);   // S: async
    mn__cp_commit();
    if (tid < K) { sq[tid] = A.q[bh * K + tid]; sk[tid] = A.k[bh * K + tid]; sl[tid] = A.lamb[h * K + tid]; }
    for (int c = tid; c < V; c += 256) sv[c] = A.v[bh * V + c];
    const float gam = expf(A.g[bh]), bt = A.beta[bh];
    __syncthreads();

    // H_t = e^g H + beta k k^T on the way in, written back at once; its diagonal into sdg
    float Hr[R][CW];
#pragma unroll
    for (int ii = 0; ii < R; ii++) {
        const float* src = Hg + (size_t)(w * R + ii) * K + c0;
        if constexpr (CW == 4) {
            float4 u = *(const float4*)src;
            Hr[ii][0] = u.x;
            Hr[ii][1] = u.y;
            Hr[ii][2] = u.z;
            Hr[ii][3] = u.w;
        }
        else { float2 u = *(const float2*)src; Hr[ii][0] = u.x; Hr[ii][1] = u.y; }
    }
    {
        float kc[CW];
#pragma unroll
        for (int j = 0; j < CW; j++) kc[j] = sk[c0 + j];
#pragma unroll
        for (int ii = 0; ii < R; ii++) {
            const int row = w * R + ii;
            const float bk = bt * sk[row];
#pragma unroll
            for (int j = 0; j < CW; j++) {
                Hr[ii][j] = fmaf(gam, Hr[ii][j], bk * kc[j]);
                if (row == c0 + j) sdg[row] = Hr[ii][j];
            }
            float* dst = Hg + (size_t)row * K + c0;
            if constexpr (CW == 4) *(float4*)dst = make_float4(Hr[ii][0], Hr[ii][1], Hr[ii][2], Hr[ii][3]);
            else *(float2*)dst = make_float2(Hr[ii][0], Hr[ii][1]);
        }
    }
    __syncthreads();                               // sdg complete

    auto matvec = [&](const float (&vc)[CW]) -> float {   // (H_t vc) for this lane's row
        float part[R];
#pragma unroll
        for (int ii = 0; ii < R; ii++) {
            float a = 0.f;
#pragma unroll
            for (int j = 0; j < CW; j++) a = fmaf(Hr[ii][j], vc[j], a);
            part[ii] = a;
        }
        return mn__rowreduce<R>(part, lane);
    };
    auto bsum = [&](float val, float* buf) -> float {     // block sum of a per-row value (buf: 8 floats)
#pragma unroll
        for (int o = LPR; o < 32; o <<= 1) val += __shfl_xor_sync(0xffffffffu, val, o);
        if (lane == 0) buf[w] = val;
        __syncthreads();
        float s = buf[0];
#pragma unroll
        for (int i = 1; i < 8; i++) s += buf[i];
        return s;
    };

    const int ir = w * R + lane / LPR;             // this lane's row
    const bool owner = lane % LPR == 0;            // one writer per row
    const float qi = sq[ir], li = sl[ir];
    // (H_t u) for this lane's row, u given row by row (val: this row's entry): through svx, whose earlier
    // contents every thread must have read before the call (a barrier since)
    auto hmul = [&](float val) -> float {
        if (owner) svx[ir] = val;
        __syncthreads();
        float vc[CW];
#pragma unroll
        for (int j = 0; j < CW; j++) vc[j] = svx[c0 + j];
        return matvec(vc);
    };
    float x = qi;
    int it = 0;
    if (A.n_iter >= 0) {
        float r = qi;
        // the head's previous solution (block-uniform: any nonzero entry; a zero row is a new sequence)
        const float prv = A.xs && A.wmode ? A.xs[bh * K + ir] : 0.f;
        const bool have = A.xs && A.wmode && __syncthreads_or(prv != 0.f) != 0;
        if (have) {
            // mesanet.h's mn__mesa_warm in float: u = A x_{t-1}; the line's optimum c = x_{t-1}.q / x_{t-1}.A
            // x_{t-1}; BLEND: the plane of x_{t-1} and x_J by the 2 x 2 Galerkin system; r0 by linearity. The block
            // sums alternate between the two halves of sred (a sum's barrier orders the other half's reads)
            const float u = hmul(prv) + li * prv;
            const float pu = bsum(prv * u, sred), pr = bsum(prv * qi, sred + 8);
            float a = 1.f, b = 0.f, xj = 0.f, wj = 0.f;
            if (A.wmode != MN_MESA_WARM) a = pu > 0.f ? pr / pu : 0.f;
            if (A.wmode == MN_MESA_WARM_BLEND) {
                xj = qi / (sdg[ir] + li);          // x_J, then w = A x_J (x_{t-1} in svx read before pr's barrier)
                wj = hmul(xj) + li * xj;
                const float jj = bsum(xj * wj, sred), pj = bsum(prv * wj, sred + 8), jp = bsum(xj * u, sred),
                            jr = bsum(xj * qi, sred + 8);
                const float pjs = 0.5f * (pj + jp), det = pu * jj - pjs * pjs;
                if (det > 64.f * 1.1920929e-07f * pu * jj) {
                    a = (pr * jj - pjs * jr) / det;
                    b = (pu * jr - pjs * pr) / det;
                }
            }
            x = a * prv + b * xj;
            r = qi - a * u - b * wj;
        } else {
            // a given start (block-uniform: one head per block), else the Jacobi guess of H_t or 0
            const bool given = A.x0 && A.x0[(size_t)gridDim.x * K + bh] != 0.f;
            x = given ? A.x0[bh * K + ir] : A.jacobi ? qi / (sdg[ir] + li) : 0.f;
            if (given || A.jacobi) r = qi - hmul(x) - li * x;   // r0 = q - (H_t + diag lambda) x0
        }
        float p = r, pc[CW];
        if (owner) svr[ir] = r;
        float delta = bsum(r * r, sred);           // its barrier also publishes svr
        // the stop's reference: ||r_0||^2, or with warm ||q||^2, summed by every thread from shared memory in
        // one order (so block-uniform, and no reduction buffer shared with the loop's)
        float delta0 = delta;
        if (A.warm) {
            delta0 = 0.f;
            for (int j = 0; j < K; j++) delta0 = fmaf(sq[j], sq[j], delta0);
        }
#pragma unroll
        for (int j = 0; j < CW; j++) pc[j] = svr[c0 + j];
        for (; it < A.n_iter; it++) {
            if (!A.fla && delta <= A.stop * delta0) break;
            const float ap = fmaf(li, p, matvec(pc));
            const float pap = bsum(p * ap, sred + 8);
            if (!A.fla && !(pap > 0.f)) break;     // converged below float resolution
            const float alpha = delta / (pap + A.eps);
            x = fmaf(alpha, p, x);
            r = fmaf(-alpha, ap, r);
            if (owner) svr[ir] = r;                // every read of the old r was before bsum's barrier
            const float dn = bsum(r * r, sred);
            const float cb = dn / (delta + A.eps);
            p = fmaf(cb, p, r);
#pragma unroll
            for (int j = 0; j < CW; j++) pc[j] = fmaf(cb, pc[j], svr[c0 + j]);   // the same p, bit for bit
            delta = dn;
        }
    }
    if (owner) svx[ir] = x;
    if (A.xs && owner) A.xs[bh * K + ir] = x;      // the next token's start (its row was read at the top)
    if (A.iters && tid == 0) A.iters[bh] = it;
    mn__cp_wait_all();
    __syncthreads();                               // S and x in shared memory

    // S_t = e^g S + beta k v^T back to memory; out = S_t^T x (per-warp partial sums, then over warps)
    float4 o[2] = { make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f) };
    for (int i = w; i < K; i += 8) {
        const float xi = svx[i], bk = bt * sk[i];
#pragma unroll
        for (int m = 0; m < 2; m++) {
            const int c = 4 * lane + 128 * m;
            if (c >= V) break;
            float4 s = *(const float4*)&sS[i * V + c], vv = *(const float4*)&sv[c];
            s.x = fmaf(gam, s.x, bk * vv.x); s.y = fmaf(gam, s.y, bk * vv.y);
            s.z = fmaf(gam, s.z, bk * vv.z); s.w = fmaf(gam, s.w, bk * vv.w);
            *(float4*)&Sg[(size_t)i * V + c] = s;
            o[m].x = fmaf(s.x, xi, o[m].x); o[m].y = fmaf(s.y, xi, o[m].y);
            o[m].z = fmaf(s.z, xi, o[m].z); o[m].w = fmaf(s.w, xi, o[m].w);
        }
    }
#pragma unroll
    for (int m = 0; m < 2; m++) {
        const int c = 4 * lane + 128 * m;
        if (c < V) *(float4*)&sout[w * V + c] = o[m];
    }
    __syncthreads();
    for (int c = tid; c < V; c += 256) {
        float s = sout[c];
#pragma unroll
        for (int i = 1; i < 8; i++) s += sout[i * V + c];
        A.out[bh * V + c] = s;
    }
}

// The checks both steps make (what: the caller's name); MN_OK when the shapes and options fit the kernel.
static int mn__mesa_step_check(mn_cuda_ctx* ctx, const char* what, const mn_mesa_opts* op, const float* hkk,
                               const float* hkv, size_t K, size_t V, size_t n) {
    if ((K != 64 && K != 128) || V == 0 || V % 4 || K * V > 16384)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "needs Dk in {64, 128}, Dv % 4 == 0 and Dk * Dv <= 16384", __LINE__);
    if (op->solver != MN_MESA_CG)
        return mn__fail(ctx, MN_ERR_CONFIG, what, "the CUDA step solves by CG only", __LINE__);
    if (n == 0) return MN_OK;
    if (((uintptr_t)hkk | (uintptr_t)hkv) % 16) return mn__fail(ctx, MN_ERR_CONFIG, what,
                                                                "hkk and hkv must be 16-byte aligned", __LINE__);
    if (n > 0x7fffffff) return mn__fail(ctx, MN_ERR_CONFIG, what, "B * H beyond the grid", __LINE__);
    return MN_OK;
}
// The arguments both steps share (x0 NULL, warm 0: the plain step's).
static mn__step_args mn__mesa_step_fill(float* out, int* iters, float* hkk, float* hkv, const float* q,
                                        const float* k, const float* v, const float* g, const float* beta,
                                        const float* lamb, size_t H, size_t V, const mn_mesa_opts* op) {
    mn__step_args a;
    memset(&a, 0, sizeof a);
    a.out = out; a.hkk = hkk; a.hkv = hkv; a.iters = iters;
    a.q = q; a.k = k; a.v = v; a.g = g; a.beta = beta; a.lamb = lamb;
    a.H = (unsigned)H; a.V = (unsigned)V;
    a.n_iter = op->cg_iters; a.fla = op->fla; a.jacobi = op->jacobi;
    a.stop = op->cg_tol > 0 ? (float)(op->cg_tol * op->cg_tol) : 1.1920929e-07f * 1.1920929e-07f;
    a.eps = op->fla ? 1e-5f : 0.f;
    return a;
}
// One launch of mn__k_mesa_step<K> over n = B*H blocks (the shared-memory opt-in raised once per size).
static int mn__mesa_step_launch(mn_cuda_ctx* ctx, const mn__step_args& a, size_t K, size_t V, size_t n) {
    if (K == 128) {
        static size_t set = 0;
        size_t smem = mn__step_smem<128>(V);
        if (smem > set) {
            MN__CU(cudaFuncSetAttribute(mn__k_mesa_step<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            set = smem;
        }
        mn__k_mesa_step<128><<<(unsigned)n, 256, smem, MN__STREAM>>>(a);
    } else {
        static size_t set = 0;
        size_t smem = mn__step_smem<64>(V);
        if (smem > set) {
            MN__CU(cudaFuncSetAttribute(mn__k_mesa_step<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            set = smem;
        }
        mn__k_mesa_step<64><<<(unsigned)n, 256, smem, MN__STREAM>>>(a);
    }
    MN__LAUNCHED();
    return MN_OK;
}

int mn_cuda_mesa_step(mn_cuda_ctx* ctx, float* out, int* iters, float* hkk, float* hkv, const float* q, const float* k,
                      const float* v, const float* g, const float* beta, const float* lamb, size_t B, size_t H,
                      size_t Dk, size_t Dv, const mn_mesa_opts* o) {
    mn_mesa_opts tmp;
    const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, n = B * H;
    MN__TRY(mn__mesa_step_check(ctx, "mn_cuda_mesa_step", op, hkk, hkv, K, V, n));
    // the warm starts need the previous solutions: mn_cuda_mesa_step_warm keeps them; refuse, never ignore
    if (op->warm != MN_MESA_COLD) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mesa_step",
                                                  "opts.warm needs the previous solutions: mn_cuda_mesa_step_warm",
                                                  __LINE__);
    if (n == 0) return MN_OK;
    return mn__mesa_step_launch(ctx, mn__mesa_step_fill(out, iters, hkk, hkv, q, k, v, g, beta, lamb, H, V, op), K, V,
                                n);
}

// The step with each head's CG started from its previous solution (mesanet.h's mn_mesa_step_warm): xs (B*H,K) in/out.
int mn_cuda_mesa_step_warm(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv, const float* q,
                           const float* k, const float* v, const float* g, const float* beta, const float* lamb,
                           size_t B, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o) {
    mn_mesa_opts tmp;
    const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, n = B * H;
    MN__TRY(mn__mesa_step_check(ctx, "mn_cuda_mesa_step_warm", op, hkk, hkv, K, V, n));
    if (op->warm < MN_MESA_COLD || op->warm > MN_MESA_WARM_BLEND)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mesa_step_warm", "opts.warm must be MN_MESA_COLD, _WARM, "
                        "_WARM_SCALED or _WARM_BLEND", __LINE__);
    if (n == 0) return MN_OK;
    mn__step_args a = mn__mesa_step_fill(out, iters, hkk, hkv, q, k, v, g, beta, lamb, H, V, op);
    a.xs = xs; a.wmode = xs ? op->warm : 0;
    a.warm = op->warm != MN_MESA_COLD;     // as the CPU: any warm mode measures the stop against ||q_t||
    return mn__mesa_step_launch(ctx, a, K, V, n);
}

// ---- the windowed-Woodbury start (mn_cuda_mesa_step_woodbury; mesanet.h's mn_mesa_step_woodbury) ----
// Unrolled, H_t = sum_j w_j k_j k_j^T with w_j = beta_j exp(sum of the later log-gates); the last r tokens' part
// of it is solved exactly by Woodbury (Lambda diagonal), an r x r system instead of a K x K one:
//   x0 = (Lambda + K_r^T W K_r)^-1 q = Lambda^-1 (q - K_r^T c),  c = (W^-1 + K_r Lambda^-1 K_r^T)^-1 K_r Lambda^-1 q,
// and CG starts there (warm stop: ||r|| <= cg_tol ||q||). The ring of one head is the CPU's, value for value:
// keys (r,K) oldest first, betas (r), log-gates (r), the count n <= r (all zeros: an empty window); a push onto
// a full ring shifts the rows up by one. mn__k_mesa_woodbury: one block (256 threads) per (sequence, head):
//   1. the window after the push into shared memory (row j from old row j + drop, the new token last), a
//      barrier, then the whole window back to the ring: no thread writes a row another has still to read;
//   2. thread 0: the weights newest to oldest in double (an underflowed one, w <= 1e-300, is left out as the
//      CPU leaves it: 1/w would be infinite), the rows used in that order (newest first, as the CPU's G);
//   3. the Gram matrix G = W^-1 + K_r Lambda^-1 K_r^T (lower half) and K_r Lambda^-1 q in double, one warp
//      per entry (lanes over K, a butterfly sum);
//   4. warp 0: G = L L^T column by column in the CPU's order (lanes over the rows below the diagonal), lane 0
//      the two triangular solves; a pivot <= 0 (rounding only: G is SPD) means no start;
//   5. x0 = (q - K_r^T c) / lambda (thread per entry) and the head's flag (1; 0: no usable window, the step
//      then starts at the Jacobi guess of the UPDATED H_t, which only the step kernel sees, as the CPU does).
#define MN__WB_MAX 32      // the longest window (mesanet.h's MN__MESA_WINDOW_MAX; the shared arrays' size)
#define MN__WB_KMAX 128    // the largest head (the step's Dk)
size_t mn_cuda_mesa_ring_slot(size_t Dk, size_t r) { return r * (Dk + 2) + 1; }
size_t mn_cuda_mesa_ring_size(size_t B, size_t H, size_t Dk, size_t r) {
    return r ? B * H * (mn_cuda_mesa_ring_slot(Dk, r) + Dk + 1) : 0;   // the rings, then x0 (B*H,Dk), flags (B*H)
}
__global__ void __launch_bounds__(256) mn__k_mesa_woodbury(float* ring, const float* q, const float* k,
                                                          const float* g, const float* beta, const float* lamb,
                                                          unsigned H, int K, int r) {
    __shared__ float sK[MN__WB_MAX * MN__WB_KMAX];        // (r,K) the window's keys after the push
    __shared__ float sb[MN__WB_MAX], slg[MN__WB_MAX];     // (r) its betas and log-gates
    __shared__ double sG[MN__WB_MAX * MN__WB_MAX];        // (m,m) G, then its Cholesky factor L (lower)
    __shared__ double sc[MN__WB_MAX], siw[MN__WB_MAX];    // (m) K_r z, then c = G^-1 K_r z; 1 / w
    __shared__ double sil[MN__WB_KMAX], sqd[MN__WB_KMAX]; // (K) 1 / lambda, q
    __shared__ int suse[MN__WB_MAX], sm, sok;             // the rows used (newest first), their count; factored
    const size_t bh = blockIdx.x, nbh = gridDim.x, h = bh % H, R = (size_t)r, slot = R * (K + 2) + 1;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    float* rg = ring + bh * slot;                          // (slot) this head's ring
    float* x0 = ring + nbh * slot + bh * K;                // (K) its start
    float* flag = ring + nbh * slot + nbh * K + bh;        // (1)
    const float cf = rg[R * (K + 2)];
    int n = cf >= 1.f ? (int)cf : 0;                       // the stored count (a corrupt one clamped to [0, r])
    if (n > r) n = r;
    const int drop = n == r, n1 = n - drop + 1;            // full: the oldest row leaves; n1 rows after the push
    // 1. the new window into shared memory, then back (the barrier orders every read of the old ring first)
    for (int i = tid; i < (n1 - 1) * K; i += 256) sK[i] = rg[(size_t)drop * K + i];
    for (int i = tid; i < K; i += 256) {
        sK[(size_t)(n1 - 1) * K + i] = k[bh * K + i];
        sil[i] = 1.0 / (double)lamb[h * K + i];
        sqd[i] = q[bh * K + i];
    }
    if (tid < n1 - 1) { sb[tid] = rg[R * K + drop + tid]; slg[tid] = rg[R * K + R + drop + tid]; }
    if (tid == 0) { sb[n1 - 1] = beta[bh]; slg[n1 - 1] = g[bh]; }
    __syncthreads();
    for (int i = tid; i < n1 * K; i += 256) rg[i] = sK[i];
    if (tid < n1) { rg[R * K + tid] = sb[tid]; rg[R * K + R + tid] = slg[tid]; }
    if (tid == 0) rg[R * (K + 2)] = (float)n1;
    // 2. the weights, newest to oldest: w_j = beta_j exp(the log-gates after j)
    if (tid == 0) {
        double acc = 0;
        int m = 0;
        for (int j = n1 - 1; j >= 0; j--) {
            const double wj = (double)sb[j] * exp(acc);
            acc += (double)slg[j];
            if (wj > 1e-300) { suse[m] = j; siw[m++] = 1.0 / wj; }
        }
        sm = m;
    }
    __syncthreads();
    const int m = sm;
    // 3. entry (a, b <= a) of G, or with b = m entry a of K_r Lambda^-1 q: warp w takes e = w, w + 8, ...
    for (int e = w; e < m * (m + 1); e += 8) {
        const int a = e / (m + 1), b = e % (m + 1);
        if (b > a && b < m) continue;                      // the upper half (warp-uniform): G is symmetric
        const float* ka = sK + (size_t)suse[a] * K;        // (K)
        const float* kb = sK + (size_t)suse[b < m ? b : a] * K;
        double s = 0;
        for (int p = lane; p < K; p += 32) s += (double)ka[p] * (b < m ? (double)kb[p] : sqd[p]) * sil[p];
#pragma unroll
        for (int o = 16; o >= 1; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) {
            if (b < m) sG[a * m + b] = s + (a == b ? siw[a] : 0.0);
            else sc[a] = s;
        }
    }
    __syncthreads();
    // 4. Cholesky, column b: every lane forms the pivot in the same order (so all agree on it and on a failure),
    // lanes take the rows below it; then lane 0 solves L u = K_r z and L^T c = u in place in sc
    if (w == 0) {
        int ok = m > 0;
        for (int b = 0; b < m && ok; b++) {
            double d = sG[b * m + b];
            for (int p = 0; p < b; p++) d -= sG[b * m + p] * sG[b * m + p];
            if (!(d > 0)) { ok = 0; break; }
            d = sqrt(d);
            for (int a = b + 1 + lane; a < m; a += 32) {
                double s = sG[a * m + b];
                for (int p = 0; p < b; p++) s -= sG[a * m + p] * sG[b * m + p];
                sG[a * m + b] = s / d;
            }
            __syncwarp();                                  // every lane has read the old diagonal entry
            if (lane == 0) sG[b * m + b] = d;
            __syncwarp();                                  // column b complete before column b + 1 reads it
        }
        if (lane == 0 && ok) {
            for (int a = 0; a < m; a++) {
                double s = sc[a];
                for (int p = 0; p < a; p++) s -= sG[a * m + p] * sc[p];
                sc[a] = s / sG[a * m + a];
            }
            for (int a = m - 1; a >= 0; a--) {
                double s = sc[a];
                for (int p = a + 1; p < m; p++) s -= sG[p * m + a] * sc[p];
                sc[a] = s / sG[a * m + a];
            }
        }
        if (lane == 0) sok = ok;
    }
    __syncthreads();
    // 5. x0 = Lambda^-1 (q - K_r^T c), and the flag the step kernel reads
    if (sok)
        for (int p = tid; p < K; p += 256) {
            double s = sqd[p];
            for (int a = 0; a < m; a++) s -= (double)sK[(size_t)suse[a] * K + p] * sc[a];
            x0[p] = (float)(s / (double)lamb[h * K + p]);
        }
    if (tid == 0) *flag = sok ? 1.f : 0.f;
}

int mn_cuda_mesa_step_woodbury(mn_cuda_ctx* ctx, float* out, int* iters, float* hkk, float* hkv, float* ring,
                               const float* q, const float* k, const float* v, const float* g, const float* beta,
                               const float* lamb, size_t B, size_t H, size_t Dk, size_t Dv, size_t r,
                               const mn_mesa_opts* o) {
    mn_mesa_opts tmp;
    const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, n = B * H;
    MN__TRY(mn__mesa_step_check(ctx, "mn_cuda_mesa_step_woodbury", op, hkk, hkv, K, V, n));
    if (r > MN__WB_MAX) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mesa_step_woodbury", "needs r <= 32", __LINE__);
    if (r && !ring) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mesa_step_woodbury", "needs the ring", __LINE__);
    if (n == 0) return MN_OK;
    // as the CPU: the warm stop (against ||q_t||) and the Jacobi guess where a head has no start, whatever o says
    mn__step_args a = mn__mesa_step_fill(out, iters, hkk, hkv, q, k, v, g, beta, lamb, H, V, op);
    a.jacobi = 1; a.warm = 1;
    if (r) {                                               // r = 0: no window, every head at the Jacobi guess
        mn__k_mesa_woodbury<<<(unsigned)n, 256, 0, MN__STREAM>>>(ring, q, k, g, beta, lamb, (unsigned)H, (int)K,
                                                                 (int)r);
        MN__LAUNCHED();
        a.x0 = ring + n * mn_cuda_mesa_ring_slot(K, r);
    }
    return mn__mesa_step_launch(ctx, a, K, V, n);
}

// ---- tested alternatives ---------------------------------------------------------------------
// Each computes what a default kernel above computes; the tests run each beside the default, and
// the settings below select them (bench_cuda times them):
//   mn__k_mesa_scan       the FFMA state scan: ctx->mesa_scan = MN_CUDA_SCAN_FFMA (the plain-TF32 scan,
//                         MN_CUDA_SCAN_TF32, is the tensor-core kernel above without the hi/lo split)
//   mn__cg_apply_mma,     the CG kernel's products and loads on mma.sync: always with Dk = 64, and with
//   mn__cg_load_mma,      ctx->mesa_cg = MN_CUDA_CG_MMA at Dk = 128
//   mn__load_f16_scaled
//   mn__mesa_backward_cublas  the unfused backward (packing, cuBLAS products in fp32 or TF32 by
//                         ctx->math, row kernels): whenever the fused wgmma backward does not apply
//                         (Dk = 64, or ctx->mesa_cg = MN_CUDA_CG_MMA)

// The FFMA state scan (ctx->mesa_scan = MN_CUDA_SCAN_FFMA; exact fp32 on the FMA units, the
// reference for the tensor-core scans): one block (256 threads) owns a 64 x 64 tile of the state,
// in registers (4 x 4 per thread); the next chunk's two 64 x 64 input tiles are prefetched into
// registers while the current one is multiplied.
template <bool REV>
__global__ void __launch_bounds__(256, 2) mn__k_mesa_scan(mn__scan_job j0, mn__scan_job j1, const float* w, float wsign,
                                                          const float* GamC, unsigned B, unsigned H, unsigned T,
                                                          int K) {
    __shared__ __align__(16) float sY[MN__MC][64], sZ[MN__MC][64];
    const mn__scan_job J = blockIdx.z ? j1 : j0;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4, N = J.N;
    const int r0 = (int)(blockIdx.x / (N / 64)) * 64, c0 = (int)(blockIdx.x % (N / 64)) * 64;
    const size_t bh = blockIdx.y, b = bh / H, h = bh % H, BH = (size_t)B * H, NC = (T + MN__MC - 1) / MN__MC,
        E = (size_t)K * N;
    const size_t base = bh * E + (size_t)(r0 + 4 * ty) * N + c0 + 4 * tx;   // this thread's 4 x 4 block, first row
    float acc[4][4];
    float4 py[4], pz[4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = J.init ? J.init[base + (size_t)i * N + j] : 0.f;
    // the tiles of chunk n into registers: rows a = idx / 16, 4 columns at (idx % 16) * 4
    auto fetch = [&](size_t n) {
        for (int m = 0; m < 4; m++) {
            int idx = tid + 256 * m, a = idx >> 4, c4 = (idx & 15) * 4;
            size_t t = n * MN__MC + a;
            if (t < T) {
                float s = wsign * w[(n * BH + bh) * MN__MC + a];
                float4 y = *(const float4*)(mn__row(J.Y, b, h, n, a) + r0 + c4),
                       z = *(const float4*)(mn__row(J.Z, b, h, n, a) + c0 + c4);
                py[m] = make_float4(s * y.x, s * y.y, s * y.z, s * y.w); pz[m] = z;
            } else {
                py[m] = pz[m] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
        }
    };
    auto store = [&](float* dst) {
        for (int i = 0; i < 4; i++) *(float4*)(dst + base + (size_t)i * N) = make_float4(acc[i][0], acc[i][1],
                acc[i][2], acc[i][3]);
    };
    // one chunk: acc = GamC_n acc + (w Y)^T Z over its 64 rows
    auto step = [&](size_t n, long nnext) {
        for (int m = 0; m < 4; m++) {
            int idx = tid + 256 * m, a = idx >> 4, c4 = (idx & 15) * 4;
            *(float4*)&sY[a][c4] = py[m]; *(float4*)&sZ[a][c4] = pz[m];
        }
        __syncthreads();
        if (nnext >= 0) fetch((size_t)nnext);
        float gc = GamC[n * BH + bh];
        for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] *= gc;
#pragma unroll 8
        for (int a = 0; a < MN__MC; a++) {
            float4 y = *(const float4*)&sY[a][4 * ty], z = *(const float4*)&sZ[a][4 * tx];
            float yy[4] = { y.x, y.y, y.z, y.w }, zz[4] = { z.x, z.y, z.z, z.w };
            for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] += yy[i] * zz[j];
        }
        __syncthreads();
    };
    if (!REV) {
        fetch(0);
        for (size_t n = 0; n < NC; n++) {
            store(J.S + n * BH * E);
            step(n, n + 1 < NC ? (long)(n + 1) : -1);
        }
        store(J.S + NC * BH * E);
    } else {
        size_t last = J.out0 ? 0 : 1;       // chunk 0 only feeds the initial-state gradient
        store(J.S + (NC - 1) * BH * E);
        if (NC - 1 >= last) fetch(NC - 1);
        for (size_t n = NC - 1; n >= last && n < NC; n--) {
            step(n, n > last ? (long)(n - 1) : -1);
            if (n >= 1) store(J.S + (n - 1) * BH * E);
            else for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) J.out0[base + (size_t)i * N + j] += acc[i][j];
        }
    }
}
static int mn__mesa_scan_ffma(mn_cuda_ctx* ctx, int reverse, dim3 grid, const mn__scan_job& j0, const mn__scan_job& j1,
                              const float* w, float wsign, const float* GamC, size_t B, size_t T, size_t H, size_t K) {
    if (reverse)
        mn__k_mesa_scan<true><<<grid, 256, 0, MN__STREAM>>>(j0, j1, w, wsign, GamC, (unsigned)B, (unsigned)H,
                                                            (unsigned)T, (int)K);
    else
        mn__k_mesa_scan<false><<<grid, 256, 0, MN__STREAM>>>(j0, j1, w, wsign, GamC, (unsigned)B, (unsigned)H,
                                                             (unsigned)T, (int)K);
    MN__LAUNCHED();
    return MN_OK;
}

// GEMM1: sS (C,C) = fp16((A Kc^T) . M), A (C,K) and Kc (C,K) fp16 in smem, M fp32 in smem.
template <int K>
__device__ __forceinline__ void mn__cg_gemm1(__half* sS, const __half* sA, const __half* sK, const float* sM, int wm,
                                             int wn, int lane) {
    constexpr int SK = K + 8, SC = MN__MC + 8;
    const int qc = (lane & 3) * 2, r0 = 16 * wm + (lane >> 2), r1 = r0 + 8;
    float c1[4][4];
#pragma unroll
    for (int t = 0; t < 4; t++) { c1[t][0] = c1[t][1] = c1[t][2] = c1[t][3] = 0.f; }
#pragma unroll
    for (int ks = 0; ks < K / 16; ks++) {
        uint32_t af[4], bf[4];
        mn__ldsm4(af, mn__a_addr(sA, SK, 16 * wm, 16 * ks, lane));
#pragma unroll
        for (int np = 0; np < 2; np++) {
            mn__ldsm4(bf, mn__bn_addr(sK, SK, 32 * wn + 16 * np, 16 * ks, lane));
            mn__mma(c1[2 * np], af, bf[0], bf[1]);
            mn__mma(c1[2 * np + 1], af, bf[2], bf[3]);
        }
    }
#pragma unroll
    for (int t = 0; t < 4; t++) {
        int col = 32 * wn + 8 * t + qc;
        float2 m0 = *(const float2*)&sM[r0 * SC + col], m1 = *(const float2*)&sM[r1 * SC + col];
        *(__half2*)&sS[r0 * SC + col] = __floats2half2_rn(c1[t][0] * m0.x, c1[t][1] * m0.y);
        *(__half2*)&sS[r1 * SC + col] = __floats2half2_rn(c1[t][2] * m1.x, c1[t][3] * m1.y);
    }
}
// acc (C,K in the AP layout) += A (C,KD; fp16, row stride lda) B (KD,K; fp16 k-major, stride ldb)
template <int K, int KD>
__device__ __forceinline__ void mn__cg_gemm_acc(float (&acc)[K / 16][4], const __half* sA, int lda, const __half* sB,
                                                int ldb, int wm, int wn, int lane) {
    constexpr int NT = K / 16, KH = K / 2;
#pragma unroll
    for (int ks = 0; ks < KD / 16; ks++) {
        uint32_t af[4], bf[4];
        mn__ldsm4(af, mn__a_addr(sA, lda, 16 * wm, 16 * ks, lane));
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            mn__ldsm4t(bf, mn__bk_addr(sB, ldb, 16 * ks, KH * wn + 16 * np, lane));
            mn__mma(acc[2 * np], af, bf[0], bf[1]);
            mn__mma(acc[2 * np + 1], af, bf[2], bf[3]);
        }
    }
}

// mma.sync form of mn__cg_apply: P, Kc, B3, B2 row-major with padded strides (K + 8), S1 = P Kc^T
// through shared memory (sS); each warp reads its own B fragments (ldmatrix).
template <int K>
__device__ __forceinline__ void mn__cg_apply_mma(float (&acc)[K / 16][4], const __half* sP, const __half* sK,
                                                 const __half* sB3, const __half* sB2, __half* sS, const float* sM,
                                                 float g0, float g1, int wm, int wn, int lane) {
    constexpr int C = MN__MC, SK = K + 8, SC = C + 8, NT = K / 16;
#pragma unroll
    for (int j = 0; j < NT; j++) { acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f; }
    mn__cg_gemm1<K>(sS, sP, sK, sM, wm, wn, lane);          // S1 = P Kc^T, times M
    mn__cg_gemm_acc<K, K>(acc, sP, SK, sB3, SK, wm, wn, lane);  // P B3
#pragma unroll
    for (int j = 0; j < NT; j++) { acc[j][0] *= g0; acc[j][1] *= g0; acc[j][2] *= g1; acc[j][3] *= g1; }
    __syncthreads();                              // sS complete
    mn__cg_gemm_acc<K, C>(acc, sS, SC, sB2, SK, wm, wn, lane);  // += (S1 . M) B2
}

// mma.sync form of the CG kernel's chunk load: Kc to fp16 (row-major, stride K + 8), H_n times hs
// (misc[0], written by warp 0 before the barrier below) to fp16. All threads of the block.
template <int K>
__device__ __forceinline__ void mn__cg_load_mma(__half* sK, __half* sH, const float* Hg, const mn__rows& kk,
                                                size_t b, size_t h, size_t n, unsigned T, bool solve,
                                                const float* misc) {
    constexpr int C = MN__MC, SK = K + 8;
    const int tid = threadIdx.x;
#pragma unroll
    for (int idx = tid; idx < C * K / 4; idx += 256) {
        int row = idx / (K / 4), col = (idx % (K / 4)) * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (kk.all || n * C + row < T) v = *(const float4*)(mn__row(kk, b, h, n, row) + col);
        *(__half2*)&sK[row * SK + col] = __floats2half2_rn(v.x, v.y);
        *(__half2*)&sK[row * SK + col + 2] = __floats2half2_rn(v.z, v.w);
    }
    __syncthreads();
    const float hs = misc[0];
#pragma unroll 8
    for (int idx = tid; idx < K * K / 4 && solve; idx += 256) {
        float4 v = ((const float4*)Hg)[idx];
        int row = idx / (K / 4), col = (idx % (K / 4)) * 4;
        *(__half2*)&sH[row * SK + col] = __floats2half2_rn(v.x * hs, v.y * hs);
        *(__half2*)&sH[row * SK + col + 2] = __floats2half2_rn(v.z * hs, v.w * hs);
    }
}

// Loads rows x cols (cols % 4 == 0) fp32 from global (row i at src + i * lds, or from token rows
// of chunk (b,h,n) when tok != NULL) into fp16 smem (stride ld), times a power of two that brings
// the largest |entry| to <= 1: two passes over the source (the second from L2). Returns the scale.
// red8: 8 floats of shared scratch. All threads of the block must call it.
__device__ float mn__load_f16_scaled(__half* dst, int ld, const float* src, size_t lds, const mn__rows* tok, size_t b,
                                     size_t h, size_t n, unsigned T, int rows, int cols, float* red8) {
    const int tid = threadIdx.x;
    float mx = 0.f;
#pragma unroll 8
    for (int idx = tid; idx < rows * cols / 4; idx += 256) {
        int row = idx / (cols / 4), col = (idx % (cols / 4)) * 4;
        if (tok && n * MN__MC + row >= T) continue;
        float4 v = *(const float4*)((tok ? mn__row(*tok, b, h, n, row) : src + row * lds) + col);
        mx = fmaxf(mx, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    mx = mn__warp_max(mx);
    if ((tid & 31) == 0) red8[tid >> 5] = mx;
    __syncthreads();
    mx = red8[0];
    for (int i = 1; i < 8; i++) mx = fmaxf(mx, red8[i]);
    const float sc = mn__mscale(mx);
#pragma unroll 8
    for (int idx = tid; idx < rows * cols / 4; idx += 256) {
        int row = idx / (cols / 4), col = (idx % (cols / 4)) * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (!tok || n * MN__MC + row < T)
            v = *(const float4*)((tok ? mn__row(*tok, b, h, n, row) : src + row * lds) + col);
        *(__half2*)&dst[row * ld + col] = __floats2half2_rn(v.x * sc, v.y * sc);
        *(__half2*)&dst[row * ld + col + 2] = __floats2half2_rn(v.z * sc, v.w * sc);
    }
    __syncthreads();                                  // red8 free again, dst complete
    return sc;
}

// The cuBLAS backward's row kernels (one block of 256 threads per chunk; C = 64).
// B2, rows and columns. On entry Sx = X Kc^T, Do = dO Vc^T, Xb = dO S_n^T. forward: o_a = Gam_a
// S_n^T x_a + sum_{j<=a} M[a,j] (x_a.k_j) v_j with M[a,j] = exp(b_a - b_j) beta_j, so with
// E = Sx . M . Do (dM[a,j]/db_a = M, dM/db_j = -M):
//   db_a = Gam_a x_a.Xb_a + sum_{j<=a} E[a,j] - sum_{a'>=a} E[a',a]
// then Xb <- diag(Gam) Xb, Do <- Do . M, DoMp = Do . Mp, Sx <- Sx . M (kept for dv and B5).
__global__ void mn__k_mesa_b2a(float* db, float* Xb, float* Sx, float* Do, float* DoMp, const float* M, const float* Mp,
                               const float* Xp, const float* Gam, int K) {
    __shared__ float sr[MN__MC], sc[MN__MC];
    const size_t i = blockIdx.x, cc = i * MN__MC * MN__MC, ck = i * MN__MC * K;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int a = warp; a < MN__MC; a += 8) {
        float s = 0.f, e = 0.f;
        for (int k = lane; k < K; k += 32) s += Xp[ck + a * K + k] * Xb[ck + a * K + k];
        for (int j = lane; j <= a;
             j += 32) e += Sx[cc + a * MN__MC + j] * M[cc + a * MN__MC + j] * Do[cc + a * MN__MC + j];
        s = mn__warp_sum(s); e = mn__warp_sum(e);
        if (lane == 0) sr[a] = Gam[i * MN__MC + a] * s + e;
    }
    if (tid < MN__MC) {
        float e = 0.f;
        for (int a = tid; a < MN__MC;
             a++) e += Sx[cc + a * MN__MC + tid] * M[cc + a * MN__MC + tid] * Do[cc + a * MN__MC + tid];
        sc[tid] = e;
    }
    __syncthreads();                                   // every sum has read the originals
    if (tid < MN__MC) db[i * MN__MC + tid] = sr[tid] - sc[tid];
    for (int idx = tid; idx < MN__MC * MN__MC; idx += 256) {
        float d = Do[cc + idx], m = M[cc + idx];
        DoMp[cc + idx] = d * Mp[cc + idx]; Do[cc + idx] = d * m; Sx[cc + idx] *= m;
    }
    for (int idx = tid; idx < MN__MC * K; idx += 256) Xb[ck + idx] *= Gam[i * MN__MC + idx / K];
}
// The chunk's last decay-gradient terms and dg: db[C-1] += last, then dg_t += sum_{s>=t} db_s.
__device__ void mn__mesa_db_finish(float* dgp, float* sdb, const float* sw, float last, size_t i) {
    mn__mesa_db_revcum(sdb, sw, last);
    for (int a = 0; a < MN__MC; a++) dgp[i * MN__MC + a] += sdb[a];
}
// B2, the rest. On entry tk = (Do . Mp)^T X, tq = Vc dSe^T, tv = Kc dSe (dSe: gradient of the state
// at the chunk END). With dKb the gradient w.r.t. beta_j k_j in S's update:
//   dKb = tk + diag(e) tq: dbeta += dKb.k, dk += beta dKb ; dv += diag(e beta) tv ;
//   w_a = e_a beta_a (tv_a.v_a): db_a -= w_a, db_last += sum w + GamC <S_n, dSe> ; dg += revcumsum(db)
__global__ void mn__k_mesa_b2b(float* dKp, float* dVp, float* dbp, float* dgp, const float* db, const float* tk,
                               const float* tq, const float* tv,
                               const float* Kp, const float* Vp, const float* bp, const float* e, const float* eb,
                               const float* GamC, const float* Ss, const float* dSe, int K, int V) {
    __shared__ float sdb[MN__MC], sw[MN__MC], sh[32];
    const size_t i = blockIdx.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int a = warp; a < MN__MC; a += 8) {
        size_t ra = i * MN__MC + a, rk = ra * K, rv = ra * V;
        float ea = e[ra], be = bp[ra], eba = eb[ra], s = 0.f, wv = 0.f;
        for (int k = lane; k < K; k += 32) {
            float d = tk[rk + k] + ea * tq[rk + k];
            s += d * Kp[rk + k];
            dKp[rk + k] += be * d;
        }
        for (int v = lane; v < V; v += 32) { float t = tv[rv + v]; wv += t * Vp[rv + v]; dVp[rv + v] += eba * t; }
        s = mn__warp_sum(s); wv = mn__warp_sum(wv);
        if (lane == 0) { dbp[ra] += s; sw[a] = eba * wv; sdb[a] = db[ra] - eba * wv; }
    }
    float f = 0.f;
    const float *S = Ss + i * (size_t)K * V, *G = dSe + i * (size_t)K * V;
    for (int idx = tid; idx < K * V; idx += 256) f += S[idx] * G[idx];
    f = mn__block_sum(f, sh);                          // its barriers also publish sdb, sw
    if (tid == 0) mn__mesa_db_finish(dgp, sdb, sw, GamC[i] * f, i);
}
// B5, rows and columns. On entry SxM = Sx . M (from B2), Dq = dQ Kc^T, tk = X H_n^T. forward: H's
// read-out enters through A_t x = q, dL/dH_t = -dq_t x_t^T, so with E' = -SxM . Dq:
//   db_a = sum_{j<=a} E'[a,j] - sum_{a'>=a} E'[a',a] - Gam_a dq_a.(H_n x_a) ;
//   lp (this chunk's dlambda) = -colsum(dQ . X) ; then Dq <- -Dq . Mp.
__global__ void mn__k_mesa_b5a(float* db, float* lp, float* Dq, const float* SxM, const float* Mp, const float* dQ,
                               const float* Xp, const float* tk, const float* Gam, int K) {
    __shared__ float sr[MN__MC], sc[MN__MC];
    const size_t i = blockIdx.x, cc = i * MN__MC * MN__MC, ck = i * MN__MC * K;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int a = warp; a < MN__MC; a += 8) {
        float s = 0.f, e = 0.f;
        for (int k = lane; k < K; k += 32) s += dQ[ck + a * K + k] * tk[ck + a * K + k];
        for (int j = lane; j <= a; j += 32) e -= SxM[cc + a * MN__MC + j] * Dq[cc + a * MN__MC + j];
        s = mn__warp_sum(s); e = mn__warp_sum(e);
        if (lane == 0) sr[a] = e - Gam[i * MN__MC + a] * s;
    }
    if (tid < MN__MC) {
        float e = 0.f;
        for (int a = tid; a < MN__MC; a++) e -= SxM[cc + a * MN__MC + tid] * Dq[cc + a * MN__MC + tid];
        sc[tid] = e;
    }
    for (int k = tid; k < K; k += 256) {
        float s = 0.f;
        for (int a = 0; a < MN__MC; a++) s += dQ[ck + a * K + k] * Xp[ck + a * K + k];
        lp[i * K + k] = -s;
    }
    __syncthreads();
    if (tid < MN__MC) db[i * MN__MC + tid] = sr[tid] - sc[tid];
    for (int idx = tid; idx < MN__MC * MN__MC; idx += 256) Dq[cc + idx] = -Dq[cc + idx] * Mp[cc + idx];
}
// B5, the rest. On entry tk = (-Dq . Mp)^T X, t2 = Kc dHe^T, t3 = -(SxM)^T dQ, t4 = Kc dHe:
//   dKb = tk + diag(e) t2 (k in the "key" slot of beta k k^T): dbeta += dKb.k, dk += beta dKb ;
//   dk += t3 + diag(e beta) t4 (k in the "value" slot) ; w'_a = e_a beta_a (t4_a.k_a): db_a -= w'_a,
//   db_last += sum w' + GamC <H_n, dHe> ; dg += revcumsum(db)
__global__ void mn__k_mesa_b5b(float* dKp, float* dbp, float* dgp, const float* db, const float* tk, const float* t2,
                               const float* t3, const float* t4,
                               const float* Kp, const float* bp, const float* e, const float* eb, const float* GamC,
                               const float* Hs, const float* dHe, int K) {
    __shared__ float sdb[MN__MC], sw[MN__MC], sh[32];
    const size_t i = blockIdx.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int a = warp; a < MN__MC; a += 8) {
        size_t ra = i * MN__MC + a, rk = ra * K;
        float ea = e[ra], be = bp[ra], eba = eb[ra], s = 0.f, wv = 0.f;
        for (int k = lane; k < K; k += 32) {
            float kk = Kp[rk + k], d = tk[rk + k] + ea * t2[rk + k];
            s += d * kk; wv += t4[rk + k] * kk;
            dKp[rk + k] += be * d + t3[rk + k] + eba * t4[rk + k];
        }
        s = mn__warp_sum(s); wv = mn__warp_sum(wv);
        if (lane == 0) { dbp[ra] += s; sw[a] = eba * wv; sdb[a] = db[ra] - eba * wv; }
    }
    float f = 0.f;
    const float *Hn = Hs + i * (size_t)K * K, *G = dHe + i * (size_t)K * K;
    for (int idx = tid; idx < K * K; idx += 256) f += Hn[idx] * G[idx];
    f = mn__block_sum(f, sh);
    if (tid == 0) mn__mesa_db_finish(dgp, sdb, sw, GamC[i] * f, i);
}
// dst (NC,B*H,C,D) <- src (B,T,H,D); rows past T are zero
__global__ void mn__k_pack(float* dst, const float* src, size_t B, size_t T, size_t H, size_t D, size_t NC) {
    size_t BH = B * H;
    MN__FOR(i, NC * BH * MN__MC * D) {
        size_t d = i % D, r = i / D, a = r % MN__MC, ch = r / MN__MC, bh = ch % BH, n = ch / BH, t = n * MN__MC + a;
        dst[i] = t < T ? src[(((bh / H) * T + t) * H + bh % H) * D + d] : 0.f;
    }
}
// dst (B,T,H,D) (+)= src (NC,B*H,C,D)
__global__ void mn__k_unpack(float* dst, const float* src, size_t B, size_t T, size_t H, size_t D, int accumulate) {
    size_t BH = B * H;
    MN__FOR(i, B * T * H * D) {
        size_t d = i % D, r = i / D, h = r % H, bt = r / H, t = bt % T, b = bt / T;
        float s = src[(((t / MN__MC) * BH + b * H + h) * MN__MC + t % MN__MC) * D + d];
        dst[i] = accumulate ? dst[i] + s : s;
    }
}
// The same with 16-byte accesses and 32-bit index arithmetic (D % 4 == 0 and every index < 2^32):
// 64-bit divisions dominated the generic kernels (1.6 TB/s measured at the anchor shape).
__global__ void mn__k_pack4(float4* dst, const float4* src, unsigned BH, unsigned H, unsigned T, unsigned D4,
                            unsigned total) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        unsigned d = i % D4, r = i / D4, a = r % MN__MC, ch = r / MN__MC, bh = ch % BH, n = ch / BH, t = n * MN__MC + a;
        dst[i] = t < T ? src[(((bh / H) * T + t) * H + bh % H) * D4 + d] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
}
__global__ void mn__k_unpack4(float4* dst, const float4* src, unsigned BH, unsigned H, unsigned T, unsigned D4,
                              unsigned total, int accumulate) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        unsigned d = i % D4, r = i / D4, h = r % H, bt = r / H, t = bt % T, b = bt / T;
        float4 s = src[(((t / MN__MC) * BH + b * H + h) * MN__MC + t % MN__MC) * D4 + d];
        if (accumulate) { float4 o = dst[i]; s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w; }
        dst[i] = s;
    }
}
static int mn__pack(mn_cuda_ctx* ctx, float* dst, const float* src, size_t B, size_t T, size_t H, size_t D) {
    size_t NC = (T + MN__MC - 1) / MN__MC, n = NC * B * H * MN__MC * D;
    if (D % 4 == 0 && n / 4 < 0x7fffffffu && B * T * H * D / 4 < 0x7fffffffu) {   // i + stride stays < 2^32
        mn__k_pack4<<<mn__grid(ctx, n / 4, 256), 256, 0, MN__STREAM>>>((float4*)dst, (const float4*)src,
                                                                       (unsigned)(B * H), (unsigned)H, (unsigned)T,
                                                                       (unsigned)(D / 4), (unsigned)(n / 4));
    } else {
        mn__k_pack<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(dst, src, B, T, H, D, NC);
    }
    MN__LAUNCHED();
    return MN_OK;
}
static int mn__unpack(mn_cuda_ctx* ctx, float* dst, const float* src, size_t B, size_t T, size_t H, size_t D,
                      int accumulate) {
    size_t NC = (T + MN__MC - 1) / MN__MC, n = B * T * H * D;
    if (D % 4 == 0 && n / 4 < 0x7fffffffu && NC * B * H * MN__MC * D / 4 < 0x7fffffffu) {
        mn__k_unpack4<<<mn__grid(ctx, n / 4, 256), 256, 0, MN__STREAM>>>((float4*)dst, (const float4*)src,
                                                                         (unsigned)(B * H), (unsigned)H, (unsigned)T,
                                                                         (unsigned)(D / 4), (unsigned)(n / 4),
                                                                         accumulate);
    } else {
        mn__k_unpack<<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(dst, src, B, T, H, D, accumulate);
    }
    MN__LAUNCHED();
    return MN_OK;
}

// The cuBLAS backward: every shape the fused one does not take (Dk = 64, or ctx->mesa_cg =
// MN_CUDA_CG_MMA). Inputs PACKED chunk-major, (NC, B*H, C, D) with chunk i = n*B*H + b*H + h and the
// tail of the last chunk zero-filled; the per-chunk products as strided-batched cuBLAS calls over
// all NC*B*H chunks at once (fp32 or TF32 by ctx->math), plus the row kernels above; the gradients
// unpacked into the caller's (B,T,H,.) layout at the end, accumulating.
static int mn__mesa_backward_cublas(mn_cuda_ctx* ctx, const mn__mesa_ws* wp, float* dq, float* dk, float* dv, float* dg,
                                    float* dbeta, float* dlamb, float* dhkk0, float* dhkv0, const float* dout,
                                    const float* dhkk, const float* dhkv, const float* xs, const float* k,
                                    const float* v, const float* lamb, const float* hkk0, const float* hkv0,
                                    size_t B, size_t T, size_t H, size_t K, size_t V, const mn_mesa_opts* op,
                                    int keep) {
    const mn__mesa_ws& w = *wp;
    const size_t C = MN__MC, NC = (T + C - 1) / C, NCH = NC * B * H;
    float* dOp;
    dOp = w.Qp;                                                            // q is not needed: its slot holds dout
    mn__rows Kr = mn__rows_packed(w.Kp, B, H, K), Vr = mn__rows_packed(w.Vp, B, H, V), Xr = mn__rows_packed(w.Xp, B, H,
            K);
    mn__rows dOr = mn__rows_packed(dOp, B, H, V), dQr = mn__rows_packed(w.dQ, B, H, K);
    MN__TRY(mn__pack(ctx, w.Kp, k, B, T, H, K));
    MN__TRY(mn__pack(ctx, w.Vp, v, B, T, H, V));
    MN__TRY(mn__pack(ctx, w.Xp, xs, B, T, H, K));
    MN__TRY(mn__pack(ctx, dOp, dout, B, T, H, V));
    MN__CU(cudaMemsetAsync(w.dKp, 0, NCH * C * K * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(w.dVp, 0, NCH * C * V * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(w.dbp, 0, NCH * C * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(w.dgp, 0, NCH * C * sizeof(float), MN__STREAM));
    // B0: chunk-start states
    if (!keep) MN__TRY(mn__mesa_states(ctx, wp, hkk0, hkv0, Kr, Vr, B, T, H, K, V));
    // B1: dSe_{n-1} = GamC dSe_n + (diag(Gam) X)^T dO  (o_a = Gam_a S_n^T x_a + ...); dS_0 into dhkv0
    {
        mn__scan_job j = { w.dSe, dhkv, dhkv0, Xr, dOr, (int)V };
        MN__TRY(mn__mesa_scan(ctx, 1, &j, NULL, w.Gam, 1.f, w.GamC, B, T, H, K));
    }
    // B2: xbar = diag(Gam) dO S_n^T + (Do . M) Kc, dv, and the kv part of dk, dbeta, dg
    // Sx = X Kc^T
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, K, 1.f, w.Xp, K, C * K, w.Kp, K, C * K, 0.f, w.A1, C, C * C, NCH));
    // Do = dO Vc^T
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, V, 1.f, dOp, V, C * V, w.Vp, V, C * V, 0.f, w.A2, C, C * C, NCH));
    MN__TRY(mn__gemm(ctx, 0, 1, C, K, V, 1.f, dOp, V, C * V, w.Ss, V, K * V, 0.f, w.T1, K, C * K, NCH));    // dO S_n^T
    mn__k_mesa_b2a<<<(unsigned)NCH, 256, 0, MN__STREAM>>>(w.db, w.T1, w.A1, w.A2, w.A3, w.M, w.Mp, w.Xp, w.Gam, (int)K);
    MN__LAUNCHED();
    // xbar += (Do.M) Kc
    MN__TRY(mn__gemm(ctx, 0, 0, C, K, C, 1.f, w.A2, C, C * C, w.Kp, K, C * K, 1.f, w.T1, K, C * K, NCH));
    // (Do.Mp)^T X
    MN__TRY(mn__gemm(ctx, 1, 0, C, K, C, 1.f, w.A3, C, C * C, w.Xp, K, C * K, 0.f, w.T2, K, C * K, NCH));
    MN__TRY(mn__gemm(ctx, 0, 1, C, K, V, 1.f, w.Vp, V, C * V, w.dSe, V, K * V, 0.f, w.T3, K, C * K, NCH));  // Vc dSe^T
    MN__TRY(mn__gemm(ctx, 0, 0, C, V, K, 1.f, w.Kp, K, C * K, w.dSe, V, K * V, 0.f, w.T4, V, C * V, NCH));  // Kc dSe
    // dv += (Sx.M)^T dO
    MN__TRY(mn__gemm(ctx, 1, 0, C, V, C, 1.f, w.A1, C, C * C, dOp, V, C * V, 1.f, w.dVp, V, C * V, NCH));
    mn__k_mesa_b2b<<<(unsigned)NCH, 256, 0, MN__STREAM>>>(w.dKp, w.dVp, w.dbp, w.dgp, w.db, w.T2, w.T3, w.T4, w.Kp,
                                                          w.Vp, w.bp, w.e, w.eb, w.GamC, w.Ss, w.dSe, (int)K, (int)V);
    MN__LAUNCHED();
    // B3: adjoint solve dQ = A^-1 xbar (A symmetric: the same CG, no output stage)
    MN__TRY(mn__mesa_cg(ctx, mn__rows_packed(w.T1, B, H, K), Kr, Vr, dQr, dQr, 0, NULL, wp, lamb, B, T, H, K, op));
    // B4: dHe_{n-1} = GamC dHe_n - (diag(Gam) dQ)^T X  (dL/dH_t = -dq_t x_t^T; rows index dq); dH_0 into dhkk0
    {
        mn__scan_job j = { w.dHe, dhkk, dhkk0, dQr, Xr, (int)K };
        MN__TRY(mn__mesa_scan(ctx, 1, &j, NULL, w.Gam, -1.f, w.GamC, B, T, H, K));
    }
    // B5: the kk part of dk, dbeta, dg, and dlambda
    // Dq = dQ Kc^T
    MN__TRY(mn__gemm(ctx, 0, 1, C, C, K, 1.f, w.dQ, K, C * K, w.Kp, K, C * K, 0.f, w.A2, C, C * C, NCH));
    MN__TRY(mn__gemm(ctx, 0, 1, C, K, K, 1.f, w.Xp, K, C * K, w.Hs, K, K * K, 0.f, w.T2, K, C * K, NCH));   // X H_n^T
    mn__k_mesa_b5a<<<(unsigned)NCH, 256, 0, MN__STREAM>>>(w.db, w.lp, w.A2, w.A1, w.Mp, w.dQ, w.Xp, w.T2, w.Gam,
                                                          (int)K); MN__LAUNCHED();
    // (-Dq.Mp)^T X
    MN__TRY(mn__gemm(ctx, 1, 0, C, K, C, 1.f, w.A2, C, C * C, w.Xp, K, C * K, 0.f, w.T2, K, C * K, NCH));
    MN__TRY(mn__gemm(ctx, 0, 1, C, K, K, 1.f, w.Kp, K, C * K, w.dHe, K, K * K, 0.f, w.T3, K, C * K, NCH));  // Kc dHe^T
    // -(Sx.M)^T dQ
    MN__TRY(mn__gemm(ctx, 1, 0, C, K, C, -1.f, w.A1, C, C * C, w.dQ, K, C * K, 0.f, w.T4, K, C * K, NCH));
    MN__TRY(mn__gemm(ctx, 0, 0, C, K, K, 1.f, w.Kp, K, C * K, w.dHe, K, K * K, 0.f, w.T5, K, C * K, NCH));  // Kc dHe
    mn__k_mesa_b5b<<<(unsigned)NCH, 256, 0, MN__STREAM>>>(w.dKp, w.dbp, w.dgp, w.db, w.T2, w.T3, w.T4, w.T5, w.Kp, w.bp,
                                                          w.e, w.eb, w.GamC, w.Hs, w.dHe, (int)K); MN__LAUNCHED();
    mn__k_mesa_dlamb<<<mn__grid(ctx, H * K, 256), 256, 0, MN__STREAM>>>(dlamb, w.lp, NC, B, H, K); MN__LAUNCHED();
    // B6: back to (B,T,H,.) layout, accumulating
    MN__TRY(mn__unpack(ctx, dq, w.dQ, B, T, H, K, 1));
    MN__TRY(mn__unpack(ctx, dk, w.dKp, B, T, H, K, 1));
    MN__TRY(mn__unpack(ctx, dv, w.dVp, B, T, H, V, 1));
    MN__TRY(mn__unpack(ctx, dbeta, w.dbp, B, T, H, 1, 1));
    MN__TRY(mn__unpack(ctx, dg, w.dgp, B, T, H, 1, 1));
    return MN_OK;
}

// >>cuda_gla
// defines: mn_cuda_gla_{work_size,forward,backward,step}, mn_cuda_rmsnorm_gated_{forward,backward}
//
// Linear attention (G = 0), simple GLA (G = 1) and GLA (G = Dk) as one op, mesanet.h's >>gla:
//   S_t = diag(e^{g_t}) S_{t-1} + k_t v_t^T,   o_t = S_t^T (scale q_t)
// in chunks of 64 tokens. With gam the inclusive cumulative log-decay from the chunk start, per key
// channel (broadcast for G = 1, zero for G = 0), S_n the state entering chunk n:
//   states   S_{n+1} = diag(e^{gam_last}) S_n + (K e^{gam_last - gam})^T V              (the scan)
//   scores   P[r][s] = scale sum_d q_rd k_sd e^{gam_rd - gam_sd} for s <= r, else 0
//   output   O = scale (Q e^gam) S_n + P V
// Every exponent the kernels form is <= 0 for gates <= 0 (the layers' logsigmoid / 16), or bounded by
// 40, so nothing overflows whatever the gates' strength: the state terms decay from the token to the
// chunk end or from the chunk start to the token; P for G <= 1 multiplies the product Q K^T by
// e^{gam_r - gam_s} entry by entry. For G = Dk the decay differs per channel and cannot leave the sum:
// while every |gam| of the chunk is <= 40 (MN__GLA_SPAN; ~3 for gates logsigmoid(N(0,1))/16) P is one
// product of Q e^gam (<= 1) and K e^-gam (<= e^40: a product of two fp32 factors loses no relative
// accuracy, and e^40 |q| |k| stays far from fp32's range); past it the chunk is cut into four blocks
// of 16 rows: a pair of blocks j < i meets at row 16 i (q side e^{gam_r - gam_{16i}}, k side
// e^{gam_{16i} - gam_s}, both <= 1, one product), a diagonal block is summed entry by entry with
// e^{gam_r - gam_s} (fla's chunk_gla cuts its chunks the same way). mn__k_gla_gam computes gam and each
// chunk's largest |gam| once per call; every later kernel reads them.
// Backward (the CPU's mn_gla_backward, pass for pass): the states again, the state gradients by a
// reverse scan dS_n = diag(e^{gam_last}) dS_{n+1} + scale (Q e^gam)^T dO, P again and dP = dO V^T, then
//   dv = P^T dO + (K e^{gam_last - gam}) dS_{n+1}
//   dq = scale e^gam (dO S_n^T) + [P's part],  dk = e^{gam_last - gam} (V dS_{n+1}^T) + [P's part]
//   dg_t = sum_{s >= t} (q_s dq_s - k_s dk_s) + rowsum(ht dht)   (mesanet.h's identity; this call's dq, dk)
// Precision: every product on the tensor cores (mma.sync m16n8k8, fp32 accumulation) in 3xTF32
// (ctx->math = MN_CUDA_MATH_FP32: fp32-level results, ~1e-6) or TF32 (MN_CUDA_MATH_TF32: ~5e-4);
// states, gates, exponentials and the diagonal blocks in fp32 (the diagonal blocks' C Dk / 2
// exponentials per token by the fast __expf, ~1e-6 relative at these arguments; every other
// exponential by expf). The T/C chunk states go through
// the workspace in fp32, as do P and dP (64 x 64 per chunk): never a T x T matrix.

#define MN__GC 64         // the GLA kernels' chunk length
#define MN__GLA_SPAN 40.f // GLA's scores in one product per chunk while every |gam| of the chunk is <= this

// c (16 x 8 NT) += A (16 x k) B (k x 8 NT) for k in [k0, k1) (steps of 8), one warp: fa(m, k) gives
// A's entry, fb(k, n) B's (n within the warp's 8 NT columns); only the first jn column tiles are
// computed. X3: each operand split into a TF32 head and tail, three products (see mn__k_mesa_scan_tc).
template <int NT, bool X3, class FA, class FB>
__device__ __forceinline__ void mn__gla_mma(float (&c)[NT][4], int k0, int k1, int jn, const FA& fa, const FB& fb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int k = k0; k < k1; k += 8) {        // two steps unrolled: the next fragments load during the mma
        const float a[4] = { fa(g, k + t), fa(g + 8, k + t), fa(g, k + t + 4), fa(g + 8, k + t + 4) };
        uint32_t ah[4], al[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (X3) mn__split(a[e], ah[e], al[e]);
            else ah[e] = mn__tf32(a[e]);
        }
#pragma unroll
        for (int j = 0; j < NT; j++) {
            if (j >= jn) continue;
            const float b0 = fb(k + t, 8 * j + g), b1 = fb(k + t + 4, 8 * j + g);
            if (X3) {
                uint32_t bh0, bl0, bh1, bl1;
                mn__split(b0, bh0, bl0);
                mn__split(b1, bh1, bl1);
                mn__mma_tf32(c[j], al, bh0, bh1);   // small terms first
                mn__mma_tf32(c[j], ah, bl0, bl1);
                mn__mma_tf32(c[j], ah, bh0, bh1);
            } else mn__mma_tf32(c[j], ah, mn__tf32(b0), mn__tf32(b1));
        }
    }
}
// accumulator entry e of column tile j: row g + 8 (e / 2), column 8 j + 2 t + e % 2 (g = lane/4, t = lane%4)
__device__ __forceinline__ int mn__gla_er(int e) { return ((threadIdx.x & 31) >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int mn__gla_ec(int j, int e) { return 8 * j + 2 * (threadIdx.x & 3) + (e & 1); }

// rows r < rows of a tile: row r from p + r ldp (rows r >= nrows zero-filled, nothing read), W floats
// each (W % 4 == 0, p and ldp 16-byte aligned), into s (row stride lds); all the block's threads
__device__ __forceinline__ void mn__gla_tile(float* s, int lds, const float* p, size_t ldp, int nrows, int rows,
                                             int W) {
    const int w4 = W / 4;
    for (int idx = threadIdx.x; idx < rows * w4; idx += blockDim.x) {
        const int r = idx / w4, c = (idx % w4) * 4;
        const bool ok = r < nrows;
        mn__cp16z(s + r * lds + c, p + (size_t)(ok ? r : 0) * ldp + c, ok);
    }
}
// The chunk's cumulative gates (gam, from mn__k_gla_gam) into sg: G = Dk (GM 2) as a tile of 64 x W
// columns c0.. (row stride lg), G = 1 (GM 1) as 64 values. Rows past T repeat the chunk's last row
// (gam_last: no decay past the end), so sg[63] is gam_last in every chunk.
template <int GM>
__device__ __forceinline__ void mn__gla_gates(float* sg, int lg, const float* gam, size_t b, size_t t0, size_t T,
                                              size_t H, size_t h, size_t D, int c0, int nrows, int W) {
    if (GM == 2) {
        const float* p = gam + ((b * T + t0) * H + h) * D + c0;
        for (int idx = threadIdx.x; idx < MN__GC * (W / 4); idx += blockDim.x) {
            const int r = idx / (W / 4), c = (idx % (W / 4)) * 4;
            mn__cp16(sg + r * lg + c, p + (size_t)(r < nrows ? r : nrows - 1) * H * D + c);
        }
    }
    if (GM == 1)
        for (int r = threadIdx.x; r < MN__GC; r += blockDim.x)
            sg[r] = gam[(b * T + t0 + (r < nrows ? r : nrows - 1)) * H + h];
}

typedef struct mn__gla_args {
    const float *q, *k, *v, *g, *h0, *dout, *dht;
    const float *gam, *span;                      // workspace: cumulative gates (B,T,H,G), their span (B H, NT)
    int blocks;                                   // 1: GLA's scores always by 16-row blocks (ctx->gla_blocks)
    float *out, *ht, *dq, *dk, *dv, *dg, *dh0;
    float *S, *dS, *P, *dP, *dgl, *ctot, *rsd;   // workspace (mn__gla_ws)
    unsigned B, T, H, NT;
    float scale;
    int acc;                                      // backward: 1 accumulate into dq..dg (the contract), 0 overwrite
    int dglocal;                                  // G = 1: the gate gradient from chunk-local sums (ctx->gla_dg)
} mn__gla_args;

// ---- the state scans: forward (the states) and reverse (their gradients) -------------------------
// One block owns a 64 x 64 tile of one head's state (rows 64 blockIdx.z .., columns 64 blockIdx.x ..; in
// registers: warp w rows 16 w .. +15 of the tile, all 64 columns) and walks the chunks in order (forward) or
// backwards (reverse), the next chunk's tiles arriving by cp.async while the current one is multiplied. 64-row
// tiles (not all Dk rows a block) give Dk = 128 four blocks a head: at B 4, H 16 that is 256 blocks, not 128 on
// 132 multiprocessors; each block's sums are those of the whole-row form (the same order):
//   forward: slot n = the state entering chunk n; S = diag(e^{gam_last}) S + (K e^{gam_last - gam})^T V
//            (slot NT = ht, also written to ht when asked); starts at h0 (or 0)
//   reverse: slot n = the gradient leaving chunk n; dS = diag(e^{gam_last}) dS + scale (Q e^gam)^T dO;
//            starts at dht (or 0), ends in dh0 (accumulated)
template <int D, int GM> __host__ __device__ constexpr int mn__gla_scan_stage(void) {
    return MN__GC * 72 + MN__GC * 72 + (GM == 2 ? MN__GC * 72 : GM == 1 ? MN__GC : 0);
}
template <int D, int GM, bool REV, bool X3>
__global__ void __launch_bounds__(128) mn__k_gla_scan(mn__gla_args A) {
    constexpr int LY = 72, LZ = 72, LG = GM == 2 ? 72 : 1, STAGE = mn__gla_scan_stage<D, GM>();
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float* sb = (float*)mn__smem;
    __shared__ float sdec[64];
    // li0: the warp's first row in the tile, i0 in the state
    const int tid = threadIdx.x, warp = tid >> 5, rb = 64 * blockIdx.z, li0 = 16 * warp, i0 = rb + li0,
        c0 = blockIdx.x * 64;
    const size_t bh = blockIdx.y, H = A.H, T = A.T, NT = A.NT, b = bh / H, h = bh % H, E = (size_t)D * D;
    const float* Y = REV ? A.q : A.k;
    const float* Z = REV ? A.dout : A.v;
    const float* init = REV ? A.dht : A.h0;
    float* slots = REV ? A.dS : A.S;
    const size_t nslot = REV ? NT : NT + 1;
    const float wc = REV ? A.scale : 1.f;
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[j][e] = init ? init[bh * E + (size_t)(i0 + mn__gla_er(e)) * D + c0 + mn__gla_ec(j, e)] : 0.f;
    auto issue = [&](size_t s) {
        if (s < NT) {
            const size_t n = REV ? NT - 1 - s : s, t0 = n * MN__GC;
            const int nr = (int)(T - t0 < MN__GC ? T - t0 : MN__GC);
            float* st = sb + (s & 1) * STAGE;
            mn__gla_tile(st, LY, Y + ((b * T + t0) * H + h) * D + rb, H * D, nr, MN__GC, 64);
            mn__gla_tile(st + MN__GC * LY, LZ, Z + ((b * T + t0) * H + h) * D + c0, H * D, nr, MN__GC, 64);
            mn__gla_gates<GM>(st + MN__GC * (LY + LZ), LG, A.gam, b, t0, T, H, h, D, rb, nr, 64);
        }
        mn__cp_commit();
    };
    auto store = [&](float* dst) {
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) dst[(size_t)(i0 + mn__gla_er(e)) * D + c0 + mn__gla_ec(j, e)] = acc[j][e];
    };
    issue(0);
    for (size_t s = 0; s < NT; s++) {
        mn__cp_wait<0>();
        __syncthreads();                          // stage s has landed; stage s-1 is free
        issue(s + 1);
        const size_t n = REV ? NT - 1 - s : s;
        float *sY = sb + (s & 1) * STAGE, *sZ = sY + MN__GC * LY, *sG = sZ + MN__GC * LZ;
        // the chunk's decay e^{gam_last}; the weights below: forward, the decay from each token to the
        // chunk end, e^{gam_last - gam_t}; reverse, from the chunk start to the token, e^{gam_t}
        if (GM == 2 && tid < 64) sdec[tid] = expf(sG[(MN__GC - 1) * LG + tid]);
        if (GM == 1 && tid == 0) sdec[0] = expf(sG[MN__GC - 1]);
        __syncthreads();
        store(slots + (bh * nslot + n) * E);
        if (GM) {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[j][e] *= sdec[GM == 2 ? li0 + mn__gla_er(e) : 0];
        }
        // acc += (w Y)^T Z: A(m, k) = w_k Y[k][i0 + m] (k the chunk's token), B(k, n) = Z[k][n]
        mn__gla_mma<8, X3>(acc, 0, MN__GC, 8,
            [&](int m, int k) {
                const float y = wc * sY[k * LY + li0 + m];
                if (GM == 0) return y;
                const float gk = GM == 2 ? sG[k * LG + li0 + m] : sG[k], gl = GM == 2 ? sG[(MN__GC - 1) * LG + li0 + m]
                                                                                      : sG[MN__GC - 1];
                return y * expf(REV ? gk : gl - gk);
            },
            [&](int k, int nn) { return sZ[k * LZ + nn]; });
    }
    if (!REV) {
        store(slots + (bh * nslot + NT) * E);
        if (A.ht) store(A.ht + bh * E);
    } else if (A.dh0) {
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                A.dh0[bh * E + (size_t)(i0 + mn__gla_er(e)) * D + c0 + mn__gla_ec(j, e)] += acc[j][e];
    }
    mn__cp_wait_all();
}

// ---- the intra-chunk scores P (forward and backward) and dP = dO V^T (the backward, GM 0, scale 1) --
// One block (8 warps) per chunk: warp w owns rows 16 (w%4) .. +15 (block rb = w%4) and columns
// 32 (w/4) .. +31 of the chunk's 64 x 64 matrix. P (NT per head, 64 x 64) in the workspace.
template <int D, int GM> static size_t mn__gla_scores_smem(void) {
    return (size_t)(2 * MN__GC * (D + 4) + (GM == 2 ? MN__GC * (D + 4) : MN__GC)) * sizeof(float);
}
template <int D, int GM, bool X3>
__global__ void __launch_bounds__(256) mn__k_gla_scores(float* P, const float* Qp, const float* Kp, const float* gm,
                                                       const float* span, int blocks, unsigned T_, unsigned H_,
                                                       unsigned NT_, float scale) {
    constexpr int LQ = D + 4, LG = GM == 2 ? D + 4 : 1;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float *sQ = (float*)mn__smem, *sK = sQ + MN__GC * LQ, *sG = sK + MN__GC * LQ;
    const size_t n = blockIdx.x, bh = blockIdx.y, H = H_, T = T_, NT = NT_, b = bh / H, h = bh % H, t0 = n * MN__GC;
    const int nr = (int)(T - t0 < MN__GC ? T - t0 : MN__GC), warp = threadIdx.x >> 5, r0 = 16 * (warp & 3),
        s0 = 32 * (warp >> 2);
    mn__gla_tile(sQ, LQ, Qp + ((b * T + t0) * H + h) * D, H * D, nr, MN__GC, D);
    mn__gla_tile(sK, LQ, Kp + ((b * T + t0) * H + h) * D, H * D, nr, MN__GC, D);
    mn__gla_gates<GM>(sG, LG, gm, b, t0, T, H, h, D, 0, nr, D);
    mn__cp_commit(); mn__cp_wait_all(); __syncthreads();
    auto gam = [&](int r, int d) -> float { return GM == 0 ? 0.f : GM == 1 ? sG[r] : sG[r * LG + d]; };
    const bool fact = GM == 2 && !blocks && span[bh * NT + n] <= MN__GLA_SPAN;
    float acc[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.f;
    if (GM <= 1) {
        if (s0 <= r0 + 15)
            mn__gla_mma<4, X3>(acc, 0, D, 4, [&](int m, int k) { return sQ[(r0 + m) * LQ + k]; },
                               [&](int k, int nn) { return sK[(s0 + nn) * LQ + k]; });
    } else if (fact) {                            // factored at the chunk start: q e^gam <= 1, k e^-gam <= e^40
        if (s0 <= r0 + 15)
            mn__gla_mma<4, X3>(acc, 0, D, 4, [&](int m, int k) { return sQ[(r0 + m) * LQ + k] * expf(gam(r0 + m, k)); },
                               [&](int k, int nn) { return sK[(s0 + nn) * LQ + k] * expf(-gam(s0 + nn, k)); });
    } else {
        // the column tiles left of the diagonal block, met at row r0: both factors <= 1
        const int jn = r0 > s0 ? ((r0 - s0) / 8 < 4 ? (r0 - s0) / 8 : 4) : 0;
        if (jn > 0)
            mn__gla_mma<4, X3>(acc, 0, D, jn,
                [&](int m, int k) { return sQ[(r0 + m) * LQ + k] * expf(gam(r0 + m, k) - gam(r0, k)); },
                [&](int k, int nn) { return sK[(s0 + nn) * LQ + k] * expf(gam(r0, k) - gam(s0 + nn, k)); });
    }
    float* Pc = P + (bh * NT + n) * MN__GC * MN__GC;
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = r0 + mn__gla_er(e), s = s0 + mn__gla_ec(j, e);
            float val = 0.f;
            if (s <= r) {
                if (GM <= 1) val = scale * acc[j][e] * (GM ? expf(gam(r, 0) - gam(s, 0)) : 1.f);
                else if (fact || s < r0) val = scale * acc[j][e];
                else {                            // the diagonal block, entry by entry
                    float sum = 0.f;
                    for (int d = 0; d < D; d++) sum += sQ[r * LQ + d] * sK[s * LQ + d] * __expf(gam(r, d) - gam(s, d));
                    val = scale * sum;
                }
            }
            Pc[r * MN__GC + s] = val;
        }
}

// ---- the forward's output: O = scale (Q e^gam) S_n + P V, a 64-column tile of Dv per block --------
// Shared memory of this kernel and the dv kernel below: five 64 x 72 tiles (90 KB, two blocks a multiprocessor):
// the product over Dk goes in 64-row halves of the state (q, the gates and S's rows 64 hf .. +63 in tiles 0-2,
// reloaded per half), in k order, so the sums are those of one pass; P and v (or dO) in tiles 3, 4.
#define MN__GLA_TILE (MN__GC * 72)
template <int D, int GM> static size_t mn__gla_out_smem(void) { return (size_t)5 * MN__GLA_TILE * sizeof(float); }
template <int D, int GM, bool X3>
__global__ void __launch_bounds__(256, 2) mn__k_gla_out(mn__gla_args A) {
    constexpr int LQ = 68, LG = GM == 2 ? 68 : 1, LS = 72, LP = 68, LV = 72, TL = MN__GLA_TILE;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float *sQ = (float*)mn__smem, *sG = sQ + TL, *sS = sG + TL, *sP = sS + TL, *sV = sP + TL;
    const size_t n = blockIdx.x, bh = blockIdx.y, H = A.H, T = A.T, NT = A.NT, b = bh / H, h = bh % H, t0 = n * MN__GC,
        E = (size_t)D * D;
    const int nr = (int)(T - t0 < MN__GC ? T - t0 : MN__GC), warp = threadIdx.x >> 5, r0 = 16 * (warp & 3),
        s0 = 32 * (warp >> 2), c0 = 64 * blockIdx.z;
    auto half = [&](int hf) {                     // key channels 64 hf .. +63: q, gates, S's rows (columns c0..)
        mn__gla_tile(sQ, LQ, A.q + ((b * T + t0) * H + h) * D + 64 * hf, H * D, nr, MN__GC, 64);
        if (GM == 2 || hf == 0) mn__gla_gates<GM>(sG, LG, A.gam, b, t0, T, H, h, D, 64 * hf, nr, 64);
        mn__gla_tile(sS, LS, A.S + (bh * (NT + 1) + n) * E + (size_t)64 * hf * D + c0, D, 64, 64, 64);
    };
    half(0);
    mn__gla_tile(sP, LP, A.P + (bh * NT + n) * MN__GC * MN__GC, MN__GC, MN__GC, MN__GC, MN__GC);
    mn__gla_tile(sV, LV, A.v + ((b * T + t0) * H + h) * D + c0, H * D, nr, MN__GC, 64);
    mn__cp_commit();
    const float sc = A.scale;
    float acc[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.f;
    for (int hf = 0; hf < D / 64; hf++) {
        mn__cp_wait_all(); __syncthreads();
        mn__gla_mma<4, X3>(acc, 0, 64, 4,
            [&](int m, int k) {
                const float x = sc * sQ[(r0 + m) * LQ + k];
                return GM == 0 ? x : x * expf(GM == 2 ? sG[(r0 + m) * LG + k] : sG[r0 + m]);
            },
            [&](int k, int nn) { return sS[k * LS + s0 + nn]; });
        if (hf + 1 < D / 64) { __syncthreads(); half(hf + 1); mn__cp_commit(); }
    }
    mn__gla_mma<4, X3>(acc, 0, r0 + 16, 4, [&](int m, int k) { return sP[(r0 + m) * LP + k]; },
                       [&](int k, int nn) { return sV[k * LV + s0 + nn]; });
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = r0 + mn__gla_er(e), c = c0 + s0 + mn__gla_ec(j, e);
            if (r < nr) A.out[((b * T + t0 + r) * H + h) * D + c] = acc[j][e];
        }
}

// ---- the backward's dv: P^T dO + (K e^{gam_last - gam}) dS_{n+1}, a 64-column tile per block -------
// (the tiles as the output's: k, the gates and dS's rows by halves in tiles 0-2, P and dO in 3, 4)
template <int D, int GM> static size_t mn__gla_dv_smem(void) { return (size_t)5 * MN__GLA_TILE * sizeof(float); }
template <int D, int GM, bool X3>
__global__ void __launch_bounds__(256, 2) mn__k_gla_dv(mn__gla_args A) {
    constexpr int LP = 72, LO = 72, LK = 68, LG = GM == 2 ? 68 : 1, LS = 72, TL = MN__GLA_TILE;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float *sK = (float*)mn__smem, *sG = sK + TL, *sS = sG + TL, *sP = sS + TL, *sO = sP + TL;
    const size_t n = blockIdx.x, bh = blockIdx.y, H = A.H, T = A.T, NT = A.NT, b = bh / H, h = bh % H, t0 = n * MN__GC,
        E = (size_t)D * D;
    const int nr = (int)(T - t0 < MN__GC ? T - t0 : MN__GC), warp = threadIdx.x >> 5, r0 = 16 * (warp & 3),
        s0 = 32 * (warp >> 2), c0 = 64 * blockIdx.z;
    auto half = [&](int hf) {
        mn__gla_tile(sK, LK, A.k + ((b * T + t0) * H + h) * D + 64 * hf, H * D, nr, MN__GC, 64);
        if (GM == 2 || hf == 0) mn__gla_gates<GM>(sG, LG, A.gam, b, t0, T, H, h, D, 64 * hf, nr, 64);
        mn__gla_tile(sS, LS, A.dS + (bh * NT + n) * E + (size_t)64 * hf * D + c0, D, 64, 64, 64);
    };
    mn__gla_tile(sP, LP, A.P + (bh * NT + n) * MN__GC * MN__GC, MN__GC, MN__GC, MN__GC, MN__GC);
    mn__gla_tile(sO, LO, A.dout + ((b * T + t0) * H + h) * D + c0, H * D, nr, MN__GC, 64);
    half(0);
    mn__cp_commit();
    float acc[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.f;
    for (int hf = 0; hf < D / 64; hf++) {
        mn__cp_wait_all(); __syncthreads();
        // P^T dO first: A(m, k) = P[k][r0 + m], nonzero for k >= r0 + m
        if (hf == 0)
            mn__gla_mma<4, X3>(acc, r0, MN__GC, 4, [&](int m, int k) { return sP[k * LP + r0 + m]; },
                               [&](int k, int nn) { return sO[k * LO + s0 + nn]; });
        mn__gla_mma<4, X3>(acc, 0, 64, 4,
            [&](int m, int k) {
                const float x = sK[(r0 + m) * LK + k];
                if (GM == 0) return x;
                return GM == 2 ? x * expf(sG[(MN__GC - 1) * LG + k] - sG[(r0 + m) * LG + k])
                               : x * expf(sG[MN__GC - 1] - sG[r0 + m]);
            },
            [&](int k, int nn) { return sS[k * LS + s0 + nn]; });
        if (hf + 1 < D / 64) { __syncthreads(); half(hf + 1); mn__cp_commit(); }
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = r0 + mn__gla_er(e), c = c0 + s0 + mn__gla_ec(j, e);
            if (r < nr) {
                float* o = A.dv + ((b * T + t0 + r) * H + h) * D + c;
                *o = A.acc ? *o + acc[j][e] : acc[j][e];
            }
        }
}

// ---- the backward's dq, dk (and the gate gradient's per-chunk sums), a 64-channel tile per block ---
// dq = scale e^gam (dO S_n^T) + sum_{s<=r} scale dP[r][s] e^{gam_r - gam_s} k_s,
// dk = e^{gam_last - gam} (V dS_{n+1}^T) + sum_{r>=t} scale dP[r][t] e^{gam_r - gam_t} q_r; for G = Dk
// the dP sums as the scores: blocks left of the diagonal met at row r0 (dq) or at row r0 + 15 (dk),
// the diagonal block entry by entry. With the gate gradient asked for, u = q dq - k dk summed
// backwards within the chunk into dgl (B,T,H,Dk) and the chunk's total into ctot (B H, NT, Dk).
// Shared memory: six 64 x 72 tiles (108 KB, two blocks a multiprocessor, so that one block's loads overlap
// the other's products): the products over Dv (dO S^T, V dS^T) go in 64-column halves of dO, V, S, dS
// (tiles 0-3, row stride 68) in k order, so the sums are those of one pass over Dv; q and k (tiles 4, 5) arrive
// with the first half; then dP and the gates take tiles 0, 1 and u, w tiles 2, 3.
template <int D, int GM> static size_t mn__gla_dqk_smem(void) { return (size_t)6 * MN__GLA_TILE * sizeof(float); }
template <int D, int GM, bool X3>
__global__ void __launch_bounds__(256, 2) mn__k_gla_dqk(mn__gla_args A) {
    constexpr int L1 = 68, LT = 72, LG = GM == 2 ? 72 : 1, LU = 72, TL = MN__GLA_TILE;
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float *sO = (float*)mn__smem, *sV = sO + TL, *sS = sV + TL, *sdS = sS + TL, *sQ = sdS + TL, *sK = sQ + TL;
    float *sdP = sO, *sG = sV, *sU = sS, *sW = sdS;   // phase 2, once the halves are consumed
    const size_t n = blockIdx.x, bh = blockIdx.y, H = A.H, T = A.T, NT = A.NT, b = bh / H, h = bh % H, t0 = n * MN__GC,
        E = (size_t)D * D;
    const int nr = (int)(T - t0 < MN__GC ? T - t0 : MN__GC), warp = threadIdx.x >> 5, r0 = 16 * (warp & 3),
        s0 = 32 * (warp >> 2), i0 = 64 * blockIdx.z;
    const size_t row0 = (b * T + t0) * H + h;     // row (b, t0, h)
    const bool dct_on = GM == 1 && A.dglocal && A.dg;
    auto half = [&](int hf) {                     // Dv columns 64 hf .. +63 of dO, V and of S, dS's rows i0..
        mn__gla_tile(sO, L1, A.dout + row0 * D + 64 * hf, H * D, nr, MN__GC, 64);
        mn__gla_tile(sV, L1, A.v + row0 * D + 64 * hf, H * D, nr, MN__GC, 64);
        mn__gla_tile(sS, L1, A.S + (bh * (NT + 1) + n) * E + (size_t)i0 * D + 64 * hf, D, 64, 64, 64);
        mn__gla_tile(sdS, L1, A.dS + (bh * NT + n) * E + (size_t)i0 * D + 64 * hf, D, 64, 64, 64);
    };
    half(0);
    mn__gla_tile(sQ, LT, A.q + row0 * D + i0, H * D, nr, MN__GC, 64);
    mn__gla_tile(sK, LT, A.k + row0 * D + i0, H * D, nr, MN__GC, 64);
    mn__cp_commit();
    float aq[4][4], ak[4][4], aq2[4][4], ak2[4][4], dct = 0.f;   // dct: <S_n, dS_{n+1}> of state row i0 + tid
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) aq[j][e] = ak[j][e] = aq2[j][e] = ak2[j][e] = 0.f;
    for (int hf = 0; hf < D / 64; hf++) {
        mn__cp_wait_all(); __syncthreads();
        // dO S^T and V dS^T: B(k, n) = S[i0 + s0 + n][64 hf + k]
        mn__gla_mma<4, X3>(aq, 0, 64, 4, [&](int m, int k) { return sO[(r0 + m) * L1 + k]; },
                           [&](int k, int nn) { return sS[(s0 + nn) * L1 + k]; });
        mn__gla_mma<4, X3>(ak, 0, 64, 4, [&](int m, int k) { return sV[(r0 + m) * L1 + k]; },
                           [&](int k, int nn) { return sdS[(s0 + nn) * L1 + k]; });
        if (dct_on && threadIdx.x < 64)
            for (int j = 0; j < 64; j++) dct += sS[threadIdx.x * L1 + j] * sdS[threadIdx.x * L1 + j];
        __syncthreads();                          // the half is consumed
        if (hf + 1 < D / 64) { half(hf + 1); mn__cp_commit(); }
    }
    mn__gla_tile(sdP, LT, A.dP + (bh * NT + n) * MN__GC * MN__GC, MN__GC, MN__GC, MN__GC, MN__GC);
    mn__gla_gates<GM>(sG, LG, A.gam, b, t0, T, H, h, D, i0, nr, 64);
    mn__cp_commit(); mn__cp_wait_all(); __syncthreads();
    auto gam = [&](int r, int c) -> float { return GM == 0 ? 0.f : GM == 1 ? sG[r] : sG[r * LG + c]; };
    const bool fact = GM == 2 && !A.blocks && A.span[bh * NT + n] <= MN__GLA_SPAN;
    const float sc = A.scale;
    if (GM <= 1) {
        mn__gla_mma<4, X3>(aq2, 0, r0 + 16, 4,
            [&](int m, int k) {
                const int r = r0 + m;
                return k <= r ? sc * sdP[r * LT + k] * (GM ? expf(gam(r, 0) - gam(k, 0)) : 1.f) : 0.f;
            },
            [&](int k, int nn) { return sK[k * LT + s0 + nn]; });
        mn__gla_mma<4, X3>(ak2, r0, MN__GC, 4,
            [&](int m, int k) {
                const int t = r0 + m;
                return k >= t ? sc * sdP[k * LT + t] * (GM ? expf(gam(k, 0) - gam(t, 0)) : 1.f) : 0.f;
            },
            [&](int k, int nn) { return sQ[k * LT + s0 + nn]; });
    } else if (fact) {                            // factored at the chunk start, as the scores
        mn__gla_mma<4, X3>(aq2, 0, r0 + 16, 4, [&](int m, int k) { return sdP[(r0 + m) * LT + k]; },
                           [&](int k, int nn) { return sK[k * LT + s0 + nn] * expf(-gam(k, s0 + nn)); });
        mn__gla_mma<4, X3>(ak2, r0, MN__GC, 4, [&](int m, int k) { return sdP[k * LT + r0 + m]; },
                           [&](int k, int nn) { return sQ[k * LT + s0 + nn] * expf(gam(k, s0 + nn)); });
    } else {
        if (r0 > 0)
            mn__gla_mma<4, X3>(aq2, 0, r0, 4, [&](int m, int k) { return sdP[(r0 + m) * LT + k]; },
                [&](int k, int nn) { return sK[k * LT + s0 + nn] * expf(gam(r0, s0 + nn) - gam(k, s0 + nn)); });
        if (r0 + 16 < MN__GC)
            mn__gla_mma<4, X3>(ak2, r0 + 16, MN__GC, 4, [&](int m, int k) { return sdP[k * LT + r0 + m]; },
                [&](int k, int nn) { return sQ[k * LT + s0 + nn] * expf(gam(k, s0 + nn) - gam(r0 + 15, s0 + nn)); });
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = r0 + mn__gla_er(e), c = s0 + mn__gla_ec(j, e);
            const float gr = gam(r, c);
            float dq = sc * (GM ? expf(gr) : 1.f) * aq[j][e];
            float dk = (GM ? expf(gam(MN__GC - 1, c) - gr) : 1.f) * ak[j][e];
            const float dqi = dq, dki = dk;       // the inter-chunk parts (the local gate gradient's terms)
            if (GM <= 1) { dq += aq2[j][e]; dk += ak2[j][e]; }
            else if (fact) { dq += sc * expf(gr) * aq2[j][e]; dk += sc * expf(-gr) * ak2[j][e]; }
            else {
                float sq = 0.f, sk = 0.f;
                for (int s = r0; s <= r; s++) sq += sdP[r * LT + s] * sK[s * LT + c] * __expf(gr - gam(s, c));
                for (int s = r; s < r0 + 16; s++) sk += sdP[s * LT + r] * sQ[s * LT + c] * __expf(gam(s, c) - gr);
                dq += sc * (expf(gr - gam(r0, c)) * aq2[j][e] + sq);
                dk += sc * (expf(gam(r0 + 15, c) - gr) * ak2[j][e] + sk);
            }
            if (r < nr) {
                const size_t at = (row0 + (size_t)r * H) * D + i0 + c;
                float *pq = A.dq + at, *pk = A.dk + at;
                *pq = A.acc ? *pq + dq : dq;
                *pk = A.acc ? *pk + dk : dk;
            }
            if (GM == 1 && A.dglocal) { sU[r * LU + c] = sQ[r * LT + c] * dqi; sW[r * LU + c] = sK[r * LT + c] * dki; }
            else if (GM) sU[r * LU + c] = sQ[r * LT + c] * dq - sK[r * LT + c] * dk;
        }
    if (GM == 0 || !A.dg) return;
    __syncthreads();
    if (GM == 1 && A.dglocal) {                   // this channel's part of the local form (mn__k_gla_dg)
        if (threadIdx.x < 64) {
            const int c = threadIdx.x;
            float s = 0.f, p = 0.f;
            for (int r = MN__GC; r-- > 0;) { s += sU[r * LU + c]; sU[r * LU + c] = s; }   // sum over i >= t
            for (int r = 0; r < MN__GC; r++) {                                          // + sum over j < t
                if (r < nr) A.dgl[(row0 + (size_t)r * H) * D + i0 + c] = sU[r * LU + c] + p;
                p += sW[r * LU + c];
            }
            A.ctot[(bh * NT + n) * D + i0 + c] = expf(gam(MN__GC - 1, 0)) * dct;      // state row i0 + c
        }
        return;
    }
    if (threadIdx.x < 64) {                       // u summed from the chunk's end back to each token
        const int c = threadIdx.x;
        float s = 0.f;
        for (int r = MN__GC; r-- > 0;) {
            s += sU[r * LU + c];
            if (r < nr) A.dgl[(row0 + (size_t)r * H) * D + i0 + c] = s;
        }
        A.ctot[(bh * NT + n) * D + i0 + c] = s;
    }
}

// gam (B,T,H,G) = g_{t0} + ... + g_t, the cumulative gate from each chunk's start t0 (fp32, in order), and
// span (B H, NT) = the largest |gam| of each chunk; one block (G threads, 32 for G = 1) per chunk and head
__global__ void mn__k_gla_gam(float* gam, float* span, const float* g, unsigned T_, unsigned H_, unsigned NT_, int G) {
    __shared__ float sh[32];
    const size_t n = blockIdx.x, bh = blockIdx.y, H = H_, T = T_, NT = NT_, b = bh / H, h = bh % H, t0 = n * MN__GC;
    const int d = threadIdx.x;
    float mx = 0.f;
    if (d < G) {
        float s = 0.f;
        for (size_t r = 0; r < MN__GC && t0 + r < T; r++) {
            const size_t at = ((b * T + t0 + r) * H + h) * G + d;
            s += g[at];
            gam[at] = s;
            mx = fmaxf(mx, fabsf(s));
        }
    }
    mx = mn__block_max(mx, sh);
    if (d == 0) span[bh * NT + n] = mx;
}
// rsd (B H, Dk) = rowsum(ht * dht), ht the forward scan's last slot
__global__ void mn__k_gla_rowdot(float* rsd, const float* S, const float* dht, size_t BH, size_t NT, size_t D) {
    MN__FOR(i, BH * D) {
        const size_t bh = i / D, r = i % D;
        const float *s = S + (bh * (NT + 1) + NT) * D * D + r * D, *d = dht + bh * D * D + r * D;
        float acc = 0.f;
        for (size_t j = 0; j < D; j++) acc += s[j] * d[j];
        rsd[i] = acc;
    }
}
// dg = dgl + the later chunks' totals + rsd, summed over the channels for G = 1; one block (Dk
// threads) per chunk and head. The local form (A.dglocal, G = 1; ctx->gla_dg): dg_t = sum over the channels
// of dgl (sum_{i>=t} q_i.dq_inter_i + sum_{j<t} k_j.dk_inter_j) and ctot (this chunk's e^{gam_last} <S_n,
// dS_{n+1}>, row by row), plus the running sum G_t = sum_{i>=t>j} P_ij dP_ij of the chunk's scores (P the
// decayed, scaled Q K^T, dP = dO V^T): nothing from other chunks (dht enters through dS_{n+1}).
__global__ void mn__k_gla_dg(mn__gla_args A, int D, int GM) {
    __shared__ float sh[32], Gs[MN__GC];
    const size_t n = blockIdx.x, bh = blockIdx.y, H = A.H, T = A.T, NT = A.NT, b = bh / H, h = bh % H, t0 = n * MN__GC;
    const int i = threadIdx.x;
    if (GM == 1 && A.dglocal) {
        const size_t z = (bh * NT + n) * MN__GC * MN__GC;
        for (int t = i; t < MN__GC; t += blockDim.x) {   // G_{t+1} - G_t = sum_{r>t} M_rt - sum_{j<t} M_tj
            float cb = 0.f, rl = 0.f;
            for (int r = t + 1; r < MN__GC; r++) cb += A.P[z + r * MN__GC + t] * A.dP[z + r * MN__GC + t];
            for (int j = 0; j < t; j++) rl += A.P[z + t * MN__GC + j] * A.dP[z + t * MN__GC + j];
            Gs[t] = cb - rl;
        }
        __syncthreads();
        if (i == 0) {
            float run = 0.f;
            for (int t = 0; t < MN__GC; t++) { const float d = Gs[t]; Gs[t] = run; run += d; }
        }
        __syncthreads();
        const float own = A.ctot[(bh * NT + n) * D + i];
        for (size_t r = 0; r < MN__GC && t0 + r < T; r++) {
            const size_t row = (b * T + t0 + r) * H + h;
            const float s = mn__block_sum(A.dgl[row * D + i] + own, sh) + Gs[r];
            if (i == 0) A.dg[row] = A.acc ? A.dg[row] + s : s;
        }
        return;
    }
    float carry = A.rsd ? A.rsd[bh * D + i] : 0.f;
    for (size_t m = n + 1; m < NT; m++) carry += A.ctot[(bh * NT + m) * D + i];
    for (size_t r = 0; r < MN__GC && t0 + r < T; r++) {
        const size_t row = (b * T + t0 + r) * H + h;
        const float val = A.dgl[row * D + i] + carry;
        if (GM == 2) A.dg[row * D + i] = A.acc ? A.dg[row * D + i] + val : val;
        else {
            const float s = mn__block_sum(val, sh);
            if (i == 0) A.dg[row] = A.acc ? A.dg[row] + s : s;
        }
    }
}

// ---- the decode step: the state read and written once ------------------------------------------
// S = diag(e^g) S + k v^T, o = scale S^T q. Dv % 32 == 0 (and a 16-byte aligned state): one block per
// (sequence, head, 32 columns), so that batch 1 still fills 4 blocks per head; thread (row group y of
// 32, column quad c of 8) walks rows y, y + 32, ... with float4 loads; the 32 partial sums of each column
// meet in shared memory. Otherwise one block per (sequence, head), thread (row group y, column j).
__global__ void __launch_bounds__(256) mn__k_gla_step4(float* out, float* state, const float* q, const float* k,
                                                      const float* v, const float* g, unsigned Dk, unsigned Dv,
                                                      unsigned G, float scale) {
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float *sq = (float*)mn__smem, *sk = sq + Dk, *sa = sk + Dk, *red = sq + (3 * Dk + 3) / 4 * 4;   // (32, 32)
    const size_t bh = blockIdx.x;
    const unsigned c0 = blockIdx.y * 32, c = threadIdx.x & 7, y = threadIdx.x >> 3, j = c0 + 4 * c;
    for (unsigned i = threadIdx.x; i < Dk; i += blockDim.x) {
        sq[i] = q[bh * Dk + i]; sk[i] = k[bh * Dk + i];
        sa[i] = G == 0 ? 1.f : expf(g[bh * G + (G == 1 ? 0 : i)]);
    }
    __syncthreads();
    const float4 vv = *(const float4*)(v + bh * Dv + j);
    float4* S = (float4*)(state + bh * Dk * Dv + j);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (unsigned i = y; i < Dk; i += 32) {
        float4 s = S[(size_t)i * Dv / 4];
        const float a = sa[i], kk = sk[i], qq = sq[i];
        s.x = a * s.x + kk * vv.x; s.y = a * s.y + kk * vv.y; s.z = a * s.z + kk * vv.z; s.w = a * s.w + kk * vv.w;
        S[(size_t)i * Dv / 4] = s;
        acc.x += qq * s.x; acc.y += qq * s.y; acc.z += qq * s.z; acc.w += qq * s.w;
    }
    *(float4*)(red + y * 32 + 4 * c) = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float sum = 0.f;
        for (unsigned u = 0; u < 32; u++) sum += red[u * 32 + threadIdx.x];
        out[bh * Dv + c0 + threadIdx.x] = scale * sum;
    }
}
__global__ void mn__k_gla_step(float* out, float* state, const float* q, const float* k, const float* v,
                               const float* g, unsigned H, unsigned Dk, unsigned Dv, unsigned G, float scale) {
    extern __shared__ __align__(16) unsigned char mn__smem[];
    float *sq = (float*)mn__smem, *sk = sq + Dk, *sa = sk + Dk, *sv = sa + Dk, *red = sv + Dv;
    const size_t bh = blockIdx.x;
    for (unsigned i = threadIdx.x; i < Dk; i += blockDim.x) {
        sq[i] = q[bh * Dk + i]; sk[i] = k[bh * Dk + i];
        sa[i] = G == 0 ? 1.f : expf(g[bh * G + (G == 1 ? 0 : i)]);
    }
    for (unsigned j = threadIdx.x; j < Dv; j += blockDim.x) sv[j] = v[bh * Dv + j];
    __syncthreads();
    const unsigned j = threadIdx.x % Dv, y = threadIdx.x / Dv, ny = blockDim.x / Dv;
    float* S = state + bh * Dk * Dv;
    float acc = 0.f;
    for (unsigned i = y; i < Dk; i += ny) {
        const float s = sa[i] * S[(size_t)i * Dv + j] + sk[i] * sv[j];
        S[(size_t)i * Dv + j] = s;
        acc += sq[i] * s;
    }
    red[threadIdx.x] = acc;
    __syncthreads();
    if (y == 0) {
        for (unsigned u = 1; u < ny; u++) acc += red[u * Dv + j];
        out[bh * Dv + j] = scale * acc;
    }
}

// ---- gated RMSNorm (mesanet.h's mn_rmsnorm_gated_*), one warp per row --------------------------
__global__ void mn__k_rmsnorm_gated_fwd(float* out, float* rstd, const float* inp, const float* gate, const float* w,
                                        size_t N, size_t C, float eps) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + row * C, *z = gate + row * C;
    float ss = 0.f;
    for (size_t c = lane; c < C; c += 32) ss += x[c] * x[c];
    ss = mn__warp_sum(ss);
    float r = 1.f / sqrtf(ss / (float)C + eps);
    for (size_t c = lane; c < C; c += 32) out[row * C + c] = x[c] * r * w[c] * (z[c] / (1.f + expf(-z[c])));
    if (lane == 0) rstd[row] = r;
}
// forward: y = n w s(z), n = x r, s = silu: with dn = dy w s(z), dx = r (dn - n mean(dn n)),
// dz = dy n w s'(z), s'(z) = sig(z) (1 + z (1 - sig(z))); dw is the column sum of dy n s(z) (mode 2)
__global__ void mn__k_rmsnorm_gated_bwd(float* dinp, float* dgate, const float* dout, const float* rstd,
                                        const float* inp, const float* gate, const float* w, size_t N, size_t C,
                                        int acc) {
    size_t row = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + row * C, *z = gate + row * C, *dy = dout + row * C;
    float r = rstd[row], dot = 0.f;
    for (size_t c = lane; c < C; c += 32) {
        const float sg = 1.f / (1.f + expf(-z[c]));
        dot += dy[c] * w[c] * z[c] * sg * x[c] * r;
    }
    dot = mn__warp_sum(dot) / (float)C;
    for (size_t c = lane; c < C; c += 32) {
        const float sg = 1.f / (1.f + expf(-z[c])), nx = x[c] * r, dn = dy[c] * w[c] * z[c] * sg;
        const float gx = r * (dn - nx * dot), gz = dy[c] * nx * w[c] * sg * (1.f + z[c] * (1.f - sg));
        dinp[row * C + c] = acc ? dinp[row * C + c] + gx : gx;
        dgate[row * C + c] = acc ? dgate[row * C + c] + gz : gz;
    }
}
int mn_cuda_rmsnorm_gated_forward(mn_cuda_ctx* ctx, float* out, float* rstd, const float* inp, const float* gate,
                                  const float* weight, size_t N, size_t C, double eps) {
    if (N == 0) return MN_OK;
    mn__k_rmsnorm_gated_fwd<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(out, rstd, inp, gate, weight, N, C,
                                                                             (float)eps);
    MN__LAUNCHED();
    return MN_OK;
}
static int mn__rmsnorm_gated_backward(mn_cuda_ctx* ctx, float* dinp, float* dgate, float* dweight, const float* dout,
                                      const float* rstd, const float* inp, const float* gate, const float* weight,
                                      size_t N, size_t C, int acc) {
    if (N == 0) return MN_OK;
    mn__k_rmsnorm_gated_bwd<<<(unsigned)((N + 7) / 8), 256, 0, MN__STREAM>>>(dinp, dgate, dout, rstd, inp, gate,
                                                                             weight, N, C, acc);
    MN__LAUNCHED();
    return mn__colsum_gated(ctx, dweight, dout, inp, rstd, gate, N, C);
}
int mn_cuda_rmsnorm_gated_backward(mn_cuda_ctx* ctx, float* dinp, float* dgate, float* dweight, const float* dout,
                                   const float* rstd, const float* inp, const float* gate, const float* weight,
                                   size_t N, size_t C) {
    return mn__rmsnorm_gated_backward(ctx, dinp, dgate, dweight, dout, rstd, inp, gate, weight, N, C, 1);
}

// ---- drivers ----------------------------------------------------------------------------------
typedef struct mn__gla_ws { float *S, *dS, *P, *dP, *dgl, *ctot, *rsd, *gam, *span; } mn__gla_ws;
// The workspace in two parts: the forward's (the chunk states S, the scores P, the cumulative gates gam (B,T,H,Gw)
// and their spans) from fbase, the backward's (dS, dP, dgl, ctot, rsd) from bbase, or right after the forward's
// when bbase is NULL (one buffer, gam at Gw = D: mn_cuda_gla_work_size). The kept form
// (mn_cuda_gla_forward_keep) puts the forward's part in the caller's keep buffer (Gw = G), so that the backward
// reads S, P and gam there instead of recomputing them. Returns the end of the backward's part; *nf (may be
// NULL) the size of the forward's.
static size_t mn__gla_layout2(mn__gla_ws* w, float* fbase, float* bbase, size_t B, size_t T, size_t H, size_t D,
                              size_t Gw, size_t* nf) {
    size_t NT = (T + MN__GC - 1) / MN__GC, BH = B * H, E = D * D, off = 0;
    float* base = fbase;
#define MN__GP(ptr, n) do { w->ptr = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)
    MN__GP(S, BH * (NT + 1) * E); MN__GP(P, BH * NT * MN__GC * MN__GC);   // the forward's part first
    MN__GP(gam, B * T * H * Gw); MN__GP(span, BH * NT);                     // (B,T,H,G) for any G <= Gw
    if (nf) *nf = off;
    if (bbase) { base = bbase; off = 0; }
    MN__GP(dS, BH * NT * E); MN__GP(dP, BH * NT * MN__GC * MN__GC); MN__GP(dgl, B * T * H * D);
    MN__GP(ctot, BH * NT * D); MN__GP(rsd, BH * D);
#undef MN__GP
    return off;
}
static size_t mn__gla_layout(mn__gla_ws* w, float* base, size_t B, size_t T, size_t H, size_t D) {
    return mn__gla_layout2(w, base, NULL, B, T, H, D, D, NULL);
}
// the layout a call uses: keep NULL, the whole workspace in work; else the forward's part in keep (gam at G)
// and the backward's in work
static void mn__gla_ws_at(mn__gla_ws* w, float* work, const float* keep, size_t B, size_t T, size_t H, size_t D,
                          size_t G) {
    if (keep) mn__gla_layout2(w, (float*)keep, work, B, T, H, D, G, NULL);
    else mn__gla_layout(w, work, B, T, H, D);
}
size_t mn_cuda_gla_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C) {
    mn__gla_ws w;
    (void)Dv; (void)C;
    return mn__gla_layout(&w, NULL, B, T, H, Dk);
}
size_t mn_cuda_gla_keep_size(size_t B, size_t T, size_t H, size_t Dk, size_t G) {
    mn__gla_ws w;
    size_t nf = 0;
    mn__gla_layout2(&w, NULL, NULL, B, T, H, Dk, G, &nf);
    return nf;
}
static int mn__gla_check(mn_cuda_ctx* ctx, const char* who, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                         size_t G, size_t C, const void* const* p, int np) {
    if (Dk != Dv || (Dk != 64 && Dk != 128))
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk == Dv in {64, 128}", __LINE__);
    if (G != 0 && G != 1 && G != Dk) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs G in {0, 1, Dk}", __LINE__);
    if (C != MN__GC) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs chunk 64", __LINE__);
    if (B * H > 65535 || B * H == 0 || T == 0) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs 0 < B*H <= 65535, T > 0",
                                                                __LINE__);
    for (int i = 0; i < np; i++)
        if ((uintptr_t)p[i] % 16) return mn__fail(ctx, MN_ERR_CONFIG, who, "tensors must be 16-byte aligned", __LINE__);
    return MN_OK;
}
template <class K> static int mn__gla_smem_attr(mn_cuda_ctx* ctx, K kern, size_t smem) {
    MN__CU(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return MN_OK;
}
// the kernels of one (D, GM, X3); which: 0 forward scan, 1 reverse scan, 2 scores (P or dP), 3 out, 4 dv, 5 dq/dk
template <int D, int GM, bool X3>
static int mn__gla_launch(mn_cuda_ctx* ctx, int which, const mn__gla_args& a, float* P, const float* Qp,
                          const float* Kp) {
    static int set[6];
    const size_t BH = (size_t)a.B * a.H;
    const dim3 gs(D / 64, (unsigned)BH, D / 64), gc(a.NT, (unsigned)BH), gt(a.NT, (unsigned)BH, D / 64);
    size_t smem;
    switch (which) {
    case 0: case 1:
        smem = (size_t)2 * mn__gla_scan_stage<D, GM>() * sizeof(float);
        if (which == 0) {
            if (!set[0]) { MN__TRY(mn__gla_smem_attr(ctx, mn__k_gla_scan<D, GM, false, X3>, smem)); set[0] = 1; }
            mn__k_gla_scan<D, GM, false, X3><<<gs, 128, smem, MN__STREAM>>>(a);
        } else {
            if (!set[1]) { MN__TRY(mn__gla_smem_attr(ctx, mn__k_gla_scan<D, GM, true, X3>, smem)); set[1] = 1; }
            mn__k_gla_scan<D, GM, true, X3><<<gs, 128, smem, MN__STREAM>>>(a);
        }
        break;
    case 2:
        smem = mn__gla_scores_smem<D, GM>();
        if (!set[2]) { MN__TRY(mn__gla_smem_attr(ctx, mn__k_gla_scores<D, GM, X3>, smem)); set[2] = 1; }
        mn__k_gla_scores<D, GM, X3><<<gc, 256, smem, MN__STREAM>>>(P, Qp, Kp, a.gam, a.span, a.blocks, a.T, a.H, a.NT,
                                                                    a.scale);
        break;
    case 3:
        smem = mn__gla_out_smem<D, GM>();
        if (!set[3]) { MN__TRY(mn__gla_smem_attr(ctx, mn__k_gla_out<D, GM, X3>, smem)); set[3] = 1; }
        mn__k_gla_out<D, GM, X3><<<gt, 256, smem, MN__STREAM>>>(a);
        break;
    case 4:
        smem = mn__gla_dv_smem<D, GM>();
        if (!set[4]) { MN__TRY(mn__gla_smem_attr(ctx, mn__k_gla_dv<D, GM, X3>, smem)); set[4] = 1; }
        mn__k_gla_dv<D, GM, X3><<<gt, 256, smem, MN__STREAM>>>(a);
        break;
    default:
        smem = mn__gla_dqk_smem<D, GM>();
        if (!set[5]) { MN__TRY(mn__gla_smem_attr(ctx, mn__k_gla_dqk<D, GM, X3>, smem)); set[5] = 1; }
        mn__k_gla_dqk<D, GM, X3><<<gt, 256, smem, MN__STREAM>>>(a);
        break;
    }
    MN__LAUNCHED();
    return MN_OK;
}
template <int D>
static int mn__gla_run_d(mn_cuda_ctx* ctx, int which, int gm, const mn__gla_args& a, float* P, const float* Qp,
                         const float* Kp) {
    const bool x3 = ctx->math == MN_CUDA_MATH_FP32;   // 3xTF32 in fp32 mode; plain TF32 in the TF32 and bf16 modes
    switch (gm * 2 + x3) {
    case 0: return mn__gla_launch<D, 0, false>(ctx, which, a, P, Qp, Kp);
    case 1: return mn__gla_launch<D, 0, true>(ctx, which, a, P, Qp, Kp);
    case 2: return mn__gla_launch<D, 1, false>(ctx, which, a, P, Qp, Kp);
    case 3: return mn__gla_launch<D, 1, true>(ctx, which, a, P, Qp, Kp);
    case 4: return mn__gla_launch<D, 2, false>(ctx, which, a, P, Qp, Kp);
    default: return mn__gla_launch<D, 2, true>(ctx, which, a, P, Qp, Kp);
    }
}
static int mn__gla_run(mn_cuda_ctx* ctx, int which, size_t D, int gm, const mn__gla_args& a, float* P = NULL,
                       const float* Qp = NULL, const float* Kp = NULL) {
    return D == 64 ? mn__gla_run_d<64>(ctx, which, gm, a, P, Qp, Kp) : mn__gla_run_d<128>(ctx, which, gm, a, P, Qp, Kp);
}
static mn__gla_args mn__gla_args_of(const mn__gla_ws* w, size_t B, size_t T, size_t H, double scale) {
    mn__gla_args a;
    memset(&a, 0, sizeof a);
    a.S = w->S; a.dS = w->dS; a.P = w->P; a.dP = w->dP; a.dgl = w->dgl; a.ctot = w->ctot; a.gam = w->gam;
    a.span = w->span;
    a.B = (unsigned)B; a.T = (unsigned)T; a.H = (unsigned)H; a.NT = (unsigned)((T + MN__GC - 1) / MN__GC);
    a.scale = (float)scale;
    return a;
}
// the cumulative gates and spans every later kernel reads (nothing for G = 0)
static int mn__gla_prep(mn_cuda_ctx* ctx, const mn__gla_ws* w, const mn__gla_args& a, const float* g, size_t G) {
    if (G == 0) return MN_OK;
    mn__k_gla_gam<<<dim3(a.NT, a.B * a.H), (unsigned)(G < 32 ? 32 : G), 0, MN__STREAM>>>(w->gam, w->span, g, a.T, a.H,
                                                                                      a.NT, (int)G);
    MN__LAUNCHED();
    return MN_OK;
}
// keep NULL: the whole workspace in work; else the forward's part in keep (mn__gla_layout2), work unused
static int mn__gla_forward(mn_cuda_ctx* ctx, float* out, float* ht, const float* q, const float* k, const float* v,
                           const float* g, const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                           size_t G, double scale, size_t C, float* work, float* keep) {
    const char* who = keep ? "mn_cuda_gla_forward_keep" : "mn_cuda_gla_forward";
    const void* al[7] = { out, q, k, v, work, G == Dk ? g : NULL, keep };
    MN__TRY(mn__gla_check(ctx, who, B, T, H, Dk, Dv, G, C, al, 7));
    if (!(keep ? keep : work)) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs its workspace", __LINE__);
    mn__gla_ws w;
    mn__gla_ws_at(&w, work, keep, B, T, H, Dk, G);
    mn__gla_args a = mn__gla_args_of(&w, B, T, H, scale);
    const int gm = G == 0 ? 0 : G == 1 ? 1 : 2;
    a.q = q; a.k = k; a.v = v; a.g = g; a.h0 = h0; a.out = out; a.ht = ht; a.blocks = ctx->gla_blocks;
    MN__TRY(mn__gla_prep(ctx, &w, a, g, G));
    MN__TRY(mn__gla_run(ctx, 0, Dk, gm, a));
    MN__TRY(mn__gla_run(ctx, 2, Dk, gm, a, w.P, q, k));
    return mn__gla_run(ctx, 3, Dk, gm, a);
}
int mn_cuda_gla_forward(mn_cuda_ctx* ctx, float* out, float* ht, const float* q, const float* k, const float* v,
                        const float* g, const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
                        double scale, size_t C, float* work) {
    return mn__gla_forward(ctx, out, ht, q, k, v, g, h0, B, T, H, Dk, Dv, G, scale, C, work, NULL);
}
int mn_cuda_gla_forward_keep(mn_cuda_ctx* ctx, float* out, float* ht, float* keep, const float* q, const float* k,
                             const float* v, const float* g, const float* h0, size_t B, size_t T, size_t H, size_t Dk,
                             size_t Dv, size_t G, double scale, size_t C) {
    if (!keep) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_gla_forward_keep", "needs keep", __LINE__);
    return mn__gla_forward(ctx, out, ht, q, k, v, g, h0, B, T, H, Dk, Dv, G, scale, C, NULL, keep);
}
// keep NULL: the cumulative gates, the states and P recomputed in work; else read from keep (the kept form's
// forward wrote them there), the backward's part in work. acc as mn__gla_args.acc.
static int mn__gla_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dh0,
                            const float* dout, const float* dht, const float* q, const float* k, const float* v,
                            const float* g, const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                            size_t G, double scale, size_t C, float* work, int acc, const float* keep = NULL) {
    const char* who = keep ? "mn_cuda_gla_backward_keep" : "mn_cuda_gla_backward";
    const void* al[7] = { dout, q, k, v, work, G == Dk ? g : NULL, keep };
    MN__TRY(mn__gla_check(ctx, who, B, T, H, Dk, Dv, G, C, al, 7));
    if (!work) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs its workspace", __LINE__);
    mn__gla_ws w;
    mn__gla_ws_at(&w, work, keep, B, T, H, Dk, G);                 // with keep, S, P, gam, span only read
    mn__gla_args a = mn__gla_args_of(&w, B, T, H, scale);
    const int gm = G == 0 ? 0 : G == 1 ? 1 : 2;
    a.q = q; a.k = k; a.v = v; a.g = g; a.h0 = h0; a.dout = dout; a.dht = dht;
    a.dq = dq; a.dk = dk; a.dv = dv; a.dg = G ? dg : NULL; a.dh0 = dh0; a.acc = acc;
    a.dglocal = G == 1 && ctx->gla_dg == MN_CUDA_GLA_DG_LOCAL;
    a.rsd = dht && a.dg && !a.dglocal ? w.rsd : NULL; a.blocks = ctx->gla_blocks;
    if (!keep) {
        MN__TRY(mn__gla_prep(ctx, &w, a, g, G));                     // the cumulative gates again
        MN__TRY(mn__gla_run(ctx, 0, Dk, gm, a));                     // the states again
    }
    MN__TRY(mn__gla_run(ctx, 1, Dk, gm, a));                         // their gradients
    if (!keep) MN__TRY(mn__gla_run(ctx, 2, Dk, gm, a, w.P, q, k));  // P again
    {
        mn__gla_args d = a; d.scale = 1.f;                           // dP = dO V^T (no decay, no scale)
        MN__TRY(mn__gla_run(ctx, 2, Dk, 0, d, w.dP, dout, v));
    }
    MN__TRY(mn__gla_run(ctx, 4, Dk, gm, a));
    MN__TRY(mn__gla_run(ctx, 5, Dk, gm, a));
    if (a.dg) {
        const size_t BH = B * H;
        if (a.rsd) {
            mn__k_gla_rowdot<<<mn__grid(ctx, BH * Dk, 128), 128, 0, MN__STREAM>>>(w.rsd, w.S, dht, BH, a.NT, Dk);
            MN__LAUNCHED();
        }
        mn__k_gla_dg<<<dim3(a.NT, (unsigned)BH), (unsigned)Dk, 0, MN__STREAM>>>(a, (int)Dk, gm);
        MN__LAUNCHED();
    }
    return MN_OK;
}
int mn_cuda_gla_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dh0, const float* dout,
                         const float* dht, const float* q, const float* k, const float* v, const float* g,
                         const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G, double scale,
                         size_t C, float* work) {
    return mn__gla_backward(ctx, dq, dk, dv, dg, dh0, dout, dht, q, k, v, g, h0, B, T, H, Dk, Dv, G, scale, C, work, 1);
}
int mn_cuda_gla_backward_keep(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dh0,
                              const float* dout, const float* dht, const float* keep, const float* q, const float* k,
                              const float* v, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
                              double scale, size_t C, float* work) {
    if (!keep) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_gla_backward_keep", "needs keep", __LINE__);
    return mn__gla_backward(ctx, dq, dk, dv, dg, dh0, dout, dht, q, k, v, NULL, NULL, B, T, H, Dk, Dv, G, scale, C,
                            work, 1, keep);
}
int mn_cuda_gla_step(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k, const float* v,
                     const float* g, size_t B, size_t H, size_t Dk, size_t Dv, size_t G, double scale) {
    if (G != 0 && G != 1 && G != Dk) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_gla_step", "needs G in {0, 1, Dk}",
                                                     __LINE__);
    if (Dk == 0 || Dv == 0 || Dv > 1024 || B * H == 0 || B * H > 0x7fffffff)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_gla_step", "needs 0 < Dv <= 1024, Dk > 0, B*H > 0", __LINE__);
    if (Dv % 32 == 0 && (uintptr_t)state % 16 == 0 && (uintptr_t)v % 16 == 0 && B * H <= 0x7fffffff) {
        const size_t smem4 = ((3 * Dk + 3) / 4 * 4 + 32 * 32) * sizeof(float);
        if (smem4 > 48 * 1024) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_gla_step", "head too large", __LINE__);
        mn__k_gla_step4<<<dim3((unsigned)(B * H), (unsigned)(Dv / 32)), 256, smem4, MN__STREAM>>>(
            out, state, q, k, v, g, (unsigned)Dk, (unsigned)Dv, (unsigned)G, (float)scale);
        MN__LAUNCHED();
        return MN_OK;
    }
    const unsigned threads = (unsigned)(Dv >= 256 ? Dv : 256 / Dv * Dv);
    const size_t smem = (3 * Dk + Dv + threads) * sizeof(float);
    if (smem > 48 * 1024) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_gla_step", "head too large", __LINE__);
    mn__k_gla_step<<<(unsigned)(B * H), threads, smem, MN__STREAM>>>(out, state, q, k, v, g, (unsigned)H,
                                                                     (unsigned)Dk, (unsigned)Dv, (unsigned)G,
                                                                     (float)scale);
    MN__LAUNCHED();
    return MN_OK;
}

// >>cuda_delta_rule
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
// only where the chunkwise form below does not apply (chunk < 16, Dv not a multiple of 16, no workspace)
// or where ctx->delta_form asks for it (MN_CUDA_DELTA_RECURRENT).

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
// (sequence, head, 16 value columns), the 16-column slice of S (or dS) in shared memory (or, where Dk and C are
// multiples of 16 and Dv of 32, mn__k_delta_chain_tc: 32 columns, the products on the tensor cores):
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
// Lays the workspace out at base (NULL: only the size); every piece starts at a multiple of 64 floats.
// split 1: the pieces the backward reads from the forward (kept = 1 below: the gathered inputs, the
// scalings, W, U, KK, P, L, A, the gates, V_new and every chunk's state S) go to keep instead, and
// *nkeep gets their size; the rest (the forward's scratch and the backward's own) stays at base.
static size_t mn__delta_cws_point(mn__delta_cws* w, float* base, float* keep, int split, size_t* nkeep, size_t Z,
                                  size_t C, size_t Dk, size_t Dv) {
    // shape: 0 (Z,C,Dk), 1 (Z,C,Dv), 2 (Z,C,C), 3 (Z,C), 4 (Z,Dk,Dv)
    const struct { float** p; int shape, kept; } pc[] = {
        { &w->Qc, 0, 1 }, { &w->Kc, 0, 1 }, { &w->Kg, 0, 1 }, { &w->Qg, 0, 1 }, { &w->Kd, 0, 1 }, { &w->W, 0, 1 },
        { &w->dKd, 0, 0 }, { &w->dQg, 0, 0 }, { &w->dW, 0, 0 }, { &w->dKg, 0, 0 }, { &w->dQc, 0, 0 },
        { &w->dKc, 0, 0 },
        { &w->Vc, 1, 1 }, { &w->U, 1, 1 }, { &w->Vn, 1, 1 }, { &w->dOc, 1, 0 }, { &w->Vb, 1, 0 }, { &w->X, 1, 0 },
        { &w->dVn, 1, 0 }, { &w->dVb, 1, 0 }, { &w->dVc, 1, 0 },
        { &w->KK, 2, 1 }, { &w->P, 2, 1 }, { &w->L, 2, 1 }, { &w->A, 2, 1 }, { &w->dP, 2, 0 }, { &w->dL, 2, 0 },
        { &w->bc, 3, 1 }, { &w->gam, 3, 1 }, { &w->eg, 3, 1 }, { &w->ed, 3, 1 }, { &w->dbc, 3, 0 }, { &w->dgc, 3, 0 },
        { &w->Sst, 4, 1 }, { &w->Y, 4, 0 }, { &w->dSe, 4, 0 } };
    const size_t n[5] = { Z * C * Dk, Z * C * Dv, Z * C * C, Z * C, Z * Dk * Dv };
    size_t off = 0, koff = 0;
    for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
        const size_t len = (n[pc[i].shape] + 63) / 64 * 64;
        if (split && pc[i].kept) { *pc[i].p = keep ? keep + koff : NULL; koff += len; }
        else { *pc[i].p = base ? base + off : NULL; off += len; }
    }
    if (nkeep) *nkeep = koff;
    return off;
}
static size_t mn__delta_chunk_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    mn__delta_cws w;
    if (chunk < 1) return 0;
    return mn__delta_cws_point(&w, NULL, NULL, 0, NULL, B * H * ((T + chunk - 1) / chunk), chunk, Dk, Dv);
}
size_t mn_cuda_delta_rule_keep_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    mn__delta_cws w;
    size_t nk = 0;
    if (chunk < 1) return 0;
    mn__delta_cws_point(&w, NULL, NULL, 1, &nk, B * H * ((T + chunk - 1) / chunk), chunk, Dk, Dv);
    return nk;
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
// ... and with this context's setting (mn__delta_rule_forward / _backward's choice)
static int mn__delta_chunk_taken(const mn_cuda_ctx* ctx, size_t T, size_t Dv, size_t chunk, const float* work) {
    return T > 0 && ctx->delta_form != MN_CUDA_DELTA_RECURRENT && mn__delta_chunk_applies(Dv, chunk, work);
}

// dst (Z,C,D) = rows of src (B,T,H,D) in chunk order, zero rows past T; z = (b H + h) NC + n, t = n C + r.
// I: the index type, 32-bit when every index fits (mn__delta_gather below): the five divisions per element are
// then 32-bit ones (a 64-bit division is a long software routine: ncu had these kernels at twice the time
// their bytes need, session 12)
template <typename I>
__global__ void mn__k_delta_gather(float* dst, const float* src, I n, I T, I H, I D, I NC, I C) {
    for (I e = blockIdx.x * (I)blockDim.x + threadIdx.x; e < n; e += (I)gridDim.x * blockDim.x) {
        const I zr = e / D, z = zr / C, d = e % D, r = zr % C, t = (z % NC) * C + r, bh = z / NC;
        dst[e] = t < T ? src[((bh / H * T + t) * H + bh % H) * D + d] : 0.f;
    }
}
// dst (B,T,H,D) += src (Z,C,D) (acc), or = (acc 0): the inverse of the gather over the real rows
template <typename I>
__global__ void mn__k_delta_scatter(float* dst, const float* src, I n, I T, I H, I D, I NC, I C, int acc) {
    for (I e = blockIdx.x * (I)blockDim.x + threadIdx.x; e < n; e += (I)gridDim.x * blockDim.x) {
        const I bt = e / (H * D), b = bt / T, t = bt % T, h = e / D % H, d = e % D;
        const I z = (b * H + h) * NC + t / C;
        const float x = src[(z * C + t % C) * D + d];
        dst[e] = acc ? dst[e] + x : x;
    }
}
// the launches: 32-bit indices when the chunk layout (Z,C,D) - the larger of the two - has fewer than 2^31 entries
// (so that no index, nor an index plus the grid's stride, wraps)
static void mn__delta_gather(mn_cuda_ctx* ctx, float* dst, const float* src, size_t Z, size_t T, size_t H, size_t D,
                             size_t NC, size_t C) {
    const size_t n = Z * C * D;
    if (n < ((size_t)1 << 31))
        mn__k_delta_gather<unsigned><<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(
            dst, src, (unsigned)n, (unsigned)T, (unsigned)H, (unsigned)D, (unsigned)NC, (unsigned)C);
    else
        mn__k_delta_gather<size_t><<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(dst, src, n, T, H, D, NC, C);
}
static void mn__delta_scatter(mn_cuda_ctx* ctx, float* dst, const float* src, size_t B, size_t T, size_t H, size_t D,
                              size_t NC, size_t C, int acc) {
    const size_t n = B * T * H * D;
    if (B * H * NC * C * D < ((size_t)1 << 31))
        mn__k_delta_scatter<unsigned><<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(
            dst, src, (unsigned)n, (unsigned)T, (unsigned)H, (unsigned)D, (unsigned)NC, (unsigned)C, acc);
    else
        mn__k_delta_scatter<size_t><<<mn__grid(ctx, n, 256), 256, 0, MN__STREAM>>>(dst, src, n, T, H, D, NC, C, acc);
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
// O1 and 8 of St, in registers). Per chunk n (ascending, or descending when rev), z = bh NC + n:
//   Sst[z] = St (the state entering the chunk) ; O1 = A1 + s1 M1 St ; St <- e_last St + Y + s2 M2^T O1
// O1, A1 (Z,C,Dv); M1, M2 (Z,C,Dk); Y (Z,Dk,Dv) or NULL; eg (Z,C) (e_last its last entry); s0 (B H,Dk,Dv)
// the starting St or NULL (zeros); fin (B H,Dk,Dv) or NULL: the final St, written (acc 0) or added.
// M1 and M2 are read in groups of MN__DELTA_RS rows, each group first copied into shared memory by the whole
// block (coalesced, 16-byte loads where aligned; rows padded to Dk + 4 floats so that the two rows a warp reads
// fall in different banks). Reading them from global memory inside the loops instead made every chunk wait on
// about a thousand dependent L2 loads per thread (ncu, session 12: this kernel was 57 % of `bench_cuda delta`,
// 69 us a chunk). The multiply-adds and their order are the same as there, so the results are bitwise equal.
// Dynamic shared memory: (Dk + C) 16 + MN__DELTA_RS (Dk + 4) floats (29 KB at Dk = 128, C = 64); its 48
// registers (ptxas) leave 5 blocks an SM, so the anchor layer's 640 blocks run in one wave on 132 SMs.
#define MN__DELTA_RS 32         // rows of M1 / M2 staged at once (2 of a thread's rows in phase 1)
// rows [r0, r1) of the chunk's M (C,Dk) into Mb (rows of Dk + 4 floats)
__device__ __forceinline__ void mn__delta_stage(float* Mb, const float* M, int r0, int r1, int Dk) {
    const int LD = Dk + 4, n = (r1 - r0) * Dk;
    const float* src = M + (size_t)r0 * Dk;
    if ((Dk & 3) == 0 && ((uintptr_t)src & 15) == 0) {   // every row whole float4s (Dk a multiple of 16)
        for (int e = threadIdx.x * 4; e < n; e += 256 * 4) {
            const int r = e / Dk, c = e % Dk;
            *(float4*)(Mb + r * LD + c) = __ldg((const float4*)(src + e));
        }
    } else {
        for (int e = threadIdx.x; e < n; e += 256) Mb[(e / Dk) * LD + e % Dk] = __ldg(src + e);
    }
}
__global__ void __launch_bounds__(256) mn__k_delta_chain(float* O1, float* Sst, float* fin, const float* A1,
                                                         const float* M1, const float* M2, const float* Y,
                                                         const float* eg, const float* s0, int NC, int C, int Dk,
                                                         int Dv, float s1, float s2, int rev, int acc) {
    extern __shared__ float mn__delta_chs[];                 // St (Dk,16), O1's slice (C,16), Mb (RS,Dk+4)
    float *St = mn__delta_chs, *Ob = mn__delta_chs + (size_t)Dk * MN__DELTA_CW, *Mb = Ob + (size_t)C * MN__DELTA_CW;
    const int cj = threadIdx.x % MN__DELTA_CW, rw = threadIdx.x / MN__DELTA_CW, RG = 256 / MN__DELTA_CW;
    const int LD = Dk + 4;
    const size_t bh = blockIdx.x, col = (size_t)blockIdx.y * MN__DELTA_CW + cj, ns = (size_t)Dk * Dv;
    for (int d = rw; d < Dk; d += RG) St[d * MN__DELTA_CW + cj] = s0 ? s0[bh * ns + (size_t)d * Dv + col] : 0.f;
    for (int it = 0; it < NC; it++) {
        const size_t z = bh * NC + (rev ? NC - 1 - it : it);
        const float *m1 = M1 + z * C * Dk, *m2 = M2 + z * C * Dk;
        for (int d = rw; d < Dk; d += RG) Sst[z * ns + (size_t)d * Dv + col] = St[d * MN__DELTA_CW + cj];
        // O1 rows r = rw + 16 m (m < 4 covers C <= 64) = A1 + s1 M1 St: each St value read once for 4 rows;
        // row group g (rows 32 g .. 32 g + 31) holds the thread's rows m = 2 g and 2 g + 1
        float a[8] = { 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f };
#pragma unroll
        for (int g = 0; g < 2; g++) {
            const int r0 = g * MN__DELTA_RS;
            if (r0 >= C) break;
            __syncthreads();                                 // St written (previous chunk); Mb free
            mn__delta_stage(Mb, m1, r0, min(C, r0 + MN__DELTA_RS), Dk);
            __syncthreads();
            for (int d = 0; d < Dk; d++) {
                const float sv = St[d * MN__DELTA_CW + cj];
#pragma unroll
                for (int mm = 0; mm < 2; mm++) {
                    const int r = rw + RG * (2 * g + mm);
                    if (r < C) a[2 * g + mm] = fmaf(Mb[(r - r0) * LD + d], sv, a[2 * g + mm]);
                }
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
        const float el = eg[z * C + C - 1];
        // St rows d = rw + 16 m (m < 8 covers Dk <= 128) <- e_last St + Y + s2 (M2^T O1): each O1 value read
        // once; the rows r of M2 in ascending order, a group of 32 at a time
#pragma unroll
        for (int m = 0; m < 8; m++) a[m] = 0.f;
        for (int r0 = 0; r0 < C; r0 += MN__DELTA_RS) {
            const int r1 = min(C, r0 + MN__DELTA_RS);
            __syncthreads();                                 // Ob complete; every read of Mb and St done
            mn__delta_stage(Mb, m2, r0, r1, Dk);
            __syncthreads();
            for (int r = r0; r < r1; r++) {
                const float ov = Ob[r * MN__DELTA_CW + cj];
                const float* mr = Mb + (r - r0) * LD;
#pragma unroll
                for (int m = 0; m < 8; m++) {
                    const int d = rw + RG * m;
                    if (d < Dk) a[m] = fmaf(mr[d], ov, a[m]);
                }
            }
        }
#pragma unroll
        for (int m = 0; m < 8; m++) {
            const int d = rw + RG * m;
            if (d < Dk) {   // the thread's own entries of St: no other thread reads them before the next sync
                float x = el * St[d * MN__DELTA_CW + cj];
                if (Y) x += Y[z * ns + (size_t)d * Dv + col];
                St[d * MN__DELTA_CW + cj] = fmaf(s2, a[m], x);
            }
        }
    }
    if (fin)
        for (int d = rw; d < Dk; d += RG) {
            float* p = fin + bh * ns + (size_t)d * Dv + col;
            *p = acc ? *p + St[d * MN__DELTA_CW + cj] : St[d * MN__DELTA_CW + cj];
        }
}
// The chain on the tensor cores, chosen by mn__delta_chain where Dk <= 128 and Dk, C are multiples of 16 and Dv
// of 32: the recurrence and the arguments of mn__k_delta_chain, one block per (sequence and head, 32 value
// columns), both products of a chunk by mma.sync m16n8k8 in 3xTF32 (mn__gla_mma; fp32-level, so the state keeps
// the FMA kernel's accuracy: TF32 alone would round every chunk's state product to ~3e-4 and the state would
// carry that to the end of the sequence). The FMA kernel spent most of its time waiting for M1 and M2 after a
// barrier (their loads from L2 sat on the chain's critical path though they never depend on the state); here
// they stream through a ring of two MN__DELTA_RS-row pieces by cp.async, the next piece in flight while this
// one is multiplied. Pieces 0 .. P-1 of a chunk are M1's rows (phase 1), pieces P .. 2P-1 M2's (phase 2):
//   phase 1, M1 piece p: warp w's tile is O1's rows 32 p + 16 (w % 2) + [0,16) x columns 8 (w / 2) + [0,8),
//            K = Dk; O1 = A1 + s1 acc goes to global memory and to Ob (C rows of 32 + 8) for phase 2
//   phase 2, M2 piece p: warp w < Dk/16 accumulates rows 16 w + [0,16) x all 32 columns of M2^T O1 over the
//            piece's rows; after the chunk's last piece St <- e_last St + Y + s2 acc (each thread its own entries)
// Row strides are padded so that the fragments' 32 lanes fall in 32 banks: St and Ob 40 floats, M1's rows
// Dk + 4, M2's Dk + 8. Dynamic shared memory: 40 (Dk + C) + 2 MN__DELTA_RS (Dk + 8) floats, 64 KB at Dk = 128,
// C = 64, and __launch_bounds__(256, 3) holds the registers to 80 (ptxas, no spills; 99 without, which left 2
// blocks an SM): 3 blocks an SM, so the anchor layer's 320 blocks run in one wave on 132 SMs.
#define MN__DELTA_TCW 32        // value columns per block of the tensor-core chain
#define MN__DELTA_TSL (MN__DELTA_TCW + 8)
__global__ void __launch_bounds__(256, 3) mn__k_delta_chain_tc(float* O1, float* Sst, float* fin, const float* A1,
                                                            const float* M1, const float* M2, const float* Y,
                                                            const float* eg, const float* s0, int NC, int C, int Dk,
                                                            int Dv, float s1, float s2, int rev, int acc) {
    extern __shared__ __align__(16) float mn__delta_tcs[];   // St (Dk,40), Ob (C,40), ring 2 x (RS,Dk+8)
    const int SL = MN__DELTA_TSL, RS = MN__DELTA_RS, PL = RS * (Dk + 8);
    float *St = mn__delta_tcs, *Ob = St + Dk * SL, *ring = Ob + C * SL;
    const int w = threadIdx.x >> 5, P = (C + RS - 1) / RS, PP = 2 * P, NQ = NC * PP;
    const size_t bh = blockIdx.x, c0 = (size_t)blockIdx.y * MN__DELTA_TCW, ns = (size_t)Dk * Dv;
    auto chunk = [&](int q) { const int it = q / PP; return bh * NC + (rev ? NC - 1 - it : it); };
    auto issue = [&](int q) {   // piece q of the chain into ring buffer q % 2
        const int pc = q % PP, ph = pc >= P, p = pc - ph * P, rows = min(RS, C - p * RS), d4 = Dk / 4;
        const int ld = ph ? Dk + 8 : Dk + 4;
        const float* src = (ph ? M2 : M1) + (chunk(q) * C + (size_t)p * RS) * Dk;
        float* dst = ring + (q & 1) * PL;
        for (int e = threadIdx.x; e < rows * d4; e += 256) mn__cp16(dst + (e / d4) * ld + 4 * (e % d4), src + 4 * e);
        mn__cp_commit();
    };
    for (int e = threadIdx.x; e < Dk * MN__DELTA_TCW; e += 256) {
        const int d = e / MN__DELTA_TCW, c = e % MN__DELTA_TCW;
        St[d * SL + c] = s0 ? s0[bh * ns + (size_t)d * Dv + c0 + c] : 0.f;
    }
    float cs[4][4];                                          // phase 2's accumulators (warp w's 16 rows x 32)
    issue(0);
    for (int q = 0; q < NQ; q++) {
        const int pc = q % PP, ph = pc >= P, p = pc - ph * P, rows = min(RS, C - p * RS);
        const size_t z = chunk(q);
        if (q + 1 < NQ) { issue(q + 1); mn__cp_wait<1>(); }
        else mn__cp_wait<0>();
        __syncthreads();                                     // piece q has landed; St / Ob of the last piece written
        const float* pb = ring + (q & 1) * PL;
        if (pc == 0) {                                       // a chunk begins: its entering state, fresh sums
            for (int e = threadIdx.x; e < Dk * MN__DELTA_TCW; e += 256) {
                const int d = e / MN__DELTA_TCW, c = e % MN__DELTA_TCW;
                Sst[z * ns + (size_t)d * Dv + c0 + c] = St[d * SL + c];
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) cs[j][e] = 0.f;
        }
        if (!ph) {
            const int rt = w & 1, ct = w >> 1;
            if (16 * rt < rows) {
                float c[1][4] = { { 0.f, 0.f, 0.f, 0.f } };
                const float* a = pb + 16 * rt * (Dk + 4);
                mn__gla_mma<1, true>(c, 0, Dk, 1, [&](int m, int k) { return a[m * (Dk + 4) + k]; },
                                     [&](int k, int n) { return St[k * SL + 8 * ct + n]; });
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = p * RS + 16 * rt + mn__gla_er(e), col = 8 * ct + mn__gla_ec(0, e);
                    const size_t o = (z * C + r) * Dv + c0 + col;
                    const float x = fmaf(s1, c[0][e], A1[o]);
                    Ob[r * SL + col] = x;
                    O1[o] = x;
                }
            }
        } else if (w < Dk / 16) {
            const float* ob = Ob + p * RS * SL;
            mn__gla_mma<4, true>(cs, 0, rows, 4, [&](int m, int k) { return pb[k * (Dk + 8) + 16 * w + m]; },
                                 [&](int k, int n) { return ob[k * SL + n]; });
            if (pc == PP - 1) {                              // the state update, each entry by its one owner
                const float el = eg[z * C + C - 1];
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int d = 16 * w + mn__gla_er(e), col = mn__gla_ec(j, e);
                        float x = el * St[d * SL + col];
                        if (Y) x += Y[z * ns + (size_t)d * Dv + c0 + col];
                        St[d * SL + col] = fmaf(s2, cs[j][e], x);
                    }
            }
        }
        __syncthreads();                                     // every read of buffer q % 2 done before issue(q + 2)
    }
    if (fin)
        for (int e = threadIdx.x; e < Dk * MN__DELTA_TCW; e += 256) {
            const int d = e / MN__DELTA_TCW, c = e % MN__DELTA_TCW;
            float* f = fin + bh * ns + (size_t)d * Dv + c0 + c;
            *f = acc ? *f + St[d * SL + c] : St[d * SL + c];
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
    mn__delta_gather(ctx, w->Qc, q, Z, T, H, Dk, NC, C);
    mn__delta_gather(ctx, w->Kc, k, Z, T, H, Dk, NC, C);
    mn__delta_gather(ctx, w->Vc, v, Z, T, H, Dv, NC, C);
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
    if (ctx->delta_chain != MN_CUDA_CHAIN_FMA && Dk % 16 == 0 && Dk <= 128 && C % 16 == 0 && C <= MN__DELTA_MAXC &&
        Dv % MN__DELTA_TCW == 0) {
        static int attr = 0;   // the largest case's shared memory (Dk = 128, C = MN__DELTA_MAXC), once
        auto bytes = [](size_t dk, size_t c) { return (MN__DELTA_TSL * (dk + c) + 2 * MN__DELTA_RS * (dk + 8)) * 4; };
        if (!attr) {
            MN__CU(cudaFuncSetAttribute(mn__k_delta_chain_tc, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes(128, MN__DELTA_MAXC)));
            attr = 1;
        }
        const size_t smem = bytes(Dk, C);
        dim3 grid((unsigned)BH, (unsigned)(Dv / MN__DELTA_TCW));
        mn__k_delta_chain_tc<<<grid, 256, smem, MN__STREAM>>>(O1, Sst, fin, A1, M1, M2, Y, eg, s0, (int)NC, (int)C,
                                                              (int)Dk, (int)Dv, s1, s2, rev, acc);
        MN__LAUNCHED();
        return MN_OK;
    }
    const size_t smem = ((Dk + C) * MN__DELTA_CW + MN__DELTA_RS * (Dk + 4)) * sizeof(float);
    dim3 grid((unsigned)BH, (unsigned)(Dv / MN__DELTA_CW));
    mn__k_delta_chain<<<grid, 256, smem, MN__STREAM>>>(O1, Sst, fin, A1, M1, M2, Y, eg, s0, (int)NC, (int)C, (int)Dk,
                                                        (int)Dv, s1, s2, rev, acc);
    MN__LAUNCHED();
    return MN_OK;
}
// The chunkwise forward (mesanet.h's mn_delta_rule_forward); z0 as the recurrent form's. keep (or NULL):
// where the pieces its backward reads go (mn__delta_cws_point's split), so that the backward need not
// recompute them; the same products in the same order either way (the outputs are bitwise the same).
static int mn__delta_rule_forward_chunk(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q,
                                        const float* k, const float* v, const float* beta, const float* g,
                                        const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                        size_t C, double scale, float* work, float* keep, int z0) {
    const size_t NC = (T + C - 1) / C, Z = B * H * NC, CK = C * Dk, CV = C * Dv, CC = C * C, ns = Dk * Dv;
    mn__delta_cws w;
    mn__delta_cws_point(&w, work, keep, keep != NULL, NULL, Z, C, Dk, Dv);
    MN__TRY(mn__delta_chunk_prep(ctx, &w, q, k, v, beta, g, B, T, H, Dk, Dv, C, scale));
    // passes 4 and 6 in chunk order: V_new = U - W S ; S <- e^gam_last S + Kd^T V_new (Sst: every chunk's S)
    MN__TRY(mn__delta_chain(ctx, w.Vn, w.Sst, ht, w.U, w.W, w.Kd, NULL, w.eg, h0, B * H, NC, C, Dk, Dv, -1.f, 1.f, 0,
                            0));
    // pass 5: O = Qg S + P V_new, all chunks at once, then back to (B,T,H,Dv)
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, Dk, 1.f, w.Qg, Dk, CK, w.Sst, Dv, ns, 0.f, w.X, Dv, CV, Z));
    MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, C, 1.f, w.P, C, CC, w.Vn, Dv, CV, 1.f, w.X, Dv, CV, Z));
    mn__delta_scatter(ctx, out, w.X, B, T, H, Dv, NC, C, 0);
    MN__LAUNCHED();
    if (hs) {
        mn__k_delta_hs<<<mn__grid(ctx, Z * ns, 256), 256, 0, MN__STREAM>>>(hs, w.Sst, B * H, (int)NC, ns, z0, 1);
        MN__LAUNCHED();
    }
    return MN_OK;
}
// The chunkwise backward (mesanet.h's mn_delta_rule_backward): passes 1-4 recomputed from hs (or, with keep,
// read from what the forward left there: the gathers, the WY products, V_new and the states), the dS chain in
// reverse chunk order, then the adjoints of all chunks at once. With keep, q k v beta g and hs are not read
// (NULL is fine) and dg is written when given.
static int mn__delta_rule_backward_chunk(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                         float* dh0, const float* dout, const float* dht, const float* hs,
                                         const float* q, const float* k, const float* v, const float* beta,
                                         const float* g, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C,
                                         double scale, float* work, const float* keep, int z0) {
    const size_t NC = (T + C - 1) / C, Z = B * H * NC, CK = C * Dk, CV = C * Dv, CC = C * C, ns = Dk * Dv;
    mn__delta_cws w;
    mn__delta_cws_point(&w, work, (float*)keep, keep != NULL, NULL, Z, C, Dk, Dv);
    if (!keep) MN__TRY(mn__delta_chunk_prep(ctx, &w, q, k, v, beta, g, B, T, H, Dk, Dv, C, scale));
    mn__delta_gather(ctx, w.dOc, dout, Z, T, H, Dv, NC, C);
    MN__LAUNCHED();
    if (!keep) {   // the states from hs and pass 4 recomputed: V_new = U - W S (keep: the forward's own, as they were)
        if (hs) {
            mn__k_delta_hs<<<mn__grid(ctx, Z * ns, 256), 256, 0, MN__STREAM>>>((float*)hs, w.Sst, B * H, (int)NC, ns,
                                                                              z0, 0);
            MN__LAUNCHED();
        } else MN__CU(cudaMemsetAsync(w.Sst, 0, Z * ns * sizeof(float), MN__STREAM));   // z0 and one chunk
        MN__CU(cudaMemcpyAsync(w.Vn, w.U, Z * CV * sizeof(float), cudaMemcpyDeviceToDevice, MN__STREAM));
        MN__TRY(mn__gemm(ctx, 0, 0, C, Dv, Dk, -1.f, w.W, Dk, CK, w.Sst, Dv, ns, 1.f, w.Vn, Dv, CV, Z));
    }
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
    float* dst[5] = { dq, dk, dv, dbeta, g || keep ? dg : NULL };
    const size_t wd[5] = { Dk, Dk, Dv, 1, 1 };   // each one's width: rows of Dk, Dk, Dv, 1, 1
    for (int i = 0; i < 5; i++) {
        if (!dst[i]) continue;
        mn__delta_scatter(ctx, dst[i], src[i], B, T, H, wd[i], NC, C, 1);
        MN__LAUNCHED();
    }
    return MN_OK;
}
// The op's internal forms with z0 (see mn__delta_rule_forward_rec): the chunkwise form where it applies; keep
// (or NULL) as mn__delta_rule_forward_chunk's, used only there (the recurrent form ignores it and needs hs)
static int mn__delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                                  const float* v, const float* beta, const float* g, const float* h0, size_t B,
                                  size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work,
                                  float* keep, int z0) {
    if (!mn__delta_chunk_taken(ctx, T, Dv, chunk, work))
        return mn__delta_rule_forward_rec(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, z0);
    if (z0 && h0) return mn__fail(ctx, MN_ERR_CONFIG, "mn__delta_rule_forward", "z0 needs h0 = zeros", __LINE__);
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_forward", B, T, H, Dk, Dv, chunk));
    return mn__delta_rule_forward_chunk(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, work,
                                        keep, z0);
}
static int mn__delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                   float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                   const float* k, const float* v, const float* beta, const float* g, size_t B,
                                   size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work,
                                   const float* keep, int z0) {
    if (!mn__delta_chunk_taken(ctx, T, Dv, chunk, work))
        return mn__delta_rule_backward_rec(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H,
                                           Dk, Dv, chunk, scale, work, z0);
    MN__TRY(mn__delta_check(ctx, "mn_cuda_delta_rule_backward", B, T, H, Dk, Dv, chunk));
    if (!keep && !hs && !(z0 && T <= chunk))
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_delta_rule_backward", "needs hs and work", __LINE__);
    return mn__delta_rule_backward_chunk(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H, Dk,
                                         Dv, chunk, scale, work, keep, z0);
}
int mn_cuda_delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                               const float* v, const float* beta, const float* g, const float* h0, size_t B,
                               size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work) {
    return mn__delta_rule_forward(ctx, out, ht, hs, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, work, NULL,
                                  0);
}
int mn_cuda_delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                const float* k, const float* v, const float* beta, const float* g, size_t B,
                                size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work) {
    return mn__delta_rule_backward(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, hs, q, k, v, beta, g, B, T, H, Dk, Dv,
                                   chunk, scale, work, NULL, 0);
}
// the chunkwise form with its pieces kept between the passes (whatever ctx->delta_form says)
static int mn__delta_keep_check(mn_cuda_ctx* ctx, const char* who, const float* keep, size_t B, size_t T, size_t H,
                                size_t Dk, size_t Dv, size_t chunk, const float* work) {
    if (!keep || T == 0 || !mn__delta_chunk_applies(Dv, chunk, work))
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs keep, work, T > 0, 16 <= chunk <= 64 and Dv a multiple of 16",
                        __LINE__);
    return mn__delta_check(ctx, who, B, T, H, Dk, Dv, chunk);
}
int mn_cuda_delta_rule_forward_keep(mn_cuda_ctx* ctx, float* out, float* ht, float* keep, const float* q,
                                    const float* k, const float* v, const float* beta, const float* g, const float* h0,
                                    size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale,
                                    float* work) {
    MN__TRY(mn__delta_keep_check(ctx, "mn_cuda_delta_rule_forward_keep", keep, B, T, H, Dk, Dv, chunk, work));
    return mn__delta_rule_forward_chunk(ctx, out, ht, NULL, q, k, v, beta, g, h0, B, T, H, Dk, Dv, chunk, scale, work,
                                        keep, 0);
}
int mn_cuda_delta_rule_backward_keep(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                     float* dh0, const float* dout, const float* dht, const float* keep, size_t B,
                                     size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale,
                                     float* work) {
    MN__TRY(mn__delta_keep_check(ctx, "mn_cuda_delta_rule_backward_keep", keep, B, T, H, Dk, Dv, chunk, work));
    return mn__delta_rule_backward_chunk(ctx, dq, dk, dv, dbeta, dg, dh0, dout, dht, NULL, NULL, NULL, NULL, NULL,
                                         NULL, B, T, H, Dk, Dv, chunk, scale, work, keep, 0);
}
// >>cuda_ssd
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
// (which adds, so with acc = 0 they are written 0 here: this kernel is dA's first writer)
__global__ void mn__k_ssd_sda(float* dA, const float* dg, const float* A, size_t n, int acc) {
    MN__FOR(r, n) {
        const float a = A[r];
        if (!(fabsf(a) < MN__SSD_TINY)) dA[r] = acc ? dA[r] + dg[r] / a : dg[r] / a;
        else if (!acc) dA[r] = 0.f;
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
// ctx->ssd_tf32 = 1 instead keeps ctx->math and takes the GLA op's chunk-local gate gradient
// (MN_CUDA_GLA_DG_LOCAL), whose sums never leave a chunk, so the TF32 error does not build up over T.
struct mn__ssd_math {
    mn_cuda_ctx* ctx; int math, dg;
    explicit mn__ssd_math(mn_cuda_ctx* c) : ctx(c), math(c->math), dg(c->gla_dg) {
        if (c->ssd_tf32) c->gla_dg = MN_CUDA_GLA_DG_LOCAL;
        else c->math = MN_CUDA_MATH_FP32;
    }
    ~mn__ssd_math() { ctx->math = math; ctx->gla_dg = dg; }
};
// keep (NULL: none): the GLA op's kept form (mn__gla_forward), for a backward with the same keep
static int mn__ssd_fwd_chunk(mn_cuda_ctx* ctx, float* y, const float* X, const float* A, const float* Bm,
                             const float* Cm, size_t B, size_t T, size_t H, size_t N, int amode, float* work,
                             float* keep = NULL) {
    if (amode == MN_SSD_LOG_DECAY)                  // simple GLA: q = C, k = B, v = X, g = A
        return mn__gla_forward(ctx, y, NULL, Cm, Bm, X, A, NULL, B, T, H, N, N, 1, 1.0, MN__GC, work, keep);
    mn__ssd_sws w;
    mn__ssd_slayout(&w, work, B, T, H, N);
    const size_t nb = B * T * H * N;
    mn__k_ssd_sign<<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(w.sg, w.g, A, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__k_ssd_flip<<<mn__grid(ctx, nb, 256), 256, 0, MN__STREAM>>>(w.bs, w.cs, Bm, Cm, w.sg, nb, N);
    MN__LAUNCHED();
    return mn__gla_forward(ctx, y, NULL, w.cs, w.bs, X, w.g, NULL, B, T, H, N, N, 1, 1.0, MN__GC, work, keep);
}
// acc 1 adds into dX, dA, dB, dC (the public launchers); acc 0 writes them (every entry once: the GLA op's
// acc 0, and mn__k_ssd_sda writes dA before mn__k_ssd_sfix adds), so they need no zeroing
static int mn__ssd_bwd_chunk(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, const float* dy,
                             const float* X, const float* A, const float* Bm, const float* Cm, size_t B, size_t T,
                             size_t H, size_t N, int amode, float* work, int acc, const float* keep = NULL) {
    static int smem_set = 0;
    if (amode == MN_SSD_LOG_DECAY)
        return mn__gla_backward(ctx, dC, dB, dX, dA, NULL, dy, NULL, Cm, Bm, X, A, NULL, B, T, H, N, N, 1, 1.0, MN__GC,
                                work, acc, keep);
    mn__ssd_sws w;
    mn__ssd_slayout(&w, work, B, T, H, N);
    const size_t nb = B * T * H * N, na = B * T * H, NT = (T + MN__GC - 1) / MN__GC;
    const unsigned gb = mn__grid(ctx, nb, 256);
    mn__k_ssd_sign<<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(w.sg, w.g, A, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__k_ssd_flip<<<gb, 256, 0, MN__STREAM>>>(w.bs, w.cs, Bm, Cm, w.sg, nb, N);
    MN__LAUNCHED();
    // dB, dC flipped in place, the op adds dB', dC', flipped back: dB + sg dB' (sg^2 = 1 exactly); with acc 0
    // the op writes dB', dC' (and dX, w.dg), so only the flip back: sg dB'
    if (acc) {
        mn__k_ssd_flip<<<gb, 256, 0, MN__STREAM>>>(dB, dC, dB, dC, w.sg, nb, N);
        MN__LAUNCHED();
        if (dA) MN__CU(cudaMemsetAsync(w.dg, 0, na * sizeof(float), MN__STREAM));
    }
    MN__TRY(mn__gla_backward(ctx, dC, dB, dX, dA ? w.dg : NULL, NULL, dy, NULL, w.cs, w.bs, X, w.g, NULL, B, T, H, N,
                             N, 1, 1.0, MN__GC, work, acc, keep));
    mn__k_ssd_flip<<<gb, 256, 0, MN__STREAM>>>(dB, dC, dB, dC, w.sg, nb, N);
    MN__LAUNCHED();
    if (!dA) return MN_OK;
    mn__k_ssd_sda<<<mn__grid(ctx, na, 256), 256, 0, MN__STREAM>>>(dA, w.dg, A, na, acc);
    MN__LAUNCHED();
    if (!smem_set) {   // the largest shape's (N = 128)
        MN__CU(cudaFuncSetAttribute(mn__k_ssd_sfix, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)mn__ssd_sfix_smem(128)));
        smem_set = 1;
    }
    mn__gla_ws gw;                                  // the op's states, state gradients and cumulative gates
    mn__gla_ws_at(&gw, work, keep, B, T, H, N, 1);
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
    mn__ssd_math x3(ctx);
    return mn__ssd_fwd_chunk(ctx, y, X, A, Bm, Cm, B, T, H, N, amode, work);
}
int mn_cuda_ssd_backward_chunk(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, const float* dy,
                               const float* X, const float* A, const float* Bm, const float* Cm, size_t B, size_t T,
                               size_t H, size_t P, size_t N, int amode, float* work) {
    const void* al[5] = { dy, X, Bm, Cm, work };
    const char* why;
    if (!mn__ssd_chunked(amode, B, T, H, P, N, al, 5, &why))
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_backward_chunk", why, __LINE__);
    mn__ssd_math x3(ctx);
    return mn__ssd_bwd_chunk(ctx, dX, dA, dB, dC, dy, X, A, Bm, Cm, B, T, H, N, amode, work, 1);
}
// The forward without states (mn_cuda_ssd_forward's, and the model's layer with keep): the chunk form where
// mn__ssd_chunked allows, the GLA op's intermediates in keep when given (*kept = 1: the backward is to be given the
// same keep), else the recurrent kernels
static int mn__ssd_forward(mn_cuda_ctx* ctx, float* y, const float* X, const float* A, const float* Bm,
                           const float* Cm, size_t B, size_t T, size_t H, size_t P, size_t N, int amode, float* work,
                           float* keep, unsigned char* kept) {
    const void* al[6] = { y, X, Bm, Cm, work, keep };
    *kept = 0;
    if (!mn__ssd_chunked(amode, B, T, H, P, N, al, 6, NULL))
        return mn_cuda_ssd_forward_recurrent(ctx, y, NULL, X, A, Bm, Cm, NULL, B, T, H, P, N, amode);
    mn__ssd_math x3(ctx);
    MN__TRY(mn__ssd_fwd_chunk(ctx, y, X, A, Bm, Cm, B, T, H, N, amode, work, keep));
    *kept = keep != NULL;
    return MN_OK;
}
int mn_cuda_ssd_forward(mn_cuda_ctx* ctx, float* y, float* ht, const float* X, const float* A, const float* Bm,
                        const float* Cm, const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C,
                        int amode, float* work) {
    if (C < 1) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_forward", "chunk length C must be >= 1", __LINE__);
    unsigned char kept;
    if (!ht && !h0) return mn__ssd_forward(ctx, y, X, A, Bm, Cm, B, T, H, P, N, amode, work, NULL, &kept);
    return mn_cuda_ssd_forward_recurrent(ctx, y, ht, X, A, Bm, Cm, h0, B, T, H, P, N, amode);
}
// The backward without states (chunk MN__GC where mn__ssd_chunked allows, else the recurrent kernels): acc 1
// adds into dX (B,T,H,P), dA (B,T,H), dB, dC (B,T,H,N) (mn_cuda_ssd_backward); acc 0 writes them (the model's
// layer: the chunk form writes every entry once; the recurrent kernels add with atomics, so there they are zeroed
// first)
static int mn__ssd_backward(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, const float* dy,
                            const float* X, const float* A, const float* Bm, const float* Cm, size_t B, size_t T,
                            size_t H, size_t P, size_t N, int amode, float* work, int acc, const float* keep = NULL) {
    const void* al[5] = { dy, X, Bm, Cm, work };
    if (mn__ssd_chunked(amode, B, T, H, P, N, al, 5, NULL)) {   // keep: read on this path only (the forward's form)
        mn__ssd_math x3(ctx);
        return mn__ssd_bwd_chunk(ctx, dX, dA, dB, dC, dy, X, A, Bm, Cm, B, T, H, N, amode, work, acc, keep);
    }
    if (!acc) {
        MN__CU(cudaMemsetAsync(dX, 0, B * T * H * P * sizeof(float), MN__STREAM));
        MN__CU(cudaMemsetAsync(dA, 0, B * T * H * sizeof(float), MN__STREAM));
        MN__CU(cudaMemsetAsync(dB, 0, B * T * H * N * sizeof(float), MN__STREAM));
        MN__CU(cudaMemsetAsync(dC, 0, B * T * H * N * sizeof(float), MN__STREAM));
    }
    return mn_cuda_ssd_backward_recurrent(ctx, dX, dA, dB, dC, NULL, dy, NULL, X, A, Bm, Cm, NULL, B, T, H, P, N, amode,
                                          work);
}
int mn_cuda_ssd_backward(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, float* dh0, const float* dy,
                         const float* dht, const float* X, const float* A, const float* Bm, const float* Cm,
                         const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C, int amode,
                         float* work) {
    if (C < 1) return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_ssd_backward", "chunk length C must be >= 1", __LINE__);
    if (!dht && !dh0 && !h0)
        return mn__ssd_backward(ctx, dX, dA, dB, dC, dy, X, A, Bm, Cm, B, T, H, P, N, amode, work, 1);
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
// >>cuda_mlstm
// defines: mn_cuda_mlstm_{work_size,forward,backward,step}, mn_cuda_mlstm_{forward,backward}_{recurrent,chunk}
//
// xLSTM's mLSTM (mesanet.h >>mlstm) on the GPU in two forms: the chunk form (the default where it applies,
// described with its kernels further down: the numerator through the GLA op on the tensor cores) and,
// the tested reference and the fallback, the recurrent form, token by token, which computes the
// chunkwise form's sums (the CPU's mn_mlstm_forward / _backward: the same m_t, the same stabilised
// states, for every chunk length). Per head, with lf_t = logsigmoid(f_t):
//   m_t = max(lf_t + m_{t-1}, i_t) ; f'_t = e^{lf_t + m_{t-1} - m_t} ; i'_t = e^{i_t - m_t}    (both <= 1)
//   C_t = f'_t C_{t-1} + i'_t k_t v_t^T ; n_t = f'_t n_{t-1} + i'_t k_t ; q^_t = scale q_t
//   bt_t = n_t.q^_t ; norm_t = max(|bt_t|, e^{-m_t}) ; o_t = C_t^T q^_t / (norm_t + eps)
// Kernels:
//   - mn__k_mlstm_gates: the stabiliser, which depends on the gates only, once per head (not per
//     column slice): one warp per (b,h), each lane a contiguous run of tokens. m_t is a max-plus affine
//     recurrence m -> max(lf + m, i), and such maps compose (x -> max(a + x, c)), so each lane composes
//     its run's map, a warp scan gives every lane its entering m, and the lane replays its run writing
//     m_t, f'_t, i'_t. All in double (the CPU's arithmetic), stored in float.
//   - mn__k_mlstm_scan<RPT, MODE>: one generic recurrent scan S_t = dec S + w b_t c_t^T with a read-out
//     y_t = S_t^T a_t, the state in registers. A block of 4 warps holds 16 columns of the state; in a
//     warp 8 lanes share one column, each with RPT = R/8 of its R rows (rows g, g+8, ..., so the lanes'
//     loads of a row vector are contiguous), and the read-out's sum over rows is 3 shuffles. Grid
//     (columns/16, B*H): 2560 warps at the anchor shape, all resident. The next token's operands are
//     loaded while the current one is computed. The four uses (MODE):
//       0 forward: S = C (rows Dk, columns Dv), a = q, b = k, c = v; the rows also carry n (n.q for
//         the normaliser); writes o, norm, bt, the final state.
//       1 dq (forward in time): S = C^T (rows Dv, columns Dk), a = dN = do/den, b = v, c = k, and the
//         column's n_d: dq = scale (C_t dN_t + dbt_t n_t).
//       2 dv (backward in time): the gradient of C, dC_t = q^_t dN_t^T + f'_{t+1} dC_{t+1} (rows Dk,
//         columns Dv), a = k: dv_t = i'_t dC_t^T k_t; and dC0 = f'_0 dC_0.
//       3 dk (backward in time): dC^T (rows Dv, columns Dk), a = v, and the column's dn_d,
//         dn_t = q^_t dbt_t + f'_{t+1} dn_{t+1}: dk_t = i'_t (dC_t v_t + dn_t); dn0 = f'_0 dn_0; and the
//         warp's share of k_t.dk_t (4 columns) into a per-token slot (no atomics: summed later in order).
//   - mn__k_mlstm_prep: per token, from the recomputed o, bt, den: dN's scale, and (exact mode)
//       forward: o = num / den, den = max(|bt|, e^{-m}) + eps, so: dbt = -(do.o)/den sign(bt) where |bt|
//       wins; dmu = -eps (do.o)/den (m_t enters only through eps e^{m} in unstabilised terms);
//     and q_t.dq_t = dN.num + dbt bt = do.o + dbt bt (dq's definition dotted with q), which the gate
//     gradient needs without reading dq back (dq accumulates into the caller's buffer).
//   - mn__k_mlstm_gates_bwd: the gates by the identity of >>gla (q enters as q e^{F_t}, k as
//     k e^{i_s - F_s}, F the cumulative log forget gate): di_t = k_t.dk_t, dlf_u = sum_{t>=u} (q_t.dq_t -
//     k_t.dk_t), plus (exact) dmu back through m_t = max(lf_t + m_{t-1}, i_t), the larger branch taking
//     it (what reaches m0 is dropped). Both are suffix recurrences (a sum, and dmc -> s (dmu + dmc) with
//     s in {0,1}, affine), so the same lane runs and warp scan (reversed) as the forward gates; double.
//   - mn__k_mlstm_step: the decode step, one block per (sequence, head) streaming its Dk x Dv state once.
// Precision: fp32 states and products (FMA), gates, stabiliser and the gate gradients' sums in double;
// test_cuda mlstm holds them to 2e-5 (outputs) and 1e-4 / 3e-4 (gradients) against the float64 CPU (see
// the bounds there; they held on the H200). Deterministic: every output element has one
// writer, the k.dk partial sums are added in a fixed order.
// Cost: per token and head 4 Dk Dv FLOPs forward, plus 4 Dk Dv for n (each column's 8 lanes carry all of
// n: simple, and the n.q of every token is at hand), 20 Dk Dv backward (the forward again, dq, dv, dk).
// Latency-bound (one token after the other): hence the chunk form below. With Dk = 128 a scan thread holds ~120
// registers (state, this token's and the next token's operands), 4 blocks per SM: at the anchor shape
// (B*H = 80, 640 blocks) the scans run in two waves.

#define MN__MLSTM_RG 8        // lanes sharing one state column (the row groups)
#define MN__MLSTM_COLS 16     // state columns per block (4 warps x 4 columns)
#define MN__MLSTM_PIECE(p, n) \
    do { if (w) w->p = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)   // w NULL: size

// the workspace: per token and head (B,T,H) m, f', i', bt, den, dbt, dmu, q.dq; the k.dk partials
// (B,T,H,Dk/4); the backward's recomputed output o (B,T,H,Dv); a copy of n0 (B,H,Dk) (nt may alias it)
// The chunk form's pieces (only where it can apply, Dk == Dv in {64, 128}): the per-head shift c (B,H) and
// the range flag, k' = e^{i - c} k and its gradient (B,T,H,Dk), lf = logsigmoid(f), the normaliser b' and
// the per-token factor of its gradient (B,T,H), the chunk summaries (B,H,NT,Dk) with their decays
// (B,H,NT), and the GLA op's own workspace.
typedef struct mn__mlstm_ws {
    float *m, *fp, *ip, *bt, *den, *dbt, *dmu, *qdq, *kdkp, *o, *n0c;
    float *cb, *flag, *kp, *dkp, *lg, *bp, *sc, *nsum, *nA, *gla;
} mn__mlstm_ws;
#define MN__MLSTM_NC 64       // the chunk form's chunk length (the GLA op's)
static size_t mn__mlstm_layout(mn__mlstm_ws* w, float* base, size_t B, size_t T, size_t H, size_t Dk, size_t Dv) {
    size_t N = B * T * H, off = 0;
    MN__MLSTM_PIECE(m, N); MN__MLSTM_PIECE(fp, N); MN__MLSTM_PIECE(ip, N); MN__MLSTM_PIECE(bt, N);
    MN__MLSTM_PIECE(den, N); MN__MLSTM_PIECE(dbt, N); MN__MLSTM_PIECE(dmu, N); MN__MLSTM_PIECE(qdq, N);
    MN__MLSTM_PIECE(kdkp, N * (Dk / 4)); MN__MLSTM_PIECE(o, N * Dv); MN__MLSTM_PIECE(n0c, B * H * Dk);
    if (Dk == Dv && (Dk == 64 || Dk == 128)) {
        const size_t NT = (T + MN__MLSTM_NC - 1) / MN__MLSTM_NC;
        MN__MLSTM_PIECE(cb, B * H); MN__MLSTM_PIECE(flag, 1); MN__MLSTM_PIECE(kp, N * Dk);
        MN__MLSTM_PIECE(dkp, N * Dk); MN__MLSTM_PIECE(lg, N); MN__MLSTM_PIECE(bp, N); MN__MLSTM_PIECE(sc, N);
        MN__MLSTM_PIECE(nsum, B * H * NT * Dk); MN__MLSTM_PIECE(nA, B * H * NT);
        MN__MLSTM_PIECE(gla, mn_cuda_gla_work_size(B, T, H, Dk, Dv, MN__MLSTM_NC));
    } else if (w) {
        w->cb = w->flag = w->kp = w->dkp = w->lg = w->bp = w->sc = w->nsum = w->nA = w->gla = NULL;
    }
    return off;
}
size_t mn_cuda_mlstm_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C) {
    (void)C;
    return mn__mlstm_layout(NULL, NULL, B, T, H, Dk, Dv);
}

__device__ __forceinline__ double mn__mlstm_logsig(double x) { return (x < 0 ? x : 0.0) - log1p(exp(-fabs(x))); }

// The stabiliser and the gates' factors (see the section comment). m (B,T,H), fp, ip (B,T,H) written;
// stab (B,T,H), mt (B,H) written when not NULL; ig, fg (B,T,H); m0 (B,H) or NULL (zeros). Blocks of 4
// warps, one warp per (b,h); lane l replays tokens [l L, (l+1) L), L = ceil(T/32).
__global__ void __launch_bounds__(128) mn__k_mlstm_gates(float* m, float* fp, float* ip, float* stab, float* mt,
                                                         const float* ig, const float* fg, const float* m0,
                                                         unsigned BH, unsigned T, unsigned H) {
    const unsigned bh = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (bh >= BH) return;                            // a whole warp leaves together
    const unsigned b = bh / H, h = bh % H, L = (T + 31) / 32, t0 = lane * L;
    const unsigned t1 = t0 + L < T ? t0 + L : T;
    const double mstart = m0 ? (double)m0[bh] : 0.0;
    // the run's map x -> max(A + x, Cm): A the sum of its lf, Cm what the inputs gates make of -inf
    double A = 0.0, Cm = -INFINITY;
    for (unsigned t = t0; t < t1; t++) {
        size_t r = ((size_t)b * T + t) * H + h;
        double lf = mn__mlstm_logsig(fg[r]);
        A += lf;
        Cm = fmax(Cm + lf, (double)ig[r]);
    }
    // inclusive scan over lanes: the earlier map first, then this one: (A, Cm) <- (Ae + A, max(Ce + A, Cm))
    for (int o = 1; o < 32; o <<= 1) {
        double Ae = __shfl_up_sync(0xffffffffu, A, o), Ce = __shfl_up_sync(0xffffffffu, Cm, o);
        if ((int)lane >= o) { Cm = fmax(Ce + A, Cm); A = Ae + A; }
    }
    double Ap = __shfl_up_sync(0xffffffffu, A, 1), Cp = __shfl_up_sync(0xffffffffu, Cm, 1);
    double mm = lane ? fmax(Ap + mstart, Cp) : mstart;   // the m entering the run (m0 = -inf: Cp)
    for (unsigned t = t0; t < t1; t++) {
        size_t r = ((size_t)b * T + t) * H + h;
        double lf = mn__mlstm_logsig(fg[r]), i = ig[r], mn = fmax(lf + mm, i);
        fp[r] = (float)exp(lf + mm - mn);             // 0 when m_{t-1} = -inf
        ip[r] = (float)exp(i - mn);
        m[r] = (float)mn;
        if (stab) stab[r] = (float)mn;
        mm = mn;
    }
    // lane 31's run ends at T (or is empty and starts from everything before): its m is m_{T-1}
    if (mt && lane == 31) mt[bh] = (float)mm;
}

// the arguments of mn__k_mlstm_scan (pointers as in mn_cuda_mlstm_*; m, fp, ip, bt, den, dbt, kdkp the
// workspace's)
typedef struct mn__mlstm_args {
    const float *q, *k, *v, *dout, *C0, *n0;           // (B,T,H,Dk) x2, (B,T,H,Dv) x2, (B,H,Dk,Dv), (B,H,Dk)
    const float *m, *fp, *ip, *dbt;                    // (B,T,H)
    float *out, *norm, *bt, *den, *Ct, *nt;            // (B,T,H,Dv), (B,T,H) x3, (B,H,Dk,Dv), (B,H,Dk)
    float *dq, *dk, *dv, *dC0, *dn0, *kdkp;            // (B,T,H,Dk) x2, (B,T,H,Dv), (B,H,Dk,Dv), (B,H,Dk),
    unsigned T, H, Dk, Dv;                             // (B,T,H,Dk/4)
    float scale, eps;
    int acc;                                           // gradients: 1 accumulate, 0 overwrite
} mn__mlstm_args;

// The token's operands of one scan (see the section comment): a, b (RPT rows each of this thread), c the
// column's entry, and the token's scalars: x[0] f', x[1] i', x[2] m (mode 0) or den, x[3] dbt (modes 1, 3),
// x[4] the column's k (mode 3). r the row (b,t,h). Loaded one token ahead of their use.
template <int RPT, int MODE>
__device__ __forceinline__ void mn__mlstm_load(const mn__mlstm_args& p, size_t r, unsigned g, unsigned col, float* a,
                                               float* b, float& c, float* x) {
    const float *pa, *pb, *pc;
    size_t lr, lc;                                     // the rows' and the column's vector lengths
    if (MODE == 0) { pa = p.q; pb = p.k; pc = p.v; lr = p.Dk; lc = p.Dv; }
    else if (MODE == 1) { pa = p.dout; pb = p.v; pc = p.k; lr = p.Dv; lc = p.Dk; }
    else if (MODE == 2) { pa = p.k; pb = p.q; pc = p.dout; lr = p.Dk; lc = p.Dv; }
    else { pa = p.v; pb = p.dout; pc = p.q; lr = p.Dv; lc = p.Dk; }
#pragma unroll
    for (int i = 0; i < RPT; i++) {
        a[i] = pa[r * lr + g + MN__MLSTM_RG * i];
        b[i] = pb[r * lr + g + MN__MLSTM_RG * i];
    }
    c = pc[r * lc + col];
    x[0] = p.fp[r]; x[1] = p.ip[r];
    x[2] = MODE == 0 ? p.m[r] : p.den[r];
    x[3] = MODE == 1 || MODE == 3 ? p.dbt[r] : 0.f;
    x[4] = MODE == 3 ? p.k[r * lc + col] : 0.f;
}

// The recurrent scans (see the section comment). Grid (columns / 16, B*H), 128 threads.
template <int RPT, int MODE>
__global__ void __launch_bounds__(128) mn__k_mlstm_scan(mn__mlstm_args p) {
    constexpr bool REV = MODE >= 2;
    const unsigned lane = threadIdx.x & 31, g = lane & (MN__MLSTM_RG - 1);
    const unsigned col = blockIdx.x * MN__MLSTM_COLS + (threadIdx.x >> 5) * 4 + (lane >> 3);
    const unsigned bh = blockIdx.y, b = bh / p.H, h = bh % p.H, T = p.T, H = p.H, Dk = p.Dk, Dv = p.Dv;
    float S[RPT], nr[RPT], a[RPT], bb[RPT], an[RPT], bn[RPT], c, cn, x[5], xn[5];
    float z = 0.f;                                     // mode 1: the column's n_d; mode 3: its dn_d
    float dprev = 0.f;                                 // backward scans: f'_{t+1}, the decay of the later state
#pragma unroll
    for (int i = 0; i < RPT; i++) { S[i] = 0.f; nr[i] = 0.f; }
    if (MODE == 0) {
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            const unsigned d = g + MN__MLSTM_RG * i;
            if (p.C0) S[i] = p.C0[((size_t)bh * Dk + d) * Dv + col];
            if (p.n0) nr[i] = p.n0[(size_t)bh * Dk + d];
        }
    } else if (MODE == 1) {                            // C^T: row j, column d
#pragma unroll
        for (int i = 0; i < RPT; i++)
            if (p.C0) S[i] = p.C0[((size_t)bh * Dk + col) * Dv + g + MN__MLSTM_RG * i];
        if (p.n0) z = p.n0[(size_t)bh * Dk + col];
    }
    unsigned t = REV ? T - 1 : 0;
    size_t r = ((size_t)b * T + t) * H + h;
    mn__mlstm_load<RPT, MODE>(p, r, g, col, a, bb, c, x);
    for (unsigned s = 0; s < T; s++) {
        const unsigned tn = REV ? t - 1 : t + 1;       // the next token (unused after the last)
        const size_t rn = ((size_t)b * T + tn) * H + h;
        if (s + 1 < T) mn__mlstm_load<RPT, MODE>(p, rn, g, col, an, bn, cn, xn);
        const float fpt = x[0], ipt = x[1];
        float y = 0.f, nq = 0.f;
        if (MODE == 0) {
            // C = f' C + i' k v^T ; n = f' n + i' k ; y = C^T q, nq = n.q over this thread's rows
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                const float ik = ipt * bb[i];
                S[i] = fmaf(fpt, S[i], ik * c);
                nr[i] = fmaf(fpt, nr[i], ik);
                y = fmaf(S[i], a[i], y);
                nq = fmaf(nr[i], a[i], nq);
            }
        } else if (MODE == 1) {
            // C^T = f' C^T + i' v k^T ; n_d = f' n_d + i' k_d ; y = C dO (dN = dO / den below)
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                S[i] = fmaf(fpt, S[i], (ipt * bb[i]) * c);
                y = fmaf(S[i], a[i], y);
            }
            z = fmaf(fpt, z, ipt * c);
        } else if (MODE == 2) {
            // dC = f'_{t+1} dC + q^ dN^T ; y = dC^T k
            const float dn = c / x[2];
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                S[i] = fmaf(dprev, S[i], (p.scale * bb[i]) * dn);
                y = fmaf(S[i], a[i], y);
            }
        } else {
            // dC^T = f'_{t+1} dC^T + dN q^^T ; dn_d = f'_{t+1} dn_d + q^_d dbt ; y = dC v
            const float rd = 1.f / x[2], qd = p.scale * c;
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                S[i] = fmaf(dprev, S[i], (bb[i] * rd) * qd);
                y = fmaf(S[i], a[i], y);
            }
            z = fmaf(dprev, z, qd * x[3]);
        }
        // the sums over the column's rows: the 8 lanes of the column (xor 1, 2, 4)
#pragma unroll
        for (int o = 1; o < MN__MLSTM_RG; o <<= 1) {
            y += __shfl_xor_sync(0xffffffffu, y, o);
            if (MODE == 0) nq += __shfl_xor_sync(0xffffffffu, nq, o);
        }
        if (MODE == 0) {
            const float btv = p.scale * nq, nrm = fmaxf(fabsf(btv), expf(-x[2])), den = nrm + p.eps;
            if (g == 0) p.out[r * Dv + col] = p.scale * y / den;
            if (col == 0 && g == 0) {
                if (p.norm) p.norm[r] = nrm;
                if (p.bt) { p.bt[r] = btv; p.den[r] = den; }
            }
        } else if (MODE == 1) {
            const float v1 = p.scale * (y / x[2] + x[3] * z);
            if (g == 0) { float* o = p.dq + r * Dk + col; *o = p.acc ? *o + v1 : v1; }
        } else if (MODE == 2) {
            const float v1 = ipt * y;
            if (g == 0) { float* o = p.dv + r * Dv + col; *o = p.acc ? *o + v1 : v1; }
            dprev = fpt;
        } else {
            const float v1 = ipt * (y + z);
            if (g == 0) { float* o = p.dk + r * Dk + col; *o = p.acc ? *o + v1 : v1; }
            // k.dk over the warp's 4 columns (every lane of a column holds the same v1): lanes xor 8, 16
            float part = x[4] * v1;
            part += __shfl_xor_sync(0xffffffffu, part, 8);
            part += __shfl_xor_sync(0xffffffffu, part, 16);
            if (lane == 0) p.kdkp[r * (Dk / 4) + col / 4] = part;
            dprev = fpt;
        }
        if (s + 1 < T) {
#pragma unroll
            for (int i = 0; i < RPT; i++) { a[i] = an[i]; bb[i] = bn[i]; }
            #pragma unroll
            for (int i = 0; i < 5; i++) x[i] = xn[i];
            c = cn; t = tn; r = rn;
        }
    }
    if (MODE == 0) {
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            const unsigned d = g + MN__MLSTM_RG * i;
            if (p.Ct) p.Ct[((size_t)bh * Dk + d) * Dv + col] = S[i];
            if (p.nt && col == 0) p.nt[(size_t)bh * Dk + d] = nr[i];
        }
    } else if (MODE == 2 && p.dC0) {                   // forward: C_0 = f'_0 C0 + ..., so: dC0 += f'_0 dC_0
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            float* o = p.dC0 + ((size_t)bh * Dk + g + MN__MLSTM_RG * i) * Dv + col;
            *o = p.acc ? *o + dprev * S[i] : dprev * S[i];
        }
    } else if (MODE == 3 && p.dn0 && g == 0) {
        float* o = p.dn0 + (size_t)bh * Dk + col;
        *o = p.acc ? *o + dprev * z : dprev * z;
    }
}

// Per token (one warp per row (b,t,h) of NR): dbt, dmu, qdq (see the section comment); o (NR,Dv) the
// recomputed output, bt, den, m (NR) the forward's; exact 0: MN_MLSTM_BW_DETACH (dbt = dmu = 0).
__global__ void __launch_bounds__(256) mn__k_mlstm_prep(float* dbt, float* dmu, float* qdq, const float* dout,
                                                        const float* o, const float* bt, const float* den,
                                                        const float* m, size_t NR, unsigned Dv, float eps, int exact) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    float dot = 0.f;
    for (unsigned j = lane; j < Dv; j += 32) dot = fmaf(dout[r * Dv + j], o[r * Dv + j], dot);
    dot = mn__warp_sum(dot);
    if (lane == 0) {
        const float dn = den[r], b = bt[r];
        float db = 0.f, dm = 0.f;
        if (exact) {
            if (fabsf(b) >= expf(-m[r])) db = -dot / dn * (float)((b > 0) - (b < 0));
            dm = -eps * dot / dn;
        }
        dbt[r] = db; dmu[r] = dm; qdq[r] = dot + db * b;
    }
}

// The gates' gradients (see the section comment): di, df (B,T,H) accumulated (acc) or written; ig, fg the
// gates; m (B,T,H) the stabiliser, m0 (B,H) or NULL; qdq, dmu (B,T,H); kdkp (B,T,H,NW) k.dk in NW parts.
// Blocks of 4 warps, one warp per (b,h), lane l the tokens [l L, (l+1) L) walked backwards.
__global__ void __launch_bounds__(128) mn__k_mlstm_gates_bwd(float* di, float* df, const float* ig, const float* fg,
                                                             const float* m, const float* m0, const float* qdq,
                                                             const float* dmu, const float* kdkp, unsigned BH,
                                                             unsigned T, unsigned H, unsigned NW, int acc) {
    const unsigned bh = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (bh >= BH) return;
    const unsigned b = bh / H, h = bh % H, L = (T + 31) / 32, t0 = lane * L;
    const unsigned t1 = t0 + L < T ? t0 + L : T;
    const double mstart = m0 ? (double)m0[bh] : 0.0;
    // pass 1: the run's sum of (q.dq - k.dk) and its map of dmc, x -> A x + Cc (A in {0, 1})
    double sum = 0.0, A = 1.0, Cc = 0.0;
    for (unsigned t = t1; t-- > t0;) {
        size_t r = ((size_t)b * T + t) * H + h;
        double kdk = 0.0;
        for (unsigned w = 0; w < NW; w++) kdk += kdkp[r * NW + w];
        sum += (double)qdq[r] - kdk;
        double mprev = t ? (double)m[r - H] : mstart;
        int lfw = mn__mlstm_logsig(fg[r]) + mprev >= (double)ig[r];   // forward: the lf branch won
        if (lfw) Cc += dmu[r]; else { A = 0.0; Cc = 0.0; }
    }
    // reversed inclusive scan: lane l's value covers l..31, the later lanes' maps applied first
    for (int o = 1; o < 32; o <<= 1) {
        double Al = __shfl_down_sync(0xffffffffu, A, o), Cl = __shfl_down_sync(0xffffffffu, Cc, o);
        double Sl = __shfl_down_sync(0xffffffffu, sum, o);
        if (lane + o < 32) { Cc = A * Cl + Cc; A = A * Al; sum += Sl; }
    }
    double Sn = __shfl_down_sync(0xffffffffu, sum, 1), Cn = __shfl_down_sync(0xffffffffu, Cc, 1);
    double accs = lane < 31 ? Sn : 0.0, dmc = lane < 31 ? Cn : 0.0;   // what enters the run from later tokens
    for (unsigned t = t1; t-- > t0;) {
        size_t r = ((size_t)b * T + t) * H + h;
        double kdk = 0.0;
        for (unsigned w = 0; w < NW; w++) kdk += kdkp[r * NW + w];
        double f = fg[r], lf = mn__mlstm_logsig(f), mprev = t ? (double)m[r - H] : mstart;
        // (1) k enters as k e^{i}; q e^{F_t}, k e^{-F_s} with F the cumulative lf
        double dit = kdk, dlf, tot;
        accs += (double)qdq[r] - kdk;
        dlf = accs;
        // (2) m_t = max(lf_t + m_{t-1}, i_t): the winning branch takes dL/dm_t
        tot = (double)dmu[r] + dmc;
        if (lf + mprev >= (double)ig[r]) { dlf += tot; dmc = tot; } else { dit += tot; dmc = 0.0; }
        const float gi = (float)dit, gf = (float)(dlf / (1.0 + exp(f)));   // dlf sigmoid(-f)
        di[r] = acc ? di[r] + gi : gi;
        df[r] = acc ? df[r] + gf : gf;
    }
}

static int mn__mlstm_check(mn_cuda_ctx* ctx, const char* who, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                           size_t C) {
    if (Dk % 16 || Dv % 16 || Dk < 16 || Dv < 16 || Dk > 128 || Dv > 128)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk, Dv multiples of 16 in 16..128", __LINE__);
    if (C < 1) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs chunk C >= 1", __LINE__);
    if (B * H == 0 || B * H > 65535 || T == 0 || B * T * H > 0xffffffffu / 8)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs 0 < B*H <= 65535, T > 0", __LINE__);
    return MN_OK;
}
template <int MODE>
static int mn__mlstm_scan_launch(mn_cuda_ctx* ctx, const mn__mlstm_args& p, size_t BH) {
    // rows: Dk for the forward and dv, Dv for dq and dk; columns the other
    const unsigned R = MODE == 0 || MODE == 2 ? p.Dk : p.Dv, Cn = MODE == 0 || MODE == 2 ? p.Dv : p.Dk;
    const dim3 grid(Cn / MN__MLSTM_COLS, (unsigned)BH);
    switch (R / MN__MLSTM_RG) {
    case 2: mn__k_mlstm_scan<2, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 4: mn__k_mlstm_scan<4, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 6: mn__k_mlstm_scan<6, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 8: mn__k_mlstm_scan<8, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 10: mn__k_mlstm_scan<10, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 12: mn__k_mlstm_scan<12, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 14: mn__k_mlstm_scan<14, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 16: mn__k_mlstm_scan<16, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    default: return mn__fail(ctx, MN_ERR_CONFIG, "mn__mlstm_scan_launch", "rows not a multiple of 16", __LINE__);
    }
    MN__LAUNCHED();
    return MN_OK;
}
// The gates and the forward scan, shared by both directions: out, norm, bt, den written (bt, den into w)
static int mn__mlstm_fwd(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, float* out, float* norm, float* stab, float* Ct,
                         float* nt, float* mt, const float* q, const float* k, const float* v, const float* ig,
                         const float* fg, const float* C0, const float* n0, const float* m0, size_t B, size_t T,
                         size_t H, size_t Dk, size_t Dv, double scale, double eps) {
    const size_t BH = B * H;
    if (n0) MN__CU(cudaMemcpyAsync(w->n0c, n0, BH * Dk * sizeof(float), cudaMemcpyDeviceToDevice, MN__STREAM));
    mn__k_mlstm_gates<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(w->m, w->fp, w->ip, stab, mt, ig, fg, m0,
                                                                      (unsigned)BH, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__mlstm_args p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.C0 = C0; p.n0 = n0 ? w->n0c : NULL;
    p.m = w->m; p.fp = w->fp; p.ip = w->ip;
    p.out = out; p.norm = norm; p.bt = w->bt; p.den = w->den; p.Ct = Ct; p.nt = nt;
    p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)Dk; p.Dv = (unsigned)Dv;
    p.scale = (float)scale; p.eps = (float)eps;
    return mn__mlstm_scan_launch<0>(ctx, p, BH);
}
int mn_cuda_mlstm_forward_recurrent(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* Ct, float* nt,
                                    float* mt, const float* q, const float* k, const float* v, const float* ig,
                                    const float* fg, const float* C0, const float* n0, const float* m0, size_t B,
                                    size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                                    float* work) {
    MN__TRY(mn__mlstm_check(ctx, "mn_cuda_mlstm_forward", B, T, H, Dk, Dv, C));
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    return mn__mlstm_fwd(ctx, &w, out, norm, stab, Ct, nt, mt, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv, scale,
                         eps);
}
// acc = 0 overwrites dq, dk, dv, di, df, dC0, dn0 (the model's first writer), 1 accumulates
static int mn__mlstm_backward_rec(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                  float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                  const float* v, const float* ig, const float* fg, const float* C0, const float* n0,
                                  const float* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale,
                                  double eps, size_t C, int mode, float* work, int acc) {
    MN__TRY(mn__mlstm_check(ctx, "mn_cuda_mlstm_backward", B, T, H, Dk, Dv, C));
    if (mode != MN_MLSTM_BW_EXACT && mode != MN_MLSTM_BW_DETACH)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mlstm_backward", "mode must be EXACT or DETACH", __LINE__);
    const size_t BH = B * H, NR = B * T * H;
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    // the forward again: o into the workspace, with bt and den
    MN__TRY(mn__mlstm_fwd(ctx, &w, w.o, NULL, NULL, NULL, NULL, NULL, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv,
                          scale, eps));
    mn__k_mlstm_prep<<<(unsigned)((NR + 7) / 8), 256, 0, MN__STREAM>>>(w.dbt, w.dmu, w.qdq, dout, w.o, w.bt, w.den,
                                                                      w.m, NR, (unsigned)Dv, (float)eps,
                                                                      mode == MN_MLSTM_BW_EXACT);
    MN__LAUNCHED();
    mn__mlstm_args p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.dout = dout; p.C0 = C0; p.n0 = n0 ? w.n0c : NULL;
    p.m = w.m; p.fp = w.fp; p.ip = w.ip; p.dbt = w.dbt; p.den = w.den;
    p.dq = dq; p.dk = dk; p.dv = dv; p.dC0 = dC0; p.dn0 = dn0; p.kdkp = w.kdkp;
    p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)Dk; p.Dv = (unsigned)Dv;
    p.scale = (float)scale; p.eps = (float)eps; p.acc = acc;
    MN__TRY(mn__mlstm_scan_launch<1>(ctx, p, BH));
    MN__TRY(mn__mlstm_scan_launch<2>(ctx, p, BH));
    MN__TRY(mn__mlstm_scan_launch<3>(ctx, p, BH));
    mn__k_mlstm_gates_bwd<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(di, df, ig, fg, w.m, m0, w.qdq, w.dmu,
                                                                          w.kdkp, (unsigned)BH, (unsigned)T,
                                                                          (unsigned)H, (unsigned)(Dk / 4), acc);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_mlstm_backward_recurrent(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                     float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                     const float* v, const float* ig, const float* fg, const float* C0,
                                     const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                                     size_t Dv, double scale, double eps, size_t C, int mode, float* work) {
    return mn__mlstm_backward_rec(ctx, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk,
                                  Dv, scale, eps, C, mode, work, 1);
}
// ---- the chunk form (the default where it applies): the numerator through the GLA op ----
// Without an initial state, the unstabilised numerator and normaliser of token t are sums over j <= t of
// e^{F_t - F_j + i_j} (q^_t.k_j) v_j and e^{F_t - F_j + i_j} q^_t.k_j, F the running sum of lf = logsigmoid(f).
// With a constant c per head (the largest input gate of the sequence), k'_j = e^{i_j - c} k_j turns the first
// into e^c times the GLA op's output with one log-decay lf per token and head (G = 1: chunks of 64 on the
// tensor cores, 3xTF32 in fp32 mode), o'_t; the second is e^c b'_t, b'_t = q^_t.n'_t with
// n'_t = e^{lf_t} n'_{t-1} + k'_t, a Dk-vector scan run here chunkwise (a summary pass per chunk, then each
// chunk replays its 64 tokens from the state its predecessors hand it). With E_t = e^{c - m_t}:
//   bt_t = b'_t E_t ; den_t = max(|bt_t|, e^{-m_t}) + eps ; out_t = o'_t E_t / den_t       (c cancels)
// the recurrent form's quantities exactly, so its per-token prep and gate-gradient kernels are reused.
// Backward: dO' = dout E / den into the GLA op's backward (dq, dk', dv), dB' = dbt E into the vector scan's
// backward (dq += scale dB' n', dk'_j += scale sum_{t>=j} e^{F_t - F_j} dB'_t q_t, the reverse scan),
// dk = e^{i - c} dk', and the gates by the identity of the recurrent form (di = k.dk, dlf from q.dq - k.dk,
// plus the stabiliser's branch). Range: every k' is e^{i_j - c} >= e^{-(max i - min i)} times k, and the
// terms that matter at token t are ~e^{m_t - c} >= e^{-(max i - min i)} (m_t >= i_t) of their natural size,
// so with max i - min i <= 40 per head (the layer's soft cap 15 keeps it <= 30) nothing that counts comes
// near float's underflow (e^{-87}); past that (or non-finite gates) the default falls back to the recurrent
// kernels. The check needs the gates' range on the host: one stream synchronisation per call.
// Precision: the GLA op's (3xTF32 products, fp32 accumulation in fp32 math; plain TF32 in the TF32 and bf16
// modes), the vector scans in fp32 FMAs over at most 64 tokens from their entering state, gates and E in
// double. Deterministic (the range flag is the only atomic, an OR). Cost: the GLA op's (about 0.8 ms
// forward, 3.6 ms forward and backward at B 4, T 4096, H 16, D 128 as measured for it) plus O(D) a token
// for the rest; the backward recomputes the forward.
#define MN__MLSTM_RANGE 40.0

// Per (b,h): cb = max_t i_t; flag set when max - min > RANGE (or not finite). One warp per (b,h).
__global__ void __launch_bounds__(128) mn__k_mlstm_range(float* cb, unsigned* flag, const float* ig, unsigned BH,
                                                         unsigned T, unsigned H) {
    const unsigned bh = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (bh >= BH) return;
    const unsigned b = bh / H, h = bh % H;
    float mx = -INFINITY, mn = INFINITY;
    for (unsigned t = lane; t < T; t += 32) {
        const float i = ig[((size_t)b * T + t) * H + h];
        mx = fmaxf(mx, i);
        mn = fminf(mn, i);
        if (i != i) mn = -INFINITY;                   // NaN: out of range
    }
    for (int o = 16; o; o >>= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    }
    if (lane == 0) {
        cb[bh] = mx;
        if (!((double)mx - (double)mn <= MN__MLSTM_RANGE)) atomicOr(flag, 1u);   // a flag: order does not matter
    }
}
// Per row r = (b,t,h) of NR (one warp each): kp = e^{i - c} k (B,T,H,Dk), lg = logsigmoid(f) (B,T,H).
__global__ void __launch_bounds__(256) mn__k_mlstm_kprep(float* kp, float* lg, const float* k, const float* ig,
                                                         const float* fg, const float* cb, size_t NR, unsigned T,
                                                         unsigned H, unsigned Dk) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const float e = (float)exp((double)ig[r] - (double)cb[bh]);
    for (unsigned d = lane; d < Dk; d += 32) kp[r * Dk + d] = e * k[r * Dk + d];
    if (lane == 0) lg[r] = (float)mn__mlstm_logsig((double)fg[r]);
}

// the arguments of mn__k_mlstm_nrm
typedef struct mn__mlstm_nargs {
    const float *x, *sc, *lg, *q;   // x (B,T,H,Dk) the scanned vectors (k' forward, q reverse), sc (B,T,H) their
                                    // factor (reverse; dq's in MODE 2), lg (B,T,H), q (B,T,H,Dk) (MODE 1)
    float *sum, *A;                 // the chunk summaries (B,H,NT,Dk) and decays e^{sum of the chunk's lf} (B,H,NT)
    float* y;                       // MODE 1 b' (B,T,H) written; MODE 2 dq, MODE 4 dk' (B,T,H,Dk) accumulated
    unsigned T, H, Dk, NT;
    float scale;
} mn__mlstm_nargs;
// The normaliser's vector scan, chunkwise: block (chunk, b*h), thread d one channel (blockDim = Dk <= 128).
//   forward  n'_t = e^{lf_t} n'_{t-1} + k'_t          MODE 0: the chunk's end value from zero -> sum, A
//                                                    MODE 1: b'_t = scale q_t.n'_t (MODE 2: dq_t += sc_t n'_t)
//   reverse  z_j = sc_j q_j + e^{lf_{j+1}} z_{j+1}   MODE 3: e^{lf_first} z_first from zero -> sum, A
//                                                    MODE 4: dk'_j += z_j
// A chunk's entering state is its predecessors' (successors') summaries, each decayed by the chunks between.
template <int MODE>
__global__ void __launch_bounds__(128) mn__k_mlstm_nrm(mn__mlstm_nargs p) {
    __shared__ float prod[MODE == 1 ? MN__MLSTM_NC : 1][129];   // MODE 1: q_t[d] n'_t[d], padded (no conflicts)
    const unsigned c = blockIdx.x, bh = blockIdx.y, d = threadIdx.x, Dk = p.Dk, H = p.H, T = p.T, NT = p.NT;
    const unsigned b = bh / H, h = bh % H, t0 = c * MN__MLSTM_NC;
    const unsigned L = T - t0 < MN__MLSTM_NC ? T - t0 : MN__MLSTM_NC;
    const float* sum = p.sum + (size_t)bh * NT * Dk;
    const float* A = p.A + (size_t)bh * NT;
    float z = 0.f;
    if (MODE == 1 || MODE == 2) {                     // N_c = sum_{c' < c} (prod of A between) s_{c'}
        float P = 1.f;
        for (unsigned cc = c; cc-- > 0;) { z = fmaf(P, sum[(size_t)cc * Dk + d], z); P *= A[cc]; }
    } else if (MODE == 4) {                           // R_c = sum_{c' > c} (prod of A between) rho_{c'}
        float P = 1.f;
        for (unsigned cc = c + 1; cc < NT; cc++) { z = fmaf(P, sum[(size_t)cc * Dk + d], z); P *= A[cc]; }
    }
    double G = 0.0;                                   // the chunk's sum of lf (MODE 0, 3)
    if (MODE <= 2) {
#pragma unroll 4
        for (unsigned j = 0; j < L; j++) {
            const size_t r = ((size_t)b * T + t0 + j) * H + h;
            const float lf = p.lg[r];
            z = fmaf(expf(lf), z, p.x[r * Dk + d]);
            if (MODE == 0) G += lf;
            if (MODE == 1) prod[j][d] = z * p.q[r * Dk + d];
            if (MODE == 2) p.y[r * Dk + d] += p.sc[r] * z;
        }
    } else {
#pragma unroll 4
        for (unsigned j = L; j-- > 0;) {
            const size_t r = ((size_t)b * T + t0 + j) * H + h;
            const float lf = p.lg[r], zz = fmaf(p.sc[r], p.x[r * Dk + d], z);
            if (MODE == 4) p.y[r * Dk + d] += zz;
            z = expf(lf) * zz;                        // what token j hands token j - 1
            if (MODE == 3) G += lf;
        }
    }
    if (MODE == 0 || MODE == 3) {
        p.sum[((size_t)bh * NT + c) * Dk + d] = z;
        if (d == 0) p.A[(size_t)bh * NT + c] = (float)exp(G);
    }
    if (MODE == 1) {
        __syncthreads();
        if (d < L) {                                  // thread d sums token d's row (Dk >= 64 >= L threads)
            float s = 0.f;
            for (unsigned e = 0; e < Dk; e++) s += prod[d][e];
            p.y[((size_t)b * T + t0 + d) * H + h] = p.scale * s;
        }
    }
}
// Per row (one warp each): E = e^{c - m}, bt = b' E, nrm = max(|bt|, e^{-m}), den = nrm + eps, out = o' E / den
// in place (out NULL: skipped); norm (B,T,H) written when not NULL, bt, den (B,T,H) written (the backward's).
__global__ void __launch_bounds__(256) mn__k_mlstm_fin(float* out, float* norm, float* bt, float* den, const float* bp,
                                                       const float* m, const float* cb, size_t NR, unsigned T,
                                                       unsigned H, unsigned Dv, double eps) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const double mm = m[r], E = exp((double)cb[bh] - mm), btv = (double)bp[r] * E;
    const double nrm = fmax(fabs(btv), exp(-mm)), dn = nrm + eps;
    const float f = (float)(E / dn);
    if (out)
        for (unsigned j = lane; j < Dv; j += 32) out[r * Dv + j] *= f;
    if (lane == 0) {
        if (norm) norm[r] = (float)nrm;
        bt[r] = (float)btv;
        den[r] = (float)dn;
    }
}
// Per row (after mn__k_mlstm_prep): dop = dout E / den (B,T,H,Dv) the GLA op's output gradient, sc = scale dbt E
// (B,T,H) the vector scan's (dbt the gradient of the stabilised bt = b' E).
__global__ void __launch_bounds__(256) mn__k_mlstm_dprep(float* dop, float* sc, const float* dout, const float* dbt,
                                                         const float* den, const float* m, const float* cb,
                                                         size_t NR, unsigned T, unsigned H, unsigned Dv, float scale) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const double E = exp((double)cb[bh] - (double)m[r]);
    const float f = (float)(E / (double)den[r]);
    for (unsigned j = lane; j < Dv; j += 32) dop[r * Dv + j] = f * dout[r * Dv + j];
    if (lane == 0) sc[r] = (float)((double)scale * dbt[r] * E);
}
// Per row: dk = e^{i - c} dk' (B,T,H,Dk) accumulated (acc) or written; kdk (B,T,H) = k'.dk' (= k.dk) written.
__global__ void __launch_bounds__(256) mn__k_mlstm_kfin(float* dk, float* kdk, const float* dkp, const float* kp,
                                                        const float* ig, const float* cb, size_t NR, unsigned T,
                                                        unsigned H, unsigned Dk, int acc) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const float e = (float)exp((double)ig[r] - (double)cb[bh]);
    float part = 0.f;
    for (unsigned d = lane; d < Dk; d += 32) {
        const float g = dkp[r * Dk + d], v1 = e * g;
        part = fmaf(kp[r * Dk + d], g, part);
        dk[r * Dk + d] = acc ? dk[r * Dk + d] + v1 : v1;
    }
    part = mn__warp_sum(part);
    if (lane == 0) kdk[r] = part;
}

template <int MODE>
static int mn__mlstm_nrm_launch(mn_cuda_ctx* ctx, const mn__mlstm_nargs& p, size_t BH) {
    mn__k_mlstm_nrm<MODE><<<dim3(p.NT, (unsigned)BH), p.Dk, 0, MN__STREAM>>>(p);
    MN__LAUNCHED();
    return MN_OK;
}
// whether the chunk form takes the shapes and pointers (the gates' range is the device's check)
static int mn__mlstm_chunk_fits(size_t B, size_t H, size_t Dk, size_t Dv, const void* const* p, int np) {
    if (Dk != Dv || (Dk != 64 && Dk != 128) || B * H > 65535) return 0;
    for (int i = 0; i < np; i++)
        if ((uintptr_t)p[i] % 16) return 0;
    return 1;
}
// the per-head shift c into w->cb; *ok = 1 when every head's input gates span at most MN__MLSTM_RANGE
static int mn__mlstm_range(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, const float* ig, size_t B, size_t T, size_t H,
                           int* ok) {
    const size_t BH = B * H;
    unsigned f = 1;
    MN__CU(cudaMemsetAsync(w->flag, 0, sizeof(unsigned), MN__STREAM));
    mn__k_mlstm_range<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(w->cb, (unsigned*)w->flag, ig, (unsigned)BH,
                                                                      (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    MN__CU(cudaMemcpyAsync(&f, w->flag, sizeof f, cudaMemcpyDeviceToHost, MN__STREAM));
    MN__CU(cudaStreamSynchronize(MN__STREAM));
    *ok = f == 0;
    return MN_OK;
}
// The chunk form's forward (after mn__mlstm_range): the gates (m; stab, mt when not NULL), k', lf, the GLA
// op's o' into out (out NULL: no output, the rest only), b', then out, norm, w->bt, w->den; the forward
// summaries stay in w->nsum, w->nA.
static int mn__mlstm_fwd_chunk(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, float* out, float* norm, float* stab,
                               float* mt, const float* q, const float* k, const float* v, const float* ig,
                               const float* fg, const float* m0, size_t B, size_t T, size_t H, size_t D, double scale,
                               double eps) {
    const size_t BH = B * H, NR = B * T * H;
    const unsigned rb = (unsigned)((NR + 7) / 8);
    mn__k_mlstm_gates<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(w->m, w->fp, w->ip, stab, mt, ig, fg, m0,
                                                                      (unsigned)BH, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__k_mlstm_kprep<<<rb, 256, 0, MN__STREAM>>>(w->kp, w->lg, k, ig, fg, w->cb, NR, (unsigned)T, (unsigned)H,
                                                   (unsigned)D);
    MN__LAUNCHED();
    if (out) {                                        // NULL: the backward given the forward's output
        // the GLA products in 3xTF32 whatever ctx->math, as the recurrent form's fp32 (the gate gradients are
        // sums over the sequence that cancel: SSD's measured 17x in plain TF32)
        mn__math_fp32 x3(ctx);
        MN__TRY(mn_cuda_gla_forward(ctx, out, NULL, q, w->kp, v, w->lg, NULL, B, T, H, D, D, 1, scale, MN__MLSTM_NC,
                                    w->gla));
    }
    mn__mlstm_nargs p;
    memset(&p, 0, sizeof p);
    p.x = w->kp; p.lg = w->lg; p.q = q; p.sum = w->nsum; p.A = w->nA; p.y = w->bp;
    p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)D; p.NT = (unsigned)((T + MN__MLSTM_NC - 1) / MN__MLSTM_NC);
    p.scale = (float)scale;
    MN__TRY(mn__mlstm_nrm_launch<0>(ctx, p, BH));
    MN__TRY(mn__mlstm_nrm_launch<1>(ctx, p, BH));
    mn__k_mlstm_fin<<<rb, 256, 0, MN__STREAM>>>(out, norm, w->bt, w->den, w->bp, w->m, w->cb, NR, (unsigned)T,
                                                 (unsigned)H, (unsigned)D, eps);
    MN__LAUNCHED();
    return MN_OK;
}
// form 0: the chunk form where it applies, else the recurrent one; 2: the chunk form or MN_ERR_CONFIG
static int mn__mlstm_forward_form(mn_cuda_ctx* ctx, int form, float* out, float* norm, float* stab, float* Ct,
                                  float* nt, float* mt, const float* q, const float* k, const float* v,
                                  const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                                  size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps,
                                  size_t C, float* work) {
    const char* who = form ? "mn_cuda_mlstm_forward_chunk" : "mn_cuda_mlstm_forward";
    MN__TRY(mn__mlstm_check(ctx, who, B, T, H, Dk, Dv, C));
    const void* al[5] = { out, q, k, v, work };
    // T >= one chunk: the H200 run 21 measured df wrong at T = 1 (2 checks), right from T = 64 on
    const int fits = T >= MN__MLSTM_NC && !Ct && !nt && !C0 && !n0 && mn__mlstm_chunk_fits(B, H, Dk, Dv, al, 5);
    if (!fits && form)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk == Dv in {64, 128}, no C0, n0, Ct, nt, aligned tensors",
                        __LINE__);
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    int ok = 0;
    if (fits) MN__TRY(mn__mlstm_range(ctx, &w, ig, B, T, H, &ok));
    if (!ok && form) return mn__fail(ctx, MN_ERR_CONFIG, who, "input gates span more than 40 in a head", __LINE__);
    if (!ok)
        return mn__mlstm_fwd(ctx, &w, out, norm, stab, Ct, nt, mt, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv,
                             scale, eps);
    return mn__mlstm_fwd_chunk(ctx, &w, out, norm, stab, mt, q, k, v, ig, fg, m0, B, T, H, Dk, scale, eps);
}
int mn_cuda_mlstm_forward(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* Ct, float* nt, float* mt,
                          const float* q, const float* k, const float* v, const float* ig, const float* fg,
                          const float* C0, const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                          size_t Dv, double scale, double eps, size_t C, float* work) {
    return mn__mlstm_forward_form(ctx, 0, out, norm, stab, Ct, nt, mt, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv,
                                  scale, eps, C, work);
}
int mn_cuda_mlstm_forward_chunk(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* mt, const float* q,
                                const float* k, const float* v, const float* ig, const float* fg, const float* m0,
                                size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                                float* work) {
    return mn__mlstm_forward_form(ctx, 2, out, norm, stab, NULL, NULL, mt, q, k, v, ig, fg, NULL, NULL, m0, B, T, H,
                                  Dk, Dv, scale, eps, C, work);
}
// The chunk form's backward (after mn__mlstm_range; see the section comment); acc as mn__mlstm_backward_rec;
// osaved (B,T,H,Dv) the forward's output of these arguments (the layer keeps it) or NULL (recomputed).
static int mn__mlstm_bwd_chunk(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, float* dq, float* dk, float* dv, float* di,
                               float* df, const float* dout, const float* q, const float* k, const float* v,
                               const float* ig, const float* fg, const float* m0, size_t B, size_t T, size_t H,
                               size_t D, double scale, double eps, int mode, int acc, const float* osaved) {
    const size_t BH = B * H, NR = B * T * H;
    const unsigned rb = (unsigned)((NR + 7) / 8);
    // the forward again: o into w->o (unless given: the forward's output, bitwise what this would give), with
    // m, bt, den, k', lf and the forward summaries
    MN__TRY(mn__mlstm_fwd_chunk(ctx, w, osaved ? NULL : w->o, NULL, NULL, NULL, q, k, v, ig, fg, m0, B, T, H, D, scale,
                                eps));
    const float* o = osaved ? osaved : w->o;
    mn__k_mlstm_prep<<<rb, 256, 0, MN__STREAM>>>(w->dbt, w->dmu, w->qdq, dout, o, w->bt, w->den, w->m, NR,
                                                  (unsigned)D, (float)eps, mode == MN_MLSTM_BW_EXACT);
    MN__LAUNCHED();
    mn__k_mlstm_dprep<<<rb, 256, 0, MN__STREAM>>>(w->o, w->sc, dout, w->dbt, w->den, w->m, w->cb, NR, (unsigned)T,
                                                   (unsigned)H, (unsigned)D, (float)scale);   // w->o now dO'
    MN__LAUNCHED();
    if (acc) MN__CU(cudaMemsetAsync(w->dkp, 0, NR * D * sizeof(float), MN__STREAM));   // dk' always starts at 0
    {   // in 3xTF32, as the forward
        mn__math_fp32 x3(ctx);
        MN__TRY(mn__gla_backward(ctx, dq, w->dkp, dv, NULL, NULL, w->o, NULL, q, w->kp, v, w->lg, NULL, B, T, H, D, D,
                                 1, scale, MN__MLSTM_NC, w->gla, acc));
    }
    if (mode == MN_MLSTM_BW_EXACT) {                  // the normaliser's part (detach: dbt = 0, nothing to add)
        mn__mlstm_nargs p;
        memset(&p, 0, sizeof p);
        p.x = w->kp; p.sc = w->sc; p.lg = w->lg; p.sum = w->nsum; p.A = w->nA; p.y = dq;
        p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)D;
        p.NT = (unsigned)((T + MN__MLSTM_NC - 1) / MN__MLSTM_NC); p.scale = (float)scale;
        MN__TRY(mn__mlstm_nrm_launch<2>(ctx, p, BH));  // reads the forward summaries before MODE 3 replaces them
        p.x = q; p.y = w->dkp;
        MN__TRY(mn__mlstm_nrm_launch<3>(ctx, p, BH));
        MN__TRY(mn__mlstm_nrm_launch<4>(ctx, p, BH));
    }
    mn__k_mlstm_kfin<<<rb, 256, 0, MN__STREAM>>>(dk, w->kdkp, w->dkp, w->kp, ig, w->cb, NR, (unsigned)T, (unsigned)H,
                                                  (unsigned)D, acc);
    MN__LAUNCHED();
    mn__k_mlstm_gates_bwd<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(di, df, ig, fg, w->m, m0, w->qdq, w->dmu,
                                                                          w->kdkp, (unsigned)BH, (unsigned)T,
                                                                          (unsigned)H, 1u, acc);
    MN__LAUNCHED();
    return MN_OK;
}
// form 0: the chunk form where it applies (no C0, n0, dC0, dn0; Dk == Dv in {64, 128}; the gates' range), else
// the recurrent one; 2: the chunk form or MN_ERR_CONFIG. acc = 0 overwrites the gradients (the model's);
// osaved (B,T,H,Dv) the forward's output or NULL, as in mn__mlstm_bwd_chunk (the recurrent form ignores it).
static int mn__mlstm_backward_form(mn_cuda_ctx* ctx, int form, float* dq, float* dk, float* dv, float* di, float* df,
                                   float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                   const float* v, const float* ig, const float* fg, const float* C0,
                                   const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                                   size_t Dv, double scale, double eps, size_t C, int mode, float* work, int acc,
                                   const float* osaved) {
    const char* who = form ? "mn_cuda_mlstm_backward_chunk" : "mn_cuda_mlstm_backward";
    MN__TRY(mn__mlstm_check(ctx, who, B, T, H, Dk, Dv, C));
    if (mode != MN_MLSTM_BW_EXACT && mode != MN_MLSTM_BW_DETACH)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "mode must be EXACT or DETACH", __LINE__);
    const void* al[9] = { dq, dk, dv, dout, q, k, v, work, osaved };
    const int fits = T >= MN__MLSTM_NC && !C0 && !n0 && !dC0 && !dn0 && mn__mlstm_chunk_fits(B, H, Dk, Dv, al, 9);
    if (!fits && form)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk == Dv in {64, 128}, no C0, n0, dC0, dn0, aligned tensors",
                        __LINE__);
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    int ok = 0;
    if (fits) MN__TRY(mn__mlstm_range(ctx, &w, ig, B, T, H, &ok));
    if (!ok && form) return mn__fail(ctx, MN_ERR_CONFIG, who, "input gates span more than 40 in a head", __LINE__);
    if (!ok)
        return mn__mlstm_backward_rec(ctx, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H,
                                      Dk, Dv, scale, eps, C, mode, work, acc);
    return mn__mlstm_bwd_chunk(ctx, &w, dq, dk, dv, di, df, dout, q, k, v, ig, fg, m0, B, T, H, Dk, scale, eps, mode,
                               acc, osaved);
}
static int mn__mlstm_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df, float* dC0,
                              float* dn0, const float* dout, const float* q, const float* k, const float* v,
                              const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                              size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                              int mode, float* work, int acc, const float* osaved) {
    return mn__mlstm_backward_form(ctx, 0, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H,
                                   Dk, Dv, scale, eps, C, mode, work, acc, osaved);
}
int mn_cuda_mlstm_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df, float* dC0,
                           float* dn0, const float* dout, const float* q, const float* k, const float* v,
                           const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                           size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                           int mode, float* work) {
    return mn__mlstm_backward_form(ctx, 0, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H,
                                   Dk, Dv, scale, eps, C, mode, work, 1, NULL);
}
int mn_cuda_mlstm_backward_chunk(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                 const float* dout, const float* q, const float* k, const float* v, const float* ig,
                                 const float* fg, const float* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                 double scale, double eps, size_t C, int mode, float* work) {
    return mn__mlstm_backward_form(ctx, 2, dq, dk, dv, di, df, NULL, NULL, dout, q, k, v, ig, fg, NULL, NULL, m0, B, T,
                                   H, Dk, Dv, scale, eps, C, mode, work, 1, NULL);
}

// The decode step: one block of 256 threads per (sequence, head); warp w takes the state rows w, w+8, ...,
// lane l the columns l, l+32, ... (coalesced rows); the gates in double by thread 0 (as the CPU step),
// n and n.q by the first Dk threads, the read-out's column sums over the 8 warps in shared memory.
// C (B,H,Dk,Dv), n (B,H,Dk), m (B,H) in place; out (B,H,Dv); q, k (B,H,Dk), v (B,H,Dv), ig, fg (B,H).
__global__ void __launch_bounds__(256) mn__k_mlstm_step(float* out, float* C, float* n, float* m, const float* q,
                                                        const float* k, const float* v, const float* ig,
                                                        const float* fg, unsigned Dk, unsigned Dv, float scale,
                                                        float eps) {
    __shared__ float sq[128], sk[128], sv[128], red[8][128], snq[8], sg[3];
    const size_t bh = blockIdx.x;
    const unsigned tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    if (tid == 0) {
        double lf = mn__mlstm_logsig(fg[bh]), mo = m[bh], i = ig[bh], mn = fmax(lf + mo, i);
        sg[0] = (float)exp(lf + mo - mn);           // f'
        sg[1] = (float)exp(i - mn);                 // i'
        sg[2] = (float)exp(-mn);                    // the normaliser's floor
        m[bh] = (float)mn;                          // only this thread reads m[bh]
    }
    for (unsigned i = tid; i < Dk; i += 256) { sq[i] = q[bh * Dk + i]; sk[i] = k[bh * Dk + i]; }
    for (unsigned j = tid; j < Dv; j += 256) sv[j] = v[bh * Dv + j];
    __syncthreads();
    const float fp = sg[0], ip = sg[1];
    float part = 0.f;                                // n = f' n + i' k ; n.q
    for (unsigned d = tid; d < Dk; d += 256) {
        float nn = fmaf(fp, n[bh * Dk + d], ip * sk[d]);
        n[bh * Dk + d] = nn;
        part = fmaf(nn, sq[d], part);
    }
    part = mn__warp_sum(part);
    if (lane == 0) snq[w] = part;
    float y[4] = { 0.f, 0.f, 0.f, 0.f };             // C = f' C + i' k v^T ; y = C^T q (this warp's rows)
    for (unsigned d = w; d < Dk; d += 8) {
        float* row = C + (bh * Dk + d) * Dv;
        const float kd = ip * sk[d], qd = sq[d];
#pragma unroll
        for (int cc = 0; cc < 4; cc++) {
            const unsigned j = lane + 32 * cc;
            if (j < Dv) {
                float cv = fmaf(fp, row[j], kd * sv[j]);
                row[j] = cv;
                y[cc] = fmaf(qd, cv, y[cc]);
            }
        }
    }
#pragma unroll
    for (int cc = 0; cc < 4; cc++)
        if (lane + 32 * cc < Dv) red[w][lane + 32 * cc] = y[cc];
    __syncthreads();
    if (tid < Dv) {
        float nq = 0.f, s = 0.f;
        for (int i = 0; i < 8; i++) { nq += snq[i]; s += red[i][tid]; }
        const float den = fmaxf(fabsf(scale * nq), sg[2]) + eps;
        out[bh * Dv + tid] = scale * s / den;
    }
}
int mn_cuda_mlstm_step(mn_cuda_ctx* ctx, float* out, float* C, float* n, float* m, const float* q, const float* k,
                       const float* v, const float* ig, const float* fg, size_t B, size_t H, size_t Dk, size_t Dv,
                       double scale, double eps) {
    if (Dk == 0 || Dv == 0 || Dk > 128 || Dv > 128 || B * H == 0 || B * H > 0x7fffffff)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mlstm_step", "needs 0 < Dk, Dv <= 128, B*H > 0", __LINE__);
    mn__k_mlstm_step<<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(out, C, n, m, q, k, v, ig, fg, (unsigned)Dk,
                                                                 (unsigned)Dv, (float)scale, (float)eps);
    MN__LAUNCHED();
    return MN_OK;
}
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
// Thread r of the 2 Dh threads owns two gate rows of the head, r and r + 2 Dh: gates ~i and ~z of unit
// j = r for r < Dh, ~f and ~o of unit j = r - Dh otherwise. Each row is split between the thread's
// registers (the first KR = min(Dh, 96) columns) and shared memory (the other Dh - KR, stored column by
// column so that the block's threads read consecutive words). Why two rows a thread: a step is bound by
// shared-memory reads (R's shared part and the y_{t-1} broadcasts, at 128 bytes a clock per SM), and half
// the threads with twice the registers each (launch bounds 2 Dh: up to 255) hold 96 columns of R in
// registers instead of 64, while each y_{t-1} broadcast now feeds two rows: at Dh = 128 a step reads
// 768 shared-memory wavefronts instead of 1,536 (the one-row-a-thread kernel of runs 19-36; the backward
// the same, below). Each step:
//   1. every thread: its two rows' x_t + b + R[row,:] . y_{t-1} (y_{t-1} in shared memory, read as
//      float4 broadcasts; x_{t+1} is loaded while step t computes); the (~f, ~o) threads also form
//      logsigmoid(~f) and sigmoid(~o) into shared memory, so the cell's transcendentals run in parallel;
//                                                                          __syncthreads
//   2. the Dh (~i, ~z) threads: the pointwise cell of their unit (states in registers), y, c, n, m written
//      to global memory and y_t to shared memory;                         __syncthreads
// The backward recomputes every step's pre-activations at once (they need only the saved y: one
// cuBLAS product per gate, batched over heads, into the workspace), then one launch walks the steps
// backwards: thread p owns columns i and i + Dh/2 of one gate block g of R (g = p / (Dh/2), i = p % (Dh/2);
// registers + shared memory as above; both columns dot the same block of draw, so each of its broadcasts
// feeds two columns, as in the forward), the unit threads (p < Dh) compute the four gate gradients of their
// unit (written over the recomputed pre-activations and into dx), and every thread forms its two columns'
// shares of R^T draw, the carry into y_{t-1} (the four gate blocks' partial sums added by the unit
// threads); each unit thread also sums its gate gradients over the steps (db's share of its sequence).
// dR = sum_t draw_t^T y_{t-1} is then one batched cuBLAS product per gate over the saved gradients (mn__gemm
// cuts its long K into slices where the heads are few), db a deterministic column sum of the sequences'
// shares: no atomics, the same bits every run. Every dot product keeps the summation order of a plain loop
// over the columns in four accumulators (column k into accumulator k % 4), whatever the register / shared
// split: the same bits as with any other KR.
// The decode step has its own kernel (one block per head and group of 8 sequences: R read once for the
// group, see mn__k_slstm_step).
// Precision: fp32 throughout (exp, tanh, logsigmoid in float; the carries in registers); the two
// backward products follow ctx->math (TF32 when asked).

#define MN__SLSTM_KR(DH) ((DH) < 96 ? (DH) : 96)   // columns of each of its two rows a thread keeps in registers
// dynamic shared memory (bytes) of both kernels: R's shared part (Dh - KR, 4Dh), two (4Dh) vectors, one (Dh)
static size_t mn__slstm_smem(size_t Dh) {
    size_t ks = Dh - (Dh < 96 ? Dh : 96);
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

// Two dot products with one vector over Dh entries: *oa = sum_k wa[k] v[k], *ob = sum_k wb[k] v[k], row a held
// as ra[0..KR) (registers) and Rs[k G4 + q], k < Dh - KR (shared memory), row b as rb and Rs[k G4 + q + OFF];
// v (Dh) in shared memory, 16-byte aligned, each float4 of it read once for both rows (a broadcast where the
// warp's threads share v)
template <int DH, int OFF>
__device__ __forceinline__ void mn__slstm_dot2(float* oa, float* ob, const float* ra, const float* rb,
                                               const float* Rs, const float* v, int q) {
    constexpr int G4 = 4 * DH, KR = MN__SLSTM_KR(DH), KS = DH - KR;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f, b0 = 0.f, b1 = 0.f, b2 = 0.f, b3 = 0.f;
#pragma unroll
    for (int k = 0; k < KR; k += 4) {
        const float4 x = *(const float4*)(v + k);
        a0 = fmaf(ra[k], x.x, a0); a1 = fmaf(ra[k + 1], x.y, a1);
        a2 = fmaf(ra[k + 2], x.z, a2); a3 = fmaf(ra[k + 3], x.w, a3);
        b0 = fmaf(rb[k], x.x, b0); b1 = fmaf(rb[k + 1], x.y, b1);
        b2 = fmaf(rb[k + 2], x.z, b2); b3 = fmaf(rb[k + 3], x.w, b3);
    }
#pragma unroll
    for (int k = 0; k < KS; k += 4) {
        const float4 x = *(const float4*)(v + KR + k);
        const float* w = Rs + k * G4 + q;
        a0 = fmaf(w[0], x.x, a0); a1 = fmaf(w[G4], x.y, a1);
        a2 = fmaf(w[2 * G4], x.z, a2); a3 = fmaf(w[3 * G4], x.w, a3);
        b0 = fmaf(w[OFF], x.x, b0); b1 = fmaf(w[G4 + OFF], x.y, b1);
        b2 = fmaf(w[2 * G4 + OFF], x.z, b2); b3 = fmaf(w[3 * G4 + OFF], x.w, b3);
    }
    *oa = (a0 + a1) + (a2 + a3);
    *ob = (b0 + b1) + (b2 + b3);
}

extern __shared__ float4 mn__slstm_sh4[];

// The forward walk: block = (sequence b, head h), 2 Dh threads. y, c, n, m (B,T,Hd) written; x (B,T,4Hd);
// R (NH,4Dh,Dh); bias (4Hd); y0, c0, n0, m0 (B,Hd) or NULL (zeros). Every initial state is read before
// the first write and a block touches only its own head's units, so with T = 1 the outputs may be the
// initial states.
template <int DH>
__global__ void __launch_bounds__(2 * DH) mn__k_slstm_fwd(float* y, float* c, float* n, float* m, const float* x,
                                                          const float* R, const float* bias, const float* y0,
                                                          const float* c0, const float* n0, const float* m0,
                                                          unsigned NH, size_t T) {
    constexpr int G4 = 4 * DH, G2 = 2 * DH, KR = MN__SLSTM_KR(DH), KS = DH - KR;
    float* Rs = (float*)mn__slstm_sh4;           // (KS,G4) R's columns KR.. of every row, column-major
    float* ys = Rs + KS * G4;                    // (DH) y_{t-1} of the head
    float* fo = ys + DH;                         // (2DH) logsigmoid(~f), then sigmoid(~o), of every unit
    const int r = threadIdx.x, g = r / DH, j = r % DH;   // rows r (gate g) and r + 2DH (gate g + 2) of unit j
    const size_t b = blockIdx.x / NH, h = blockIdx.x % NH, Hd = (size_t)NH * DH, G = 4 * Hd;
    const float* Ra = R + (h * G4 + r) * DH;     // rows r and r + 2DH of the head's R
    const float* Rb = Ra + (size_t)G2 * DH;
    float ra[KR], rb[KR];
#pragma unroll
    for (int k = 0; k < KR; k++) { ra[k] = Ra[k]; rb[k] = Rb[k]; }
    for (int k = 0; k < KS; k++) { Rs[k * G4 + r] = Ra[KR + k]; Rs[k * G4 + G2 + r] = Rb[KR + k]; }
    const size_t cola = (size_t)g * Hd + h * DH + j, colb = cola + 2 * Hd;   // the rows' columns of x and bias
    const float ba = bias[cola], bb = bias[colb];
    const size_t s0 = b * Hd + h * DH + j;        // unit j's index into (B,Hd)
    float cs = 0.f, ns = 0.f, ms = 0.f;           // unit j's c, n, m (g == 0)
    if (g == 0) {
        ys[j] = y0 ? y0[s0] : 0.f;
        if (c0) cs = c0[s0];
        if (n0) ns = n0[s0];
        if (m0) ms = m0[s0];
    }
    const float* xr = x + b * T * G + cola;       // x[b, t, cola] = xr[t G], x[b, t, colb] = xr[t G + 2 Hd]
    float xna = xr[0], xnb = xr[2 * Hd];
    __syncthreads();
    for (size_t t = 0; t < T; t++) {
        const float xa = xna, xb = xnb;
        if (t + 1 < T) { xna = xr[(t + 1) * G]; xnb = xr[(t + 1) * G + 2 * Hd]; }   // in flight during step t
        float da, db;
        mn__slstm_dot2<DH, G2>(&da, &db, ra, rb, Rs, ys, r);
        const float pa = (xa + ba) + da, pb = (xb + bb) + db;   // ~i, ~z (g == 0) or ~f, ~o (g == 1)
        float tz = 0.f;
        if (g) { fo[j] = mn__slstm_logsig(pa); fo[DH + j] = mn__slstm_sig(pb); }
        else tz = tanhf(pb);
        __syncthreads();
        if (g == 0) {
            const float ri = pa, lf = fo[j], so = fo[DH + j];
            const float mnew = ns == 0.f ? ri : fmaxf(ri, ms + lf);
            const float ig = fminf(expf(ri - mnew), 1.f), fg = fminf(expf(ms + lf - mnew), 1.f);
            cs = fg * cs + ig * tz;
            ns = fg * ns + ig;
            ms = mnew;
            const float yv = so * cs / ns;
            const size_t o = (b * T + t) * Hd + h * DH + j;
            y[o] = yv; c[o] = cs; n[o] = ns; m[o] = ms;
            ys[j] = yv;
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

// The backward walk (mesanet.h's mn_slstm_backward, step for step): block = (b, h), 2 Dh threads.
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
__global__ void __launch_bounds__(2 * DH) mn__k_slstm_bwd(float* dx, float* dbp, float* dy0, float* dc0, float* dn0,
                                                          float* raw, const float* dy, const float* y, const float* c,
                                                          const float* n, const float* m, const float* R,
                                                          const float* c0, const float* n0, const float* m0,
                                                          unsigned NH, size_t T, int acc) {
    constexpr int G4 = 4 * DH, KR = MN__SLSTM_KR(DH), KS = DH - KR;
    float* Rs = (float*)mn__slstm_sh4;           // (KS,G4): Rs[k G4 + q] = R[h][(q / DH) DH + KR + k][q % DH]
    float* dr = Rs + KS * G4;                    // (G4) the step's draw, gate-major
    float* part = dr + G4;                       // (G4) each gate block's share of R^T draw
    // thread p: columns i and i + Dh/2 of gate block g (g = p / (Dh/2)), both dotted with that block's draw;
    // qa = g Dh + i, the first one's place in gate-major order (Rs, part)
    constexpr int H2 = DH / 2;
    const int p = threadIdx.x, g = p / H2, i = p % H2, qa = g * DH + i;
    const size_t b = blockIdx.x / NH, h = blockIdx.x % NH, Hd = (size_t)NH * DH, G = 4 * Hd;
    const float* Rca = R + (h * G4 + (size_t)g * DH) * DH + i;   // column i of gate block g: Rca[j DH]
    const float* Rcb = Rca + H2;                                   // ... column i + Dh/2
    float rca[KR], rcb[KR];
#pragma unroll
    for (int k = 0; k < KR; k++) { rca[k] = Rca[(size_t)k * DH]; rcb[k] = Rcb[(size_t)k * DH]; }
    for (int k = 0; k < KS; k++) {
        Rs[k * G4 + qa] = Rca[(size_t)(KR + k) * DH];
        Rs[k * G4 + qa + H2] = Rcb[(size_t)(KR + k) * DH];
    }
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
        // part[g DH + i] = sum_j R[h][g DH + j][i] draw[g DH + j], columns i and i + Dh/2 of block g by one thread
        mn__slstm_dot2<DH, H2>(part + qa, part + qa + H2, rca, rcb, Rs, dr + g * DH, qa);
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
    mn__k_slstm_fwd<DH><<<(unsigned)(B * NH), 2 * DH, smem, MN__STREAM>>>(y, c, n, m, x, R, b, y0, c0, n0, m0,
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
    mn__k_slstm_bwd<DH><<<(unsigned)(B * NH), 2 * DH, smem, MN__STREAM>>>(dx, dbp, dy0, dc0, dn0, raw, dy, y, c, n, m,
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

// >>cuda_model
// defines: mn_cuda_model_{init,load,save,free,get,set,reserve,forward,logits,zero_grad,backward,
//          clip_grad_norm,adamw_step,flops_per_token,device_bytes}, the decode
//          mn_cuda_model_state_{init,reset,free} and mn_cuda_model_step (each mixer's step hook)
//
// mesanet.h's model (>>model: mn_forward, mn_backward, and its mixers' layers) on the GPU, call for
// call with the ops above, the mixers in one table like the CPU's (mn__cm_mixers: a name, the
// parameter names, the activation layouts, forward, backward). The parameter table is the CPU model's: the
// library's private float copy of mesanet.h (cuda/mesanet_cuda_host.c) builds an mn_model with
// mn_model_init or mn_load, and the device blocks params, grads, opt_m, opt_v copy its parameter
// block. Differences from the CPU, none of them in the math:
//   - activations: the forward keeps what the backward reads, per layer (the residual stream,
//     both norms' inputs/outputs and rstd, the MLP's gate/up/h, and the mixer's: the Mesa layer's
//     q/k/v before and after the conv and norm, gates, lambda, the solves, o and the normed o; the
//     attention layer's rotated q, k, v, its output and lse, not the T x T probabilities); activation
//     GRADIENTS live in one layer's worth of buffers reused from the last layer to the first, plus
//     two residual-gradient buffers that swap (dres[l+1] -> dres[l]);
//   - the residual adds are fused into the output projections (x2 = x + o Wo^T and
//     y = x2 + h Wd^T as one cuBLAS call each with beta = 1);
//   - the loss is summed in double on the device (one atomic per warp), as the CPU sums in double.
// Everything else (which op, which inputs, which order of accumulation into each gradient) is
// mn_forward / mn_backward's.

#ifdef MESANET_DOUBLE
#error "mesanet_cuda.cu is float: build it without MESANET_DOUBLE (a program using the library may still be double)"
#endif

// the library's private CPU model (cuda/mesanet_cuda_host.c)
extern "C" {
int mn_cuda_host_model_init(mn_model* m, const mn_config* cfg);
void mn_cuda_host_model_free(mn_model* m);
int mn_cuda_host_load(mn_model* m, const char* dir, mn_train_meta* meta);
size_t mn_cuda_host_flops_per_token(const mn_model* m, size_t T);
int mn_cuda_host_save(mn_model* m, const char* dir, const mn_train_meta* meta, float* opt_mv, uint64_t opt_step);
}

// Parameter slots of a block, in table order (mesanet.h's >>model): the backbone's five, then the
// mixer's own from MN__CP_MIX on, named by the mixer's row of the table below and checked against
// the CPU model's table when a model is set up.
enum { MN__CP_ATTN_NORM, MN__CP_MLP_NORM, MN__CP_GATE, MN__CP_UP, MN__CP_DOWN, MN__CP_MIX };
static const char* const mn__cp_block[MN__CP_MIX] = {
    "attn_norm.weight", "mlp_norm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight" };
// the Mesa layer's (mesanet.h's MN__MS_*)
enum { MN__CP_Q = MN__CP_MIX, MN__CP_K, MN__CP_V, MN__CP_A, MN__CP_AB, MN__CP_B, MN__CP_BB, MN__CP_LAM, MN__CP_QC,
       MN__CP_KC, MN__CP_ON, MN__CP_O, MN__CP_MESA_END };
static const char* const mn__cp_mesa[MN__CP_MESA_END - MN__CP_MIX] = {
    "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.a_proj.weight", "attn.a_proj.bias",
    "attn.b_proj.weight", "attn.b_proj.bias", "attn.lambda_params", "attn.q_conv1d.weight", "attn.k_conv1d.weight",
    "attn.o_norm.weight", "attn.o_proj.weight" };
// the attention layer's (mesanet.h's MN__ATT_*)
enum { MN__CA_Q = MN__CP_MIX, MN__CA_K, MN__CA_V, MN__CA_O, MN__CA_END };
static const char* const mn__cp_attn[MN__CA_END - MN__CP_MIX] = {
    "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.o_proj.weight" };
// the GLA family's (mesanet.h's par structs of "linattn", "sgla", "gla", in walk order)
enum { MN__CL_Q = MN__CP_MIX, MN__CL_FQ = MN__CL_Q + 3, MN__CL_FK = MN__CL_FQ + 4, MN__CL_NORM = MN__CL_FK + 4,
       MN__CL_O, MN__CL_END };
static const char* const mn__cp_linattn[MN__CL_END - MN__CP_MIX] = {
    "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.feature_map_q.layer1.weight",
    "attn.feature_map_q.layer1.bias", "attn.feature_map_q.layer2.weight", "attn.feature_map_q.layer2.bias",
    "attn.feature_map_k.layer1.weight", "attn.feature_map_k.layer1.bias", "attn.feature_map_k.layer2.weight",
    "attn.feature_map_k.layer2.bias", "attn.norm.weight", "attn.o_proj.weight" };
enum { MN__CS_Q = MN__CP_MIX, MN__CS_G = MN__CS_Q + 3, MN__CS_QC, MN__CS_GK = MN__CS_QC + 3,
       MN__CS_NORM = MN__CS_GK + 2, MN__CS_O, MN__CS_END };
static const char* const mn__cp_sgla[MN__CS_END - MN__CP_MIX] = {
    "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.g_proj.weight", "attn.q_conv1d.weight",
    "attn.k_conv1d.weight", "attn.v_conv1d.weight", "attn.gk_proj.weight", "attn.gk_proj.bias",
    "attn.g_norm_swish_gate.weight", "attn.o_proj.weight" };
enum { MN__CG_Q = MN__CP_MIX, MN__CG_GD = MN__CG_Q + 3, MN__CG_G = MN__CG_GD + 3, MN__CG_NORM, MN__CG_O, MN__CG_END };
static const char* const mn__cp_gla[MN__CG_END - MN__CP_MIX] = {
    "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.gk_proj.0.weight", "attn.gk_proj.1.weight",
    "attn.gk_proj.1.bias", "attn.g_proj.weight", "attn.g_norm_swish_gate.weight", "attn.o_proj.weight" };
#define MN__GLA_NORM 16.0   // mesanet.h's MN__GLA_NORMALIZER
#define MN__GLA_RK 16       // mesanet.h's MN__GLA_RANK: the rank of GLA's gate
#define MN__MESA_CLAMP 0.0025   // 1 - b_gamma: the gamma clamp of mesanet.h (gamma <- gamma (1 - c beta^2))

#define MN__HOST(cm) ((mn_model*)(cm)->host)
#define MN__PAR(cm, l, j) ((cm)->params + (cm)->tensors[MN__HOST(cm)->layer_first[l] + (j)].offset)
#define MN__GRD(cm, l, j) ((cm)->grads + (cm)->tensors[MN__HOST(cm)->layer_first[l] + (j)].offset)

// One layer's saved activations: the backbone's, then its mixer's, in the named struct of that mixer
// (the other mixers' pointers stay NULL).
typedef struct mn__cm_mesa_acts {
    float *ql, *kl, *q, *k, *rq, *rk, *v;                        // (N,HD) x4, (N,H) x2, (N,HD)
    float *al, *bl, *g, *beta, *lamb, *xs, *o, *on, *ro;         // (N,H) x4, (HD), (N,HD) x3, (N,H)
} mn__cm_mesa_acts;
typedef struct mn__cm_attn_acts {
    float *q, *k, *v, *ao, *lse;                                 // (N,HD) x3 (q, k rotated), (N,HD), (N,H)
} mn__cm_attn_acts;
typedef struct mn__cm_linattn_acts {
    float *q, *k, *v, *qa, *qb, *ka, *kb, *qf, *kf, *o, *on, *rs;  // (N,HD) x11 (feature maps' halves, phi), (N,H)
    float* keep;                                                 // the GLA op's kept form (mn_cuda_gla_keep_size)
} mn__cm_linattn_acts;
typedef struct mn__cm_sgla_acts {
    float *ql, *kl, *vl, *q, *k, *v, *gl, *g, *o, *gg, *on, *rs;   // (N,HD) x6 (before, after conv), (N,H) x2,
    float* keep;                                                 // (N,HD) x3, (N,H); the op's kept form
} mn__cm_sgla_acts;
typedef struct mn__cm_gla_acts {
    float *q, *k, *v, *l1, *l2, *gk, *o, *gg, *on, *rs;            // (N,HD) x3, (N,16), (N,HD) x5, (N,H)
    float* keep;                                                 // the GLA op's kept form
} mn__cm_gla_acts;
// the activation structs of the mixers whose op sections come after >>cuda_gla
// the DeltaNet / Gated DeltaNet layers' saved activations ("deltanet", "deltanet_neg", "gdn", "gdn_neg")
typedef struct mn__cm_delta_acts {
    float *ql, *kl, *vl, *vc, *q, *k;     // (N,HD) projections, v after conv + silu, q, k after the l2 norm
    float *rq, *rk, *bl, *beta, *al, *g;  // (N,H) rstd of the l2 norms, beta's logit, beta, the decay's
                                          // pre-activation x Wa + dt_bias and the decay g (GDN only)
    float *o, *gl, *on, *ro;              // (N,HD) the op's output, GDN's output gate, normed o; (N,H) rstd
    float* hs;                            // (B,H,NC,D,D) the op's chunk-start states
    float* keep;                          // the chunk form's pieces its backward reads (mn_cuda_delta_rule_keep_size)
} mn__cm_delta_acts;
// their gradients; dqc, dkc double as the forward's conv outputs of q and k; dq .. dg are one span
// (the op accumulates into them: zeroed by one memset)
typedef struct mn__cm_delta_dacts {
    float *dql, *dkl, *dvl, *dqc, *dkc;   // (N,HD)
    float *dq, *dk, *dv, *dbeta, *dg;     // (N,HD) x3, (N,H) x2
    float *dbl, *dal, *dO, *don, *dgl;    // (N,H) x2, (N,HD) x3
} mn__cm_delta_dacts;
// the Mamba-2 layers "mamba2", "mamba2_neg" (mesanet.h's mn__ssd_act; N = B*T tokens, DI = 2 d_model,
// Hm = DI / P heads of P = head_dim, state Ns = head_dim, W_in = 2 DI + 2 Ns + Hm, Wc = DI + 2 Ns; zx and dzx
// rows W_ld = W_in rounded up to 8 floats apart: 16-byte rows for cuBLAS, and bf16 mode's bf16 in_proj)
typedef struct mn__cm_ssd_acts {
    float* zx;                      // (N,W_in) rows W_ld apart: the input projection [z | x | B | C | dt]
    float* xbc;                     // (N,Wc) [x | B | C] = silu(conv(zx's columns DI..) + bias)
    float *dtp, *delta, *at;        // (N,Hm) dt + dt_bias, Delta, the log-decay (or the [-1,1] transition)
    float* xt;                      // (N,DI) X = x Delta
    float *bh, *ch;                 // (N,Hm,Ns) B and C per head
    float *y, *yz, *yn, *rs;        // (N,DI) SSD + D x, gated, normed; (N) rstd of the norm
    float* keep;                    // the GLA op's chunk states, scores and gates (mn_cuda_gla_keep_size, G 1)
} mn__cm_ssd_acts;
typedef struct mn__cm_ssd_dacts {
    float* dzx;                     // (N,W_in) rows W_ld apart (the pad columns never written nor read)
    float* dxbc;                    // (N,Wc)
    float *dyn, *dyz, *dy, *dxt;    // (N,DI) x4
    float *dat, *dbh, *dch;         // (N,Hm), (N,Hm,Ns) x2
    float *tD, *tA, *tdt, *sD;      // (N,DI) the D skip's terms, (N,Hm) x2 A_log's and dt's terms, (DI) sums
} mn__cm_ssd_dacts;
// the "hawk" layer's saved activations (mesanet.h's mn__rglru_act, less gelu(y), which the backward
// recomputes from yl, and the final state and workspace, which the model does not keep)
typedef struct mn__cm_rglru_acts {
    float *yl, *xl, *xc, *h, *gates, *hy;   // (N,C) x4: y branch, x branch, conv out, h; (2,N,C); (N,C) h gelu(yl)
} mn__cm_rglru_acts;
typedef struct mn__cm_rglru_dacts {
    float *dhy, *dh, *dyl, *dxc, *dxl;      // (N,C) x5
} mn__cm_rglru_dacts;
// the "mlstm" layer's saved activations (mesanet.h's mn__mlstm_act, without the op's workspace: the GPU op
// recomputes its forward in the model's shared workspace)
typedef struct mn__cm_mlstm_acts {
    float *q, *k, *v;                 // (N,HD) x3
    float *il, *fl, *ig, *fg;         // (N,H) x4: the gates before and after the soft cap
    float *h, *hn, *rs, *ol, *ho;     // (N,HD) x2, (N,H), (N,HD) x2: the cell's output, normed, rstd, the
} mn__cm_mlstm_acts;                  // output gate's pre-activation, normed h times the gate
// its gradient buffers (each written first by its first writer, acc = 0)
typedef struct mn__cm_mlstm_dacts {
    float *dq, *dk, *dv;              // (N,HD) x3
    float *dil, *dfl, *dig, *dfg;     // (N,H) x4
    float *dh, *dhn, *dol, *dho;      // (N,HD) x4
} mn__cm_mlstm_dacts;
// the "slstm" layer's saved activations (mesanet.h's mn__slstm_act, less the op's workspace: the GPU
// backward takes the model's) and its gradient buffers; C = d_model, NH heads of Dh = C/NH units
typedef struct mn__cm_slstm_acts {
    float *xcp, *xc;                 // (N,C) conv + bias, after silu
    float* x;                        // (N,4C) the gates' input pre-activations, gate-major
    float *y, *c, *n, *m;            // (N,C) the cell's states after each step
    float* rs;                       // (N*NH) rstd of the per-head output norm
} mn__cm_slstm_acts;
typedef struct mn__cm_slstm_dacts {
    float *dy, *dx, *dxc, *dxcp;     // (N,C), (N,4C), (N,C) x2; dy doubles as the forward's normed output
} mn__cm_slstm_dacts;
typedef struct mn__cm_layer {
    float *xn1, *rstd1, *x2, *xn2, *rstd2, *gate, *up, *h;        // (N,C) (N) (N,C) (N,C) (N) (N,F) x3
    mn__cm_mesa_acts mesa;
    mn__cm_attn_acts attn;
    mn__cm_linattn_acts linattn;
    mn__cm_sgla_acts sgla;
    mn__cm_gla_acts gla;
    mn__cm_delta_acts delta;
    mn__cm_ssd_acts ssd;
    mn__cm_rglru_acts rglru;
    mn__cm_mlstm_acts mlstm;
    mn__cm_slstm_acts slstm;
} mn__cm_layer;
typedef struct mn__cm_acts {
    float *res, *xf, *rstdf, *logits, *losses;                   // ((L+1),N,C) (N,C) (N) (N,V) (N)
    mn__cm_layer L[MN_MAX_LAYERS];
} mn__cm_acts;
// Activation gradients: the head's, two residual buffers, and one layer's block, reused from the
// last layer to the first: the backbone's (dxn1 .. dup), then the mixer's, every mixer's laid out
// from the same offset over the same memory (a layer uses its own; the block is as large as the
// largest mixer of the pattern). A layer's backward writes each of its buffers first with overwrite
// (acc = 0) and only then accumulates, except the buffers a mixer's backward zeroes itself (the Mesa
// op's outputs dq..dv and its gate gradients dal..dlamb: two short memsets instead of ~1.6 GB a layer
// at fla's anchor shape, where the zeroing and the read-back of those zeros were ~6 % of a step).
typedef struct mn__cm_mesa_dacts {
    // dqc, dkc double as the forward's conv outputs; end: past the last (for the zeroing)
    float *dql, *dkl, *dqc, *dkc, *dq, *dk, *dv, *dO, *don, *dal, *dbl, *dg, *dbeta, *dlamb, *end;
} mn__cm_mesa_dacts;
typedef struct mn__cm_attn_dacts {
    float *dq, *dk, *dv, *dao;                                   // (N,HD) x4
} mn__cm_attn_dacts;
typedef struct mn__cm_linattn_dacts {
    float *dq, *dk, *dv, *dqa, *dqb, *dka, *dkb, *dqf, *dkf, *dO, *don;   // (N,HD) x11
} mn__cm_linattn_dacts;
typedef struct mn__cm_sgla_dacts {
    float *dql, *dkl, *dvl, *dq, *dk, *dv, *dgl, *dg, *dO, *dgg, *don;    // (N,HD) x6, (N,H) x2, (N,HD) x3
} mn__cm_sgla_dacts;
typedef struct mn__cm_gla_dacts {
    float *dq, *dk, *dv, *dl1, *dl2, *dgk, *dO, *dgg, *don;               // (N,HD) x3, (N,16), (N,HD) x5
} mn__cm_gla_dacts;
typedef struct mn__cm_dacts {
    float *dlogits, *dlosses, *dxf, *dres[2];
    float *layer; size_t layer_n;                 // the whole per-layer block
    float *dxn1, *dxn2, *dh, *dgate, *dup;
    mn__cm_mesa_dacts mesa;
    mn__cm_attn_dacts attn;
    mn__cm_linattn_dacts linattn;
    mn__cm_sgla_dacts sgla;
    mn__cm_gla_dacts gla;
    mn__cm_delta_dacts delta;
    mn__cm_ssd_dacts ssd;
    mn__cm_rglru_dacts rglru;
    mn__cm_mlstm_dacts mlstm;
    mn__cm_slstm_dacts slstm;
} mn__cm_dacts;

#define MN__P(ptr, n) do { (ptr) = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)
// each mixer's layouts: its saved activations and its gradient buffers from offset off; return the end
static size_t mn__cm_mesa_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                      mn__cm_layer* y) {
    const size_t N = B * T;
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_mesa_acts* a = &y->mesa;
    MN__P(a->ql, N * HD); MN__P(a->kl, N * HD); MN__P(a->q, N * HD); MN__P(a->k, N * HD); MN__P(a->rq, N * H);
    MN__P(a->rk, N * H); MN__P(a->v, N * HD); MN__P(a->al, N * H); MN__P(a->bl, N * H); MN__P(a->g, N * H);
    MN__P(a->beta, N * H); MN__P(a->lamb, HD); MN__P(a->xs, N * HD); MN__P(a->o, N * HD); MN__P(a->on, N * HD);
    MN__P(a->ro, N * H);
    return off;
}
static size_t mn__cm_mesa_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_mesa_dacts* d = &dd->mesa;
    MN__P(d->dql, N * HD); MN__P(d->dkl, N * HD); MN__P(d->dqc, N * HD); MN__P(d->dkc, N * HD); MN__P(d->dq, N * HD);
    MN__P(d->dk, N * HD); MN__P(d->dv, N * HD); MN__P(d->dO, N * HD); MN__P(d->don, N * HD);
    MN__P(d->dal, N * H); MN__P(d->dbl, N * H); MN__P(d->dg, N * H); MN__P(d->dbeta, N * H); MN__P(d->dlamb, HD);
    d->end = base ? base + off : NULL;
    return off;
}
static size_t mn__cm_attn_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                      mn__cm_layer* y) {
    const size_t N = B * T;
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_attn_acts* a = &y->attn;
    MN__P(a->q, N * HD); MN__P(a->k, N * HD); MN__P(a->v, N * HD); MN__P(a->ao, N * HD); MN__P(a->lse, N * H);
    return off;
}
static size_t mn__cm_attn_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t HD = c->n_head * c->head_dim;
    mn__cm_attn_dacts* d = &dd->attn;
    MN__P(d->dq, N * HD); MN__P(d->dk, N * HD); MN__P(d->dv, N * HD); MN__P(d->dao, N * HD);
    return off;
}

static size_t mn__cm_linattn_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                         mn__cm_layer* y) {
    const size_t N = B * T;
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_linattn_acts* a = &y->linattn;
    MN__P(a->q, N * HD); MN__P(a->k, N * HD); MN__P(a->v, N * HD); MN__P(a->qa, N * HD); MN__P(a->qb, N * HD);
    MN__P(a->ka, N * HD); MN__P(a->kb, N * HD); MN__P(a->qf, N * HD); MN__P(a->kf, N * HD); MN__P(a->o, N * HD);
    MN__P(a->on, N * HD); MN__P(a->rs, N * H); MN__P(a->keep, mn_cuda_gla_keep_size(B, T, H, c->head_dim, 0));
    return off;
}
static size_t mn__cm_linattn_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t HD = c->n_head * c->head_dim;
    mn__cm_linattn_dacts* d = &dd->linattn;
    MN__P(d->dq, N * HD); MN__P(d->dk, N * HD); MN__P(d->dv, N * HD); MN__P(d->dqa, N * HD); MN__P(d->dqb, N * HD);
    MN__P(d->dka, N * HD); MN__P(d->dkb, N * HD); MN__P(d->dqf, N * HD); MN__P(d->dkf, N * HD); MN__P(d->dO, N * HD);
    MN__P(d->don, N * HD);
    return off;
}
static size_t mn__cm_sgla_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                      mn__cm_layer* y) {
    const size_t N = B * T;
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_sgla_acts* a = &y->sgla;
    MN__P(a->ql, N * HD); MN__P(a->kl, N * HD); MN__P(a->vl, N * HD); MN__P(a->q, N * HD); MN__P(a->k, N * HD);
    MN__P(a->v, N * HD); MN__P(a->gl, N * H); MN__P(a->g, N * H); MN__P(a->o, N * HD); MN__P(a->gg, N * HD);
    MN__P(a->on, N * HD); MN__P(a->rs, N * H); MN__P(a->keep, mn_cuda_gla_keep_size(B, T, H, c->head_dim, 1));
    return off;
}
static size_t mn__cm_sgla_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_sgla_dacts* d = &dd->sgla;
    MN__P(d->dql, N * HD); MN__P(d->dkl, N * HD); MN__P(d->dvl, N * HD); MN__P(d->dq, N * HD); MN__P(d->dk, N * HD);
    MN__P(d->dv, N * HD); MN__P(d->dgl, N * H); MN__P(d->dg, N * H); MN__P(d->dO, N * HD); MN__P(d->dgg, N * HD);
    MN__P(d->don, N * HD);
    return off;
}
static size_t mn__cm_gla_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                     mn__cm_layer* y) {
    const size_t N = B * T;
    size_t H = c->n_head, HD = H * c->head_dim;
    mn__cm_gla_acts* a = &y->gla;
    MN__P(a->q, N * HD); MN__P(a->k, N * HD); MN__P(a->v, N * HD); MN__P(a->l1, N * MN__GLA_RK); MN__P(a->l2, N * HD);
    MN__P(a->gk, N * HD); MN__P(a->o, N * HD); MN__P(a->gg, N * HD); MN__P(a->on, N * HD); MN__P(a->rs, N * H);
    MN__P(a->keep, mn_cuda_gla_keep_size(B, T, H, c->head_dim, c->head_dim));
    return off;
}
static size_t mn__cm_gla_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    size_t HD = c->n_head * c->head_dim;
    mn__cm_gla_dacts* d = &dd->gla;
    MN__P(d->dq, N * HD); MN__P(d->dk, N * HD); MN__P(d->dv, N * HD); MN__P(d->dl1, N * MN__GLA_RK);
    MN__P(d->dl2, N * HD); MN__P(d->dgk, N * HD); MN__P(d->dO, N * HD); MN__P(d->dgg, N * HD); MN__P(d->don, N * HD);
    return off;
}

static mn_mesa_opts mn__cm_mesa_opts(const mn_config* c) {   // mn__mesa_train_opts
    mn_mesa_opts o; memset(&o, 0, sizeof o);
    o.cg_iters = c->mesa_cg_train; o.chunk = c->mesa_chunk; o.fla = c->mesa_cg_fla;
    return o;
}

// ---- the model's own small kernels (gates, lambda, loss) ----
// g = logsigmoid(al) [+ log(1 - c beta^2)], beta = sigmoid(bl): in double, as the CPU
__global__ void mn__k_cm_gates(float* g, float* beta, const float* al, const float* bl, size_t n, int clamp) {
    MN__FOR(i, n) {
        double x = al[i], gi = (x < 0 ? x : 0.0) - log1p(exp(-fabs(x)));
        float b = (float)(1.0 / (1.0 + exp(-(double)bl[i])));
        g[i] = clamp ? (float)((double)(float)gi + log(1.0 - MN__MESA_CLAMP * (double)b * b)) : (float)gi;
        beta[i] = b;
    }
}
// forward: g = logsigmoid(al) + log(1 - c beta^2), beta = sigmoid(bl), so:
// dbeta += dg (-2 c beta) / (1 - c beta^2) (clamp); dal += dg sigmoid(-al); dbl += dbeta s (1 - s)
__global__ void mn__k_cm_gates_bwd(float* dal, float* dbl, float* dbeta, const float* dg, const float* al,
                                   const float* bl, const float* beta, size_t n, int clamp) {
    MN__FOR(i, n) {
        double be = beta[i], db = dbeta[i];
        if (clamp) {
            db = (float)(db + dg[i] * (-2.0 * MN__MESA_CLAMP * be) / (1.0 - MN__MESA_CLAMP * be * be));
            dbeta[i] = (float)db;
        }
        dal[i] += (float)(dg[i] * (1.0 / (1.0 + exp((double)al[i]))));
        double s = 1.0 / (1.0 + exp(-(double)bl[i]));
        dbl[i] += (float)(db * s * (1.0 - s));
    }
}
// lambda = softplus(theta) + 0.25; backward dtheta += dlambda sigmoid(theta) (1 for theta > 20)
__global__ void mn__k_cm_lambda(float* lamb, const float* theta, size_t n) {
    MN__FOR(i, n) { double x = theta[i]; lamb[i] = (float)(x > 20 ? x : log1p(exp(x))) + 0.25f; }
}
__global__ void mn__k_cm_lambda_bwd(float* dtheta, const float* dlamb, const float* theta, size_t n) {
    MN__FOR(i, n) { double x = theta[i]; dtheta[i] += (float)(dlamb[i] * (x > 20 ? 1.0 : 1.0 / (1.0 + exp(-x)))); }
}
// sum of the losses at targets >= 0, in double: one atomic per warp
__global__ void mn__k_cm_loss_sum(double* out, const float* losses, const int* targets, size_t N) {
    double acc = 0.0;
    MN__FOR(i, N) if (targets[i] >= 0) acc += losses[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}
// the mean's weights: 1/n_valid where the target counts, else 0
__global__ void mn__k_cm_dlosses(float* dl, const int* targets, size_t N, float w) {
    MN__FOR(i, N) dl[i] = targets[i] >= 0 ? w : 0.f;
}

// out (N,OC) += inp (N,IC) W^T: the residual add fused into a projection (beta = 1)
static int mn__cm_matmul_add(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, size_t N, size_t IC,
                             size_t OC) {
    return mn__matmul_product(ctx, out, inp, weight, N, IC, OC, 1.f);
}
#define MN__D2D(dst, src, n) \
    MN__CU(cudaMemcpyAsync((dst), (src), (size_t)(n) * sizeof(float), cudaMemcpyDeviceToDevice, MN__STREAM))

// ---- the Mesa layer (mesanet.h's mn__mesa_forward / mn__mesa_backward) ----
static int mn__cm_mesa_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->head_dim != 64 && c->head_dim != 128)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU Mesa op needs head_dim 64 or 128", __LINE__);
    if (c->mesa_chunk != MN__MC)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU Mesa op needs mesa_chunk 64", __LINE__);
    return MN_OK;
}
static size_t mn__cm_mesa_work(const mn_config* c, size_t B, size_t T) {
    mn_mesa_opts o = mn__cm_mesa_opts(c);
    return mn_cuda_mesa_work_size(B, T, c->n_head, c->head_dim, c->head_dim, &o);
}
// Layer l's block of cm->mesa_keep (mn_cuda_mesa_keep_size floats at (B,T); the blocks in the order of the Mesa
// layers: l's index is the count of earlier layers on the same mixer row), or NULL: ctx->mesa_keep_states off, or
// the buffer not reserved for (B,T) (then the layer recomputes its states in the backward, as by default)
static float* mn__cm_mesa_keep(mn_cuda_model* cm, size_t l, size_t B, size_t T) {
    const mn_config* c = &cm->cfg;
    size_t ks = mn_cuda_mesa_keep_size(B, T, c->n_head, c->head_dim, c->head_dim), i = 0;
    for (size_t u = 0; u < l; u++) i += cm->mixer[u] == cm->mixer[l];
    if (!cm->ctx->mesa_keep_states || !cm->mesa_keep || (i + 1) * ks > cm->cap_mesa_keep) return NULL;
    return cm->mesa_keep + i * ks;
}
// x2 = res + o_proj(o_norm(Mesa(...)))
static int mn__cm_mesa_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                               const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_mesa_acts* A = &Y->mesa;
    const mn__cm_mesa_dacts* D = &DD->mesa;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    mn_mesa_opts o = mn__cm_mesa_opts(c);
    const float* in = Y->xn1;
    MN__TRY(mn_cuda_matmul_forward(ctx, A->ql, in, MN__PAR(cm, l, MN__CP_Q), NULL, N, C, HD));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->kl, in, MN__PAR(cm, l, MN__CP_K), NULL, N, C, HD));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->v, in, MN__PAR(cm, l, MN__CP_V), NULL, N, C, HD));
    MN__TRY(mn_cuda_shortconv_forward(ctx, D->dqc, A->ql, MN__PAR(cm, l, MN__CP_QC), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_shortconv_forward(ctx, D->dkc, A->kl, MN__PAR(cm, l, MN__CP_KC), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_l2norm_forward(ctx, A->q, A->rq, D->dqc, N * H, Dh));
    MN__TRY(mn_cuda_l2norm_forward(ctx, A->k, A->rk, D->dkc, N * H, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->al, in, MN__PAR(cm, l, MN__CP_A), MN__PAR(cm, l, MN__CP_AB), N, C, H));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->bl, in, MN__PAR(cm, l, MN__CP_B), MN__PAR(cm, l, MN__CP_BB), N, C, H));
    mn__k_cm_gates<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(A->g, A->beta, A->al, A->bl, N * H,
                                                                      c->mesa_gamma_clamp);
    MN__LAUNCHED();
    mn__k_cm_lambda<<<mn__grid(ctx, HD, 256), 256, 0, MN__STREAM>>>(A->lamb, MN__PAR(cm, l, MN__CP_LAM), HD);
    MN__LAUNCHED();
    float* kp = mn__cm_mesa_keep(cm, l, B, T);
    cm->kept[l] = kp != NULL;
    if (kp) MN__TRY(mn_cuda_mesa_forward_keep(ctx, A->o, A->xs, NULL, NULL, NULL, kp, A->q, A->k, A->v, A->g, A->beta,
                                              A->lamb, B, T, H, Dh, Dh, &o, cm->work));
    else MN__TRY(mn_cuda_mesa_forward(ctx, A->o, A->xs, NULL, NULL, NULL, A->q, A->k, A->v, A->g, A->beta, A->lamb, B,
                                      T, H, Dh, Dh, &o, cm->work));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->on, A->ro, A->o, MN__PAR(cm, l, MN__CP_ON), N * H, Dh, c->norm_eps));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->on, MN__PAR(cm, l, MN__CP_O), N, HD, C);
}
// din (N,C) = the layer's input gradient (overwritten: din need not be zeroed); dout (N,C) the
// gradient of the mixer's output
static int mn__cm_mesa_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_mesa_acts* A = &Y->mesa;
    const mn__cm_mesa_dacts* D = &DD->mesa;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    mn_mesa_opts o = mn__cm_mesa_opts(c);
    const float* in = Y->xn1;
    // din, don, dO, dqc, dkc, dql, dkl are overwritten by their first writer (acc 0); dq..dv and
    // dal..dlamb are zeroed here (the op and the gate kernel accumulate into them)
    MN__CU(cudaMemsetAsync(D->dq, 0, (size_t)(D->dO - D->dq) * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(D->dal, 0, (size_t)(D->end - D->dal) * sizeof(float), MN__STREAM));
    MN__TRY(mn__matmul_backward(ctx, D->don, MN__GRD(cm, l, MN__CP_O), NULL, dout, A->on, MN__PAR(cm, l, MN__CP_O), N,
                                HD, C, 0));
    MN__TRY(mn__rmsnorm_backward(ctx, D->dO, MN__GRD(cm, l, MN__CP_ON), D->don, A->ro, A->o, MN__PAR(cm, l, MN__CP_ON),
                                 N * H, Dh, 0));
    // the op's implicit backward; dlambda collects in the (zeroed) dlamb
    const float* kp = cm->kept[l] ? mn__cm_mesa_keep(cm, l, B, T) : NULL;   // NULL: recompute the states (B0)
    if (kp) MN__TRY(mn_cuda_mesa_backward_keep(ctx, D->dq, D->dk, D->dv, D->dg, D->dbeta, D->dlamb, NULL, NULL, D->dO,
                                               NULL, NULL, kp, A->xs, A->k, A->v, A->g, A->beta, A->lamb, NULL, NULL, B,
                                               T, H, Dh, Dh, &o, cm->work));
    else MN__TRY(mn_cuda_mesa_backward(ctx, D->dq, D->dk, D->dv, D->dg, D->dbeta, D->dlamb, NULL, NULL, D->dO, NULL,
                                       NULL, A->xs, A->q, A->k, A->v, A->g, A->beta, A->lamb, NULL, NULL, B, T, H, Dh,
                                       Dh, &o, cm->work));
    mn__k_cm_lambda_bwd<<<mn__grid(ctx, HD, 256), 256, 0, MN__STREAM>>>(MN__GRD(cm, l, MN__CP_LAM), D->dlamb,
                                                                        MN__PAR(cm, l, MN__CP_LAM), HD);
    MN__LAUNCHED();
    mn__k_cm_gates_bwd<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(D->dal, D->dbl, D->dbeta, D->dg, A->al, A->bl,
                                                                          A->beta, N * H, c->mesa_gamma_clamp);
    MN__LAUNCHED();
    MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__CP_A), MN__GRD(cm, l, MN__CP_AB), D->dal, in,
                                MN__PAR(cm, l, MN__CP_A), N, C, H, 0));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CP_B), MN__GRD(cm, l, MN__CP_BB), D->dbl, in,
                                    MN__PAR(cm, l, MN__CP_B), N, C, H));
    MN__TRY(mn__l2norm_backward(ctx, D->dqc, D->dq, A->q, A->rq, N * H, Dh, 0));
    MN__TRY(mn__l2norm_backward(ctx, D->dkc, D->dk, A->k, A->rk, N * H, Dh, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dql, MN__GRD(cm, l, MN__CP_QC), D->dqc, A->ql, MN__PAR(cm, l, MN__CP_QC), B,
                                   T, HD, 4, 1, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dkl, MN__GRD(cm, l, MN__CP_KC), D->dkc, A->kl, MN__PAR(cm, l, MN__CP_KC), B,
                                   T, HD, 4, 1, 0));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CP_Q), NULL, D->dql, in, MN__PAR(cm, l, MN__CP_Q), N,
                                    C, HD));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CP_K), NULL, D->dkl, in, MN__PAR(cm, l, MN__CP_K), N,
                                    C, HD));
    return mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CP_V), NULL, D->dv, in, MN__PAR(cm, l, MN__CP_V), N, C,
                                   HD);
}

// ---- the attention layers "attn" and "swa" (mesanet.h's mn__attn_forward / mn__attn_backward) ----
// q, k, v = in W^T; RoPE on q and k (cfg.rope_theta > 0; the saved q, k are the rotated ones);
// o = attention(q, k, v) with scale 1/sqrt(D), the window cfg.window for "swa"; x2 = res + o Wo^T.
// The CPU layer keeps the T x T probabilities for its backward; this one keeps lse (N,H) and
// recomputes them (the flash-style kernels above).
static size_t mn__cm_attn_window(const mn_cuda_model* cm, size_t l);
static int mn__cm_attn_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->head_dim != 64 && c->head_dim != 128)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU attention needs head_dim 64 or 128", __LINE__);
    return MN_OK;
}
static size_t mn__cm_attn_work(const mn_config* c, size_t B, size_t T) {
    return mn_cuda_attention_work_size(B, T, c->n_head, c->head_dim);
}
static int mn__cm_attn_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                               const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_attn_acts* A = &Y->attn;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    const float* in = Y->xn1;
    (void)DD;
    MN__TRY(mn_cuda_matmul_forward(ctx, A->q, in, MN__PAR(cm, l, MN__CA_Q), NULL, N, C, HD));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->k, in, MN__PAR(cm, l, MN__CA_K), NULL, N, C, HD));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->v, in, MN__PAR(cm, l, MN__CA_V), NULL, N, C, HD));
    if (c->rope_theta > 0) {                           // in place, as the CPU layer
        MN__TRY(mn__rope(ctx, A->q, A->q, B, T, H, Dh, 0, c->rope_theta, 1.0, 0));
        MN__TRY(mn__rope(ctx, A->k, A->k, B, T, H, Dh, 0, c->rope_theta, 1.0, 0));
    }
    MN__TRY(mn_cuda_attention_forward(ctx, A->ao, A->lse, A->q, A->k, A->v, B, T, H, Dh, Dh, mn__cm_attn_window(cm, l),
                                      1.0 / sqrt((double)Dh), cm->work));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->ao, MN__PAR(cm, l, MN__CA_O), N, HD, C);
}
static int mn__cm_attn_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_attn_acts* A = &Y->attn;
    const mn__cm_attn_dacts* D = &DD->attn;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    const float* in = Y->xn1;
    // every buffer written by its first writer (acc 0): dao by the o_proj backward, dq, dk, dv by the
    // attention backward, din by the q_proj backward
    MN__TRY(mn__matmul_backward(ctx, D->dao, MN__GRD(cm, l, MN__CA_O), NULL, dout, A->ao, MN__PAR(cm, l, MN__CA_O), N,
                                HD, C, 0));
    MN__TRY(mn__attention_backward(ctx, D->dq, D->dk, D->dv, D->dao, A->ao, A->lse, A->q, A->k, A->v, B, T, H, Dh, Dh,
                                   mn__cm_attn_window(cm, l), 1.0 / sqrt((double)Dh), cm->work, 0));
    if (c->rope_theta > 0) {                           // the forward rotated by +phi: the gradients by -phi
        MN__TRY(mn__rope(ctx, D->dq, D->dq, B, T, H, Dh, 0, c->rope_theta, -1.0, 0));
        MN__TRY(mn__rope(ctx, D->dk, D->dk, B, T, H, Dh, 0, c->rope_theta, -1.0, 0));
    }
    MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, MN__CA_Q), NULL, D->dq, in, MN__PAR(cm, l, MN__CA_Q), N, C, HD,
                                0));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CA_K), NULL, D->dk, in, MN__PAR(cm, l, MN__CA_K), N,
                                    C, HD));
    return mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CA_V), NULL, D->dv, in, MN__PAR(cm, l, MN__CA_V), N, C,
                                   HD);
}

// ---- the GLA family: "linattn", "sgla", "gla" (mesanet.h's layers at the end of its >>gla) ----
// The op mn_cuda_gla_* with G = 0, 1, Dk (chunk 64 whatever cfg.mesa_chunk: the chunkwise form gives
// the same sums for any chunk length) and scale 1/sqrt(D); the layers' extra ops: the Hadamard feature
// maps (two Linear maps of each head's D channels, multiplied), the log-decay gate logsigmoid(z)/16,
// the short convs, the per-head RMSNorm and the gated RMSNorm.
// g = logsigmoid(z) / 16, the logsigmoid in double as the CPU
__global__ void mn__k_cm_glagate(float* g, const float* z, size_t n) {
    MN__FOR(i, n) {
        double x = z[i];
        g[i] = (float)((x < 0 ? x : 0.0) - log1p(exp(-fabs(x)))) * (float)(1.0 / MN__GLA_NORM);
    }
}
// forward: g = logsigmoid(z) / 16, so: dz = dg / 16 sigmoid(-z) (overwritten)
__global__ void mn__k_cm_glagate_bwd(float* dz, const float* dg, const float* z, size_t n) {
    MN__FOR(i, n) dz[i] = (float)((double)(dg[i] * (float)(1.0 / MN__GLA_NORM)) / (1.0 + exp((double)z[i])));
}
// f = a b (the Hadamard feature map's product); backward da = df b, db = df a (overwritten)
__global__ void mn__k_cm_mul(float* f, const float* a, const float* b, size_t n) { MN__FOR(i, n) f[i] = a[i] * b[i]; }
__global__ void mn__k_cm_mul_bwd(float* da, float* db, const float* df, const float* a, const float* b, size_t n) {
    MN__FOR(i, n) { da[i] = df[i] * b[i]; db[i] = df[i] * a[i]; }
}
static int mn__cm_gla_check(mn_cuda_ctx* ctx, const mn_config* c) {
    if (c->head_dim != 64 && c->head_dim != 128)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "the GPU GLA op needs head_dim 64 or 128", __LINE__);
    return MN_OK;
}
static size_t mn__cm_gla_work(const mn_config* c, size_t B, size_t T) {
    return mn_cuda_gla_work_size(B, T, c->n_head, c->head_dim, c->head_dim, MN__GC);
}
// the gated output of sgla and gla: x2 = res + o_proj(RMSNorm_head(o) * swish(g_proj x)); gg, on, rs saved
static int mn__cm_gated_out_forward(mn_cuda_model* cm, size_t l, int jg, int jn, int jo, const mn__cm_layer* Y,
                                    float* gg, float* on, float* rs, const float* o, const float* res, size_t N) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    MN__TRY(mn_cuda_matmul_forward(ctx, gg, Y->xn1, MN__PAR(cm, l, jg), NULL, N, C, HD));
    MN__TRY(mn_cuda_rmsnorm_gated_forward(ctx, on, rs, o, gg, MN__PAR(cm, l, jn), N * H, Dh, c->norm_eps));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, on, MN__PAR(cm, l, jo), N, HD, C);
}
// its backward: don, dO, dgg written; din overwritten with the g_proj path's part
static int mn__cm_gated_out_backward(mn_cuda_model* cm, size_t l, int jg, int jn, int jo, const mn__cm_layer* Y,
                                     float* din, float* don, float* dO, float* dgg, const float* dout, const float* gg,
                                     const float* on, const float* rs, const float* o, size_t N) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    MN__TRY(mn__matmul_backward(ctx, don, MN__GRD(cm, l, jo), NULL, dout, on, MN__PAR(cm, l, jo), N, HD, C, 0));
    MN__TRY(mn__rmsnorm_gated_backward(ctx, dO, dgg, MN__GRD(cm, l, jn), don, rs, o, gg, MN__PAR(cm, l, jn), N * H,
                                       Dh, 0));
    return mn__matmul_backward(ctx, din, MN__GRD(cm, l, jg), NULL, dgg, Y->xn1, MN__PAR(cm, l, jg), N, C, HD, 0);
}
static int mn__cm_qkv_backward(mn_cuda_model* cm, size_t l, int jq, const float* in, float* din, const float* dq,
                               const float* dk, const float* dv, size_t N, int acc) {
    mn_cuda_ctx* ctx = cm->ctx;
    size_t C = cm->cfg.d_model, HD = cm->cfg.n_head * cm->cfg.head_dim;
    MN__TRY(mn__matmul_backward(ctx, din, MN__GRD(cm, l, jq), NULL, dq, in, MN__PAR(cm, l, jq), N, C, HD, acc));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, jq + 1), NULL, dk, in, MN__PAR(cm, l, jq + 1), N, C, HD));
    return mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, jq + 2), NULL, dv, in, MN__PAR(cm, l, jq + 2), N, C, HD);
}
static int mn__cm_qkv_forward(mn_cuda_model* cm, size_t l, int jq, const float* in, float* q, float* k, float* v,
                              size_t N) {
    mn_cuda_ctx* ctx = cm->ctx;
    size_t C = cm->cfg.d_model, HD = cm->cfg.n_head * cm->cfg.head_dim;
    MN__TRY(mn_cuda_matmul_forward(ctx, q, in, MN__PAR(cm, l, jq), NULL, N, C, HD));
    MN__TRY(mn_cuda_matmul_forward(ctx, k, in, MN__PAR(cm, l, jq + 1), NULL, N, C, HD));
    return mn_cuda_matmul_forward(ctx, v, in, MN__PAR(cm, l, jq + 2), NULL, N, C, HD);
}

// the keep buffer of a layer on the GLA op (linattn, sgla, gla, Mamba-2) for the op's kept form, or NULL under
// ctx->gla_recompute; cm->kept[l] tells the backward which (Mamba-2's mn__ssd_forward sets it again: only its chunk
// form keeps)
static float* mn__cm_gla_keep(mn_cuda_model* cm, size_t l, float* keep) {
    cm->kept[l] = !cm->ctx->gla_recompute;
    return cm->kept[l] ? keep : NULL;
}

// "linattn": q, k, v = x W; phi(z) = (z A1^T + a1) (z A2^T + a2) per head (one map for q, one for k);
// o = LinAttn(phi(q), phi(k), v); x2 = res + RMSNorm_head(o) Wo
static int mn__cm_linattn_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                  const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_linattn_acts* A = &Y->linattn;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, NH = N * H;
    (void)DD;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CL_Q, Y->xn1, A->q, A->k, A->v, N));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->qa, A->q, MN__PAR(cm, l, MN__CL_FQ), MN__PAR(cm, l, MN__CL_FQ + 1), NH, Dh,
                                   Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->qb, A->q, MN__PAR(cm, l, MN__CL_FQ + 2), MN__PAR(cm, l, MN__CL_FQ + 3), NH,
                                   Dh, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->ka, A->k, MN__PAR(cm, l, MN__CL_FK), MN__PAR(cm, l, MN__CL_FK + 1), NH, Dh,
                                   Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->kb, A->k, MN__PAR(cm, l, MN__CL_FK + 2), MN__PAR(cm, l, MN__CL_FK + 3), NH,
                                   Dh, Dh));
    mn__k_cm_mul<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(A->qf, A->qa, A->qb, N * HD); MN__LAUNCHED();
    mn__k_cm_mul<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(A->kf, A->ka, A->kb, N * HD); MN__LAUNCHED();
    MN__TRY(mn__gla_forward(ctx, A->o, NULL, A->qf, A->kf, A->v, NULL, NULL, B, T, H, Dh, Dh, 0, 1.0 / sqrt((double)Dh),
                            MN__GC, cm->work, mn__cm_gla_keep(cm, l, A->keep)));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->on, A->rs, A->o, MN__PAR(cm, l, MN__CL_NORM), NH, Dh, c->norm_eps));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->on, MN__PAR(cm, l, MN__CL_O), N, HD, C);
}
// every gradient buffer written by its first writer (acc 0); din by the q_proj backward
static int mn__cm_linattn_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                                   float* din, const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_linattn_acts* A = &Y->linattn;
    const mn__cm_linattn_dacts* D = &DD->linattn;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, NH = N * H;
    MN__TRY(mn__matmul_backward(ctx, D->don, MN__GRD(cm, l, MN__CL_O), NULL, dout, A->on, MN__PAR(cm, l, MN__CL_O), N,
                                HD, C, 0));
    MN__TRY(mn__rmsnorm_backward(ctx, D->dO, MN__GRD(cm, l, MN__CL_NORM), D->don, A->rs, A->o,
                                 MN__PAR(cm, l, MN__CL_NORM), NH, Dh, 0));
    MN__TRY(mn__gla_backward(ctx, D->dqf, D->dkf, D->dv, NULL, NULL, D->dO, NULL, A->qf, A->kf, A->v, NULL, NULL, B, T,
                             H, Dh, Dh, 0, 1.0 / sqrt((double)Dh), MN__GC, cm->work, 0, cm->kept[l] ? A->keep : NULL));
    // forward: f = a b, a = z W1^T + b1, b = z W2^T + b2 (per feature map)
    mn__k_cm_mul_bwd<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(D->dqa, D->dqb, D->dqf, A->qa, A->qb, N * HD);
    MN__LAUNCHED();
    mn__k_cm_mul_bwd<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(D->dka, D->dkb, D->dkf, A->ka, A->kb, N * HD);
    MN__LAUNCHED();
    MN__TRY(mn__matmul_backward(ctx, D->dq, MN__GRD(cm, l, MN__CL_FQ), MN__GRD(cm, l, MN__CL_FQ + 1), D->dqa, A->q,
                                MN__PAR(cm, l, MN__CL_FQ), NH, Dh, Dh, 0));
    MN__TRY(mn_cuda_matmul_backward(ctx, D->dq, MN__GRD(cm, l, MN__CL_FQ + 2), MN__GRD(cm, l, MN__CL_FQ + 3), D->dqb,
                                    A->q, MN__PAR(cm, l, MN__CL_FQ + 2), NH, Dh, Dh));
    MN__TRY(mn__matmul_backward(ctx, D->dk, MN__GRD(cm, l, MN__CL_FK), MN__GRD(cm, l, MN__CL_FK + 1), D->dka, A->k,
                                MN__PAR(cm, l, MN__CL_FK), NH, Dh, Dh, 0));
    MN__TRY(mn_cuda_matmul_backward(ctx, D->dk, MN__GRD(cm, l, MN__CL_FK + 2), MN__GRD(cm, l, MN__CL_FK + 3), D->dkb,
                                    A->k, MN__PAR(cm, l, MN__CL_FK + 2), NH, Dh, Dh));
    return mn__cm_qkv_backward(cm, l, MN__CL_Q, Y->xn1, din, D->dq, D->dk, D->dv, N, 0);
}

// "sgla": q, k, v = silu(conv4(x W)); g = logsigmoid(x Wgk + bgk) / 16 per head; o = SimpleGLA(q, k, v, g);
// x2 = res + RMSNormGated(o, x Wg) Wo
static int mn__cm_sgla_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                               const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_sgla_acts* A = &Y->sgla;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    (void)DD;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CS_Q, Y->xn1, A->ql, A->kl, A->vl, N));
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->q, A->ql, MN__PAR(cm, l, MN__CS_QC), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->k, A->kl, MN__PAR(cm, l, MN__CS_QC + 1), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_shortconv_forward(ctx, A->v, A->vl, MN__PAR(cm, l, MN__CS_QC + 2), B, T, HD, 4, 1));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->gl, Y->xn1, MN__PAR(cm, l, MN__CS_GK), MN__PAR(cm, l, MN__CS_GK + 1), N, C,
                                   H));
    mn__k_cm_glagate<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(A->g, A->gl, N * H); MN__LAUNCHED();
    MN__TRY(mn__gla_forward(ctx, A->o, NULL, A->q, A->k, A->v, A->g, NULL, B, T, H, Dh, Dh, 1, 1.0 / sqrt((double)Dh),
                            MN__GC, cm->work, mn__cm_gla_keep(cm, l, A->keep)));
    return mn__cm_gated_out_forward(cm, l, MN__CS_G, MN__CS_NORM, MN__CS_O, Y, A->gg, A->on, A->rs, A->o, res, N);
}
static int mn__cm_sgla_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD, float* din,
                                const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_sgla_acts* A = &Y->sgla;
    const mn__cm_sgla_dacts* D = &DD->sgla;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    MN__TRY(mn__cm_gated_out_backward(cm, l, MN__CS_G, MN__CS_NORM, MN__CS_O, Y, din, D->don, D->dO, D->dgg, dout,
                                      A->gg, A->on, A->rs, A->o, N));
    MN__TRY(mn__gla_backward(ctx, D->dq, D->dk, D->dv, D->dg, NULL, D->dO, NULL, A->q, A->k, A->v, A->g, NULL, B, T, H,
                             Dh, Dh, 1, 1.0 / sqrt((double)Dh), MN__GC, cm->work, 0, cm->kept[l] ? A->keep : NULL));
    mn__k_cm_glagate_bwd<<<mn__grid(ctx, N * H, 256), 256, 0, MN__STREAM>>>(D->dgl, D->dg, A->gl, N * H);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CS_GK), MN__GRD(cm, l, MN__CS_GK + 1), D->dgl, Y->xn1,
                                    MN__PAR(cm, l, MN__CS_GK), N, C, H));
    MN__TRY(mn__shortconv_backward(ctx, D->dql, MN__GRD(cm, l, MN__CS_QC), D->dq, A->ql, MN__PAR(cm, l, MN__CS_QC), B,
                                   T, HD, 4, 1, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dkl, MN__GRD(cm, l, MN__CS_QC + 1), D->dk, A->kl,
                                   MN__PAR(cm, l, MN__CS_QC + 1), B, T, HD, 4, 1, 0));
    MN__TRY(mn__shortconv_backward(ctx, D->dvl, MN__GRD(cm, l, MN__CS_QC + 2), D->dv, A->vl,
                                   MN__PAR(cm, l, MN__CS_QC + 2), B, T, HD, 4, 1, 0));
    return mn__cm_qkv_backward(cm, l, MN__CS_Q, Y->xn1, din, D->dql, D->dkl, D->dvl, N, 1);
}

// "gla": q, k, v = x W; gk = logsigmoid((x Wd^T) Wu^T + bu) / 16 per channel (rank 16); o = GLA(q, k, v, gk);
// x2 = res + RMSNormGated(o, x Wg) Wo
static int mn__cm_gla_forward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD,
                              const float* res, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_gla_acts* A = &Y->gla;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    (void)DD;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CG_Q, Y->xn1, A->q, A->k, A->v, N));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->l1, Y->xn1, MN__PAR(cm, l, MN__CG_GD), NULL, N, C, MN__GLA_RK));
    MN__TRY(mn_cuda_matmul_forward(ctx, A->l2, A->l1, MN__PAR(cm, l, MN__CG_GD + 1), MN__PAR(cm, l, MN__CG_GD + 2), N,
                                   MN__GLA_RK, HD));
    mn__k_cm_glagate<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(A->gk, A->l2, N * HD); MN__LAUNCHED();
    MN__TRY(mn__gla_forward(ctx, A->o, NULL, A->q, A->k, A->v, A->gk, NULL, B, T, H, Dh, Dh, Dh, 1.0 / sqrt((double)Dh),
                            MN__GC, cm->work, mn__cm_gla_keep(cm, l, A->keep)));
    return mn__cm_gated_out_forward(cm, l, MN__CG_G, MN__CG_NORM, MN__CG_O, Y, A->gg, A->on, A->rs, A->o, res, N);
}
static int mn__cm_gla_backward(mn_cuda_model* cm, size_t l, const mn__cm_layer* Y, const mn__cm_dacts* DD, float* din,
                               const float* dout, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    const mn__cm_gla_acts* A = &Y->gla;
    const mn__cm_gla_dacts* D = &DD->gla;
    size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    MN__TRY(mn__cm_gated_out_backward(cm, l, MN__CG_G, MN__CG_NORM, MN__CG_O, Y, din, D->don, D->dO, D->dgg, dout,
                                      A->gg, A->on, A->rs, A->o, N));
    MN__TRY(mn__gla_backward(ctx, D->dq, D->dk, D->dv, D->dgk, NULL, D->dO, NULL, A->q, A->k, A->v, A->gk, NULL, B, T,
                             H, Dh, Dh, Dh, 1.0 / sqrt((double)Dh), MN__GC, cm->work, 0, cm->kept[l] ? A->keep : NULL));
    mn__k_cm_glagate_bwd<<<mn__grid(ctx, N * HD, 256), 256, 0, MN__STREAM>>>(D->dl2, D->dgk, A->l2, N * HD);
    MN__LAUNCHED();
    MN__TRY(mn__matmul_backward(ctx, D->dl1, MN__GRD(cm, l, MN__CG_GD + 1), MN__GRD(cm, l, MN__CG_GD + 2), D->dl2,
                                A->l1, MN__PAR(cm, l, MN__CG_GD + 1), N, MN__GLA_RK, HD, 0));
    MN__TRY(mn_cuda_matmul_backward(ctx, din, MN__GRD(cm, l, MN__CG_GD), NULL, D->dl1, Y->xn1,
                                    MN__PAR(cm, l, MN__CG_GD), N, C, MN__GLA_RK));
    return mn__cm_qkv_backward(cm, l, MN__CG_Q, Y->xn1, din, D->dq, D->dk, D->dv, N, 1);
}

// the layers of the mixers after >>cuda_gla (one block each: names, layouts, forward, backward, row macro);
// mn__cm_variant(cm, l) is the table row's variant
static int mn__cm_variant(const mn_cuda_model* cm, size_t l);
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
// zeros), B floor((T-1) / GC) <= N / GC states per head, for the recurrent form; keep what the chunkwise
// form's forward leaves for its backward (the gathers, the WY products, V_new and the chunk states: 1,668
// floats a token and head at GC 64, D 128, 1.1 GB a layer at the 40M anchor's B 16, T 2048, H 5), so that
// the backward does not recompute them: memory for speed
static size_t mn__cm_delta_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                       mn__cm_layer* y) {
    const size_t N = B * T;
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    mn__cm_delta_acts* a = &y->delta;
    MN__P(a->ql, N * HD); MN__P(a->kl, N * HD); MN__P(a->vl, N * HD); MN__P(a->vc, N * HD); MN__P(a->q, N * HD);
    MN__P(a->k, N * HD); MN__P(a->rq, N * H); MN__P(a->rk, N * H); MN__P(a->bl, N * H); MN__P(a->beta, N * H);
    MN__P(a->al, N * H); MN__P(a->g, N * H); MN__P(a->o, N * HD); MN__P(a->gl, N * HD); MN__P(a->on, N * HD);
    MN__P(a->ro, N * H); MN__P(a->hs, N / MN__DELTA_GC * HD * D);
    MN__P(a->keep, mn_cuda_delta_rule_keep_size(B, T, H, D, D, MN__DELTA_GC));
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
    // hs is written either way, so that a backward on the other form (ctx->delta_form changed in between) has it
    cm->kept[l] = ctx->delta_form == MN_CUDA_DELTA_AUTO && mn__delta_chunk_taken(ctx, T, Dh, MN__DELTA_GC, cm->work);
    MN__TRY(mn__delta_rule_forward(ctx, A->o, NULL, A->hs, A->q, A->k, A->vc, A->beta, gated ? A->g : NULL, NULL, B,
                                   T, H, Dh, Dh, MN__DELTA_GC, 1.0 / sqrt((double)Dh), cm->work,
                                   cm->kept[l] ? A->keep : NULL, 1));
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
                                    1.0 / sqrt((double)Dh), cm->work, cm->kept[l] ? A->keep : NULL, 1));
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
      mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward, mn__cm_delta_backward,                       \
      mn__cm_delta_state, mn__cm_delta_step },                                                                         \
    { "deltanet_neg", MN__DELTA_NEG, MN__CD_END - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check,                       \
      mn__cm_delta_acts_layout, mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward,                    \
      mn__cm_delta_backward,                                                                                           \
      mn__cm_delta_state, mn__cm_delta_step },                                                                         \
    { "gdn", MN__DELTA_GATED, MN__CD_GEND - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check, mn__cm_delta_acts_layout,    \
      mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward, mn__cm_delta_backward,                       \
      mn__cm_delta_state, mn__cm_delta_step },                                                                         \
    { "gdn_neg", MN__DELTA_GATED | MN__DELTA_NEG, MN__CD_GEND - MN__CP_MIX, mn__cp_delta, mn__cm_delta_check,         \
      mn__cm_delta_acts_layout, mn__cm_delta_dacts_layout, mn__cm_delta_work, mn__cm_delta_forward,                    \
      mn__cm_delta_backward, mn__cm_delta_state, mn__cm_delta_step },
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
typedef struct mn__cm_ssd_dims { size_t DI, P, Hm, Ns, W_in, Wc, W_ld; } mn__cm_ssd_dims;
static mn__cm_ssd_dims mn__cm_ssd_dims_of(const mn_config* c) {   // mesanet.h's mn__ssd_layer_dims
    mn__cm_ssd_dims d;
    d.DI = 2 * c->d_model; d.P = c->head_dim; d.Hm = d.P ? d.DI / d.P : 0; d.Ns = c->head_dim;
    d.W_in = 2 * d.DI + 2 * d.Ns + d.Hm; d.Wc = d.DI + 2 * d.Ns;
    d.W_ld = (d.W_in + 7) / 8 * 8;                                // zx's row stride (in_proj.weight keeps W_in rows)
    return d;
}
static size_t mn__cm_ssd_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                     mn__cm_layer* y) {
    const size_t N = B * T;
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    mn__cm_ssd_acts* a = &y->ssd;
    MN__P(a->zx, N * d.W_ld); MN__P(a->xbc, N * d.Wc);
    MN__P(a->dtp, N * d.Hm); MN__P(a->delta, N * d.Hm); MN__P(a->at, N * d.Hm); MN__P(a->xt, N * d.DI);
    MN__P(a->bh, N * d.Hm * d.Ns); MN__P(a->ch, N * d.Hm * d.Ns);
    MN__P(a->y, N * d.DI); MN__P(a->yz, N * d.DI); MN__P(a->yn, N * d.DI); MN__P(a->rs, N);
    MN__P(a->keep, d.P == d.Ns && (d.P == 64 || d.P == 128) ? mn_cuda_gla_keep_size(B, T, d.Hm, d.Ns, 1) : 0);
    return off;
}
static size_t mn__cm_ssd_dacts_layout(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* dd) {
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    mn__cm_ssd_dacts* g = &dd->ssd;
    MN__P(g->dzx, N * d.W_ld); MN__P(g->dxbc, N * d.Wc);
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

// xbcp (n = B*Wc) += b_conv; xbc = silu(xbcp): the decode step's (the forward fuses them into the conv)
__global__ void mn__k_ssd_convact(float* xbcp, float* xbc, const float* bias, size_t n, size_t Wc) {
    MN__FOR(i, n) {
        float a = xbcp[i] + bias[i % Wc];
        xbcp[i] = a;
        xbc[i] = mn__conv_act(a, 2);
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

// The in_proj as two products in TF32 / fp32 mode: its first W8 = W_in rounded down to 8 rows ([z | x | B | C]
// at the anchor, 2,816) and the last W_in - W8 (the dt rows). Why: with 2,826 output columns cuBLAS's TF32
// products fell back to an alignment-1 kernel (cutlass::Kernel2, ~0.85-1 ms a launch at the anchor, three a
// layer: run 37's profile); a width that is a multiple of 8 takes the tensor-core kernels, and only the few dt
// columns the slow one. bf16 mode keeps one product (its bf16 kernels took the 2,826 columns at full speed,
// run 37, and a second one would convert dzx to bf16 twice).
static size_t mn__cm_ssd_in_split(const mn_cuda_ctx* ctx, size_t C, const mn__cm_ssd_dims* d) {
    return mn__bf_ok(ctx, C, d->W_in, d->W_ld) ? d->W_in : d->W_in / 8 * 8;
}
// zx (N,W_in) rows W_ld apart = x (N,C) W (W_in,C)^T
static int mn__cm_ssd_in_forward(mn_cuda_ctx* ctx, float* zx, const float* x, const float* W, size_t N, size_t C,
                                 const mn__cm_ssd_dims* d) {
    size_t w8 = mn__cm_ssd_in_split(ctx, C, d);
    MN__TRY(mn__matmul_product(ctx, zx, x, W, N, C, w8, 0.f, d->W_ld));
    return w8 < d->W_in ? mn__matmul_product(ctx, zx + w8, x, W + w8 * C, N, C, d->W_in - w8, 0.f, d->W_ld) : MN_OK;
}
// its backward: dx (N,C) = dzx W (written), dW (W_in,C) += dzx^T x, in the same two pieces
static int mn__cm_ssd_in_backward(mn_cuda_ctx* ctx, float* dx, float* dW, const float* dzx, const float* x,
                                  const float* W, size_t N, size_t C, const mn__cm_ssd_dims* d) {
    size_t w8 = mn__cm_ssd_in_split(ctx, C, d);
    MN__TRY(mn__matmul_backward(ctx, dx, dW, NULL, dzx, x, W, N, C, w8, 0, d->W_ld));
    return w8 < d->W_in ? mn__matmul_backward(ctx, dx, dW + w8 * C, NULL, dzx + w8, x, W + w8 * C, N, C,
                                              d->W_in - w8, 1, d->W_ld) : MN_OK;
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
    MN__TRY(mn__cm_ssd_in_forward(ctx, A->zx, Y->xn1, MN__PAR(cm, l, MN__CSSD_IN), N, C, &d));
    // the conv, its bias and SiLU in one pass, reading zx's [x | B | C] columns in place (rows W_ld apart)
    MN__TRY(mn__shortconv_fwd(ctx, A->xbc, A->zx + d.DI, MN__PAR(cm, l, MN__CSSD_CONV), MN__PAR(cm, l, MN__CSSD_CONVB),
                              B, T, d.Wc, d.W_ld, 4, 2));
    mn__k_ssd_dt<<<mn__grid(ctx, N * d.Hm, 256), 256, 0, MN__STREAM>>>(A->dtp, A->delta, A->at, A->zx,
                                                                     MN__PAR(cm, l, MN__CSSD_DTB),
                                                                     MN__PAR(cm, l, MN__CSSD_ALOG), N, d.Hm, dt_col,
                                                                     d.W_ld, neg);
    MN__LAUNCHED();
    mn__k_ssd_heads<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(A->xt, A->bh, A->ch, A->xbc, A->delta, N,
                                                                        d.Hm, d.P, d.Ns, d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn__ssd_forward(ctx, A->y, A->xt, A->at, A->bh, A->ch, B, T, d.Hm, d.P, d.Ns,
                            neg ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY, cm->work, mn__cm_gla_keep(cm, l, A->keep),
                            &cm->kept[l]));
    mn__k_ssd_skip<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(A->y, A->yz, A->zx, A->xbc,
                                                                       MN__PAR(cm, l, MN__CSSD_D), N, d.DI, d.P,
                                                                       d.W_ld, d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->yn, A->rs, A->yz, MN__PAR(cm, l, MN__CSSD_NORM), N, d.DI, c->norm_eps));
    MN__D2D(Y->x2, res, N * C);
    return mn__cm_matmul_add(ctx, Y->x2, A->yn, MN__PAR(cm, l, MN__CSSD_OUT), N, d.DI, C);
}
// every gradient buffer written by its first writer (acc 0 or a kernel that writes), the op's four outputs
// included (mn__ssd_backward with acc 0); din by the in_proj backward
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
                                                                           d.W_ld, d.Wc);
    MN__LAUNCHED();
    MN__CU(cudaMemsetAsync(D->sD, 0, d.DI * sizeof(float), MN__STREAM));
    MN__TRY(mn__colsum(ctx, D->sD, D->tD, NULL, NULL, N, d.DI));
    mn__k_ssd_headsum<<<1, 32, 0, MN__STREAM>>>(MN__GRD(cm, l, MN__CSSD_D), D->sD, d.Hm, d.P);
    MN__LAUNCHED();
    // the op is the first writer of dxt, dat, dbh, dch (acc 0: the chunk form writes, the recurrent one zeroes)
    MN__TRY(mn__ssd_backward(ctx, D->dxt, D->dat, D->dbh, D->dch, D->dy, A->xt, A->at, A->bh, A->ch, B, T, d.Hm, d.P,
                             d.Ns, neg ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY, cm->work, 0,
                             cm->kept[l] ? A->keep : NULL));
    mn__k_ssd_dt_bwd<<<mn__grid(ctx, N * d.Hm * 32, 256), 256, 0, MN__STREAM>>>(D->dzx, D->tA, D->tdt, D->dat, D->dxt,
                                                                              A->xbc, A->delta, A->dtp,
                                                                              MN__PAR(cm, l, MN__CSSD_ALOG), N, d.Hm,
                                                                              d.P, dt_col, d.W_ld, d.Wc, neg);
    MN__LAUNCHED();
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__CSSD_ALOG), D->tA, NULL, NULL, N, d.Hm));
    MN__TRY(mn__colsum(ctx, MN__GRD(cm, l, MN__CSSD_DTB), D->tdt, NULL, NULL, N, d.Hm));
    mn__k_ssd_heads_bwd<<<mn__grid(ctx, N * d.DI, 256), 256, 0, MN__STREAM>>>(D->dxbc, D->dxt, A->delta, D->dbh,
                                                                            D->dch, N, d.Hm, d.P, d.Ns, d.Wc);
    MN__LAUNCHED();
    // SiLU's and the conv's backward in one pass (a recomputed with the bias), the input gradient written
    // straight into dzx's columns DI.. (rows W_ld apart), the bias's from the kernel's deterministic partials
    MN__TRY(mn__shortconv_backward(ctx, D->dzx + d.DI, MN__GRD(cm, l, MN__CSSD_CONV), D->dxbc, A->zx + d.DI,
                                   MN__PAR(cm, l, MN__CSSD_CONV), B, T, d.Wc, 4, 2, 0, MN__PAR(cm, l, MN__CSSD_CONVB),
                                   MN__GRD(cm, l, MN__CSSD_CONVB), d.W_ld));
    return mn__cm_ssd_in_backward(ctx, din, MN__GRD(cm, l, MN__CSSD_IN), D->dzx, Y->xn1, MN__PAR(cm, l, MN__CSSD_IN),
                                  N, C, &d);
}

#define MN__CM_ROWS_SSD                                                                                          \
    { "mamba2", 0, MN__CSSD_END - MN__CP_MIX, mn__cp_ssd, mn__cm_ssd_check, mn__cm_ssd_acts_layout,              \
      mn__cm_ssd_dacts_layout, mn__cm_ssd_work, mn__cm_ssd_forward, mn__cm_ssd_backward,                               \
      mn__cm_ssd_state, mn__cm_ssd_step },                                                                            \
    { "mamba2_neg", 1, MN__CSSD_END - MN__CP_MIX, mn__cp_ssd, mn__cm_ssd_check, mn__cm_ssd_acts_layout,          \
      mn__cm_ssd_dacts_layout, mn__cm_ssd_work, mn__cm_ssd_forward, mn__cm_ssd_backward,                               \
      mn__cm_ssd_state, mn__cm_ssd_step },
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

static size_t mn__cm_rglru_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                       mn__cm_layer* y) {
    const size_t N = B * T;
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
      mn__cm_rglru_dacts_layout, mn__cm_rglru_work, mn__cm_rglru_forward, mn__cm_rglru_backward,                       \
      mn__cm_rglru_state, mn__cm_rglru_step },
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
static size_t mn__cm_mlstm_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                       mn__cm_layer* y) {
    const size_t N = B * T;
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
      mn__cm_mlstm_dacts_layout, mn__cm_mlstm_work, mn__cm_mlstm_forward, mn__cm_mlstm_backward,                       \
      mn__cm_mlstm_state, mn__cm_mlstm_step },
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

static size_t mn__cm_slstm_acts_layout(const mn_config* c, size_t B, size_t T, float* base, size_t off,
                                       mn__cm_layer* y) {
    const size_t N = B * T;
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
      mn__cm_slstm_dacts_layout, mn__cm_slstm_work, mn__cm_slstm_forward, mn__cm_slstm_backward,                       \
      mn__cm_slstm_state, mn__cm_slstm_step },

// ---- decode: each mixer's one-token step (mesanet.h's mn__<op>_layer_step, B sequences at once) ----
// A hook reads xn (B,C), the layer's normed input, and adds the mixer's output into the residual x
// (B,C) (the output projection with beta = 1, as the forward fuses it). Its state is the layer's block
// of the decode state, B times the row's per-sequence size, laid out by the hook (the GPU ops want
// their state batch-major, e.g. the KV cache (B,len,H,D), so the hook splits the block by tensor, not
// by sequence); tmp is per-token scratch, B times the row's per-sequence temporaries.
#define MN__PAD(n) (((size_t)(n) + 63) / 64 * 64)
// One token of the causal depthwise conv (mesanet.h's mn_shortconv_step) for B sequences: state (B,Ch,K-1)
// the last K-1 inputs per channel, oldest first (shifted, the new input appended); out, inp (B,Ch); w (Ch,K)
__global__ void mn__k_cm_conv_step(float* out, float* state, const float* inp, const float* w, size_t B, size_t Ch,
                                   int K, int silu) {
    MN__FOR(i, B * Ch) {
        size_t c = i % Ch;
        float* s = state + i * (size_t)(K - 1);
        const float* wc = w + c * (size_t)K;
        float x = inp[i], a = wc[K - 1] * x;
        for (int j = 0; j + 1 < K; j++) a += wc[j] * s[j];
        for (int j = 0; j + 2 < K; j++) s[j] = s[j + 1];
        if (K > 1) s[K - 2] = x;
        out[i] = silu ? a / (1.f + expf(-a)) : a;
    }
}
static int mn__cm_conv_step(mn_cuda_ctx* ctx, float* out, float* state, const float* inp, const float* w, size_t B,
                            size_t Ch, int K, int silu) {
    mn__k_cm_conv_step<<<mn__grid(ctx, B * Ch, 256), 256, 0, MN__STREAM>>>(out, state, inp, w, B, Ch, K, silu);
    MN__LAUNCHED();
    return MN_OK;
}

// "mesa" (mesanet.h's mn__mesa_layer_step): q, k, v = xn W; q, k through their short convs (ring
// buffers) and the per-head l2 norm; the gates from xn; the Mesa op's decode step (H, S updated, x =
// (H + diag lambda)^-1 q by CG with the decode options); per-head RMSNorm; x += o Wo.
// state: cq, ck (B,HD,3) the convs' last 3 inputs; hkk, hkv (B,H,D,D) (the CPU's per-sequence pieces,
// batch-major); iters (B,H) ints, the step's CG iterations per system, which mn_cuda_model_step adds into the
// state's CG totals (the CPU keeps per-sequence totals instead: the same sums); then, for the Woodbury starts
// (cfg.mesa_cg_warm 5 and 6), mn_cuda_mesa_step_woodbury's ring block (B*H windows of r tokens as the CPU's
// S.ring, then its x0 scratch), r = mn__cm_mesa_window; for the starts from the previous solution (2-4) those
// solutions (B,H,D) in the same place (the CPU's S.xs); nothing for the other starts. That block comes after
// iters, so iters stays where mn__cm_mesa_iters finds it whatever the start.
// The window of cfg.mesa_cg_warm 5 / 6 in tokens, 0 for the other starts: mesanet.h's mn__mesa_window
// (MN__MESA_WINDOW_SHORT / _LONG; that header's implementation is not compiled into this unit)
enum { MN__CM_WINDOW_SHORT = 8, MN__CM_WINDOW_LONG = 16 };
static size_t mn__cm_mesa_window(const mn_config* c) {
    return c->mesa_cg_warm == 5 ? MN__CM_WINDOW_SHORT : c->mesa_cg_warm == 6 ? MN__CM_WINDOW_LONG : 0;
}
// 1 when the decode starts from the previous solution (cfg.mesa_cg_warm 2-4): the state keeps them (B,H,D)
static int mn__cm_mesa_prev(const mn_config* c) { return c->mesa_cg_warm >= 2 && c->mesa_cg_warm <= 4; }
static size_t mn__cm_mesa_state(const mn_config* c, size_t* tmp) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    *tmp = 9 * MN__PAD(HD) + 5 * MN__PAD(H);   // ql kl v qc kc q k on (B,HD), al bl g beta rs (B,H), lamb (HD)
    // + H: iters, one int in each float's room; + the ring block of one sequence's H heads
    return 2 * MN__PAD(3 * HD) + 2 * H * D * D + H + mn_cuda_mesa_ring_size(1, H, D, mn__cm_mesa_window(c)) +
           (mn__cm_mesa_prev(c) ? HD : 0);
}
// The iters piece (B,H) of a Mesa layer's block of B sequences, after cq, ck, hkk, hkv (the hook and
// mn_cuda_model_state_init find it here). B x the per-sequence size covers it: PAD(B n) <= B PAD(n).
static int* mn__cm_mesa_iters(const mn_config* c, float* state, size_t B) {
    size_t H = c->n_head, D = c->head_dim;
    return (int*)(state + 2 * MN__PAD(B * 3 * H * D) + 2 * B * H * D * D);
}
// The ring block (mn_cuda_mesa_ring_size(B, H, D, r) floats), right after the iters piece's B*H floats.
static float* mn__cm_mesa_ring(const mn_config* c, float* state, size_t B) {
    return (float*)mn__cm_mesa_iters(c, state, B) + B * c->n_head;
}
static int mn__cm_mesa_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                            size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, N = B * H, o = MN__PAD(B * HD);
    size_t oh = MN__PAD(B * H), sc = MN__PAD(B * 3 * HD), r = mn__cm_mesa_window(c);
    float *ql = tmp, *kl = ql + o, *v = kl + o, *qc = v + o, *kc = qc + o, *q = kc + o, *k = q + o, *on = k + o;
    float *al = on + o, *bl = al + oh, *g = bl + oh, *beta = g + oh, *rs = beta + oh, *lamb = rs + oh;   // (B,H); (HD)
    float *cq = state, *ck = cq + sc, *hkk = ck + sc, *hkv = hkk + B * H * Dh * Dh;
    int* its = mn__cm_mesa_iters(c, state, B);                                      // (B,H)
    float* ring = mn__cm_mesa_ring(c, state, B);                                    // (ring_size(B,H,Dh,r))
    mn_mesa_opts op; memset(&op, 0, sizeof op);
    (void)pos;
    // the CPU step's options (mesanet.h's mn__mesa_layer_step): the Woodbury starts (5, 6) run
    // mn_cuda_mesa_step_woodbury, which sets its start and stop itself; so does the Jacobi start with a
    // tolerance (1, tol > 0: the CPU's warm stop against ||q_t||), which is that kernel with an empty window
    // (r = 0: every head at the Jacobi guess, no ring); 2-4 start from the previous solutions kept in the state
    // (mn_cuda_mesa_step_warm: opts.warm = warm - 1, the Jacobi guess at a sequence's first token)
    int jacobi_tol = c->mesa_cg_warm == 1 && c->mesa_cg_tol > 0, prev = mn__cm_mesa_prev(c);
    op.cg_iters = c->mesa_cg_decode; op.cg_tol = c->mesa_cg_tol;
    op.fla = c->mesa_cg_fla && !(c->mesa_cg_tol > 0);
    op.jacobi = c->mesa_cg_warm >= 1;
    op.warm = prev ? c->mesa_cg_warm - 1 : MN_MESA_COLD;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CP_Q, xn, ql, kl, v, B));
    MN__TRY(mn__cm_conv_step(ctx, qc, cq, ql, MN__PAR(cm, l, MN__CP_QC), B, HD, 4, 1));
    MN__TRY(mn__cm_conv_step(ctx, kc, ck, kl, MN__PAR(cm, l, MN__CP_KC), B, HD, 4, 1));
    MN__TRY(mn_cuda_l2norm_forward(ctx, q, rs, qc, N, Dh));
    MN__TRY(mn_cuda_l2norm_forward(ctx, k, rs, kc, N, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, al, xn, MN__PAR(cm, l, MN__CP_A), MN__PAR(cm, l, MN__CP_AB), B, C, H));
    MN__TRY(mn_cuda_matmul_forward(ctx, bl, xn, MN__PAR(cm, l, MN__CP_B), MN__PAR(cm, l, MN__CP_BB), B, C, H));
    mn__k_cm_gates<<<mn__grid(ctx, N, 256), 256, 0, MN__STREAM>>>(g, beta, al, bl, N, c->mesa_gamma_clamp);
    MN__LAUNCHED();
    mn__k_cm_lambda<<<mn__grid(ctx, HD, 256), 256, 0, MN__STREAM>>>(lamb, MN__PAR(cm, l, MN__CP_LAM), HD);
    MN__LAUNCHED();
    if (r || jacobi_tol)
        MN__TRY(mn_cuda_mesa_step_woodbury(ctx, qc, its, hkk, hkv, r ? ring : NULL, q, k, v, g, beta, lamb, B, H, Dh,
                                           Dh, r, &op));                             // qc: o
    else if (prev)   // the solutions where the ring would be: (B,H,Dh)
        MN__TRY(mn_cuda_mesa_step_warm(ctx, qc, ring, its, hkk, hkv, q, k, v, g, beta, lamb, B, H, Dh, Dh, &op));
    else MN__TRY(mn_cuda_mesa_step(ctx, qc, its, hkk, hkv, q, k, v, g, beta, lamb, B, H, Dh, Dh, &op));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, on, rs, qc, MN__PAR(cm, l, MN__CP_ON), N, Dh, c->norm_eps));
    return mn__cm_matmul_add(ctx, x, on, MN__PAR(cm, l, MN__CP_O), B, HD, C);
}

// "attn", "swa" (mesanet.h's mn__attention_layer_step): q, k, v = xn W; RoPE at pos; k, v into the
// cache; o = softmax over the cached (window's) keys of q.k / sqrt(D) times v; x += o Wo.
// state: kcache (B,max_seq_len,HD), then vcache (B,max_seq_len,HD) (the CPU's per-sequence kcache,
// vcache of max_seq_len positions each; a window uses the first W slots of a sequence as a ring)
static size_t mn__cm_attn_state(const mn_config* c, size_t* tmp) {
    size_t HD = c->n_head * c->head_dim;
    *tmp = 4 * MN__PAD(HD);                                    // q, k, v, o
    return 2 * c->max_seq_len * HD;
}
static int mn__cm_attn_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                            size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, win = mn__cm_attn_window(cm, l);
    size_t len = win && win < c->max_seq_len ? win : c->max_seq_len, o = MN__PAD(B * HD);
    float *q = tmp, *k = tmp + o, *v = tmp + 2 * o, *ao = tmp + 3 * o;          // (B,HD) x4
    float *kc = state, *vc = state + B * c->max_seq_len * HD;                    // (B,len,HD) x2
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CA_Q, xn, q, k, v, B));
    if (c->rope_theta > 0) {                                                     // T = 1 at position pos
        MN__TRY(mn__rope(ctx, q, q, B, 1, H, Dh, pos, c->rope_theta, 1.0, 0));
        MN__TRY(mn__rope(ctx, k, k, B, 1, H, Dh, pos, c->rope_theta, 1.0, 0));
    }
    MN__TRY(mn_cuda_attention_step(ctx, ao, kc, vc, q, k, v, B, pos, len, H, Dh, Dh, win, 1.0 / sqrt((double)Dh)));
    return mn__cm_matmul_add(ctx, x, ao, MN__PAR(cm, l, MN__CA_O), B, HD, C);
}

// (B) ints = v: the per-sequence positions a step op reads
__global__ void mn__k_cm_fill_int(int* p, size_t n, int v) { MN__FOR(i, n) p[i] = v; }

// "hawk" (mesanet.h's mn__rglru_layer_step): y branch yl = xn Wy + by; x branch xl = xn Wx + bx through
// the short conv (no SiLU) + its bias; h = RG-LRU step (position 0 restarts, as the forward's first
// token); x += (h gelu(yl)) Wo + bo. state: conv (B,C,3) the conv's last 3 inputs, h (B,C)
static size_t mn__cm_rglru_state(const mn_config* c, size_t* tmp) {
    size_t C = c->d_model;
    *tmp = 5 * MN__PAD(C) + 64;                   // yl, xl, xc, h, hy (B,C); the positions (B ints)
    return MN__PAD(3 * C) + MN__PAD(C);
}
static int mn__cm_rglru_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                             size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, o = MN__PAD(B * C);
    float *yl = tmp, *xl = yl + o, *xc = xl + o, *h = xc + o, *hy = h + o;   // (B,C) x5
    int* sp = (int*)(hy + o);                                                 // (B)
    float *conv = state, *hs = state + MN__PAD(B * 3 * C);                    // (B,C,3), (B,C)
    MN__TRY(mn_cuda_matmul_forward(ctx, yl, xn, MN__PAR(cm, l, MN__RGLRU_CP_Y), MN__PAR(cm, l, MN__RGLRU_CP_YB), B, C,
                                   C));
    MN__TRY(mn_cuda_matmul_forward(ctx, xl, xn, MN__PAR(cm, l, MN__RGLRU_CP_X), MN__PAR(cm, l, MN__RGLRU_CP_XB), B, C,
                                   C));
    MN__TRY(mn__cm_conv_step(ctx, xc, conv, xl, MN__PAR(cm, l, MN__RGLRU_CP_CONV), B, C, 4, 0));
    mn__k_add_bias<<<mn__grid(ctx, B * C, 256), 256, 0, MN__STREAM>>>(xc, MN__PAR(cm, l, MN__RGLRU_CP_CONVB), B, C);
    MN__LAUNCHED();
    mn__k_cm_fill_int<<<1, 256, 0, MN__STREAM>>>(sp, B, (int)pos);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_rglru_step(ctx, h, hs, xc, MN__PAR(cm, l, MN__RGLRU_CP_A), MN__PAR(cm, l, MN__RGLRU_CP_GXW),
                               MN__PAR(cm, l, MN__RGLRU_CP_GXB), MN__PAR(cm, l, MN__RGLRU_CP_GAW),
                               MN__PAR(cm, l, MN__RGLRU_CP_GAB), sp, B, C, c->n_head, MN__CM_RGLRU_C, NULL));
    mn__k_rglru_hy<<<mn__grid(ctx, B * C, 256), 256, 0, MN__STREAM>>>(hy, h, yl, B * C);
    MN__LAUNCHED();
    MN__TRY(mn__cm_matmul_add(ctx, x, hy, MN__PAR(cm, l, MN__RGLRU_CP_O), B, C, C));
    mn__k_add_bias<<<mn__grid(ctx, B * C, 256), 256, 0, MN__STREAM>>>(x, MN__PAR(cm, l, MN__RGLRU_CP_OB), B, C);
    MN__LAUNCHED();
    return MN_OK;
}

// "mlstm" (mesanet.h's mn__mlstm_layer_step): q, k, v = xn W; the soft-capped gates; the mLSTM op's
// decode step (scale 1/sqrt(D), eps as the forward's); per-head RMSNorm times sigmoid(xn Wog); x += . Wo.
// state: C (B,H,D,D), n (B,H,D), m (B,H) (zeros at the start, as mn_state_init's)
static size_t mn__cm_mlstm_state(const mn_config* c, size_t* tmp) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    *tmp = 7 * MN__PAD(HD) + 5 * MN__PAD(H);      // q k v h hn ol ho (B,HD); il fl ig fg rs (B,H)
    return H * D * D + MN__PAD(HD) + MN__PAD(H);
}
static int mn__cm_mlstm_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                             size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, N = B * H, o = MN__PAD(B * HD);
    size_t oh = MN__PAD(N);
    float *q = tmp, *k = q + o, *v = k + o, *h = v + o, *hn = h + o, *ol = hn + o, *ho = ol + o;   // (B,HD) x7
    float *il = ho + o, *fl = il + oh, *ig = fl + oh, *fg = ig + oh, *rs = fg + oh;                // (B,H) x5
    float *Cs = state, *ns = Cs + B * H * Dh * Dh, *ms = ns + MN__PAD(B * HD);   // (B,H,D,D), (B,H,D), (B,H)
    (void)pos;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CM_MLSTM_Q, xn, q, k, v, B));
    MN__TRY(mn_cuda_matmul_forward(ctx, il, xn, MN__PAR(cm, l, MN__CM_MLSTM_I), MN__PAR(cm, l, MN__CM_MLSTM_IB), B, C,
                                   H));
    MN__TRY(mn_cuda_matmul_forward(ctx, fl, xn, MN__PAR(cm, l, MN__CM_MLSTM_F), MN__PAR(cm, l, MN__CM_MLSTM_FB), B, C,
                                   H));
    mn__k_mlstm_cap<<<mn__grid(ctx, N, 256), 256, 0, MN__STREAM>>>(ig, fg, il, fl, N);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_mlstm_step(ctx, h, Cs, ns, ms, q, k, v, ig, fg, B, H, Dh, Dh, 1.0 / sqrt((double)Dh),
                               MN__CM_MLSTM_EPS));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, hn, rs, h, MN__PAR(cm, l, MN__CM_MLSTM_NORM), N, Dh, c->norm_eps));
    MN__TRY(mn_cuda_matmul_forward(ctx, ol, xn, MN__PAR(cm, l, MN__CM_MLSTM_OG), NULL, B, C, HD));
    mn__k_mlstm_ogate<<<mn__grid(ctx, B * HD, 256), 256, 0, MN__STREAM>>>(ho, hn, ol, B * HD);
    MN__LAUNCHED();
    return mn__cm_matmul_add(ctx, x, ho, MN__PAR(cm, l, MN__CM_MLSTM_O), B, HD, C);
}

// "slstm" (mesanet.h's mn__slstm_layer_step): the conv (ring buffer) + bias + SiLU of xn feeds the i and
// f gates' block-diagonal maps, xn itself the z and o gates'; the sLSTM op's step; x += RMSNorm_head(y).
// state: conv (B,C,3), then y, c, n, m (B,C) (zeros at the start, as mn_state_init's)
static size_t mn__cm_slstm_state(const mn_config* c, size_t* tmp) {
    size_t C = c->d_model;
    *tmp = 3 * MN__PAD(C) + MN__PAD(4 * C) + MN__PAD(c->n_head);   // xcp, xc, o (B,C); x (B,4C); rs (B,NH)
    return MN__PAD(3 * C) + 4 * MN__PAD(C);
}
static int mn__cm_slstm_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                             size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, NH = c->n_head, Dh = C / NH, o = MN__PAD(B * C);
    float *xcp = tmp, *xc = xcp + o, *ob = xc + o, *xg = ob + o, *rs = xg + MN__PAD(B * 4 * C);   // see the sizes
    float *conv = state, *y = conv + MN__PAD(B * 3 * C), *cs = y + o, *ns = cs + o, *ms = ns + o;
    (void)pos;
    MN__TRY(mn__cm_conv_step(ctx, xcp, conv, xn, MN__PAR(cm, l, MN__CSLSTM_CONV), B, C, 4, 0));
    mn__k_cm_slstm_act<<<mn__grid(ctx, B * C, 256), 256, 0, MN__STREAM>>>(xcp, xc, MN__PAR(cm, l, MN__CSLSTM_CONVB), B,
                                                                          C);
    MN__LAUNCHED();
    MN__TRY(mn__cm_slstm_bd_forward(ctx, xg + 0 * C, 4 * C, xc, MN__PAR(cm, l, MN__CSLSTM_WI), B, NH, Dh));
    MN__TRY(mn__cm_slstm_bd_forward(ctx, xg + 1 * C, 4 * C, xc, MN__PAR(cm, l, MN__CSLSTM_WF), B, NH, Dh));
    MN__TRY(mn__cm_slstm_bd_forward(ctx, xg + 2 * C, 4 * C, xn, MN__PAR(cm, l, MN__CSLSTM_WZ), B, NH, Dh));
    MN__TRY(mn__cm_slstm_bd_forward(ctx, xg + 3 * C, 4 * C, xn, MN__PAR(cm, l, MN__CSLSTM_WO), B, NH, Dh));
    MN__TRY(mn_cuda_slstm_step(ctx, y, cs, ns, ms, xg, MN__PAR(cm, l, MN__CSLSTM_R), MN__PAR(cm, l, MN__CSLSTM_B), B,
                               NH, Dh));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, ob, rs, y, MN__PAR(cm, l, MN__CSLSTM_NORM), B * NH, Dh, c->norm_eps));
    mn__k_cm_slstm_add<<<mn__grid(ctx, B * C, 256), 256, 0, MN__STREAM>>>(x, x, ob, B * C);   // elementwise: in place
    MN__LAUNCHED();
    return MN_OK;
}

// the gated output of one token (mn__cm_gated_out_forward with x += instead of x2 = res +): gg = xn Wg;
// on = RMSNorm_head(o) swish(gg); x += on Wo. x, xn (B,C); gg, on (B,HD); rs (B,H); o (B,HD)
static int mn__cm_gated_out_step(mn_cuda_model* cm, size_t l, int jg, int jn, int jo, float* x, const float* xn,
                                 float* gg, float* on, float* rs, const float* o, size_t B) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh;
    MN__TRY(mn_cuda_matmul_forward(ctx, gg, xn, MN__PAR(cm, l, jg), NULL, B, C, HD));
    MN__TRY(mn_cuda_rmsnorm_gated_forward(ctx, on, rs, o, gg, MN__PAR(cm, l, jn), B * H, Dh, c->norm_eps));
    return mn__cm_matmul_add(ctx, x, on, MN__PAR(cm, l, jo), B, HD, C);
}

// "deltanet", "deltanet_neg", "gdn", "gdn_neg" (mesanet.h's mn__delta_rule_layer_step): q, k, v = xn W, each
// through its short conv + SiLU (ring buffers); q, k l2-normed per head; beta (x2 for _neg); GDN's decay;
// the delta rule's decode step (scale D^-1/2); GDN: the gated output, DeltaNet: RMSNorm_head then Wo.
// state: cq, ck, cv (B,HD,3) the convs' last 3 inputs; S (B,H,D,D)
static size_t mn__cm_delta_state(const mn_config* c, size_t* tmp) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    *tmp = 11 * MN__PAD(HD) + 5 * MN__PAD(H);   // ql kl vl qc kc v q k o gl on (B,HD); bl beta al g rs (B,H)
    return 3 * MN__PAD(3 * HD) + H * D * D;
}
static int mn__cm_delta_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                             size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, N = B * H, o = MN__PAD(B * HD);
    size_t oh = MN__PAD(N), sc = MN__PAD(B * 3 * HD);
    int var = mn__cm_variant(cm, l), gated = var & MN__DELTA_GATED;
    float *ql = tmp, *kl = ql + o, *vl = kl + o, *qc = vl + o, *kc = qc + o, *v = kc + o, *q = v + o, *k = q + o;
    float *ob = k + o, *gl = ob + o, *on = gl + o;                                              // (B,HD) x11
    float *bl = on + o, *beta = bl + oh, *al = beta + oh, *g = al + oh, *rs = g + oh;           // (B,H) x5
    float *cq = state, *ck = cq + sc, *cv = ck + sc, *S = cv + sc;                              // (B,HD,3) x3, S
    (void)pos;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CD_Q, xn, ql, kl, vl, B));
    MN__TRY(mn__cm_conv_step(ctx, qc, cq, ql, MN__PAR(cm, l, MN__CD_QC), B, HD, 4, 1));
    MN__TRY(mn__cm_conv_step(ctx, kc, ck, kl, MN__PAR(cm, l, MN__CD_KC), B, HD, 4, 1));
    MN__TRY(mn__cm_conv_step(ctx, v, cv, vl, MN__PAR(cm, l, MN__CD_VC), B, HD, 4, 1));
    MN__TRY(mn_cuda_l2norm_forward(ctx, q, rs, qc, N, Dh));
    MN__TRY(mn_cuda_l2norm_forward(ctx, k, rs, kc, N, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, bl, xn, MN__PAR(cm, l, MN__CD_B), NULL, B, C, H));
    mn__k_delta_beta<<<mn__grid(ctx, N, 256), 256, 0, MN__STREAM>>>(beta, bl, N, var & MN__DELTA_NEG);
    MN__LAUNCHED();
    if (gated) {
        MN__TRY(mn_cuda_matmul_forward(ctx, al, xn, MN__PAR(cm, l, MN__CD_A), MN__PAR(cm, l, MN__CD_DT), B, C, H));
        mn__k_delta_gate<<<mn__grid(ctx, N, 256), 256, 0, MN__STREAM>>>(g, al, MN__PAR(cm, l, MN__CD_ALOG), N, (int)H);
        MN__LAUNCHED();
    }
    MN__TRY(mn_cuda_delta_rule_step(ctx, ob, S, q, k, v, beta, gated ? g : NULL, B, H, Dh, Dh, 1.0 / sqrt((double)Dh)));
    if (gated) return mn__cm_gated_out_step(cm, l, MN__CD_G, MN__CD_NORM, MN__CD_O, x, xn, gl, on, rs, ob, B);
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, on, rs, ob, MN__PAR(cm, l, MN__CD_NORM), N, Dh, c->norm_eps));
    return mn__cm_matmul_add(ctx, x, on, MN__PAR(cm, l, MN__CD_O), B, HD, C);
}

// The GLA family's steps (mesanet.h's mn__gla_linattn_layer_step, mn__gla_simple_layer_step,
// mn__gla_layer_step): the projections of one token, the GLA op's decode step (G = 0, 1, Dk), the
// output as the forward's. state: S (B,H,D,D) (+ sgla's convs (B,HD,3) x3 after it)
static size_t mn__cm_linattn_state(const mn_config* c, size_t* tmp) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    *tmp = 9 * MN__PAD(HD) + MN__PAD(H);          // q k v qa qb ka kb o on (B,HD) (qf, kf in qa, ka); rs (B,H)
    return H * D * D;
}
static int mn__cm_linattn_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                               size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, NH = B * H, o = MN__PAD(B * HD);
    float *q = tmp, *k = q + o, *v = k + o, *qa = v + o, *qb = qa + o, *ka = qb + o, *kb = ka + o, *ob = kb + o;
    float *on = ob + o, *rs = on + o;
    (void)pos;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CL_Q, xn, q, k, v, B));
    MN__TRY(mn_cuda_matmul_forward(ctx, qa, q, MN__PAR(cm, l, MN__CL_FQ), MN__PAR(cm, l, MN__CL_FQ + 1), NH, Dh, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, qb, q, MN__PAR(cm, l, MN__CL_FQ + 2), MN__PAR(cm, l, MN__CL_FQ + 3), NH, Dh,
                                   Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, ka, k, MN__PAR(cm, l, MN__CL_FK), MN__PAR(cm, l, MN__CL_FK + 1), NH, Dh, Dh));
    MN__TRY(mn_cuda_matmul_forward(ctx, kb, k, MN__PAR(cm, l, MN__CL_FK + 2), MN__PAR(cm, l, MN__CL_FK + 3), NH, Dh,
                                   Dh));
    // phi = a * b elementwise, in place into a (each element reads only its own a and b)
    mn__k_cm_mul<<<mn__grid(ctx, B * HD, 256), 256, 0, MN__STREAM>>>(qa, qa, qb, B * HD); MN__LAUNCHED();
    mn__k_cm_mul<<<mn__grid(ctx, B * HD, 256), 256, 0, MN__STREAM>>>(ka, ka, kb, B * HD); MN__LAUNCHED();
    MN__TRY(mn_cuda_gla_step(ctx, ob, state, qa, ka, v, NULL, B, H, Dh, Dh, 0, 1.0 / sqrt((double)Dh)));
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, on, rs, ob, MN__PAR(cm, l, MN__CL_NORM), NH, Dh, c->norm_eps));
    return mn__cm_matmul_add(ctx, x, on, MN__PAR(cm, l, MN__CL_O), B, HD, C);
}
static size_t mn__cm_sgla_state(const mn_config* c, size_t* tmp) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    *tmp = 9 * MN__PAD(HD) + 3 * MN__PAD(H);      // ql kl vl q k v o gg on (B,HD); gl g rs (B,H)
    return H * D * D + 3 * MN__PAD(3 * HD);
}
static int mn__cm_sgla_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                            size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, o = MN__PAD(B * HD), oh = MN__PAD(B * H);
    size_t sc = MN__PAD(B * 3 * HD);
    float *ql = tmp, *kl = ql + o, *vl = kl + o, *q = vl + o, *k = q + o, *v = k + o, *ob = v + o, *gg = ob + o;
    float *on = gg + o, *gl = on + o, *g = gl + oh, *rs = g + oh;
    float *S = state, *cq = S + B * H * Dh * Dh, *ck = cq + sc, *cv = ck + sc;   // (B,H,D,D), (B,HD,3) x3
    (void)pos;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CS_Q, xn, ql, kl, vl, B));
    MN__TRY(mn__cm_conv_step(ctx, q, cq, ql, MN__PAR(cm, l, MN__CS_QC), B, HD, 4, 1));
    MN__TRY(mn__cm_conv_step(ctx, k, ck, kl, MN__PAR(cm, l, MN__CS_QC + 1), B, HD, 4, 1));
    MN__TRY(mn__cm_conv_step(ctx, v, cv, vl, MN__PAR(cm, l, MN__CS_QC + 2), B, HD, 4, 1));
    MN__TRY(mn_cuda_matmul_forward(ctx, gl, xn, MN__PAR(cm, l, MN__CS_GK), MN__PAR(cm, l, MN__CS_GK + 1), B, C, H));
    mn__k_cm_glagate<<<mn__grid(ctx, B * H, 256), 256, 0, MN__STREAM>>>(g, gl, B * H); MN__LAUNCHED();
    MN__TRY(mn_cuda_gla_step(ctx, ob, S, q, k, v, g, B, H, Dh, Dh, 1, 1.0 / sqrt((double)Dh)));
    return mn__cm_gated_out_step(cm, l, MN__CS_G, MN__CS_NORM, MN__CS_O, x, xn, gg, on, rs, ob, B);
}
static size_t mn__cm_gla_state(const mn_config* c, size_t* tmp) {
    size_t H = c->n_head, D = c->head_dim, HD = H * D;
    *tmp = 7 * MN__PAD(HD) + MN__PAD(MN__GLA_RK) + MN__PAD(H);   // q k v l2 o gg on (B,HD); l1 (B,16); rs (B,H)
    return H * D * D;
}
static int mn__cm_gla_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                           size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t C = c->d_model, H = c->n_head, Dh = c->head_dim, HD = H * Dh, o = MN__PAD(B * HD);
    float *q = tmp, *k = q + o, *v = k + o, *l2 = v + o, *ob = l2 + o, *gg = ob + o, *on = gg + o, *l1 = on + o;
    float* rs = l1 + MN__PAD(B * MN__GLA_RK);
    (void)pos;
    MN__TRY(mn__cm_qkv_forward(cm, l, MN__CG_Q, xn, q, k, v, B));
    MN__TRY(mn_cuda_matmul_forward(ctx, l1, xn, MN__PAR(cm, l, MN__CG_GD), NULL, B, C, MN__GLA_RK));
    MN__TRY(mn_cuda_matmul_forward(ctx, l2, l1, MN__PAR(cm, l, MN__CG_GD + 1), MN__PAR(cm, l, MN__CG_GD + 2), B,
                                   MN__GLA_RK, HD));
    mn__k_cm_glagate<<<mn__grid(ctx, B * HD, 256), 256, 0, MN__STREAM>>>(l2, l2, B * HD); MN__LAUNCHED();   // gk
    MN__TRY(mn_cuda_gla_step(ctx, ob, state, q, k, v, l2, B, H, Dh, Dh, Dh, 1.0 / sqrt((double)Dh)));
    return mn__cm_gated_out_step(cm, l, MN__CG_G, MN__CG_NORM, MN__CG_O, x, xn, gg, on, rs, ob, B);
}

// "mamba2", "mamba2_neg" (mesanet.h's mn__ssd_layer_step): zx = xn W_in = [z | x | B | C | dt]; [x | B | C]
// through the short conv (ring buffer) + bias + SiLU; Delta, the decay (or the [-1,1] transition) from dt;
// the SSD op's decode step on X = x Delta; y + D x gated by silu(z), RMSNorm over DI; x += . W_out
// (the forward's kernels with N = B tokens). state: conv (B,Wc,3), S (B,Hm,P,Ns)
static size_t mn__cm_ssd_state(const mn_config* c, size_t* tmp) {
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    // zx (W_in); xbci, xbcp, xbc (Wc); dtp, delta, at (Hm); xt, y, yz, yn (DI); bh, ch (Hm Ns); rs (1)
    *tmp = MN__PAD(d.W_in) + 3 * MN__PAD(d.Wc) + 3 * MN__PAD(d.Hm) + 4 * MN__PAD(d.DI) + 2 * MN__PAD(d.Hm * d.Ns) +
           MN__PAD(1);
    return MN__PAD(3 * d.Wc) + d.Hm * d.P * d.Ns;
}
static int mn__cm_ssd_step(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn,
                           size_t B, size_t pos) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    mn__cm_ssd_dims d = mn__cm_ssd_dims_of(c);
    size_t C = c->d_model, dt_col = 2 * d.DI + 2 * d.Ns, oc = MN__PAD(B * d.Wc), oh = MN__PAD(B * d.Hm);
    size_t od = MN__PAD(B * d.DI), on = MN__PAD(B * d.Hm * d.Ns);
    int neg = mn__cm_variant(cm, l) & 1;
    float *zx = tmp, *xbci = zx + MN__PAD(B * d.W_in), *xbcp = xbci + oc, *xbc = xbcp + oc;   // (B,W_in), (B,Wc) x3
    float *dtp = xbc + oc, *delta = dtp + oh, *at = delta + oh;                                // (B,Hm) x3
    float *xt = at + oh, *y = xt + od, *yz = y + od, *yn = yz + od;                            // (B,DI) x4
    float *bh = yn + od, *ch = bh + on, *rs = ch + on;                                         // (B,Hm,Ns) x2, (B)
    float *conv = state, *S = state + MN__PAD(B * 3 * d.Wc);                                   // (B,Wc,3), (B,Hm,P,Ns)
    (void)pos;
    MN__TRY(mn_cuda_matmul_forward(ctx, zx, xn, MN__PAR(cm, l, MN__CSSD_IN), NULL, B, C, d.W_in));
    MN__CU(cudaMemcpy2DAsync(xbci, d.Wc * sizeof(float), zx + d.DI, d.W_in * sizeof(float), d.Wc * sizeof(float), B,
                             cudaMemcpyDeviceToDevice, MN__STREAM));
    MN__TRY(mn__cm_conv_step(ctx, xbcp, conv, xbci, MN__PAR(cm, l, MN__CSSD_CONV), B, d.Wc, 4, 0));
    mn__k_ssd_convact<<<mn__grid(ctx, B * d.Wc, 256), 256, 0, MN__STREAM>>>(xbcp, xbc, MN__PAR(cm, l, MN__CSSD_CONVB),
                                                                          B * d.Wc, d.Wc);
    MN__LAUNCHED();
    mn__k_ssd_dt<<<mn__grid(ctx, B * d.Hm, 256), 256, 0, MN__STREAM>>>(dtp, delta, at, zx, MN__PAR(cm, l, MN__CSSD_DTB),
                                                                     MN__PAR(cm, l, MN__CSSD_ALOG), B, d.Hm, dt_col,
                                                                     d.W_in, neg);
    MN__LAUNCHED();
    mn__k_ssd_heads<<<mn__grid(ctx, B * d.DI, 256), 256, 0, MN__STREAM>>>(xt, bh, ch, xbc, delta, B, d.Hm, d.P, d.Ns,
                                                                        d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_ssd_step(ctx, y, S, xt, at, bh, ch, B, d.Hm, d.P, d.Ns,
                             neg ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY));
    mn__k_ssd_skip<<<mn__grid(ctx, B * d.DI, 256), 256, 0, MN__STREAM>>>(y, yz, zx, xbc, MN__PAR(cm, l, MN__CSSD_D), B,
                                                                       d.DI, d.P, d.W_in, d.Wc);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, yn, rs, yz, MN__PAR(cm, l, MN__CSSD_NORM), B, d.DI, c->norm_eps));
    return mn__cm_matmul_add(ctx, x, yn, MN__PAR(cm, l, MN__CSSD_OUT), B, d.DI, C);
}

// ---- the mixer table: one row per mixer the GPU model runs (mesanet.h's mn__mixers, by name) ----
// Adding a mixer: its activation structs above, these functions, one row.
typedef struct mn__cm_mixer {
    const char* name;                  // as in cfg.pattern
    int variant;                       // 1: "swa" (the window cfg.window)
    int n_tensors;                     // the mixer's parameter tensors, after the backbone's five
    const char* const* tensors;        // their names after "model.layers.<l>."
    int (*check)(mn_cuda_ctx* ctx, const mn_config* c);   // MN_OK, or MN_ERR_CONFIG for a shape without kernels
    size_t (*acts)(const mn_config* c, size_t B, size_t T, float* base, size_t off, mn__cm_layer* y);
    size_t (*dacts)(const mn_config* c, size_t N, float* base, size_t off, mn__cm_dacts* d);
    size_t (*work)(const mn_config* c, size_t B, size_t T);    // floats of workspace
    int (*forward)(mn_cuda_model* cm, size_t l, const mn__cm_layer* A, const mn__cm_dacts* D, const float* res,
                   size_t B, size_t T);                        // x2 = res + mixer(xn1)
    int (*backward)(mn_cuda_model* cm, size_t l, const mn__cm_layer* A, const mn__cm_dacts* D, float* din,
                    const float* dout, size_t B, size_t T);    // din = the input gradient (overwritten)
    // decode: floats of state per sequence (*tmp: of per-token temporaries per sequence, each piece padded to 64)
    size_t (*state)(const mn_config* c, size_t* tmp);
    // one token of B sequences at position pos: x (B,C) += mixer(xn (B,C)); state (B x the row's size),
    // laid out by the hook; tmp (B x *tmp floats) scratch
    int (*step)(mn_cuda_model* cm, size_t l, float* x, float* state, float* tmp, const float* xn, size_t B,
                size_t pos);
} mn__cm_mixer;
static const mn__cm_mixer mn__cm_mixers[] = {
    { "mesa", 0, MN__CP_MESA_END - MN__CP_MIX, mn__cp_mesa, mn__cm_mesa_check, mn__cm_mesa_acts_layout,
      mn__cm_mesa_dacts_layout, mn__cm_mesa_work, mn__cm_mesa_forward, mn__cm_mesa_backward,
      mn__cm_mesa_state, mn__cm_mesa_step },
    { "attn", 0, MN__CA_END - MN__CP_MIX, mn__cp_attn, mn__cm_attn_check, mn__cm_attn_acts_layout,
      mn__cm_attn_dacts_layout, mn__cm_attn_work, mn__cm_attn_forward, mn__cm_attn_backward,
      mn__cm_attn_state, mn__cm_attn_step },
    { "swa", 1, MN__CA_END - MN__CP_MIX, mn__cp_attn, mn__cm_attn_check, mn__cm_attn_acts_layout,
      mn__cm_attn_dacts_layout, mn__cm_attn_work, mn__cm_attn_forward, mn__cm_attn_backward,
      mn__cm_attn_state, mn__cm_attn_step },
    { "linattn", 0, MN__CL_END - MN__CP_MIX, mn__cp_linattn, mn__cm_gla_check, mn__cm_linattn_acts_layout,
      mn__cm_linattn_dacts_layout, mn__cm_gla_work, mn__cm_linattn_forward, mn__cm_linattn_backward,
      mn__cm_linattn_state, mn__cm_linattn_step },
    { "sgla", 0, MN__CS_END - MN__CP_MIX, mn__cp_sgla, mn__cm_gla_check, mn__cm_sgla_acts_layout,
      mn__cm_sgla_dacts_layout, mn__cm_gla_work, mn__cm_sgla_forward, mn__cm_sgla_backward,
      mn__cm_sgla_state, mn__cm_sgla_step },
    { "gla", 0, MN__CG_END - MN__CP_MIX, mn__cp_gla, mn__cm_gla_check, mn__cm_gla_acts_layout,
      mn__cm_gla_dacts_layout, mn__cm_gla_work, mn__cm_gla_forward, mn__cm_gla_backward,
      mn__cm_gla_state, mn__cm_gla_step },
    MN__CM_ROWS_DELTA
    MN__CM_ROWS_SSD
    MN__CM_ROWS_RGLRU
    MN__CM_ROWS_MLSTM
    MN__CM_ROWS_SLSTM
};
#define MN__CM_N_MIXERS (sizeof mn__cm_mixers / sizeof mn__cm_mixers[0])
#define MN__CM_MIXER(cm, l) (&mn__cm_mixers[(cm)->mixer[l]])
static int mn__cm_variant(const mn_cuda_model* cm, size_t l) { return MN__CM_MIXER(cm, l)->variant; }
static size_t mn__cm_attn_window(const mn_cuda_model* cm, size_t l) {
    return MN__CM_MIXER(cm, l)->variant ? cm->cfg.window : 0;
}

// The whole layouts: the backbone's buffers, then per layer its mixer's (activations), or every
// mixer of the pattern over one shared region (gradients).
static size_t mn__cm_layout_acts(const mn_cuda_model* cm, size_t B, size_t T, float* base, mn__cm_acts* a) {
    const mn_config* c = &cm->cfg;
    size_t N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab_size, off = 0;
    memset(a, 0, sizeof *a);
    MN__P(a->res, (c->n_layer + 1) * N * C); MN__P(a->xf, N * C); MN__P(a->rstdf, N); MN__P(a->logits, N * V);
    MN__P(a->losses, N);
    for (size_t l = 0; l < c->n_layer; l++) {
        mn__cm_layer* y = &a->L[l];
        MN__P(y->xn1, N * C); MN__P(y->rstd1, N); MN__P(y->x2, N * C); MN__P(y->xn2, N * C); MN__P(y->rstd2, N);
        MN__P(y->gate, N * F); MN__P(y->up, N * F); MN__P(y->h, N * F);
        off = MN__CM_MIXER(cm, l)->acts(c, B, T, base, off, y);
    }
    return off;
}
static size_t mn__cm_layout_dacts(const mn_cuda_model* cm, size_t B, size_t T, float* base, mn__cm_dacts* d) {
    const mn_config* c = &cm->cfg;
    size_t N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab_size, off = 0, l0, mix, end;
    memset(d, 0, sizeof *d);
    MN__P(d->dlogits, N * V); MN__P(d->dlosses, N); MN__P(d->dxf, N * C); MN__P(d->dres[0], N * C);
    MN__P(d->dres[1], N * C);
    l0 = off;
    MN__P(d->dxn1, N * C); MN__P(d->dxn2, N * C); MN__P(d->dh, N * F); MN__P(d->dgate, N * F); MN__P(d->dup, N * F);
    mix = end = off;
    for (size_t l = 0; l < c->n_layer; l++) {
        size_t e = MN__CM_MIXER(cm, l)->dacts(c, N, base, mix, d);
        if (e > end) end = e;
    }
    d->layer = base ? base + l0 : NULL; d->layer_n = end - l0;
    return end;
}
#undef MN__P
static size_t mn__cm_work(const mn_cuda_model* cm, size_t B, size_t T) {
    size_t w = 0;
    for (size_t l = 0; l < cm->cfg.n_layer; l++) {
        size_t k = MN__CM_MIXER(cm, l)->work(&cm->cfg, B, T);
        if (k > w) w = k;
    }
    return w;
}

// ---- bf16 mode: the images the projections read ----
// The parameters' image pbf (bf16, laid out like params) is made when params_version moved since the
// last one (so once per AdamW step; evaluation forwards reuse it) and registered in slot 0 of the
// context's table for the length of a forward or backward; the layer input a mixer's or the MLP's
// projections share (xn1, xn2) is converted once into abf and registered in slot 1 while they run
// (instead of once per projection: q, k, v and the gates read the same xn1).
static int mn__cm_bf16_alloc(mn_cuda_model* cm, size_t n_act) {
    mn_cuda_ctx* ctx = cm->ctx;
    if (!cm->pbf) {
        MN__TRY(mn_cuda_malloc(ctx, &cm->pbf, cm->n_params * sizeof(__nv_bfloat16)));
        cm->pbf_version = 0;
    }
    if (n_act > cm->cap_abf) {
        mn_cuda_dfree(cm->abf); cm->abf = NULL; cm->cap_abf = 0;
        MN__TRY(mn_cuda_malloc(ctx, &cm->abf, n_act * sizeof(__nv_bfloat16)));
        cm->cap_abf = n_act;
    }
    return MN_OK;
}
// at the start of a forward or backward: a current pbf, registered (nothing outside bf16 mode)
static int mn__cm_bf16_begin(mn_cuda_model* cm) {
    mn_cuda_ctx* ctx = cm->ctx;
    if (ctx->math != MN_CUDA_MATH_BF16) return MN_OK;
    MN__TRY(mn__cm_bf16_alloc(cm, 0));
    if (cm->pbf_version != cm->params_version + 1) {
        MN__TRY(mn__to_bf16(ctx, (__nv_bfloat16*)cm->pbf, cm->params, cm->n_params));
        cm->pbf_version = cm->params_version + 1;
    }
    mn__bf_register(ctx, 0, cm->params, cm->n_params, cm->pbf);
    return MN_OK;
}
// the n floats of x (N,C), read by the projections that follow, into abf (slot 1, replacing what was there)
static int mn__cm_bf16_pin(mn_cuda_model* cm, const float* x, size_t n) {
    mn_cuda_ctx* ctx = cm->ctx;
    if (ctx->math != MN_CUDA_MATH_BF16) return MN_OK;
    mn__bf_register(ctx, 1, NULL, 0, NULL);
    MN__TRY(mn__cm_bf16_alloc(cm, n));
    MN__TRY(mn__to_bf16(ctx, (__nv_bfloat16*)cm->abf, x, n));
    mn__bf_register(ctx, 1, x, n, cm->abf);
    return MN_OK;
}
static void mn__cm_bf16_unpin(mn_cuda_model* cm) {
    if (cm->ctx->bf_img[1] == cm->abf) mn__bf_register(cm->ctx, 1, NULL, 0, NULL);
}
// at the end of a forward or backward (error or not): the context no longer points into this model
static void mn__cm_bf16_end(mn_cuda_model* cm) {
    mn_cuda_ctx* ctx = cm->ctx;
    if (!ctx) return;
    if (cm->pbf && ctx->bf_img[0] == cm->pbf) mn__bf_register(ctx, 0, NULL, 0, NULL);
    if (cm->abf && ctx->bf_img[1] == cm->abf) mn__bf_register(ctx, 1, NULL, 0, NULL);
}

// ---- lifecycle ----
// Checks that the CPU model is one these kernels run, then allocates the device blocks and uploads
// the parameters (and, when the CPU model has them, the AdamW moments).
static int mn__cm_setup(mn_cuda_model* cm) {
    mn_cuda_ctx* ctx = cm->ctx;
    mn_model* h = MN__HOST(cm);
    const mn_config* c = &h->cfg;
    size_t P = h->n_params;
    cm->cfg = h->cfg; cm->tensors = h->tensors; cm->n_tensors = h->n_tensors; cm->n_params = P;
    cm->n_trainable = h->n_trainable;
    {   // each layer's mixer: entry l % count of the pattern, as mn__parse_pattern in mesanet.h
        int ids[MN_MAX_LAYERS];
        size_t n = 0;
        const char* p = c->pattern;
        while (1) {
            const char* e = p;
            while (*e && *e != ',') e++;
            const char* s = p; size_t len = (size_t)(e - p);
            while (len && *s == ' ') { s++; len--; }
            while (len && s[len - 1] == ' ') len--;
            int id = -1;
            for (size_t m = 0; m < MN__CM_N_MIXERS && id < 0; m++)
                if (strlen(mn__cm_mixers[m].name) == len && memcmp(mn__cm_mixers[m].name, s, len) == 0) id = (int)m;
            if (id < 0 || n >= MN_MAX_LAYERS) {
                char what[64];
                snprintf(what, sizeof what, "no GPU kernels for the mixer \"%.*s\" yet", (int)(len < 32 ? len : 32), s);
                return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", what, __LINE__);
            }
            MN__TRY(mn__cm_mixers[id].check(ctx, c));
            ids[n++] = id;
            if (!*e) break;
            p = e + 1;
        }
        for (size_t l = 0; l < c->n_layer; l++) cm->mixer[l] = (unsigned char)ids[l % n];
    }
    for (size_t l = 0; l < c->n_layer; l++) {   // the table is the one the slots above assume
        const mn__cm_mixer* mx = MN__CM_MIXER(cm, l);
        size_t next = l + 1 < c->n_layer ? h->layer_first[l + 1] : h->norm_idx;
        if (next - h->layer_first[l] != (size_t)(MN__CP_MIX + mx->n_tensors))
            return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model", "unexpected parameter table (tensors per layer)",
                            __LINE__);
        for (int j = 0; j < MN__CP_MIX + mx->n_tensors; j++) {
            char want[128];
            snprintf(want, sizeof want, "model.layers.%u.%s", (unsigned)l,
                     j < MN__CP_MIX ? mn__cp_block[j] : mx->tensors[j - MN__CP_MIX]);
            if (strcmp(h->tensors[h->layer_first[l] + j].name, want) != 0)
                return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_model: unexpected parameter table",
                                h->tensors[h->layer_first[l] + j].name, __LINE__);
        }
    }
    MN__TRY(mn_cuda_malloc(ctx, (void**)&cm->params, 4 * P * sizeof(float)));
    cm->grads = cm->params + P; cm->opt_m = cm->grads + P; cm->opt_v = cm->opt_m + P;
    MN__TRY(mn_cuda_malloc(ctx, (void**)&cm->red, 8 * sizeof(double)));
    MN__CU(cudaMemsetAsync(cm->grads, 0, 3 * P * sizeof(float), MN__STREAM));
    MN__TRY(mn_cuda_upload(ctx, cm->params, h->params, P * sizeof(float)));
    if (h->opt_m) {
        MN__TRY(mn_cuda_upload(ctx, cm->opt_m, h->opt_m, P * sizeof(float)));
        MN__TRY(mn_cuda_upload(ctx, cm->opt_v, h->opt_v, P * sizeof(float)));
        cm->opt_step = h->opt_step;
    }
    return MN_OK;
}
int mn_cuda_model_init(mn_cuda_model* cm, mn_cuda_ctx* ctx, const mn_config* cfg) {
    int err;
    memset(cm, 0, sizeof *cm);
    cm->ctx = ctx;
    mn_model* h = (mn_model*)calloc(1, sizeof(mn_model));
    if (!h) return mn__fail(ctx, MN_ERR_ALLOC, "mn_cuda_model_init", "out of host memory", __LINE__);
    if ((err = mn_cuda_host_model_init(h, cfg)) != MN_OK) {
        free(h);
        return mn__fail(ctx, err, "mn_cuda_model_init", "mn_model_init failed (config)", __LINE__);
    }
    cm->host = h;
    if ((err = mn__cm_setup(cm)) != MN_OK) { mn_cuda_model_free(cm); cm->ctx = ctx; }
    return err;
}
int mn_cuda_model_load(mn_cuda_model* cm, mn_cuda_ctx* ctx, const char* dir, mn_train_meta* meta) {
    int err;
    memset(cm, 0, sizeof *cm);
    cm->ctx = ctx;
    mn_model* h = (mn_model*)calloc(1, sizeof(mn_model));
    if (!h) return mn__fail(ctx, MN_ERR_ALLOC, "mn_cuda_model_load", "out of host memory", __LINE__);
    if ((err = mn_cuda_host_load(h, dir, meta)) != MN_OK) {
        free(h);
        return mn__fail(ctx, err, "mn_cuda_model_load: mn_load failed", dir, __LINE__);
    }
    cm->host = h;
    if ((err = mn__cm_setup(cm)) != MN_OK) { mn_cuda_model_free(cm); cm->ctx = ctx; }
    return err;
}
void mn_cuda_model_free(mn_cuda_model* cm) {
    mn__cm_bf16_end(cm);
    mn_cuda_dfree(cm->pbf); mn_cuda_dfree(cm->abf);
    mn_cuda_dfree(cm->params); mn_cuda_dfree(cm->red); mn_cuda_dfree(cm->acts); mn_cuda_dfree(cm->dacts);
    mn_cuda_dfree(cm->work); mn_cuda_dfree(cm->mesa_keep); mn_cuda_dfree(cm->tokens);
    if (cm->host) { mn_cuda_host_model_free(MN__HOST(cm)); free(cm->host); }
    memset(cm, 0, sizeof *cm);
}
int mn_cuda_model_save(mn_cuda_model* cm, const char* dir, const mn_train_meta* meta) {
    mn_cuda_ctx* ctx = cm->ctx;
    mn_model* h = MN__HOST(cm);
    size_t P = cm->n_params;
    float* mv = NULL;
    int err;
    MN__TRY(mn_cuda_download(ctx, h->params, cm->params, P * sizeof(float)));
    if (meta) {
        if (cm->opt_step == 0) return mn__fail(ctx, MN_ERR_STATE, "mn_cuda_model_save",
                                               "no optimizer state to save (take an AdamW step first)", __LINE__);
        if (!(mv = (float*)malloc(2 * P * sizeof(float)))) return mn__fail(ctx, MN_ERR_ALLOC, "mn_cuda_model_save",
                                                                           "out of host memory", __LINE__);
        // opt_m, opt_v adjacent
        if ((err = mn_cuda_download(ctx, mv, cm->opt_m, 2 * P * sizeof(float))) != MN_OK) { free(mv); return err; }
    }
    err = mn_cuda_host_save(h, dir, meta, mv, cm->opt_step);
    free(mv);
    if (err != MN_OK) return mn__fail(ctx, err, "mn_cuda_model_save: mn_save failed", dir, __LINE__);
    return MN_OK;
}
static float* mn__cm_block(mn_cuda_model* cm, int which) {
    return which == MN_CUDA_PARAMS ? cm->params : which == MN_CUDA_GRADS ? cm->grads
         : which == MN_CUDA_OPT_M ? cm->opt_m : which == MN_CUDA_OPT_V ? cm->opt_v : NULL;
}
int mn_cuda_model_get(mn_cuda_model* cm, int which, float* host_dst) {
    float* b = mn__cm_block(cm, which);
    if (!b) return mn__fail(cm->ctx, MN_ERR_CONFIG, "mn_cuda_model_get",
                            "which must be MN_CUDA_PARAMS, _GRADS, _OPT_M or _OPT_V", __LINE__);
    return mn_cuda_download(cm->ctx, host_dst, b, cm->n_params * sizeof(float));
}
int mn_cuda_model_set(mn_cuda_model* cm, int which, const float* host_src) {
    float* b = mn__cm_block(cm, which);
    if (!b) return mn__fail(cm->ctx, MN_ERR_CONFIG, "mn_cuda_model_set",
                            "which must be MN_CUDA_PARAMS, _GRADS, _OPT_M or _OPT_V", __LINE__);
    if (which == MN_CUDA_PARAMS) cm->params_version++;     // the bf16 image is remade at the next use
    return mn_cuda_upload(cm->ctx, b, host_src, cm->n_params * sizeof(float));
}
size_t mn_cuda_model_flops_per_token(const mn_cuda_model* cm, size_t T) {
    return mn_cuda_host_flops_per_token((const mn_model*)cm->host, T);
}
size_t mn_cuda_model_device_bytes(const mn_cuda_model* cm) {
    return (4 * cm->n_params + cm->cap_acts + cm->cap_dacts + cm->cap_work + cm->cap_mesa_keep) * sizeof(float) +
           2 * cm->cap_tok * sizeof(int) + 8 * sizeof(double) +
           ((cm->pbf ? cm->n_params : 0) + cm->cap_abf) * sizeof(__nv_bfloat16);
}
const float* mn_cuda_model_logits(const mn_cuda_model* cm) {
    mn__cm_acts a;
    if (!cm->acts || !cm->B) return NULL;
    mn__cm_layout_acts(cm, cm->B, cm->T, cm->acts, &a);
    return a.logits;
}

// Grows (never shrinks) the activation, gradient, workspace and token buffers to (B,T), and under
// ctx->mesa_keep_states the Mesa layers' kept states.
int mn_cuda_model_reserve(mn_cuda_model* cm, size_t B, size_t T) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    mn__cm_acts a; mn__cm_dacts d;
    size_t na = mn__cm_layout_acts(cm, B, T, NULL, &a), nd = mn__cm_layout_dacts(cm, B, T, NULL, &d);
    size_t nw = mn__cm_work(cm, B, T), nt = B * T;
    cm->B = 0; cm->T = 0; cm->have_loss = 0;
#define MN__GROW(ptr, cap, need, elem) do { if ((need) > (cap)) { mn_cuda_dfree(ptr); (ptr) = NULL; (cap) = 0; \
        MN__TRY(mn_cuda_malloc(ctx, (void**)&(ptr), (need) * (elem))); (cap) = (need); } } while (0)
    MN__GROW(cm->acts, cm->cap_acts, na, sizeof(float));
    MN__GROW(cm->dacts, cm->cap_dacts, nd, sizeof(float));
    MN__GROW(cm->work, cm->cap_work, nw, sizeof(float));
    if (ctx->mesa_keep_states) {   // every Mesa layer's kept states (mn__cm_mesa_keep)
        size_t nm = 0, l, ks = mn_cuda_mesa_keep_size(B, T, c->n_head, c->head_dim, c->head_dim);
        for (l = 0; l < c->n_layer; l++) nm += !strcmp(MN__CM_MIXER(cm, l)->name, "mesa");
        MN__GROW(cm->mesa_keep, cm->cap_mesa_keep, nm * ks, sizeof(float));
    }
    if (nt > cm->cap_tok) {
        mn_cuda_dfree(cm->tokens); cm->tokens = cm->targets = NULL; cm->cap_tok = 0;
        MN__TRY(mn_cuda_malloc(ctx, (void**)&cm->tokens, 2 * nt * sizeof(int)));
        cm->targets = cm->tokens + nt; cm->cap_tok = nt;
    }
#undef MN__GROW
    // NaN in every activation-gradient float (bytes 0xFF): the backward overwrites most of these
    // buffers instead of zeroing them (mn__cm_dacts), so a read before the first write shows up as
    // a NaN loss or gradient at once (test_cuda's model test), never as a silently wrong sum
    MN__CU(cudaMemsetAsync(cm->dacts, 0xFF, nd * sizeof(float), MN__STREAM));
    {   // the context's reduction scratch, for the largest column sum of a step (bias gradients of
        // the gate projections, the norms, the convs, the embedding), so no step allocates
        size_t N = B * T, C = c->d_model, H = c->n_head, Dh = c->head_dim, V = c->vocab_size, need = mn__col_tmp(N, H),
            k;
        if ((k = mn__col_tmp(N, C)) > need) need = k;
        if ((k = mn__col_tmp(N, H * Dh)) > need) need = k;   // GLA's gate bias
        if ((k = mn__col_tmp(N * H, Dh)) > need) need = k;
        if ((k = mn__conv_tmp(B, T, H * Dh, 4)) > need) need = k;
        if ((k = mn__emb_tmp(N, C, V)) > need) need = k;
        MN__TRY(mn__tmp(ctx, need, NULL));
    }
    if (ctx->math == MN_CUDA_MATH_BF16) {   // bf16 mode: the images and the operand scratch, up front
        size_t N = B * T, w = c->d_model, k, need;
        const size_t dims[] = { c->d_ff, c->n_head * c->head_dim, c->vocab_size };
        for (k = 0; k < 3; k++) if (dims[k] > w) w = dims[k];
        // a backward's largest: dout and inp (N rows of at most w) and a weight not registered (w x w)
        need = 2 * ((N * w + 63) / 64 * 64) + (w * w + 63) / 64 * 64;
        MN__TRY(mn__cm_bf16_alloc(cm, N * c->d_model));
        MN__TRY(mn__bf_scratch(ctx, need, NULL));
    }
    cm->B = B; cm->T = T;
    return MN_OK;
}

// ---- forward, backward, optimizer ----
static int mn__cm_forward(mn_cuda_model* cm, const int* tokens, const int* targets, size_t B, size_t T, float* loss) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab_size, L = c->n_layer, n_valid = 0;
    mn__cm_acts a; mn__cm_dacts d;
    mn_model* h = MN__HOST(cm);
    if (loss) *loss = 0.f;
    if (B == 0 || T == 0 || T > c->max_seq_len || N > ((size_t)1 << 31)) return mn__fail(ctx, MN_ERR_RANGE,
            "mn_cuda_model_forward", "needs 0 < T <= max_seq_len and 0 < B*T <= 2^31", __LINE__);
    for (size_t i = 0; i < N; i++) {
        if (tokens[i] < 0 || (size_t)tokens[i] >= V) return mn__fail(ctx, MN_ERR_RANGE, "mn_cuda_model_forward",
                                                                     "token id outside [0, V)", __LINE__);
        if (targets) {
            if (targets[i] < -1 || (targets[i] >= 0 && (size_t)targets[i] >= V)) return mn__fail(ctx, MN_ERR_RANGE,
                    "mn_cuda_model_forward", "target id outside [-1, V)", __LINE__);
            n_valid += targets[i] >= 0;
        }
    }
    MN__TRY(mn_cuda_model_reserve(cm, B, T));
    MN__TRY(mn__cm_bf16_begin(cm));
    mn__cm_layout_acts(cm, B, T, cm->acts, &a);
    mn__cm_layout_dacts(cm, B, T, cm->dacts, &d);
    MN__CU(cudaMemcpyAsync(cm->tokens, tokens, N * sizeof(int), cudaMemcpyHostToDevice, MN__STREAM));
    if (targets) MN__CU(cudaMemcpyAsync(cm->targets, targets, N * sizeof(int), cudaMemcpyHostToDevice, MN__STREAM));
    MN__TRY(mn_cuda_embedding_forward(ctx, a.res, cm->tokens, cm->params + cm->tensors[h->emb_idx].offset, N, C));
    for (size_t l = 0; l < L; l++) {
        const mn__cm_layer* A = &a.L[l];
        float *x = a.res + l * N * C, *y = a.res + (l + 1) * N * C;
        MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->xn1, A->rstd1, x, MN__PAR(cm, l, MN__CP_ATTN_NORM), N, C, c->norm_eps));
        MN__TRY(mn__cm_bf16_pin(cm, A->xn1, N * C));                               // bf16 mode: xn1's image
        MN__TRY(MN__CM_MIXER(cm, l)->forward(cm, l, A, &d, x, B, T));              // x2 = x + mixer(xn1)
        MN__TRY(mn_cuda_rmsnorm_forward(ctx, A->xn2, A->rstd2, A->x2, MN__PAR(cm, l, MN__CP_MLP_NORM), N, C,
                                        c->norm_eps));
        MN__TRY(mn__cm_bf16_pin(cm, A->xn2, N * C));
        MN__TRY(mn_cuda_matmul_forward(ctx, A->gate, A->xn2, MN__PAR(cm, l, MN__CP_GATE), NULL, N, C, F));
        MN__TRY(mn_cuda_matmul_forward(ctx, A->up, A->xn2, MN__PAR(cm, l, MN__CP_UP), NULL, N, C, F));
        mn__cm_bf16_unpin(cm);
        MN__TRY(mn_cuda_swiglu_forward(ctx, A->h, A->gate, A->up, N * F));
        MN__D2D(y, A->x2, N * C);
        MN__TRY(mn__cm_matmul_add(ctx, y, A->h, MN__PAR(cm, l, MN__CP_DOWN), N, F, C));   // y = x2 + mlp
    }
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, a.xf, a.rstdf, a.res + L * N * C, cm->params + cm->tensors[h->norm_idx].offset,
                                    N, C, c->norm_eps));
    MN__TRY(mn_cuda_matmul_forward(ctx, a.logits, a.xf, cm->params + cm->tensors[h->head_idx].offset, NULL, N, C, V));
    if (targets) {
        double sum = 0;
        MN__TRY(mn_cuda_crossentropy_forward(ctx, a.losses, a.logits, cm->targets, N, V, c->logit_softcap));
        MN__CU(cudaMemsetAsync(cm->red, 0, sizeof(double), MN__STREAM));
        mn__k_cm_loss_sum<<<mn__grid(ctx, N, 256), 256, 0, MN__STREAM>>>(cm->red, a.losses, cm->targets, N);
        MN__LAUNCHED();
        MN__TRY(mn_cuda_download(ctx, &sum, cm->red, sizeof sum));
        MN__TRY(mn_cuda_sync(ctx));
        sum = n_valid ? sum / (double)n_valid : 0.0;
        if (loss) *loss = (float)sum;
        if (!(sum == sum) || sum > 1e300 || sum < -1e300) return mn__fail(ctx, MN_ERR_NAN, "mn_cuda_model_forward",
                                                                          "loss is not finite", __LINE__);
        cm->n_valid = n_valid;
        cm->have_loss = 1;
    }
    return MN_OK;
}
int mn_cuda_model_forward(mn_cuda_model* cm, const int* tokens, const int* targets, size_t B, size_t T, float* loss) {
    int err = mn__cm_forward(cm, tokens, targets, B, T, loss);
    mn__cm_bf16_end(cm);
    return err;
}

int mn_cuda_model_zero_grad(mn_cuda_model* cm) {
    mn_cuda_ctx* ctx = cm->ctx;
    MN__CU(cudaMemsetAsync(cm->grads, 0, cm->n_params * sizeof(float), MN__STREAM));
    return MN_OK;
}

static int mn__cm_backward(mn_cuda_model* cm) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    size_t B = cm->B, T = cm->T, N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab_size, L = c->n_layer;
    mn__cm_acts a; mn__cm_dacts d;
    mn_model* h = MN__HOST(cm);
    int cur = 0;
    if (!cm->have_loss) return mn__fail(ctx, MN_ERR_STATE, "mn_cuda_model_backward",
                                        "needs a successful forward with targets first", __LINE__);
    MN__TRY(mn__cm_bf16_begin(cm));
    mn__cm_layout_acts(cm, B, T, cm->acts, &a);
    mn__cm_layout_dacts(cm, B, T, cm->dacts, &d);
    MN__CU(cudaMemsetAsync(d.dlogits, 0, N * V * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(d.dxf, 0, N * C * sizeof(float), MN__STREAM));
    MN__CU(cudaMemsetAsync(d.dres[cur], 0, N * C * sizeof(float), MN__STREAM));
    // loss = mean over valid rows: each valid row's loss has weight 1/n_valid
    const float wl = cm->n_valid ? (float)(1.0 / (double)cm->n_valid) : 0.f;
    mn__k_cm_dlosses<<<mn__grid(ctx, N, 256), 256, 0, MN__STREAM>>>(d.dlosses, cm->targets, N, wl);
    MN__LAUNCHED();
    MN__TRY(mn_cuda_crossentropy_backward(ctx, d.dlogits, d.dlosses, a.logits, cm->targets, N, V, c->logit_softcap));
    MN__TRY(mn_cuda_matmul_backward(ctx, d.dxf, cm->grads + cm->tensors[h->head_idx].offset, NULL, d.dlogits, a.xf,
                                    cm->params + cm->tensors[h->head_idx].offset, N, C, V));
    MN__TRY(mn_cuda_rmsnorm_backward(ctx, d.dres[cur], cm->grads + cm->tensors[h->norm_idx].offset, d.dxf, a.rstdf,
                                     a.res + L * N * C, cm->params + cm->tensors[h->norm_idx].offset, N, C));
    for (size_t l = L; l-- > 0;) {
        const mn__cm_layer* A = &a.L[l];
        float *dy = d.dres[cur], *dx = d.dres[cur ^ 1];
        // forward: y = x2 + down(h), h = swiglu(gate(xn2), up(xn2)), xn2 = norm(x2); dx2 = dy + ... (in place in dy)
        MN__TRY(mn__matmul_backward(ctx, d.dh, MN__GRD(cm, l, MN__CP_DOWN), NULL, dy, A->h, MN__PAR(cm, l, MN__CP_DOWN),
                                    N, F, C, 0));
        MN__TRY(mn__swiglu_backward(ctx, d.dgate, d.dup, d.dh, A->gate, A->up, N * F, 0));
        MN__TRY(mn__cm_bf16_pin(cm, A->xn2, N * C));                       // bf16 mode: xn2's image
        MN__TRY(mn__matmul_backward(ctx, d.dxn2, MN__GRD(cm, l, MN__CP_GATE), NULL, d.dgate, A->xn2,
                                    MN__PAR(cm, l, MN__CP_GATE), N, C, F, 0));
        MN__TRY(mn_cuda_matmul_backward(ctx, d.dxn2, MN__GRD(cm, l, MN__CP_UP), NULL, d.dup, A->xn2,
                                        MN__PAR(cm, l, MN__CP_UP), N, C, F));
        MN__TRY(mn_cuda_rmsnorm_backward(ctx, dy, MN__GRD(cm, l, MN__CP_MLP_NORM), d.dxn2, A->rstd2, A->x2,
                                         MN__PAR(cm, l, MN__CP_MLP_NORM), N, C));
        // forward: x2 = x + mixer(xn1), xn1 = norm(x): dx = dx2 + norm'(mixer'(dx2))
        MN__D2D(dx, dy, N * C);
        MN__TRY(mn__cm_bf16_pin(cm, A->xn1, N * C));
        MN__TRY(MN__CM_MIXER(cm, l)->backward(cm, l, A, &d, d.dxn1, dy, B, T));
        mn__cm_bf16_unpin(cm);
        MN__TRY(mn_cuda_rmsnorm_backward(ctx, dx, MN__GRD(cm, l, MN__CP_ATTN_NORM), d.dxn1, A->rstd1, a.res + l * N * C,
                                         MN__PAR(cm, l, MN__CP_ATTN_NORM), N, C));
        cur ^= 1;
    }
    return mn_cuda_embedding_backward(ctx, cm->grads + cm->tensors[h->emb_idx].offset, d.dres[cur], cm->tokens, N, C,
                                      V);
}
int mn_cuda_model_backward(mn_cuda_model* cm) {
    int err = mn__cm_backward(cm);
    mn__cm_bf16_end(cm);
    return err;
}

int mn_cuda_model_clip_grad_norm(mn_cuda_model* cm, double max_norm, double* norm) {
    return mn_cuda_clip_grad_norm(cm->ctx, cm->grads, cm->n_params, max_norm, norm);
}

// One AdamW step over the whole model; runs of adjacent tensors (up to 16-float padding gaps) with the same decay flag
// go in one launch.
int mn_cuda_model_adamw_step(mn_cuda_model* cm, double lr, const mn_adamw* hp) {
    mn_adamw hh = { 0.9, 0.98, 1e-8, 0.1 };
    if (hp) {
        if (hp->beta1 != 0) hh.beta1 = hp->beta1;
        if (hp->beta2 != 0) hh.beta2 = hp->beta2;
        if (hp->eps != 0) hh.eps = hp->eps;
        hh.weight_decay = hp->weight_decay;     // 0 is a meaningful value here: no decay
    }
    cm->opt_step++;
    cm->params_version++;                      // bf16 mode: the next forward remakes the weights' image
    for (size_t i = 0; i < cm->n_tensors;) {
        size_t j = i + 1, off = cm->tensors[i].offset, n = cm->tensors[i].numel;
        int decay = cm->tensors[i].decay;
        // a next tensor may start up to 15 floats past this run's end (mesanet.h aligns every tensor
        // to 16 floats): the gap is padding, zero in params, grads and moments, and AdamW keeps zeros
        // zero (m = v = 0, step 0 / (0 + eps) = 0, decoupled decay scales 0), so it joins the launch
        while (j < cm->n_tensors && (cm->tensors[j].decay != 0) == (decay != 0) && cm->tensors[j].offset >= off + n &&
               cm->tensors[j].offset - (off + n) < 16) {
            n = cm->tensors[j].offset + cm->tensors[j].numel - off; j++;
        }
        MN__TRY(mn_cuda_adamw_update(cm->ctx, cm->params + off, cm->grads + off, cm->opt_m + off, cm->opt_v + off, n,
                                     lr, hh.beta1, hh.beta2, hh.eps, decay ? hh.weight_decay : 0.0, cm->opt_step));
        i = j;
    }
    return MN_OK;
}

// ---- decode (mn_state_init / mn_step / mn_state_free of mesanet.h) ----
// The backbone of mn_step on B sequences at once: embed, per layer RMSNorm -> the mixer's step hook
// (x += mixer) -> RMSNorm -> SwiGLU MLP (x += mlp), the final norm, the head.
// CG statistics (mn_state_cg_stats): after the layers, cg[0] += the sum of the step's iterations over the
// n = B*H systems of each Mesa layer and cg[1] += n per Mesa layer (the CPU adds per sequence its H heads'
// iterations and H, every token, also when nothing is solved). One launch per step for all Mesa layers (their
// iters pieces passed by value), one block, exact 64-bit integer sums: the order of the additions is moot.
typedef struct mn__cm_cg_list {
    const int* iters[MN_MAX_LAYERS];  // device (B,H) each: the Mesa layers' iters pieces
    unsigned n_layers;
} mn__cm_cg_list;
__global__ void mn__k_cm_cg_count(unsigned long long* cg, mn__cm_cg_list L, size_t n) {   // cg (2)
    __shared__ unsigned long long part[256];
    unsigned long long a = 0;
    for (unsigned j = 0; j < L.n_layers; j++)
        for (size_t i = threadIdx.x; i < n; i += blockDim.x) a += (unsigned long long)L.iters[j][i];
    part[threadIdx.x] = a;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h /= 2) {   // tree sum over the block (blockDim a power of 2)
        if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) { cg[0] += part[0]; cg[1] += (unsigned long long)n * L.n_layers; }
}
// Floats of the decode state of B sequences for the model's current cfg (*tmp: the per-sequence scratch). A state's
// size follows the cfg (a Mesa layer's ring exists for mesa_cg_warm 5 and 6 only): mn_cuda_model_step compares.
static size_t mn__cm_state_floats(const mn_cuda_model* cm, size_t B, size_t* tmp_out) {
    const mn_config* c = &cm->cfg;
    size_t total = 0, tmp = 0, C = c->d_model, F = c->d_ff, V = c->vocab_size;
    for (size_t l = 0; l < c->n_layer; l++) {
        const mn__cm_mixer* mx = MN__CM_MIXER(cm, l);
        size_t t = 0;
        total += MN__PAD(B * mx->state(c, &t));
        if (t > tmp) tmp = t;                  // the layers run one after the other: one scratch
    }
    total += MN__PAD(B * C) * 2 + MN__PAD(B) + 3 * MN__PAD(B * F) + MN__PAD(B * V) + MN__PAD(B * tmp) + MN__PAD(B);
    total += MN__PAD(4);                       // the CG totals: 2 x 64 bits
    *tmp_out = tmp;
    return total;
}
int mn_cuda_model_state_init(mn_cuda_model_state* s, mn_cuda_model* cm, size_t B) {
    const mn_config* c;
    size_t total = 0, off = 0, C, F, V, tmp = 0;
    if (!s) return mn__fail(cm ? cm->ctx : NULL, MN_ERR_STATE, "mn_cuda_model_state_init", "NULL state", __LINE__);
    memset(s, 0, sizeof *s);
    if (!cm || !cm->params) return mn__fail(cm ? cm->ctx : NULL, MN_ERR_STATE, "mn_cuda_model_state_init",
                                            "needs an initialised model", __LINE__);
    c = &cm->cfg; C = c->d_model; F = c->d_ff; V = c->vocab_size;
    if (B == 0 || B > ((size_t)1 << 20))
        return mn__fail(cm->ctx, MN_ERR_CONFIG, "mn_cuda_model_state_init", "B must be in [1, 2^20]", __LINE__);
    total = mn__cm_state_floats(cm, B, &tmp);
    MN__TRY(mn_cuda_malloc(cm->ctx, (void**)&s->mem, total * sizeof(float)));
    s->bytes = total * sizeof(float);
    s->B = B; s->tmp_per_seq = tmp;
    for (size_t l = 0; l < c->n_layer; l++) {
        size_t t;
        s->layer[l] = s->mem + off; off += MN__PAD(B * MN__CM_MIXER(cm, l)->state(c, &t));
        if (MN__CM_MIXER(cm, l)->step == mn__cm_mesa_step) s->cg_iters[l] = mn__cm_mesa_iters(c, s->layer[l], B);
    }
    s->x = s->mem + off; off += MN__PAD(B * C);
    s->xn = s->mem + off; off += MN__PAD(B * C);
    s->rstd = s->mem + off; off += MN__PAD(B);
    s->gate = s->mem + off; off += MN__PAD(B * F);
    s->up = s->mem + off; off += MN__PAD(B * F);
    s->h = s->mem + off; off += MN__PAD(B * F);
    s->logits = s->mem + off; off += MN__PAD(B * V);
    s->tmp = s->mem + off; off += MN__PAD(B * tmp);
    s->tokens = (int*)(s->mem + off); off += MN__PAD(B);   // B ints in B floats' room
    s->cg = (unsigned long long*)(s->mem + off); off += MN__PAD(4);   // 256-byte aligned, as every piece
    return mn_cuda_model_state_reset(cm, s);
}
int mn_cuda_model_state_reset(mn_cuda_model* cm, mn_cuda_model_state* s) {
    mn_cuda_ctx* ctx = cm->ctx;
    if (!s || !s->mem) return mn__fail(ctx, MN_ERR_STATE, "mn_cuda_model_state_reset", "no state", __LINE__);
    MN__CU(cudaMemsetAsync(s->mem, 0, s->bytes, MN__STREAM));   // every recurrent state (and cg) starts at zero
    s->pos = 0;
    return MN_OK;
}
int mn_cuda_model_state_cg_stats(mn_cuda_model* cm, const mn_cuda_model_state* s, double* iters, double* solves) {
    mn_cuda_ctx* ctx = cm ? cm->ctx : NULL;
    unsigned long long h[2] = { 0, 0 };        // iterations, solves
    int mesa = 0;
    if (iters) *iters = 0;
    if (solves) *solves = 0;
    if (!cm || !cm->params || !s || !s->mem || !s->cg)
        return mn__fail(ctx, MN_ERR_STATE, "mn_cuda_model_state_cg_stats", "needs a model and a state from "
                        "mn_cuda_model_state_init", __LINE__);
    for (size_t l = 0; l < cm->cfg.n_layer; l++) mesa |= s->cg_iters[l] != NULL;
    if (mesa) MN__TRY(mn_cuda_download(ctx, h, s->cg, sizeof h));   // after the stream's steps (in order)
    if (iters) *iters = (double)h[0];          // exact below 2^53
    if (solves) *solves = (double)h[1];
    return MN_OK;
}
void mn_cuda_model_state_free(mn_cuda_model_state* s) {
    if (!s) return;
    if (s->graph_exec) cudaGraphExecDestroy((cudaGraphExec_t)s->graph_exec);
    free(s->graph_key);
    mn_cuda_dfree(s->mem);
    memset(s, 0, sizeof *s);
}
// One token of every sequence (mn_cuda_model_step's work after its checks, the tokens already in s->tokens):
// embedding, the layers, the head, the CG counts. Launches only (no host synchronisation), so that a CUDA graph
// can record it.
static int mn__cm_step_body(mn_cuda_model* cm, mn_cuda_model_state* s) {
    mn_cuda_ctx* ctx = cm->ctx;
    const mn_config* c = &cm->cfg;
    mn_model* h = MN__HOST(cm);
    size_t B = s->B, C = c->d_model, F = c->d_ff, V = c->vocab_size;
    mn__cm_cg_list cgl;
    cgl.n_layers = 0;
    MN__TRY(mn_cuda_embedding_forward(ctx, s->x, s->tokens, cm->params + cm->tensors[h->emb_idx].offset, B, C));
    for (size_t l = 0; l < c->n_layer; l++) {
        MN__TRY(mn_cuda_rmsnorm_forward(ctx, s->xn, s->rstd, s->x, MN__PAR(cm, l, MN__CP_ATTN_NORM), B, C,
                                        c->norm_eps));
        MN__TRY(MN__CM_MIXER(cm, l)->step(cm, l, s->x, s->layer[l], s->tmp, s->xn, B, s->pos));   // x += mixer
        if (s->cg_iters[l]) cgl.iters[cgl.n_layers++] = s->cg_iters[l];   // a Mesa layer: its counts, summed below
        MN__TRY(mn_cuda_rmsnorm_forward(ctx, s->xn, s->rstd, s->x, MN__PAR(cm, l, MN__CP_MLP_NORM), B, C, c->norm_eps));
        MN__TRY(mn_cuda_matmul_forward(ctx, s->gate, s->xn, MN__PAR(cm, l, MN__CP_GATE), NULL, B, C, F));
        MN__TRY(mn_cuda_matmul_forward(ctx, s->up, s->xn, MN__PAR(cm, l, MN__CP_UP), NULL, B, C, F));
        MN__TRY(mn_cuda_swiglu_forward(ctx, s->h, s->gate, s->up, B * F));
        MN__TRY(mn__cm_matmul_add(ctx, s->x, s->h, MN__PAR(cm, l, MN__CP_DOWN), B, F, C));   // x += mlp
    }
    MN__TRY(mn_cuda_rmsnorm_forward(ctx, s->xn, s->rstd, s->x, cm->params + cm->tensors[h->norm_idx].offset, B, C,
                                    c->norm_eps));
    MN__TRY(mn_cuda_matmul_forward(ctx, s->logits, s->xn, cm->params + cm->tensors[h->head_idx].offset, NULL, B, C, V));
    if (cgl.n_layers) {                        // the step's CG counts into the state's totals, on the device
        mn__k_cm_cg_count<<<1, 256, 0, MN__STREAM>>>(s->cg, cgl, B * c->n_head);
        MN__LAUNCHED();
    }
    return MN_OK;
}

// What a recorded step graph depends on besides the state's own buffers (which never move): the cfg (every
// option the hooks read), the math and kernel choices of the context, the buffers it grows on demand (a regrown
// one is freed: the graph would read freed memory), the weights, their version (an update re-records, so that
// bf16 mode's choice of image or conversion is made afresh) and the stream. Compared bytewise.
typedef struct mn__cm_gkey {
    mn_config cfg;
    const void* p[15];
    int iv[5];
    uint64_t ver[2];
} mn__cm_gkey;
static void mn__cm_gkey_fill(mn__cm_gkey* k, mn_cuda_model* cm) {
    const mn_cuda_ctx* ctx = cm->ctx;
    memset(k, 0, sizeof *k);
    memcpy(&k->cfg, &cm->cfg, sizeof k->cfg);
    const void* p[15] = { cm->params, cm->pbf, ctx->stream, ctx->cublas, ctx->scratch, ctx->tmp, ctx->bf_tmp,
                          ctx->bf_src[0], ctx->bf_src[1], ctx->bf_src[2], ctx->bf_src[3], ctx->bf_img[0],
                          ctx->bf_img[1], ctx->bf_img[2], ctx->bf_img[3] };
    memcpy(k->p, p, sizeof p);
    k->iv[0] = ctx->math; k->iv[1] = ctx->mesa_scan; k->iv[2] = ctx->mesa_cg; k->iv[3] = ctx->gla_blocks;
    k->iv[4] = ctx->device;
    k->ver[0] = cm->params_version; k->ver[1] = cm->pbf_version;   // bf16 mode: which weights' image is current
}
// records mn__cm_step_body as a graph (nothing runs: the state is unchanged if this fails). The capture needs
// a stream of its own (the legacy default stream cannot be captured); the graph is launched on ctx's stream.
static int mn__cm_step_capture(mn_cuda_model* cm, mn_cuda_model_state* s, const mn__cm_gkey* key) {
    mn_cuda_ctx* ctx = cm->ctx;
    void* saved = ctx->stream;
    cudaStream_t cs;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (!s->graph_key && !(s->graph_key = malloc(sizeof(mn__cm_gkey))))
        return mn__fail(ctx, MN_ERR_ALLOC, "mn_cuda_model_step", "out of host memory (graph key)", __LINE__);
    MN__CU(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    ctx->stream = (void*)cs;
    cublasSetStream((cublasHandle_t)ctx->cublas, cs);
    cudaError_t e = cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed);
    int err = e == cudaSuccess ? mn__cm_step_body(cm, s)
                               : mn__fail(ctx, MN_ERR_CUDA, "cudaStreamBeginCapture", cudaGetErrorString(e), __LINE__);
    if (e == cudaSuccess) {
        cudaError_t e2 = cudaStreamEndCapture(cs, &g);
        if (err == MN_OK && e2 != cudaSuccess)
            err = mn__fail(ctx, MN_ERR_CUDA, "cudaStreamEndCapture", cudaGetErrorString(e2), __LINE__);
    }
    if (err == MN_OK && (e = cudaGraphInstantiate(&ge, g, 0)) != cudaSuccess)
        err = mn__fail(ctx, MN_ERR_CUDA, "cudaGraphInstantiate", cudaGetErrorString(e), __LINE__);
    if (g) cudaGraphDestroy(g);
    ctx->stream = saved;
    cublasSetStream((cublasHandle_t)ctx->cublas, (cudaStream_t)saved);
    cudaStreamDestroy(cs);
    if (err != MN_OK) { cudaGetLastError(); return err; }   // a failed capture leaves no error behind
    s->graph_exec = (void*)ge;
    memcpy(s->graph_key, key, sizeof *key);
    s->graph_captures++;
    return MN_OK;
}
static int mn__cm_has_attn(mn_cuda_model* cm) {
    for (size_t l = 0; l < cm->cfg.n_layer; l++)
        if (MN__CM_MIXER(cm, l)->step == mn__cm_attn_step) return 1;
    return 0;
}

int mn_cuda_model_step(mn_cuda_model* cm, mn_cuda_model_state* s, const int* tokens, float* logits) {
    mn_cuda_ctx* ctx = cm ? cm->ctx : NULL;
    if (!cm || !cm->params || !s || !s->mem || s->B == 0 || !tokens)
        return mn__fail(ctx, MN_ERR_STATE, "mn_cuda_model_step", "needs a model, a state from mn_cuda_model_state_init "
                        "and tokens", __LINE__);
    const mn_config* c = &cm->cfg;
    size_t B = s->B, V = c->vocab_size;
    {   // a state made for another cfg (mesa_cg_warm 5 / 6 add the Woodbury ring) would be read out of bounds
        size_t tmp = 0;
        if (s->bytes != mn__cm_state_floats(cm, B, &tmp) * sizeof(float) || tmp != s->tmp_per_seq)
            return mn__fail(ctx, MN_ERR_STATE, "mn_cuda_model_step", "the state was made for another cfg (e.g. "
                            "mesa_cg_warm changed between 0-1, 2-4, 5 and 6): init it again", __LINE__);
    }
    for (size_t n = 0; n < B; n++)
        if (tokens[n] < 0 || (size_t)tokens[n] >= V)
            return mn__fail(ctx, MN_ERR_RANGE, "mn_cuda_model_step", "token id outside [0, V)", __LINE__);
    const int attn = mn__cm_has_attn(cm);   // checked before any layer runs, so a refusal changes nothing
    if (attn && s->pos >= c->max_seq_len)
        return mn__fail(ctx, MN_ERR_RANGE, "mn_cuda_model_step", "position reaches max_seq_len (attention KV "
                        "cache full)", __LINE__);
    MN__CU(cudaMemcpyAsync(s->tokens, tokens, B * sizeof(int), cudaMemcpyHostToDevice, MN__STREAM));
    int replay = s->graph == 1 && s->pos > 0 && !attn;
    if (replay) {   // replay the recorded step (record it first)
        mn__cm_gkey key;
        mn__cm_gkey_fill(&key, cm);
        if (s->graph_exec && memcmp(&key, s->graph_key, sizeof key)) {   // recorded for other buffers or options
            cudaGraphExecDestroy((cudaGraphExec_t)s->graph_exec);
            s->graph_exec = NULL;
        }
        if (!s->graph_exec && mn__cm_step_capture(cm, s, &key) != MN_OK) {
            s->graph = -1;   // the recording failed (ctx->msg says why; nothing ran): plain steps from now on
            replay = 0;
        }
    }
    if (replay) {
        MN__CU(cudaGraphLaunch((cudaGraphExec_t)s->graph_exec, MN__STREAM));
        s->graph_steps++;
    } else MN__TRY(mn__cm_step_body(cm, s));
    if (logits) MN__TRY(mn_cuda_download(ctx, logits, s->logits, B * V * sizeof(float)));
    MN__TRY(mn_cuda_sync(ctx));   // a kernel fault of this step is reported by this step
    s->pos++;
    return MN_OK;
}
