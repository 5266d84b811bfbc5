/* mesanet.h - v0.1 - public domain or MIT (see end of file)

   A readable, single-header C99 reference implementation of MesaNet (von Oswald et al., "MesaNet:
   Sequence Modeling by Locally Optimal Test-Time Training") and of the sequence mixers it is
   compared with, together with a Llama-2 style backbone, hand-written backward passes, AdamW,
   safetensors checkpoints and O(1)-state generation.

   ABOUT
     Every differentiable op is a pair `mn_<op>_forward` / `mn_<op>_backward` written next to each
     other, in llm.c's argument order: forward (out, saved..., inputs..., weights..., sizes, work);
     backward (dinputs..., dweights..., dout, saved..., inputs..., weights..., sizes, work). Every backward
     ACCUMULATES (+=) into its gradient buffers; `mn_zero_grad` is the only place that zeroes them.
     The simplest form of each op (a naive loop) is kept and every faster form is tested against it.

   NAMING (one rule for every op, CPU and CUDA)
     mn_<op>_<direction>[_<form>], direction one of forward, backward, step (one token, state read and
     updated) and work_size (elements of scratch the op needs). The default form, the fastest exact one
     (chunkwise for the recurrent mixers, the matrix form for attention), has no suffix; the others add
     _naive, _recurrent, _parallel. Why: the suffix-free name is the one to call, and every form of an
     op sorts next to it (mn_gla_forward, mn_gla_forward_recurrent), so a test of form X against form Y
     reads as the same call with one suffix changed. Arguments run outputs, saved, inputs, weights,
     sizes, options, and the workspace (caller-owned scratch, overwritten) always last. A section is
     named by the prefix it holds: >>gla holds mn_gla_*, >>delta_rule holds mn_delta_rule_*.

   BUILDING
     Do this:
        #define MESANET_IMPLEMENTATION
     before you include this file in *one* C or C++ file to create the implementation.

     Compile-time switches (define before including):
        MESANET_DOUBLE    element type mn_real is double instead of float (strict numerical tests)
        MESANET_STATIC    make every function static (private to the including file)
        MN_USE_BLAS       route matrix products through cblas_{s,d}gemm (link -lopenblas)
        MN_MALLOC/MN_FREE allocator override (define both or neither)
        MN_ASSERT(x)      internal invariant check (default: assert.h)
        MN_LOG(...)       printf-style error/progress sink (default: fprintf(stderr, ...))
     OpenMP is used only through `#pragma omp` lines; they compile away without -fopenmp.
     There is no fast-math anywhere; the default build is -O2 -std=c99.

   QUICK START
        mn_model m;
        mn_config cfg = {0};                  // zero means default: byte vocab, d=256, 4 layers
        cfg.pattern = "attn";                 // one mixer name per layer, cycled ("hawk,mesa")
        if (mn_model_init(&m, &cfg) != MN_OK) return 1;
        for (step...) {
            float loss;
            mn_forward(&m, tokens, targets, B, T, &loss);   // tokens, targets: (B,T) ints
            mn_zero_grad(&m);
            mn_backward(&m);
            mn_clip_grad_norm(&m, 1.0);
            mn_adamw_step(&m, lr, &opt);
        }
        mn_save(&m, "ckpt", NULL);           // ckpt/model.safetensors + ckpt/config.json
        // generation: one token at a time, state held by the caller
        mn_state st; mn_state_init(&st, &m, 1);
        mn_step(&m, &st, &token, logits);    // logits (1,V)
        mn_model_free(&m);

   NOTATION (shape comments on every pointer use these letters)
        B batch, T time, C d_model, H heads, D head dim (Dk keys, Dv values), F MLP hidden,
        V vocabulary, L layers, N = B*T rows, W sliding window, P parameters.
        Per-head layout is fla's [B,T,H,D]; matrices are row-major; Linear weights are [out, in]
        as in PyTorch, so y = x W^T.

   MIXERS (per layer, selected by name in cfg.pattern, e.g. "mesa", "hawk,mesa", "mlstm,slstm")
        mesa          the Mesa layer: x_t = (H_t + Lambda)^-1 q_t by CG, o_t = S_t^T x_t   (>>mesa)
        attn, swa     causal softmax attention with RoPE; sliding window of W keys    (>>attention)
        deltanet, gdn DeltaNet, Gated DeltaNet; *_neg: beta in (0,2), eigenvalues in [-1,1] (>>delta_rule)
        mamba2        Mamba-2 (SSD); mamba2_neg: transition 2 exp(A dt) - 1 in (-1,1)       (>>ssd)
        hawk          Griffin's recurrent block with the RG-LRU                             (>>rglru)
        mlstm, slstm  xLSTM's matrix and scalar memories                          (>>mlstm, >>slstm)
        gla           gated linear attention with a low-rank per-channel gate              (>>gla)
        sgla          simple GLA: one data-dependent log-decay per head                     (>>gla)
        linattn       linear attention (no decay) with fla's learnable Hadamard feature map (>>gla)
     Each mixer's section holds its op and then its layer (>>layer says what a layer is); the table
     mn__mixers[] in >>model lists the layers. Adding a mixer is one section and one table row.

   MEMORY MODEL
     mn_model_init makes three allocations (parameters, gradients, AdamW m and v together), sized by
     one table of named tensors (mn_tensor_info) that also drives checkpoint I/O and the parameter
     count. Activations (and their gradients) are one allocation made on the first mn_forward and
     reused while B and T do not grow; each layer's part is a struct of named pointers laid out by
     one function that both sizes and points (>>layer), the same layout for values and gradients.
     Nothing allocates inside an op.

   ERRORS
     Public functions that can fail return MN_OK (0) or a negative MN_ERR_* code and write one line
     to MN_LOG saying why; mn_strerror(code) names the code. The library never calls exit().
     A failed load leaves the model untouched; a failed save leaves the previous checkpoint set whole (>>io).

   SECTIONS (grep for the anchor)
        >>types >>api >>impl >>util >>matmul >>ops >>layer >>attention >>gla >>delta_rule >>ssd >>rglru
        >>mlstm >>slstm >>mesa >>model >>optim >>sample >>json >>io >>tasks >>license
     Each mixer's section reads: the math, the op's forms (the naive one kept), then the layer that uses it.
*/
#ifndef MESANET_H
#define MESANET_H

#define MESANET_VERSION_MAJOR 0
#define MESANET_VERSION_MINOR 1

#include <stddef.h>
#include <stdint.h>

#ifdef MESANET_STATIC
#define MNDEF static
#else
#define MNDEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

// >>types
// defines: mn_real, error codes, mn_config, mn_tensor_info, mn_model, mn_state, mn_adamw, mn_rng

#ifdef MESANET_DOUBLE
typedef double mn_real;
#define MN_DTYPE_NAME "F64"
#else
typedef float mn_real;
#define MN_DTYPE_NAME "F32"
#endif

enum {
    MN_OK = 0,
    MN_ERR_CONFIG = -1,   // zero/inconsistent sizes, unknown mixer name
    MN_ERR_ALLOC = -2,    // MN_MALLOC returned NULL
    MN_ERR_IO = -3,       // cannot open/read/write/rename a file
    MN_ERR_FORMAT = -4,   // corrupt or truncated file, or one that does not match the model
    MN_ERR_RANGE = -5,    // token id outside [0, V), B*T larger than allowed, position >= max_seq_len
    MN_ERR_NAN = -6,      // NaN or Inf loss / gradient norm
    MN_ERR_STATE = -7     // call out of order (backward before forward with targets)
};

enum { MN_DT_F32, MN_DT_F64, MN_DT_BF16, MN_DT_F16 };  // safetensors dtypes this library reads

#define MN_MAX_LAYERS 64
#define MN_MAX_LAYER_TENSORS 24   // parameter tensors of one block (norms, mlp, mixer)
#define MN_PARAM_ALIGN 16         // every parameter tensor starts at a multiple of this many elements (64 B in float)

// Model configuration. Zero in any field means "use the default" (sokol style); mn_config_resolve
// returns the filled-in copy and checks it.
typedef struct mn_config {
    size_t vocab_size;    // V, default 256 (bytes)
    size_t d_model;       // C, default 256
    size_t n_layer;       // L, default 4
    size_t n_head;        // H, default 4
    size_t head_dim;      // D, default C/H
    size_t d_ff;          // F, SwiGLU hidden; default 8C/3 rounded up to a multiple of 16 (688 at C=256)
    size_t max_seq_len;   // longest context for RoPE tables and KV caches, default 1024
    size_t window;        // W for "swa" layers, default 64
    const char* pattern;  // comma-separated mixer names, cycled over the layers; default "attn"
    double rope_theta;    // default 10000 (Llama-2, fla); negative disables RoPE
    double norm_eps;      // RMSNorm epsilon, default 1e-6 (fla MesaNetConfig/TransformerConfig)
    double logit_softcap; // 0 = off; else logits = c*tanh(z/c) (the MesaNet paper uses 30)
    double init_std;      // default 0.02 (fla _init_weights)
    uint64_t seed;        // parameter init seed, default 1337
    // Mesa layers (the layer at the end of >>mesa): CG steps in training and decoding (0 = 30; negative = no solve,
    // i.e. GLA), the paper's dynamic-stopping tolerance for decoding (0 = fixed count), the chunk
    // length of the chunkwise form (0 = 64), and the paper's gamma clamp (§4.2; fla has none).
    int mesa_cg_train, mesa_cg_decode;
    double mesa_cg_tol;
    size_t mesa_chunk;    // also the chunk length of the delta-rule layers
    int mesa_gamma_clamp;
    // 1: the Mesa layers solve with fla's CG arithmetic (mn_mesa_opts.fla: 1e-5 in CG's denominators,
    // always the full count), so a checkpoint made by fla gives fla's logits; 0: textbook CG.
    // mn_load sets it for a config.json written by fla (MesaNetConfig without our mesanet_* keys).
    int mesa_cg_fla;
    // Initial value of the Mesa layers' forget-gate bias (a_proj.bias): gamma starts near sigmoid(bias), the
    // input's share being small at init. 0 (the default) is fla's zero bias: gamma about 1/2, a memory half-life
    // of about one token; log 19 = 2.944 starts gamma near 0.95, where the other mixers' decays start.
    double mesa_gate_bias;
    // Where each Mesa head's CG starts at decode (mn_step): 0 x0 = 0 (the default, as the training forward);
    // 1 the Jacobi guess q / diag(H_t + Lambda); 2 the head's previous solution x_{t-1}; 3 x_{t-1} scaled, 4 x_{t-1}
    // blended with the Jacobi guess, each by the A-norm-optimal coefficients (MN_MESA_WARM_*). 2-4 start at the
    // Jacobi guess at a sequence's first token. 5 and 6: the exact solve of the part of H_t held by the last 8 or 16
    // tokens (mn_mesa_step_woodbury; the decoding state then keeps those keys). Each stops at
    // ||r|| <= mesa_cg_tol ||q_t|| (for 0 that is ||r_0||). A state from mn_state_init fits the value it saw.
    int mesa_cg_warm;
} mn_config;

// One named tensor of the parameter table: the same table allocates, initialises, counts,
// saves and loads (tensor names are flash-linear-attention's).
typedef struct mn_tensor_info {
    char name[96];       // e.g. "model.layers.0.attn.q_proj.weight"
    size_t shape[4];     // PyTorch shape; Linear weights are [out, in]
    size_t ndim;
    size_t offset;       // into the parameter block, in elements
    size_t numel;
    int decay;           // 1: AdamW weight decay applies (matrices); 0: norms, embeddings, biases
    int init;            // MN__INIT_* (normal, ones, zeros, Mesa's lambda)
    int dtype;           // in a parsed safetensors file: MN_DT_F32/F64/BF16/F16 (offset is then in bytes)
} mn_tensor_info;

// AdamW hyper-parameters (zero means default; defaults are the MesaNet paper's: (0.9, 0.98), 1e-8, 0.1)
typedef struct mn_adamw {
    double beta1, beta2, eps, weight_decay;
} mn_adamw;

typedef struct mn_rng { uint64_t s; } mn_rng;

typedef struct mn_model {
    mn_config cfg;                // resolved (cfg.pattern points at pattern_buf)
    char pattern_buf[256];        // private copy of the mixer pattern
    int mixer[MN_MAX_LAYERS];     // index into the mixer table, per layer
    // parameter table and the three parameter-sized blocks
    mn_tensor_info* tensors;      // (n_tensors)
    size_t n_tensors;
    size_t n_params;              // P: elements in each parameter-sized block, alignment padding included
    size_t n_trainable;           // parameters the model has: the sum of the tensors' numel (P minus padding)
    mn_real* params;              // (P)
    mn_real* grads;               // (P)
    mn_real* opt_m;               // (P) AdamW first moment, lazily allocated with opt_v
    mn_real* opt_v;               // (P)
    uint64_t opt_step;            // AdamW steps taken
    size_t layer_first[MN_MAX_LAYERS]; // index of each layer's first tensor in the table
    size_t emb_idx, norm_idx, head_idx; // global tensors
    // activations: one block, laid out for (B,T) by the layout functions (>>layer)
    size_t act_B, act_T;          // shapes the activation block was laid out for
    size_t act_cap;               // elements allocated
    size_t tok_cap;               // (B*T) slots allocated for tokens and targets
    mn_real* acts;                // (act_cap)
    mn_real* dacts;               // (act_cap) gradients of the activations, same layout
    size_t act_layer[MN_MAX_LAYERS]; // where each layer's activations start (the model's own come first)
    int* tokens;                  // (B,T) copy of the last forward's inputs
    int* targets;                 // (B,T) copy of the last forward's targets (-1 = no loss)
    size_t n_valid;               // targets that carry loss in the last forward
    int have_loss;                // 1 after a forward with targets
} mn_model;

// Inference state for n_seq sequences decoded in lockstep (one allocation).
typedef struct mn_state {
    size_t n_seq;                 // number of sequences
    size_t pos;                   // tokens consumed so far
    size_t bytes;                 // size of mem
    mn_real* mem;                 // the allocation
    mn_real* layer[MN_MAX_LAYERS];// each layer's recurrent state / KV cache
    mn_real* x;                   // (n_seq, C) residual
    mn_real* scratch;             // (n_seq, scratch_per_seq) per-token temporaries
    size_t scratch_per_seq;
    mn_real* logits;              // (n_seq, V)
} mn_state;

// >>api
// At a glance (the prototypes follow, grouped, each group with its contract):
//   model    mn_config_resolve mn_model_init mn_model_free mn_forward mn_backward mn_zero_grad mn_logits
//            mn_clip_grad_norm mn_adamw_step mn_adamw_update mn_lr_schedule mn_flops_per_token
//   decode   mn_state_init mn_step mn_state_reset mn_state_free mn_state_cg_stats mn_sample
//   files    mn_save mn_load mn_config_parse_json mn_safetensors_parse
//   tasks    mn_task_find mn_task_list mn_task_sample mn_task_train_len
//   misc     mn_strerror mn_rng_seed mn_rng_u32 mn_rng_uniform mn_rng_normal
//   ops      mn_<op>_forward / _backward for matmul (+ _naive), embedding, rmsnorm, rmsnorm_gated, residual,
//            swiglu, sigmoid, logsigmoid, softplus, gelu, shortconv (+ _step), l2norm, rope, crossentropy;
//            mn_gemm
//   mixers   op            default form         other forms                 decode  workspace
//            attention     forward backward     _naive                      step    (att, datt, scores)
//            gla           forward backward     _recurrent                  step    work_size(_recurrent)
//            delta_rule    forward backward     _naive                      step    work_size
//            ssd           forward backward     _recurrent                  step    work_size(_recurrent)
//            rglru         forward backward     (the scan is the only form) step    work_size
//            mlstm         forward backward     _parallel, forward_recurrent step   work_size(_parallel)
//            slstm         forward backward     (the scan is the only form) step    work_size
//            mesa          forward backward     _recurrent                  step    work_size(_recurrent)
//                                                                       (+ step_warm: keeps x_t for the next CG;
//                                                                          step_woodbury: starts CG from the
//                                                                          last r tokens' exact solve)
MNDEF const char* mn_strerror(int code);

// --- rng (xorshift64*, as llm.c; seeded, deterministic across platforms) ---
MNDEF void mn_rng_seed(mn_rng* r, uint64_t seed);
MNDEF uint32_t mn_rng_u32(mn_rng* r);
MNDEF double mn_rng_uniform(mn_rng* r);         // [0,1)
MNDEF double mn_rng_normal(mn_rng* r);          // N(0,1), Box-Muller

// --- matmul: out (N,OC) = inp (N,IC) W^T + bias ---
MNDEF void mn_matmul_forward_naive(mn_real* out, const mn_real* inp, const mn_real* weight, const mn_real* bias,
                                   size_t N, size_t IC, size_t OC);
MNDEF void mn_matmul_forward(mn_real* out, const mn_real* inp, const mn_real* weight, const mn_real* bias, size_t N,
                             size_t IC, size_t OC);
MNDEF void mn_matmul_backward(mn_real* dinp, mn_real* dweight, mn_real* dbias, const mn_real* dout, const mn_real* inp,
                              const mn_real* weight, size_t N, size_t IC, size_t OC);
MNDEF void mn_gemm(int transA, int transB, size_t M, size_t Nn, size_t K, double alpha, const mn_real* A, size_t lda,
                   const mn_real* B, size_t ldb, double beta, mn_real* Cm, size_t ldc);

// --- elementwise and normalisation ops ---
MNDEF void mn_embedding_forward(mn_real* out, const int* tokens, const mn_real* wte, size_t N, size_t C);
MNDEF void mn_embedding_backward(mn_real* dwte, const mn_real* dout, const int* tokens, size_t N, size_t C);
MNDEF void mn_rmsnorm_forward(mn_real* out, mn_real* rstd, const mn_real* inp, const mn_real* weight, size_t N,
                              size_t C, double eps);
MNDEF void mn_rmsnorm_backward(mn_real* dinp, mn_real* dweight, const mn_real* dout, const mn_real* rstd,
                               const mn_real* inp, const mn_real* weight, size_t N, size_t C);
MNDEF void mn_residual_forward(mn_real* out, const mn_real* a, const mn_real* b, size_t n);
MNDEF void mn_residual_backward(mn_real* da, mn_real* db, const mn_real* dout, size_t n);
MNDEF void mn_swiglu_forward(mn_real* out, const mn_real* gate, const mn_real* up, size_t n);
MNDEF void mn_swiglu_backward(mn_real* dgate, mn_real* dup, const mn_real* dout, const mn_real* gate, const mn_real* up,
                              size_t n);
MNDEF void mn_sigmoid_forward(mn_real* out, const mn_real* inp, size_t n);
MNDEF void mn_sigmoid_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n);
MNDEF void mn_logsigmoid_forward(mn_real* out, const mn_real* inp, size_t n);
MNDEF void mn_logsigmoid_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n);
MNDEF void mn_softplus_forward(mn_real* out, const mn_real* inp, size_t n);
MNDEF void mn_softplus_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n);
MNDEF void mn_rmsnorm_gated_forward(mn_real* out, mn_real* rstd, const mn_real* inp, const mn_real* gate,
                                    const mn_real* weight, size_t N, size_t C, double eps);
MNDEF void mn_rmsnorm_gated_backward(mn_real* dinp, mn_real* dgate, mn_real* dweight, const mn_real* dout,
                                     const mn_real* rstd, const mn_real* inp, const mn_real* gate,
                                     const mn_real* weight, size_t N, size_t C);
MNDEF void mn_gelu_forward(mn_real* out, const mn_real* inp, size_t n);
MNDEF void mn_gelu_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n);
MNDEF void mn_shortconv_forward(mn_real* out, const mn_real* inp, const mn_real* weight, size_t B, size_t T, size_t Ch,
                                size_t K, int silu);
MNDEF void mn_shortconv_backward(mn_real* dinp, mn_real* dweight, const mn_real* dout, const mn_real* inp,
                                 const mn_real* weight, size_t B, size_t T, size_t Ch, size_t K, int silu);
MNDEF void mn_shortconv_step(mn_real* out, mn_real* state, const mn_real* inp, const mn_real* weight, size_t Ch,
                             size_t K, int silu);
MNDEF void mn_l2norm_forward(mn_real* out, mn_real* rstd, const mn_real* inp, size_t N, size_t D);
MNDEF void mn_l2norm_backward(mn_real* dinp, const mn_real* dout, const mn_real* out, const mn_real* rstd, size_t N,
                              size_t D);
MNDEF void mn_rope_forward(mn_real* out, const mn_real* inp, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                           double theta);
MNDEF void mn_rope_backward(mn_real* dinp, const mn_real* dout, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                            double theta);
MNDEF void mn_crossentropy_forward(mn_real* losses, const mn_real* logits, const int* targets, size_t N, size_t V,
                                   double softcap);
MNDEF void mn_crossentropy_backward(mn_real* dlogits, const mn_real* dlosses, const mn_real* logits, const int* targets,
                                    size_t N, size_t V, double softcap);

// --- causal / sliding-window softmax attention (window 0 = full causal) ---
MNDEF void mn_attention_forward_naive(mn_real* out, mn_real* lse, const mn_real* q, const mn_real* k, const mn_real* v,
                                      size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale);
MNDEF void mn_attention_backward_naive(mn_real* dq, mn_real* dk, mn_real* dv, const mn_real* dout, const mn_real* out,
                                       const mn_real* lse, const mn_real* q, const mn_real* k, const mn_real* v,
                                       size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale);
MNDEF void mn_attention_forward(mn_real* out, mn_real* att, const mn_real* q, const mn_real* k, const mn_real* v,
                                size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale);
MNDEF void mn_attention_backward(mn_real* dq, mn_real* dk, mn_real* dv, const mn_real* dout, const mn_real* att,
                                 const mn_real* q, const mn_real* k, const mn_real* v, size_t B, size_t T, size_t H,
                                 size_t Dk, size_t Dv, size_t window, double scale, mn_real* datt);
MNDEF void mn_attention_step(mn_real* out, mn_real* kcache, mn_real* vcache, const mn_real* q, const mn_real* k,
                             const mn_real* v, size_t pos, size_t cache_len, size_t H, size_t Dk, size_t Dv,
                             size_t window, double scale, mn_real* scores);


// --- linear attention / simple GLA / GLA: gate width G = 0 / 1 / Dk (see the top comment) ---
// Workspace, in elements of mn_real: the chunkwise forward and backward (one size serves both),
// and the recurrent backward.
MNDEF size_t mn_gla_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C);
MNDEF size_t mn_gla_work_size_recurrent(size_t T, size_t Dk, size_t Dv);
// out (B,T,H,Dv), ht (B,H,Dk,Dv) written (ht may be h0: updated in place); q,k (B,T,H,Dk),
// v (B,T,H,Dv), g (B,T,H,G) or NULL when G = 0, h0 (B,H,Dk,Dv) or NULL (zeros)
MNDEF void mn_gla_forward_recurrent(mn_real* out, mn_real* ht, const mn_real* q, const mn_real* k, const mn_real* v,
                                    const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk,
                                    size_t Dv, size_t G, double scale);
// dq,dk (B,T,H,Dk), dv (B,T,H,Dv), dg (B,T,H,G) or NULL, dh0 (B,H,Dk,Dv) or NULL: accumulated (+=);
// work (mn_gla_work_size_recurrent) scratch; dout (B,T,H,Dv); dht (B,H,Dk,Dv) or NULL (zeros);
// q,k,v,g,h0 as in the forward
MNDEF void mn_gla_backward_recurrent(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dh0,
                                     const mn_real* dout, const mn_real* dht, const mn_real* q, const mn_real* k,
                                     const mn_real* v, const mn_real* g, const mn_real* h0, size_t B, size_t T,
                                     size_t H, size_t Dk, size_t Dv, size_t G, double scale, mn_real* work);
// out (B,T,H,Dv), ht (B,H,Dk,Dv) written (ht may be h0); work (mn_gla_work_size) scratch; q,k (B,T,H,Dk),
// v (B,T,H,Dv), g (B,T,H,G) or NULL, h0 (B,H,Dk,Dv) or NULL; chunk length C >= 1 (any T)
MNDEF void mn_gla_forward(mn_real* out, mn_real* ht, const mn_real* q, const mn_real* k, const mn_real* v,
                          const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                          size_t G, double scale, size_t C, mn_real* work);
// as mn_gla_backward_recurrent, with work (mn_gla_work_size) and the chunk length C
MNDEF void mn_gla_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dh0, const mn_real* dout,
                           const mn_real* dht, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
                           const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
                           double scale, size_t C, mn_real* work);
// one token per sequence: out (B,H,Dv) written; state (B,H,Dk,Dv) read and updated; q,k (B,H,Dk),
// v (B,H,Dv), g (B,H,G) or NULL
MNDEF void mn_gla_step(mn_real* out, mn_real* state, const mn_real* q, const mn_real* k, const mn_real* v,
                       const mn_real* g, size_t B, size_t H, size_t Dk, size_t Dv, size_t G, double scale);

// --- DeltaNet / Gated DeltaNet (the gated delta rule; see >>delta_rule) ---
// --- gated delta rule (Gated DeltaNet); g == NULL is DeltaNet. Layout [B,T,H,D], state [B,H,Dk,Dv] ---
// q,k,dq,dk (B,T,H,Dk); v,out,dv,dout (B,T,H,Dv); beta,g,dbeta,dg (B,T,H); h0,ht,dh0,dht,dstate (B,H,Dk,Dv);
// saved: states (B,H,T,Dk,Dv) by the naive form, hs (B,H,NC,Dk,Dv) with NC = ceil(T/chunk) by the chunkwise
// form; work (mn_delta_rule_work_size). Step: q,k (B,H,Dk), v,out (B,H,Dv), beta,g (B,H), state (B,H,Dk,Dv).
MNDEF void mn_delta_rule_forward_naive(mn_real* out, mn_real* ht, mn_real* states, const mn_real* q, const mn_real* k,
                                       const mn_real* v, const mn_real* beta, const mn_real* g, const mn_real* h0,
                                       size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale);
MNDEF void mn_delta_rule_backward_naive(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dbeta, mn_real* dg,
                                        mn_real* dh0, mn_real* dstate, const mn_real* dout, const mn_real* dht,
                                        const mn_real* states, const mn_real* q, const mn_real* k, const mn_real* v,
                                        const mn_real* beta, const mn_real* g, size_t B, size_t T, size_t H, size_t Dk,
                                        size_t Dv, double scale);
MNDEF size_t mn_delta_rule_work_size(size_t B, size_t H, size_t Dk, size_t Dv, size_t chunk);
MNDEF void mn_delta_rule_forward(mn_real* out, mn_real* ht, mn_real* hs, const mn_real* q, const mn_real* k,
                                 const mn_real* v, const mn_real* beta, const mn_real* g, const mn_real* h0, size_t B,
                                 size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, mn_real* work);
MNDEF void mn_delta_rule_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dbeta, mn_real* dg, mn_real* dh0,
                                  const mn_real* dout, const mn_real* dht, const mn_real* hs, const mn_real* q,
                                  const mn_real* k, const mn_real* v, const mn_real* beta, const mn_real* g, size_t B,
                                  size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, mn_real* work);
MNDEF void mn_delta_rule_step(mn_real* out, mn_real* state, const mn_real* q, const mn_real* k, const mn_real* v,
                              const mn_real* beta, const mn_real* g, size_t B, size_t H, size_t Dk, size_t Dv,
                              double scale);


// --- Mamba-2 SSD core (see >>ssd): per head h_t = a_t h_{t-1} + X_t B_t^T (P,N), y_t = h_t C_t ---
// amode: what A holds. MN_SSD_LOG_DECAY: the log-decay A*dt, a_t = exp(A_t) (Mamba-2).
// MN_SSD_TRANSITION: the transition itself, a_t = A_t of any sign (the [-1,1] variant); recurrent
// form and step only, the chunkwise form takes log-decays.
enum { MN_SSD_LOG_DECAY = 0, MN_SSD_TRANSITION = 1 };
// Workspace, in elements of mn_real: the chunkwise forward and backward (one size serves both, chunk
// length C), and the recurrent backward.
MNDEF size_t mn_ssd_work_size(size_t B, size_t T, size_t H, size_t P, size_t N, size_t C);
MNDEF size_t mn_ssd_work_size_recurrent(size_t T, size_t P, size_t N);
// y (B,T,H,P), ht (B,H,P,N) written (ht may be h0: updated in place); X (B,T,H,P), A (B,T,H),
// Bm,Cm (B,T,H,N), h0 (B,H,P,N) or NULL (zeros)
MNDEF void mn_ssd_forward_recurrent(mn_real* y, mn_real* ht, const mn_real* X, const mn_real* A, const mn_real* Bm,
                                    const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P,
                                    size_t N, int amode);
// dX (B,T,H,P), dA (B,T,H) or NULL, dB,dC (B,T,H,N), dh0 (B,H,P,N) or NULL: accumulated (+=);
// work (mn_ssd_work_size_recurrent) scratch; dy (B,T,H,P); dht (B,H,P,N) or NULL (zeros);
// X,A,Bm,Cm,h0 as in the forward. dA is dL/dA for what A holds (log-decay or transition).
MNDEF void mn_ssd_backward_recurrent(mn_real* dX, mn_real* dA, mn_real* dB, mn_real* dC, mn_real* dh0,
                                     const mn_real* dy, const mn_real* dht, const mn_real* X, const mn_real* A,
                                     const mn_real* Bm, const mn_real* Cm, const mn_real* h0, size_t B, size_t T,
                                     size_t H, size_t P, size_t N, int amode, mn_real* work);
// chunkwise, log-decays only: y (B,T,H,P), ht (B,H,P,N) written (ht may be h0); work
// (mn_ssd_work_size) scratch; X,A,Bm,Cm,h0 as above; chunk length C >= 1 (any T)
MNDEF void mn_ssd_forward(mn_real* y, mn_real* ht, const mn_real* X, const mn_real* A, const mn_real* Bm,
                          const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N,
                          size_t C, mn_real* work);
// as mn_ssd_backward_recurrent (log-decays), with work (mn_ssd_work_size) and the chunk length C
MNDEF void mn_ssd_backward(mn_real* dX, mn_real* dA, mn_real* dB, mn_real* dC, mn_real* dh0, const mn_real* dy,
                           const mn_real* dht, const mn_real* X, const mn_real* A, const mn_real* Bm, const mn_real* Cm,
                           const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C,
                           mn_real* work);
// one token per sequence: y (B,H,P) written; state (B,H,P,N) read and updated; X (B,H,P), A (B,H),
// Bm,Cm (B,H,N)
MNDEF void mn_ssd_step(mn_real* y, mn_real* state, const mn_real* X, const mn_real* A, const mn_real* Bm,
                       const mn_real* Cm, size_t B, size_t H, size_t P, size_t N, int amode);

// --- RG-LRU (Hawk / Griffin's recurrence, see >>rglru), width W, NH gate blocks of W/NH channels ---
// Resets: segment_pos (B,T) given: h restarts (h_t = x_t gx_t, h0 ignored) wherever segment_pos == 0,
// as recurrentgemma. segment_pos NULL: a reset at t = 0 only when h0 is NULL; a given h0 continues a
// sequence (no reset). So NULL h0 and a zero h0 differ at t = 0.
MNDEF size_t mn_rglru_work_size(size_t B, size_t T, size_t W); // elements: the gates, and the backward's work
// y (B,T,W), ht (B,W) written (ht may be h0); gates (2,B,T,W) written and saved for the backward
// (the input gate, then the recurrence gate); x (B,T,W); a_param (W); wx,wa (NH,W/NH,W/NH);
// bx,ba (NH,W/NH); h0 (B,W) or NULL; segment_pos (B,T) or NULL; c the constant (8 in Griffin)
MNDEF void mn_rglru_forward(mn_real* y, mn_real* ht, mn_real* gates, const mn_real* x, const mn_real* a_param,
                            const mn_real* wx, const mn_real* bx, const mn_real* wa, const mn_real* ba,
                            const mn_real* h0, const int* segment_pos, size_t B, size_t T, size_t W, size_t NH,
                            double c);
// dx (B,T,W), da_param (W), dwx,dwa (NH,W/NH,W/NH), dbx,dba (NH,W/NH), dh0 (B,W): accumulated (+=),
// any of them but dx may be NULL; work (mn_rglru_work_size) scratch; dy (B,T,W); dht (B,W) or NULL;
// y, gates: what the forward wrote; the rest as in the forward
MNDEF void mn_rglru_backward(mn_real* dx, mn_real* da_param, mn_real* dwx, mn_real* dbx, mn_real* dwa, mn_real* dba,
                             mn_real* dh0, const mn_real* dy, const mn_real* dht, const mn_real* y,
                             const mn_real* gates, const mn_real* x, const mn_real* a_param, const mn_real* wx,
                             const mn_real* wa, const mn_real* h0, const int* segment_pos, size_t B, size_t T, size_t W,
                             size_t NH, double c, mn_real* work);
// one token per sequence: y (B,W) written; state (B,W) read and updated; work (mn_rglru_work_size(B,1,W))
// scratch; x (B,W); segment_pos (B) or NULL (no reset: pass 0 for a sequence's first token)
MNDEF void mn_rglru_step(mn_real* y, mn_real* state, const mn_real* x, const mn_real* a_param, const mn_real* wx,
                         const mn_real* bx, const mn_real* wa, const mn_real* ba, const int* segment_pos, size_t B,
                         size_t W, size_t NH, double c, mn_real* work);


// --- xLSTM mLSTM (matrix memory; see >>mlstm). Layout [B,T,H,D] as fla; gates i, f are pre-activations ---
// q,k,dq,dk (B,T,H,Dk); v,out,dv,dout (B,T,H,Dv); ig,fg,di,df (B,T,H) input / forget gate pre-activations;
// norm, stab (B,T,H) per-token outputs (the normaliser and the stabiliser m_t; either may be NULL);
// states C (B,H,Dk,Dv) K-first, n (B,H,Dk), m (B,H); C0,n0,m0 the initial state (NULL: zeros).
// scale multiplies q (the reference uses Dk^-1/2); eps is added to the normaliser (reference 1e-6).
// mode picks the backward: MN_MLSTM_BW_EXACT, the gradient of the forward as written (through the
// normaliser and the stabiliser); MN_MLSTM_BW_DETACH, mlstm_kernels' hand-written backward, which holds
// the normaliser and the stabiliser constant (right only when a scale-invariant per-head norm follows).
enum { MN_MLSTM_BW_EXACT = 0, MN_MLSTM_BW_DETACH = 1 };
// parallel form (T x T, no initial state): work (mn_mlstm_work_size_parallel) serves forward and backward
MNDEF size_t mn_mlstm_work_size_parallel(size_t B, size_t T, size_t H);
MNDEF void mn_mlstm_forward_parallel(mn_real* out, mn_real* norm, mn_real* stab, const mn_real* q, const mn_real* k,
                                     const mn_real* v, const mn_real* ig, const mn_real* fg, size_t B, size_t T,
                                     size_t H, size_t Dk, size_t Dv, double scale, double eps, mn_real* work);
MNDEF void mn_mlstm_backward_parallel(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* di, mn_real* df,
                                      const mn_real* dout, const mn_real* q, const mn_real* k, const mn_real* v,
                                      const mn_real* ig, const mn_real* fg, size_t B, size_t T, size_t H, size_t Dk,
                                      size_t Dv, double scale, double eps, int mode, mn_real* work);
// recurrent form (forward only): Ct, nt, mt written (required: they hold the running state; they may be
// C0, n0, m0, updated in place). The step is the recurrent form with T = 1: one token per sequence,
// out (B,H,Dv), q,k (B,H,Dk), v (B,H,Dv), ig,fg (B,H), C, n, m read and updated.
MNDEF void mn_mlstm_forward_recurrent(mn_real* out, mn_real* norm, mn_real* stab, mn_real* Ct, mn_real* nt, mn_real* mt,
                                      const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig,
                                      const mn_real* fg, const mn_real* C0, const mn_real* n0, const mn_real* m0,
                                      size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps);
MNDEF void mn_mlstm_step(mn_real* out, mn_real* C, mn_real* n, mn_real* m, const mn_real* q, const mn_real* k,
                         const mn_real* v, const mn_real* ig, const mn_real* fg, size_t B, size_t H, size_t Dk,
                         size_t Dv, double scale, double eps);
// chunkwise form, chunk length C >= 1 (any T): work (mn_mlstm_work_size) serves forward and backward.
// Ct, nt, mt (final state) may be NULL, or C0, n0, m0. The backward recomputes the forward (nothing is
// saved); dC0 (B,H,Dk,Dv), dn0 (B,H,Dk) may be NULL; m0 gets no gradient; the final state carries none.
MNDEF size_t mn_mlstm_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C);
MNDEF void mn_mlstm_forward(mn_real* out, mn_real* norm, mn_real* stab, mn_real* Ct, mn_real* nt, mn_real* mt,
                            const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig, const mn_real* fg,
                            const mn_real* C0, const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t H,
                            size_t Dk, size_t Dv, double scale, double eps, size_t C, mn_real* work);
MNDEF void mn_mlstm_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* di, mn_real* df, mn_real* dC0,
                             mn_real* dn0, const mn_real* dout, const mn_real* q, const mn_real* k, const mn_real* v,
                             const mn_real* ig, const mn_real* fg, const mn_real* C0, const mn_real* n0,
                             const mn_real* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale,
                             double eps, size_t C, int mode, mn_real* work);

// --- xLSTM sLSTM (scalar memory, block-diagonal recurrence; see >>slstm). Hd = NH*Dh units ---
// x,dx (B,T,4*Hd) input pre-activations W x_t, gate-major: index g*Hd + h*Dh + j, g = 0..3 = i, f, z, o;
// R,dR (NH,4*Dh,Dh) per-head recurrent weights, R[h][g*Dh+j][i] ([out,in] as a Linear); b,db (4*Hd) indexed
// as x; y,c,n,m (B,T,Hd) the states after each step (all four written by the forward, read by the
// backward); dy (B,T,Hd) upstream; y0,c0,n0,m0 (B,Hd) initial states or NULL (zeros); dy0,dc0,dn0 (B,Hd)
// or NULL; work (mn_slstm_work_size) scratch. Step: x (B,4*Hd), y,c,n,m (B,Hd) read and updated.
MNDEF size_t mn_slstm_work_size(size_t B, size_t NH, size_t Dh);
MNDEF void mn_slstm_forward(mn_real* y, mn_real* c, mn_real* n, mn_real* m, const mn_real* x, const mn_real* R,
                            const mn_real* b, const mn_real* y0, const mn_real* c0, const mn_real* n0,
                            const mn_real* m0, size_t B, size_t T, size_t NH, size_t Dh, mn_real* work);
MNDEF void mn_slstm_backward(mn_real* dx, mn_real* dR, mn_real* db, mn_real* dy0, mn_real* dc0, mn_real* dn0,
                             const mn_real* dy, const mn_real* y, const mn_real* c, const mn_real* n, const mn_real* m,
                             const mn_real* x, const mn_real* R, const mn_real* b, const mn_real* y0, const mn_real* c0,
                             const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t NH, size_t Dh,
                             mn_real* work);
MNDEF void mn_slstm_step(mn_real* y, mn_real* c, mn_real* n, mn_real* m, const mn_real* x, const mn_real* R,
                         const mn_real* b, size_t B, size_t NH, size_t Dh, mn_real* work);

// --- the Mesa layer's op (von Oswald et al. 2025): per head, with H_t = g H + b k k^T, S_t = g S + b k v^T,
//     x_t = (H_t + diag lambda)^-1 q_t (CG or exact), o_t = S_t^T x_t; see >>mesa ---
enum { MN_MESA_CG = 0, MN_MESA_EXACT = 1 };
typedef struct mn_mesa_opts {
    int solver;          // MN_MESA_CG (default) or MN_MESA_EXACT (Cholesky per token)
    int cg_iters;        // CG iterations k_max; 0 = default 30; negative = no solve (x = q: GLA)
    double cg_tol;       // stop a system when ||r|| <= cg_tol ||r_0|| (0 = always run cg_iters)
    int fla;             // 1: fla's arithmetic, 1e-5 added to CG's alpha and beta denominators
    int jacobi;          // 1: start at x0 = q / (diag(H_t) + lambda) (fla decode); 0: x0 = 0
    size_t chunk;        // chunk length C of the chunkwise form, default 64
    // warm start (the step and the recurrent form; the chunkwise form solves a chunk's tokens together and
    // ignores it): MN_MESA_COLD (0) starts as jacobi says; the others start from the same head's previous
    // solution x_{t-1} (a token with none starts as jacobi says), and measure the tolerance against ||q_t||
    // instead of ||r_0|| (a good guess has a small r_0: relative to it the stop would ask for more accuracy)
    int warm;
} mn_mesa_opts;
// MN_MESA_WARM: x0 = x_{t-1}; MN_MESA_WARM_SCALED: x0 = c x_{t-1} with the c that minimises the error's A-norm;
// MN_MESA_WARM_BLEND: x0 = a x_{t-1} + b x_J (x_J the Jacobi guess) with the (a, b) that minimise it
enum { MN_MESA_COLD = 0, MN_MESA_WARM = 1, MN_MESA_WARM_SCALED = 2, MN_MESA_WARM_BLEND = 3 };
// Workspace in elements: the chunkwise forward and backward (one size serves both), and the recurrent
// forward, backward and step (one size serves all three; the step needs it for T = 1).
MNDEF size_t mn_mesa_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o);
MNDEF size_t mn_mesa_work_size_recurrent(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o);
MNDEF void mn_mesa_step(mn_real* out, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q, const mn_real* k,
                        const mn_real* v, const mn_real* g, const mn_real* beta, const mn_real* lamb, size_t H,
                        size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work);
// the step with the previous solutions kept: xs (H,Dk) in/out (a zero row: that head has none yet)
MNDEF void mn_mesa_step_warm(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q,
                             const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
                             const mn_real* lamb, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o,
                             mn_real* work);
// the step with CG started from the exact solve of the last r tokens' part of H_t (Woodbury; >>mesa):
// ring (H, r*(Dk+2)+1) in/out, each head's window (all zeros: a new sequence); xs (H,Dk) receives x_t (may be NULL)
MNDEF void mn_mesa_step_woodbury(mn_real* out, mn_real* xs, mn_real* ring, int* iters, mn_real* hkk, mn_real* hkv,
                                 const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
                                 const mn_real* beta, const mn_real* lamb, size_t H, size_t Dk, size_t Dv, size_t r,
                                 const mn_mesa_opts* o, mn_real* work);
MNDEF void mn_mesa_forward_recurrent(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv,
                                     const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
                                     const mn_real* beta, const mn_real* lamb, size_t B, size_t T, size_t H, size_t Dk,
                                     size_t Dv, const mn_mesa_opts* o, mn_real* work);
MNDEF void mn_mesa_backward_recurrent(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dbeta,
                                      mn_real* dlamb, mn_real* dhkk0, mn_real* dhkv0, const mn_real* dout,
                                      const mn_real* dhkk, const mn_real* dhkv, const mn_real* xs, const mn_real* q,
                                      const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
                                      const mn_real* lamb, const mn_real* hkk0, const mn_real* hkv0, size_t B, size_t T,
                                      size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work);
MNDEF void mn_mesa_forward(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q,
                           const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
                           const mn_real* lamb, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                           const mn_mesa_opts* o, mn_real* work);
MNDEF void mn_mesa_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dbeta, mn_real* dlamb,
                            mn_real* dhkk0, mn_real* dhkv0, const mn_real* dout, const mn_real* dhkk,
                            const mn_real* dhkv, const mn_real* xs, const mn_real* q, const mn_real* k,
                            const mn_real* v, const mn_real* g, const mn_real* beta, const mn_real* lamb,
                            const mn_real* hkk0, const mn_real* hkv0, size_t B, size_t T, size_t H, size_t Dk,
                            size_t Dv, const mn_mesa_opts* o, mn_real* work);

// --- model lifecycle, training, inference ---
MNDEF int mn_config_resolve(mn_config* out, const mn_config* in);
MNDEF int mn_model_init(mn_model* m, const mn_config* cfg);
MNDEF void mn_model_free(mn_model* m);
MNDEF size_t mn_flops_per_token(const mn_model* m, size_t T); // forward matmul FLOPs (2 per multiply-add)
MNDEF int mn_forward(mn_model* m, const int* tokens, const int* targets, size_t B, size_t T, mn_real* loss);
MNDEF const mn_real* mn_logits(const mn_model* m); // (B,T,V) logits of the last forward (NULL before the first)
MNDEF void mn_zero_grad(mn_model* m);
MNDEF int mn_backward(mn_model* m);
MNDEF double mn_clip_grad_norm(mn_model* m, double max_norm); // returns the norm before clipping (NaN if non-finite)
MNDEF int mn_adamw_step(mn_model* m, double lr, const mn_adamw* hp);
MNDEF void mn_adamw_update(mn_real* p, const mn_real* g, mn_real* m, mn_real* v, size_t n, double lr, double beta1,
                           double beta2, double eps, double wd, uint64_t t);
MNDEF double mn_lr_schedule(size_t step, size_t warmup, size_t total, double lr_max, double lr_min);
// the state's size follows m->cfg as it is now (cfg.mesa_cg_warm 5, 6 add the Woodbury window): after changing it,
// init the state again (mn_step refuses a state of another size with MN_ERR_STATE)
MNDEF int mn_state_init(mn_state* s, const mn_model* m, size_t n_seq);
MNDEF void mn_state_reset(mn_state* s);
MNDEF void mn_state_free(mn_state* s);
MNDEF int mn_step(mn_model* m, mn_state* s, const int* tokens, mn_real* logits); // tokens (n_seq), logits (n_seq,V)
// mean CG iterations per (token, head, Mesa layer) since the last reset; *solves the systems solved
MNDEF double mn_state_cg_stats(const mn_model* m, const mn_state* s, double* solves);
MNDEF int mn_sample(const mn_real* logits, size_t V, double temperature, size_t top_k, double top_p, mn_rng* rng,
                    mn_real* scratch);

// --- checkpoints: <dir>/model.safetensors + <dir>/config.json (+ <dir>/optimizer.safetensors) ---
// step, rng_state and extra[] are the caller's; notes (one line of text, NUL-terminated) too, e.g. the
// training settings a resume must reuse. mn_save stores them with the AdamW moments, mn_load returns them.
typedef struct mn_train_meta { uint64_t step; uint64_t rng_state; double extra[4]; char notes[1024]; } mn_train_meta;
MNDEF int mn_save(const mn_model* m, const char* dir, const mn_train_meta* meta);
MNDEF int mn_load(mn_model* m, const char* dir, mn_train_meta* meta); // m uninitialised: builds it from config.json
MNDEF int mn_config_parse_json(mn_config* cfg, const char* json, size_t len, char* pattern_buf, size_t pattern_cap);
MNDEF int mn_safetensors_parse(const unsigned char* buf, size_t len, mn_tensor_info* out, size_t max_out, size_t* n_out,
                               size_t* data_start, char* meta_json, size_t meta_cap);

// --- synthetic length-generalisation tasks (the generators and their grammars are in >>tasks) ---
// An example is x (len) input tokens and y (len) targets: the model's output at position t is
// scored against y[t] (what should come after x[0..t]); y[t] = -1 is not scored. Every example
// starts with a BOS token; its length n counts every input token (BOS, content, the query token
// such as '=' whose output is the answer). Token 0 is PAD in every task; x[n..len) = PAD, y = -1.
typedef enum { MN_METRIC_TOKEN = 0, MN_METRIC_SEQUENCE = 1, MN_METRIC_FINAL = 2 } mn_metric;
typedef struct mn_task {
    const char* name;      // "parity", "modarith", "modarith_brackets", "z5", "s3", "majority",
                           // "majority_count", "anbn", "anbncn", "mqar"
    int vocab_size;        // tokens 0..vocab_size-1; token 0 is PAD in every task
    int metric;            // main metric (mn_metric): FINAL = accuracy at the last scored position of each
                           // sequence; TOKEN = over all scored positions; SEQUENCE = every scored position right
    double chance;         // chance level of the main metric (uniform guess among the valid answers; 0 for
                           // SEQUENCE metrics, where it is negligible)
    size_t min_len;        // shortest total length the training sampler draws (z5 and mqar train at
                           // max_len only, as in their published setting: for them it is the smallest
                           // max_len allowed)
    const char* doc;       // one line: vocabulary, scored positions, length meaning
} mn_task;
MNDEF const mn_task* mn_task_find(const char* name);      // NULL if unknown (or NULL)
MNDEF const mn_task* mn_task_list(size_t* n);             // all tasks, in the order above; *n = 10
// One example of total length n <= len (n as close to len as the task's grammar allows; anbn and
// anbncn draw k from the upper half of what fits, so n is in (len/2, len]) into
// x[0..len) (inputs) and y[0..len) (targets, -1 = not scored). Positions n..len-1 are x=0 (PAD),
// y=-1. Returns n; 0 on bad input (NULL argument, unknown task, len below the shortest example of
// the task: 2 parity, z5, s3; 3 modarith, modarith_brackets, majority, majority_count; 4 anbn;
// 5 anbncn, mqar), and then writes nothing. Deterministic given *rng; no allocation; O(len).
MNDEF size_t mn_task_sample(const mn_task* task, mn_rng* rng, size_t len, int* x, int* y);
// A training length for variable-length training: uniform on the task's valid lengths in
// [min_len, max_len] (odd ones for modarith, 2k+2 for anbn, 3k+2 for anbncn); always max_len for
// z5 and mqar. 0 on bad input (NULL, max_len < min_len).
MNDEF size_t mn_task_train_len(const mn_task* task, mn_rng* rng, size_t max_len);

#ifdef __cplusplus
}
#endif
#endif // MESANET_H

// >>impl
// ===============================================================================================
// Implementation. Everything below is compiled once, in the file that defines MESANET_IMPLEMENTATION.
// ===============================================================================================
#if defined(MESANET_IMPLEMENTATION) && !defined(MESANET_IMPLEMENTATION_DONE)
#define MESANET_IMPLEMENTATION_DONE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#if defined(MN_MALLOC) && defined(MN_FREE)
#elif !defined(MN_MALLOC) && !defined(MN_FREE)
#define MN_MALLOC(sz) malloc(sz)
#define MN_FREE(p) free(p)
#else
#error "mesanet.h: define both MN_MALLOC and MN_FREE, or neither"
#endif
#ifndef MN_ASSERT
#include <assert.h>
#define MN_ASSERT(x) assert(x)
#endif
#ifndef MN_LOG
#define MN_LOG(...) fprintf(stderr, __VA_ARGS__)
#endif
#define MN_UNUSED(x) ((void)(x))
// restrict for the few hot loops whose pointers never alias (C99 keyword; a common extension in C++)
#ifdef __cplusplus
#define MN__RESTRICT __restrict
#else
#define MN__RESTRICT restrict
#endif
// OpenMP: with -fopenmp, loops marked MN__OMP_FOR split their iterations statically over threads
// (static, so results do not depend on scheduling); without it the macro is empty.
#ifdef _OPENMP
#define MN__OMP_FOR _Pragma("omp parallel for schedule(static)")
#else
#define MN__OMP_FOR
#endif

#ifdef MN_USE_BLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

// >>util
// defines: mn_strerror, rng, mn__calloc, small math helpers

MNDEF const char* mn_strerror(int code) {
    switch (code) {
    case MN_OK: return "ok";
    case MN_ERR_CONFIG: return "invalid configuration";
    case MN_ERR_ALLOC: return "out of memory";
    case MN_ERR_IO: return "i/o error";
    case MN_ERR_FORMAT: return "corrupt, truncated or mismatching file";
    case MN_ERR_RANGE: return "value out of range";
    case MN_ERR_NAN: return "non-finite loss or gradient";
    case MN_ERR_STATE: return "call out of order";
    default: return "unknown error";
    }
}

// xorshift64* (Vigna): tiny, fast, and identical on every platform, so seeds reproduce runs.
MNDEF void mn_rng_seed(mn_rng* r, uint64_t seed) { r->s = seed ? seed : 0x9E3779B97F4A7C15ull; }
MNDEF uint32_t mn_rng_u32(mn_rng* r) {
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}
MNDEF double mn_rng_uniform(mn_rng* r) { return (mn_rng_u32(r) >> 8) / 16777216.0; }
MNDEF double mn_rng_normal(mn_rng* r) {
    // Box-Muller; u1 is kept away from 0 so log() is finite.
    double u1 = (mn_rng_u32(r) + 1.0) / 4294967297.0, u2 = mn_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void* mn__calloc(size_t n, size_t size) {
    if (n != 0 && size > (size_t)-1 / n) return NULL;       // overflow guard
    size_t bytes = n * size;
    void* p = MN_MALLOC(bytes > 0 ? bytes : 1);
    if (p) memset(p, 0, bytes);
    return p;
}
static double mn__sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
// Dot product with 8 independent partial sums: the adds no longer wait on each other, and the
// compiler can keep the 8 lanes in vector registers (a fixed summation order, so still deterministic).
static mn_real mn__dot(const mn_real* MN__RESTRICT a, const mn_real* MN__RESTRICT b, size_t n) {
    mn_real s[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
    size_t i, j;
    for (i = 0; i + 8 <= n; i += 8)
        for (j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}
// exp in the element type: hot loops (softmax rows, SwiGLU, cross-entropy) use expf in the float
// build, which is several times cheaper than exp and exact to float rounding.
#ifdef MESANET_DOUBLE
#define mn__exp(x) exp(x)
#else
#define mn__exp(x) expf((float)(x))
#endif

// >>matmul
// defines: mn_gemm, mn_matmul_forward_naive, mn_matmul_forward, mn_matmul_backward
// This is the only section that knows about BLAS.

// Row-major C(M,Nn) = alpha * op(A)(M,K) op(B)(K,Nn) + beta * C, op = transpose when trans != 0.
// beta == 0 overwrites C (never reads it), so C may start as garbage.
#ifdef MN_USE_BLAS
// One BLAS call (row-major, as mn_gemm).
static void mn__blas_gemm(int transA, int transB, size_t M, size_t Nn, size_t K, double alpha, const mn_real* A,
                          size_t lda, const mn_real* B, size_t ldb, double beta, mn_real* Cm, size_t ldc) {
    if (M == 1 && transB) {
        // one row times a weight matrix (the per-token step): as gemv, since gemm would first
        // copy (pack) the whole matrix for a single row
#ifdef MESANET_DOUBLE
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)Nn, (int)K, alpha, B, (int)ldb, A, transA ? (int)lda : 1, beta,
                    Cm, 1);
#else
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)Nn, (int)K, (float)alpha, B, (int)ldb, A, transA ? (int)lda : 1,
                    (float)beta, Cm, 1);
#endif
        return;
    }
#ifdef MESANET_DOUBLE
    cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, (int)M, (int)Nn,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, Cm, (int)ldc);
#else
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, (int)M, (int)Nn,
                (int)K, (float)alpha, A, (int)lda, B, (int)ldb, (float)beta, Cm, (int)ldc);
#endif
}
#ifdef _OPENMP
extern void openblas_set_num_threads(int);
#endif
#endif

MNDEF void mn_gemm(int transA, int transB, size_t M, size_t Nn, size_t K, double alpha, const mn_real* A, size_t lda,
                   const mn_real* B, size_t ldb, double beta, mn_real* Cm, size_t ldc) {
    if (M == 0 || Nn == 0) return;
#ifdef MN_USE_BLAS
#ifdef _OPENMP
    // With OpenMP the threads are ours: OpenBLAS runs single-threaded and the rows of C split over
    // the team (inside an already parallel region, e.g. attention over heads, the team is one
    // thread). Two thread pools taking turns cost a quarter of the time on 2 cores.
    static int blas_single = 0;
    if (!blas_single) { openblas_set_num_threads(1); blas_single = 1; }
    // a team only for products worth it: waking threads costs microseconds, and some callers
    // (the sLSTM backward: 64+ rows, inner size 1) make tens of thousands of tiny products
    if (M >= 64 && (double)M * (double)Nn * (double)K >= 65536.0 && !omp_in_parallel()) {
        #pragma omp parallel
        {
            size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
            size_t i0 = M * id / nt, i1 = M * (id + 1) / nt;
            if (i1 > i0)
                mn__blas_gemm(transA, transB, i1 - i0, Nn, K, alpha, transA ? A + i0 : A + i0 * lda, lda, B, ldb, beta,
                              Cm + i0 * ldc, ldc);
        }
        return;
    }
#endif
    mn__blas_gemm(transA, transB, M, Nn, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
#else
    // Portable fallback: i-p-j loop order so the innermost loop runs along a contiguous row of B
    // when B is not transposed; rows of C are independent, so they split across threads.
    long long i;
    MN__OMP_FOR
    for (i = 0; i < (long long)M; i++) {
        mn_real* c = Cm + (size_t)i * ldc;
        size_t j, p;
        for (j = 0; j < Nn; j++) c[j] = beta == 0.0 ? (mn_real)0 : (mn_real)(beta * c[j]);
        if (!transB) {
            for (p = 0; p < K; p++) {
                mn_real a = (mn_real)(alpha * (transA ? A[p * lda + (size_t)i] : A[(size_t)i * lda + p]));
                const mn_real* b = B + p * ldb;
                for (j = 0; j < Nn; j++) c[j] += a * b[j];
            }
        } else {
            for (j = 0; j < Nn; j++) {
                const mn_real* b = B + j * ldb;
                mn_real acc = 0;
                for (p = 0; p < K; p++) acc += (transA ? A[p * lda + (size_t)i] : A[(size_t)i * lda + p]) * b[p];
                c[j] += (mn_real)(alpha * acc);
            }
        }
    }
#endif
}

// out (N,OC) = inp (N,IC) . weight (OC,IC)^T + bias (OC). The plain triple loop, kept as the
// reference every faster matmul is tested against. Accumulates in double.
MNDEF void mn_matmul_forward_naive(mn_real* out, const mn_real* inp, const mn_real* weight, const mn_real* bias,
                                   size_t N, size_t IC, size_t OC) {
    size_t n, o, i;
    for (n = 0; n < N; n++)
        for (o = 0; o < OC; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (i = 0; i < IC; i++) acc += (double)inp[n * IC + i] * weight[o * IC + i];
            out[n * OC + o] = (mn_real)acc;
        }
}

// Same contract as the naive form, through mn_gemm (BLAS when MN_USE_BLAS).
MNDEF void mn_matmul_forward(mn_real* out, const mn_real* inp, const mn_real* weight, const mn_real* bias, size_t N,
                             size_t IC, size_t OC) {
    mn_gemm(0, 1, N, OC, IC, 1.0, inp, IC, weight, IC, 0.0, out, OC);
    if (bias) {
        size_t n, o;
        for (n = 0; n < N; n++) for (o = 0; o < OC; o++) out[n * OC + o] += bias[o];
    }
}

// forward: out = inp W^T + b, so: dinp += dout W ; dW += dout^T inp ; db += column sums of dout.
// Any of dinp, dweight, dbias may be NULL (not needed).
MNDEF void mn_matmul_backward(mn_real* dinp, mn_real* dweight, mn_real* dbias, const mn_real* dout, const mn_real* inp,
                              const mn_real* weight, size_t N, size_t IC, size_t OC) {
    if (dinp) mn_gemm(0, 0, N, IC, OC, 1.0, dout, OC, weight, IC, 1.0, dinp, IC);
    if (dweight) mn_gemm(1, 0, OC, IC, N, 1.0, dout, OC, inp, IC, 1.0, dweight, IC);
    if (dbias) {
        size_t n, o;
        for (n = 0; n < N; n++) for (o = 0; o < OC; o++) dbias[o] += dout[n * OC + o];
    }
}

// >>ops
// defines: embedding, rmsnorm, residual, swiglu, shortconv, l2norm, rope, crossentropy (pairs)

// out (N,C) = wte (V,C)[tokens (N)]. Token ids are validated by the caller (mn_forward).
MNDEF void mn_embedding_forward(mn_real* out, const int* tokens, const mn_real* wte, size_t N, size_t C) {
    size_t n;
    for (n = 0; n < N; n++) memcpy(out + n * C, wte + (size_t)tokens[n] * C, C * sizeof(mn_real));
}
MNDEF void mn_embedding_backward(mn_real* dwte, const mn_real* dout, const int* tokens, size_t N, size_t C) {
    size_t n, c;
    for (n = 0; n < N; n++) {
        mn_real* d = dwte + (size_t)tokens[n] * C;
        for (c = 0; c < C; c++) d[c] += dout[n * C + c];
    }
}

// RMSNorm (Llama, fla): out = inp * rstd * weight, rstd = 1/sqrt(mean(inp^2) + eps).
// Saves rstd (N) for the backward.
MNDEF void mn_rmsnorm_forward(mn_real* out, mn_real* rstd, const mn_real* inp, const mn_real* weight, size_t N,
                              size_t C, double eps) {
    long long n;
    MN__OMP_FOR
    for (n = 0; n < (long long)N; n++) {
        const mn_real* x = inp + (size_t)n * C;
        mn_real* y = out + (size_t)n * C;
        double ss = 0.0; size_t c;
        for (c = 0; c < C; c++) ss += (double)x[c] * x[c];
        double r = 1.0 / sqrt(ss / (double)C + eps);
        for (c = 0; c < C; c++) y[c] = (mn_real)(x[c] * r * weight[c]);
        rstd[n] = (mn_real)r;
    }
}
// forward: y = w * x * r with r = (mean(x^2)+eps)^-1/2, so with xh = x*r and g = dy*w:
// dx = r * (g - xh * mean(g * xh)) ; dw += dy * xh
MNDEF void mn_rmsnorm_backward(mn_real* dinp, mn_real* dweight, const mn_real* dout, const mn_real* rstd,
                               const mn_real* inp, const mn_real* weight, size_t N, size_t C) {
    long long n, c;
    MN__OMP_FOR                                  // pass 1: rows are independent
    for (n = 0; n < (long long)N; n++) {
        const mn_real* x = inp + (size_t)n * C; const mn_real* dy = dout + (size_t)n * C;
        mn_real* dx = dinp + (size_t)n * C;
        double r = rstd[n], dot = 0.0; size_t j;
        for (j = 0; j < C; j++) dot += (double)dy[j] * weight[j] * x[j] * r;
        dot /= (double)C;
        for (j = 0; j < C; j++) dx[j] += (mn_real)(r * (dy[j] * weight[j] - x[j] * r * dot));
    }
    MN__OMP_FOR                                  // pass 2: columns are independent
    for (c = 0; c < (long long)C; c++) {
        double acc = 0.0; size_t j;
        for (j = 0; j < N; j++) acc += (double)dout[j * C + (size_t)c] * inp[j * C + (size_t)c] * rstd[j];
        dweight[c] += (mn_real)acc;
    }
}

// out = a + b (the residual stream). out may alias a or b.
MNDEF void mn_residual_forward(mn_real* out, const mn_real* a, const mn_real* b, size_t n) {
    long long i;
    MN__OMP_FOR
    for (i = 0; i < (long long)n; i++) out[i] = a[i] + b[i];
}
MNDEF void mn_residual_backward(mn_real* da, mn_real* db, const mn_real* dout, size_t n) {
    long long i;
    MN__OMP_FOR
    for (i = 0; i < (long long)n; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}

// SwiGLU (Shazeer 2020; Llama MLP): out = silu(gate) * up, silu(x) = x sigmoid(x).
MNDEF void mn_swiglu_forward(mn_real* out, const mn_real* gate, const mn_real* up, size_t n) {
    long long i;
    MN__OMP_FOR
    for (i = 0; i < (long long)n; i++) {
        mn_real g = gate[i];
        out[i] = g / (1 + (mn_real)mn__exp(-g)) * up[i];
    }
}
// forward: out = g s(g) u, so: du += dout g s(g) ; dg += dout u s(g) (1 + g (1 - s(g)))
MNDEF void mn_swiglu_backward(mn_real* dgate, mn_real* dup, const mn_real* dout, const mn_real* gate, const mn_real* up,
                              size_t n) {
    long long i;
    MN__OMP_FOR
    for (i = 0; i < (long long)n; i++) {
        mn_real g = gate[i], s = 1 / (1 + (mn_real)mn__exp(-g));
        dup[i] += dout[i] * g * s;
        dgate[i] += dout[i] * up[i] * s * (1 + g * (1 - s));
    }
}

// Gated RMSNorm (fla FusedRMSNormGated, swish gate, normalise first): per row of C,
//   out = inp * rstd * weight * silu(gate),  rstd = 1/sqrt(mean(inp^2) + eps). Saves rstd (N).
MNDEF void mn_rmsnorm_gated_forward(mn_real* out, mn_real* rstd, const mn_real* inp, const mn_real* gate,
                                    const mn_real* weight, size_t N, size_t C, double eps) {
    long long n;
    MN__OMP_FOR
    for (n = 0; n < (long long)N; n++) {
        const mn_real *x = inp + (size_t)n * C, *z = gate + (size_t)n * C;
        double ss = 0.0, r; size_t c;
        for (c = 0; c < C; c++) ss += (double)x[c] * x[c];
        r = 1.0 / sqrt(ss / (double)C + eps);
        for (c = 0; c < C; c++)
            out[(size_t)n * C + c] = (mn_real)(x[c] * r * weight[c] * z[c] / (1.0 + exp(-(double)z[c])));
        rstd[n] = (mn_real)r;
    }
}
// forward: y = n w s(z), n = x r, s = silu, so with dn = dy w s(z):
// dx = r (dn - n mean(dn n)) ; dw += dy n s(z) ; dz += dy n w s'(z), s'(z) = sig(z)(1 + z(1 - sig(z)))
MNDEF void mn_rmsnorm_gated_backward(mn_real* dinp, mn_real* dgate, mn_real* dweight, const mn_real* dout,
                                     const mn_real* rstd, const mn_real* inp, const mn_real* gate,
                                     const mn_real* weight, size_t N, size_t C) {
    size_t n, c;
    for (n = 0; n < N; n++) {
        const mn_real *x = inp + n * C, *z = gate + n * C, *dy = dout + n * C;
        double r = rstd[n], dot = 0.0;
        for (c = 0; c < C; c++) {
            double sg = 1.0 / (1.0 + exp(-(double)z[c])), nx = x[c] * r, dn = dy[c] * weight[c] * z[c] * sg;
            dot += dn * nx;
            dweight[c] += (mn_real)(dy[c] * nx * z[c] * sg);
            dgate[n * C + c] += (mn_real)(dy[c] * nx * weight[c] * sg * (1.0 + z[c] * (1.0 - sg)));
        }
        dot /= (double)C;
        for (c = 0; c < C; c++) {
            double sg = 1.0 / (1.0 + exp(-(double)z[c])), nx = x[c] * r, dn = dy[c] * weight[c] * z[c] * sg;
            dinp[n * C + c] += (mn_real)(r * (dn - nx * dot));
        }
    }
}

// Gate activations, elementwise, as fla's layers use them: sigmoid (beta), logsigmoid (the Mesa/GDN
// log-decay g = logsigmoid(a) <= 0) and softplus (lambda = softplus(theta) + 0.25). Written in
// the overflow-safe forms: logsigmoid(x) = min(x,0) - log1p(exp(-|x|)); softplus(x) = x for x > 20 (torch).
MNDEF void mn_sigmoid_forward(mn_real* out, const mn_real* inp, size_t n) {
    size_t i; for (i = 0; i < n; i++) out[i] = (mn_real)mn__sigmoid(inp[i]);
}
// forward: y = s(x), so: dx += dy s (1 - s)
MNDEF void mn_sigmoid_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n) {
    size_t i; for (i = 0; i < n; i++) { double s = mn__sigmoid(inp[i]); dinp[i] += (mn_real)(dout[i] * s * (1.0 - s)); }
}
MNDEF void mn_logsigmoid_forward(mn_real* out, const mn_real* inp, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = (mn_real)((x < 0 ? x : 0.0) - log1p(exp(-fabs(x))));
    }
}
// forward: y = log s(x), so: dx += dy (1 - s(x)) = dy s(-x)
MNDEF void mn_logsigmoid_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n) {
    size_t i; for (i = 0; i < n; i++) dinp[i] += (mn_real)(dout[i] * mn__sigmoid(-(double)inp[i]));
}
MNDEF void mn_softplus_forward(mn_real* out, const mn_real* inp, size_t n) {
    size_t i; for (i = 0; i < n; i++) { double x = inp[i]; out[i] = (mn_real)(x > 20 ? x : log1p(exp(x))); }
}
// forward: y = log(1 + e^x), so: dx += dy s(x)
MNDEF void mn_softplus_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n) {
    size_t i; for (i = 0; i < n; i++) dinp[i] += (mn_real)(dout[i] * (inp[i] > 20 ? 1.0 : mn__sigmoid(inp[i])));
}

// GELU with the tanh approximation (Griffin/recurrentgemma's gelu_pytorch_tanh):
//   y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
MNDEF void mn_gelu_forward(mn_real* out, const mn_real* inp, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = (mn_real)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    }
}
// forward: y = x/2 (1 + tanh u), so: dx += dy (1/2 (1 + tanh u) + x/2 (1 - tanh^2 u) du/dx)
MNDEF void mn_gelu_backward(mn_real* dinp, const mn_real* dout, const mn_real* inp, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        double x = inp[i], th = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
        double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
        dinp[i] += (mn_real)(dout[i] * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du));
    }
}

// Depthwise causal convolution (fla ShortConvolution, kernel K=4, no bias), optional SiLU:
//   y_t[c] = act( sum_{j<K} w[c,j] * x_{t-K+1+j}[c] ),  zero left padding, w[c,K-1] hits token t.
// inp, out (B,T,Ch); weight (Ch,K) = torch's [Ch,1,K]. The pre-activation is recomputed in
// the backward (K multiply-adds per element) instead of being stored.
static double mn__conv_pre(const mn_real* inp, const mn_real* weight, size_t T, size_t Ch, size_t K, size_t t,
                           size_t c) {
    double acc = 0.0; size_t j;
    for (j = 0; j < K; j++) {
        if (t + j + 1 < K) continue;                  // position t-K+1+j < 0: padding
        acc += (double)weight[c * K + j] * inp[(t + j + 1 - K) * Ch + c];
    }
    MN_UNUSED(T);
    return acc;
}
MNDEF void mn_shortconv_forward(mn_real* out, const mn_real* inp, const mn_real* weight, size_t B, size_t T, size_t Ch,
                                size_t K, int silu) {
    long long bt;
    MN__OMP_FOR                                  // every (b,t) row is independent
    for (bt = 0; bt < (long long)(B * T); bt++) {
        size_t b = (size_t)bt / T, t = (size_t)bt % T, c;
        for (c = 0; c < Ch; c++) {
            double a = mn__conv_pre(inp + b * T * Ch, weight, T, Ch, K, t, c);
            out[(b * T + t) * Ch + c] = (mn_real)(silu ? a / (1 + mn__exp(-a)) : a);
        }
    }
}
// forward: y = act(a), a_t = sum_j w_j x_{t-K+1+j}, so: da = dy act'(a) ;
// dx_{t-K+1+j} += w_j da_t ; dw_j += x_{t-K+1+j} da_t. Channels are independent (threads split them).
MNDEF void mn_shortconv_backward(mn_real* dinp, mn_real* dweight, const mn_real* dout, const mn_real* inp,
                                 const mn_real* weight, size_t B, size_t T, size_t Ch, size_t K, int silu) {
    long long blk, nblk = (long long)((Ch + 31) / 32);
    MN__OMP_FOR                                  // blocks of 32 channels: rows stay contiguous
    for (blk = 0; blk < nblk; blk++) {
        size_t c0 = (size_t)blk * 32, c1 = c0 + 32 < Ch ? c0 + 32 : Ch, b, t, j, c;
        for (b = 0; b < B; b++)
            for (t = 0; t < T; t++)
                for (c = c0; c < c1; c++) {
                    const mn_real* x = inp + b * T * Ch;
                    double da = dout[(b * T + t) * Ch + c];
                    if (silu) {
                        double a = mn__conv_pre(x, weight, T, Ch, K, t, c), s = 1 / (1 + mn__exp(-a));
                        da *= s * (1.0 + a * (1.0 - s));
                    }
                    for (j = 0; j < K; j++) {
                        if (t + j + 1 < K) continue;
                        size_t src = (b * T + t + j + 1 - K) * Ch + c;
                        dinp[src] += (mn_real)(weight[c * K + j] * da);
                        dweight[c * K + j] += (mn_real)(inp[src] * da);
                    }
                }
    }
}
// One token of the convolution. state (Ch,K-1) holds the last K-1 inputs, oldest first; it is
// shifted and the new input appended. inp, out (Ch).
MNDEF void mn_shortconv_step(mn_real* out, mn_real* state, const mn_real* inp, const mn_real* weight, size_t Ch,
                             size_t K, int silu) {
    size_t c, j;
    for (c = 0; c < Ch; c++) {
        mn_real* s = state + c * (K - 1);
        double a = (double)weight[c * K + K - 1] * inp[c];
        for (j = 0; j + 1 < K; j++) a += (double)weight[c * K + j] * s[j];
        for (j = 0; j + 2 < K; j++) s[j] = s[j + 1];
        if (K > 1) s[K - 2] = inp[c];
        out[c] = (mn_real)(silu ? a * mn__sigmoid(a) : a);
    }
}

// Per-row L2 normalisation (fla l2norm): out = x / sqrt(sum x^2 + 1e-6); saves rstd (N).
// inp, out (N,D): call with N = B*T*H and D the head dim to normalise per head.
MNDEF void mn_l2norm_forward(mn_real* out, mn_real* rstd, const mn_real* inp, size_t N, size_t D) {
    long long nn;
    MN__OMP_FOR
    for (nn = 0; nn < (long long)N; nn++) {
        size_t n = (size_t)nn, d;
        double ss = 0.0;
        for (d = 0; d < D; d++) ss += (double)inp[n * D + d] * inp[n * D + d];
        double r = 1.0 / sqrt(ss + 1e-6);
        for (d = 0; d < D; d++) out[n * D + d] = (mn_real)(inp[n * D + d] * r);
        rstd[n] = (mn_real)r;
    }
}
// forward: y = x r, r = (x.x + eps)^-1/2, so: dx += r (dy - y (y.dy))
MNDEF void mn_l2norm_backward(mn_real* dinp, const mn_real* dout, const mn_real* out, const mn_real* rstd, size_t N,
                              size_t D) {
    long long nn;
    MN__OMP_FOR
    for (nn = 0; nn < (long long)N; nn++) {
        size_t n = (size_t)nn, d;
        double dot = 0.0;
        for (d = 0; d < D; d++) dot += (double)out[n * D + d] * dout[n * D + d];
        for (d = 0; d < D; d++) dinp[n * D + d] += (mn_real)(rstd[n] * (dout[n * D + d] - out[n * D + d] * dot));
    }
}

// RoPE, non-interleaved ("rotate half", GPT-NeoX/HF/fla): dims (i, i+D/2) rotate by
// phi = pos * theta^(-2i/D):  y_i = x_i cos phi - x_{i+D/2} sin phi ; y_{i+D/2} = x_{i+D/2} cos phi + x_i sin phi.
// sign = -1 rotates back (the backward is the inverse rotation). out may alias inp when
// accumulate == 0; with accumulate the result is added to out.
static void mn__rope_apply(mn_real* out, const mn_real* inp, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                           double theta, double sign, int accumulate) {
    size_t half = D / 2;
    long long t;
    MN__OMP_FOR                                  // positions are independent
    for (t = 0; t < (long long)T; t++) {
        size_t b, h, i;
        for (i = 0; i < half; i++) {
            double phi = (double)(pos0 + (size_t)t) * pow(theta, -2.0 * (double)i / (double)D);
            double cs = cos(phi), sn = sign * sin(phi);
            for (b = 0; b < B; b++)
                for (h = 0; h < H; h++) {
                    size_t o = ((b * T + (size_t)t) * H + h) * D;
                    double x1 = inp[o + i], x2 = inp[o + i + half];
                    double y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
                    if (accumulate) { out[o + i] += (mn_real)y1; out[o + i + half] += (mn_real)y2; }
                    else { out[o + i] = (mn_real)y1; out[o + i + half] = (mn_real)y2; }
                }
        }
    }
}
// inp, out (B,T,H,D); positions pos0 .. pos0+T-1.
MNDEF void mn_rope_forward(mn_real* out, const mn_real* inp, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                           double theta) {
    mn__rope_apply(out, inp, B, T, H, D, pos0, theta, 1.0, 0);
}
MNDEF void mn_rope_backward(mn_real* dinp, const mn_real* dout, size_t B, size_t T, size_t H, size_t D, size_t pos0,
                            double theta) {
    mn__rope_apply(dinp, dout, B, T, H, D, pos0, theta, -1.0, 1);
}

// Cross-entropy over the vocabulary with optional logit soft-cap z = c tanh(l / c):
// losses (N) = logsumexp(z) - z[target]; rows whose target is < 0 carry no loss (0).
// logits (N,V) are the raw (uncapped) logits.
static double mn__cap(double l, double c) { return c > 0 ? c * tanh(l / c) : l; }
MNDEF void mn_crossentropy_forward(mn_real* losses, const mn_real* logits, const int* targets, size_t N, size_t V,
                                   double softcap) {
    long long n;
    MN__OMP_FOR
    for (n = 0; n < (long long)N; n++) {
        const mn_real* z = logits + (size_t)n * V;
        size_t v; double mx = -INFINITY, sum = 0.0;
        if (targets[n] < 0) { losses[n] = 0; continue; }
        for (v = 0; v < V; v++) { double a = mn__cap(z[v], softcap); if (a > mx) mx = a; }
        for (v = 0; v < V; v++) sum += mn__exp(mn__cap(z[v], softcap) - mx);
        losses[n] = (mn_real)(mx + log(sum) - mn__cap(z[targets[n]], softcap));
    }
}
// forward: loss = lse(z) - z_y, z = c tanh(l/c), so: dl = dloss (softmax(z) - onehot(y)) (1 - tanh^2(l/c))
MNDEF void mn_crossentropy_backward(mn_real* dlogits, const mn_real* dlosses, const mn_real* logits, const int* targets,
                                    size_t N, size_t V, double softcap) {
    long long n;
    MN__OMP_FOR
    for (n = 0; n < (long long)N; n++) {
        const mn_real* z = logits + (size_t)n * V;
        mn_real* dz = dlogits + (size_t)n * V;
        size_t v; double mx = -INFINITY, sum = 0.0;
        if (targets[n] < 0) continue;
        for (v = 0; v < V; v++) { double a = mn__cap(z[v], softcap); if (a > mx) mx = a; }
        for (v = 0; v < V; v++) sum += mn__exp(mn__cap(z[v], softcap) - mx);
        for (v = 0; v < V; v++) {
            double p = mn__exp(mn__cap(z[v], softcap) - mx) / sum - (v == (size_t)targets[n] ? 1.0 : 0.0);
            if (softcap > 0) { double th = tanh(z[v] / softcap); p *= 1.0 - th * th; }
            dz[v] += (mn_real)(dlosses[n] * p);
        }
    }
}

// >>layer
// defines: what every mixer layer is made of: the parameter walk, MN__PIECE layouts, the mixer row type,
// the shared q/k/v projections.
// A mixer layer is the token mixer of one block (>>model holds the block around it). It lives in its
// op's section, after the op, and has:
//   a parameter struct of named pointers and its walk (mn__<op>_par_walk), which lists the layer's
//     tensors once, in checkpoint order, with their fla names, shapes and init: at mn_model_init the walk
//     adds them to the parameter table; at run time the same walk points the struct at m->params (or at
//     m->grads, for the gradients);
//   an activation struct and its layout (mn__<op>_act_layout): the tensors the forward saves for the
//     backward, sized for (B,T). The same layout at the layer's part of m->acts holds the values and at
//     the same part of m->dacts their gradients, so the gradient of a value A.x is dA.x;
//   a decode-state struct and a step-temporaries struct (mn__<op>_temp) with their layouts, per sequence;
//   forward, backward (ACCUMULATES into grads and dacts), step (one token), flops;
//   one row in mn__mixers[] (>>model). Adding a mixer is one section and one table row.
// Every layout function both sizes and points: MN__PIECE walks the pieces in order, so there is no
// separate size list to keep in step with the pointers.

enum { MN__INIT_NORMAL, MN__INIT_ONES, MN__INIT_ZEROS, MN__INIT_LAMBDA, MN__INIT_ALOG, MN__INIT_DTBIAS,
       MN__INIT_RGLRU_A, MN__INIT_FGATE, MN__INIT_SLSTM_BIAS, MN__INIT_MESA_GATE };
#define MN__BLOCK_TENSORS 5   // a block's own tensors (two norms, three MLP matrices); the mixer's follow

// Appends one tensor to the parameter table (or only counts it when m->tensors is NULL).
static void mn__tab_add(mn_model* m, size_t* count, const char* name, size_t ndim, size_t d0, size_t d1, size_t d2,
                        int decay, int init) {
    if (m->tensors) {
        mn_tensor_info* t = &m->tensors[*count];
        memset(t, 0, sizeof(*t));
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->ndim = ndim; t->shape[0] = d0; t->shape[1] = d1; t->shape[2] = d2;
        t->numel = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
        t->decay = decay; t->init = init;
    }
    (*count)++;
}

// A walk over the tensors of one layer. Table pass (base NULL): each tensor is appended to the table
// as "model.layers.<l>.<scope><name>". Pointer pass: each returns base + its offset, in table order.
typedef struct mn__pwalk {
    mn_model* m;
    size_t l;             // the layer
    const char* scope;    // "attn." for a mixer's tensors (fla's module name), "" for the block's own
    size_t* count;        // table pass: the running tensor count
    mn_real* base;        // pointer pass: m->params or m->grads; NULL in the table pass
    size_t next;          // pointer pass: table index of the next tensor
} mn__pwalk;
typedef void (*mn__walk_fn)(mn__pwalk* w, void* p);
static mn_real* mn__pw_tensor(mn__pwalk* w, const char* name, size_t ndim, size_t d0, size_t d1, size_t d2, int decay,
                              int init) {
    char nm[96];
    if (w->base) {
        const mn_tensor_info* t = &w->m->tensors[w->next++];
        MN_ASSERT(t->ndim == ndim && t->shape[0] == d0);   // the walk is the one that built the table
        return w->base + t->offset;
    }
    snprintf(nm, sizeof nm, "model.layers.%u.%s%s", (unsigned)w->l, w->scope, name);
    mn__tab_add(w->m, w->count, nm, ndim, d0, d1, d2, decay, init);
    return NULL;
}
// the three kinds most layers use: a Linear weight [out, in] (N(0, init_std), weight decay), a vector
// (bias, norm weight, per-channel parameter: no weight decay), a depthwise causal conv [ch, 1, 4]
static mn_real* mn__pw_matrix(mn__pwalk* w, const char* name, size_t out, size_t in) {
    return mn__pw_tensor(w, name, 2, out, in, 0, 1, MN__INIT_NORMAL);
}
static mn_real* mn__pw_vector(mn__pwalk* w, const char* name, size_t n, int init) {
    return mn__pw_tensor(w, name, 1, n, 0, 0, 0, init);
}
static mn_real* mn__pw_conv(mn__pwalk* w, const char* name, size_t ch) {
    return mn__pw_tensor(w, name, 3, ch, 1, 4, 1, MN__INIT_NORMAL);
}
// Points *p, a mixer's parameter struct, at layer l's mixer tensors inside base (m->params or m->grads).
static void mn__layer_point(mn_model* m, size_t l, mn_real* base, mn__walk_fn walk, void* p) {
    mn__pwalk w;
    memset(&w, 0, sizeof w);
    w.m = m; w.l = l; w.scope = "attn."; w.base = base; w.next = m->layer_first[l] + MN__BLOCK_TENSORS;
    walk(&w, p);
}

// MN__PIECE(field, n): inside a layout function (locals: the struct pointer a, mn_real* base, which is
// NULL when only the size is wanted, and size_t off = 0), points a->field at the next n elements.
#define MN__PIECE(field, n) (a->field = base ? base + off : NULL, off += (size_t)(n))

static int mn__mixer_variant(const mn_model* m, size_t l);   // the table row's variant flags
// A sequence mixer: one row of mn__mixers[]. The layout hooks take their struct as void* (NULL: only
// the size) so that one row type serves every mixer.
typedef struct mn__mixer_def {
    const char* name;     // the name used in cfg.pattern
    int variant;          // flags passed on to the functions (named constants in the mixer's section)
    int kv_cache;         // 1: the decode state is a KV cache of max_seq_len tokens (decoding stops there)
    mn__walk_fn params;   // the parameter walk
    size_t (*acts)(void* a, mn_real* base, const mn_config* c, size_t B, size_t T);   // activation layout
    void (*forward)(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B, size_t T);
    void (*backward)(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in, mn_real* acts,
                     mn_real* dacts, size_t B, size_t T);
    size_t (*state)(void* s, mn_real* base, const mn_config* c);     // decode state layout, per sequence
    size_t (*temp)(void* x, mn_real* base, const mn_config* c);      // step temporaries layout, per sequence
    void (*step)(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* temp, const mn_real* in, size_t pos);
    double (*flops)(const mn_config* c, size_t T);   // forward FLOPs per token of the mixer core (no projections)
    // Mesa only (else NULL): the CG iterations counted in one sequence's state, *solves the systems solved
    double (*cg_count)(const mn_config* c, const mn_real* state, double* solves);
} mn__mixer_def;

// The three input projections of every attention-like layer: q, k, v = in W^T with wq, wk, wv (HD, C);
// in (N, C), q, k, v (N, HD).
static void mn__qkv_forward(mn_real* q, mn_real* k, mn_real* v, const mn_real* in, const mn_real* wq, const mn_real* wk,
                            const mn_real* wv, size_t N, size_t C, size_t HD) {
    mn_matmul_forward(q, in, wq, NULL, N, C, HD);
    mn_matmul_forward(k, in, wk, NULL, N, C, HD);
    mn_matmul_forward(v, in, wv, NULL, N, C, HD);
}
// din (N, C), dwq, dwk, dwv (HD, C) accumulated; dq, dk, dv (N, HD); in and the weights as in the forward
static void mn__qkv_backward(mn_real* din, mn_real* dwq, mn_real* dwk, mn_real* dwv, const mn_real* dq,
                             const mn_real* dk,
                             const mn_real* dv, const mn_real* in, const mn_real* wq, const mn_real* wk,
                             const mn_real* wv, size_t N, size_t C, size_t HD) {
    mn_matmul_backward(din, dwq, NULL, dq, in, wq, N, C, HD);
    mn_matmul_backward(din, dwk, NULL, dk, in, wk, N, C, HD);
    mn_matmul_backward(din, dwv, NULL, dv, in, wv, N, C, HD);
}

// >>attention
// defines: mn_attention_{forward,backward}_naive, mn_attention_{forward,backward}, mn_attention_step;
//          the layers "attn" and "swa"
// Causal softmax attention (Vaswani et al. 2017) and sliding-window attention:
//   o_t = sum_{s in W(t)} softmax_s(scale q_t.k_s) v_s,  W(t) = {s <= t} or {t-W < s <= t} (window W,
// the current token included: flash-attn window_size=(W-1,0), fla window_size=W). q,k (B,T,H,Dk),
// v,out (B,T,H,Dv). Reference: torch code of reference/vectors (attn_causal.vec, attn_swa_w8.vec),
// which fla's naive_parallel_attn reproduces bit for bit.

static size_t mn__win_lo(size_t t, size_t window) { return (window && t + 1 > window) ? t + 1 - window : 0; }

// Naive form: one query at a time with the online softmax (running max m, sum l), O(T^2 D) time,
// O(1) extra memory. Saves lse = m + log l (B,T,H) for the backward.
MNDEF void mn_attention_forward_naive(mn_real* out, mn_real* lse, const mn_real* q, const mn_real* k, const mn_real* v,
                                      size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale) {
    size_t b, t, h, s, d;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (h = 0; h < H; h++) {
                const mn_real* qt = q + ((b * T + t) * H + h) * Dk;
                mn_real* ot = out + ((b * T + t) * H + h) * Dv;
                double m = -INFINITY, l = 0.0, acc[1024];
                MN_ASSERT(Dv <= 1024);
                for (d = 0; d < Dv; d++) acc[d] = 0.0;
                for (s = mn__win_lo(t, window); s <= t; s++) {
                    const mn_real* ks = k + ((b * T + s) * H + h) * Dk;
                    const mn_real* vs = v + ((b * T + s) * H + h) * Dv;
                    double sc = 0.0;
                    for (d = 0; d < Dk; d++) sc += (double)qt[d] * ks[d];
                    sc *= scale;
                    // rescale what we have so far when the running max grows
                    double mnew = sc > m ? sc : m, corr = exp(m - mnew), w = exp(sc - mnew);
                    l = l * corr + w;
                    for (d = 0; d < Dv; d++) acc[d] = acc[d] * corr + w * vs[d];
                    m = mnew;
                }
                for (d = 0; d < Dv; d++) ot[d] = (mn_real)(acc[d] / l);
                lse[(b * T + t) * H + h] = (mn_real)(m + log(l));
            }
}
// forward: p_ts = exp(scale q_t.k_s - lse_t), o_t = sum_s p_ts v_s, so with D_t = do_t.o_t:
// dv_s += p_ts do_t ; ds_ts = p_ts (do_t.v_s - D_t) ; dq_t += scale ds_ts k_s ; dk_s += scale ds_ts q_t
MNDEF void mn_attention_backward_naive(mn_real* dq, mn_real* dk, mn_real* dv, const mn_real* dout, const mn_real* out,
                                       const mn_real* lse, const mn_real* q, const mn_real* k, const mn_real* v,
                                       size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window,
                                       double scale) {
    size_t b, t, h, s, d;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (h = 0; h < H; h++) {
                size_t qo = ((b * T + t) * H + h);
                const mn_real* qt = q + qo * Dk; const mn_real* dot = dout + qo * Dv;
                double Dt = 0.0;
                for (d = 0; d < Dv; d++) Dt += (double)dot[d] * out[qo * Dv + d];
                for (s = mn__win_lo(t, window); s <= t; s++) {
                    size_t ko = ((b * T + s) * H + h);
                    const mn_real* ks = k + ko * Dk; const mn_real* vs = v + ko * Dv;
                    double sc = 0.0, dp = 0.0;
                    for (d = 0; d < Dk; d++) sc += (double)qt[d] * ks[d];
                    double p = exp(sc * scale - lse[qo]);
                    for (d = 0; d < Dv; d++) { dp += (double)dot[d] * vs[d]; dv[ko * Dv + d] += (mn_real)(p * dot[d]); }
                    double ds = p * (dp - Dt) * scale;
                    for (d = 0; d < Dk; d++) {
                        dq[qo * Dk + d] += (mn_real)(ds * ks[d]);
                        dk[ko * Dk + d] += (mn_real)(ds * qt[d]);
                    }
                }
            }
}

// Matrix form (the fast one; llm.c keeps the same T x T probabilities): per (b,h)
//   pass 1: S = scale Q K^T (gemm)   pass 2: masked row softmax -> att   pass 3: O = att V (gemm).
// att (B,H,T,T) is written and saved for the backward; entries outside the window are 0.
// Cost per token and head: 2 T (Dk + Dv) FLOPs forward (the full T x T products, masked after) and
// 4 T (Dk + Dv) backward; memory T saved probabilities (O(B H T^2) in all): fine for training
// contexts of a few thousand.
MNDEF void mn_attention_forward(mn_real* out, mn_real* att, const mn_real* q, const mn_real* k, const mn_real* v,
                                size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale) {
    long long bh;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H, t, s;
            mn_real* P = att + (b * H + h) * T * T;
            const mn_real* Q = q + b * T * H * Dk + h * Dk;
            const mn_real* Kp = k + b * T * H * Dk + h * Dk;
            const mn_real* Vp = v + b * T * H * Dv + h * Dv;
            mn_gemm(0, 1, T, T, Dk, scale, Q, H * Dk, Kp, H * Dk, 0.0, P, T);   // pass 1
            for (t = 0; t < T; t++) {                                              // pass 2
                mn_real* row = P + t * T;
                size_t lo = mn__win_lo(t, window);
                double mx = -INFINITY, sum = 0.0;
                for (s = lo; s <= t; s++) if (row[s] > mx) mx = row[s];
                for (s = lo; s <= t; s++) { mn_real e = (mn_real)mn__exp(row[s] - mx); row[s] = e; sum += e; }
                for (s = 0; s < lo; s++) row[s] = 0;
                for (s = lo; s <= t; s++) row[s] = (mn_real)(row[s] / sum);
                for (s = t + 1; s < T; s++) row[s] = 0;
            }
            mn_gemm(0, 0, T, Dv, T, 1.0, P, T, Vp, H * Dv, 0.0, out + b * T * H * Dv + h * Dv, H * Dv); // pass 3
        }
}
// The passes in reverse: dV += P^T dO ; dP = dO V^T ; dS = P (dP - rowsum(P dP)) ;
// dQ += scale dS K ; dK += scale dS^T Q. datt (B,H,T,T) is scratch (overwritten).
MNDEF void mn_attention_backward(mn_real* dq, mn_real* dk, mn_real* dv, const mn_real* dout, const mn_real* att,
                                 const mn_real* q, const mn_real* k, const mn_real* v, size_t B, size_t T, size_t H,
                                 size_t Dk, size_t Dv, size_t window, double scale, mn_real* datt) {
    long long bh;
    MN__OMP_FOR                                  // each (b,h) writes only its own slices
    for (bh = 0; bh < (long long)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H, t, s;
            const mn_real* P = att + (b * H + h) * T * T;
            mn_real* dP = datt + (b * H + h) * T * T;
            size_t qo = b * T * H * Dk + h * Dk, vo = b * T * H * Dv + h * Dv;
            mn_gemm(1, 0, T, Dv, T, 1.0, P, T, dout + vo, H * Dv, 1.0, dv + vo, H * Dv);
            mn_gemm(0, 1, T, T, Dv, 1.0, dout + vo, H * Dv, v + vo, H * Dv, 0.0, dP, T);
            for (t = 0; t < T; t++) {
                const mn_real* p = P + t * T; mn_real* dp = dP + t * T;
                size_t lo = mn__win_lo(t, window);
                double D = 0.0;
                for (s = lo; s <= t; s++) D += (double)p[s] * dp[s];
                for (s = 0; s < T; s++) dp[s] = (s >= lo && s <= t) ? (mn_real)(p[s] * (dp[s] - D)) : (mn_real)0;
            }
            mn_gemm(0, 0, T, Dk, T, scale, dP, T, k + qo, H * Dk, 1.0, dq + qo, H * Dk);
            mn_gemm(1, 0, T, Dk, T, scale, dP, T, q + qo, H * Dk, 1.0, dk + qo, H * Dk);
        }
}

// Recurrent form for generation with a KV cache. q,k (H,Dk), v,out (H,Dv) for the token at
// position pos; kcache (cache_len,H,Dk), vcache (cache_len,H,Dv) are ring buffers indexed by
// pos % cache_len (cache_len >= pos+1 for full attention, >= window for SWA); scores (cache_len)
// is scratch. The new k,v are written into the cache first: token t attends to itself.
MNDEF void mn_attention_step(mn_real* out, mn_real* kcache, mn_real* vcache, const mn_real* q, const mn_real* k,
                             const mn_real* v, size_t pos, size_t cache_len, size_t H, size_t Dk, size_t Dv,
                             size_t window, double scale, mn_real* scores) {
    size_t slot = pos % cache_len, h, s, d, lo = mn__win_lo(pos, window);
    memcpy(kcache + slot * H * Dk, k, H * Dk * sizeof(mn_real));
    memcpy(vcache + slot * H * Dv, v, H * Dv * sizeof(mn_real));
    MN_ASSERT(pos - lo < cache_len);
    for (h = 0; h < H; h++) {
        double mx = -INFINITY, sum = 0.0;
        for (s = lo; s <= pos; s++) {
            const mn_real* ks = kcache + ((s % cache_len) * H + h) * Dk;
            double sc = 0.0;
            for (d = 0; d < Dk; d++) sc += (double)q[h * Dk + d] * ks[d];
            scores[s - lo] = (mn_real)(sc * scale);
            if (scores[s - lo] > mx) mx = scores[s - lo];
        }
        for (d = 0; d < Dv; d++) out[h * Dv + d] = 0;
        for (s = lo; s <= pos; s++) {
            double w = exp(scores[s - lo] - mx);
            const mn_real* vs = vcache + ((s % cache_len) * H + h) * Dv;
            sum += w;
            for (d = 0; d < Dv; d++) out[h * Dv + d] += (mn_real)(w * vs[d]);
        }
        for (d = 0; d < Dv; d++) out[h * Dv + d] = (mn_real)(out[h * Dv + d] / sum);
    }
}

// ---- the layer: softmax attention as a mixer (fla layers/attn.py: q,k,v,o projections without bias,
// RoPE on q and k, no conv, no gate). Variant MN__ATTENTION_SWA: a sliding window of cfg.window keys.
#define MN__ATTENTION_SWA 1
typedef struct mn__attention_par { mn_real *q_proj, *k_proj, *v_proj, *o_proj; } mn__attention_par;
typedef struct mn__attention_act {
    mn_real *q, *k, *v;   // (N,HD) projections, q and k after RoPE
    mn_real* att;         // (B,H,T,T) softmax probabilities
    mn_real* ao;          // (N,HD) attention output before o_proj
} mn__attention_act;
typedef struct mn__attention_state { mn_real *kcache, *vcache; } mn__attention_state;   // (max_seq_len,H,D)
typedef struct mn__attention_temp { mn_real *q, *k, *v, *ao, *scores; } mn__attention_temp;

static void mn__attention_par_walk(mn__pwalk* w, void* pp) {
    mn__attention_par t, *p = pp ? (mn__attention_par*)pp : &t;
    size_t C = w->m->cfg.d_model, HD = w->m->cfg.n_head * w->m->cfg.head_dim;
    p->q_proj = mn__pw_matrix(w, "q_proj.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k_proj.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v_proj.weight", HD, C);
    p->o_proj = mn__pw_matrix(w, "o_proj.weight", C, HD);
}
static size_t mn__attention_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__attention_act t, *a = p ? (mn__attention_act*)p : &t;
    size_t N = B * T, HD = c->n_head * c->head_dim, off = 0;
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD); MN__PIECE(v, N * HD);
    MN__PIECE(att, B * c->n_head * T * T);
    MN__PIECE(ao, N * HD);
    return off;
}
static size_t mn__attention_window(const mn_model* m, size_t l) {
    return (mn__mixer_variant(m, l) & MN__ATTENTION_SWA) ? m->cfg.window : 0;
}
static void mn__attention_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                        size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__attention_par P; mn__attention_act A;
    mn__layer_point(m, l, m->params, mn__attention_par_walk, &P);
    mn__attention_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.q, A.k, A.v, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    if (c->rope_theta > 0) {            // rotate in place: the saved q, k are the rotated ones
        mn__rope_apply(A.q, A.q, B, T, H, D, 0, c->rope_theta, 1.0, 0);
        mn__rope_apply(A.k, A.k, B, T, H, D, 0, c->rope_theta, 1.0, 0);
    }
    mn_attention_forward(A.ao, A.att, A.q, A.k, A.v, B, T, H, D, D, mn__attention_window(m, l), 1.0 / sqrt((double)D));
    mn_matmul_forward(out, A.ao, P.o_proj, NULL, N, HD, C);
}
static void mn__attention_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                         mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__attention_par P, dP; mn__attention_act A, dA;
    mn__layer_point(m, l, m->params, mn__attention_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__attention_par_walk, &dP);
    mn__attention_act_layout(&A, acts, c, B, T);
    mn__attention_act_layout(&dA, dacts, c, B, T);
    mn_matmul_backward(dA.ao, dP.o_proj, NULL, dout, A.ao, P.o_proj, N, HD, C);
    mn_attention_backward(dA.q, dA.k, dA.v, dA.ao, A.att, A.q, A.k, A.v, B, T, H, D, D, mn__attention_window(m, l),
                          1.0 / sqrt((double)D), dA.att);
    if (c->rope_theta > 0) {            // forward rotated q,k by +phi, so gradients rotate by -phi
        mn__rope_apply(dA.q, dA.q, B, T, H, D, 0, c->rope_theta, -1.0, 0);
        mn__rope_apply(dA.k, dA.k, B, T, H, D, 0, c->rope_theta, -1.0, 0);
    }
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.q, dA.k, dA.v, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
// decode state per sequence: the KV cache, max_seq_len positions (a sliding window uses the first W of
// them as a ring buffer)
static size_t mn__attention_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__attention_state t, *a = p ? (mn__attention_state*)p : &t;
    size_t off = 0, HD = c->n_head * c->head_dim;
    MN__PIECE(kcache, c->max_seq_len * HD); MN__PIECE(vcache, c->max_seq_len * HD);
    return off;
}
static size_t mn__attention_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__attention_temp t, *a = p ? (mn__attention_temp*)p : &t;
    size_t off = 0, HD = c->n_head * c->head_dim;
    MN__PIECE(q, HD); MN__PIECE(k, HD); MN__PIECE(v, HD); MN__PIECE(ao, HD); MN__PIECE(scores, c->max_seq_len);
    return off;
}
static void mn__attention_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch,
                                     const mn_real* in, size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, win = mn__attention_window(m, l);
    size_t len = win ? win : c->max_seq_len;
    mn__attention_par P; mn__attention_state S; mn__attention_temp X;
    mn__layer_point(m, l, m->params, mn__attention_par_walk, &P);
    mn__attention_state_layout(&S, state, c);
    mn__attention_temp_layout(&X, scratch, c);
    mn__qkv_forward(X.q, X.k, X.v, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    if (c->rope_theta > 0) {
        mn__rope_apply(X.q, X.q, 1, 1, H, D, pos, c->rope_theta, 1.0, 0);
        mn__rope_apply(X.k, X.k, 1, 1, H, D, pos, c->rope_theta, 1.0, 0);
    }
    mn_attention_step(X.ao, S.kcache, S.vcache, X.q, X.k, X.v, pos, len, H, D, D, win, 1.0 / sqrt((double)D), X.scores);
    mn_matmul_forward(out, X.ao, P.o_proj, NULL, 1, HD, C);
}
static double mn__attention_layer_flops(const mn_config* c, size_t T) {
    // q.k and p.v over the full T x T matrix as computed (the anchors' FLOP counts count it the same way)
    return 4.0 * (double)T * (double)(c->n_head * c->head_dim);
}

// >>gla
// defines: mn_gla_{forward,backward}_recurrent, mn_gla_{forward,backward}, mn_gla_step, work sizes;
//          the layers "gla", "linattn", "sgla"
// Linear attention, simple GLA and GLA as one op; the gate width G picks the member (a broadcast flag):
// S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T       S_{-1} = h0 (zeros when NULL), ht = S_{T-1}
// o_t = S_t^T (scale q_t)                         decay, then write, then read: t sees itself
// G = 0    linear attention (no feature map, no normaliser): no decay, g unused (NULL)
// G = 1    simple GLA: g (B,T,H), one log-decay per head and step, the same for every key channel
// G = Dk   GLA: g (B,T,H,Dk), one log-decay per key channel ("gk")
// q,k (B,T,H,Dk), v,out (B,T,H,Dv) (fla's layout); h0, ht (B,H,Dk,Dv), K-first: S[i][j] pairs key
// channel i with value channel j and the read is S^T q. g and dg are (B,T,H,G). scale multiplies q
// (fla's default is Dk^-1/2). The gates are log-decays, <= 0 so that exp(g) is in (0,1]; the code
// does not rely on the sign (MN__GLA_SPAN bounds |cumulative gate| either way).
//
// References (fla-org/flash-linear-attention @ bc3b101): fla/ops/linear_attn/naive.py
// naive_recurrent_linear_attn (normalize=False), fla/ops/simple_gla/naive.py
// naive_recurrent_simple_gla, fla/ops/gla/naive.py naive_recurrent_gla; the chunkwise form is derived
// below (above mn_gla_forward). Golden vectors: reference/vectors/{linear_attn,simple_gla,gla}.vec.
//
// Forms: mn_gla_{forward,backward}_recurrent (the naive loop, kept as the reference),
// mn_gla_{forward,backward} (chunkwise, matrix products through mn_gemm), mn_gla_step (one token).
// Layers (>>model): "linattn" (G = 0, fla LinearAttention), "sgla" (G = 1, fla SimpleGatedLinearAttention)
// and "gla" (G = Dk, fla GatedLinearAttention).

static size_t mn__gla_min(size_t a, size_t b) { return a < b ? a : b; }
// Log-decay of key channel d in the gate row gt (G values; NULL when G == 0): G == 1 broadcasts.
static double mn__gla_gate(const mn_real* gt, size_t G, size_t d) { return G == 0 ? 0.0 : (double)gt[G == 1 ? 0 : d]; }

// ------------------------------------------------------------------------------------ recurrent

// One token of one head, in place: S (Dk,Dv) = diag(exp(gt)) S + k v^T, then o (Dv) = S^T (scale q).
// q,k (Dk), v (Dv), gt (G) or NULL. The recurrent forward (and so the step) is a loop over this.
static void mn__gla_token(mn_real* o, mn_real* S, const mn_real* q, const mn_real* k, const mn_real* v,
                          const mn_real* gt, size_t Dk, size_t Dv, size_t G, double scale) {
    size_t i, j;
    for (i = 0; i < Dk; i++) {
        double a = exp(mn__gla_gate(gt, G, i));
        for (j = 0; j < Dv; j++) S[i * Dv + j] = (mn_real)(a * S[i * Dv + j] + (double)k[i] * v[j]);
    }
    for (j = 0; j < Dv; j++) {
        double acc = 0.0;
        for (i = 0; i < Dk; i++) acc += (double)q[i] * S[i * Dv + j];
        o[j] = (mn_real)(scale * acc);
    }
}

// Naive recurrent form: the definition, one token at a time (fla naive_recurrent_gla and friends).
// O(T Dk Dv) time per head, no workspace: ht holds the running state. Nothing is saved; the backward
// recomputes the states. Accumulates in double, so it is the reference every other form is tested on.
MNDEF void mn_gla_forward_recurrent(mn_real* out, mn_real* ht, const mn_real* q, const mn_real* k, const mn_real* v,
                                    const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk,
                                    size_t Dv, size_t G, double scale) {
    size_t b, h, t, DS = Dk * Dv;
    MN_ASSERT(G == 0 || G == 1 || G == Dk);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            mn_real* S = ht + (b * H + h) * DS;
            if (h0 == NULL) memset(S, 0, DS * sizeof(mn_real));
            else if (h0 != ht) memcpy(S, h0 + (b * H + h) * DS, DS * sizeof(mn_real));
            for (t = 0; t < T; t++) {
                size_t i = (b * T + t) * H + h;                  // row (b,t,h)
                mn__gla_token(out + i * Dv, S, q + i * Dk, k + i * Dk, v + i * Dv, G ? g + i * G : NULL, Dk, Dv, G,
                              scale);
            }
        }
}
// forward: S_t = diag(a_t) S_{t-1} + k_t v_t^T with a_t = exp(g_t), o_t = S_t^T (scale q_t), so,
// walking t backwards with dS = dL/dS_t (dht at t = T-1):
//   dq_t += scale S_t do_t ; dS += scale q_t do_t^T ; dk_t += dS v_t ; dv_t += dS^T k_t ;
//   dg_t[i] += a_t[i] sum_j S_{t-1}[i][j] dS[i][j] (summed over i when G == 1) ;
//   dS = diag(a_t) dS, which is dL/dS_{t-1} ; after t = 0 it is dL/dh0.
// work (T+2,Dk,Dv): the states S_{-1} .. S_{T-1} of one head, and dS. Heads run one after another.
MNDEF void mn_gla_backward_recurrent(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dh0,
                                     const mn_real* dout, const mn_real* dht, const mn_real* q, const mn_real* k,
                                     const mn_real* v, const mn_real* g, const mn_real* h0, size_t B, size_t T,
                                     size_t H, size_t Dk, size_t Dv, size_t G, double scale, mn_real* work) {
    size_t b, h, t, i, j, DS = Dk * Dv;
    mn_real* Ss = work;                              // (T+1,Dk,Dv) Ss + (t+1)*DS is S_t
    mn_real* dS = work + (T + 1) * DS;               // (Dk,Dv)
    MN_ASSERT(G == 0 || G == 1 || G == Dk);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            size_t hs = (b * H + h) * DS;            // offset of this head's (Dk,Dv) state
            if (h0) memcpy(Ss, h0 + hs, DS * sizeof(mn_real));
            else memset(Ss, 0, DS * sizeof(mn_real));
            for (t = 0; t < T; t++) {                // the forward again, keeping every state
                size_t r = (b * T + t) * H + h;
                const mn_real* gt = G ? g + r * G : NULL;
                mn_real* Sp = Ss + t * DS; mn_real* St = Sp + DS;
                for (i = 0; i < Dk; i++) {
                    double a = exp(mn__gla_gate(gt, G, i));
                    for (j = 0; j < Dv; j++)
                        St[i * Dv + j] = (mn_real)(a * Sp[i * Dv + j] + (double)k[r * Dk + i] * v[r * Dv + j]);
                }
            }
            if (dht) memcpy(dS, dht + hs, DS * sizeof(mn_real));
            else memset(dS, 0, DS * sizeof(mn_real));
            for (t = T; t-- > 0;) {
                size_t r = (b * T + t) * H + h;
                const mn_real* gt = G ? g + r * G : NULL;
                const mn_real* St = Ss + (t + 1) * DS; const mn_real* Sp = Ss + t * DS;
                const mn_real* qt = q + r * Dk; const mn_real* kt = k + r * Dk;
                const mn_real* vt = v + r * Dv; const mn_real* dot = dout + r * Dv;
                double dgs = 0.0;                    // G == 1: the sum over the key channels
                for (i = 0; i < Dk; i++) {
                    double acc = 0.0;
                    for (j = 0; j < Dv; j++) acc += (double)St[i * Dv + j] * dot[j];
                    dq[r * Dk + i] += (mn_real)(scale * acc);
                    for (j = 0; j < Dv; j++) dS[i * Dv + j] += (mn_real)(scale * qt[i] * dot[j]);
                }
                for (i = 0; i < Dk; i++) {
                    double acc = 0.0;
                    for (j = 0; j < Dv; j++) acc += (double)dS[i * Dv + j] * vt[j];
                    dk[r * Dk + i] += (mn_real)acc;
                }
                for (j = 0; j < Dv; j++) {
                    double acc = 0.0;
                    for (i = 0; i < Dk; i++) acc += (double)dS[i * Dv + j] * kt[i];
                    dv[r * Dv + j] += (mn_real)acc;
                }
                for (i = 0; i < Dk; i++) {
                    double a = exp(mn__gla_gate(gt, G, i)), acc = 0.0;
                    for (j = 0; j < Dv; j++) acc += (double)Sp[i * Dv + j] * dS[i * Dv + j];
                    if (G == Dk && dg) dg[r * Dk + i] += (mn_real)(a * acc);
                    dgs += a * acc;
                    for (j = 0; j < Dv; j++) dS[i * Dv + j] = (mn_real)(a * dS[i * Dv + j]);
                }
                if (G == 1 && dg) dg[r] += (mn_real)dgs;
            }
            if (dh0)
                for (i = 0; i < DS; i++) dh0[hs + i] += dS[i];
        }
}
MNDEF size_t mn_gla_work_size_recurrent(size_t T, size_t Dk, size_t Dv) { return (T + 2) * Dk * Dv; }

// One token per sequence for generation: the recurrent forward with T = 1 and h0 = ht = state,
// since (B,1,H,D) and (B,H,D) are the same layout. O(H Dk Dv) per sequence.
MNDEF void mn_gla_step(mn_real* out, mn_real* state, const mn_real* q, const mn_real* k, const mn_real* v,
                       const mn_real* g, size_t B, size_t H, size_t Dk, size_t Dv, size_t G, double scale) {
    mn_gla_forward_recurrent(out, state, q, k, v, g, state, B, 1, H, Dk, Dv, G, scale);
}

// ------------------------------------------------------------------------------------ chunkwise

// Decays inside a chunk. With gam_r = g_0 + ... + g_r, the cumulative log-decay from the chunk
// start, token s reaches token r >= s of the same chunk decayed by exp(gam_r - gam_s) per key
// channel. To form the C x C scores with one gemm this is split as exp(gam_r) * exp(-gam_s)
// ("factored": q side <= 1, k side >= 1 for gates <= 0). Two things limit the split:
//   - exp(-gam_s) overflows for strong gates or long chunks (e^88 in float, e^709 in double);
//   - gam carries an absolute error of about |gam| eps, which the split turns into a relative
//     error of up to (|gam_r| + |gam_s|) eps on a decay that may be ~1 (two tokens side by side
//     after a strong gate).
// So a chunk is factored only while max |gam| <= MN__GLA_SPAN, which keeps that error within
// ~64 eps and far from overflow in both types. A chunk beyond it forms its decays pair by pair,
// exp(g_{s+1} + ... + g_r) summed from the gates themselves (C^2 Dk exps; the recurrent form's
// accuracy). Nothing is clamped: clamping the exponents would change exp(gam_r - gam_s) for tokens
// close together (the diagonal would no longer be e^0 = 1). For the same reason the decay to the
// chunk end, gam_last - gam_r, is summed on its own (gsuf) instead of subtracted.
#define MN__GLA_SPAN 32.0

static size_t mn__gla_nchunks(size_t T, size_t C) { return (T + C - 1) / C; }
static size_t mn__gla_cw(size_t T, size_t C) { return T == 0 ? 1 : mn__gla_min(C, T); } // longest chunk

// Scratch of one (b,h) pair, carved out of work; Cw is the longest chunk, N the number of chunks.
typedef struct {
    mn_real *gl, *gam, *gsuf;   // (Cw,Dk) the chunk's gates (broadcast), decay from its start, to its end
    mn_real *Qb, *Kb, *Kh;      // (Cw,Dk) Q e^gam, K e^-gam (factored chunks), K e^gsuf
    mn_real *P, *dec;           // (Cw,Cw) intra-chunk scores; (Dk) running decay sums
    mn_real *dQl, *dKl, *tmp;   // (Cw,Dk) backward: this chunk's dq, dk; scratch
    mn_real *dP, *acc;          // (Cw,Cw) backward: dL/dP; (Dk) running sum of the gate gradient
    mn_real *Ss, *dS;           // (N+1,Dk,Dv) backward: state entering each chunk; (Dk,Dv) dL/dstate
} mn__gla_scratch;
// Lays out one (b,h) pair's scratch at base (NULL: only the size); returns its elements: nine (Cw,Dk),
// two (Cw,Cw), two (Dk), the states (N+1,Dk,Dv) and dS (Dk,Dv).
static size_t mn__gla_carve(mn__gla_scratch* a, mn_real* base, size_t T, size_t Dk, size_t Dv, size_t C) {
    size_t Cw = mn__gla_cw(T, C), N = mn__gla_nchunks(T, C), CK = Cw * Dk, off = 0;
    MN__PIECE(gl, CK); MN__PIECE(gam, CK); MN__PIECE(gsuf, CK);
    MN__PIECE(Qb, CK); MN__PIECE(Kb, CK); MN__PIECE(Kh, CK);
    MN__PIECE(P, Cw * Cw); MN__PIECE(dec, Dk);
    MN__PIECE(dQl, CK); MN__PIECE(dKl, CK); MN__PIECE(tmp, CK);
    MN__PIECE(dP, Cw * Cw); MN__PIECE(acc, Dk);
    MN__PIECE(Ss, (N + 1) * Dk * Dv); MN__PIECE(dS, Dk * Dv);
    return off;
}
static size_t mn__gla_work_per_bh(size_t T, size_t Dk, size_t Dv, size_t C) {
    mn__gla_scratch w;
    return mn__gla_carve(&w, NULL, T, Dk, Dv, C);
}
MNDEF size_t mn_gla_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C) {
    MN_ASSERT(C >= 1);
    return B * H * mn__gla_work_per_bh(T, Dk, Dv, C);
}

// Prepares a chunk of L tokens: Q, K (L,Dk) rows ld apart, g0 its first gate row (rows H*G apart;
// NULL when G == 0). Writes gl (the gates broadcast over the channels, 0 when G == 0), gam (the
// inclusive sum from the chunk start), gsuf[r] = g_{r+1} + ... + g_{L-1}, Qb = Q e^gam,
// Kh = K e^gsuf and, when factored, Kb = K e^-gam. Sums in double. Returns 1 when factored.
static int mn__gla_chunk_prep(mn__gla_scratch* w, const mn_real* Q, const mn_real* K, size_t ld, const mn_real* g0,
                              size_t H, size_t L, size_t Dk, size_t G) {
    size_t r, d;
    double mx = 0.0;
    for (d = 0; d < Dk; d++) {
        double pre = 0.0, suf = 0.0;
        for (r = 0; r < L; r++) {
            w->gl[r * Dk + d] = (mn_real)mn__gla_gate(G ? g0 + r * H * G : NULL, G, d);
            pre += w->gl[r * Dk + d];
            w->gam[r * Dk + d] = (mn_real)pre;
            if (fabs(pre) > mx) mx = fabs(pre);
        }
        for (r = L; r-- > 0;) {
            w->gsuf[r * Dk + d] = (mn_real)suf;
            suf += w->gl[r * Dk + d];
        }
    }
    int fact = mx <= MN__GLA_SPAN;
    for (r = 0; r < L; r++)
        for (d = 0; d < Dk; d++) {
            size_t i = r * Dk + d;
            w->Qb[i] = (mn_real)(Q[r * ld + d] * mn__exp(w->gam[i]));
            w->Kh[i] = (mn_real)(K[r * ld + d] * mn__exp(w->gsuf[i]));
            if (fact) w->Kb[i] = (mn_real)(K[r * ld + d] * mn__exp(-w->gam[i]));
        }
    return fact;
}
// The state after a chunk: Sn (Dk,Dv) = diag(e^gam_last) S + Kh^T V, V (L,Dv) rows ldv apart.
// Sn may be S (in place).
static void mn__gla_next_state(mn_real* Sn, const mn_real* S, const mn__gla_scratch* w, const mn_real* V, size_t ldv,
                               size_t L, size_t Dk, size_t Dv) {
    const mn_real* last = w->gam + (L - 1) * Dk;
    size_t d, j;
    for (d = 0; d < Dk; d++) {
        mn_real a = (mn_real)mn__exp(last[d]);
        for (j = 0; j < Dv; j++) Sn[d * Dv + j] = a * S[d * Dv + j];
    }
    mn_gemm(1, 0, Dk, Dv, L, 1.0, w->Kh, Dk, V, ldv, 1.0, Sn, Dv);
}
// Intra-chunk scores P (L,L): P[r][s] = scale sum_d q_rd k_sd exp(gam_rd - gam_sd) for s <= r, else 0.
// Factored: one gemm of Qb Kb^T. Else, for each r, s walks down from r keeping
// dec = g_{s+1} + ... + g_r, so each decay is summed from the gates (see MN__GLA_SPAN).
static void mn__gla_scores(mn__gla_scratch* w, const mn_real* Q, const mn_real* K, size_t ld, size_t L, size_t Dk,
                           double scale, int fact) {
    mn_real* P = w->P;
    size_t r, s, d;
    if (fact) {
        mn_gemm(0, 1, L, L, Dk, scale, w->Qb, Dk, w->Kb, Dk, 0.0, P, L);
        for (r = 0; r < L; r++)
            for (s = r + 1; s < L; s++) P[r * L + s] = 0;       // causal mask
        return;
    }
    for (r = 0; r < L; r++) {
        for (d = 0; d < Dk; d++) w->dec[d] = 0;
        for (s = L; s-- > r + 1;) P[r * L + s] = 0;
        for (s = r + 1; s-- > 0;) {
            double acc = 0.0;
            for (d = 0; d < Dk; d++) acc += (double)Q[r * ld + d] * K[s * ld + d] * mn__exp(w->dec[d]);
            P[r * L + s] = (mn_real)(scale * acc);
            for (d = 0; d < Dk; d++) w->dec[d] += w->gl[s * Dk + d];
        }
    }
}
// forward: P[r][s] = scale sum_d q_rd k_sd e^{gam_rd - gam_sd}, so with dP (L,L) lower triangular:
//   dQl[r][d] += scale sum_{s<=r} dP[r][s] k_sd e^{gam_rd - gam_sd} = e^{gam_rd} scale (dP Kb)[r][d]
//   dKl[s][d] += scale sum_{r>=s} dP[r][s] q_rd e^{gam_rd - gam_sd} = e^{-gam_sd} scale (dP^T Qb)[s][d]
// (the right-hand forms when factored; else the decays pair by pair as in mn__gla_scores).
static void mn__gla_scores_backward(mn__gla_scratch* w, const mn_real* Q, const mn_real* K, size_t ld, size_t L,
                                    size_t Dk, double scale, int fact) {
    size_t r, s, d;
    if (fact) {
        mn_gemm(0, 0, L, Dk, L, scale, w->dP, L, w->Kb, Dk, 0.0, w->tmp, Dk);
        for (r = 0; r < L * Dk; r++) w->dQl[r] += (mn_real)(w->tmp[r] * mn__exp(w->gam[r]));
        mn_gemm(1, 0, L, Dk, L, scale, w->dP, L, w->Qb, Dk, 0.0, w->tmp, Dk);
        for (r = 0; r < L * Dk; r++) w->dKl[r] += (mn_real)(w->tmp[r] * mn__exp(-w->gam[r]));
        return;
    }
    for (r = 0; r < L; r++) {
        for (d = 0; d < Dk; d++) w->dec[d] = 0;
        for (s = r + 1; s-- > 0;) {
            double ws = scale * w->dP[r * L + s];
            for (d = 0; d < Dk; d++) {
                double e = ws * mn__exp(w->dec[d]);
                w->dQl[r * Dk + d] += (mn_real)(e * K[s * ld + d]);
                w->dKl[s * Dk + d] += (mn_real)(e * Q[r * ld + d]);
                w->dec[d] += w->gl[s * Dk + d];
            }
        }
    }
}

// Chunkwise form (fla chunk_gla / chunk_simple_gla): chunks of C tokens (the
// last one may be shorter), gam the cumulative log-decay from the chunk start, S the incoming state:
//   pass 1: O = scale (Q e^gam) S                                      (earlier chunks, via the state)
//   pass 2: O += P V, P[r][s] = scale sum_d q_rd k_sd e^{gam_rd - gam_sd}, s <= r   (within the chunk)
//   pass 3: S = diag(e^gam_last) S + (K e^{gam_last - gam})^T V
// Cost per token and head: 2 C (Dk + Dv) + 4 Dk Dv FLOPs, in gemms (plus C Dk exps in a chunk past
// MN__GLA_SPAN); the backward 6 C Dk + 4 C Dv + 10 Dk Dv (the chunk states recomputed, then the
// passes' adjoints). Memory: the T/C chunk states, Dk Dv / C per token, in work.
// Nothing is saved: the backward recomputes the chunk states. work: mn_gla_work_size elements
// (O(C^2 + C Dk) per (b,h); the backward's T/C chunk states are in it too). (b,h) pairs in parallel.
MNDEF void mn_gla_forward(mn_real* out, mn_real* ht, const mn_real* q, const mn_real* k, const mn_real* v,
                          const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                          size_t G, double scale, size_t C, mn_real* work) {
    MN_ASSERT(C >= 1 && (G == 0 || G == 1 || G == Dk));
    size_t per = mn__gla_work_per_bh(T, Dk, Dv, C), DS = Dk * Dv;
    long long bh;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t0;
        mn_real* S = ht + (size_t)bh * DS;           // (Dk,Dv) the running state
        mn__gla_scratch w;
        mn__gla_carve(&w, work + (size_t)bh * per, T, Dk, Dv, C);
        if (h0 == NULL) memset(S, 0, DS * sizeof(mn_real));
        else if (h0 != ht) memcpy(S, h0 + (size_t)bh * DS, DS * sizeof(mn_real));
        for (t0 = 0; t0 < T; t0 += C) {
            size_t L = mn__gla_min(C, T - t0), i0 = (b * T + t0) * H + h;   // i0: row (b,t0,h)
            const mn_real* Q = q + i0 * Dk; const mn_real* K = k + i0 * Dk; const mn_real* V = v + i0 * Dv;
            mn_real* O = out + i0 * Dv;
            int fact = mn__gla_chunk_prep(&w, Q, K, H * Dk, G ? g + i0 * G : NULL, H, L, Dk, G);
            mn_gemm(0, 0, L, Dv, Dk, scale, w.Qb, Dk, S, Dv, 0.0, O, H * Dv);          // pass 1
            mn__gla_scores(&w, Q, K, H * Dk, L, Dk, scale, fact);                      // pass 2
            mn_gemm(0, 0, L, Dv, L, 1.0, w.P, L, V, H * Dv, 1.0, O, H * Dv);
            mn__gla_next_state(S, S, &w, V, H * Dv, L, Dk, Dv);                        // pass 3
        }
    }
}
// The passes in reverse, chunk by chunk from the last, with dS = dL/d(state leaving the chunk)
// (dht for the last chunk) and Kh = K e^{gam_last - gam}:
//   dV += P^T dO + Kh dS ;  dP = dO V^T (lower triangle)
//   dq += scale e^gam (dO S^T) + [P's part: mn__gla_scores_backward]
//   dk += e^{gam_last - gam} (V dS^T) + [P's part]
//   dS = diag(e^gam_last) dS + scale (Q e^gam)^T dO, which is dL/d(state entering the chunk)
// pass 1 recomputes the state entering every chunk and keeps them (work). The gate gradient uses
// the exact identity: q and k enter only as q_t e^{G_t} and k_s e^{-G_s}, G the
// cumulative log-decay from the sequence start, and ht carries e^{G_T}, so
//   dL/dG_t = q_t dq_t - k_t dk_t (+ rowsum(ht dht) at t = T-1), and g_t moves every G_s, s >= t:
//   dg_t = sum_{s>=t} (q_s dq_s - k_s dk_s) + rowsum(ht dht)   (acc, a running sum backwards)
// with dq, dk this call's own contributions (dQl, dKl), not what the buffers held before.
MNDEF void mn_gla_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dh0, const mn_real* dout,
                           const mn_real* dht, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
                           const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
                           double scale, size_t C, mn_real* work) {
    MN_ASSERT(C >= 1 && (G == 0 || G == 1 || G == Dk));
    size_t per = mn__gla_work_per_bh(T, Dk, Dv, C), N = mn__gla_nchunks(T, C), DS = Dk * Dv;
    size_t ldk = H * Dk, ldv = H * Dv;           // row strides of the [B,T,H,D] layout
    long long bh;
    MN__OMP_FOR                                  // each (b,h) writes only its own slices
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, n, r, d, j;
        mn__gla_scratch w;
        mn__gla_carve(&w, work + (size_t)bh * per, T, Dk, Dv, C);
        // pass 1: the state entering every chunk, Ss[n]; Ss[N] = ht
        if (h0) memcpy(w.Ss, h0 + (size_t)bh * DS, DS * sizeof(mn_real));
        else memset(w.Ss, 0, DS * sizeof(mn_real));
        for (n = 0; n < N; n++) {
            size_t t0 = n * C, L = mn__gla_min(C, T - t0), i0 = (b * T + t0) * H + h;
            mn__gla_chunk_prep(&w, q + i0 * Dk, k + i0 * Dk, ldk, G ? g + i0 * G : NULL, H, L, Dk, G);
            mn__gla_next_state(w.Ss + (n + 1) * DS, w.Ss + n * DS, &w, v + i0 * Dv, ldv, L, Dk, Dv);
        }
        // forward: L has sum(ht * dht), so dS starts at dht and the gate gradient's sum at rowsum(ht dht)
        for (d = 0; d < Dk; d++) {
            double a = 0.0;
            for (j = 0; j < Dv; j++) {
                mn_real x = dht ? dht[(size_t)bh * DS + d * Dv + j] : (mn_real)0;
                w.dS[d * Dv + j] = x;
                a += (double)w.Ss[N * DS + d * Dv + j] * x;
            }
            w.acc[d] = (mn_real)a;
        }
        // pass 2: the chunks in reverse
        for (n = N; n-- > 0;) {
            size_t t0 = n * C, L = mn__gla_min(C, T - t0), i0 = (b * T + t0) * H + h;
            const mn_real* Q = q + i0 * Dk; const mn_real* K = k + i0 * Dk; const mn_real* V = v + i0 * Dv;
            const mn_real* dO = dout + i0 * Dv; const mn_real* S = w.Ss + n * DS;
            const mn_real* last = w.gam + (L - 1) * Dk;
            int fact = mn__gla_chunk_prep(&w, Q, K, ldk, G ? g + i0 * G : NULL, H, L, Dk, G);
            mn__gla_scores(&w, Q, K, ldk, L, Dk, scale, fact);
            // forward: O += P V and S' = ... + Kh^T V, so: dV += P^T dO + Kh dS'
            mn_gemm(1, 0, L, Dv, L, 1.0, w.P, L, dO, ldv, 1.0, dv + i0 * Dv, ldv);
            mn_gemm(0, 0, L, Dv, Dk, 1.0, w.Kh, Dk, w.dS, Dv, 1.0, dv + i0 * Dv, ldv);
            // dP = dO V^T on and below the diagonal (P is 0 above it)
            mn_gemm(0, 1, L, L, Dv, 1.0, dO, ldv, V, ldv, 0.0, w.dP, L);
            for (r = 0; r < L; r++)
                for (j = r + 1; j < L; j++) w.dP[r * L + j] = 0;
            // forward: O = scale Qb S + ..., Qb = Q e^gam, so: dQl = scale e^gam (dO S^T)
            mn_gemm(0, 1, L, Dk, Dv, 1.0, dO, ldv, S, Dv, 0.0, w.dQl, Dk);
            for (r = 0; r < L * Dk; r++) w.dQl[r] = (mn_real)(scale * w.dQl[r] * mn__exp(w.gam[r]));
            // forward: S' = ... + Kh^T V, Kh = K e^gsuf, so: dKl = e^gsuf (V dS'^T)
            mn_gemm(0, 1, L, Dk, Dv, 1.0, V, ldv, w.dS, Dv, 0.0, w.dKl, Dk);
            for (r = 0; r < L * Dk; r++) w.dKl[r] = (mn_real)(w.dKl[r] * mn__exp(w.gsuf[r]));
            mn__gla_scores_backward(&w, Q, K, ldk, L, Dk, scale, fact);
            // add this chunk's dq, dk; the gate gradient walks the chunk's tokens backwards
            for (r = L; r-- > 0;) {
                size_t i = i0 + r * H;                   // row (b, t0+r, h)
                double sum = 0.0;
                for (d = 0; d < Dk; d++) {
                    dq[i * Dk + d] += w.dQl[r * Dk + d];
                    dk[i * Dk + d] += w.dKl[r * Dk + d];
                    if (G == 0 || dg == NULL) continue;
                    w.acc[d] += (mn_real)((double)Q[r * ldk + d] * w.dQl[r * Dk + d] -
                                          (double)K[r * ldk + d] * w.dKl[r * Dk + d]);
                    if (G == Dk) dg[i * Dk + d] += w.acc[d];
                    sum += w.acc[d];
                }
                if (G == 1 && dg) dg[i] += (mn_real)sum;
            }
            // forward: S' = diag(e^gam_last) S + ..., O = scale Qb S + ..., so:
            //   dS = diag(e^gam_last) dS' + scale Qb^T dO
            for (d = 0; d < Dk; d++) {
                mn_real a = (mn_real)mn__exp(last[d]);
                for (j = 0; j < Dv; j++) w.dS[d * Dv + j] *= a;
            }
            mn_gemm(1, 0, Dk, Dv, L, scale, w.Qb, Dk, dO, ldv, 1.0, w.dS, Dv);
        }
        if (dh0)
            for (r = 0; r < DS; r++) dh0[(size_t)bh * DS + r] += w.dS[r];
    }
}

// ---- the layers: "gla", "linattn" and "sgla" run this op (G = Dk, 0 and 1)

// fla's GLA-family gate (gla, sgla): the log-decay g = logsigmoid(z) / 16 (gate_logit_normalizer);
// g (n) written, may alias z (n)
#define MN__GLA_NORMALIZER 16.0
static void mn__gla_gate_forward(mn_real* g, const mn_real* z, size_t n) {
    size_t i;
    mn_logsigmoid_forward(g, z, n);
    for (i = 0; i < n; i++) g[i] = (mn_real)(g[i] / MN__GLA_NORMALIZER);
}
// dz (n) += dL/dz; dg (n) is scaled in place by 1/16 (scratch afterwards); z (n) the forward's input
static void mn__gla_gate_backward(mn_real* dz, mn_real* dg, const mn_real* z, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) dg[i] = (mn_real)(dg[i] / MN__GLA_NORMALIZER);
    mn_logsigmoid_backward(dz, dg, z, n);
}
// fla's gated output (Gated DeltaNet, gla, sgla): out = o_proj(RMSNorm_head(o) * swish(g_proj x)) over
// N rows of H heads of D. out (N,C) written; gg, on (N,H*D) and rs (N*H) written and saved for the
// backward; o (N,H*D); in (N,C); g_proj (H*D,C), norm (D), o_proj (C,H*D)
static void mn__gla_out_forward(const mn_config* c, mn_real* out, mn_real* gg, mn_real* on, mn_real* rs,
                                const mn_real* o,
                                const mn_real* in, const mn_real* g_proj, const mn_real* norm, const mn_real* o_proj,
                                size_t N) {
    size_t C = c->d_model, H = c->n_head, D = c->head_dim;
    mn_matmul_forward(gg, in, g_proj, NULL, N, C, H * D);
    mn_rmsnorm_gated_forward(on, rs, o, gg, norm, N * H, D, c->norm_eps);
    mn_matmul_forward(out, on, o_proj, NULL, N, H * D, C);
}
// din (N,C), dgg (N,H*D), do_ (N,H*D) and the weights' gradients accumulated (+=), don (N,H*D) written;
// dout (N,C); the rest as saved
static void mn__gla_out_backward(const mn_config* c, mn_real* din, mn_real* dgg, mn_real* don, mn_real* do_,
                                 mn_real* dg_proj, mn_real* dnorm, mn_real* do_proj, const mn_real* dout,
                                 const mn_real* gg, const mn_real* on, const mn_real* rs, const mn_real* o,
                                 const mn_real* in, const mn_real* g_proj, const mn_real* norm, const mn_real* o_proj,
                                 size_t N) {
    size_t C = c->d_model, H = c->n_head, D = c->head_dim;
    mn_matmul_backward(don, do_proj, NULL, dout, on, o_proj, N, H * D, C);
    mn_rmsnorm_gated_backward(do_, dgg, dnorm, don, rs, o, gg, norm, N * H, D);
    mn_matmul_backward(din, dg_proj, NULL, dgg, in, g_proj, N, C, H * D);
}
static double mn__gla_layer_flops(const mn_config* c, size_t T) {
    // per head and token: the intra-chunk scores and their product with v, 2 C_len (Dk + Dv), and the
    // state read, write and output, 6 Dk Dv (chunk length C_len = min(mesa_chunk, T); Dk = Dv = D)
    double K = (double)c->head_dim, Cc = (double)(c->mesa_chunk < T ? c->mesa_chunk : T);
    return (double)c->n_head * (2 * Cc * 2 * K + 6 * K * K);
}

// -- "gla": GLA as a mixer (fla layers/gla.py GatedLinearAttention):
//   q, k, v = x Wq, x Wk, x Wv ;  gk = logsigmoid(W2 (W1 x) + b2) / 16   (low-rank gate, rank 16)
//   o = GLA(q, k, v, gk) (chunkwise, scale Dk^-1/2) ;  out = RMSNormGated(o, x Wg) Wo   (swish gate)
// Key heads are as wide as value heads here (fla's default expand_k = 0.5 is not offered).
#define MN__GLA_RANK 16
typedef struct mn__gla_par {
    mn_real *q_proj, *k_proj, *v_proj;     // (HD,C)
    mn_real *gk_down, *gk_up, *gk_bias;    // (RANK,C), (HD,RANK), (HD): the low-rank gate
    mn_real *g_proj, *g_norm, *o_proj;     // (HD,C), (D), (C,HD): the gated output
} mn__gla_par;
typedef struct mn__gla_act {
    mn_real *q, *k, *v;    // (N,HD)
    mn_real* l1;           // (N,RANK) the gate's low-rank projection
    mn_real *l2, *gk;      // (N,HD) the gate's pre-activation and log-decay
    mn_real *o, *gg, *on;  // (N,HD) the op's output, the output gate's pre-activation, the gated norm
    mn_real* rs;           // (N*H) rstd of the output norm
    mn_real *ht, *work;    // (B,H,D,D) final state (not used), the op's workspace
} mn__gla_act;
typedef struct mn__gla_state { mn_real* S; } mn__gla_state;   // (H,D,D)
typedef struct mn__gla_temp { mn_real *q, *k, *v, *gk, *o, *gg, *on, *l1, *rs; } mn__gla_temp;

static void mn__gla_par_walk(mn__pwalk* w, void* pp) {
    mn__gla_par t, *p = pp ? (mn__gla_par*)pp : &t;
    size_t C = w->m->cfg.d_model, D = w->m->cfg.head_dim, HD = w->m->cfg.n_head * D;
    p->q_proj = mn__pw_matrix(w, "q_proj.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k_proj.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v_proj.weight", HD, C);
    p->gk_down = mn__pw_matrix(w, "gk_proj.0.weight", MN__GLA_RANK, C);
    p->gk_up = mn__pw_matrix(w, "gk_proj.1.weight", HD, MN__GLA_RANK);
    p->gk_bias = mn__pw_vector(w, "gk_proj.1.bias", HD, MN__INIT_ZEROS);
    p->g_proj = mn__pw_matrix(w, "g_proj.weight", HD, C);
    p->g_norm = mn__pw_vector(w, "g_norm_swish_gate.weight", D, MN__INIT_ONES);
    p->o_proj = mn__pw_matrix(w, "o_proj.weight", C, HD);
}
static size_t mn__gla_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__gla_act t, *a = p ? (mn__gla_act*)p : &t;
    size_t N = B * T, H = c->n_head, D = c->head_dim, HD = H * D, off = 0;
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD); MN__PIECE(v, N * HD);
    MN__PIECE(l1, N * MN__GLA_RANK);
    MN__PIECE(l2, N * HD); MN__PIECE(gk, N * HD);
    MN__PIECE(o, N * HD); MN__PIECE(gg, N * HD); MN__PIECE(on, N * HD);
    MN__PIECE(rs, N * H);
    MN__PIECE(ht, B * H * D * D); MN__PIECE(work, mn_gla_work_size(B, T, H, D, D, c->mesa_chunk));
    return off;
}
static void mn__gla_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                  size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_par P; mn__gla_act A;
    mn__layer_point(m, l, m->params, mn__gla_par_walk, &P);
    mn__gla_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.q, A.k, A.v, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    mn_matmul_forward(A.l1, in, P.gk_down, NULL, N, C, MN__GLA_RANK);
    mn_matmul_forward(A.l2, A.l1, P.gk_up, P.gk_bias, N, MN__GLA_RANK, HD);
    mn__gla_gate_forward(A.gk, A.l2, N * HD);
    mn_gla_forward(A.o, A.ht, A.q, A.k, A.v, A.gk, NULL, B, T, H, D, D, D, 1.0 / sqrt((double)D), c->mesa_chunk,
                   A.work);
    mn__gla_out_forward(c, out, A.gg, A.on, A.rs, A.o, in, P.g_proj, P.g_norm, P.o_proj, N);
}
static void mn__gla_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                   mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_par P, dP; mn__gla_act A, dA;
    mn__layer_point(m, l, m->params, mn__gla_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__gla_par_walk, &dP);
    mn__gla_act_layout(&A, acts, c, B, T);
    mn__gla_act_layout(&dA, dacts, c, B, T);
    mn__gla_out_backward(c, din, dA.gg, dA.on, dA.o, dP.g_proj, dP.g_norm, dP.o_proj, dout, A.gg, A.on, A.rs, A.o, in,
                         P.g_proj, P.g_norm, P.o_proj, N);
    mn_gla_backward(dA.q, dA.k, dA.v, dA.gk, NULL, dA.o, NULL, A.q, A.k, A.v, A.gk, NULL, B, T, H, D, D, D,
                    1.0 / sqrt((double)D), c->mesa_chunk, dA.work);
    mn__gla_gate_backward(dA.l2, dA.gk, A.l2, N * HD);
    mn_matmul_backward(dA.l1, dP.gk_up, dP.gk_bias, dA.l2, A.l1, P.gk_up, N, MN__GLA_RANK, HD);
    mn_matmul_backward(din, dP.gk_down, NULL, dA.l1, in, P.gk_down, N, C, MN__GLA_RANK);
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.q, dA.k, dA.v, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
static size_t mn__gla_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__gla_state t, *a = p ? (mn__gla_state*)p : &t;
    size_t off = 0;
    MN__PIECE(S, c->n_head * c->head_dim * c->head_dim);
    return off;
}
static size_t mn__gla_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__gla_temp t, *a = p ? (mn__gla_temp*)p : &t;
    size_t HD = c->n_head * c->head_dim, off = 0;
    MN__PIECE(q, HD); MN__PIECE(k, HD); MN__PIECE(v, HD); MN__PIECE(gk, HD); MN__PIECE(o, HD); MN__PIECE(gg, HD);
    MN__PIECE(on, HD); MN__PIECE(l1, MN__GLA_RANK); MN__PIECE(rs, c->n_head);
    return off;
}
static void mn__gla_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch, const mn_real* in,
                               size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_par P; mn__gla_state S; mn__gla_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__gla_par_walk, &P);
    mn__gla_state_layout(&S, state, c);
    mn__gla_temp_layout(&X, scratch, c);
    mn__qkv_forward(X.q, X.k, X.v, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    mn_matmul_forward(X.l1, in, P.gk_down, NULL, 1, C, MN__GLA_RANK);
    mn_matmul_forward(X.gk, X.l1, P.gk_up, P.gk_bias, 1, MN__GLA_RANK, HD);
    mn__gla_gate_forward(X.gk, X.gk, HD);
    mn_gla_step(X.o, S.S, X.q, X.k, X.v, X.gk, 1, H, D, D, D, 1.0 / sqrt((double)D));
    mn__gla_out_forward(c, out, X.gg, X.on, X.rs, X.o, in, P.g_proj, P.g_norm, P.o_proj, 1);
}

// -- "linattn": linear attention as a mixer (fla layers/linear_attn.py LinearAttention with its defaults;
// read at fla-org/flash-linear-attention 038bdb3):
//   q, k, v = x Wq, x Wk, x Wv ;  phi(z) = (z A1^T + a1) * (z A2^T + a2) on each head's D channels
//   (feature_map 'elementwise_product' = fla's HadamardFeatureMap, one for q and one for k, shared by
//   the heads; tie_feature_map_qk False) ;  o = LinAttn(phi(q), phi(k), v) (this op with G = 0,
//   chunkwise, scale Dk^-1/2, no normaliser: do_feature_map_norm False) ;  out = RMSNorm_head(o) Wo
// No conv, no decay, no output gate. Init as fla's _init_weights: every Linear N(0, init_std), biases
// 0, so phi starts small (~(init_std |z| sqrt(D))^2) and the output RMSNorm rescales o.
// expand_k = expand_v = 1.
typedef struct mn__hadamard_par { mn_real *w1, *b1, *w2, *b2; } mn__hadamard_par;   // (D,D), (D) each
typedef struct mn__gla_linattn_par {
    mn_real *q_proj, *k_proj, *v_proj;   // (HD,C)
    mn__hadamard_par fq, fk;             // the feature maps of q and of k
    mn_real *norm, *o_proj;              // (D), (C,HD)
} mn__gla_linattn_par;
typedef struct mn__gla_linattn_act {
    mn_real *q, *k, *v;            // (N,HD)
    mn_real *qa, *qb, *ka, *kb;    // (N,HD) the feature maps' two halves
    mn_real *qf, *kf;              // (N,HD) phi(q), phi(k)
    mn_real *o, *on;               // (N,HD) the op's output, normed
    mn_real* rs;                   // (N*H) rstd of the output norm
    mn_real *ht, *work;            // (B,H,D,D) final state (not used), the op's workspace
} mn__gla_linattn_act;
typedef struct mn__gla_linattn_temp { mn_real *q, *k, *v, *a, *b, *qf, *kf, *o, *on, *rs; } mn__gla_linattn_temp;

static void mn__hadamard_walk(mn__pwalk* w, mn__hadamard_par* p, const char* which, size_t D) {
    char nm[64];
    snprintf(nm, sizeof nm, "feature_map_%s.layer1.weight", which); p->w1 = mn__pw_matrix(w, nm, D, D);
    snprintf(nm, sizeof nm, "feature_map_%s.layer1.bias", which); p->b1 = mn__pw_vector(w, nm, D, MN__INIT_ZEROS);
    snprintf(nm, sizeof nm, "feature_map_%s.layer2.weight", which); p->w2 = mn__pw_matrix(w, nm, D, D);
    snprintf(nm, sizeof nm, "feature_map_%s.layer2.bias", which); p->b2 = mn__pw_vector(w, nm, D, MN__INIT_ZEROS);
}
static void mn__gla_linattn_par_walk(mn__pwalk* w, void* pp) {
    mn__gla_linattn_par t, *p = pp ? (mn__gla_linattn_par*)pp : &t;
    size_t C = w->m->cfg.d_model, D = w->m->cfg.head_dim, HD = w->m->cfg.n_head * D;
    p->q_proj = mn__pw_matrix(w, "q_proj.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k_proj.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v_proj.weight", HD, C);
    mn__hadamard_walk(w, &p->fq, "q", D);
    mn__hadamard_walk(w, &p->fk, "k", D);
    p->norm = mn__pw_vector(w, "norm.weight", D, MN__INIT_ONES);
    p->o_proj = mn__pw_matrix(w, "o_proj.weight", C, HD);
}
static size_t mn__gla_linattn_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__gla_linattn_act t, *a = p ? (mn__gla_linattn_act*)p : &t;
    size_t N = B * T, H = c->n_head, D = c->head_dim, HD = H * D, off = 0;
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD); MN__PIECE(v, N * HD);
    MN__PIECE(qa, N * HD); MN__PIECE(qb, N * HD); MN__PIECE(ka, N * HD); MN__PIECE(kb, N * HD);
    MN__PIECE(qf, N * HD); MN__PIECE(kf, N * HD); MN__PIECE(o, N * HD); MN__PIECE(on, N * HD);
    MN__PIECE(rs, N * H);
    MN__PIECE(ht, B * H * D * D); MN__PIECE(work, mn_gla_work_size(B, T, H, D, D, c->mesa_chunk));
    return off;
}
// The Hadamard feature map on rows of D (each head of each token): a = z W1^T + b1, b = z W2^T + b2,
// f = a * b; a, b are saved for the backward.
static void mn__hadamard_forward(mn_real* f, mn_real* a, mn_real* b, const mn_real* z, const mn__hadamard_par* p,
                                 size_t rows,
                                 size_t D) {
    size_t i;
    mn_matmul_forward(a, z, p->w1, p->b1, rows, D, D);
    mn_matmul_forward(b, z, p->w2, p->b2, rows, D, D);
    for (i = 0; i < rows * D; i++) f[i] = a[i] * b[i];
}
// forward: f = a * b, so: da += df * b, db += df * a; then each half's Linear backward into dz.
static void mn__hadamard_backward(mn_real* dz, mn_real* da, mn_real* db, const mn__hadamard_par* dp, const mn_real* df,
                                  const mn_real* a, const mn_real* b, const mn_real* z, const mn__hadamard_par* p,
                                  size_t rows, size_t D) {
    size_t i;
    for (i = 0; i < rows * D; i++) { da[i] += df[i] * b[i]; db[i] += df[i] * a[i]; }
    mn_matmul_backward(dz, dp->w1, dp->b1, da, z, p->w1, rows, D, D);
    mn_matmul_backward(dz, dp->w2, dp->b2, db, z, p->w2, rows, D, D);
}
static void mn__gla_linattn_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts,
                                          size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_linattn_par P; mn__gla_linattn_act A;
    mn__layer_point(m, l, m->params, mn__gla_linattn_par_walk, &P);
    mn__gla_linattn_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.q, A.k, A.v, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    mn__hadamard_forward(A.qf, A.qa, A.qb, A.q, &P.fq, N * H, D);
    mn__hadamard_forward(A.kf, A.ka, A.kb, A.k, &P.fk, N * H, D);
    mn_gla_forward(A.o, A.ht, A.qf, A.kf, A.v, NULL, NULL, B, T, H, D, D, 0, 1.0 / sqrt((double)D), c->mesa_chunk,
                   A.work);
    mn_rmsnorm_forward(A.on, A.rs, A.o, P.norm, N * H, D, c->norm_eps);
    mn_matmul_forward(out, A.on, P.o_proj, NULL, N, HD, C);
}
static void mn__gla_linattn_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                           mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_linattn_par P, dP; mn__gla_linattn_act A, dA;
    mn__layer_point(m, l, m->params, mn__gla_linattn_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__gla_linattn_par_walk, &dP);
    mn__gla_linattn_act_layout(&A, acts, c, B, T);
    mn__gla_linattn_act_layout(&dA, dacts, c, B, T);
    mn_matmul_backward(dA.on, dP.o_proj, NULL, dout, A.on, P.o_proj, N, HD, C);
    mn_rmsnorm_backward(dA.o, dP.norm, dA.on, A.rs, A.o, P.norm, N * H, D);
    mn_gla_backward(dA.qf, dA.kf, dA.v, NULL, NULL, dA.o, NULL, A.qf, A.kf, A.v, NULL, NULL, B, T, H, D, D, 0,
                    1.0 / sqrt((double)D), c->mesa_chunk, dA.work);
    mn__hadamard_backward(dA.q, dA.qa, dA.qb, &dP.fq, dA.qf, A.qa, A.qb, A.q, &P.fq, N * H, D);
    mn__hadamard_backward(dA.k, dA.ka, dA.kb, &dP.fk, dA.kf, A.ka, A.kb, A.k, &P.fk, N * H, D);
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.q, dA.k, dA.v, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
static size_t mn__gla_linattn_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__gla_linattn_temp t, *a = p ? (mn__gla_linattn_temp*)p : &t;
    size_t HD = c->n_head * c->head_dim, off = 0;
    MN__PIECE(q, HD); MN__PIECE(k, HD); MN__PIECE(v, HD); MN__PIECE(a, HD); MN__PIECE(b, HD);
    MN__PIECE(qf, HD); MN__PIECE(kf, HD); MN__PIECE(o, HD); MN__PIECE(on, HD); MN__PIECE(rs, c->n_head);
    return off;
}
static void mn__gla_linattn_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch,
                                       const mn_real* in, size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_linattn_par P; mn__gla_state S; mn__gla_linattn_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__gla_linattn_par_walk, &P);
    mn__gla_state_layout(&S, state, c);
    mn__gla_linattn_temp_layout(&X, scratch, c);
    mn__qkv_forward(X.q, X.k, X.v, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    mn__hadamard_forward(X.qf, X.a, X.b, X.q, &P.fq, H, D);
    mn__hadamard_forward(X.kf, X.a, X.b, X.k, &P.fk, H, D);
    // S += phi(k) v^T ; o = S^T phi(q) scale
    mn_gla_step(X.o, S.S, X.qf, X.kf, X.v, NULL, 1, H, D, D, 0, 1.0 / sqrt((double)D));
    mn_rmsnorm_forward(X.on, X.rs, X.o, P.norm, H, D, c->norm_eps);
    mn_matmul_forward(out, X.on, P.o_proj, NULL, 1, HD, C);
}

// -- "sgla": simple GLA as a mixer (fla layers/simple_gla.py SimpleGatedLinearAttention with its defaults;
// this op with one gate per head, G = 1; read at fla-org/flash-linear-attention 16c3830):
//   q, k, v = silu(conv4(x Wq)), silu(conv4(x Wk)), silu(conv4(x Wv))          (use_short_conv True)
//   g = logsigmoid(x Wgk + bgk) / 16   (one log-decay per head and step; gate_logit_normalizer 16)
//   o = SimpleGLA(q, k, v, g) (chunkwise, scale Dk^-1/2) ;  out = RMSNormGated(o, x Wg) Wo  (swish gate)
// No feature map (fla's default None); expand_k = expand_v = 1. Init: Linear and conv weights
// N(0, init_std), the gate bias 0 (so the decay starts at sigmoid(0)^(1/16) = 0.958).
typedef struct mn__gla_simple_par {
    mn_real *q_proj, *k_proj, *v_proj, *g_proj;   // (HD,C)
    mn_real *q_conv, *k_conv, *v_conv;            // (HD,1,4)
    mn_real *gk_proj, *gk_bias;                   // (H,C), (H): the per-head decay
    mn_real *g_norm, *o_proj;                     // (D), (C,HD)
} mn__gla_simple_par;
typedef struct mn__gla_simple_act {
    mn_real *ql, *kl, *vl, *q, *k, *v;   // (N,HD) before and after conv + silu
    mn_real *gl, *g;                     // (N*H) gate pre-activation, log-decay
    mn_real *o, *gg, *on;                // (N,HD) the op's output, the output gate's pre-activation, normed o
    mn_real* rs;                         // (N*H) rstd of the output norm
    mn_real *ht, *work;                  // (B,H,D,D) final state (not used), the op's workspace
} mn__gla_simple_act;
typedef struct mn__gla_simple_state { mn_real *cq, *ck, *cv, *S; } mn__gla_simple_state;   // (HD,3) x 3, (H,D,D)
typedef struct mn__gla_simple_temp { mn_real *ql, *kl, *vl, *q, *k, *v, *o, *gg, *on, *gl, *g,
        *rs; } mn__gla_simple_temp;

static void mn__gla_simple_par_walk(mn__pwalk* w, void* pp) {
    mn__gla_simple_par t, *p = pp ? (mn__gla_simple_par*)pp : &t;
    size_t C = w->m->cfg.d_model, H = w->m->cfg.n_head, D = w->m->cfg.head_dim, HD = H * D;
    p->q_proj = mn__pw_matrix(w, "q_proj.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k_proj.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v_proj.weight", HD, C);
    p->g_proj = mn__pw_matrix(w, "g_proj.weight", HD, C);
    p->q_conv = mn__pw_conv(w, "q_conv1d.weight", HD);
    p->k_conv = mn__pw_conv(w, "k_conv1d.weight", HD);
    p->v_conv = mn__pw_conv(w, "v_conv1d.weight", HD);
    p->gk_proj = mn__pw_matrix(w, "gk_proj.weight", H, C);
    p->gk_bias = mn__pw_vector(w, "gk_proj.bias", H, MN__INIT_ZEROS);
    p->g_norm = mn__pw_vector(w, "g_norm_swish_gate.weight", D, MN__INIT_ONES);
    p->o_proj = mn__pw_matrix(w, "o_proj.weight", C, HD);
}
static size_t mn__gla_simple_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__gla_simple_act t, *a = p ? (mn__gla_simple_act*)p : &t;
    size_t N = B * T, H = c->n_head, D = c->head_dim, HD = H * D, off = 0;
    MN__PIECE(ql, N * HD); MN__PIECE(kl, N * HD); MN__PIECE(vl, N * HD);
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD); MN__PIECE(v, N * HD);
    MN__PIECE(gl, N * H); MN__PIECE(g, N * H);
    MN__PIECE(o, N * HD); MN__PIECE(gg, N * HD); MN__PIECE(on, N * HD); MN__PIECE(rs, N * H);
    MN__PIECE(ht, B * H * D * D); MN__PIECE(work, mn_gla_work_size(B, T, H, D, D, c->mesa_chunk));
    return off;
}
static void mn__gla_simple_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts,
                                         size_t B,
                                         size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_simple_par P; mn__gla_simple_act A;
    mn__layer_point(m, l, m->params, mn__gla_simple_par_walk, &P);
    mn__gla_simple_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.ql, A.kl, A.vl, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    mn_shortconv_forward(A.q, A.ql, P.q_conv, B, T, HD, 4, 1);
    mn_shortconv_forward(A.k, A.kl, P.k_conv, B, T, HD, 4, 1);
    mn_shortconv_forward(A.v, A.vl, P.v_conv, B, T, HD, 4, 1);
    mn_matmul_forward(A.gl, in, P.gk_proj, P.gk_bias, N, C, H);
    mn__gla_gate_forward(A.g, A.gl, N * H);
    mn_gla_forward(A.o, A.ht, A.q, A.k, A.v, A.g, NULL, B, T, H, D, D, 1, 1.0 / sqrt((double)D), c->mesa_chunk, A.work);
    mn__gla_out_forward(c, out, A.gg, A.on, A.rs, A.o, in, P.g_proj, P.g_norm, P.o_proj, N);
}
static void mn__gla_simple_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                          mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_simple_par P, dP; mn__gla_simple_act A, dA;
    mn__layer_point(m, l, m->params, mn__gla_simple_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__gla_simple_par_walk, &dP);
    mn__gla_simple_act_layout(&A, acts, c, B, T);
    mn__gla_simple_act_layout(&dA, dacts, c, B, T);
    mn__gla_out_backward(c, din, dA.gg, dA.on, dA.o, dP.g_proj, dP.g_norm, dP.o_proj, dout, A.gg, A.on, A.rs, A.o, in,
                         P.g_proj, P.g_norm, P.o_proj, N);
    mn_gla_backward(dA.q, dA.k, dA.v, dA.g, NULL, dA.o, NULL, A.q, A.k, A.v, A.g, NULL, B, T, H, D, D, 1,
                    1.0 / sqrt((double)D), c->mesa_chunk, dA.work);
    mn__gla_gate_backward(dA.gl, dA.g, A.gl, N * H);
    mn_matmul_backward(din, dP.gk_proj, dP.gk_bias, dA.gl, in, P.gk_proj, N, C, H);
    mn_shortconv_backward(dA.ql, dP.q_conv, dA.q, A.ql, P.q_conv, B, T, HD, 4, 1);
    mn_shortconv_backward(dA.kl, dP.k_conv, dA.k, A.kl, P.k_conv, B, T, HD, 4, 1);
    mn_shortconv_backward(dA.vl, dP.v_conv, dA.v, A.vl, P.v_conv, B, T, HD, 4, 1);
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.ql, dA.kl, dA.vl, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
static size_t mn__gla_simple_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__gla_simple_state t, *a = p ? (mn__gla_simple_state*)p : &t;
    size_t HD = c->n_head * c->head_dim, off = 0;
    MN__PIECE(cq, 3 * HD); MN__PIECE(ck, 3 * HD); MN__PIECE(cv, 3 * HD); MN__PIECE(S, HD * c->head_dim);
    return off;
}
static size_t mn__gla_simple_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__gla_simple_temp t, *a = p ? (mn__gla_simple_temp*)p : &t;
    size_t H = c->n_head, HD = H * c->head_dim, off = 0;
    MN__PIECE(ql, HD); MN__PIECE(kl, HD); MN__PIECE(vl, HD); MN__PIECE(q, HD); MN__PIECE(k, HD); MN__PIECE(v, HD);
    MN__PIECE(o, HD); MN__PIECE(gg, HD); MN__PIECE(on, HD); MN__PIECE(gl, H); MN__PIECE(g, H); MN__PIECE(rs, H);
    return off;
}
static void mn__gla_simple_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch,
                                      const mn_real* in, size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__gla_simple_par P; mn__gla_simple_state S; mn__gla_simple_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__gla_simple_par_walk, &P);
    mn__gla_simple_state_layout(&S, state, c);
    mn__gla_simple_temp_layout(&X, scratch, c);
    mn__qkv_forward(X.ql, X.kl, X.vl, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    mn_shortconv_step(X.q, S.cq, X.ql, P.q_conv, HD, 4, 1);
    mn_shortconv_step(X.k, S.ck, X.kl, P.k_conv, HD, 4, 1);
    mn_shortconv_step(X.v, S.cv, X.vl, P.v_conv, HD, 4, 1);
    mn_matmul_forward(X.gl, in, P.gk_proj, P.gk_bias, 1, C, H);
    mn__gla_gate_forward(X.g, X.gl, H);
    // S = e^g S + k v^T ; o = S^T q scale
    mn_gla_step(X.o, S.S, X.q, X.k, X.v, X.g, 1, H, D, D, 1, 1.0 / sqrt((double)D));
    mn__gla_out_forward(c, out, X.gg, X.on, X.rs, X.o, in, P.g_proj, P.g_norm, P.o_proj, 1);
}

// >>delta_rule
// defines: mn_delta_rule_{forward,backward}_naive, mn_delta_rule_work_size,
// mn_delta_rule_{forward,backward} (chunkwise), mn_delta_rule_step; the layers "deltanet", "gdn" (+ _neg)
// The gated delta rule (Gated DeltaNet, Yang et al. 2025); with g == NULL it is DeltaNet (Yang et al.
// 2024). Per head, state S (Dk,Dv) read as o = S^T q, S_{-1} = h0 (zeros when h0 == NULL):
//   S'_t = exp(g_t) S_{t-1} ; u_t = beta_t (v_t - S'_t^T k_t) ; S_t = S'_t + k_t u_t^T ; o_t = S_t^T (scale q_t)
// that is S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T. q,k (B,T,H,Dk), v,out
// (B,T,H,Dv), beta,g (B,T,H), h0,ht (B,H,Dk,Dv). q and k are l2-normalised by the caller (the op
// does not normalise). beta in (0,1), or in (0,2) for negative eigenvalues (Grazzi et al.: the
// transition has eigenvalue exp(g)(1-beta) along k): nothing below depends on beta's range.
// Reference: fla fla/ops/gated_delta_rule/naive.py::naive_recurrent_gated_delta_rule (BTHD) and
// fla/ops/delta_rule/naive.py::delta_rule_recurrence (head-first); vectors delta_rule.vec and
// gated_delta_rule_*.vec.

#define MN__DELTA_MAXDV 1024   // the naive form keeps a few (Dv) vectors in double on the stack

// One token of one head: S (Dk,Dv) becomes S_t in place; o (Dv) = S_t^T (scale q). a = exp(g_t).
// Shared by the naive forward and the step, so the two agree bit for bit.
static void mn__delta_token(mn_real* o, mn_real* S, const mn_real* q, const mn_real* k, const mn_real* v, double beta,
                            double a, size_t Dk, size_t Dv, double scale) {
    double u[MN__DELTA_MAXDV], acc[MN__DELTA_MAXDV];
    size_t i, j;
    MN_ASSERT(Dv <= MN__DELTA_MAXDV);
    for (j = 0; j < Dv; j++) u[j] = 0.0;
    for (i = 0; i < Dk; i++) {                 // decay and read in one pass: S' = a S ; u = S'^T k
        mn_real* s = S + i * Dv;
        for (j = 0; j < Dv; j++) { s[j] = (mn_real)(a * s[j]); u[j] += (double)s[j] * k[i]; }
    }
    for (j = 0; j < Dv; j++) { u[j] = beta * (v[j] - u[j]); acc[j] = 0.0; }   // the delta: u = beta (v - S'^T k)
    for (i = 0; i < Dk; i++) {                 // write and read: S = S' + k u^T ; o = S^T (scale q)
        mn_real* s = S + i * Dv;
        for (j = 0; j < Dv; j++) { s[j] = (mn_real)(s[j] + k[i] * u[j]); acc[j] += (double)s[j] * q[i]; }
    }
    for (j = 0; j < Dv; j++) o[j] = (mn_real)(scale * acc[j]);
}

// Naive (recurrent) form, the teaching version: one token at a time, O(T Dk Dv) time per head
// (6 Dk Dv FLOPs per token). ht (B,H,Dk,Dv) is written and also holds the running state, so it is
// required. Saves states (B,H,T,Dk,Dv) = S_{t-1}, the state each token starts from (states[t=0] = h0),
// for the backward: T Dk Dv values per head (64 MB per sequence at T=1024, H=4, Dk=Dv=64 in float),
// which is why training uses the chunkwise form. states may be NULL when no backward follows.
MNDEF void mn_delta_rule_forward_naive(mn_real* out, mn_real* ht, mn_real* states, const mn_real* q, const mn_real* k,
                                       const mn_real* v, const mn_real* beta, const mn_real* g, const mn_real* h0,
                                       size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale) {
    long long bh;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t, n = Dk * Dv;
        mn_real* S = ht + (size_t)bh * n;
        if (h0) memcpy(S, h0 + (size_t)bh * n, n * sizeof(mn_real));
        else memset(S, 0, n * sizeof(mn_real));
        for (t = 0; t < T; t++) {
            size_t row = (b * T + t) * H + h;    // (b,t,h) in (B,T,H)
            if (states) memcpy(states + ((size_t)bh * T + t) * n, S, n * sizeof(mn_real));
            mn__delta_token(out + row * Dv, S, q + row * Dk, k + row * Dk, v + row * Dv, beta[row],
                            g ? exp(g[row]) : 1.0, Dk, Dv, scale);
        }
    }
}
// Reverse-time recurrence. dS (Dk,Dv) = dL/dS_t, starting from dht (zeros when NULL); each step
// recomputes S', u and S_t from the saved S_{t-1} (O(Dk Dv), no extra memory) and then:
//   forward: o = scale S_t^T q, so: dq += scale S_t do ; dS += scale q do^T
//   forward: S_t = S' + k u^T, so: du = dS^T k ; dk += dS u ; dS' = dS
//   forward: u = beta (v - p), p = S'^T k, so: dv += beta du ; dbeta += du.(v - p) ; dp = -beta du ;
//            dS' += k dp^T ; dk += S' dp
//   forward: S' = exp(g) S_{t-1}, so: dg += <dS', S'> ; dS_{t-1} = exp(g) dS'
// and dh0 += dS at the end. dstate (B,H,Dk,Dv) is scratch (overwritten). dg and dh0 may be NULL
// (not needed); dg is ignored when g is NULL. dht may be NULL (no loss on the final state).
MNDEF void mn_delta_rule_backward_naive(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dbeta, mn_real* dg,
                                        mn_real* dh0, mn_real* dstate, const mn_real* dout, const mn_real* dht,
                                        const mn_real* states, const mn_real* q, const mn_real* k, const mn_real* v,
                                        const mn_real* beta, const mn_real* g, size_t B, size_t T, size_t H, size_t Dk,
                                        size_t Dv, double scale) {
    long long bh;
    MN_ASSERT(Dv <= MN__DELTA_MAXDV);
    MN__OMP_FOR                                  // each (b,h) writes only its own rows
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t, i, j, n = Dk * Dv;
        double u[MN__DELTA_MAXDV], r[MN__DELTA_MAXDV], du[MN__DELTA_MAXDV];
        mn_real* dS = dstate + (size_t)bh * n;
        if (dht) memcpy(dS, dht + (size_t)bh * n, n * sizeof(mn_real));
        else memset(dS, 0, n * sizeof(mn_real));
        for (t = T; t-- > 0;) {
            size_t row = (b * T + t) * H + h;
            const mn_real* S0 = states + ((size_t)bh * T + t) * n;     // S_{t-1}
            const mn_real *qt = q + row * Dk, *kt = k + row * Dk, *vt = v + row * Dv, *dot = dout + row * Dv;
            double a = g ? exp(g[row]) : 1.0, bt = beta[row], dbt = 0.0, dgt = 0.0;
            // recompute the step: r = v - S'^T k with S' = a S_{t-1}, u = beta r
            for (j = 0; j < Dv; j++) r[j] = 0.0;
            for (i = 0; i < Dk; i++)
                for (j = 0; j < Dv; j++) r[j] += (double)S0[i * Dv + j] * kt[i];
            for (j = 0; j < Dv; j++) { r[j] = vt[j] - a * r[j]; u[j] = bt * r[j]; du[j] = 0.0; }
            // the read and the write, row i of S at a time (S_t = a S_{t-1} + k u^T is not stored)
            for (i = 0; i < Dk; i++) {
                const mn_real* s0 = S0 + i * Dv;
                mn_real* ds = dS + i * Dv;
                double accq = 0.0, acck = 0.0;
                for (j = 0; j < Dv; j++) {
                    accq += (a * s0[j] + kt[i] * u[j]) * dot[j];
                    ds[j] = (mn_real)(ds[j] + scale * qt[i] * dot[j]);
                    du[j] += (double)ds[j] * kt[i];
                    acck += (double)ds[j] * u[j];
                }
                dq[row * Dk + i] += (mn_real)(scale * accq);
                dk[row * Dk + i] += (mn_real)acck;
            }
            for (j = 0; j < Dv; j++) {           // the delta; du becomes dp = -beta du
                dv[row * Dv + j] += (mn_real)(bt * du[j]);
                dbt += du[j] * r[j];
                du[j] *= -bt;
            }
            for (i = 0; i < Dk; i++) {           // the read p = S'^T k, then the decay
                const mn_real* s0 = S0 + i * Dv;
                mn_real* ds = dS + i * Dv;
                double acck = 0.0;
                for (j = 0; j < Dv; j++) {
                    double sp = a * s0[j], dsp = ds[j] + kt[i] * du[j];
                    acck += sp * du[j];
                    dgt += dsp * sp;
                    ds[j] = (mn_real)(a * dsp);
                }
                dk[row * Dk + i] += (mn_real)acck;
            }
            dbeta[row] += (mn_real)dbt;
            if (g && dg) dg[row] += (mn_real)dgt;
        }
        if (dh0)
            for (i = 0; i < n; i++) dh0[(size_t)bh * n + i] += dS[i];
    }
}

// Chunkwise form through the WY/UT representation (fla fla/ops/gated_delta_rule/naive.py::
// naive_chunk_gated_delta_rule). Here C is the chunk length (the `chunk`
// argument), not d_model. Per chunk of c <= C tokens (rows r) with
// chunk-start state S, local decays gam_r = g_0 + ... + g_r and Gm_ij = exp(gam_i - gam_j) (j <= i):
//   L = strict_tril(diag(beta) (K K^T .* Gm)), A = (I + L)^-1 (forward substitution), T = A diag(beta)
//   W = T diag(e^gam) K, U = T V, V_new = U - W S   (row r of V_new is the u_r of the recurrence)
//   O = scale diag(e^gam) Q S + (scale Q K^T .* Gm) V_new ; S <- e^gam_last S + (diag(e^(gam_last-gam)) K)^T V_new
// Every exponent is <= 0 and nothing is divided. The last chunk may be shorter (T need not be a
// multiple of C). Cost per token and head: 6 C Dk + 4 C Dv + 6 Dk Dv + C^2/3 FLOPs forward, all
// products via mn_gemm; the backward, which recomputes passes 1-4 and then runs the adjoints of all six,
// 18 C Dk + 10 C Dv + 14 Dk Dv + C^2/3. Memory: hs, Dk Dv / C per token; work O(C^2 + C (Dk + Dv)).

// The per-(b,h) workspace of one chunk. C x C: KK = K K^T, Gm, P, L, A, dP, dL; C x Dk: Kg = diag(beta
// e^gam) K, W, Qg = scale diag(e^gam) Q, Kd = diag(e^(gam_last-gam)) K, dKd, dQg, dKg, dW; C x Dv:
// Vb = diag(beta) V, U, Vn = V_new, dVn, dVb; C: gam, eg = e^gam, ed = e^(gam_last-gam), G; Dk x Dv: dS.
typedef struct {
    mn_real *KK, *Gm, *P, *L, *A, *dP, *dL;
    mn_real *Kg, *W, *Qg, *Kd, *dKd, *dQg, *dKg, *dW;
    mn_real *Vb, *U, *Vn, *dVn, *dVb;
    mn_real *gam, *eg, *ed, *G, *dS;
} mn__delta_ws;

// Lays out one (b,h) pair's chunk workspace at base (NULL: only the size); returns its elements,
// 7C^2 + 8C Dk + 5C Dv + 4C + Dk Dv.
static size_t mn__delta_ws_point(mn__delta_ws* a, mn_real* base, size_t Dk, size_t Dv, size_t C) {
    size_t cc = C * C, ck = C * Dk, cv = C * Dv, off = 0;
    MN__PIECE(KK, cc); MN__PIECE(Gm, cc); MN__PIECE(P, cc); MN__PIECE(L, cc);
    MN__PIECE(A, cc); MN__PIECE(dP, cc); MN__PIECE(dL, cc);
    MN__PIECE(Kg, ck); MN__PIECE(W, ck); MN__PIECE(Qg, ck); MN__PIECE(Kd, ck);
    MN__PIECE(dKd, ck); MN__PIECE(dQg, ck); MN__PIECE(dKg, ck); MN__PIECE(dW, ck);
    MN__PIECE(Vb, cv); MN__PIECE(U, cv); MN__PIECE(Vn, cv); MN__PIECE(dVn, cv); MN__PIECE(dVb, cv);
    MN__PIECE(gam, C); MN__PIECE(eg, C); MN__PIECE(ed, C); MN__PIECE(G, C);
    MN__PIECE(dS, Dk * Dv);
    return off;
}
static size_t mn__delta_ws_size(size_t Dk, size_t Dv, size_t C) {
    mn__delta_ws w;
    return mn__delta_ws_point(&w, NULL, Dk, Dv, C);
}

// Elements of `work` that mn_delta_rule_forward and mn_delta_rule_backward need at chunk size C:
// B H (7C^2 + 8C Dk + 5C Dv + 4C + Dk Dv).
MNDEF size_t mn_delta_rule_work_size(size_t B, size_t H, size_t Dk, size_t Dv, size_t chunk) {
    return B * H * mn__delta_ws_size(Dk, Dv, chunk);
}

// Passes 1-4 of one chunk, shared by the forward and the backward (which recomputes them). Q,K
// (c rows, stride H Dk), V (stride H Dv), beta, g (stride H; g may be NULL), S (Dk,Dv) the chunk-start state.
static void mn__delta_chunk_prep(mn__delta_ws* w, const mn_real* S, const mn_real* Q, const mn_real* K,
                                 const mn_real* V, const mn_real* beta, const mn_real* g, size_t c, size_t C, size_t H,
                                 size_t Dk, size_t Dv, double scale) {
    size_t i, j, m, d, ldk = H * Dk, ldv = H * Dv;
    double acc = 0.0;
    for (i = 0; i < c; i++) {                                       // local decays
        acc += g ? (double)g[i * H] : 0.0;
        w->gam[i] = (mn_real)acc;
        w->eg[i] = (mn_real)mn__exp(w->gam[i]);
    }
    for (i = 0; i < c; i++) {
        w->ed[i] = (mn_real)mn__exp(w->gam[c - 1] - w->gam[i]);
        for (j = 0; j < c; j++) w->Gm[i * C + j] = j <= i ? (mn_real)mn__exp(w->gam[i] - w->gam[j]) : (mn_real)0;
    }
    // pass 1: KK = K K^T ; P = scale (Q K^T) .* Gm (causal, decayed)
    mn_gemm(0, 1, c, c, Dk, 1.0, K, ldk, K, ldk, 0.0, w->KK, C);
    mn_gemm(0, 1, c, c, Dk, scale, Q, ldk, K, ldk, 0.0, w->P, C);
    for (i = 0; i < c; i++)
        for (j = 0; j < c; j++) w->P[i * C + j] *= w->Gm[i * C + j];
    // pass 2: L_ij = beta_i k_i.k_j Gm_ij (j < i); A = (I + L)^-1 by forward substitution: row i of
    // (I + L) A = I reads A_i = e_i - sum_{m<i} L_im A_m, and A is unit lower triangular
    for (i = 0; i < c; i++) {
        mn_real* Ai = w->A + i * C;
        for (j = 0; j < c; j++) {
            w->L[i * C + j] = j < i ? (mn_real)(beta[i * H] * w->KK[i * C + j] * w->Gm[i * C + j]) : (mn_real)0;
            Ai[j] = j == i ? (mn_real)1 : (mn_real)0;
        }
        for (m = 0; m < i; m++) {
            mn_real l = w->L[i * C + m];
            const mn_real* Am = w->A + m * C;
            for (j = 0; j <= m; j++) Ai[j] -= l * Am[j];
        }
    }
    // pass 3: W = A Kg, U = A Vb (Kg = diag(beta e^gam) K, Vb = diag(beta) V: W = T diag(e^gam) K, U = T V)
    for (i = 0; i < c; i++) {
        mn_real bi = beta[i * H];
        for (d = 0; d < Dk; d++) {
            w->Kg[i * Dk + d] = bi * w->eg[i] * K[i * ldk + d];
            w->Qg[i * Dk + d] = (mn_real)(scale * w->eg[i] * Q[i * ldk + d]);
            w->Kd[i * Dk + d] = w->ed[i] * K[i * ldk + d];
        }
        for (d = 0; d < Dv; d++) w->Vb[i * Dv + d] = bi * V[i * ldv + d];
    }
    mn_gemm(0, 0, c, Dk, c, 1.0, w->A, C, w->Kg, Dk, 0.0, w->W, Dk);
    mn_gemm(0, 0, c, Dv, c, 1.0, w->A, C, w->Vb, Dv, 0.0, w->U, Dv);
    // pass 4: V_new = U - W S
    memcpy(w->Vn, w->U, c * Dv * sizeof(mn_real));
    mn_gemm(0, 0, c, Dv, Dk, -1.0, w->W, Dk, S, Dv, 1.0, w->Vn, Dv);
}

// Chunkwise forward, chunk size C >= 1 (16-64 is the useful range). work from mn_delta_rule_work_size.
// ht (B,H,Dk,Dv) is written and holds the running state (required). Saves hs (B,H,NC,Dk,Dv), the
// state at the start of each chunk (NC = ceil(T/C), chunk 0 starts from h0): T Dk Dv / C values per
// head, C times less than the naive form; the backward recomputes everything else (A, W, U, V_new)
// from it. hs may be NULL when no backward follows.
MNDEF void mn_delta_rule_forward(mn_real* out, mn_real* ht, mn_real* hs, const mn_real* q, const mn_real* k,
                                 const mn_real* v, const mn_real* beta, const mn_real* g, const mn_real* h0, size_t B,
                                 size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, mn_real* work) {
    size_t C = chunk, NC;
    long long bh;
    MN_ASSERT(chunk >= 1);
    NC = (T + C - 1) / C;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, n, i, ns = Dk * Dv, ldv = H * Dv;
        mn__delta_ws w;
        mn_real* S = ht + (size_t)bh * ns;
        mn__delta_ws_point(&w, work + (size_t)bh * mn__delta_ws_size(Dk, Dv, C), Dk, Dv, C);
        if (h0) memcpy(S, h0 + (size_t)bh * ns, ns * sizeof(mn_real));
        else memset(S, 0, ns * sizeof(mn_real));
        for (n = 0; n < NC; n++) {
            size_t t0 = n * C, c = T - t0 < C ? T - t0 : C, row = (b * T + t0) * H + h;
            mn_real* O = out + row * Dv;
            if (hs) memcpy(hs + ((size_t)bh * NC + n) * ns, S, ns * sizeof(mn_real));
            mn__delta_chunk_prep(&w, S, q + row * Dk, k + row * Dk, v + row * Dv, beta + row, g ? g + row : NULL, c, C,
                                 H, Dk, Dv, scale);
            // pass 5: O = Qg S + P V_new (inter-chunk read, then intra-chunk)
            mn_gemm(0, 0, c, Dv, Dk, 1.0, w.Qg, Dk, S, Dv, 0.0, O, ldv);
            mn_gemm(0, 0, c, Dv, c, 1.0, w.P, C, w.Vn, Dv, 1.0, O, ldv);
            // pass 6: S <- e^gam_last S + Kd^T V_new
            for (i = 0; i < ns; i++) S[i] *= w.eg[c - 1];
            mn_gemm(1, 0, Dk, Dv, c, 1.0, w.Kd, Dk, w.Vn, Dv, 1.0, S, Dv);
        }
    }
}
// Chunkwise backward: chunks in reverse, dS = dL/d(chunk-end state) starting from dht (zeros when
// NULL), passes 1-4 recomputed from hs, then passes 6..1 in reverse. The gate
// gradient treats every gam_r as a variable: G_r = dL/dgam_r collects one term per place gam enters
// (X_ij = Y_ij e^(gam_i-gam_j): G_i += dX_ij X_ij, G_j -= dX_ij X_ij; row scalings likewise), and
// dg_t = sum_{r >= t in the chunk} G_r. Accumulates into dq, dk, dv, dbeta, dg, dh0 (dg, dh0 may be
// NULL; dg is ignored when g is NULL; dht may be NULL). work as for the forward (its contents are lost).
MNDEF void mn_delta_rule_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dbeta, mn_real* dg, mn_real* dh0,
                                  const mn_real* dout, const mn_real* dht, const mn_real* hs, const mn_real* q,
                                  const mn_real* k, const mn_real* v, const mn_real* beta, const mn_real* g, size_t B,
                                  size_t T, size_t H, size_t Dk, size_t Dv, size_t chunk, double scale, mn_real* work) {
    size_t C = chunk, NC;
    long long bh;
    MN_ASSERT(chunk >= 1);
    NC = (T + C - 1) / C;
    MN__OMP_FOR                                  // each (b,h) writes only its own rows
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, n, i, j, d, ns = Dk * Dv, ldk = H * Dk, ldv = H * Dv;
        mn__delta_ws w;
        mn__delta_ws_point(&w, work + (size_t)bh * mn__delta_ws_size(Dk, Dv, C), Dk, Dv, C);
        if (dht) memcpy(w.dS, dht + (size_t)bh * ns, ns * sizeof(mn_real));
        else memset(w.dS, 0, ns * sizeof(mn_real));
        for (n = NC; n-- > 0;) {
            size_t t0 = n * C, c = T - t0 < C ? T - t0 : C, row = (b * T + t0) * H + h, last = c - 1;
            const mn_real* S = hs + ((size_t)bh * NC + n) * ns;
            const mn_real *Q = q + row * Dk, *K = k + row * Dk, *V = v + row * Dv, *dO = dout + row * Dv;
            mn_real *dQ = dq + row * Dk, *dK = dk + row * Dk, *dV = dv + row * Dv;
            double acc;
            mn__delta_chunk_prep(&w, S, Q, K, V, beta + row, g ? g + row : NULL, c, C, H, Dk, Dv, scale);
            for (i = 0; i < c; i++) w.G[i] = 0;
            // pass 6. forward: S_end = e^gam_last S + Kd^T Vn, so: dVn = Kd dS_end ; dKd = Vn dS_end^T ;
            // G_last += <dS_end, e^gam_last S> ; dS = e^gam_last dS_end ; and through Kd_r = e^(gam_last-gam_r) k_r:
            // dk_r += e^(gam_last-gam_r) dKd_r ; G_last += dKd_r.Kd_r ; G_r -= dKd_r.Kd_r
            mn_gemm(0, 0, c, Dv, Dk, 1.0, w.Kd, Dk, w.dS, Dv, 0.0, w.dVn, Dv);
            mn_gemm(0, 1, c, Dk, Dv, 1.0, w.Vn, Dv, w.dS, Dv, 0.0, w.dKd, Dk);
            for (acc = 0.0, i = 0; i < ns; i++) { acc += (double)w.dS[i] * S[i]; w.dS[i] *= w.eg[last]; }
            w.G[last] += (mn_real)(acc * w.eg[last]);
            for (i = 0; i < c; i++) {
                for (acc = 0.0, d = 0; d < Dk; d++) {
                    dK[i * ldk + d] += w.ed[i] * w.dKd[i * Dk + d];
                    acc += (double)w.dKd[i * Dk + d] * w.Kd[i * Dk + d];
                }
                w.G[last] += (mn_real)acc;
                w.G[i] -= (mn_real)acc;
            }
            // pass 5. forward: O = Qg S + P Vn, so: dQg = dO S^T ; dS += Qg^T dO ; dVn += P^T dO ; dP = dO Vn^T
            mn_gemm(0, 1, c, Dk, Dv, 1.0, dO, ldv, S, Dv, 0.0, w.dQg, Dk);
            mn_gemm(1, 0, Dk, Dv, c, 1.0, w.Qg, Dk, dO, ldv, 1.0, w.dS, Dv);
            mn_gemm(1, 0, c, Dv, c, 1.0, w.P, C, dO, ldv, 1.0, w.dVn, Dv);
            mn_gemm(0, 1, c, c, Dv, 1.0, dO, ldv, w.Vn, Dv, 0.0, w.dP, C);
            // forward: Qg_r = scale e^gam_r q_r, so: dq_r += scale e^gam_r dQg_r ; G_r += dQg_r.Qg_r
            for (i = 0; i < c; i++) {
                for (acc = 0.0, d = 0; d < Dk; d++) {
                    dQ[i * ldk + d] += (mn_real)(scale * w.eg[i] * w.dQg[i * Dk + d]);
                    acc += (double)w.dQg[i * Dk + d] * w.Qg[i * Dk + d];
                }
                w.G[i] += (mn_real)acc;
            }
            // forward: P_ij = scale q_i.k_j Gm_ij (j <= i), so: G_i += dP_ij P_ij ; G_j -= dP_ij P_ij ;
            // and with D_ij = scale dP_ij Gm_ij (kept in dP): dQ += D K ; dK += D^T Q
            for (i = 0; i < c; i++)
                for (j = 0; j < c; j++) {
                    mn_real* x = w.dP + i * C + j;
                    if (j > i) { *x = 0; continue; }
                    w.G[i] += *x * w.P[i * C + j];
                    w.G[j] -= *x * w.P[i * C + j];
                    *x = (mn_real)(scale * *x * w.Gm[i * C + j]);
                }
            mn_gemm(0, 0, c, Dk, c, 1.0, w.dP, C, K, ldk, 1.0, dQ, ldk);
            mn_gemm(1, 0, c, Dk, c, 1.0, w.dP, C, Q, ldk, 1.0, dK, ldk);
            // pass 4. forward: Vn = U - W S, so: dU = dVn ; dW = -dVn S^T ; dS -= W^T dVn
            mn_gemm(0, 1, c, Dk, Dv, -1.0, w.dVn, Dv, S, Dv, 0.0, w.dW, Dk);
            mn_gemm(1, 0, Dk, Dv, c, -1.0, w.W, Dk, w.dVn, Dv, 1.0, w.dS, Dv);
            // pass 3. forward: W = A Kg, U = A Vb, so: dKg = A^T dW ; dVb = A^T dU ; and through A = (I+L)^-1:
            // dL = -A^T (dW Kg^T + dU Vb^T) A^T = -(dKg W^T + dVb U^T), kept on L's support (j < i)
            mn_gemm(1, 0, c, Dk, c, 1.0, w.A, C, w.dW, Dk, 0.0, w.dKg, Dk);
            mn_gemm(1, 0, c, Dv, c, 1.0, w.A, C, w.dVn, Dv, 0.0, w.dVb, Dv);
            mn_gemm(0, 1, c, c, Dk, -1.0, w.dKg, Dk, w.W, Dk, 0.0, w.dL, C);
            mn_gemm(0, 1, c, c, Dv, -1.0, w.dVb, Dv, w.U, Dv, 1.0, w.dL, C);
            // forward: Kg_r = beta_r e^gam_r k_r, Vb_r = beta_r v_r, so: dk_r += beta_r e^gam_r dKg_r ;
            // dv_r += beta_r dVb_r ; dbeta_r += e^gam_r dKg_r.k_r + dVb_r.v_r ; G_r += dKg_r.Kg_r
            for (i = 0; i < c; i++) {
                mn_real bi = beta[row + i * H];
                double db = 0.0, gk = 0.0;
                for (d = 0; d < Dk; d++) {
                    mn_real x = w.dKg[i * Dk + d];
                    dK[i * ldk + d] += bi * w.eg[i] * x;
                    db += (double)x * K[i * ldk + d] * w.eg[i];
                    gk += (double)x * w.Kg[i * Dk + d];
                }
                for (d = 0; d < Dv; d++) {
                    dV[i * ldv + d] += bi * w.dVb[i * Dv + d];
                    db += (double)w.dVb[i * Dv + d] * V[i * ldv + d];
                }
                dbeta[row + i * H] += (mn_real)db;
                w.G[i] += (mn_real)gk;
            }
            // pass 2. forward: L_ij = beta_i KK_ij Gm_ij (j < i), so: dbeta_i += dL_ij KK_ij Gm_ij ;
            // G_i += dL_ij L_ij ; G_j -= dL_ij L_ij ; and with F_ij = dL_ij beta_i Gm_ij (kept in dL),
            // through KK = K K^T: dK += F K + F^T K
            for (i = 0; i < c; i++) {
                mn_real bi = beta[row + i * H];
                double db = 0.0;
                for (j = 0; j < c; j++) {
                    mn_real* x = w.dL + i * C + j;
                    if (j >= i) { *x = 0; continue; }
                    db += (double)*x * w.KK[i * C + j] * w.Gm[i * C + j];
                    w.G[i] += *x * w.L[i * C + j];
                    w.G[j] -= *x * w.L[i * C + j];
                    *x *= bi * w.Gm[i * C + j];
                }
                dbeta[row + i * H] += (mn_real)db;
            }
            mn_gemm(0, 0, c, Dk, c, 1.0, w.dL, C, K, ldk, 1.0, dK, ldk);
            mn_gemm(1, 0, c, Dk, c, 1.0, w.dL, C, K, ldk, 1.0, dK, ldk);
            // pass 1 (decays). forward: gam_r = g_0 + ... + g_r, so: dg_t += sum_{r >= t} G_r
            if (g && dg)
                for (acc = 0.0, i = c; i-- > 0;) { acc += w.G[i]; dg[row + i * H] += (mn_real)acc; }
        }
        if (dh0)
            for (i = 0; i < ns; i++) dh0[(size_t)bh * ns + i] += w.dS[i];
    }
}

// One token for generation, the recurrent form: state (B,H,Dk,Dv) in/out (S_{t-1} -> S_t);
// q,k (B,H,Dk), v,out (B,H,Dv), beta,g (B,H) (g NULL = DeltaNet). The same arithmetic as the naive
// forward, so stepping through a sequence gives its outputs and final state exactly.
MNDEF void mn_delta_rule_step(mn_real* out, mn_real* state, const mn_real* q, const mn_real* k, const mn_real* v,
                              const mn_real* beta, const mn_real* g, size_t B, size_t H, size_t Dk, size_t Dv,
                              double scale) {
    size_t bh;
    for (bh = 0; bh < B * H; bh++)
        mn__delta_token(out + bh * Dv, state + bh * Dk * Dv, q + bh * Dk, k + bh * Dk, v + bh * Dv, beta[bh],
                        g ? exp(g[bh]) : 1.0, Dk, Dv, scale);
}

// ---- the layer: DeltaNet and Gated DeltaNet as mixers (fla layers/delta_net.py, layers/gated_deltanet.py).
// Variant flags: MN__DELTA_RULE_GATED (Gated DeltaNet) and MN__DELTA_RULE_NEG (beta in (0,2): the
// negative-eigenvalue, "[-1,1]" variant of Grazzi et al.); the rows deltanet, deltanet_neg, gdn, gdn_neg.
//   q = l2norm(silu(conv4(x Wq))), k = l2norm(silu(conv4(x Wk))), v = silu(conv4(x Wv))
//   beta = sigmoid(x Wb) (x2 for the variant);  GDN: g = -exp(A_log) softplus(x Wa + dt_bias)
//   o = delta rule (chunkwise, scale Dk^-1/2);  GDN: y = RMSNormGated(o, x Wg) Wo ;  DeltaNet: y = RMSNorm(o) Wo
// Value heads are as wide as key heads here (fla's GDN default expand_v = 2 is not offered).
#define MN__DELTA_RULE_NEG 1
#define MN__DELTA_RULE_GATED 2
typedef struct mn__delta_rule_par {
    mn_real *q_proj, *k_proj, *v_proj;   // (HD,C)
    mn_real* b_proj;                     // (H,C) the write strength beta
    mn_real *q_conv, *k_conv, *v_conv;   // (HD,1,4)
    mn_real *o_norm, *o_proj;            // (D), (C,HD)
    mn_real *a_proj, *A_log, *dt_bias, *g_proj;   // GDN only: (H,C), (H), (H), (HD,C); NULL otherwise
} mn__delta_rule_par;
typedef struct mn__delta_rule_act {
    mn_real *ql, *kl, *vl, *qc, *kc, *vc, *q, *k;   // (N,HD) projections, after conv + silu, after the l2 norm
    mn_real *rq, *rk, *bl, *beta, *al, *g;          // (N*H) rstd of the l2 norms, beta, the decay
    mn_real *o, *gl, *on;                           // (N,HD) the op's output, the output gate, normed o
    mn_real* ro;                                    // (N*H) rstd of the output norm
    mn_real* hs;                                    // (B,H,NC,D,D) the chunk-start states
    mn_real *ht, *work;                             // (B,H,D,D) final state (not used), the op's workspace
} mn__delta_rule_act;
typedef struct mn__delta_rule_state { mn_real *cq, *ck, *cv, *S; } mn__delta_rule_state;   // (HD,3) x 3, (H,D,D)
typedef struct mn__delta_rule_temp {
    mn_real *ql, *kl, *vl, *qc, *kc, *v, *q, *k, *o, *gl, *on;   // (HD)
    mn_real *bl, *beta, *al, *g, *rs;                            // (H)
} mn__delta_rule_temp;

static void mn__delta_rule_par_walk(mn__pwalk* w, void* pp) {
    mn__delta_rule_par t, *p = pp ? (mn__delta_rule_par*)pp : &t;
    size_t C = w->m->cfg.d_model, H = w->m->cfg.n_head, D = w->m->cfg.head_dim, HD = H * D;
    p->q_proj = mn__pw_matrix(w, "q_proj.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k_proj.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v_proj.weight", HD, C);
    p->b_proj = mn__pw_matrix(w, "b_proj.weight", H, C);
    p->q_conv = mn__pw_conv(w, "q_conv1d.weight", HD);
    p->k_conv = mn__pw_conv(w, "k_conv1d.weight", HD);
    p->v_conv = mn__pw_conv(w, "v_conv1d.weight", HD);
    p->o_norm = mn__pw_vector(w, "o_norm.weight", D, MN__INIT_ONES);
    p->o_proj = mn__pw_matrix(w, "o_proj.weight", C, HD);
    p->a_proj = p->A_log = p->dt_bias = p->g_proj = NULL;
    if (mn__mixer_variant(w->m, w->l) & MN__DELTA_RULE_GATED) {
        p->a_proj = mn__pw_matrix(w, "a_proj.weight", H, C);
        p->A_log = mn__pw_vector(w, "A_log", H, MN__INIT_ALOG);          // no weight decay
        p->dt_bias = mn__pw_vector(w, "dt_bias", H, MN__INIT_DTBIAS);
        p->g_proj = mn__pw_matrix(w, "g_proj.weight", HD, C);
    }
}
static size_t mn__delta_rule_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__delta_rule_act t, *a = p ? (mn__delta_rule_act*)p : &t;
    size_t N = B * T, H = c->n_head, D = c->head_dim, HD = H * D, NC = (T + c->mesa_chunk - 1) / c->mesa_chunk, off = 0;
    MN__PIECE(ql, N * HD); MN__PIECE(kl, N * HD); MN__PIECE(vl, N * HD);
    MN__PIECE(qc, N * HD); MN__PIECE(kc, N * HD); MN__PIECE(vc, N * HD);
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD);
    MN__PIECE(rq, N * H); MN__PIECE(rk, N * H); MN__PIECE(bl, N * H); MN__PIECE(beta, N * H);
    MN__PIECE(al, N * H); MN__PIECE(g, N * H);
    MN__PIECE(o, N * HD); MN__PIECE(gl, N * HD); MN__PIECE(on, N * HD); MN__PIECE(ro, N * H);
    MN__PIECE(hs, B * H * NC * D * D);
    MN__PIECE(ht, B * H * D * D); MN__PIECE(work, mn_delta_rule_work_size(B, H, D, D, c->mesa_chunk));
    return off;
}
static void mn__delta_rule_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts,
                                         size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    int var = mn__mixer_variant(m, l), gated = var & MN__DELTA_RULE_GATED;
    mn__delta_rule_par P; mn__delta_rule_act A;
    mn__layer_point(m, l, m->params, mn__delta_rule_par_walk, &P);
    mn__delta_rule_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.ql, A.kl, A.vl, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    mn_shortconv_forward(A.qc, A.ql, P.q_conv, B, T, HD, 4, 1);
    mn_shortconv_forward(A.kc, A.kl, P.k_conv, B, T, HD, 4, 1);
    mn_shortconv_forward(A.vc, A.vl, P.v_conv, B, T, HD, 4, 1);
    mn_l2norm_forward(A.q, A.rq, A.qc, N * H, D);
    mn_l2norm_forward(A.k, A.rk, A.kc, N * H, D);
    mn_matmul_forward(A.bl, in, P.b_proj, NULL, N, C, H);
    mn_sigmoid_forward(A.beta, A.bl, N * H);
    if (var & MN__DELTA_RULE_NEG) for (i = 0; i < N * H; i++) A.beta[i] *= 2;
    if (gated) {   // g = -exp(A_log) softplus(a + dt_bias)
        mn_matmul_forward(A.al, in, P.a_proj, P.dt_bias, N, C, H);   // a + dt_bias
        mn_softplus_forward(A.g, A.al, N * H);
        for (i = 0; i < N * H; i++) A.g[i] *= (mn_real)-exp(P.A_log[i % H]);
    }
    mn_delta_rule_forward(A.o, A.ht, A.hs, A.q, A.k, A.vc, A.beta, gated ? A.g : NULL, NULL, B, T, H, D, D,
                          c->mesa_chunk,
                          1.0 / sqrt((double)D), A.work);
    if (gated) mn__gla_out_forward(c, out, A.gl, A.on, A.ro, A.o, in, P.g_proj, P.o_norm, P.o_proj, N);
    else {
        mn_rmsnorm_forward(A.on, A.ro, A.o, P.o_norm, N * H, D, c->norm_eps);
        mn_matmul_forward(out, A.on, P.o_proj, NULL, N, HD, C);
    }
}
static void mn__delta_rule_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                          mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    int var = mn__mixer_variant(m, l), gated = var & MN__DELTA_RULE_GATED;
    mn__delta_rule_par P, dP; mn__delta_rule_act A, dA;
    mn__layer_point(m, l, m->params, mn__delta_rule_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__delta_rule_par_walk, &dP);
    mn__delta_rule_act_layout(&A, acts, c, B, T);
    mn__delta_rule_act_layout(&dA, dacts, c, B, T);
    if (gated)
        mn__gla_out_backward(c, din, dA.gl, dA.on, dA.o, dP.g_proj, dP.o_norm, dP.o_proj, dout, A.gl, A.on, A.ro, A.o,
                             in,
                             P.g_proj, P.o_norm, P.o_proj, N);
    else {
        mn_matmul_backward(dA.on, dP.o_proj, NULL, dout, A.on, P.o_proj, N, HD, C);
        mn_rmsnorm_backward(dA.o, dP.o_norm, dA.on, A.ro, A.o, P.o_norm, N * H, D);
    }
    mn_delta_rule_backward(dA.q, dA.k, dA.vc, dA.beta, gated ? dA.g : NULL, NULL, dA.o, NULL, A.hs, A.q, A.k, A.vc,
                           A.beta,
                           gated ? A.g : NULL, B, T, H, D, D, c->mesa_chunk, 1.0 / sqrt((double)D), dA.work);
    // forward: g = -e^{A_log} softplus(u), u = a + dt_bias, so: dA_log += dg g ; du = dg (-e^{A_log}) sigmoid(u)
    if (gated) {
        for (i = 0; i < N * H; i++) {
            dP.A_log[i % H] += dA.g[i] * A.g[i];
            dA.al[i] += (mn_real)(dA.g[i] * -exp(P.A_log[i % H]) * mn__sigmoid(A.al[i]));
        }
        mn_matmul_backward(din, dP.a_proj, dP.dt_bias, dA.al, in, P.a_proj, N, C, H);
    }
    if (var & MN__DELTA_RULE_NEG) for (i = 0; i < N * H; i++) dA.beta[i] *= 2;    // beta = 2 sigmoid(bl)
    mn_sigmoid_backward(dA.bl, dA.beta, A.bl, N * H);
    mn_matmul_backward(din, dP.b_proj, NULL, dA.bl, in, P.b_proj, N, C, H);
    mn_l2norm_backward(dA.qc, dA.q, A.q, A.rq, N * H, D);
    mn_l2norm_backward(dA.kc, dA.k, A.k, A.rk, N * H, D);
    mn_shortconv_backward(dA.ql, dP.q_conv, dA.qc, A.ql, P.q_conv, B, T, HD, 4, 1);
    mn_shortconv_backward(dA.kl, dP.k_conv, dA.kc, A.kl, P.k_conv, B, T, HD, 4, 1);
    mn_shortconv_backward(dA.vl, dP.v_conv, dA.vc, A.vl, P.v_conv, B, T, HD, 4, 1);
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.ql, dA.kl, dA.vl, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
static size_t mn__delta_rule_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__delta_rule_state t, *a = p ? (mn__delta_rule_state*)p : &t;
    size_t HD = c->n_head * c->head_dim, off = 0;
    MN__PIECE(cq, 3 * HD); MN__PIECE(ck, 3 * HD); MN__PIECE(cv, 3 * HD); MN__PIECE(S, HD * c->head_dim);
    return off;
}
static size_t mn__delta_rule_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__delta_rule_temp t, *a = p ? (mn__delta_rule_temp*)p : &t;
    size_t H = c->n_head, HD = H * c->head_dim, off = 0;
    MN__PIECE(ql, HD); MN__PIECE(kl, HD); MN__PIECE(vl, HD); MN__PIECE(qc, HD); MN__PIECE(kc, HD); MN__PIECE(v, HD);
    MN__PIECE(q, HD); MN__PIECE(k, HD); MN__PIECE(o, HD); MN__PIECE(gl, HD); MN__PIECE(on, HD);
    MN__PIECE(bl, H); MN__PIECE(beta, H); MN__PIECE(al, H); MN__PIECE(g, H); MN__PIECE(rs, H);
    return off;
}
static void mn__delta_rule_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch,
                                      const mn_real* in, size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    int var = mn__mixer_variant(m, l), gated = var & MN__DELTA_RULE_GATED;
    mn__delta_rule_par P; mn__delta_rule_state S; mn__delta_rule_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__delta_rule_par_walk, &P);
    mn__delta_rule_state_layout(&S, state, c);
    mn__delta_rule_temp_layout(&X, scratch, c);
    mn__qkv_forward(X.ql, X.kl, X.vl, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    mn_shortconv_step(X.qc, S.cq, X.ql, P.q_conv, HD, 4, 1);
    mn_shortconv_step(X.kc, S.ck, X.kl, P.k_conv, HD, 4, 1);
    mn_shortconv_step(X.v, S.cv, X.vl, P.v_conv, HD, 4, 1);
    mn_l2norm_forward(X.q, X.rs, X.qc, H, D);
    mn_l2norm_forward(X.k, X.rs, X.kc, H, D);
    mn_matmul_forward(X.bl, in, P.b_proj, NULL, 1, C, H);
    mn_sigmoid_forward(X.beta, X.bl, H);
    if (var & MN__DELTA_RULE_NEG) for (i = 0; i < H; i++) X.beta[i] *= 2;
    if (gated) {
        mn_matmul_forward(X.al, in, P.a_proj, P.dt_bias, 1, C, H);
        mn_softplus_forward(X.g, X.al, H);
        for (i = 0; i < H; i++) X.g[i] *= (mn_real)-exp(P.A_log[i]);
    }
    mn_delta_rule_step(X.o, S.S, X.q, X.k, X.v, X.beta, gated ? X.g : NULL, 1, H, D, D, 1.0 / sqrt((double)D));
    if (gated) mn__gla_out_forward(c, out, X.gl, X.on, X.rs, X.o, in, P.g_proj, P.o_norm, P.o_proj, 1);
    else {
        mn_rmsnorm_forward(X.on, X.rs, X.o, P.o_norm, H, D, c->norm_eps);
        mn_matmul_forward(out, X.on, P.o_proj, NULL, 1, HD, C);
    }
}
static double mn__delta_rule_layer_flops(const mn_config* c, size_t T) {
    // chunkwise WY form per head and token (approximate): W, U and the intra-chunk products
    // 4C(Dk+Dv), the state read, write and output 6 Dk Dv
    double K = (double)c->head_dim, Cc = (double)(c->mesa_chunk < T ? c->mesa_chunk : T);
    return (double)c->n_head * (4 * Cc * 2 * K + 6 * K * K);
}

// >>ssd
// defines: mn_ssd_{forward,backward}_recurrent, mn_ssd_{forward,backward}, mn_ssd_step, work sizes;
//          the layers "mamba2", "mamba2_neg"
// A diagonal state-space recurrence with a matrix state per head and a scalar decay (>>rglru is the
// one with a vector state and a per-channel decay). Neither has a normaliser or a skip term.
//
// Mamba-2 SSD core (Dao & Gu 2024), per head, without dt, D and z (those belong to the layer):
// h_t = a_t h_{t-1} + X_t B_t^T     h (P,N), mamba's orientation ([V,K], fla's transposed); h_{-1} = h0
// y_t = h_t C_t                     decay, then write, then read: t sees itself; ht = h_{T-1}
// a_t = exp(A_t), A_t = A*dt the discrete log-decay (MN_SSD_LOG_DECAY), or a_t = A_t directly
// (MN_SSD_TRANSITION). X (B,T,H,P) is x*dt, A (B,T,H), Bm, Cm (B,T,H,N) (groups expanded to heads),
// h0, ht (B,H,P,N). It is simple GLA with q = C, k = B, v = X, g = A, scale 1 (>>gla with G = 1).
// The [-1,1] variant (Grazzi et al. 2025: a transition that can be negative lets a diagonal SSM track
// parity-like state, which a decay in (0,1) cannot): the layer forms a = 2 exp(A dt) - 1
// in (-1,1) and passes it with MN_SSD_TRANSITION; dA is then dL/da and the layer chains through
// a = 2s - 1 itself. Log-space cumulative products cannot carry a negative (or zero) transition, so
// the chunkwise form, which is built on exp of segment sums like ssd_minimal, takes log-decays only;
// the recurrent form and the step take either.
// Reference: state-spaces/mamba @ e9594ce mamba_ssm/modules/ssd_minimal.py ssd_minimal_discrete
// (chunkwise: segsum decays, diagonal blocks, chunk states, inter-chunk scan); the recurrent form is
// Mamba2.step's update. Golden vectors: reference/vectors/mamba2_ssd.vec.
//
// Forms: mn_ssd_{forward,backward}_recurrent (the naive loop, kept as the reference), mn_ssd_{forward,
// backward} (chunkwise, matrix products through mn_gemm), mn_ssd_step.

static size_t mn__ssm_min(size_t a, size_t b) { return a < b ? a : b; }

// ------------------------------------------------------------------------------ SSD, recurrent

// The transition a_t from what A holds.
static double mn__ssd_a(double A, int amode) { return amode == MN_SSD_TRANSITION ? A : exp(A); }

// One token of one head, in place: S (P,N) = a S + x b^T, then y (P) = S c. x (P), b,c (N).
// The recurrent forward (and so the step) is a loop over this.
static void mn__ssd_token(mn_real* y, mn_real* S, const mn_real* x, double a, const mn_real* b, const mn_real* c,
                          size_t P, size_t N) {
    size_t p, n;
    for (p = 0; p < P; p++) {
        double acc = 0.0;
        for (n = 0; n < N; n++) {
            mn_real s = (mn_real)(a * S[p * N + n] + (double)x[p] * b[n]);
            S[p * N + n] = s;
            acc += (double)s * c[n];
        }
        y[p] = (mn_real)acc;
    }
}

// Naive recurrent form: the definition, one token at a time (the update of mamba's Mamba2.step).
// O(T P N) per head, no workspace: ht holds the running state. Nothing is saved; the backward
// recomputes the states. Accumulates in double: the reference the chunkwise form is tested on.
MNDEF void mn_ssd_forward_recurrent(mn_real* y, mn_real* ht, const mn_real* X, const mn_real* A, const mn_real* Bm,
                                    const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P,
                                    size_t N, int amode) {
    size_t b, h, t, DS = P * N;
    MN_ASSERT(amode == MN_SSD_LOG_DECAY || amode == MN_SSD_TRANSITION);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            mn_real* S = ht + (b * H + h) * DS;
            if (h0 == NULL) memset(S, 0, DS * sizeof(mn_real));
            else if (h0 != ht) memcpy(S, h0 + (b * H + h) * DS, DS * sizeof(mn_real));
            for (t = 0; t < T; t++) {
                size_t r = (b * T + t) * H + h;                  // row (b,t,h)
                mn__ssd_token(y + r * P, S, X + r * P, mn__ssd_a(A[r], amode), Bm + r * N, Cm + r * N, P, N);
            }
        }
}
// forward: S_t = a_t S_{t-1} + X_t B_t^T, y_t = S_t C_t, so, walking t backwards with dS = dL/dS_t
// (dht at t = T-1):
//   dC_t += S_t^T dy_t ; dS += dy_t C_t^T ; dX_t += dS B_t ; dB_t += dS^T X_t ;
//   da_t = sum(S_{t-1} o dS), dA_t += a_t da_t for log-decays (da/dA = a), da_t for transitions ;
//   dS = a_t dS, which is dL/dS_{t-1} ; after t = 0 it is dL/dh0.
// work (T+2,P,N): the states S_{-1} .. S_{T-1} of one head, and dS. Heads run one after another.
MNDEF void mn_ssd_backward_recurrent(mn_real* dX, mn_real* dA, mn_real* dB, mn_real* dC, mn_real* dh0,
                                     const mn_real* dy, const mn_real* dht, const mn_real* X, const mn_real* A,
                                     const mn_real* Bm, const mn_real* Cm, const mn_real* h0, size_t B, size_t T,
                                     size_t H, size_t P, size_t N, int amode, mn_real* work) {
    size_t b, h, t, p, n, DS = P * N;
    mn_real* Ss = work;                              // (T+1,P,N) Ss + (t+1)*DS is S_t
    mn_real* dS = work + (T + 1) * DS;               // (P,N)
    MN_ASSERT(amode == MN_SSD_LOG_DECAY || amode == MN_SSD_TRANSITION);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            size_t hs = (b * H + h) * DS;            // offset of this head's (P,N) state
            if (h0) memcpy(Ss, h0 + hs, DS * sizeof(mn_real));
            else memset(Ss, 0, DS * sizeof(mn_real));
            for (t = 0; t < T; t++) {                // the forward again, keeping every state
                size_t r = (b * T + t) * H + h;
                const mn_real* Sp = Ss + t * DS; mn_real* St = Ss + (t + 1) * DS;
                double a = mn__ssd_a(A[r], amode);
                for (p = 0; p < P; p++)
                    for (n = 0; n < N; n++)
                        St[p * N + n] = (mn_real)(a * Sp[p * N + n] + (double)X[r * P + p] * Bm[r * N + n]);
            }
            if (dht) memcpy(dS, dht + hs, DS * sizeof(mn_real));
            else memset(dS, 0, DS * sizeof(mn_real));
            for (t = T; t-- > 0;) {
                size_t r = (b * T + t) * H + h;
                const mn_real* St = Ss + (t + 1) * DS; const mn_real* Sp = Ss + t * DS;
                const mn_real* xt = X + r * P; const mn_real* bt = Bm + r * N;
                const mn_real* ct = Cm + r * N; const mn_real* dyt = dy + r * P;
                double a = mn__ssd_a(A[r], amode), da = 0.0;
                for (n = 0; n < N; n++) {
                    double acc = 0.0;
                    for (p = 0; p < P; p++) acc += (double)St[p * N + n] * dyt[p];
                    dC[r * N + n] += (mn_real)acc;
                }
                for (p = 0; p < P; p++)
                    for (n = 0; n < N; n++) dS[p * N + n] += (mn_real)((double)dyt[p] * ct[n]);
                for (p = 0; p < P; p++) {
                    double acc = 0.0;
                    for (n = 0; n < N; n++) acc += (double)dS[p * N + n] * bt[n];
                    dX[r * P + p] += (mn_real)acc;
                }
                for (n = 0; n < N; n++) {
                    double acc = 0.0;
                    for (p = 0; p < P; p++) acc += (double)dS[p * N + n] * xt[p];
                    dB[r * N + n] += (mn_real)acc;
                }
                for (p = 0; p < DS; p++) {
                    da += (double)Sp[p] * dS[p];
                    dS[p] = (mn_real)(a * dS[p]);
                }
                if (dA) dA[r] += (mn_real)(amode == MN_SSD_TRANSITION ? da : a * da);
            }
            if (dh0)
                for (p = 0; p < DS; p++) dh0[hs + p] += dS[p];
        }
}
MNDEF size_t mn_ssd_work_size_recurrent(size_t T, size_t P, size_t N) { return (T + 2) * P * N; }

// One token per sequence for generation: the recurrent forward with T = 1 and h0 = ht = state,
// since (B,1,H,D) and (B,H,D) are the same layout. O(H P N) per sequence.
MNDEF void mn_ssd_step(mn_real* y, mn_real* state, const mn_real* X, const mn_real* A, const mn_real* Bm,
                       const mn_real* Cm, size_t B, size_t H, size_t P, size_t N, int amode) {
    mn_ssd_forward_recurrent(y, state, X, A, Bm, Cm, state, B, 1, H, P, N, amode);
}

// ------------------------------------------------------------------------------ SSD, chunkwise

// Decays inside a chunk of L tokens, with A_r its log-decays. Every decay is exp of a sum of
// log-decays summed directly over its own span (ssd_minimal's stable "segsum"), never a difference
// of cumulative sums, so two tokens side by side after a strong decay still get exp(A_r) to the
// last bit and nothing overflows (every exponent is <= 0 for log-decays <= 0):
//   eg[r] = exp(A_0 + .. + A_r)          the chunk's start to token r (the read of the incoming state)
//   es[r] = exp(A_{r+1} + .. + A_{L-1})  token r to the chunk's end (the write into the next state)
//   Lm[r][s] = exp(A_{s+1} + .. + A_r)   token s to token r >= s (0 above the diagonal)
// Lm costs C^2/2 exps per chunk and head, small next to the gemms' 2 C^2 (N + P).
static size_t mn__ssd_nchunks(size_t T, size_t C) { return (T + C - 1) / C; }
static size_t mn__ssd_cw(size_t T, size_t C) { return T == 0 ? 1 : mn__ssm_min(C, T); } // longest chunk

// Scratch of one (b,h) pair, carved out of work; Cw is the longest chunk, NC the number of chunks.
typedef struct {
    mn_real *eg, *es, *wo, *wk; // (Cw) decays from the chunk start / to the chunk end; backward: dA sums
    mn_real *Lm, *M, *dM;       // (Cw,Cw) segsum decays; (C B^T) o Lm; backward: dL/dM
    mn_real *Ce, *Bh;           // (Cw,N) C e^gam (rows scaled by eg), B e^gsuf (by es)
    mn_real *dCl, *dBl, *tmp;   // (Cw,N) backward: this chunk's dC, dB; scratch
    mn_real *Ss, *dS;           // (NC+1,P,N) backward: the state entering each chunk; (P,N) dL/dstate
} mn__ssd_scratch;
// Lays out one (b,h) pair's scratch at base (NULL: only the size); returns its elements.
static size_t mn__ssd_carve(mn__ssd_scratch* a, mn_real* base, size_t T, size_t P, size_t N, size_t C) {
    size_t Cw = mn__ssd_cw(T, C), NC = mn__ssd_nchunks(T, C), off = 0;
    MN__PIECE(eg, Cw); MN__PIECE(es, Cw); MN__PIECE(wo, Cw); MN__PIECE(wk, Cw);
    MN__PIECE(Lm, Cw * Cw); MN__PIECE(M, Cw * Cw); MN__PIECE(dM, Cw * Cw);
    MN__PIECE(Ce, Cw * N); MN__PIECE(Bh, Cw * N);
    MN__PIECE(dCl, Cw * N); MN__PIECE(dBl, Cw * N); MN__PIECE(tmp, Cw * N);
    MN__PIECE(Ss, (NC + 1) * P * N); MN__PIECE(dS, P * N);
    return off;
}
static size_t mn__ssd_work_per_bh(size_t T, size_t P, size_t N, size_t C) {
    mn__ssd_scratch w;
    return mn__ssd_carve(&w, NULL, T, P, N, C);
}
MNDEF size_t mn_ssd_work_size(size_t B, size_t T, size_t H, size_t P, size_t N, size_t C) {
    MN_ASSERT(C >= 1);
    return B * H * mn__ssd_work_per_bh(T, P, N, C);
}

// Prepares a chunk of L tokens: A0 its first log-decay (steps H apart), Cc, Bc (L,N) rows ld apart.
// Writes eg, es, Bh = B e^gsuf and, when scores != 0, also Lm (sums in double, see above),
// M = (C B^T) o Lm and Ce = C e^gam. Returns the decay across the whole chunk, eg[L-1].
static double mn__ssd_chunk_prep(mn__ssd_scratch* w, const mn_real* A0, const mn_real* Cc, const mn_real* Bc, size_t H,
                                 size_t ld, size_t L, size_t N, int scores) {
    size_t r, s, n;
    double pre = 0.0, suf = 0.0;
    for (r = 0; r < L; r++) {
        pre += A0[r * H];
        w->eg[r] = (mn_real)exp(pre);
    }
    for (r = L; r-- > 0;) {
        w->es[r] = (mn_real)exp(suf);
        suf += A0[r * H];
    }
    for (r = 0; r < L; r++)
        for (n = 0; n < N; n++) w->Bh[r * N + n] = Bc[r * ld + n] * w->es[r];
    if (!scores) return w->eg[L - 1];           // enough for the next state
    for (r = 0; r < L; r++) {
        double seg = 0.0;                        // A_{s+1} + .. + A_r as s walks down from r
        w->Lm[r * L + r] = 1;
        for (s = r; s-- > 0;) {
            seg += A0[(s + 1) * H];
            w->Lm[r * L + s] = (mn_real)mn__exp(seg);
        }
        for (s = r + 1; s < L; s++) w->Lm[r * L + s] = 0;
    }
    // intra-chunk scores: M = (C B^T) o Lm, lower triangular (Lm is 0 above the diagonal)
    mn_gemm(0, 1, L, L, N, 1.0, Cc, ld, Bc, ld, 0.0, w->M, L);
    for (r = 0; r < L * L; r++) w->M[r] *= w->Lm[r];
    for (r = 0; r < L; r++)
        for (n = 0; n < N; n++) w->Ce[r * N + n] = Cc[r * ld + n] * w->eg[r];
    return w->eg[L - 1];
}

// Chunkwise form (ssd_minimal_discrete): chunks of C tokens (the last one may be
// shorter; T need not be a multiple of C), S the state entering the chunk:
//   pass 1: Y = (C e^gam) S^T                                 (earlier chunks, via the state: Y_off)
//   pass 2: Y += M X, M = (C B^T) o Lm                        (within the chunk: Y_diag)
//   pass 3: S = e^{gam_last} S + X^T (B e^gsuf)               (the chunk state and the inter-chunk scan)
// Cost per token and head: 2 C (N + P) + 4 P N FLOPs in gemms, plus C/2 exps; the backward about
// 8 C N + 4 C P + 10 P N (states and scores recomputed, then the adjoints). Nothing is saved: the
// backward recomputes the chunk states. work: mn_ssd_work_size elements (O(C^2 + C N) per (b,h), and
// the backward's T/C chunk states). (b,h) pairs in parallel. Log-decays only (see the top).
MNDEF void mn_ssd_forward(mn_real* y, mn_real* ht, const mn_real* X, const mn_real* A, const mn_real* Bm,
                          const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N,
                          size_t C, mn_real* work) {
    MN_ASSERT(C >= 1);
    size_t per = mn__ssd_work_per_bh(T, P, N, C), DS = P * N;
    long long bh;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t0, i;
        mn_real* S = ht + (size_t)bh * DS;           // (P,N) the running state
        mn__ssd_scratch w;
        mn__ssd_carve(&w, work + (size_t)bh * per, T, P, N, C);
        if (h0 == NULL) memset(S, 0, DS * sizeof(mn_real));
        else if (h0 != ht) memcpy(S, h0 + (size_t)bh * DS, DS * sizeof(mn_real));
        for (t0 = 0; t0 < T; t0 += C) {
            size_t L = mn__ssm_min(C, T - t0), i0 = (b * T + t0) * H + h;   // i0: row (b,t0,h)
            const mn_real* Xc = X + i0 * P; const mn_real* Bc = Bm + i0 * N; const mn_real* Cc = Cm + i0 * N;
            mn_real* Y = y + i0 * P;
            mn_real al = (mn_real)mn__ssd_chunk_prep(&w, A + i0, Cc, Bc, H, H * N, L, N, 1);
            mn_gemm(0, 1, L, P, N, 1.0, w.Ce, N, S, N, 0.0, Y, H * P);            // pass 1
            mn_gemm(0, 0, L, P, L, 1.0, w.M, L, Xc, H * P, 1.0, Y, H * P);        // pass 2
            for (i = 0; i < DS; i++) S[i] *= al;                                   // pass 3
            mn_gemm(1, 0, P, N, L, 1.0, Xc, H * P, w.Bh, N, 1.0, S, N);
        }
    }
}
// The passes in reverse, chunk by chunk from the last, with dS = dL/d(state leaving the chunk)
// (dht for the last chunk), S the state entering it and al = e^{gam_last}:
//   dX += M^T dY + Bh dS^T ;  dM = dY X^T (lower triangle) ;  dG = dM o Lm (M = G o Lm, G = C B^T)
//   dC += dG B + e^gam (dY S) ;  dB += dG^T C + e^gsuf (X dS)
//   dS = al dS + (C e^gam)^T dY, which is dL/d(state entering the chunk); after chunk 0 it is dL/dh0
// The log-decay gradient collects, for every decay factor, (its gradient) x (its value) at each
// log-decay inside its span (d exp(sum)/dA_l = exp(sum)):
//   eg[r] (span 0..r):       wo_r = C_r . (e^gam dY S)_r           -> dA_l for l <= r
//   es[r] (span r+1..L-1):   wk_r = B_r . (e^gsuf X dS)_r          -> dA_l for l > r
//   al (the whole chunk):    sum(al S o dS)                        -> every dA_l of the chunk
//   Lm[r][s] (span s+1..r):  Wt[r][s] = dM[r][s] M[r][s]           -> dA_l for s < l <= r
// The last is R_l = sum_{s<l} sum_{r>=l} Wt[r][s]: column suffix sums of Wt, then row l's sum left
// of the diagonal, O(C^2) and with no subtraction. pass 1 recomputes the states entering the chunks.
MNDEF void mn_ssd_backward(mn_real* dX, mn_real* dA, mn_real* dB, mn_real* dC, mn_real* dh0, const mn_real* dy,
                           const mn_real* dht, const mn_real* X, const mn_real* A, const mn_real* Bm, const mn_real* Cm,
                           const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C,
                           mn_real* work) {
    MN_ASSERT(C >= 1);
    size_t per = mn__ssd_work_per_bh(T, P, N, C), NC = mn__ssd_nchunks(T, C), DS = P * N;
    size_t ldx = H * P, ldb = H * N;             // row strides of the [B,T,H,D] layout
    long long bh;
    MN__OMP_FOR                                  // each (b,h) writes only its own slices
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, k, r, s, n, i;
        mn__ssd_scratch w;
        mn__ssd_carve(&w, work + (size_t)bh * per, T, P, N, C);
        // pass 1: the state entering every chunk, Ss[k]; Ss[NC] = ht
        if (h0) memcpy(w.Ss, h0 + (size_t)bh * DS, DS * sizeof(mn_real));
        else memset(w.Ss, 0, DS * sizeof(mn_real));
        for (k = 0; k < NC; k++) {
            size_t t0 = k * C, L = mn__ssm_min(C, T - t0), i0 = (b * T + t0) * H + h;
            mn_real* Sn = w.Ss + (k + 1) * DS;
            mn_real al = (mn_real)mn__ssd_chunk_prep(&w, A + i0, Cm + i0 * N, Bm + i0 * N, H, ldb, L, N, 0);
            for (i = 0; i < DS; i++) Sn[i] = al * w.Ss[k * DS + i];
            mn_gemm(1, 0, P, N, L, 1.0, X + i0 * P, ldx, w.Bh, N, 1.0, Sn, N);
        }
        if (dht) memcpy(w.dS, dht + (size_t)bh * DS, DS * sizeof(mn_real));
        else memset(w.dS, 0, DS * sizeof(mn_real));
        // pass 2: the chunks in reverse
        for (k = NC; k-- > 0;) {
            size_t t0 = k * C, L = mn__ssm_min(C, T - t0), i0 = (b * T + t0) * H + h;
            const mn_real* Xc = X + i0 * P; const mn_real* Bc = Bm + i0 * N; const mn_real* Cc = Cm + i0 * N;
            const mn_real* dY = dy + i0 * P; const mn_real* S = w.Ss + k * DS;
            double al = mn__ssd_chunk_prep(&w, A + i0, Cc, Bc, H, ldb, L, N, 1), ws = 0.0;
            // forward: Y += M X and S' = ... + X^T Bh, so: dX += M^T dY + Bh dS'^T
            mn_gemm(1, 0, L, P, L, 1.0, w.M, L, dY, ldx, 1.0, dX + i0 * P, ldx);
            mn_gemm(0, 1, L, P, N, 1.0, w.Bh, N, w.dS, N, 1.0, dX + i0 * P, ldx);
            // dM = dY X^T on and below the diagonal (M is 0 above it); Wt = dM o M (into M, which
            // is not needed any more); dG = dM o Lm (into dM)
            mn_gemm(0, 1, L, L, P, 1.0, dY, ldx, Xc, ldx, 0.0, w.dM, L);
            for (r = 0; r < L; r++)
                for (s = 0; s < L; s++) {
                    size_t j = r * L + s;
                    if (s > r) { w.dM[j] = 0; w.M[j] = 0; continue; }
                    w.M[j] *= w.dM[j];
                    w.dM[j] *= w.Lm[j];
                }
            // forward: M = (C B^T) o Lm, so: dC = dG B ; dB = dG^T C (this chunk's, before the rest)
            mn_gemm(0, 0, L, N, L, 1.0, w.dM, L, Bc, ldb, 0.0, w.dCl, N);
            mn_gemm(1, 0, L, N, L, 1.0, w.dM, L, Cc, ldb, 0.0, w.dBl, N);
            // forward: Y = (C e^gam) S^T + ..., so: dC += e^gam (dY S), and wo_r = C_r . that
            mn_gemm(0, 0, L, N, P, 1.0, dY, ldx, S, N, 0.0, w.tmp, N);
            for (r = 0; r < L; r++) {
                double acc = 0.0;
                for (n = 0; n < N; n++) {
                    mn_real v = w.tmp[r * N + n] * w.eg[r];
                    w.dCl[r * N + n] += v;
                    acc += (double)Cc[r * ldb + n] * v;
                }
                w.wo[r] = (mn_real)acc;
            }
            // forward: S' = ... + X^T (B e^gsuf), so: dB += e^gsuf (X dS'), and wk_r = B_r . that
            mn_gemm(0, 0, L, N, P, 1.0, Xc, ldx, w.dS, N, 0.0, w.tmp, N);
            for (r = 0; r < L; r++) {
                double acc = 0.0;
                for (n = 0; n < N; n++) {
                    mn_real v = w.tmp[r * N + n] * w.es[r];
                    w.dBl[r * N + n] += v;
                    acc += (double)Bc[r * ldb + n] * v;
                }
                w.wk[r] = (mn_real)acc;
            }
            // forward: S' = al S + ..., so the chunk's total decay has weight sum(al S o dS')
            for (i = 0; i < DS; i++) ws += (double)S[i] * w.dS[i];
            ws *= al;
            if (dA) {
                double suf = 0.0, pre = 0.0;             // sum_{r>=l} wo_r ; sum_{r<l} wk_r
                // Wt (in M): column suffix sums, M[r][s] = sum_{r'>=r} Wt[r'][s]
                for (r = L - 1; r-- > 0;)
                    for (s = 0; s <= r; s++) w.M[r * L + s] += w.M[(r + 1) * L + s];
                for (r = 0; r < L; r++) suf += w.wo[r];
                for (r = 0; r < L; r++) {            // r plays l
                    double R = 0.0;
                    for (s = 0; s < r; s++) R += w.M[r * L + s];
                    dA[i0 + r * H] += (mn_real)(ws + suf + pre + R);
                    suf -= w.wo[r];
                    pre += w.wk[r];
                }
            }
            for (r = 0; r < L; r++)
                for (n = 0; n < N; n++) {
                    dC[(i0 + r * H) * N + n] += w.dCl[r * N + n];
                    dB[(i0 + r * H) * N + n] += w.dBl[r * N + n];
                }
            // forward: S' = al S + ..., Y = (C e^gam) S^T + ..., so: dS = al dS' + (C e^gam)^T dY
            for (i = 0; i < DS; i++) w.dS[i] = (mn_real)(al * w.dS[i]);
            mn_gemm(1, 0, P, N, L, 1.0, dY, ldx, w.Ce, N, 1.0, w.dS, N);
        }
        if (dh0)
            for (i = 0; i < DS; i++) dh0[(size_t)bh * DS + i] += w.dS[i];
    }
}

// ---- the layer: Mamba-2 as a mixer (mamba_ssm modules/mamba2.py Mamba2, ngroups 1). d_inner DI = 2 C
// (expand 2), head dim P = head_dim, Hm = DI/P heads, state size N = head_dim:
//   [z | x | B | C | dt] = xn W_in ;  [x | B | C] = silu(conv4([x | B | C]) + b_conv)
//   Delta = softplus(dt + dt_bias), A = -exp(A_log) ;  SSD on X = x Delta, log-decay A Delta, B, C
//   y = SSD + D x ;  out = RMSNorm(y * silu(z)) W_out   (gate then norm over DI, eps = norm_eps)
// Variant MN__SSD_NEG, the "[-1,1]" Mamba (Grazzi et al.): transition a = 2 exp(A Delta) - 1 in (-1, 1),
// run by the recurrent form (log-space chunked products cannot carry a negative transition).
#define MN__SSD_NEG 1
typedef struct mn__ssd_dims { size_t DI, P, Hm, Ns, W_in, Wc; } mn__ssd_dims;   // W_in, Wc: in_proj, conv widths
static mn__ssd_dims mn__ssd_layer_dims(const mn_config* c) {
    mn__ssd_dims d;
    d.DI = 2 * c->d_model; d.P = c->head_dim; d.Hm = d.DI / d.P; d.Ns = c->head_dim;
    d.W_in = 2 * d.DI + 2 * d.Ns + d.Hm; d.Wc = d.DI + 2 * d.Ns;
    return d;
}
typedef struct mn__ssd_par {
    mn_real* in_proj;               // (W_in,C)
    mn_real *conv, *conv_bias;      // (Wc,1,4), (Wc)
    mn_real *dt_bias, *A_log, *D;   // (Hm) each
    mn_real *norm, *out_proj;       // (DI), (C,DI)
} mn__ssd_par;
typedef struct mn__ssd_act {
    mn_real* zx;                    // (N,W_in) the input projection [z | x | B | C | dt]
    mn_real *xbci, *xbcp, *xbc;     // (N,Wc) [x | B | C] before the conv, after conv + bias, after silu
    mn_real *dtp, *delta;           // (N,Hm) dt + dt_bias, Delta
    mn_real* xt;                    // (N,DI) X = x Delta
    mn_real* at;                    // (N,Hm) the log-decay (or the [-1,1] transition)
    mn_real *bh, *ch;               // (N,Hm,Ns) B and C per head
    mn_real *y, *yz, *yn;           // (N,DI) SSD + D x, gated, normed
    mn_real* rs;                    // (N) rstd of the norm
    mn_real *ht, *work;             // (B,Hm,P,Ns) final state (not used), the op's workspace
} mn__ssd_act;
typedef struct mn__ssd_state { mn_real *conv, *S; } mn__ssd_state;   // (Wc,3), (Hm,P,Ns)
typedef struct mn__ssd_temp { mn_real *zx, *xbc, *xt, *y, *yz, *bh, *ch, *at, *rs; } mn__ssd_temp;

static void mn__ssd_par_walk(mn__pwalk* w, void* pp) {
    mn__ssd_par t, *p = pp ? (mn__ssd_par*)pp : &t;
    mn__ssd_dims d = mn__ssd_layer_dims(&w->m->cfg);
    size_t C = w->m->cfg.d_model;
    p->in_proj = mn__pw_matrix(w, "in_proj.weight", d.W_in, C);
    p->conv = mn__pw_conv(w, "conv1d.weight", d.Wc);
    p->conv_bias = mn__pw_vector(w, "conv1d.bias", d.Wc, MN__INIT_ZEROS);
    p->dt_bias = mn__pw_vector(w, "dt_bias", d.Hm, MN__INIT_DTBIAS);
    p->A_log = mn__pw_vector(w, "A_log", d.Hm, MN__INIT_ALOG);
    p->D = mn__pw_vector(w, "D", d.Hm, MN__INIT_ONES);
    p->norm = mn__pw_vector(w, "norm.weight", d.DI, MN__INIT_ONES);
    p->out_proj = mn__pw_matrix(w, "out_proj.weight", C, d.DI);
}
static size_t mn__ssd_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__ssd_act t, *a = p ? (mn__ssd_act*)p : &t;
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    size_t N = B * T, off = 0;
    size_t ws = mn_ssd_work_size(B, T, d.Hm, d.P, d.Ns, c->mesa_chunk), wr = mn_ssd_work_size_recurrent(T, d.P, d.Ns);
    MN__PIECE(zx, N * d.W_in);
    MN__PIECE(xbci, N * d.Wc); MN__PIECE(xbcp, N * d.Wc); MN__PIECE(xbc, N * d.Wc);
    MN__PIECE(dtp, N * d.Hm); MN__PIECE(delta, N * d.Hm);
    MN__PIECE(xt, N * d.DI); MN__PIECE(at, N * d.Hm);
    MN__PIECE(bh, N * d.Hm * d.Ns); MN__PIECE(ch, N * d.Hm * d.Ns);
    MN__PIECE(y, N * d.DI); MN__PIECE(yz, N * d.DI); MN__PIECE(yn, N * d.DI); MN__PIECE(rs, N);
    MN__PIECE(ht, B * d.Hm * d.P * d.Ns); MN__PIECE(work, ws > wr ? ws : wr);   // either form's workspace
    return off;
}
static void mn__ssd_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                  size_t T) {
    const mn_config* c = &m->cfg;
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    size_t N = B * T, C = c->d_model, n, h, p, j;
    int neg = mn__mixer_variant(m, l) & MN__SSD_NEG;
    mn__ssd_par P; mn__ssd_act A;
    mn__layer_point(m, l, m->params, mn__ssd_par_walk, &P);
    mn__ssd_act_layout(&A, acts, c, B, T);
    mn_matmul_forward(A.zx, in, P.in_proj, NULL, N, C, d.W_in);
    for (n = 0; n < N; n++) memcpy(A.xbci + n * d.Wc, A.zx + n * d.W_in + d.DI, d.Wc * sizeof(mn_real));
    mn_shortconv_forward(A.xbcp, A.xbci, P.conv, B, T, d.Wc, 4, 0);
    for (n = 0; n < N * d.Wc; n++) A.xbcp[n] += P.conv_bias[n % d.Wc];
    for (n = 0; n < N * d.Wc; n++) A.xbc[n] = (mn_real)(A.xbcp[n] * mn__sigmoid(A.xbcp[n]));
    for (n = 0; n < N; n++)
        for (h = 0; h < d.Hm; h++) {
            size_t r = n * d.Hm + h;
            A.dtp[r] = A.zx[n * d.W_in + 2 * d.DI + 2 * d.Ns + h] + P.dt_bias[h];
            A.delta[r] = (mn_real)(A.dtp[r] > 20 ? A.dtp[r] : log1p(exp(A.dtp[r])));
            double la = -exp(P.A_log[h]) * A.delta[r];                      // log-decay A Delta
            A.at[r] = (mn_real)(neg ? 2.0 * exp(la) - 1.0 : la);
            for (p = 0; p < d.P; p++) A.xt[r * d.P + p] = A.xbc[n * d.Wc + h * d.P + p] * A.delta[r];
            for (j = 0; j < d.Ns; j++) {                                  // B, C shared by all heads (ngroups 1)
                A.bh[r * d.Ns + j] = A.xbc[n * d.Wc + d.DI + j];
                A.ch[r * d.Ns + j] = A.xbc[n * d.Wc + d.DI + d.Ns + j];
            }
        }
    if (neg) mn_ssd_forward_recurrent(A.y, A.ht, A.xt, A.at, A.bh, A.ch, NULL, B, T, d.Hm, d.P, d.Ns,
        MN_SSD_TRANSITION);
    else mn_ssd_forward(A.y, A.ht, A.xt, A.at, A.bh, A.ch, NULL, B, T, d.Hm, d.P, d.Ns, c->mesa_chunk, A.work);
    for (n = 0; n < N; n++)
        for (j = 0; j < d.DI; j++) {
            mn_real* y = A.y + n * d.DI + j;
            double z = A.zx[n * d.W_in + j];
            *y += P.D[j / d.P] * A.xbc[n * d.Wc + j];                      // D skip
            A.yz[n * d.DI + j] = (mn_real)(*y * z * mn__sigmoid(z));       // gate, then norm
        }
    mn_rmsnorm_forward(A.yn, A.rs, A.yz, P.norm, N, d.DI, c->norm_eps);
    mn_matmul_forward(out, A.yn, P.out_proj, NULL, N, d.DI, C);
}
static void mn__ssd_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                   mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    size_t N = B * T, C = c->d_model, n, h, p, j;
    int neg = mn__mixer_variant(m, l) & MN__SSD_NEG;
    mn__ssd_par P, dP; mn__ssd_act A, dA;
    mn__layer_point(m, l, m->params, mn__ssd_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__ssd_par_walk, &dP);
    mn__ssd_act_layout(&A, acts, c, B, T);
    mn__ssd_act_layout(&dA, dacts, c, B, T);
    mn_matmul_backward(dA.yn, dP.out_proj, NULL, dout, A.yn, P.out_proj, N, d.DI, C);
    mn_rmsnorm_backward(dA.yz, dP.norm, dA.yn, A.rs, A.yz, P.norm, N, d.DI);
    for (n = 0; n < N; n++)     // forward: yz = y z s(z), y = ssd + D x
        for (j = 0; j < d.DI; j++) {
            size_t i = n * d.DI + j;
            double z = A.zx[n * d.W_in + j], s = mn__sigmoid(z), dyz = dA.yz[i], y = A.y[i];
            dA.y[i] += (mn_real)(dyz * z * s);
            dA.zx[n * d.W_in + j] += (mn_real)(dyz * y * s * (1.0 + z * (1.0 - s)));
            dA.xbc[n * d.Wc + j] += P.D[j / d.P] * (mn_real)(dyz * z * s);
            dP.D[j / d.P] += (mn_real)(dyz * z * s * A.xbc[n * d.Wc + j]);
        }
    if (neg) mn_ssd_backward_recurrent(dA.xt, dA.at, dA.bh, dA.ch, NULL, dA.y, NULL, A.xt, A.at, A.bh, A.ch, NULL, B, T,
                                       d.Hm, d.P, d.Ns, MN_SSD_TRANSITION, dA.work);
    else mn_ssd_backward(dA.xt, dA.at, dA.bh, dA.ch, NULL, dA.y, NULL, A.xt, A.at, A.bh, A.ch, NULL, B, T, d.Hm, d.P,
                         d.Ns,
                         c->mesa_chunk, dA.work);
    for (n = 0; n < N; n++)
        for (h = 0; h < d.Hm; h++) {
            size_t r = n * d.Hm + h;
            double delta = A.delta[r], ea = exp(P.A_log[h]), dla, ddelta = 0;
            // forward: at = A Delta (or 2 e^{A Delta} - 1), X = x Delta, A = -e^{A_log}
            dla = neg ? dA.at[r] * 2.0 * exp(-ea * delta) : dA.at[r];
            ddelta += dla * -ea;
            dP.A_log[h] += (mn_real)(dla * -ea * delta);
            for (p = 0; p < d.P; p++) {
                ddelta += (double)dA.xt[r * d.P + p] * A.xbc[n * d.Wc + h * d.P + p];
                dA.xbc[n * d.Wc + h * d.P + p] += (mn_real)(dA.xt[r * d.P + p] * delta);
            }
            for (j = 0; j < d.Ns; j++) {
                dA.xbc[n * d.Wc + d.DI + j] += dA.bh[r * d.Ns + j];
                dA.xbc[n * d.Wc + d.DI + d.Ns + j] += dA.ch[r * d.Ns + j];
            }
            // Delta = softplus(dt + dt_bias)
            ddelta *= mn__sigmoid(A.dtp[r]);
            dA.zx[n * d.W_in + 2 * d.DI + 2 * d.Ns + h] += (mn_real)ddelta;
            dP.dt_bias[h] += (mn_real)ddelta;
        }
    for (n = 0; n < N * d.Wc; n++) {           // forward: xbc = silu(xbcp)
        double a = A.xbcp[n], sg = mn__sigmoid(a);
        dA.xbcp[n] += (mn_real)(dA.xbc[n] * sg * (1.0 + a * (1.0 - sg)));
    }
    for (n = 0; n < N * d.Wc; n++) dP.conv_bias[n % d.Wc] += dA.xbcp[n];
    mn_shortconv_backward(dA.xbci, dP.conv, dA.xbcp, A.xbci, P.conv, B, T, d.Wc, 4, 0);
    for (n = 0; n < N; n++) for (j = 0; j < d.Wc; j++) dA.zx[n * d.W_in + d.DI + j] += dA.xbci[n * d.Wc + j];
    mn_matmul_backward(din, dP.in_proj, NULL, dA.zx, in, P.in_proj, N, C, d.W_in);
}
static size_t mn__ssd_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__ssd_state t, *a = p ? (mn__ssd_state*)p : &t;
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    size_t off = 0;
    MN__PIECE(conv, 3 * d.Wc); MN__PIECE(S, d.Hm * d.P * d.Ns);
    return off;
}
static size_t mn__ssd_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__ssd_temp t, *a = p ? (mn__ssd_temp*)p : &t;
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    size_t off = 0;
    MN__PIECE(zx, d.W_in); MN__PIECE(xbc, d.Wc); MN__PIECE(xt, d.DI); MN__PIECE(y, d.DI); MN__PIECE(yz, d.DI);
    MN__PIECE(bh, d.Hm * d.Ns); MN__PIECE(ch, d.Hm * d.Ns); MN__PIECE(at, d.Hm); MN__PIECE(rs, 1);
    return off;
}
static void mn__ssd_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch, const mn_real* in,
                               size_t pos) {
    const mn_config* c = &m->cfg;
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    size_t C = c->d_model, h, p, j;
    int neg = mn__mixer_variant(m, l) & MN__SSD_NEG;
    mn__ssd_par P; mn__ssd_state S; mn__ssd_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__ssd_par_walk, &P);
    mn__ssd_state_layout(&S, state, c);
    mn__ssd_temp_layout(&X, scratch, c);
    mn_matmul_forward(X.zx, in, P.in_proj, NULL, 1, C, d.W_in);
    mn_shortconv_step(X.xbc, S.conv, X.zx + d.DI, P.conv, d.Wc, 4, 0);
    for (j = 0; j < d.Wc; j++) { double a = X.xbc[j] + P.conv_bias[j]; X.xbc[j] = (mn_real)(a * mn__sigmoid(a)); }
    for (h = 0; h < d.Hm; h++) {
        double u = X.zx[2 * d.DI + 2 * d.Ns + h] + P.dt_bias[h], delta = u > 20 ? u : log1p(exp(u));
        double la = -exp(P.A_log[h]) * delta;
        X.at[h] = (mn_real)(neg ? 2.0 * exp(la) - 1.0 : la);
        for (p = 0; p < d.P; p++) X.xt[h * d.P + p] = (mn_real)(X.xbc[h * d.P + p] * delta);
        for (j = 0; j < d.Ns; j++) {
            X.bh[h * d.Ns + j] = X.xbc[d.DI + j];
            X.ch[h * d.Ns + j] = X.xbc[d.DI + d.Ns + j];
        }
    }
    mn_ssd_step(X.y, S.S, X.xt, X.at, X.bh, X.ch, 1, d.Hm, d.P, d.Ns, neg ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY);
    for (j = 0; j < d.DI; j++) {
        double z = X.zx[j];
        X.y[j] += P.D[j / d.P] * X.xbc[j];
        X.yz[j] = (mn_real)(X.y[j] * z * mn__sigmoid(z));
    }
    mn_rmsnorm_forward(X.yz, X.rs, X.yz, P.norm, 1, d.DI, c->norm_eps);
    mn_matmul_forward(out, X.yz, P.out_proj, NULL, 1, d.DI, C);
}
static double mn__ssd_layer_flops(const mn_config* c, size_t T) {
    mn__ssd_dims d = mn__ssd_layer_dims(c);
    double Cc = (double)(c->mesa_chunk < T ? c->mesa_chunk : T);
    return (double)d.Hm * (2 * Cc * (double)(d.Ns + d.P) + 4.0 * (double)(d.P * d.Ns));   // SSD per token (approximate)
}

// >>rglru
// defines: mn_rglru_work_size, mn_rglru_{forward,backward}, mn_rglru_step; the layer "hawk"
// RG-LRU (De et al. 2024, "Griffin"), per channel of width W (gates: NH blocks of bw = W/NH):
// gx_t = sigmoid(BD(x_t; wx, bx)), ga_t = sigmoid(BD(x_t; wa, ba)),
//   BD(x;w,b)[h bw+j] = sum_i x[h bw+i] w[h,i,j] + b[h,j]   (block-diagonal)
// log a_t = -c ga_t softplus(a_param)                                   (c = 8 in recurrentgemma)
// h_t = a_t h_{t-1} + sqrt(1 - a_t^2) (x_t gx_t);  at a reset h_t = x_t gx_t;  y_t = h_t, ht = h_{T-1}
// Reference: google-deepmind/recurrentgemma @ 2efa84d recurrentgemma/torch/layers.py RGLRU.forward,
// rnn_scan, SqrtBoundDerivative. Golden vectors: reference/vectors/rglru.vec.
// Forms: mn_rglru_{forward,backward} (the sequential scan, which is also recurrentgemma's; gates
// through mn_gemm), mn_rglru_step.

// Is token t of sequence b a reset (h restarts from x_t gx_t)? See the declarations: segment_pos
// decides when given (recurrentgemma: reset = segment_pos == 0); without it only t = 0 of a
// sequence with no h0 is one, so a given h0 continues the sequence it came from.
static int mn__rglru_reset(const int* segment_pos, const mn_real* h0, size_t b, size_t t, size_t T) {
    return segment_pos ? segment_pos[b * T + t] == 0 : (t == 0 && h0 == NULL);
}
// torch's softplus (threshold 20) and its derivative, as the reference calls them on a_param.
static double mn__rglru_softplus(double x) { return x > 20 ? x : log1p(exp(x)); }
static double mn__rglru_dsoftplus(double x) { return x > 20 ? 1.0 : 1.0 / (1.0 + exp(-x)); }
// recurrentgemma's SqrtBoundDerivative: the forward is sqrt(u); its derivative 1/(2 sqrt(u)) is
// clipped at 1000 (_MAX_SQRT_GRADIENT), i.e. taken as 1/sqrt(max(4u, 1e-6)), which binds for
// u < 2.5e-7 (a_t > 0.99999987). This is what the reference's gradients are, not the exact one.
#define MN__RGLRU_MAX_SQRT_GRAD 1000.0
static double mn__rglru_dsqrt(double u) {
    double u4 = 4.0 * u, lo = 1.0 / (MN__RGLRU_MAX_SQRT_GRAD * MN__RGLRU_MAX_SQRT_GRAD);
    return 1.0 / sqrt(u4 > lo ? u4 : lo);
}

MNDEF size_t mn_rglru_work_size(size_t B, size_t T, size_t W) { return 2 * B * T * W; }

// The sequential scan (recurrentgemma RGLRU.forward / rnn_scan; the reference loops
// over t too). pass 1: both gates' pre-activations, one gemm per gate block over all B*T rows, then
// the sigmoids (saved in gates). pass 2: per channel, the scan over t in double, with
// a = exp(log a), a^2 = exp(2 log a) and the multiplier sqrt(1 - a^2) as the reference forms them.
// Cost: 4 B T W bw for the gates, ~20 B T W for the scan. Channels run in parallel.
MNDEF void mn_rglru_forward(mn_real* y, mn_real* ht, mn_real* gates, const mn_real* x, const mn_real* a_param,
                            const mn_real* wx, const mn_real* bx, const mn_real* wa, const mn_real* ba,
                            const mn_real* h0, const int* segment_pos, size_t B, size_t T, size_t W, size_t NH,
                            double c) {
    MN_ASSERT(NH >= 1 && W % NH == 0);
    size_t BT = B * T, bw = W / NH, hd, i;
    mn_real* gx = gates; mn_real* ga = gates + BT * W;
    long long wl;
    // pass 1: Z (BT,bw) = X_h (BT,bw) w[h] (bw,bw) for every block h, rows W apart; + b, sigmoid
    for (hd = 0; hd < NH; hd++) {
        mn_gemm(0, 0, BT, bw, bw, 1.0, x + hd * bw, W, wx + hd * bw * bw, bw, 0.0, gx + hd * bw, W);
        mn_gemm(0, 0, BT, bw, bw, 1.0, x + hd * bw, W, wa + hd * bw * bw, bw, 0.0, ga + hd * bw, W);
    }
    for (i = 0; i < BT * W; i++) {
        gx[i] = (mn_real)mn__sigmoid((double)gx[i] + bx[i % W]);
        ga[i] = (mn_real)mn__sigmoid((double)ga[i] + ba[i % W]);
    }
    // pass 2: the scan; h_prev is the stored y_{t-1} (so the backward sees the same numbers)
    MN__OMP_FOR
    for (wl = 0; wl < (long long)W; wl++) {
        size_t w = (size_t)wl, b, t;
        double sp = mn__rglru_softplus(a_param[w]);
        for (b = 0; b < B; b++) {
            double hp = h0 ? (double)h0[b * W + w] : 0.0;
            for (t = 0; t < T; t++) {
                size_t j = (b * T + t) * W + w;
                double xg = (double)x[j] * gx[j], hc;
                if (mn__rglru_reset(segment_pos, h0, b, t, T)) hc = xg;   // a := 0, multiplier := 1
                else {
                    double la = -c * ga[j] * sp;
                    hc = exp(la) * hp + sqrt(1.0 - exp(2.0 * la)) * xg;
                }
                y[j] = (mn_real)hc;
                hp = y[j];
            }
            ht[b * W + w] = (mn_real)hp;             // T == 0: h0 (or 0); in place when ht == h0
        }
    }
}
// forward (per channel, no reset): h_t = a h_{t-1} + m (x g), a = e^la, m = sqrt(u), u = 1 - e^{2 la},
// la = -c ga softplus(a_param), g = gx; so, walking t backwards with d = dL/dh_t = dy_t + a_{t+1} d_{t+1}
// (dht at t = T-1):
//   dx_t += d g m ; dgx = d x m ; dm = d x g ; du = dm * dsqrt(u) (clipped, see mn__rglru_dsqrt) ;
//   dla = a (d h_{t-1}) - 2 e^{2la} du ; dga = -c softplus(a_param) dla ; dsoftplus += -c ga dla ;
//   dz = dgate * gate (1 - gate) for both gates ; the carry to t-1 is a d ; after t = 0 it is dL/dh0.
// At a reset: h_t = x g, so dx_t += d g, dgx = d x, nothing reaches a, ga or h_{t-1} (carry 0).
// Then the block-diagonal gates: dx += dZ w^T, dw += X^T dZ, db += column sums of dZ, per block
// (gemms over all B*T rows). work: dZx, dZa (B,T,W). Channels in parallel.
MNDEF void mn_rglru_backward(mn_real* dx, mn_real* da_param, mn_real* dwx, mn_real* dbx, mn_real* dwa, mn_real* dba,
                             mn_real* dh0, const mn_real* dy, const mn_real* dht, const mn_real* y,
                             const mn_real* gates, const mn_real* x, const mn_real* a_param, const mn_real* wx,
                             const mn_real* wa, const mn_real* h0, const int* segment_pos, size_t B, size_t T, size_t W,
                             size_t NH, double c, mn_real* work) {
    MN_ASSERT(NH >= 1 && W % NH == 0);
    size_t BT = B * T, bw = W / NH, hd, i;
    const mn_real* gx = gates; const mn_real* ga = gates + BT * W;
    mn_real* dzx = work; mn_real* dza = work + BT * W;
    long long wl;
    MN__OMP_FOR                                  // each channel writes only its own entries
    for (wl = 0; wl < (long long)W; wl++) {
        size_t w = (size_t)wl, b, t;
        double sp = mn__rglru_softplus(a_param[w]), dsp = 0.0;
        for (b = 0; b < B; b++) {
            double carry = dht ? (double)dht[b * W + w] : 0.0;   // a_{t+1} dL/dh_{t+1}
            for (t = T; t-- > 0;) {
                size_t j = (b * T + t) * W + w;
                double d = dy[j] + carry, g = gx[j], xx = x[j];
                if (mn__rglru_reset(segment_pos, h0, b, t, T)) {
                    dx[j] += (mn_real)(d * g);
                    dzx[j] = (mn_real)(d * xx * g * (1.0 - g));
                    dza[j] = 0;
                    carry = 0.0;
                    continue;
                }
                double r = ga[j], la = -c * r * sp, a = exp(la), a2 = exp(2.0 * la), u = 1.0 - a2, m = sqrt(u);
                double hp = t > 0 ? (double)y[j - W] : h0 ? (double)h0[b * W + w] : 0.0;
                double du = d * xx * g * mn__rglru_dsqrt(u);
                double dla = a * d * hp - 2.0 * a2 * du;
                dx[j] += (mn_real)(d * g * m);
                dzx[j] = (mn_real)(d * xx * m * g * (1.0 - g));
                dza[j] = (mn_real)(-c * sp * dla * r * (1.0 - r));
                dsp += -c * r * dla;
                carry = a * d;
            }
            if (dh0) dh0[b * W + w] += (mn_real)carry;
        }
        if (da_param) da_param[w] += (mn_real)(dsp * mn__rglru_dsoftplus(a_param[w]));
    }
    // forward: z = X_h w[h] + b[h] per block, so: dX_h += dZ_h w[h]^T ; dw[h] += X_h^T dZ_h ; db[h] += sum dZ_h
    for (hd = 0; hd < NH; hd++) {
        mn_gemm(0, 1, BT, bw, bw, 1.0, dzx + hd * bw, W, wx + hd * bw * bw, bw, 1.0, dx + hd * bw, W);
        mn_gemm(0, 1, BT, bw, bw, 1.0, dza + hd * bw, W, wa + hd * bw * bw, bw, 1.0, dx + hd * bw, W);
        if (dwx) mn_gemm(1, 0, bw, bw, BT, 1.0, x + hd * bw, W, dzx + hd * bw, W, 1.0, dwx + hd * bw * bw, bw);
        if (dwa) mn_gemm(1, 0, bw, bw, BT, 1.0, x + hd * bw, W, dza + hd * bw, W, 1.0, dwa + hd * bw * bw, bw);
    }
    for (i = 0; i < BT * W; i++) {
        if (dbx) dbx[i % W] += dzx[i];
        if (dba) dba[i % W] += dza[i];
    }
}

// One token per sequence for generation: the forward with T = 1 and h0 = ht = state, so with
// segment_pos NULL the state is continued (no reset) and a 0 in segment_pos (B) restarts it.
// work: mn_rglru_work_size(B,1,W) elements for the gates. O(W (bw + 20)) per sequence.
MNDEF void mn_rglru_step(mn_real* y, mn_real* state, const mn_real* x, const mn_real* a_param, const mn_real* wx,
                         const mn_real* bx, const mn_real* wa, const mn_real* ba, const int* segment_pos, size_t B,
                         size_t W, size_t NH, double c, mn_real* work) {
    mn_rglru_forward(y, state, work, x, a_param, wx, bx, wa, ba, state, segment_pos, B, 1, W, NH, c);
}

// ---- the layer: "hawk", Griffin's recurrent block as a mixer (recurrentgemma torch/modules.py
// RecurrentBlock), lru width W = d_model, NH = n_head blocks in the gate matrices:
//   y = gelu_tanh(x Wy + by) ;  x' = conv4(x Wx + bx) + bconv (no activation) ;  h = RG-LRU(x')
//   out = (h * y) Wout + bout
// Tensor names follow recurrentgemma's module names under fla's "attn." slot; conv weights use fla's
// [W,1,4] layout (recurrentgemma stores [4,W]). Gate weights N(0, init_std) like every matrix here;
// a_param so that a = exp(-softplus(a_param)) has a^2 ~ U[0.81, 0.998] (Griffin's ring init).
#define MN__RGLRU_C 8.0
typedef struct mn__rglru_par {
    mn_real *y_proj, *y_bias, *x_proj, *x_bias;   // (C,C), (C): the two branches
    mn_real *conv, *conv_bias;                    // (C,1,4), (C)
    mn_real* a_param;                             // (C)
    mn_real *gx_w, *gx_b, *ga_w, *ga_b;           // (NH,C/NH,C/NH), (NH,C/NH): the block-diagonal gates
    mn_real *o_proj, *o_bias;                     // (C,C), (C)
} mn__rglru_par;
typedef struct mn__rglru_act {
    mn_real *yl, *yg, *xl, *xc, *h;   // (N,C) y pre-activation, gelu(y), x', conv out, h
    mn_real* gates;                   // (2,N,C) the RG-LRU gates
    mn_real* hy;                      // (N,C) h * gelu(y)
    mn_real *ht, *work;               // (B,C) final state (not used), the backward's workspace
} mn__rglru_act;
typedef struct mn__rglru_state { mn_real *conv, *h; } mn__rglru_state;   // (C,3), (C)
typedef struct mn__rglru_temp { mn_real *yl, *xl, *xc, *y, *work; } mn__rglru_temp;

static void mn__rglru_par_walk(mn__pwalk* w, void* pp) {
    mn__rglru_par t, *p = pp ? (mn__rglru_par*)pp : &t;
    size_t C = w->m->cfg.d_model, NH = w->m->cfg.n_head, bw = C / NH;
    p->y_proj = mn__pw_matrix(w, "linear_y.weight", C, C);
    p->y_bias = mn__pw_vector(w, "linear_y.bias", C, MN__INIT_ZEROS);
    p->x_proj = mn__pw_matrix(w, "linear_x.weight", C, C);
    p->x_bias = mn__pw_vector(w, "linear_x.bias", C, MN__INIT_ZEROS);
    p->conv = mn__pw_conv(w, "conv_1d.weight", C);
    p->conv_bias = mn__pw_vector(w, "conv_1d.bias", C, MN__INIT_ZEROS);
    p->a_param = mn__pw_vector(w, "rg_lru.a_param", C, MN__INIT_RGLRU_A);       // no weight decay
    p->gx_w = mn__pw_tensor(w, "rg_lru.input_gate.w", 3, NH, bw, bw, 1, MN__INIT_NORMAL);
    p->gx_b = mn__pw_tensor(w, "rg_lru.input_gate.b", 2, NH, bw, 0, 0, MN__INIT_ZEROS);
    p->ga_w = mn__pw_tensor(w, "rg_lru.a_gate.w", 3, NH, bw, bw, 1, MN__INIT_NORMAL);
    p->ga_b = mn__pw_tensor(w, "rg_lru.a_gate.b", 2, NH, bw, 0, 0, MN__INIT_ZEROS);
    p->o_proj = mn__pw_matrix(w, "linear_out.weight", C, C);
    p->o_bias = mn__pw_vector(w, "linear_out.bias", C, MN__INIT_ZEROS);
}
static size_t mn__rglru_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__rglru_act t, *a = p ? (mn__rglru_act*)p : &t;
    size_t N = B * T, C = c->d_model, off = 0;
    MN__PIECE(yl, N * C); MN__PIECE(yg, N * C); MN__PIECE(xl, N * C); MN__PIECE(xc, N * C); MN__PIECE(h, N * C);
    MN__PIECE(gates, 2 * N * C);
    MN__PIECE(hy, N * C);
    MN__PIECE(ht, B * C); MN__PIECE(work, mn_rglru_work_size(B, T, C));
    return off;
}
static void mn__rglru_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                    size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, i;
    mn__rglru_par P; mn__rglru_act A;
    mn__layer_point(m, l, m->params, mn__rglru_par_walk, &P);
    mn__rglru_act_layout(&A, acts, c, B, T);
    mn_matmul_forward(A.yl, in, P.y_proj, P.y_bias, N, C, C);
    mn_gelu_forward(A.yg, A.yl, N * C);
    mn_matmul_forward(A.xl, in, P.x_proj, P.x_bias, N, C, C);
    mn_shortconv_forward(A.xc, A.xl, P.conv, B, T, C, 4, 0);
    for (i = 0; i < N * C; i++) A.xc[i] += P.conv_bias[i % C];
    mn_rglru_forward(A.h, A.ht, A.gates, A.xc, P.a_param, P.gx_w, P.gx_b, P.ga_w, P.ga_b, NULL, NULL, B, T, C,
                     c->n_head,
                     MN__RGLRU_C);
    for (i = 0; i < N * C; i++) A.hy[i] = A.h[i] * A.yg[i];
    mn_matmul_forward(out, A.hy, P.o_proj, P.o_bias, N, C, C);
}
static void mn__rglru_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                     mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, i;
    mn__rglru_par P, dP; mn__rglru_act A, dA;
    mn__layer_point(m, l, m->params, mn__rglru_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__rglru_par_walk, &dP);
    mn__rglru_act_layout(&A, acts, c, B, T);
    mn__rglru_act_layout(&dA, dacts, c, B, T);
    mn_matmul_backward(dA.hy, dP.o_proj, dP.o_bias, dout, A.hy, P.o_proj, N, C, C);
    for (i = 0; i < N * C; i++) {    // forward: hy = h * yg
        dA.h[i] += dA.hy[i] * A.yg[i];
        dA.yg[i] += dA.hy[i] * A.h[i];
    }
    mn_gelu_backward(dA.yl, dA.yg, A.yl, N * C);
    mn_matmul_backward(din, dP.y_proj, dP.y_bias, dA.yl, in, P.y_proj, N, C, C);
    mn_rglru_backward(dA.xc, dP.a_param, dP.gx_w, dP.gx_b, dP.ga_w, dP.ga_b, NULL, dA.h, NULL, A.h, A.gates, A.xc,
                      P.a_param, P.gx_w, P.ga_w, NULL, NULL, B, T, C, c->n_head, MN__RGLRU_C, dA.work);
    for (i = 0; i < N * C; i++) dP.conv_bias[i % C] += dA.xc[i];
    mn_shortconv_backward(dA.xl, dP.conv, dA.xc, A.xl, P.conv, B, T, C, 4, 0);
    mn_matmul_backward(din, dP.x_proj, dP.x_bias, dA.xl, in, P.x_proj, N, C, C);
}
static size_t mn__rglru_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__rglru_state t, *a = p ? (mn__rglru_state*)p : &t;
    size_t off = 0;
    MN__PIECE(conv, 3 * c->d_model); MN__PIECE(h, c->d_model);
    return off;
}
static size_t mn__rglru_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__rglru_temp t, *a = p ? (mn__rglru_temp*)p : &t;
    size_t C = c->d_model, off = 0;
    MN__PIECE(yl, C); MN__PIECE(xl, C); MN__PIECE(xc, C); MN__PIECE(y, C); MN__PIECE(work, mn_rglru_work_size(1, 1, C));
    return off;
}
static void mn__rglru_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch,
                                 const mn_real* in,
                                 size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, i;
    int sp = (int)pos;                                 // position 0 resets h, as in the training forward
    mn__rglru_par P; mn__rglru_state S; mn__rglru_temp X;
    mn__layer_point(m, l, m->params, mn__rglru_par_walk, &P);
    mn__rglru_state_layout(&S, state, c);
    mn__rglru_temp_layout(&X, scratch, c);
    mn_matmul_forward(X.yl, in, P.y_proj, P.y_bias, 1, C, C);
    mn_gelu_forward(X.yl, X.yl, C);
    mn_matmul_forward(X.xl, in, P.x_proj, P.x_bias, 1, C, C);
    mn_shortconv_step(X.xc, S.conv, X.xl, P.conv, C, 4, 0);
    for (i = 0; i < C; i++) X.xc[i] += P.conv_bias[i];
    mn_rglru_step(X.y, S.h, X.xc, P.a_param, P.gx_w, P.gx_b, P.ga_w, P.ga_b, &sp, 1, C, c->n_head, MN__RGLRU_C, X.work);
    for (i = 0; i < C; i++) X.y[i] *= X.yl[i];
    mn_matmul_forward(out, X.y, P.o_proj, P.o_bias, 1, C, C);
}
static double mn__rglru_layer_flops(const mn_config* c, size_t T) {
    MN_UNUSED(T);
    return 2.0 * 2.0 * (double)c->d_model * ((double)c->d_model / (double)c->n_head);   // the two block-diagonal gates
}

// >>mlstm
// defines: mn_mlstm_{forward,backward}_parallel, mn_mlstm_forward_recurrent, mn_mlstm_step,
// mn_mlstm_{forward,backward} (chunkwise), work sizes; the layer "mlstm"
// xLSTM (Beck et al. 2024): the cores of its two blocks, the matrix memory here and the scalar one
// in the >>slstm section. The projections, convolutions, gates' linear maps and norms around them are
// ordinary ops. The exact definitions the vectors use: reference/vectors/README.md sections 3.10 (mLSTM)
// and 3.12 (sLSTM).
//
// mLSTM, per head, with lf_t = logsigmoid(f_t) (sigmoid forget gate in log space) and an exponential
// input gate exp(i_t), the unstabilised cell is
//   Cbar_t = e^{lf_t} Cbar_{t-1} + e^{i_t} k_t v_t^T     nbar_t = e^{lf_t} nbar_{t-1} + e^{i_t} k_t
//   o_t = Cbar_t^T q^_t / (max(|nbar_t . q^_t|, 1) + eps e^{m_t})      q^_t = scale q_t
// Every form stores C = e^{-m} Cbar, n = e^{-m} nbar with a stabiliser m_t, so the normaliser reads
// max(|n_t . q^_t|, e^{-m_t}) + eps: m_t enters the result only through eps (and the floor's switch).
// Recurrent and chunkwise forms (the reference's): m_t = max(lf_t + m_{t-1}, i_t), m_{-1} = m0 (0 when
// NULL). Parallel form (no state): m_t = max_{s<=t} (F_t - F_s + i_s), F_t = lf_0 + ... + lf_t, which is
// the same recurrence started from m_{-1} = -inf. So the forms agree to eps e^{m} effects (~1e-8 at
// eps = 1e-6), exactly when eps = 0, and exactly when the state forms start from m0 = -INFINITY with
// zero C0, n0 (then the state forms are the parallel form; -inf is handled, no NaN).

static double mn__xl_logsig(double x) { return (x < 0 ? x : 0.0) - log1p(exp(-fabs(x))); }
static size_t mn__xl_min(size_t a, size_t b) { return a < b ? a : b; }
static double mn__xl_sign(double x) { return (double)((x > 0) - (x < 0)); }

// ------------------------------------------------------------------------------------ mLSTM parallel

// Scratch of one (b,h) pair: lf (T) the log forget gates, row (T) one row of C~, drow (T) its
// gradient, dF (T) dL/dF.
MNDEF size_t mn_mlstm_work_size_parallel(size_t B, size_t T, size_t H) { return B * H * 4 * (T ? T : 1); }

// lf[t] = logsigmoid(f_t) for one (b,h) pair (rows H apart in the gate tensor). The decays
// F_t - F_s = lf_{s+1} + ... + lf_t are summed pair by pair in double from these (walking s down
// from t), not subtracted from cumulative sums: a difference of two sums of size |F| carries an
// error of |F| ulp, which in float is ~1e-5 once |F| reaches a few hundred.
static void mn__mlstm_logf(mn_real* lf, const mn_real* fg, size_t T, size_t H) {
    size_t t;
    for (t = 0; t < T; t++) lf[t] = (mn_real)mn__xl_logsig(fg[t * H]);
}

// Parallel form (mlstm_kernels torch/parallel/native/fw.py::mlstm_parallel_fw), one row at a time:
//   logD_ts = F_t - F_s + i_s (s <= t) ; m_t = max_s logD_ts ; C~_ts = scale (q_t.k_s) e^{logD_ts - m_t}
//   norm_t = max(|sum_s C~_ts|, e^{-m_t}) ; o_t = sum_s C~_ts v_s / (norm_t + eps)
// norm and stab (= m) are written when not NULL; the backward recomputes everything, so nothing else
// is saved. Per token and head 2 T (Dk + Dv) FLOPs (4 T (Dk + Dv) for the backward) and O(T) work:
// the naive reference the chunkwise form is tested against;
// accumulates in double. work: mn_mlstm_work_size_parallel. (b,h) pairs in parallel.
MNDEF void mn_mlstm_forward_parallel(mn_real* out, mn_real* norm, mn_real* stab, const mn_real* q, const mn_real* k,
                                     const mn_real* v, const mn_real* ig, const mn_real* fg, size_t B, size_t T,
                                     size_t H, size_t Dk, size_t Dv, double scale, double eps, mn_real* work) {
    long long bh;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t, s, d, j;
        mn_real* lf = work + (size_t)bh * 4 * T;
        mn_real* row = lf + T;
        const mn_real* ib = ig + b * T * H + h;      // gate of token t: ib[t*H]
        mn__mlstm_logf(lf, fg + b * T * H + h, T, H);
        for (t = 0; t < T; t++) {
            size_t rt = (b * T + t) * H + h;         // row (b,t,h)
            double mx = -INFINITY, bsum = 0.0, nrm, den, dec = 0.0;
            // pass 1: the row's log-decays l_s = (lf_{s+1} + ... + lf_t) + i_s and their max
            for (s = t + 1; s-- > 0;) {
                double l = dec + ib[s * H];
                row[s] = (mn_real)l;
                if (l > mx) mx = l;
                dec += lf[s];
            }
            // pass 2: C~_ts and its row sum
            for (s = 0; s <= t; s++) {
                size_t rs = (b * T + s) * H + h;
                double acc = 0.0;
                for (d = 0; d < Dk; d++) acc += (double)q[rt * Dk + d] * k[rs * Dk + d];
                row[s] = (mn_real)(scale * acc * exp((double)row[s] - mx));
                bsum += row[s];
            }
            nrm = fmax(fabs(bsum), exp(-mx));
            den = nrm + eps;
            // pass 3: o_t = C~ V / den
            for (j = 0; j < Dv; j++) {
                double acc = 0.0;
                for (s = 0; s <= t; s++) acc += (double)row[s] * v[((b * T + s) * H + h) * Dv + j];
                out[rt * Dv + j] = (mn_real)(acc / den);
            }
            if (norm) norm[rt] = (mn_real)nrm;
            if (stab) stab[rt] = (mn_real)mx;
        }
    }
}
// Row t again, with den = norm_t + eps and dnum = do_t / den (so do.v_s / den is C~_ts's share):
//   forward: o = num / den, so: dden = -(do.o) / den
//   forward: norm = max(|b|, e^{-m}), b = sum_s C~_s, so (exact): db = dden sign(b) where |b| wins,
//            else dm += -dden e^{-m} (the floor)
//   forward: num = sum_s C~_s v_s, b = sum_s C~_s, so: dC~_s = do.v_s / den + db ; dv_s += C~_s dnum
//   forward: C~_s = S_s e^{l_s - m}, S_s = scale q.k_s, so: dS_s = dC~_s e^{l_s - m} (dq, dk) ;
//            dl_s = dC~_s C~_s ; dm += -sum_s dl_s (exact)
//   forward: m = max_s l_s, so (exact): dl_{s*} += dm at the argmax s*
//   forward: l_s = F_t - F_s + i_s, so: di_s += dl_s ; dF_t += dl_s ; dF_s -= dl_s
// and at the end df_u += sigmoid(-f_u) sum_{t>=u} dF_t. MN_MLSTM_BW_DETACH drops db and dm (n and m
// constant: mlstm_kernels torch/parallel/native/bw.py::mlstm_parallel_bw).
MNDEF void mn_mlstm_backward_parallel(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* di, mn_real* df,
                                      const mn_real* dout, const mn_real* q, const mn_real* k, const mn_real* v,
                                      const mn_real* ig, const mn_real* fg, size_t B, size_t T, size_t H, size_t Dk,
                                      size_t Dv, double scale, double eps, int mode, mn_real* work) {
    long long bh;
    MN_ASSERT(mode == MN_MLSTM_BW_EXACT || mode == MN_MLSTM_BW_DETACH);
    MN__OMP_FOR                                  // each (b,h) writes only its own rows
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t, s, d, j, u;
        mn_real* lf = work + (size_t)bh * 4 * T;
        mn_real* row = lf + T; mn_real* drow = row + T; mn_real* dF = drow + T;
        const mn_real* ib = ig + b * T * H + h;
        double acc, dec;
        mn__mlstm_logf(lf, fg + b * T * H + h, T, H);
        for (t = 0; t < T; t++) dF[t] = 0;
        for (t = 0; t < T; t++) {
            size_t rt = (b * T + t) * H + h, amax = 0;
            const mn_real* dot = dout + rt * Dv;
            double mx = -INFINITY, bsum = 0.0, nrm, den, dot_o = 0.0, dden, dbs = 0.0, dm = 0.0, dlsum = 0.0;
            for (s = t + 1, dec = 0.0; s-- > 0;) {   // the forward's row again
                double l = dec + ib[s * H];
                if (l > mx) { mx = l; amax = s; }
                dec += lf[s];
            }
            for (s = t + 1, dec = 0.0; s-- > 0;) {
                size_t rs = (b * T + s) * H + h;
                double a = 0.0, l = dec + ib[s * H];
                for (d = 0; d < Dk; d++) a += (double)q[rt * Dk + d] * k[rs * Dk + d];
                row[s] = (mn_real)(scale * a * exp(l - mx));
                bsum += row[s];
                dec += lf[s];
            }
            nrm = fmax(fabs(bsum), exp(-mx));
            den = nrm + eps;
            for (s = 0; s <= t; s++) {               // drow[s] = do.v_s / den ; do.o = sum_s C~_s drow[s]
                const mn_real* vs = v + ((b * T + s) * H + h) * Dv;
                double a = 0.0;
                for (j = 0; j < Dv; j++) a += (double)dot[j] * vs[j];
                drow[s] = (mn_real)(a / den);
                dot_o += (double)row[s] * drow[s];
            }
            dden = -dot_o / den;
            if (mode == MN_MLSTM_BW_EXACT) {
                if (fabs(bsum) >= exp(-mx)) dbs = dden * mn__xl_sign(bsum);
                else dm = -dden * exp(-mx);
            }
            for (s = t + 1, dec = 0.0; s-- > 0;) {
                size_t rs = (b * T + s) * H + h;
                double l = dec + ib[s * H];
                double dC = (double)drow[s] + dbs, dl = dC * row[s], dS = scale * dC * exp(l - mx);
                dec += lf[s];
                for (j = 0; j < Dv; j++) dv[rs * Dv + j] += (mn_real)(row[s] * dot[j] / den);
                for (d = 0; d < Dk; d++) dk[rs * Dk + d] += (mn_real)(dS * q[rt * Dk + d]);
                di[rs] += (mn_real)dl;
                dF[s] -= (mn_real)dl;
                dlsum += dl;
                drow[s] = (mn_real)dS;               // keep dS for dq
            }
            dF[t] += (mn_real)dlsum;
            for (d = 0; d < Dk; d++) {
                double a = 0.0;
                for (s = 0; s <= t; s++) a += (double)drow[s] * k[((b * T + s) * H + h) * Dk + d];
                dq[rt * Dk + d] += (mn_real)a;
            }
            if (mode == MN_MLSTM_BW_EXACT) {
                // forward: m = max_s l_s; every C~_s and the floor moved with it: dm gathered above
                dm -= dlsum;
                di[(b * T + amax) * H + h] += (mn_real)dm;
                dF[t] += (mn_real)dm;
                dF[amax] -= (mn_real)dm;
            }
        }
        // forward: F_t = sum_{u<=t} logsigmoid(f_u), so: df_u += sigmoid(-f_u) sum_{t>=u} dF_t
        acc = 0.0;
        for (u = T; u-- > 0;) {
            size_t ru = (b * T + u) * H + h;
            acc += dF[u];
            df[ru] += (mn_real)(acc * mn__sigmoid(-(double)fg[ru]));
        }
    }
}

// ------------------------------------------------------------------------------------ mLSTM recurrent

// Recurrent form (mlstm_kernels torch/recurrent/native_step.py::mlstm_recurrent_step__native_fw,
// called for t = 0..T-1), per head:
//   m_t = max(lf_t + m_{t-1}, i_t) ; f' = e^{lf_t + m_{t-1} - m_t} ; i' = e^{i_t - m_t}
//   C_t = f' C_{t-1} + i' k_t v_t^T ; n_t = f' n_{t-1} + i' k_t ; q^ = scale q_t
//   o_t = C_t^T q^ / (max(|n_t . q^|, e^{-m_t}) + eps)        (k is not scaled)
// Ct, nt, mt hold the running state (so they are required); C0, n0, m0 NULL mean zeros (the
// reference's start; m0 = -INFINITY gives the parallel form). norm, stab as in the parallel form.
// O(T Dk Dv) per head, accumulates in double, no workspace. Forward only: training uses the chunkwise form.
MNDEF void mn_mlstm_forward_recurrent(mn_real* out, mn_real* norm, mn_real* stab, mn_real* Ct, mn_real* nt, mn_real* mt,
                                      const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig,
                                      const mn_real* fg, const mn_real* C0, const mn_real* n0, const mn_real* m0,
                                      size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps) {
    long long bh;
    size_t DS = Dk * Dv;
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t, d, j;
        mn_real* Cs = Ct + (size_t)bh * DS; mn_real* ns = nt + (size_t)bh * Dk;
        double m;
        if (C0 == NULL) memset(Cs, 0, DS * sizeof(mn_real));
        else if (C0 != Ct) memcpy(Cs, C0 + (size_t)bh * DS, DS * sizeof(mn_real));
        if (n0 == NULL) memset(ns, 0, Dk * sizeof(mn_real));
        else if (n0 != nt) memcpy(ns, n0 + (size_t)bh * Dk, Dk * sizeof(mn_real));
        m = m0 ? (double)m0[bh] : 0.0;
        for (t = 0; t < T; t++) {
            size_t r = (b * T + t) * H + h;      // row (b,t,h)
            const mn_real* qt = q + r * Dk; const mn_real* kt = k + r * Dk; const mn_real* vt = v + r * Dv;
            double lf = mn__xl_logsig(fg[r]), mn = fmax(lf + m, (double)ig[r]);
            double fp = exp(lf + m - mn), ip = exp((double)ig[r] - mn), qn = 0.0, den;
            for (d = 0; d < Dk; d++) {
                for (j = 0; j < Dv; j++) Cs[d * Dv + j] = (mn_real)(fp * Cs[d * Dv + j] + ip * kt[d] * vt[j]);
                ns[d] = (mn_real)(fp * ns[d] + ip * kt[d]);
                qn += scale * qt[d] * ns[d];
            }
            den = fmax(fabs(qn), exp(-mn));
            if (norm) norm[r] = (mn_real)den;
            if (stab) stab[r] = (mn_real)mn;
            den += eps;
            for (j = 0; j < Dv; j++) {
                double acc = 0.0;
                for (d = 0; d < Dk; d++) acc += scale * qt[d] * Cs[d * Dv + j];
                out[r * Dv + j] = (mn_real)(acc / den);
            }
            m = (double)(mn_real)mn;             // the state's type, as the step stores it between tokens
        }
        mt[bh] = (mn_real)m;
    }
}

// One token per sequence for generation: the recurrent form with T = 1 and the state in place, since
// (B,1,H,D) and (B,H,D) are the same layout. O(H Dk Dv) per sequence.
MNDEF void mn_mlstm_step(mn_real* out, mn_real* C, mn_real* n, mn_real* m, const mn_real* q, const mn_real* k,
                         const mn_real* v, const mn_real* ig, const mn_real* fg, size_t B, size_t H, size_t Dk,
                         size_t Dv, double scale, double eps) {
    mn_mlstm_forward_recurrent(out, NULL, NULL, C, n, m, q, k, v, ig, fg, C, n, m, B, 1, H, Dk, Dv, scale, eps);
}

// ------------------------------------------------------------------------------------ mLSTM chunkwise

// Chunkwise form (mlstm_kernels torch/chunkwise/native/{fw,bw}.py). Inside a chunk of L
// tokens, with chunk-entry state (C, n, m), bc_r = lf_0 + ... + lf_r (from the chunk start):
//   mu_r = max(lf_r + mu_{r-1}, i_r), mu_{-1} = m      (the recurrent form's m_t, token by token)
//   al_r = e^{bc_r + m - mu_r}                           (inter: the state read, <= 1)
//   E_rs = scale (q_r.k_s) e^{bc_r - bc_s + i_s - mu_r}  (intra, s <= r, <= |S|)
//   num_r = scale al_r C^T q_r + sum_s E_rs v_s ; bt_r = scale al_r n.q_r + sum_s E_rs
//   o_r = num_r / (max(|bt_r|, e^{-mu_r}) + eps)
//   state: m' = mu_{L-1} ; C' = e^{g + m - m'} C + sum_s e^{g - bc_s + i_s - m'} k_s v_s^T (g = bc_{L-1}), n' alike
// Every exponent is <= 0, so nothing overflows for any gates (the C x C decays are formed pair by pair,
// C^2 exps per chunk; the products are gemms). Cost per chunk O(C^2 (Dk+Dv) + C Dk Dv).

typedef struct {
    mn_real *Cs, *ns, *ms;      // (N+1,Dk,Dv), (N+1,Dk), (N+1): the state entering each chunk (and the last)
    mn_real *dC, *dn;           // (Dk,Dv), (Dk): backward, dL/d(state leaving the chunk)
    mn_real *lf, *mu, *al, *wk, *den, *bt, *dbt, *dmu; // (Cw) per token of the chunk
    mn_real *Dm, *E, *dE;       // (Cw,Cw): the decays e^{bc_r - bc_s + i_s - mu_r}, E, dE
    mn_real *Qa, *Kw, *dQl, *dKl; // (Cw,Dk): scale al Q ; e^{a - m'} K ; this chunk's dq, dk
    mn_real *num, *dN;          // (Cw,Dv): numerators ; do / den
    double carry;               // e^{g + m - m'} of the chunk in hand
} mn__mlstm_scratch;

static size_t mn__mlstm_nchunks(size_t T, size_t C) { return (T + C - 1) / C; }
static size_t mn__mlstm_cw(size_t T, size_t C) { return T == 0 ? 1 : mn__xl_min(C, T); }
// Lays out one (b,h) pair's scratch at base (NULL: only the size); returns its elements.
static size_t mn__mlstm_carve(mn__mlstm_scratch* a, mn_real* base, size_t T, size_t Dk, size_t Dv, size_t C) {
    size_t Cw = mn__mlstm_cw(T, C), N = mn__mlstm_nchunks(T, C), off = 0;
    MN__PIECE(Cs, (N + 1) * Dk * Dv); MN__PIECE(ns, (N + 1) * Dk); MN__PIECE(ms, N + 1);
    MN__PIECE(dC, Dk * Dv); MN__PIECE(dn, Dk);
    MN__PIECE(lf, Cw); MN__PIECE(mu, Cw); MN__PIECE(al, Cw); MN__PIECE(wk, Cw);
    MN__PIECE(den, Cw); MN__PIECE(bt, Cw); MN__PIECE(dbt, Cw); MN__PIECE(dmu, Cw);
    MN__PIECE(Dm, Cw * Cw); MN__PIECE(E, Cw * Cw); MN__PIECE(dE, Cw * Cw);
    MN__PIECE(Qa, Cw * Dk); MN__PIECE(Kw, Cw * Dk); MN__PIECE(dQl, Cw * Dk); MN__PIECE(dKl, Cw * Dk);
    MN__PIECE(num, Cw * Dv); MN__PIECE(dN, Cw * Dv);
    a->carry = 0.0;
    return off;
}
static size_t mn__mlstm_work_per_bh(size_t T, size_t Dk, size_t Dv, size_t C) {
    mn__mlstm_scratch w;
    return mn__mlstm_carve(&w, NULL, T, Dk, Dv, C);
}
MNDEF size_t mn_mlstm_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C) {
    MN_ASSERT(C >= 1);
    return B * H * mn__mlstm_work_per_bh(T, Dk, Dv, C);
}

// Prepares a chunk of L tokens entering with stabiliser m: lf, mu, al, wk (e^{g - bc_s + i_s - m'}),
// carry, the decays Dm, E = scale Q K^T . Dm (lower triangle), Qa = scale al Q and Kw = wk K.
// Q, K rows ldk apart; gates ig, fg rows H apart. Every exponent is summed in double from the gates
// it spans (bc_r - bc_s as lf_{s+1} + ... + lf_r, g - bc_s as a suffix sum), never as a difference of
// cumulative sums (see mn__mlstm_logf).
static void mn__mlstm_chunk_prep(mn__mlstm_scratch* w, const mn_real* Q, const mn_real* K, size_t ldk,
                                 const mn_real* ig, const mn_real* fg, size_t H, size_t L, size_t Dk, double m,
                                 double scale) {
    size_t r, s, d;
    double bc = 0.0, mu = m, suf = 0.0, mn;
    for (r = 0; r < L; r++) {
        double lf = mn__xl_logsig(fg[r * H]);
        w->lf[r] = (mn_real)lf;
        bc += lf;
        mu = fmax(lf + mu, (double)ig[r * H]);   // the recurrent form's m_t, the same arithmetic
        w->mu[r] = (mn_real)mu;
        w->al[r] = (mn_real)exp(bc + m - mu);
    }
    mn = mu;                                     // m' = mu_{L-1}
    w->carry = exp(bc + m - mn);
    for (r = L; r-- > 0;) {                      // suf = g - bc_r = lf_{r+1} + ... + lf_{L-1}
        w->wk[r] = (mn_real)exp(suf + ig[r * H] - mn);
        suf += w->lf[r];
        for (d = 0; d < Dk; d++) {
            w->Qa[r * Dk + d] = (mn_real)(scale * w->al[r] * Q[r * ldk + d]);
            w->Kw[r * Dk + d] = (mn_real)(w->wk[r] * K[r * ldk + d]);
        }
    }
    mn_gemm(0, 1, L, L, Dk, scale, Q, ldk, K, ldk, 0.0, w->E, L);
    for (r = 0; r < L; r++) {
        double dec = 0.0;                        // lf_{s+1} + ... + lf_r
        for (s = L; s-- > r + 1;) { w->Dm[r * L + s] = 0; w->E[r * L + s] = 0; }
        for (s = r + 1; s-- > 0;) {
            double e = exp(dec + ig[s * H] - w->mu[r]);
            w->Dm[r * L + s] = (mn_real)e;
            w->E[r * L + s] = (mn_real)(w->E[r * L + s] * e);
            dec += w->lf[s];
        }
    }
}
// num (L,Dv) = Qa C + E V, bt (L) = Qa n + rowsum(E), den = max(|bt|, e^{-mu}) + eps. V rows ldv apart.
static void mn__mlstm_chunk_num(mn__mlstm_scratch* w, const mn_real* S, const mn_real* nst, const mn_real* V,
                                size_t ldv, size_t L, size_t Dk, size_t Dv, double eps) {
    size_t r, s, d;
    mn_gemm(0, 0, L, Dv, Dk, 1.0, w->Qa, Dk, S, Dv, 0.0, w->num, Dv);
    mn_gemm(0, 0, L, Dv, L, 1.0, w->E, L, V, ldv, 1.0, w->num, Dv);
    for (r = 0; r < L; r++) {
        double acc = 0.0;
        for (d = 0; d < Dk; d++) acc += (double)w->Qa[r * Dk + d] * nst[d];
        for (s = 0; s <= r; s++) acc += w->E[r * L + s];
        w->bt[r] = (mn_real)acc;
        w->den[r] = (mn_real)(fmax(fabs(acc), exp(-(double)w->mu[r])) + eps);
    }
}
// The state after the chunk: S' = carry S + Kw^T V, n' = carry n + Kw^T 1, m' = mu_{L-1}.
static void mn__mlstm_next_state(mn_real* Sn, mn_real* nn, mn_real* mnext, const mn_real* S, const mn_real* nst,
                                 const mn__mlstm_scratch* w, const mn_real* V, size_t ldv, size_t L, size_t Dk,
                                 size_t Dv) {
    size_t d, j, r;
    for (d = 0; d < Dk; d++) {
        double acc = w->carry * nst[d];
        for (j = 0; j < Dv; j++) Sn[d * Dv + j] = (mn_real)(w->carry * S[d * Dv + j]);
        for (r = 0; r < L; r++) acc += w->Kw[r * Dk + d];
        nn[d] = (mn_real)acc;
    }
    mn_gemm(1, 0, Dk, Dv, L, 1.0, w->Kw, Dk, V, ldv, 1.0, Sn, Dv);
    *mnext = w->mu[L - 1];
}
// Pass 1 of both directions: the state entering every chunk, Cs/ns/ms[n] for n = 0..N (N: the final state).
static void mn__mlstm_states(mn__mlstm_scratch* w, const mn_real* q, const mn_real* k, const mn_real* v,
                             const mn_real* ig, const mn_real* fg, const mn_real* C0, const mn_real* n0,
                             const mn_real* m0, size_t bh, size_t b, size_t h, size_t T, size_t H, size_t Dk, size_t Dv,
                             double scale, size_t C) {
    size_t n, N = mn__mlstm_nchunks(T, C), DS = Dk * Dv;
    if (C0) memcpy(w->Cs, C0 + bh * DS, DS * sizeof(mn_real)); else memset(w->Cs, 0, DS * sizeof(mn_real));
    if (n0) memcpy(w->ns, n0 + bh * Dk, Dk * sizeof(mn_real)); else memset(w->ns, 0, Dk * sizeof(mn_real));
    w->ms[0] = m0 ? m0[bh] : (mn_real)0;
    for (n = 0; n < N; n++) {
        size_t t0 = n * C, L = mn__xl_min(C, T - t0), i0 = (b * T + t0) * H + h;
        mn__mlstm_chunk_prep(w, q + i0 * Dk, k + i0 * Dk, H * Dk, ig + i0, fg + i0, H, L, Dk, w->ms[n], scale);
        mn__mlstm_next_state(w->Cs + (n + 1) * DS, w->ns + (n + 1) * Dk, w->ms + n + 1, w->Cs + n * DS, w->ns + n * Dk,
                             w, v + i0 * Dv, H * Dv, L, Dk, Dv);
    }
}

// The chunkwise forward: pass 1 the chunk states (kept in work), pass 2 each chunk's outputs from its
// entering state. Ct, nt, mt (the final state) may be NULL, or C0, n0, m0. C0, n0, m0 NULL mean zeros
// (the reference's start); m0 = -INFINITY with zero C0, n0 gives the parallel form exactly.
// work: mn_mlstm_work_size (the same for the backward). (b,h) pairs in parallel.
// Cost per token and head: 2 C (Dk + Dv) + 4 Dk Dv FLOPs (the GLA count); the backward, which
// recomputes the forward, 6 C Dk + 6 C Dv + 12 Dk Dv. Memory: the chunk states in work,
// (Dk Dv + Dk + 1) / C per token; nothing saved.
MNDEF void mn_mlstm_forward(mn_real* out, mn_real* norm, mn_real* stab, mn_real* Ct, mn_real* nt, mn_real* mt,
                            const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig, const mn_real* fg,
                            const mn_real* C0, const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t H,
                            size_t Dk, size_t Dv, double scale, double eps, size_t C, mn_real* work) {
    size_t per = mn__mlstm_work_per_bh(T, Dk, Dv, C), N = mn__mlstm_nchunks(T, C), DS = Dk * Dv;
    long long bh;
    MN_ASSERT(C >= 1);
    MN__OMP_FOR                                  // (b,h) pairs are independent
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, n, r, j;
        mn__mlstm_scratch w;
        mn__mlstm_carve(&w, work + (size_t)bh * per, T, Dk, Dv, C);
        mn__mlstm_states(&w, q, k, v, ig, fg, C0, n0, m0, (size_t)bh, b, h, T, H, Dk, Dv, scale, C);
        for (n = 0; n < N; n++) {
            size_t t0 = n * C, L = mn__xl_min(C, T - t0), i0 = (b * T + t0) * H + h;
            mn__mlstm_chunk_prep(&w, q + i0 * Dk, k + i0 * Dk, H * Dk, ig + i0, fg + i0, H, L, Dk, w.ms[n], scale);
            mn__mlstm_chunk_num(&w, w.Cs + n * DS, w.ns + n * Dk, v + i0 * Dv, H * Dv, L, Dk, Dv, eps);
            for (r = 0; r < L; r++) {
                size_t i = i0 + r * H;               // row (b, t0+r, h)
                for (j = 0; j < Dv; j++) out[i * Dv + j] = (mn_real)(w.num[r * Dv + j] / w.den[r]);
                if (norm) norm[i] = (mn_real)fmax(fabs((double)w.bt[r]), exp(-(double)w.mu[r]));
                if (stab) stab[i] = w.mu[r];
            }
        }
        if (Ct) memcpy(Ct + (size_t)bh * DS, w.Cs + N * DS, DS * sizeof(mn_real));
        if (nt) memcpy(nt + (size_t)bh * Dk, w.ns + N * Dk, Dk * sizeof(mn_real));
        if (mt) mt[bh] = w.ms[N];
    }
}
// The backward splits the exact gradient in two (o_t = Nbar_t / (max(|Bbar_t|, 1) + eps e^{mu_t}) in
// unstabilised terms, Nbar, Bbar linear attention with value [v, 1]):
// (1) through num and bt with every stabiliser held (the state's m cancels in them): a gated linear
//     attention backward on the value [v, 1] with upstream [dN, dbt], dN = do / den and
//       forward: o = num / den, den = max(|bt|, e^{-mu}) + eps, so: dbt = -(do.o) / den sign(bt) where |bt| wins
//     The chunks in reverse, dC, dn = dL/d(state leaving the chunk), dE = dN V^T + dbt 1^T (lower triangle):
//       dq += scale (dE . Dm) K + scale al (dN C^T + dbt n^T) ; dk += scale (dE . Dm)^T Q + wk (V dC^T + 1 dn^T)
//       dv += E^T dN + Kw dC ; dC = carry dC + Qa^T dN ; dn = carry dn + Qa^T dbt
//     and the gates by the identity of >>gla (q, k enter as q e^{F_t}, k e^{i_s - F_s}; F global):
//       di_s += k_s.dk_s ; dlf_u += sum_{t>=u} (q_t.dq_t - k_t.dk_t)     (this call's dq, dk)
// (2) through mu (exact mode only): everything above scales with e^{-mu}, and the floor is e^{-mu}, so
//       dmu_t = -(dN.num + dbt bt) + [floor] dden e^{-mu} ... = -eps (do_t.o_t) / den_t
//     then back through mu_t = max(lf_t + mu_{t-1}, i_t): the larger branch takes it (lf_t and mu_{t-1},
//     or i_t); what reaches mu_{-1} = m0 is dropped.
// MN_MLSTM_BW_DETACH sets dbt = dmu = 0: mlstm_kernels' chunkwise backward (normaliser and m constant).
MNDEF void mn_mlstm_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* di, mn_real* df, mn_real* dC0,
                             mn_real* dn0, const mn_real* dout, const mn_real* q, const mn_real* k, const mn_real* v,
                             const mn_real* ig, const mn_real* fg, const mn_real* C0, const mn_real* n0,
                             const mn_real* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale,
                             double eps, size_t C, int mode, mn_real* work) {
    size_t per = mn__mlstm_work_per_bh(T, Dk, Dv, C), N = mn__mlstm_nchunks(T, C), DS = Dk * Dv;
    size_t ldk = H * Dk, ldv = H * Dv;           // row strides of the [B,T,H,D] layout
    long long bh;
    MN_ASSERT(C >= 1 && (mode == MN_MLSTM_BW_EXACT || mode == MN_MLSTM_BW_DETACH));
    MN__OMP_FOR                                  // each (b,h) writes only its own slices
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, n, r, s, d, j;
        double acc = 0.0, dmc = 0.0;             // running sum of dF (suffix); dL/dmu carried backwards
        mn__mlstm_scratch w;
        mn__mlstm_carve(&w, work + (size_t)bh * per, T, Dk, Dv, C);
        mn__mlstm_states(&w, q, k, v, ig, fg, C0, n0, m0, (size_t)bh, b, h, T, H, Dk, Dv, scale, C);
        memset(w.dC, 0, DS * sizeof(mn_real));
        memset(w.dn, 0, Dk * sizeof(mn_real));
        for (n = N; n-- > 0;) {
            size_t t0 = n * C, L = mn__xl_min(C, T - t0), i0 = (b * T + t0) * H + h;
            const mn_real* Q = q + i0 * Dk; const mn_real* K = k + i0 * Dk; const mn_real* V = v + i0 * Dv;
            const mn_real* dO = dout + i0 * Dv; const mn_real* S = w.Cs + n * DS; const mn_real* nst = w.ns + n * Dk;
            mn__mlstm_chunk_prep(&w, Q, K, ldk, ig + i0, fg + i0, H, L, Dk, w.ms[n], scale);
            mn__mlstm_chunk_num(&w, S, nst, V, ldv, L, Dk, Dv, eps);
            // dN = do / den ; (do.o) ; dbt and dmu (exact mode)
            for (r = 0; r < L; r++) {
                double dot_o = 0.0, den = w.den[r];
                for (j = 0; j < Dv; j++) {
                    w.dN[r * Dv + j] = (mn_real)(dO[r * ldv + j] / den);
                    dot_o += (double)dO[r * ldv + j] * w.num[r * Dv + j];
                }
                dot_o /= den;
                w.dbt[r] = 0; w.dmu[r] = 0;
                if (mode == MN_MLSTM_BW_EXACT) {
                    if (fabs((double)w.bt[r]) >= exp(-(double)w.mu[r]))
                        w.dbt[r] = (mn_real)(-dot_o / den * mn__xl_sign(w.bt[r]));
                    w.dmu[r] = (mn_real)(-eps * dot_o / den);
                }
            }
            // dE = dN V^T + dbt 1^T on and below the diagonal ; then dE . Dm (dL/dS, S = scale Q K^T)
            mn_gemm(0, 1, L, L, Dv, 1.0, w.dN, Dv, V, ldv, 0.0, w.dE, L);
            for (r = 0; r < L; r++)
                for (s = 0; s < L; s++)
                    w.dE[r * L + s] = s <= r ? (mn_real)((w.dE[r * L + s] + w.dbt[r]) * w.Dm[r * L + s]) : (mn_real)0;
            // forward: num = Qa S + E V, bt = Qa n + E 1, Qa = scale al Q, so:
            //   dq = scale (dE.Dm) K + scale al (dN S^T + dbt n^T)
            mn_gemm(0, 1, L, Dk, Dv, 1.0, w.dN, Dv, S, Dv, 0.0, w.dQl, Dk);
            for (r = 0; r < L; r++)
                for (d = 0; d < Dk; d++)
                    w.dQl[r * Dk + d] = (mn_real)(scale * w.al[r] * (w.dQl[r * Dk + d] + w.dbt[r] * nst[d]));
            mn_gemm(0, 0, L, Dk, L, scale, w.dE, L, K, ldk, 1.0, w.dQl, Dk);
            // forward: S' = carry S + Kw^T V, n' = carry n + Kw^T 1, Kw = wk K, so:
            //   dk = wk (V dC^T + dn) + scale (dE.Dm)^T Q
            mn_gemm(0, 1, L, Dk, Dv, 1.0, V, ldv, w.dC, Dv, 0.0, w.dKl, Dk);
            for (r = 0; r < L; r++)
                for (d = 0; d < Dk; d++) w.dKl[r * Dk + d] = (mn_real)(w.wk[r] * (w.dKl[r * Dk + d] + w.dn[d]));
            mn_gemm(1, 0, L, Dk, L, scale, w.dE, L, Q, ldk, 1.0, w.dKl, Dk);
            // dv = E^T dN + Kw dC
            mn_gemm(1, 0, L, Dv, L, 1.0, w.E, L, w.dN, Dv, 1.0, dv + i0 * Dv, ldv);
            mn_gemm(0, 0, L, Dv, Dk, 1.0, w.Kw, Dk, w.dC, Dv, 1.0, dv + i0 * Dv, ldv);
            // the state entering the chunk: dC = carry dC + Qa^T dN ; dn = carry dn + Qa^T dbt
            for (d = 0; d < Dk; d++) {
                double a = w.carry * w.dn[d];
                for (j = 0; j < Dv; j++) w.dC[d * Dv + j] = (mn_real)(w.carry * w.dC[d * Dv + j]);
                for (r = 0; r < L; r++) a += (double)w.Qa[r * Dk + d] * w.dbt[r];
                w.dn[d] = (mn_real)a;
            }
            mn_gemm(1, 0, Dk, Dv, L, 1.0, w.Qa, Dk, w.dN, Dv, 1.0, w.dC, Dv);
            // this chunk's dq, dk; the gates, tokens in reverse
            for (r = L; r-- > 0;) {
                size_t i = i0 + r * H;               // row (b, t0+r, h)
                double qdq = 0.0, kdk = 0.0, dlf, dit, tot;
                for (d = 0; d < Dk; d++) {
                    dq[i * Dk + d] += w.dQl[r * Dk + d];
                    dk[i * Dk + d] += w.dKl[r * Dk + d];
                    qdq += (double)Q[r * ldk + d] * w.dQl[r * Dk + d];
                    kdk += (double)K[r * ldk + d] * w.dKl[r * Dk + d];
                }
                // (1): k enters as k e^{i}, and F moves q e^{F_t} and k e^{-F_s}
                dit = kdk;
                acc += qdq - kdk;
                dlf = acc;
                // (2): mu_r = max(lf_r + mu_{r-1}, i_r), mu_{-1} the chunk's entering m
                tot = w.dmu[r] + dmc;
                if ((double)w.lf[r] + (r ? (double)w.mu[r - 1] : (double)w.ms[n]) >= (double)ig[i]) {
                    dlf += tot;
                    dmc = tot;
                } else {
                    dit += tot;
                    dmc = 0.0;
                }
                di[i] += (mn_real)dit;
                df[i] += (mn_real)(dlf * mn__sigmoid(-(double)fg[i]));
            }
        }
        if (dC0) for (r = 0; r < DS; r++) dC0[(size_t)bh * DS + r] += w.dC[r];
        if (dn0) for (r = 0; r < Dk; r++) dn0[(size_t)bh * Dk + r] += w.dn[r];
    }
}

// ---- the layer: mLSTM as a mixer, in the layout of xLSTM-7B's mLSTM layer (NX-AI xlstm/xlstm_large/
// model.py), which fits this Llama-style backbone (its blocks already carry a SwiGLU MLP):
//   q, k, v = x Wq, x Wk, x Wv ;  i = 15 tanh((x Wi + bi)/15), f = 15 tanh((x Wf + bf)/15)  (soft-capped gates)
//   h = mLSTM(q, k, v, i, f) (chunkwise, scale Dk^-1/2, eps 1e-6, exact backward)
//   out = (RMSNorm_head(h) * sigmoid(x Wo)) Wout
// The original xLSTM block (up-projection, conv, block-diagonal q/k/v, learnable skip) is not offered.
// Forget-gate bias b_f = linspace(3, 6) over heads (xLSTM's init), b_i = 0.
#define MN__MLSTM_CAP 15.0
typedef struct mn__mlstm_par {
    mn_real *q_proj, *k_proj, *v_proj;   // (HD,C)
    mn_real *i_proj, *i_bias;            // (H,C), (H): the input gate
    mn_real *f_proj, *f_bias;            // (H,C), (H): the forget gate
    mn_real* o_gate;                     // (HD,C) the output gate
    mn_real *norm, *o_proj;              // (D), (C,HD)
} mn__mlstm_par;
typedef struct mn__mlstm_act {
    mn_real *q, *k, *v;           // (N,HD)
    mn_real *il, *fl, *ig, *fg;   // (N*H) the gates before and after the soft cap
    mn_real *ol, *h, *hn;         // (N,HD) output gate pre-activation, the cell's output, normed
    mn_real* rs;                  // (N*H) rstd of the norm
    mn_real* ho;                  // (N,HD) normed h times the output gate
    mn_real* work;                // the op's workspace (the backward recomputes the forward in it)
} mn__mlstm_act;
typedef struct mn__mlstm_state { mn_real *C, *n, *m; } mn__mlstm_state;   // (H,D,D), (H,D), (H)
typedef struct mn__mlstm_temp { mn_real *q, *k, *v, *h, *hn, *ol, *ig, *fg, *rs; } mn__mlstm_temp;

static void mn__mlstm_par_walk(mn__pwalk* w, void* pp) {
    mn__mlstm_par t, *p = pp ? (mn__mlstm_par*)pp : &t;
    size_t C = w->m->cfg.d_model, H = w->m->cfg.n_head, D = w->m->cfg.head_dim, HD = H * D;
    p->q_proj = mn__pw_matrix(w, "q.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v.weight", HD, C);
    p->i_proj = mn__pw_matrix(w, "igate_preact.weight", H, C);
    p->i_bias = mn__pw_vector(w, "igate_preact.bias", H, MN__INIT_ZEROS);
    p->f_proj = mn__pw_matrix(w, "fgate_preact.weight", H, C);
    p->f_bias = mn__pw_vector(w, "fgate_preact.bias", H, MN__INIT_FGATE);
    p->o_gate = mn__pw_matrix(w, "ogate_preact.weight", HD, C);
    p->norm = mn__pw_vector(w, "multihead_norm.weight", D, MN__INIT_ONES);
    p->o_proj = mn__pw_matrix(w, "out_proj.weight", C, HD);
}
static size_t mn__mlstm_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__mlstm_act t, *a = p ? (mn__mlstm_act*)p : &t;
    size_t N = B * T, H = c->n_head, D = c->head_dim, HD = H * D, off = 0;
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD); MN__PIECE(v, N * HD);
    MN__PIECE(il, N * H); MN__PIECE(fl, N * H); MN__PIECE(ig, N * H); MN__PIECE(fg, N * H);
    MN__PIECE(ol, N * HD); MN__PIECE(h, N * HD); MN__PIECE(hn, N * HD); MN__PIECE(rs, N * H); MN__PIECE(ho, N * HD);
    MN__PIECE(work, mn_mlstm_work_size(B, T, H, D, D, c->mesa_chunk));
    return off;
}
static void mn__mlstm_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                    size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    mn__mlstm_par P; mn__mlstm_act A;
    mn__layer_point(m, l, m->params, mn__mlstm_par_walk, &P);
    mn__mlstm_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.q, A.k, A.v, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    mn_matmul_forward(A.il, in, P.i_proj, P.i_bias, N, C, H);
    mn_matmul_forward(A.fl, in, P.f_proj, P.f_bias, N, C, H);
    for (i = 0; i < N * H; i++) {
        A.ig[i] = (mn_real)(MN__MLSTM_CAP * tanh(A.il[i] / MN__MLSTM_CAP));
        A.fg[i] = (mn_real)(MN__MLSTM_CAP * tanh(A.fl[i] / MN__MLSTM_CAP));
    }
    mn_mlstm_forward(A.h, NULL, NULL, NULL, NULL, NULL, A.q, A.k, A.v, A.ig, A.fg, NULL, NULL, NULL, B, T, H, D, D,
                     1.0 / sqrt((double)D), 1e-6, c->mesa_chunk, A.work);
    mn_rmsnorm_forward(A.hn, A.rs, A.h, P.norm, N * H, D, c->norm_eps);
    mn_matmul_forward(A.ol, in, P.o_gate, NULL, N, C, HD);
    for (i = 0; i < N * HD; i++) A.ho[i] = (mn_real)(A.hn[i] * mn__sigmoid(A.ol[i]));
    mn_matmul_forward(out, A.ho, P.o_proj, NULL, N, HD, C);
}
static void mn__mlstm_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                     mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    mn__mlstm_par P, dP; mn__mlstm_act A, dA;
    mn__layer_point(m, l, m->params, mn__mlstm_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__mlstm_par_walk, &dP);
    mn__mlstm_act_layout(&A, acts, c, B, T);
    mn__mlstm_act_layout(&dA, dacts, c, B, T);
    mn_matmul_backward(dA.ho, dP.o_proj, NULL, dout, A.ho, P.o_proj, N, HD, C);
    for (i = 0; i < N * HD; i++) {   // forward: ho = hn s(ol)
        double s = mn__sigmoid(A.ol[i]);
        dA.hn[i] += (mn_real)(dA.ho[i] * s);
        dA.ol[i] += (mn_real)(dA.ho[i] * A.hn[i] * s * (1.0 - s));
    }
    mn_matmul_backward(din, dP.o_gate, NULL, dA.ol, in, P.o_gate, N, C, HD);
    mn_rmsnorm_backward(dA.h, dP.norm, dA.hn, A.rs, A.h, P.norm, N * H, D);
    mn_mlstm_backward(dA.q, dA.k, dA.v, dA.ig, dA.fg, NULL, NULL, dA.h, A.q, A.k, A.v, A.ig, A.fg, NULL, NULL, NULL, B,
                      T,
                      H, D, D, 1.0 / sqrt((double)D), 1e-6, c->mesa_chunk, MN_MLSTM_BW_EXACT, dA.work);
    for (i = 0; i < N * H; i++) {    // forward: g = cap tanh(gl / cap), so: dgl = dg (1 - tanh^2)
        double ti = tanh(A.il[i] / MN__MLSTM_CAP), tf = tanh(A.fl[i] / MN__MLSTM_CAP);
        dA.il[i] += (mn_real)(dA.ig[i] * (1.0 - ti * ti));
        dA.fl[i] += (mn_real)(dA.fg[i] * (1.0 - tf * tf));
    }
    mn_matmul_backward(din, dP.i_proj, dP.i_bias, dA.il, in, P.i_proj, N, C, H);
    mn_matmul_backward(din, dP.f_proj, dP.f_bias, dA.fl, in, P.f_proj, N, C, H);
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.q, dA.k, dA.v, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
static size_t mn__mlstm_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__mlstm_state t, *a = p ? (mn__mlstm_state*)p : &t;
    size_t H = c->n_head, D = c->head_dim, off = 0;
    MN__PIECE(C, H * D * D); MN__PIECE(n, H * D); MN__PIECE(m, H);
    return off;
}
static size_t mn__mlstm_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__mlstm_temp t, *a = p ? (mn__mlstm_temp*)p : &t;
    size_t H = c->n_head, HD = H * c->head_dim, off = 0;
    MN__PIECE(q, HD); MN__PIECE(k, HD); MN__PIECE(v, HD); MN__PIECE(h, HD); MN__PIECE(hn, HD); MN__PIECE(ol, HD);
    MN__PIECE(ig, H); MN__PIECE(fg, H); MN__PIECE(rs, H);
    return off;
}
static void mn__mlstm_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* temp, const mn_real* in,
                                 size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    mn__mlstm_par P; mn__mlstm_state S; mn__mlstm_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__mlstm_par_walk, &P);
    mn__mlstm_state_layout(&S, state, c);
    mn__mlstm_temp_layout(&X, temp, c);
    mn__qkv_forward(X.q, X.k, X.v, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    mn_matmul_forward(X.ig, in, P.i_proj, P.i_bias, 1, C, H);
    mn_matmul_forward(X.fg, in, P.f_proj, P.f_bias, 1, C, H);
    for (i = 0; i < H; i++) {
        X.ig[i] = (mn_real)(MN__MLSTM_CAP * tanh(X.ig[i] / MN__MLSTM_CAP));
        X.fg[i] = (mn_real)(MN__MLSTM_CAP * tanh(X.fg[i] / MN__MLSTM_CAP));
    }
    mn_mlstm_step(X.h, S.C, S.n, S.m, X.q, X.k, X.v, X.ig, X.fg, 1, H, D, D, 1.0 / sqrt((double)D), 1e-6);
    mn_rmsnorm_forward(X.hn, X.rs, X.h, P.norm, H, D, c->norm_eps);
    mn_matmul_forward(X.ol, in, P.o_gate, NULL, 1, C, HD);
    for (i = 0; i < HD; i++) X.hn[i] = (mn_real)(X.hn[i] * mn__sigmoid(X.ol[i]));
    mn_matmul_forward(out, X.hn, P.o_proj, NULL, 1, HD, C);
}
static double mn__mlstm_layer_flops(const mn_config* c, size_t T) {
    double K = (double)c->head_dim, Cc = (double)(c->mesa_chunk < T ? c->mesa_chunk : T);
    return (double)c->n_head * (2 * Cc * 2 * K + 6 * K * K);   // chunkwise, approximate (as the GLA family)
}

// >>slstm
// defines: mn_slstm_work_size, mn_slstm_{forward,backward}, mn_slstm_step; the layer "slstm"
// xLSTM's scalar memory (Beck et al. 2024), the core of its sLSTM block.
// sLSTM, per unit, gates ~i,~f,~z,~o = x_t + R y_{t-1} + b (R block-diagonal over heads):
//   m_t = max(~i, m_{t-1} + logsigmoid(~f))   (= ~i where n_{t-1} == 0: a unit with no history)
//   i = min(e^{~i - m_t}, 1) ; f = min(e^{m_{t-1} + logsigmoid(~f) - m_t}, 1)
//   c_t = f c_{t-1} + i tanh(~z) ; n_t = f n_{t-1} + i ; y_t = sigmoid(~o) c_t / n_t
// (the reference's first-step rule tests n == 0 over the whole batch; with zero initial states, its
// only use, that is the same, and a per-unit test also lets sequences of a batch start at different times).

// Scratch: raw gates and their gradient (B,4Hd) each, and the carries dy, dc, dn (B,Hd) each.
MNDEF size_t mn_slstm_work_size(size_t B, size_t NH, size_t Dh) { return 11 * B * NH * Dh; }

// raw (B,4Hd) = x_t + b + R y_{t-1}: one gemm per head and gate (R is block-diagonal). xt rows ldx
// apart, yp (B,Hd) rows ldy apart or NULL (zeros).
static void mn__slstm_raw(mn_real* raw, const mn_real* xt, size_t ldx, const mn_real* yp, size_t ldy, const mn_real* R,
                          const mn_real* b, size_t B, size_t NH, size_t Dh) {
    size_t Hd = NH * Dh, G = 4 * Hd, bb, u, h, g;
    for (bb = 0; bb < B; bb++)
        for (u = 0; u < G; u++) raw[bb * G + u] = (mn_real)((double)xt[bb * ldx + u] + b[u]);
    if (yp == NULL) return;
    for (h = 0; h < NH; h++)
        for (g = 0; g < 4; g++)   // raw[:, g Hd + h Dh + j] += sum_i y[:, h Dh + i] R[h][g Dh + j][i]
            mn_gemm(0, 1, B, Dh, Dh, 1.0, yp + h * Dh, ldy, R + (h * 4 + g) * Dh * Dh, Dh, 1.0, raw + g * Hd + h * Dh,
                    G);
}

// Element i of an optional state (NULL: zeros).
static double mn__slstm_at(const mn_real* p, size_t i) { return p ? (double)p[i] : 0.0; }
// The gates of one unit from its raw pre-activations (ri, rf at distance Hd) and m_{t-1}, m_t:
// the input and forget gates with the reference's min(., 1) clamps (they never bind past a unit's
// first step, where f multiplies zero states).
static void mn__slstm_gates(double* ip, double* fp, double ri, double rf, double mprev, double mnew) {
    *ip = fmin(exp(ri - mnew), 1.0);
    *fp = fmin(exp(mprev + mn__xl_logsig(rf) - mnew), 1.0);
}

// The vanilla sLSTM cell (NX-AI/xlstm xlstm/blocks/slstm/src/vanilla/__init__.py::slstm_forward with
// slstm.py::slstm_forward_pointwise), time step by time step; the cell's equations are in the
// section comment. y, c, n, m (B,T,Hd) are the states after each step: the outputs, and what the
// backward reads (nothing else is saved). The step t reads y_{t-1} in full before writing, so with
// T = 1 the outputs may be the initial states (that is mn_slstm_step). O(T B Hd (4 Dh)) MACs;
// work: mn_slstm_work_size (the first B*4Hd elements).
MNDEF void mn_slstm_forward(mn_real* y, mn_real* c, mn_real* n, mn_real* m, const mn_real* x, const mn_real* R,
                            const mn_real* b, const mn_real* y0, const mn_real* c0, const mn_real* n0,
                            const mn_real* m0, size_t B, size_t T, size_t NH, size_t Dh, mn_real* work) {
    size_t Hd = NH * Dh, G = 4 * Hd, t, bb, u;
    mn_real* raw = work;                        // (B,4Hd)
    for (t = 0; t < T; t++) {
        // the states before step t: row t-1 of the outputs (rows T*Hd apart), or the initial states
        const mn_real* yp = t ? y + (t - 1) * Hd : y0;
        const mn_real* cp_ = t ? c + (t - 1) * Hd : c0;
        const mn_real* np_ = t ? n + (t - 1) * Hd : n0;
        const mn_real* mp_ = t ? m + (t - 1) * Hd : m0;
        size_t ldp = t ? T * Hd : Hd;
        // pass 1: the pre-activations of every unit, from the whole of y_{t-1}
        mn__slstm_raw(raw, x + t * G, T * G, yp, ldp, R, b, B, NH, Dh);
        // pass 2: the pointwise cell
        for (bb = 0; bb < B; bb++)
            for (u = 0; u < Hd; u++) {
                size_t o = (bb * T + t) * Hd + u, p = bb * ldp + u;
                double cp = mn__slstm_at(cp_, p), np = mn__slstm_at(np_, p), mp = mn__slstm_at(mp_, p);
                const mn_real* rr = raw + bb * G + u;          // rr[g * Hd]: gate g of unit u
                double mnew = np == 0.0 ? (double)rr[0] : fmax((double)rr[0], mp + mn__xl_logsig(rr[Hd]));
                double ip, fp, cn, nn;
                mn__slstm_gates(&ip, &fp, rr[0], rr[Hd], mp, mnew);
                cn = fp * cp + ip * tanh((double)rr[2 * Hd]);
                nn = fp * np + ip;
                c[o] = (mn_real)cn; n[o] = (mn_real)nn; m[o] = (mn_real)mnew;
                y[o] = (mn_real)(mn__sigmoid(rr[3 * Hd]) * cn / nn);
            }
    }
}
// Backpropagation through time. m is held constant: y does not depend on it (c and n scale together)
// while the clamps do not bind, so the exact gradient is that of i = e^{~i - m}, f = e^{lf + m_{t-1} - m}
// with m fixed (m only rescales c and n together, and y = c / n does not see it). Walking t backwards,
// dy = dy_t + R^T draw_{t+1}, dc, dn the carries:
//   forward: y = sig(~o) c / n, so: d~o = dy c / n sig' ; dc += dy sig / n ; dn -= dy y / n
//   forward: c = f c_{t-1} + i tanh(~z), n = f n_{t-1} + i, so: d~z = dc i (1 - tanh^2) ;
//            d~i = (dc tanh(~z) + dn) i ; d~f = (dc c_{t-1} + dn n_{t-1}) f sigmoid(-~f) ;
//            dc_{t-1} = dc f ; dn_{t-1} = dn f
//   forward: raw = x + b + R y_{t-1}, so: dx += draw ; db += sum_b draw ; dR += draw^T y_{t-1} ;
//            dy_{t-1} = R^T draw (per head and gate)
// and dy0, dc0, dn0 += the carries after t = 0. O(T B Hd Dh) like the forward; work: mn_slstm_work_size.
MNDEF void mn_slstm_backward(mn_real* dx, mn_real* dR, mn_real* db, mn_real* dy0, mn_real* dc0, mn_real* dn0,
                             const mn_real* dy, const mn_real* y, const mn_real* c, const mn_real* n, const mn_real* m,
                             const mn_real* x, const mn_real* R, const mn_real* b, const mn_real* y0, const mn_real* c0,
                             const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t NH, size_t Dh,
                             mn_real* work) {
    size_t Hd = NH * Dh, G = 4 * Hd, t, bb, u, h, g;
    mn_real* raw = work;                        // (B,4Hd)
    mn_real* draw = raw + B * G;                // (B,4Hd)
    mn_real* dyr = draw + B * G;                // (B,Hd) R^T draw of the step after
    mn_real* dcs = dyr + B * Hd;                // (B,Hd) dL/dc_t carried
    mn_real* dns = dcs + B * Hd;                // (B,Hd) dL/dn_t carried
    memset(dyr, 0, 3 * B * Hd * sizeof(mn_real));
    for (t = T; t-- > 0;) {
        const mn_real* yp = t ? y + (t - 1) * Hd : y0;   // the states before step t, as in the forward
        const mn_real* cp_ = t ? c + (t - 1) * Hd : c0;
        const mn_real* np_ = t ? n + (t - 1) * Hd : n0;
        const mn_real* mp_ = t ? m + (t - 1) * Hd : m0;
        size_t ldp = t ? T * Hd : Hd;
        mn__slstm_raw(raw, x + t * G, T * G, yp, ldp, R, b, B, NH, Dh);
        for (bb = 0; bb < B; bb++)
            for (u = 0; u < Hd; u++) {
                size_t o = (bb * T + t) * Hd + u, p = bb * ldp + u, s0 = bb * Hd + u;
                double cp = mn__slstm_at(cp_, p), np = mn__slstm_at(np_, p), mp = mn__slstm_at(mp_, p);
                const mn_real* rr = raw + bb * G + u;
                mn_real* dr = draw + bb * G + u;
                double ip, fp, og = mn__sigmoid(rr[3 * Hd]), tz = tanh((double)rr[2 * Hd]);
                double cn = c[o], nn = n[o], dyt = (double)dy[o] + dyr[s0], dc, dn;
                mn__slstm_gates(&ip, &fp, rr[0], rr[Hd], mp, m[o]);
                dr[3 * Hd] = (mn_real)(dyt * cn / nn * og * (1.0 - og));
                dc = dcs[s0] + dyt * og / nn;
                dn = dns[s0] - dyt * y[o] / nn;
                dr[2 * Hd] = (mn_real)(dc * ip * (1.0 - tz * tz));
                dr[0] = (mn_real)((dc * tz + dn) * ip);
                dr[Hd] = (mn_real)((dc * cp + dn * np) * fp * mn__sigmoid(-(double)rr[Hd]));
                dcs[s0] = (mn_real)(dc * fp);
                dns[s0] = (mn_real)(dn * fp);
            }
        for (bb = 0; bb < B; bb++)
            for (u = 0; u < G; u++) {
                dx[(bb * T + t) * G + u] += draw[bb * G + u];
                db[u] += draw[bb * G + u];
            }
        // forward: raw += R y_{t-1} per head and gate, so: dR += draw^T y_{t-1} ; dy_{t-1} = R^T draw
        for (h = 0; h < NH; h++)
            for (g = 0; g < 4; g++) {
                const mn_real* dg = draw + g * Hd + h * Dh;
                const mn_real* Rg = R + (h * 4 + g) * Dh * Dh;
                if (yp) mn_gemm(1, 0, Dh, Dh, B, 1.0, dg, G, yp + h * Dh, ldp, 1.0, dR + (h * 4 + g) * Dh * Dh, Dh);
                mn_gemm(0, 0, B, Dh, Dh, 1.0, dg, G, Rg, Dh, g ? 1.0 : 0.0, dyr + h * Dh, Hd);
            }
    }
    for (bb = 0; bb < B * Hd; bb++) {
        if (dy0) dy0[bb] += dyr[bb];
        if (dc0) dc0[bb] += dcs[bb];
        if (dn0) dn0[bb] += dns[bb];
    }
}

// One token per sequence for generation: the forward with T = 1, the state (B,Hd) in place.
MNDEF void mn_slstm_step(mn_real* y, mn_real* c, mn_real* n, mn_real* m, const mn_real* x, const mn_real* R,
                         const mn_real* b, size_t B, size_t NH, size_t Dh, mn_real* work) {
    mn_slstm_forward(y, c, n, m, x, R, b, y, c, n, m, B, 1, NH, Dh, work);
}

// ---- the layer: sLSTM as a mixer (NX-AI xlstm/blocks/slstm/layer.py sLSTMLayer), width C, NH = n_head
// heads of Dh = C/NH units:
//   xc = silu(conv4(x) + b_conv) ;  pre-activations i, f from xc and z, o from x, each through a
//   block-diagonal per-head linear ;  (y, c, n, m) = sLSTM cell (R block-diagonal, bias b) ;
//   out = RMSNorm_head(y) (no output projection, as the reference layer)
// Differences from the reference block, stated: the per-head norm is an RMSNorm (xLSTM uses a
// LayerNorm), and the block's FFN is this backbone's SwiGLU. Init: R = 0, forget bias
// 5 - 12 (j/(Dh-1))^0.3 (xLSTM's "powerlaw_blockdependent" for the first block), other biases 0.
typedef struct mn__slstm_par {
    mn_real *conv, *conv_bias;              // (C,1,4), (C)
    mn_real *wi, *wf, *wz, *wo;             // (NH,Dh,Dh) the gates' block-diagonal input maps
    mn_real *R, *b;                         // (NH,4Dh,Dh) the recurrent kernel, (4,NH,Dh) the bias
    mn_real* norm;                          // (Dh)
} mn__slstm_par;
typedef struct mn__slstm_act {
    mn_real *xcp, *xc;         // (N,C) conv + bias, after silu
    mn_real* x;                // (N,4C) the gates' input pre-activations, gate-major
    mn_real *y, *c, *n, *m;    // (N,C) the cell's states after each step
    mn_real* rs;               // (N*NH) rstd of the output norm
    mn_real* work;             // the op's workspace
} mn__slstm_act;
typedef struct mn__slstm_state { mn_real *conv, *y, *c, *n, *m; } mn__slstm_state;   // (C,3), (C) x 4
typedef struct mn__slstm_temp { mn_real *xc, *x, *rs, *work; } mn__slstm_temp;

static void mn__slstm_par_walk(mn__pwalk* w, void* pp) {
    mn__slstm_par t, *p = pp ? (mn__slstm_par*)pp : &t;
    size_t C = w->m->cfg.d_model, NH = w->m->cfg.n_head, Dh = C / NH;
    p->conv = mn__pw_conv(w, "conv1d.weight", C);
    p->conv_bias = mn__pw_vector(w, "conv1d.bias", C, MN__INIT_ZEROS);
    p->wi = mn__pw_tensor(w, "igate.weight", 3, NH, Dh, Dh, 1, MN__INIT_NORMAL);
    p->wf = mn__pw_tensor(w, "fgate.weight", 3, NH, Dh, Dh, 1, MN__INIT_NORMAL);
    p->wz = mn__pw_tensor(w, "zgate.weight", 3, NH, Dh, Dh, 1, MN__INIT_NORMAL);
    p->wo = mn__pw_tensor(w, "ogate.weight", 3, NH, Dh, Dh, 1, MN__INIT_NORMAL);
    p->R = mn__pw_tensor(w, "slstm_cell.recurrent_kernel", 3, NH, 4 * Dh, Dh, 1, MN__INIT_ZEROS);
    p->b = mn__pw_tensor(w, "slstm_cell.bias", 3, 4, NH, Dh, 0, MN__INIT_SLSTM_BIAS);
    p->norm = mn__pw_vector(w, "group_norm.weight", Dh, MN__INIT_ONES);
}
static size_t mn__slstm_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__slstm_act t, *a = p ? (mn__slstm_act*)p : &t;
    size_t N = B * T, C = c->d_model, off = 0;
    MN__PIECE(xcp, N * C); MN__PIECE(xc, N * C); MN__PIECE(x, 4 * N * C);
    MN__PIECE(y, N * C); MN__PIECE(c, N * C); MN__PIECE(n, N * C); MN__PIECE(m, N * C);
    MN__PIECE(rs, N * c->n_head);
    MN__PIECE(work, mn_slstm_work_size(B, c->n_head, C / c->n_head));
    return off;
}
// Block-diagonal linear into column block `col` of a row-major output with row stride ldo:
// out[n, col + h Dh + j] = sum_i u[n, h Dh + i] W[h, j, i] (W (NH,Dh,Dh) stored [out,in] per head).
static void mn__slstm_blockdiag_forward(mn_real* out, size_t ldo, const mn_real* u, const mn_real* W, size_t N,
                                        size_t NH,
                                        size_t Dh) {
    size_t h, C = NH * Dh;
    for (h = 0; h < NH; h++) mn_gemm(0, 1, N, Dh, Dh, 1.0, u + h * Dh, C, W + h * Dh * Dh, Dh, 0.0, out + h * Dh, ldo);
}
static void mn__slstm_blockdiag_backward(mn_real* du, mn_real* dW, const mn_real* dout, size_t ldo, const mn_real* u,
                                         const mn_real* W, size_t N, size_t NH, size_t Dh) {
    size_t h, C = NH * Dh;
    for (h = 0; h < NH; h++) {
        mn_gemm(0, 0, N, Dh, Dh, 1.0, dout + h * Dh, ldo, W + h * Dh * Dh, Dh, 1.0, du + h * Dh, C);
        mn_gemm(1, 0, Dh, Dh, N, 1.0, dout + h * Dh, ldo, u + h * Dh, C, 1.0, dW + h * Dh * Dh, Dh);
    }
}
static void mn__slstm_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                    size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, NH = c->n_head, Dh = C / NH, i;
    mn__slstm_par P; mn__slstm_act A;
    mn__layer_point(m, l, m->params, mn__slstm_par_walk, &P);
    mn__slstm_act_layout(&A, acts, c, B, T);
    mn_shortconv_forward(A.xcp, in, P.conv, B, T, C, 4, 0);
    for (i = 0; i < N * C; i++) {
        A.xcp[i] += P.conv_bias[i % C];
        A.xc[i] = (mn_real)(A.xcp[i] * mn__sigmoid(A.xcp[i]));
    }
    mn__slstm_blockdiag_forward(A.x + 0 * C, 4 * C, A.xc, P.wi, N, NH, Dh);
    mn__slstm_blockdiag_forward(A.x + 1 * C, 4 * C, A.xc, P.wf, N, NH, Dh);
    mn__slstm_blockdiag_forward(A.x + 2 * C, 4 * C, in, P.wz, N, NH, Dh);
    mn__slstm_blockdiag_forward(A.x + 3 * C, 4 * C, in, P.wo, N, NH, Dh);
    mn_slstm_forward(A.y, A.c, A.n, A.m, A.x, P.R, P.b, NULL, NULL, NULL, NULL, B, T, NH, Dh, A.work);
    mn_rmsnorm_forward(out, A.rs, A.y, P.norm, N * NH, Dh, c->norm_eps);
}
static void mn__slstm_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                     mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, NH = c->n_head, Dh = C / NH, i;
    mn__slstm_par P, dP; mn__slstm_act A, dA;
    mn__layer_point(m, l, m->params, mn__slstm_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__slstm_par_walk, &dP);
    mn__slstm_act_layout(&A, acts, c, B, T);
    mn__slstm_act_layout(&dA, dacts, c, B, T);
    mn_rmsnorm_backward(dA.y, dP.norm, dout, A.rs, A.y, P.norm, N * NH, Dh);
    mn_slstm_backward(dA.x, dP.R, dP.b, NULL, NULL, NULL, dA.y, A.y, A.c, A.n, A.m, A.x, P.R, P.b, NULL, NULL, NULL,
                      NULL,
                      B, T, NH, Dh, dA.work);
    mn__slstm_blockdiag_backward(dA.xc, dP.wi, dA.x + 0 * C, 4 * C, A.xc, P.wi, N, NH, Dh);
    mn__slstm_blockdiag_backward(dA.xc, dP.wf, dA.x + 1 * C, 4 * C, A.xc, P.wf, N, NH, Dh);
    mn__slstm_blockdiag_backward(din, dP.wz, dA.x + 2 * C, 4 * C, in, P.wz, N, NH, Dh);
    mn__slstm_blockdiag_backward(din, dP.wo, dA.x + 3 * C, 4 * C, in, P.wo, N, NH, Dh);
    for (i = 0; i < N * C; i++) {    // forward: xc = silu(xcp), xcp = conv(x) + b
        double a = A.xcp[i], sg = mn__sigmoid(a);
        dA.xcp[i] += (mn_real)(dA.xc[i] * sg * (1.0 + a * (1.0 - sg)));
        dP.conv_bias[i % C] += dA.xcp[i];
    }
    mn_shortconv_backward(din, dP.conv, dA.xcp, in, P.conv, B, T, C, 4, 0);
}
static size_t mn__slstm_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__slstm_state t, *a = p ? (mn__slstm_state*)p : &t;
    size_t C = c->d_model, off = 0;
    MN__PIECE(conv, 3 * C); MN__PIECE(y, C); MN__PIECE(c, C); MN__PIECE(n, C); MN__PIECE(m, C);
    return off;
}
static size_t mn__slstm_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__slstm_temp t, *a = p ? (mn__slstm_temp*)p : &t;
    size_t C = c->d_model, off = 0;
    MN__PIECE(xc, C); MN__PIECE(x, 4 * C); MN__PIECE(rs, c->n_head);
    MN__PIECE(work, mn_slstm_work_size(1, c->n_head, C / c->n_head));
    return off;
}
static void mn__slstm_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* temp, const mn_real* in,
                                 size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, NH = c->n_head, Dh = C / NH, i;
    mn__slstm_par P; mn__slstm_state S; mn__slstm_temp X;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__slstm_par_walk, &P);
    mn__slstm_state_layout(&S, state, c);
    mn__slstm_temp_layout(&X, temp, c);
    mn_shortconv_step(X.xc, S.conv, in, P.conv, C, 4, 0);
    for (i = 0; i < C; i++) { double a = X.xc[i] + P.conv_bias[i]; X.xc[i] = (mn_real)(a * mn__sigmoid(a)); }
    mn__slstm_blockdiag_forward(X.x + 0 * C, 4 * C, X.xc, P.wi, 1, NH, Dh);
    mn__slstm_blockdiag_forward(X.x + 1 * C, 4 * C, X.xc, P.wf, 1, NH, Dh);
    mn__slstm_blockdiag_forward(X.x + 2 * C, 4 * C, in, P.wz, 1, NH, Dh);
    mn__slstm_blockdiag_forward(X.x + 3 * C, 4 * C, in, P.wo, 1, NH, Dh);
    mn_slstm_step(S.y, S.c, S.n, S.m, X.x, P.R, P.b, 1, NH, Dh, X.work);
    mn_rmsnorm_forward(out, X.rs, S.y, P.norm, NH, Dh, c->norm_eps);
}
static double mn__slstm_layer_flops(const mn_config* c, size_t T) {
    MN_UNUSED(T);
    // 4 input and 4 recurrent block-diagonal products
    return 2.0 * 8.0 * (double)c->d_model * ((double)c->d_model / (double)c->n_head);
}

// >>mesa
// defines: mn_mesa_work_size, mn_mesa_step(_warm, _woodbury), mn_mesa_{forward,backward}_recurrent,
//          mn_mesa_{forward,backward}; the layer "mesa"
// The Mesa layer's op (von Oswald et al. 2025, eq. 7-8; fla ops/mesa_net). Per batch b and head h:
//     H_t = gamma_t H_{t-1} + beta_t k_t k_t^T         (Dk x Dk, "h_kk")      gamma_t = exp(g_t)
//     S_t = gamma_t S_{t-1} + beta_t k_t v_t^T         (Dk x Dv, "h_kv")
//     x_t = (H_t + diag(lambda))^-1 q_t                (the locally optimal read-out: a ridge regression)
//     o_t = S_t^T x_t
// q,k (B,T,H,Dk); v,out (B,T,H,Dv); g = log gamma <= 0 and beta (B,T,H); lambda (H,Dk) > 0.
// x_t solves the SPD system A_t x = q_t with conjugate gradients (fixed count in training, the
// paper's relative-residual stop ||r|| <= eps ||r0|| at inference) or exactly by Cholesky. The
// backward differentiates the solution implicitly (never unrolls CG): it treats x_t as the exact
// A_t^-1 q_t, so dL/dq_t = A_t^-1 (S_t do_t) is one adjoint solve per token with the same solver (the
// full derivation is above mn_mesa_backward_recurrent; paper App. D).
// Rectangular heads (Dv != Dk) work everywhere. States are in/out: non-NULL hkk (B,H,Dk,Dk) and
// hkv (B,H,Dk,Dv) give the initial states and receive the final ones.
// fla compatibility (opts.fla = 1): fla's naive/Triton CG adds 1e-5 to the alpha and CG-beta
// denominators. That sets an accuracy floor: once p.Ap is small the 1e-5 damps every step, and CG
// stalls at an error of about 1e-4 to 1e-3 for unit-scale q however many steps it takes (measured in
// double with Dk = 4: 1.6e-3 after 4 steps, 4e-4 after 30, where textbook CG is exact after 4).
// mesa_cg_it*.vec and mesa_decode.vec hold that arithmetic. Without it the iteration is textbook CG
// and converges to the exact solve.
// Warm starts at decode (opts.warm, the paper's §6 proposal): CG on A_t starts from the same head's previous
// solution x_{t-1} = A_{t-1}^-1 q_{t-1}, plain, scaled or blended with the Jacobi guess (mn__mesa_warm). It is a
// good start only when q_t and A_t change little from one token to the next. In a small byte-level MesaNet
// trained here consecutive queries are nearly orthogonal (mean cosine 0.1-0.4) and gamma is 0.4-0.7, so
// x_{t-1} starts further from x_t than x0 = 0 does, and only the blend comes level with the Jacobi start, at one
// more product with A (results/mesa_warm.md, bench_mesa section 6). What short memories do make good is a start
// from the recent keys: mn_mesa_step_woodbury solves the last r tokens' part of H_t exactly (Woodbury, r x r).
//
// Why this is the "locally optimal" layer: x_t = A_t^-1 q_t makes o_t = Phi_t q_t with Phi_t the
// minimiser of 1/2 sum_{s<=t} zeta_ts beta_s ||v_s - Phi k_s||^2 + 1/2 Tr(Phi Lambda Phi^T),
// zeta_ts = prod_{r=s+1..t} gamma_r (reference/mesa_oracle.h solves exactly that problem directly
// and tests/test_mesa.c checks the two agree). Reading order of this section:
//   1. mn__mesa_solve / mn__mesa_token: one system, CG or Cholesky; the step and the recurrent
//      forward are loops over it;
//   2. mn_mesa_backward_recurrent: the implicit backward written per token (the teaching version);
//   3. the chunkwise form: mn__mesa_chunk_decay (the C x C decay matrix M), mn__mesa_chunk_apply
//      (A(P) in three matmuls), mn__mesa_chunk_cg (batched CG), mn_mesa_forward, and
//      mn_mesa_backward (its passes B0-B5 are defined above it), each tested against 1. and 2.

static const mn_mesa_opts* mn__mesa_opts(const mn_mesa_opts* o, mn_mesa_opts* tmp) {
    if (o) *tmp = *o; else memset(tmp, 0, sizeof(*tmp));
    if (tmp->cg_iters == 0) tmp->cg_iters = 30;
    if (tmp->chunk == 0) tmp->chunk = 64;
    return tmp;
}
// the workspace layouts of the forms: per head, the recurrent forward and step, the recurrent backward,
// the chunkwise forward and backward
enum { MN__MESA_RECURRENT, MN__MESA_RECURRENT_BWD, MN__MESA_CHUNK };
static size_t mn__mesa_slot(int form, size_t T, size_t K, size_t V, size_t C) {
    size_t NC = (T + C - 1) / C;
    if (form == MN__MESA_RECURRENT) return 2 * K * K + K * V + 8 * K;
    if (form == MN__MESA_RECURRENT_BWD) return T * (K * K + K * V) + 2 * K * K + K * V + 10 * K + V;
    // chunk: per-chunk states (and state gradients), plus one chunk's scratch
    return (2 * NC + 1) * (K * K + K * V) + 6 * C * C + 10 * C * K + 3 * C * V + 12 * C + T * K;
}
// Elements of workspace a form needs for B*H heads (the ops never allocate).
static size_t mn__mesa_work(int form, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o) {
    mn_mesa_opts t; const mn_mesa_opts* op = mn__mesa_opts(o, &t);
    return B * H * mn__mesa_slot(form, T, Dk, Dv, op->chunk);
}
MNDEF size_t mn_mesa_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o) {
    return mn__mesa_work(MN__MESA_CHUNK, B, T, H, Dk, Dv, o);
}
// the recurrent backward's layout is the largest of the three recurrent ones (it adds T saved states)
MNDEF size_t mn_mesa_work_size_recurrent(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o) {
    return mn__mesa_work(MN__MESA_RECURRENT_BWD, B, T, H, Dk, Dv, o);
}

// The squared relative residual at which textbook CG stops: the tolerance, or the element type's
// precision (||r|| <= eps_machine ||r0||) when the count is fixed.
static double mn__cg_stop(const mn_mesa_opts* o) {
    double em = sizeof(mn_real) == 4 ? 1.1920929e-07 : 2.220446049250313e-16;
    return o->cg_tol > 0 ? o->cg_tol * o->cg_tol : em * em;
}
// y = A u with A = Hm + diag(lamb), in double rounded to mn_real; returns u.A u (the energy product).
static double mn__mesa_apply(mn_real* y, const mn_real* Hm, const mn_real* lamb, const mn_real* u, size_t K) {
    size_t i, p;
    double uy = 0;
    for (i = 0; i < K; i++) {
        double a = (double)lamb[i] * u[i];
        for (p = 0; p < K; p++) a += (double)Hm[i * K + p] * u[p];
        y[i] = (mn_real)a;
        uy += a * u[i];
    }
    return uy;
}
// The warm start of CG (opts.warm) from prev = x_{t-1} (may alias x): x0 into x, r0 = rhs - A x0 into r; u, w
// scratch (K). The coefficients minimise what CG itself minimises, the error's A-norm: with e = x0 - A^-1 rhs,
// ||e||_A^2 = x0.A x0 - 2 x0.rhs + const. On the line c x_{t-1} (SCALED) the least is at c = x_{t-1}.rhs /
// x_{t-1}.A x_{t-1}; on the plane a x_{t-1} + b x_J (BLEND, x_J = rhs / diag A) at the (a, b) that solve the 2x2
// Galerkin system G (a, b) = (x_{t-1}.rhs, x_J.rhs), G the Gram matrix of x_{t-1} and x_J in A's inner product.
// Both contain x0 = 0, so neither starts worse than zero in that norm (nor BLEND than x_J). r0 comes from the
// products by linearity: one product with A for WARM and SCALED, as for the Jacobi start; two for BLEND.
static void mn__mesa_warm(mn_real* x, mn_real* r, mn_real* u, mn_real* w, const mn_real* prev, const mn_real* Hm,
                          const mn_real* lamb, const mn_real* rhs, size_t K, int mode) {
    size_t i;
    double a = 1, b = 0, pr = 0, pu = mn__mesa_apply(u, Hm, lamb, prev, K);   // u = A x_{t-1}
    for (i = 0; i < K; i++) pr += (double)prev[i] * rhs[i];
    if (mode != MN_MESA_WARM) a = pu > 0 ? pr / pu : 0;                      // the line's optimum (and BLEND's
    if (mode == MN_MESA_WARM_BLEND) {                                         // fallback when G is singular)
        double jj, pj = 0, jp = 0, jr = 0, det, em = sizeof(mn_real) == 4 ? 1.1920929e-07 : 2.220446049250313e-16;
        for (i = 0; i < K; i++) r[i] = (mn_real)(rhs[i] / ((double)Hm[i * K + i] + lamb[i]));   // x_J, in r for now
        jj = mn__mesa_apply(w, Hm, lamb, r, K);                                // w = A x_J
        for (i = 0; i < K; i++) {
            pj += (double)prev[i] * w[i]; jp += (double)r[i] * u[i]; jr += (double)r[i] * rhs[i];
        }
        pj = 0.5 * (pj + jp);                    // G is symmetric; the two roundings of its off-diagonal averaged
        det = pu * jj - pj * pj;                 // >= 0 (Cauchy-Schwarz); near 0 when x_J and x_{t-1} are parallel
        if (det > 64 * em * pu * jj) { a = (pr * jj - pj * jr) / det; b = (pu * jr - pj * pr) / det; }
    }
    for (i = 0; i < K; i++) {
        double xj = mode == MN_MESA_WARM_BLEND ? (double)r[i] : 0, wj = mode == MN_MESA_WARM_BLEND ? (double)w[i] : 0;
        x[i] = (mn_real)(a * prev[i] + b * xj);
        r[i] = (mn_real)(rhs[i] - a * u[i] - b * wj);
    }
}
// Solves (Hm + diag(lamb)) x = rhs, Hm (K,K) symmetric PSD. Returns the CG iterations taken.
// CG (Hestenes-Stiefel) on A = Hm + diag(lamb): from x0 (0, the Jacobi guess rhs / diag(A), or with opts.warm
// and prev (K, may alias x; NULL: none) the warm start above), r = rhs - A x0, p = r, delta = r.r; each step
// alpha = delta / p.Ap, x += alpha p, r -= alpha Ap, delta' = r.r, p = r + (delta' / delta) p (fla: 1e-5 added
// to both denominators). It runs cg_iters steps, ending early (not with fla) once ||r|| <= cg_tol ||r0||
// (||rhs|| with opts.warm), or at the element type's precision when cg_tol is 0. Exact: Cholesky A = L L^T, two
// triangular solves. work: K*K + 3K.
static int mn__mesa_solve(mn_real* x, const mn_real* prev, const mn_real* Hm, const mn_real* lamb, const mn_real* rhs,
                          size_t K, const mn_mesa_opts* o, mn_real* work) {
    size_t i, j, p;
    if (o->cg_iters < 0) { memcpy(x, rhs, K * sizeof(mn_real)); return 0; }   // no solve: GLA read-out
    if (o->solver == MN_MESA_EXACT) {
        mn_real* L = work;
        for (j = 0; j < K; j++) {                        // column j of L
            double d = (double)Hm[j * K + j] + lamb[j];
            for (p = 0; p < j; p++) d -= (double)L[j * K + p] * L[j * K + p];
            d = sqrt(d > 0 ? d : 1e-300);
            L[j * K + j] = (mn_real)d;
            for (i = j + 1; i < K; i++) {
                double a = Hm[i * K + j];
                for (p = 0; p < j; p++) a -= (double)L[i * K + p] * L[j * K + p];
                L[i * K + j] = (mn_real)(a / d);
            }
        }
        for (i = 0; i < K; i++) {                        // L y = rhs
            double a = rhs[i];
            for (p = 0; p < i; p++) a -= (double)L[i * K + p] * x[p];
            x[i] = (mn_real)(a / L[i * K + i]);
        }
        for (i = K; i-- > 0;) {                          // L^T x = y
            double a = x[i];
            for (p = i + 1; p < K; p++) a -= (double)L[p * K + i] * x[p];
            x[i] = (mn_real)(a / L[i * K + i]);
        }
        return 0;
    }
    {
        mn_real *r = work, *pp = r + K, *Ap = pp + K;
        double delta = 0, delta0, eps = o->fla ? 1e-5 : 0.0;
        int it;
        if (o->warm && prev) {                           // initial guess from x_{t-1}; p = r
            mn__mesa_warm(x, r, pp, Ap, prev, Hm, lamb, rhs, K, o->warm);
            for (i = 0; i < K; i++) { pp[i] = r[i]; delta += (double)r[i] * r[i]; }
        } else {
            for (i = 0; i < K; i++)                      // initial guess: 0 or Jacobi
                x[i] = o->jacobi ? (mn_real)(rhs[i] / ((double)Hm[i * K + i] + lamb[i])) : (mn_real)0;
            for (i = 0; i < K; i++) {                    // r = rhs - A x ; p = r
                double a = rhs[i];
                if (o->jacobi) {
                    for (p = 0; p < K; p++) a -= (double)Hm[i * K + p] * x[p];
                    a -= (double)lamb[i] * x[i];
                }
                r[i] = pp[i] = (mn_real)a;
                delta += a * a;
            }
        }
        delta0 = delta;
        if (o->warm) for (delta0 = 0, i = 0; i < K; i++) delta0 += (double)rhs[i] * rhs[i];   // ||r0|| at x0 = 0
        for (it = 0; it < o->cg_iters; it++) {
            double pAp = 0, alpha, dnew = 0;
            // stop at the tolerance, or (fixed count) once ||r|| reaches the element type's precision:
            // further steps change nothing but would run on denormals, many times slower
            if (!o->fla && delta <= mn__cg_stop(o) * delta0) break;
            for (i = 0; i < K; i++) {                    // Ap = A p
                double a = (double)lamb[i] * pp[i];
                for (p = 0; p < K; p++) a += (double)Hm[i * K + p] * pp[p];
                Ap[i] = (mn_real)a;
                pAp += a * pp[i];
            }
            if (!o->fla && !(pAp > 0)) break;     // converged below the element type's resolution
            alpha = delta / (pAp + eps);
            for (i = 0; i < K; i++) {
                x[i] += (mn_real)(alpha * pp[i]);
                r[i] -= (mn_real)(alpha * Ap[i]);
                dnew += (double)r[i] * r[i];
            }
            for (i = 0; i < K; i++) pp[i] = (mn_real)(r[i] + dnew / (delta + eps) * pp[i]);
            delta = dnew;
        }
        return it;
    }
}

// One token of one head: state update, solve, read-out. Hm (K,K), Sm (K,V); x (K) receives the
// solve; prev (K, may alias x) the head's previous solution for opts.warm, or NULL; work K*K + 3K.
static int mn__mesa_token(mn_real* out, mn_real* x, const mn_real* prev, mn_real* Hm, mn_real* Sm, const mn_real* q,
                          const mn_real* k, const mn_real* v, double g, double beta, const mn_real* lamb, size_t K,
                          size_t V, const mn_mesa_opts* o, mn_real* work) {
    size_t i, j; int it;
    double gam = exp(g);
    for (i = 0; i < K; i++) {
        for (j = 0; j < K; j++) Hm[i * K + j] = (mn_real)(gam * Hm[i * K + j] + beta * k[i] * k[j]);
        for (j = 0; j < V; j++) Sm[i * V + j] = (mn_real)(gam * Sm[i * V + j] + beta * k[i] * v[j]);
    }
    it = mn__mesa_solve(x, prev, Hm, lamb, q, K, o, work);
    for (j = 0; j < V; j++) {
        double a = 0;
        for (i = 0; i < K; i++) a += (double)Sm[i * V + j] * x[i];
        out[j] = (mn_real)a;
    }
    return it;
}

// Generation: one token for all H heads. q,k (H,Dk); v,out (H,Dv); g, beta (H); hkk (H,Dk,Dk),
// hkv (H,Dk,Dv) in/out; iters (H) receives the CG iterations per head (may be NULL): with
// opts.cg_tol > 0 this is the paper's per-token dynamic stopping. work: mn_mesa_work_size_recurrent(1, 1, H, ...).
// mn_mesa_step_warm also keeps the solutions: xs (H,Dk) holds each head's x_{t-1} on entry and x_t on return, the
// start of the next token's CG under opts.warm. A zero row means none (a new sequence: mn_state_reset zeroes the
// state), and that head starts as opts.jacobi says; the solution itself is never 0, as q_t != 0. mn_mesa_step is
// mn_mesa_step_warm with no previous solutions (xs = NULL).
MNDEF void mn_mesa_step_warm(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q,
                             const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
                             const mn_real* lamb, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o,
                             mn_real* work) {
    mn_mesa_opts t; const mn_mesa_opts* op = mn__mesa_opts(o, &t);
    size_t h, i, slot = mn__mesa_slot(MN__MESA_RECURRENT, 1, Dk, Dv, op->chunk);
    for (h = 0; h < H; h++) {
        mn_real *w = work + h * slot, *x = xs ? xs + h * Dk : w;
        int have = 0, it;
        if (xs && op->warm) for (i = 0; i < Dk; i++) have |= x[i] != 0;
        it = mn__mesa_token(out + h * Dv, x, have ? x : NULL, hkk + h * Dk * Dk, hkv + h * Dk * Dv, q + h * Dk,
                            k + h * Dk, v + h * Dv, g[h], beta[h], lamb + h * Dk, Dk, Dv, op, w + Dk);
        if (iters) iters[h] = it;
    }
}
MNDEF void mn_mesa_step(mn_real* out, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q, const mn_real* k,
                        const mn_real* v, const mn_real* g, const mn_real* beta, const mn_real* lamb, size_t H,
                        size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work) {
    mn_mesa_step_warm(out, NULL, iters, hkk, hkv, q, k, v, g, beta, lamb, H, Dk, Dv, o, work);
}

// ---- the windowed-Woodbury start (mn_mesa_step_woodbury; the layer's cfg.mesa_cg_warm 5 and 6) ----
// Unrolled, H_t = sum_{j<=t} w_j k_j k_j^T with w_j = beta_j prod_{i=j+1..t} gamma_i: a key's weight shrinks by
// every later gate. With short memories (gamma ~ 0.5-0.7 in the models of results/mesa_warm.md) the last r tokens
// hold nearly all of H_t (an older key is down by at least the window's product of gates, 0.5^8 = 0.004 at r = 8),
// so the exact solve of that part alone is nearly x_t. By the Woodbury identity (Lambda diagonal) it costs an
// r x r factorisation, not a K x K one:
//   x0 = (Lambda + K_r^T W K_r)^-1 q = z - Lambda^-1 K_r^T (W^-1 + K_r Lambda^-1 K_r^T)^-1 K_r z,   z = Lambda^-1 q,
// K_r (r,K) the window's keys, W = diag(w). CG then starts at x0 as it is (opts.warm = MN_MESA_WARM: r_0 = q - A x0,
// one product with A, as the Jacobi start's) and stops at ||r|| <= cg_tol ||q_t||, the other warm starts' demand.
// Where the gates are near 1 the window misses much of H_t and x0 is a poorer (still valid) start.
// Cost per head and token, the Gram matrix K_r Lambda^-1 K_r^T recomputed each time (Lambda is constant, so it could
// be updated incrementally at r K; it is not): r(r+1)/2 K multiply-adds for it, 3 r K for Lambda^-1, K_r z and the
// correction, r^3/6 + r^2 for the Cholesky and its two solves; against K^2 for one product with A
// (bench_mesa section 6 counts it so).
// The ring of one head, r*(K+2)+1 elements: keys (r,K), then betas (r), log-gates (r), then the count n <= r. The
// window is rows 0..n-1, oldest first and newest last; once the ring is full a new token shifts the rows up by one
// (r K copies: cheaper than the Gram matrix, and the window reads in time order). All zeros: an empty window.
#define MN__MESA_WINDOW_MAX 32   // the longest window (its r x r double scratch lives on the stack)
static size_t mn__mesa_ring_slot(size_t K, size_t r) { return r * (K + 2) + 1; }
static void mn__mesa_ring_push(mn_real* ring, const mn_real* k, double beta, double g, size_t K, size_t r) {
    mn_real *keys = ring, *bet = ring + r * K, *lg = bet + r, *cnt = lg + r;   // (r,K), (r), (r), (1)
    size_t n = (size_t)cnt[0];
    if (n == r) {                                        // full: drop the oldest
        memmove(keys, keys + K, (r - 1) * K * sizeof(mn_real));
        memmove(bet, bet + 1, (r - 1) * sizeof(mn_real));
        memmove(lg, lg + 1, (r - 1) * sizeof(mn_real));
        n--;
    }
    memcpy(keys + n * K, k, K * sizeof(mn_real));
    bet[n] = (mn_real)beta; lg[n] = (mn_real)g;
    cnt[0] = (mn_real)(n + 1);
}
// x0 (K) = the window's exact solve above, for rhs q (K) and lamb (K). Returns 0, x0 unspecified, when there is no
// usable window (empty, every weight 0) or the r x r matrix does not factor (it is SPD, so only through rounding).
static int mn__mesa_woodbury(mn_real* x0, const mn_real* ring, const mn_real* lamb, const mn_real* q, size_t K,
                             size_t r) {
    const mn_real *keys = ring, *bet = ring + r * K, *lg = bet + r;
    size_t n = (size_t)ring[r * (K + 2)], j, a, b, p, m = 0, use[MN__MESA_WINDOW_MAX];
    double G[MN__MESA_WINDOW_MAX * MN__MESA_WINDOW_MAX], c[MN__MESA_WINDOW_MAX], iw[MN__MESA_WINDOW_MAX], acc = 0;
    MN_ASSERT(n <= r && r <= MN__MESA_WINDOW_MAX);
    // weights newest to oldest: w_j = beta_j exp(sum of the later log-gates); a weight that underflows adds nothing
    // to H_t and would put an infinite 1/w_j into G, so that key is left out (rows kept in time order)
    for (j = n; j-- > 0;) {
        double w = (double)bet[j] * exp(acc);
        acc += (double)lg[j];
        if (w > 1e-300) { use[m] = j; iw[m++] = 1.0 / w; }
    }
    if (m == 0) return 0;
    for (p = 0; p < K; p++) x0[p] = (mn_real)(1.0 / lamb[p]);   // Lambda^-1, held in x0 until the correction
    for (a = 0; a < m; a++) {                            // G = W^-1 + K_r Lambda^-1 K_r^T (lower half), c = K_r z
        const mn_real* ka = keys + use[a] * K;
        double y = 0;
        for (p = 0; p < K; p++) y += (double)ka[p] * x0[p] * q[p];
        c[a] = y;
        for (b = 0; b <= a; b++) {
            const mn_real* kb = keys + use[b] * K;
            double s = 0;
            for (p = 0; p < K; p++) s += (double)ka[p] * kb[p] * x0[p];
            G[a * m + b] = s + (a == b ? iw[a] : 0.0);
        }
    }
    for (b = 0; b < m; b++) {                            // Cholesky G = L L^T in place (lower), in double
        double d = G[b * m + b];
        for (p = 0; p < b; p++) d -= G[b * m + p] * G[b * m + p];
        if (!(d > 0)) return 0;
        d = sqrt(d); G[b * m + b] = d;
        for (a = b + 1; a < m; a++) {
            double s = G[a * m + b];
            for (p = 0; p < b; p++) s -= G[a * m + p] * G[b * m + p];
            G[a * m + b] = s / d;
        }
    }
    for (a = 0; a < m; a++) {                            // L u = c, then L^T c = u: c = G^-1 K_r z
        double s = c[a];
        for (p = 0; p < a; p++) s -= G[a * m + p] * c[p];
        c[a] = s / G[a * m + a];
    }
    for (a = m; a-- > 0;) {
        double s = c[a];
        for (p = a + 1; p < m; p++) s -= G[p * m + a] * c[p];
        c[a] = s / G[a * m + a];
    }
    for (p = 0; p < K; p++) {                            // x0 = Lambda^-1 (q - K_r^T c)
        double s = q[p];
        for (a = 0; a < m; a++) s -= (double)keys[use[a] * K + p] * c[a];
        x0[p] = (mn_real)(s / lamb[p]);
    }
    return 1;
}
// Generation as mn_mesa_step, each head's CG started at the window's exact solve above: per head the token's
// (k_t, beta_t, g_t) enters its ring (ring (H, r*(Dk+2)+1) in/out; a zero ring starts a sequence), x0 is formed
// from the window (which then ends with token t), and CG runs from it to ||r|| <= cg_tol ||q_t|| (opts.warm and
// opts.jacobi are set here: MN_MESA_WARM from x0; the Jacobi guess where there is no x0, or r = 0, ring unused).
// xs (H,Dk) receives the solutions x_t (may be NULL); iters (H) the CG steps (may be NULL); r <= 32. work:
// mn_mesa_work_size_recurrent(1, 1, H, ...), as the step.
MNDEF void mn_mesa_step_woodbury(mn_real* out, mn_real* xs, mn_real* ring, int* iters, mn_real* hkk, mn_real* hkv,
                                 const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
                                 const mn_real* beta, const mn_real* lamb, size_t H, size_t Dk, size_t Dv, size_t r,
                                 const mn_mesa_opts* o, mn_real* work) {
    mn_mesa_opts t, ow; const mn_mesa_opts* op = mn__mesa_opts(o, &t);
    size_t h, slot = mn__mesa_slot(MN__MESA_RECURRENT, 1, Dk, Dv, op->chunk);
    MN_ASSERT(r <= MN__MESA_WINDOW_MAX);
    ow = *op; ow.warm = MN_MESA_WARM; ow.jacobi = 1;
    for (h = 0; h < H; h++) {
        mn_real *w = work + h * slot, *x = xs ? xs + h * Dk : w, *x0 = w + Dk;   // x, x0 (Dk); then the solve's
        int have = 0, it;                                                         // K*K + 3K
        if (r) {
            mn_real* rg = ring + h * mn__mesa_ring_slot(Dk, r);
            mn__mesa_ring_push(rg, k + h * Dk, beta[h], g[h], Dk, r);
            have = mn__mesa_woodbury(x0, rg, lamb + h * Dk, q + h * Dk, Dk, r);
        }
        it = mn__mesa_token(out + h * Dv, x, have ? x0 : NULL, hkk + h * Dk * Dk, hkv + h * Dk * Dv, q + h * Dk,
                            k + h * Dk, v + h * Dv, g[h], beta[h], lamb + h * Dk, Dk, Dv, &ow, w + 2 * Dk);
        if (iters) iters[h] = it;
    }
}

// Recurrent form: the step run over t for every (b,h) (parallel over (b,h)). xs (B,T,H,Dk)
// receives the solves x_t (saved for the backward; may be NULL), iters (B,T,H) the CG
// iterations (may be NULL). Cost O(T (Dk^2 + Dk Dv + n_cg Dk^2)) per head.
MNDEF void mn_mesa_forward_recurrent(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv,
                                     const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
                                     const mn_real* beta, const mn_real* lamb, size_t B, size_t T, size_t H, size_t Dk,
                                     size_t Dv, const mn_mesa_opts* o, mn_real* work) {
    mn_mesa_opts tmp; const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, slot = mn__mesa_slot(MN__MESA_RECURRENT, T, K, V, op->chunk);
    long long bh;
    MN__OMP_FOR
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, t;
        mn_real *Hm = work + (size_t)bh * slot, *Sm = Hm + K * K, *x = Sm + K * V, *w = x + K;
        if (hkk) memcpy(Hm, hkk + (size_t)bh * K * K, K * K * sizeof(mn_real));
        else memset(Hm, 0, K * K * sizeof(mn_real));
        if (hkv) memcpy(Sm, hkv + (size_t)bh * K * V, K * V * sizeof(mn_real));
        else memset(Sm, 0, K * V * sizeof(mn_real));
        for (t = 0; t < T; t++) {
            size_t r = (b * T + t) * H + h;
            // x holds x_{t-1} (the warm start's guess) from t = 1 on
            int it = mn__mesa_token(out + r * V, x, t ? x : NULL, Hm, Sm, q + r * K, k + r * K, v + r * V, g[r],
                                    beta[r], lamb + h * K, K, V, op, w);
            if (xs) memcpy(xs + r * K, x, K * sizeof(mn_real));
            if (iters) iters[r] = it;
        }
        if (hkk) memcpy(hkk + (size_t)bh * K * K, Hm, K * K * sizeof(mn_real));
        if (hkv) memcpy(hkv + (size_t)bh * K * V, Sm, K * V * sizeof(mn_real));
    }
}

// Backward of the recurrent form by implicit differentiation (paper App. D). With A_t = H_t + diag(lambda)
// symmetric and x_t = A_t^-1 q_t: dx_t = A_t^-1 (dq_t - dA_t x_t), so a loss gradient xbar_t on x_t gives
// dL/dq_t = A_t^-1 xbar_t and dL/dA_t = -dq_t x_t^T; o_t = S_t^T x_t gives xbar_t = S_t do_t and
// dL/dS_t += x_t do_t^T. The states then take the gradients back in time as any linear recurrence:
//   xbar_t = S_t do_t ;  dq_t = A_t^-1 xbar_t (adjoint solve, same solver) ;  dlambda -= dq_t * x_t
//   dS_t = x_t do_t^T + gamma_{t+1} dS_{t+1} ;  dH_t = -dq_t x_t^T + gamma_{t+1} dH_{t+1}
//   dv_t = beta_t dS_t^T k_t ; dk_t = beta_t (dS_t v_t + (dH_t + dH_t^T) k_t)
//   dbeta_t = k_t^T dS_t v_t + k_t^T dH_t k_t ; dg_t = gamma_t (<S_{t-1},dS_t> + <H_{t-1},dH_t>)
// and the initial states get gamma_0 dS_0, gamma_0 dH_0 (dhkk0 rows index dq, as torch's autograd).
// dhkk, dhkv (B,H,..) are the upstream gradients of the final states (NULL = 0); hkk0, hkv0 the
// initial states used in the forward (NULL = 0); xs the forward's solves. The states H_t, S_t
// are recomputed forward and kept for every t: work = T (Dk^2 + Dk Dv) per head (the teaching
// form; the chunkwise backward keeps one state per chunk). Parallel over heads (dlambda per head).
MNDEF void mn_mesa_backward_recurrent(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dbeta,
                                      mn_real* dlamb, mn_real* dhkk0, mn_real* dhkv0, const mn_real* dout,
                                      const mn_real* dhkk, const mn_real* dhkv, const mn_real* xs, const mn_real* q,
                                      const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
                                      const mn_real* lamb, const mn_real* hkk0, const mn_real* hkv0, size_t B, size_t T,
                                      size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work) {
    mn_mesa_opts tmp; const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, KK = K * K, KV = K * V, slot = mn__mesa_slot(MN__MESA_RECURRENT_BWD, T, K, V, op->chunk);
    long long hh;
    MN_UNUSED(q);
    tmp.warm = MN_MESA_COLD;   // the adjoint systems have no previous solution to start from
    MN__OMP_FOR
    for (hh = 0; hh < (long long)H; hh++) {
        size_t h = (size_t)hh, b, t, i, j;
        mn_real* w0 = work + h * slot;
        mn_real *Hs = w0, *Ss = Hs + T * KK, *dH = Ss + T * KV, *dS = dH + KK, *xb = dS + KV, *dqt = xb + K,
                *sw = dqt + K;
        for (b = 0; b < B; b++) {
            size_t bh = b * H + h;
            // pass 1: recompute and keep H_t, S_t
            for (t = 0; t < T; t++) {
                size_t r = (b * T + t) * H + h;
                const mn_real *Hp = t ? Hs + (t - 1) * KK
                        : hkk0        ? hkk0 + bh * KK
                                      : NULL,
                              *Sp = t ? Ss + (t - 1) * KV
                        : hkv0        ? hkv0 + bh * KV
                                      : NULL;
                double gam = exp(g[r]), be = beta[r];
                for (i = 0; i < K; i++) {
                    for (j = 0; j < K; j++)
                        Hs[t * KK + i * K + j] = (mn_real)((Hp ? gam * Hp[i * K + j] : 0.0) +
                                                           be * k[r * K + i] * k[r * K + j]);
                    for (j = 0; j < V; j++)
                        Ss[t * KV + i * V + j] = (mn_real)((Sp ? gam * Sp[i * V + j] : 0.0) +
                                                           be * k[r * K + i] * v[r * V + j]);
                }
            }
            // pass 2: reverse time
            for (i = 0; i < KK; i++) dH[i] = dhkk ? dhkk[bh * KK + i] : 0;
            for (i = 0; i < KV; i++) dS[i] = dhkv ? dhkv[bh * KV + i] : 0;
            for (t = T; t-- > 0;) {
                size_t r = (b * T + t) * H + h;
                const mn_real *x = xs + r * K, *kt = k + r * K, *vt = v + r * V, *St = Ss + t * KV, *Ht = Hs + t * KK;
                const mn_real *Hp = t ? Hs + (t - 1) * KK
                        : hkk0        ? hkk0 + bh * KK
                                      : NULL,
                              *Sp = t ? Ss + (t - 1) * KV
                        : hkv0        ? hkv0 + bh * KV
                                      : NULL;
                double be = beta[r], gam = exp(g[r]), dbe = 0, dgg = 0;
                for (i = 0; i < K; i++) {                     // xbar = S_t do_t
                    double a = 0;
                    for (j = 0; j < V; j++) a += (double)St[i * V + j] * dout[r * V + j];
                    xb[i] = (mn_real)a;
                }
                mn__mesa_solve(dqt, NULL, Ht, lamb + h * K, xb, K, op, sw);   // adjoint: A_t symmetric
                for (i = 0; i < K; i++) {
                    dq[r * K + i] += dqt[i];
                    dlamb[h * K + i] -= dqt[i] * x[i];
                    for (j = 0; j < V; j++) dS[i * V + j] += x[i] * dout[r * V + j];
                    for (j = 0; j < K; j++) dH[i * K + j] -= dqt[i] * x[j];
                }
                // forward: S_t = gamma S_{t-1} + beta k v^T, H_t = gamma H_{t-1} + beta k k^T, so:
                for (j = 0; j < V; j++) {                     // dv = beta dS^T k
                    double a = 0;
                    for (i = 0; i < K; i++) a += (double)dS[i * V + j] * kt[i];
                    dv[r * V + j] += (mn_real)(be * a);
                }
                for (i = 0; i < K; i++) {                     // dk = beta (dS v + (dH + dH^T) k)
                    double a = 0, c = 0;
                    for (j = 0; j < V; j++) a += (double)dS[i * V + j] * vt[j];
                    for (j = 0; j < K; j++) c += ((double)dH[i * K + j] + dH[j * K + i]) * kt[j];
                    dk[r * K + i] += (mn_real)(be * (a + c));
                    dbe += kt[i] * a;
                    for (j = 0; j < K; j++) dbe += (double)kt[i] * dH[i * K + j] * kt[j];
                }
                dbeta[r] += (mn_real)dbe;
                for (i = 0; i < KK && Hp; i++) dgg += (double)Hp[i] * dH[i];
                for (i = 0; i < KV && Sp; i++) dgg += (double)Sp[i] * dS[i];
                dg[r] += (mn_real)(gam * dgg);
                for (i = 0; i < KK; i++) dH[i] = (mn_real)(gam * dH[i]);   // now the gradient of H_{t-1}
                for (i = 0; i < KV; i++) dS[i] = (mn_real)(gam * dS[i]);
            }
            if (dhkk0) for (i = 0; i < KK; i++) dhkk0[bh * KK + i] += dH[i];
            if (dhkv0) for (i = 0; i < KV; i++) dhkv0[bh * KV + i] += dS[i];
        }
    }
}

// ---- chunkwise form (training and prefill). Chunk n holds rows a = 0..Cn-1
// (t = nC + a; the last chunk may be shorter). With b_a = sum_{i<=a} g_{nC+i} (local cumsum):
//   Gam_a = exp(b_a), e_j = exp(b_last - b_j), M[a,j] = exp(b_a - b_j) beta_j for j <= a (else 0),
// and H_n, S_n the states at the chunk start, row a of the system matrix applied to P is
//   A(P) = ((P Kc^T) . M) Kc + diag(Gam) P H_n + P diag(lambda)      (three matmuls, never H_t itself)
// so one CG per row runs exactly the recurrent iterates; the output is in GLA form
//   O = ((X Kc^T) . M) Vc + diag(Gam) X S_n.

typedef struct mn__mesa_chunk {   // one chunk's decay bookkeeping
    size_t t0, Cn;                 // first time index, rows
    mn_real *bcum, *Gam, *inv, *e, *M,
            *Mp; // (C) each: b, exp(b), exp(-b), exp(b_last - b); (C,C) with beta, (C,C) without
    double GamC;                   // exp(b_last)
} mn__mesa_chunk;

static void mn__mesa_chunk_decay(mn__mesa_chunk* ch, size_t n, size_t b, size_t h, size_t T, size_t H, size_t C,
                                 const mn_real* g, const mn_real* beta) {
    size_t a, j; double acc = 0;
    ch->t0 = n * C; ch->Cn = T - ch->t0 < C ? T - ch->t0 : C;
    for (a = 0; a < ch->Cn; a++) {
        acc += g[(b * T + ch->t0 + a) * H + h];
        ch->bcum[a] = (mn_real)acc;
        ch->Gam[a] = (mn_real)exp(acc);
    }
    ch->GamC = exp(acc);
    // exp(b_a - b_j) = exp(b_a) exp(-b_j): 2C exponentials instead of C^2 while the chunk's total
    // decay |b_last| stays within 80 (both factors then fit a float); else one exp per entry.
    int split = fabs(acc) <= 80.0;
    for (a = 0; a < ch->Cn; a++) {
        ch->e[a] = (mn_real)exp(acc - ch->bcum[a]);
        ch->inv[a] = split ? (mn_real)exp(-(double)ch->bcum[a]) : 0;
    }
    for (a = 0; a < ch->Cn; a++) {
        mn_real *Mp = ch->Mp + a * C, *M = ch->M + a * C;
        for (j = 0; j <= a; j++) {
            Mp[j] = split ? ch->Gam[a] * ch->inv[j] : (mn_real)mn__exp(ch->bcum[a] - ch->bcum[j]);
            M[j] = Mp[j] * beta[(b * T + ch->t0 + j) * H + h];
        }
        for (; j < C; j++) Mp[j] = M[j] = 0;
    }
}

// AP (Cn,K) = A(P) for P (Cn,K); PK (C,C) and tmp (C,K) are scratch.
static void mn__mesa_chunk_apply(mn_real* AP, const mn_real* P, const mn_real* Kc, size_t ldk, const mn__mesa_chunk* ch,
                                 const mn_real* Hn, const mn_real* lamb, size_t C, size_t K, mn_real* PK,
                                 mn_real* tmp) {
    size_t a, j, Cn = ch->Cn;
    mn_gemm(0, 1, Cn, Cn, K, 1.0, P, K, Kc, ldk, 0.0, PK, C);
    for (a = 0; a < Cn; a++) for (j = 0; j < Cn; j++) PK[a * C + j] *= ch->M[a * C + j];
    mn_gemm(0, 0, Cn, K, Cn, 1.0, PK, C, Kc, ldk, 0.0, AP, K);
    mn_gemm(0, 0, Cn, K, K, 1.0, P, K, Hn, K, 0.0, tmp, K);
    for (a = 0; a < Cn; a++) {
        mn_real ga = ch->Gam[a], *ap = AP + a * K; const mn_real *t = tmp + a * K, *p = P + a * K;
        for (j = 0; j < K; j++) ap[j] += ga * t[j] + lamb[j] * p[j];
    }
}

// Batched CG on the Cn systems of one chunk, right-hand sides RHS (Cn rows, stride ldr): every
// row has its own alpha, delta and (with cg_tol) its own stopping point. X (Cn,K) out; iters (Cn)
// may be NULL. scratch: 4CK + C^2 + 3C.
static void mn__mesa_chunk_cg(mn_real* X, int* iters, const mn_real* RHS, size_t ldr, const mn_real* Kc, size_t ldk,
                              const mn__mesa_chunk* ch, const mn_real* Hn, const mn_real* lamb, size_t C, size_t K,
                              const mn_mesa_opts* o, mn_real* scratch) {
    size_t a, i, j, Cn = ch->Cn;
    mn_real *R = scratch, *P = R + C * K, *AP = P + C * K, *tmp = AP + C * K, *PK = tmp + C * K, *delta = PK + C * C,
            *delta0 = delta + C, *done = delta0 + C;
    double eps = o->fla ? 1e-5 : 0.0;
    int it;
    if (o->cg_iters < 0) {                                // no solve: x = q (GLA)
        for (a = 0; a < Cn; a++) memcpy(X + a * K, RHS + a * ldr, K * sizeof(mn_real));
        if (iters) for (a = 0; a < Cn; a++) iters[a] = 0;
        return;
    }
    for (a = 0; a < Cn; a++) {
        for (i = 0; i < K; i++) X[a * K + i] = 0;
        if (o->jacobi) {   // x0 = q / diag(H_t + lambda), diag(H_t) = Gam_a diag(H_n) + sum_j M[a,j] k_j^2
            for (i = 0; i < K; i++) {
                double d = (double)ch->Gam[a] * Hn[i * K + i] + lamb[i];
                for (j = 0; j <= a; j++) d += (double)ch->M[a * C + j] * Kc[j * ldk + i] * Kc[j * ldk + i];
                X[a * K + i] = (mn_real)(RHS[a * ldr + i] / d);
            }
        }
    }
    if (o->jacobi) mn__mesa_chunk_apply(AP, X, Kc, ldk, ch, Hn, lamb, C, K, PK, tmp);
    for (a = 0; a < Cn; a++) {
        double d = 0;
        for (i = 0; i < K; i++) {
            double r = RHS[a * ldr + i] - (o->jacobi ? AP[a * K + i] : 0);
            R[a * K + i] = P[a * K + i] = (mn_real)r;
            d += r * r;
        }
        delta[a] = delta0[a] = (mn_real)d; done[a] = 0;
        if (iters) iters[a] = 0;
    }
    for (it = 0; it < o->cg_iters; it++) {
        int active = 0;
        for (a = 0; a < Cn; a++) {
            if (!o->fla && !done[a] && delta[a] <= mn__cg_stop(o) * delta0[a]) done[a] = 1;   // as in mn__mesa_solve
            active |= !done[a];
        }
        if (!active) break;
        mn__mesa_chunk_apply(AP, P, Kc, ldk, ch, Hn, lamb, C, K, PK, tmp);
        for (a = 0; a < Cn; a++) {
            // the row's vectors in the element type (these loops vectorise); the scalars in double
            mn_real *MN__RESTRICT x = X + a * K, *MN__RESTRICT r = R + a * K, *MN__RESTRICT pp = P + a * K, al, cb, pAp,
                                  dnew;
            const mn_real* MN__RESTRICT ap = AP + a * K;
            double alpha;
            if (done[a]) continue;
            pAp = mn__dot(pp, ap, K);
            if (!o->fla && !(pAp > 0)) { done[a] = 1; continue; }   // converged below float resolution
            alpha = delta[a] / ((double)pAp + eps);
            al = (mn_real)alpha;
            for (i = 0; i < K; i++) { x[i] += al * pp[i]; r[i] -= al * ap[i]; }
            dnew = mn__dot(r, r, K);
            cb = (mn_real)(dnew / (delta[a] + eps));
            for (i = 0; i < K; i++) pp[i] = r[i] + cb * pp[i];
            delta[a] = dnew;
            if (iters) iters[a]++;
        }
    }
}

// Workspace of one (b,h) for the chunkwise form: states at every chunk start and the end,
// state gradients at every chunk end (backward), one chunk's scratch.
typedef struct mn__mesa_cw {
    mn_real *Hs, *Ss, *dHe, *dSe;           // (NC+1,K,K), (NC+1,K,V), (NC,K,K), (NC,K,V)
    mn__mesa_chunk ch;
    mn_real *X, *A1, *A2, *CK1, *CK2, *CV1, *CV2, *cg, *db, *dQ;   // dQ (T,K): the adjoint solves
} mn__mesa_cw;
static void mn__mesa_cw_layout(mn__mesa_cw* w, mn_real* base, size_t T, size_t K, size_t V, size_t C) {
    size_t NC = (T + C - 1) / C;
    w->Hs = base; w->Ss = w->Hs + (NC + 1) * K * K; w->dHe = w->Ss + (NC + 1) * K * V; w->dSe = w->dHe + NC * K * K;
    w->ch.bcum = w->dSe + NC * K * V; w->ch.Gam = w->ch.bcum + C; w->ch.e = w->ch.Gam + C; w->db = w->ch.e + C;
    w->ch.inv = w->db + C;
    w->ch.M = w->ch.inv + C;
    w->ch.Mp = w->ch.M + C * C;
    w->A1 = w->ch.Mp + C * C;
    w->A2 = w->A1 + C * C;
    w->X = w->A2 + C * C; w->CK1 = w->X + C * K; w->CK2 = w->CK1 + C * K;
    w->CV1 = w->CK2 + C * K; w->CV2 = w->CV1 + C * V; w->cg = w->CV2 + C * V;   // cg: 4CK + C^2 + 3C
    w->dQ = w->cg + 4 * C * K + C * C + 3 * C;
}

// State pass (sequential over chunks): H_{n+1} = GamC H_n + Kt^T Kc, S_{n+1} = GamC S_n + Kt^T Vc,
// Kt = diag(e . beta) Kc. Fills w->Hs, w->Ss for n = 0..NC.
static void mn__mesa_states(mn__mesa_cw* w, size_t b, size_t h, const mn_real* hkk0, const mn_real* hkv0,
                            const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta, size_t T,
                            size_t H, size_t K, size_t V, size_t C) {
    size_t NC = (T + C - 1) / C, n, a, i, bh = b * H + h;
    if (hkk0) memcpy(w->Hs, hkk0 + bh * K * K, K * K * sizeof(mn_real)); else memset(w->Hs, 0, K * K * sizeof(mn_real));
    if (hkv0) memcpy(w->Ss, hkv0 + bh * K * V, K * V * sizeof(mn_real)); else memset(w->Ss, 0, K * V * sizeof(mn_real));
    for (n = 0; n < NC; n++) {
        mn__mesa_chunk* ch = &w->ch;
        const mn_real* Kc = k + ((b * T + n * C) * H + h) * K;
        const mn_real* Vc = v + ((b * T + n * C) * H + h) * V;
        mn_real *Hn = w->Hs + n * K * K, *Sn = w->Ss + n * K * V, *Hn1 = Hn + K * K, *Sn1 = Sn + K * V;
        mn__mesa_chunk_decay(ch, n, b, h, T, H, C, g, beta);
        for (a = 0; a < ch->Cn; a++) {
            double s = (double)ch->e[a] * beta[(b * T + n * C + a) * H + h];
            for (i = 0; i < K; i++) w->CK1[a * K + i] = (mn_real)(s * Kc[a * H * K + i]);
        }
        for (i = 0; i < K * K; i++) Hn1[i] = (mn_real)(ch->GamC * Hn[i]);
        for (i = 0; i < K * V; i++) Sn1[i] = (mn_real)(ch->GamC * Sn[i]);
        mn_gemm(1, 0, K, K, ch->Cn, 1.0, w->CK1, K, Kc, H * K, 1.0, Hn1, K);
        mn_gemm(1, 0, K, V, ch->Cn, 1.0, w->CK1, K, Vc, H * V, 1.0, Sn1, V);
    }
}

// Chunkwise forward. Same contract as mn_mesa_forward_recurrent; opts.solver is ignored (always
// CG; use the recurrent form for the exact solve). Parallel over (b,h); chunk size opts.chunk.
// Cost per token and head, with n CG steps and chunk length C: 2 Dk (Dk + Dv) for the state pass,
// n (4 C Dk + 2 Dk^2) for CG, 2 C (Dk + Dv) + 2 Dk Dv for the output (mn_flops_per_token counts this).
// Memory: xs, Dk per token, is saved for the backward; work holds the chunk states and their
// gradients, about 2 (Dk^2 + Dk Dv) / C per token, one chunk's scratch and the adjoint solves (Dk).
MNDEF void mn_mesa_forward(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q,
                           const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
                           const mn_real* lamb, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                           const mn_mesa_opts* o, mn_real* work) {
    mn_mesa_opts tmp; const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, C = op->chunk, NC = (T + C - 1) / C, slot = mn__mesa_slot(MN__MESA_CHUNK, T, K, V, C);
    long long bh;
    MN__OMP_FOR
    for (bh = 0; bh < (long long)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H, n, a, j;
        mn__mesa_cw w;
        mn__mesa_cw_layout(&w, work + (size_t)bh * slot, T, K, V, C);
        mn__mesa_states(&w, b, h, hkk, hkv, k, v, g, beta, T, H, K, V, C);     // pass 1: states
        for (n = 0; n < NC; n++) {                                            // pass 2: CG + output, per chunk
            mn__mesa_chunk* ch = &w.ch;
            size_t r0 = (b * T + n * C) * H + h;
            const mn_real *Kc = k + r0 * K, *Vc = v + r0 * V, *Hn = w.Hs + n * K * K, *Sn = w.Ss + n * K * V;
            int itbuf[1024];                                                  // CG iterations per row
            MN_ASSERT(C <= 1024);
            mn__mesa_chunk_decay(ch, n, b, h, T, H, C, g, beta);
            mn__mesa_chunk_cg(w.X, iters ? itbuf : NULL, q + r0 * K, H * K, Kc, H * K, ch, Hn, lamb + h * K, C, K, op,
                              w.cg);
            // O = ((X Kc^T) . M) Vc + diag(Gam) X S_n
            mn_gemm(0, 1, ch->Cn, ch->Cn, K, 1.0, w.X, K, Kc, H * K, 0.0, w.A1, C);
            for (a = 0; a < ch->Cn; a++) for (j = 0; j < ch->Cn; j++) w.A1[a * C + j] *= ch->M[a * C + j];
            mn_gemm(0, 0, ch->Cn, V, K, 1.0, w.X, K, Sn, V, 0.0, w.CV1, V);
            for (a = 0; a < ch->Cn; a++) for (j = 0; j < V; j++) w.CV1[a * V + j] *= ch->Gam[a];
            mn_gemm(0, 0, ch->Cn, V, ch->Cn, 1.0, w.A1, C, Vc, H * V, 1.0, w.CV1, V);
            for (a = 0; a < ch->Cn; a++) {
                memcpy(out + (r0 + a * H) * V, w.CV1 + a * V, V * sizeof(mn_real));
                if (xs) memcpy(xs + (r0 + a * H) * K, w.X + a * K, K * sizeof(mn_real));
                if (iters) iters[r0 + a * H] = itbuf[a];
            }
        }
        if (hkk) memcpy(hkk + (size_t)bh * K * K, w.Hs + NC * K * K, K * K * sizeof(mn_real));
        if (hkv) memcpy(hkv + (size_t)bh * K * V, w.Ss + NC * K * V, K * V * sizeof(mn_real));
    }
}

// Chunkwise backward by implicit differentiation (the recurrent backward's equations, regrouped by chunk
// as fla chunk_mesa_net's kernels do; M' = M without beta, Sx = X Kc^T, e_j = exp(b_last - b_j)):
//   B0 recompute the chunk-start states; B1 reverse pass for dS (state gradients at chunk ends);
//   B2 per chunk: xbar = S_t do_t in GLA form, dv, the kv part of dk/dbeta/dg;
//   B3 adjoint CG dQ = A^-1 xbar (same batched CG, x0 = 0); B4 reverse pass for dH with (dQ, X);
//   B5 per chunk: the kk part of dk/dbeta/dg and dlambda. The decay gradients are first taken with
//   respect to the local cumsum b (db), then dg_t = sum_{s >= t in the chunk} db_s.
// Same contract as mn_mesa_backward_recurrent (xs from the forward; accumulates). Cost per token and head:
// the adjoint CG, n (4 C Dk + 2 Dk^2) as in the forward, plus 14 C Dk + 6 C Dv + 10 Dk^2 + 10 Dk Dv
// for B0-B5. Memory: the work of the forward (the chunk states recomputed there, not saved).
MNDEF void mn_mesa_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dbeta, mn_real* dlamb,
                            mn_real* dhkk0, mn_real* dhkv0, const mn_real* dout, const mn_real* dhkk,
                            const mn_real* dhkv, const mn_real* xs, const mn_real* q, const mn_real* k,
                            const mn_real* v, const mn_real* g, const mn_real* beta, const mn_real* lamb,
                            const mn_real* hkk0, const mn_real* hkv0, size_t B, size_t T, size_t H, size_t Dk,
                            size_t Dv, const mn_mesa_opts* o, mn_real* work) {
    mn_mesa_opts tmp; const mn_mesa_opts* op = mn__mesa_opts(o, &tmp);
    size_t K = Dk, V = Dv, KK = K * K, KV = K * V, C = op->chunk, NC = (T + C - 1) / C,
           slot = mn__mesa_slot(MN__MESA_CHUNK, T, K, V, C);
    long long hh;
    MN_UNUSED(q);
    MN__OMP_FOR                                              // heads in parallel: dlambda is per head
    for (hh = 0; hh < (long long)H; hh++) {
        size_t h = (size_t)hh, b, n, a, j, i;
        mn__mesa_cw w;
        mn__mesa_cw_layout(&w, work + h * slot, T, K, V, C);
        for (b = 0; b < B; b++) {
            size_t bh = b * H + h;
            mn__mesa_chunk* ch = &w.ch;
            // B0: chunk-start states H_n, S_n
            mn__mesa_states(&w, b, h, hkk0, hkv0, k, v, g, beta, T, H, K, V, C);
            // B1: dSe_n = gradient of the state at the END of chunk n. forward: S_end(n) = GamC S_n + ...
            // and o_a = Gam_a S_n^T x_a + ..., so dS_n = GamC dSe_n + (diag(Gam) X)^T dO = dSe_{n-1}.
            for (i = 0; i < KV; i++) w.dSe[(NC - 1) * KV + i] = dhkv ? dhkv[bh * KV + i] : 0;
            for (n = NC; n-- > 0;) {
                size_t r0 = (b * T + n * C) * H + h;
                mn_real* dst = n > 0 ? w.dSe + (n - 1) * KV : dhkv0 ? dhkv0 + bh * KV : NULL;
                if (!dst) continue;
                mn__mesa_chunk_decay(ch, n, b, h, T, H, C, g, beta);
                for (a = 0; a < ch->Cn; a++)
                    for (i = 0; i < K; i++) w.CK1[a * K + i] = ch->Gam[a] * xs[(r0 + a * H) * K + i];
                if (n > 0) for (i = 0; i < KV; i++) dst[i] = (mn_real)(ch->GamC * w.dSe[n * KV + i]);
                else for (i = 0; i < KV; i++) dst[i] += (mn_real)(ch->GamC * w.dSe[i]);     // dS_0 accumulates
                mn_gemm(1, 0, K, V, ch->Cn, 1.0, w.CK1, K, dout + r0 * V, H * V, 1.0, dst, V);
            }
            // B2 + B3, per chunk
            for (n = 0; n < NC; n++) {
                size_t r0 = (b * T + n * C) * H + h, Cn;
                const mn_real *Kc = k + r0 * K, *Vc = v + r0 * V, *dO = dout + r0 * V, *Sn = w.Ss + n * KV,
                              *dSe = w.dSe + n * KV;
                mn_real *Sx = w.A1, *Do = w.A2, *Xb = w.CK1, *tk = w.CK2, *tv = w.CV1, *db = w.db,
                        *dQ = w.dQ + n * C * K;
                double dblast = 0;
                mn__mesa_chunk_decay(ch, n, b, h, T, H, C, g, beta);
                Cn = ch->Cn;
                for (a = 0; a < Cn; a++) { memcpy(w.X + a * K, xs + (r0 + a * H) * K, K * sizeof(mn_real)); db[a] = 0; }
                mn_gemm(0, 1, Cn, Cn, K, 1.0, w.X, K, Kc, H * K, 0.0, Sx, C);      // Sx = X Kc^T
                mn_gemm(0, 1, Cn, Cn, V, 1.0, dO, H * V, Vc, H * V, 0.0, Do, C);    // Do = dO Vc^T
                // xbar = diag(Gam) dO S_n^T + (Do . M) Kc ; db_a += Gam_a x_a . (S_n do_a)
                mn_gemm(0, 1, Cn, K, V, 1.0, dO, H * V, Sn, V, 0.0, Xb, K);
                for (a = 0; a < Cn; a++) {
                    double s = 0;
                    for (i = 0; i < K; i++) {
                        s += (double)w.X[a * K + i] * Xb[a * K + i];
                        Xb[a * K + i] *= ch->Gam[a];
                    }
                    db[a] += (mn_real)(ch->Gam[a] * s);
                }
                // E = (Sx . M) . Do: o_a = sum_j M[a,j] (x_a.k_j) v_j, and dM[a,j]/db_a = M, dM/db_j = -M
                for (a = 0; a < Cn; a++)
                    for (j = 0; j <= a; j++) {
                        double E = (double)Sx[a * C + j] * ch->M[a * C + j] * Do[a * C + j];
                        db[a] += (mn_real)E; db[j] -= (mn_real)E;
                    }
                for (a = 0; a < Cn; a++) for (j = 0; j < Cn; j++) Do[a * C + j] *= ch->M[a * C + j];   // Do . M
                mn_gemm(0, 0, Cn, K, Cn, 1.0, Do, C, Kc, H * K, 1.0, Xb, K);
                // Do . M' (undo beta): (Do . M)[a,j] / beta_j would divide by beta; recompute from Mp instead
                mn_gemm(0, 1, Cn, Cn, V, 1.0, dO, H * V, Vc, H * V, 0.0, Do, C);
                for (a = 0; a < Cn; a++) for (j = 0; j < Cn; j++) Do[a * C + j] *= ch->Mp[a * C + j];
                // dKb_kv = (Do . M')^T X + diag(e) Vc dSe^T  -> dbeta_j += dKb_j . k_j ; dk_j += beta_j dKb_j
                mn_gemm(1, 0, Cn, K, Cn, 1.0, Do, C, w.X, K, 0.0, tk, K);
                mn_gemm(0, 1, Cn, K, V, 1.0, Vc, H * V, dSe, V, 0.0, dQ, K); // Vc dSe^T into dQ's rows (free until B3)
                for (a = 0; a < Cn; a++) {
                    size_t r = r0 + a * H;
                    double be = beta[r], s = 0;
                    for (i = 0; i < K; i++) {
                        double dkb = tk[a * K + i] + (double)ch->e[a] * dQ[a * K + i];
                        s += dkb * k[r * K + i];
                        dk[r * K + i] += (mn_real)(be * dkb);
                    }
                    dbeta[r] += (mn_real)s;
                }
                // dV += (Sx . M)^T dO + diag(e . beta) Kc dSe ; w_j = e_j beta_j (k_j^T dSe v_j)
                for (a = 0; a < Cn; a++)
                    for (j = 0; j < Cn; j++) Sx[a * C + j] *= ch->M[a * C + j]; // Sx . M from here on
                mn_gemm(0, 0, Cn, V, K, 1.0, Kc, H * K, dSe, V, 0.0, tv, V);
                for (a = 0; a < Cn; a++) {
                    size_t r = r0 + a * H;
                    double s = ch->e[a] * beta[r], wj = 0;
                    for (j = 0; j < V; j++) {
                        dv[r * V + j] += (mn_real)(s * tv[a * V + j]);
                        wj += (double)tv[a * V + j] * Vc[a * H * V + j];
                    }
                    db[a] -= (mn_real)(s * wj); dblast += s * wj;
                }
                for (i = 0; i < KV; i++) dblast += ch->GamC * (double)Sn[i] * dSe[i];
                db[Cn - 1] += (mn_real)dblast;
                mn_gemm(1, 0, Cn, V, Cn, 1.0, Sx, C, dO, H * V, 1.0, dv + r0 * V, H * V);   // dv rows += (Sx . M)^T dO
                // dg from db (reverse cumsum inside the chunk); the kk part adds more below
                {
                    double acc = 0;
                    for (a = Cn; a-- > 0;) {
                        acc += db[a];
                        dg[(b * T + n * C + a) * H + h] += (mn_real)acc;
                    }
                }
                // B3: adjoint solve dQ = A^-1 xbar (row by row, like the forward)
                mn__mesa_chunk_cg(dQ, NULL, Xb, K, Kc, H * K, ch, w.Hs + n * KK, lamb + h * K, C, K, op, w.cg);
                for (a = 0; a < Cn; a++) for (i = 0; i < K; i++) dq[(r0 + a * H) * K + i] += dQ[a * K + i];
            }
            // B4: dHe_n; forward: H_end(n) = GamC H_n + ..., and dL/dH_t = -dq_t x_t^T
            for (i = 0; i < KK; i++) w.dHe[(NC - 1) * KK + i] = dhkk ? dhkk[bh * KK + i] : 0;
            for (n = NC; n-- > 0;) {
                size_t r0 = (b * T + n * C) * H + h;
                mn_real* dst = n > 0 ? w.dHe + (n - 1) * KK : (dhkk0 ? dhkk0 + bh * KK : NULL);
                if (!dst) continue;
                mn__mesa_chunk_decay(ch, n, b, h, T, H, C, g, beta);
                for (a = 0; a < ch->Cn; a++)
                    for (i = 0; i < K; i++) w.CK1[a * K + i] = -ch->Gam[a] * w.dQ[n * C * K + a * K + i];
                for (a = 0; a < ch->Cn; a++) memcpy(w.X + a * K, xs + (r0 + a * H) * K, K * sizeof(mn_real));
                if (n > 0) for (i = 0; i < KK; i++) dst[i] = (mn_real)(ch->GamC * w.dHe[n * KK + i]);
                else for (i = 0; i < KK; i++) dst[i] += (mn_real)(ch->GamC * w.dHe[i]);
                mn_gemm(1, 0, K, K, ch->Cn, 1.0, w.CK1, K, w.X, K, 1.0, dst, K);   // rows index dq
            }
            // B5: the kk part, per chunk
            for (n = 0; n < NC; n++) {
                size_t r0 = (b * T + n * C) * H + h, Cn;
                const mn_real *Kc = k + r0 * K, *Hn = w.Hs + n * KK, *dHe = w.dHe + n * KK, *dQ = w.dQ + n * C * K;
                mn_real *Sx = w.A1, *Dq = w.A2, *tk = w.CK1, *t2 = w.CK2, *db = w.db;
                double dblast = 0;
                mn__mesa_chunk_decay(ch, n, b, h, T, H, C, g, beta);
                Cn = ch->Cn;
                for (a = 0; a < Cn; a++) { memcpy(w.X + a * K, xs + (r0 + a * H) * K, K * sizeof(mn_real)); db[a] = 0; }
                mn_gemm(0, 1, Cn, Cn, K, 1.0, w.X, K, Kc, H * K, 0.0, Sx, C);      // Sx = X Kc^T
                mn_gemm(0, 1, Cn, Cn, K, 1.0, dQ, K, Kc, H * K, 0.0, Dq, C);       // Dq = dQ Kc^T
                // E' = -(Sx . M) . Dq
                for (a = 0; a < Cn; a++)
                    for (j = 0; j <= a; j++) {
                        double E = -(double)Sx[a * C + j] * ch->M[a * C + j] * Dq[a * C + j];
                        db[a] += (mn_real)E; db[j] -= (mn_real)E;
                    }
                // db_a += -Gam_a dq_a . (H_n x_a) ; dlambda -= colsum(dQ . X)
                mn_gemm(0, 1, Cn, K, K, 1.0, w.X, K, Hn, K, 0.0, tk, K);           // rows: (H_n x_a)^T (H_n symmetric)
                for (a = 0; a < Cn; a++) {
                    double s = 0;
                    for (i = 0; i < K; i++) {
                        s += (double)dQ[a * K + i] * tk[a * K + i];
                        dlamb[h * K + i] -= dQ[a * K + i] * w.X[a * K + i];
                    }
                    db[a] -= (mn_real)(ch->Gam[a] * s);
                }
                // dKb_kk = -(Dq . M')^T X + diag(e) Kc dHe^T
                for (a = 0; a < Cn; a++) for (j = 0; j < Cn; j++) Dq[a * C + j] *= -ch->Mp[a * C + j];
                mn_gemm(1, 0, Cn, K, Cn, 1.0, Dq, C, w.X, K, 0.0, tk, K);
                mn_gemm(0, 1, Cn, K, K, 1.0, Kc, H * K, dHe, K, 0.0, t2, K);
                for (a = 0; a < Cn; a++) {
                    size_t r = r0 + a * H;
                    double be = beta[r], s = 0;
                    for (i = 0; i < K; i++) {
                        double dkb = tk[a * K + i] + (double)ch->e[a] * t2[a * K + i];
                        s += dkb * k[r * K + i];
                        dk[r * K + i] += (mn_real)(be * dkb);
                    }
                    dbeta[r] += (mn_real)s;
                }
                // dKval = -(Sx . M)^T dQ + diag(e . beta) Kc dHe ; w'_j = e_j beta_j k_j^T dHe k_j
                for (a = 0; a < Cn; a++) for (j = 0; j < Cn; j++) Sx[a * C + j] *= -ch->M[a * C + j];
                mn_gemm(1, 0, Cn, K, Cn, 1.0, Sx, C, dQ, K, 0.0, tk, K);
                mn_gemm(0, 0, Cn, K, K, 1.0, Kc, H * K, dHe, K, 0.0, t2, K);
                for (a = 0; a < Cn; a++) {
                    size_t r = r0 + a * H;
                    double s = ch->e[a] * beta[r], wj = 0;
                    for (i = 0; i < K; i++) {
                        dk[r * K + i] += (mn_real)(tk[a * K + i] + s * t2[a * K + i]);
                        wj += (double)t2[a * K + i] * k[r * K + i];
                    }
                    db[a] -= (mn_real)(s * wj); dblast += s * wj;
                }
                for (i = 0; i < KK; i++) dblast += ch->GamC * (double)Hn[i] * dHe[i];
                db[Cn - 1] += (mn_real)dblast;
                {
                    double acc = 0;
                    for (a = Cn; a-- > 0;) {
                        acc += db[a];
                        dg[(b * T + n * C + a) * H + h] += (mn_real)acc;
                    }
                }
            }
        }
    }
}

// ---- the layer: the Mesa layer as a mixer (fla layers/mesa_net.py), per head:
//   q = l2norm(silu(conv4(x Wq))), k = l2norm(silu(conv4(x Wk))), v = x Wv
//   beta = sigmoid(x Wb + bb), g = logsigmoid(x Wa + ba), lambda = softplus(theta) + 0.25
//   [paper §4.2, cfg.mesa_gamma_clamp: gamma <- gamma (1 - (1 - 0.9975) beta^2), in log space]
//   o = Mesa(q, k, v, g, beta, lambda) (chunkwise CG, cfg.mesa_cg_train steps; decode: the step with
//   cfg.mesa_cg_decode steps and the paper's stop ||r|| <= cfg.mesa_cg_tol ||r0||, from the start that
//   cfg.mesa_cg_warm picks), y = RMSNorm_head(o) Wo.
#define MN__MESA_CLAMP 0.0025   // 1 - b_gamma, b_gamma = 0.9975 (paper §4.2)
typedef struct mn__mesa_par {
    mn_real *q_proj, *k_proj, *v_proj;   // (HD,C)
    mn_real *a_proj, *a_bias;            // (H,C), (H): the decay gate
    mn_real *b_proj, *b_bias;            // (H,C), (H): the write strength beta
    mn_real* lambda;                     // (HD) softplus^-1 of lambda - 0.25 (fla lambda_params)
    mn_real *q_conv, *k_conv;            // (HD,1,4)
    mn_real *o_norm, *o_proj;            // (D), (C,HD)
} mn__mesa_par;
typedef struct mn__mesa_act {
    mn_real *ql, *kl, *qc, *kc, *q, *k;  // (N,HD): projections, after conv + silu, after the l2 norm
    mn_real *rq, *rk;                    // (N*H) rstd of the l2 norms
    mn_real* v;                          // (N,HD)
    mn_real *al, *bl, *g, *beta;         // (N*H) gate pre-activations, log-decay, write strength
    mn_real* lamb;                       // (HD) lambda
    mn_real *xs, *o, *on;                // (N,HD) the solves x_t (saved for the implicit backward), o, normed o
    mn_real* ro;                         // (N*H) rstd of the output norm
    mn_real* work;                       // the op's workspace (mn_mesa_work_size)
} mn__mesa_act;
typedef struct mn__mesa_state {
    mn_real *cq, *ck;     // (HD,3) the q and k conv windows
    mn_real *hkk, *hkv;   // (H,D,D) the states H_t and S_t
    mn_real* xs;          // (H,D) the last token's solutions, the next one's CG start (cfg.mesa_cg_warm 2-4)
    mn_real* ring;        // (H, r*(D+2)+1) the last r tokens' keys, betas, log-gates and their count (cfg.mesa_cg_warm
                          // 5 and 6, r = mn__mesa_window; no elements otherwise): mn_mesa_step_woodbury's window
    mn_real* cg;          // (2) CG iterations and systems solved since the reset (mn_state_cg_stats; exact
                          // integers up to 2^24 in float)
} mn__mesa_state;
typedef struct mn__mesa_temp {
    mn_real *ql, *kl, *v, *q, *k, *lamb, *o, *on, *qc, *kc;   // (HD)
    mn_real *al, *bl, *g, *beta, *rs;                         // (H)
    mn_real* work;                                            // the step's workspace
} mn__mesa_temp;

static void mn__mesa_par_walk(mn__pwalk* w, void* pp) {
    mn__mesa_par t, *p = pp ? (mn__mesa_par*)pp : &t;
    size_t C = w->m->cfg.d_model, H = w->m->cfg.n_head, D = w->m->cfg.head_dim, HD = H * D;
    p->q_proj = mn__pw_matrix(w, "q_proj.weight", HD, C);
    p->k_proj = mn__pw_matrix(w, "k_proj.weight", HD, C);
    p->v_proj = mn__pw_matrix(w, "v_proj.weight", HD, C);
    p->a_proj = mn__pw_matrix(w, "a_proj.weight", H, C);
    p->a_bias = mn__pw_vector(w, "a_proj.bias", H, MN__INIT_MESA_GATE);   // cfg.mesa_gate_bias
    p->b_proj = mn__pw_matrix(w, "b_proj.weight", H, C);
    p->b_bias = mn__pw_vector(w, "b_proj.bias", H, MN__INIT_ZEROS);
    p->lambda = mn__pw_vector(w, "lambda_params", HD, MN__INIT_LAMBDA);   // no weight decay (fla)
    p->q_conv = mn__pw_conv(w, "q_conv1d.weight", HD);
    p->k_conv = mn__pw_conv(w, "k_conv1d.weight", HD);
    p->o_norm = mn__pw_vector(w, "o_norm.weight", D, MN__INIT_ONES);
    p->o_proj = mn__pw_matrix(w, "o_proj.weight", C, HD);
}
static mn_mesa_opts mn__mesa_train_opts(const mn_config* c) {
    mn_mesa_opts o; memset(&o, 0, sizeof o);
    o.cg_iters = c->mesa_cg_train; o.chunk = c->mesa_chunk; o.fla = c->mesa_cg_fla;
    return o;
}
static size_t mn__mesa_act_layout(void* p, mn_real* base, const mn_config* c, size_t B, size_t T) {
    mn__mesa_act t, *a = p ? (mn__mesa_act*)p : &t;
    size_t N = B * T, H = c->n_head, HD = H * c->head_dim, off = 0;
    mn_mesa_opts o = mn__mesa_train_opts(c);
    MN__PIECE(ql, N * HD); MN__PIECE(kl, N * HD); MN__PIECE(qc, N * HD); MN__PIECE(kc, N * HD);
    MN__PIECE(q, N * HD); MN__PIECE(k, N * HD);
    MN__PIECE(rq, N * H); MN__PIECE(rk, N * H);
    MN__PIECE(v, N * HD);
    MN__PIECE(al, N * H); MN__PIECE(bl, N * H); MN__PIECE(g, N * H); MN__PIECE(beta, N * H);
    MN__PIECE(lamb, HD);
    MN__PIECE(xs, N * HD); MN__PIECE(o, N * HD); MN__PIECE(on, N * HD); MN__PIECE(ro, N * H);
    MN__PIECE(work, mn__mesa_work(MN__MESA_CHUNK, B, T, H, c->head_dim, c->head_dim, &o));
    return off;
}
// The gates from the pre-activations: g = logsigmoid(al) (+ the optional clamp), beta = sigmoid(bl).
static void mn__mesa_gates(const mn_config* c, mn_real* g, mn_real* beta, const mn_real* al, const mn_real* bl,
                           size_t n) {
    size_t i;
    mn_logsigmoid_forward(g, al, n);
    mn_sigmoid_forward(beta, bl, n);
    if (c->mesa_gamma_clamp) for (i = 0; i < n; i++) g[i] += (mn_real)log(1.0 - MN__MESA_CLAMP * beta[i] * beta[i]);
}
static void mn__mesa_lambda(mn_real* lamb, const mn_real* theta, size_t n) {
    size_t i;
    mn_softplus_forward(lamb, theta, n);
    for (i = 0; i < n; i++) lamb[i] += (mn_real)0.25;    // fla lambda_lower_bound
}
static void mn__mesa_layer_forward(mn_model* m, size_t l, mn_real* out, const mn_real* in, mn_real* acts, size_t B,
                                   size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn_mesa_opts o = mn__mesa_train_opts(c);
    mn__mesa_par P; mn__mesa_act A;
    mn__layer_point(m, l, m->params, mn__mesa_par_walk, &P);
    mn__mesa_act_layout(&A, acts, c, B, T);
    mn__qkv_forward(A.ql, A.kl, A.v, in, P.q_proj, P.k_proj, P.v_proj, N, C, HD);
    mn_shortconv_forward(A.qc, A.ql, P.q_conv, B, T, HD, 4, 1);
    mn_shortconv_forward(A.kc, A.kl, P.k_conv, B, T, HD, 4, 1);
    mn_l2norm_forward(A.q, A.rq, A.qc, N * H, D);
    mn_l2norm_forward(A.k, A.rk, A.kc, N * H, D);
    mn_matmul_forward(A.al, in, P.a_proj, P.a_bias, N, C, H);
    mn_matmul_forward(A.bl, in, P.b_proj, P.b_bias, N, C, H);
    mn__mesa_gates(c, A.g, A.beta, A.al, A.bl, N * H);
    mn__mesa_lambda(A.lamb, P.lambda, HD);
    mn_mesa_forward(A.o, A.xs, NULL, NULL, NULL, A.q, A.k, A.v, A.g, A.beta, A.lamb, B, T, H, D, D, &o, A.work);
    mn_rmsnorm_forward(A.on, A.ro, A.o, P.o_norm, N * H, D, c->norm_eps);
    mn_matmul_forward(out, A.on, P.o_proj, NULL, N, HD, C);
}
static void mn__mesa_layer_backward(mn_model* m, size_t l, mn_real* din, const mn_real* dout, const mn_real* in,
                                    mn_real* acts, mn_real* dacts, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D, i;
    mn_mesa_opts o = mn__mesa_train_opts(c);
    mn__mesa_par P, dP; mn__mesa_act A, dA;
    mn__layer_point(m, l, m->params, mn__mesa_par_walk, &P);
    mn__layer_point(m, l, m->grads, mn__mesa_par_walk, &dP);
    mn__mesa_act_layout(&A, acts, c, B, T);
    mn__mesa_act_layout(&dA, dacts, c, B, T);
    mn_matmul_backward(dA.on, dP.o_proj, NULL, dout, A.on, P.o_proj, N, HD, C);
    mn_rmsnorm_backward(dA.o, dP.o_norm, dA.on, A.ro, A.o, P.o_norm, N * H, D);
    // the op's implicit backward; dlambda collects in the (zeroed) gradient slot of lambda
    mn_mesa_backward(dA.q, dA.k, dA.v, dA.g, dA.beta, dA.lamb, NULL, NULL, dA.o, NULL, NULL, A.xs, A.q, A.k, A.v, A.g,
                     A.beta, A.lamb, NULL, NULL, B, T, H, D, D, &o, dA.work);
    mn_softplus_backward(dP.lambda, dA.lamb, P.lambda, HD);
    if (c->mesa_gamma_clamp) {   // forward: g += log(1 - c beta^2), so: dbeta += dg (-2 c beta) / (1 - c beta^2)
        for (i = 0; i < N * H; i++)
            dA.beta[i] += (mn_real)(dA.g[i] * (-2.0 * MN__MESA_CLAMP * A.beta[i]) /
                                    (1.0 - MN__MESA_CLAMP * A.beta[i] * A.beta[i]));
    }
    mn_logsigmoid_backward(dA.al, dA.g, A.al, N * H);
    mn_sigmoid_backward(dA.bl, dA.beta, A.bl, N * H);
    mn_matmul_backward(din, dP.a_proj, dP.a_bias, dA.al, in, P.a_proj, N, C, H);
    mn_matmul_backward(din, dP.b_proj, dP.b_bias, dA.bl, in, P.b_proj, N, C, H);
    mn_l2norm_backward(dA.qc, dA.q, A.q, A.rq, N * H, D);
    mn_l2norm_backward(dA.kc, dA.k, A.k, A.rk, N * H, D);
    mn_shortconv_backward(dA.ql, dP.q_conv, dA.qc, A.ql, P.q_conv, B, T, HD, 4, 1);
    mn_shortconv_backward(dA.kl, dP.k_conv, dA.kc, A.kl, P.k_conv, B, T, HD, 4, 1);
    mn__qkv_backward(din, dP.q_proj, dP.k_proj, dP.v_proj, dA.ql, dA.kl, dA.v, in, P.q_proj, P.k_proj, P.v_proj, N, C,
                     HD);
}
// The Woodbury window of cfg.mesa_cg_warm 5 and 6 (tokens), 0 for the other starts. 8 holds all but 0.5^8 = 0.4 %
// of H_t's weight at gamma 0.5; 16 reaches gates near 0.7 (0.7^16 = 0.3 %) for about two more products.
enum { MN__MESA_WINDOW_SHORT = 8, MN__MESA_WINDOW_LONG = 16 };
static size_t mn__mesa_window(const mn_config* c) {
    return c->mesa_cg_warm == 5 ? MN__MESA_WINDOW_SHORT : c->mesa_cg_warm == 6 ? MN__MESA_WINDOW_LONG : 0;
}
static size_t mn__mesa_state_layout(void* p, mn_real* base, const mn_config* c) {
    mn__mesa_state t, *a = p ? (mn__mesa_state*)p : &t;
    size_t H = c->n_head, D = c->head_dim, off = 0, r = mn__mesa_window(c);
    MN__PIECE(cq, 3 * H * D); MN__PIECE(ck, 3 * H * D);
    MN__PIECE(hkk, H * D * D); MN__PIECE(hkv, H * D * D); MN__PIECE(xs, H * D);
    MN__PIECE(ring, r ? H * mn__mesa_ring_slot(D, r) : 0);
    MN__PIECE(cg, 2);
    return off;
}
static size_t mn__mesa_temp_layout(void* p, mn_real* base, const mn_config* c) {
    mn__mesa_temp t, *a = p ? (mn__mesa_temp*)p : &t;
    size_t H = c->n_head, D = c->head_dim, HD = H * D, off = 0;
    mn_mesa_opts o; memset(&o, 0, sizeof o);
    MN__PIECE(ql, HD); MN__PIECE(kl, HD); MN__PIECE(v, HD); MN__PIECE(q, HD); MN__PIECE(k, HD);
    MN__PIECE(lamb, HD); MN__PIECE(o, HD); MN__PIECE(on, HD); MN__PIECE(qc, HD); MN__PIECE(kc, HD);
    MN__PIECE(al, H); MN__PIECE(bl, H); MN__PIECE(g, H); MN__PIECE(beta, H); MN__PIECE(rs, H);
    MN__PIECE(work, mn__mesa_work(MN__MESA_RECURRENT, 1, 1, H, D, D, &o));
    return off;
}
static void mn__mesa_layer_step(mn_model* m, size_t l, mn_real* out, mn_real* state, mn_real* scratch,
                                const mn_real* in,
                                size_t pos) {
    const mn_config* c = &m->cfg;
    size_t C = c->d_model, H = c->n_head, D = c->head_dim, HD = H * D;
    mn__mesa_par P; mn__mesa_state S; mn__mesa_temp X;
    mn_mesa_opts op; memset(&op, 0, sizeof op);
    op.cg_iters = c->mesa_cg_decode; op.cg_tol = c->mesa_cg_tol;
    // fla's arithmetic from x0 = 0 as the training forward, so step and forward agree (fla's own decode
    // kernel starts at the Jacobi guess); a tolerance asks for the paper's stop, i.e. textbook CG
    op.fla = c->mesa_cg_fla && !(c->mesa_cg_tol > 0);
    // the start (cfg.mesa_cg_warm): 1-4 set opts.warm, so the tolerance is measured against ||q_t|| whatever the
    // start; 1 passes no previous solutions, so every token starts at the Jacobi guess; 5, 6: the Woodbury step
    // (which sets both itself)
    op.jacobi = c->mesa_cg_warm >= 1;
    op.warm = c->mesa_cg_warm >= 2 && c->mesa_cg_warm <= 4 ? c->mesa_cg_warm - 1
              : c->mesa_cg_warm == 1 ? MN_MESA_WARM : MN_MESA_COLD;
    MN_UNUSED(pos);
    mn__layer_point(m, l, m->params, mn__mesa_par_walk, &P);
    mn__mesa_state_layout(&S, state, c);
    mn__mesa_temp_layout(&X, scratch, c);
    mn__qkv_forward(X.ql, X.kl, X.v, in, P.q_proj, P.k_proj, P.v_proj, 1, C, HD);
    mn_shortconv_step(X.qc, S.cq, X.ql, P.q_conv, HD, 4, 1);
    mn_shortconv_step(X.kc, S.ck, X.kl, P.k_conv, HD, 4, 1);
    mn_l2norm_forward(X.q, X.rs, X.qc, H, D);
    mn_l2norm_forward(X.k, X.rs, X.kc, H, D);
    mn_matmul_forward(X.al, in, P.a_proj, P.a_bias, 1, C, H);
    mn_matmul_forward(X.bl, in, P.b_proj, P.b_bias, 1, C, H);
    mn__mesa_gates(c, X.g, X.beta, X.al, X.bl, H);
    mn__mesa_lambda(X.lamb, P.lambda, HD);
    {
        int it[256]; size_t h;
        MN_ASSERT(H <= 256);
        if (mn__mesa_window(c))
            mn_mesa_step_woodbury(X.o, NULL, S.ring, it, S.hkk, S.hkv, X.q, X.k, X.v, X.g, X.beta, X.lamb, H, D, D,
                                  mn__mesa_window(c), &op, X.work);
        else
            mn_mesa_step_warm(X.o, c->mesa_cg_warm >= 2 ? S.xs : NULL, it, S.hkk, S.hkv, X.q, X.k, X.v, X.g, X.beta,
                              X.lamb, H, D, D, &op, X.work);
        for (h = 0; h < H; h++) S.cg[0] += (mn_real)it[h];
        S.cg[1] += (mn_real)H;
    }
    mn_rmsnorm_forward(X.on, X.rs, X.o, P.o_norm, H, D, c->norm_eps);
    mn_matmul_forward(out, X.on, P.o_proj, NULL, 1, HD, C);
}
static double mn__mesa_cg_count(const mn_config* c, const mn_real* state, double* solves) {
    mn__mesa_state S;
    mn__mesa_state_layout(&S, (mn_real*)state, c);
    *solves = S.cg[1];
    return S.cg[0];
}
static double mn__mesa_layer_flops(const mn_config* c, size_t T) {
    // the chunkwise forward's count per token (see mn_mesa_forward), times the heads
    double K = (double)c->head_dim, V = K, Cc = (double)(c->mesa_chunk < T ? c->mesa_chunk : T);
    double n = c->mesa_cg_train > 0 ? c->mesa_cg_train : 0;
    return (double)c->n_head *
           (2 * K * K + 2 * K * V + n * (4 * Cc * K + 2 * K * K) + 2 * Cc * K + 2 * Cc * V + 2 * K * V);
}

// >>model
// defines: the backbone (block parameters and activations), the mixer table, mn_config_resolve, the
// parameter table, mn_model_init, mn_forward, mn_backward, mn_zero_grad, inference state and mn_step.
//
// A block is Llama-2 style (fla's *Block): x2 = x + Mixer(RMSNorm(x)); y = x2 + MLP(RMSNorm(x2)),
// MLP(z) = W_down (silu(W_gate z) * (W_up z)). The model is embeddings -> L blocks -> RMSNorm -> lm_head.
// The mixers live in their ops' sections (see >>layer); this section only calls them through mn__mixers[].

// A block's own tensors, in checkpoint order before the mixer's (MN__BLOCK_TENSORS of them).
typedef struct mn__block_par { mn_real *attn_norm, *mlp_norm, *gate, *up, *down; } mn__block_par;
static void mn__block_par_walk(mn__pwalk* w, void* pp) {
    mn__block_par t, *p = pp ? (mn__block_par*)pp : &t;
    size_t C = w->m->cfg.d_model, F = w->m->cfg.d_ff;
    p->attn_norm = mn__pw_vector(w, "attn_norm.weight", C, MN__INIT_ONES);
    p->mlp_norm = mn__pw_vector(w, "mlp_norm.weight", C, MN__INIT_ONES);
    p->gate = mn__pw_matrix(w, "mlp.gate_proj.weight", F, C);
    p->up = mn__pw_matrix(w, "mlp.up_proj.weight", F, C);
    p->down = mn__pw_matrix(w, "mlp.down_proj.weight", C, F);
}
static void mn__block_point(mn_model* m, size_t l, mn_real* base, mn__block_par* p) {
    mn__pwalk w;
    memset(&w, 0, sizeof w);
    w.m = m; w.l = l; w.scope = ""; w.base = base; w.next = m->layer_first[l];
    mn__block_par_walk(&w, p);
}
// The activations of the whole model, laid out for (B,T) by mn__act_layout: these first, then each
// layer's block (mn__block_act), whose last piece holds the mixer's own activations.
typedef struct mn__head_act {
    mn_real* res;      // ((L+1),N,C) the residual stream: the embeddings, then each block's output
    mn_real *xf, *rstdf;   // (N,C), (N) the final norm
    mn_real *logits, *losses;   // (N,V), (N)
} mn__head_act;
typedef struct mn__block_act {
    mn_real *xn1, *rstd1;   // (N,C), (N) the mixer's input norm
    mn_real* mo;            // (N,C) the mixer's output
    mn_real* x2;            // (N,C) x + mixer
    mn_real *xn2, *rstd2;   // (N,C), (N) the MLP's input norm
    mn_real *gate, *up, *h; // (N,F) the MLP
    mn_real* mix;           // the mixer's activations (its act layout)
} mn__block_act;
static size_t mn__head_act_layout(mn__head_act* a, mn_real* base, const mn_config* c, size_t B, size_t T) {
    size_t N = B * T, C = c->d_model, off = 0;
    MN__PIECE(res, (c->n_layer + 1) * N * C);
    MN__PIECE(xf, N * C); MN__PIECE(rstdf, N);
    MN__PIECE(logits, N * c->vocab_size); MN__PIECE(losses, N);
    return off;
}

// The mixer table: one row per name cfg.pattern accepts. A row: name, variant flags, kv_cache, then
// the hooks (parameter walk, activation layout, forward, backward, state layout, step temporaries
// layout, step, flops, CG count). Rows that share functions differ in their variant flags.
static const mn__mixer_def mn__mixers[] = {
    { "attn", 0, 1, mn__attention_par_walk, mn__attention_act_layout, mn__attention_layer_forward,
      mn__attention_layer_backward, mn__attention_state_layout, mn__attention_temp_layout, mn__attention_layer_step,
      mn__attention_layer_flops, NULL },
    { "swa", MN__ATTENTION_SWA, 0, mn__attention_par_walk, mn__attention_act_layout, mn__attention_layer_forward,
      mn__attention_layer_backward, mn__attention_state_layout, mn__attention_temp_layout, mn__attention_layer_step,
      mn__attention_layer_flops, NULL },
    { "mesa", 0, 0, mn__mesa_par_walk, mn__mesa_act_layout, mn__mesa_layer_forward, mn__mesa_layer_backward,
      mn__mesa_state_layout, mn__mesa_temp_layout, mn__mesa_layer_step, mn__mesa_layer_flops, mn__mesa_cg_count },
    { "deltanet", 0, 0, mn__delta_rule_par_walk, mn__delta_rule_act_layout, mn__delta_rule_layer_forward,
      mn__delta_rule_layer_backward, mn__delta_rule_state_layout, mn__delta_rule_temp_layout,
      mn__delta_rule_layer_step, mn__delta_rule_layer_flops, NULL },
    { "deltanet_neg", MN__DELTA_RULE_NEG, 0, mn__delta_rule_par_walk, mn__delta_rule_act_layout,
      mn__delta_rule_layer_forward, mn__delta_rule_layer_backward, mn__delta_rule_state_layout,
      mn__delta_rule_temp_layout, mn__delta_rule_layer_step, mn__delta_rule_layer_flops, NULL },
    { "gdn", MN__DELTA_RULE_GATED, 0, mn__delta_rule_par_walk, mn__delta_rule_act_layout,
      mn__delta_rule_layer_forward, mn__delta_rule_layer_backward, mn__delta_rule_state_layout,
      mn__delta_rule_temp_layout, mn__delta_rule_layer_step, mn__delta_rule_layer_flops, NULL },
    { "gdn_neg", MN__DELTA_RULE_GATED | MN__DELTA_RULE_NEG, 0, mn__delta_rule_par_walk, mn__delta_rule_act_layout,
      mn__delta_rule_layer_forward, mn__delta_rule_layer_backward, mn__delta_rule_state_layout,
      mn__delta_rule_temp_layout, mn__delta_rule_layer_step, mn__delta_rule_layer_flops, NULL },
    { "hawk", 0, 0, mn__rglru_par_walk, mn__rglru_act_layout, mn__rglru_layer_forward, mn__rglru_layer_backward,
      mn__rglru_state_layout, mn__rglru_temp_layout, mn__rglru_layer_step, mn__rglru_layer_flops, NULL },
    { "mamba2", 0, 0, mn__ssd_par_walk, mn__ssd_act_layout, mn__ssd_layer_forward, mn__ssd_layer_backward,
      mn__ssd_state_layout, mn__ssd_temp_layout, mn__ssd_layer_step, mn__ssd_layer_flops, NULL },
    { "mamba2_neg", MN__SSD_NEG, 0, mn__ssd_par_walk, mn__ssd_act_layout, mn__ssd_layer_forward, mn__ssd_layer_backward,
      mn__ssd_state_layout, mn__ssd_temp_layout, mn__ssd_layer_step, mn__ssd_layer_flops, NULL },
    { "mlstm", 0, 0, mn__mlstm_par_walk, mn__mlstm_act_layout, mn__mlstm_layer_forward, mn__mlstm_layer_backward,
      mn__mlstm_state_layout, mn__mlstm_temp_layout, mn__mlstm_layer_step, mn__mlstm_layer_flops, NULL },
    { "slstm", 0, 0, mn__slstm_par_walk, mn__slstm_act_layout, mn__slstm_layer_forward, mn__slstm_layer_backward,
      mn__slstm_state_layout, mn__slstm_temp_layout, mn__slstm_layer_step, mn__slstm_layer_flops, NULL },
    { "gla", 0, 0, mn__gla_par_walk, mn__gla_act_layout, mn__gla_layer_forward, mn__gla_layer_backward,
      mn__gla_state_layout, mn__gla_temp_layout, mn__gla_layer_step, mn__gla_layer_flops, NULL },
    { "linattn", 0, 0, mn__gla_linattn_par_walk, mn__gla_linattn_act_layout, mn__gla_linattn_layer_forward,
      mn__gla_linattn_layer_backward, mn__gla_state_layout, mn__gla_linattn_temp_layout, mn__gla_linattn_layer_step,
      mn__gla_layer_flops, NULL },
    { "sgla", 0, 0, mn__gla_simple_par_walk, mn__gla_simple_act_layout, mn__gla_simple_layer_forward,
      mn__gla_simple_layer_backward, mn__gla_simple_state_layout, mn__gla_simple_temp_layout,
      mn__gla_simple_layer_step, mn__gla_layer_flops, NULL },
};
#define MN__N_MIXERS (sizeof(mn__mixers) / sizeof(mn__mixers[0]))

static int mn__mixer_variant(const mn_model* m, size_t l) { return mn__mixers[m->mixer[l]].variant; }
// the sizes of layer l's mixer state and step temporaries, per sequence
static size_t mn__mixer_state_size(const mn_model* m, size_t l) {
    return mn__mixers[m->mixer[l]].state(NULL, NULL, &m->cfg);
}
static size_t mn__mixer_temp_size(const mn_model* m, size_t l) {
    return mn__mixers[m->mixer[l]].temp(NULL, NULL, &m->cfg);
}
// Layer l's block: the norms, the mixer's output, the MLP, then the mixer's activations.
static size_t mn__block_act_layout(mn__block_act* a, mn_real* base, const mn_model* m, size_t l, size_t B, size_t T) {
    const mn_config* c = &m->cfg;
    size_t N = B * T, C = c->d_model, F = c->d_ff, off = 0;
    MN__PIECE(xn1, N * C); MN__PIECE(rstd1, N); MN__PIECE(mo, N * C); MN__PIECE(x2, N * C);
    MN__PIECE(xn2, N * C); MN__PIECE(rstd2, N); MN__PIECE(gate, N * F); MN__PIECE(up, N * F); MN__PIECE(h, N * F);
    MN__PIECE(mix, mn__mixers[m->mixer[l]].acts(NULL, NULL, c, B, T));
    return off;
}
static int mn__mixer_find(const char* name, size_t len) {
    size_t i;
    for (i = 0; i < MN__N_MIXERS; i++)
        if (strlen(mn__mixers[i].name) == len && memcmp(mn__mixers[i].name, name, len) == 0) return (int)i;
    return -1;
}
// Splits the comma-separated pattern and maps layer l to entry l % count. Returns MN_OK or
// MN_ERR_CONFIG (naming the unknown mixer and the known ones).
static int mn__parse_pattern(const char* pattern, size_t n_layer, int* mixer) {
    int ids[MN_MAX_LAYERS]; size_t n = 0, l;
    const char* p = pattern;
    while (1) {
        const char* e = p;
        while (*e && *e != ',') e++;
        while (p < e && *p == ' ') p++;
        size_t len = (size_t)(e - p);
        while (len > 0 && p[len - 1] == ' ') len--;
        int id = mn__mixer_find(p, len);
        if (id < 0 || n >= MN_MAX_LAYERS) {
            size_t i;
            if (n >= MN_MAX_LAYERS) MN_LOG("mesanet: pattern has more than %d entries\n", MN_MAX_LAYERS);
            else {
                MN_LOG("mesanet: unknown mixer '%.*s' in pattern \"%s\"; known:", (int)len, p, pattern);
                for (i = 0; i < MN__N_MIXERS; i++) MN_LOG(" %s", mn__mixers[i].name);
                MN_LOG("\n");
            }
            return MN_ERR_CONFIG;
        }
        ids[n++] = id;
        if (!*e) break;
        p = e + 1;
    }
    for (l = 0; l < n_layer; l++) mixer[l] = ids[l % n];
    return MN_OK;
}

#define MN__DEF(field, val) do { if (out->field == 0) out->field = (val); } while (0)
MNDEF int mn_config_resolve(mn_config* out, const mn_config* in) {
    int tmp[MN_MAX_LAYERS];
    *out = *in;
    MN__DEF(vocab_size, 256); MN__DEF(d_model, 256); MN__DEF(n_layer, 4); MN__DEF(n_head, 4);
    MN__DEF(head_dim, out->d_model / out->n_head);
    MN__DEF(d_ff, (out->d_model * 8 / 3 + 15) / 16 * 16);
    MN__DEF(max_seq_len, 1024); MN__DEF(window, 64);
    MN__DEF(rope_theta, 10000.0); MN__DEF(norm_eps, 1e-6); MN__DEF(init_std, 0.02); MN__DEF(seed, 1337);
    MN__DEF(mesa_cg_train, 30); MN__DEF(mesa_cg_decode, 30); MN__DEF(mesa_chunk, 64);
    if (!out->pattern || !out->pattern[0]) out->pattern = "attn";
    // sizes: each must be positive and small enough that products of three fit comfortably in size_t
    if (out->vocab_size < 2 || out->vocab_size > (1u << 24) || out->d_model > 65536 || out->n_head > 4096 ||
        out->head_dim == 0 || out->head_dim > 1024 || out->d_ff > (1u << 20) || out->max_seq_len > (1u << 24)) {
        MN_LOG("mesanet: config sizes out of range (vocab %zu, d_model %zu, n_head %zu, head_dim %zu, d_ff %zu, "
               "max_seq_len %zu)\n",
               out->vocab_size, out->d_model, out->n_head, out->head_dim, out->d_ff, out->max_seq_len);
        return MN_ERR_CONFIG;
    }
    if (out->n_layer > MN_MAX_LAYERS) {
        MN_LOG("mesanet: n_layer %zu > %d\n", out->n_layer, MN_MAX_LAYERS);
        return MN_ERR_CONFIG;
    }
    if (out->rope_theta > 0 && out->head_dim % 2) {
        MN_LOG("mesanet: RoPE needs an even head_dim (got %zu)\n", out->head_dim);
        return MN_ERR_CONFIG;
    }
    if (!(out->norm_eps > 0) || !(out->init_std > 0) || !(out->logit_softcap >= 0) ||
        out->rope_theta != out->rope_theta) {
        MN_LOG("mesanet: norm_eps and init_std must be > 0, logit_softcap >= 0\n");
        return MN_ERR_CONFIG;
    }
    if (!(out->mesa_cg_tol >= 0) || out->mesa_cg_tol >= 1 || out->mesa_chunk > 4096) {
        MN_LOG("mesanet: mesa_cg_tol must be in [0,1), mesa_chunk <= 4096\n");
        return MN_ERR_CONFIG;
    }
    if (out->mesa_cg_warm < 0 || out->mesa_cg_warm > 6) {
        MN_LOG("mesanet: mesa_cg_warm must be 0 (x0 = 0), 1 (Jacobi), 2, 3 or 4 (from the previous solution) or 5, 6 "
               "(Woodbury on the last 8, 16 tokens); got %d\n", out->mesa_cg_warm);
        return MN_ERR_CONFIG;
    }
    if (!(fabs(out->mesa_gate_bias) <= 50)) {   // NaN fails too; beyond 50 sigmoid is 0 or 1 in double
        MN_LOG("mesanet: mesa_gate_bias must be a finite number in [-50, 50]\n");
        return MN_ERR_CONFIG;
    }
    if (strlen(out->pattern) >= 256) { MN_LOG("mesanet: pattern longer than 255 characters\n"); return MN_ERR_CONFIG; }
    return mn__parse_pattern(out->pattern, out->n_layer, tmp);
}
#undef MN__DEF

// The parameter table, in checkpoint order: embeddings, blocks (the block's own tensors, then the
// mixer's), final norm, head. Called twice: m->tensors NULL only counts.
static size_t mn__build_table(mn_model* m) {
    const mn_config* c = &m->cfg;
    size_t n = 0, l, C = c->d_model;
    m->emb_idx = n; mn__tab_add(m, &n, "model.embeddings.weight", 2, c->vocab_size, C, 0, 0, MN__INIT_NORMAL);
    for (l = 0; l < c->n_layer; l++) {
        mn__pwalk w;
        memset(&w, 0, sizeof w);
        w.m = m; w.l = l; w.count = &n; w.scope = "";
        m->layer_first[l] = n;
        mn__block_par_walk(&w, NULL);
        MN_ASSERT(n - m->layer_first[l] == MN__BLOCK_TENSORS);
        w.scope = "attn.";
        mn__mixers[m->mixer[l]].params(&w, NULL);
    }
    m->norm_idx = n; mn__tab_add(m, &n, "model.norm.weight", 1, C, 0, 0, 0, MN__INIT_ONES);
    m->head_idx = n; mn__tab_add(m, &n, "lm_head.weight", 2, c->vocab_size, C, 0, 1, MN__INIT_NORMAL);
    return n;
}

// dt ~ logUniform[1e-3, 0.1] floored at 1e-4; dt_bias = softplus^-1(dt) = dt + log(-expm1(-dt)) (Mamba-2, GDN)
static mn_real mn__dt_bias_init(mn_rng* r) {
    double dt = exp(log(1e-3) + (log(0.1) - log(1e-3)) * mn_rng_uniform(r));
    if (dt < 1e-4) dt = 1e-4;
    return (mn_real)(dt + log(-expm1(-dt)));
}
// sLSTM bias (4, NH, Dh), gate-major i, f, z, o: forget 5 - 12 (j/(Dh-1))^0.3, the rest 0 (xLSTM)
static mn_real mn__slstm_bias_init(const mn_tensor_info* t, size_t e) {
    size_t per_gate = t->shape[1] * t->shape[2], Dh = t->shape[2], j = e % Dh;
    if (e / per_gate != 1) return 0;
    return (mn_real)(5.0 - 12.0 * pow(Dh > 1 ? (double)j / (double)(Dh - 1) : 0.0, 0.3));
}
// Element j of tensor t at init. Only the random kinds draw from rng, element by element in table
// order, so one seed gives one model.
static mn_real mn__init_value(const mn_tensor_info* t, size_t j, const mn_config* c, mn_rng* rng) {
    switch (t->init) {
    case MN__INIT_NORMAL: return (mn_real)(c->init_std * mn_rng_normal(rng));
    case MN__INIT_ONES: return (mn_real)1;
    case MN__INIT_LAMBDA: return (mn_real)log(exp(1.0 - 0.25) - 1.0);                 // lambda = 1 at init (fla)
    case MN__INIT_ALOG: return (mn_real)log(1e-4 + 16.0 * mn_rng_uniform(rng));       // A ~ U[0,16] (Mamba-2, GDN)
    case MN__INIT_DTBIAS: return mn__dt_bias_init(rng);
    case MN__INIT_SLSTM_BIAS: return mn__slstm_bias_init(t, j);
    case MN__INIT_MESA_GATE: return (mn_real)c->mesa_gate_bias;
    case MN__INIT_FGATE:                                // linspace(3, 6) over the heads (xLSTM)
        return (mn_real)(3.0 + 3.0 * (t->numel > 1 ? (double)j / (double)(t->numel - 1) : 0.0));
    case MN__INIT_RGLRU_A:                              // a^2 ~ U[0.81, 0.998] through a = exp(-softplus(a_param))
        return (mn_real)log(exp(-0.5 * log(0.81 + (0.998 - 0.81) * mn_rng_uniform(rng))) - 1.0);
    default: return (mn_real)0;                         // MN__INIT_ZEROS
    }
}
MNDEF int mn_model_init(mn_model* m, const mn_config* cfg) {
    mn_config rc;
    size_t i, j, off = 0;
    mn_rng rng;
    int err;
    memset(m, 0, sizeof(*m));
    if ((err = mn_config_resolve(&rc, cfg)) != MN_OK) return err;
    m->cfg = rc;
    snprintf(m->pattern_buf, sizeof m->pattern_buf, "%s", rc.pattern);
    m->cfg.pattern = m->pattern_buf;
    mn__parse_pattern(m->pattern_buf, rc.n_layer, m->mixer);
    m->n_tensors = mn__build_table(m);                       // pass 1: count
    m->tensors = (mn_tensor_info*)mn__calloc(m->n_tensors, sizeof(mn_tensor_info));
    if (!m->tensors) return MN_ERR_ALLOC;
    mn__build_table(m);                                      // pass 2: fill
    // Each tensor starts at a multiple of MN_PARAM_ALIGN elements. Packed back to back, the 5-float gate
    // biases of fla's 40M anchor left half of its weight matrices 4- or 8-byte aligned, and cuBLAS then
    // runs its align-1 kernels (48 of the 150 ms of a GPU training step in the profile, cuda/results.md).
    // The padding is zero in params, grads and AdamW moments and stays zero (no op writes it).
    for (i = 0; i < m->n_tensors; i++) {
        off = (off + MN_PARAM_ALIGN - 1) / MN_PARAM_ALIGN * MN_PARAM_ALIGN;
        m->tensors[i].offset = off; off += m->tensors[i].numel; m->n_trainable += m->tensors[i].numel;
    }
    m->n_params = off;
    m->params = (mn_real*)mn__calloc(off, sizeof(mn_real));
    m->grads = (mn_real*)mn__calloc(off, sizeof(mn_real));
    if (!m->params || !m->grads) { mn_model_free(m); return MN_ERR_ALLOC; }
    // init (fla _init_weights): N(0, init_std) for every matrix and the embedding, ones for norms
    mn_rng_seed(&rng, rc.seed);
    for (i = 0; i < m->n_tensors; i++) {
        mn_real* p = m->params + m->tensors[i].offset;
        for (j = 0; j < m->tensors[i].numel; j++)
            p[j] = mn__init_value(&m->tensors[i], j, &rc, &rng);
    }
    return MN_OK;
}

MNDEF void mn_model_free(mn_model* m) {
    if (m->tensors) MN_FREE(m->tensors);
    if (m->params) MN_FREE(m->params);
    if (m->grads) MN_FREE(m->grads);
    if (m->opt_m) MN_FREE(m->opt_m);        // opt_v lives in the same allocation
    if (m->acts) MN_FREE(m->acts);          // dacts too
    if (m->tokens) MN_FREE(m->tokens);      // targets too
    memset(m, 0, sizeof(*m));
}

// Lays out the activation block for (B,T): the head's pieces, then each layer's block (m->act_layer
// holds where each starts). Returns the elements needed.
static size_t mn__act_layout(mn_model* m, size_t B, size_t T) {
    mn__head_act top; mn__block_act blk;
    size_t off = mn__head_act_layout(&top, NULL, &m->cfg, B, T), l;
    for (l = 0; l < m->cfg.n_layer; l++) { m->act_layer[l] = off; off += mn__block_act_layout(&blk, NULL, m, l, B, T); }
    return off;
}
static int mn__ensure_acts(mn_model* m, size_t B, size_t T) {
    size_t need = mn__act_layout(m, B, T);
    // grow only: a smaller (B,T) is laid out inside the block it already has (variable lengths)
    if (need > m->act_cap || B * T > m->tok_cap) {
        mn_real* a = (mn_real*)mn__calloc(2 * need, sizeof(mn_real));
        int* tk = (int*)mn__calloc(2 * B * T, sizeof(int));
        if (!a || !tk) {
            if (a) MN_FREE(a);
            if (tk) MN_FREE(tk);
            mn__act_layout(m, m->act_B, m->act_T);          // restore the old layout
            MN_LOG("mesanet: cannot allocate activations for B=%zu T=%zu\n", B, T);
            return MN_ERR_ALLOC;
        }
        if (m->acts) MN_FREE(m->acts);
        if (m->tokens) MN_FREE(m->tokens);
        m->acts = a; m->dacts = a + need; m->act_cap = need;
        m->tokens = tk; m->targets = tk + B * T;
        m->tok_cap = B * T;
    }
    m->act_B = B; m->act_T = T;
    return MN_OK;
}

// The logits stay in the activation block until the next forward: evaluation reads them from there
// (argmax, accuracy) without a second copy.
MNDEF const mn_real* mn_logits(const mn_model* m) {
    mn__head_act top;
    if (!m->acts) return NULL;
    mn__head_act_layout(&top, m->acts, &m->cfg, m->act_B, m->act_T);
    return top.logits;
}

MNDEF size_t mn_flops_per_token(const mn_model* m, size_t T) {
    size_t i, l, mat = 0;
    double f;
    for (i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2 && i != m->emb_idx) mat += m->tensors[i].numel;  // every Linear
    f = 2.0 * (double)mat;
    for (l = 0; l < m->cfg.n_layer; l++) f += mn__mixers[m->mixer[l]].flops(&m->cfg, T);
    return (size_t)f;
}

// Forward pass over tokens (B,T). With targets (B,T) (-1 = no loss at that position) it also
// computes the mean cross-entropy into *loss and enables mn_backward. Inputs are validated
// before anything is touched.
MNDEF int mn_forward(mn_model* m, const int* tokens, const int* targets, size_t B, size_t T, mn_real* loss) {
    const mn_config* c;
    size_t N, C, F, V, L, i, l;
    int err;
    if (!m || !m->params || !tokens) {
        MN_LOG("mesanet: mn_forward needs an initialised model and tokens\n");
        return MN_ERR_STATE;
    }
    c = &m->cfg; N = B * T; C = c->d_model; F = c->d_ff; V = c->vocab_size; L = c->n_layer;
    if (B == 0 || T == 0 || T > c->max_seq_len || B > ((size_t)1 << 31) / T) {   // B*T may have wrapped: test B
        MN_LOG("mesanet: forward needs 0 < T <= max_seq_len (%zu), B > 0, B*T <= 2^31; got B=%zu T=%zu\n",
               c->max_seq_len, B, T);
        return MN_ERR_RANGE;
    }
    for (i = 0; i < N; i++) {
        if (tokens[i] < 0 || (size_t)tokens[i] >= V) {
            MN_LOG("mesanet: token id %d at %zu outside [0,%zu)\n", tokens[i], i, V);
            return MN_ERR_RANGE;
        }
        if (targets && (targets[i] < -1 || (targets[i] >= 0 && (size_t)targets[i] >= V))) {
            MN_LOG("mesanet: target id %d at %zu outside [-1,%zu)\n", targets[i], i, V); return MN_ERR_RANGE;
        }
    }
    if ((err = mn__ensure_acts(m, B, T)) != MN_OK) return err;
    memcpy(m->tokens, tokens, N * sizeof(int));
    m->have_loss = 0;
    mn__head_act top;
    mn__head_act_layout(&top, m->acts, c, B, T);
    mn_real *res = top.res, *logits = top.logits;
    mn_embedding_forward(res, tokens, m->params + m->tensors[m->emb_idx].offset, N, C);
    for (l = 0; l < L; l++) {
        mn_real* x = res + l * N * C;
        mn_real* y = res + (l + 1) * N * C;
        mn__block_par P; mn__block_act A;
        mn__block_point(m, l, m->params, &P);
        mn__block_act_layout(&A, m->acts + m->act_layer[l], m, l, B, T);
        mn_rmsnorm_forward(A.xn1, A.rstd1, x, P.attn_norm, N, C, c->norm_eps);
        mn__mixers[m->mixer[l]].forward(m, l, A.mo, A.xn1, A.mix, B, T);
        mn_residual_forward(A.x2, x, A.mo, N * C);
        mn_rmsnorm_forward(A.xn2, A.rstd2, A.x2, P.mlp_norm, N, C, c->norm_eps);
        mn_matmul_forward(A.gate, A.xn2, P.gate, NULL, N, C, F);
        mn_matmul_forward(A.up, A.xn2, P.up, NULL, N, C, F);
        mn_swiglu_forward(A.h, A.gate, A.up, N * F);
        mn_matmul_forward(y, A.h, P.down, NULL, N, F, C);
        mn_residual_forward(y, y, A.x2, N * C);
    }
    mn_rmsnorm_forward(top.xf, top.rstdf, res + L * N * C, m->params + m->tensors[m->norm_idx].offset, N, C,
                       c->norm_eps);
    mn_matmul_forward(logits, top.xf, m->params + m->tensors[m->head_idx].offset, NULL, N, C, V);
    if (targets) {
        mn_real* losses = top.losses;
        double sum = 0.0;
        memcpy(m->targets, targets, N * sizeof(int));
        mn_crossentropy_forward(losses, logits, targets, N, V, c->logit_softcap);
        m->n_valid = 0;
        for (i = 0; i < N; i++) if (targets[i] >= 0) { sum += losses[i]; m->n_valid++; }
        sum = m->n_valid ? sum / (double)m->n_valid : 0.0;
        if (loss) *loss = (mn_real)sum;
        if (sum != sum || sum > 1e300 || sum < -1e300) { MN_LOG("mesanet: loss is not finite\n"); return MN_ERR_NAN; }
        m->have_loss = 1;
    }
    return MN_OK;
}

MNDEF void mn_zero_grad(mn_model* m) { memset(m->grads, 0, m->n_params * sizeof(mn_real)); }

// Backward of the mean loss of the last mn_forward; accumulates into m->grads.
MNDEF int mn_backward(mn_model* m) {
    const mn_config* c;
    size_t B, T, N, C, F, V, L, i, l;
    if (!m || !m->have_loss) {
        MN_LOG("mesanet: mn_backward needs a successful mn_forward with targets first\n");
        return MN_ERR_STATE;
    }
    c = &m->cfg; B = m->act_B; T = m->act_T; N = B * T; C = c->d_model; F = c->d_ff; V = c->vocab_size; L = c->n_layer;
    memset(m->dacts, 0, m->act_cap * sizeof(mn_real));
    mn__head_act top, dtop;
    mn__head_act_layout(&top, m->acts, c, B, T);
    mn__head_act_layout(&dtop, m->dacts, c, B, T);
    mn_real *res = top.res, *dres = dtop.res;
    mn_real *hw = m->params + m->tensors[m->head_idx].offset, *nw = m->params + m->tensors[m->norm_idx].offset;
    // loss = mean over valid rows, so each valid row's loss gets weight 1/n_valid
    for (i = 0; i < N; i++) dtop.losses[i] = m->targets[i] >= 0 ? (mn_real)(1.0 / (double)m->n_valid) : (mn_real)0;
    mn_crossentropy_backward(dtop.logits, dtop.losses, top.logits, m->targets, N, V, c->logit_softcap);
    mn_matmul_backward(dtop.xf, m->grads + m->tensors[m->head_idx].offset, NULL, dtop.logits, top.xf, hw, N, C, V);
    mn_rmsnorm_backward(dres + L * N * C, m->grads + m->tensors[m->norm_idx].offset, dtop.xf, top.rstdf,
                        res + L * N * C, nw, N, C);
    for (l = L; l-- > 0;) {
        mn_real* dy = dres + (l + 1) * N * C;
        mn__block_par P, dP; mn__block_act A, dA;
        mn__block_point(m, l, m->params, &P);
        mn__block_point(m, l, m->grads, &dP);
        mn__block_act_layout(&A, m->acts + m->act_layer[l], m, l, B, T);
        mn__block_act_layout(&dA, m->dacts + m->act_layer[l], m, l, B, T);
        // forward: y = x2 + down(h), h = swiglu(gate(xn2), up(xn2)), xn2 = norm(x2)
        mn_residual_forward(dA.x2, dA.x2, dy, N * C);        // y = x2 + mlp: dy flows to x2 unchanged
        mn_matmul_backward(dA.h, dP.down, NULL, dy, A.h, P.down, N, F, C);
        mn_swiglu_backward(dA.gate, dA.up, dA.h, A.gate, A.up, N * F);
        mn_matmul_backward(dA.xn2, dP.gate, NULL, dA.gate, A.xn2, P.gate, N, C, F);
        mn_matmul_backward(dA.xn2, dP.up, NULL, dA.up, A.xn2, P.up, N, C, F);
        mn_rmsnorm_backward(dA.x2, dP.mlp_norm, dA.xn2, A.rstd2, A.x2, P.mlp_norm, N, C);
        // forward: x2 = x + mixer(xn1), xn1 = norm(x)
        mn_residual_backward(dres + l * N * C, dA.mo, dA.x2, N * C);
        mn__mixers[m->mixer[l]].backward(m, l, dA.xn1, dA.mo, A.xn1, A.mix, dA.mix, B, T);
        mn_rmsnorm_backward(dres + l * N * C, dP.attn_norm, dA.xn1, A.rstd1, res + l * N * C, P.attn_norm, N, C);
    }
    mn_embedding_backward(m->grads + m->tensors[m->emb_idx].offset, dres, m->tokens, N, C);
    return MN_OK;
}

// ---- inference: one token per call for n_seq sequences, O(1) work in T for recurrent mixers
// (attention keeps a KV cache of max_seq_len, or of W for sliding windows).
// One sequence's step temporaries (its slice of mn_state.scratch): the block's, then room for the
// largest mixer's.
typedef struct mn__step_temp {
    mn_real *xn, *mo, *rstd;   // (C), (C), (1) the norms' output, the mixer's (and the MLP's) output
    mn_real *gate, *up, *h;    // (F) the MLP
    mn_real* mix;              // the mixer's step temporaries
} mn__step_temp;
static size_t mn__step_temp_layout(mn__step_temp* a, mn_real* base, const mn_model* m) {
    size_t l, mx = 0, off = 0, C = m->cfg.d_model, F = m->cfg.d_ff;
    for (l = 0; l < m->cfg.n_layer; l++) { size_t s = mn__mixer_temp_size(m, l); if (s > mx) mx = s; }
    MN__PIECE(xn, C); MN__PIECE(mo, C); MN__PIECE(rstd, 1);
    MN__PIECE(gate, F); MN__PIECE(up, F); MN__PIECE(h, F);
    MN__PIECE(mix, mx);
    return off;
}
// Elements of the decoding state of n_seq sequences (mn_state_init's allocation), as the config now sizes it.
static size_t mn__state_elems(const mn_model* m, size_t n_seq) {
    size_t l, total = 0;
    mn__step_temp tmp;
    for (l = 0; l < m->cfg.n_layer; l++) total += n_seq * mn__mixer_state_size(m, l);
    return total + n_seq * (m->cfg.d_model + m->cfg.vocab_size + mn__step_temp_layout(&tmp, NULL, m));
}
MNDEF int mn_state_init(mn_state* s, const mn_model* m, size_t n_seq) {
    const mn_config* c;
    size_t l, total = 0, off = 0, C, per_seq_scratch, per_seq;
    if (!s) { MN_LOG("mesanet: mn_state_init: NULL state\n"); return MN_ERR_STATE; }
    memset(s, 0, sizeof(*s));
    if (!m || !m->params) { MN_LOG("mesanet: mn_state_init needs an initialised model\n"); return MN_ERR_STATE; }
    c = &m->cfg; C = c->d_model;
    { mn__step_temp tmp; per_seq_scratch = mn__step_temp_layout(&tmp, NULL, m); }
    if (n_seq == 0 || n_seq > (1u << 20)) { MN_LOG("mesanet: n_seq must be in [1, 2^20]\n"); return MN_ERR_CONFIG; }
    // each size is bounded by mn_config_resolve, their sum over layers times n_seq is not: check before use
    per_seq = C + c->vocab_size + per_seq_scratch;
    for (l = 0; l < c->n_layer && per_seq <= SIZE_MAX / 32; l++) per_seq += mn__mixer_state_size(m, l);
    if (per_seq > SIZE_MAX / 32 / n_seq) {
        MN_LOG("mesanet: decoding state for %zu sequences too large\n", n_seq);
        return MN_ERR_ALLOC;
    }
    total = mn__state_elems(m, n_seq);
    s->mem = (mn_real*)mn__calloc(total, sizeof(mn_real));
    if (!s->mem) return MN_ERR_ALLOC;
    s->bytes = total * sizeof(mn_real);
    s->n_seq = n_seq;
    for (l = 0; l < c->n_layer; l++) { s->layer[l] = s->mem + off; off += n_seq * mn__mixer_state_size(m, l); }
    s->x = s->mem + off; off += n_seq * C;
    s->logits = s->mem + off; off += n_seq * c->vocab_size;
    s->scratch = s->mem + off;
    s->scratch_per_seq = per_seq_scratch;
    return MN_OK;
}
MNDEF double mn_state_cg_stats(const mn_model* m, const mn_state* s, double* solves) {
    size_t l, n;
    double it = 0, so = 0;
    for (l = 0; l < m->cfg.n_layer; l++) {
        const mn__mixer_def* md = &mn__mixers[m->mixer[l]];
        size_t per = mn__mixer_state_size(m, l);
        if (!md->cg_count) continue;                       // only Mesa layers solve systems
        for (n = 0; n < s->n_seq; n++) { double sv; it += md->cg_count(&m->cfg, s->layer[l] + n * per, &sv); so += sv; }
    }
    if (solves) *solves = so;
    return so > 0 ? it / so : 0.0;
}
MNDEF void mn_state_reset(mn_state* s) { memset(s->mem, 0, s->bytes); s->pos = 0; }
MNDEF void mn_state_free(mn_state* s) { if (s->mem) MN_FREE(s->mem); memset(s, 0, sizeof(*s)); }

// Consumes tokens (n_seq) at position s->pos and writes logits (n_seq,V). The same math as
// mn_forward restricted to the newest token; tests check the two agree position by position.
MNDEF int mn_step(mn_model* m, mn_state* s, const int* tokens, mn_real* logits) {
    const mn_config* c;
    size_t C, F, V, l;
    long long n;
    if (!m || !m->params || !s || !s->mem || s->n_seq == 0 || !tokens || !logits) {
        MN_LOG("mesanet: mn_step needs an initialised model, a state from mn_state_init, tokens and logits\n");
        return MN_ERR_STATE;
    }
    c = &m->cfg; C = c->d_model; F = c->d_ff; V = c->vocab_size;
    // the layers' state sizes follow the config (a Mesa layer keeps its Woodbury window only for mesa_cg_warm 5
    // and 6): a state made under other settings would be read out of its bounds
    if (mn__state_elems(m, s->n_seq) * sizeof(mn_real) != s->bytes) {
        MN_LOG("mesanet: mn_step: the state was made for other settings (mesa_cg_warm changed?); mn_state_init it "
               "again\n");
        return MN_ERR_STATE;
    }
    for (n = 0; n < (long long)s->n_seq; n++)
        if (tokens[n] < 0 || (size_t)tokens[n] >= V) {
            MN_LOG("mesanet: token id %d outside [0,%zu)\n", tokens[n], V);
            return MN_ERR_RANGE;
        }
    for (l = 0; l < c->n_layer; l++)
        if (mn__mixers[m->mixer[l]].kv_cache && s->pos >= c->max_seq_len) {
            MN_LOG("mesanet: position %zu reaches max_seq_len %zu (attention KV cache full)\n", s->pos, c->max_seq_len);
            return MN_ERR_RANGE;
        }
    // Sequences are independent: one thread each (and inside, every op runs on that one thread,
    // which for single-token work is faster than waking a team per op).
    MN__OMP_FOR
    for (n = 0; n < (long long)s->n_seq; n++) {
        mn_real* x = s->x + (size_t)n * C;
        mn__step_temp X;
        size_t i, ll;
        mn__step_temp_layout(&X, s->scratch + (size_t)n * s->scratch_per_seq, m);
        mn_embedding_forward(x, tokens + n, m->params + m->tensors[m->emb_idx].offset, 1, C);
        for (ll = 0; ll < c->n_layer; ll++) {
            mn__block_par P;
            mn__block_point(m, ll, m->params, &P);
            mn_rmsnorm_forward(X.xn, X.rstd, x, P.attn_norm, 1, C, c->norm_eps);
            mn__mixers[m->mixer[ll]].step(m, ll, X.mo, s->layer[ll] + (size_t)n * mn__mixer_state_size(m, ll), X.mix,
                                          X.xn, s->pos);
            for (i = 0; i < C; i++) x[i] += X.mo[i];
            mn_rmsnorm_forward(X.xn, X.rstd, x, P.mlp_norm, 1, C, c->norm_eps);
            mn_matmul_forward(X.gate, X.xn, P.gate, NULL, 1, C, F);
            mn_matmul_forward(X.up, X.xn, P.up, NULL, 1, C, F);
            mn_swiglu_forward(X.h, X.gate, X.up, F);
            mn_matmul_forward(X.mo, X.h, P.down, NULL, 1, F, C);
            for (i = 0; i < C; i++) x[i] += X.mo[i];
        }
        mn_rmsnorm_forward(X.xn, X.rstd, x, m->params + m->tensors[m->norm_idx].offset, 1, C, c->norm_eps);
        mn_matmul_forward(logits + (size_t)n * V, X.xn, m->params + m->tensors[m->head_idx].offset, NULL, 1, C, V);
    }
    s->pos++;
    return MN_OK;
}

// >>optim
// defines: mn_clip_grad_norm, mn_adamw_update, mn_adamw_step, mn_lr_schedule

// Global L2 norm over all gradients (double accumulation); scales them to max_norm when larger.
// Returns the norm before clipping; a non-finite norm leaves the gradients untouched.
MNDEF double mn_clip_grad_norm(mn_model* m, double max_norm) {
    double ss = 0.0, norm; size_t i;
    for (i = 0; i < m->n_params; i++) ss += (double)m->grads[i] * m->grads[i];
    norm = sqrt(ss);
    if (norm != norm || norm > 1e300) return NAN;
    if (max_norm > 0 && norm > max_norm) {
        mn_real s = (mn_real)(max_norm / norm);
        for (i = 0; i < m->n_params; i++) m->grads[i] *= s;
    }
    return norm;
}

// AdamW (Loshchilov & Hutter 2019) with PyTorch's order: decoupled decay p *= 1 - lr wd, then
// p -= lr mhat / (sqrt(vhat) + eps) with bias-corrected moments; t is the 1-based step count.
MNDEF void mn_adamw_update(mn_real* p, const mn_real* g, mn_real* m, mn_real* v, size_t n, double lr, double beta1,
                           double beta2, double eps, double wd, uint64_t t) {
    double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
    long long i;
    MN__OMP_FOR                                  // elementwise: any split gives the same bits
    for (i = 0; i < (long long)n; i++) {
        double gi = g[i];
        double mi = beta1 * m[i] + (1.0 - beta1) * gi, vi = beta2 * v[i] + (1.0 - beta2) * gi * gi;
        m[i] = (mn_real)mi; v[i] = (mn_real)vi;
        p[i] = (mn_real)(p[i] * (1.0 - lr * wd) - lr * (mi / bc1) / (sqrt(vi / bc2) + eps));
    }
}
// One optimizer step over the whole model: weight decay only where the table says so (matrices;
// not norms, embeddings or biases). The moments are allocated on the first call (one block).
MNDEF int mn_adamw_step(mn_model* m, double lr, const mn_adamw* hp) {
    mn_adamw h = { 0.9, 0.98, 1e-8, 0.1 };
    size_t i;
    if (hp) {
        if (hp->beta1 != 0) h.beta1 = hp->beta1;
        if (hp->beta2 != 0) h.beta2 = hp->beta2;
        if (hp->eps != 0) h.eps = hp->eps;
        h.weight_decay = hp->weight_decay;     // 0 is a meaningful value here: no decay
    }
    if (!m->opt_m) {
        m->opt_m = (mn_real*)mn__calloc(2 * m->n_params, sizeof(mn_real));
        if (!m->opt_m) return MN_ERR_ALLOC;
        m->opt_v = m->opt_m + m->n_params;
    }
    m->opt_step++;
    for (i = 0; i < m->n_tensors; i++) {
        const mn_tensor_info* t = &m->tensors[i];
        mn_adamw_update(m->params + t->offset, m->grads + t->offset, m->opt_m + t->offset, m->opt_v + t->offset,
                        t->numel, lr, h.beta1, h.beta2, h.eps, t->decay ? h.weight_decay : 0.0, m->opt_step);
    }
    return MN_OK;
}
// Linear warmup from 0 over `warmup` steps, then cosine decay from lr_max to lr_min at `total`.
MNDEF double mn_lr_schedule(size_t step, size_t warmup, size_t total, double lr_max, double lr_min) {
    if (step < warmup) return lr_max * (double)(step + 1) / (double)warmup;
    if (step >= total || total <= warmup) return lr_min;
    double r = (double)(step - warmup) / (double)(total - warmup);
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + cos(3.141592653589793 * r));
}

// >>sample
// Samples a token from logits (V): temperature <= 0 is argmax; top_k (0 = off) keeps the k most
// likely; top_p (0 or >= 1 = off) keeps the smallest set whose probability reaches top_p.
// scratch (2V) is caller-provided so nothing allocates. Returns a token id in [0, V), or a negative
// MN_ERR_* when V is 0 or too large for an int, or logits, scratch or (temperature > 0) rng is NULL.
static int mn__cmp_desc(const void* a, const void* b) {
    mn_real x = *(const mn_real*)a, y = *(const mn_real*)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
MNDEF int mn_sample(const mn_real* logits, size_t V, double temperature, size_t top_k, double top_p, mn_rng* rng,
                    mn_real* scratch) {
    size_t i, best = 0;
    double mx = -INFINITY, sum = 0.0, cut = 0.0, u, acc = 0.0;
    mn_real *p = scratch, *sorted;
    if (V == 0 || V > (size_t)INT32_MAX || !logits || !scratch || (temperature > 0 && !rng)) {
        MN_LOG("mesanet: mn_sample needs 0 < V < 2^31, logits, scratch and (temperature > 0) rng; got V=%zu\n", V);
        return MN_ERR_RANGE;
    }
    sorted = scratch + V;
    for (i = 0; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return (int)best;
    for (i = 0; i < V; i++) if (logits[i] / temperature > mx) mx = logits[i] / temperature;
    for (i = 0; i < V; i++) { p[i] = (mn_real)exp(logits[i] / temperature - mx); sum += p[i]; }
    for (i = 0; i < V; i++) p[i] = (mn_real)(p[i] / sum);
    if ((top_k > 0 && top_k < V) || (top_p > 0 && top_p < 1)) {
        // the threshold probability below which tokens are dropped
        memcpy(sorted, p, V * sizeof(mn_real));
        qsort(sorted, V, sizeof(mn_real), mn__cmp_desc);
        size_t keep = (top_k > 0 && top_k < V) ? top_k : V;
        if (top_p > 0 && top_p < 1) {
            double c = 0.0; size_t k;
            for (k = 0; k < keep; k++) { c += sorted[k]; if (c >= top_p) { keep = k + 1; break; } }
        }
        cut = sorted[keep - 1];
        sum = 0.0;
        for (i = 0; i < V; i++) { if (p[i] < cut) p[i] = 0; sum += p[i]; }
        for (i = 0; i < V; i++) p[i] = (mn_real)(p[i] / sum);
    }
    u = mn_rng_uniform(rng);
    for (i = 0; i < V; i++) { acc += p[i]; if (u < acc) return (int)i; }
    return (int)best;   // rounding left u above the total: fall back to the mode
}

// >>json
// A minimal, bounds-checked JSON reader: enough for safetensors headers and config.json.
// It never reads past `end`, limits nesting depth, and reports failure instead of guessing.
typedef struct mn__js { const char* p; const char* end; int depth; } mn__js;
static void mn__js_ws(mn__js* j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}
static int mn__js_peek(mn__js* j) { mn__js_ws(j); return j->p < j->end ? (unsigned char)*j->p : -1; }
static int mn__js_expect(mn__js* j, char c) { if (mn__js_peek(j) != (unsigned char)c) return -1; j->p++; return 0; }
// Reads a string into out (cap bytes incl. NUL; NULL to skip). \uXXXX outside ASCII becomes '?'.
static int mn__js_str(mn__js* j, char* out, size_t cap) {
    size_t n = 0;
    if (mn__js_expect(j, '"') < 0) return -1;
    while (j->p < j->end && *j->p != '"') {
        char ch = *j->p++;
        if ((unsigned char)ch < 0x20) return -1;
        if (ch == '\\') {
            if (j->p >= j->end) return -1;
            ch = *j->p++;
            switch (ch) {
            case '"': case '\\': case '/': break;
            case 'b': ch = '\b'; break; case 'f': ch = '\f'; break; case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break; case 't': ch = '\t'; break;
            case 'u': {
                unsigned v = 0; int i;
                if (j->end - j->p < 4) return -1;
                for (i = 0; i < 4; i++) {
                    char h = *j->p++;
                    int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99;   // 99: not a hex digit
                    v = v * 16 + (unsigned)d;
                    if (v > 0xFFFF) return -1;
                }
                ch = v < 0x80 ? (char)v : '?';
                break;
            }
            default: return -1;
            }
        }
        if (out) { if (n + 1 >= cap) return -1; out[n] = ch; }
        n++;
    }
    if (j->p >= j->end) return -1;
    j->p++;
    if (out) out[n] = 0;
    return 0;
}
static int mn__js_num(mn__js* j, double* out) {
    char tmp[64]; size_t n = 0; char* e;
    mn__js_ws(j);
    while (j->p < j->end && n + 1 < sizeof tmp && strchr("+-0123456789.eE", *j->p) && *j->p) tmp[n++] = *j->p++;
    tmp[n] = 0;
    if (n == 0) return -1;
    *out = strtod(tmp, &e);
    return *e ? -1 : 0;
}
static int mn__js_skip(mn__js* j) {
    int c = mn__js_peek(j);
    if (c == '"') return mn__js_str(j, NULL, 0);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        if (++j->depth > 32) return -1;
        j->p++;
        if (mn__js_peek(j) == close) { j->p++; j->depth--; return 0; }
        for (;;) {
            if (c == '{') { if (mn__js_str(j, NULL, 0) < 0 || mn__js_expect(j, ':') < 0) return -1; }
            if (mn__js_skip(j) < 0) return -1;
            if (mn__js_peek(j) == ',') { j->p++; continue; }
            if (mn__js_expect(j, close) < 0) return -1;
            j->depth--;
            return 0;
        }
    }
    if (c == 't' || c == 'f' || c == 'n') {
        const char* w = c == 't' ? "true" : c == 'f' ? "false" : "null";
        size_t n = strlen(w);
        if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0) return -1;
        j->p += n; return 0;
    }
    { double d; return mn__js_num(j, &d); }
}
// Reads a non-negative integer (as JSON number) that must fit `max`.
static int mn__js_uint(mn__js* j, size_t max, size_t* out) {
    double d;
    if (mn__js_num(j, &d) < 0 || !(d >= 0) || d > (double)max || d != floor(d)) return -1;
    *out = (size_t)d;
    return 0;
}

// >>io
// defines: mn_safetensors_parse, mn_config_parse_json, mn_save, mn_load
//
// A checkpoint is a folder D holding one set of files:
//   config.json            fla's config keys (so `AutoModelForCausalLM.from_pretrained(D)` finds the model)
//                          plus mesanet_* keys for what fla cannot express;
//   model.safetensors      the weights under fla's tensor names, Linear weights [out, in];
//   optimizer.safetensors  (when saved with an mn_train_meta) the AdamW moments "m.<name>", "v.<name>"
//                          and, as metadata, opt_step, step, rng, extra0..3 and the caller's notes.
// safetensors: u64 little-endian header length n, n bytes of JSON, then the tensor bytes, which the
// header's data_offsets must cover exactly once (no gap, no overlap, nothing after the last tensor).
// This code assumes a little-endian host (x86-64, ARM64).
//
// The set is one unit. Every file of it carries the same stamp "<step>-<16 hex digits>" (config.json key
// "mesanet_stamp", safetensors metadata "mesanet_stamp"), and mn_load refuses files whose stamps differ
// (a mixed set) instead of resuming from one. Files without any stamp (written before stamps existed, or
// by fla's save_pretrained) still load, with a note that they could not be checked against each other.
//
// What mn_save guarantees:
//   * it never writes non-finite parameters or moments: MN_ERR_NAN, and D is not touched;
//   * swap tier (MN_SAVE_ATOMIC == 1: a POSIX 2008 build, i.e. gcc/clang's default or
//     -D_POSIX_C_SOURCE=200809L): the whole set is written into a new folder beside D, named
//     ".<name of D>.mn-save-<pid>-<id>", every file and that folder are fsync'ed, and the folder is then
//     exchanged with D in one step (Linux renameat2 RENAME_EXCHANGE), the parent fsync'ed and the old set
//     deleted. Whatever else D holds (loss.csv, a lock file, ...) is hard-linked into the new folder before
//     the exchange, or moved across after it where a link is impossible (sub-folders), so it survives. A
//     kill at any moment leaves D holding the old set or the new one, each whole. A failure (disk full,
//     file too large) deletes the new folder and returns MN_ERR_IO with the system's reason; D is untouched.
//     A save removes the temporary folders that dead processes left beside D, deleting only the
//     checkpoint files and verified links in them (anything else is moved back into D, or left in place);
//     it keeps them all while D holds no config.json, as one of them may then be the only copy.
//     Where the exchange is missing (not Linux, a file system without it, or MN_NO_EXCHANGE defined), D is
//     renamed aside and the new folder renamed to D: a crash between the two leaves no D (mn_load says where
//     to look). MN_NO_POSIX selects the in-place tier below.
//   * in-place tier (a plain C99 build without POSIX, or D a symbolic link, ".", "/"): each file is written
//     as <file>.tmp and renamed over the old one in turn; a crash between the renames leaves a mixed set,
//     which mn_load refuses. Either way mn_save needs D to exist.
// A weights-only save (meta NULL) drops an older optimizer.safetensors: it belonged to other weights.
// MN_SAVE_HOOK(stage), empty unless the includer defines it, runs at each numbered step of a save (tests
// kill the process there): 1 started, 2 config.json written, 3/4 model.safetensors header/all written,
// 5/6 the same for optimizer.safetensors, 7 before the swap (or first rename), 8 after it, 9 done.
//
// mn_load checks the whole set before it allocates the model: config.json parsed and resolved; each file's
// tensor list equal to that model's (every tensor there with its shape, nothing else), its data section
// covered exactly, its size what the header says; the stamps equal; the optimizer's metadata well-formed
// numbers. Only then does it allocate, read and convert, refusing non-finite values (and negative second
// moments). *m is written only on success.

#include <errno.h>
#include <stdarg.h>
#include <time.h>
#if !defined(MN_NO_POSIX) && (defined(__unix__) || defined(__unix) || defined(__APPLE__))
#include <unistd.h>
#if defined(_POSIX_VERSION) && _POSIX_VERSION >= 200809L
#define MN__POSIX 1
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#endif
#endif
#ifndef MN__POSIX
#define MN__POSIX 0
#endif
#define MN_SAVE_ATOMIC MN__POSIX
#if MN__POSIX && defined(__linux__) && defined(SYS_renameat2) && !defined(MN_NO_EXCHANGE)
#define MN__EXCHANGE 1
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef __cplusplus   // (C++ compilers define _GNU_SOURCE, which declares it)
// every Linux C library has it, but strict feature macros may hide its prototype; repeating it is harmless in C
long syscall(long number, ...);
#endif
#else
#define MN__EXCHANGE 0
#endif
#ifndef MN_SAVE_HOOK
#define MN_SAVE_HOOK(stage) ((void)(stage))
#endif
#define MN__PATH_CAP 2048
#define MN__META_CAP 4096           // "key\tvalue\n" lines of one file's __metadata__
#define MN__CONFIG_MAX (1u << 20)   // config.json larger than this is not one

static size_t mn__dtype_size(int dt) { return dt == MN_DT_F64 ? 8 : dt == MN_DT_F32 ? 4 : 2; }
static const char* mn__errno_str(int e) { return e > 0 ? strerror(e) : "unknown error"; }

// Appends printf output to b (cap bytes); returns the new length, or cap when it did not fit.
static size_t mn__cat(char* b, size_t cap, size_t len, const char* fmt, ...) {
    va_list ap;
    int n;
    if (len >= cap) return cap;
    va_start(ap, fmt);
    n = vsnprintf(b + len, cap - len, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= cap - len ? cap : len + (size_t)n;
}
// dir + "/" + file + suffix into out; MN_ERR_IO when it does not fit.
static int mn__path(char* out, size_t cap, const char* dir, const char* file, const char* suffix) {
    int n = snprintf(out, cap, "%s/%s%s", dir, file, suffix);
    if (n < 0 || (size_t)n >= cap) { MN_LOG("mesanet: path too long: %s/%s%s\n", dir, file, suffix); return MN_ERR_IO; }
    return MN_OK;
}
static int mn__finite(double v) { return v - v == 0; }   // false for NaN and +-Inf

// by data_offsets, ties by end: the coverage check below walks the tensors in file order
static int mn__cmp_offset(const void* a, const void* b) {
    const mn_tensor_info *x = (const mn_tensor_info*)a, *y = (const mn_tensor_info*)b;
    size_t ex = x->offset + x->numel * mn__dtype_size(x->dtype), ey = y->offset + y->numel * mn__dtype_size(y->dtype);
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : ex < ey ? -1 : ex > ey ? 1 : 0;
}

// The parser behind mn_safetensors_parse: buf holds at least the 8-byte length and the header (avail
// bytes), file_len is the size of the whole file (the data section is checked against it, not read);
// what names the file in messages.
static int mn__st_parse(const char* what, const unsigned char* buf, size_t avail, size_t file_len, mn_tensor_info* out,
                        size_t max_out, size_t* n_out, size_t* data_start, char* meta, size_t meta_cap) {
    uint64_t hlen = 0; size_t i, n = 0, mlen = 0, pos;
    mn__js j;
    *n_out = 0; *data_start = 0;
    if (meta && meta_cap) meta[0] = 0;
    if (avail < 8 || file_len < 8) {
        MN_LOG("mesanet: %s: shorter than the 8-byte safetensors header\n", what);
        return MN_ERR_FORMAT;
    }
    for (i = 0; i < 8; i++) hlen |= (uint64_t)buf[i] << (8 * i);
    if (hlen < 2 || hlen > file_len - 8 || hlen > avail - 8 || hlen > (100u << 20)) {
        MN_LOG("mesanet: %s: safetensors header size %llu does not fit the file (%zu bytes)\n", what,
               (unsigned long long)hlen, file_len);
        return MN_ERR_FORMAT;
    }
    j.p = (const char*)buf + 8; j.end = j.p + hlen; j.depth = 0;
    *data_start = 8 + (size_t)hlen;
    if (mn__js_expect(&j, '{') < 0) goto bad;
    if (mn__js_peek(&j) == '}') { j.p++; goto done; }
    for (;;) {
        char key[128];
        if (mn__js_str(&j, key, sizeof key) < 0 || mn__js_expect(&j, ':') < 0) goto bad;
        if (strcmp(key, "__metadata__") == 0) {
            if (mn__js_expect(&j, '{') < 0) goto bad;
            if (mn__js_peek(&j) == '}') j.p++;
            else for (;;) {
                char k[64], v[2048]; size_t c;
                if (mn__js_str(&j, k, sizeof k) < 0 || mn__js_expect(&j, ':') < 0 || mn__js_str(&j, v, sizeof v) < 0)
                    goto bad;
                // one line per entry: a tab or newline inside a key or value would split it
                for (c = 0; k[c]; c++) if (k[c] == '\t' || k[c] == '\n') k[c] = ' ';
                for (c = 0; v[c]; c++) if (v[c] == '\t' || v[c] == '\n') v[c] = ' ';
                if (meta && mlen + strlen(k) + strlen(v) + 3 < meta_cap)
                    mlen += (size_t)sprintf(meta + mlen, "%s\t%s\n", k, v);
                if (mn__js_peek(&j) == ',') { j.p++; continue; }
                if (mn__js_expect(&j, '}') < 0) goto bad;
                break;
            }
        } else {
            mn_tensor_info t; size_t b = 0, e = 0, numel = 1; int got = 0;
            memset(&t, 0, sizeof t);
            t.dtype = -1;
            if (strlen(key) >= sizeof t.name) goto bad;
            strcpy(t.name, key);
            if (mn__js_expect(&j, '{') < 0) goto bad;
            for (;;) {
                char f[32];
                if (mn__js_str(&j, f, sizeof f) < 0 || mn__js_expect(&j, ':') < 0) goto bad;
                if (strcmp(f, "dtype") == 0) {
                    char d[16];
                    if (mn__js_str(&j, d, sizeof d) < 0) goto bad;
                    t.dtype = !strcmp(d, "F32") ? MN_DT_F32 : !strcmp(d, "F64") ? MN_DT_F64
                            : !strcmp(d, "BF16") ? MN_DT_BF16 : !strcmp(d, "F16") ? MN_DT_F16 : -2;
                    if (t.dtype == -2) {
                        MN_LOG("mesanet: %s: tensor %s has unsupported dtype %s\n", what, key, d);
                        return MN_ERR_FORMAT;
                    }
                    got |= 1;
                } else if (strcmp(f, "shape") == 0) {
                    if (mn__js_expect(&j, '[') < 0) goto bad;
                    if (mn__js_peek(&j) == ']') j.p++;
                    else for (;;) {
                        size_t d;
                        if (t.ndim >= 4 || mn__js_uint(&j, (size_t)1 << 40, &d) < 0) goto bad;
                        t.shape[t.ndim++] = d;
                        if (d && numel > ((size_t)1 << 40) / d) goto bad;   // overflow guard
                        numel *= d;
                        if (mn__js_peek(&j) == ',') { j.p++; continue; }
                        if (mn__js_expect(&j, ']') < 0) goto bad;
                        break;
                    }
                    got |= 2;
                } else if (strcmp(f, "data_offsets") == 0) {
                    if (mn__js_expect(&j, '[') < 0 || mn__js_uint(&j, file_len, &b) < 0 || mn__js_expect(&j, ',') < 0 ||
                        mn__js_uint(&j, file_len, &e) < 0 || mn__js_expect(&j, ']') < 0) goto bad;
                    got |= 4;
                } else if (mn__js_skip(&j) < 0) goto bad;
                if (mn__js_peek(&j) == ',') { j.p++; continue; }
                if (mn__js_expect(&j, '}') < 0) goto bad;
                break;
            }
            if (got != 7 || b > e || e > file_len - *data_start || e - b != numel * mn__dtype_size(t.dtype)) {
                MN_LOG("mesanet: %s: entry %s is incomplete or its data_offsets do not match its shape/file size\n",
                       what, key);
                return MN_ERR_FORMAT;
            }
            t.offset = b; t.numel = numel;
            if (n >= max_out) { MN_LOG("mesanet: %s: more than %zu tensors\n", what, max_out); return MN_ERR_FORMAT; }
            for (i = 0; i < n; i++)
                if (!strcmp(out[i].name, t.name)) {
                    MN_LOG("mesanet: %s: duplicate tensor %s\n", what, t.name);
                    return MN_ERR_FORMAT;
                }
            out[n++] = t;
        }
        if (mn__js_peek(&j) == ',') { j.p++; continue; }
        if (mn__js_expect(&j, '}') < 0) goto bad;
        break;
    }
done:
    mn__js_ws(&j);
    if (j.p != j.end) goto bad;
    // every byte of the data section belongs to exactly one tensor (the format's rule: no holes, no
    // overlaps, nothing after); a header whose length is off by one byte fails here
    qsort(out, n, sizeof(mn_tensor_info), mn__cmp_offset);
    for (i = 0, pos = 0; i < n; i++) {
        if (out[i].offset != pos) {
            if (out[i].offset < pos)
                MN_LOG("mesanet: %s: tensors %s and %s overlap\n", what, out[i - 1].name, out[i].name);
            else MN_LOG("mesanet: %s: data bytes [%zu, %zu) belong to no tensor\n", what, pos, out[i].offset);
            return MN_ERR_FORMAT;
        }
        pos += out[i].numel * mn__dtype_size(out[i].dtype);
    }
    if (pos != file_len - *data_start) {
        MN_LOG("mesanet: %s: the data section has %zu bytes, its tensors %zu\n", what, file_len - *data_start, pos);
        return MN_ERR_FORMAT;
    }
    *n_out = n;
    return MN_OK;
bad:
    MN_LOG("mesanet: %s: malformed safetensors JSON header near byte %ld\n", what, (long)(j.p - (const char*)buf));
    return MN_ERR_FORMAT;
}

// Parses a safetensors buffer (len bytes: the whole file). Fills out[0..*n_out) with name, shape, dtype,
// byte offset (from the start of the data section) and numel, in file order; meta (meta_cap bytes)
// receives "key\tvalue\n" lines of __metadata__. Every offset is checked against the buffer and the
// tensors must cover the data section exactly; returns MN_OK or MN_ERR_FORMAT.
MNDEF int mn_safetensors_parse(const unsigned char* buf, size_t len, mn_tensor_info* out, size_t max_out, size_t* n_out,
                               size_t* data_start, char* meta, size_t meta_cap) {
    if (!buf || !out || !n_out || !data_start) {
        MN_LOG("mesanet: mn_safetensors_parse: NULL argument\n");
        return MN_ERR_FORMAT;
    }
    return mn__st_parse("safetensors", buf, len, len, out, max_out, n_out, data_start, meta, meta_cap);
}

static int mn__meta_get(const char* meta, const char* key, char* out, size_t cap) {
    size_t kl = strlen(key);
    const char* p = meta;
    while (p && *p) {
        const char* nl = strchr(p, '\n');
        if (!nl) break;
        if (strncmp(p, key, kl) == 0 && p[kl] == '\t') {
            size_t vl = (size_t)(nl - p - (ptrdiff_t)kl - 1);
            if (vl + 1 > cap) return -1;
            memcpy(out, p + kl + 1, vl); out[vl] = 0;
            return 0;
        }
        p = nl + 1;
    }
    return -1;
}
// A metadata entry that must be a decimal uint64 (digits only, no sign, no overflow): 0 ok, -1 absent, -2 not one.
static int mn__meta_u64(const char* meta, const char* key, uint64_t* out) {
    char v[64]; size_t i; uint64_t x = 0;
    if (mn__meta_get(meta, key, v, sizeof v)) return -1;
    if (!v[0] || strlen(v) > 20) return -2;
    for (i = 0; v[i]; i++) {
        unsigned d = (unsigned)(v[i] - '0');
        if (d > 9 || x > (UINT64_MAX - d) / 10) return -2;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
}
// A metadata entry that must be a whole number in strtod's syntax (nan and inf allowed): 0, -1 absent, -2 not one.
static int mn__meta_f64(const char* meta, const char* key, double* out) {
    char v[64], *e;
    if (mn__meta_get(meta, key, v, sizeof v)) return -1;
    *out = strtod(v, &e);
    return v[0] && !*e ? 0 : -2;
}
// Escapes s for a JSON string (no quotes added) into out (cap); returns the length, cap if it did not fit.
static size_t mn__json_esc(char* out, size_t cap, const char* s) {
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { if (n + 2 >= cap) return cap; out[n++] = '\\'; out[n++] = (char)c; }
        else if (c < 0x20) { if (n + 6 >= cap) return cap; n += (size_t)sprintf(out + n, "\\u%04x", c); }
        else { if (n + 1 >= cap) return cap; out[n++] = (char)c; }
    }
    if (n < cap) out[n] = 0;
    return n;
}

// ---- writing --------------------------------------------------------------------------------
// One output file: POSIX writes through a descriptor (so it can fsync), plain C99 through stdio.
// err keeps the errno of the first failure (-1 when the C library gave none).
typedef struct mn__out { FILE* f; int fd; int err; const char* path; } mn__out;
static int mn__out_open(mn__out* o, const char* path, int excl) {
    o->f = NULL; o->fd = -1; o->err = 0; o->path = path;
    errno = 0;
#if MN__POSIX
    o->fd = open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC), 0666);
    if (o->fd < 0) { MN_LOG("mesanet: cannot create %s: %s\n", path, strerror(errno)); return MN_ERR_IO; }
#else
    MN_UNUSED(excl);
    if (!(o->f = fopen(path, "wb"))) {
        MN_LOG("mesanet: cannot create %s: %s\n", path, mn__errno_str(errno));
        return MN_ERR_IO;
    }
#endif
    return MN_OK;
}
static void mn__out_put(mn__out* o, const void* data, size_t n) {
    const char* c = (const char*)data;
    if (o->err) return;
#if MN__POSIX
    while (n > 0) {
        ssize_t w = write(o->fd, c, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { o->err = w < 0 ? errno : ENOSPC; return; }
        c += w; n -= (size_t)w;
    }
#else
    errno = 0;
    if (fwrite(c, 1, n, o->f) != n) o->err = errno ? errno : -1;
#endif
}
// Flushes the file to the disk (POSIX: fsync) and closes it; MN_ERR_IO with the reason on any failure.
static int mn__out_close(mn__out* o) {
#if MN__POSIX
    if (!o->err && fsync(o->fd) != 0) o->err = errno;
    if (close(o->fd) != 0 && !o->err) o->err = errno;
#else
    errno = 0;
    if (fflush(o->f) != 0 && !o->err) o->err = errno ? errno : -1;
    if (fclose(o->f) != 0 && !o->err) o->err = errno ? errno : -1;
#endif
    if (o->err) { MN_LOG("mesanet: writing %s failed: %s\n", o->path, mn__errno_str(o->err)); return MN_ERR_IO; }
    return MN_OK;
}

// Writes n_parts copies of the table (part p: names prefixed with prefix[p], data at base[p] + offset) to
// path; meta_json is the inside of __metadata__. MN_SAVE_HOOK(stage) runs once the header is written.
static int mn__st_write(const char* path, int excl, const mn_model* m, size_t n_parts, const char* const* prefix,
                        const mn_real* const* base, const char* meta_json, int stage) {
    size_t i, k, p, cap = 256 + n_parts * m->n_tensors * 400 + strlen(meta_json), hl = 0, off = 0;
    char* hdr = (char*)MN_MALLOC(cap);
    unsigned char len8[8];
    mn__out o;
    int err;
    if (!hdr) return MN_ERR_ALLOC;
    hl = mn__cat(hdr, cap, hl, "{\"__metadata__\":{%s}", meta_json);
    for (p = 0; p < n_parts; p++)
        for (i = 0; i < m->n_tensors; i++) {
            const mn_tensor_info* t = &m->tensors[i];
            size_t bytes = t->numel * sizeof(mn_real);
            hl = mn__cat(hdr, cap, hl, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[", prefix[p], t->name, MN_DTYPE_NAME);
            for (k = 0; k < t->ndim; k++) hl = mn__cat(hdr, cap, hl, "%s%zu", k ? "," : "", t->shape[k]);
            hl = mn__cat(hdr, cap, hl, "],\"data_offsets\":[%zu,%zu]}", off, off + bytes);
            off += bytes;
        }
    hl = mn__cat(hdr, cap, hl, "}");
    while (hl < cap - 1 && (8 + hl) % 8) hdr[hl++] = ' ';     // align the data section to 8 bytes
    if (hl >= cap - 1) {
        MN_FREE(hdr);
        MN_LOG("mesanet: safetensors header for %s too long\n", path);
        return MN_ERR_FORMAT;
    }
    for (k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    if ((err = mn__out_open(&o, path, excl))) { MN_FREE(hdr); return err; }
    mn__out_put(&o, len8, 8);
    mn__out_put(&o, hdr, hl);
    MN_FREE(hdr);
    MN_SAVE_HOOK(stage);
    for (p = 0; p < n_parts; p++)
        for (i = 0; i < m->n_tensors; i++)
            mn__out_put(&o, base[p] + m->tensors[i].offset, m->tensors[i].numel * sizeof(mn_real));
    return mn__out_close(&o);
}

// config.json in flash-linear-attention's keys, so its AutoModelForCausalLM finds the model:
// TransformerConfig when every layer is attention, MesaNetConfig when the layers are Mesa (with
// attention layers listed in its "attn" entry, fla's hybrid mechanism), plus mesanet_* keys for what
// fla cannot express (the pattern itself, soft-cap, dynamic CG tolerance, clamp) and the set's stamp.
// Returns the length written into js, or cap when it did not fit.
static size_t mn__config_json(const mn_model* m, const char* stamp, char* js, size_t cap) {
    const mn_config* c = &m->cfg;
    int n_attn = 0, n_mesa = 0;
    size_t l, n = 0;
    for (l = 0; l < c->n_layer; l++) {
        const char* nm = mn__mixers[m->mixer[l]].name;
        n_attn += !strcmp(nm, "attn") || !strcmp(nm, "swa");
        n_mesa += !strcmp(nm, "mesa");
    }
    if (n_mesa > 0 && n_attn + n_mesa == (int)c->n_layer) {
        n = mn__cat(js, cap, n, "{\n  \"model_type\": \"mesa_net\",\n  \"architectures\": [\"MesaNetForCausalLM\"],\n"
                    "  \"conv_size\": 4,\n  \"use_short_conv\": true,\n  \"use_output_gate\": false,\n"
                    "  \"lambda_lower_bound\": 0.25,\n  \"max_cg_step_training\": %d,\n"
                    "  \"max_cg_step_decoding\": %d,\n",
                    c->mesa_cg_train, c->mesa_cg_decode);
        if (n_attn == 0) n = mn__cat(js, cap, n, "  \"attn\": null,\n");
        else {
            int first = 1;
            n = mn__cat(js, cap, n, "  \"attn\": {\"layers\": [");
            for (l = 0; l < c->n_layer; l++)
                if (strcmp(mn__mixers[m->mixer[l]].name, "mesa")) {
                    n = mn__cat(js, cap, n, "%s%zu", first ? "" : ", ", l);
                    first = 0;
                }
            n = mn__cat(js, cap, n, "], \"num_heads\": %zu, \"num_kv_heads\": %zu, \"qkv_bias\": false, "
                        "\"rope_theta\": %.17g, \"window_size\": null},\n", c->n_head, c->n_head, c->rope_theta);
        }
    } else {
        n = mn__cat(js, cap, n, "{\n  \"model_type\": \"%s\",\n  \"architectures\": [\"%s\"],\n",
                    n_attn == (int)c->n_layer ? "transformer" : "mesanet",
                    n_attn == (int)c->n_layer ? "TransformerForCausalLM" : "MesanetForCausalLM");
        if (strcmp(c->pattern, "swa") == 0) n = mn__cat(js, cap, n, "  \"window_size\": %zu,\n", c->window);
        else n = mn__cat(js, cap, n, "  \"window_size\": null,\n");
        n = mn__cat(js, cap, n, "  \"qkv_bias\": false,\n  \"qk_norm\": false,\n  \"num_kv_heads\": %zu,\n", c->n_head);
        // a pattern that mixes Mesa with other mixers keeps its CG counts under fla's key names too
        if (n_mesa > 0)
            n = mn__cat(js, cap, n, "  \"max_cg_step_training\": %d,\n  \"max_cg_step_decoding\": %d,\n",
                        c->mesa_cg_train, c->mesa_cg_decode);
    }
    n = mn__cat(js, cap, n, "  \"hidden_size\": %zu,\n  \"num_hidden_layers\": %zu,\n  \"num_heads\": %zu,\n"
                "  \"head_dim\": %zu,\n  \"intermediate_size\": %zu,\n  \"hidden_act\": \"swish\",\n"
                "  \"vocab_size\": %zu,\n  \"max_position_embeddings\": %zu,\n  \"rope_theta\": %.17g,\n",
                c->d_model, c->n_layer, c->n_head, c->head_dim, c->d_ff, c->vocab_size, c->max_seq_len, c->rope_theta);
    n = mn__cat(js, cap, n, "  \"norm_eps\": %.17g,\n  \"initializer_range\": %.17g,\n  \"elementwise_affine\": true,\n"
                "  \"tie_word_embeddings\": false,\n  \"use_cache\": true,\n  \"torch_dtype\": \"%s\",\n",
                c->norm_eps, c->init_std, sizeof(mn_real) == 8 ? "float64" : "float32");
    n = mn__cat(js, cap, n, "  \"mesanet_version\": \"%d.%d\",\n  \"mesanet_stamp\": \"%s\",\n"
                "  \"mesanet_pattern\": \"%s\",\n  \"mesanet_window\": %zu,\n  \"mesanet_logit_softcap\": %.17g,\n"
                "  \"mesanet_cg_tol\": %.17g,\n", MESANET_VERSION_MAJOR, MESANET_VERSION_MINOR, stamp, c->pattern,
                c->window, c->logit_softcap, c->mesa_cg_tol);
    n = mn__cat(js, cap, n, "  \"mesanet_chunk\": %zu,\n  \"mesanet_gamma_clamp\": %d,\n  \"mesanet_cg_fla\": %d,\n"
                "  \"mesanet_cg_warm\": %d\n}\n", c->mesa_chunk, c->mesa_gamma_clamp, c->mesa_cg_fla, c->mesa_cg_warm);
    return n;
}

static const char* const mn__set_files[3] = { "config.json", "model.safetensors", "optimizer.safetensors" };

// Writes the set's files as folder/<file><suffix> (excl: they must not exist yet).
static int mn__write_set(const mn_model* m, const char* folder, const char* suffix, int excl, const mn_train_meta* meta,
                         const char* stamp) {
    char path[MN__PATH_CAP], *js;
    size_t n, cap = 16384;
    mn__out o;
    int err;
    if (!(js = (char*)MN_MALLOC(cap))) return MN_ERR_ALLOC;
    n = mn__config_json(m, stamp, js, cap);
    if (n >= cap) { MN_FREE(js); MN_LOG("mesanet: config.json too long\n"); return MN_ERR_CONFIG; }
    if ((err = mn__path(path, sizeof path, folder, mn__set_files[0], suffix)) || (err = mn__out_open(&o, path, excl))) {
        MN_FREE(js);
        return err;
    }
    mn__out_put(&o, js, n);
    if ((err = mn__out_close(&o))) { MN_FREE(js); return err; }
    MN_SAVE_HOOK(2);
    {
        const char* pre[1] = { "" }; const mn_real* base[1] = { m->params };
        n = mn__cat(js, cap, 0, "\"format\":\"pt\",\"mesanet_stamp\":\"%s\"", stamp);
        if ((err = mn__path(path, sizeof path, folder, mn__set_files[1], suffix)) ||
            (err = mn__st_write(path, excl, m, 1, pre, base, js, 3))) { MN_FREE(js); return err; }
        MN_SAVE_HOOK(4);
    }
    if (meta) {   // the AdamW moments as two prefixed copies of the table, and the training position
        const char* pre[2] = { "m.", "v." }; const mn_real* base[2] = { m->opt_m, m->opt_v };
        n = mn__cat(js, cap, 0, "\"format\":\"pt\",\"mesanet_stamp\":\"%s\",\"opt_step\":\"%llu\",\"step\":\"%llu\","
                    "\"rng\":\"%llu\",", stamp, (unsigned long long)m->opt_step, (unsigned long long)meta->step,
                    (unsigned long long)meta->rng_state);
        n = mn__cat(js, cap, n, "\"extra0\":\"%.17g\",\"extra1\":\"%.17g\",\"extra2\":\"%.17g\",\"extra3\":\"%.17g\","
                    "\"notes\":\"",
                    meta->extra[0], meta->extra[1], meta->extra[2], meta->extra[3]);
        if (n < cap) n += mn__json_esc(js + n, cap - n, meta->notes);
        n = mn__cat(js, cap, n, "\"");
        if (n >= cap) { MN_FREE(js); MN_LOG("mesanet: optimizer metadata too long\n"); return MN_ERR_RANGE; }
        if ((err = mn__path(path, sizeof path, folder, mn__set_files[2], suffix)) ||
            (err = mn__st_write(path, excl, m, 2, pre, base, js, 5))) { MN_FREE(js); return err; }
        MN_SAVE_HOOK(6);
    }
    MN_FREE(js);
    return MN_OK;
}

// In-place tier: <file>.tmp for each file, then one rename per file.
static int mn__save_inplace(const mn_model* m, const char* dir, const mn_train_meta* meta, const char* stamp) {
    char from[MN__PATH_CAP], to[MN__PATH_CAP];
    int i, err, n = meta ? 3 : 2;
    MN_SAVE_HOOK(1);
    if ((err = mn__write_set(m, dir, ".tmp", 0, meta, stamp))) {
        // remove what this save wrote (a .tmp name that is a folder was not ours: remove() would take it)
        for (i = 0; i < n; i++) {
            FILE* f;
            if (mn__path(from, sizeof from, dir, mn__set_files[i], ".tmp") == MN_OK && (f = fopen(from, "rb"))) {
                fclose(f);
                remove(from);
            }
        }
        return err;
    }
    MN_SAVE_HOOK(7);
    for (i = 0; i < n; i++) {
        mn__path(from, sizeof from, dir, mn__set_files[i], ".tmp");
        mn__path(to, sizeof to, dir, mn__set_files[i], "");
        errno = 0;
        if (rename(from, to) != 0) {
            MN_LOG("mesanet: renaming %s to %s failed: %s%s\n", from, to, mn__errno_str(errno),
                   i ? " (the folder now holds a mixed set, which mn_load refuses)" : "");
            for (; i < n; i++) if (mn__path(from, sizeof from, dir, mn__set_files[i], ".tmp") == MN_OK) remove(from);
            return MN_ERR_IO;
        }
        if (i == 0) MN_SAVE_HOOK(8);
    }
    if (!meta && mn__path(to, sizeof to, dir, mn__set_files[2], "") == MN_OK) remove(to);
    MN_SAVE_HOOK(9);
    return MN_OK;
}

#if MN__POSIX
static int mn__is_set_file(const char* name) {
    int i;
    for (i = 0; i < 3; i++) {
        size_t k = strlen(mn__set_files[i]);
        if (!strncmp(name, mn__set_files[i], k) && (!name[k] || !strcmp(name + k, ".tmp"))) return 1;
    }
    return 0;
}
// fsync of a folder (its entries); EINVAL: the file system cannot, which is not an error here.
static int mn__sync_dir(const char* path) {
    int fd = open(path, O_RDONLY), e = 0;
    if (fd < 0) return errno;
    if (fsync(fd) != 0 && errno != EINVAL) e = errno;
    close(fd);
    return e;
}
// Empties a temporary folder L beside D and removes it: the set's files go; a file that D also has goes (it is
// a link this code made into L, or an older copy of a file D has replaced since, as loss.csv); an entry D
// lacks moves into D; anything else (a folder D also has) stays.
static void mn__clean_folder(const char* L, const char* D) {
    char a[MN__PATH_CAP], b[MN__PATH_CAP];
    struct dirent* e;
    int kept = 0;
    DIR* d = opendir(L);
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        struct stat sa, sb;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (mn__path(a, sizeof a, L, e->d_name, "") || mn__path(b, sizeof b, D, e->d_name, "")) { kept++; continue; }
        if (lstat(a, &sa) != 0) { kept++; continue; }
        if (mn__is_set_file(e->d_name) && S_ISREG(sa.st_mode)) { if (unlink(a) != 0) kept++; continue; }
        if (lstat(b, &sb) == 0) {
            if (!S_ISDIR(sa.st_mode) && !S_ISDIR(sb.st_mode) && unlink(a) == 0) continue;
            kept++;
        }
        else if (errno != ENOENT || rename(a, b) != 0) kept++;
    }
    closedir(d);
    if (kept || rmdir(L) != 0)
        MN_LOG("mesanet: note: left %s in place (%d entries that are not this code's to delete)\n", L, kept);
}
// Cleans the temporary folders ".<base>.mn-save-<pid>-..." that processes no longer running left in parent.
static void mn__clean_leftovers(const char* parent, const char* base, const char* dir) {
    char pre[320], path[MN__PATH_CAP];
    size_t pl;
    struct dirent* e;
    struct stat st;
    DIR* d;
    // D holds no set: keep them all (one of them may be the only copy)
    if (mn__path(path, sizeof path, dir, mn__set_files[0], "") || stat(path, &st) != 0) return;
    pl = (size_t)snprintf(pre, sizeof pre, ".%s.mn-save-", base);
    if (pl >= sizeof pre || !(d = opendir(parent))) return;
    while ((e = readdir(d)) != NULL) {
        char* end;
        long pid;
        if (strncmp(e->d_name, pre, pl)) continue;
        pid = strtol(e->d_name + pl, &end, 10);
        if (pid <= 0 || *end != '-') continue;
        if (pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;   // its save may run
        if (mn__path(path, sizeof path, parent, e->d_name, "") == MN_OK) mn__clean_folder(path, dir);
    }
    closedir(d);
}
// Splits dir into its parent and last component; 0 when there is no usable last component.
static int mn__split_dir(const char* dir, char* parent, size_t pcap, char* base, size_t bcap) {
    size_t n = strlen(dir), k;
    while (n > 1 && dir[n - 1] == '/') n--;
    for (k = n; k > 0 && dir[k - 1] != '/'; k--) {}
    if (n - k == 0 || n - k >= bcap || n - k > 200 || k >= pcap) return 0;
    memcpy(base, dir + k, n - k); base[n - k] = 0;
    if (!strcmp(base, ".") || !strcmp(base, "..")) return 0;
    if (k == 0) strcpy(parent, ".");
    else if (k == 1) strcpy(parent, "/");
    else { memcpy(parent, dir, k - 1); parent[k - 1] = 0; }
    return 1;
}
// Swap tier: the new set in a fresh folder beside D, exchanged with D in one step.
static int mn__save_swap(const mn_model* m, const char* dir, const char* parent, const char* base, mode_t mode,
                         const mn_train_meta* meta, const char* stamp, uint64_t id) {
    char tmp[MN__PATH_CAP], old[MN__PATH_CAP + 8], a[MN__PATH_CAP], b[MN__PATH_CAP];
    const char* old_set = tmp;   // where the old set is once the swap happened
    int err = MN_OK, tries, e, swapped = 0;
    struct dirent* de;
    DIR* d;
    mn__clean_leftovers(parent, base, dir);
    for (tries = 0;; tries++) {   // an exclusive name: mkdir fails on an existing one
        int n = snprintf(tmp, sizeof tmp, "%s/.%s.mn-save-%ld-%016llx", parent, base, (long)getpid(),
                         (unsigned long long)(id + (uint64_t)tries));
        if (n < 0 || (size_t)n >= sizeof tmp) { MN_LOG("mesanet: path too long: %s\n", dir); return MN_ERR_IO; }
        if (mkdir(tmp, 0700) == 0) break;
        if (errno != EEXIST || tries > 100) {
            MN_LOG("mesanet: cannot create a folder beside %s: %s: %s\n", dir, tmp, strerror(errno));
            return MN_ERR_IO;
        }
    }
    if (chmod(tmp, mode & 07777) != 0) { /* keeps mkdir's 0700: only the permissions differ */ }
    MN_SAVE_HOOK(1);
    err = mn__write_set(m, tmp, "", 1, meta, stamp);
    // everything else in D comes along as a hard link (same file, so a lock held on it stays held)
    if (!err && (d = opendir(dir)) != NULL) {
        while ((de = readdir(d)) != NULL) {
            struct stat st;
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || mn__is_set_file(de->d_name)) continue;
            if (mn__path(a, sizeof a, dir, de->d_name, "") || mn__path(b, sizeof b, tmp, de->d_name, "")) continue;
            if (lstat(a, &st) == 0 && S_ISREG(st.st_mode) && link(a, b) != 0) { /* it moves across after the swap */ }
        }
        closedir(d);
    }
    if (!err && (e = mn__sync_dir(tmp)) != 0) {
        MN_LOG("mesanet: cannot sync %s: %s\n", tmp, strerror(e));
        err = MN_ERR_IO;
    }
    if (err) { mn__clean_folder(tmp, dir); return err; }
    MN_SAVE_HOOK(7);
#if MN__EXCHANGE
    if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) swapped = 1;
    else if (errno != ENOSYS && errno != EINVAL) {
        MN_LOG("mesanet: cannot exchange %s with %s: %s\n", tmp, dir, strerror(errno));
        mn__clean_folder(tmp, dir);
        return MN_ERR_IO;
    }
#endif
    if (!swapped) {   // two renames; a crash between them leaves no D, and mn_load's message points here
        snprintf(old, sizeof old, "%s-old", tmp);
        if (rename(dir, old) != 0) {
            MN_LOG("mesanet: cannot rename %s: %s\n", dir, strerror(errno));
            mn__clean_folder(tmp, dir);
            return MN_ERR_IO;
        }
        if (rename(tmp, dir) != 0) {
            MN_LOG("mesanet: cannot rename %s to %s: %s\n", tmp, dir, strerror(errno));
            if (rename(old, dir) == 0) mn__clean_folder(tmp, dir);
            return MN_ERR_IO;
        }
        old_set = old;
    }
    MN_SAVE_HOOK(8);
    mn__clean_folder(old_set, dir);
    if ((e = mn__sync_dir(parent)) != 0) MN_LOG("mesanet: note: cannot sync %s: %s\n", parent, strerror(e));
    MN_SAVE_HOOK(9);
    return MN_OK;
}
#endif

// A fresh id for the stamp and the temporary folder's name (unique enough, not a secret).
static uint64_t mn__fresh_id(void) {
    static uint64_t counter;
    uint64_t x = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock()
               ^ ((uint64_t)(uintptr_t)&counter << 16) ^ ++counter;
#if MN__POSIX
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x ^= ((uint64_t)getpid() << 40) ^ (uint64_t)ts.tv_nsec * 0xD1B54A32D192ED03ull;
#endif
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29; x *= 0x94D049BB133111EBull; x ^= x >> 32;  // splitmix's mix
    return x;
}

// Saves the model (and with meta, the optimizer state) as one set in the existing folder dir.
MNDEF int mn_save(const mn_model* m, const char* dir, const mn_train_meta* meta) {
    char stamp[48];
    uint64_t id;
    size_t i, p;
    if (!m || !m->params || !m->tensors || !dir || !dir[0]) {
        MN_LOG("mesanet: mn_save needs an initialised model and a folder\n");
        return MN_ERR_STATE;
    }
    if (meta && !m->opt_m) {
        MN_LOG("mesanet: no optimizer state to save (take an mn_adamw_step first)\n");
        return MN_ERR_STATE;
    }
    if (meta && !memchr(meta->notes, 0, sizeof meta->notes)) {
        MN_LOG("mesanet: mn_train_meta.notes is not NUL-terminated\n");
        return MN_ERR_RANGE;
    }
    for (p = 0; p < (meta ? 3u : 1u); p++) {   // a checkpoint that cannot compute is never written
        const mn_real* base = p == 0 ? m->params : p == 1 ? m->opt_m : m->opt_v;
        for (i = 0; i < m->n_tensors; i++) {
            const mn_tensor_info* t = &m->tensors[i];
            size_t e;
            for (e = 0; e < t->numel; e++)
                if (!mn__finite(base[t->offset + e]) || (p == 2 && base[t->offset + e] < 0)) {
                    MN_LOG("mesanet: not saving to %s: %s%s[%zu] is %g (parameters or moments not finite); "
                           "the folder is unchanged\n",
                           dir, p == 0 ? "" : p == 1 ? "m." : "v.", t->name, e, (double)base[t->offset + e]);
                    return MN_ERR_NAN;
                }
        }
    }
    id = mn__fresh_id();
    snprintf(stamp, sizeof stamp, "%llu-%016llx", (unsigned long long)(meta ? meta->step : m->opt_step),
             (unsigned long long)id);
#if MN__POSIX
    {
        char parent[MN__PATH_CAP], base[256], d[MN__PATH_CAP];
        size_t n = strlen(dir);
        struct stat st;
        while (n > 1 && dir[n - 1] == '/') n--;   // "runs/x/" is "runs/x" (so lstat sees a link, not its target)
        if (n >= sizeof d) { MN_LOG("mesanet: path too long: %s\n", dir); return MN_ERR_IO; }
        memcpy(d, dir, n); d[n] = 0;
        dir = d;
        if (lstat(d, &st) != 0) {
            MN_LOG("mesanet: cannot save to %s: %s\n", dir, strerror(errno));
            return MN_ERR_IO;
        }
        if (S_ISDIR(st.st_mode) && mn__split_dir(dir, parent, sizeof parent, base, sizeof base))
            return mn__save_swap(m, dir, parent, base, st.st_mode, meta, stamp, id);
        if (!S_ISDIR(st.st_mode) && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
            MN_LOG("mesanet: cannot save to %s: not a folder\n", dir);
            return MN_ERR_IO;
        }
        return mn__save_inplace(m, d, meta, stamp);   // a symbolic link to a folder, ".", "/"
    }
#else
    return mn__save_inplace(m, dir, meta, stamp);
#endif
}

// ---- reading --------------------------------------------------------------------------------
// A file being read front to back, from a FILE or from memory (the fuzz target).
typedef struct mn__src { FILE* f; const unsigned char* mem; size_t size, pos; const char* path; } mn__src;
static int mn__src_read(mn__src* s, void* dst, size_t n) {
    if (n > s->size - s->pos) {
        MN_LOG("mesanet: %s ends early (it is shorter than its header says)\n", s->path);
        return MN_ERR_FORMAT;
    }
    if (s->mem) memcpy(dst, s->mem + s->pos, n);
    else {
        errno = 0;
        if (fread(dst, 1, n, s->f) != n) {
            MN_LOG("mesanet: reading %s failed: %s\n", s->path,
                   ferror(s->f) ? mn__errno_str(errno) : "it shrank while being read");
            return MN_ERR_IO;
        }
    }
    s->pos += n;
    return MN_OK;
}
static int mn__src_open(mn__src* s, const char* path) {
    long sz;
    memset(s, 0, sizeof *s);
    s->path = path;
    errno = 0;
    if (!(s->f = fopen(path, "rb"))) {
        MN_LOG("mesanet: cannot open %s: %s\n", path, mn__errno_str(errno));
        return MN_ERR_IO;
    }
    if (fseek(s->f, 0, SEEK_END) != 0 || (sz = ftell(s->f)) < 0 || fseek(s->f, 0, SEEK_SET) != 0) {
        MN_LOG("mesanet: cannot size %s: %s\n", path, mn__errno_str(errno));
        fclose(s->f); s->f = NULL;
        return MN_ERR_IO;
    }
    s->size = (size_t)sz;
    return MN_OK;
}

// The top-level string value of key in a JSON object: 1 found, 0 absent, -1 malformed or too long.
static int mn__json_top_str(const char* json, size_t len, const char* key, char* out, size_t cap) {
    mn__js j; j.p = json; j.end = json + len; j.depth = 0;
    if (mn__js_expect(&j, '{') < 0) return -1;
    if (mn__js_peek(&j) == '}') return 0;
    for (;;) {
        char k[64];
        if (mn__js_str(&j, k, sizeof k) < 0 || mn__js_expect(&j, ':') < 0) return -1;
        if (!strcmp(k, key)) return mn__js_peek(&j) == '"' && mn__js_str(&j, out, cap) == 0 ? 1 : -1;
        if (mn__js_skip(&j) < 0) return -1;
        if (mn__js_peek(&j) == ',') { j.p++; continue; }
        return mn__js_expect(&j, '}') < 0 ? -1 : 0;
    }
}

// The parameter table of the model cfg describes, without allocating or initialising its parameters.
static int mn__table_only(mn_model* t, const mn_config* cfg) {
    mn_config rc;
    int err;
    memset(t, 0, sizeof *t);
    if ((err = mn_config_resolve(&rc, cfg)) != MN_OK) return err;
    t->cfg = rc;
    snprintf(t->pattern_buf, sizeof t->pattern_buf, "%s", rc.pattern);
    t->cfg.pattern = t->pattern_buf;
    if ((err = mn__parse_pattern(t->pattern_buf, rc.n_layer, t->mixer)) != MN_OK) return err;
    t->n_tensors = mn__build_table(t);
    if (!(t->tensors = (mn_tensor_info*)mn__calloc(t->n_tensors, sizeof(mn_tensor_info)))) return MN_ERR_ALLOC;
    mn__build_table(t);
    return MN_OK;
}

// One safetensors file of the set, its header read and checked against the model's table:
// info[k] (file order) is table entry map[k] % n_tensors of part map[k] / n_tensors.
typedef struct mn__stf { mn__src* src; mn_tensor_info* info; size_t* map; size_t n; char meta[MN__META_CAP]; } mn__stf;
static void mn__stf_free(mn__stf* s) {
    if (s->info) MN_FREE(s->info);
    if (s->map) MN_FREE(s->map);
    s->info = NULL; s->map = NULL;
}
// "[a, b, ...]" of a tensor's shape, for messages
static const char* mn__shape_str(const mn_tensor_info* t, char* buf, size_t cap) {
    size_t k, n = mn__cat(buf, cap, 0, "[");
    for (k = 0; k < t->ndim; k++) n = mn__cat(buf, cap, n, "%s%zu", k ? ", " : "", t->shape[k]);
    mn__cat(buf, cap, n, "]");
    return buf;
}
static int mn__stf_open(mn__stf* s, mn__src* src, const mn_model* tab, size_t parts, const char* const* prefix) {
    unsigned char len8[8], *hdr;
    uint64_t hlen = 0;
    size_t i, k, p, want = parts * tab->n_tensors, ds, guess = 0, cap;
    unsigned char* seen;
    int err;
    memset(s, 0, sizeof *s);
    s->src = src;
    if ((err = mn__src_read(src, len8, 8))) return err;
    for (i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen < 2 || hlen > src->size - 8 || hlen > (100u << 20)) {
        MN_LOG("mesanet: %s: safetensors header size %llu does not fit the file (%zu bytes)\n", src->path,
               (unsigned long long)hlen, src->size);
        return MN_ERR_FORMAT;
    }
    if (!(hdr = (unsigned char*)MN_MALLOC(8 + (size_t)hlen))) return MN_ERR_ALLOC;
    memcpy(hdr, len8, 8);
    if ((err = mn__src_read(src, hdr + 8, (size_t)hlen))) { MN_FREE(hdr); return err; }
    // room for every tensor the header can hold (an entry takes at least 40 bytes): an unexpected one gets named
    cap = (size_t)hlen / 40 + 2;
    s->info = (mn_tensor_info*)mn__calloc(cap, sizeof(mn_tensor_info));
    s->map = (size_t*)mn__calloc(cap, sizeof(size_t));
    seen = (unsigned char*)mn__calloc(want + 1, 1);
    if (!s->info || !s->map || !seen) { MN_FREE(hdr); if (seen) MN_FREE(seen); mn__stf_free(s); return MN_ERR_ALLOC; }
    err = mn__st_parse(src->path, hdr, 8 + (size_t)hlen, src->size, s->info, cap, &s->n, &ds, s->meta, sizeof s->meta);
    MN_FREE(hdr);
    if (err) { MN_FREE(seen); mn__stf_free(s); return err; }
    // the file's tensors and the table's: the same names (with the part's prefix) and shapes, nothing else
    for (k = 0; k < s->n && !err; k++) {
        const mn_tensor_info* f = &s->info[k];
        const mn_tensor_info* t = NULL;
        size_t tries;
        for (tries = 0; tries < want && !t; tries++, guess = (guess + 1) % want) {   // in files we wrote: the next one
            size_t pl;
            p = guess / tab->n_tensors; i = guess % tab->n_tensors; pl = strlen(prefix[p]);
            if (!strncmp(f->name, prefix[p], pl) && !strcmp(f->name + pl, tab->tensors[i].name)) {
                t = &tab->tensors[i];
                s->map[k] = guess;
            }
        }
        if (!t) {
            MN_LOG("mesanet: %s holds tensor %s, which config.json's model (pattern %s, %zu layers, d_model %zu) "
                   "has not: config.json does not describe this file\n", src->path, f->name, tab->cfg.pattern,
                   tab->cfg.n_layer, tab->cfg.d_model);
            err = MN_ERR_FORMAT;
        } else if (f->ndim != t->ndim || memcmp(f->shape, t->shape, t->ndim * sizeof(size_t))) {
            char a[96], b[96];
            MN_LOG("mesanet: %s: tensor %s has shape %s, config.json's model %s: config.json does not describe "
                   "this file\n",
                   src->path, f->name, mn__shape_str(f, a, sizeof a), mn__shape_str(t, b, sizeof b));
            err = MN_ERR_FORMAT;
        } else seen[s->map[k]] = 1;
        guess = (s->map[k] + 1) % want;
    }
    for (k = 0; k < want && !err; k++)
        if (!seen[k]) {
            MN_LOG("mesanet: %s has no tensor %s%s, which config.json's model needs\n", src->path,
                   prefix[k / tab->n_tensors], tab->tensors[k % tab->n_tensors].name);
            err = MN_ERR_FORMAT;
        }
    MN_FREE(seen);
    if (err) mn__stf_free(s);
    return err;
}
// Reads the data section (front to back: file order is offset order) into dst[part] at the table's
// offsets of model m, converting the dtype; refuses non-finite values and, with v_part set, negative ones there.
static int mn__stf_read(mn__stf* s, const mn_model* m, mn_real* const* dst, size_t v_part) {
    size_t k, e, chunk = 1 << 16;
    unsigned char* buf = (unsigned char*)MN_MALLOC(chunk);
    int err = MN_OK;
    if (!buf) return MN_ERR_ALLOC;
    for (k = 0; k < s->n && !err; k++) {
        const mn_tensor_info* f = &s->info[k];
        size_t part = s->map[k] / m->n_tensors, ds = mn__dtype_size(f->dtype), done = 0;
        mn_real* out = dst[part] + m->tensors[s->map[k] % m->n_tensors].offset;
        while (done < f->numel && !err) {
            size_t cnt = f->numel - done < chunk / ds ? f->numel - done : chunk / ds;
            if ((err = mn__src_read(s->src, buf, cnt * ds))) break;
            for (e = 0; e < cnt; e++) {
                const unsigned char* src = buf + ds * e;
                double v;
                if (f->dtype == MN_DT_F32) { float x; memcpy(&x, src, 4); v = x; }
                else if (f->dtype == MN_DT_F64) { memcpy(&v, src, 8); }
                else if (f->dtype == MN_DT_BF16) {   // the top half of an IEEE single
                    uint32_t u = (uint32_t)(src[0] | (src[1] << 8)) << 16; float x;
                    memcpy(&x, &u, 4); v = x;
                }
                else {  // IEEE half
                    unsigned h = (unsigned)(src[0] | (src[1] << 8)), ex = (h >> 10) & 31, mant = h & 1023;
                    v = ex == 0 ? ldexp((double)mant, -24) : ex == 31 ? (mant ? NAN : INFINITY)
                      : ldexp((double)(mant | 1024), (int)ex - 25);
                    if (h & 0x8000) v = -v;
                }
                out[done + e] = (mn_real)v;
                if (!mn__finite(out[done + e]) || (part == v_part && v < 0)) {
                    MN_LOG("mesanet: %s: tensor %s[%zu] is %g: refusing a checkpoint that cannot compute\n",
                           s->src->path, f->name, done + e, v);
                    err = MN_ERR_FORMAT; break;
                }
            }
            done += cnt;
        }
    }
    MN_FREE(buf);
    return err;
}

// Fills cfg from a config.json written by mn_save or by flash-linear-attention (the keys both
// share). pattern_buf receives "mesanet_pattern" when present. Unknown keys are skipped.
MNDEF int mn_config_parse_json(mn_config* cfg, const char* json, size_t len, char* pattern_buf, size_t pattern_cap) {
    mn__js j; j.p = json; j.end = json + len; j.depth = 0;
    // fla's MesaNetConfig keys with no field here: the MLP width rule and options this library lacks
    int fla_mesa = 0, ours = 0; double ratio = 4, lamb_lb = 0.25, conv = 4; char unsup[80] = "";
    memset(cfg, 0, sizeof(*cfg));
    if (pattern_buf && pattern_cap) pattern_buf[0] = 0;
    if (mn__js_expect(&j, '{') < 0) goto bad;
    if (mn__js_peek(&j) == '}') { j.p++; goto end; }
    for (;;) {
        char key[64]; size_t u; double d; int c;
        if (mn__js_str(&j, key, sizeof key) < 0 || mn__js_expect(&j, ':') < 0) goto bad;
        c = mn__js_peek(&j);
        // one "else if" per key; null (c == 'n') leaves the field at its default
        #define MN__UINT(k, field) else if (!strcmp(key, k) && c != 'n') { \
            if (mn__js_uint(&j, (size_t)1 << 32, &u) < 0) goto bad;                \
            cfg->field = u; }
        #define MN__REAL(k, field) else if (!strcmp(key, k) && c != 'n') { \
            if (mn__js_num(&j, &d) < 0) goto bad;                                  \
            cfg->field = d; }
        #define MN__INT(k, field) else if (!strcmp(key, k) && c != 'n') { \
            if (mn__js_num(&j, &d) < 0 || d != floor(d) || fabs(d) > 1e6) goto bad; \
            cfg->field = (int)d; }
        if (0) {}
        MN__UINT("hidden_size", d_model) MN__UINT("num_hidden_layers", n_layer) MN__UINT("num_heads", n_head)
        MN__UINT("head_dim", head_dim) MN__UINT("intermediate_size", d_ff) MN__UINT("vocab_size", vocab_size)
        MN__UINT("max_position_embeddings", max_seq_len) MN__UINT("window_size", window)
        MN__UINT("mesanet_window", window)
        MN__REAL("rope_theta", rope_theta) MN__REAL("norm_eps", norm_eps) MN__REAL("initializer_range", init_std)
        MN__REAL("mesanet_logit_softcap", logit_softcap) MN__REAL("mesanet_cg_tol", mesa_cg_tol)
        MN__UINT("mesanet_chunk", mesa_chunk) MN__UINT("mesanet_gamma_clamp", mesa_gamma_clamp)
        MN__INT("max_cg_step_training", mesa_cg_train) MN__INT("max_cg_step_decoding", mesa_cg_decode)
        MN__INT("mesanet_cg_fla", mesa_cg_fla) MN__INT("mesanet_cg_warm", mesa_cg_warm)
        else if (!strcmp(key, "model_type") && c == '"') {
            char mt[32];
            if (mn__js_str(&j, mt, sizeof mt) < 0) goto bad;
            fla_mesa = !strcmp(mt, "mesa_net");
            // an fla MesaNet checkpoint without our pattern key: every layer is Mesa
            if (!strcmp(mt, "mesa_net") && !cfg->pattern && pattern_buf && pattern_cap > 4) {
                strcpy(pattern_buf, "mesa");
                cfg->pattern = pattern_buf;
            }
        } else if (!strcmp(key, "mesanet_version")) {
            ours = 1;
            if (mn__js_skip(&j) < 0) goto bad;
        } else if (!strcmp(key, "hidden_ratio") && c != 'n') { if (mn__js_num(&j, &ratio) < 0) goto bad; }
        else if (!strcmp(key, "lambda_lower_bound") && c != 'n') { if (mn__js_num(&j, &lamb_lb) < 0) goto bad; }
        else if (!strcmp(key, "conv_size") && c != 'n') { if (mn__js_num(&j, &conv) < 0) goto bad; }
        else if ((!strcmp(key, "use_output_gate") && c == 't') || (!strcmp(key, "tie_word_embeddings") && c == 't') ||
                   (!strcmp(key, "use_short_conv") && c == 'f')) {
            snprintf(unsup, sizeof unsup, "%s = %s", key, c == 't' ? "true" : "false");
            if (mn__js_skip(&j) < 0) goto bad;
        } else if (!strcmp(key, "mesanet_pattern") && c == '"') {
            if (mn__js_str(&j, pattern_buf, pattern_cap) < 0) goto bad;
            cfg->pattern = pattern_buf;
        } else if (mn__js_skip(&j) < 0) goto bad;
        #undef MN__UINT
        #undef MN__REAL
        #undef MN__INT
        if (mn__js_peek(&j) == ',') { j.p++; continue; }
        if (mn__js_expect(&j, '}') < 0) goto bad;
        break;
    }
end:
    mn__js_ws(&j);
    if (j.p != j.end) goto bad;
    if (!unsup[0] && lamb_lb != 0.25) snprintf(unsup, sizeof unsup, "lambda_lower_bound = %g", lamb_lb);
    if (!unsup[0] && conv != 4) snprintf(unsup, sizeof unsup, "conv_size = %g", conv);
    if (unsup[0]) {     // loading it would compute another model than the one the file describes
        MN_LOG("mesanet: config.json has %s; this library implements short convolutions of 4 taps, lambda_lower_bound "
               "0.25, no output gate and an untied lm_head\n", unsup);
        return MN_ERR_CONFIG;
    }
    if (fla_mesa && !ours) {
        // written by fla: its CG arithmetic, and with no intermediate_size its GatedMLP's width,
        // int(C * hidden_ratio * 2/3) rounded up to a multiple of 256
        cfg->mesa_cg_fla = 1;
        if (!(ratio > 0 && ratio <= 64)) {
            MN_LOG("mesanet: config.json: hidden_ratio %g out of range\n", ratio);
            return MN_ERR_CONFIG;
        }
        if (!cfg->d_ff && cfg->d_model)   // fla's rule: int(C * hidden_ratio * 2/3) rounded up to a multiple of 256
            cfg->d_ff = ((size_t)floor((double)cfg->d_model * ratio * 2 / 3) + 255) / 256 * 256;
    }
    return MN_OK;
bad:
    MN_LOG("mesanet: malformed config.json near byte %ld\n", (long)(j.p - json));
    return MN_ERR_FORMAT;
}

// mn_load's work on an already-read config.json and opened sources (the optimizer's only with meta);
// dir names the checkpoint in messages.
static int mn__load_set(mn_model* m, const char* dir, const char* js, size_t jl, mn__src* ms, mn__src* os,
                        mn_train_meta* meta) {
    char pattern[256], stamp_c[64], stamp_m[64], stamp_o[64];
    const char* pre_m[1] = { "" };
    const char* pre_o[2] = { "m.", "v." };
    mn_config cfg;
    mn_model tab, tmp;
    mn__stf fm, fo;
    mn_train_meta mt;
    int err, has_c, has_m, has_o = 0, i;
    memset(&fm, 0, sizeof fm); memset(&fo, 0, sizeof fo); memset(&mt, 0, sizeof mt);
    if ((err = mn_config_parse_json(&cfg, js, jl, pattern, sizeof pattern))) return err;
    if (cfg.d_model == 0 || cfg.n_layer == 0 || cfg.vocab_size == 0) {
        MN_LOG("mesanet: %s/config.json lacks hidden_size/num_hidden_layers/vocab_size\n", dir);
        return MN_ERR_FORMAT;
    }
    has_c = mn__json_top_str(js, jl, "mesanet_stamp", stamp_c, sizeof stamp_c);
    if (has_c < 0) {
        MN_LOG("mesanet: %s/config.json: mesanet_stamp is not a short string\n", dir);
        return MN_ERR_FORMAT;
    }
    // the model config.json describes, as a table only: every check below runs before anything large exists
    if ((err = mn__table_only(&tab, &cfg))) { mn_model_free(&tab); return err; }
    if ((err = mn__stf_open(&fm, ms, &tab, 1, pre_m))) goto out;
    has_m = mn__meta_get(fm.meta, "mesanet_stamp", stamp_m, sizeof stamp_m) == 0;
    if (meta) {
        uint64_t u; double d; int r;
        if ((err = mn__stf_open(&fo, os, &tab, 2, pre_o))) goto out;
        has_o = mn__meta_get(fo.meta, "mesanet_stamp", stamp_o, sizeof stamp_o) == 0;
        if (mn__meta_u64(fo.meta, "opt_step", &u) || (tab.opt_step = u, 0) || mn__meta_u64(fo.meta, "step", &mt.step) ||
            mn__meta_u64(fo.meta, "rng", &mt.rng_state)) {
            MN_LOG("mesanet: %s: opt_step, step and rng must be present as decimal whole numbers\n", os->path);
            err = MN_ERR_FORMAT; goto out;
        }
        for (i = 0; i < 4; i++) {
            char k[16]; snprintf(k, sizeof k, "extra%d", i & 3);
            if ((r = mn__meta_f64(fo.meta, k, &d)) == -2) {
                MN_LOG("mesanet: %s: %s is not a number\n", os->path, k);
                err = MN_ERR_FORMAT; goto out;
            }
            mt.extra[i] = r == 0 ? d : 0.0;
        }
        if (mn__meta_get(fo.meta, "notes", mt.notes, sizeof mt.notes) != 0) mt.notes[0] = 0;
    }
    // one set: every stamp present and equal, or none at all (older files)
    if (has_c || has_m || has_o) {
        const char* ref = has_c ? stamp_c : has_m ? stamp_m : stamp_o;
        if (!has_c || !has_m || (meta && !has_o) || strcmp(ref, stamp_m) || (meta && strcmp(ref, stamp_o))) {
            MN_LOG("mesanet: %s holds files of different saves (stamps: config.json %s, model.safetensors %s%s%s): "
                   "refusing a mixed checkpoint (if a save into it was running, load again)\n", dir,
                   has_c ? stamp_c : "none", has_m ? stamp_m : "none", meta ? ", optimizer.safetensors " : "",
                   meta ? (has_o ? stamp_o : "none") : "");
            err = MN_ERR_FORMAT; goto out;
        }
    } else MN_LOG("mesanet: note: %s has no set stamps (an older or foreign checkpoint): its files are not checked "
                  "against each other\n", dir);
    if ((err = mn_model_init(&tmp, &cfg))) goto out;
    {
        mn_real* dm[1] = { tmp.params };
        if ((err = mn__stf_read(&fm, &tmp, dm, 1))) { mn_model_free(&tmp); goto out; }
    }
    if (meta) {
        mn_real* dm[2];
        if (!(tmp.opt_m = (mn_real*)mn__calloc(2 * tmp.n_params, sizeof(mn_real)))) {
            mn_model_free(&tmp);
            err = MN_ERR_ALLOC; goto out;
        }
        tmp.opt_v = tmp.opt_m + tmp.n_params;
        dm[0] = tmp.opt_m; dm[1] = tmp.opt_v;
        if ((err = mn__stf_read(&fo, &tmp, dm, 1))) { mn_model_free(&tmp); goto out; }
        tmp.opt_step = tab.opt_step;
        *meta = mt;
    }
    *m = tmp;
    m->cfg.pattern = m->pattern_buf;     // the struct moved: re-point at its own copy
out:
    mn__stf_free(&fm); mn__stf_free(&fo);
    mn_model_free(&tab);
    return err;
}

// Loads the checkpoint in dir into m (uninitialised: built from config.json); with meta, the optimizer
// state too. On any error *m and *meta are left as they were.
MNDEF int mn_load(mn_model* m, const char* dir, mn_train_meta* meta) {
    char path[MN__PATH_CAP], mpath[MN__PATH_CAP], opath[MN__PATH_CAP];
    unsigned char* js = NULL;
    mn__src cs, ms, os;
    int err;
    if (!m || !dir || !dir[0]) { MN_LOG("mesanet: mn_load needs a model and a folder\n"); return MN_ERR_STATE; }
    if ((err = mn__path(path, sizeof path, dir, mn__set_files[0], "")) ||
        (err = mn__path(mpath, sizeof mpath, dir, mn__set_files[1], "")) ||
        (err = mn__path(opath, sizeof opath, dir, mn__set_files[2], ""))) return err;
    memset(&ms, 0, sizeof ms); memset(&os, 0, sizeof os);
#if MN__POSIX && !MN__EXCHANGE
    {   // the two-rename swap: a crash between the renames leaves no folder
        struct stat st;
        if (stat(dir, &st) != 0 && errno == ENOENT) {
            MN_LOG("mesanet: no folder %s (if a save into it was interrupted, its new set is in a folder named "
                   ".<its name>.mn-save-* beside it: rename that to %s)\n", dir, dir);
            return MN_ERR_IO;
        }
    }
#endif
    if ((err = mn__src_open(&cs, path))) return err;
    if (cs.size > MN__CONFIG_MAX) {
        MN_LOG("mesanet: %s has %zu bytes: not a config.json\n", path, cs.size);
        err = MN_ERR_FORMAT;
    }
    else if (!(js = (unsigned char*)MN_MALLOC(cs.size + 1))) err = MN_ERR_ALLOC;
    else err = mn__src_read(&cs, js, cs.size);
    fclose(cs.f);
    if (!err) err = mn__src_open(&ms, mpath);
    if (!err && meta) err = mn__src_open(&os, opath);
    if (!err) err = mn__load_set(m, dir, (const char*)js, cs.size, &ms, meta ? &os : NULL, meta);
    if (ms.f) fclose(ms.f);
    if (os.f) fclose(os.f);
    if (js) MN_FREE(js);
    return err;
}

// >>tasks
// defines: mn_task_find, mn_task_list, mn_task_sample, mn_task_train_len, one generator per task
// Synthetic length-generalisation tasks (trained at L = 128, evaluated at 128, 512, 2048, as the
// subquadratic-architectures paper does). Conventions: x[t] is the input at t and the model's output there is
// scored against y[t], the token that should follow x[0..t] (-1: not scored); token 0 is PAD and
// every example starts with BOS, which stands in for a learnable initial state (Grazzi et al. A.4.1).
// Answer-only tasks end with a query token ('=') whose target is the answer; the answer itself is
// never an input (NX-AI FormLangDataset: x = s[:-1], y = s[1:], masked). Word problems (parity, z5,
// s3) score every position after BOS with the running state; the main metric (FINAL) reads the
// last one, which is the whole string's answer.
//
//   task               vocab  scored positions                    main (chance)    train lengths n
//   parity               4    every bit: running parity           FINAL (1/2)      U[2, L]
//   modarith            11    '=' (last): expression mod 5        FINAL (1/5)      odd U[3, L]
//   modarith_brackets   12    '=' (last): expression mod 5        FINAL (1/5)      U[5, L]
//   z5                   7    every element: running sum mod 5    FINAL (1/5)      L
//   s3                   8    every element: prefix product       FINAL (1/6)      U[16, L]
//   majority             7    '=' (last): unique majority symbol  FINAL (1/4)      U[8, L]
//   majority_count      67    '=' (last): min(max count, 64)      FINAL (1/64)     U[8, L]
//   anbn                 5    every input b: next symbol          SEQUENCE (0)     2k+2, k U[1,(L-2)/2] (*)
//   anbncn               6    every input b, c: next symbol       SEQUENCE (0)     3k+2, k U[1,(L-2)/3] (*)
//   mqar               512    each key's second occurrence: value TOKEN (1/256)    L (N = L/16 pairs)
//   (*) then k' in [k/2, k]
//
// Choices the sources leave open: majority breaks a tie for the maximum by moving one occurrence of a
// tied symbol to a winner drawn uniformly among the tied ones, so the answer is always unique.
// majority_count follows the xLSTM paper's definition: an ordered alphabet of 64 symbols, the answer is
// the symbol whose rank is the count of the most frequent symbol, clipped at the highest (rank 64).
// The paper does not say how strings are drawn. With all 64 symbols uniform, the top count is 1-10 at
// the training lengths n <= 128 but 12-23 at 512 and 40-61 at 2048 (a simulation of 3,000 / 1,000 / 300
// strings): every answer at 512 and 2048 is one the model was never trained to emit, so no model can
// score there. Here each example first draws how many symbols it uses, k uniform in 1..64 (a random
// subset), then draws its n-2 symbols uniformly from those k: the top count is about n/k, the answers
// at training lengths cover all of 1..64 (0.9% clipped; tests/test_tasks.c), and at 512 (16% clipped)
// and 2048 (65%) every answer is one training asks for: what grows is the length over which it counts.
// The constant answer "64" is then a strong baseline at 2048: report the constant predictor's score.
// anbn and anbncn draw k uniformly from the upper half of what fits the length (next-symbol
// prediction), so an evaluation set at 2048 holds distinct strings with n in (1024, 2048]. mqar
// follows zoology's layout: keys and values disjoint, distinct within an example, each key
// queried once at a slot drawn from zoology's power law p(g) ~ (g+1)^(a-1), a = 0.01 (early slots
// favoured); non-query slots hold a blank token (the paper's random_non_queries=False).
// Nothing allocates (mqar uses a 512-byte stack array); each sample is O(len); the bracket
// generator recurses only into the shorter operand, so its depth is at most log2(len).

enum { MN__TASK_PARITY, MN__TASK_MODARITH, MN__TASK_BRACKETS, MN__TASK_Z5, MN__TASK_S3,
       MN__TASK_MAJORITY, MN__TASK_MAJCOUNT, MN__TASK_ANBN, MN__TASK_ANBNCN, MN__TASK_MQAR, MN__TASK_COUNT };
#define MN__TASK_PAD 0
#define MN__TASK_BOS 1
#define MN__TASK_MAJ_A 4          // majority: alphabet size
#define MN__TASK_MC_A 64          // majority_count: ordered alphabet; counts >= 64 are answered with rank 64
#define MN__TASK_MQAR_KEY0 3      // mqar: keys 3..255, values 256..511
#define MN__TASK_MQAR_VAL0 256
#define MN__TASK_MQAR_V 512
#define MN__TASK_MQAR_POWER_A 0.01

static const mn_task mn__tasks[MN__TASK_COUNT] = {
    { "parity", 4, MN_METRIC_FINAL, 0.5, 2,
      "PAD 0, BOS 1, bits 0/1 = 2/3; BOS b_1..b_{n-1}; position t>=1 scored with the parity of b_1..b_t (2 even, 3 "
      "odd); FINAL = parity of all n-1 bits" },
    { "modarith", 11, MN_METRIC_FINAL, 0.2, 3,
      "PAD 0, BOS 1, = 2, + 3, - 4, * 5, digits 0-4 = 6-10; BOS d op d ... op d = (n odd); '=' (last position) scored "
      "with the value mod 5 (* before +,-; left to right)" },
    { "modarith_brackets", 12, MN_METRIC_FINAL, 0.2, 5,
      "PAD 0, BOS 1, = 2, + 3, - 4, ( 5, ) 6, digits 0-4 = 7-11; BOS expr =, expr: Deletang's recursive +,- expression "
      "of n-2 tokens; '=' (last) scored with its value mod 5" },
    { "z5", 7, MN_METRIC_FINAL, 0.2, 2,
      "PAD 0, BOS 1, elements 0-4 = 2-6; BOS g_1..g_{n-1}; position t>=1 scored with g_1+...+g_t mod 5; trains at "
      "max_len only" },
    { "s3", 8, MN_METRIC_FINAL, 1.0 / 6.0, 16,
      "PAD 0, BOS 1, permutations of {0,1,2} in lexicographic order (identity first) = 2-7; BOS g_1..g_{n-1}; position "
      "t>=1 scored with g_1 o ... o g_t, (a o b)(i) = a(b(i))" },
    { "majority", 7, MN_METRIC_FINAL, 0.25, 8,
      "PAD 0, BOS 1, = 2, symbols 3-6; BOS s_1..s_{n-2} =, unique most frequent symbol guaranteed; '=' (last) scored "
      "with that symbol" },
    { "majority_count", 3 + MN__TASK_MC_A, MN_METRIC_FINAL, 1.0 / MN__TASK_MC_A, 8,
      "PAD 0, BOS 1, = 2, symbols of rank 1-64 = 3-66; BOS s_1..s_{n-2} = with the s drawn from k random symbols, "
      "k uniform in 1..64; '=' (last) scored with the symbol of rank min(count of the most frequent symbol, 64)" },
    { "anbn", 5, MN_METRIC_SEQUENCE, 0.0, 4,
      "PAD 0, S(BOS) 1, a 2, b 3, T 4; S a^k b^k T, n = 2k+2 with k as large as fits; every input b scored with the "
      "next symbol (b..., then T)" },
    { "anbncn", 6, MN_METRIC_SEQUENCE, 0.0, 5,
      "PAD 0, S(BOS) 1, a 2, b 3, c 4, T 5; S a^k b^k c^k T, n = 3k+2 with k as large as fits; every input b and c "
      "scored with the next symbol" },
    { "mqar", MN__TASK_MQAR_V, MN_METRIC_TOKEN, 1.0 / (MN__TASK_MQAR_V - MN__TASK_MQAR_VAL0), 5,
      "PAD 0, BOS 1, blank 2, keys 3-255, values 256-511; BOS k1 v1..kN vN, then blanks where each key reappears once "
      "(power-law slot, even offsets); N = max(1, n/16); each reappearance scored with its value; trains at max_len "
      "only" },
};
// shortest example mn_task_sample accepts, per task (BOS plus the least content the grammar has)
static const size_t mn__task_min[MN__TASK_COUNT] = { 2, 3, 3, 2, 2, 3, 3, 4, 5, 5 };

// S3 product table: mn__task_s3_mul[a][b] = a o b, the permutation i -> a[b[i]], elements indexed
// in lexicographic order 012, 021, 102, 120, 201, 210 (index 0 is the identity).
static const unsigned char mn__task_s3_mul[6][6] = {
    { 0, 1, 2, 3, 4, 5 }, { 1, 0, 4, 5, 2, 3 }, { 2, 3, 0, 1, 5, 4 },
    { 3, 2, 5, 4, 0, 1 }, { 4, 5, 1, 0, 3, 2 }, { 5, 4, 3, 2, 1, 0 },
};

// Uniform integer in [0, k), k >= 1, without modulo bias (Lemire's multiply-and-reject for
// k < 2^32; beyond that a 64-bit draw reduced mod k, whose bias is below k / 2^64).
static size_t mn__task_below(mn_rng* r, size_t k) {
    if (k <= 1) return 0;
    if (k <= 0xFFFFFFFFu) {
        uint32_t k32 = (uint32_t)k, thresh = (uint32_t)(0u - k32) % k32;
        uint64_t m = (uint64_t)mn_rng_u32(r) * k32;
        while ((uint32_t)m < thresh) m = (uint64_t)mn_rng_u32(r) * k32;
        return (size_t)(m >> 32);
    }
    uint64_t hi = mn_rng_u32(r), lo = mn_rng_u32(r);
    return (size_t)(((hi << 32) | lo) % (uint64_t)k);
}
static int mn__task_mod5(int v) { v %= 5; return v < 0 ? v + 5 : v; }

// ------------------------------------------------------------------------------------ generators
// Each writes x[0..n) and the scored y of one example (the caller has set x = PAD, y = -1 over
// [0, len)) and returns n.

// parity: x = BOS b_1..b_{n-1}, y[t] = b_1 xor ... xor b_t (tokens 2/3)
static size_t mn__task_parity(mn_rng* r, size_t len, int* x, int* y) {
    size_t t;
    int p = 0;
    x[0] = MN__TASK_BOS;
    for (t = 1; t < len; t++) {
        int b = (int)(mn_rng_u32(r) >> 31);
        p ^= b;
        x[t] = 2 + b;
        y[t] = 2 + p;
    }
    return len;
}

// modarith (NX-AI modular_arithmetic.py, mod 5): digits at odd positions, operators uniform in
// {+,-,*} between them, '=' last. The value is a sum of signed products: `term` is the running
// product of the current *-chain, `sum` the signed terms already closed by a + or -.
static size_t mn__task_modarith(mn_rng* r, size_t len, int* x, int* y) {
    size_t n = (len % 2 == 1) ? len : len - 1, t;     // BOS + (2k-1) expression tokens + '=' is odd
    int sum = 0, sign = 1, term = (int)mn__task_below(r, 5);
    x[0] = MN__TASK_BOS;
    x[1] = 6 + term;
    for (t = 3; t + 1 < n; t += 2) {
        int op = (int)mn__task_below(r, 3), d = (int)mn__task_below(r, 5);
        x[t - 1] = 3 + op;                            // 0 '+', 1 '-', 2 '*'
        x[t] = 6 + d;
        if (op == 2) term = (term * d) % 5;
        else { sum = mn__task_mod5(sum + sign * term); sign = op == 0 ? 1 : -1; term = d; }
    }
    sum = mn__task_mod5(sum + sign * term);
    x[n - 1] = 2;                                     // '='
    y[n - 1] = 6 + sum;
    return n;
}

// Deletang's generator (chomsky tasks/dcf/modular_arithmetic_brackets.py, mult=False): an
// expression of exactly len tokens at e[0..len), value mod 5 returned.
//   len 1: d   2: -d   3: (d)   4: (-d)   (d uniform in 0..4)
//   len >= 5: ( left op right ), left U{1..len-4} tokens, right the rest, op uniform in {+,-}.
// The value is linear in the leaves, so the expression can be built as a loop that keeps
// `total + sign * value(rest)`: recurse into the shorter operand, continue with the longer one.
// The recursion is on at most half the tokens each time (depth <= log2 len); the distribution of
// the trees is the reference's (each node's length split and operator independent and uniform).
static int mn__task_brackets_expr(mn_rng* r, int* e, size_t len) {
    int total = 0, sign = 1;
    for (;;) {
        if (len <= 4) {
            int d = (int)mn__task_below(r, 5), neg = (len == 2 || len == 4);
            if (len == 1) e[0] = 7 + d;
            else if (len == 2) { e[0] = 4; e[1] = 7 + d; }
            else if (len == 3) { e[0] = 5; e[1] = 7 + d; e[2] = 6; }
            else { e[0] = 5; e[1] = 4; e[2] = 7 + d; e[3] = 6; }
            return mn__task_mod5(total + sign * (neg ? -d : d));
        }
        size_t nl = 1 + mn__task_below(r, len - 4), nr = len - nl - 3;
        int op = (int)mn__task_below(r, 2);            // 0 '+', 1 '-'
        int rsign = op ? -sign : sign;                  // sign of the right operand in the total
        e[0] = 5;                                       // '('
        e[1 + nl] = 3 + op;
        e[len - 1] = 6;                                 // ')'
        if (nl <= nr) {                                 // left is shorter: recurse left, loop right
            total = mn__task_mod5(total + sign * mn__task_brackets_expr(r, e + 1, nl));
            e += 2 + nl; len = nr; sign = rsign;
        } else {                                        // right is shorter: recurse right, loop left
            total = mn__task_mod5(total + rsign * mn__task_brackets_expr(r, e + 2 + nl, nr));
            e += 1; len = nl;
        }
    }
}
static size_t mn__task_brackets(mn_rng* r, size_t len, int* x, int* y) {
    x[0] = MN__TASK_BOS;
    int v = mn__task_brackets_expr(r, x + 1, len - 2);
    x[len - 1] = 2;                                   // '='
    y[len - 1] = 7 + v;
    return len;
}

// z5 word problem: x = BOS g_1..g_{n-1}, y[t] = g_1 + ... + g_t mod 5
static size_t mn__task_z5(mn_rng* r, size_t len, int* x, int* y) {
    size_t t;
    int s = 0;
    x[0] = MN__TASK_BOS;
    for (t = 1; t < len; t++) {
        int g = (int)mn__task_below(r, 5);
        s = (s + g) % 5;
        x[t] = 2 + g;
        y[t] = 2 + s;
    }
    return len;
}

// s3 word problem (jopetty/word-problem, G = S3): y[t] = g_1 o ... o g_t, accumulated from the
// identity with acc = acc o g_t.
static size_t mn__task_s3(mn_rng* r, size_t len, int* x, int* y) {
    size_t t;
    int acc = 0;
    x[0] = MN__TASK_BOS;
    for (t = 1; t < len; t++) {
        int g = (int)mn__task_below(r, 6);
        acc = mn__task_s3_mul[acc][g];
        x[t] = 2 + g;
        y[t] = 2 + acc;
    }
    return len;
}

// majority: x = BOS s_1..s_{n-2} '=', symbols uniform over A = 4. A tie for the maximum is broken
// by moving one uniformly chosen occurrence of a tied symbol to a winner drawn uniformly among the
// tied ones (winner c+1, loser c-1, others <= c).
static size_t mn__task_majority(mn_rng* r, size_t len, int* x, int* y) {
    size_t cnt[MN__TASK_MAJ_A] = { 0 }, best = 0, t;
    int tied[MN__TASK_MAJ_A], ntied = 0, s;
    x[0] = MN__TASK_BOS;
    for (t = 1; t + 1 < len; t++) {
        s = (int)mn__task_below(r, MN__TASK_MAJ_A);
        x[t] = 3 + s;
        cnt[s]++;
    }
    x[len - 1] = 2;                                   // '='
    for (s = 0; s < MN__TASK_MAJ_A; s++) if (cnt[s] > best) best = cnt[s];
    for (s = 0; s < MN__TASK_MAJ_A; s++) if (cnt[s] == best) tied[ntied++] = s;
    if (ntied > 1) {
        int w = (int)mn__task_below(r, (size_t)ntied);
        int winner = tied[w], loser = tied[(w + 1 + (int)mn__task_below(r, (size_t)ntied - 1)) % ntied];
        size_t j = mn__task_below(r, cnt[loser]);      // which occurrence of the loser moves
        for (t = 1; t + 1 < len; t++)
            if (x[t] == 3 + loser && j-- == 0) { x[t] = 3 + winner; break; }
        tied[0] = winner;
    }
    y[len - 1] = 3 + tied[0];
    return len;
}

// majority_count: x = BOS s_1..s_{n-2} '=' over the ordered alphabet of 64 symbols (token 3 + r - 1 is
// the symbol of rank r). The example uses k symbols, k uniform in 1..64, chosen by a partial
// Fisher-Yates shuffle; its n-2 symbols are uniform over those k. y at '=' is the symbol of rank
// min(c, 64), c the count of the most frequent symbol (ties need no breaking: only the count is asked).
static size_t mn__task_majcount(mn_rng* r, size_t len, int* x, int* y) {
    size_t cnt[MN__TASK_MC_A] = { 0 }, best = 0, k, i, t;
    unsigned char use[MN__TASK_MC_A];
    for (i = 0; i < MN__TASK_MC_A; i++) use[i] = (unsigned char)i;
    k = 1 + mn__task_below(r, MN__TASK_MC_A);
    for (i = 0; i < k; i++) {                         // use[0..k) := k distinct symbols
        size_t j = i + mn__task_below(r, MN__TASK_MC_A - i);
        unsigned char tmp = use[i]; use[i] = use[j]; use[j] = tmp;
    }
    x[0] = MN__TASK_BOS;
    for (t = 1; t + 1 < len; t++) {
        int s = use[mn__task_below(r, k)];
        x[t] = 3 + s;
        if (++cnt[s] > best) best = cnt[s];
    }
    x[len - 1] = 2;                                   // '='
    y[len - 1] = 3 + (int)(best < MN__TASK_MC_A ? best : MN__TASK_MC_A) - 1;
    return len;
}

// anbn (n_blocks 2) and anbncn (3), next-symbol prediction in the form a softmax LM can be scored on:
// x = S a^k b^k [c^k] T; the positions whose input is b or c are the deterministic ones and are
// scored with the next input token; the positions before (after S and the a's) are ambiguous.
static size_t mn__task_anbn(mn_rng* r, size_t len, int* x, int* y, size_t blocks) {
    // k uniform on [ceil(kmax/2), kmax]: an evaluation set at one length holds distinct strings
    // (a fixed k would make it one string, scored 0 or 1), all longer than the next shorter length's
    size_t kmax = (len - 2) / blocks, klo = (kmax + 1) / 2, k = klo + mn__task_below(r, kmax - klo + 1),
           n = blocks * k + 2, t, b;
    x[0] = MN__TASK_BOS;
    for (b = 0; b < blocks; b++)
        for (t = 0; t < k; t++) x[1 + b * k + t] = 2 + (int)b;
    x[n - 1] = 2 + (int)blocks;                       // T
    for (t = k + 1; t + 1 < n; t++) y[t] = x[t + 1];
    return n;
}

// Slot g in [0, S) with p(g) proportional to (g+1)^(a-1) (zoology's power law), exactly: propose
// g = floor(u) - 1 with u from the continuous density ~ u^(a-1) on [1, S+1) (inverse CDF), and
// accept with the ratio of the two masses over 2^(1-a), which bounds it (so acceptance >= 1/2).
static size_t mn__task_powerlaw(mn_rng* r, size_t S, double a) {
    double span = expm1(a * log((double)S + 1.0));  // (S+1)^a - 1
    for (;;) {
        double u = exp(log1p(mn_rng_uniform(r) * span) / a);
        size_t g = (size_t)u - 1;
        if (u < 1.0 || g >= S) continue;               // rounding at the ends
        double g1 = (double)g + 1.0;
        double mass = pow(g1, a) * expm1(a * log1p(1.0 / g1)) / a;   // integral of u^(a-1) over [g+1, g+2)
        double accept = pow(g1, a - 1.0) / (pow(2.0, 1.0 - a) * mass);
        if (mn_rng_uniform(r) < accept) return g;
    }
}

// mqar (zoology multiquery_ar.py, random_non_queries=False): x = BOS k_1 v_1 .. k_N v_N, then the
// query region, blank (2) except that key k_i reappears once at offset 2 g_i (distinct slots g_i
// drawn in order i = 1..N from the power law), where y = v_i. Keys are N distinct draws from
// 3..255 and values N distinct draws from 256..511 (partial Fisher-Yates over a stack pool).
static size_t mn__task_mqar(mn_rng* r, size_t len, int* x, int* y) {
    unsigned short pool[MN__TASK_MQAR_V - MN__TASK_MQAR_VAL0];
    size_t nkeys = MN__TASK_MQAR_VAL0 - MN__TASK_MQAR_KEY0, nvals = MN__TASK_MQAR_V - MN__TASK_MQAR_VAL0;
    size_t N = len / 16 > 1 ? len / 16 : 1, q0, S, i, t;
    if (N > nkeys) N = nkeys;
    q0 = 1 + 2 * N;                                   // first position of the query region
    S = (len - q0) / 2;                               // slots; >= N for every len >= 5
    x[0] = MN__TASK_BOS;
    for (i = 0; i < nkeys; i++) pool[i] = (unsigned short)(MN__TASK_MQAR_KEY0 + i);
    for (i = 0; i < N; i++) {
        size_t j = i + mn__task_below(r, nkeys - i);
        unsigned short tmp = pool[i]; pool[i] = pool[j]; pool[j] = tmp;
        x[1 + 2 * i] = pool[i];
    }
    for (i = 0; i < nvals; i++) pool[i] = (unsigned short)(MN__TASK_MQAR_VAL0 + i);
    for (i = 0; i < N; i++) {
        size_t j = i + mn__task_below(r, nvals - i);
        unsigned short tmp = pool[i]; pool[i] = pool[j]; pool[j] = tmp;
        x[2 + 2 * i] = pool[i];
    }
    for (t = q0; t < len; t++) x[t] = 2;              // blank
    for (i = 0; i < N; i++) {
        size_t pos;
        do pos = q0 + 2 * mn__task_powerlaw(r, S, MN__TASK_MQAR_POWER_A);
        while (x[pos] != 2);                          // slot taken: draw again (sampling without replacement)
        x[pos] = x[1 + 2 * i];
        y[pos] = x[2 + 2 * i];
    }
    return len;
}

// ------------------------------------------------------------------------------------ public API
static int mn__task_index(const mn_task* task) {
    int i;
    if (task == NULL) return -1;
    for (i = 0; i < MN__TASK_COUNT; i++) if (task == &mn__tasks[i]) return i;
    if (task->name == NULL) return -1;                // a copy of a table entry: match by name
    for (i = 0; i < MN__TASK_COUNT; i++) if (strcmp(task->name, mn__tasks[i].name) == 0) return i;
    return -1;
}

MNDEF const mn_task* mn_task_find(const char* name) {
    int i;
    if (name == NULL) return NULL;
    for (i = 0; i < MN__TASK_COUNT; i++) if (strcmp(name, mn__tasks[i].name) == 0) return &mn__tasks[i];
    return NULL;
}

MNDEF const mn_task* mn_task_list(size_t* n) {
    if (n) *n = MN__TASK_COUNT;
    return mn__tasks;
}

MNDEF size_t mn_task_sample(const mn_task* task, mn_rng* rng, size_t len, int* x, int* y) {
    int id = mn__task_index(task);
    size_t t;
    if (id < 0 || rng == NULL || x == NULL || y == NULL || len < mn__task_min[id]) return 0;
    for (t = 0; t < len; t++) { x[t] = MN__TASK_PAD; y[t] = -1; }
    switch (id) {
    case MN__TASK_PARITY: return mn__task_parity(rng, len, x, y);
    case MN__TASK_MODARITH: return mn__task_modarith(rng, len, x, y);
    case MN__TASK_BRACKETS: return mn__task_brackets(rng, len, x, y);
    case MN__TASK_Z5: return mn__task_z5(rng, len, x, y);
    case MN__TASK_S3: return mn__task_s3(rng, len, x, y);
    case MN__TASK_MAJORITY: return mn__task_majority(rng, len, x, y);
    case MN__TASK_MAJCOUNT: return mn__task_majcount(rng, len, x, y);
    case MN__TASK_ANBN: return mn__task_anbn(rng, len, x, y, 2);
    case MN__TASK_ANBNCN: return mn__task_anbn(rng, len, x, y, 3);
    default: return mn__task_mqar(rng, len, x, y);
    }
}

MNDEF size_t mn_task_train_len(const mn_task* task, mn_rng* rng, size_t max_len) {
    int id = mn__task_index(task);
    size_t lo;
    if (id < 0 || rng == NULL) return 0;
    lo = mn__tasks[id].min_len;
    if (max_len < lo) return 0;
    switch (id) {
    case MN__TASK_Z5: case MN__TASK_MQAR:             // every prefix is scored / N = L/16 is fixed by L
        return max_len;
    case MN__TASK_MODARITH:                           // odd n = 2k+1, k in [1, (max_len-1)/2]
        return 2 * (1 + mn__task_below(rng, (max_len - 1) / 2)) + 1;
    case MN__TASK_ANBN:                               // n = 2k+2, k in [1, (max_len-2)/2]
        return 2 * (1 + mn__task_below(rng, (max_len - 2) / 2)) + 2;
    case MN__TASK_ANBNCN:                             // n = 3k+2, k in [1, (max_len-2)/3]
        return 3 * (1 + mn__task_below(rng, (max_len - 2) / 3)) + 2;
    default:
        return lo + mn__task_below(rng, max_len - lo + 1);
    }
}

#endif // MESANET_IMPLEMENTATION

/*
// >>license
------------------------------------------------------------------------------
This software is available under 2 licenses -- choose whichever you prefer.
------------------------------------------------------------------------------
ALTERNATIVE A - MIT License
Copyright (c) 2026 the mesanet authors
Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
ALTERNATIVE B - Public Domain (www.unlicense.org)
This is free and unencumbered software released into the public domain.
Anyone is free to copy, modify, publish, use, compile, sell, or distribute this
software, either in source code form or as a compiled binary, for any purpose,
commercial or non-commercial, and by any means.
In jurisdictions that recognize copyright laws, the author or authors of this
software dedicate any and all copyright interest in the software to the public
domain. We make this dedication for the benefit of the public at large and to
the detriment of our heirs and successors. We intend this dedication to be an
overt act of relinquishment in perpetuity of all present and future rights to
this software under copyright law.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN
ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION
WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
------------------------------------------------------------------------------
*/
