// synth: the length-generalisation suite. Trains a small model (given by its mixer pattern) on a
// synthetic task at lengths up to --train_len, evaluates it at three lengths on fixed seeded sets,
// and appends one CSV row per (task, model, seed, length). The grid is resumable: finished cells
// (all their rows in the CSV, at the same protocol) are skipped, so the same command continues an
// interrupted run.
//
//   ./build/synth --plan                          # the published tier: its protocol, cells and tokens; runs nothing
//   ./build/synth --jobs 16                       # the published tier -> results/synth_published.csv
//   ./build/synth --tier quick                    # the small-CPU tier -> results/synth.csv
//   ./build/synth --tasks parity,s3 --models xlstm11,gdn_neg --seeds 1,2,3
//   ./build/synth --shard 0/4 --out part0.csv     # part 0 of 4 fixed parts of the grid (one per machine or GPU)
//   ./build/synth --cells list.txt                # exactly the cells listed, "task model seed" per line
//   ./build/synth --merge results/synth_published.csv part0.csv part1.csv   # appends the rows not yet there
//   ./build/synth --report results/synth.csv      # results/synth.md + one heatmap PNG per length
//                  (the tables go between the .md's synth-table markers; the text around them is kept)
//   ./build/synth --list                          # the tasks and models it knows
//   ./build/synth_cuda --jobs 16 --stop 420       # the gpu tier on the GPU; cells still training at 420 s pause
//
// Two protocols (--tier):
//   published (default): per task, the training budget of the paper whose numbers ours are set beside;
//     d_model 128, 2 layers, 4 heads (head dim 32), seeds 1, 2, 3, 2,048 evaluation sequences per length
//     (the standard error of one accuracy is then at most 0.011), Mesa CG 30 steps (fla's training
//     default), one learning rate per task:
//       task                       steps x batch   lr     warm-up  cosine to  source
//       parity, z5, s3            20,000 x 256     1e-3    2,000   1e-6       NX-AI's parity configs (Grazzi et al.)
//       modarith, _brackets      100,000 x 256     1e-3   10,000   1e-6       their modular-arithmetic configs
//       majority, majority_count,
//         anbn, anbncn           100,000 x 256     1e-3   10,000   1e-5       xLSTM paper App. B.1.1 (formal lang.)
//       mqar                      12,500 x 512     1e-3        0   0          Zoology: 100k examples x 64 epochs / 512
//     Where we differ from the sources: z5 and s3 take parity's budget (the subquadratic paper, whose table has
//     S3, has not published its protocol); the xLSTM paper and Zoology sweep the learning rate (1e-2, 1e-3, 1e-4;
//     1e-4 to 1e-2 in four log steps), we take 1e-3 for every task; Zoology cycles a fixed set of 100k examples
//     and stops at 99 % validation accuracy, we draw fresh examples every step and train the full budget;
//     Grazzi et al. train at lengths 3-40, we at <= 128 as the subquadratic paper does; their DeltaNet and Mamba
//     parity configs use no weight decay, we use 0.1 everywhere.
//   gpu: the published budgets, evaluation and seeds with 2 heads of 64 (d_model 128) for every model: the GPU
//     kernels of Mesa, attention and the GLA family take head dims 64 and 128 only. Its own protocol (tier "gpu" in
//     the CSV, default --out results/synth_gpu.csv), so its rows never mix with the 4-head published tier's.
//   gpu-tf32: tier gpu with the GPU model's matrix products in TF32 (mn_cuda_ctx.math = MN_CUDA_MATH_TF32: 10-bit
//     mantissas into fp32 accumulation, as the LM runs train) instead of fp32, for speed: a cell of this tiny
//     model is bound by many small fp32 GEMMs (results/synth.md). Its own tier name in the CSV and the state
//     notes (default --out results/synth_gpu_tf32.csv); only build/synth_cuda trains it (the CPU build plans it).
//   quick: the small-CPU tier of results/synth.csv and tests/test_synth.sh: d_model 64, 4 heads of 16, lr 3e-3,
//     warm-up 5 % then cosine to 1e-5, 256 evaluation sequences, Mesa CG 16 (with d_k = 16 the exact solve),
//     seed 1, the steps x batch of its table times --budget (default 0.1: about 1 % of the published budgets).
// Both: AdamW (0.9, 0.99), weight decay 0.1, clip 1, no positional encoding except attention's RoPE, variable
// training lengths (one length drawn per batch, so a step costs what its length costs). --budget X scales the
// steps and warm-up of either tier (a smoke test of the published tier: --budget 0.001). Each cell runs in its
// own process (fork), --jobs at a time, single-threaded inside: tiny models scale better over cells than threads.
//
// The GPU build (build/synth_cuda: this file compiled with -DSYNTH_CUDA, `make build/synth_cuda`) is the same
// program with each cell trained and evaluated by mn_cuda_model (cuda/mesanet_cuda.h) instead of mn_model: the
// same config, initial parameters, training stream, loss, clipping, AdamW, evaluation sets and CSV. Its cells
// are processes sharing the GPU (--jobs at a time; --gpus N spreads them over GPUs 0..N-1, each new cell on the
// GPU running fewest, after a child process has checked that GPU N-1 opens: the parent never touches CUDA,
// which a forked child could not inherit); its default tier is gpu, and a tier whose head dim the
// kernels lack is refused before anything runs; a pattern without GPU kernels fails its cell (--supported
// lists the models this build can train).
//
// Pausing (both builds): a cell's training state (model, AdamW moments, step, the training stream's generator)
// can be saved in <--state>/<task>.<model>.<seed>/ (default: --out without .csv, plus .state) at its 50-step
// boundaries: with --stop S, cells still training S seconds after the start save and exit (no cell starts after
// S); --save_every S saves every S seconds of a cell's training (a killed run loses at most that); --pause_step N
// stops each cell after step N (tests). The next run with the same --out resumes the cell where it stopped,
// with the same numbers as an uninterrupted run; a state saved at another protocol is not resumed.
//
// Baselines, stored in every row beside the accuracy: the constant predictor (the one answer that scores best on
// the evaluation set, read from its labels), the task's trivial baseline (synth_base below) and uniform chance,
// and the standard error of the accuracy over the evaluation set. The report scales each accuracy against the
// strongest of the three and marks a cell "untrained/constant" when its best seed is within two standard
// errors of the constant predictor, or below it.
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"
#ifndef SYNTH_NO_PNG   // machines without libstb-dev (the GPU machine that runs grid batches) build with -DSYNTH_NO_PNG
#define MN_PLOT_IMPLEMENTATION
#include "plot.h"
#endif
#include <sys/file.h>
#include <sys/wait.h>
#ifdef _OPENMP
#include <omp.h>
#endif

// ---- the network a cell trains: mesanet.h's mn_model on the CPU, or (SYNTH_CUDA) the GPU model mn_cuda_model,
// which is the same model op for op (same config, parameter table and initial values, loss, AdamW, checkpoints).
// The rest of the program sees only these functions. ----
#ifdef SYNTH_CUDA
#ifdef MESANET_DOUBLE
#error "the GPU build of synth is a float build (the GPU model computes in float)"
#endif
#include "cuda/mesanet_cuda.h"
#define SYNTH_EVAL_TOKENS 65536   // tokens per evaluation forward: the GPU wants large batches
static int synth__tf32;   // tier gpu-tf32: the GPU model's products in TF32 (set by main before any cell)
static int synth__device; // the GPU this process's cells train on (--gpus: set in each cell's child process)
static int synth__delta;  // --delta_form: the GPU DeltaNet / GDN form (MN_CUDA_DELTA_AUTO or _RECURRENT)
typedef struct {
    mn_cuda_ctx ctx; mn_cuda_model m;
    float* logits; size_t cap;   // (cap) host copy of the last evaluation forward's logits
    int ctx_up, m_up;
} synth_net;
static const char* net_strerror(int err) { return mn_cuda_strerror(err); }
static int net_ctx(synth_net* n) {
    int err;
    if (n->ctx_up) return MN_OK;
    if ((err = mn_cuda_init(&n->ctx, synth__device)) != MN_OK) return err;
    n->ctx.math = synth__tf32 ? MN_CUDA_MATH_TF32 : MN_CUDA_MATH_FP32;
    n->ctx.delta_form = synth__delta;
    n->ctx_up = 1;
    return MN_OK;
}
static int net_init(synth_net* n, const mn_config* c) {
    int err = net_ctx(n);
    if (err == MN_OK && (err = mn_cuda_model_init(&n->m, &n->ctx, c)) == MN_OK) n->m_up = 1;
    return err;
}
// a model and its AdamW state from a state folder (meta receives the caller's fields)
static int net_load(synth_net* n, const char* dir, mn_train_meta* meta) {
    int err = net_ctx(n);
    if (err == MN_OK && (err = mn_cuda_model_load(&n->m, &n->ctx, dir, meta)) == MN_OK) n->m_up = 1;
    return err;
}
static void net_free(synth_net* n) {
    if (n->m_up) mn_cuda_model_free(&n->m);
    if (n->ctx_up) mn_cuda_free(&n->ctx);
    free(n->logits);
    memset(n, 0, sizeof *n);
}
// forward with targets (the mean loss), zeroed gradients, backward, clip to max_norm; *gn the norm before clipping
static int net_grad(synth_net* n, const int* x, const int* y, size_t B, size_t T, double* loss, double* gn) {
    float l = NAN;
    int err = mn_cuda_model_forward(&n->m, x, y, B, T, &l);
    *loss = l; *gn = NAN;
    if (err == MN_OK) err = mn_cuda_model_zero_grad(&n->m);
    if (err == MN_OK) err = mn_cuda_model_backward(&n->m);
    if (err == MN_OK) err = mn_cuda_model_clip_grad_norm(&n->m, 1.0, gn);
    return err;
}
static int net_adamw(synth_net* n, double lr, const mn_adamw* hp) { return mn_cuda_model_adamw_step(&n->m, lr, hp); }
// the logits (B,T,V) of x (B,T), on the host
static int net_logits(synth_net* n, const int* x, size_t B, size_t T, const mn_real** logits) {
    size_t need = B * T * n->m.cfg.vocab_size;
    int err = mn_cuda_model_forward(&n->m, x, NULL, B, T, NULL);
    if (err != MN_OK) return err;
    if (need > n->cap) {
        free(n->logits);
        if (!(n->logits = (float*)malloc(need * sizeof(float)))) { n->cap = 0; return MN_ERR_ALLOC; }
        n->cap = need;
    }
    if ((err = mn_cuda_download(&n->ctx, n->logits, mn_cuda_model_logits(&n->m), need * sizeof(float))) != MN_OK)
        return err;
    *logits = n->logits;
    return MN_OK;
}
static int net_save(synth_net* n, const char* dir, const mn_train_meta* meta) {
    return mn_cuda_model_save(&n->m, dir, meta);
}
#else
#define SYNTH_EVAL_TOKENS 16384
typedef struct { mn_model m; int m_up; } synth_net;
static const char* net_strerror(int err) { return mn_strerror(err); }
static int net_init(synth_net* n, const mn_config* c) {
    int err = mn_model_init(&n->m, c);
    n->m_up = err == MN_OK;
    return err;
}
static int net_load(synth_net* n, const char* dir, mn_train_meta* meta) {
    int err = mn_load(&n->m, dir, meta);
    n->m_up = err == MN_OK;
    return err;
}
static void net_free(synth_net* n) {
    if (n->m_up) mn_model_free(&n->m);
    n->m_up = 0;
}
static int net_grad(synth_net* n, const int* x, const int* y, size_t B, size_t T, double* loss, double* gn) {
    mn_real l = NAN;
    int err = mn_forward(&n->m, x, y, B, T, &l);
    *loss = l;
    if (err == MN_OK) { mn_zero_grad(&n->m); err = mn_backward(&n->m); }
    *gn = err == MN_OK ? mn_clip_grad_norm(&n->m, 1.0) : NAN;
    return err;
}
static int net_adamw(synth_net* n, double lr, const mn_adamw* hp) { return mn_adamw_step(&n->m, lr, hp); }
static int net_logits(synth_net* n, const int* x, size_t B, size_t T, const mn_real** logits) {
    int err = mn_forward(&n->m, x, NULL, B, T, NULL);
    *logits = err == MN_OK ? mn_logits(&n->m) : NULL;
    return err;
}
static int net_save(synth_net* n, const char* dir, const mn_train_meta* meta) { return mn_save(&n->m, dir, meta); }
#endif

// ---- the models of the grid: name, mixer pattern (cycled over the layers), label as in the papers, and the
// Mesa layers' initial forget-gate bias (mn_config.mesa_gate_bias; 0 = the published zero bias, gamma ~ 1/2) ----
typedef struct { const char *name, *pattern, *label; double gate_bias; } synth_model;
#define SYNTH_LOG19 2.9444389791664403   // log 19: sigmoid(log 19) = 0.95
static const synth_model models[] = {
    { "transformer",  "attn",         "Transformer", 0 },
    { "mamba2",       "mamba2",       "Mamba-2 [0,1]", 0 },
    { "mamba2_neg",   "mamba2_neg",   "Mamba-2 [-1,1]", 0 },
    { "gdn",          "gdn",          "Gated DeltaNet [0,1]", 0 },
    { "gdn_neg",      "gdn_neg",      "Gated DeltaNet [-1,1]", 0 },
    { "deltanet_neg", "deltanet_neg", "DeltaNet [-1,1]", 0 },
    { "xlstm10",      "mlstm",        "xLSTM[1:0]", 0 },
    { "xlstm01",      "slstm",        "xLSTM[0:1]", 0 },
    { "xlstm11",      "mlstm,slstm",  "xLSTM[1:1]", 0 },   // block 0 mLSTM, block 1 sLSTM (xLSTM repo: slstm_at [1])
    { "hawk",         "hawk",         "Hawk", 0 },
    { "mesa",         "mesa",         "MesaNet", 0 },
    { "mesa_g95",     "mesa",         "MesaNet (gamma0 0.95)", SYNTH_LOG19 },   // forget gate starts near 0.95
    { "hawk_mesa",    "hawk,mesa",    "Hawk-Mesa", 0 },
};
#define N_MODELS (sizeof models / sizeof models[0])

// ---- per-task training protocol of a tier: steps x batch, learning rate, warm-up steps, the floor of the
// cosine (the header comment gives the sources). The quick tier's table is scaled by --budget 0.1 by default
// and its warm-up is 5 % of the steps (warmup 0 below). ----
typedef struct { const char* task; size_t steps, batch, warmup; double lr, lr_min; } synth_proto;
static const synth_proto proto_quick[] = {
    { "parity", 3000, 32, 0, 3e-3, 1e-5 }, { "modarith", 4000, 48, 0, 3e-3, 1e-5 },
    { "modarith_brackets", 4000, 48, 0, 3e-3, 1e-5 }, { "z5", 2000, 32, 0, 3e-3, 1e-5 },
    { "s3", 4000, 32, 0, 3e-3, 1e-5 },
    { "majority", 3000, 64, 0, 3e-3, 1e-5 }, { "majority_count", 3000, 64, 0, 3e-3, 1e-5 },
    { "anbn", 3000, 32, 0, 3e-3, 1e-5 }, { "anbncn", 3000, 32, 0, 3e-3, 1e-5 }, { "mqar", 3000, 32, 0, 3e-3, 1e-5 },
};
static const synth_proto proto_published[] = {
    { "parity", 20000, 256, 2000, 1e-3, 1e-6 }, { "modarith", 100000, 256, 10000, 1e-3, 1e-6 },
    { "modarith_brackets", 100000, 256, 10000, 1e-3, 1e-6 }, { "z5", 20000, 256, 2000, 1e-3, 1e-6 },
    { "s3", 20000, 256, 2000, 1e-3, 1e-6 }, { "majority", 100000, 256, 10000, 1e-3, 1e-5 },
    { "majority_count", 100000, 256, 10000, 1e-3, 1e-5 }, { "anbn", 100000, 256, 10000, 1e-3, 1e-5 },
    { "anbncn", 100000, 256, 10000, 1e-3, 1e-5 }, { "mqar", 12500, 512, 0, 1e-3, 0.0 },
};
#define N_PROTO (sizeof proto_quick / sizeof proto_quick[0])

// ---- published numbers to hold ours against (A = "On Subquadratic Architectures" at 2048,
// secondary sources; B = Grazzi et al. Table 3, scaled accuracy, lengths 40-256) ----
typedef struct { const char *task, *model; size_t len; double value; const char* src; } synth_pub;
static const synth_pub published[] = {
    { "parity", "xlstm11", 2048, 1.000, "A" }, { "s3", "xlstm11", 2048, 1.000, "A" },
    { "anbn", "xlstm10", 2048, 0.892, "A" }, { "majority_count", "xlstm10", 2048, 0.763, "A" },
    { "parity", "xlstm10", 2048, 0.0, "A" }, { "s3", "xlstm10", 2048, 0.0, "A" },
    { "parity", "gdn_neg", 128, 1.00, "A" }, { "parity", "gdn_neg", 2048, 0.472, "A" },
    { "s3", "gdn_neg", 2048, 0.667, "A" }, { "majority_count", "gdn", 2048, 0.268, "A" },
    { "parity", "mamba2", 2048, 0.352, "A (max)" }, { "anbn", "mamba2", 2048, 0.241, "A" },
    { "parity", "transformer", 256, 0.022, "B" }, { "modarith", "transformer", 256, 0.031, "B" },
    { "modarith_brackets", "transformer", 256, 0.067, "B" },
    { "parity", "xlstm10", 256, 0.087, "B" }, { "modarith", "xlstm10", 256, 0.040, "B" },
    { "modarith_brackets", "xlstm10", 256, 0.114, "B" },
    { "parity", "xlstm01", 256, 1.000, "B" }, { "modarith", "xlstm01", 256, 0.787, "B" },
    { "modarith_brackets", "xlstm01", 256, 0.178, "B" },
    { "parity", "mamba2", 256, 0.000, "B" }, { "modarith", "mamba2", 256, 0.095, "B" },
    { "modarith_brackets", "mamba2", 256, 0.123, "B" },
    { "parity", "mamba2_neg", 256, 1.000, "B" }, { "modarith", "mamba2_neg", 256, 0.241, "B" },
    { "modarith_brackets", "mamba2_neg", 256, 0.116, "B" },
    { "parity", "deltanet_neg", 256, 1.000, "B" }, { "modarith", "deltanet_neg", 256, 0.971, "B" },
    { "modarith_brackets", "deltanet_neg", 256, 0.260, "B" },
};

typedef struct {
    const char *tier, *tasks, *models, *seeds, *out, *report, *readme, *eval_lens_s, *cells, *shard, *merge, *state;
    const char* delta_form;   // --delta_form: auto (default) or recurrent (synth_cuda: ctx->delta_form)
    const char* inputs[64];   // --merge: the CSVs to merge
    size_t n_inputs;
    size_t d_model, layers, heads, train_len, eval_n, steps, batch, jobs, eval_lens[8], n_eval_lens, curriculum;
    size_t shard_i, shard_n, pause_step, gpus;   // gpus: the GPUs the cells are spread over (synth_cuda)
    double lr, budget, deadline, stop, save_every, t_start;   // t_start: when the run began (ex_now)
    int cg, list, plan, supported;
    int delta_rec;  // 1: --delta_form recurrent
    int pub_tier;   // 1: the published budgets (tiers published, gpu and gpu-tf32), 0: quick
    int gpu_tier;   // 1: tier gpu or gpu-tf32 (2 heads of 64)
    int tf32;       // 1: tier gpu-tf32 (the GPU model's products in TF32)
    char state_buf[1024];   // the default --state: --out without .csv, plus .state
} opts;

static void usage(void) {
    printf("usage: synth [--tier published|gpu|gpu-tf32|quick (default published; synth_cuda: gpu)]\n"
           "             [--tasks all|t1,t2]\n"
           "             [--models all|m1,m2]\n"
           "             [--seeds 1,2,3] [--cells FILE (\"task model seed\" per line, instead of tasks x models x\n"
           "             seeds)]\n"
           "             [--shard I/N (the cells whose index in the list is I mod N)] [--plan (print, run nothing)]\n"
           "             [--out CSV (published: results/synth_published.csv, gpu: results/synth_gpu.csv, gpu-tf32:\n"
           "             results/synth_gpu_tf32.csv, quick: results/synth.csv)]\n"
           "             [--jobs N (cells at a time, default 2)] [--gpus N (synth_cuda: spread the cells over GPUs\n"
           "             0..N-1, each cell on the one running fewest, default 1)] [--delta_form auto|recurrent\n"
           "             (synth_cuda: DeltaNet / GDN layers on the chunkwise kernels where they apply, or always on\n"
           "             the recurrent ones; the same numbers to rounding)]\n"
           "             [--budget X (scales the per-task steps and warm-up;\n"
           "             published 1, quick 0.1)] [--steps N --batch B (override the per-task table)] [--lr X]\n"
           "             [--train_len L] [--eval_lens 128,512,2048] [--eval_n N (sequences per evaluation length)]\n"
           "             [--d_model N] [--layers N] [--heads N] [--cg N (Mesa CG steps)]\n"
           "             [--deadline S (start no cell after S seconds; running cells finish)]\n"
           "             [--stop S (start no cell after S seconds; cells still training then save their state and\n"
           "             exit: the next run resumes them)] [--save_every S (save a cell's state every S seconds)]\n"
           "             [--pause_step N (each cell saves and exits after step N)] [--state DIR (where the states\n"
           "             go; default: --out without .csv, plus .state)]\n"
           "             [--curriculum L0 (longest training length grows from L0 to --train_len over the first half;\n"
           "             write to its own --out)]\n"
           "       synth --merge OUT IN.csv... (appends to OUT the rows of each IN it does not hold yet)\n"
           "       synth --report results/synth.csv [--readme FILE]   (writes results/synth_L<len>.png and the tables\n"
           "             between the synth-table markers of results/synth.md, keeping the text around them;\n"
           "             --readme: also the summary tables between FILE's markers)\n"
           "       synth --list\n"
           "       synth --supported [--tier T] (the models this build can train at the tier's shape,\n"
           "             comma-separated; synth_cuda tries each on the GPU)\n");
}

static int parse_list(const char* s, size_t* out, size_t cap) {
    size_t n = 0; char* end;
    while (*s && n < cap) {
        out[n++] = (size_t)strtoull(s, &end, 10);
        if (end == s || (*end && *end != ',')) return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return *s ? -1 : (int)n;
}

static int parse(opts* o, int argc, char** argv) {
    int i;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        EX_OPT_S("--tier", tier) EX_OPT_S("--tasks", tasks) EX_OPT_S("--models", models) EX_OPT_S("--seeds", seeds)
        EX_OPT_S("--out", out) EX_OPT_S("--report", report) EX_OPT_S("--readme", readme)
        EX_OPT_S("--eval_lens", eval_lens_s) EX_OPT_S("--cells", cells) EX_OPT_S("--shard", shard)
        EX_OPT_S("--merge", merge) EX_OPT_S("--delta_form", delta_form)
        EX_OPT_U("--d_model", d_model) EX_OPT_U("--layers", layers) EX_OPT_U("--heads", heads)
        EX_OPT_U("--train_len", train_len) EX_OPT_U("--eval_n", eval_n) EX_OPT_U("--steps", steps)
        EX_OPT_U("--batch", batch) EX_OPT_U("--jobs", jobs) EX_OPT_U("--curriculum", curriculum)
        EX_OPT_U("--gpus", gpus)
        EX_OPT_D("--lr", lr) EX_OPT_D("--budget", budget) EX_OPT_D("--deadline", deadline)
        EX_OPT_D("--stop", stop) EX_OPT_D("--save_every", save_every) EX_OPT_U("--pause_step", pause_step)
        EX_OPT_S("--state", state)
        if (!strcmp(a, "--cg") && v) { if (ex_parse_int("--cg", v, -1, 1000, &o->cg)) return -1; i++; continue; }
        if (!strcmp(a, "--list")) { o->list = 1; continue; }
        if (!strcmp(a, "--plan")) { o->plan = 1; continue; }
        if (!strcmp(a, "--supported")) { o->supported = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); exit(0); }
        if (o->merge && a[0] != '-' && o->n_inputs < 64) { o->inputs[o->n_inputs++] = a; continue; }
        fprintf(stderr, "synth: unknown or incomplete option %s\n", a);
        usage();
        return -1;
    }
    if (o->merge) {
        if (o->n_inputs == 0) { fprintf(stderr, "synth: --merge OUT needs at least one CSV to merge\n"); return -1; }
        return 0;
    }
    // the tier's defaults for what the command line left unset
#ifdef SYNTH_CUDA
    if (!o->tier) o->tier = "gpu";
#else
    if (!o->tier) o->tier = "published";
#endif
    if (strcmp(o->tier, "published") && strcmp(o->tier, "gpu") && strcmp(o->tier, "gpu-tf32") &&
        strcmp(o->tier, "quick")) {
        fprintf(stderr, "synth: --tier must be published, gpu, gpu-tf32 or quick (got '%s')\n", o->tier);
        return -1;
    }
    o->tf32 = !strcmp(o->tier, "gpu-tf32");
    o->gpu_tier = o->tf32 || !strcmp(o->tier, "gpu");
    o->pub_tier = o->gpu_tier || !strcmp(o->tier, "published");
    if (!o->out) o->out = o->tf32 ? "results/synth_gpu_tf32.csv" : o->gpu_tier ? "results/synth_gpu.csv"
                          : o->pub_tier ? "results/synth_published.csv" : "results/synth.csv";
    if (!o->state) {   // beside the CSV: results/synth_gpu.csv -> results/synth_gpu.state
        size_t l = strlen(o->out);
        if (l > 4 && !strcmp(o->out + l - 4, ".csv")) l -= 4;
        snprintf(o->state_buf, sizeof o->state_buf, "%.*s.state", (int)(l < 1000 ? l : 1000), o->out);
        o->state = o->state_buf;
    }
    if (!o->d_model) o->d_model = o->pub_tier ? 128 : 64;
    if (!o->layers) o->layers = 2;
    if (!o->heads) o->heads = o->gpu_tier ? 2 : 4;
    if (!o->train_len) o->train_len = 128;
    if (!o->eval_n) o->eval_n = o->pub_tier ? 2048 : 256;
    if (!o->jobs) o->jobs = 2;
    if (!o->gpus) o->gpus = 1;
    if (o->budget != o->budget) o->budget = o->pub_tier ? 1.0 : 0.1;   // NaN: not given
    if (o->cg == -1000) o->cg = o->pub_tier ? 30 : 16;
    if (!o->eval_lens_s) o->eval_lens_s = "128,512,2048";
    if (o->cells && (o->tasks || o->models || o->seeds)) {
        fprintf(stderr, "synth: --cells lists the cells itself: give it without --tasks, --models, --seeds\n");
        return -1;
    }
    if (!o->tasks) o->tasks = "all";
    if (!o->models) o->models = "all";
    if (!o->seeds) o->seeds = o->pub_tier ? "1,2,3" : "1";
    int n = parse_list(o->eval_lens_s, o->eval_lens, 8);
    if (n <= 0) { fprintf(stderr, "synth: bad --eval_lens '%s'\n", o->eval_lens_s); return -1; }
    o->n_eval_lens = (size_t)n;
    if (o->shard) {
        char* end; unsigned long long a = strtoull(o->shard, &end, 10), b = 0;
        if (end != o->shard && *end == '/') b = strtoull(end + 1, &end, 10);
        if (*end || b == 0 || a >= b) {
            fprintf(stderr, "synth: --shard I/N needs 0 <= I < N (got '%s')\n", o->shard);
            return -1;
        }
        o->shard_i = (size_t)a; o->shard_n = (size_t)b;
    }
    if (o->jobs > 256 || o->heads == 0 || o->d_model % o->heads || o->train_len < 8 || !(o->budget > 0) ||
        (o->lr == o->lr && !(o->lr > 0)) || !(o->stop >= 0) || !(o->save_every >= 0) || !(o->deadline >= 0)) {
        fprintf(stderr, "synth: --jobs must be 1..256, --heads must divide --d_model, --budget and --lr > 0, "
                        "--train_len >= 8, --stop, --save_every and --deadline >= 0\n");
        return -1;
    }
    if (o->gpus > 64) { fprintf(stderr, "synth: --gpus must be 1..64\n"); return -1; }
    if (o->delta_form && strcmp(o->delta_form, "auto") && strcmp(o->delta_form, "recurrent")) {
        fprintf(stderr, "synth: --delta_form must be auto or recurrent (got '%s')\n", o->delta_form);
        return -1;
    }
    o->delta_rec = o->delta_form && !strcmp(o->delta_form, "recurrent");
#ifndef SYNTH_CUDA
    if (o->gpus > 1 && !o->plan) {
        fprintf(stderr, "synth: --gpus %zu: this build trains on the CPU; --gpus is for build/synth_cuda\n", o->gpus);
        return -1;
    }
    if (o->delta_rec && !o->plan) {
        fprintf(stderr, "synth: --delta_form recurrent: this build trains on the CPU; it is for build/synth_cuda\n");
        return -1;
    }
#endif
#ifdef SYNTH_CUDA
    // the GPU Mesa, attention and GLA kernels take head dims 64 and 128 only: refused here, before any cell runs,
    // rather than failing every cell of those mixers (the gpu tier's 2 heads of 64 are what they take)
    if (o->d_model / o->heads != 64 && o->d_model / o->heads != 128) {
        fprintf(stderr, "synth_cuda: head dim d_model / heads = %zu / %zu = %zu: the GPU kernels take 64 or 128 "
                        "(--tier gpu: 2 heads of 64)\n", o->d_model, o->heads, o->d_model / o->heads);
        return -1;
    }
#endif
    return 0;
}

static const synth_model* find_model(const char* name) {
    size_t i;
    for (i = 0; i < N_MODELS; i++) if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

static char* read_file(const char* path, size_t* len) {
    unsigned char* buf = NULL;
    *len = 0;
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    fclose(f);
    if (ex_append_file(path, &buf, len) != 0) { free(buf); return NULL; }
    buf[*len] = 0;
    return (char*)buf;
}

// ---- CSV rows (one per task, model, seed, evaluation length). The first 23 columns are those of the first grid
// (results/synth.csv keeps rows with only them); the rest came with the published tier. ----
#define SYNTH_COLS_OLD 23
#define SYNTH_COLS 33
static const char* synth_header =
    "task,model,pattern,seed,train_len,eval_len,metric,chance,acc,scaled,token_acc,seq_acc,final_acc,n_eval,steps,"
    "batch,lr,train_loss,diverged,wall_s,train_tok_s,mesa_cg,curriculum,"
    "tier,d_model,n_layer,n_head,warmup,lr_min,mesa_gate_bias,const_acc,trivial_acc,acc_se\n";
enum { C_TASK, C_MODEL, C_PATTERN, C_SEED, C_TRAIN_LEN, C_EVAL_LEN, C_METRIC, C_CHANCE, C_ACC, C_SCALED, C_TOKEN_ACC,
       C_SEQ_ACC, C_FINAL_ACC, C_N_EVAL, C_STEPS, C_BATCH, C_LR, C_TRAIN_LOSS, C_DIVERGED, C_WALL, C_TOK_S, C_CG,
       C_CURRICULUM, C_TIER, C_D_MODEL, C_N_LAYER, C_N_HEAD, C_WARMUP, C_LR_MIN, C_GATE_BIAS, C_CONST, C_TRIVIAL,
       C_SE };

typedef struct { char* f[40]; size_t nf; } csv_line;

// Splits text (NUL-terminated, modified in place) into lines and comma-separated fields; the header lines and
// empty lines are skipped. Returns the lines (malloc'd; NULL and *n = 0 when there are none).
static csv_line* csv_split(char* text, size_t* n) {
    size_t cap = 0; csv_line* v = NULL; char* p = text;
    *n = 0;
    while (p && *p) {
        char* nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p && strncmp(p, "task,", 5)) {
            csv_line l; char* q = p;
            l.nf = 0;
            while (l.nf < 40) { l.f[l.nf++] = q; q = strchr(q, ','); if (!q) break; *q++ = 0; }
            if (*n == cap) {
                csv_line* nv = (csv_line*)realloc(v, (cap = cap ? 2 * cap : 256) * sizeof *v);
                if (!nv) { free(v); *n = 0; return NULL; }
                v = nv;
            }
            v[(*n)++] = l;
        }
        p = nl ? nl + 1 : NULL;
    }
    return v;
}

// ---- the protocol of a cell: what two rows of the same (task, model, seed, length) must share to be one
// measurement. A row of the first grid holds the first group only. ----
typedef struct {
    size_t train_len, n_eval, steps, batch, curriculum;
    double lr, chance;
    int cg;
    int full;   // the second group is known
    char tier[16];
    size_t d_model, n_layer, n_head, warmup;
    double lr_min, gate_bias;
} synth_protocol;

static const synth_proto* task_proto(const opts* o, const char* task) {
    const synth_proto* t = o->pub_tier ? proto_published : proto_quick;
    size_t i;
    for (i = 0; i < N_PROTO; i++) if (!strcmp(t[i].task, task)) return &t[i];
    return NULL;
}

// The protocol this run gives a cell (steps and warm-up after --budget and --steps).
static void cell_protocol(const opts* o, const mn_task* task, const synth_model* sm, synth_protocol* p) {
    const synth_proto* t = task_proto(o, task->name);
    memset(p, 0, sizeof *p);
    p->steps = (size_t)((double)t->steps * o->budget + 0.5);
    if (o->steps) p->steps = o->steps;
    if (p->steps < 1) p->steps = 1;
    p->batch = o->batch ? o->batch : t->batch;
    p->lr = o->lr == o->lr ? o->lr : t->lr;
    p->lr_min = t->lr_min;
    // quick: 5 % of the steps (at least 1), as the first grid did; published: the table's share of the steps
    if (!o->pub_tier) p->warmup = p->steps / 20 ? p->steps / 20 : 1;
    else p->warmup = t->warmup ? (size_t)((double)p->steps * (double)t->warmup / (double)t->steps) : 0;
    if (o->pub_tier && t->warmup && p->warmup == 0) p->warmup = 1;
    p->train_len = o->train_len; p->n_eval = o->eval_n; p->curriculum = o->curriculum;
    p->cg = strstr(sm->pattern, "mesa") ? o->cg : 0;
    p->chance = task->chance;
    p->full = 1;
    snprintf(p->tier, sizeof p->tier, "%s", o->tier);
    p->d_model = o->d_model; p->n_layer = o->layers; p->n_head = o->heads; p->gate_bias = sm->gate_bias;
}

static void row_protocol(const csv_line* r, synth_protocol* p) {
    memset(p, 0, sizeof *p);
    p->train_len = (size_t)strtoull(r->f[C_TRAIN_LEN], NULL, 10);
    p->n_eval = (size_t)strtoull(r->f[C_N_EVAL], NULL, 10);
    p->steps = (size_t)strtoull(r->f[C_STEPS], NULL, 10); p->batch = (size_t)strtoull(r->f[C_BATCH], NULL, 10);
    p->lr = strtod(r->f[C_LR], NULL); p->cg = atoi(r->f[C_CG]);
    p->curriculum = (size_t)strtoull(r->f[C_CURRICULUM], NULL, 10);
    p->chance = strtod(r->f[C_CHANCE], NULL);
    if (r->nf < SYNTH_COLS) return;
    p->full = 1;
    snprintf(p->tier, sizeof p->tier, "%s", r->f[C_TIER]);
    p->d_model = (size_t)strtoull(r->f[C_D_MODEL], NULL, 10); p->n_layer = (size_t)strtoull(r->f[C_N_LAYER], NULL, 10);
    p->n_head = (size_t)strtoull(r->f[C_N_HEAD], NULL, 10); p->warmup = (size_t)strtoull(r->f[C_WARMUP], NULL, 10);
    p->lr_min = strtod(r->f[C_LR_MIN], NULL); p->gate_bias = strtod(r->f[C_GATE_BIAS], NULL);
}

// equal as the CSV writes them (6 decimals or 6 significant digits)
static int near(double a, double b) { return fabs(a - b) <= 1e-5 * (fabs(a) + fabs(b)) + 1e-6; }

// 0 when a and b are the same protocol (the second group compared when both rows have it), else 1 and what
// differs in why. A different chance level means the task's generator changed since the row was written.
static int protocol_differs(const synth_protocol* a, const synth_protocol* b, char* why, size_t cap) {
    why[0] = 0;
    #define DIFF(cond, ...) if (cond) { snprintf(why, cap, __VA_ARGS__); return 1; }
    DIFF(!near(a->chance, b->chance), "chance %.6f vs %.6f: the task's generator changed", a->chance, b->chance)
    DIFF(a->steps != b->steps || a->batch != b->batch, "steps x batch %zu x %zu vs %zu x %zu", a->steps, a->batch,
         b->steps, b->batch)
    DIFF(!near(a->lr, b->lr), "lr %g vs %g", a->lr, b->lr)
    DIFF(a->train_len != b->train_len || a->n_eval != b->n_eval, "train_len/eval_n %zu/%zu vs %zu/%zu", a->train_len,
         a->n_eval, b->train_len, b->n_eval)
    DIFF(a->cg != b->cg || a->curriculum != b->curriculum, "cg/curriculum %d/%zu vs %d/%zu", a->cg, a->curriculum,
         b->cg,
         b->curriculum)
    if (a->full && b->full) {
        DIFF(strcmp(a->tier, b->tier), "tier %s vs %s", a->tier, b->tier)
        DIFF(a->d_model != b->d_model || a->n_layer != b->n_layer || a->n_head != b->n_head,
             "model %zu/%zu/%zu vs %zu/%zu/%zu (d_model/layers/heads)", a->d_model, a->n_layer, a->n_head, b->d_model,
             b->n_layer, b->n_head)
        DIFF(a->warmup != b->warmup || !near(a->lr_min, b->lr_min) || !near(a->gate_bias, b->gate_bias),
             "warm-up/lr_min/gate bias %zu/%g/%g vs %zu/%g/%g", a->warmup, a->lr_min, a->gate_bias, b->warmup,
             b->lr_min, b->gate_bias)
    }
    #undef DIFF
    return 0;
}

// ---- baselines of an evaluation set ----
//   constant: the best single answer, read from the set's own labels. FINAL: the most frequent last target;
//     TOKEN: the most frequent target over all scored positions; SEQUENCE: the token that alone fills the
//     scored positions of the most sequences (a sequence counts only when all its targets are that token).
//   trivial: what a model gets that uses the input without solving the task:
//     mqar: 1/N, a value drawn uniformly from the N values in the context (each query's candidates once a model
//       knows that values follow keys, before it has learned which key owns which value);
//     majority_count: the answer given only the number of distinct symbols in the string (with the length,
//       fixed in one evaluation set, that is what a model knows that tracks which symbols occurred without
//       counting them): the rule (the most frequent answer for each number) is fitted on 16,384 other
//       sequences of the same length and scored on the evaluation set; fitted on the set itself it would
//       be optimistic (at 64 sequences, one per number, it would nearly always be right);
//     the other tasks: uniform chance. parity, z5 and s3 have a uniform answer given any proper part of the
//       input; for the others we know no input-based rule that beats the constant predictor, which carries the
//       answers' imbalance (modular arithmetic's residues are not uniform).
typedef struct {
    const mn_task* task;
    size_t V, nseq, ntok, trivial_ok;
    size_t* hist;      // (V) the constant predictor's counts
    int rule[65];      // majority_count: the fitted answer for each number of distinct symbols
} synth_base;

// majority_count: the number of distinct symbols (tokens 3..66) before the closing '='; the last target
static size_t mc_distinct(const int* x, const int* y, size_t len, int* last) {
    unsigned char seen[67]; size_t d = 0, t;
    memset(seen, 0, sizeof seen);
    *last = -1;
    for (t = 1; t < len; t++) {
        if (x[t] >= 3 && x[t] < 67 && !seen[x[t]]) { seen[x[t]] = 1; d++; }
        if (y[t] >= 0) *last = y[t];
    }
    return d < 64 ? d : 64;
}

static int base_init(synth_base* b, const mn_task* task, size_t len) {
    memset(b, 0, sizeof *b);
    b->task = task; b->V = (size_t)task->vocab_size;
    b->hist = (size_t*)calloc(b->V, sizeof(size_t));
    if (!b->hist) return -1;
    if (!strcmp(task->name, "majority_count")) {   // fit the rule on sequences the evaluation set does not hold
        size_t* dh = (size_t*)calloc(65 * b->V, sizeof(size_t)), i, d, a;
        int *x = (int*)malloc(len * sizeof(int)), *y = (int*)malloc(len * sizeof(int)), last;
        mn_rng r;
        if (!dh || !x || !y) { free(dh); free(x); free(y); return -1; }
        mn_rng_seed(&r, 0x5EED0F17ull + len);
        for (i = 0; i < 16384; i++) {
            mn_task_sample(task, &r, len, x, y);
            d = mc_distinct(x, y, len, &last);
            if (last >= 0) dh[d * b->V + (size_t)last]++;
        }
        for (d = 0; d <= 64; d++) {
            b->rule[d] = -1;
            for (a = 0, i = 0; a < b->V; a++) if (dh[d * b->V + a] > i) { i = dh[d * b->V + a]; b->rule[d] = (int)a; }
        }
        free(dh); free(x); free(y);
    }
    return 0;
}
static void base_free(synth_base* b) { free(b->hist); b->hist = NULL; }

static void base_add(synth_base* b, const int* x, const int* y, size_t len) {
    size_t t, scored = 0;
    int first = -1, same = 1, last = -1;
    for (t = 0; t < len; t++) {
        if (y[t] < 0) continue;
        scored++; last = y[t];
        if (first < 0) first = y[t]; else if (y[t] != first) same = 0;
        if (b->task->metric == MN_METRIC_TOKEN) b->hist[y[t]]++;
    }
    if (!scored) return;
    b->nseq++; b->ntok += scored;
    if (b->task->metric == MN_METRIC_FINAL) b->hist[last]++;
    if (b->task->metric == MN_METRIC_SEQUENCE && same) b->hist[first]++;
    if (!strcmp(b->task->name, "majority_count")) {
        int l; size_t d = mc_distinct(x, y, len, &l);
        b->trivial_ok += b->rule[d] == last;
    }
}

static void base_finish(const synth_base* b, double* const_acc, double* trivial_acc) {
    size_t a, best = 0;
    for (a = 0; a < b->V; a++) if (b->hist[a] > best) best = b->hist[a];
    *const_acc = b->nseq ? (double)best / (double)(b->task->metric == MN_METRIC_TOKEN ? b->ntok : b->nseq) : NAN;
    *trivial_acc = b->task->chance;
    if (!strcmp(b->task->name, "mqar") && b->ntok) *trivial_acc = (double)b->nseq / (double)b->ntok;   // mean 1/N
    if (!strcmp(b->task->name, "majority_count") && b->nseq) *trivial_acc = (double)b->trivial_ok / (double)b->nseq;
}

// The seeded generator of the evaluation set of (task, len): every model and seed sees the same sequences.
static void eval_rng(mn_rng* rng, const mn_task* task, size_t len) {
    uint64_t h = 1469598103934665603ull; const char* p;
    for (p = task->name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;   // FNV-1a of the task name
    mn_rng_seed(rng, h ^ (len * 0x9E3779B97F4A7C15ull));
}

// The baselines of the evaluation set (task, len, n_eval) without a model (the report's, for rows of the first
// grid, which did not store them). -1 when out of memory.
static int eval_baselines(const mn_task* task, size_t len, size_t n_eval, double* const_acc, double* trivial_acc) {
    int *x = (int*)malloc(len * sizeof(int)), *y = (int*)malloc(len * sizeof(int));
    synth_base b; mn_rng rng; size_t i;
    memset(&b, 0, sizeof b);
    if (!x || !y || base_init(&b, task, len)) { free(x); free(y); base_free(&b); return -1; }
    eval_rng(&rng, task, len);
    for (i = 0; i < n_eval; i++) { mn_task_sample(task, &rng, len, x, y); base_add(&b, x, y, len); }
    base_finish(&b, const_acc, trivial_acc);
    base_free(&b); free(x); free(y);
    return 0;
}

// ---- one cell: train, evaluate, return the rows ----
typedef struct { double acc, token_acc, seq_acc, final_acc, se, const_acc, trivial_acc; } synth_eval;

// Accuracy at the scored positions of n_eval fixed sequences of length len, the baselines of the same set, and
// the standard error of the accuracy: binomial over sequences for FINAL and SEQUENCE; for TOKEN the ratio
// estimator's over sequences (a sequence's positions are not independent draws).
static int evaluate(synth_net* net, size_t V, const mn_task* task, size_t len, size_t n_eval, synth_eval* r) {
    size_t eb = SYNTH_EVAL_TOKENS / len ? SYNTH_EVAL_TOKENS / len : 1, done = 0, b, t, v;
    size_t tok_ok = 0, tok_n = 0, seq_ok = 0, fin_ok = 0, nseq = 0;
    double scc = 0, scn = 0, snn = 0;   // sums of c^2, c n, n^2 over sequences (c right of n scored)
    int *x = (int*)malloc(eb * len * sizeof(int)), *y = (int*)malloc(eb * len * sizeof(int));
    mn_rng rng;
    synth_base base;
    int err = MN_OK;
    eval_rng(&rng, task, len);
    memset(&base, 0, sizeof base);
    if (!x || !y || base_init(&base, task, len)) { free(x); free(y); base_free(&base); return MN_ERR_ALLOC; }
    while (done < n_eval && err == MN_OK) {
        size_t nb = n_eval - done < eb ? n_eval - done : eb;
        for (b = 0; b < nb; b++) {
            mn_task_sample(task, &rng, len, x + b * len, y + b * len);
            base_add(&base, x + b * len, y + b * len, len);
        }
        const mn_real* logits;
        if ((err = net_logits(net, x, nb, len, &logits)) != MN_OK) break;
        for (b = 0; b < nb; b++) {
            int all = 1, last = -1;
            size_t c = 0, ns = 0;
            for (t = 0; t < len; t++) {
                const int tgt = y[b * len + t];
                if (tgt < 0) continue;
                const mn_real* l = logits + (b * len + t) * V;
                size_t best = 0;
                for (v = 1; v < V; v++) if (l[v] > l[best]) best = v;
                const int ok = (int)best == tgt;
                c += (size_t)ok; ns++; all &= ok; last = ok;
            }
            if (!ns) continue;
            tok_ok += c; tok_n += ns; seq_ok += (size_t)all; fin_ok += (size_t)last; nseq++;
            scc += (double)c * (double)c; scn += (double)c * (double)ns; snn += (double)ns * (double)ns;
        }
        done += nb;
    }
    free(x); free(y);
    if (err != MN_OK) { base_free(&base); return err; }
    base_finish(&base, &r->const_acc, &r->trivial_acc);
    base_free(&base);
    r->token_acc = tok_n ? (double)tok_ok / (double)tok_n : NAN;
    r->seq_acc = nseq ? (double)seq_ok / (double)nseq : NAN;
    r->final_acc = nseq ? (double)fin_ok / (double)nseq : NAN;
    r->acc = task->metric == MN_METRIC_TOKEN ? r->token_acc
           : task->metric == MN_METRIC_SEQUENCE ? r->seq_acc : r->final_acc;
    if (task->metric == MN_METRIC_TOKEN) {
        double p = r->token_acc, ss = scc - 2 * p * scn + p * p * snn;
        r->se = nseq > 1 ? sqrt((ss > 0 ? ss : 0) * (double)nseq / (double)(nseq - 1)) / (double)tok_n : NAN;
    } else {
        r->se = nseq ? sqrt(r->acc * (1 - r->acc) / (double)nseq) : NAN;
    }
    return MN_OK;
}

static const char* metric_name(int m) {
    return m == MN_METRIC_TOKEN ? "token" : m == MN_METRIC_SEQUENCE ? "sequence" : "final";
}

// Appends text to the CSV under an exclusive lock (several cells finish at once); writes the header
// first if the file is new.
static int append_rows(const char* path, const char* text) {
    FILE* f = fopen(path, "a");
    if (!f) return -1;
    flock(fileno(f), LOCK_EX);
    fseek(f, 0, SEEK_END);
    if (ftell(f) == 0) fputs(synth_header, f);
    fputs(text, f);
    fflush(f);
    flock(fileno(f), LOCK_UN);
    fclose(f);
    return 0;
}

// A CSV of the first grid has the 23-column header: before new rows are appended (and before any cell runs, so
// no other process of this run writes it), the header line is replaced by the full one; the old rows keep their
// 23 fields, which the report reads as such. 0, or -1 when the file cannot be rewritten.
static int upgrade_header(const char* path) {
    size_t len; char* t = read_file(path, &len);
    char tmp[1100]; FILE* g; const char* body;
    if (!t) return 0;
    if (strncmp(t, "task,", 5) || !strncmp(t, synth_header, strlen(synth_header))) { free(t); return 0; }
    body = strchr(t, '\n'); body = body ? body + 1 : t + len;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(g = fopen(tmp, "w"))) { free(t); return -1; }
    fputs(synth_header, g);
    fwrite(body, 1, (size_t)(t + len - body), g);
    int bad = fclose(g) != 0 || rename(tmp, path) != 0;
    free(t);
    return bad ? -1 : 0;
}

// The model of a cell: the task's vocabulary, the run's shape, the model's pattern and gate bias; max_seq_len the
// longest of the training and evaluation lengths; the parameters seeded by the seed.
static void cell_config(const opts* o, const mn_task* task, const synth_model* sm, size_t seed, mn_config* c) {
    size_t i, maxlen = o->train_len;
    for (i = 0; i < o->n_eval_lens; i++) if (o->eval_lens[i] > maxlen) maxlen = o->eval_lens[i];
    memset(c, 0, sizeof *c);
    c->vocab_size = (size_t)task->vocab_size; c->d_model = o->d_model; c->n_layer = o->layers; c->n_head = o->heads;
    c->max_seq_len = maxlen; c->pattern = sm->pattern; c->seed = 1000 + seed;
    // quick tier: d_k = 16, so CG reaches the exact solve in at most 16 steps (in exact arithmetic): --cg 16 is
    // MesaNet with an exact linear solve at CG's cost; published: fla's 30 training steps (d_k = 32)
    c->mesa_cg_train = o->cg; c->mesa_cg_decode = o->cg;
    c->mesa_gate_bias = sm->gate_bias;
}

// ---- a cell's training state between runs: <--state>/<task>.<model>.<seed>/ holds mn_save's set (the model,
// the AdamW moments) with, as its metadata, the next step, the training stream's generator, and in extra[] the
// tokens trained on, the last logged loss and the training seconds so far. The notes hold everything that
// shapes the training (the protocol and the model): a state whose notes differ is not resumed. States are saved
// only where the loss window has just closed (every 50 steps), so nothing else needs keeping. ----
static void state_dir(const opts* o, const mn_task* task, const synth_model* sm, size_t seed, char* dir, size_t cap) {
    snprintf(dir, cap, "%s/%s.%s.%zu", o->state, task->name, sm->name, seed);
}
static void state_notes(const synth_protocol* p, const mn_config* c, const char* task, const char* model, size_t seed,
                        char* notes, size_t cap) {
    snprintf(notes, cap, "synth state 1: %s %s seed %zu tier %s steps %zu batch %zu lr %.17g warm-up %zu "
             "lr_min %.17g train_len %zu curriculum %zu cg %d gate_bias %.17g d_model %zu layers %zu heads %zu "
             "vocab %zu max_len %zu pattern %s", task, model, seed, p->tier, p->steps, p->batch, p->lr, p->warmup,
             p->lr_min, p->train_len, p->curriculum, p->cg, p->gate_bias, c->d_model, c->n_layer, c->n_head,
             c->vocab_size, c->max_seq_len, c->pattern);
}
// removes a state folder (mn_save's set: plain files only)
static void state_remove(const char* dir) {
    DIR* d = opendir(dir);
    struct dirent* e;
    char path[1400];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

// Trains and evaluates one cell and appends its rows: 0; a failure: 1; paused (its state saved, no rows): 3.
static int run_cell(const opts* o, const mn_task* task, const synth_model* sm, size_t seed, int show) {
    mn_config c;
    synth_net net; memset(&net, 0, sizeof net);
    synth_protocol pr;
    mn_train_meta meta; memset(&meta, 0, sizeof meta);
    char sdir[1200], notes[sizeof meta.notes];
    size_t step = 0, i;
    cell_protocol(o, task, sm, &pr);
    cell_config(o, task, sm, seed, &c);
    const size_t steps = pr.steps, batch = pr.batch, warm = pr.warmup;
    state_dir(o, task, sm, seed, sdir, sizeof sdir);
    state_notes(&pr, &c, task->name, sm->name, seed, notes, sizeof notes);
    // the training stream depends on (task, seed) only, not on the model: every mixer sees the same data
    mn_rng rng; const char* p; uint64_t h = 0;
    for (p = task->name; *p; p++) h = h * 131 + (unsigned char)*p;
    mn_rng_seed(&rng, h * 0x9E3779B97F4A7C15ull + seed);
    size_t tokens = 0;
    double train_before = 0, train_loss = NAN;   // from a saved state: training seconds before this run
    int err = MN_ERR_IO;
    {   // a saved state of this cell at this protocol: resume it; another protocol's or a broken one: start afresh
        char cfgp[1300]; struct stat st;
        snprintf(cfgp, sizeof cfgp, "%s/config.json", sdir);
        if (stat(cfgp, &st) == 0) {
            err = net_load(&net, sdir, &meta);
            if (err == MN_OK && (strcmp(meta.notes, notes) || meta.step == 0 || meta.step >= steps)) {
                fprintf(stderr, "synth: %s holds another protocol's state; %s/%s seed %zu starts afresh\n", sdir,
                        task->name, sm->name, seed);
                err = MN_ERR_CONFIG;
            } else if (err != MN_OK) {
                fprintf(stderr, "synth: cannot resume from %s (%s); %s/%s seed %zu starts afresh\n", sdir,
                        net_strerror(err), task->name, sm->name, seed);
            }
            if (err != MN_OK) net_free(&net);
        }
        if (err == MN_OK) {
            step = (size_t)meta.step; rng.s = meta.rng_state;
            tokens = (size_t)meta.extra[0]; train_loss = meta.extra[1]; train_before = meta.extra[2];
        } else if ((err = net_init(&net, &c)) != MN_OK) {
            fprintf(stderr, "synth: %s/%s: %s: %s\n", task->name, sm->name, net_strerror(err),
                    err == MN_ERR_CONFIG ? "bad config or no kernels for it" : "cannot build the model");
            net_free(&net);
            return 1;
        }
    }
    int *x = (int*)malloc(batch * o->train_len * sizeof(int)), *y = (int*)malloc(batch * o->train_len * sizeof(int));
    if (!x || !y) { free(x); free(y); net_free(&net); return 1; }
    mn_adamw hp = { 0.9, 0.99, 1e-8, 0.1 };
    double t0 = ex_now() - train_before, tlast = t0, tsave = ex_now(), loss_acc = 0; size_t nacc = 0;
    long diverged = -1;
    int paused = 0;
    for (; step < steps; step++) {
        // length curriculum (--curriculum L0): the longest training length grows linearly from L0 to
        // --train_len over the first half of the steps, then stays; 0 = off (every step up to train_len)
        size_t Lmax = o->train_len;
        if (o->curriculum && o->curriculum < o->train_len && step < steps / 2)
            Lmax = o->curriculum + (o->train_len - o->curriculum) * step / (steps / 2);
        size_t T = mn_task_train_len(task, &rng, Lmax), b;
        if (T == 0) T = mn_task_train_len(task, &rng, o->train_len);   // Lmax below the task's shortest length
        double loss, gn;
        for (b = 0; b < batch; b++) mn_task_sample(task, &rng, T, x + b * T, y + b * T);
        err = net_grad(&net, x, y, batch, T, &loss, &gn);
        // a non-finite loss or norm is divergence (a result: the row says where); any other error (out of memory,
        // a CUDA fault) fails the cell, which leaves no rows and runs again next time
        if (err == MN_OK && !(gn == gn && loss == loss)) err = MN_ERR_NAN;
        if (err == MN_OK) err = net_adamw(&net, mn_lr_schedule(step, warm, steps, pr.lr, pr.lr_min), &hp);
        if (err == MN_ERR_NAN) { diverged = (long)step; break; }   // keep the last finite ones
        if (err != MN_OK) {
            fprintf(stderr, "synth: %s/%s seed %zu: training step %zu failed: %s\n", task->name, sm->name, seed, step,
                    net_strerror(err));
            free(x); free(y); net_free(&net);
            return 1;
        }
        tokens += batch * T;
        loss_acc += loss; nacc++;
        if (step + 1 == steps || nacc == 50) { train_loss = loss_acc / (double)nacc; loss_acc = 0; nacc = 0; }
        double now = ex_now();
        if (show && (now - tlast > 0.3 || step + 1 == steps)) {
            fprintf(stderr, "\r  %s %s seed %zu: step %zu/%zu | loss %.4f | %.0f tok/s   ", task->name, sm->name, seed,
                    step + 1, steps, loss, (double)tokens / (now - t0));
            tlast = now;
        }
        // at a closed loss window (not the last step): pause (--pause_step, --stop) or save (--save_every)
        if (nacc == 0 && step + 1 < steps) {
            int pause = (o->pause_step && step + 1 >= o->pause_step) || (o->stop > 0 && now - o->t_start > o->stop);
            if (pause || (o->save_every > 0 && now - tsave > o->save_every)) {
                meta.step = step + 1; meta.rng_state = rng.s;
                meta.extra[0] = (double)tokens; meta.extra[1] = train_loss; meta.extra[2] = now - t0;
                snprintf(meta.notes, sizeof meta.notes, "%s", notes);
                if (ex_mkdirs(sdir) != 0 || (err = net_save(&net, sdir, &meta)) != MN_OK) {
                    fprintf(stderr, "synth: %s/%s seed %zu: cannot save its state in %s%s\n", task->name, sm->name,
                            seed, sdir, pause ? ": it goes on training" : "");
                    pause = 0;
                }
                tsave = ex_now();
                if (pause) { paused = 1; step++; break; }
            }
        }
    }
    if (show) fprintf(stderr, "\n");
    if (paused) {
        printf("  %s %s seed %zu: paused after step %zu of %zu (state in %s)\n", task->name, sm->name, seed, step,
               steps, sdir);
        fflush(stdout);
        free(x); free(y); net_free(&net);
        return 3;
    }
    double train_s = ex_now() - t0;
    char rows[8192], pat[128]; size_t off = 0;
    rows[0] = 0;
    snprintf(pat, sizeof pat, "%s", sm->pattern);
    for (i = 0; pat[i]; i++) if (pat[i] == ',') pat[i] = '+';   // CSV-safe: mlstm,slstm -> mlstm+slstm
    err = MN_OK;
    for (i = 0; i < o->n_eval_lens && err != MN_ERR_ALLOC; i++) {
        synth_eval r;
        size_t L = o->eval_lens[i];
        if ((err = evaluate(&net, c.vocab_size, task, L, o->eval_n, &r)) != MN_OK) {
            fprintf(stderr, "synth: %s/%s: evaluation at %zu failed: %s\n", task->name, sm->name, L,
                    net_strerror(err));
            break;
        }
        double scaled = (r.acc - task->chance) / (1.0 - task->chance);
        off += (size_t)snprintf(rows + off, sizeof rows - off,
                                "%s,%s,%s,%zu,%zu,%zu,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%zu,%zu,%zu,%g,%.6f,%ld,%.1f,"
                                "%.0f,%d,%zu,"
                                "%s,%zu,%zu,%zu,%zu,%g,%.6f,%.6f,%.6f,%.6f\n",
                                task->name, sm->name, pat, seed, o->train_len, L, metric_name(task->metric),
                                task->chance,
                                r.acc, scaled, r.token_acc, r.seq_acc, r.final_acc, o->eval_n, steps, batch, pr.lr,
                                train_loss, diverged, ex_now() - t0, (double)tokens / train_s, pr.cg, o->curriculum,
                                o->tier, o->d_model, o->layers, o->heads, warm, pr.lr_min, sm->gate_bias, r.const_acc,
                                r.trivial_acc, r.se);
    }
    free(x); free(y); net_free(&net);
    if (i < o->n_eval_lens) return 1;
    if (append_rows(o->out, rows) != 0) { fprintf(stderr, "synth: cannot append to %s\n", o->out); return 1; }
    state_remove(sdir);   // the cell is in the CSV: its state is not needed any more
    return 0;
}

// ---- the grid: cells not yet in the CSV, run --jobs at a time in child processes ----
typedef struct { const mn_task* task; const synth_model* model; size_t seed; } synth_cell;

// Whether name is in the comma-separated list ("all" holds every name).
static int in_list(const char* list, const char* name) {
    char l[1024], key[128];
    if (!strcmp(list, "all")) return 1;
    snprintf(l, sizeof l, ",%s,", list);
    snprintf(key, sizeof key, ",%s,", name);
    return strstr(l, key) != NULL;
}

// The cells of --cells FILE: one "task model seed" per line (spaces, tabs or commas between; '#' starts a
// comment). An unknown name or a bad seed is an error naming the line. Returns the count, or -1.
static long read_cells(const char* path, synth_cell* cells, size_t cap) {
    size_t len, n = 0, line = 0; char* t = read_file(path, &len); char* p;
    if (!t) { fprintf(stderr, "synth: cannot read --cells %s\n", path); return -1; }
    for (p = t; p && *p;) {
        char* nl = strchr(p, '\n'), *hash, *w[4]; size_t nw = 0; char* s;
        if (nl) *nl = 0;
        line++;
        if ((hash = strchr(p, '#'))) *hash = 0;
        for (s = strtok(p, " \t,\r"); s && nw < 4; s = strtok(NULL, " \t,\r")) w[nw++] = s;
        if (nw) {
            char* end; unsigned long long seed = nw == 3 ? strtoull(w[2], &end, 10) : 0;
            const mn_task* task = mn_task_find(w[0]); const synth_model* sm = nw >= 2 ? find_model(w[1]) : NULL;
            if (nw != 3 || !task || !sm || *end || end == w[2]) {
                fprintf(stderr, "synth: %s line %zu: want \"task model seed\" with known names (synth --list)\n",
                        path, line);
                free(t); return -1;
            }
            if (n == cap) { fprintf(stderr, "synth: %s: more than %zu cells\n", path, cap); free(t); return -1; }
            cells[n].task = task; cells[n].model = sm; cells[n].seed = (size_t)seed; n++;
        }
        p = nl ? nl + 1 : NULL;
    }
    free(t);
    return (long)n;
}

static double mean_train_len(const mn_task* task, size_t max_len) {
    mn_rng r; size_t i; double s = 0;
    mn_rng_seed(&r, 7);
    for (i = 0; i < 4000; i++) s += (double)mn_task_train_len(task, &r, max_len);
    return s / 4000.0;
}

// --plan: the tier's protocol per task and the cells to run, as "#" lines and a --cells list.
static void print_plan(const opts* o, const synth_cell* cells, size_t n, size_t skipped) {
    size_t ntask, i, j; const mn_task* tasks = mn_task_list(&ntask);
    double total = 0;
    printf("# synth --plan: tier %s, d_model %zu, %zu layers, %zu heads, eval at %s (%zu sequences each), out %s\n",
           o->tier, o->d_model, o->layers, o->heads, o->eval_lens_s, o->eval_n, o->out);
    printf("# %-18s %8s %6s %8s %8s %8s %12s %6s\n", "task", "steps", "batch", "lr", "warm-up", "lr_min",
           "train tokens",
           "cells");
    for (i = 0; i < ntask; i++) {
        size_t nc = 0; synth_protocol pr;
        for (j = 0; j < n; j++) nc += cells[j].task == &tasks[i];
        if (!nc) continue;
        cell_protocol(o, &tasks[i], &models[0], &pr);
        double tok = (double)pr.steps * (double)pr.batch * mean_train_len(&tasks[i], o->train_len);
        total += tok * (double)nc;
        printf("# %-18s %8zu %6zu %8g %8zu %8g %12.3g %6zu\n", tasks[i].name, pr.steps, pr.batch, pr.lr, pr.warmup,
               pr.lr_min, tok, nc);
    }
    printf("# %zu cells to run (%zu already in %s), %.3g training tokens in all\n", n, skipped, o->out, total);
    for (j = 0; j < n; j++) printf("%s %s %zu\n", cells[j].task->name, cells[j].model->name, cells[j].seed);
}

#ifdef SYNTH_CUDA
// Whether GPU gpus-1 (so 0..gpus-1) can be used, asked in a child process: the parent stays free of CUDA, since a
// process that has initialised CUDA cannot hand it on to the cells it forks. 0, or -1 with the reason printed.
static int probe_gpus(size_t gpus) {
    int st = 0;
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        mn_cuda_ctx ctx;
        int err = mn_cuda_init(&ctx, (int)gpus - 1);
        if (err != MN_OK)
            fprintf(stderr, "synth_cuda: GPU %zu (--gpus %zu) cannot be used: %s (%s); nothing ran\n", gpus - 1, gpus,
                    mn_cuda_strerror(err), ctx.msg);
        else mn_cuda_free(&ctx);
        _exit(err == MN_OK ? 0 : 1);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid) { perror("synth_cuda: fork"); return -1; }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}
#endif

static int run_grid(const opts* o) {
    static synth_cell all[8192], cells[8192];
    size_t n_all = 0, n = 0, i, j, k, seeds[64], nrows = 0, skipped = 0;
    size_t csv_len; char* csv = read_file(o->out, &csv_len);
    csv_line* rows = csv ? csv_split(csv, &nrows) : NULL;
    size_t ntask; const mn_task* tasks = mn_task_list(&ntask);
    char buf[1024];
    int rc = 2;
    if (o->cells) {
        long nc = read_cells(o->cells, all, sizeof all / sizeof all[0]);
        if (nc < 0) goto done;
        n_all = (size_t)nc;
    } else {
        int ns = parse_list(o->seeds, seeds, 64);
        if (ns <= 0) { fprintf(stderr, "synth: bad --seeds '%s'\n", o->seeds); goto done; }
        // validate the names first: an unknown one is an error before anything runs
        for (k = 0; k < 2; k++) {
            const char* list = k == 0 ? o->tasks : o->models;
            if (!strcmp(list, "all")) continue;
            snprintf(buf, sizeof buf, "%s", list);
            char* s; for (s = strtok(buf, ","); s; s = strtok(NULL, ","))
                if (k == 0 ? mn_task_find(s) == NULL : find_model(s) == NULL) {
                    fprintf(stderr, "synth: unknown %s '%s' (synth --list)\n", k == 0 ? "task" : "model", s); goto done;
                }
        }
        for (i = 0; i < ntask; i++) {
            if (!in_list(o->tasks, tasks[i].name)) continue;
            for (j = 0; j < N_MODELS; j++) {
                if (!in_list(o->models, models[j].name)) continue;
                for (k = 0; k < (size_t)ns && n_all < sizeof all / sizeof all[0]; k++) {
                    all[n_all].task = &tasks[i]; all[n_all].model = &models[j]; all[n_all].seed = seeds[k]; n_all++;
                }
            }
        }
    }
    // the shard (a fixed part of the full list, so that it does not move as cells finish), then the cells whose
    // rows are all in the CSV, at this run's protocol: a row of the cell at another protocol is an error
    for (i = 0; i < n_all; i++) {
        size_t have = 0;
        synth_protocol want, got;
        char why[256];
        if (o->shard_n && i % o->shard_n != o->shard_i) continue;
        cell_protocol(o, all[i].task, all[i].model, &want);
        for (j = 0; j < nrows; j++) {
            const csv_line* r = &rows[j];
            if (r->nf < SYNTH_COLS_OLD || strcmp(r->f[C_TASK], all[i].task->name) ||
                strcmp(r->f[C_MODEL], all[i].model->name) ||
                (size_t)strtoull(r->f[C_SEED], NULL, 10) != all[i].seed)
                continue;
            row_protocol(r, &got);
            if (protocol_differs(&got, &want, why, sizeof why)) {
                fprintf(stderr, "synth: %s holds %s/%s seed %zu at another protocol (%s; first the CSV's, then this"
                        " run's):"
                        " give another --out\n", o->out, all[i].task->name, all[i].model->name, all[i].seed, why);
                goto done;
            }
            for (k = 0; k < o->n_eval_lens; k++)
                if ((size_t)strtoull(r->f[C_EVAL_LEN], NULL, 10) == o->eval_lens[k]) have++;
        }
        if (have >= o->n_eval_lens) { skipped++; continue; }
        cells[n++] = all[i];
    }
    if (o->plan) { print_plan(o, cells, n, skipped); rc = 0; goto done; }
#ifdef SYNTH_CUDA
    if (n && probe_gpus(o->gpus) != 0) goto done;   // before anything is written
#endif
    if (n && upgrade_header(o->out) != 0) {
        fprintf(stderr, "synth: cannot rewrite the header of %s\n", o->out);
        goto done;
    }
    char over[48] = "";
    if (o->gpus > 1) snprintf(over, sizeof over, " over %zu GPUs", o->gpus);
    printf("synth: %zu cells to run (%zu already in %s), %zu at a time%s; tier %s, d_model %zu, %zu layers, %zu heads;"
           " train <= %zu; eval at", n, skipped, o->out, o->jobs, over, o->tier, o->d_model, o->layers, o->heads,
           o->train_len);
    for (i = 0; i < o->n_eval_lens; i++) printf(" %zu", o->eval_lens[i]);
    printf(" (%zu sequences each)\n", o->eval_n);
    fflush(stdout);
    // no cell starts after --deadline or --stop, whichever comes first (seconds since the run began)
    double limit = o->deadline > 0 && (o->stop == 0 || o->deadline < o->stop) ? o->deadline : o->stop;
    size_t n_ok = 0, n_paused = 0, n_failed = 0, n_all_cells = n;
    if (o->jobs == 1) {   // in-process, with a live progress line
        for (i = 0; i < n; i++) {
            double t = ex_now();
            if (limit > 0 && t - o->t_start > limit) {
                printf("synth: time limit of %.0f s reached, %zu cells left for the next run\n", limit, n - i);
                break;
            }
            int r = run_cell(o, cells[i].task, cells[i].model, cells[i].seed, isatty(2));
            n_ok += r == 0; n_paused += r == 3; n_failed += r != 0 && r != 3;
            printf("[%zu/%zu] %s %s seed %zu: %s in %.1f s\n", i + 1, n, cells[i].task->name, cells[i].model->name,
                   cells[i].seed, r == 0 ? "done" : r == 3 ? "paused" : "FAILED", ex_now() - t);
            fflush(stdout);
        }
    } else {
        pid_t pids[256]; size_t who[256], gpu[256], running = 0, next = 0, ndone = 0;   // gpu: the slot's device
        double started[256], t0 = ex_now(), cell_s = 0;
        while (ndone < n) {
            if (limit > 0 && ex_now() - o->t_start > limit && next < n) {
                printf("synth: time limit of %.0f s reached, %zu cells left for the next run\n", limit, n - next);
                n = next;   // the loop ends once the running cells finish
                if (ndone >= n) break;
            }
            while (running < o->jobs && next < n) {
                size_t g = 0, load[64] = { 0 };   // the GPU running fewest cells (--gpus; else GPU 0)
                for (k = 0; k < running; k++) load[gpu[k]]++;
                for (k = 1; k < o->gpus; k++) if (load[k] < load[g]) g = k;
                fflush(stdout); fflush(stderr);
                pid_t pid = fork();
                if (pid == 0) {
#ifdef SYNTH_CUDA
                    synth__device = (int)g;
#endif
#ifdef _OPENMP
                    omp_set_num_threads(1);
#endif
#if defined(MN_USE_BLAS)
                    openblas_set_num_threads(1);
#endif
                    _exit(run_cell(o, cells[next].task, cells[next].model, cells[next].seed, 0));
                }
                if (pid < 0) { perror("synth: fork"); rc = 1; goto done; }
                pids[running] = pid; who[running] = next; gpu[running] = g; started[running] = ex_now();
                running++; next++;
            }
            int status; pid_t pid = wait(&status);
            if (pid < 0) break;
            for (i = 0; i < running; i++) if (pids[i] == pid) break;
            if (i == running) continue;
            size_t c = who[i], cg = gpu[i]; double el = ex_now() - started[i];
            pids[i] = pids[running - 1]; who[i] = who[running - 1]; gpu[i] = gpu[running - 1];
            started[i] = started[running - 1]; running--;
            ndone++; cell_s += el;
            int r = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
            n_ok += r == 0; n_paused += r == 3; n_failed += r != 0 && r != 3;
            double eta = cell_s / (double)ndone * (double)(n - ndone) / (double)o->jobs;
            char on[32] = "";
            if (o->gpus > 1) snprintf(on, sizeof on, " on GPU %zu", cg);
            printf("[%zu/%zu] %-18s %-13s seed %zu: %s in %.0f s%s | elapsed %.0f s, ETA %.0f min\n", ndone, n,
                   cells[c].task->name, cells[c].model->name, cells[c].seed,
                   r == 0 ? "done" : r == 3 ? "paused" : "FAILED", el, on, ex_now() - t0, eta / 60.0);
            fflush(stdout);
        }
    }
    printf("synth: %zu done, %zu paused (their states in %s), %zu failed, %zu not started; the same command "
           "continues\n", n_ok, n_paused, o->state, n_failed, n_all_cells - n_ok - n_paused - n_failed);
    rc = n_failed ? 1 : 0;
done:
    free(rows); free(csv);
    return rc;
}

// ---- --merge OUT IN...: appends to OUT each row of the INs whose (task, model, seed, eval_len) OUT does not
// hold yet, so merging again (or after more shards finish) adds only what is new. The same key at another
// protocol is an error before anything is written. ----
static int same_key(const csv_line* a, const csv_line* b) {
    return !strcmp(a->f[C_TASK], b->f[C_TASK]) && !strcmp(a->f[C_MODEL], b->f[C_MODEL]) &&
           !strcmp(a->f[C_SEED], b->f[C_SEED]) && !strcmp(a->f[C_EVAL_LEN], b->f[C_EVAL_LEN]);
}

static int merge(const opts* o) {
    size_t len, nout = 0, i, j, k, kk, added = 0, present = 0, cap = 0, ml = 0;
    char* out = read_file(o->merge, &len);
    csv_line* have = out ? csv_split(out, &nout) : NULL;
    char *texts[64] = { 0 }, *add = NULL;
    csv_line* in[64] = { 0 }; size_t nin[64] = { 0 };
    int rc = 1;
    for (k = 0; k < o->n_inputs; k++) {
        if (!(texts[k] = read_file(o->inputs[k], &len))) {
            fprintf(stderr, "synth: cannot read %s\n", o->inputs[k]);
            goto done;
        }
        in[k] = csv_split(texts[k], &nin[k]);
        for (i = 0; i < nin[k]; i++)
            if (in[k][i].nf != SYNTH_COLS && in[k][i].nf != SYNTH_COLS_OLD) {
                fprintf(stderr, "synth: %s: a row with %zu fields (want %d or %d); nothing merged\n", o->inputs[k],
                        in[k][i].nf, SYNTH_COLS, SYNTH_COLS_OLD);
                goto done;
            }
    }
    for (k = 0; k < o->n_inputs; k++)
        for (i = 0; i < nin[k]; i++) {
            const csv_line *r = &in[k][i], *q = NULL;
            const char* where = o->merge;
            // the same key in OUT, or in a row merged before this one (an earlier input, or earlier in this one)
            for (j = 0; j < nout && !q; j++) if (have[j].nf >= SYNTH_COLS_OLD && same_key(&have[j], r)) q = &have[j];
            for (kk = 0; kk <= k && !q; kk++)
                for (j = 0; j < (kk == k ? i : nin[kk]) && !q; j++)
                    if (same_key(&in[kk][j], r)) { q = &in[kk][j]; where = o->inputs[kk]; }
            if (q) {
                synth_protocol a, b; char why[256];
                row_protocol(q, &a); row_protocol(r, &b);
                if (protocol_differs(&a, &b, why, sizeof why)) {
                    fprintf(stderr, "synth: %s/%s seed %s at %s: %s and %s disagree on the protocol (%s); nothing"
                            " merged\n",
                            r->f[C_TASK], r->f[C_MODEL], r->f[C_SEED], r->f[C_EVAL_LEN], where, o->inputs[k], why);
                    goto done;
                }
                present++;
                continue;
            }
            size_t need = ml + 16;
            for (j = 0; j < r->nf; j++) need += strlen(r->f[j]) + 1;
            if (need > cap) {
                char* na = (char*)realloc(add, cap = 2 * need + 4096);
                if (!na) { fprintf(stderr, "synth: out of memory\n"); goto done; }
                add = na;
            }
            for (j = 0; j < r->nf; j++) ml += (size_t)sprintf(add + ml, "%s%s", j ? "," : "", r->f[j]);
            add[ml++] = '\n'; add[ml] = 0;
            added++;
        }
    if (added && (upgrade_header(o->merge) != 0 || append_rows(o->merge, add) != 0)) {
        fprintf(stderr, "synth: cannot append to %s\n", o->merge);
        goto done;
    }
    printf("synth: merged %zu rows into %s (%zu already there) from %zu files\n", added, o->merge, present,
           o->n_inputs);
    rc = 0;
done:
    for (k = 0; k < o->n_inputs; k++) { free(in[k]); free(texts[k]); }
    free(have); free(out); free(add);
    return rc;
}

// ---- report: results/synth.md (tables) and a heatmap per evaluation length ----
typedef struct {
    char task[32], model[32], metric[16];
    size_t seed, len, train_len, n_eval, d_model, n_head;
    double scaled, acc, chance, wall, const_acc, trivial_acc, se;
} synth_row;

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// The report's tables live between two markers, so a file can hold a hand-written reading of the
// results around them (results/synth.md does) and a new report replaces only the tables.
static const char *synth_mark0 = "<!-- synth-table:begin -->", *synth_mark1 = "<!-- synth-table:end -->";

// 0 when path is absent (must_exist 0) or holds both markers in order; else an error line and 1.
static int markers_check(const char* path, int must_exist) {
    size_t l; char* t = read_file(path, &l);
    char* m0 = t ? strstr(t, synth_mark0) : NULL;
    int bad = t ? !(m0 && strstr(m0, synth_mark1)) : must_exist;
    if (bad) fprintf(stderr, "synth: %s %s\n", path, t ? "lacks the markers <!-- synth-table:begin --> ... end -->"
                                                    : "does not exist (it needs the synth-table markers)");
    free(t);
    return bad;
}

// Replaces the text between path's markers with body (n bytes), keeping the rest; a file that does
// not exist yet is created as head + the markers around body. markers_check has passed. Written to
// path.tmp and renamed over path, so a failed write leaves the old file whole.
static int markers_put(const char* path, const char* head, const char* body, size_t n) {
    size_t l; char* t = read_file(path, &l);
    char *m0 = t ? strstr(t, synth_mark0) : NULL, *m1 = m0 ? strstr(m0, synth_mark1) : NULL, tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* g = fopen(tmp, "w");
    if (!g) { fprintf(stderr, "synth: cannot write %s\n", tmp); free(t); return 1; }
    if (m1) fwrite(t, 1, (size_t)(m0 - t), g); else fputs(head, g);
    fprintf(g, "%s\n", synth_mark0);
    fwrite(body, 1, n, g);
    fputs(m1 ? m1 : synth_mark1, g);
    if (!m1) fputc('\n', g);
    int bad = ferror(g) != 0;
    bad |= fclose(g) != 0;
    free(t);
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "synth: cannot write %s; it is unchanged\n", path);
        remove(tmp);
        return 1;
    }
    return 0;
}

// One (task, model, length) of the report: its seeds' rows summarised.
typedef struct {
    size_t n;                        // seeds
    double best, med, seed_se;       // scaled against chance: best, median over seeds, their standard error
    double best_b;                   // the best seed scaled against the strongest baseline
    double se_b;                     // the best seed's evaluation standard error, in those units
    int flag;                        // 1: the best seed is within 2 standard errors of the constant predictor, or below
    int known;                       // 0: the baselines are not known (a row of a generator that has changed since)
    double wall;                     // mean wall time of a whole cell (rows at the last length)
} synth_cellsum;

// the strongest baseline of a row: chance, the constant predictor, the trivial baseline (NaN ones ignored)
static double strongest(const synth_row* r) {
    double b = r->chance;
    if (r->const_acc > b) b = r->const_acc;
    if (r->trivial_acc > b) b = r->trivial_acc;
    return b;
}

static int report(const opts* o) {
    size_t len, n = 0, cap = 0, i, j, k, li, nl_rows = 0;
    char base[1024], path[1100], mdpath[1100];
    // the output names (results/synth.csv -> results/synth.md, results/synth_L<len>.png); check the
    // markers of every file the report edits before anything is written
    snprintf(base, sizeof base, "%s", o->report);
    if (strlen(base) > 4 && !strcmp(base + strlen(base) - 4, ".csv")) base[strlen(base) - 4] = 0;
    snprintf(mdpath, sizeof mdpath, "%s.md", base);
    if (o->readme && !strcmp(o->readme, mdpath)) {
        fprintf(stderr, "synth: --readme %s is the report itself (it gets every table anyway)\n", mdpath);
        return 1;
    }
    if (markers_check(mdpath, 0) || (o->readme && markers_check(o->readme, 1))) return 1;
    char* csv = read_file(o->report, &len);
    synth_row* rows = NULL;
    if (!csv) { fprintf(stderr, "synth: cannot read %s\n", o->report); return 1; }
    csv_line* lines = csv_split(csv, &nl_rows);
    // baselines of the first grid's rows (they did not store them): the evaluation sets are seeded by (task,
    // length), so they are regenerated, unless the task's chance level changed (a changed generator)
    typedef struct { const mn_task* task; size_t len, n_eval; double c, t; } base_cache;
    base_cache bc[64]; size_t nbc = 0;
    for (k = 0; k < nl_rows; k++) {
        const csv_line* f = &lines[k];
        synth_row r; const mn_task* task;
        if (f->nf < SYNTH_COLS_OLD - 1 || !find_model(f->f[C_MODEL])) continue;
        memset(&r, 0, sizeof r);
        snprintf(r.task, sizeof r.task, "%s", f->f[C_TASK]); snprintf(r.model, sizeof r.model, "%s", f->f[C_MODEL]);
        r.seed = (size_t)strtoull(f->f[C_SEED], NULL, 10); r.train_len = (size_t)strtoull(f->f[C_TRAIN_LEN], NULL, 10);
        r.len = (size_t)strtoull(f->f[C_EVAL_LEN], NULL, 10); r.n_eval = (size_t)strtoull(f->f[C_N_EVAL], NULL, 10);
        snprintf(r.metric, sizeof r.metric, "%s", f->f[C_METRIC]);
        r.chance = strtod(f->f[C_CHANCE], NULL); r.acc = strtod(f->f[C_ACC], NULL);
        r.scaled = strtod(f->f[C_SCALED], NULL);
        r.wall = strtod(f->f[C_WALL], NULL);
        if (f->nf >= SYNTH_COLS) {
            r.d_model = (size_t)strtoull(f->f[C_D_MODEL], NULL, 10);
            r.n_head = (size_t)strtoull(f->f[C_N_HEAD], NULL, 10);
            r.const_acc = strtod(f->f[C_CONST], NULL); r.trivial_acc = strtod(f->f[C_TRIVIAL], NULL);
            r.se = strtod(f->f[C_SE], NULL);
        } else {   // the first grid: d_model 64, 4 heads; the binomial standard error over its sequences
            r.d_model = 64; r.n_head = 4;
            r.se = r.n_eval ? sqrt(r.acc * (1 - r.acc) / (double)r.n_eval) : NAN;
            r.const_acc = r.trivial_acc = NAN;
            task = mn_task_find(r.task);
            if (task && near(task->chance, r.chance) && r.n_eval) {
                for (i = 0; i < nbc; i++)
                    if (bc[i].task == task && bc[i].len == r.len && bc[i].n_eval == r.n_eval) break;
                if (i == nbc && nbc < 64 && eval_baselines(task, r.len, r.n_eval, &bc[i].c, &bc[i].t) == 0) {
                    bc[i].task = task; bc[i].len = r.len; bc[i].n_eval = r.n_eval; nbc++;
                }
                if (i < nbc) { r.const_acc = bc[i].c; r.trivial_acc = bc[i].t; }
            }
        }
        if (n == cap) {
            synth_row* nr = (synth_row*)realloc(rows, (cap = cap ? 2 * cap : 256) * sizeof *rows);
            if (!nr) { free(rows); free(lines); free(csv); return 1; }
            rows = nr;
        }
        rows[n++] = r;
    }
    free(lines); free(csv);
    if (n == 0) { fprintf(stderr, "synth: no rows in %s\n", o->report); free(rows); return 1; }
    // the evaluation lengths present, ascending; tasks and models in the grid's order
    size_t lens[8], nl = 0, ntask; const mn_task* tasks = mn_task_list(&ntask);
    for (i = 0; i < n; i++) {
        for (j = 0; j < nl; j++) if (lens[j] == rows[i].len) break;
        if (j == nl && nl < 8) lens[nl++] = rows[i].len;
    }
    for (i = 1; i < nl; i++)
        for (j = i; j > 0 && lens[j - 1] > lens[j]; j--) { size_t t = lens[j]; lens[j] = lens[j - 1]; lens[j - 1] = t; }
    const char* trow[32]; const char* mcol[N_MODELS]; size_t nt = 0, nm = 0;
    for (i = 0; i < ntask && nt < 32; i++)
        for (k = 0; k < n; k++) if (!strcmp(rows[k].task, tasks[i].name)) { trow[nt++] = tasks[i].name; break; }
    for (i = 0; i < N_MODELS; i++)
        for (k = 0; k < n; k++) if (!strcmp(rows[k].model, models[i].name)) { mcol[nm++] = models[i].name; break; }

    // per (task, model, length): best and median scaled accuracy over seeds, their standard error, the best
    // seed against the strongest baseline with its evaluation standard error and the untrained/constant mark;
    // per (task, length): the baselines (first row found) and, for MQAR, whether N pairs exceed d_k
    #define CELL(t, m, l) ((t) * nm * nl + (m) * nl + (l))
    synth_cellsum* cs = (synth_cellsum*)calloc(nt * nm * nl, sizeof *cs);
    const synth_row** tb = (const synth_row**)calloc(nt * nl, sizeof *tb);   // a row of each (task, length)
    double vals[64];
    if (!cs || !tb) { free(cs); free(tb); free(rows); return 1; }
    for (i = 0; i < nt; i++) for (j = 0; j < nm; j++) for (li = 0; li < nl; li++) {
        synth_cellsum* c = &cs[CELL(i, j, li)];
        const synth_row* bestr = NULL;
        size_t nv = 0; double w = 0, mean = 0, var = 0;
        for (k = 0; k < n; k++)
            if (rows[k].len == lens[li] && !strcmp(rows[k].task, trow[i]) && !strcmp(rows[k].model, mcol[j]) &&
                nv < 64) {
                vals[nv++] = rows[k].scaled; w += rows[k].wall;
                if (!bestr || rows[k].acc > bestr->acc) bestr = &rows[k];
                const synth_row* t0 = tb[i * nl + li];   // prefer a row whose baselines are known
                if (!t0 || (t0->const_acc != t0->const_acc && rows[k].const_acc == rows[k].const_acc))
                    tb[i * nl + li] = &rows[k];
            }
        c->n = nv;
        if (!nv) { c->best = c->med = c->seed_se = c->best_b = c->se_b = NAN; continue; }
        for (k = 0; k < nv; k++) mean += vals[k] / (double)nv;
        for (k = 0; k < nv; k++) var += (vals[k] - mean) * (vals[k] - mean);
        qsort(vals, nv, sizeof(double), cmp_double);
        c->best = vals[nv - 1];
        c->med = nv % 2 ? vals[nv / 2] : 0.5 * (vals[nv / 2 - 1] + vals[nv / 2]);
        c->seed_se = nv > 1 ? sqrt(var / (double)(nv - 1) / (double)nv) : NAN;
        double b = strongest(bestr);
        c->best_b = b < 1 - 1e-9 ? (bestr->acc - b) / (1 - b) : NAN;
        c->se_b = b < 1 - 1e-9 ? bestr->se / (1 - b) : NAN;
        c->known = bestr->const_acc == bestr->const_acc;
        c->flag = c->known && !(bestr->acc > bestr->const_acc + 2 * bestr->se);
        if (li == nl - 1) c->wall = w / (double)nv;   // wall_s of the last length = the whole cell
    }
    // MQAR's pairs N = len/16 against the key dimension d_k = d_model / heads of its rows
    #define CAPACITY(ti, l) (!strcmp(trow[ti], "mqar") && tb[(ti) * nl + (l)] && tb[(ti) * nl + (l)]->n_head && \
                             lens[l] / 16 > tb[(ti) * nl + (l)]->d_model / tb[(ti) * nl + (l)]->n_head)

    // heatmaps: task x model, the best seed against the strongest baseline, one PNG per evaluation length
    const char* mlabel[N_MODELS];
    for (j = 0; j < nm; j++) mlabel[j] = find_model(mcol[j])->name;
    float* hv = (float*)malloc(nt * nm * sizeof(float));
    for (li = 0; hv && li < nl; li++) {
        char title[128];
        for (i = 0; i < nt; i++) for (j = 0; j < nm; j++) hv[i * nm + j] = (float)cs[CELL(i, j, li)].best_b;
        snprintf(title, sizeof title, "best seed against the strongest baseline, length %zu (trained <= %zu)", lens[li],
                 rows[0].train_len);
        snprintf(path, sizeof path, "%s_L%zu.png", base, lens[li]);
#ifndef SYNTH_NO_PNG
        if (mn_plot_heatmap(path, title, hv, nt, nm, trow, mlabel, 0.0f, 1.0f) != 0)
            fprintf(stderr, "synth: cannot write %s\n", path);
        else printf("wrote %s\n", path);
#else
        (void)mlabel; (void)title;
#endif
    }
    free(hv);

    // markdown: (1) the baselines per task and length; (2) task x model matrix against the strongest baseline;
    // (3) every published number beside ours; (4) one row per (task, model, length) with every statistic
    size_t mcap = 1 << 20, ml = 0, q, ml_summary;
    char* md = (char*)malloc(mcap);
    if (!md) { free(cs); free(tb); free(rows); return 1; }
    #define MD(...) (ml += (size_t)snprintf(md + ml, ml < mcap ? mcap - ml : 0, __VA_ARGS__))
    MD("Generated by `./build/synth --report %s` from %zu rows.\n\n", o->report, n);
    MD("Baselines of each evaluation set (accuracy; the same sequences for every model and seed): uniform chance,\n"
       "the constant predictor (the best single answer, from the labels) and the task's trivial baseline (MQAR: 1/N,\n"
       "a value of the context drawn uniformly; majority count: the answer for the number of distinct symbols in\n"
       "the string, by a rule fitted on other sequences; elsewhere chance). A dash: not known (a row from a\n"
       "generator that has changed since).\n\n"
       "| task | metric | chance |");
    for (li = 0; li < nl; li++) MD(" constant / trivial at %zu |", lens[li]);
    MD("\n|---|---|---|");
    for (li = 0; li < nl; li++) MD("---|");
    MD("\n");
    for (i = 0; i < nt; i++) {
        const synth_row* r0 = NULL;
        for (li = 0; li < nl && !r0; li++) r0 = tb[i * nl + li];
        MD("| %s | %s | %.3f |", trow[i], r0 ? r0->metric : "", r0 ? r0->chance : NAN);
        for (li = 0; li < nl; li++) {
            const synth_row* r = tb[i * nl + li];
            if (r && r->const_acc == r->const_acc)
                MD(" %.3f / %.3f%s |", r->const_acc, r->trivial_acc, CAPACITY(i, li) ? " (capacity)" : "");
            else MD(" – |");
        }
        MD("\n");
    }
    MD("\nMQAR holds N = L/16 key-value pairs at length L; where N exceeds the key dimension d_k (the\n"
       "\"capacity\" lengths) no linear memory of d_k x d_v can hold them all, so there it tests capacity, not\n"
       "length generalisation.\n\n");
    MD("Accuracy scaled against the strongest baseline of the three (1 = perfect, 0 = that baseline; below it\n"
       "reads as 0.00), best seed; each cell is");
    for (li = 0; li < nl; li++) MD("%s%zu", li ? " / " : " L = ", lens[li]);
    MD(" (trained at <= %zu).\n**u**: untrained/constant, the best seed's accuracy is within 2 standard errors of the\n"
       "constant predictor's, or below it; **?**: the baselines are not known, scaled against chance.\n\n| task |",
       rows[0].train_len);
    for (j = 0; j < nm; j++) MD(" %s |", find_model(mcol[j])->label);
    MD("\n|---|");
    for (j = 0; j < nm; j++) MD("---|");
    MD("\n");
    for (i = 0; i < nt; i++) {
        int capl = 0;
        for (li = 0; li < nl; li++) capl |= CAPACITY(i, li);
        MD("| %s%s", trow[i], capl ? " (capacity at" : "");
        for (li = 0; capl && li < nl; li++) if (CAPACITY(i, li)) MD(" %zu", lens[li]);
        MD("%s |", capl ? ")" : "");
        for (j = 0; j < nm; j++) {
            MD(" ");
            for (li = 0; li < nl; li++) {
                const synth_cellsum* c = &cs[CELL(i, j, li)];
                if (!c->n) MD("%s–", li ? " / " : "");
                else if (c->best_b != c->best_b) MD("%s?", li ? " / " : "");
                else MD("%s%.2f%s", li ? " / " : "", c->best_b < 0 ? 0.0 : c->best_b,
                        c->flag ? "u" : c->known ? "" : "?");
            }
            MD(" |");
        }
        MD("\n");
    }
    MD("\nPublished numbers (A = \"On Subquadratic Architectures\", secondary sources, trained at 128;\n"
       "B = Grazzi et al. Table 3, scaled, best of 3, trained at 3-40, evaluated up to 256) beside ours, scaled\n"
       "against chance as they are (u as above):\n\n"
       "| task | model | published | ours, best (median, seeds) at");
    for (li = 0; li < nl; li++) MD("%s%zu", li ? " / " : " ", lens[li]);
    MD(" |\n|---|---|---|---|\n");
    for (q = 0; q < sizeof published / sizeof published[0]; q++) {
        for (i = 0; i < nt; i++) if (!strcmp(trow[i], published[q].task)) break;
        for (j = 0; j < nm; j++) if (!strcmp(mcol[j], published[q].model)) break;
        MD("| %s | %s | %.3f at %zu (%s) |", published[q].task, find_model(published[q].model)->label,
           published[q].value, published[q].len, published[q].src);
        for (li = 0; li < nl; li++) {
            const synth_cellsum* c = i < nt && j < nm ? &cs[CELL(i, j, li)] : NULL;
            if (c && c->n) MD("%s%.2f (%.2f, %zu)%s", li ? " / " : " ", c->best, c->med, c->n, c->flag ? " u" : "");
            else MD("%s–", li ? " / " : " ");
        }
        MD(" |\n");
    }
    ml_summary = ml;   // tables (1) to (3): what --readme copies
    MD("\n## Every cell\n\nScaled against chance: the best seed, the median, their standard error over seeds;\n"
       "against the strongest baseline: the best seed with its evaluation standard error; u as above.\n\n"
       "| task | model | L | seeds | best | median | SE seeds | vs baseline (SE) | published | s/cell |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n");
    for (i = 0; i < nt; i++) for (j = 0; j < nm; j++) {
        char pub[160] = ""; size_t pl = 0;
        for (q = 0; q < sizeof published / sizeof published[0]; q++)
            if (!strcmp(published[q].task, trow[i]) && !strcmp(published[q].model, mcol[j]))
                pl += (size_t)snprintf(pub + pl, sizeof pub - pl, "%s%.3f@%zu (%s)", pl ? ", " : "", published[q].value,
                                       published[q].len, published[q].src);
        for (li = 0; li < nl; li++) {
            const synth_cellsum* c = &cs[CELL(i, j, li)];
            if (!c->n) continue;
            MD("| %s | %s | %zu%s | %zu | %.2f | %.2f |", trow[i], find_model(mcol[j])->label, lens[li],
               CAPACITY(i, li) ? " (capacity)" : "", c->n, c->best, c->med);
            if (c->seed_se == c->seed_se) MD(" %.2f |", c->seed_se); else MD(" – |");
            if (c->best_b == c->best_b)
                MD(" %.2f (%.2f)%s |", c->best_b, c->se_b, c->flag ? " u" : c->known ? "" : " ?");
            else MD(" – |");
            MD(" %s |", li == 0 ? pub : "");
            if (li == nl - 1) MD(" %.0f |\n", cs[CELL(i, j, nl - 1)].wall); else MD(" |\n");
        }
    }
    int rc = 0;
    if (ml >= mcap) { fprintf(stderr, "synth: report too large\n"); rc = 1; }
    if (!rc) rc = markers_put(mdpath, "# Length-generalisation suite: results\n\n", md, ml);
    if (!rc) printf("wrote %s (%zu rows from %s)\n", mdpath, n, o->report);
    if (!rc && o->readme && (rc = markers_put(o->readme, "", md, ml_summary)) == 0)
        printf("updated the tables in %s\n", o->readme);
    free(md);
    #undef MD
    #undef CELL
    #undef CAPACITY
    free(cs); free(tb); free(rows);
    return rc;
}

// --supported: the models whose model this build can build at the tier's shape (the CPU: all of them; the GPU
// build tries each on the GPU, and the library says on stderr why one is refused), comma-separated on one line
static int list_supported(const opts* o) {
    size_t i, n = 0;
    const mn_task* task = mn_task_find("parity");
    for (i = 0; i < N_MODELS; i++) {
        mn_config c; synth_net net; memset(&net, 0, sizeof net);
        cell_config(o, task, &models[i], 1, &c);
        if (net_init(&net, &c) == MN_OK) { printf("%s%s", n ? "," : "", models[i].name); n++; }
        net_free(&net);
    }
    printf("\n");
    return n ? 0 : 1;
}

int main(int argc, char** argv) {
    opts o; memset(&o, 0, sizeof o);
    o.cg = -1000; o.budget = NAN; o.lr = NAN;   // unset: the tier's
    o.t_start = ex_now();
    if (parse(&o, argc, argv) != 0) return 2;
    if (o.list) {
        size_t n, i; const mn_task* t = mn_task_list(&n);
        printf("tasks:\n");
        for (i = 0; i < n; i++)
            printf("  %-18s vocab %3d, metric %-8s chance %.3f  %s\n", t[i].name, t[i].vocab_size,
                   metric_name(t[i].metric),
                   t[i].chance, t[i].doc);
        printf("models:\n");
        for (i = 0; i < N_MODELS; i++)
            printf("  %-13s pattern %-12s %s%s\n", models[i].name, models[i].pattern, models[i].label,
                   models[i].gate_bias != 0 ? " (mesa_gate_bias log 19)" : "");
        return 0;
    }
    if (o.merge) return merge(&o);
    if (o.report) return report(&o);
    if (o.supported) return list_supported(&o);
#ifdef SYNTH_CUDA
    synth__tf32 = o.tf32;
    synth__delta = o.delta_rec ? MN_CUDA_DELTA_RECURRENT : MN_CUDA_DELTA_AUTO;
#else
    if (o.tf32 && !o.plan) {   // the CPU model has no TF32: its cells would carry a tier they were not run at
        fprintf(stderr, "synth: --tier gpu-tf32 trains on the GPU only (build/synth_cuda); this build plans it\n");
        return 2;
    }
#endif
    return run_grid(&o);
}
