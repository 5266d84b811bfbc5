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
