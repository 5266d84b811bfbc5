/* check_vectors.c - runs mesanet.h's ops on the golden vectors and compares the results.

   Build (double build: mn_real is double, so the stored float64 values pass through exactly):
       cc -O2 -std=c99 -DMESANET_DOUBLE -DMESANET_IMPLEMENTATION -DMN_VECFILE_IMPLEMENTATION \
          -I. reference/check_vectors.c -lm -o check_vectors
   Run:
       ./check_vectors [--tol 1e-8] [--xfail a.vec,b.vec,...] [-v] [DIR]      (DIR: reference/vectors)

   For every *.vec file in DIR, in name order, it prints one line:
       PASS  <op> <file> out.o 1.1e-16 grad.q 2.0e-16 ...
       FAIL  <op> <file> out.o 3.0e-02(>tol) ...        or  FAIL <op> <file> <why it could not run>
       FAIL  <op> <file> not implemented yet: op '<op>' has no entry in the dispatch table
       FAIL  ? <file> parse error: <message>
   and last `N passed, N failed, N xfail`. The exit status is 0 only when nothing failed.

   Metric per tensor: max|a-b| / max|b| with b the file's value (max|a-b| when max|b| == 0). A NaN
   in either side makes the figure NaN, which always fails. An op may be run in several forms (for
   attention: the blocked form with the (T,T) attention matrix and the naive online-softmax form);
   every form is compared and the figure printed is the WORST over the forms. With -v each figure
   is followed by the per-form figures in brackets, e.g. `out.o 2e-16 [fast 1e-16 naive 2e-16]`.

   Gradients: the loss is L = sum(out.o * do) (+ sum(out.ht * dht) where the file has dht), so `do`
   is the upstream gradient handed to the backward. The library's backwards accumulate (+=), so
   every gradient buffer starts zeroed.

   --xfail lists file names (as printed, e.g. mesa_exact.vec) that are expected to fail: they print
   XFAIL and do not count. One that passes prints XPASS and counts as a failure, and so does a name
   that matches no file, so the list can only shrink.

   This is a tool, not part of the library, so it uses POSIX opendir/readdir to list DIR.
*/
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesanet.h"
#include "vecfile.h"

#define CV_MAX_RESULTS 64 /* computed tensors per file, over all forms */
#define CV_MAX_ALLOCS 128 /* scratch buffers an op may take from cv_alloc */

/* One computed tensor: the op's answer for the file tensor `name`, from one form of the op. */
typedef struct {
    char name[MN_VEC_NAME_CAP];
    const char* form; /* "fast", "naive", ...: a string literal */
    double* data;
    size_t n;
} cv_result;

/* Everything an op function sees and produces. Buffers from cv_alloc are freed by the driver,
   so an op function can bail out at any point without cleaning up. */
typedef struct {
    const mn_vec_file* f;
    cv_result res[CV_MAX_RESULTS];
    size_t n_res;
    void* allocs[CV_MAX_ALLOCS];
    size_t n_allocs;
    char msg[512]; /* why the op could not run (missing input, wrong shape, ...) */
} cv_ctx;

/* ------------------------------------------------------------------------------------------- */
/* helpers for op functions: each returns NULL / -1 after writing the reason into c->msg         */

static int cv_fail(cv_ctx* c, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
    va_end(ap);
    return -1;
}

/* Zeroed scratch of n elements of `size` bytes, freed by the driver; NULL (with c->msg) if n*size
   overflows or memory runs out, so absurd shapes from a file fail cleanly. */
static void* cv_alloc(cv_ctx* c, size_t n, size_t size)
{
    void* p;
    if (c->n_allocs >= CV_MAX_ALLOCS) {
        cv_fail(c, "internal: more than %d scratch buffers", CV_MAX_ALLOCS);
        return NULL;
    }
    if (n == 0) n = 1;
    if (size != 0 && n > (size_t)-1 / size) {
        cv_fail(c, "buffer size overflows size_t");
        return NULL;
    }
    p = calloc(n, size);
    if (p == NULL) {
        cv_fail(c, "out of memory (%lu elements)", (unsigned long)n);
        return NULL;
    }
    c->allocs[c->n_allocs++] = p;
    return p;
}

/* a*b*... for sizes, with overflow detection. Returns 0 on overflow (no real shape is 0). */
static size_t cv_prod(const size_t* d, size_t n)
{
    size_t i, p = 1;
    for (i = 0; i < n; i++) {
        if (d[i] != 0 && p > (size_t)-1 / d[i]) return 0;
        p *= d[i];
    }
    return p;
}

static void cv_shape_str(char* out, size_t cap, const size_t* d, size_t n)
{
    size_t i, len = 0;
    out[0] = '\0';
    for (i = 0; i < n && len + 1 < cap; i++) {
        int w = snprintf(out + len, cap - len, "%s%lu", i ? "," : "[", (unsigned long)d[i]);
        if (w < 0) return;
        len += (size_t)w;
    }
    if (len + 1 < cap) snprintf(out + len, cap - len, "]");
}

/* A required tensor with a fixed ndim. */
static const mn_vec_tensor* cv_tensor(cv_ctx* c, const char* name, size_t ndim)
{
    const mn_vec_tensor* t = mn_vec_get(c->f, name);
    if (t == NULL) {
        cv_fail(c, "missing tensor '%s'", name);
        return NULL;
    }
    if (t->ndim != ndim) {
        cv_fail(c, "tensor '%s' has ndim %lu, expected %lu", name, (unsigned long)t->ndim, (unsigned long)ndim);
        return NULL;
    }
    return t;
}

/* Checks t's dims against want[0..t->ndim). */
static int cv_check_shape(cv_ctx* c, const mn_vec_tensor* t, const size_t* want)
{
    char got_s[128], want_s[128];
    size_t i;
    for (i = 0; i < t->ndim; i++) {
        if (t->dims[i] != want[i]) {
            cv_shape_str(got_s, sizeof(got_s), t->dims, t->ndim);
            cv_shape_str(want_s, sizeof(want_s), want, t->ndim);
            return cv_fail(c, "tensor '%s' has shape %s, expected %s", t->name, got_s, want_s);
        }
    }
    return 0;
}

/* A required numeric attr. */
static int cv_attr_real(cv_ctx* c, const char* name, double* out)
{
    const char* s = mn_vec_attr(c->f, name);
    if (s == NULL) return cv_fail(c, "missing attr '%s'", name);
    *out = mn_vec_attr_f(c->f, name, NAN);
    if (!isfinite(*out)) return cv_fail(c, "attr '%s' is '%s', expected a finite number", name, s);
    return 0;
}

/* A required attr holding a non-negative integer (written as "8", or "8.0" by Python). */
static int cv_attr_size(cv_ctx* c, const char* name, size_t* out)
{
    double d;
    if (cv_attr_real(c, name, &d) != 0) return -1;
    if (d < 0 || d > 1e15 || d != floor(d))
        return cv_fail(c, "attr '%s' is '%s', expected a non-negative integer", name, mn_vec_attr(c->f, name));
    *out = (size_t)d;
    return 0;
}

/* An optional attr that, when present, must have exactly this (textual) value. */
static int cv_attr_opt_is(cv_ctx* c, const char* name, const char* want)
{
    const char* s = mn_vec_attr(c->f, name);
    if (s != NULL && strcmp(s, want) != 0)
        return cv_fail(c, "attr '%s' is '%s', only '%s' is supported", name, s, want);
    return 0;
}

/* The file's values as a fresh mn_real buffer (the library's element type). */
static mn_real* cv_real(cv_ctx* c, const mn_vec_tensor* t)
{
    size_t i;
    mn_real* p = (mn_real*)cv_alloc(c, t->n, sizeof(mn_real));
    if (p == NULL) return NULL;
    for (i = 0; i < t->n; i++) p[i] = (mn_real)t->data[i];
    return p;
}

/* Hands the op's answer for file tensor `name`, from form `form`, to the driver. */
static int cv_emit(cv_ctx* c, const char* name, const char* form, const mn_real* x, size_t n)
{
    cv_result* r;
    size_t i;
    if (c->n_res >= CV_MAX_RESULTS) return cv_fail(c, "internal: more than %d results", CV_MAX_RESULTS);
    r = &c->res[c->n_res];
    r->data = (double*)cv_alloc(c, n, sizeof(double));
    if (r->data == NULL) return -1;
    for (i = 0; i < n; i++) r->data[i] = (double)x[i];
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->form = form;
    r->n = n;
    c->n_res++;
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* ops                                                                                           */

/* Softmax attention, layout BTHD: q,k (B,T,H,Dk), v (B,T,H,Dv) -> out.o (B,T,H,Dv).
   window 0 = full causal, else keys t-window < s <= t. Runs the blocked form (mn_attention_*,
   which keeps the (B,H,T,T) probabilities) and the naive online-softmax form (..._naive, which
   keeps the (B,T,H) log-sum-exp) and emits both. */
static int cv_attention(cv_ctx* c, size_t window)
{
    const mn_vec_tensor *q, *k, *v, *o, *dout;
    size_t B, T, H, Dk, Dv, n_att, n_lse;
    double scale;
    mn_real *qr, *kr, *vr, *out, *att, *out_n, *lse;

    if (cv_attr_opt_is(c, "layout", "BTHD") != 0 || cv_attr_opt_is(c, "causal", "1") != 0) return -1;
    if (mn_vec_attr(c->f, "layout") == NULL) return cv_fail(c, "missing attr 'layout' (expected BTHD)");
    if (cv_attr_real(c, "scale", &scale) != 0) return -1;
    if ((q = cv_tensor(c, "q", 4)) == NULL || (k = cv_tensor(c, "k", 4)) == NULL ||
        (v = cv_tensor(c, "v", 4)) == NULL || (o = cv_tensor(c, "out.o", 4)) == NULL)
        return -1;
    /* q fixes B,T,H,Dk and v fixes Dv; everything else must agree with them, so a file with a
       wrong shape fails here instead of making the library read out of bounds */
    B = q->dims[0], T = q->dims[1], H = q->dims[2], Dk = q->dims[3], Dv = v->dims[3];
    {
        size_t wk[4], wv[4];
        wk[0] = B, wk[1] = T, wk[2] = H, wk[3] = Dk;
        wv[0] = B, wv[1] = T, wv[2] = H, wv[3] = Dv;
        if (cv_check_shape(c, k, wk) != 0 || cv_check_shape(c, v, wv) != 0 || cv_check_shape(c, o, wv) != 0)
            return -1;
        /* do is optional (a forward-only file has none); when present it is out.o's shape */
        if (mn_vec_get(c->f, "do") == NULL) dout = NULL;
        else if ((dout = cv_tensor(c, "do", 4)) == NULL || cv_check_shape(c, dout, wv) != 0) return -1;
    }
    /* the blocked form keeps a (B,H,T,T) matrix: check that its size is representable before
       allocating, since T comes from the file */
    {
        size_t d_att[4], d_lse[3];
        d_att[0] = B, d_att[1] = H, d_att[2] = T, d_att[3] = T;
        d_lse[0] = B, d_lse[1] = T, d_lse[2] = H;
        n_att = cv_prod(d_att, 4);
        n_lse = cv_prod(d_lse, 3);
        if (n_att == 0 || n_lse == 0) return cv_fail(c, "attention matrix size overflows size_t");
    }

    if ((qr = cv_real(c, q)) == NULL || (kr = cv_real(c, k)) == NULL || (vr = cv_real(c, v)) == NULL) return -1;
    out = (mn_real*)cv_alloc(c, o->n, sizeof(mn_real));
    att = (mn_real*)cv_alloc(c, n_att, sizeof(mn_real));
    out_n = (mn_real*)cv_alloc(c, o->n, sizeof(mn_real));
    lse = (mn_real*)cv_alloc(c, n_lse, sizeof(mn_real));
    if (out == NULL || att == NULL || out_n == NULL || lse == NULL) return -1;

    /* both forms get the same converted inputs; each form's backward uses what its own forward
       saved (att for the blocked form, out_n and lse for the naive one) */
    mn_attention_forward(out, att, qr, kr, vr, B, T, H, Dk, Dv, window, scale);
    mn_attention_forward_naive(out_n, lse, qr, kr, vr, B, T, H, Dk, Dv, window, scale);
    if (cv_emit(c, "out.o", "fast", out, o->n) != 0 || cv_emit(c, "out.o", "naive", out_n, o->n) != 0) return -1;

    if (dout != NULL) {
        /* calloc'd, so zero: the backwards accumulate into these */
        mn_real* dor = cv_real(c, dout);
        mn_real* dq = (mn_real*)cv_alloc(c, q->n, sizeof(mn_real));
        mn_real* dk = (mn_real*)cv_alloc(c, k->n, sizeof(mn_real));
        mn_real* dv = (mn_real*)cv_alloc(c, v->n, sizeof(mn_real));
        mn_real* datt = (mn_real*)cv_alloc(c, n_att, sizeof(mn_real));
        mn_real* dq_n = (mn_real*)cv_alloc(c, q->n, sizeof(mn_real));
        mn_real* dk_n = (mn_real*)cv_alloc(c, k->n, sizeof(mn_real));
        mn_real* dv_n = (mn_real*)cv_alloc(c, v->n, sizeof(mn_real));
        if (!dor || !dq || !dk || !dv || !datt || !dq_n || !dk_n || !dv_n) return -1;
        mn_attention_backward(dq, dk, dv, dor, att, qr, kr, vr, B, T, H, Dk, Dv, window, scale, datt);
        mn_attention_backward_naive(dq_n, dk_n, dv_n, dor, out_n, lse, qr, kr, vr, B, T, H, Dk, Dv, window, scale);
        if (cv_emit(c, "grad.q", "fast", dq, q->n) || cv_emit(c, "grad.k", "fast", dk, k->n) ||
            cv_emit(c, "grad.v", "fast", dv, v->n) || cv_emit(c, "grad.q", "naive", dq_n, q->n) ||
            cv_emit(c, "grad.k", "naive", dk_n, k->n) || cv_emit(c, "grad.v", "naive", dv_n, v->n))
            return -1;
    }
    return 0;
}

/* attn_causal: every earlier key and the token itself. A window attr would mean a different op. */
static int op_attn_causal(cv_ctx* c)
{
    if (mn_vec_attr(c->f, "window") != NULL && mn_vec_attr_f(c->f, "window", -1) != 0)
        return cv_fail(c, "attr 'window' is '%s' in an attn_causal file", mn_vec_attr(c->f, "window"));
    return cv_attention(c, 0);
}

/* attn_swa: the token plus window-1 earlier ones (the library's window has the same meaning). */
static int op_attn_swa(cv_ctx* c)
{
    size_t window = 0;
    if (cv_attr_size(c, "window", &window) != 0) return -1;
    if (window == 0) return cv_fail(c, "attr 'window' is 0; attn_swa needs window >= 1");
    return cv_attention(c, window);
}

/* The dispatch table: op name as written on the file's `op` line -> function.
   To add an op: write `static int op_<name>(cv_ctx* c)` that
     1. fetches its inputs with cv_tensor/cv_check_shape and its attrs with cv_attr_real/_size,
        returning -1 (c->msg says why) when something is missing or has the wrong shape;
     2. converts inputs with cv_real, takes zeroed scratch with cv_alloc (the driver frees it);
     3. runs the forward, and when the file has `do` the backward into zeroed gradient buffers
        (upstream gradients: `do` for out.o/out.y, `dht` for out.ht);
     4. calls cv_emit(c, "out.x" / "grad.x", "<form>", buffer, n) for EVERY out.* and grad.* tensor
        in the file (a file tensor with no result fails), once per form it runs;
   then add one row below. Keep the rows in alphabetical order. */
typedef int (*cv_op_fn)(cv_ctx* c);
/* Linear attention / simple GLA / GLA, layout BTHD: q,k (B,T,H,K), v (B,T,H,V), the gate `gate`
   ("g" (B,T,H) for simple_gla, "gk" (B,T,H,K) for gla, none for linear_attn), h0 (B,H,K,V)
   optional -> out.o (B,T,H,V), out.ht (B,H,K,V). per_key: the gate has one value per key channel.
   Runs the chunkwise form (mn_gla_*, chunk 16, which takes the C x C path and several chunks at
   the files' T = 64) and the recurrent form (mn_gla_*_recurrent, the naive loop) and emits both.
   Gradients: do for out.o, dht (when present) for out.ht. */
static int cv_gla(cv_ctx* c, const char* gate, int per_key)
{
    const mn_vec_tensor *q, *k, *v, *g = NULL, *h0 = NULL, *o, *ht, *dout, *dht = NULL;
    size_t B, T, H, Dk, Dv, G, C = 16;
    double scale;
    mn_real *qr, *kr, *vr, *gr = NULL, *h0r = NULL, *out_c, *ht_c, *out_r, *ht_r, *work;

    if (mn_vec_attr(c->f, "layout") == NULL) return cv_fail(c, "missing attr 'layout' (expected BTHD)");
    if (cv_attr_opt_is(c, "layout", "BTHD") != 0) return -1;
    if (cv_attr_real(c, "scale", &scale) != 0) return -1;
    if ((q = cv_tensor(c, "q", 4)) == NULL || (k = cv_tensor(c, "k", 4)) == NULL ||
        (v = cv_tensor(c, "v", 4)) == NULL || (o = cv_tensor(c, "out.o", 4)) == NULL ||
        (ht = cv_tensor(c, "out.ht", 4)) == NULL)
        return -1;
    if (gate != NULL && (g = cv_tensor(c, gate, per_key ? 4 : 3)) == NULL) return -1;
    /* q fixes B,T,H,Dk and v fixes Dv; everything else must agree with them, so a file with a
       wrong shape fails here instead of making the library read out of bounds */
    B = q->dims[0], T = q->dims[1], H = q->dims[2], Dk = q->dims[3], Dv = v->dims[3];
    G = gate == NULL ? 0 : per_key ? Dk : 1;
    {
        size_t wk[4], wv[4], ws[4];
        wk[0] = B, wk[1] = T, wk[2] = H, wk[3] = Dk;
        wv[0] = B, wv[1] = T, wv[2] = H, wv[3] = Dv;
        ws[0] = B, ws[1] = H, ws[2] = Dk, ws[3] = Dv;
        if (cv_check_shape(c, k, wk) != 0 || cv_check_shape(c, v, wv) != 0 || cv_check_shape(c, o, wv) != 0 ||
            cv_check_shape(c, ht, ws) != 0 || (g != NULL && cv_check_shape(c, g, wk) != 0))
            return -1;
        /* h0, do and dht are optional (zeros / a forward-only file); when present they are
           the shapes of the state and of out.o */
        if (mn_vec_get(c->f, "h0") != NULL && ((h0 = cv_tensor(c, "h0", 4)) == NULL || cv_check_shape(c, h0, ws) != 0))
            return -1;
        if (mn_vec_get(c->f, "do") == NULL) dout = NULL;
        else if ((dout = cv_tensor(c, "do", 4)) == NULL || cv_check_shape(c, dout, wv) != 0) return -1;
        if (mn_vec_get(c->f, "dht") != NULL &&
            ((dht = cv_tensor(c, "dht", 4)) == NULL || cv_check_shape(c, dht, ws) != 0))
            return -1;
    }

    if ((qr = cv_real(c, q)) == NULL || (kr = cv_real(c, k)) == NULL || (vr = cv_real(c, v)) == NULL) return -1;
    if ((g != NULL && (gr = cv_real(c, g)) == NULL) || (h0 != NULL && (h0r = cv_real(c, h0)) == NULL)) return -1;
    out_c = (mn_real*)cv_alloc(c, o->n, sizeof(mn_real));
    ht_c = (mn_real*)cv_alloc(c, ht->n, sizeof(mn_real));
    out_r = (mn_real*)cv_alloc(c, o->n, sizeof(mn_real));
    ht_r = (mn_real*)cv_alloc(c, ht->n, sizeof(mn_real));
    work = (mn_real*)cv_alloc(c, mn_gla_work_size(B, T, H, Dk, Dv, C), sizeof(mn_real));
    if (out_c == NULL || ht_c == NULL || out_r == NULL || ht_r == NULL || work == NULL) return -1;

    /* both forms get the same converted inputs; neither saves anything for its backward */
    mn_gla_forward(out_c, ht_c, qr, kr, vr, gr, h0r, B, T, H, Dk, Dv, G, scale, C, work);
    mn_gla_forward_recurrent(out_r, ht_r, qr, kr, vr, gr, h0r, B, T, H, Dk, Dv, G, scale);
    if (cv_emit(c, "out.o", "chunk", out_c, o->n) != 0 || cv_emit(c, "out.ht", "chunk", ht_c, ht->n) != 0 ||
        cv_emit(c, "out.o", "recurrent", out_r, o->n) != 0 || cv_emit(c, "out.ht", "recurrent", ht_r, ht->n) != 0)
        return -1;

    if (dout != NULL) {
        /* calloc'd, so zero: the backwards accumulate into these. The gate gradient is named after
           the gate ("grad.g", "grad.gk"); grad.h0 exists only when the file has h0. */
        static const char* forms[2] = {"chunk", "recurrent"};
        char gname[MN_VEC_NAME_CAP];
        mn_real* dor = cv_real(c, dout);
        mn_real* dhtr = dht != NULL ? cv_real(c, dht) : NULL;
        mn_real* rwork = (mn_real*)cv_alloc(c, mn_gla_work_size_recurrent(T, Dk, Dv), sizeof(mn_real));
        int f;
        if (dor == NULL || (dht != NULL && dhtr == NULL) || rwork == NULL) return -1;
        snprintf(gname, sizeof(gname), "grad.%s", gate != NULL ? gate : "");
        for (f = 0; f < 2; f++) {
            mn_real* dq = (mn_real*)cv_alloc(c, q->n, sizeof(mn_real));
            mn_real* dk = (mn_real*)cv_alloc(c, k->n, sizeof(mn_real));
            mn_real* dv = (mn_real*)cv_alloc(c, v->n, sizeof(mn_real));
            mn_real* dg = g != NULL ? (mn_real*)cv_alloc(c, g->n, sizeof(mn_real)) : NULL;
            mn_real* dh0 = h0 != NULL ? (mn_real*)cv_alloc(c, h0->n, sizeof(mn_real)) : NULL;
            if (!dq || !dk || !dv || (g != NULL && !dg) || (h0 != NULL && !dh0)) return -1;
            if (f == 0)
                mn_gla_backward(dq, dk, dv, dg, dh0, dor, dhtr, qr, kr, vr, gr, h0r, B, T, H, Dk, Dv, G, scale, C,
                                work);
            else
                mn_gla_backward_recurrent(dq, dk, dv, dg, dh0, dor, dhtr, qr, kr, vr, gr, h0r, B, T, H, Dk, Dv, G,
                                          scale, rwork);
            if (cv_emit(c, "grad.q", forms[f], dq, q->n) || cv_emit(c, "grad.k", forms[f], dk, k->n) ||
                cv_emit(c, "grad.v", forms[f], dv, v->n) || (g != NULL && cv_emit(c, gname, forms[f], dg, g->n)) ||
                (h0 != NULL && cv_emit(c, "grad.h0", forms[f], dh0, h0->n)))
                return -1;
        }
    }
    return 0;
}

/* linear_attn: no decay (fla naive_recurrent_linear_attn, normalize=False). A gate would mean
   another op. */
static int op_linear_attn(cv_ctx* c)
{
    if (mn_vec_get(c->f, "g") != NULL || mn_vec_get(c->f, "gk") != NULL)
        return cv_fail(c, "a linear_attn file with a gate tensor");
    return cv_gla(c, NULL, 0);
}

/* simple_gla: one log-decay g (B,T,H) per head and step. */
static int op_simple_gla(cv_ctx* c)
{
    return cv_gla(c, "g", 0);
}

/* gla: one log-decay gk (B,T,H,K) per key channel. */
static int op_gla(cv_ctx* c)
{
    return cv_gla(c, "gk", 1);
}

/* (B,X,Y,D) -> (B,Y,X,D): swaps the two middle axes, so head-first BHTD <-> BTHD either way. */
static void cv_swap_mid(mn_real* dst, const mn_real* src, size_t B, size_t X, size_t Y, size_t D)
{
    size_t b, x, y;
    for (b = 0; b < B; b++)
        for (x = 0; x < X; x++)
            for (y = 0; y < Y; y++)
                memcpy(dst + ((b * Y + y) * X + x) * D, src + ((b * X + x) * Y + y) * D, D * sizeof(mn_real));
}

/* A per-token tensor (D = 1 for beta and g) as a BTHD buffer for the library: converted, and
   transposed when the file is head-first. */
static mn_real* cv_real_bthd(cv_ctx* c, const mn_vec_tensor* t, int head_first, size_t B, size_t T, size_t H, size_t D)
{
    mn_real *x = cv_real(c, t), *y;
    if (x == NULL || !head_first) return x;
    if ((y = (mn_real*)cv_alloc(c, t->n, sizeof(mn_real))) == NULL) return NULL;
    cv_swap_mid(y, x, B, H, T, D);
    return y;
}

/* cv_emit for a per-token BTHD result, transposed back to the file's layout first. */
static int cv_emit_bthd(cv_ctx* c, const char* name, const char* form, const mn_real* x, size_t n, int head_first,
                        size_t B, size_t T, size_t H, size_t D)
{
    mn_real* y;
    if (!head_first) return cv_emit(c, name, form, x, n);
    if ((y = (mn_real*)cv_alloc(c, n, sizeof(mn_real))) == NULL) return -1;
    cv_swap_mid(y, x, B, T, H, D);
    return cv_emit(c, name, form, y, n);
}

/* The gated delta rule: S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, S_{-1} = h0,
   o_t = S_t^T (scale q_t), state [K,V]; gated = 0 is DeltaNet (no g). Layout BTHD: q,k (B,T,H,Dk),
   v (B,T,H,Dv), beta and g (B,T,H); or head-first BHTD (delta_rule.vec): q,k (B,H,T,Dk), beta (B,H,T),
   transposed on the way in and out. h0, out.ht (B,H,Dk,Dv) in either layout; h0, out.ht, dht are
   optional. Runs the naive recurrent form (mn_delta_rule_*_naive, which keeps every state) and the
   chunkwise WY form (mn_delta_rule_*, chunk 16, which keeps one state per chunk) and emits both. */
static int cv_delta(cv_ctx* c, int gated)
{
    const size_t chunk = 16;
    const mn_vec_tensor *q, *k, *v, *beta, *g = NULL, *h0, *o, *ht, *dout = NULL, *dht = NULL;
    const char* layout = mn_vec_attr(c->f, "layout");
    int hf;
    size_t B, T, H, Dk, Dv, NC, n_st, n_states, n_hs;
    double scale;
    mn_real *qr, *kr, *vr, *br, *gr = NULL, *h0r = NULL, *out, *htr, *states, *out_c, *htr_c, *hs, *work;

    if (layout == NULL) return cv_fail(c, "missing attr 'layout' (expected BTHD or BHTD)");
    if (strcmp(layout, "BTHD") != 0 && strcmp(layout, "BHTD") != 0)
        return cv_fail(c, "attr 'layout' is '%s', only 'BTHD' and 'BHTD' are supported", layout);
    hf = strcmp(layout, "BHTD") == 0;
    if (cv_attr_real(c, "scale", &scale) != 0) return -1;
    if ((q = cv_tensor(c, "q", 4)) == NULL || (k = cv_tensor(c, "k", 4)) == NULL ||
        (v = cv_tensor(c, "v", 4)) == NULL || (beta = cv_tensor(c, "beta", 3)) == NULL ||
        (o = cv_tensor(c, "out.o", 4)) == NULL)
        return -1;
    if (gated && (g = cv_tensor(c, "g", 3)) == NULL) return -1;
    if (!gated && mn_vec_get(c->f, "g") != NULL)
        return cv_fail(c, "a delta_rule file has a gate 'g' (use gated_delta_rule)");
    /* q fixes B,T,H,Dk and v fixes Dv; everything else must agree with them */
    B = q->dims[0], T = hf ? q->dims[2] : q->dims[1], H = hf ? q->dims[1] : q->dims[2], Dk = q->dims[3],
    Dv = v->dims[3];
    {
        size_t wk[4], wv[4], wb[3], ws[4];
        wk[0] = B, wk[1] = hf ? H : T, wk[2] = hf ? T : H, wk[3] = Dk;
        wv[0] = B, wv[1] = hf ? H : T, wv[2] = hf ? T : H, wv[3] = Dv;
        wb[0] = B, wb[1] = hf ? H : T, wb[2] = hf ? T : H;
        ws[0] = B, ws[1] = H, ws[2] = Dk, ws[3] = Dv;
        if (cv_check_shape(c, k, wk) != 0 || cv_check_shape(c, v, wv) != 0 || cv_check_shape(c, o, wv) != 0 ||
            cv_check_shape(c, beta, wb) != 0 || (g != NULL && cv_check_shape(c, g, wb) != 0))
            return -1;
        /* the optional tensors: initial state, final state, and the upstream gradients */
        if (mn_vec_get(c->f, "h0") == NULL) h0 = NULL;
        else if ((h0 = cv_tensor(c, "h0", 4)) == NULL || cv_check_shape(c, h0, ws) != 0) return -1;
        if (mn_vec_get(c->f, "out.ht") == NULL) ht = NULL;
        else if ((ht = cv_tensor(c, "out.ht", 4)) == NULL || cv_check_shape(c, ht, ws) != 0) return -1;
        if (mn_vec_get(c->f, "do") != NULL &&
            ((dout = cv_tensor(c, "do", 4)) == NULL || cv_check_shape(c, dout, wv) != 0))
            return -1;
        if (mn_vec_get(c->f, "dht") != NULL &&
            ((dht = cv_tensor(c, "dht", 4)) == NULL || cv_check_shape(c, dht, ws) != 0))
            return -1;
        if (dht != NULL && ht == NULL) return cv_fail(c, "the file has 'dht' but no 'out.ht'");
    }
    /* the naive form keeps T states of Dk x Dv per head: check the sizes before allocating, since
       T comes from the file */
    {
        size_t d[5];
        NC = (T + chunk - 1) / chunk;
        d[0] = B, d[1] = H, d[2] = Dk, d[3] = Dv, d[4] = T;
        n_st = cv_prod(d, 4);
        n_states = cv_prod(d, 5);
        d[4] = NC;
        n_hs = cv_prod(d, 5);
        if (n_st == 0 || n_states == 0 || n_hs == 0) return cv_fail(c, "state size overflows size_t");
        if (Dv > MN__DELTA_MAXDV)
            return cv_fail(c, "Dv = %lu is more than the naive form's %d", (unsigned long)Dv, MN__DELTA_MAXDV);
    }

    if ((qr = cv_real_bthd(c, q, hf, B, T, H, Dk)) == NULL || (kr = cv_real_bthd(c, k, hf, B, T, H, Dk)) == NULL ||
        (vr = cv_real_bthd(c, v, hf, B, T, H, Dv)) == NULL || (br = cv_real_bthd(c, beta, hf, B, T, H, 1)) == NULL)
        return -1;
    if (g != NULL && (gr = cv_real_bthd(c, g, hf, B, T, H, 1)) == NULL) return -1;
    if (h0 != NULL && (h0r = cv_real(c, h0)) == NULL) return -1;
    out = (mn_real*)cv_alloc(c, o->n, sizeof(mn_real));
    htr = (mn_real*)cv_alloc(c, n_st, sizeof(mn_real));
    states = (mn_real*)cv_alloc(c, n_states, sizeof(mn_real));
    out_c = (mn_real*)cv_alloc(c, o->n, sizeof(mn_real));
    htr_c = (mn_real*)cv_alloc(c, n_st, sizeof(mn_real));
    hs = (mn_real*)cv_alloc(c, n_hs, sizeof(mn_real));
    work = (mn_real*)cv_alloc(c, mn_delta_rule_work_size(B, H, Dk, Dv, chunk), sizeof(mn_real));
    if (!out || !htr || !states || !out_c || !htr_c || !hs || !work) return -1;

    /* both forms get the same converted inputs; each form's backward uses what its own forward
       saved (every state for the naive form, one per chunk for the chunkwise one) */
    mn_delta_rule_forward_naive(out, htr, states, qr, kr, vr, br, gr, h0r, B, T, H, Dk, Dv, scale);
    mn_delta_rule_forward(out_c, htr_c, hs, qr, kr, vr, br, gr, h0r, B, T, H, Dk, Dv, chunk, scale, work);
    if (cv_emit_bthd(c, "out.o", "naive", out, o->n, hf, B, T, H, Dv) != 0 ||
        cv_emit_bthd(c, "out.o", "chunk", out_c, o->n, hf, B, T, H, Dv) != 0)
        return -1;
    if (ht != NULL &&
        (cv_emit(c, "out.ht", "naive", htr, n_st) != 0 || cv_emit(c, "out.ht", "chunk", htr_c, n_st) != 0))
        return -1;

    if (dout != NULL) {
        /* calloc'd, so zero: the backwards accumulate into these. dg and dh0 stay NULL when the
           file has no g / h0 (nothing to compare them with) */
        mn_real* dor = cv_real_bthd(c, dout, hf, B, T, H, Dv);
        mn_real* dhtr = dht != NULL ? cv_real(c, dht) : NULL;
        mn_real* dstate = (mn_real*)cv_alloc(c, n_st, sizeof(mn_real));
        mn_real *dq[2], *dk[2], *dv[2], *db[2], *dg[2] = {NULL, NULL}, *dh0[2] = {NULL, NULL};
        static const char* form[2] = {"naive", "chunk"};
        int f;
        if (!dor || (dht != NULL && !dhtr) || !dstate) return -1;
        for (f = 0; f < 2; f++) {
            dq[f] = (mn_real*)cv_alloc(c, q->n, sizeof(mn_real));
            dk[f] = (mn_real*)cv_alloc(c, k->n, sizeof(mn_real));
            dv[f] = (mn_real*)cv_alloc(c, v->n, sizeof(mn_real));
            db[f] = (mn_real*)cv_alloc(c, beta->n, sizeof(mn_real));
            if (!dq[f] || !dk[f] || !dv[f] || !db[f]) return -1;
            if (g != NULL && (dg[f] = (mn_real*)cv_alloc(c, g->n, sizeof(mn_real))) == NULL) return -1;
            if (h0 != NULL && (dh0[f] = (mn_real*)cv_alloc(c, n_st, sizeof(mn_real))) == NULL) return -1;
        }
        mn_delta_rule_backward_naive(dq[0], dk[0], dv[0], db[0], dg[0], dh0[0], dstate, dor, dhtr, states, qr, kr, vr,
                                     br, gr, B, T, H, Dk, Dv, scale);
        mn_delta_rule_backward(dq[1], dk[1], dv[1], db[1], dg[1], dh0[1], dor, dhtr, hs, qr, kr, vr, br, gr, B, T, H,
                               Dk, Dv, chunk, scale, work);
        for (f = 0; f < 2; f++) {
            if (cv_emit_bthd(c, "grad.q", form[f], dq[f], q->n, hf, B, T, H, Dk) ||
                cv_emit_bthd(c, "grad.k", form[f], dk[f], k->n, hf, B, T, H, Dk) ||
                cv_emit_bthd(c, "grad.v", form[f], dv[f], v->n, hf, B, T, H, Dv) ||
                cv_emit_bthd(c, "grad.beta", form[f], db[f], beta->n, hf, B, T, H, 1))
                return -1;
            if (g != NULL && cv_emit_bthd(c, "grad.g", form[f], dg[f], g->n, hf, B, T, H, 1)) return -1;
            if (h0 != NULL && cv_emit(c, "grad.h0", form[f], dh0[f], n_st)) return -1;
        }
    }
    return 0;
}

/* delta_rule: DeltaNet, fla's head-first delta_rule_recurrence (delta_rule.vec is BHTD). */
static int op_delta_rule(cv_ctx* c)
{
    return cv_delta(c, 0);
}

/* gated_delta_rule: Gated DeltaNet, fla's naive_recurrent_gated_delta_rule; beta in (0,1) or (0,2)
   (attr beta_max) needs nothing different. */
static int op_gated_delta_rule(cv_ctx* c)
{
    return cv_delta(c, 1);
}

/* Mamba-2 SSD core (ssd_minimal_discrete), layout BTHD: X (B,T,H,P) (x*dt), A (B,T,H) (the log-decay
   A*dt), B and C (B,T,H,N), h0 (B,H,P,N) optional -> out.y (B,T,H,P), out.ht (B,H,P,N) ([V,K],
   mamba's orientation). Runs the chunkwise form (mn_ssd_*, chunk = attr block_len, which the result
   does not depend on), the recurrent form (mn_ssd_*_recurrent) and, forward only, the step token by
   token; emits all of them. Gradients: do for out.y, dht (when present) for out.ht. */
static int op_mamba2_ssd(cv_ctx* c)
{
    const mn_vec_tensor *X, *A, *Bt, *Ct, *h0 = NULL, *y, *ht, *dout = NULL, *dht = NULL;
    size_t B, T, H, P, N, C, b, t;
    mn_real *xr, *ar, *br, *cr, *h0r = NULL, *y_c, *ht_c, *y_r, *ht_r, *y_s, *ht_s, *work;

    if (mn_vec_attr(c->f, "layout") == NULL) return cv_fail(c, "missing attr 'layout' (expected BTHD)");
    if (cv_attr_opt_is(c, "layout", "BTHD") != 0) return -1;
    if (cv_attr_size(c, "block_len", &C) != 0) return -1;
    if (C == 0) return cv_fail(c, "attr 'block_len' is 0; the chunkwise form needs >= 1");
    if ((X = cv_tensor(c, "X", 4)) == NULL || (A = cv_tensor(c, "A", 3)) == NULL ||
        (Bt = cv_tensor(c, "B", 4)) == NULL || (Ct = cv_tensor(c, "C", 4)) == NULL ||
        (y = cv_tensor(c, "out.y", 4)) == NULL || (ht = cv_tensor(c, "out.ht", 4)) == NULL)
        return -1;
    /* X fixes B,T,H,P and B fixes N; everything else must agree with them, so a file with a wrong
       shape fails here instead of making the library read out of bounds */
    B = X->dims[0], T = X->dims[1], H = X->dims[2], P = X->dims[3], N = Bt->dims[3];
    {
        size_t wx[4], wa[3], wb[4], ws[4];
        wx[0] = B, wx[1] = T, wx[2] = H, wx[3] = P;
        wa[0] = B, wa[1] = T, wa[2] = H;
        wb[0] = B, wb[1] = T, wb[2] = H, wb[3] = N;
        ws[0] = B, ws[1] = H, ws[2] = P, ws[3] = N;
        if (cv_check_shape(c, A, wa) != 0 || cv_check_shape(c, Bt, wb) != 0 || cv_check_shape(c, Ct, wb) != 0 ||
            cv_check_shape(c, y, wx) != 0 || cv_check_shape(c, ht, ws) != 0)
            return -1;
        /* h0, do and dht are optional (zeros / a forward-only file) */
        if (mn_vec_get(c->f, "h0") != NULL && ((h0 = cv_tensor(c, "h0", 4)) == NULL || cv_check_shape(c, h0, ws) != 0))
            return -1;
        if (mn_vec_get(c->f, "do") != NULL &&
            ((dout = cv_tensor(c, "do", 4)) == NULL || cv_check_shape(c, dout, wx) != 0))
            return -1;
        if (mn_vec_get(c->f, "dht") != NULL &&
            ((dht = cv_tensor(c, "dht", 4)) == NULL || cv_check_shape(c, dht, ws) != 0))
            return -1;
    }

    if ((xr = cv_real(c, X)) == NULL || (ar = cv_real(c, A)) == NULL || (br = cv_real(c, Bt)) == NULL ||
        (cr = cv_real(c, Ct)) == NULL || (h0 != NULL && (h0r = cv_real(c, h0)) == NULL))
        return -1;
    y_c = (mn_real*)cv_alloc(c, y->n, sizeof(mn_real));
    ht_c = (mn_real*)cv_alloc(c, ht->n, sizeof(mn_real));
    y_r = (mn_real*)cv_alloc(c, y->n, sizeof(mn_real));
    ht_r = (mn_real*)cv_alloc(c, ht->n, sizeof(mn_real));
    y_s = (mn_real*)cv_alloc(c, y->n, sizeof(mn_real));
    ht_s = (mn_real*)cv_alloc(c, ht->n, sizeof(mn_real));
    work = (mn_real*)cv_alloc(c, mn_ssd_work_size(B, T, H, P, N, C), sizeof(mn_real));
    if (!y_c || !ht_c || !y_r || !ht_r || !y_s || !ht_s || !work) return -1;

    /* all forms get the same converted inputs; none saves anything for its backward */
    mn_ssd_forward(y_c, ht_c, xr, ar, br, cr, h0r, B, T, H, P, N, C, work);
    mn_ssd_forward_recurrent(y_r, ht_r, xr, ar, br, cr, h0r, B, T, H, P, N, MN_SSD_LOG_DECAY);
    /* the step, one sequence at a time: row (b,t) of a BTHD tensor is already (1,H,D) */
    if (h0r != NULL) memcpy(ht_s, h0r, ht->n * sizeof(mn_real));
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            size_t r = (b * T + t) * H;
            mn_ssd_step(y_s + r * P, ht_s + b * H * P * N, xr + r * P, ar + r, br + r * N, cr + r * N, 1, H, P, N,
                        MN_SSD_LOG_DECAY);
        }
    if (cv_emit(c, "out.y", "chunk", y_c, y->n) || cv_emit(c, "out.ht", "chunk", ht_c, ht->n) ||
        cv_emit(c, "out.y", "recurrent", y_r, y->n) || cv_emit(c, "out.ht", "recurrent", ht_r, ht->n) ||
        cv_emit(c, "out.y", "step", y_s, y->n) || cv_emit(c, "out.ht", "step", ht_s, ht->n))
        return -1;

    if (dout != NULL) {
        /* calloc'd, so zero: the backwards accumulate into these; grad.h0 exists only with h0 */
        static const char* forms[2] = {"chunk", "recurrent"};
        mn_real* dor = cv_real(c, dout);
        mn_real* dhtr = dht != NULL ? cv_real(c, dht) : NULL;
        mn_real* rwork = (mn_real*)cv_alloc(c, mn_ssd_work_size_recurrent(T, P, N), sizeof(mn_real));
        int f;
        if (dor == NULL || (dht != NULL && dhtr == NULL) || rwork == NULL) return -1;
        for (f = 0; f < 2; f++) {
            mn_real* dX = (mn_real*)cv_alloc(c, X->n, sizeof(mn_real));
            mn_real* dA = (mn_real*)cv_alloc(c, A->n, sizeof(mn_real));
            mn_real* dB = (mn_real*)cv_alloc(c, Bt->n, sizeof(mn_real));
            mn_real* dC = (mn_real*)cv_alloc(c, Ct->n, sizeof(mn_real));
            mn_real* dh0 = h0 != NULL ? (mn_real*)cv_alloc(c, h0->n, sizeof(mn_real)) : NULL;
            if (!dX || !dA || !dB || !dC || (h0 != NULL && !dh0)) return -1;
            if (f == 0)
                mn_ssd_backward(dX, dA, dB, dC, dh0, dor, dhtr, xr, ar, br, cr, h0r, B, T, H, P, N, C, work);
            else
                mn_ssd_backward_recurrent(dX, dA, dB, dC, dh0, dor, dhtr, xr, ar, br, cr, h0r, B, T, H, P, N,
                                          MN_SSD_LOG_DECAY, rwork);
            if (cv_emit(c, "grad.X", forms[f], dX, X->n) || cv_emit(c, "grad.A", forms[f], dA, A->n) ||
                cv_emit(c, "grad.B", forms[f], dB, Bt->n) || cv_emit(c, "grad.C", forms[f], dC, Ct->n) ||
                (h0 != NULL && cv_emit(c, "grad.h0", forms[f], dh0, h0->n)))
                return -1;
        }
    }
    return 0;
}

/* RG-LRU (recurrentgemma RGLRU.forward), layout BTW: x (B,T,W); a_param (W); wx, wa (NH,bw,bw);
   bx, ba (NH,bw) with bw = W/NH (attrs width, num_heads, c) -> out.y (B,T,W), out.ht (B,W). The
   reference is called with segment_pos = 0..T-1, so the state resets at t = 0 (a cache h0, if a
   file had one, would be ignored there: that is passed on as is). Runs the scan with that
   segment_pos ("recurrent"), with segment_pos NULL ("nopos": the same reset rule when there is no
   h0), and the step token by token (forward only); emits all of them. Gradients: do for out.y,
   dht (when present) for out.ht. */
static int op_rglru(cv_ctx* c)
{
    const mn_vec_tensor *x, *ap, *wx, *bx, *wa, *ba, *h0 = NULL, *y, *ht, *dout = NULL, *dht = NULL;
    size_t B, T, W, NH, bw, Wa, i, t, n_forms;
    double cc;
    int* seg;
    mn_real *xr, *apr, *wxr, *bxr, *war, *bar, *h0r = NULL, *yv[2], *htv[2], *gates[2], *y_s, *ht_s, *gs;

    if (mn_vec_attr(c->f, "layout") == NULL) return cv_fail(c, "missing attr 'layout' (expected BTW)");
    if (cv_attr_opt_is(c, "layout", "BTW") != 0) return -1;
    if (cv_attr_size(c, "num_heads", &NH) != 0 || cv_attr_size(c, "width", &Wa) != 0 || cv_attr_real(c, "c", &cc) != 0)
        return -1;
    if ((x = cv_tensor(c, "x", 3)) == NULL || (ap = cv_tensor(c, "a_param", 1)) == NULL ||
        (wx = cv_tensor(c, "wx", 3)) == NULL || (bx = cv_tensor(c, "bx", 2)) == NULL ||
        (wa = cv_tensor(c, "wa", 3)) == NULL || (ba = cv_tensor(c, "ba", 2)) == NULL ||
        (y = cv_tensor(c, "out.y", 3)) == NULL || (ht = cv_tensor(c, "out.ht", 2)) == NULL)
        return -1;
    /* x fixes B,T,W; the attrs must agree with it, and the blocks must tile the width */
    B = x->dims[0], T = x->dims[1], W = x->dims[2];
    if (Wa != W) return cv_fail(c, "attr 'width' is %lu but x has width %lu", (unsigned long)Wa, (unsigned long)W);
    if (NH == 0 || W % NH != 0)
        return cv_fail(c, "attr 'num_heads' %lu does not divide the width %lu", (unsigned long)NH, (unsigned long)W);
    bw = W / NH;
    {
        size_t wp[1], ww[3], wb[2], ws[2];
        wp[0] = W;
        ww[0] = NH, ww[1] = bw, ww[2] = bw;
        wb[0] = NH, wb[1] = bw;
        ws[0] = B, ws[1] = W;
        if (cv_check_shape(c, ap, wp) != 0 || cv_check_shape(c, wx, ww) != 0 || cv_check_shape(c, wa, ww) != 0 ||
            cv_check_shape(c, bx, wb) != 0 || cv_check_shape(c, ba, wb) != 0 || cv_check_shape(c, y, x->dims) != 0 ||
            cv_check_shape(c, ht, ws) != 0)
            return -1;
        if (mn_vec_get(c->f, "h0") != NULL && ((h0 = cv_tensor(c, "h0", 2)) == NULL || cv_check_shape(c, h0, ws) != 0))
            return -1;
        if (mn_vec_get(c->f, "do") != NULL &&
            ((dout = cv_tensor(c, "do", 3)) == NULL || cv_check_shape(c, dout, x->dims) != 0))
            return -1;
        if (mn_vec_get(c->f, "dht") != NULL &&
            ((dht = cv_tensor(c, "dht", 2)) == NULL || cv_check_shape(c, dht, ws) != 0))
            return -1;
    }
    if (T > 0 && T - 1 > 2147483647u) return cv_fail(c, "T = %lu does not fit segment_pos (int)", (unsigned long)T);

    if ((xr = cv_real(c, x)) == NULL || (apr = cv_real(c, ap)) == NULL || (wxr = cv_real(c, wx)) == NULL ||
        (bxr = cv_real(c, bx)) == NULL || (war = cv_real(c, wa)) == NULL || (bar = cv_real(c, ba)) == NULL ||
        (h0 != NULL && (h0r = cv_real(c, h0)) == NULL))
        return -1;
    seg = (int*)cv_alloc(c, B * T, sizeof(int));
    y_s = (mn_real*)cv_alloc(c, x->n, sizeof(mn_real));
    ht_s = (mn_real*)cv_alloc(c, B * W, sizeof(mn_real));
    gs = (mn_real*)cv_alloc(c, mn_rglru_work_size(B, 1, W), sizeof(mn_real));
    if (!seg || !y_s || !ht_s || !gs) return -1;
    for (i = 0; i < B * T; i++) seg[i] = (int)(i % T);
    /* form 0: segment_pos 0..T-1 as the reference's call; form 1: segment_pos NULL (only without h0,
       where it means the same) */
    n_forms = h0 == NULL ? 2 : 1;
    for (i = 0; i < n_forms; i++) {
        static const char* forms[2] = {"recurrent", "nopos"};
        yv[i] = (mn_real*)cv_alloc(c, x->n, sizeof(mn_real));
        htv[i] = (mn_real*)cv_alloc(c, B * W, sizeof(mn_real));
        gates[i] = (mn_real*)cv_alloc(c, mn_rglru_work_size(B, T, W), sizeof(mn_real));
        if (!yv[i] || !htv[i] || !gates[i]) return -1;
        mn_rglru_forward(yv[i], htv[i], gates[i], xr, apr, wxr, bxr, war, bar, h0r, i == 0 ? seg : NULL, B, T, W, NH,
                         cc);
        if (cv_emit(c, "out.y", forms[i], yv[i], x->n) || cv_emit(c, "out.ht", forms[i], htv[i], B * W)) return -1;
    }
    /* the step: all sequences at once, token t at position t (0 resets) */
    {
        mn_real* xt = (mn_real*)cv_alloc(c, B * W, sizeof(mn_real));
        mn_real* yt = (mn_real*)cv_alloc(c, B * W, sizeof(mn_real));
        int* pos = (int*)cv_alloc(c, B, sizeof(int));
        size_t b;
        if (!xt || !yt || !pos) return -1;
        if (h0r != NULL) memcpy(ht_s, h0r, B * W * sizeof(mn_real));
        for (t = 0; t < T; t++) {
            for (b = 0; b < B; b++) {
                memcpy(xt + b * W, xr + (b * T + t) * W, W * sizeof(mn_real));
                pos[b] = (int)t;
            }
            mn_rglru_step(yt, ht_s, xt, apr, wxr, bxr, war, bar, pos, B, W, NH, cc, gs);
            for (b = 0; b < B; b++) memcpy(y_s + (b * T + t) * W, yt + b * W, W * sizeof(mn_real));
        }
        if (cv_emit(c, "out.y", "step", y_s, x->n) || cv_emit(c, "out.ht", "step", ht_s, B * W)) return -1;
    }

    if (dout != NULL) {
        /* calloc'd, so zero: the backwards accumulate into these; each form's backward uses its own
           forward's y and gates */
        static const char* forms[2] = {"recurrent", "nopos"};
        mn_real* dor = cv_real(c, dout);
        mn_real* dhtr = dht != NULL ? cv_real(c, dht) : NULL;
        mn_real* work = (mn_real*)cv_alloc(c, mn_rglru_work_size(B, T, W), sizeof(mn_real));
        if (dor == NULL || (dht != NULL && dhtr == NULL) || work == NULL) return -1;
        for (i = 0; i < n_forms; i++) {
            mn_real* dx = (mn_real*)cv_alloc(c, x->n, sizeof(mn_real));
            mn_real* dap = (mn_real*)cv_alloc(c, W, sizeof(mn_real));
            mn_real* dwx = (mn_real*)cv_alloc(c, wx->n, sizeof(mn_real));
            mn_real* dbx = (mn_real*)cv_alloc(c, bx->n, sizeof(mn_real));
            mn_real* dwa = (mn_real*)cv_alloc(c, wa->n, sizeof(mn_real));
            mn_real* dba = (mn_real*)cv_alloc(c, ba->n, sizeof(mn_real));
            mn_real* dh0 = h0 != NULL ? (mn_real*)cv_alloc(c, h0->n, sizeof(mn_real)) : NULL;
            if (!dx || !dap || !dwx || !dbx || !dwa || !dba || (h0 != NULL && !dh0)) return -1;
            mn_rglru_backward(dx, dap, dwx, dbx, dwa, dba, dh0, dor, dhtr, yv[i], gates[i], xr, apr, wxr, war, h0r,
                              i == 0 ? seg : NULL, B, T, W, NH, cc, work);
            if (cv_emit(c, "grad.x", forms[i], dx, x->n) || cv_emit(c, "grad.a_param", forms[i], dap, W) ||
                cv_emit(c, "grad.wx", forms[i], dwx, wx->n) || cv_emit(c, "grad.bx", forms[i], dbx, bx->n) ||
                cv_emit(c, "grad.wa", forms[i], dwa, wa->n) || cv_emit(c, "grad.ba", forms[i], dba, ba->n) ||
                (h0 != NULL && cv_emit(c, "grad.h0", forms[i], dh0, h0->n)))
                return -1;
        }
    }
    return 0;
}

/* ---- mLSTM (wip/xlstm.h). The three op names share their inputs: q, k (B,H,T,K), v (B,H,T,V), i, f (B,H,T)
   gate pre-activations, head-first BHTD (or BTHD; the library's layout is BTHD, so head-first tensors are
   transposed on the way in and out); attrs scale (K^-1/2 in the reference) and eps (1e-6).
   mlstm: the parallel form and its exact backward (through the normaliser n and the stabiliser m), and the
     chunkwise form (chunk 16) started from m0 = -inf, which makes its stabiliser the parallel one, so that
     out.n and out.m are the same tensors; outputs out.o, out.n, out.m (B,H,T), grads of q, k, v, i, f.
   mlstm_custbw: the same with the detached backward (n and m held constant, mlstm_kernels' mlstm_parallel_bw).
   mlstm_recurrent: forward only, from C = n = m = 0: the recurrent form, the step token by token, and the
     chunkwise form (chunk 16, m0 = 0 as the recurrent one); out.o and the final states out.c_final
     (B,H,K,V), out.n_final (B,H,K), out.m_final (B,H,1). */
typedef struct {
    const mn_vec_tensor *q, *k, *v, *ig, *fg, *o, *dout;
    int hf; /* 1: head-first BHTD */
    size_t B, T, H, K, V;
    double scale, eps;
    mn_real *qr, *kr, *vr, *ir, *fr, *dor; /* converted to BTHD; dor NULL without do */
} cv_mlstm_in;

static int cv_mlstm_inputs(cv_ctx* c, cv_mlstm_in* m)
{
    const char* layout = mn_vec_attr(c->f, "layout");
    size_t wk[4], wv[4], wg[3];
    if (layout == NULL) return cv_fail(c, "missing attr 'layout' (expected BHTD or BTHD)");
    if (strcmp(layout, "BTHD") != 0 && strcmp(layout, "BHTD") != 0)
        return cv_fail(c, "attr 'layout' is '%s', only 'BHTD' and 'BTHD' are supported", layout);
    m->hf = strcmp(layout, "BHTD") == 0;
    if (cv_attr_real(c, "scale", &m->scale) != 0 || cv_attr_real(c, "eps", &m->eps) != 0) return -1;
    if ((m->q = cv_tensor(c, "q", 4)) == NULL || (m->k = cv_tensor(c, "k", 4)) == NULL ||
        (m->v = cv_tensor(c, "v", 4)) == NULL || (m->ig = cv_tensor(c, "i", 3)) == NULL ||
        (m->fg = cv_tensor(c, "f", 3)) == NULL || (m->o = cv_tensor(c, "out.o", 4)) == NULL)
        return -1;
    /* q fixes B,T,H,K and v fixes V; everything else must agree with them */
    m->B = m->q->dims[0], m->T = m->hf ? m->q->dims[2] : m->q->dims[1], m->H = m->hf ? m->q->dims[1] : m->q->dims[2];
    m->K = m->q->dims[3], m->V = m->v->dims[3];
    wk[0] = m->B, wk[1] = m->hf ? m->H : m->T, wk[2] = m->hf ? m->T : m->H, wk[3] = m->K;
    wv[0] = wk[0], wv[1] = wk[1], wv[2] = wk[2], wv[3] = m->V;
    wg[0] = wk[0], wg[1] = wk[1], wg[2] = wk[2];
    if (cv_check_shape(c, m->k, wk) != 0 || cv_check_shape(c, m->v, wv) != 0 || cv_check_shape(c, m->o, wv) != 0 ||
        cv_check_shape(c, m->ig, wg) != 0 || cv_check_shape(c, m->fg, wg) != 0)
        return -1;
    /* do is optional (mlstm_recurrent is forward only); when present it is out.o's shape */
    if (mn_vec_get(c->f, "do") == NULL) m->dout = NULL;
    else if ((m->dout = cv_tensor(c, "do", 4)) == NULL || cv_check_shape(c, m->dout, wv) != 0) return -1;
    if ((m->qr = cv_real_bthd(c, m->q, m->hf, m->B, m->T, m->H, m->K)) == NULL ||
        (m->kr = cv_real_bthd(c, m->k, m->hf, m->B, m->T, m->H, m->K)) == NULL ||
        (m->vr = cv_real_bthd(c, m->v, m->hf, m->B, m->T, m->H, m->V)) == NULL ||
        (m->ir = cv_real_bthd(c, m->ig, m->hf, m->B, m->T, m->H, 1)) == NULL ||
        (m->fr = cv_real_bthd(c, m->fg, m->hf, m->B, m->T, m->H, 1)) == NULL)
        return -1;
    m->dor = NULL;
    if (m->dout != NULL && (m->dor = cv_real_bthd(c, m->dout, m->hf, m->B, m->T, m->H, m->V)) == NULL) return -1;
    return 0;
}

/* mlstm and mlstm_custbw: the parallel form and the chunkwise form (chunk 16, m0 = -inf), forward and
   the backward in `mode`; every output the file has (out.o, and out.n, out.m when present) and, with do,
   the five gradients. */
static int cv_mlstm_parallel(cv_ctx* c, int mode)
{
    static const char* form[2] = {"parallel", "chunk"};
    const size_t chunk = 16;
    cv_mlstm_in m;
    const mn_vec_tensor *tn, *tm;
    size_t ng, f, bh;
    mn_real* m0;
    if (cv_mlstm_inputs(c, &m) != 0) return -1;
    ng = m.B * m.T * m.H;
    {
        size_t wg[3];
        wg[0] = m.B, wg[1] = m.hf ? m.H : m.T, wg[2] = m.hf ? m.T : m.H;
        if (mn_vec_get(c->f, "out.n") == NULL) tn = NULL;
        else if ((tn = cv_tensor(c, "out.n", 3)) == NULL || cv_check_shape(c, tn, wg) != 0) return -1;
        if (mn_vec_get(c->f, "out.m") == NULL) tm = NULL;
        else if ((tm = cv_tensor(c, "out.m", 3)) == NULL || cv_check_shape(c, tm, wg) != 0) return -1;
    }
    /* the chunkwise form from m0 = -inf (and zero C0, n0) is the parallel form, stabiliser included */
    if ((m0 = (mn_real*)cv_alloc(c, m.B * m.H, sizeof(mn_real))) == NULL) return -1;
    for (bh = 0; bh < m.B * m.H; bh++) m0[bh] = (mn_real)-INFINITY;
    for (f = 0; f < 2; f++) {
        size_t nw = f == 0 ? mn_mlstm_work_size_parallel(m.B, m.T, m.H)
                           : mn_mlstm_work_size(m.B, m.T, m.H, m.K, m.V, chunk);
        mn_real* work = (mn_real*)cv_alloc(c, nw, sizeof(mn_real));
        mn_real* out = (mn_real*)cv_alloc(c, m.o->n, sizeof(mn_real));
        mn_real* nrm = (mn_real*)cv_alloc(c, ng, sizeof(mn_real));
        mn_real* stab = (mn_real*)cv_alloc(c, ng, sizeof(mn_real));
        if (!work || !out || !nrm || !stab) return -1;
        if (f == 0)
            mn_mlstm_forward_parallel(out, nrm, stab, m.qr, m.kr, m.vr, m.ir, m.fr, m.B, m.T, m.H, m.K, m.V, m.scale,
                                      m.eps, work);
        else
            mn_mlstm_forward(out, nrm, stab, NULL, NULL, NULL, m.qr, m.kr, m.vr, m.ir, m.fr, NULL, NULL, m0, m.B, m.T,
                             m.H, m.K, m.V, m.scale, m.eps, chunk, work);
        if (cv_emit_bthd(c, "out.o", form[f], out, m.o->n, m.hf, m.B, m.T, m.H, m.V) != 0 ||
            (tn != NULL && cv_emit_bthd(c, "out.n", form[f], nrm, ng, m.hf, m.B, m.T, m.H, 1) != 0) ||
            (tm != NULL && cv_emit_bthd(c, "out.m", form[f], stab, ng, m.hf, m.B, m.T, m.H, 1) != 0))
            return -1;
        if (m.dor != NULL) {
            /* calloc'd, so zero: the backwards accumulate into these */
            mn_real* dq = (mn_real*)cv_alloc(c, m.q->n, sizeof(mn_real));
            mn_real* dk = (mn_real*)cv_alloc(c, m.k->n, sizeof(mn_real));
            mn_real* dv = (mn_real*)cv_alloc(c, m.v->n, sizeof(mn_real));
            mn_real* di = (mn_real*)cv_alloc(c, ng, sizeof(mn_real));
            mn_real* df = (mn_real*)cv_alloc(c, ng, sizeof(mn_real));
            if (!dq || !dk || !dv || !di || !df) return -1;
            if (f == 0)
                mn_mlstm_backward_parallel(dq, dk, dv, di, df, m.dor, m.qr, m.kr, m.vr, m.ir, m.fr, m.B, m.T, m.H, m.K,
                                           m.V, m.scale, m.eps, mode, work);
            else
                mn_mlstm_backward(dq, dk, dv, di, df, NULL, NULL, m.dor, m.qr, m.kr, m.vr, m.ir, m.fr, NULL, NULL, m0,
                                  m.B, m.T, m.H, m.K, m.V, m.scale, m.eps, chunk, mode, work);
            if (cv_emit_bthd(c, "grad.q", form[f], dq, m.q->n, m.hf, m.B, m.T, m.H, m.K) ||
                cv_emit_bthd(c, "grad.k", form[f], dk, m.k->n, m.hf, m.B, m.T, m.H, m.K) ||
                cv_emit_bthd(c, "grad.v", form[f], dv, m.v->n, m.hf, m.B, m.T, m.H, m.V) ||
                cv_emit_bthd(c, "grad.i", form[f], di, ng, m.hf, m.B, m.T, m.H, 1) ||
                cv_emit_bthd(c, "grad.f", form[f], df, ng, m.hf, m.B, m.T, m.H, 1))
                return -1;
        }
    }
    return 0;
}

/* mlstm: autograd through mlstm_parallel_fw, the exact gradient. */
static int op_mlstm(cv_ctx* c)
{
    return cv_mlstm_parallel(c, MN_MLSTM_BW_EXACT);
}

/* mlstm_custbw: mlstm_kernels' hand-written parallel backward, n and m held constant. */
static int op_mlstm_custbw(cv_ctx* c)
{
    return cv_mlstm_parallel(c, MN_MLSTM_BW_DETACH);
}

/* mlstm_recurrent: the step called for t = 0..T-1 from zero states. */
static int op_mlstm_recurrent(cv_ctx* c)
{
    static const char* form[3] = {"recurrent", "step", "chunk"};
    const size_t chunk = 16;
    cv_mlstm_in m;
    const mn_vec_tensor *cf, *nf, *mf;
    size_t nC, nN, f, b, t;
    if (cv_mlstm_inputs(c, &m) != 0) return -1;
    {
        size_t wc[4], wn[3];
        wc[0] = m.B, wc[1] = m.H, wc[2] = m.K, wc[3] = m.V;
        wn[0] = m.B, wn[1] = m.H, wn[2] = m.K;
        if ((cf = cv_tensor(c, "out.c_final", 4)) == NULL || (nf = cv_tensor(c, "out.n_final", 3)) == NULL ||
            (mf = cv_tensor(c, "out.m_final", 3)) == NULL || cv_check_shape(c, cf, wc) != 0 ||
            cv_check_shape(c, nf, wn) != 0)
            return -1;
        wn[2] = 1;
        if (cv_check_shape(c, mf, wn) != 0) return -1;
    }
    nC = cf->n, nN = nf->n;
    for (f = 0; f < 3; f++) {
        /* calloc'd, so the states start at zero, as in the reference */
        mn_real* out = (mn_real*)cv_alloc(c, m.o->n, sizeof(mn_real));
        mn_real* C = (mn_real*)cv_alloc(c, nC, sizeof(mn_real));
        mn_real* n = (mn_real*)cv_alloc(c, nN, sizeof(mn_real));
        mn_real* mm = (mn_real*)cv_alloc(c, m.B * m.H, sizeof(mn_real));
        mn_real* work = NULL;
        if (!out || !C || !n || !mm) return -1;
        if (f == 2 && (work = (mn_real*)cv_alloc(c, mn_mlstm_work_size(m.B, m.T, m.H, m.K, m.V, chunk),
                                                 sizeof(mn_real))) == NULL) return -1;
        if (f == 0)
            mn_mlstm_forward_recurrent(out, NULL, NULL, C, n, mm, m.qr, m.kr, m.vr, m.ir, m.fr, NULL, NULL, NULL, m.B,
                                       m.T, m.H, m.K, m.V, m.scale, m.eps);
        else if (f == 1)
            /* the step takes one token of all heads of one sequence: rows of (B,T,H,D) are already that */
            for (b = 0; b < m.B; b++)
                for (t = 0; t < m.T; t++) {
                    size_t r = (b * m.T + t) * m.H;
                    mn_mlstm_step(out + r * m.V, C + b * m.H * m.K * m.V, n + b * m.H * m.K, mm + b * m.H,
                                  m.qr + r * m.K, m.kr + r * m.K, m.vr + r * m.V, m.ir + r, m.fr + r, 1, m.H, m.K, m.V,
                                  m.scale, m.eps);
                }
        else
            mn_mlstm_forward(out, NULL, NULL, C, n, mm, m.qr, m.kr, m.vr, m.ir, m.fr, NULL, NULL, NULL, m.B, m.T, m.H,
                             m.K, m.V, m.scale, m.eps, chunk, work);
        if (cv_emit_bthd(c, "out.o", form[f], out, m.o->n, m.hf, m.B, m.T, m.H, m.V) ||
            cv_emit(c, "out.c_final", form[f], C, nC) || cv_emit(c, "out.n_final", form[f], n, nN) ||
            cv_emit(c, "out.m_final", form[f], mm, m.B * m.H))
            return -1;
    }
    return 0;
}

/* slstm: the vanilla sLSTM cell (xlstm slstm_forward), layout SBG: x [S,B,4*Hd] input pre-activations
   (gate-major, index g*Hd + h*Dh + j), R [NH,4*Dh,Dh], b [4*Hd], attrs num_heads and head_dim; outputs
   out.y, out.c, out.n, out.m [S,B,Hd] (the states after each step, zero initial states); grads of x, R
   and b for L = sum(out.y * do). The library's layout is [B,S,...]: x, do and the results are transposed
   on the way (cv_real_bthd / cv_emit_bthd with B = 1 swap the S and B axes). Runs the forward with its
   backward, and the step token by token (outputs only). */
static int op_slstm(cv_ctx* c)
{
    static const char* out_names[4] = {"out.y", "out.c", "out.n", "out.m"};
    const mn_vec_tensor *x, *R, *b, *outs[4], *dout = NULL;
    size_t NH, Dh, S, B, Hd, G, ny, i, t;
    mn_real *xr, *Rr, *br, *st[4], *work;
    if (mn_vec_attr(c->f, "layout") == NULL) return cv_fail(c, "missing attr 'layout' (expected SBG)");
    if (cv_attr_opt_is(c, "layout", "SBG") != 0) return -1;
    if (cv_attr_size(c, "num_heads", &NH) != 0 || cv_attr_size(c, "head_dim", &Dh) != 0) return -1;
    if (NH == 0 || Dh == 0 || NH > 4096 || Dh > 4096) return cv_fail(c, "num_heads or head_dim out of range");
    if ((x = cv_tensor(c, "x", 3)) == NULL || (R = cv_tensor(c, "R", 3)) == NULL || (b = cv_tensor(c, "b", 1)) == NULL)
        return -1;
    S = x->dims[0], B = x->dims[1], Hd = NH * Dh, G = 4 * Hd;
    {
        size_t wx[3], wR[3], wb[1], wy[3];
        wx[0] = S, wx[1] = B, wx[2] = G;
        wR[0] = NH, wR[1] = 4 * Dh, wR[2] = Dh;
        wb[0] = G;
        wy[0] = S, wy[1] = B, wy[2] = Hd;
        if (cv_check_shape(c, x, wx) != 0 || cv_check_shape(c, R, wR) != 0 || cv_check_shape(c, b, wb) != 0) return -1;
        for (i = 0; i < 4; i++)
            if ((outs[i] = cv_tensor(c, out_names[i], 3)) == NULL || cv_check_shape(c, outs[i], wy) != 0) return -1;
        if (mn_vec_get(c->f, "do") != NULL &&
            ((dout = cv_tensor(c, "do", 3)) == NULL || cv_check_shape(c, dout, wy) != 0)) return -1;
    }
    ny = outs[0]->n;
    /* [S,B,G] is (1,S,B,G) head-first: cv_real_bthd makes it (1,B,S,G) */
    if ((xr = cv_real_bthd(c, x, 1, 1, B, S, G)) == NULL || (Rr = cv_real(c, R)) == NULL ||
        (br = cv_real(c, b)) == NULL) return -1;
    for (i = 0; i < 4; i++)
        if ((st[i] = (mn_real*)cv_alloc(c, ny, sizeof(mn_real))) == NULL) return -1;
    if ((work = (mn_real*)cv_alloc(c, mn_slstm_work_size(B, NH, Dh), sizeof(mn_real))) == NULL) return -1;
    mn_slstm_forward(st[0], st[1], st[2], st[3], xr, Rr, br, NULL, NULL, NULL, NULL, B, S, NH, Dh, work);
    for (i = 0; i < 4; i++)
        if (cv_emit_bthd(c, out_names[i], "forward", st[i], ny, 1, 1, B, S, Hd) != 0) return -1;
    if (dout != NULL) {
        /* calloc'd, so zero: the backward accumulates into these */
        mn_real* dor = cv_real_bthd(c, dout, 1, 1, B, S, Hd);
        mn_real* dx = (mn_real*)cv_alloc(c, x->n, sizeof(mn_real));
        mn_real* dR = (mn_real*)cv_alloc(c, R->n, sizeof(mn_real));
        mn_real* db = (mn_real*)cv_alloc(c, b->n, sizeof(mn_real));
        if (!dor || !dx || !dR || !db) return -1;
        mn_slstm_backward(dx, dR, db, NULL, NULL, NULL, dor, st[0], st[1], st[2], st[3], xr, Rr, br, NULL, NULL, NULL,
                          NULL, B, S, NH, Dh, work);
        if (cv_emit_bthd(c, "grad.x", "forward", dx, x->n, 1, 1, B, S, G) ||
            cv_emit(c, "grad.R", "forward", dR, R->n) || cv_emit(c, "grad.b", "forward", db, b->n))
            return -1;
    }
    /* the step: one time step of all B sequences; [S,B,...] rows are the step's (B,...) already, so it
       reads x and writes the outputs in the file's layout directly */
    {
        mn_real* xs = cv_real(c, x);
        mn_real* so[4];
        for (i = 0; i < 4; i++)
            if ((so[i] = (mn_real*)cv_alloc(c, ny, sizeof(mn_real))) == NULL) return -1;
        if (xs == NULL) return -1;
        for (t = 0; t < S; t++) {
            if (t) /* the state after step t-1 is where step t starts */
                for (i = 0; i < 4; i++) memcpy(so[i] + t * B * Hd, so[i] + (t - 1) * B * Hd, B * Hd * sizeof(mn_real));
            mn_slstm_step(so[0] + t * B * Hd, so[1] + t * B * Hd, so[2] + t * B * Hd, so[3] + t * B * Hd,
                          xs + t * B * G, Rr, br, B, NH, Dh, work);
        }
        for (i = 0; i < 4; i++)
            if (cv_emit(c, out_names[i], "step", so[i], ny) != 0) return -1;
    }
    return 0;
}

/* ---- Mesa (mesanet.h >>mesa). The three op names share inputs: q, k, v (B,T,H,K), g, beta (B,T,H),
   lamb (H,K); outputs out.o and the final states out.h_kk (B,H,K,K), out.h_kv (B,H,K,V).
   mesa_exact: the exact solve (recurrent form, Cholesky) with its implicit backward, and the
     chunkwise CG form (no epsilons, 2K+8 iterations at chunk 16 and 64) with its backward: both
     must reach the file, so both are reported (worst of the forms).
   mesa_cg: fla's CG arithmetic (x0 = 0, 1e-5 epsilons, attr cg_iters steps), recurrent and
     chunkwise (attr chunk_size). mesa_decode: the step with fla's Jacobi start, token by token. */
typedef struct {
    const mn_vec_tensor *q, *k, *v, *o, *dout;
    size_t B, T, H, K, V;
    mn_real *qr, *kr, *vr, *gr, *br, *lr;
} cv_mesa_in;

static int cv_mesa_inputs(cv_ctx* c, cv_mesa_in* m)
{
    const mn_vec_tensor *g, *beta, *lamb;
    size_t w4[4], w3[3], w2[2];
    if (cv_attr_opt_is(c, "layout", "BTHD") != 0) return -1;
    if ((m->q = cv_tensor(c, "q", 4)) == NULL || (m->k = cv_tensor(c, "k", 4)) == NULL ||
        (m->v = cv_tensor(c, "v", 4)) == NULL || (g = cv_tensor(c, "g", 3)) == NULL ||
        (beta = cv_tensor(c, "beta", 3)) == NULL || (lamb = cv_tensor(c, "lamb", 2)) == NULL ||
        (m->o = cv_tensor(c, "out.o", 4)) == NULL)
        return -1;
    m->B = m->q->dims[0], m->T = m->q->dims[1], m->H = m->q->dims[2], m->K = m->q->dims[3], m->V = m->v->dims[3];
    w4[0] = m->B, w4[1] = m->T, w4[2] = m->H, w4[3] = m->K;
    if (cv_check_shape(c, m->k, w4) != 0) return -1;
    w4[3] = m->V;
    if (cv_check_shape(c, m->v, w4) != 0 || cv_check_shape(c, m->o, w4) != 0) return -1;
    w3[0] = m->B, w3[1] = m->T, w3[2] = m->H;
    if (cv_check_shape(c, g, w3) != 0 || cv_check_shape(c, beta, w3) != 0) return -1;
    w2[0] = m->H, w2[1] = m->K;
    if (cv_check_shape(c, lamb, w2) != 0) return -1;
    if (m->K > 1024 || m->V > 1024) return cv_fail(c, "head dims above 1024");
    if (mn_vec_get(c->f, "do") == NULL) m->dout = NULL;
    else if ((m->dout = cv_tensor(c, "do", 4)) == NULL || cv_check_shape(c, m->dout, w4) != 0) return -1;
    if ((m->qr = cv_real(c, m->q)) == NULL || (m->kr = cv_real(c, m->k)) == NULL ||
        (m->vr = cv_real(c, m->v)) == NULL || (m->gr = cv_real(c, g)) == NULL || (m->br = cv_real(c, beta)) == NULL ||
        (m->lr = cv_real(c, lamb)) == NULL)
        return -1;
    return 0;
}

/* Runs one form forward (and backward when the file has do), emitting out.o, out.h_kk, out.h_kv
   and the grads under the form's name. chunk = 0: recurrent form. */
static int cv_mesa_form(cv_ctx* c, const cv_mesa_in* m, const char* form, const mn_mesa_opts* o, int chunk)
{
    size_t B = m->B, T = m->T, H = m->H, K = m->K, V = m->V;
    size_t nw = chunk ? mn_mesa_work_size(B, T, H, K, V, o) : mn_mesa_work_size_recurrent(B, T, H, K, V, o);
    mn_real* work = (mn_real*)cv_alloc(c, nw, sizeof(mn_real));
    mn_real* out = (mn_real*)cv_alloc(c, m->o->n, sizeof(mn_real));
    mn_real* xs = (mn_real*)cv_alloc(c, m->q->n, sizeof(mn_real));
    mn_real* hkk = (mn_real*)cv_alloc(c, B * H * K * K, sizeof(mn_real));   /* zero initial states */
    mn_real* hkv = (mn_real*)cv_alloc(c, B * H * K * V, sizeof(mn_real));
    if (!work || !out || !xs || !hkk || !hkv) return -1;
    if (chunk)
        mn_mesa_forward(out, xs, NULL, hkk, hkv, m->qr, m->kr, m->vr, m->gr, m->br, m->lr, B, T, H, K, V, o, work);
    else
        mn_mesa_forward_recurrent(out, xs, NULL, hkk, hkv, m->qr, m->kr, m->vr, m->gr, m->br, m->lr, B, T, H, K, V, o,
                                  work);
    if (cv_emit(c, "out.o", form, out, m->o->n) || cv_emit(c, "out.h_kk", form, hkk, B * H * K * K) ||
        cv_emit(c, "out.h_kv", form, hkv, B * H * K * V)) return -1;
    if (m->dout != NULL) {
        mn_real* dor = cv_real(c, m->dout);
        mn_real* dq = (mn_real*)cv_alloc(c, m->q->n, sizeof(mn_real));
        mn_real* dk = (mn_real*)cv_alloc(c, m->k->n, sizeof(mn_real));
        mn_real* dv = (mn_real*)cv_alloc(c, m->v->n, sizeof(mn_real));
        mn_real* dg = (mn_real*)cv_alloc(c, B * T * H, sizeof(mn_real));
        mn_real* db = (mn_real*)cv_alloc(c, B * T * H, sizeof(mn_real));
        mn_real* dl = (mn_real*)cv_alloc(c, H * K, sizeof(mn_real));
        size_t nb = chunk ? mn_mesa_work_size(B, T, H, K, V, o) : mn_mesa_work_size_recurrent(B, T, H, K, V, o);
        mn_real* wb = (mn_real*)cv_alloc(c, nb, sizeof(mn_real));
        if (!dor || !dq || !dk || !dv || !dg || !db || !dl || !wb) return -1;
        if (chunk)
            mn_mesa_backward(dq, dk, dv, dg, db, dl, NULL, NULL, dor, NULL, NULL, xs, m->qr, m->kr, m->vr, m->gr, m->br,
                             m->lr, NULL, NULL, B, T, H, K, V, o, wb);
        else
            mn_mesa_backward_recurrent(dq, dk, dv, dg, db, dl, NULL, NULL, dor, NULL, NULL, xs, m->qr, m->kr, m->vr,
                                       m->gr, m->br, m->lr, NULL, NULL, B, T, H, K, V, o, wb);
        if (cv_emit(c, "grad.q", form, dq, m->q->n) || cv_emit(c, "grad.k", form, dk, m->k->n) ||
            cv_emit(c, "grad.v", form, dv, m->v->n) || cv_emit(c, "grad.g", form, dg, B * T * H) ||
            cv_emit(c, "grad.beta", form, db, B * T * H) || cv_emit(c, "grad.lamb", form, dl, H * K))
            return -1;
    }
    return 0;
}

static int op_mesa_exact(cv_ctx* c)
{
    cv_mesa_in m;
    mn_mesa_opts ex, cg16, cg64;
    if (cv_mesa_inputs(c, &m) != 0) return -1;
    memset(&ex, 0, sizeof ex); ex.solver = MN_MESA_EXACT;
    memset(&cg16, 0, sizeof cg16); cg16.cg_iters = (int)(2 * m.K + 8); cg16.chunk = 16;
    cg64 = cg16; cg64.chunk = 64;
    if (cv_mesa_form(c, &m, "exact", &ex, 0) != 0 || cv_mesa_form(c, &m, "chunk16", &cg16, 1) != 0 ||
        cv_mesa_form(c, &m, "chunk64", &cg64, 1) != 0)
        return -1;
    return 0;
}

static int op_mesa_cg(cv_ctx* c)
{
    cv_mesa_in m;
    mn_mesa_opts o;
    size_t iters, chunk;
    if (cv_attr_size(c, "cg_iters", &iters) != 0 || cv_attr_size(c, "chunk_size", &chunk) != 0) return -1;
    if (iters < 1 || iters > 10000 || chunk < 1) return cv_fail(c, "cg_iters or chunk_size out of range");
    if (cv_mesa_inputs(c, &m) != 0) return -1;
    memset(&o, 0, sizeof o);
    o.cg_iters = (int)iters; o.fla = 1; o.chunk = chunk;
    if (cv_mesa_form(c, &m, "recurrent", &o, 0) != 0 || cv_mesa_form(c, &m, "chunk", &o, 1) != 0) return -1;
    return 0;
}

static int op_mesa_decode(cv_ctx* c)
{
    cv_mesa_in m;
    mn_mesa_opts o;
    size_t iters, b, t, h;
    mn_real *out, *hkk, *hkv, *work, *qt, *kt, *vt, *gt, *bt, *ot;
    if (cv_attr_size(c, "cg_iters", &iters) != 0) return -1;
    if (iters < 1 || iters > 10000) return cv_fail(c, "cg_iters out of range");
    if (cv_mesa_inputs(c, &m) != 0) return -1;
    memset(&o, 0, sizeof o);
    o.cg_iters = (int)iters; o.fla = 1; o.jacobi = 1;
    out = (mn_real*)cv_alloc(c, m.o->n, sizeof(mn_real));
    hkk = (mn_real*)cv_alloc(c, m.B * m.H * m.K * m.K, sizeof(mn_real));
    hkv = (mn_real*)cv_alloc(c, m.B * m.H * m.K * m.V, sizeof(mn_real));
    work = (mn_real*)cv_alloc(c, mn_mesa_work_size_recurrent(1, 1, m.H, m.K, m.V, &o), sizeof(mn_real));
    qt = (mn_real*)cv_alloc(c, m.H * m.K, sizeof(mn_real)); kt = (mn_real*)cv_alloc(c, m.H * m.K, sizeof(mn_real));
    vt = (mn_real*)cv_alloc(c, m.H * m.V, sizeof(mn_real)); ot = (mn_real*)cv_alloc(c, m.H * m.V, sizeof(mn_real));
    gt = (mn_real*)cv_alloc(c, m.H, sizeof(mn_real)); bt = (mn_real*)cv_alloc(c, m.H, sizeof(mn_real));
    if (!out || !hkk || !hkv || !work || !qt || !kt || !vt || !ot || !gt || !bt) return -1;
    /* the step takes one token of all heads of one sequence: rows of (B,T,H,D) are already that */
    for (b = 0; b < m.B; b++)
        for (t = 0; t < m.T; t++) {
            size_t r = (b * m.T + t) * m.H;
            for (h = 0; h < m.H; h++) { gt[h] = m.gr[r + h]; bt[h] = m.br[r + h]; }
            mn_mesa_step(out + r * m.V, NULL, hkk + b * m.H * m.K * m.K, hkv + b * m.H * m.K * m.V, m.qr + r * m.K,
                         m.kr + r * m.K, m.vr + r * m.V, gt, bt, m.lr, m.H, m.K, m.V, &o, work);
        }
    (void)qt; (void)kt; (void)vt; (void)ot;
    if (cv_emit(c, "out.o", "step", out, m.o->n) || cv_emit(c, "out.h_kk", "step", hkk, m.B * m.H * m.K * m.K) ||
        cv_emit(c, "out.h_kv", "step", hkv, m.B * m.H * m.K * m.V))
        return -1;
    return 0;
}

static const struct {
    const char* op;
    cv_op_fn fn;
} cv_ops[] = {
    {"attn_causal", op_attn_causal},
    {"attn_swa", op_attn_swa},
    {"delta_rule", op_delta_rule},
    {"gated_delta_rule", op_gated_delta_rule},
    {"gla", op_gla},
    {"linear_attn", op_linear_attn},
    {"mamba2_ssd", op_mamba2_ssd},
    {"mesa_exact", op_mesa_exact},
    {"mesa_cg", op_mesa_cg},
    {"mesa_decode", op_mesa_decode},
    {"mlstm", op_mlstm},
    {"mlstm_custbw", op_mlstm_custbw},
    {"mlstm_recurrent", op_mlstm_recurrent},
    {"rglru", op_rglru},
    {"simple_gla", op_simple_gla},
    {"slstm", op_slstm},
};

/* ------------------------------------------------------------------------------------------- */
/* driver                                                                                        */

/* A line of output being built; the verdict word is chosen after the comparisons. */
typedef struct {
    char s[2048];
    size_t len;
} cv_line;

static void cv_put(cv_line* l, const char* fmt, ...)
{
    va_list ap;
    int w;
    if (l->len + 1 >= sizeof(l->s)) return;
    va_start(ap, fmt);
    w = vsnprintf(l->s + l->len, sizeof(l->s) - l->len, fmt, ap);
    va_end(ap);
    if (w > 0) l->len += (size_t)w < sizeof(l->s) - l->len ? (size_t)w : sizeof(l->s) - l->len - 1;
}

/* max|a-b| / max|b|, or max|a-b| when max|b| == 0; NaN if either side holds a NaN. */
static double cv_rel_err(const double* a, const double* b, size_t n)
{
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (isnan(a[i]) || isnan(b[i])) return NAN;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

static int cv_starts(const char* s, const char* prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Runs one parsed file through its op and compares. Returns 1 on pass, 0 on fail; the text after
   "<op> <file>" goes into l. */
static int cv_check_file(const mn_vec_file* f, double tol, int verbose, cv_line* l)
{
    cv_ctx* c;
    const char* prec = mn_vec_attr(f, "precision");
    cv_op_fn fn = NULL;
    size_t i, j, n_cmp = 0;
    int ok = 1, stop = 0; /* stop: nothing sensible left to compare */

    /* the tolerances assume float64 references; a float32 file (README 2) needs a looser check */
    if (prec == NULL || strcmp(prec, "float64") != 0) {
        cv_put(l, " attr 'precision' is %s%s%s, expected float64", prec ? "'" : "", prec ? prec : "missing",
               prec ? "'" : "");
        return 0;
    }
    /* a linear scan is plenty for a table of a few dozen rows */
    for (i = 0; i < sizeof(cv_ops) / sizeof(cv_ops[0]); i++)
        if (strcmp(cv_ops[i].op, f->op) == 0) fn = cv_ops[i].fn;
    if (fn == NULL) {
        cv_put(l, " not implemented yet: op '%s' has no entry in the dispatch table", f->op);
        return 0;
    }

    c = (cv_ctx*)calloc(1, sizeof(cv_ctx)); /* ~9 KB: keep it off the stack */
    if (c == NULL) {
        cv_put(l, " out of memory");
        return 0;
    }
    c->f = f;
    if (fn(c) != 0) {
        cv_put(l, " %s", c->msg[0] ? c->msg : "op failed without a message");
        ok = 0;
        stop = 1;
    }

    /* every out.* / grad.* tensor in the file needs at least one result of the same size; all of
       them are reported even after one fails, so a FAIL line shows the whole picture */
    for (i = 0; !stop && i < f->n_tensor; i++) {
        const mn_vec_tensor* t = &f->tensor[i];
        double worst = 0;
        size_t n_forms = 0;
        int bad = 0;
        if (!cv_starts(t->name, "out.") && !cv_starts(t->name, "grad.")) continue;
        for (j = 0; j < c->n_res; j++) {
            double e;
            if (strcmp(c->res[j].name, t->name) != 0) continue;
            if (c->res[j].n != t->n) {
                cv_put(l, " %s: %s form computed %lu values, the file has %lu", t->name, c->res[j].form,
                       (unsigned long)c->res[j].n, (unsigned long)t->n);
                bad = 1;
                break;
            }
            /* b is always the file's value: the reference defines the scale of the error */
            e = cv_rel_err(c->res[j].data, t->data, t->n);
            /* NaN must win the max, and never compares greater */
            if (isnan(e) || isnan(worst)) worst = NAN;
            else if (e > worst) worst = e;
            n_forms++;
        }
        if (bad) {
            ok = 0;
            stop = 1;
            break;
        }
        if (n_forms == 0) {
            cv_put(l, " %s not computed by the op", t->name);
            ok = 0;
            continue;
        }
        n_cmp++;
        cv_put(l, " %s %.1e%s", t->name, worst, worst <= tol ? "" : "(>tol)");
        if (!(worst <= tol)) ok = 0; /* written this way so NaN fails */
        if (verbose) {
            const char* sep = " [";
            for (j = 0; j < c->n_res; j++) {
                if (strcmp(c->res[j].name, t->name) != 0) continue;
                cv_put(l, "%s%s %.1e", sep, c->res[j].form, cv_rel_err(c->res[j].data, t->data, t->n));
                sep = " ";
            }
            cv_put(l, "]");
        }
    }
    /* a result without a file tensor means the op and the file disagree about what exists */
    for (j = 0; !stop && j < c->n_res; j++) {
        if (mn_vec_get(f, c->res[j].name) == NULL) {
            cv_put(l, " the op computed %s but the file has no such tensor", c->res[j].name);
            ok = 0;
        }
    }
    if (!stop && n_cmp == 0) {
        cv_put(l, " the file has no out.* or grad.* tensor to compare");
        ok = 0;
    }

    for (i = 0; i < c->n_allocs; i++) free(c->allocs[i]);
    free(c);
    return ok;
}

static int cv_cmp_str(const void* a, const void* b)
{
    return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static int cv_ends(const char* s, const char* suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static char* cv_strdup(const char* s, size_t n)
{
    char* p = (char*)malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static void cv_usage(FILE* out)
{
    fprintf(out,
            "usage: check_vectors [--tol X] [--xfail a.vec,b.vec,...] [-v] [DIR]\n"
            "  runs every DIR/*.vec (default DIR reference/vectors) through mesanet.h and compares\n"
            "  --tol X     pass when max|a-b|/max|b| <= X for every out.* and grad.* (default 1e-8)\n"
            "  --xfail L   comma-separated file names expected to fail (may be repeated)\n"
            "  -v          also print the figure of each form of an op\n");
}

int main(int argc, char** argv)
{
    const char* dir = "reference/vectors";
    double tol = 1e-8;
    int verbose = 0;
    char** xf = NULL;  /* --xfail names */
    int* xf_used = NULL;
    size_t n_xf = 0, cap_xf = 0;
    char** names = NULL;
    size_t n_names = 0, cap_names = 0, i, k;
    size_t n_pass = 0, n_fail = 0, n_xfail = 0;
    DIR* d;
    struct dirent* de;
    int ai;

    for (ai = 1; ai < argc; ai++) {
        const char* a = argv[ai];
        const char* val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cv_usage(stdout);
            return 0;
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (strcmp(a, "--tol") == 0 || cv_starts(a, "--tol=")) {
            char* end = NULL;
            val = a[5] == '=' ? a + 6 : (ai + 1 < argc ? argv[++ai] : NULL);
            if (val != NULL) tol = strtod(val, &end);
            if (val == NULL || end == val || *end != '\0' || !(tol > 0) || !isfinite(tol)) {
                fprintf(stderr, "check_vectors: --tol needs a positive number\n");
                return 2;
            }
        } else if (strcmp(a, "--xfail") == 0 || cv_starts(a, "--xfail=")) {
            const char* p;
            val = a[7] == '=' ? a + 8 : (ai + 1 < argc ? argv[++ai] : NULL);
            if (val == NULL) {
                fprintf(stderr, "check_vectors: --xfail needs a comma-separated list of file names\n");
                return 2;
            }
            /* split at commas; empty items (",," or a trailing comma) are skipped */
            for (p = val; *p != '\0';) {
                size_t n = strcspn(p, ",");
                if (n > 0) {
                    if (n_xf == cap_xf) {
                        cap_xf = cap_xf ? 2 * cap_xf : 16;
                        xf = (char**)realloc(xf, cap_xf * sizeof(*xf));
                        xf_used = (int*)realloc(xf_used, cap_xf * sizeof(*xf_used));
                        if (xf == NULL || xf_used == NULL) return 2;
                    }
                    xf_used[n_xf] = 0;
                    if ((xf[n_xf++] = cv_strdup(p, n)) == NULL) return 2;
                }
                p += n;
                if (*p == ',') p++;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "check_vectors: unknown option '%s'\n", a);
            cv_usage(stderr);
            return 2;
        } else {
            dir = a;
        }
    }

    /* collect and sort the names: readdir order is arbitrary and the output should be stable */
    d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "check_vectors: cannot open directory '%s'\n", dir);
        return 2;
    }
    while ((de = readdir(d)) != NULL) {
        /* hidden files (editor backups like .x.vec.swp, ._x.vec) are not vectors */
        if (!cv_ends(de->d_name, ".vec") || de->d_name[0] == '.') continue;
        if (n_names == cap_names) {
            cap_names = cap_names ? 2 * cap_names : 64;
            names = (char**)realloc(names, cap_names * sizeof(*names));
            if (names == NULL) return 2;
        }
        if ((names[n_names++] = cv_strdup(de->d_name, strlen(de->d_name))) == NULL) return 2;
    }
    closedir(d);
    if (n_names > 0) qsort(names, n_names, sizeof(*names), cv_cmp_str);

    for (i = 0; i < n_names; i++) {
        static mn_vec_file f; /* ~17 KB; static keeps main's frame small */
        char err[512];
        char* path = (char*)malloc(strlen(dir) + strlen(names[i]) + 2);
        cv_line l;
        const char* op = "?";
        int pass, is_xf = 0;
        if (path == NULL) return 2;
        sprintf(path, "%s/%s", dir, names[i]);
        l.len = 0;
        l.s[0] = '\0';
        if (mn_vec_load(&f, path, err, sizeof(err)) != 0) {
            cv_put(&l, " parse error: %s", err);
            pass = 0;
        } else {
            op = f.op;
            pass = cv_check_file(&f, tol, verbose, &l);
        }
        /* mark the xfail entry as used even when the file passes, so XPASS and "no such file"
           stay distinct */
        for (k = 0; k < n_xf; k++) {
            if (strcmp(xf[k], names[i]) == 0) {
                xf_used[k] = 1;
                is_xf = 1;
            }
        }
        /* the four verdicts; only PASS and XFAIL leave the exit status alone */
        if (pass && !is_xf) {
            printf("PASS %s %s%s\n", op, names[i], l.s);
            n_pass++;
        } else if (pass) {
            printf("XPASS %s %s%s (remove it from the xfail list)\n", op, names[i], l.s);
            n_fail++;
        } else if (is_xf) {
            printf("XFAIL %s %s%s\n", op, names[i], l.s);
            n_xfail++;
        } else {
            printf("FAIL %s %s%s\n", op, names[i], l.s);
            n_fail++;
        }
        fflush(stdout);
        mn_vec_free(&f);
        free(path);
    }
    /* a stale or misspelt xfail entry would silently hide nothing; make it loud */
    for (k = 0; k < n_xf; k++) {
        if (!xf_used[k]) {
            printf("FAIL - %s is in the --xfail list but there is no such file in %s\n", xf[k], dir);
            n_fail++;
        }
    }
    if (n_names == 0) fprintf(stderr, "check_vectors: no .vec files in '%s'\n", dir);
    printf("%lu passed, %lu failed, %lu xfail\n", (unsigned long)n_pass, (unsigned long)n_fail,
           (unsigned long)n_xfail);

    for (i = 0; i < n_names; i++) free(names[i]);
    for (k = 0; k < n_xf; k++) free(xf[k]);
    free(names);
    free(xf);
    free(xf_used);
    /* an empty directory is treated as a failure: a checker that checked nothing must not pass */
    return (n_fail > 0 || n_names == 0) ? 1 : 0;
}
