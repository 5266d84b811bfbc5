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
