// train: a byte-level language model on any text, with any mixer pattern.
//
//   ./build/train                                   # built-in default: Debian's license texts
//   ./build/train --data book.txt --pattern attn --steps 2000 --out runs/book
//   ./build/train --resume runs/book --steps 4000   # continue exactly where it stopped
//   ./build/train --plot runs/gpu                   # redraw runs/gpu/loss.png from its loss.csv
//
// Every --eval_every steps it measures the held-out loss (last 10% of the text), saves a checkpoint,
// appends to <out>/loss.csv and redraws <out>/loss.png. At the end it generates a sample with the
// recurrent step.
//
// The checkpoint (mesanet.h >>io has the details) is the set config.json + model.safetensors +
// optimizer.safetensors in <out>, which fla's from_pretrained(<out>) also reads. A save writes the new
// set into a fresh folder beside <out> and exchanges the two in one step, so a kill at any moment, a
// full disk or a failed write leaves <out> holding the previous set or the new one, whole; every file
// carries the set's stamp and a set whose stamps differ is refused on load. No checkpoint is written
// when the validation loss or a parameter is not finite. <out>/train.lock (flock) keeps a second
// trainer out of the folder while one runs. The run's data and optimisation settings are stored with
// the optimizer state: --resume takes them, and the architecture, from the checkpoint, refuses a flag
// that contradicts the architecture or the data (text, --seq, --batch, --seed, --eval_batches), and
// lets --steps, --lr, --warmup, --wd, --clip and --eval_every change, saying so.
//
// Exit status: 0 every requested step and save happened; 1 an input or output failed (data, checkpoint
// load or save: the message has the system's reason); 2 a bad command line (unknown option, a number
// out of range, a flag contradicting --resume); 3 training diverged (non-finite loss, gradient or
// parameters): stopped, and the last checkpoint written is the last good state; 4 another trainer
// holds --out.
#define MESANET_IMPLEMENTATION
#include "common.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>

// Test hook (tests/test_cli.sh): MN_TEST_SAVE_KILL=N:S kills this process (SIGKILL, nothing runs after)
// at stage S of its N-th save (the stages are listed in mesanet.h >>io); MN_TEST_SAVE_PAUSE_MS=X sleeps
// X ms at every stage, so that a kill sent from outside lands inside a save.
static int save_count;
static void save_hook(int stage) {
    const char *k = getenv("MN_TEST_SAVE_KILL"), *p = getenv("MN_TEST_SAVE_PAUSE_MS");
    int n, s;
    if (stage == 1) save_count++;
    if (p) {
        struct timespec ts; long ms = atol(p);
        ts.tv_sec = ms / 1000; ts.tv_nsec = (ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
    }
    if (k && sscanf(k, "%d:%d", &n, &s) == 2 && n == save_count && s == stage) raise(SIGKILL);
}
#define MN_SAVE_HOOK(stage) save_hook(stage)
#include "../mesanet.h"
#define MN_PLOT_IMPLEMENTATION
#include "plot.h"
#include <stddef.h>

enum { RC_OK = 0, RC_IO = 1, RC_USAGE = 2, RC_DIVERGED = 3, RC_LOCKED = 4 };

typedef struct {
    const char *data, *out, *resume, *pattern, *prompt, *plot;
    size_t d_model, layers, heads, d_ff, seq, batch, steps, warmup, eval_every, eval_batches, sample_len, top_k, window,
           chunk;
    double lr, lr_min_frac, wd, clip, temp, top_p, softcap, cg_tol, gate_bias;
    int cg, cg_decode, clamp, cg_fla, overwrite, cg_warm;
    uint64_t seed;
    unsigned char given[64];   // given[i]: option i of the table below was on the command line
} opts;

// The options: kind s string, z size_t, d double, i int, u uint64; range [lo, hi] (lo_open: > lo);
// role a = architecture (config.json), d = data (stored), o = optimisation (stored; a resume may change
// it), r = run length (stored; a resume may extend it), x = neither.
typedef struct { const char* name; char kind, role; size_t off; double lo, hi; int lo_open; } opt_def;
#define O(name, kind, role, field, lo, hi, open) { name, kind, role, offsetof(opts, field), lo, hi, open }
static const opt_def defs[] = {
    O("--data", 's', 'd', data, 0, 0, 0), O("--out", 's', 'x', out, 0, 0, 0), O("--resume", 's', 'x', resume, 0, 0, 0),
    O("--plot", 's', 'x', plot, 0, 0, 0), O("--pattern", 's', 'a', pattern, 0, 0, 0),
    O("--prompt", 's', 'x', prompt, 0, 0, 0),
    O("--d_model", 'z', 'a', d_model, 1, 65536, 0), O("--layers", 'z', 'a', layers, 1, MN_MAX_LAYERS, 0),
    O("--heads", 'z', 'a', heads, 1, 4096, 0), O("--d_ff", 'z', 'a', d_ff, 1, 1 << 20, 0),
    O("--window", 'z', 'a', window, 1, 1 << 24, 0), O("--softcap", 'd', 'a', softcap, 0, 1e6, 0),
    O("--cg", 'i', 'a', cg, 1, 1000, 0), O("--cg_decode", 'i', 'a', cg_decode, 1, 1000, 0),
    O("--cg_tol", 'd', 'a', cg_tol, 0, 0.5, 0), O("--chunk", 'z', 'a', chunk, 1, 4096, 0),
    O("--gamma_clamp", 'i', 'a', clamp, 0, 1, 0), O("--cg_fla", 'i', 'a', cg_fla, 0, 1, 0),
    O("--cg_warm", 'i', 'a', cg_warm, 0, 6, 0), O("--gate_bias", 'd', 'x', gate_bias, -50, 50, 0),
    O("--overwrite", 'i', 'x', overwrite, 0, 1, 0),
    O("--seq", 'z', 'd', seq, 1, 1 << 24, 0), O("--batch", 'z', 'd', batch, 1, 1u << 31, 0),
    O("--seed", 'u', 'd', seed, 0, 0, 0), O("--eval_batches", 'z', 'd', eval_batches, 1, 1 << 20, 0),
    O("--steps", 'z', 'r', steps, 1, 1e12, 0), O("--lr", 'd', 'o', lr, 0, 1e30, 1),
    O("--warmup", 'z', 'o', warmup, 0, 1e12, 0), O("--wd", 'd', 'o', wd, 0, 1e30, 0),
    O("--clip", 'd', 'o', clip, 0, 1e30, 0), O("--eval_every", 'z', 'o', eval_every, 1, 1e12, 0),
    O("--sample", 'z', 'x', sample_len, 0, 1e7, 0), O("--temp", 'd', 'x', temp, 0, 1e3, 0),
    O("--top_k", 'z', 'x', top_k, 0, 1 << 24, 0), O("--top_p", 'd', 'x', top_p, 0, 1, 0),
};
#undef O
#define N_DEFS (sizeof defs / sizeof defs[0])

static void usage(FILE* f) {
    fprintf(f, "usage: train [--data FILE|DIR] [--out DIR] [--resume DIR] [--pattern attn,swa,...]\n"
           "             [--d_model N] [--layers N] [--heads N] [--d_ff N] [--window N] [--seq T] [--batch B]\n"
           "             [--steps N] [--lr X] [--warmup N] [--wd X] [--clip X (0: no clipping)] [--softcap X]\n"
           "             [--eval_every N] [--eval_batches N] [--seed N]\n"
           "             Mesa layers: [--cg N (training CG steps)] [--cg_decode N] "
           "[--cg_tol EPS (dynamic stop when decoding)]\n"
           "                          [--chunk C] [--gamma_clamp 0|1] [--cg_fla 0|1 (fla's CG arithmetic)]\n"
           "                          [--cg_warm 0-6 (decoding CG start: 0 x0 = 0, 1 Jacobi, 2-4 warm,\n"
           "                           5, 6 Woodbury on the last 8, 16 tokens)]\n"
           "                          [--gate_bias X (initial forget-gate bias; log 19 = 2.944: gamma ~0.95)]\n"
           "             [--sample N] [--prompt TEXT] [--temp X] [--top_k N] [--top_p X]\n"
           "             [--overwrite 1 (start afresh in an --out that holds a checkpoint)]\n"
           "       train --plot DIR   (only redraws DIR/loss.png from DIR/loss.csv, e.g. one cuda/train_cuda wrote)\n"
           "exit status: 0 done, 1 input/output failed, 2 bad command line, 3 diverged (last good checkpoint kept),\n"
           "             4 another trainer holds --out\n");
}

static int find_def(const char* name) {
    size_t i;
    for (i = 0; i < N_DEFS; i++) if (!strcmp(defs[i].name, name)) return (int)i;
    return -1;
}
// Stores one option's value after checking it is a number of its kind inside its range.
static int set_opt(opts* o, const opt_def* d, const char* v) {
    char* base = (char*)o + d->off;
    double x = 0;
    if (d->kind == 's') { *(const char**)(void*)base = v; return 0; }
    if (d->kind == 'u') return ex_parse_u64(d->name, v, UINT64_MAX, (uint64_t*)(void*)base);
    if (d->kind == 'z') { size_t z; if (ex_parse_size(d->name, v, &z)) return -1; x = (double)z; }
    else if (d->kind == 'i') { int k; if (ex_parse_int(d->name, v, (long)d->lo, (long)d->hi, &k)) return -1; x = k; }
    else if (ex_parse_double(d->name, v, &x)) return -1;
    if (x < d->lo || x > d->hi || (d->lo_open && x <= d->lo)) {
        fprintf(stderr, "train: %s %s is out of range: it must be %s %.15g and <= %.15g\n", d->name, v,
                d->lo_open ? ">" : ">=", d->lo, d->hi);
        return -1;
    }
    if (d->kind == 'z') *(size_t*)(void*)base = (size_t)x;
    else if (d->kind == 'i') *(int*)(void*)base = (int)x;
    else *(double*)(void*)base = x;
    return 0;
}
static int parse(opts* o, int argc, char** argv) {
    int i;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        int k;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
        if ((k = find_def(a)) < 0) { fprintf(stderr, "train: unknown option %s\n", a); usage(stderr); return -1; }
        if (i + 1 >= argc) { fprintf(stderr, "train: option %s needs a value\n", a); return -1; }
        if (set_opt(o, &defs[k], argv[++i])) return -1;
        o->given[k] = 1;
    }
    return 0;
}
static int given(const opts* o, const char* name) { int k = find_def(name); return k >= 0 && o->given[k]; }

// The settings a resume must reuse, as one line in the checkpoint's notes (data= last: a path may have spaces).
static uint64_t fnv1a(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull; size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ull; }
    return h;
}
static int write_settings(char* out, size_t cap, const opts* o, const unsigned char* text, size_t len) {
    int n = snprintf(out, cap, "train/1 data_len=%zu data_fnv=%016llx seq=%zu batch=%zu seed=%llu eval_batches=%zu "
                     "steps=%zu lr=%.17g warmup=%zu wd=%.17g clip=%.17g eval_every=%zu lr_min_frac=%.17g data=%s", len,
                     (unsigned long long)fnv1a(text, len), o->seq, o->batch, (unsigned long long)o->seed,
                     o->eval_batches, o->steps, o->lr, o->warmup, o->wd, o->clip, o->eval_every, o->lr_min_frac,
                     o->data);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}
// The value of key= in a settings line (up to the next space; data= to the end); NULL if absent.
static const char* setting(const char* s, const char* key, char* buf, size_t cap) {
    size_t kl = strlen(key), n;
    const char* p = s;
    while ((p = strstr(p, key)) != NULL) {
        if ((p == s || p[-1] == ' ') && p[kl] == '=') {
            p += kl + 1;
            n = strcmp(key, "data") ? strcspn(p, " ") : strlen(p);
            if (n + 1 > cap) return NULL;
            memcpy(buf, p, n); buf[n] = 0;
            return buf;
        }
        p += kl;
    }
    return NULL;
}

// Fills a batch of B windows of T+1 bytes from text[lo, hi): inputs are bytes 0..T-1, targets 1..T.
// The caller guarantees hi - lo >= T + 2, so every span below is at least 1.
static void get_batch(int* tok, int* tgt, const unsigned char* text, size_t lo, size_t hi, size_t B, size_t T,
                      mn_rng* r, int fixed) {
    size_t b, t;
    for (b = 0; b < B; b++) {
        size_t span = hi - lo - T - 1, off;
        if (fixed) off = lo + (span * b) / (B > 1 ? B - 1 : 1);
        else if (span <= 0xFFFFFFFFu) off = lo + (size_t)(mn_rng_u32(r) % (uint32_t)span);
        else off = lo + (size_t)((((uint64_t)mn_rng_u32(r) << 32) | mn_rng_u32(r)) % span);   // texts over 4 GB
        for (t = 0; t < T; t++) { tok[b * T + t] = text[off + t]; tgt[b * T + t] = text[off + t + 1]; }
    }
}

// Redraws loss.png from loss.csv (which survives resumes, so the curve covers the whole run).
static int plot_losses(const char* dir) {
    char path[1100], png[1100], line[256];
    static float xs[2][4096], ys[2][4096]; size_t n[2] = { 0, 0 };
    FILE* f;
    snprintf(path, sizeof path, "%s/loss.csv", dir);
    if (!(f = fopen(path, "r"))) { fprintf(stderr, "train: cannot read %s: %s\n", path, strerror(errno)); return -1; }
    while (fgets(line, sizeof line, f)) {
        double step, tr, va;
        if (sscanf(line, "%lf,%lf,%lf", &step, &tr, &va) != 3) continue;
        if (n[0] < 4096) { xs[0][n[0]] = (float)step; ys[0][n[0]++] = (float)tr; }
        if (va == va && n[1] < 4096) { xs[1][n[1]] = (float)step; ys[1][n[1]++] = (float)va; }
    }
    fclose(f);
    mn_plot_series s[2] = { { "train loss (mean since last eval)", xs[0], ys[0], n[0], 0 },
                            { "validation loss", xs[1], ys[1], n[1], 0 } };
    mn_plot_opts po; memset(&po, 0, sizeof po);
    po.title = "mesanet: byte-level LM"; po.xlabel = "step"; po.ylabel = "cross-entropy (nats/byte)";
    snprintf(png, sizeof png, "%s/loss.png", dir);
    if (mn_plot_lines(png, &po, s, 2) != 0) { fprintf(stderr, "train: could not write %s\n", png); return -1; }
    return 0;
}

// On resume: loss.csv keeps only the lines up to the checkpoint's step (later ones describe training
// that the checkpoint does not contain); rewritten through a temporary file and a rename.
static int trim_csv(const char* csv, size_t step) {
    char tmp[1200], line[512];
    FILE *f = fopen(csv, "r"), *g;
    int dropped = 0, ok = 1;
    if (!f && errno == ENOENT) {   // resumed into another folder: a new loss.csv
        if (!(g = fopen(csv, "w"))) return -1;
        ok = fprintf(g, "step,train_loss,val_loss,lr,tokens_per_s\n") > 0;
        return fclose(g) == 0 && ok ? 0 : -1;
    }
    if (!f) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", csv);
    if (!(g = fopen(tmp, "w"))) { fclose(f); return -1; }
    while (fgets(line, sizeof line, f)) {
        double s;
        if (sscanf(line, "%lf,", &s) == 1 && s > (double)step) { dropped++; continue; }
        ok &= fputs(line, g) >= 0;
    }
    fclose(f);
    ok &= fclose(g) == 0;
    if (!ok || (dropped ? rename(tmp, csv) : remove(tmp)) != 0) { remove(tmp); return -1; }
    return 0;
}

static double evaluate(mn_model* m, const unsigned char* text, size_t lo, size_t hi, const opts* o, int* tok, int* tgt,
                       int* err) {
    size_t i; double sum = 0; mn_real loss;
    for (i = 0; i < o->eval_batches; i++) {
        // fixed, evenly spaced windows: the same validation set at every evaluation
        size_t sub = (hi - lo) / o->eval_batches;
        get_batch(tok, tgt, text, lo + i * sub, lo + (i + 1) * sub, o->batch, o->seq, NULL, 1);
        if ((*err = mn_forward(m, tok, tgt, o->batch, o->seq, &loss)) != MN_OK) return NAN;
        sum += loss;
    }
    return sum / (double)o->eval_batches;
}

static void generate(mn_model* m, const opts* o, mn_rng* r) {
    mn_state st; size_t i, V = m->cfg.vocab_size;
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    const char* p = o->prompt;
    int tok = 0;
    if (!logits || mn_state_init(&st, m, 1) != MN_OK) {
        free(logits);
        fprintf(stderr, "train: no sample: out of memory\n");
        return;
    }
    printf("---- sample (temperature %.2f, top-k %zu, top-p %.2f) ----\n%s", o->temp, o->top_k, o->top_p, p);
    for (i = 0; p[i]; i++) { tok = (unsigned char)p[i]; if (mn_step(m, &st, &tok, logits) != MN_OK) break; }
    // with attention layers, stop at the trained context length: RoPE does not extrapolate beyond it
    int has_attn = strstr(m->cfg.pattern, "attn") || strstr(m->cfg.pattern, "swa");
    for (i = 0; i < o->sample_len && (!has_attn || st.pos < o->seq); i++) {
        tok = mn_sample(logits, V, o->temp, o->top_k, o->top_p, r, logits + V);
        putchar((tok >= 32 && tok < 127) || tok == '\n' ? tok : '?');
        if (mn_step(m, &st, &tok, logits) != MN_OK) break;
    }
    printf("\n----\n");
    if (strstr(m->cfg.pattern, "mesa"))
        printf("generation: %.1f CG steps per token, head and Mesa layer on average "
               "(at most %d, stop at relative residual %g)\n",
               mn_state_cg_stats(m, &st, NULL), m->cfg.mesa_cg_decode, m->cfg.mesa_cg_tol);
    mn_state_free(&st);
    free(logits);
}

// An exclusive flock on <dir>/train.lock, held until the process ends (mn_save carries the file into
// each new checkpoint folder as a hard link, so the lock stays on it). Returns 0 or an exit code.
static int lock_out(const char* dir) {
    char path[1100], who[32] = "";
    ssize_t n;
    int fd;
    snprintf(path, sizeof path, "%s/train.lock", dir);
    if ((fd = open(path, O_RDWR | O_CREAT, 0644)) < 0) {
        fprintf(stderr, "train: cannot open %s: %s\n", path, strerror(errno));
        return RC_IO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e != EWOULDBLOCK) {
            fprintf(stderr, "train: cannot lock %s: %s\n", path, strerror(e));
            close(fd);
            return RC_IO;
        }
        if ((n = read(fd, who, sizeof who - 1)) > 0) who[n] = 0;
        who[strcspn(who, "\n")] = 0;
        fprintf(stderr, "train: %s is in use by another trainer (pid %s); not touching it\n", dir,
                who[0] ? who : "unknown");
        close(fd);
        return RC_LOCKED;
    }
    if (ftruncate(fd, 0) == 0) dprintf(fd, "%ld\n", (long)getpid());   // who holds it, for the message above
    return RC_OK;                                                      // fd stays open: the lock lives with it
}

// --resume: the checkpoint's architecture and stored settings win; a flag may agree, or (optimisation,
// run length) replace a stored value with a note; anything else that differs is refused.
static int apply_resume(opts* o, const mn_model* m, const char* notes, const char* dir) {
    const mn_config* c = &m->cfg;
    char buf[1024];
    size_t i;
    struct { const char* flag; double have, want; } arch[] = {
        { "--d_model", (double)c->d_model, (double)o->d_model }, { "--layers", (double)c->n_layer, (double)o->layers },
        { "--heads", (double)c->n_head, (double)o->heads }, { "--d_ff", (double)c->d_ff, (double)o->d_ff },
        { "--window", (double)c->window, (double)o->window }, { "--softcap", c->logit_softcap, o->softcap },
        { "--cg", c->mesa_cg_train, o->cg }, { "--cg_decode", c->mesa_cg_decode, o->cg_decode },
        { "--cg_tol", c->mesa_cg_tol, o->cg_tol },
        { "--chunk", (double)c->mesa_chunk, (double)o->chunk }, { "--gamma_clamp", c->mesa_gamma_clamp, o->clamp },
        { "--cg_fla", c->mesa_cg_fla, o->cg_fla }, { "--cg_warm", c->mesa_cg_warm, o->cg_warm },
    };
    for (i = 0; i < sizeof arch / sizeof arch[0]; i++)
        if (given(o, arch[i].flag) && arch[i].have != arch[i].want) {
            fprintf(stderr, "train: %s %g contradicts the checkpoint in %s (%g): drop the flag to resume it, or start "
                    "a new run elsewhere\n", arch[i].flag, arch[i].want, dir, arch[i].have);
            return RC_USAGE;
        }
    if (given(o, "--pattern") && strcmp(o->pattern, c->pattern)) {
        fprintf(stderr, "train: --pattern %s contradicts the checkpoint in %s (%s)\n", o->pattern, dir, c->pattern);
        return RC_USAGE;
    }
    if (!notes[0]) {
        printf("note: %s has no stored training settings (an older checkpoint): using this command line's\n", dir);
        return RC_OK;
    }
    if (strncmp(notes, "train/1 ", 8)) {
        fprintf(stderr, "train: %s: unknown training settings '%.40s...'\n", dir, notes);
        return RC_IO;
    }
    for (i = 0; i < N_DEFS; i++) {
        const opt_def* d = &defs[i];
        char now[64];
        if ((d->role != 'd' && d->role != 'o' && d->role != 'r') || !strcmp(d->name, "--data")) continue;
        if (!setting(notes, d->name + 2, buf, sizeof buf)) {
            fprintf(stderr, "train: %s: stored settings lack %s\n", dir, d->name + 2);
            return RC_IO;
        }
        if (!o->given[i]) { opts tmp = *o; if (set_opt(&tmp, d, buf)) return RC_IO; *o = tmp; continue; }
        // given: compare as numbers in the stored formatting
        {
            const void* f = (const char*)o + d->off;
            if (d->kind == 'd') snprintf(now, sizeof now, "%.17g", *(const double*)f);
            else if (d->kind == 'u') snprintf(now, sizeof now, "%llu", (unsigned long long)*(const uint64_t*)f);
            else snprintf(now, sizeof now, "%zu", *(const size_t*)f);
        }
        if (!strcmp(now, buf)) continue;
        if (d->role == 'd') {
            fprintf(stderr, "train: %s %s contradicts the checkpoint in %s (trained with %s %s): drop the flag to "
                    "resume it\n", d->name, now, dir, d->name, buf);
            return RC_USAGE;
        }
        printf("note: %s %g replaces the checkpoint's %g\n", d->name, strtod(now, NULL), strtod(buf, NULL));
    }
    if (!given(o, "--data")) {
        static char stored[1024];
        if (!setting(notes, "data", stored, sizeof stored)) {
            fprintf(stderr, "train: %s: stored settings lack data\n", dir);
            return RC_IO;
        }
        o->data = stored;
    }
    return RC_OK;
}
// The text must be the one the checkpoint was trained on (same length and FNV-1a hash), wherever it is now.
static int check_resume_data(const opts* o, const char* notes, const unsigned char* text, size_t len, const char* dir) {
    char a[64], b[64], want[64];
    if (!notes[0]) return RC_OK;
    snprintf(want, sizeof want, "%016llx", (unsigned long long)fnv1a(text, len));
    if (!setting(notes, "data_len", a, sizeof a) || !setting(notes, "data_fnv", b, sizeof b)) {
        fprintf(stderr, "train: %s: stored settings lack the data's fingerprint\n", dir);
        return RC_IO;
    }
    if ((size_t)strtoull(a, NULL, 10) == len && !strcmp(b, want)) return RC_OK;
    fprintf(stderr, "train: %s (%zu bytes) is not the text the checkpoint in %s was trained on (%s bytes, another "
            "hash)%s\n", o->data, len, dir, a, given(o, "--data") ? ": drop --data to use the stored path"
            : ": it changed since; pass --data with the original text");
    return RC_USAGE;
}

// One checkpoint at step; returns 0 or the exit code to stop with.
static int save_checkpoint(mn_model* m, const opts* o, mn_train_meta* meta, double val, size_t step,
                           uint64_t* last_saved) {
    int err;
    char prev[64];
    if (*last_saved == UINT64_MAX) snprintf(prev, sizeof prev, "no checkpoint was written before");
    else snprintf(prev, sizeof prev, "the checkpoint there stays at step %llu", (unsigned long long)*last_saved);
    if (!isfinite(val)) {
        fprintf(stderr, "train: step %zu: validation loss %g is not finite: not saving to %s; %s\n", step, val,
                o->out, prev);
        return RC_DIVERGED;
    }
    meta->step = step; meta->extra[0] = val;
    if ((err = mn_save(m, o->out, meta)) != MN_OK) {
        fprintf(stderr, "train: step %zu: checkpoint not saved (%s, see above); %s\n", step, mn_strerror(err), prev);
        return err == MN_ERR_NAN ? RC_DIVERGED : RC_IO;
    }
    *last_saved = step;
    return RC_OK;
}

int main(int argc, char** argv) {
    opts o; memset(&o, 0, sizeof o);
    o.data = "/usr/share/common-licenses"; o.out = "runs/default"; o.pattern = "mesa"; o.prompt = "This License ";
    // MesaNet by default: 10 CG steps in training (the paper, App. G.7: enough for its gains; fla
    // uses 30), 30 at most when generating with the paper's dynamic stop at relative residual 1e-4
    o.cg = 10; o.cg_decode = 30; o.cg_tol = 1e-4;
    o.d_model = 128; o.layers = 4; o.heads = 4; o.seq = 256; o.batch = 8; o.steps = 400; o.lr = 3e-3;
    o.lr_min_frac = 0.1;
    o.warmup = 50; o.wd = 0.1; o.clip = 1.0; o.eval_every = 50; o.eval_batches = 4; o.sample_len = 200;
    o.temp = 0.8; o.top_p = 0.95; o.seed = 1;
    if (parse(&o, argc, argv) != 0) return RC_USAGE;
    if (o.plot) return plot_losses(o.plot) ? RC_IO : RC_OK;

    mn_model m; mn_train_meta meta; memset(&meta, 0, sizeof meta);
    mn_rng rng; mn_rng_seed(&rng, o.seed);
    int err, rc = RC_OK, have_model = 0;
    struct stat st;
    if (o.resume) {
        if (!given(&o, "--out")) o.out = o.resume;
        // the folder exists: take its lock before reading it (a trainer running there is writing it)
        if (stat(o.out, &st) == 0 && (rc = lock_out(o.out)) != RC_OK) return rc;
        if ((err = mn_load(&m, o.resume, &meta)) != MN_OK) {
            fprintf(stderr, "train: cannot resume from %s: %s\n", o.resume, mn_strerror(err));
            return RC_IO;
        }
        have_model = 1;
        if ((rc = apply_resume(&o, &m, meta.notes, o.resume)) != RC_OK) { mn_model_free(&m); return rc; }
        rng.s = meta.rng_state;
        if (meta.step >= o.steps) {
            fprintf(stderr, "train: the checkpoint in %s is at step %llu already: pass --steps N with N > %llu to "
                    "continue it\n", o.resume, (unsigned long long)meta.step, (unsigned long long)meta.step);
            mn_model_free(&m); return RC_USAGE;
        }
    }
    // sizes: one batch must fit the library's 2^31 tokens and the validation slices must hold a window
    if (o.batch > ((size_t)1 << 31) / o.seq) {
        fprintf(stderr, "train: --batch %zu x --seq %zu = more than 2^31 tokens per batch\n", o.batch, o.seq);
        if (have_model) mn_model_free(&m);
        return RC_USAGE;
    }
    unsigned char* text; size_t len;
    if (ex_read_text(o.data, &text, &len) != 0) {
        fprintf(stderr, "train: need a readable text at %s%s\n", o.data,
                o.resume && !given(&o, "--data") ? " (the path the checkpoint stored)" : "");
        if (have_model) mn_model_free(&m);
        free(text);
        return RC_IO;
    }
    size_t split = len - len / 10;   // train on the first 90%, validate on the last 10%
    if (split < o.seq + 2 || (len - split) / o.eval_batches < o.seq + 2) {
        fprintf(stderr, "train: %s has %zu bytes: its validation part (the last 10%%, %zu bytes) in %zu "
                "--eval_batches slices is %zu bytes per slice, fewer than --seq + 2 = %zu; use a longer text, fewer "
                "--eval_batches or a shorter --seq\n",
                o.data, len, len - split, o.eval_batches, (len - split) / o.eval_batches, o.seq + 2);
        if (have_model) mn_model_free(&m);
        free(text); return RC_USAGE;
    }
    if (o.resume && (rc = check_resume_data(&o, meta.notes, text, len, o.resume)) != RC_OK) {
        mn_model_free(&m); free(text);
        return rc;
    }
    if (write_settings(meta.notes, sizeof meta.notes, &o, text, len)) {
        fprintf(stderr, "train: the --data path is too long to store with the checkpoint\n");
        if (have_model) mn_model_free(&m);
        free(text); return RC_USAGE;
    }
    if (!o.resume) {
        mn_config c; memset(&c, 0, sizeof c);
        c.vocab_size = 256; c.d_model = o.d_model; c.n_layer = o.layers; c.n_head = o.heads; c.d_ff = o.d_ff;
        c.max_seq_len = o.seq > 512 ? o.seq : 512; c.pattern = o.pattern; c.window = o.window;
        c.logit_softcap = o.softcap; c.seed = o.seed;
        c.mesa_cg_train = o.cg; c.mesa_cg_decode = o.cg_decode; c.mesa_cg_tol = o.cg_tol; c.mesa_chunk = o.chunk;
        c.mesa_gamma_clamp = o.clamp;
        c.mesa_cg_fla = o.cg_fla; c.mesa_cg_warm = o.cg_warm;
        c.mesa_gate_bias = o.gate_bias;   // initialisation only: a resume keeps the trained bias
        if ((err = mn_model_init(&m, &c)) != MN_OK) {
            fprintf(stderr, "train: bad model config: %s\n", mn_strerror(err));
            free(text);
            return RC_USAGE;
        }
    }
    if (o.seq > m.cfg.max_seq_len) {
        fprintf(stderr, "train: --seq %zu exceeds the model's max_seq_len %zu\n", o.seq, m.cfg.max_seq_len);
        mn_model_free(&m); free(text); return RC_USAGE;
    }
    size_t N = o.batch * o.seq;
    {   // a lower bound of the activations a batch needs (residual stream, logits, each block's norms and MLP;
        // forward and backward copies): refuse what the machine cannot hold before allocating anything
        const mn_config* c = &m.cfg;
        double per_tok = (double)((c->n_layer + 2) * c->d_model + c->vocab_size
                                  + c->n_layer * (5 * c->d_model + 3 * c->d_ff));
        double need = 2.0 * (double)N * per_tok * sizeof(mn_real);
        double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (have > 0 && need > have) {
            fprintf(stderr, "train: a batch of %zu x %zu tokens needs at least %.1f GB of activations; this machine "
                    "has %.1f GB\n", o.batch, o.seq, need / 1e9, have / 1e9);
            mn_model_free(&m); free(text); return RC_IO;
        }
    }
    int *tok = (int*)malloc(N * sizeof(int)), *tgt = (int*)malloc(N * sizeof(int));
    if (!tok || !tgt) {
        fprintf(stderr, "train: no memory for a batch of %zu x %zu tokens\n", o.batch, o.seq);
        free(tok); free(tgt); mn_model_free(&m); free(text); return RC_IO;
    }
    if (!o.resume && !o.overwrite) {   // a fresh run never replaces a checkpoint it was not told to replace
        char cfgp[1100];
        snprintf(cfgp, sizeof cfgp, "%s/config.json", o.out);
        if (stat(cfgp, &st) == 0) {
            fprintf(stderr, "train: %s holds a checkpoint: --resume %s continues it, --overwrite 1 starts afresh "
                    "there\n", o.out, o.out);
            free(tok); free(tgt); mn_model_free(&m); free(text); return RC_USAGE;
        }
    }
    if (stat(o.out, &st) != 0 || !o.resume) {   // a new folder (or a fresh run into an existing one): create, then lock
        if (ex_mkdirs(o.out) != 0) {
            fprintf(stderr, "train: cannot create %s: %s\n", o.out, strerror(errno));
            rc = RC_IO;
        }
        else rc = lock_out(o.out);
        if (rc != RC_OK) { free(tok); free(tgt); mn_model_free(&m); free(text); return rc; }
    }
    printf("model: pattern %s, %zu layers, d_model %zu, %zu heads of %zu, d_ff %zu | %zu parameters (%.2f M)\n",
           m.cfg.pattern, m.cfg.n_layer, m.cfg.d_model, m.cfg.n_head, m.cfg.head_dim, m.cfg.d_ff, m.n_trainable,
           m.n_trainable / 1e6);
    if (strstr(m.cfg.pattern, "mesa"))
        printf("mesa: %d CG steps in training, %d in decoding (stop at relative residual %g), chunk %zu%s\n",
               m.cfg.mesa_cg_train, m.cfg.mesa_cg_decode, m.cfg.mesa_cg_tol, m.cfg.mesa_chunk,
               m.cfg.mesa_gamma_clamp ? ", gamma clamp" : "");
    printf("data: %s, %zu bytes (%zu train, %zu validation) | batch %zu x %zu tokens | %zu steps\n", o.data, len,
           split, len - split, o.batch, o.seq, o.steps);
    if (o.resume) printf("resumed %s at step %llu\n", o.resume, (unsigned long long)meta.step);

    char csv[1100]; snprintf(csv, sizeof csv, "%s/loss.csv", o.out);
    FILE* f = NULL;
    int csv_ok;
    if (o.resume) csv_ok = trim_csv(csv, (size_t)meta.step) == 0;
    else {
        csv_ok = (f = fopen(csv, "w")) != NULL && fprintf(f, "step,train_loss,val_loss,lr,tokens_per_s\n") > 0;
        if (f && fclose(f) != 0) csv_ok = 0;
    }
    if (!csv_ok) {
        fprintf(stderr, "train: cannot write %s: %s\n", csv, strerror(errno));
        free(tok); free(tgt); mn_model_free(&m); free(text); return RC_IO;
    }
    size_t step0 = (size_t)meta.step;
    uint64_t last_saved = o.resume ? meta.step : UINT64_MAX;
    double t0 = ex_now(), tlast = t0, acc = 0, val = NAN; size_t nacc = 0, step;
    int tty = isatty(2);
    mn_adamw hp = { 0.9, 0.98, 1e-8, o.wd };
    for (step = (size_t)meta.step; step < o.steps; step++) {
        mn_real loss = NAN;
        double lr = mn_lr_schedule(step, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
        get_batch(tok, tgt, text, 0, split, o.batch, o.seq, &rng, 0);
        err = mn_forward(&m, tok, tgt, o.batch, o.seq, &loss);
        if (err == MN_OK) { mn_zero_grad(&m); err = mn_backward(&m); }
        double gn = err == MN_OK ? mn_clip_grad_norm(&m, o.clip) : NAN;
        if (err == MN_OK && gn == gn) err = mn_adamw_step(&m, lr, &hp);
        if (err != MN_OK || gn != gn) {
            // stop without saving: the last checkpoint on disk stays the last good state
            char prev[1200];
            if (last_saved == UINT64_MAX) snprintf(prev, sizeof prev, "no checkpoint was written");
            else snprintf(prev, sizeof prev, "the checkpoint in %s (step %llu) is the last good state", o.out,
                          (unsigned long long)last_saved);
            fprintf(stderr, "\ntrain: step %zu: %s (loss %g, grad norm %g); stopping: %s\n",
                    step, err ? mn_strerror(err) : "non-finite gradient", (double)loss, gn, prev);
            rc = err == MN_OK || err == MN_ERR_NAN ? RC_DIVERGED : RC_IO; break;
        }
        acc += loss; nacc++;
        double now = ex_now(), tps = (double)N * (double)(step + 1 - step0) / (now - t0);
        char eta[32]; ex_fmt_time(eta, sizeof eta, (double)(o.steps - step - 1) * (double)N / tps);
        if (tty && (now - tlast > 0.2 || step + 1 == o.steps)) {
            fprintf(stderr, "\rstep %5zu/%zu | loss %.4f | lr %.2e | %7.0f tok/s | ETA %s   ", step + 1, o.steps,
                    (double)loss, lr, tps, eta);
            tlast = now;
        }
        if ((step + 1) % o.eval_every == 0 || step + 1 == o.steps) {
            int eerr = MN_OK;
            val = evaluate(&m, text, split, len, &o, tok, tgt, &eerr);
            if (tty) fprintf(stderr, "\n");
            printf("step %5zu | train %.4f | val %.4f | %.0f tok/s | %.1f s\n", step + 1, acc / nacc, val, tps,
                   now - t0);
            fflush(stdout);
            meta.rng_state = rng.s;
            if (eerr != MN_OK && eerr != MN_ERR_NAN) {
                fprintf(stderr, "train: evaluation failed: %s\n", mn_strerror(eerr));
                rc = RC_IO;
                break;
            }
            // the log line first: a resume drops lines past its checkpoint, so a kill or a failed save
            // between the two never leaves the log short of what the checkpoint holds
            int line_ok = (f = fopen(csv, "a")) != NULL;
            if (f) {
                int w = fprintf(f, "%zu,%.6f,%.6f,%.6g,%.1f\n", step + 1, acc / nacc, val, lr, tps) > 0;
                line_ok = fclose(f) == 0 && w;
            }
            if (!line_ok) { fprintf(stderr, "train: cannot append to %s: %s\n", csv, strerror(errno)); rc = RC_IO; }
            acc = 0; nacc = 0;
            {
                int src = save_checkpoint(&m, &o, &meta, val, step + 1, &last_saved);
                if (src != RC_OK) { rc = src; break; }
            }
            if (rc != RC_OK) break;
            plot_losses(o.out);   // a picture of loss.csv: failing to draw it is reported, not fatal
        }
    }
    if (rc == RC_OK) {
        if (o.sample_len) { mn_rng gr; mn_rng_seed(&gr, o.seed + 1000); generate(&m, &o, &gr); }
        printf("final validation loss %.4f nats/byte (%.3f bits/byte); checkpoint and loss.png in %s\n", val,
               val / log(2.0), o.out);
    }
    free(tok); free(tgt); free(text);
    mn_model_free(&m);
    return rc;
}
