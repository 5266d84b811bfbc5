// lm_eval: a trained byte-level language model on held-out text (results/lm.md's measurements).
//
//   ./build/lm_eval --ckpt runs/lm/code/mesanet --val data/lm/code/val.txt --out results/lm/code/mesanet
//   ./build/lm_eval --ckpt DIR --val FILE --out DIR --seq 2048 --seqs 64 --skip recall,cg
//
// Measures, on --seqs windows of --seq + 1 bytes spread evenly over the validation file (no two overlap):
//   bits per byte       the mean NLL of every predicted byte of the windows / ln 2 (mn_forward, the parallel form)
//   NLL by position     position p = 1..T is the number of bytes the model has read when it predicts the next;
//                       the mean over the windows, with its count (position.csv); each window's mean NLL
//                       (windows.csv), from which lm_report takes the standard errors
//   in-context recall   for each distance d: --recall_seqs sequences of normal validation text with a random string
//                       R of --recall_len L printable ASCII bytes (33..126) inserted twice, the second copy
//                       starting d bytes after the first:  text[P] R text[d - L] R  (P = --recall_prefix), length
//                       P + d + L <= the model's max_seq_len. The bytes R[1..L-1] of each copy are scored (R[0]
//                       cannot be foreseen): mean NLL of the second copy and of the first (which no recall helps),
//                       greedy (argmax) accuracy per byte, and the share of sequences whose L-1 bytes are all right
//                       (recall.csv). Default distances: 64, 128, ... up to the longest that fits, then that one.
//   test-time compute   Mesa models only: the first --cg_seqs windows decoded token by token with mn_step, once per
//                       decoding setting: the paper's dynamic stop at relative residual 1e-2 .. 1e-5 (--cg_tols, at
//                       most --cg_max steps) and fixed counts (--cg_counts: 0, 1, 5, 10, 20, 30). Count 0 is no
//                       solve at all, x = q (mesa_cg_decode < 0: the read-out of gated linear attention), since CG
//                       from x0 = 0 with no step would read out nothing. Mean CG steps per token, head and Mesa
//                       layer, and the mean NLL (cg.csv), and both by position (cg_position.csv); cg.csv's first row
//                       is the parallel forward on the same windows (its training CG count), for comparison.
//                       --cg_starts 0,1,5,6: the tolerance rows once per CG start (cfg.mesa_cg_warm: 0 x0 = 0, 1
//                       Jacobi, 2-4 warm, 5 / 6 the last 8 / 16 tokens' Woodbury solve), labelled "tol E start S"
//                       for a start other than the first; the fixed counts run with the first start.
// Every window is scored in double from the logits (the logit soft-cap applied as in training), and
// summary.csv holds the mean of mn_forward's own losses beside that mean: they agree to float rounding.
// The forward runs one window per thread (OpenMP, a copy of the model each: --threads, default all cores).
// Outputs are written as NAME.tmp and renamed when everything succeeded; a bad input changes nothing.
//
// The GPU build (build/lm_eval_cuda: this file compiled with -DLM_EVAL_CUDA, `make build/lm_eval_cuda`) runs the
// parallel forwards (bits per byte, NLL by position, the recall probe, the CG table's first row) through the GPU
// model mn_cuda_model in fp32 (cuBLAS fp32 products; the Mesa layer's states fp32-accurate, its CG products fp16
// as in training), up to LM_GPU_BATCH windows of one length per call, and scores the logits here in double as
// above; the token-by-token decoding of the CG trade-off runs on the GPU too (mn_cuda_model_step, the --cg_seqs
// windows in lockstep, fp32, the CG statistics from mn_cuda_model_state_cg_stats; a setting the GPU step
// refuses falls back to mn_step on the CPU: none since it runs every cfg.mesa_cg_warm; the fallback stays). A
// forward on the CPU takes minutes per model at T = 2048 (attention's T^2 in plain C), on the GPU seconds; a
// decode step 15-50 ms on the CPU, ~1.5 ms here.
//
// Exit status: 0 done; 1 the checkpoint, the validation file or an output failed; 2 a bad command line (also
// sizes that do not fit the model or the text).
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef LM_EVAL_CUDA
#include "cuda/mesanet_cuda.h"
#define LM_GPU_BATCH 16
static mn_cuda_ctx lm__ctx;      // the GPU build's device context and model (one per process)
static mn_cuda_model lm__gm;
#endif

enum { RC_OK = 0, RC_IO = 1, RC_USAGE = 2 };
#define LM_MAX_LIST 32

typedef struct {
    const char *ckpt, *val, *out, *name, *skip, *dump_probe;
    size_t seq, seqs, recall_seqs, recall_len, recall_prefix, cg_seqs, cg_len, threads;
    size_t distances[LM_MAX_LIST], n_dist;
    double cg_tols[LM_MAX_LIST]; size_t n_tols;
    int cg_counts[LM_MAX_LIST]; size_t n_counts;
    int cg_starts[LM_MAX_LIST]; size_t n_starts;   // --cg_starts: cfg.mesa_cg_warm values (default: the model's)
    int cg_max;
    int graph;                                      // --graph 1: the GPU build decodes through a CUDA graph
    uint64_t seed;
    int do_bpb, do_recall, do_cg, cg_seqs_given;
} lm_opts;

static void usage(FILE* f) {
    fprintf(f, "usage: lm_eval --ckpt DIR --val FILE --out DIR [--name NAME] [--seq T (2048)] [--seqs N (64)]\n"
               "               [--recall_seqs N (32)] [--recall_len L (32)] [--recall_prefix P (64)]\n"
               "               [--distances 64,128,... (default: powers of two that fit, and the longest)]\n"
               "               [--cg_seqs N (8, at most --seqs)] [--cg_len T (--seq)] [--cg_tols 1e-2,1e-3,1e-4,1e-5]\n"
               "               [--cg_counts 0,1,5,10,20,30] [--cg_max N (30)] [--cg_starts 0,1,5 (the model's)]\n"
               "               [--skip bpb,recall,cg]\n"
               "               [--threads N (all)] [--seed N (1)] [--dump_probe FILE]\n"
               "               [--graph 0|1 (0; lm_eval_cuda: 1 decodes through a CUDA graph, the same logits)]\n"
               "exit status: 0 done, 1 input/output failed, 2 bad command line or sizes\n");
}

// Comma-separated lists: whole numbers in [lo, hi] or finite numbers in (0, 1). Return 0, or -1 with a message.
static int parse_sizes(const char* name, const char* v, size_t lo, size_t hi, size_t* out, size_t* n) {
    char buf[512], *tok, *save = NULL;
    if (strlen(v) >= sizeof buf) { fprintf(stderr, "lm_eval: %s: list too long\n", name); return -1; }
    strcpy(buf, v); *n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t x;
        if (*n == LM_MAX_LIST) { fprintf(stderr, "lm_eval: %s: at most %d values\n", name, LM_MAX_LIST); return -1; }
        if (ex_parse_size(name, tok, &x)) return -1;
        if (x < lo || x > hi) { fprintf(stderr, "lm_eval: %s: %zu outside [%zu, %zu]\n", name, x, lo, hi); return -1; }
        out[(*n)++] = x;
    }
    if (*n == 0) { fprintf(stderr, "lm_eval: %s: an empty list\n", name); return -1; }
    return 0;
}
static int parse_tols(const char* name, const char* v, double* out, size_t* n) {
    char buf[512], *tok, *save = NULL;
    if (strlen(v) >= sizeof buf) { fprintf(stderr, "lm_eval: %s: list too long\n", name); return -1; }
    strcpy(buf, v); *n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double x;
        if (*n == LM_MAX_LIST) { fprintf(stderr, "lm_eval: %s: at most %d values\n", name, LM_MAX_LIST); return -1; }
        if (ex_parse_double(name, tok, &x)) return -1;
        if (!(x > 0 && x < 1)) { fprintf(stderr, "lm_eval: %s: %g outside (0, 1)\n", name, x); return -1; }
        out[(*n)++] = x;
    }
    if (*n == 0) { fprintf(stderr, "lm_eval: %s: an empty list\n", name); return -1; }
    return 0;
}

static int parse(lm_opts* o, int argc, char** argv) {
    int i;
    size_t tmp[LM_MAX_LIST], k;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
        if (!v) { fprintf(stderr, "lm_eval: unknown option or missing value: %s\n", a); usage(stderr); return -1; }
        EX_OPT_S("--ckpt", ckpt) EX_OPT_S("--val", val) EX_OPT_S("--out", out) EX_OPT_S("--name", name)
        EX_OPT_S("--skip", skip) EX_OPT_S("--dump_probe", dump_probe)
        EX_OPT_U("--seq", seq) EX_OPT_U("--seqs", seqs) EX_OPT_U("--recall_seqs", recall_seqs)
        EX_OPT_U("--recall_len", recall_len) EX_OPT_U("--recall_prefix", recall_prefix)
        if (!strcmp(a, "--cg_seqs")) o->cg_seqs_given = 1;
        EX_OPT_U("--cg_seqs", cg_seqs) EX_OPT_U("--cg_len", cg_len) EX_OPT_U("--threads", threads)
        if (!strcmp(a, "--seed")) { if (ex_parse_u64(a, v, UINT64_MAX, &o->seed)) return -1; i++; continue; }
        if (!strcmp(a, "--cg_max")) { if (ex_parse_int(a, v, 1, 1000, &o->cg_max)) return -1; i++; continue; }
        if (!strcmp(a, "--graph")) { if (ex_parse_int(a, v, 0, 1, &o->graph)) return -1; i++; continue; }
        if (!strcmp(a, "--distances")) {
            if (parse_sizes(a, v, 1, (size_t)1 << 24, o->distances, &o->n_dist)) return -1;
            i++; continue;
        }
        if (!strcmp(a, "--cg_tols")) { if (parse_tols(a, v, o->cg_tols, &o->n_tols)) return -1; i++; continue; }
        if (!strcmp(a, "--cg_starts")) {   // cfg.mesa_cg_warm values 0..6
            if (parse_sizes(a, v, 0, 6, tmp, &o->n_starts)) return -1;
            for (k = 0; k < o->n_starts; k++) o->cg_starts[k] = (int)tmp[k];
            i++; continue;
        }
        if (!strcmp(a, "--cg_counts")) {
            if (parse_sizes(a, v, 0, 1000, tmp, &o->n_counts)) return -1;
            for (k = 0; k < o->n_counts; k++) o->cg_counts[k] = (int)tmp[k];
            i++; continue;
        }
        fprintf(stderr, "lm_eval: unknown option %s\n", a); usage(stderr); return -1;
    }
    if (!o->ckpt || !o->val || !o->out) { fprintf(stderr, "lm_eval: --ckpt, --val and --out are needed\n"); return -1; }
    if (o->skip) {   // names from {bpb, recall, cg}, comma-separated
        char buf[128], *tok, *save = NULL;
        if (strlen(o->skip) >= sizeof buf) { fprintf(stderr, "lm_eval: --skip: too long\n"); return -1; }
        strcpy(buf, o->skip);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (!strcmp(tok, "bpb")) o->do_bpb = 0;
            else if (!strcmp(tok, "recall")) o->do_recall = 0;
            else if (!strcmp(tok, "cg")) o->do_cg = 0;
            else { fprintf(stderr, "lm_eval: --skip: '%s' is not one of bpb, recall, cg\n", tok); return -1; }
        }
    }
#define POSITIVE(f) if (o->f == 0) { fprintf(stderr, "lm_eval: --" #f " must be positive\n"); return -1; }
    POSITIVE(seq) POSITIVE(seqs) POSITIVE(recall_seqs) POSITIVE(recall_len)
    if (o->cg_seqs_given && o->cg_seqs == 0) { fprintf(stderr, "lm_eval: --cg_seqs must be positive\n"); return -1; }
#undef POSITIVE
    if (o->recall_len < 2) {
        fprintf(stderr, "lm_eval: --recall_len must be at least 2 (R[0] is not scored)\n");
        return -1;
    }
#ifndef LM_EVAL_CUDA
    if (o->graph) { fprintf(stderr, "lm_eval: --graph 1 needs the GPU build (lm_eval_cuda)\n"); return -1; }
#endif
    return 0;
}

// ---- scoring: the NLL of the target and whether it is the argmax, from one row of logits ----

// -log softmax(z)[y] in double, with the soft-cap z -> c tanh(z / c) that the training loss applies when c > 0.
static double row_nll(const mn_real* z, size_t V, int y, double cap, int* argmax_ok) {   // z (V)
    double mx = -1e300, s = 0, zy = 0;
    size_t i, best = 0;
    for (i = 0; i < V; i++) {
        double zi = cap > 0 ? cap * tanh((double)z[i] / cap) : (double)z[i];
        if (zi > mx) { mx = zi; best = i; }
    }
    for (i = 0; i < V; i++) {
        double zi = cap > 0 ? cap * tanh((double)z[i] / cap) : (double)z[i];
        s += exp(zi - mx);
        if ((int)i == y) zy = zi;
    }
    if (argmax_ok) *argmax_ok = (int)best == y;
    return mx + log(s) - zy;
}

// A per-thread copy of the model: its own activations, the parameters copied from m0.
static int model_copy(mn_model* dst, const mn_model* m0) {
    int err = mn_model_init(dst, &m0->cfg);
    if (err != MN_OK) return err;
    memcpy(dst->params, m0->params, m0->n_params * sizeof(mn_real));
    return MN_OK;
}

// Runs the forward over n sequences of lengths len[i] (tokens x + i*(stride+1), targets the next byte), one per
// thread with the thread's own model of the pool, and stores each position's NLL and argmax hit: nll (n, stride),
// hit (n, stride); fwd (n) the forward's own mean loss. Returns MN_OK or the first error.
#ifdef LM_EVAL_CUDA
// The same on the GPU: runs of consecutive sequences of one length, LM_GPU_BATCH at a time, through
// mn_cuda_model_forward; fwd gets the batch's mean loss for each of its sequences (so the mean over the
// sequences is the mean of the forward losses, as in the CPU build).
static int forward_all_gpu(const unsigned char* x, const size_t* len, size_t n, size_t stride, double* nll,
                           unsigned char* hit, double* fwd) {   // x (n, stride+1), len (n), nll hit (n, stride)
    size_t V = lm__gm.cfg.vocab_size, i = 0, j, t;
    double cap = lm__gm.cfg.logit_softcap;
    int err = MN_OK;
    int* tok = (int*)malloc(LM_GPU_BATCH * stride * sizeof(int));             // (b, T)
    int* tgt = (int*)malloc(LM_GPU_BATCH * stride * sizeof(int));             // (b, T)
    float* lg = (float*)malloc(LM_GPU_BATCH * stride * V * sizeof(float));    // (b, T, V)
    mn_real* z = (mn_real*)malloc(LM_GPU_BATCH * stride * V * sizeof(mn_real));
    if (!tok || !tgt || !lg || !z) err = MN_ERR_ALLOC;
    while (err == MN_OK && i < n) {
        size_t T = len[i], b = 0;
        float loss = 0;
        long long r;
        while (i + b < n && b < LM_GPU_BATCH && len[i + b] == T) b++;
        for (j = 0; j < b; j++)
            for (t = 0; t < T; t++) {
                const unsigned char* s = x + (i + j) * (stride + 1);
                tok[j * T + t] = s[t]; tgt[j * T + t] = s[t + 1];
            }
        if ((err = mn_cuda_model_forward(&lm__gm, tok, tgt, b, T, &loss)) != MN_OK ||
            (err = mn_cuda_download(&lm__ctx, lg, mn_cuda_model_logits(&lm__gm), b * T * V * sizeof(float))) != MN_OK)
            break;
        for (r = 0; r < (long long)(b * T * V); r++) z[r] = (mn_real)lg[r];
        #pragma omp parallel for schedule(static)
        for (r = 0; r < (long long)(b * T); r++) {
            size_t jj = (size_t)r / T, tt = (size_t)r % T;
            int ok;
            nll[(i + jj) * stride + tt] = row_nll(z + (size_t)r * V, V, tgt[r], cap, &ok);
            hit[(i + jj) * stride + tt] = (unsigned char)ok;
        }
        for (j = 0; j < b; j++) fwd[i + j] = loss;
        i += b;
    }
    if (err != MN_OK && err != MN_ERR_ALLOC) fprintf(stderr, "lm_eval: GPU forward: %s\n", lm__ctx.msg);
    free(tok); free(tgt); free(lg); free(z);
    return err;
}
#endif

static int forward_all(mn_model* pool, const unsigned char* x, const size_t* len, size_t n, size_t stride,
                       double* nll, unsigned char* hit, double* fwd) {   // pool (threads), x (n, stride+1), len (n)
    int err = MN_OK;
#ifdef LM_EVAL_CUDA
    (void)pool;
    return forward_all_gpu(x, len, n, stride, nll, hit, fwd);
#endif
    #pragma omp parallel
    {
        int id = 0, lerr = MN_OK;
        int *tok = (int*)malloc(stride * sizeof(int)), *tgt = (int*)malloc(stride * sizeof(int));
        long long i;
#ifdef _OPENMP
        id = omp_get_thread_num();
#endif
        mn_model* m = pool + id;
        if (!tok || !tgt) lerr = MN_ERR_ALLOC;
        #pragma omp for schedule(dynamic, 1)
        for (i = 0; i < (long long)n; i++) {
            const unsigned char* s = x + (size_t)i * (stride + 1);
            size_t t, T = len[i], V = m->cfg.vocab_size;
            const mn_real* lg;   // (T, V)
            mn_real loss = 0;
            int e;
            if (lerr != MN_OK) continue;
            for (t = 0; t < T; t++) { tok[t] = s[t]; tgt[t] = s[t + 1]; }
            if ((e = mn_forward(m, tok, tgt, 1, T, &loss)) != MN_OK) { lerr = e; continue; }
            fwd[i] = loss;
            lg = mn_logits(m);
            for (t = 0; t < T; t++) {
                int ok;
                nll[(size_t)i * stride + t] = row_nll(lg + t * V, V, tgt[t], m->cfg.logit_softcap, &ok);
                hit[(size_t)i * stride + t] = (unsigned char)ok;
            }
        }
        #pragma omp critical
        if (lerr != MN_OK && err == MN_OK) err = lerr;
        free(tok); free(tgt);
    }
    return err;
}

// ---- the recall probe ----

// One probe sequence x (P + d + L + 1 bytes: the last one is a filler byte so that every position has a target):
//   x = text[off .. off+P) R text[off+P .. off+P+d-L) R text[off+P+d-L]
// with R (L) random printable ASCII from r. Returns the length P + d + L, or 0 when it does not fit.
static size_t probe_build(unsigned char* x, const unsigned char* text, size_t len, size_t off, size_t P, size_t d,
                          size_t L, mn_rng* r) {   // x (P+d+L+1), text (len)
    size_t i, n = P + d + L;
    unsigned char R[4096];
    if (d < L || L > sizeof R || off + P + d - L + 1 > len) return 0;
    for (i = 0; i < L; i++) R[i] = (unsigned char)(33 + mn_rng_u32(r) % 94);
    memcpy(x, text + off, P);
    memcpy(x + P, R, L);
    memcpy(x + P + L, text + off + P, d - L);
    memcpy(x + P + d, R, L);
    x[n] = text[off + P + d - L];
    return n;
}

// ---- writing: NAME.tmp, renamed once every file is complete ----
typedef struct { char path[1200], tmp[1210]; FILE* f; } out_file;
static int out_open(out_file* o, const char* dir, const char* name) {
    snprintf(o->path, sizeof o->path, "%s/%s", dir, name);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->path);
    if (!(o->f = fopen(o->tmp, "w"))) {
        fprintf(stderr, "lm_eval: cannot write %s: %s\n", o->tmp, strerror(errno));
        return -1;
    }
    return 0;
}
static int out_close(out_file* o) {
    int bad = ferror(o->f);
    if (fclose(o->f) != 0 || bad) {
        fprintf(stderr, "lm_eval: cannot write %s: %s\n", o->tmp, strerror(errno));
        return -1;
    }
    o->f = NULL;
    return 0;
}

typedef struct { double nll, steps; } cg_acc;   // sums per position

// One decoded position t of both decoding passes: the mean NLL over the n sequences of the step's logits lg (n, V)
// against x's next bytes, and the CG steps per solve of this step from the cumulative counts it, so (whose previous
// values *it_prev, *so_prev it advances).
static void decode_score(cg_acc* a, const mn_real* lg, const unsigned char* x, size_t n, size_t stride, size_t t,
                         size_t V, double cap, double it, double so, double* it_prev, double* so_prev) {
    double nll = 0;
    size_t i;
    for (i = 0; i < n; i++) nll += row_nll(lg + i * V, V, x[i * (stride + 1) + t + 1], cap, NULL);
    a->nll = nll / (double)n;
    a->steps = so > *so_prev ? (it - *it_prev) / (so - *so_prev) : 0.0;
    *it_prev = it; *so_prev = so;
}

// The decoding pass of one setting: n sequences of T tokens (windows x) in lockstep through mn_step; per position
// the summed NLL and CG steps (over the sequences; steps also over Mesa layers and heads, divided by the solves).
static int decode_pass(mn_model* m, const unsigned char* x, size_t n, size_t stride, size_t T, cg_acc* acc,
                       double* mean_steps) {   // x (n, stride+1), acc (T)
    mn_state st;
    size_t V = m->cfg.vocab_size, i, t;
    int err, *tok = (int*)malloc(n * sizeof(int));
    mn_real* lg = (mn_real*)malloc(n * V * sizeof(mn_real));   // (n, V)
    double it_prev = 0, so_prev = 0;
    if (!tok || !lg) { free(tok); free(lg); return MN_ERR_ALLOC; }
    if ((err = mn_state_init(&st, m, n)) != MN_OK) { free(tok); free(lg); return err; }
    for (t = 0; t < T && err == MN_OK; t++) {
        double so, it;
        for (i = 0; i < n; i++) tok[i] = x[i * (stride + 1) + t];
        if ((err = mn_step(m, &st, tok, lg)) != MN_OK) break;
        it = mn_state_cg_stats(m, &st, &so) * so;   // cumulative iterations and solves since the reset
        decode_score(&acc[t], lg, x, n, stride, t, V, m->cfg.logit_softcap, it, so, &it_prev, &so_prev);
    }
    *mean_steps = so_prev > 0 ? it_prev / so_prev : 0.0;
    mn_state_free(&st); free(tok); free(lg);
    return err;
}

#ifdef LM_EVAL_CUDA
static int lm__graph;   // --graph: mn_cuda_model_state.graph for the GPU decode passes
// decode_pass on the GPU: the n windows in lockstep through mn_cuda_model_step (B = n sequences), the setting
// read from lm__gm.cfg at every step (the caller sets mesa_cg_decode and mesa_cg_tol there as in m0.cfg); the
// same per-position sums, the CG steps from mn_cuda_model_state_cg_stats (cumulative iterations and systems
// since the init, all Mesa layers, sequences and heads: mn_state_cg_stats's definitions) differenced per
// position. MN_ERR_CONFIG when the GPU step refuses the setting: the caller decodes on the CPU instead.
static int decode_pass_gpu(const unsigned char* x, size_t n, size_t stride, size_t T, cg_acc* acc,
                           double* mean_steps) {   // x (n, stride+1), acc (T)
    mn_cuda_model_state st;
    size_t V = lm__gm.cfg.vocab_size, i, t;
    double cap = lm__gm.cfg.logit_softcap, it_prev = 0, so_prev = 0;
    int err, *tok = (int*)malloc(n * sizeof(int));              // (n)
    float* lf = (float*)malloc(n * V * sizeof(float));          // (n, V) the step's logits
    mn_real* lg = (mn_real*)malloc(n * V * sizeof(mn_real));    // (n, V) the same as mn_real for row_nll
    if (!tok || !lf || !lg) { free(tok); free(lf); free(lg); return MN_ERR_ALLOC; }
    if ((err = mn_cuda_model_state_init(&st, &lm__gm, n)) != MN_OK) { free(tok); free(lf); free(lg); return err; }
    st.graph = lm__graph;
    for (t = 0; t < T && err == MN_OK; t++) {
        double so, it;
        for (i = 0; i < n; i++) tok[i] = x[i * (stride + 1) + t];
        if ((err = mn_cuda_model_step(&lm__gm, &st, tok, lf)) != MN_OK ||
            (err = mn_cuda_model_state_cg_stats(&lm__gm, &st, &it, &so)) != MN_OK)
            break;
        for (i = 0; i < n * V; i++) lg[i] = (mn_real)lf[i];
        decode_score(&acc[t], lg, x, n, stride, t, V, cap, it, so, &it_prev, &so_prev);
    }
    *mean_steps = so_prev > 0 ? it_prev / so_prev : 0.0;
    if (err != MN_OK && !(err == MN_ERR_CONFIG && t == 0))
        fprintf(stderr, "lm_eval: GPU decoding at position %zu: %s\n", t, lm__ctx.msg);
    mn_cuda_model_state_free(&st); free(tok); free(lf); free(lg);
    return err;
}
#endif

int lm_eval_main(int argc, char** argv) {
    lm_opts o; memset(&o, 0, sizeof o);
    o.seq = 2048; o.seqs = 64; o.recall_seqs = 32; o.recall_len = 32; o.recall_prefix = 64;
    o.cg_max = 30; o.seed = 1; o.do_bpb = o.do_recall = o.do_cg = 1;
    o.n_tols = 4; o.cg_tols[0] = 1e-2; o.cg_tols[1] = 1e-3; o.cg_tols[2] = 1e-4; o.cg_tols[3] = 1e-5;
    {
        static const int counts[] = { 0, 1, 5, 10, 20, 30 };
        size_t k;
        o.n_counts = 6;
        for (k = 0; k < 6; k++) o.cg_counts[k] = counts[k];
    }
    if (parse(&o, argc, argv) != 0) return RC_USAGE;
    if (!o.cg_len) o.cg_len = o.seq;
    if (!o.name) {   // the checkpoint folder's last component
        const char* s = o.ckpt + strlen(o.ckpt);
        while (s > o.ckpt && s[-1] == '/') s--;
        while (s > o.ckpt && s[-1] != '/') s--;
        o.name = s;
    }
#ifdef _OPENMP
    if (o.threads) omp_set_num_threads((int)o.threads);
#endif
#if defined(MN_USE_BLAS) && defined(_OPENMP)
    openblas_set_num_threads(1);   // our threads run the windows; BLAS stays inside each (as mn_gemm arranges)
#endif

    // ---- inputs, all checked before anything is written ----
    mn_model m0; mn_train_meta meta; memset(&meta, 0, sizeof meta);
    int err, rc = RC_OK, is_mesa;
    double t0 = ex_now();
    // the training step comes from optimizer.safetensors when the folder has one; a weights-only checkpoint
    // (mn_save without meta, an fla export) is evaluated as well, its step printed as 0
    char opt_path[4096]; struct stat st;
    snprintf(opt_path, sizeof opt_path, "%s/optimizer.safetensors", o.ckpt);
    int has_opt = stat(opt_path, &st) == 0;
    if ((err = mn_load(&m0, o.ckpt, has_opt ? &meta : NULL)) != MN_OK) {
        fprintf(stderr, "lm_eval: cannot load the checkpoint %s: %s\n", o.ckpt, mn_strerror(err));
        return RC_IO;
    }
    is_mesa = strstr(m0.cfg.pattern, "mesa") != NULL;
    unsigned char* text = NULL; size_t len = 0, Tmax = m0.cfg.max_seq_len, k;
    if (stat(o.val, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "lm_eval: --val %s: not a readable file\n", o.val);
        mn_model_free(&m0); return RC_IO;
    }
    if (ex_read_text(o.val, &text, &len) != 0) { mn_model_free(&m0); free(text); return RC_IO; }
    const size_t P = o.recall_prefix, L = o.recall_len, dmax = Tmax > P + L ? Tmax - P - L : 0;
    if (o.n_dist == 0) {   // default: 64, 128, ... that fit, then the longest that fits
        size_t d;
        for (d = 64; d <= dmax && o.n_dist < LM_MAX_LIST - 1; d *= 2) o.distances[o.n_dist++] = d;
        if (dmax >= L && (o.n_dist == 0 || o.distances[o.n_dist - 1] != dmax)) o.distances[o.n_dist++] = dmax;
    }
#define USAGE_ERR(...) \
    do { fprintf(stderr, "lm_eval: " __VA_ARGS__); mn_model_free(&m0); free(text); return RC_USAGE; } while (0)
    if (o.seq > Tmax) USAGE_ERR("--seq %zu exceeds the model's max_seq_len %zu\n", o.seq, Tmax);
    if (!o.cg_seqs_given) o.cg_seqs = o.seqs < 8 ? o.seqs : 8;
    if (o.do_cg && is_mesa && o.cg_len > o.seq)   // the decoded windows are the first --cg_seqs of the --seq windows
        USAGE_ERR("--cg_len %zu exceeds --seq %zu\n", o.cg_len, o.seq);
    if (o.do_cg && is_mesa && o.cg_seqs > o.seqs) USAGE_ERR("--cg_seqs %zu exceeds --seqs %zu\n", o.cg_seqs, o.seqs);
    if (len / o.seqs < o.seq + 1)
        USAGE_ERR(
            "%s has %zu bytes: %zu non-overlapping windows of --seq + 1 = %zu bytes need %zu; use fewer --seqs or a "
            "shorter --seq\n",
            o.val, len, o.seqs, o.seq + 1, o.seqs * (o.seq + 1));
    if (o.do_recall) {
        if (o.n_dist == 0)
            USAGE_ERR("no recall distance fits: max_seq_len %zu < --recall_prefix %zu + 2 x --recall_len %zu\n", Tmax,
                      P, L);
        if (L > 4096) USAGE_ERR("--recall_len %zu: at most 4096\n", L);
        for (k = 0; k < o.n_dist; k++) {
            size_t d = o.distances[k];
            if (d < L) USAGE_ERR("distance %zu is shorter than --recall_len %zu (the copies would overlap)\n", d, L);
            if (P + d + L > Tmax)
                USAGE_ERR("distance %zu: the probe's %zu + %zu + %zu bytes exceed the model's max_seq_len %zu (longest "
                          "distance: %zu)\n", d, P, d, L, Tmax, dmax);
            if (P + d + 1 > len / o.recall_seqs)
                USAGE_ERR("distance %zu: %s is too short for %zu probes of %zu bytes of text\n", d, o.val,
                          o.recall_seqs, P + d + 1);
        }
    }
#undef USAGE_ERR
    if (ex_mkdirs(o.out) != 0) {
        fprintf(stderr, "lm_eval: cannot create %s: %s\n", o.out, strerror(errno));
        mn_model_free(&m0); free(text); return RC_IO;
    }
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    printf("lm_eval: %s: pattern %s, %zu parameters, step %llu | %s: %zu bytes | %d threads\n", o.name, m0.cfg.pattern,
           m0.n_trainable, (unsigned long long)meta.step, o.val, len, nthreads);
    fflush(stdout);

    int n_copies = nthreads;
#ifdef LM_EVAL_CUDA
    {   // the forwards run on the GPU: the same checkpoint into mn_cuda_model, fp32 products; no CPU copies
        mn_train_meta gmeta;
        n_copies = 0;
        if (mn_cuda_init(&lm__ctx, 0) != MN_OK) {
            fprintf(stderr, "lm_eval: no usable CUDA device: %s\n", lm__ctx.msg); mn_model_free(&m0); free(text);
            return RC_IO;
        }
        lm__ctx.math = MN_CUDA_MATH_FP32;
        lm__graph = o.graph;
        if (mn_cuda_model_load(&lm__gm, &lm__ctx, o.ckpt, has_opt ? &gmeta : NULL) != MN_OK ||
            mn_cuda_model_reserve(&lm__gm, LM_GPU_BATCH, Tmax) != MN_OK) {
            fprintf(stderr, "lm_eval: the GPU model: %s\n", lm__ctx.msg);
            mn_cuda_free(&lm__ctx); mn_model_free(&m0); free(text); return RC_IO;
        }
        printf("lm_eval: forwards on the GPU (mn_cuda_model, fp32 products, batches of %d), decoding too "
               "(mn_cuda_model_step)\n", LM_GPU_BATCH);
    }
#endif
    // one copy of the model per thread (its own activations); m0 itself decodes
    mn_model* pool = (mn_model*)calloc((size_t)nthreads, sizeof(mn_model));
    int n_pool = 0;
    if (!pool) { fprintf(stderr, "lm_eval: out of memory\n"); mn_model_free(&m0); free(text); return RC_IO; }
    for (n_pool = 0; n_pool < n_copies; n_pool++)
        if ((err = model_copy(&pool[n_pool], &m0)) != MN_OK) {
            fprintf(stderr, "lm_eval: cannot copy the model for thread %d: %s\n", n_pool, mn_strerror(err));
            for (k = 0; k < (size_t)n_pool; k++) mn_model_free(&pool[k]);
            free(pool); mn_model_free(&m0); free(text); return RC_IO;
        }
    // ---- the windows: seqs of T+1 bytes, window i at i * (len / seqs) ----
    size_t T = o.seq, N = o.seqs, i, t, stride = T, gap = len / N;
    unsigned char* win = (unsigned char*)malloc(N * (T + 1));           // (N, T+1)
    size_t* wlen = (size_t*)malloc(N * sizeof(size_t));                 // (N)
    double* nll = (double*)malloc(N * T * sizeof(double));              // (N, T)
    unsigned char* hit = (unsigned char*)malloc(N * T);                 // (N, T)
    double* fwd = (double*)calloc(N, sizeof(double));                   // (N)
    out_file fs, fp, fr, fc, fq, fw;
    int open_r = 0, open_c = 0;
    memset(&fs, 0, sizeof fs); memset(&fp, 0, sizeof fp); memset(&fr, 0, sizeof fr); memset(&fc, 0, sizeof fc);
    memset(&fq, 0, sizeof fq); memset(&fw, 0, sizeof fw);
    if (!win || !wlen || !nll || !hit || !fwd) { fprintf(stderr, "lm_eval: out of memory\n"); rc = RC_IO; goto done; }
    for (i = 0; i < N; i++) { memcpy(win + i * (T + 1), text + i * gap, T + 1); wlen[i] = T; }
    if (out_open(&fs, o.out, "summary.csv")) { rc = RC_IO; goto done; }
    fprintf(fs.f, "model,pattern,params,step,seq,seqs,tokens,nll,bpb,forward_loss,seconds\n");

    if (o.do_bpb || (o.do_cg && is_mesa)) {
        double ts = ex_now(), sum = 0, fsum = 0;
        if ((err = forward_all(pool, win, wlen, N, stride, nll, hit, fwd)) != MN_OK) {
            fprintf(stderr, "lm_eval: forward failed: %s\n", mn_strerror(err)); rc = RC_IO; goto done;
        }
        for (i = 0; i < N; i++) { for (t = 0; t < T; t++) sum += nll[i * T + t]; fsum += fwd[i]; }
        sum /= (double)(N * T); fsum /= (double)N;
        char pat[256];   // the pattern with its commas as '+' (train.csv's spelling): one CSV field
        snprintf(pat, sizeof pat, "%s", m0.cfg.pattern);
        for (k = 0; pat[k]; k++) if (pat[k] == ',') pat[k] = '+';
        fprintf(fs.f, "%s,%s,%zu,%llu,%zu,%zu,%zu,%.6f,%.6f,%.6f,%.1f\n", o.name, pat, m0.n_trainable,
                (unsigned long long)meta.step, T, N, N * T, sum, sum / log(2.0), fsum, ex_now() - ts);
        printf("  bits per byte %.4f (NLL %.4f nats; mn_forward's mean loss %.6f) over %zu windows of %zu: %.1f s\n",
               sum / log(2.0), sum, fsum, N, T, ex_now() - ts);
        if (out_open(&fp, o.out, "position.csv")) { rc = RC_IO; goto done; }
        fprintf(fp.f, "position,mean_nll,count\n");
        for (t = 0; t < T; t++) {
            double s = 0;
            for (i = 0; i < N; i++) s += nll[i * T + t];
            fprintf(fp.f, "%zu,%.6f,%zu\n", t + 1, s / (double)N, N);
        }
        // each window's mean NLL: the spread over windows gives the standard errors (lm_report: of a model's NLL,
        // and paired, of two models' difference on the same windows)
        if (out_open(&fw, o.out, "windows.csv")) { rc = RC_IO; goto done; }
        fprintf(fw.f, "window,offset,mean_nll\n");
        for (i = 0; i < N; i++) {
            double s = 0;
            for (t = 0; t < T; t++) s += nll[i * T + t];
            fprintf(fw.f, "%zu,%zu,%.6f\n", i, i * gap, s / (double)T);
        }
    }
    if (o.do_recall) {
        double ts = ex_now();
        size_t R = o.recall_seqs, nmax = P + o.distances[o.n_dist - 1] + L, dk;
        for (dk = 0; dk < o.n_dist; dk++) if (P + o.distances[dk] + L > nmax) nmax = P + o.distances[dk] + L;
        unsigned char* px = (unsigned char*)malloc(R * (nmax + 1));   // (R, nmax+1)
        size_t* plen = (size_t*)malloc(R * sizeof(size_t));
        double* pn = (double*)malloc(R * nmax * sizeof(double));
        unsigned char* ph = (unsigned char*)malloc(R * nmax);
        double* pf = (double*)malloc(R * sizeof(double));
        FILE* dump = NULL;
        if (!px || !plen || !pn || !ph || !pf) { fprintf(stderr, "lm_eval: out of memory\n"); rc = RC_IO; }
        if (rc == RC_OK && o.dump_probe && !(dump = fopen(o.dump_probe, "w"))) {
            fprintf(stderr, "lm_eval: cannot write %s: %s\n", o.dump_probe, strerror(errno)); rc = RC_IO;
        }
        if (rc == RC_OK && out_open(&fr, o.out, "recall.csv")) rc = RC_IO;
        open_r = rc == RC_OK;
        if (rc == RC_OK) fprintf(fr.f, "distance,seqs,recall_len,nll_second,nll_first,acc_byte,acc_exact\n");
        if (dump) fprintf(dump, "distance,sample,offset,prefix,length,hex\n");
        for (dk = 0; dk < o.n_dist && rc == RC_OK; dk++) {
            size_t d = o.distances[dk], n = P + d + L, span = len - (P + d + 1), s;
            double n2 = 0, n1 = 0, a2 = 0, ex = 0;
            mn_rng r;
            mn_rng_seed(&r, o.seed * 1000003u + d);
            for (s = 0; s < R; s++) {   // probe s on the text at s * (span / R): the same text for every model
                size_t off = s * (span / R);
                plen[s] = probe_build(px + s * (nmax + 1), text, len, off, P, d, L, &r);
                if (dump) {
                    fprintf(dump, "%zu,%zu,%zu,%zu,%zu,", d, s, off, P, n);
                    for (t = 0; t <= n; t++) fprintf(dump, "%02x", px[s * (nmax + 1) + t]);
                    fprintf(dump, "\n");
                }
            }
            if ((err = forward_all(pool, px, plen, R, nmax, pn, ph, pf)) != MN_OK) {
                fprintf(stderr, "lm_eval: forward failed: %s\n", mn_strerror(err)); rc = RC_IO; break;
            }
            // input position t predicts x[t+1]: R[j] of the copy that starts at c is predicted at t = c + j - 1
            for (s = 0; s < R; s++) {
                size_t j, all = 1;
                for (j = 1; j < L; j++) {
                    size_t t2 = s * nmax + P + d + j - 1, t1 = s * nmax + P + j - 1;
                    n2 += pn[t2]; n1 += pn[t1]; a2 += ph[t2];
                    all &= ph[t2];
                }
                ex += (double)all;
            }
            fprintf(fr.f, "%zu,%zu,%zu,%.6f,%.6f,%.6f,%.6f\n", d, R, L, n2 / (double)(R * (L - 1)),
                    n1 / (double)(R * (L - 1)), a2 / (double)(R * (L - 1)), ex / (double)R);
            printf("  recall at distance %5zu: NLL %.3f (first copy %.3f), byte accuracy %.3f, exact %.3f\n", d,
                   n2 / (double)(R * (L - 1)), n1 / (double)(R * (L - 1)), a2 / (double)(R * (L - 1)), ex / (double)R);
            fflush(stdout);
        }
        if (dump && fclose(dump) != 0 && rc == RC_OK) {
            fprintf(stderr, "lm_eval: cannot write %s\n", o.dump_probe);
            rc = RC_IO;
        }
        if (rc == RC_OK) printf("  recall probe: %.1f s\n", ex_now() - ts);
        free(px); free(plen); free(pn); free(ph); free(pf);
        if (rc != RC_OK) goto done;
    }
    if (o.do_cg && is_mesa) {
        // the settings: the tolerances once per start (the first start: the model's own unless --cg_starts),
        // then the fixed counts with the first start
        size_t S = o.cg_seqs, Tc = o.cg_len, nst = o.n_starts ? o.n_starts : 1, ntol = o.n_tols * nst;
        size_t ns = ntol + o.n_counts, si;
        int warm0 = m0.cfg.mesa_cg_warm, start1 = o.n_starts ? o.cg_starts[0] : warm0;
        cg_acc* acc = (cg_acc*)malloc(ns * Tc * sizeof(cg_acc));   // (settings, Tc)
        int dec0 = m0.cfg.mesa_cg_decode; double tol0 = m0.cfg.mesa_cg_tol;
        double fsum = 0;
        if (!acc) { fprintf(stderr, "lm_eval: out of memory\n"); rc = RC_IO; goto done; }
        if (out_open(&fc, o.out, "cg.csv") || out_open(&fq, o.out, "cg_position.csv")) {
            free(acc);
            rc = RC_IO;
            goto done;
        }
        open_c = 1;
        fprintf(fc.f, "setting,kind,value,mean_cg_steps,mean_nll,seqs,len,seconds\n");
        fprintf(fq.f, "setting,position,mean_nll,mean_cg_steps\n");
        for (i = 0; i < S; i++) for (t = 0; t < Tc; t++) fsum += nll[i * T + t];
        fprintf(fc.f, "forward,train,%d,%d,%.6f,%zu,%zu,0\n", m0.cfg.mesa_cg_train, m0.cfg.mesa_cg_train,
                fsum / (double)(S * Tc), S, Tc);
        for (si = 0; si < ns; si++) {
            double ts = ex_now(), steps = 0, mean = 0;
            int fixed = si >= ntol, start = fixed || !o.n_starts ? start1 : o.cg_starts[si / o.n_tols];
            double tol = fixed ? 0 : o.cg_tols[si % o.n_tols];
            char label[64];
            m0.cfg.mesa_cg_warm = start;   // decode_pass inits its state after this: sized for the start
            if (fixed) {   // a fixed count: no tolerance; 0 = no solve (x = q)
                int c = o.cg_counts[si - ntol];
                m0.cfg.mesa_cg_decode = c == 0 ? -1 : c; m0.cfg.mesa_cg_tol = 0;
                snprintf(label, sizeof label, "fixed %d", c);
            } else {
                m0.cfg.mesa_cg_decode = o.cg_max; m0.cfg.mesa_cg_tol = tol;
                if (start == start1) snprintf(label, sizeof label, "tol %g", tol);
                else snprintf(label, sizeof label, "tol %g start %d", tol, start);
            }
#ifdef LM_EVAL_CUDA
            // the GPU decodes (the setting into the GPU model's cfg, which its step reads); a setting its step
            // refuses (MN_ERR_CONFIG at the first token) decodes on the CPU as in the CPU build
            lm__gm.cfg.mesa_cg_decode = m0.cfg.mesa_cg_decode; lm__gm.cfg.mesa_cg_tol = m0.cfg.mesa_cg_tol;
            lm__gm.cfg.mesa_cg_warm = m0.cfg.mesa_cg_warm;
            err = decode_pass_gpu(win, S, stride, Tc, acc + si * Tc, &steps);
            if (err == MN_ERR_CONFIG) {
                printf("  decode %-10s: the GPU step refuses it (%s): on the CPU\n", label, lm__ctx.msg);
                err = decode_pass(&m0, win, S, stride, Tc, acc + si * Tc, &steps);
            }
            if (err != MN_OK) {
#else
            if ((err = decode_pass(&m0, win, S, stride, Tc, acc + si * Tc, &steps)) != MN_OK) {
#endif
                fprintf(stderr, "lm_eval: decoding (%s) failed: %s\n", label, mn_strerror(err));
                rc = RC_IO; break;
            }
            for (t = 0; t < Tc; t++) mean += acc[si * Tc + t].nll;
            mean /= (double)Tc;
            if (fixed)
                fprintf(fc.f, "%s,fixed,%d,%.4f,%.6f,%zu,%zu,%.1f\n", label, o.cg_counts[si - ntol], steps, mean, S,
                        Tc, ex_now() - ts);
            else
                fprintf(fc.f, "%s,%s,%g,%.4f,%.6f,%zu,%zu,%.1f\n", label, start == start1 ? "tol" : "start", tol,
                        steps, mean, S, Tc, ex_now() - ts);
            for (t = 0; t < Tc; t++)
                fprintf(fq.f, "%s,%zu,%.6f,%.4f\n", label, t + 1, acc[si * Tc + t].nll, acc[si * Tc + t].steps);
            printf("  decode %-10s: %6.2f CG steps per token, NLL %.4f (%zu x %zu tokens, %.1f s)\n", label, steps,
                   mean, S, Tc, ex_now() - ts);
            fflush(stdout);
        }
        m0.cfg.mesa_cg_decode = dec0; m0.cfg.mesa_cg_tol = tol0; m0.cfg.mesa_cg_warm = warm0;
#ifdef LM_EVAL_CUDA
        lm__gm.cfg.mesa_cg_decode = dec0; lm__gm.cfg.mesa_cg_tol = tol0; lm__gm.cfg.mesa_cg_warm = warm0;
#endif
        free(acc);
        if (rc != RC_OK) goto done;
    }
    // every file complete: close, then rename all
    if (out_close(&fs) || (fp.f && out_close(&fp)) || (fw.f && out_close(&fw)) || (open_r && out_close(&fr)) ||
        (open_c && (out_close(&fc) || out_close(&fq)))) { rc = RC_IO; goto done; }
    {
        out_file* all[6] = { &fs, &fp, &fr, &fc, &fq, &fw };
        for (k = 0; k < 6; k++)
            if (all[k]->tmp[0] && rename(all[k]->tmp, all[k]->path) != 0) {
                fprintf(stderr, "lm_eval: cannot rename %s: %s\n", all[k]->tmp, strerror(errno)); rc = RC_IO;
            }
    }
    if (rc == RC_OK) printf("lm_eval: %s done in %.1f s: %s/\n", o.name, ex_now() - t0, o.out);
done:
    if (rc != RC_OK) {   // nothing half-written stays
        out_file* all[6] = { &fs, &fp, &fr, &fc, &fq, &fw };
        for (k = 0; k < 6; k++) {
            if (all[k]->f) fclose(all[k]->f);
            if (all[k]->tmp[0]) remove(all[k]->tmp);
        }
    }
    free(win); free(wlen); free(nll); free(hit); free(fwd); free(text);
    for (k = 0; k < (size_t)n_pool; k++) mn_model_free(&pool[k]);
    free(pool);
    mn_model_free(&m0);
#ifdef LM_EVAL_CUDA
    mn_cuda_model_free(&lm__gm);
    mn_cuda_free(&lm__ctx);
#endif
    return rc;
}

#ifndef LM_EVAL_NO_MAIN
int main(int argc, char** argv) { return lm_eval_main(argc, argv); }
#endif
