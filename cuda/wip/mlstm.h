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
