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
