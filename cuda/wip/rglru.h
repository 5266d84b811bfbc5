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
