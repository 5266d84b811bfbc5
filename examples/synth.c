// synth: the length-generalisation suite. Trains a small model (given by its mixer pattern) on a
// synthetic task at lengths up to --train_len, evaluates it at three lengths on fixed seeded sets,
// and appends one CSV row per (task, model, seed, length). The grid is resumable: finished cells
// (all their rows in the CSV) are skipped, so the same command continues an interrupted run.
//
//   ./build/synth                                    # the whole grid, 1 seed, both cores -> results/synth.csv
//   ./build/synth --tasks parity,s3 --models xlstm11,gdn_neg --seeds 1,2,3
//   ./build/synth --report results/synth.csv         # results/synth.md + one heatmap PNG per length
//                  (the tables go between the .md's synth-table markers; the text around them is kept)
//   ./build/synth --list                             # the tasks and models it knows
//
// Protocol (a small-CPU tier of the published protocols, written down in results/synth.md): d_model 64, 2 layers, 4 heads of 16, no
// positional encoding except attention's RoPE, AdamW (0.9, 0.99), weight decay 0.1, clip 1, warm-up
// 5 % then cosine to 1e-5, variable training lengths (one length drawn per batch, so a step costs
// what its length costs). Steps: the per-task table below times --budget. Each cell runs in its own
// process (fork), --jobs at a time, single-threaded inside: tiny models scale better over cells
// than over threads.
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

// ---- the models of the grid: name, mixer pattern (cycled over the layers), label as in the papers ----
typedef struct { const char *name, *pattern, *label; } synth_model;
static const synth_model models[] = {
    { "transformer",  "attn",         "Transformer" },
    { "mamba2",       "mamba2",       "Mamba-2 [0,1]" },
    { "mamba2_neg",   "mamba2_neg",   "Mamba-2 [-1,1]" },
    { "gdn",          "gdn",          "Gated DeltaNet [0,1]" },
    { "gdn_neg",      "gdn_neg",      "Gated DeltaNet [-1,1]" },
    { "deltanet_neg", "deltanet_neg", "DeltaNet [-1,1]" },
    { "xlstm10",      "mlstm",        "xLSTM[1:0]" },
    { "xlstm01",      "slstm",        "xLSTM[0:1]" },
    { "xlstm11",      "mlstm,slstm",  "xLSTM[1:1]" },   // block 0 mLSTM, block 1 sLSTM (xLSTM repo: slstm_at [1])
    { "hawk",         "hawk",         "Hawk" },
    { "mesa",         "mesa",         "MesaNet" },
    { "hawk_mesa",    "hawk,mesa",    "Hawk-Mesa" },
};
#define N_MODELS (sizeof models / sizeof models[0])

// ---- per-task training budget at --budget 1: steps x batch (a small-CPU budget; the published
// protocols train on ~6-13M tokens per cell at this tier and far more in the papers; the grid default scales it to what this CPU does in a few minutes) ----
typedef struct { const char* task; size_t steps, batch; } synth_budget;
static const synth_budget budgets[] = {
    { "parity", 3000, 32 }, { "modarith", 4000, 48 }, { "modarith_brackets", 4000, 48 }, { "z5", 2000, 32 },
    { "s3", 4000, 32 }, { "majority", 3000, 64 }, { "majority_count", 3000, 64 }, { "anbn", 3000, 32 },
    { "anbncn", 3000, 32 }, { "mqar", 3000, 32 },
};

// ---- published numbers to hold ours against (A = "On Subquadratic Architectures" at 2048,
// secondary sources; B = Grazzi et al. Table 3, scaled accuracy, lengths 40-256) ----
typedef struct { const char *task, *model; size_t len; double value; const char* src; } synth_pub;
static const synth_pub published[] = {
    { "parity", "xlstm11", 2048, 1.000, "A" }, { "s3", "xlstm11", 2048, 1.000, "A" },
    { "anbn", "xlstm10", 2048, 0.892, "A" }, { "majority_count", "xlstm10", 2048, 0.763, "A" },
    { "parity", "xlstm10", 2048, 0.0, "A" }, { "s3", "xlstm10", 2048, 0.0, "A" },
    { "parity", "gdn_neg", 128, 1.00, "A" }, { "parity", "gdn_neg", 2048, 0.472, "A" }, { "s3", "gdn_neg", 2048, 0.667, "A" },
    { "majority_count", "gdn", 2048, 0.268, "A" }, { "parity", "mamba2", 2048, 0.352, "A (max)" }, { "anbn", "mamba2", 2048, 0.241, "A" },
    { "parity", "transformer", 256, 0.022, "B" }, { "modarith", "transformer", 256, 0.031, "B" }, { "modarith_brackets", "transformer", 256, 0.067, "B" },
    { "parity", "xlstm10", 256, 0.087, "B" }, { "modarith", "xlstm10", 256, 0.040, "B" }, { "modarith_brackets", "xlstm10", 256, 0.114, "B" },
    { "parity", "xlstm01", 256, 1.000, "B" }, { "modarith", "xlstm01", 256, 0.787, "B" }, { "modarith_brackets", "xlstm01", 256, 0.178, "B" },
    { "parity", "mamba2", 256, 0.000, "B" }, { "modarith", "mamba2", 256, 0.095, "B" }, { "modarith_brackets", "mamba2", 256, 0.123, "B" },
    { "parity", "mamba2_neg", 256, 1.000, "B" }, { "modarith", "mamba2_neg", 256, 0.241, "B" }, { "modarith_brackets", "mamba2_neg", 256, 0.116, "B" },
    { "parity", "deltanet_neg", 256, 1.000, "B" }, { "modarith", "deltanet_neg", 256, 0.971, "B" }, { "modarith_brackets", "deltanet_neg", 256, 0.260, "B" },
};

typedef struct {
    const char *tasks, *models, *seeds, *out, *report, *readme, *eval_lens_s;
    size_t d_model, layers, heads, train_len, eval_n, steps, batch, jobs, eval_lens[8], n_eval_lens, curriculum;
    double lr, budget, deadline;
    int cg, list;
} opts;

static void usage(void) {
    printf("usage: synth [--tasks all|t1,t2] [--models all|m1,m2] [--seeds 1,2,3] [--out results/synth.csv]\n"
           "             [--jobs N (cells at a time, default 2)] [--budget X (scales the per-task steps, default 0.1)]\n"
           "             [--steps N --batch B (override the per-task table)] [--lr X] [--train_len L] [--eval_lens 128,512,2048]\n"
           "             [--eval_n N (sequences per evaluation length)] [--d_model N] [--layers N] [--heads N] [--cg N (Mesa CG steps)]\n"
           "             [--deadline S (start no cell after S seconds; running cells finish)]\n"
           "             [--curriculum L0 (longest training length grows from L0 to --train_len over the first half; write to its own --out)]\n"
           "       synth --report results/synth.csv [--readme FILE]   (writes results/synth_L<len>.png and the tables\n"
           "             between the synth-table markers of results/synth.md, keeping the text around them;\n"
           "             --readme: also the summary tables between FILE's markers)\n"
           "       synth --list\n");
}

static int parse_list(const char* s, size_t* out, size_t cap) {
    size_t n = 0; char* end;
    while (*s && n < cap) { out[n++] = (size_t)strtoull(s, &end, 10); if (end == s) return -1; s = *end == ',' ? end + 1 : end; }
    return (int)n;
}

static int parse(opts* o, int argc, char** argv) {
    int i;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        EX_OPT_S("--tasks", tasks) EX_OPT_S("--models", models) EX_OPT_S("--seeds", seeds) EX_OPT_S("--out", out) EX_OPT_S("--report", report) EX_OPT_S("--readme", readme) EX_OPT_S("--eval_lens", eval_lens_s)
        EX_OPT_U("--d_model", d_model) EX_OPT_U("--layers", layers) EX_OPT_U("--heads", heads) EX_OPT_U("--train_len", train_len) EX_OPT_U("--eval_n", eval_n)
        EX_OPT_U("--steps", steps) EX_OPT_U("--batch", batch) EX_OPT_U("--jobs", jobs) EX_OPT_D("--lr", lr) EX_OPT_D("--budget", budget) EX_OPT_D("--deadline", deadline) EX_OPT_U("--curriculum", curriculum)
        if (!strcmp(a, "--cg") && v) { o->cg = atoi(v); i++; continue; }
        if (!strcmp(a, "--list")) { o->list = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); exit(0); }
        fprintf(stderr, "synth: unknown or incomplete option %s\n", a);
        usage();
        return -1;
    }
    int n = parse_list(o->eval_lens_s, o->eval_lens, 8);
    if (n <= 0) { fprintf(stderr, "synth: bad --eval_lens '%s'\n", o->eval_lens_s); return -1; }
    o->n_eval_lens = (size_t)n;
    if (o->jobs == 0 || o->d_model == 0 || o->layers == 0 || o->heads == 0 || o->train_len < 8 || o->eval_n == 0 || !(o->budget > 0)) {
        fprintf(stderr, "synth: --jobs, --d_model, --layers, --heads, --eval_n, --budget must be positive, --train_len >= 8\n");
        return -1;
    }
    return 0;
}

static const synth_model* find_model(const char* name) {
    size_t i;
    for (i = 0; i < N_MODELS; i++) if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

// ---- one cell: train, evaluate, return the rows ----
typedef struct { double acc, token_acc, seq_acc, final_acc; } synth_eval;

// Accuracy at the scored positions of n_eval fixed sequences of length len. The set depends only on
// (task, len): every model and seed sees the same sequences.
static int evaluate(mn_model* m, const mn_task* task, size_t len, size_t n_eval, synth_eval* r) {
    size_t eb = 16384 / len ? 16384 / len : 1, done = 0, V = m->cfg.vocab_size, b, t, v;
    size_t tok_ok = 0, tok_n = 0, seq_ok = 0, fin_ok = 0, nseq = 0;
    int *x = (int*)malloc(eb * len * sizeof(int)), *y = (int*)malloc(eb * len * sizeof(int));
    uint64_t h = 1469598103934665603ull; const char* p;
    mn_rng rng;
    int err = MN_OK;
    for (p = task->name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;   // FNV-1a of the task name
    mn_rng_seed(&rng, h ^ (len * 0x9E3779B97F4A7C15ull));
    if (!x || !y) { free(x); free(y); return MN_ERR_ALLOC; }
    while (done < n_eval && err == MN_OK) {
        size_t nb = n_eval - done < eb ? n_eval - done : eb;
        for (b = 0; b < nb; b++) mn_task_sample(task, &rng, len, x + b * len, y + b * len);
        if ((err = mn_forward(m, x, NULL, nb, len, NULL)) != MN_OK) break;
        const mn_real* logits = mn_logits(m);
        for (b = 0; b < nb; b++) {
            int all = 1, last = -1, any = 0;
            for (t = 0; t < len; t++) {
                const int tgt = y[b * len + t];
                if (tgt < 0) continue;
                const mn_real* l = logits + (b * len + t) * V;
                size_t best = 0;
                for (v = 1; v < V; v++) if (l[v] > l[best]) best = v;
                const int ok = (int)best == tgt;
                tok_ok += (size_t)ok; tok_n++; all &= ok; last = ok; any = 1;
            }
            if (!any) continue;
            seq_ok += (size_t)all; fin_ok += (size_t)last; nseq++;
        }
        done += nb;
    }
    free(x); free(y);
    if (err != MN_OK) return err;
    r->token_acc = tok_n ? (double)tok_ok / (double)tok_n : NAN;
    r->seq_acc = nseq ? (double)seq_ok / (double)nseq : NAN;
    r->final_acc = nseq ? (double)fin_ok / (double)nseq : NAN;
    r->acc = task->metric == MN_METRIC_TOKEN ? r->token_acc : task->metric == MN_METRIC_SEQUENCE ? r->seq_acc : r->final_acc;
    return MN_OK;
}

static const char* metric_name(int m) { return m == MN_METRIC_TOKEN ? "token" : m == MN_METRIC_SEQUENCE ? "sequence" : "final"; }

// Appends text to the CSV under an exclusive lock (several cells finish at once); writes the header
// first if the file is new.
static int append_rows(const char* path, const char* text) {
    static const char* header = "task,model,pattern,seed,train_len,eval_len,metric,chance,acc,scaled,token_acc,seq_acc,final_acc,"
                                "n_eval,steps,batch,lr,train_loss,diverged,wall_s,train_tok_s,mesa_cg,curriculum\n";
    FILE* f = fopen(path, "a");
    if (!f) return -1;
    flock(fileno(f), LOCK_EX);
    fseek(f, 0, SEEK_END);
    if (ftell(f) == 0) fputs(header, f);
    fputs(text, f);
    fflush(f);
    flock(fileno(f), LOCK_UN);
    fclose(f);
    return 0;
}

static void cell_budget(const opts* o, const mn_task* task, size_t* steps, size_t* batch) {
    size_t i;
    *steps = 1000; *batch = 32;
    for (i = 0; i < sizeof budgets / sizeof budgets[0]; i++)
        if (!strcmp(budgets[i].task, task->name)) { *steps = budgets[i].steps; *batch = budgets[i].batch; }
    *steps = (size_t)(*steps * o->budget + 0.5);
    if (o->steps) *steps = o->steps;
    if (o->batch) *batch = o->batch;
    if (*steps < 1) *steps = 1;
}

static int run_cell(const opts* o, const mn_task* task, const synth_model* sm, size_t seed, int show) {
    mn_config c; memset(&c, 0, sizeof c);
    mn_model m;
    size_t steps, batch, step, i, maxlen = o->train_len;
    for (i = 0; i < o->n_eval_lens; i++) if (o->eval_lens[i] > maxlen) maxlen = o->eval_lens[i];
    cell_budget(o, task, &steps, &batch);
    c.vocab_size = (size_t)task->vocab_size; c.d_model = o->d_model; c.n_layer = o->layers; c.n_head = o->heads;
    c.max_seq_len = maxlen; c.pattern = sm->pattern; c.seed = 1000 + seed;
    // d_k = 16: CG reaches the exact solve in at most 16 steps (in exact arithmetic), so --cg 16 is the
    // exact-solve reference (MesaNet with an exact linear solve) at CG's cost
    c.mesa_cg_train = o->cg; c.mesa_cg_decode = o->cg;
    int err = mn_model_init(&m, &c);
    if (err != MN_OK) { fprintf(stderr, "synth: %s/%s: bad config: %s\n", task->name, sm->name, mn_strerror(err)); return 1; }
    int *x = (int*)malloc(batch * o->train_len * sizeof(int)), *y = (int*)malloc(batch * o->train_len * sizeof(int));
    if (!x || !y) { free(x); free(y); mn_model_free(&m); return 1; }
    // the training stream depends on (task, seed) only, not on the model: every mixer sees the same data
    mn_rng rng; const char* p; uint64_t h = 0;
    for (p = task->name; *p; p++) h = h * 131 + (unsigned char)*p;
    mn_rng_seed(&rng, h * 0x9E3779B97F4A7C15ull + seed);
    mn_adamw hp = { 0.9, 0.99, 1e-8, 0.1 };
    size_t warm = steps / 20 ? steps / 20 : 1, tokens = 0;
    double t0 = ex_now(), tlast = t0, loss_acc = 0, train_loss = NAN; size_t nacc = 0;
    long diverged = -1;
    for (step = 0; step < steps; step++) {
        // length curriculum (--curriculum L0): the longest training length grows linearly from L0 to
        // --train_len over the first half of the steps, then stays; 0 = off (every step up to train_len)
        size_t Lmax = o->train_len;
        if (o->curriculum && o->curriculum < o->train_len && step < steps / 2)
            Lmax = o->curriculum + (o->train_len - o->curriculum) * step / (steps / 2);
        size_t T = mn_task_train_len(task, &rng, Lmax), b;
        if (T == 0) T = mn_task_train_len(task, &rng, o->train_len);   // Lmax below the task's shortest length
        mn_real loss;
        for (b = 0; b < batch; b++) mn_task_sample(task, &rng, T, x + b * T, y + b * T);
        err = mn_forward(&m, x, y, batch, T, &loss);
        if (err == MN_OK) { mn_zero_grad(&m); err = mn_backward(&m); }
        double gn = err == MN_OK ? mn_clip_grad_norm(&m, 1.0) : NAN;
        if (err != MN_OK || gn != gn || loss != loss) { diverged = (long)step; break; }   // keep the last finite weights
        mn_adamw_step(&m, mn_lr_schedule(step, warm, steps, o->lr, 1e-5), &hp);
        tokens += batch * T;
        loss_acc += loss; nacc++;
        if (step + 1 == steps || nacc == 50) { train_loss = loss_acc / (double)nacc; loss_acc = 0; nacc = 0; }
        double now = ex_now();
        if (show && (now - tlast > 0.3 || step + 1 == steps)) {
            fprintf(stderr, "\r  %s %s seed %zu: step %zu/%zu | loss %.4f | %.0f tok/s   ", task->name, sm->name, seed, step + 1, steps,
                    (double)loss, (double)tokens / (now - t0));
            tlast = now;
        }
    }
    if (show) fprintf(stderr, "\n");
    double train_s = ex_now() - t0;
    char rows[4096], pat[128]; size_t off = 0;
    rows[0] = 0;
    snprintf(pat, sizeof pat, "%s", sm->pattern);
    for (i = 0; pat[i]; i++) if (pat[i] == ',') pat[i] = '+';   // CSV-safe: mlstm,slstm -> mlstm+slstm
    for (i = 0; i < o->n_eval_lens && err != MN_ERR_ALLOC; i++) {
        synth_eval r;
        size_t L = o->eval_lens[i];
        if ((err = evaluate(&m, task, L, o->eval_n, &r)) != MN_OK) {
            fprintf(stderr, "synth: %s/%s: evaluation at %zu failed: %s\n", task->name, sm->name, L, mn_strerror(err));
            break;
        }
        double scaled = (r.acc - task->chance) / (1.0 - task->chance);
        off += (size_t)snprintf(rows + off, sizeof rows - off, "%s,%s,%s,%zu,%zu,%zu,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%zu,%zu,%zu,%g,%.6f,%ld,%.1f,%.0f,%d,%zu\n",
                                task->name, sm->name, pat, seed, o->train_len, L, metric_name(task->metric), task->chance, r.acc, scaled,
                                r.token_acc, r.seq_acc, r.final_acc, o->eval_n, steps, batch, o->lr, train_loss, diverged,
                                ex_now() - t0, (double)tokens / train_s, strstr(sm->pattern, "mesa") ? o->cg : 0, o->curriculum);
    }
    free(x); free(y); mn_model_free(&m);
    if (i < o->n_eval_lens) return 1;
    if (append_rows(o->out, rows) != 0) { fprintf(stderr, "synth: cannot append to %s\n", o->out); return 1; }
    return 0;
}

// ---- the grid: cells not yet in the CSV, run --jobs at a time in child processes ----
typedef struct { const mn_task* task; const synth_model* model; size_t seed; } synth_cell;

// Counts the rows the CSV holds for one cell; a cell is done when it has one per evaluation length.
static size_t rows_in_csv(const char* csv, size_t len, const char* task, const char* model, size_t seed) {
    char key[256]; size_t n = 0, kl = (size_t)snprintf(key, sizeof key, "%s,%s,", task, model);
    const char* p = csv;
    while (p && *p) {
        if (!strncmp(p, key, kl)) {
            const char* q = strchr(p + kl, ',');   // skip the pattern field; the seed follows
            if (q && (size_t)strtoull(q + 1, NULL, 10) == seed) n++;
        }
        p = memchr(p, '\n', (size_t)(csv + len - p));
        if (p) p++;
    }
    return n;
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

// Whether name is in the comma-separated list ("all" holds every name).
static int in_list(const char* list, const char* name) {
    char l[1024], key[128];
    if (!strcmp(list, "all")) return 1;
    snprintf(l, sizeof l, ",%s,", list);
    snprintf(key, sizeof key, ",%s,", name);
    return strstr(l, key) != NULL;
}

static int run_grid(const opts* o) {
    synth_cell cells[4096]; size_t n = 0, i, j, k, seeds[64];
    int ns = parse_list(o->seeds, seeds, 64);
    size_t csv_len; char* csv = read_file(o->out, &csv_len);
    size_t ntask; const mn_task* tasks = mn_task_list(&ntask);
    char buf[1024];
    if (ns <= 0) { fprintf(stderr, "synth: bad --seeds '%s'\n", o->seeds); free(csv); return 2; }
    // validate the names first: an unknown one is an error before anything runs
    for (k = 0; k < 2; k++) {
        const char* list = k == 0 ? o->tasks : o->models;
        if (!strcmp(list, "all")) continue;
        snprintf(buf, sizeof buf, "%s", list);
        char* s; for (s = strtok(buf, ","); s; s = strtok(NULL, ","))
            if (k == 0 ? mn_task_find(s) == NULL : find_model(s) == NULL) {
                fprintf(stderr, "synth: unknown %s '%s' (synth --list)\n", k == 0 ? "task" : "model", s); free(csv); return 2;
            }
    }
    size_t skipped = 0;
    for (i = 0; i < ntask; i++) {
        if (!in_list(o->tasks, tasks[i].name)) continue;
        for (j = 0; j < N_MODELS; j++) {
            if (!in_list(o->models, models[j].name)) continue;
            for (k = 0; k < (size_t)ns; k++) {
                if (csv && rows_in_csv(csv, csv_len, tasks[i].name, models[j].name, seeds[k]) >= o->n_eval_lens) { skipped++; continue; }
                if (n < sizeof cells / sizeof cells[0]) { cells[n].task = &tasks[i]; cells[n].model = &models[j]; cells[n].seed = seeds[k]; n++; }
            }
        }
    }
    free(csv);
    printf("synth: %zu cells to run (%zu already in %s), %zu at a time; d_model %zu, %zu layers, %zu heads; train <= %zu; eval at",
           n, skipped, o->out, o->jobs, o->d_model, o->layers, o->heads, o->train_len);
    for (i = 0; i < o->n_eval_lens; i++) printf(" %zu", o->eval_lens[i]);
    printf(" (%zu sequences each)\n", o->eval_n);
    fflush(stdout);
    if (o->jobs == 1) {   // in-process, with a live progress line
        int bad = 0; double t1 = ex_now();
        for (i = 0; i < n; i++) {
            double t = ex_now();
            if (o->deadline > 0 && t - t1 > o->deadline) { printf("synth: deadline reached, %zu cells left\n", n - i); break; }
            bad |= run_cell(o, cells[i].task, cells[i].model, cells[i].seed, isatty(2));
            printf("[%zu/%zu] %s %s seed %zu: %.1f s\n", i + 1, n, cells[i].task->name, cells[i].model->name, cells[i].seed, ex_now() - t);
            fflush(stdout);
        }
        return bad ? 1 : 0;
    }
    pid_t pids[256]; size_t who[256], running = 0, next = 0, done = 0; double started[256], t0 = ex_now(), cell_s = 0;
    int bad = 0;
    while (done < n) {
        if (o->deadline > 0 && ex_now() - t0 > o->deadline && next < n) {
            printf("synth: deadline of %.0f s reached, %zu cells left for the next run\n", o->deadline, n - next);
            n = next;   // the loop ends once the running cells finish
            if (done >= n) break;
        }
        while (running < o->jobs && running < 256 && next < n) {
            fflush(stdout); fflush(stderr);
            pid_t pid = fork();
            if (pid == 0) {
#ifdef _OPENMP
                omp_set_num_threads(1);
#endif
#if defined(MN_USE_BLAS)
                openblas_set_num_threads(1);
#endif
                _exit(run_cell(o, cells[next].task, cells[next].model, cells[next].seed, 0));
            }
            if (pid < 0) { perror("synth: fork"); return 1; }
            pids[running] = pid; who[running] = next; started[running] = ex_now(); running++; next++;
        }
        int status; pid_t pid = wait(&status);
        if (pid < 0) break;
        for (i = 0; i < running; i++) if (pids[i] == pid) break;
        if (i == running) continue;
        size_t c = who[i]; double el = ex_now() - started[i];
        pids[i] = pids[running - 1]; who[i] = who[running - 1]; started[i] = started[running - 1]; running--;
        done++; cell_s += el;
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        bad |= !ok;
        double eta = cell_s / (double)done * (double)(n - done) / (double)o->jobs;
        printf("[%zu/%zu] %-18s %-13s seed %zu: %s in %.0f s | elapsed %.0f s, ETA %.0f min\n", done, n, cells[c].task->name,
               cells[c].model->name, cells[c].seed, ok ? "done" : "FAILED", el, ex_now() - t0, eta / 60.0);
        fflush(stdout);
    }
    return bad ? 1 : 0;
}

// ---- report: results/synth.md (tables) and a heatmap per evaluation length ----
typedef struct { char task[32], model[32]; size_t seed, len, train_len; double scaled, acc, chance, wall; char metric[16]; } synth_row;

static int cmp_double(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }

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
// not exist yet is created as head + the markers around body. markers_check has passed.
static int markers_put(const char* path, const char* head, const char* body, size_t n) {
    size_t l; char* t = read_file(path, &l);
    char *m0 = t ? strstr(t, synth_mark0) : NULL, *m1 = m0 ? strstr(m0, synth_mark1) : NULL;
    FILE* g = fopen(path, "w");
    if (!g) { fprintf(stderr, "synth: cannot write %s\n", path); free(t); return 1; }
    if (m1) fwrite(t, 1, (size_t)(m0 - t), g); else fputs(head, g);
    fprintf(g, "%s\n", synth_mark0);
    fwrite(body, 1, n, g);
    fputs(m1 ? m1 : synth_mark1, g);
    if (!m1) fputc('\n', g);
    fclose(g);
    free(t);
    return 0;
}

static int report(const opts* o) {
    size_t len, n = 0, cap = 0, i, j, k, li;
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
    char* line = strtok(csv, "\n");
    for (; line; line = strtok(NULL, "\n")) {
        synth_row r; char* f[32]; size_t nf = 0; char* p = line;
        if (!strncmp(line, "task,", 5)) continue;
        while (nf < 32) { f[nf++] = p; p = strchr(p, ','); if (!p) break; *p++ = 0; }
        if (nf < 22 || !find_model(f[1])) continue;
        snprintf(r.task, sizeof r.task, "%s", f[0]); snprintf(r.model, sizeof r.model, "%s", f[1]);
        r.seed = (size_t)strtoull(f[3], NULL, 10); r.train_len = (size_t)strtoull(f[4], NULL, 10); r.len = (size_t)strtoull(f[5], NULL, 10);
        snprintf(r.metric, sizeof r.metric, "%s", f[6]);
        r.chance = strtod(f[7], NULL); r.acc = strtod(f[8], NULL); r.scaled = strtod(f[9], NULL); r.wall = strtod(f[19], NULL);
        if (n == cap) { cap = cap ? 2 * cap : 256; rows = (synth_row*)realloc(rows, cap * sizeof *rows); if (!rows) { free(csv); return 1; } }
        rows[n++] = r;
    }
    free(csv);
    if (n == 0) { fprintf(stderr, "synth: no rows in %s\n", o->report); free(rows); return 1; }
    // the evaluation lengths present, ascending; tasks and models in the grid's order
    size_t lens[8], nl = 0, ntask; const mn_task* tasks = mn_task_list(&ntask);
    for (i = 0; i < n; i++) {
        for (j = 0; j < nl; j++) if (lens[j] == rows[i].len) break;
        if (j == nl && nl < 8) lens[nl++] = rows[i].len;
    }
    for (i = 1; i < nl; i++) for (j = i; j > 0 && lens[j - 1] > lens[j]; j--) { size_t t = lens[j]; lens[j] = lens[j - 1]; lens[j - 1] = t; }
    const char* trow[32]; const char* mcol[N_MODELS]; size_t nt = 0, nm = 0;
    for (i = 0; i < ntask && nt < 32; i++) for (k = 0; k < n; k++) if (!strcmp(rows[k].task, tasks[i].name)) { trow[nt++] = tasks[i].name; break; }
    for (i = 0; i < N_MODELS; i++) for (k = 0; k < n; k++) if (!strcmp(rows[k].model, models[i].name)) { mcol[nm++] = models[i].name; break; }

    // best and median scaled accuracy over seeds, per (task, model, length)
    #define CELL(t, m, l) ((t) * nm * nl + (m) * nl + (l))
    double* best = (double*)malloc(nt * nm * nl * sizeof(double));
    double* med = (double*)malloc(nt * nm * nl * sizeof(double));
    double* wall = (double*)calloc(nt * nm, sizeof(double));
    size_t* cnt = (size_t*)calloc(nt * nm * nl, sizeof(size_t));
    double vals[64];
    if (!best || !med || !wall || !cnt) { free(best); free(med); free(wall); free(cnt); free(rows); return 1; }
    for (i = 0; i < nt; i++) for (j = 0; j < nm; j++) for (li = 0; li < nl; li++) {
        size_t nv = 0; double w = 0;
        for (k = 0; k < n; k++)
            if (rows[k].len == lens[li] && !strcmp(rows[k].task, trow[i]) && !strcmp(rows[k].model, mcol[j]) && nv < 64) {
                vals[nv++] = rows[k].scaled; w += rows[k].wall;
            }
        qsort(vals, nv, sizeof(double), cmp_double);
        cnt[CELL(i, j, li)] = nv;
        best[CELL(i, j, li)] = nv ? vals[nv - 1] : NAN;
        med[CELL(i, j, li)] = nv ? (nv % 2 ? vals[nv / 2] : 0.5 * (vals[nv / 2 - 1] + vals[nv / 2])) : NAN;
        if (li == nl - 1 && nv) wall[i * nm + j] = w / (double)nv;   // wall_s of the last length = the whole cell
    }

    // heatmaps: task x model, best scaled accuracy over seeds, one PNG per evaluation length
    const char* mlabel[N_MODELS];
    for (j = 0; j < nm; j++) mlabel[j] = find_model(mcol[j])->name;
    float* hv = (float*)malloc(nt * nm * sizeof(float));
    for (li = 0; hv && li < nl; li++) {
        char title[128];
        for (i = 0; i < nt; i++) for (j = 0; j < nm; j++) hv[i * nm + j] = (float)best[CELL(i, j, li)];
        snprintf(title, sizeof title, "scaled accuracy, best of seeds, length %zu (trained <= %zu)", lens[li], rows[0].train_len);
        snprintf(path, sizeof path, "%s_L%zu.png", base, lens[li]);
#ifndef SYNTH_NO_PNG
        if (mn_plot_heatmap(path, title, hv, nt, nm, trow, mlabel, 0.0f, 1.0f) != 0) fprintf(stderr, "synth: cannot write %s\n", path);
        else printf("wrote %s\n", path);
#else
        (void)mlabel; (void)title;
#endif
    }
    free(hv);

    // markdown: (1) task x model matrix, "best at each length"; (2) every published number beside
    // ours; (3) one row per (task, model) with best (median, seeds) per length and the time per cell
    size_t mcap = 262144, ml = 0, q, ml_summary;
    char* md = (char*)malloc(mcap);
    if (!md) { free(best); free(med); free(wall); free(cnt); free(rows); return 1; }
    #define MD(...) (ml += (size_t)snprintf(md + ml, ml < mcap ? mcap - ml : 0, __VA_ARGS__))
    MD("Generated by `./build/synth --report %s` from %zu rows.\n\n", o->report, n);
    MD("Scaled accuracy (1 = perfect, 0 = chance), best over seeds; each cell is");
    for (li = 0; li < nl; li++) MD("%s%zu", li ? " / " : " L = ", lens[li]);
    MD(" (trained at <= %zu).\n\n| task |", rows[0].train_len);
    for (j = 0; j < nm; j++) MD(" %s |", find_model(mcol[j])->label);
    MD("\n|---|");
    for (j = 0; j < nm; j++) MD("---|");
    MD("\n");
    for (i = 0; i < nt; i++) {
        MD("| %s |", trow[i]);
        for (j = 0; j < nm; j++) {
            MD(" ");
            for (li = 0; li < nl; li++) {
                size_t c = CELL(i, j, li);
                if (cnt[c]) MD("%s%.2f", li ? " / " : "", best[c] < 0 ? 0.0 : best[c]);   // below chance reads as 0
                else MD("%s–", li ? " / " : "");
            }
            MD(" |");
        }
        MD("\n");
    }
    MD("\nPublished numbers (A = \"On Subquadratic Architectures\", secondary sources, trained at 128; "
       "B = Grazzi et al. Table 3, scaled, best of 3, trained at 3-40, evaluated up to 256) beside ours:\n\n"
       "| task | model | published | ours, best (median, seeds) at");
    for (li = 0; li < nl; li++) MD("%s%zu", li ? " / " : " ", lens[li]);
    MD(" |\n|---|---|---|---|\n");
    for (q = 0; q < sizeof published / sizeof published[0]; q++) {
        for (i = 0; i < nt; i++) if (!strcmp(trow[i], published[q].task)) break;
        for (j = 0; j < nm; j++) if (!strcmp(mcol[j], published[q].model)) break;
        MD("| %s | %s | %.3f at %zu (%s) |", published[q].task, find_model(published[q].model)->label, published[q].value, published[q].len, published[q].src);
        for (li = 0; li < nl; li++) {
            if (i < nt && j < nm && cnt[CELL(i, j, li)]) MD("%s%.2f (%.2f, %zu)", li ? " / " : " ", best[CELL(i, j, li)], med[CELL(i, j, li)], cnt[CELL(i, j, li)]);
            else MD("%s–", li ? " / " : " ");
        }
        MD(" |\n");
    }
    ml_summary = ml;   // tables (1) and (2): what --readme copies
    MD("\n## Every cell\n\n| task | model |");
    for (li = 0; li < nl; li++) MD(" L=%zu best (median, seeds) |", lens[li]);
    MD(" published | s/cell |\n|---|---|");
    for (li = 0; li < nl; li++) MD("---|");
    MD("---|---|\n");
    for (i = 0; i < nt; i++) for (j = 0; j < nm; j++) {
        char pub[160] = ""; size_t pl = 0;
        for (q = 0; q < sizeof published / sizeof published[0]; q++)
            if (!strcmp(published[q].task, trow[i]) && !strcmp(published[q].model, mcol[j]))
                pl += (size_t)snprintf(pub + pl, sizeof pub - pl, "%s%.3f@%zu (%s)", pl ? ", " : "", published[q].value,
                                       published[q].len, published[q].src);
        MD("| %s | %s |", trow[i], find_model(mcol[j])->label);
        for (li = 0; li < nl; li++) {
            size_t c = CELL(i, j, li);
            if (cnt[c]) MD(" %.2f (%.2f, %zu) |", best[c], med[c], cnt[c]);
            else MD(" – |");
        }
        MD(" %s | %.0f |\n", pub[0] ? pub : "", wall[i * nm + j]);
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
    free(best); free(med); free(wall); free(cnt); free(rows);
    return rc;
}

int main(int argc, char** argv) {
    opts o; memset(&o, 0, sizeof o);
    o.tasks = "all"; o.models = "all"; o.seeds = "1"; o.out = "results/synth.csv"; o.eval_lens_s = "128,512,2048";
    o.d_model = 64; o.layers = 2; o.heads = 4; o.train_len = 128; o.eval_n = 256; o.jobs = 2; o.lr = 3e-3; o.budget = 0.1; o.cg = 16;
    if (parse(&o, argc, argv) != 0) return 2;
    if (o.list) {
        size_t n, i; const mn_task* t = mn_task_list(&n);
        printf("tasks:\n");
        for (i = 0; i < n; i++) printf("  %-18s vocab %3d, metric %-8s chance %.3f  %s\n", t[i].name, t[i].vocab_size, metric_name(t[i].metric), t[i].chance, t[i].doc);
        printf("models:\n");
        for (i = 0; i < N_MODELS; i++) printf("  %-13s pattern %-12s %s\n", models[i].name, models[i].pattern, models[i].label);
        return 0;
    }
    if (o.report) return report(&o);
    return run_grid(&o);
}
