/* mesanet_cuda.h - optional CUDA translation unit for mesanet.h (same model, same op contracts)

   WHAT THIS IS
     GPU versions of mesanet.h's ops for an NVIDIA Hopper GPU (built for sm_90a: the Mesa kernels
     use Hopper's warpgroup MMA, wgmma, and run on H100/H200 only). Every launcher
     mirrors the CPU op of the same name in mesanet.h: `mn_cuda_<op>` takes a context first, then
     exactly the CPU arguments, with every tensor pointer a DEVICE pointer to float. Backward ops
     accumulate (+=) into their gradients, as on the CPU. Compile cuda/mesanet_cuda.cu once with
     nvcc (`make cuda`), include this header from C or C++, link with -lcublas -lcudart.
     On top of the ops, mn_cuda_model (end of this header) is the whole model of mesanet.h for
     the mixers mesa, attn, swa, linattn, sgla and gla (hybrids too): forward with loss, backward, clip, AdamW,
     checkpoints in the CPU build's format;
     it needs cuda/mesanet_cuda_host.c linked too (build/mesanet_cuda_host.o).

   ERRORS
     Every function that can fail returns MN_OK (0) or a negative code: the MN_ERR_* codes of
     mesanet.h (MN_ERR_CONFIG for a shape these kernels do not support) or MN_ERR_CUDA /
     MN_ERR_CUBLAS below; ctx->msg holds one line saying why (also written to MN_CUDA_LOG, stderr
     by default). Launches are asynchronous: a launcher returns the launch status, and a fault
     inside a kernel shows up at the next mn_cuda_sync / download. Nothing here calls exit().

   MEMORY
     The caller owns every device buffer (mn_cuda_malloc / mn_cuda_dfree or plain cudaMalloc).
     Ops never allocate, with one exception: the context's scratch ctx->tmp for the partial sums of
     the deterministic column reductions (bias, RMSNorm, short-conv and embedding gradients), grown
     on first need (mn_cuda_model_reserve sizes it up front, so a training step never allocates).
     The Mesa op takes a workspace of mn_cuda_mesa_work_size floats. The context holds the cuBLAS
     handle, the stream (NULL: the default stream) and 64 bytes of device scratch for reductions
     (the gradient norm).

   PRECISION (which stage uses what, and why)
     - Elementwise, norm, loss and optimizer kernels: fp32 storage, fp32 arithmetic; row sums of
       squares and the AdamW update in fp32/fp64 as the CPU op does (double where the CPU op uses
       double and it costs nothing: AdamW, the gradient norm). Memory-bound, so precision is free.
     - Projections (mn_cuda_matmul_*) go through cuBLAS in fp32 (ctx->math = MN_CUDA_MATH_FP32,
       the default: results agree with the CPU to float rounding) or TF32 tensor cores
       (MN_CUDA_MATH_TF32: inputs rounded to 10 mantissa bits, ~3e-4 relative, 7x the rate on an
       H200); so do the Mesa backward's per-chunk products on the mma.sync path (below).
     - Mixed precision (ctx->math = MN_CUDA_MATH_BF16, for training): the projections (mn_cuda_matmul_*,
       so every Linear of the model: the mixers' q/k/v/o, the MLP, the logits) multiply bf16 operands
       on the tensor cores with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F) into fp32 outputs
       and fp32 gradients (weight gradients accumulate in fp32, beta = 1); bf16 keeps fp32's exponent
       range, so no loss scaling is needed; its 8 significant bits round each operand by up to 2^-8
       relative (a product's expected error ~2.3e-3 relative RMS, bound 8e-3 in test_cuda). The parameters,
       AdamW's moments and every checkpoint stay fp32 (master weights): the model makes a bf16 image of
       its parameter block once per update (mn_cuda_model's params_version) and of each layer's normed
       inputs (xn1, xn2) once per pass, shared by the projections reading them; any other operand is
       converted where it enters the product (a conversion kernel into the context's scratch). A projection
       whose input width IC or output row stride is not a multiple of 8 (the Mesa gates' N x H) runs in
       TF32; Mamba-2's in_proj (2,826 wide at the anchor) writes rows padded to a multiple of 8, so it is bf16.
       Everything else runs as with MN_CUDA_MATH_TF32: the norms, losses and optimizer in fp32, the mixer ops
       with their fp32-accurate states, their cuBLAS products (mn__gemm) and the GLA op in TF32, the
       products that must stay fp32-class (the GLA path of Mamba-2 and mLSTM, the Mesa scan) in 3xTF32.
     - Mesa states H_n, S_n and their gradients: fp32 in memory (fla keeps them in fp16/bf16; these
       states sum thousands of decaying rank-one terms and CG then inverts H_n + diag lambda, so their
       rounding error enters every solve, and fp32 keeps it near 1e-7). The chunk scan's products
       run on the tensor cores in "3xTF32" (ctx->mesa_scan = MN_CUDA_SCAN_TF32X3, the default): each
       fp32 operand is split into a TF32 head and a TF32 tail, and head*head + head*tail + tail*head
       is accumulated in fp32, which keeps fp32-level accuracy (~1e-7 relative per product, the
       tail*tail term ~2^-22 being dropped); MN_CUDA_SCAN_FFMA is the plain fp32-FMA scan;
       MN_CUDA_SCAN_TF32 the plain TF32 one (states ~3e-4 relative, a third of the products: the
       fast setting, enough where the states only feed fp16 products, as on the wgmma path).
     - Attention (mn_cuda_attention_*): the products on the fp16 tensor cores (mma.sync, fp32
       accumulation), the online softmax, its rescaling and lse in fp32. Every 64-row tile of q, k,
       v (and dout) of a head is stored in fp16 times the power of two that brings its largest entry
       to <= 1, so no input or gradient over- or underflows fp16 whatever its scale (a loss's 1e-5
       gradients included); the factors come back exactly in fp32. Against float64: outputs ~6e-4
       relative RMS, lse ~2e-4, gradients ~1e-3 (test_cuda). The decode step is fp32 throughout.
     - GLA family (mn_cuda_gla_*: linear attention, simple GLA, GLA): every product on the tensor cores
       (mma.sync m16n8k8, fp32 accumulation) in 3xTF32 with ctx->math = MN_CUDA_MATH_FP32 (each fp32
       operand split into a TF32 head and tail: fp32-level results, ~1e-6 relative) or plain TF32 with
       MN_CUDA_MATH_TF32 (~5e-4); chunk states, gates, decays and the GLA's diagonal 16 x 16 blocks in
       fp32. The decode step is fp32 throughout. Mamba-2's SSD runs this op in 3xTF32 whatever ctx->math
       unless ctx->ssd_tf32 (then in ctx->math, the gate gradient from chunk-local sums, ctx->gla_dg).
     - DeltaNet / GDN chunkwise form: batched cuBLAS products following ctx->math; the chunk-to-chunk chain
       on the tensor cores in 3xTF32 (~22 bits; ctx->delta_chain = MN_CUDA_CHAIN_FMA: fp32 FMA).
     - Mesa decode step (mn_cuda_mesa_step): fp32 throughout (states, CG, read-out), like fla's
       decode kernel; one thread block per (sequence, head), the K x K state in registers.
     - The Mesa CG solve (the op's hot loop, n_cg x (4CK + 2K^2) flops per token and head) and the
       forward's output stage: fp16 tensor cores, fp32 accumulation, for the three products of
       A(P), like fla's Triton kernel (which gets Hopper's wgmma from Triton): with Dk = 128 by
       wgmma (ctx->mesa_cg = MN_CUDA_CG_WGMMA, the default; B operands read by the tensor cores
       straight from shared memory, the C x C product fed to the next as register fragments),
       otherwise (and with MN_CUDA_CG_MMA) by mma.sync m16n8k16; same arithmetic, same results to
       fp32 rounding. x, r, p, alpha, delta and the lambda term stay fp32 in registers. Unlike
       fla, every row of P (and of X) is scaled by a power of two near 1/||p|| before the fp16
       cast, and H_n, S_n and the chunk's v by one that brings their largest entry to <= 1, so
       the shrinking CG directions never underflow fp16 and large states never overflow it; the
       scales are exact and are undone in fp32.
     - The Mesa backward with Dk = Dv = 128 on the wgmma path: two fused kernels (B2 before the
       adjoint solve,
           B5 after it: the passes of mesanet_cuda.cu's >>cuda_mesa) do all ~14 per-chunk products on the fp16 tensor
       cores, each operand times its own power-of-two scale, everything else in fp32 (gradients
       ~5e-4 relative RMS against the float64 CPU, fla's test bar 0.008); nothing is packed and
       no per-chunk temporary goes through memory. The mma.sync path keeps the cuBLAS products
       (fp32 or TF32 by ctx->math) and row kernels, ~2e-4.

   SUPPORTED SHAPES (Mesa): chunk forward/backward: Dk == Dv in {64, 128}, chunk 64, solver CG with
     x0 = 0 (opts.jacobi = 0), fixed count or relative tolerance, fla's epsilons or textbook CG,
     cg_iters < 0 (no solve). Decode step: Dk in {64, 128}, Dv a multiple of 4 with Dk*Dv <= 16384,
     CG from x0 = 0 or the Jacobi guess (or the windowed-Woodbury start: mn_cuda_mesa_step_woodbury), every
     other option as the CPU step. Attention: Dk == Dv in
     {64, 128}, B*H <= 65535, the (B,T,H,D) tensors 16-byte aligned; any T and window; its decode
     step: Dk == Dv in {64, 128}. GLA family: Dk == Dv in {64, 128}, chunk 64, G in {0, 1, Dk}, B*H <=
     65535, the (B,T,H,D) inputs 16-byte aligned; its decode step: any Dk, Dv <= 1024. RoPE: D even.
     Anything else returns MN_ERR_CONFIG. Other ops: any size.

   NOTATION as mesanet.h: B batch, T time, C d_model (or channels), H heads, Dk/Dv head dims,
   V vocabulary, N rows. Shapes in the comments are row-major, fla's [B,T,H,D] layout.
*/
#ifndef MESANET_CUDA_H
#define MESANET_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "mesanet.h"   // declarations only: MN_OK, MN_ERR_*, mn_mesa_opts

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MN_ERR_CUDA = -20,    // a CUDA runtime call or kernel launch failed (ctx->msg says which)
    MN_ERR_CUBLAS = -21   // a cuBLAS call failed
};
// projections: exact fp32, TF32, or bf16 operands with fp32 accumulation (mixed precision; see PRECISION)
enum { MN_CUDA_MATH_FP32 = 0, MN_CUDA_MATH_TF32 = 1, MN_CUDA_MATH_BF16 = 2 };
// Mesa state scan: 3xTF32 or TF32 tensor cores, or fp32 FMA
enum { MN_CUDA_SCAN_TF32X3 = 0, MN_CUDA_SCAN_FFMA = 1, MN_CUDA_SCAN_TF32 = 2 };
enum { MN_CUDA_CG_WGMMA = 0, MN_CUDA_CG_MMA = 1 };      // Mesa CG products (Dk = 128): Hopper wgmma or mma.sync
// DeltaNet / Gated DeltaNet forms: the chunkwise one where it applies (default), or always the recurrent one
enum { MN_CUDA_DELTA_AUTO = 0, MN_CUDA_DELTA_RECURRENT = 1, MN_CUDA_DELTA_RECOMPUTE = 2 };
// simple GLA's (G = 1) gate gradient: a running sum over the rest of the sequence, or sums inside each chunk
enum { MN_CUDA_GLA_DG_SUM = 0, MN_CUDA_GLA_DG_LOCAL = 1 };
// the chunkwise DeltaNet / GDN form's chunk-to-chunk chain: tensor cores (3xTF32) where the shapes allow, or fp32 FMA
enum { MN_CUDA_CHAIN_TC = 0, MN_CUDA_CHAIN_FMA = 1 };

typedef struct mn_cuda_ctx {
    int device;           // CUDA device ordinal
    void* stream;         // cudaStream_t all launches go to (NULL = default stream)
    void* cublas;         // cublasHandle_t, bound to stream
    int math;             // MN_CUDA_MATH_FP32 (default), MN_CUDA_MATH_TF32 or MN_CUDA_MATH_BF16
    // MN_CUDA_SCAN_TF32X3 (default) or MN_CUDA_SCAN_FFMA (both fp32-accurate), MN_CUDA_SCAN_TF32 (faster, ~3e-4)
    int mesa_scan;
    int mesa_cg;          // MN_CUDA_CG_WGMMA (default; Hopper, sm_90a: wgmma CG, fused fp16 backward) or
                          // MN_CUDA_CG_MMA (mma.sync CG, cuBLAS backward); Dk = 64 always takes the latter
    int mesa_keep_states; // 1: a chunk backward given the workspace its forward used, with the same
                          // input pointers and shapes, reuses the chunk-start states the forward left
                          // there instead of recomputing them (the contents of k, v, g, beta and the
                          // initial states must not change in between, and no call of another op may
                          // use that workspace in between: only Mesa calls move its stamp), and
                          // mn_cuda_model's Mesa layers keep each layer's states in blocks of their own
                          // (mn_cuda_mesa_forward_keep); 0 (default): always recompute
    uint64_t mesa_stamp[16][2]; // (internal) workspace -> inputs of the forward whose states it holds
    int gla_blocks;       // GLA (G = Dk) intra-chunk scores: 0 (default) one product per chunk while the chunk's
                          // cumulative gates stay within +-40 (else by 16-row blocks); 1: always by blocks
    int gla_dg;           // G = 1: MN_CUDA_GLA_DG_SUM (default) dg_t = sum_{s>=t} (q_s.dq_s - k_s.dk_s), a sum over
                          // the rest of the sequence whose terms cancel; MN_CUDA_GLA_DG_LOCAL the same gradient
                          // from sums inside each chunk (its products' TF32 error does not grow with T)
    int ssd_tf32;         // Mamba-2's chunkwise SSD: 0 (default) in 3xTF32 whatever ctx->math; 1 in ctx->math with
                          // the local gate gradient (faster; not yet the default: see cuda/results.md)
    int gla_recompute;    // 0 (default): the model's linattn, sgla, gla and Mamba-2 layers keep the GLA op's chunk
                          // states, scores and cumulative gates between the passes (mn_cuda_gla_forward_keep);
                          // 1: their backward recomputes them (less memory, more time; the same bits)
    int delta_form;       // MN_CUDA_DELTA_AUTO (default): mn_cuda_delta_rule_forward / _backward (and the model's
                          // DeltaNet and GDN layers) take the chunkwise form where it applies; MN_CUDA_DELTA_RECURRENT:
                          // the recurrent one always (one launch a pass, the state in registers: for short
                          // sequences in large batches, as the synthetic tasks train, it may be the faster);
                          // MN_CUDA_DELTA_RECOMPUTE: as AUTO, but the model's layers do not keep the chunkwise
                          // form's intermediates (mn_cuda_delta_rule_forward_keep): their backward recomputes
                          // them (less memory, more time; AUTO keeps them)
    int delta_chain;      // MN_CUDA_CHAIN_TC (default): the chain on the tensor cores in 3xTF32 (fp32-level) where
                          // Dk and the chunk are multiples of 16 and Dv of 32, else the FMA kernel;
                          // MN_CUDA_CHAIN_FMA: the fp32 FMA kernel always (the reference the tests compare with)
    int sm_count;         // multiprocessors of the device
    size_t smem_optin;    // largest dynamic shared memory a block may opt in to (bytes)
    double* scratch;      // (8) device scratch for reductions
    float* tmp;           // (tmp_cap) device scratch of the deterministic column sums, grown on first need
    size_t tmp_cap;
    // (internal, bf16 mode) fp32 arrays that have a current bf16 image: bf_src[i] (bf_n[i] floats) is
    // read by the projections from bf_img[i] (mn_cuda_model registers its weights and the layer's normed
    // input while it runs); bf_tmp (bf_tmp_cap bf16 values) receives every other operand's conversion
    const float* bf_src[4];
    size_t bf_n[4];
    void* bf_img[4];
    void* bf_tmp;
    size_t bf_tmp_cap;
    float* sk_tmp;        // (internal) partial products of the split-K batched products (mn__gemm), fixed size
    char msg[256];        // last error, one line
} mn_cuda_ctx;

// --- lifecycle and memory (all return MN_OK or MN_ERR_CUDA / MN_ERR_CUBLAS) ---
int mn_cuda_init(mn_cuda_ctx* ctx, int device);     // picks the device, creates the cuBLAS handle
void mn_cuda_free(mn_cuda_ctx* ctx);
const char* mn_cuda_strerror(int code);             // mn_strerror plus the two codes above
int mn_cuda_malloc(mn_cuda_ctx* ctx, void** p, size_t bytes);
void mn_cuda_dfree(void* p);
int mn_cuda_upload(mn_cuda_ctx* ctx, void* dst, const void* src, size_t bytes);    // host -> device, synchronous
int mn_cuda_download(mn_cuda_ctx* ctx, void* dst, const void* src, size_t bytes);  // device -> host, synchronous
int mn_cuda_sync(mn_cuda_ctx* ctx);                 // waits for the stream; reports kernel faults

// --- matmul through cuBLAS: out (N,OC) = inp (N,IC) weight (OC,IC)^T + bias (OC) ---
int mn_cuda_matmul_forward(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, const float* bias,
                           size_t N, size_t IC, size_t OC);
// dinp (N,IC), dweight (OC,IC), dbias (OC) accumulated; any may be NULL. dout (N,OC).
int mn_cuda_matmul_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, size_t N, size_t IC, size_t OC);

// --- elementwise and normalisation ops (contracts as mesanet.h >>ops) ---
// out (N,C) = wte (V,C)[tokens (N)]; ids must be valid (the caller checks, as on the CPU)
int mn_cuda_embedding_forward(mn_cuda_ctx* ctx, float* out, const int* tokens, const float* wte, size_t N, size_t C);
// dwte (V,C) += scatter of dout (N,C); V <= 1024: deterministic (the same bits every run; ids
// outside [0,V) are skipped), larger V: atomic adds (the order of the adds is not fixed)
int mn_cuda_embedding_backward(mn_cuda_ctx* ctx, float* dwte, const float* dout, const int* tokens, size_t N, size_t C,
                               size_t V);
// out (N,C), rstd (N) written; inp (N,C); weight (C)
int mn_cuda_rmsnorm_forward(mn_cuda_ctx* ctx, float* out, float* rstd, const float* inp, const float* weight, size_t N,
                            size_t C, double eps);
// dinp (N,C), dweight (C) accumulated
int mn_cuda_rmsnorm_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, const float* dout, const float* rstd,
                             const float* inp, const float* weight, size_t N, size_t C);
// out (n) = silu(gate (n)) * up (n)
int mn_cuda_swiglu_forward(mn_cuda_ctx* ctx, float* out, const float* gate, const float* up, size_t n);
int mn_cuda_swiglu_backward(mn_cuda_ctx* ctx, float* dgate, float* dup, const float* dout, const float* gate,
                            const float* up, size_t n);
// causal depthwise conv (fla ShortConvolution) + optional SiLU: out, inp (B,T,Ch); weight (Ch,K)
int mn_cuda_shortconv_forward(mn_cuda_ctx* ctx, float* out, const float* inp, const float* weight, size_t B, size_t T,
                              size_t Ch, size_t K, int silu);
// dinp (B,T,Ch), dweight (Ch,K) accumulated
int mn_cuda_shortconv_backward(mn_cuda_ctx* ctx, float* dinp, float* dweight, const float* dout, const float* inp,
                               const float* weight, size_t B, size_t T, size_t Ch, size_t K, int silu);
// out (N,D) = inp / sqrt(sum inp^2 + 1e-6), rstd (N)
int mn_cuda_l2norm_forward(mn_cuda_ctx* ctx, float* out, float* rstd, const float* inp, size_t N, size_t D);
int mn_cuda_l2norm_backward(mn_cuda_ctx* ctx, float* dinp, const float* dout, const float* out, const float* rstd,
                            size_t N, size_t D);
// losses (N) from logits (N,V), targets (N) (< 0: no loss), optional soft-cap c tanh(l/c)
int mn_cuda_crossentropy_forward(mn_cuda_ctx* ctx, float* losses, const float* logits, const int* targets, size_t N,
                                 size_t V, double softcap);
// dlogits (N,V) accumulated; dlosses (N)
int mn_cuda_crossentropy_backward(mn_cuda_ctx* ctx, float* dlogits, const float* dlosses, const float* logits,
                                  const int* targets, size_t N, size_t V, double softcap);

// RoPE (mn_rope_forward): out, inp (B,T,H,D), positions pos0 .. pos0+T-1, D even; out may alias inp
int mn_cuda_rope_forward(mn_cuda_ctx* ctx, float* out, const float* inp, size_t B, size_t T, size_t H, size_t D,
                         size_t pos0, double theta);
// dinp (B,T,H,D) += the inverse rotation of dout (B,T,H,D); dinp must not alias dout
int mn_cuda_rope_backward(mn_cuda_ctx* ctx, float* dinp, const float* dout, size_t B, size_t T, size_t H, size_t D,
                          size_t pos0, double theta);

// --- optimizer ---
// AdamW, PyTorch order (as mn_adamw_update): p, m, v (n) updated from g (n); t is the 1-based step
int mn_cuda_adamw_update(mn_cuda_ctx* ctx, float* p, const float* g, float* m, float* v, size_t n, double lr,
                         double beta1, double beta2, double eps, double wd, uint64_t t);
// Global L2 norm of grads (n) (fp64 accumulation); scales them to max_norm when larger (max_norm
// > 0), leaves them untouched when the norm is not finite. norm (host, may be NULL) receives the
// norm before clipping (NaN if not finite); asking for it synchronises the stream.
int mn_cuda_clip_grad_norm(mn_cuda_ctx* ctx, float* grads, size_t n, double max_norm, double* norm);

// --- causal softmax attention and SWA (contracts as mn_attention_forward_naive / _backward_naive of
// mesanet.h: the forward saves lse, never the T x T probabilities; window 0 is full causal attention) ---
// Workspace in floats (one size serves the forward and the backward): fp16 copies of q, k, v, dout.
size_t mn_cuda_attention_work_size(size_t B, size_t T, size_t H, size_t D);
// out (B,T,H,Dv), lse (B,T,H) written; q, k (B,T,H,Dk); v (B,T,H,Dv); Dk == Dv in {64, 128};
// out, q, k, v, work 16-byte aligned; work (mn_cuda_attention_work_size)
int mn_cuda_attention_forward(mn_cuda_ctx* ctx, float* out, float* lse, const float* q, const float* k,
                              const float* v, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window,
                              double scale, float* work);
// dq, dk (B,T,H,Dk), dv (B,T,H,Dv) accumulated (deterministic: the same bits every run); dout, out
// (B,T,H,Dv) and lse (B,T,H) from the forward; every (B,T,H,.) tensor and work 16-byte aligned
int mn_cuda_attention_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, const float* dout, const float* out,
                               const float* lse, const float* q, const float* k, const float* v, size_t B, size_t T,
                               size_t H, size_t Dk, size_t Dv, size_t window, double scale, float* work);
// One token for B sequences at position pos (mn_attention_step, batched): k, v go into slot pos %
// cache_len of kcache (B,cache_len,H,Dk), vcache (B,cache_len,H,Dv) (ring buffers: cache_len >= pos+1
// for full attention, >= window for SWA), then out (B,H,Dv) = the softmax over the window of
// scale q.k of the cached values. q, k (B,H,Dk), v (B,H,Dv). fp32; no workspace.
int mn_cuda_attention_step(mn_cuda_ctx* ctx, float* out, float* kcache, float* vcache, const float* q, const float* k,
                           const float* v, size_t B, size_t pos, size_t cache_len, size_t H, size_t Dk, size_t Dv,
                           size_t window, double scale);

// --- linear attention, simple GLA and GLA as one op (contracts as mn_gla_forward / _backward / _step of
// mesanet.h: G = 0 no decay, G = 1 one log-decay per head and step, G = Dk one per key channel) ---
// Chunkwise (chunk C = 64 only), Dk == Dv in {64, 128}, B*H <= 65535; q, k, v, out, dout, g (G = Dk)
// and work 16-byte aligned. The gates are log-decays (<= 0 as the layers make them).
// Workspace in floats (one size serves the forward and the backward): the chunk states and their
// gradients (fp32, Dk*Dv per chunk and head), the 64 x 64 intra-chunk scores and their gradients, the
// cumulative gates. Gates <= 0 work at any strength (for G = Dk the scores of a chunk whose cumulative
// gates pass 40 in magnitude go by 16-row blocks: see ctx->gla_blocks).
size_t mn_cuda_gla_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C);
// out (B,T,H,Dv) written; ht (B,H,Dk,Dv) the final state, written (may be NULL); q,k (B,T,H,Dk),
// v (B,T,H,Dv), g (B,T,H,G) (NULL when G = 0), h0 (B,H,Dk,Dv) initial state (NULL: zeros)
int mn_cuda_gla_forward(mn_cuda_ctx* ctx, float* out, float* ht, const float* q, const float* k, const float* v,
                        const float* g, const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
                        double scale, size_t C, float* work);
// dq,dk (B,T,H,Dk), dv (B,T,H,Dv), dg (B,T,H,G), dh0 (B,H,Dk,Dv) accumulated (dg, dh0 may be NULL;
// deterministic: no atomics); dout (B,T,H,Dv), dht (B,H,Dk,Dv) the final state's gradient (NULL = 0)
int mn_cuda_gla_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dh0, const float* dout,
                         const float* dht, const float* q, const float* k, const float* v, const float* g,
                         const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G, double scale,
                         size_t C, float* work);
// The same pair with the forward's intermediates kept between the passes: the forward writes into keep
// (mn_cuda_gla_keep_size floats: every chunk's start state, the 64 x 64 scores, the cumulative gates) what the
// backward would otherwise recompute from q, k, g and h0 (which it does not take); work holds the backward's
// part only. Outputs bitwise those of the pair above; keep must be left as the forward wrote it. The GPU
// model's GLA-family and Mamba-2 layers keep them (mn_cuda_model's memory grows by keep_size a layer).
size_t mn_cuda_gla_keep_size(size_t B, size_t T, size_t H, size_t Dk, size_t G);
int mn_cuda_gla_forward_keep(mn_cuda_ctx* ctx, float* out, float* ht, float* keep, const float* q, const float* k,
                             const float* v, const float* g, const float* h0, size_t B, size_t T, size_t H, size_t Dk,
                             size_t Dv, size_t G, double scale, size_t C);
int mn_cuda_gla_backward_keep(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dh0,
                              const float* dout, const float* dht, const float* keep, const float* q, const float* k,
                              const float* v, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
                              double scale, size_t C, float* work);
// One token for B sequences: state (B,H,Dk,Dv) updated in place, out (B,H,Dv) written; q,k (B,H,Dk),
// v (B,H,Dv), g (B,H,G) (NULL when G = 0). fp32; any Dk, Dv <= 1024; no workspace.
int mn_cuda_gla_step(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k, const float* v,
                     const float* g, size_t B, size_t H, size_t Dk, size_t Dv, size_t G, double scale);
// gated RMSNorm (mn_rmsnorm_gated_*): out = inp rstd weight silu(gate) per row of C; out, rstd (N) written
int mn_cuda_rmsnorm_gated_forward(mn_cuda_ctx* ctx, float* out, float* rstd, const float* inp, const float* gate,
                                  const float* weight, size_t N, size_t C, double eps);
// dinp, dgate (N,C), dweight (C) accumulated
int mn_cuda_rmsnorm_gated_backward(mn_cuda_ctx* ctx, float* dinp, float* dgate, float* dweight, const float* dout,
                                   const float* rstd, const float* inp, const float* gate, const float* weight,
                                   size_t N, size_t C);

// --- the Mesa op, chunkwise form (contracts as mn_mesa_forward / _backward of mesanet.h) ---
// Workspace in floats (one size serves the forward and the backward).
size_t mn_cuda_mesa_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o);
// out (B,T,H,Dv), xs (B,T,H,Dk) (saved for the backward; may be NULL), iters (B,T,H) (may be NULL)
// written; hkk (B,H,Dk,Dk), hkv (B,H,Dk,Dv): initial states in, final states out (NULL: zeros,
// not returned); q,k (B,T,H,Dk); v (B,T,H,Dv); g, beta (B,T,H); lamb (H,Dk); work (work_size)
int mn_cuda_mesa_forward(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv, const float* q,
                         const float* k, const float* v, const float* g, const float* beta, const float* lamb, size_t B,
                         size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, float* work);
// dq,dk (B,T,H,Dk), dv (B,T,H,Dv), dg,dbeta (B,T,H), dlamb (H,Dk), dhkk0 (B,H,Dk,Dk), dhkv0
// (B,H,Dk,Dv) accumulated (the last two may be NULL); dout (B,T,H,Dv); dhkk, dhkv upstream
// gradients of the final states (NULL = 0); xs from the forward; hkk0, hkv0 the initial states
// the forward used (NULL = 0). q is not read (the implicit backward needs only x).
int mn_cuda_mesa_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dbeta, float* dlamb,
                          float* dhkk0, float* dhkv0, const float* dout, const float* dhkk, const float* dhkv,
                          const float* xs, const float* q, const float* k, const float* v, const float* g,
                          const float* beta, const float* lamb, const float* hkk0, const float* hkv0, size_t B,
                          size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, float* work);
// The same pair with the chunk-start states kept between the passes: the forward writes H_n and S_n
// (mn_cuda_mesa_keep_size floats) into keep instead of the workspace, and the backward reads them there
// instead of recomputing them (its first pass, a state scan), so other calls on the same workspace may come
// in between (the GPU model's Mesa layers under ctx->mesa_keep_states). Outputs bitwise those of the pair
// above; k, v, g, beta, hkk0, hkv0 and keep must be left as the forward had them. The backward's
// arguments are the plain one's less q.
size_t mn_cuda_mesa_keep_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv);
int mn_cuda_mesa_forward_keep(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv,
                              float* keep, const float* q, const float* k, const float* v, const float* g,
                              const float* beta, const float* lamb, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                              const mn_mesa_opts* o, float* work);
int mn_cuda_mesa_backward_keep(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dg, float* dbeta,
                               float* dlamb, float* dhkk0, float* dhkv0, const float* dout, const float* dhkk,
                               const float* dhkv, const float* keep, const float* xs, const float* k, const float* v,
                               const float* g, const float* beta, const float* lamb, const float* hkk0,
                               const float* hkv0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                               const mn_mesa_opts* o, float* work);


// --- the Mesa decode step, batched over sequences (contract as mn_mesa_step, one call for B of them) ---
// One token for B sequences x H heads: H_t = e^g H + beta k k^T, S_t = e^g S + beta k v^T (states
// updated in place), x = (H_t + diag lambda)^-1 q by CG with the CPU step's options (cg_iters the
// most iterations, negative: no solve, x = q; cg_tol > 0: the paper's per-token dynamic stop
// ||r|| <= cg_tol ||r0||, else a fixed count that ends early only at float precision; fla: fla's
// 1e-5 epsilons and exactly cg_iters iterations; jacobi: x0 = q / (diag H_t + lambda), else 0),
// out = S_t^T x. out (B,H,Dv) written; iters (B,H) receives each system's CG iterations (may be
// NULL); hkk (B,H,Dk,Dk), hkv (B,H,Dk,Dv) in/out, 16-byte aligned; q,k (B,H,Dk); v (B,H,Dv);
// g, beta (B,H); lamb (H,Dk). No workspace: one launch, B*H thread blocks.
int mn_cuda_mesa_step(mn_cuda_ctx* ctx, float* out, int* iters, float* hkk, float* hkv, const float* q, const float* k,
                      const float* v, const float* g, const float* beta, const float* lamb, size_t B, size_t H,
                      size_t Dk, size_t Dv, const mn_mesa_opts* o);
// The step with each head's CG started from its previous token's solution (contract as mn_mesa_step_warm of
// mesanet.h, B sequences in one call): xs (B,H,Dk) holds each head's x_{t-1} on entry (a zero row: none, a new
// sequence; that head starts as opts.jacobi says) and receives x_t. opts.warm picks the start from x_{t-1}:
// MN_MESA_WARM x_{t-1} itself, MN_MESA_WARM_SCALED c x_{t-1}, MN_MESA_WARM_BLEND a x_{t-1} + b x_J (x_J the Jacobi
// guess), the coefficients minimising the error's A-norm (in float; the CPU's in double); any of them measures
// the stop against ||q_t||, as the CPU. MN_MESA_COLD runs the plain step and still writes x_t into xs. xs may be
// NULL (no previous solutions). The other arguments as mn_cuda_mesa_step; one launch.
int mn_cuda_mesa_step_warm(mn_cuda_ctx* ctx, float* out, float* xs, int* iters, float* hkk, float* hkv, const float* q,
                           const float* k, const float* v, const float* g, const float* beta, const float* lamb,
                           size_t B, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o);
// The step with each head's CG started at the exact solve of the last r tokens' part of H_t (the windowed-Woodbury
// start; contract as mn_mesa_step_woodbury of mesanet.h, B sequences in one call): per head (k_t, beta_t, g_t)
// enters its window, x0 = (Lambda + K_r^T W K_r)^-1 q (W the window's weights beta_j prod of the later gates) by
// an r x r Cholesky in double, and CG runs from x0 (r_0 = q - A x0) until ||r|| <= cg_tol ||q_t|| (cg_tol 0: a
// fixed count ending early at float precision relative to ||q_t||); a head without a usable window (none yet,
// every weight underflowed) starts at the Jacobi guess of H_t. opts.warm and opts.jacobi are set here, as the
// CPU's; cg_iters, cg_tol, fla as mn_cuda_mesa_step. r in [0, 32] (0: every head at the Jacobi guess, ring not
// read). ring in/out, mn_cuda_mesa_ring_size(B, H, Dk, r) floats: first the B*H windows, each
// mn_cuda_mesa_ring_slot(Dk, r) floats laid out exactly as the CPU's ring (keys (r,Dk) oldest first, betas (r),
// log-gates (r), the count; all zeros: a new sequence), so a CPU and a GPU ring compare value for value; then
// scratch rewritten by every call: the starts x0 (B*H,Dk) and one flag per head (B*H; 0: the Jacobi guess).
// The other arguments as mn_cuda_mesa_step. Two launches (the window's solve, then the step).
size_t mn_cuda_mesa_ring_slot(size_t Dk, size_t r);                  // r * (Dk + 2) + 1, mesanet.h's slot
size_t mn_cuda_mesa_ring_size(size_t B, size_t H, size_t Dk, size_t r);   // B*H*(slot + Dk + 1); 0 for r = 0
int mn_cuda_mesa_step_woodbury(mn_cuda_ctx* ctx, float* out, int* iters, float* hkk, float* hkv, float* ring,
                               const float* q, const float* k, const float* v, const float* g, const float* beta,
                               const float* lamb, size_t B, size_t H, size_t Dk, size_t Dv, size_t r,
                               const mn_mesa_opts* o);

// ---- DeltaNet / Gated DeltaNet, Mamba-2 SSD, RG-LRU, mLSTM, sLSTM (mesanet_cuda.cu's sections of the same names) ----
// --- DeltaNet / Gated DeltaNet: the gated delta rule (contracts as mn_delta_rule_* of mesanet.h) ---
// Per head S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = scale S_t^T q_t;
// g == NULL is DeltaNet (no decay); beta in (0,1), or (0,2) for the negative-eigenvalue variants.
// Two forms of the sequence op: the default, chunkwise (the WY/UT form of mesanet.h's mn_delta_rule_forward,
// its products as batched cuBLAS GEMMs over all chunks; fp32 math unless ctx->math is TF32), chosen when
// chunk >= 16, Dv is a multiple of 16 and work is given; otherwise, and always in the _recurrent form, the
// fp32 recurrent kernels (one warp per (sequence, head, 8 value columns), the state in registers). Both
// read and write the same hs, so either backward takes either forward's hs. Dk a multiple of 16 up to 128,
// Dv a multiple of 8, chunk 1..64 (see >>delta_rule in mesanet_cuda.cu).
// Workspace in floats, enough for either form at the checkpoint interval (the chunk length) `chunk`.
size_t mn_cuda_delta_rule_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk);
// out (B,T,H,Dv) written; ht (B,H,Dk,Dv) the final state (may be NULL); hs (B,H,NC,Dk,Dv), NC =
// ceil(T/chunk): the state at the start of every chunk, saved for the backward (may be NULL when no
// backward follows); q,k (B,T,H,Dk) (l2-normalised by the caller), v (B,T,H,Dv), beta, g (B,T,H)
// (g NULL: DeltaNet), h0 (B,H,Dk,Dv) (NULL: zeros); work (mn_cuda_delta_rule_work_size) or NULL (then
// the recurrent form, which needs none)
int mn_cuda_delta_rule_forward(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q, const float* k,
                               const float* v, const float* beta, const float* g, const float* h0, size_t B,
                               size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work);
// dq,dk (B,T,H,Dk), dv (B,T,H,Dv), dbeta, dg (B,T,H), dh0 (B,H,Dk,Dv) accumulated (dg, dh0 may be
// NULL; dg ignored when g is NULL; deterministic: no atomics); dout (B,T,H,Dv); dht (B,H,Dk,Dv) the
// final state's gradient (NULL = 0); hs from the forward at the same chunk (required); work required
int mn_cuda_delta_rule_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                float* dh0, const float* dout, const float* dht, const float* hs, const float* q,
                                const float* k, const float* v, const float* beta, const float* g, size_t B,
                                size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, float* work);
// The chunkwise form with its intermediates kept between the passes: the forward writes into keep
// (mn_cuda_delta_rule_keep_size floats) what its backward reads - the chunk-layout q, k, v, the gates, the WY
// products (W, U, A, L, the masked K K^T and Q K^T), V_new and every chunk's start state - and the backward
// reads them there instead of recomputing them from q, k, v, beta, g and hs (none of which it takes). The
// forward's outputs are bitwise those of mn_cuda_delta_rule_forward's chunkwise form; the backward's differ
// by rounding only (V_new is the forward chain's U - W S in fp32, not a second GEMM). keep must be left as
// the forward wrote it; work need not be. Whatever ctx->delta_form says; MN_ERR_CONFIG where the chunkwise
// form does not apply (work and keep needed, chunk 16..64, Dv a multiple of 16). The GPU model's DeltaNet and
// GDN layers keep them (mn_cuda_model's memory grows by keep_size a layer).
size_t mn_cuda_delta_rule_keep_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk);
int mn_cuda_delta_rule_forward_keep(mn_cuda_ctx* ctx, float* out, float* ht, float* keep, const float* q,
                                    const float* k, const float* v, const float* beta, const float* g, const float* h0,
                                    size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale,
                                    float* work);
// dg (B,T,H) accumulated when given (pass NULL for DeltaNet, whose forward had no g)
int mn_cuda_delta_rule_backward_keep(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                     float* dh0, const float* dout, const float* dht, const float* keep, size_t B,
                                     size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale,
                                     float* work);
// the recurrent form at every shape (the reference the chunkwise form is tested against); the contracts
// above, work unused by the forward
int mn_cuda_delta_rule_forward_recurrent(mn_cuda_ctx* ctx, float* out, float* ht, float* hs, const float* q,
                                         const float* k, const float* v, const float* beta, const float* g,
                                         const float* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                         size_t chunk, double scale, float* work);
int mn_cuda_delta_rule_backward_recurrent(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                          float* dh0, const float* dout, const float* dht, const float* hs,
                                          const float* q, const float* k, const float* v, const float* beta,
                                          const float* g, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                          size_t chunk, double scale, float* work);
// One token for B sequences: state (B,H,Dk,Dv) updated in place, out (B,H,Dv) written; q,k (B,H,Dk),
// v (B,H,Dv), beta, g (B,H) (g NULL: DeltaNet). fp32; the shapes of the forward; no workspace. The
// default reads the state in whole rows (8 warps a block); the _recurrent step is the recurrent forward's
// own arithmetic (stepping through a sequence gives its outputs bit for bit).
int mn_cuda_delta_rule_step(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k,
                            const float* v, const float* beta, const float* g, size_t B, size_t H, size_t Dk,
                            size_t Dv, double scale);
int mn_cuda_delta_rule_step_recurrent(mn_cuda_ctx* ctx, float* out, float* state, const float* q, const float* k,
                                      const float* v, const float* beta, const float* g, size_t B, size_t H,
                                      size_t Dk, size_t Dv, double scale);
// --- Mamba-2's SSD core (contracts as mn_ssd_* of mesanet.h): per head h_t = a_t h_{t-1} + X_t B_t^T (P,N),
// y_t = h_t C_t; amode MN_SSD_LOG_DECAY (A the log-decay, a = exp(A)) or MN_SSD_TRANSITION (a = A, any sign) ---
// Three forms (see >>ssd in mesanet_cuda.cu):
//   recurrent: fp32 kernels, one block per (sequence, head, 16 rows of P), the state in registers; both
//     amodes; P and N multiples of 16 up to 128; the backward recomputes the states from checkpoints every
//     64 tokens (its workspace) and adds dA, dB, dC with atomics (the bits may vary between runs);
//   chunk: the chunkwise tensor-core GLA op (mn_cuda_gla_*, G = 1, q = C, k = B, v = X, scale 1) in 3xTF32
//     whatever ctx->math, deterministic; both amodes (a signed transition as log|a| on sign-flipped B, C);
//     P == N in {64, 128}, no initial or final state, 16-byte aligned tensors, T > 0, B*H <= 65535;
//   default (mn_cuda_ssd_forward / _backward): the chunk form where it applies, else the recurrent form.
// Workspace in floats, one size for a form's forward and backward (mn_cuda_ssd_work_size: any form). C is
// the CPU's chunk length, kept for its argument order: the GPU's chunk is 64 whatever C.
size_t mn_cuda_ssd_work_size(size_t B, size_t T, size_t H, size_t P, size_t N, size_t C);
size_t mn_cuda_ssd_work_size_recurrent(size_t B, size_t T, size_t H, size_t P, size_t N);
size_t mn_cuda_ssd_work_size_chunk(size_t B, size_t T, size_t H, size_t P, size_t N);
// y (B,T,H,P) written; ht (B,H,P,N) the final state, written (may be NULL; may equal h0); X (B,T,H,P),
// A (B,T,H), Bm, Cm (B,T,H,N), h0 (B,H,P,N) or NULL (zeros). The forward needs no workspace (work unused).
int mn_cuda_ssd_forward_recurrent(mn_cuda_ctx* ctx, float* y, float* ht, const float* X, const float* A,
                                  const float* Bm, const float* Cm, const float* h0, size_t B, size_t T, size_t H,
                                  size_t P, size_t N, int amode);
// dX (B,T,H,P), dA (B,T,H) or NULL, dB, dC (B,T,H,N), dh0 (B,H,P,N) or NULL: accumulated (+=); dy
// (B,T,H,P); dht (B,H,P,N) or NULL (zeros); X, A, Bm, Cm, h0 as in the forward; dA is dL/dA for what A
// holds; work (mn_cuda_ssd_work_size_recurrent)
int mn_cuda_ssd_backward_recurrent(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, float* dh0,
                                   const float* dy, const float* dht, const float* X, const float* A,
                                   const float* Bm, const float* Cm, const float* h0, size_t B, size_t T, size_t H,
                                   size_t P, size_t N, int amode, float* work);
// the chunk form: as the recurrent ones without states (MN_ERR_CONFIG where it does not apply); dA may be
// NULL; work (mn_cuda_ssd_work_size_chunk)
int mn_cuda_ssd_forward_chunk(mn_cuda_ctx* ctx, float* y, const float* X, const float* A, const float* Bm,
                              const float* Cm, size_t B, size_t T, size_t H, size_t P, size_t N, int amode,
                              float* work);
int mn_cuda_ssd_backward_chunk(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, const float* dy,
                               const float* X, const float* A, const float* Bm, const float* Cm, size_t B, size_t T,
                               size_t H, size_t P, size_t N, int amode, float* work);
// the default form: as the recurrent ones, with the chunk length C (>= 1) and work (mn_cuda_ssd_work_size)
int mn_cuda_ssd_forward(mn_cuda_ctx* ctx, float* y, float* ht, const float* X, const float* A, const float* Bm,
                        const float* Cm, const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C,
                        int amode, float* work);
int mn_cuda_ssd_backward(mn_cuda_ctx* ctx, float* dX, float* dA, float* dB, float* dC, float* dh0, const float* dy,
                         const float* dht, const float* X, const float* A, const float* Bm, const float* Cm,
                         const float* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C, int amode,
                         float* work);
// One token for B sequences: y (B,H,P) written; state (B,H,P,N) read and updated; X (B,H,P), A (B,H),
// Bm, Cm (B,H,N). fp32; any P, N >= 1 (one warp per state row); no workspace.
int mn_cuda_ssd_step(mn_cuda_ctx* ctx, float* y, float* state, const float* X, const float* A, const float* Bm,
                     const float* Cm, size_t B, size_t H, size_t P, size_t N, int amode);
// --- the RG-LRU (Hawk / Griffin's recurrence; contract as mesanet.h's mn_rglru_*, on device arrays) ---
// Width W channels, NH gate blocks of bw = W/NH channels (block-diagonal input and recurrence gates):
//   gx_t = sigmoid(BD(x_t; wx, bx)), ga_t = sigmoid(BD(x_t; wa, ba)), log a_t = -c ga_t softplus(a_param),
//   h_t = a_t h_{t-1} + sqrt(1 - a_t^2) (x_t gx_t), at a reset h_t = x_t gx_t; y_t = h_t.
// Resets as on the CPU: segment_pos (B,T) (device ints) given: wherever it is 0; NULL: at t = 0 only
// when h0 is NULL. The gates' block products go through cuBLAS (fp32 or TF32 by ctx->math); the scan
// and its reverse run in fp32, one thread per (sequence, channel) (the CPU: double). Any W, NH with
// W % NH == 0 (MN_ERR_CONFIG otherwise); the step also needs bw <= 512.
// Floats of the backward's workspace: the two gates' pre-activation gradients (B,T,W) each, and the
// per-sequence sums of the a_param gradient (B,W).
size_t mn_cuda_rglru_work_size(size_t B, size_t T, size_t W);
// y (B,T,W) written; ht (B,W) written or NULL (may be h0: read before written); gates (2,B,T,W) written
// (the input gate, then the recurrence gate, as the CPU saves them); x (B,T,W); a_param (W);
// wx, wa (NH,bw,bw); bx, ba (NH,bw); h0 (B,W) or NULL; segment_pos (B,T) or NULL; c (8 in Griffin).
int mn_cuda_rglru_forward(mn_cuda_ctx* ctx, float* y, float* ht, float* gates, const float* x, const float* a_param,
                          const float* wx, const float* bx, const float* wa, const float* ba, const float* h0,
                          const int* segment_pos, size_t B, size_t T, size_t W, size_t NH, double c);
// dx (B,T,W), da_param (W), dwx, dwa (NH,bw,bw), dbx, dba (NH,bw), dh0 (B,W): ACCUMULATED (+=), any but
// dx may be NULL; dy (B,T,W); dht (B,W) or NULL; y, gates: what the forward wrote; work
// (mn_cuda_rglru_work_size floats) scratch; the rest as in the forward. No atomics: the same bits every run.
int mn_cuda_rglru_backward(mn_cuda_ctx* ctx, float* dx, float* da_param, float* dwx, float* dbx, float* dwa,
                           float* dba, float* dh0, const float* dy, const float* dht, const float* y,
                           const float* gates, const float* x, const float* a_param, const float* wx, const float* wa,
                           const float* h0, const int* segment_pos, size_t B, size_t T, size_t W, size_t NH, double c,
                           float* work);
// One token per sequence (the forward with T = 1, h0 = ht = state): y (B,W) written; state (B,W) read and
// updated; x (B,W); segment_pos (B) or NULL (no reset; a 0 restarts that sequence); work: NULL, or
// (2,B,W) floats that receive the gates as the CPU step leaves them in its workspace. One launch.
int mn_cuda_rglru_step(mn_cuda_ctx* ctx, float* y, float* state, const float* x, const float* a_param,
                       const float* wx, const float* bx, const float* wa, const float* ba, const int* segment_pos,
                       size_t B, size_t W, size_t NH, double c, float* work);
// --- xLSTM's mLSTM (matrix memory; contracts as mn_mlstm_forward / _backward / _step of mesanet.h, the
// chunkwise form with its stabiliser m and normaliser n) ---
// Layout [B,T,H,D]: q, k (B,T,H,Dk), v, out (B,T,H,Dv), ig, fg (B,T,H) the input / forget gate
// pre-activations; norm, stab (B,T,H) the normaliser max(|n_t.q^_t|, e^{-m_t}) and the stabiliser m_t
// (either may be NULL); states C (B,H,Dk,Dv), n (B,H,Dk), m (B,H); C0, n0, m0 the initial state (NULL:
// zeros; m0 = -INFINITY with zero C0, n0 gives the parallel form). Two forms, one result for every chunk
// length C >= 1 (which is only checked): the chunk form (_chunk), the numerator through the GLA op's
// chunkwise tensor-core kernels (k' = e^{i - c} k, one log-decay per token) and the normaliser by a
// chunkwise vector scan, which takes no C0, n0, Ct, nt (nor dC0, dn0), Dk == Dv in {64, 128}, 16-byte
// aligned tensors and input gates spanning at most 40 in each head (checked on the device: one stream
// synchronisation per call); and the recurrent form (_recurrent: fp32 states in registers, gates and
// stabiliser in double; Dk, Dv multiples of 16 up to 128), the tested reference. The plain functions take
// the chunk form where it applies, else the recurrent one. B*H <= 65535.
// Workspace in floats (one size serves both forms and both directions): per token and head the gates'
// factors, the stabiliser, the normaliser and its gradient, the backward's recomputed output and partial
// sums (Dv + Dk/4 + 8 floats per token and head); with Dk == Dv in {64, 128} also k' and its gradient, the
// chunk summaries and the GLA op's workspace.
size_t mn_cuda_mlstm_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C);
// out written; norm, stab (may be NULL) written; Ct, nt, mt the final state (may be NULL, or C0, n0, m0)
int mn_cuda_mlstm_forward(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* Ct, float* nt, float* mt,
                          const float* q, const float* k, const float* v, const float* ig, const float* fg,
                          const float* C0, const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                          size_t Dv, double scale, double eps, size_t C, float* work);
int mn_cuda_mlstm_forward_recurrent(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* Ct, float* nt,
                                    float* mt, const float* q, const float* k, const float* v, const float* ig,
                                    const float* fg, const float* C0, const float* n0, const float* m0, size_t B,
                                    size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                                    float* work);
// the chunk form alone: MN_ERR_CONFIG (nothing written) where it does not apply
int mn_cuda_mlstm_forward_chunk(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* mt, const float* q,
                                const float* k, const float* v, const float* ig, const float* fg, const float* m0,
                                size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                                float* work);
// dq, dk (B,T,H,Dk), dv (B,T,H,Dv), di, df (B,T,H), dC0 (B,H,Dk,Dv), dn0 (B,H,Dk) accumulated (dC0, dn0 may
// be NULL); dout (B,T,H,Dv). The forward is recomputed (nothing saved); m0 gets no gradient, the final
// state carries none. mode: MN_MLSTM_BW_EXACT (through normaliser and stabiliser) or MN_MLSTM_BW_DETACH.
// Deterministic (no atomics).
int mn_cuda_mlstm_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df, float* dC0,
                           float* dn0, const float* dout, const float* q, const float* k, const float* v,
                           const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                           size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                           int mode, float* work);
int mn_cuda_mlstm_backward_recurrent(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                     float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                     const float* v, const float* ig, const float* fg, const float* C0,
                                     const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                                     size_t Dv, double scale, double eps, size_t C, int mode, float* work);
int mn_cuda_mlstm_backward_chunk(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                 const float* dout, const float* q, const float* k, const float* v, const float* ig,
                                 const float* fg, const float* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                 double scale, double eps, size_t C, int mode, float* work);
// One token for B sequences (mn_mlstm_step): out (B,H,Dv) written; C (B,H,Dk,Dv), n (B,H,Dk), m (B,H)
// read and updated in place; q, k (B,H,Dk), v (B,H,Dv), ig, fg (B,H). fp32 (gates in double); Dk, Dv
// <= 128 (any, not only multiples of 16); no workspace.
int mn_cuda_mlstm_step(mn_cuda_ctx* ctx, float* out, float* C, float* n, float* m, const float* q, const float* k,
                       const float* v, const float* ig, const float* fg, size_t B, size_t H, size_t Dk, size_t Dv,
                       double scale, double eps);
// --- xLSTM's sLSTM, the scalar memory (contracts as mn_slstm_forward / _backward / _step of mesanet.h:
// exponential gating with the stabiliser m, the block-diagonal recurrent matrix R per head) ---
// Hd = NH*Dh units, Dh a multiple of 16 in [16, 128] (else MN_ERR_CONFIG); fp32 throughout (the
// backward's two cuBLAS products follow ctx->math). x,dx (B,T,4Hd) the input pre-activations, gate-major
// (index g*Hd + h*Dh + j, g = i, f, z, o); R,dR (NH,4Dh,Dh) R[h][g*Dh+j][i]; b,db (4Hd); y,c,n,m (B,T,Hd)
// the states after each step; y0,c0,n0,m0 (B,Hd) initial states or NULL (zeros).
// Workspace in floats of the backward: the recomputed pre-activations (B,T,4Hd), overwritten in place
// by their gradients, the shifted outputs y_{t-1} (B,T,Hd) and each sequence's bias gradient (B,4Hd).
// The forward and the step need none.
size_t mn_cuda_slstm_work_size(size_t B, size_t T, size_t NH, size_t Dh);
// y, c, n, m written; one launch, one thread block per (sequence, head) walking the T steps
int mn_cuda_slstm_forward(mn_cuda_ctx* ctx, float* y, float* c, float* n, float* m, const float* x, const float* R,
                          const float* b, const float* y0, const float* c0, const float* n0, const float* m0, size_t B,
                          size_t T, size_t NH, size_t Dh);
// dx (B,T,4Hd), dR, db accumulated; dy0, dc0, dn0 (B,Hd) accumulated or NULL; dy (B,T,Hd) upstream;
// y, c, n, m the forward's outputs for these x, R, b and initial states (deterministic: no atomics)
int mn_cuda_slstm_backward(mn_cuda_ctx* ctx, float* dx, float* dR, float* db, float* dy0, float* dc0, float* dn0,
                           const float* dy, const float* y, const float* c, const float* n, const float* m,
                           const float* x, const float* R, const float* b, const float* y0, const float* c0,
                           const float* n0, const float* m0, size_t B, size_t T, size_t NH, size_t Dh, float* work);
// One token for B sequences: x (B,4Hd), the states y, c, n, m (B,Hd) read and updated in place; one launch,
// a block per head and group of 8 sequences
int mn_cuda_slstm_step(mn_cuda_ctx* ctx, float* y, float* c, float* n, float* m, const float* x, const float* R,
                       const float* b, size_t B, size_t NH, size_t Dh);

// --- the model: mesanet.h's mn_model on the GPU (mn_forward / mn_backward / mn_clip_grad_norm /
// mn_adamw_step, op for op; see >>cuda_model in mesanet_cuda.cu) ---
// Same config (mn_config), same parameter table, same checkpoints: the model holds a CPU
// mn_model (float; built by mn_model_init or mn_load in cuda/mesanet_cuda_host.c, the library's
// private copy of mesanet.h) whose table gives every tensor's offset, and the device blocks
// params, grads, opt_m, opt_v are laid out exactly like its parameter block. Saving downloads the
// parameters (and the AdamW moments) into it and calls mn_save; loading is mn_load, then an
// upload. A checkpoint written here is read by the CPU build (build/generate) and vice versa.
// Supported now: patterns (hybrids included, cycled over the layers as on the CPU) of the mixers
// "mesa", "attn", "swa", "linattn", "sgla" and "gla" (any other returns MN_ERR_CONFIG), head_dim 64 or
// 128, mesa_chunk 64 for Mesa layers (the GLA layers run chunks of 64 whatever it is),
// any mesa_cg_train (negative: no solve), gamma clamp, RoPE, soft-cap.
// Precision: ctx->math picks fp32 or TF32 for every projection and the Mesa backward's products;
// the Mesa op and attention as described above (fp16 tensor-core products, fp32 states, softmax
// and accumulation), the GLA family's products in 3xTF32 (fp32) or TF32 by ctx->math.
// MN_CUDA_MATH_BF16: the projections with bf16 operands and fp32 accumulation, the rest as with fp32
// (PRECISION above); params stay the fp32 master weights (what AdamW updates and checkpoints hold),
// their bf16 image (pbf) is remade at the first forward or backward after params_version changes.
// LINKING: build/mesanet_cuda.o AND build/mesanet_cuda_host.o (cuda/mesanet_cuda_host.c, any C99
// compiler), -lcublas -lcudart. The program may define MESANET_IMPLEMENTATION itself (float or
// double): the library's copy is private.
enum { MN_CUDA_PARAMS = 0, MN_CUDA_GRADS = 1, MN_CUDA_OPT_M = 2, MN_CUDA_OPT_V = 3 };  // mn_cuda_model_get / _set
typedef struct mn_cuda_model {
    mn_cuda_ctx* ctx;              // the context every call runs on (not owned)
    void* host;                    // the CPU mn_model (float); private: use the functions below
    mn_config cfg;                 // the resolved config (cfg.pattern points into host)
    const mn_tensor_info* tensors; // the parameter table (names, shapes, offsets in floats, decay flags)
    size_t n_tensors, n_params;   // n_params: floats per parameter-sized block (tensors 16-float aligned, padding zero)
    size_t n_trainable;           // the model's parameter count (n_params minus padding)
    float *params, *grads, *opt_m, *opt_v;   // device, n_params floats each (one allocation)
    uint64_t opt_step;             // AdamW steps taken
    // bf16 mode: params_version counts the changes of params (AdamW steps, mn_cuda_model_set of
    // MN_CUDA_PARAMS); a program that writes params itself adds 1 so the image is remade
    uint64_t params_version;
    uint64_t pbf_version;          // (internal) params_version + 1 of the image in pbf (0: none yet)
    void* pbf;                     // (n_params bf16) the parameters' bf16 image (bf16 mode only)
    void* abf;                     // (cap_abf bf16) the image of the layer input the projections read
    size_t cap_abf;
    // activations, laid out for (B,T) by mn_cuda_model_reserve (forward calls it): exposed so
    // tests can poison them
    size_t B, T, cap_acts, cap_dacts, cap_work, cap_tok;
    float* acts;                   // (cap_acts) saved activations: residual stream, per-layer tensors, logits
    float* dacts;                  // (cap_dacts) activation gradients: one layer's (reused) plus the head's
    float* work;                   // (cap_work) the mixers' workspace, shared by the layers
    float* mesa_keep;              // (cap_mesa_keep) under ctx->mesa_keep_states: each Mesa layer's chunk-start
    size_t cap_mesa_keep;          // states (mn_cuda_mesa_forward_keep), reserved with the other buffers
    int *tokens, *targets;         // (cap_tok) device copies of the last forward's inputs
    double* red;                   // (8) device scratch for the loss sum
    size_t n_valid;                // targets >= 0 in the last forward
    int have_loss;                 // 1 after a forward with targets
    unsigned char mixer[MN_MAX_LAYERS];  // (internal) each layer's row of the GPU mixer table
    unsigned char kept[MN_MAX_LAYERS];   // (internal) 1: the last forward left the layer's DeltaNet chunk-form
                                         // pieces (mn_cuda_delta_rule_forward_keep) or the GLA op's (linattn,
                                         // sgla, gla, Mamba-2: mn_cuda_gla_forward_keep) in its keep buffer, or
                                         // the Mesa op's states in mesa_keep (mn_cuda_mesa_forward_keep)
} mn_cuda_model;

// A new model from a config (mn_model_init's parameters, the same seed gives the same values).
int mn_cuda_model_init(mn_cuda_model* cm, mn_cuda_ctx* ctx, const mn_config* cfg);
// A model from a checkpoint folder (mn_load); meta non-NULL also restores the AdamW state.
int mn_cuda_model_load(mn_cuda_model* cm, mn_cuda_ctx* ctx, const char* dir, mn_train_meta* meta);
// mn_save of the device parameters (meta non-NULL: also optimizer.safetensors, which needs a step taken).
int mn_cuda_model_save(mn_cuda_model* cm, const char* dir, const mn_train_meta* meta);
void mn_cuda_model_free(mn_cuda_model* cm);
// Copies one parameter-sized block (MN_CUDA_PARAMS, _GRADS, _OPT_M, _OPT_V) to / from host floats (n_params).
int mn_cuda_model_get(mn_cuda_model* cm, int which, float* host_dst);
int mn_cuda_model_set(mn_cuda_model* cm, int which, const float* host_src);
// Lays out (allocating when larger than before) the activations for B sequences of T tokens.
int mn_cuda_model_reserve(mn_cuda_model* cm, size_t B, size_t T);
// As mn_forward: tokens (B,T) and targets (B,T) or NULL are HOST arrays (validated first: ids in
// [0,V), targets in [-1,V), T <= max_seq_len); *loss (may be NULL) receives the mean cross-entropy
// over targets >= 0 (0 when there are none). Returns MN_ERR_NAN for a non-finite loss.
int mn_cuda_model_forward(mn_cuda_model* cm, const int* tokens, const int* targets, size_t B, size_t T, float* loss);
const float* mn_cuda_model_logits(const mn_cuda_model* cm);   // device (B,T,V) logits of the last forward
int mn_cuda_model_zero_grad(mn_cuda_model* cm);
// As mn_backward: gradients of the last forward's mean loss, ACCUMULATED into grads.
int mn_cuda_model_backward(mn_cuda_model* cm);
// As mn_clip_grad_norm; *norm receives the norm before clipping (NaN when not finite: grads untouched).
int mn_cuda_model_clip_grad_norm(mn_cuda_model* cm, double max_norm, double* norm);
// As mn_adamw_step (hp NULL or zeros: the defaults (0.9, 0.98), 1e-8, weight decay 0.1 (hp given:
// its weight_decay, 0 included); decay only on the tensors whose table entry says so).
int mn_cuda_model_adamw_step(mn_cuda_model* cm, double lr, const mn_adamw* hp);
// mn_flops_per_token of the model: forward FLOPs per token (2 per multiply-add, every Linear but
// the embedding, plus the Mesa op's count); a training step is 3 times that.
size_t mn_cuda_model_flops_per_token(const mn_cuda_model* cm, size_t T);
size_t mn_cuda_model_device_bytes(const mn_cuda_model* cm);   // device memory held by the model

// ---- decode on the GPU (mesanet.h's mn_state_init / mn_step / mn_state_reset / mn_state_free) ----
// The state of B sequences decoded in lockstep, one device allocation: each layer's recurrent state or
// KV cache (B times the mixer's per-sequence size, laid out batch-major by the mixer), the residual
// and the backbone's one-token temporaries, the logits. Every mixer of the GPU table has a
// step, every cfg.mesa_cg_warm of the CPU included: 2-4 (from the previous solution) run mn_cuda_mesa_step_warm
// with the solutions in the state, 1 with a tolerance and 5, 6 (the Woodbury starts) mn_cuda_mesa_step_woodbury
// (with the window in the state for 5, 6). The state's size follows cfg.mesa_cg_warm: after changing it between
// the groups {0, 1}, {2, 3, 4}, {5}, {6}, init the state again (mn_cuda_model_step refuses a state of another
// size with MN_ERR_STATE).
// A step reads the decode settings from cm->cfg (mesa_cg_decode, mesa_cg_tol): a caller may change them
// between steps. The Mesa layers' CG counts stay on the device (no synchronisation per step):
// mn_cuda_model_state_cg_stats reads them.
typedef struct mn_cuda_model_state {
    size_t B;                      // sequences
    size_t pos;                    // tokens consumed so far
    size_t bytes;                  // of mem
    float* mem;                    // device, the allocation
    float* layer[MN_MAX_LAYERS];   // device, each layer's state (B x its mixer's per-sequence size)
    float *x, *xn, *rstd;          // device (B,C) residual, (B,C) normed, (B) rstd
    float *gate, *up, *h;          // device (B,F) x3 the MLP's
    float* logits;                 // device (B,V) of the last step
    float* tmp;                    // device (B x tmp_per_seq) the mixers' per-token scratch
    size_t tmp_per_seq;
    int* tokens;                   // device (B) the last step's tokens
    // CG statistics (mn_state_cg_stats): each Mesa layer's (B,H) iteration counts of the last step (in
    // that layer's block; NULL for the other mixers), summed after its step into cg (device (2): CG
    // iterations, systems solved, since the init or reset; a system is one (sequence, head, Mesa layer)
    // per token, counted also when mesa_cg_decode < 0 solves nothing (0 iterations), as the CPU does)
    int* cg_iters[MN_MAX_LAYERS];
    unsigned long long* cg;
    // CUDA graph (opt in: set graph = 1 after mn_cuda_model_state_init). A step at a position > 0 of a model
    // without attention layers then records its launches once (stream capture) and afterwards replays them as
    // one graph: the same kernels on the same buffers, so the same bits as a plain step, without the launch
    // cost of several hundred small kernels per token. The first token of a sequence (pos 0: the RG-LRU's
    // restart) and attention layers (their positions are kernel arguments) always run plainly. The graph is
    // recorded again when anything it depends on changes (the cfg, the math mode, the context's scratch
    // buffers, the weights' address or version: an AdamW step or a set records again); mn_cuda_model_state_reset
    // keeps it, mn_cuda_model_state_free frees it. A recording that fails sets graph = -1 (the context's msg says
    // why) and the steps go on plainly, with the same results.
    int graph;
    size_t graph_steps, graph_captures;   // steps replayed from a graph, graphs recorded (for tests, benches)
    void* graph_exec;                     // (internal) cudaGraphExec_t
    void* graph_key;                      // (internal, host) what the recorded graph depends on
} mn_cuda_model_state;
int mn_cuda_model_state_init(mn_cuda_model_state* s, mn_cuda_model* cm, size_t B);
int mn_cuda_model_state_reset(mn_cuda_model* cm, mn_cuda_model_state* s);   // zeros, pos = 0
void mn_cuda_model_state_free(mn_cuda_model_state* s);
// The CG statistics since the init or reset, host values: *iters the CG iterations, *solves the systems
// solved, summed over the Mesa layers, sequences and heads (either pointer may be NULL); their ratio is
// mn_state_cg_stats's mean. 0 / 0 for a model without Mesa layers. One small download (synchronises).
int mn_cuda_model_state_cg_stats(mn_cuda_model* cm, const mn_cuda_model_state* s, double* iters, double* solves);
// Consumes tokens (B, HOST ids in [0,V)) at position s->pos and writes logits (B,V) to host memory
// (NULL: only s->logits, on the device); the same math as mn_cuda_model_forward restricted to the newest
// token. MN_ERR_RANGE for a bad id or an attention layer whose cache is full (pos = max_seq_len).
int mn_cuda_model_step(mn_cuda_model* cm, mn_cuda_model_state* s, const int* tokens, float* logits);

#ifdef __cplusplus
}
#endif
#endif // MESANET_CUDA_H
