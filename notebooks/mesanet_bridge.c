/* mesanet_bridge.c - the C half of the Python bridge (notebooks/mesanet.py).

   `make lib` compiles this file twice into build/libmesanet_f64.so (-DMESANET_DOUBLE) and
   build/libmesanet_f32.so. It adds nothing to the library's arithmetic: it is mesanet.h and
   reference/vecfile.h compiled once each, plus three kinds of glue that ctypes cannot do alone:
     1. MN_LOG goes to a buffer instead of stderr, so the Python side can put the library's own
        message into the exception it raises for a negative MN_ERR_* code (mnb_log_take);
     2. mn_model and mn_state are large structs whose layout Python should not copy: they are
        allocated here (mnb_model_new / mnb_state_new) and read through accessors;
     3. the small public structs Python does mirror (mn_config, mn_mesa_opts, mn_adamw,
        mn_train_meta, mn_tensor_info) are described by mnb_layout, which the bridge compares
        with its own ctypes layout when it loads, so a changed struct fails loudly, not silently.
*/
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

// The log buffer: everything MN_LOG wrote since the last mnb_log_take, cut at the capacity.
static char mnb__log[16384];
static size_t mnb__log_len;
static void mnb__logf(const char* fmt, ...) {
    va_list ap;
    int n;
    if (mnb__log_len + 1 >= sizeof(mnb__log)) return;
    va_start(ap, fmt);
    n = vsnprintf(mnb__log + mnb__log_len, sizeof(mnb__log) - mnb__log_len, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    mnb__log_len += (size_t)n;                                 // vsnprintf cut it at the end of the buffer
    if (mnb__log_len >= sizeof(mnb__log)) mnb__log_len = sizeof(mnb__log) - 1;
}
#define MN_LOG(...) mnb__logf(__VA_ARGS__)

#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#define MN_VECFILE_IMPLEMENTATION
#include "reference/vecfile.h"

// Copies the log (NUL-terminated, at most cap-1 bytes) into buf, clears it, returns its full length.
size_t mnb_log_take(char* buf, size_t cap) {
    size_t n = mnb__log_len;
    if (buf && cap) {
        size_t c = n < cap - 1 ? n : cap - 1;
        memcpy(buf, mnb__log, c);
        buf[c] = 0;
    }
    mnb__log_len = 0;
    mnb__log[0] = 0;
    return n;
}

// sizeof(mn_real): 8 in the double build, 4 in the float build.
size_t mnb_real_size(void) { return sizeof(mn_real); }

// Byte offset of "struct.field" (or the size of "struct"), for the bridge's layout check; -1 if unknown.
long mnb_layout(const char* name) {
#define MNB_F(s, f) {#s "." #f, (long)offsetof(s, f)}
#define MNB_S(s) {#s, (long)sizeof(s)}
    static const struct { const char* name; long v; } t[] = {
        MNB_S(mn_config), MNB_F(mn_config, vocab_size), MNB_F(mn_config, d_model), MNB_F(mn_config, n_layer),
        MNB_F(mn_config, n_head), MNB_F(mn_config, head_dim), MNB_F(mn_config, d_ff), MNB_F(mn_config, max_seq_len),
        MNB_F(mn_config, window), MNB_F(mn_config, pattern), MNB_F(mn_config, rope_theta), MNB_F(mn_config, norm_eps),
        MNB_F(mn_config, logit_softcap), MNB_F(mn_config, init_std), MNB_F(mn_config, seed),
        MNB_F(mn_config, mesa_cg_train), MNB_F(mn_config, mesa_cg_decode), MNB_F(mn_config, mesa_cg_tol),
        MNB_F(mn_config, mesa_chunk), MNB_F(mn_config, mesa_gamma_clamp), MNB_F(mn_config, mesa_cg_fla),
        MNB_F(mn_config, mesa_gate_bias), MNB_F(mn_config, mesa_cg_warm),
        MNB_S(mn_mesa_opts), MNB_F(mn_mesa_opts, solver), MNB_F(mn_mesa_opts, cg_iters), MNB_F(mn_mesa_opts, cg_tol),
        MNB_F(mn_mesa_opts, fla), MNB_F(mn_mesa_opts, jacobi), MNB_F(mn_mesa_opts, chunk), MNB_F(mn_mesa_opts, warm),
        MNB_S(mn_adamw), MNB_F(mn_adamw, beta1), MNB_F(mn_adamw, beta2), MNB_F(mn_adamw, eps),
        MNB_F(mn_adamw, weight_decay),
        MNB_S(mn_train_meta), MNB_F(mn_train_meta, step), MNB_F(mn_train_meta, rng_state), MNB_F(mn_train_meta, extra),
        MNB_F(mn_train_meta, notes),
        MNB_S(mn_tensor_info), MNB_F(mn_tensor_info, name), MNB_F(mn_tensor_info, shape), MNB_F(mn_tensor_info, ndim),
        MNB_F(mn_tensor_info, offset), MNB_F(mn_tensor_info, numel), MNB_F(mn_tensor_info, decay),
        MNB_F(mn_tensor_info, init), MNB_F(mn_tensor_info, dtype),
        MNB_S(mn_rng), MNB_F(mn_rng, s),
    };
#undef MNB_F
#undef MNB_S
    size_t i;
    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(t[i].name, name)) return t[i].v;
    return -1;
}

// --- the model and the decoding state, opaque to Python ---
mn_model* mnb_model_new(void) { return (mn_model*)calloc(1, sizeof(mn_model)); }
void mnb_model_delete(mn_model* m) {
    if (!m) return;
    mn_model_free(m);
    free(m);
}
const mn_config* mnb_model_cfg(const mn_model* m) { return &m->cfg; }
mn_real* mnb_model_params(mn_model* m) { return m->params; }     // (P)
mn_real* mnb_model_grads(mn_model* m) { return m->grads; }       // (P)
size_t mnb_model_n_params(const mn_model* m) { return m->n_params; }
size_t mnb_model_n_trainable(const mn_model* m) { return m->n_trainable; }
size_t mnb_model_n_tensors(const mn_model* m) { return m->n_tensors; }
uint64_t mnb_model_opt_step(const mn_model* m) { return m->opt_step; }
const mn_tensor_info* mnb_model_tensor(const mn_model* m, size_t i) { return i < m->n_tensors ? &m->tensors[i] : NULL; }

mn_state* mnb_state_new(void) { return (mn_state*)calloc(1, sizeof(mn_state)); }
void mnb_state_delete(mn_state* s) {
    if (!s) return;
    mn_state_free(s);
    free(s);
}
size_t mnb_state_pos(const mn_state* s) { return s->pos; }
size_t mnb_state_n_seq(const mn_state* s) { return s->n_seq; }

// --- .vec files: the same parser check_vectors uses, copied out tensor by tensor ---
mn_vec_file* mnb_vec_new(void) { return (mn_vec_file*)calloc(1, sizeof(mn_vec_file)); }
void mnb_vec_delete(mn_vec_file* f) {
    if (!f) return;
    mn_vec_free(f);
    free(f);
}
const char* mnb_vec_op(const mn_vec_file* f) { return f->op; }
const char* mnb_vec_source(const mn_vec_file* f) { return f->source; }
size_t mnb_vec_n_attr(const mn_vec_file* f) { return f->n_attr; }
const char* mnb_vec_attr_name(const mn_vec_file* f, size_t i) { return i < f->n_attr ? f->attr[i].name : NULL; }
const char* mnb_vec_attr_value(const mn_vec_file* f, size_t i) { return i < f->n_attr ? f->attr[i].value : NULL; }
size_t mnb_vec_n_tensor(const mn_vec_file* f) { return f->n_tensor; }
const mn_vec_tensor* mnb_vec_tensor(const mn_vec_file* f, size_t i) { return i < f->n_tensor ? &f->tensor[i] : NULL; }
const char* mnb_vec_tensor_name(const mn_vec_tensor* t) { return t->name; }
size_t mnb_vec_tensor_ndim(const mn_vec_tensor* t) { return t->ndim; }
size_t mnb_vec_tensor_dim(const mn_vec_tensor* t, size_t i) { return i < t->ndim ? t->dims[i] : 0; }
const double* mnb_vec_tensor_data(const mn_vec_tensor* t) { return t->data; }  // (n), row-major
