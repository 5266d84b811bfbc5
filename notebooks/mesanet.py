"""mesanet.py - numpy in, numpy out: mesanet.h's ops, model and .vec files from Python (ctypes, no other dependency).

    import mesanet
    mn = mesanet.load()                       # build/libmesanet_f64.so (`make lib`); mesanet.load("f32") for float
    out, ht = mn.gla_forward(q, k, v, g)      # the C ground truth on your own tensors

What it is for: checking a kernel written elsewhere (Triton, CUDA, JAX) against the C reference on the
same tensors, in double precision, and writing .vec files that `make check-vectors VECTORS=dir` checks;
and the tutorials in this folder, which drive the library from notebooks.

How it binds the library:
  * _API below is the ONE table of the C functions this module calls: their prototypes, copied from
    mesanet.h's >>api section (and the bridge's own helpers from mesanet_bridge.c). ctypes argument and
    return types are derived from the C types, and every call passes its arguments BY THE C PARAMETER
    NAME, so a renamed function or a reordered argument list is a change of that table only.
    tests/test_bridge.py checks that each prototype in it is word for word one of the header's.
  * Loading checks that every symbol of the table exists in the library (the error names the missing
    ones) and that the structs this module mirrors have the header's layout (mnb_layout).
  * Every wrapper checks shapes, dtype (the library's mn_real: float64 or float32) and C-contiguity
    before it calls, allocates the outputs and the workspace itself, and returns fresh arrays.
  * A negative MN_ERR_* return becomes MesanetError carrying the code and the line the library wrote
    to MN_LOG (mesanet_bridge.c routes MN_LOG into a buffer that this module reads).
  * Backwards return the gradients of L = sum(out * dout) (+ sum(ht * dht)): the C backwards accumulate
    (+=), and this module hands them zeroed buffers, so what comes back is the gradient itself.
Layouts are the header's: per-head tensors [B, T, H, D], states [B, H, Dk, Dv].
"""
import collections
import ctypes
import os
import re

import numpy as np

__all__ = ["load", "Lib", "Model", "State", "MesanetError", "read_vec", "write_vec", "VecFile"]

# ---------------------------------------------------------------------------------------------------
# The table: C prototypes as the header declares them (a rename in mesanet.h is a change here only).
_API = """
const char* mn_strerror(int code);
void mn_rng_seed(mn_rng* r, uint64_t seed);
double mn_rng_normal(mn_rng* r);

void mn_attention_forward_naive(mn_real* out, mn_real* lse, const mn_real* q, const mn_real* k,
    const mn_real* v, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale);
void mn_attention_backward_naive(mn_real* dq, mn_real* dk, mn_real* dv, const mn_real* dout,
    const mn_real* out, const mn_real* lse, const mn_real* q, const mn_real* k, const mn_real* v, size_t B,
    size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale);
void mn_attention_forward(mn_real* out, mn_real* att, const mn_real* q, const mn_real* k, const mn_real* v,
    size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t window, double scale);
void mn_attention_backward(mn_real* dq, mn_real* dk, mn_real* dv, const mn_real* dout, const mn_real* att,
    const mn_real* q, const mn_real* k, const mn_real* v, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
    size_t window, double scale, mn_real* datt);
void mn_attention_step(mn_real* out, mn_real* kcache, mn_real* vcache, const mn_real* q, const mn_real* k,
    const mn_real* v, size_t pos, size_t cache_len, size_t H, size_t Dk, size_t Dv, size_t window, double scale,
    mn_real* scores);

size_t mn_gla_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C);
size_t mn_gla_work_size_recurrent(size_t T, size_t Dk, size_t Dv);
void mn_gla_forward_recurrent(mn_real* out, mn_real* ht, const mn_real* q, const mn_real* k, const mn_real* v,
    const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
    double scale);
void mn_gla_backward_recurrent(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dh0,
    const mn_real* dout, const mn_real* dht, const mn_real* q, const mn_real* k, const mn_real* v,
    const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
    double scale, mn_real* work);
void mn_gla_forward(mn_real* out, mn_real* ht, const mn_real* q, const mn_real* k, const mn_real* v,
    const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G,
    double scale, size_t C, mn_real* work);
void mn_gla_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dh0, const mn_real* dout,
    const mn_real* dht, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
    const mn_real* h0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G, double scale, size_t C,
    mn_real* work);
void mn_gla_step(mn_real* out, mn_real* state, const mn_real* q, const mn_real* k, const mn_real* v,
    const mn_real* g, size_t B, size_t H, size_t Dk, size_t Dv, size_t G, double scale);

void mn_delta_rule_forward_naive(mn_real* out, mn_real* ht, mn_real* states, const mn_real* q, const mn_real* k,
    const mn_real* v, const mn_real* beta, const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H,
    size_t Dk, size_t Dv, double scale);
void mn_delta_rule_backward_naive(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dbeta, mn_real* dg,
    mn_real* dh0, mn_real* dstate, const mn_real* dout, const mn_real* dht, const mn_real* states,
    const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* beta, const mn_real* g, size_t B,
    size_t T, size_t H, size_t Dk, size_t Dv, double scale);
size_t mn_delta_rule_work_size(size_t B, size_t H, size_t Dk, size_t Dv, size_t chunk);
void mn_delta_rule_forward(mn_real* out, mn_real* ht, mn_real* hs, const mn_real* q, const mn_real* k,
    const mn_real* v, const mn_real* beta, const mn_real* g, const mn_real* h0, size_t B, size_t T, size_t H,
    size_t Dk, size_t Dv, size_t chunk, double scale, mn_real* work);
void mn_delta_rule_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dbeta, mn_real* dg, mn_real* dh0,
    const mn_real* dout, const mn_real* dht, const mn_real* hs, const mn_real* q, const mn_real* k,
    const mn_real* v, const mn_real* beta, const mn_real* g, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
    size_t chunk, double scale, mn_real* work);
void mn_delta_rule_step(mn_real* out, mn_real* state, const mn_real* q, const mn_real* k, const mn_real* v,
    const mn_real* beta, const mn_real* g, size_t B, size_t H, size_t Dk, size_t Dv, double scale);

size_t mn_ssd_work_size(size_t B, size_t T, size_t H, size_t P, size_t N, size_t C);
size_t mn_ssd_work_size_recurrent(size_t T, size_t P, size_t N);
void mn_ssd_forward_recurrent(mn_real* y, mn_real* ht, const mn_real* X, const mn_real* A, const mn_real* Bm,
    const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N, int amode);
void mn_ssd_backward_recurrent(mn_real* dX, mn_real* dA, mn_real* dB, mn_real* dC, mn_real* dh0,
    const mn_real* dy, const mn_real* dht, const mn_real* X, const mn_real* A, const mn_real* Bm,
    const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N, int amode,
    mn_real* work);
void mn_ssd_forward(mn_real* y, mn_real* ht, const mn_real* X, const mn_real* A, const mn_real* Bm,
    const mn_real* Cm, const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C,
    mn_real* work);
void mn_ssd_backward(mn_real* dX, mn_real* dA, mn_real* dB, mn_real* dC, mn_real* dh0, const mn_real* dy,
    const mn_real* dht, const mn_real* X, const mn_real* A, const mn_real* Bm, const mn_real* Cm,
    const mn_real* h0, size_t B, size_t T, size_t H, size_t P, size_t N, size_t C, mn_real* work);
void mn_ssd_step(mn_real* y, mn_real* state, const mn_real* X, const mn_real* A, const mn_real* Bm,
    const mn_real* Cm, size_t B, size_t H, size_t P, size_t N, int amode);

size_t mn_rglru_work_size(size_t B, size_t T, size_t W);
void mn_rglru_forward(mn_real* y, mn_real* ht, mn_real* gates, const mn_real* x, const mn_real* a_param,
    const mn_real* wx, const mn_real* bx, const mn_real* wa, const mn_real* ba, const mn_real* h0,
    const int* segment_pos, size_t B, size_t T, size_t W, size_t NH, double c);
void mn_rglru_backward(mn_real* dx, mn_real* da_param, mn_real* dwx, mn_real* dbx, mn_real* dwa, mn_real* dba,
    mn_real* dh0, const mn_real* dy, const mn_real* dht, const mn_real* y, const mn_real* gates, const mn_real* x,
    const mn_real* a_param, const mn_real* wx, const mn_real* wa, const mn_real* h0, const int* segment_pos,
    size_t B, size_t T, size_t W, size_t NH, double c, mn_real* work);
void mn_rglru_step(mn_real* y, mn_real* state, const mn_real* x, const mn_real* a_param, const mn_real* wx,
    const mn_real* bx, const mn_real* wa, const mn_real* ba, const int* segment_pos, size_t B, size_t W, size_t NH,
    double c, mn_real* work);

size_t mn_mlstm_work_size_parallel(size_t B, size_t T, size_t H);
void mn_mlstm_forward_parallel(mn_real* out, mn_real* norm, mn_real* stab, const mn_real* q, const mn_real* k,
    const mn_real* v, const mn_real* ig, const mn_real* fg, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
    double scale, double eps, mn_real* work);
void mn_mlstm_backward_parallel(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* di, mn_real* df,
    const mn_real* dout, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig,
    const mn_real* fg, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, int mode,
    mn_real* work);
void mn_mlstm_forward_recurrent(mn_real* out, mn_real* norm, mn_real* stab, mn_real* Ct, mn_real* nt,
    mn_real* mt, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig, const mn_real* fg,
    const mn_real* C0, const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
    double scale, double eps);
void mn_mlstm_step(mn_real* out, mn_real* C, mn_real* n, mn_real* m, const mn_real* q, const mn_real* k,
    const mn_real* v, const mn_real* ig, const mn_real* fg, size_t B, size_t H, size_t Dk, size_t Dv,
    double scale, double eps);
size_t mn_mlstm_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C);
void mn_mlstm_forward(mn_real* out, mn_real* norm, mn_real* stab, mn_real* Ct, mn_real* nt, mn_real* mt,
    const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig, const mn_real* fg, const mn_real* C0,
    const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale,
    double eps, size_t C, mn_real* work);
void mn_mlstm_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* di, mn_real* df, mn_real* dC0,
    mn_real* dn0, const mn_real* dout, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* ig,
    const mn_real* fg, const mn_real* C0, const mn_real* n0, const mn_real* m0, size_t B, size_t T, size_t H,
    size_t Dk, size_t Dv, double scale, double eps, size_t C, int mode, mn_real* work);

size_t mn_slstm_work_size(size_t B, size_t NH, size_t Dh);
void mn_slstm_forward(mn_real* y, mn_real* c, mn_real* n, mn_real* m, const mn_real* x, const mn_real* R,
    const mn_real* b, const mn_real* y0, const mn_real* c0, const mn_real* n0, const mn_real* m0, size_t B,
    size_t T, size_t NH, size_t Dh, mn_real* work);
void mn_slstm_backward(mn_real* dx, mn_real* dR, mn_real* db, mn_real* dy0, mn_real* dc0, mn_real* dn0,
    const mn_real* dy, const mn_real* y, const mn_real* c, const mn_real* n, const mn_real* m, const mn_real* x,
    const mn_real* R, const mn_real* b, const mn_real* y0, const mn_real* c0, const mn_real* n0,
    const mn_real* m0, size_t B, size_t T, size_t NH, size_t Dh, mn_real* work);
void mn_slstm_step(mn_real* y, mn_real* c, mn_real* n, mn_real* m, const mn_real* x, const mn_real* R,
    const mn_real* b, size_t B, size_t NH, size_t Dh, mn_real* work);

size_t mn_mesa_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o);
size_t mn_mesa_work_size_recurrent(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o);
void mn_mesa_step(mn_real* out, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q, const mn_real* k,
    const mn_real* v, const mn_real* g, const mn_real* beta, const mn_real* lamb, size_t H, size_t Dk, size_t Dv,
    const mn_mesa_opts* o, mn_real* work);
void mn_mesa_forward_recurrent(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv,
    const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta,
    const mn_real* lamb, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o,
    mn_real* work);
void mn_mesa_backward_recurrent(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dbeta,
    mn_real* dlamb, mn_real* dhkk0, mn_real* dhkv0, const mn_real* dout, const mn_real* dhkk, const mn_real* dhkv,
    const mn_real* xs, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
    const mn_real* beta, const mn_real* lamb, const mn_real* hkk0, const mn_real* hkv0, size_t B, size_t T,
    size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work);
void mn_mesa_forward(mn_real* out, mn_real* xs, int* iters, mn_real* hkk, mn_real* hkv, const mn_real* q,
    const mn_real* k, const mn_real* v, const mn_real* g, const mn_real* beta, const mn_real* lamb, size_t B,
    size_t T, size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work);
void mn_mesa_backward(mn_real* dq, mn_real* dk, mn_real* dv, mn_real* dg, mn_real* dbeta, mn_real* dlamb,
    mn_real* dhkk0, mn_real* dhkv0, const mn_real* dout, const mn_real* dhkk, const mn_real* dhkv,
    const mn_real* xs, const mn_real* q, const mn_real* k, const mn_real* v, const mn_real* g,
    const mn_real* beta, const mn_real* lamb, const mn_real* hkk0, const mn_real* hkv0, size_t B, size_t T,
    size_t H, size_t Dk, size_t Dv, const mn_mesa_opts* o, mn_real* work);

int mn_config_resolve(mn_config* out, const mn_config* in);
int mn_model_init(mn_model* m, const mn_config* cfg);
int mn_forward(mn_model* m, const int* tokens, const int* targets, size_t B, size_t T, mn_real* loss);
const mn_real* mn_logits(const mn_model* m);
void mn_zero_grad(mn_model* m);
int mn_backward(mn_model* m);
double mn_clip_grad_norm(mn_model* m, double max_norm);
int mn_adamw_step(mn_model* m, double lr, const mn_adamw* hp);
double mn_lr_schedule(size_t step, size_t warmup, size_t total, double lr_max, double lr_min);
int mn_state_init(mn_state* s, const mn_model* m, size_t n_seq);
void mn_state_reset(mn_state* s);
int mn_step(mn_model* m, mn_state* s, const int* tokens, mn_real* logits);
double mn_state_cg_stats(const mn_model* m, const mn_state* s, double* solves);
int mn_sample(const mn_real* logits, size_t V, double temperature, size_t top_k, double top_p, mn_rng* rng,
    mn_real* scratch);
int mn_save(const mn_model* m, const char* dir, const mn_train_meta* meta);
int mn_load(mn_model* m, const char* dir, mn_train_meta* meta);

const mn_task* mn_task_find(const char* name);
size_t mn_task_sample(const mn_task* task, mn_rng* rng, size_t len, int* x, int* y);
size_t mn_task_train_len(const mn_task* task, mn_rng* rng, size_t max_len);

int mn_vec_load(mn_vec_file* f, const char* path, char* err, size_t errlen);

size_t mnb_log_take(char* buf, size_t cap);
size_t mnb_real_size(void);
long mnb_layout(const char* name);
mn_model* mnb_model_new(void);
void mnb_model_delete(mn_model* m);
const mn_config* mnb_model_cfg(const mn_model* m);
mn_real* mnb_model_params(mn_model* m);
mn_real* mnb_model_grads(mn_model* m);
size_t mnb_model_n_params(const mn_model* m);
size_t mnb_model_n_trainable(const mn_model* m);
size_t mnb_model_n_tensors(const mn_model* m);
uint64_t mnb_model_opt_step(const mn_model* m);
const mn_tensor_info* mnb_model_tensor(const mn_model* m, size_t i);
mn_state* mnb_state_new(void);
void mnb_state_delete(mn_state* s);
size_t mnb_state_pos(const mn_state* s);
mn_vec_file* mnb_vec_new(void);
void mnb_vec_delete(mn_vec_file* f);
const char* mnb_vec_op(const mn_vec_file* f);
const char* mnb_vec_source(const mn_vec_file* f);
size_t mnb_vec_n_attr(const mn_vec_file* f);
const char* mnb_vec_attr_name(const mn_vec_file* f, size_t i);
const char* mnb_vec_attr_value(const mn_vec_file* f, size_t i);
size_t mnb_vec_n_tensor(const mn_vec_file* f);
const mn_vec_tensor* mnb_vec_tensor(const mn_vec_file* f, size_t i);
const char* mnb_vec_tensor_name(const mn_vec_tensor* t);
size_t mnb_vec_tensor_ndim(const mn_vec_tensor* t);
size_t mnb_vec_tensor_dim(const mn_vec_tensor* t, size_t i);
const double* mnb_vec_tensor_data(const mn_vec_tensor* t);
"""

_SCALAR = {"size_t": ctypes.c_size_t, "double": ctypes.c_double, "int": ctypes.c_int, "uint64_t": ctypes.c_uint64,
           "long": ctypes.c_long, "void": None}


def _ctype(t):
    """ctypes type of a C type string: strings as c_char_p, every other pointer as c_void_p."""
    t = " ".join(t.replace("*", " * ").split())
    if t == "const char *":              # in: bytes; out: bytes (a writable char* is a buffer: c_void_p)
        return ctypes.c_char_p
    if t.endswith("*"):
        return ctypes.c_void_p
    return _SCALAR[t.replace("const ", "")]


def parse_prototypes(text):
    """[(name, return type, [(C type, parameter name), ...])] for each `ret name(args);` in text."""
    text = re.sub(r"//[^\n]*", "", text)
    out = []
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(mnb?_\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, args = " ".join(m.group(1).split()), m.group(2), " ".join(m.group(3).split())
        params = []
        if args and args != "void":
            for a in args.split(","):
                pm = re.match(r"(.*?)([A-Za-z_]\w*)$", a.strip())
                params.append((" ".join(pm.group(1).replace("*", "* ").split()).replace(" *", "*"), pm.group(2)))
        out.append((name, ret.replace(" *", "*"), params))
    return out


# ---------------------------------------------------------------------------------------------------
# Mirrored structs (their layout is checked against the library's offsetof table when it loads).
def _mirror(real):
    class Config(ctypes.Structure):
        _fields_ = [("vocab_size", ctypes.c_size_t), ("d_model", ctypes.c_size_t), ("n_layer", ctypes.c_size_t),
                    ("n_head", ctypes.c_size_t), ("head_dim", ctypes.c_size_t), ("d_ff", ctypes.c_size_t),
                    ("max_seq_len", ctypes.c_size_t), ("window", ctypes.c_size_t), ("pattern", ctypes.c_char_p),
                    ("rope_theta", ctypes.c_double), ("norm_eps", ctypes.c_double),
                    ("logit_softcap", ctypes.c_double), ("init_std", ctypes.c_double), ("seed", ctypes.c_uint64),
                    ("mesa_cg_train", ctypes.c_int), ("mesa_cg_decode", ctypes.c_int),
                    ("mesa_cg_tol", ctypes.c_double), ("mesa_chunk", ctypes.c_size_t),
                    ("mesa_gamma_clamp", ctypes.c_int), ("mesa_cg_fla", ctypes.c_int),
                    ("mesa_gate_bias", ctypes.c_double), ("mesa_cg_warm", ctypes.c_int)]

    class MesaOpts(ctypes.Structure):
        _fields_ = [("solver", ctypes.c_int), ("cg_iters", ctypes.c_int), ("cg_tol", ctypes.c_double),
                    ("fla", ctypes.c_int), ("jacobi", ctypes.c_int), ("chunk", ctypes.c_size_t),
                    ("warm", ctypes.c_int)]

    class AdamW(ctypes.Structure):
        _fields_ = [("beta1", ctypes.c_double), ("beta2", ctypes.c_double), ("eps", ctypes.c_double),
                    ("weight_decay", ctypes.c_double)]

    class TrainMeta(ctypes.Structure):
        _fields_ = [("step", ctypes.c_uint64), ("rng_state", ctypes.c_uint64), ("extra", ctypes.c_double * 4),
                    ("notes", ctypes.c_char * 1024)]

    class TensorInfo(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char * 96), ("shape", ctypes.c_size_t * 4), ("ndim", ctypes.c_size_t),
                    ("offset", ctypes.c_size_t), ("numel", ctypes.c_size_t), ("decay", ctypes.c_int),
                    ("init", ctypes.c_int), ("dtype", ctypes.c_int)]

    class Rng(ctypes.Structure):
        _fields_ = [("s", ctypes.c_uint64)]

    class Task(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("vocab_size", ctypes.c_int), ("metric", ctypes.c_int),
                    ("chance", ctypes.c_double), ("min_len", ctypes.c_size_t), ("doc", ctypes.c_char_p)]

    return {"mn_config": Config, "mn_mesa_opts": MesaOpts, "mn_adamw": AdamW, "mn_train_meta": TrainMeta,
            "mn_tensor_info": TensorInfo, "mn_rng": Rng, "mn_task": Task}


# error codes (mesanet.h >>types)
ERRORS = {0: "MN_OK", -1: "MN_ERR_CONFIG", -2: "MN_ERR_ALLOC", -3: "MN_ERR_IO", -4: "MN_ERR_FORMAT",
          -5: "MN_ERR_RANGE", -6: "MN_ERR_NAN", -7: "MN_ERR_STATE"}
MESA_CG, MESA_EXACT = 0, 1
SSD_LOG_DECAY, SSD_TRANSITION = 0, 1
MLSTM_BW_EXACT, MLSTM_BW_DETACH = 0, 1


class MesanetError(RuntimeError):
    """A negative MN_ERR_* return: .code, .name (e.g. 'MN_ERR_CONFIG'), .function, and .message, the
    library's own line from MN_LOG."""

    def __init__(self, code, function, message):
        self.code, self.function, self.message = code, function, message.strip()
        self.name = ERRORS.get(code, "MN_ERR_%d" % code)
        super().__init__("%s failed with %s: %s" % (function, self.name, self.message or "(no message)"))


def _nt(name, fields):
    return collections.namedtuple(name, fields.split())


# where `make lib` put the libraries: $MESANET_BUILD, else build/ of this checkout
_HERE = os.path.dirname(os.path.abspath(__file__))
_DEFAULT_LIB_DIR = os.environ.get("MESANET_BUILD") or os.path.join(_HERE, os.pardir, "build")
_loaded = {}


def load(dtype="f64", path=None):
    """The library of element type dtype ('f64' or 'f32', also np.float64 / np.float32), loaded once.
    path: the .so (default: libmesanet_<dtype>.so in $MESANET_BUILD or build/, made by `make lib`)."""
    key = {np.float64: "f64", np.float32: "f32", "float64": "f64", "float32": "f32", "double": "f64",
           "float": "f32"}.get(dtype, dtype)
    if key not in ("f64", "f32"):
        raise ValueError("dtype must be 'f64' or 'f32', got %r" % (dtype,))
    path = os.path.abspath(path or os.path.join(_DEFAULT_LIB_DIR, "libmesanet_%s.so" % key))
    if path not in _loaded:
        _loaded[path] = Lib(path, key)
    return _loaded[path]


class Lib:
    """One loaded build of mesanet.h. Every public method is one C function (or a form of one)."""

    def __init__(self, path, key):
        if not os.path.exists(path):
            raise FileNotFoundError("%s does not exist: run `make lib` in the repository root" % path)
        self.path, self.key = path, key
        self.dtype = np.dtype(np.float64 if key == "f64" else np.float32)
        self._dll = ctypes.CDLL(path)
        self._proto = {}
        missing = []
        for name, ret, params in parse_prototypes(_API):
            if not hasattr(self._dll, name):
                missing.append(name)
                continue
            f = getattr(self._dll, name)
            f.restype = _ctype(ret)
            f.argtypes = [_ctype(t) for t, _ in params]
            self._proto[name] = (f, ret, params)
        if missing:
            raise ImportError("%s lacks %d symbol(s) the bridge binds: %s (rebuild with `make lib`, or update "
                              "the table _API in notebooks/mesanet.py)" % (path, len(missing), ", ".join(missing)))
        real = self._c("mnb_real_size")
        if real != self.dtype.itemsize:
            raise ImportError("%s has %d-byte mn_real, expected %s" % (path, real, self.dtype))
        self.struct = _mirror(self.dtype)
        self._check_layout()
        self._logbuf = ctypes.create_string_buffer(16384)
        self._take_log()

    # --- plumbing ---------------------------------------------------------------------------------
    def _check_layout(self):
        bad = []
        for sname, cls in self.struct.items():
            if sname == "mn_task":     # not in the bridge's table: checked through mn_task_find instead
                continue
            if self._c("mnb_layout", name=sname.encode()) != ctypes.sizeof(cls):
                bad.append("sizeof(%s)" % sname)
            for fname, _ in cls._fields_:
                if self._c("mnb_layout", name=("%s.%s" % (sname, fname)).encode()) != getattr(cls, fname).offset:
                    bad.append("%s.%s" % (sname, fname))
        if bad:
            raise ImportError("struct layout of %s differs from notebooks/mesanet.py's mirror: %s"
                              % (self.path, ", ".join(bad)))

    def _take_log(self):
        self._dll.mnb_log_take(self._logbuf, len(self._logbuf))
        return self._logbuf.value.decode(errors="replace")

    def _c(self, _fn, **kw):
        """Calls the C function _fn with its arguments given by their C parameter names."""
        f, ret, params = self._proto[_fn]
        name = _fn
        args, keep = [], []            # keep: the arrays stay alive until the call returns
        for t, p in params:
            if p not in kw:
                raise TypeError("%s: missing argument %s" % (name, p))
            a = kw.pop(p)
            keep.append(a)
            if isinstance(a, np.ndarray):
                a = a.ctypes.data
            elif isinstance(a, ctypes.Structure) or isinstance(a, ctypes.Array):
                a = ctypes.addressof(a)
            args.append(a)
        if kw:
            raise TypeError("%s has no argument(s) %s" % (name, ", ".join(kw)))
        return f(*args)

    def _rc(self, _fn, **kw):
        """_c for the int-returning functions: negative codes raise MesanetError with the logged line."""
        self._take_log()
        rc = self._c(_fn, **kw)
        msg = self._take_log()
        if rc < 0:
            raise MesanetError(rc, _fn, msg)
        return rc

    def strerror(self, code):
        return self._c("mn_strerror", code=code).decode()

    def _arr(self, x, name, shape, dtype=None):
        """x as the argument `name`: a C-contiguous numpy array of the library's dtype and this shape
        (None in shape: any size there). Returns x itself (no copy)."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        if not isinstance(x, np.ndarray):
            raise TypeError("%s must be a numpy array, got %s" % (name, type(x).__name__))
        if x.dtype != dtype:
            raise TypeError("%s has dtype %s; this is the %s build (%s): pass %s arrays"
                            % (name, x.dtype, self.key, os.path.basename(self.path), dtype))
        if not x.flags["C_CONTIGUOUS"]:
            raise ValueError("%s is not C-contiguous (use np.ascontiguousarray)" % name)
        if len(x.shape) != len(shape) or any(s is not None and s != d for s, d in zip(shape, x.shape)):
            want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
            raise ValueError("%s has shape %s, expected %s" % (name, x.shape, want))
        return x

    def _opt(self, x, name, shape, dtype=None):
        return None if x is None else self._arr(x, name, shape, dtype)

    def _z(self, *shape):
        return np.zeros(shape, self.dtype)

    def _qkv(self, q, k, v):
        self._arr(q, "q", (None, None, None, None))
        B, T, H, Dk = q.shape
        self._arr(k, "k", (B, T, H, Dk))
        self._arr(v, "v", (B, T, H, None))
        if min(B, T, H, Dk, v.shape[3]) == 0:
            raise ValueError("every dimension must be >= 1, got q %s v %s" % (q.shape, v.shape))
        return B, T, H, Dk, v.shape[3]

    @staticmethod
    def _chunk(C):
        if not isinstance(C, (int, np.integer)) or C < 1:
            raise ValueError("chunk length must be an integer >= 1, got %r" % (C,))
        return int(C)

    # --- causal / sliding-window softmax attention ------------------------------------------------
    AttnOut = _nt("AttnOut", "out att")
    AttnNaiveOut = _nt("AttnNaiveOut", "out lse")
    QKVGrads = _nt("QKVGrads", "dq dk dv")

    def attention_forward(self, q, k, v, window=0, scale=None):
        """Matrix form: out (B,T,H,Dv), att (B,H,T,T) the probabilities (saved for the backward)."""
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        out, att = self._z(B, T, H, Dv), self._z(B, H, T, T)
        self._c("mn_attention_forward", out=out, att=att, q=q, k=k, v=v, B=B, T=T, H=H, Dk=Dk, Dv=Dv, window=window,
                scale=Dk ** -0.5 if scale is None else scale)
        return self.AttnOut(out, att)

    def attention_backward(self, dout, att, q, k, v, window=0, scale=None):
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        self._arr(dout, "dout", (B, T, H, Dv)), self._arr(att, "att", (B, H, T, T))
        g = self.QKVGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv))
        self._c("mn_attention_backward", dq=g.dq, dk=g.dk, dv=g.dv, dout=dout, att=att, q=q, k=k, v=v, B=B, T=T,
                H=H, Dk=Dk, Dv=Dv, window=window, scale=Dk ** -0.5 if scale is None else scale,
                datt=self._z(B, H, T, T))
        return g

    def attention_forward_naive(self, q, k, v, window=0, scale=None):
        """Online-softmax form: out (B,T,H,Dv), lse (B,T,H)."""
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        out, lse = self._z(B, T, H, Dv), self._z(B, T, H)
        self._c("mn_attention_forward_naive", out=out, lse=lse, q=q, k=k, v=v, B=B, T=T, H=H, Dk=Dk, Dv=Dv,
                window=window, scale=Dk ** -0.5 if scale is None else scale)
        return self.AttnNaiveOut(out, lse)

    def attention_backward_naive(self, dout, out, lse, q, k, v, window=0, scale=None):
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        self._arr(dout, "dout", (B, T, H, Dv)), self._arr(out, "out", (B, T, H, Dv)), self._arr(lse, "lse", (B, T, H))
        g = self.QKVGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv))
        self._c("mn_attention_backward_naive", dq=g.dq, dk=g.dk, dv=g.dv, dout=dout, out=out, lse=lse, q=q, k=k,
                v=v, B=B, T=T, H=H, Dk=Dk, Dv=Dv, window=window, scale=Dk ** -0.5 if scale is None else scale)
        return g

    def attention_step(self, kcache, vcache, q, k, v, pos, window=0, scale=None):
        """One token at position pos: q,k (H,Dk), v (H,Dv); kcache (L,H,Dk), vcache (L,H,Dv) ring buffers
        indexed by pos % L, updated in place. Returns out (H,Dv)."""
        self._arr(q, "q", (None, None))
        H, Dk = q.shape
        self._arr(k, "k", (H, Dk)), self._arr(v, "v", (H, None))
        Dv = v.shape[1]
        self._arr(kcache, "kcache", (None, H, Dk))
        L = kcache.shape[0]
        self._arr(vcache, "vcache", (L, H, Dv))
        if L < (min(window, pos + 1) if window else pos + 1):
            raise ValueError("cache of %d slots is too short for position %d (window %d)" % (L, pos, window))
        out = self._z(H, Dv)
        self._c("mn_attention_step", out=out, kcache=kcache, vcache=vcache, q=q, k=k, v=v, pos=pos, cache_len=L,
                H=H, Dk=Dk, Dv=Dv, window=window, scale=Dk ** -0.5 if scale is None else scale, scores=self._z(L))
        return out

    # --- linear attention (g None), simple GLA (g (B,T,H,1)), GLA (g (B,T,H,Dk)) -------------------
    StateOut = _nt("StateOut", "out ht")
    GLAGrads = _nt("GLAGrads", "dq dk dv dg dh0")

    def _gla_args(self, q, k, v, g, h0, scale):
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        G = 0
        if g is not None:
            self._arr(g, "g", (B, T, H, None))
            G = g.shape[3]
            if G not in (1, Dk):
                raise ValueError("g must have 1 (simple GLA) or Dk = %d (GLA) gates per head, got %d" % (Dk, G))
        self._opt(h0, "h0", (B, H, Dk, Dv))
        return dict(q=q, k=k, v=v, g=g, h0=h0, B=B, T=T, H=H, Dk=Dk, Dv=Dv, G=G,
                    scale=Dk ** -0.5 if scale is None else scale)

    def gla_forward(self, q, k, v, g=None, h0=None, scale=None, chunk=64):
        """Chunkwise form. out (B,T,H,Dv), ht (B,H,Dk,Dv). g holds log-decays (<= 0)."""
        a = self._gla_args(q, k, v, g, h0, scale)
        C = self._chunk(chunk)
        out, ht = self._z(a["B"], a["T"], a["H"], a["Dv"]), self._z(a["B"], a["H"], a["Dk"], a["Dv"])
        work = self._z(self._c("mn_gla_work_size", B=a["B"], T=a["T"], H=a["H"], Dk=a["Dk"], Dv=a["Dv"], C=C))
        self._c("mn_gla_forward", out=out, ht=ht, C=C, work=work, **a)
        return self.StateOut(out, ht)

    def gla_forward_recurrent(self, q, k, v, g=None, h0=None, scale=None):
        a = self._gla_args(q, k, v, g, h0, scale)
        out, ht = self._z(a["B"], a["T"], a["H"], a["Dv"]), self._z(a["B"], a["H"], a["Dk"], a["Dv"])
        self._c("mn_gla_forward_recurrent", out=out, ht=ht, **a)
        return self.StateOut(out, ht)

    def _gla_grads(self, a, dout, dht):
        B, T, H, Dk, Dv, G = a["B"], a["T"], a["H"], a["Dk"], a["Dv"], a["G"]
        self._arr(dout, "dout", (B, T, H, Dv)), self._opt(dht, "dht", (B, H, Dk, Dv))
        return self.GLAGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv),
                             self._z(B, T, H, G) if G else None, self._z(B, H, Dk, Dv) if a["h0"] is not None else None)

    def gla_backward(self, dout, q, k, v, g=None, h0=None, dht=None, scale=None, chunk=64):
        """Gradients (dq, dk, dv, dg, dh0) of sum(out*dout) + sum(ht*dht); dg / dh0 None without g / h0."""
        a = self._gla_args(q, k, v, g, h0, scale)
        C = self._chunk(chunk)
        r = self._gla_grads(a, dout, dht)
        work = self._z(self._c("mn_gla_work_size", B=a["B"], T=a["T"], H=a["H"], Dk=a["Dk"], Dv=a["Dv"], C=C))
        self._c("mn_gla_backward", dq=r.dq, dk=r.dk, dv=r.dv, dg=r.dg, dh0=r.dh0, dout=dout, dht=dht, C=C,
                work=work, **a)
        return r

    def gla_backward_recurrent(self, dout, q, k, v, g=None, h0=None, dht=None, scale=None):
        a = self._gla_args(q, k, v, g, h0, scale)
        r = self._gla_grads(a, dout, dht)
        work = self._z(self._c("mn_gla_work_size_recurrent", T=a["T"], Dk=a["Dk"], Dv=a["Dv"]))
        self._c("mn_gla_backward_recurrent", dq=r.dq, dk=r.dk, dv=r.dv, dg=r.dg, dh0=r.dh0, dout=dout, dht=dht,
                work=work, **a)
        return r

    def gla_step(self, state, q, k, v, g=None, scale=None):
        """One token: q,k (B,H,Dk), v (B,H,Dv), g (B,H,G) or None; state (B,H,Dk,Dv) updated in place."""
        self._arr(q, "q", (None, None, None))
        B, H, Dk = q.shape
        self._arr(k, "k", (B, H, Dk)), self._arr(v, "v", (B, H, None))
        Dv = v.shape[2]
        self._arr(state, "state", (B, H, Dk, Dv))
        G = 0 if g is None else self._arr(g, "g", (B, H, None)).shape[2]
        if G not in (0, 1, Dk):
            raise ValueError("g must have 1 or Dk = %d gates per head, got %d" % (Dk, G))
        out = self._z(B, H, Dv)
        self._c("mn_gla_step", out=out, state=state, q=q, k=k, v=v, g=g, B=B, H=H, Dk=Dk, Dv=Dv, G=G,
                scale=Dk ** -0.5 if scale is None else scale)
        return out

    # --- DeltaNet (g None) / Gated DeltaNet ---------------------------------------------------------
    DeltaNaiveOut = _nt("DeltaNaiveOut", "out ht states")
    DeltaOut = _nt("DeltaOut", "out ht hs")
    DeltaGrads = _nt("DeltaGrads", "dq dk dv dbeta dg dh0")

    def _delta_args(self, q, k, v, beta, g, h0, scale):
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        self._arr(beta, "beta", (B, T, H)), self._opt(g, "g", (B, T, H)), self._opt(h0, "h0", (B, H, Dk, Dv))
        return dict(q=q, k=k, v=v, beta=beta, g=g, B=B, T=T, H=H, Dk=Dk, Dv=Dv,
                    scale=Dk ** -0.5 if scale is None else scale)

    def _delta_grads(self, a, dout, dht, h0):
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        self._arr(dout, "dout", (B, T, H, Dv)), self._opt(dht, "dht", (B, H, Dk, Dv))
        return self.DeltaGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv), self._z(B, T, H),
                               self._z(B, T, H) if a["g"] is not None else None,
                               self._z(B, H, Dk, Dv) if h0 is not None else None)

    def delta_rule_forward_naive(self, q, k, v, beta, g=None, h0=None, scale=None):
        """Token by token. out (B,T,H,Dv), ht (B,H,Dk,Dv), states (B,H,T,Dk,Dv) saved for the backward."""
        a = self._delta_args(q, k, v, beta, g, h0, scale)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        r = self.DeltaNaiveOut(self._z(B, T, H, Dv), self._z(B, H, Dk, Dv), self._z(B, H, T, Dk, Dv))
        self._c("mn_delta_rule_forward_naive", out=r.out, ht=r.ht, states=r.states, h0=h0, **a)
        return r

    def delta_rule_backward_naive(self, dout, states, q, k, v, beta, g=None, h0=None, dht=None, scale=None):
        """h0 only tells whether dh0 is wanted (the saved states already contain it)."""
        a = self._delta_args(q, k, v, beta, g, h0, scale)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        self._arr(states, "states", (B, H, T, Dk, Dv))
        r = self._delta_grads(a, dout, dht, h0)
        self._c("mn_delta_rule_backward_naive", dq=r.dq, dk=r.dk, dv=r.dv, dbeta=r.dbeta, dg=r.dg, dh0=r.dh0,
                dstate=self._z(B, H, Dk, Dv), dout=dout, dht=dht, states=states, **a)
        return r

    def delta_rule_forward(self, q, k, v, beta, g=None, h0=None, scale=None, chunk=64):
        """Chunkwise form. out, ht, hs (B,H,NC,Dk,Dv): the state entering each chunk (for the backward)."""
        a = self._delta_args(q, k, v, beta, g, h0, scale)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        C = self._chunk(chunk)
        r = self.DeltaOut(self._z(B, T, H, Dv), self._z(B, H, Dk, Dv), self._z(B, H, (T + C - 1) // C, Dk, Dv))
        work = self._z(self._c("mn_delta_rule_work_size", B=B, H=H, Dk=Dk, Dv=Dv, chunk=C))
        self._c("mn_delta_rule_forward", out=r.out, ht=r.ht, hs=r.hs, h0=h0, chunk=C, work=work, **a)
        return r

    def delta_rule_backward(self, dout, hs, q, k, v, beta, g=None, h0=None, dht=None, scale=None, chunk=64):
        a = self._delta_args(q, k, v, beta, g, h0, scale)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        C = self._chunk(chunk)
        self._arr(hs, "hs", (B, H, (T + C - 1) // C, Dk, Dv))
        r = self._delta_grads(a, dout, dht, h0)
        work = self._z(self._c("mn_delta_rule_work_size", B=B, H=H, Dk=Dk, Dv=Dv, chunk=C))
        self._c("mn_delta_rule_backward", dq=r.dq, dk=r.dk, dv=r.dv, dbeta=r.dbeta, dg=r.dg, dh0=r.dh0, dout=dout,
                dht=dht, hs=hs, chunk=C, work=work, **a)
        return r

    def delta_rule_step(self, state, q, k, v, beta, g=None, scale=None):
        """One token: q,k (B,H,Dk), v (B,H,Dv), beta, g (B,H); state (B,H,Dk,Dv) updated in place."""
        self._arr(q, "q", (None, None, None))
        B, H, Dk = q.shape
        self._arr(k, "k", (B, H, Dk)), self._arr(v, "v", (B, H, None))
        Dv = v.shape[2]
        self._arr(state, "state", (B, H, Dk, Dv)), self._arr(beta, "beta", (B, H)), self._opt(g, "g", (B, H))
        out = self._z(B, H, Dv)
        self._c("mn_delta_rule_step", out=out, state=state, q=q, k=k, v=v, beta=beta, g=g, B=B, H=H, Dk=Dk, Dv=Dv,
                scale=Dk ** -0.5 if scale is None else scale)
        return out

    # --- Mamba-2 SSD core -----------------------------------------------------------------------------
    SSDOut = _nt("SSDOut", "y ht")
    SSDGrads = _nt("SSDGrads", "dX dA dB dC dh0")

    def _ssd_args(self, X, A, Bm, Cm, h0):
        self._arr(X, "X", (None, None, None, None))
        B, T, H, P = X.shape
        self._arr(A, "A", (B, T, H)), self._arr(Bm, "Bm", (B, T, H, None))
        N = Bm.shape[3]
        self._arr(Cm, "Cm", (B, T, H, N)), self._opt(h0, "h0", (B, H, P, N))
        return dict(X=X, A=A, Bm=Bm, Cm=Cm, h0=h0, B=B, T=T, H=H, P=P, N=N)

    def _ssd_grads(self, a, dy, dht):
        B, T, H, P, N = a["B"], a["T"], a["H"], a["P"], a["N"]
        self._arr(dy, "dy", (B, T, H, P)), self._opt(dht, "dht", (B, H, P, N))
        return self.SSDGrads(self._z(B, T, H, P), self._z(B, T, H), self._z(B, T, H, N), self._z(B, T, H, N),
                             self._z(B, H, P, N) if a["h0"] is not None else None)

    def ssd_forward(self, X, A, Bm, Cm, h0=None, chunk=64):
        """Chunkwise form, A = log-decays (B,T,H): y (B,T,H,P), ht (B,H,P,N)."""
        a = self._ssd_args(X, A, Bm, Cm, h0)
        C = self._chunk(chunk)
        r = self.SSDOut(self._z(a["B"], a["T"], a["H"], a["P"]), self._z(a["B"], a["H"], a["P"], a["N"]))
        work = self._z(self._c("mn_ssd_work_size", B=a["B"], T=a["T"], H=a["H"], P=a["P"], N=a["N"], C=C))
        self._c("mn_ssd_forward", y=r.y, ht=r.ht, C=C, work=work, **a)
        return r

    def ssd_forward_recurrent(self, X, A, Bm, Cm, h0=None, amode=SSD_LOG_DECAY):
        """amode SSD_LOG_DECAY: a_t = exp(A_t); SSD_TRANSITION: a_t = A_t (any sign)."""
        a = self._ssd_args(X, A, Bm, Cm, h0)
        r = self.SSDOut(self._z(a["B"], a["T"], a["H"], a["P"]), self._z(a["B"], a["H"], a["P"], a["N"]))
        self._c("mn_ssd_forward_recurrent", y=r.y, ht=r.ht, amode=amode, **a)
        return r

    def ssd_backward(self, dy, X, A, Bm, Cm, h0=None, dht=None, chunk=64):
        a = self._ssd_args(X, A, Bm, Cm, h0)
        C = self._chunk(chunk)
        r = self._ssd_grads(a, dy, dht)
        work = self._z(self._c("mn_ssd_work_size", B=a["B"], T=a["T"], H=a["H"], P=a["P"], N=a["N"], C=C))
        self._c("mn_ssd_backward", dX=r.dX, dA=r.dA, dB=r.dB, dC=r.dC, dh0=r.dh0, dy=dy, dht=dht, C=C, work=work,
                **a)
        return r

    def ssd_backward_recurrent(self, dy, X, A, Bm, Cm, h0=None, dht=None, amode=SSD_LOG_DECAY):
        a = self._ssd_args(X, A, Bm, Cm, h0)
        r = self._ssd_grads(a, dy, dht)
        work = self._z(self._c("mn_ssd_work_size_recurrent", T=a["T"], P=a["P"], N=a["N"]))
        self._c("mn_ssd_backward_recurrent", dX=r.dX, dA=r.dA, dB=r.dB, dC=r.dC, dh0=r.dh0, dy=dy, dht=dht,
                amode=amode, work=work, **a)
        return r

    def ssd_step(self, state, X, A, Bm, Cm, amode=SSD_LOG_DECAY):
        """One token: X (B,H,P), A (B,H), Bm,Cm (B,H,N); state (B,H,P,N) updated in place. Returns y."""
        self._arr(X, "X", (None, None, None))
        B, H, P = X.shape
        self._arr(A, "A", (B, H)), self._arr(Bm, "Bm", (B, H, None))
        N = Bm.shape[2]
        self._arr(Cm, "Cm", (B, H, N)), self._arr(state, "state", (B, H, P, N))
        y = self._z(B, H, P)
        self._c("mn_ssd_step", y=y, state=state, X=X, A=A, Bm=Bm, Cm=Cm, B=B, H=H, P=P, N=N, amode=amode)
        return y

    # --- RG-LRU (Hawk) ----------------------------------------------------------------------------------
    RGLRUOut = _nt("RGLRUOut", "y ht gates")
    RGLRUGrads = _nt("RGLRUGrads", "dx da_param dwx dbx dwa dba dh0")

    def _rglru_args(self, x, a_param, wx, bx, wa, ba, h0, segment_pos, c):
        self._arr(x, "x", (None, None, None))
        B, T, W = x.shape
        self._arr(wx, "wx", (None, None, None))
        NH = wx.shape[0]
        if NH < 1 or W % NH or wx.shape[1:] != (W // NH, W // NH):
            raise ValueError("wx has shape %s; with width %d it must be (NH, W/NH, W/NH)" % (wx.shape, W))
        self._arr(a_param, "a_param", (W,)), self._arr(wa, "wa", wx.shape)
        self._arr(bx, "bx", (NH, W // NH)), self._arr(ba, "ba", (NH, W // NH)), self._opt(h0, "h0", (B, W))
        self._opt(segment_pos, "segment_pos", (B, T), np.intc)
        return dict(x=x, a_param=a_param, wx=wx, bx=bx, wa=wa, ba=ba, h0=h0, segment_pos=segment_pos, B=B, T=T, W=W,
                    NH=NH, c=c)

    def rglru_forward(self, x, a_param, wx, bx, wa, ba, h0=None, segment_pos=None, c=8.0):
        """x (B,T,W); a_param (W); wx, wa (NH,W/NH,W/NH); bx, ba (NH,W/NH); segment_pos (B,T) int32 or None.
        Returns y (B,T,W), ht (B,W), gates (2,B,T,W) (saved for the backward)."""
        a = self._rglru_args(x, a_param, wx, bx, wa, ba, h0, segment_pos, c)
        B, T, W = x.shape
        r = self.RGLRUOut(self._z(B, T, W), self._z(B, W), self._z(2, B, T, W))
        self._c("mn_rglru_forward", y=r.y, ht=r.ht, gates=r.gates, **a)
        return r

    def rglru_backward(self, dy, y, gates, x, a_param, wx, bx, wa, ba, h0=None, segment_pos=None, dht=None, c=8.0):
        a = self._rglru_args(x, a_param, wx, bx, wa, ba, h0, segment_pos, c)
        B, T, W, NH = a["B"], a["T"], a["W"], a["NH"]
        self._arr(dy, "dy", (B, T, W)), self._arr(y, "y", (B, T, W)), self._arr(gates, "gates", (2, B, T, W))
        self._opt(dht, "dht", (B, W))
        r = self.RGLRUGrads(self._z(B, T, W), self._z(W), self._z(*wx.shape), self._z(*bx.shape), self._z(*wx.shape),
                            self._z(*bx.shape), self._z(B, W) if h0 is not None else None)
        del a["bx"], a["ba"]
        self._c("mn_rglru_backward", dx=r.dx, da_param=r.da_param, dwx=r.dwx, dbx=r.dbx, dwa=r.dwa, dba=r.dba,
                dh0=r.dh0, dy=dy, dht=dht, y=y, gates=gates, work=self._z(self._c("mn_rglru_work_size", B=B, T=T, W=W)),
                **a)
        return r

    def rglru_step(self, state, x, a_param, wx, bx, wa, ba, segment_pos=None, c=8.0):
        """One token: x (B,W); state (B,W) updated in place; segment_pos (B) int32 or None. Returns y (B,W)."""
        self._arr(x, "x", (None, None))
        B, W = x.shape
        a = self._rglru_args(x.reshape(B, 1, W), a_param, wx, bx, wa, ba, None, None, c)
        self._arr(state, "state", (B, W)), self._opt(segment_pos, "segment_pos", (B,), np.intc)
        y = self._z(B, W)
        self._c("mn_rglru_step", y=y, state=state, x=x, a_param=a_param, wx=wx, bx=bx, wa=wa, ba=ba,
                segment_pos=segment_pos, B=B, W=W, NH=a["NH"], c=c,
                work=self._z(self._c("mn_rglru_work_size", B=B, T=1, W=W)))
        return y

    # --- mLSTM -------------------------------------------------------------------------------------------
    MLSTMOut = _nt("MLSTMOut", "out norm stab")
    MLSTMStateOut = _nt("MLSTMStateOut", "out norm stab Ct nt mt")
    MLSTMGrads = _nt("MLSTMGrads", "dq dk dv di df dC0 dn0")

    def _mlstm_args(self, q, k, v, ig, fg, scale, eps):
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        self._arr(ig, "ig", (B, T, H)), self._arr(fg, "fg", (B, T, H))
        return dict(q=q, k=k, v=v, ig=ig, fg=fg, B=B, T=T, H=H, Dk=Dk, Dv=Dv,
                    scale=Dk ** -0.5 if scale is None else scale, eps=eps)

    def _mlstm_state(self, a, C0, n0, m0):
        B, H, Dk, Dv = a["B"], a["H"], a["Dk"], a["Dv"]
        self._opt(C0, "C0", (B, H, Dk, Dv)), self._opt(n0, "n0", (B, H, Dk)), self._opt(m0, "m0", (B, H))
        a.update(C0=C0, n0=n0, m0=m0)

    def mlstm_forward_parallel(self, q, k, v, ig, fg, scale=None, eps=1e-6):
        """T x T form (no initial state). ig, fg (B,T,H) gate pre-activations. out, norm, stab."""
        a = self._mlstm_args(q, k, v, ig, fg, scale, eps)
        B, T, H, Dv = a["B"], a["T"], a["H"], a["Dv"]
        r = self.MLSTMOut(self._z(B, T, H, Dv), self._z(B, T, H), self._z(B, T, H))
        work = self._z(self._c("mn_mlstm_work_size_parallel", B=B, T=T, H=H))
        self._c("mn_mlstm_forward_parallel", out=r.out, norm=r.norm, stab=r.stab, work=work, **a)
        return r

    def mlstm_backward_parallel(self, dout, q, k, v, ig, fg, scale=None, eps=1e-6, mode=MLSTM_BW_EXACT):
        a = self._mlstm_args(q, k, v, ig, fg, scale, eps)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        self._arr(dout, "dout", (B, T, H, Dv))
        r = self.MLSTMGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv), self._z(B, T, H),
                            self._z(B, T, H), None, None)
        work = self._z(self._c("mn_mlstm_work_size_parallel", B=B, T=T, H=H))
        self._c("mn_mlstm_backward_parallel", dq=r.dq, dk=r.dk, dv=r.dv, di=r.di, df=r.df, dout=dout, mode=mode,
                work=work, **a)
        return r

    def mlstm_forward_recurrent(self, q, k, v, ig, fg, C0=None, n0=None, m0=None, scale=None, eps=1e-6):
        """Token by token; returns out, norm, stab and the final state Ct (B,H,Dk,Dv), nt (B,H,Dk), mt (B,H)."""
        a = self._mlstm_args(q, k, v, ig, fg, scale, eps)
        self._mlstm_state(a, C0, n0, m0)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        r = self.MLSTMStateOut(self._z(B, T, H, Dv), self._z(B, T, H), self._z(B, T, H), self._z(B, H, Dk, Dv),
                               self._z(B, H, Dk), self._z(B, H))
        self._c("mn_mlstm_forward_recurrent", out=r.out, norm=r.norm, stab=r.stab, Ct=r.Ct, nt=r.nt, mt=r.mt, **a)
        return r

    def mlstm_forward(self, q, k, v, ig, fg, C0=None, n0=None, m0=None, scale=None, eps=1e-6, chunk=64):
        """Chunkwise form; same results as mlstm_forward_recurrent."""
        a = self._mlstm_args(q, k, v, ig, fg, scale, eps)
        self._mlstm_state(a, C0, n0, m0)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        C = self._chunk(chunk)
        r = self.MLSTMStateOut(self._z(B, T, H, Dv), self._z(B, T, H), self._z(B, T, H), self._z(B, H, Dk, Dv),
                               self._z(B, H, Dk), self._z(B, H))
        work = self._z(self._c("mn_mlstm_work_size", B=B, T=T, H=H, Dk=Dk, Dv=Dv, C=C))
        self._c("mn_mlstm_forward", out=r.out, norm=r.norm, stab=r.stab, Ct=r.Ct, nt=r.nt, mt=r.mt, C=C, work=work,
                **a)
        return r

    def mlstm_backward(self, dout, q, k, v, ig, fg, C0=None, n0=None, m0=None, scale=None, eps=1e-6, chunk=64,
                       mode=MLSTM_BW_EXACT):
        a = self._mlstm_args(q, k, v, ig, fg, scale, eps)
        self._mlstm_state(a, C0, n0, m0)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        C = self._chunk(chunk)
        self._arr(dout, "dout", (B, T, H, Dv))
        r = self.MLSTMGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv), self._z(B, T, H),
                            self._z(B, T, H), self._z(B, H, Dk, Dv) if C0 is not None else None,
                            self._z(B, H, Dk) if n0 is not None else None)
        work = self._z(self._c("mn_mlstm_work_size", B=B, T=T, H=H, Dk=Dk, Dv=Dv, C=C))
        self._c("mn_mlstm_backward", dq=r.dq, dk=r.dk, dv=r.dv, di=r.di, df=r.df, dC0=r.dC0, dn0=r.dn0, dout=dout,
                C=C, mode=mode, work=work, **a)
        return r

    def mlstm_step(self, C, n, m, q, k, v, ig, fg, scale=None, eps=1e-6):
        """One token: q,k (B,H,Dk), v (B,H,Dv), ig, fg (B,H); C, n, m updated in place. Returns out (B,H,Dv)."""
        self._arr(q, "q", (None, None, None))
        B, H, Dk = q.shape
        self._arr(k, "k", (B, H, Dk)), self._arr(v, "v", (B, H, None))
        Dv = v.shape[2]
        self._arr(ig, "ig", (B, H)), self._arr(fg, "fg", (B, H))
        self._arr(C, "C", (B, H, Dk, Dv)), self._arr(n, "n", (B, H, Dk)), self._arr(m, "m", (B, H))
        out = self._z(B, H, Dv)
        self._c("mn_mlstm_step", out=out, C=C, n=n, m=m, q=q, k=k, v=v, ig=ig, fg=fg, B=B, H=H, Dk=Dk, Dv=Dv,
                scale=Dk ** -0.5 if scale is None else scale, eps=eps)
        return out

    # --- sLSTM ---------------------------------------------------------------------------------------------
    SLSTMOut = _nt("SLSTMOut", "y c n m")
    SLSTMGrads = _nt("SLSTMGrads", "dx dR db dy0 dc0 dn0")

    def _slstm_args(self, x, R, b, s0):
        self._arr(x, "x", (None, None, None))
        B, T, X4 = x.shape
        self._arr(R, "R", (None, None, None))
        NH, Dh4, Dh = R.shape
        if Dh4 != 4 * Dh or X4 != 4 * NH * Dh:
            raise ValueError("R (NH,4*Dh,Dh) %s does not fit x (B,T,4*NH*Dh) %s" % (R.shape, x.shape))
        self._arr(b, "b", (X4,))
        for name, s in zip(("y0", "c0", "n0", "m0"), s0):
            self._opt(s, name, (B, NH * Dh))
        return dict(x=x, R=R, b=b, y0=s0[0], c0=s0[1], n0=s0[2], m0=s0[3], B=B, T=T, NH=NH, Dh=Dh)

    def slstm_forward(self, x, R, b, y0=None, c0=None, n0=None, m0=None):
        """x (B,T,4*Hd) gate pre-activations (i, f, z, o blocks), R (NH,4*Dh,Dh), b (4*Hd); the states after
        each step y, c, n, m (B,T,Hd)."""
        a = self._slstm_args(x, R, b, (y0, c0, n0, m0))
        B, T, Hd = a["B"], a["T"], a["NH"] * a["Dh"]
        r = self.SLSTMOut(self._z(B, T, Hd), self._z(B, T, Hd), self._z(B, T, Hd), self._z(B, T, Hd))
        work = self._z(self._c("mn_slstm_work_size", B=B, NH=a["NH"], Dh=a["Dh"]))
        self._c("mn_slstm_forward", y=r.y, c=r.c, n=r.n, m=r.m, work=work, **a)
        return r

    def slstm_backward(self, dy, states, x, R, b, y0=None, c0=None, n0=None, m0=None):
        """states: what slstm_forward returned. dy0, dc0, dn0 come back where y0, c0, n0 were given."""
        a = self._slstm_args(x, R, b, (y0, c0, n0, m0))
        B, T, Hd = a["B"], a["T"], a["NH"] * a["Dh"]
        self._arr(dy, "dy", (B, T, Hd))
        for name, s in zip("ycnm", states):
            self._arr(s, name, (B, T, Hd))
        r = self.SLSTMGrads(self._z(*x.shape), self._z(*R.shape), self._z(*b.shape),
                            *[self._z(B, Hd) if s is not None else None for s in (y0, c0, n0)])
        work = self._z(self._c("mn_slstm_work_size", B=B, NH=a["NH"], Dh=a["Dh"]))
        self._c("mn_slstm_backward", dx=r.dx, dR=r.dR, db=r.db, dy0=r.dy0, dc0=r.dc0, dn0=r.dn0, dy=dy,
                y=states[0], c=states[1], n=states[2], m=states[3], work=work, **a)
        return r

    def slstm_step(self, y, c, n, m, x, R, b):
        """One token: x (B,4*Hd); the states y, c, n, m (B,Hd) are read and updated in place."""
        self._arr(x, "x", (None, None))
        a = self._slstm_args(x.reshape(x.shape[0], 1, x.shape[1]), R, b, (y, c, n, m))
        work = self._z(self._c("mn_slstm_work_size", B=a["B"], NH=a["NH"], Dh=a["Dh"]))
        self._c("mn_slstm_step", y=y, c=c, n=n, m=m, x=x, R=R, b=b, B=a["B"], NH=a["NH"], Dh=a["Dh"], work=work)
        return y.copy()

    # --- the Mesa layer ---------------------------------------------------------------------------------------
    MesaOut = _nt("MesaOut", "out xs iters hkk hkv")
    MesaStepOut = _nt("MesaStepOut", "out iters")
    MesaGrads = _nt("MesaGrads", "dq dk dv dg dbeta dlamb dhkk0 dhkv0")

    def mesa_opts(self, solver="cg", cg_iters=30, cg_tol=0.0, fla=False, jacobi=False, chunk=64):
        """mn_mesa_opts. solver 'cg' or 'exact' (Cholesky, recurrent form and step only); cg_iters k_max
        (negative: no solve, x = q); cg_tol > 0: the per-token stop ||r|| <= cg_tol ||r0||; fla: fla's
        1e-5 in CG's denominators; jacobi: x0 = q / diag(A); chunk: the chunkwise form's chunk length."""
        if solver not in ("cg", "exact"):
            raise ValueError("solver must be 'cg' or 'exact', got %r" % (solver,))
        if not cg_iters or not (0 <= cg_tol < 1):
            raise ValueError("cg_iters must be non-zero (negative = no solve), cg_tol in [0, 1)")
        return self.struct["mn_mesa_opts"](MESA_EXACT if solver == "exact" else MESA_CG, int(cg_iters), float(cg_tol),
                                           int(bool(fla)), int(bool(jacobi)), self._chunk(chunk))

    def _mesa_args(self, q, k, v, g, beta, lamb, hkk0, hkv0):
        B, T, H, Dk, Dv = self._qkv(q, k, v)
        self._arr(g, "g", (B, T, H)), self._arr(beta, "beta", (B, T, H)), self._arr(lamb, "lamb", (H, Dk))
        self._opt(hkk0, "hkk0", (B, H, Dk, Dk)), self._opt(hkv0, "hkv0", (B, H, Dk, Dv))
        return dict(q=q, k=k, v=v, g=g, beta=beta, lamb=lamb, B=B, T=T, H=H, Dk=Dk, Dv=Dv)

    def _mesa_fwd(self, cname, wname, q, k, v, g, beta, lamb, hkk0, hkv0, opts):
        a = self._mesa_args(q, k, v, g, beta, lamb, hkk0, hkv0)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        o = self.mesa_opts(**(opts or {}))
        # the op reads the initial states from hkk/hkv and writes the final ones there: copy, keep the caller's
        hkk = self._z(B, H, Dk, Dk) if hkk0 is None else hkk0.copy()
        hkv = self._z(B, H, Dk, Dv) if hkv0 is None else hkv0.copy()
        r = self.MesaOut(self._z(B, T, H, Dv), self._z(B, T, H, Dk), np.zeros((B, T, H), np.intc), hkk, hkv)
        work = self._z(self._c(wname, B=B, T=T, H=H, Dk=Dk, Dv=Dv, o=o))
        self._c(cname, out=r.out, xs=r.xs, iters=r.iters, hkk=hkk, hkv=hkv, o=o, work=work, **a)
        return r

    def mesa_forward(self, q, k, v, g, beta, lamb, hkk0=None, hkv0=None, **opts):
        """Chunkwise form (always CG). q,k (B,T,H,Dk), v (B,T,H,Dv), g = log gamma <= 0 and beta (B,T,H),
        lamb (H,Dk) > 0; initial states hkk0 (B,H,Dk,Dk), hkv0 (B,H,Dk,Dv) or None. Options: mesa_opts.
        Returns out, xs (B,T,H,Dk) the solves, iters (B,T,H) CG iterations, and the final states hkk, hkv."""
        return self._mesa_fwd("mn_mesa_forward", "mn_mesa_work_size", q, k, v, g, beta, lamb, hkk0, hkv0, opts)

    def mesa_forward_recurrent(self, q, k, v, g, beta, lamb, hkk0=None, hkv0=None, **opts):
        """Token by token; solver='exact' solves by Cholesky. Same contract as mesa_forward."""
        return self._mesa_fwd("mn_mesa_forward_recurrent", "mn_mesa_work_size_recurrent", q, k, v, g, beta, lamb,
                              hkk0, hkv0, opts)

    def _mesa_bwd(self, cname, wname, dout, xs, q, k, v, g, beta, lamb, hkk0, hkv0, dhkk, dhkv, opts):
        a = self._mesa_args(q, k, v, g, beta, lamb, hkk0, hkv0)
        B, T, H, Dk, Dv = a["B"], a["T"], a["H"], a["Dk"], a["Dv"]
        self._arr(dout, "dout", (B, T, H, Dv)), self._arr(xs, "xs", (B, T, H, Dk))
        self._opt(dhkk, "dhkk", (B, H, Dk, Dk)), self._opt(dhkv, "dhkv", (B, H, Dk, Dv))
        o = self.mesa_opts(**(opts or {}))
        r = self.MesaGrads(self._z(B, T, H, Dk), self._z(B, T, H, Dk), self._z(B, T, H, Dv), self._z(B, T, H),
                           self._z(B, T, H), self._z(H, Dk), self._z(B, H, Dk, Dk) if hkk0 is not None else None,
                           self._z(B, H, Dk, Dv) if hkv0 is not None else None)
        work = self._z(self._c(wname, B=B, T=T, H=H, Dk=Dk, Dv=Dv, o=o))
        self._c(cname, dq=r.dq, dk=r.dk, dv=r.dv, dg=r.dg, dbeta=r.dbeta, dlamb=r.dlamb, dhkk0=r.dhkk0,
                dhkv0=r.dhkv0, dout=dout, dhkk=dhkk, dhkv=dhkv, xs=xs, hkk0=hkk0, hkv0=hkv0, o=o, work=work, **a)
        return r

    def mesa_backward(self, dout, xs, q, k, v, g, beta, lamb, hkk0=None, hkv0=None, dhkk=None, dhkv=None, **opts):
        """Implicit backward of the chunkwise form (one adjoint CG solve per token); xs from the forward,
        the same options. Gradients of sum(out*dout) + sum(hkk*dhkk) + sum(hkv*dhkv)."""
        return self._mesa_bwd("mn_mesa_backward", "mn_mesa_work_size", dout, xs, q, k, v, g, beta, lamb, hkk0, hkv0,
                              dhkk, dhkv, opts)

    def mesa_backward_recurrent(self, dout, xs, q, k, v, g, beta, lamb, hkk0=None, hkv0=None, dhkk=None, dhkv=None,
                                **opts):
        return self._mesa_bwd("mn_mesa_backward_recurrent", "mn_mesa_work_size_recurrent", dout, xs, q, k, v, g,
                              beta, lamb, hkk0, hkv0, dhkk, dhkv, opts)

    def mesa_step(self, hkk, hkv, q, k, v, g, beta, lamb, **opts):
        """One token for H heads: q,k (H,Dk), v (H,Dv), g, beta (H), lamb (H,Dk); hkk (H,Dk,Dk) and
        hkv (H,Dk,Dv) updated in place. Returns out (H,Dv) and iters (H), the CG iterations per head."""
        self._arr(q, "q", (None, None))
        H, Dk = q.shape
        self._arr(k, "k", (H, Dk)), self._arr(v, "v", (H, None))
        Dv = v.shape[1]
        self._arr(g, "g", (H,)), self._arr(beta, "beta", (H,)), self._arr(lamb, "lamb", (H, Dk))
        self._arr(hkk, "hkk", (H, Dk, Dk)), self._arr(hkv, "hkv", (H, Dk, Dv))
        o = self.mesa_opts(**opts)
        r = self.MesaStepOut(self._z(H, Dv), np.zeros(H, np.intc))
        work = self._z(self._c("mn_mesa_work_size_recurrent", B=1, T=1, H=H, Dk=Dk, Dv=Dv, o=o))
        self._c("mn_mesa_step", out=r.out, iters=r.iters, hkk=hkk, hkv=hkv, q=q, k=k, v=v, g=g, beta=beta, lamb=lamb,
                H=H, Dk=Dk, Dv=Dv, o=o, work=work)
        return r

    # --- model, decoding state, synthetic tasks --------------------------------------------------------------
    def model(self, **config):
        """A new model: mn_model_init with mn_config's fields as keyword arguments (pattern="hawk,mesa", ...)."""
        return Model(self, config)

    def load_model(self, path, optimizer=False):
        """mn_load: the model in folder path (config.json + model.safetensors). With optimizer=True it also
        reads optimizer.safetensors and returns (model, meta) with meta = dict(step, rng_state, extra, notes)."""
        m = Model(self, None)
        meta = self.struct["mn_train_meta"]() if optimizer else None
        m._ptr = self._dll.mnb_model_new()
        self._rc("mn_load", m=m._ptr, dir=os.fsencode(path), meta=meta)
        if not optimizer:
            return m
        return m, dict(step=meta.step, rng_state=meta.rng_state, extra=list(meta.extra), notes=meta.notes.decode())

    def lr_schedule(self, step, warmup, total, lr_max, lr_min):
        return self._c("mn_lr_schedule", step=step, warmup=warmup, total=total, lr_max=lr_max, lr_min=lr_min)

    def rng(self, seed):
        """mn_rng seeded with seed (xorshift64*; the library's own sampler)."""
        r = self.struct["mn_rng"]()
        self._c("mn_rng_seed", r=r, seed=seed)
        return r

    def rng_normal(self, rng, n):
        return np.array([self._c("mn_rng_normal", r=rng) for _ in range(n)])

    def sample(self, logits, rng, temperature=1.0, top_k=0, top_p=0.0):
        """mn_sample: a token id drawn from logits (V)."""
        self._arr(logits, "logits", (None,))
        V = logits.shape[0]
        return self._rc("mn_sample", logits=logits, V=V, temperature=temperature, top_k=top_k, top_p=top_p, rng=rng,
                        scratch=self._z(2 * V))

    def task(self, name):
        """The synthetic task `name` (mn_task_find) as a dict: name, vocab_size, metric, chance, min_len, doc."""
        p = self._c("mn_task_find", name=name.encode())
        if not p:
            raise ValueError("unknown task %r" % (name,))
        t = self.struct["mn_task"].from_address(p)
        return dict(name=t.name.decode(), vocab_size=t.vocab_size, metric=t.metric, chance=t.chance,
                    min_len=t.min_len, doc=t.doc.decode(), _ptr=p)

    def task_sample(self, task, rng, length):
        """One example of total length <= length: (x, y, n) with x, y (length) int32, y = -1 not scored."""
        x, y = np.zeros(length, np.intc), np.zeros(length, np.intc)
        n = self._c("mn_task_sample", task=task["_ptr"], rng=rng, len=length, x=x, y=y)
        if n == 0:
            raise ValueError("task %s has no example of length %d" % (task["name"], length))
        return x, y, n

    def task_train_len(self, task, rng, max_len):
        return self._c("mn_task_train_len", task=task["_ptr"], rng=rng, max_len=max_len)


def _buffer(lib, ptr, n, owner):
    """A numpy view of n mn_real at ptr that keeps `owner` (the Model) alive while the view lives."""
    carr = (ctypes.c_double if lib.dtype == np.float64 else ctypes.c_float) * n
    buf = carr.from_address(ptr)
    buf._owner = owner
    return np.frombuffer(buf, lib.dtype)


class Model:
    """An mn_model. params / grads are views of the library's parameter and gradient blocks (writes go
    straight to the model); tensor(name) is one named tensor of them, shaped."""

    def __init__(self, lib, config):
        self.lib, self._ptr, self._B, self._T = lib, None, 0, 0
        if config is None:
            return
        Cfg = lib.struct["mn_config"]
        cfg = Cfg()
        for key, val in config.items():
            if key not in dict(Cfg._fields_):
                raise TypeError("mn_config has no field %r (fields: %s)" % (key, ", ".join(f for f, _ in Cfg._fields_)))
            setattr(cfg, key, val.encode() if isinstance(val, str) else val)
        self._ptr = lib._dll.mnb_model_new()
        if not self._ptr:
            raise MemoryError("cannot allocate an mn_model")
        try:
            lib._rc("mn_model_init", m=self._ptr, cfg=cfg)
        except MesanetError:
            lib._dll.mnb_model_delete(self._ptr)
            self._ptr = None
            raise

    def __del__(self):
        if getattr(self, "_ptr", None):
            self.lib._dll.mnb_model_delete(self._ptr)
            self._ptr = None

    @property
    def config(self):
        """The resolved configuration (defaults filled in) as a dict."""
        c = self.lib.struct["mn_config"].from_address(self.lib._c("mnb_model_cfg", m=self._ptr))
        d = {f: getattr(c, f) for f, _ in c._fields_}
        d["pattern"] = d["pattern"].decode()
        return d

    def set_decode(self, cg_iters=None, cg_tol=None):
        """Changes how the Mesa layers solve in step() (mn_step reads these config fields at every call):
        cg_iters the most CG steps per token, cg_tol > 0 the per-token stop ||r|| <= cg_tol ||r0||."""
        c = self.lib.struct["mn_config"].from_address(self.lib._c("mnb_model_cfg", m=self._ptr))
        if cg_iters is not None:
            if int(cg_iters) == 0:
                raise ValueError("cg_iters must be non-zero (negative: no solve)")
            c.mesa_cg_decode = int(cg_iters)
        if cg_tol is not None:
            if not 0 <= cg_tol < 1:
                raise ValueError("cg_tol must be in [0, 1)")
            c.mesa_cg_tol = float(cg_tol)

    @property
    def n_params(self):
        """Parameters the model has (the tensors' elements, alignment padding not counted)."""
        return self.lib._c("mnb_model_n_trainable", m=self._ptr)

    @property
    def params(self):
        return _buffer(self.lib, self.lib._c("mnb_model_params", m=self._ptr),
                       self.lib._c("mnb_model_n_params", m=self._ptr), self)

    @property
    def grads(self):
        return _buffer(self.lib, self.lib._c("mnb_model_grads", m=self._ptr),
                       self.lib._c("mnb_model_n_params", m=self._ptr), self)

    @property
    def opt_step(self):
        return self.lib._c("mnb_model_opt_step", m=self._ptr)

    def tensors(self):
        """[(name, shape, offset)] of the parameter table, in order."""
        out = []
        TI = self.lib.struct["mn_tensor_info"]
        for i in range(self.lib._c("mnb_model_n_tensors", m=self._ptr)):
            t = TI.from_address(self.lib._c("mnb_model_tensor", m=self._ptr, i=i))
            out.append((t.name.decode(), tuple(t.shape[:t.ndim]), t.offset))
        return out

    def tensor(self, name, grad=False):
        """View of the parameter (or its gradient) called name, in its PyTorch shape."""
        for n, shape, off in self.tensors():
            if n == name:
                block = self.grads if grad else self.params
                return block[off:off + int(np.prod(shape))].reshape(shape)
        raise KeyError("no tensor %r in the model" % (name,))

    def _tokens(self, x, name, B=None, T=None):
        self.lib._arr(x, name, (B, T), np.intc)
        return x

    def forward(self, tokens, targets=None):
        """mn_forward on tokens (B,T) int32; with targets (B,T) int32 (-1 = no loss) returns the mean loss,
        else None. logits() gives the (B,T,V) logits afterwards."""
        self._tokens(tokens, "tokens")
        B, T = tokens.shape
        if targets is not None:
            self._tokens(targets, "targets", B, T)
        loss = np.zeros(1, self.lib.dtype)
        self.lib._rc("mn_forward", m=self._ptr, tokens=tokens, targets=targets, B=B, T=T, loss=loss)
        self._B, self._T = B, T
        return float(loss[0]) if targets is not None else None

    def logits(self):
        """Copy of the last forward's logits (B,T,V)."""
        p = self.lib._c("mn_logits", m=self._ptr)
        if not p or not self._T:
            raise RuntimeError("logits() needs a forward first")
        V = self.config["vocab_size"]
        return _buffer(self.lib, p, self._B * self._T * V, self).reshape(self._B, self._T, V).copy()

    def zero_grad(self):
        self.lib._c("mn_zero_grad", m=self._ptr)

    def backward(self):
        """mn_backward: ACCUMULATES the gradient of the last forward's mean loss into grads."""
        self.lib._rc("mn_backward", m=self._ptr)

    def clip_grad_norm(self, max_norm):
        """Returns the gradient norm before clipping."""
        return self.lib._c("mn_clip_grad_norm", m=self._ptr, max_norm=max_norm)

    def adamw_step(self, lr, beta1=0.9, beta2=0.98, eps=1e-8, weight_decay=0.1):
        """One AdamW step; the defaults are the library's (the MesaNet paper's); weight_decay 0 is no decay."""
        hp = self.lib.struct["mn_adamw"](beta1, beta2, eps, weight_decay)
        self.lib._rc("mn_adamw_step", m=self._ptr, lr=lr, hp=hp)

    def save(self, path, step=None, rng_state=0, extra=(0, 0, 0, 0), notes=""):
        """mn_save into folder path (it must exist). With step given, the optimizer state is saved too
        (with rng_state, extra and the one-line notes, all returned by load_model(optimizer=True))."""
        meta = None
        if step is not None:
            if len(notes.encode()) > 1023 or "\n" in notes:
                raise ValueError("notes: one line of at most 1023 bytes")
            meta = self.lib.struct["mn_train_meta"](step, rng_state, (ctypes.c_double * 4)(*extra), notes.encode())
        self.lib._rc("mn_save", m=self._ptr, dir=os.fsencode(path), meta=meta)

    def state(self, n_seq=1):
        """A decoding state for n_seq sequences."""
        return State(self, n_seq)

    def step(self, state, tokens):
        """mn_step: one token per sequence (tokens (n_seq) int32); returns the logits (n_seq, V)."""
        self.lib._arr(tokens, "tokens", (state.n_seq,), np.intc)
        logits = self.lib._z(state.n_seq, self.config["vocab_size"])
        self.lib._rc("mn_step", m=self._ptr, s=state._ptr, tokens=tokens, logits=logits)
        return logits


class State:
    """An mn_state bound to one model."""

    def __init__(self, model, n_seq):
        self.model, self.n_seq = model, n_seq
        self._ptr = model.lib._dll.mnb_state_new()
        try:
            model.lib._rc("mn_state_init", s=self._ptr, m=model._ptr, n_seq=n_seq)
        except MesanetError:
            model.lib._dll.mnb_state_delete(self._ptr)
            self._ptr = None
            raise

    def __del__(self):
        if getattr(self, "_ptr", None):
            self.model.lib._dll.mnb_state_delete(self._ptr)
            self._ptr = None

    def reset(self):
        self.model.lib._c("mn_state_reset", s=self._ptr)

    @property
    def pos(self):
        return self.model.lib._c("mnb_state_pos", s=self._ptr)

    def cg_stats(self):
        """(mean CG iterations per token, head and Mesa layer since the last reset, number of solves)."""
        solves = ctypes.c_double(0)
        mean = self.model.lib._c("mn_state_cg_stats", m=self.model._ptr, s=self._ptr, solves=ctypes.addressof(solves))
        return mean, solves.value


# ---------------------------------------------------------------------------------------------------------
# .vec files (reference/vectors/README.md section 1): read with the library's parser, written here.
VecFile = _nt("VecFile", "op source attrs tensors")


def read_vec(path, lib=None):
    """Parses a .vec file with reference/vecfile.h (check_vectors' parser). Returns VecFile(op, source,
    attrs {name: str}, tensors {name: float64 array}) in file order. Raises ValueError with the parser's
    message (and line number) on a malformed file, OSError on an unreadable one."""
    lib = lib or load()
    f = lib._c("mnb_vec_new")
    if not f:
        raise MemoryError("cannot allocate an mn_vec_file")
    try:
        err = ctypes.create_string_buffer(512)
        rc = lib._c("mn_vec_load", f=f, path=os.fsencode(path), err=err, errlen=len(err))
        if rc == -2:
            raise OSError("%s: %s" % (path, err.value.decode()))
        if rc < 0:
            raise ValueError("%s: %s" % (path, err.value.decode()))
        attrs = collections.OrderedDict()
        for i in range(lib._c("mnb_vec_n_attr", f=f)):
            attrs[lib._c("mnb_vec_attr_name", f=f, i=i).decode()] = lib._c("mnb_vec_attr_value", f=f, i=i).decode()
        tensors = collections.OrderedDict()
        for i in range(lib._c("mnb_vec_n_tensor", f=f)):
            t = lib._c("mnb_vec_tensor", f=f, i=i)
            shape = tuple(lib._c("mnb_vec_tensor_dim", t=t, i=d) for d in range(lib._c("mnb_vec_tensor_ndim", t=t)))
            n = int(np.prod(shape))
            data = np.ctypeslib.as_array((ctypes.c_double * n).from_address(lib._c("mnb_vec_tensor_data", t=t)))
            tensors[lib._c("mnb_vec_tensor_name", t=t).decode()] = data.copy().reshape(shape)
        return VecFile(lib._c("mnb_vec_op", f=f).decode(), lib._c("mnb_vec_source", f=f).decode(), attrs, tensors)
    finally:
        lib._c("mnb_vec_delete", f=f)


_NAME = re.compile(r"^[!-~]{1,63}$")


def write_vec(path, op, tensors, attrs=None, source="written by notebooks/mesanet.py", comments=()):
    """Writes a .vec file: tensors {name: array} in the given order (values as %.17g, exact for float64),
    attrs {name: value}. Names are printable ASCII without spaces, at most 63 bytes. The text is parsed
    back by the library's reader before it replaces path, so a file this writes always reads."""
    attrs = attrs or {}
    for kind, names in (("op", [op]), ("attr", list(attrs)), ("tensor", list(tensors))):
        for n in names:
            if not isinstance(n, str) or not _NAME.match(n):
                raise ValueError("%s name %r: printable ASCII without spaces, 1-63 bytes" % (kind, n))
    if "\n" in source or len(source.encode()) > 511 or not source.strip():
        raise ValueError("source must be one non-empty line of at most 511 bytes")
    lines = ["# " + c for c in comments] + ["op " + op, "source " + source]
    for n, v in attrs.items():
        v = repr(v) if isinstance(v, float) else str(v)
        if "\n" in v or len(v.encode()) > 127 or not v.strip():
            raise ValueError("attr %s: value must be one non-empty line of at most 127 bytes" % n)
        lines.append("attr %s %s" % (n, v))
    for n, a in tensors.items():
        a = np.asarray(a, dtype=np.float64)
        if a.ndim < 1 or a.ndim > 8 or a.size == 0:
            raise ValueError("tensor %s: 1 to 8 dimensions, none of them 0 (shape %s)" % (n, a.shape))
        lines.append("tensor %s %d %s" % (n, a.ndim, " ".join(str(d) for d in a.shape)))
        flat = a.ravel()
        for i in range(0, flat.size, 8):
            lines.append(" ".join("%.17g" % x for x in flat[i:i + 8]))
    lines.append("end")
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    try:
        read_vec(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
