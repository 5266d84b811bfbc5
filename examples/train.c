// train: a byte-level language model on any text, with any mixer pattern.
//
//   ./build/train                                   # built-in default: Debian's license texts
//   ./build/train --data book.txt --pattern attn --steps 2000 --out runs/book
//   ./build/train --resume runs/book --steps 4000   # continue exactly where it stopped
//   ./build/train --plot runs/gpu                   # redraw runs/gpu/loss.png from its loss.csv
//
// Every --eval_every steps it measures the held-out loss (last 10% of the text), appends to
// <out>/loss.csv, redraws <out>/loss.png and saves a checkpoint (<out>/model.safetensors,
// config.json, optimizer state). At the end it generates a sample with the recurrent step.
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"
#define MN_PLOT_IMPLEMENTATION
#include "plot.h"
#include <unistd.h>

typedef struct {
    const char *data, *out, *resume, *pattern, *prompt, *plot;
    size_t d_model, layers, heads, d_ff, seq, batch, steps, warmup, eval_every, eval_batches, sample_len, top_k, window, chunk;
    double lr, lr_min_frac, wd, clip, temp, top_p, softcap, cg_tol;
    int cg, cg_decode, clamp;
    uint64_t seed;
} opts;

static void usage(void) {
    printf("usage: train [--data FILE|DIR] [--out DIR] [--resume DIR] [--pattern attn,swa,...]\n"
           "             [--d_model N] [--layers N] [--heads N] [--d_ff N] [--window N] [--seq T] [--batch B]\n"
           "             [--steps N] [--lr X] [--warmup N] [--wd X] [--clip X] [--softcap X]\n"
           "             [--eval_every N] [--eval_batches N] [--seed N]\n"
           "             Mesa layers: [--cg N (training CG steps)] [--cg_decode N] [--cg_tol EPS (dynamic stop when decoding)]\n"
           "                          [--chunk C] [--gamma_clamp 0|1]\n"
           "             [--sample N] [--prompt TEXT] [--temp X] [--top_k N] [--top_p X]\n"
           "       train --plot DIR   (only redraws DIR/loss.png from DIR/loss.csv, e.g. one cuda/train_cuda wrote)\n");
}

static int parse(opts* o, int argc, char** argv) {
    int i;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        EX_OPT_S("--data", data) EX_OPT_S("--out", out) EX_OPT_S("--resume", resume) EX_OPT_S("--pattern", pattern) EX_OPT_S("--prompt", prompt) EX_OPT_S("--plot", plot)
        EX_OPT_U("--d_model", d_model) EX_OPT_U("--layers", layers) EX_OPT_U("--heads", heads) EX_OPT_U("--d_ff", d_ff) EX_OPT_U("--seq", seq)
        EX_OPT_U("--batch", batch) EX_OPT_U("--steps", steps) EX_OPT_U("--warmup", warmup) EX_OPT_U("--eval_every", eval_every)
        EX_OPT_U("--eval_batches", eval_batches) EX_OPT_U("--sample", sample_len) EX_OPT_U("--top_k", top_k) EX_OPT_U("--window", window)
        EX_OPT_D("--lr", lr) EX_OPT_D("--wd", wd) EX_OPT_D("--clip", clip) EX_OPT_D("--temp", temp) EX_OPT_D("--top_p", top_p) EX_OPT_D("--softcap", softcap)
        if (!strcmp(a, "--seed") && v) { o->seed = strtoull(v, NULL, 10); i++; continue; }
        if (!strcmp(a, "--cg") && v) { o->cg = atoi(v); i++; continue; }
        if (!strcmp(a, "--cg_decode") && v) { o->cg_decode = atoi(v); i++; continue; }
        if (!strcmp(a, "--gamma_clamp") && v) { o->clamp = atoi(v); i++; continue; }
        EX_OPT_D("--cg_tol", cg_tol) EX_OPT_U("--chunk", chunk)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); exit(0); }
        fprintf(stderr, "train: unknown or incomplete option %s\n", a);
        usage();
        return -1;
    }
    return 0;
}

// Fills a batch of B windows of T+1 bytes from text[lo, hi): inputs are bytes 0..T-1, targets 1..T.
static void get_batch(int* tok, int* tgt, const unsigned char* text, size_t lo, size_t hi, size_t B, size_t T, mn_rng* r, int fixed) {
    size_t b, t;
    for (b = 0; b < B; b++) {
        size_t span = hi - lo - T - 1;
        size_t off = lo + (fixed ? (span * b) / (B > 1 ? B - 1 : 1) : (size_t)(mn_rng_u32(r) % (uint32_t)span));
        for (t = 0; t < T; t++) { tok[b * T + t] = text[off + t]; tgt[b * T + t] = text[off + t + 1]; }
    }
}

// Redraws loss.png from loss.csv (which survives resumes, so the curve covers the whole run).
static void plot_losses(const char* dir) {
    char path[1100], png[1100], line[256];
    float xs[2][4096], ys[2][4096]; size_t n[2] = { 0, 0 };
    FILE* f;
    snprintf(path, sizeof path, "%s/loss.csv", dir);
    if (!(f = fopen(path, "r"))) return;
    while (fgets(line, sizeof line, f)) {
        double step, tr, va;
        if (sscanf(line, "%lf,%lf,%lf", &step, &tr, &va) != 3) continue;
        if (n[0] < 4096) { xs[0][n[0]] = (float)step; ys[0][n[0]++] = (float)tr; }
        if (va == va && n[1] < 4096) { xs[1][n[1]] = (float)step; ys[1][n[1]++] = (float)va; }
    }
    fclose(f);
    mn_plot_series s[2] = { { "train loss (mean since last eval)", xs[0], ys[0], n[0], 0 }, { "validation loss", xs[1], ys[1], n[1], 0 } };
    mn_plot_opts po; memset(&po, 0, sizeof po);
    po.title = "mesanet: byte-level LM"; po.xlabel = "step"; po.ylabel = "cross-entropy (nats/byte)";
    snprintf(png, sizeof png, "%s/loss.png", dir);
    if (mn_plot_lines(png, &po, s, 2) != 0) fprintf(stderr, "train: could not write %s\n", png);
}

static double evaluate(mn_model* m, const unsigned char* text, size_t lo, size_t hi, const opts* o, int* tok, int* tgt) {
    size_t i; double sum = 0; mn_real loss;
    for (i = 0; i < o->eval_batches; i++) {
        // fixed, evenly spaced windows: the same validation set at every evaluation
        size_t sub = (hi - lo) / o->eval_batches;
        get_batch(tok, tgt, text, lo + i * sub, lo + (i + 1) * sub, o->batch, o->seq, NULL, 1);
        if (mn_forward(m, tok, tgt, o->batch, o->seq, &loss) != MN_OK) return NAN;
        sum += loss;
    }
    return sum / (double)o->eval_batches;
}

static void generate(mn_model* m, const opts* o, mn_rng* r) {
    mn_state st; size_t i, V = m->cfg.vocab_size;
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    const char* p = o->prompt;
    int tok = 0;
    if (!logits || mn_state_init(&st, m, 1) != MN_OK) { free(logits); return; }
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
        printf("generation: %.1f CG steps per token, head and Mesa layer on average (at most %d, stop at relative residual %g)\n",
               mn_state_cg_stats(m, &st, NULL), m->cfg.mesa_cg_decode, m->cfg.mesa_cg_tol);
    mn_state_free(&st);
    free(logits);
}

int main(int argc, char** argv) {
    opts o; memset(&o, 0, sizeof o);
    o.data = "/usr/share/common-licenses"; o.out = "runs/default"; o.pattern = "mesa"; o.prompt = "This License ";
    // MesaNet by default: 10 CG steps in training (the paper, App. G.7: enough for its gains; fla
    // uses 30), 30 at most when generating with the paper's dynamic stop at relative residual 1e-4
    o.cg = 10; o.cg_decode = 30; o.cg_tol = 1e-4;
    o.d_model = 128; o.layers = 4; o.heads = 4; o.seq = 256; o.batch = 8; o.steps = 400; o.lr = 3e-3; o.lr_min_frac = 0.1;
    o.warmup = 50; o.wd = 0.1; o.clip = 1.0; o.eval_every = 50; o.eval_batches = 4; o.sample_len = 200;
    o.temp = 0.8; o.top_p = 0.95; o.seed = 1;
    if (parse(&o, argc, argv) != 0) return 2;
    if (o.plot) { plot_losses(o.plot); return 0; }

    unsigned char* text; size_t len;
    if (ex_read_text(o.data, &text, &len) != 0 || len < 20 * (o.seq + 2)) {
        fprintf(stderr, "train: need a readable text of at least %zu bytes at %s\n", 20 * (o.seq + 2), o.data);
        return 1;
    }
    size_t split = len - len / 10;   // train on the first 90%, validate on the last 10%

    mn_model m; mn_train_meta meta; memset(&meta, 0, sizeof meta);
    mn_rng rng; mn_rng_seed(&rng, o.seed);
    int err;
    if (o.resume) {
        if ((err = mn_load(&m, o.resume, &meta)) != MN_OK) { fprintf(stderr, "train: cannot resume from %s: %s\n", o.resume, mn_strerror(err)); return 1; }
        rng.s = meta.rng_state;
        if (o.out == NULL || !strcmp(o.out, "runs/default")) o.out = o.resume;
        printf("resumed %s at step %llu\n", o.resume, (unsigned long long)meta.step);
    } else {
        mn_config c; memset(&c, 0, sizeof c);
        c.vocab_size = 256; c.d_model = o.d_model; c.n_layer = o.layers; c.n_head = o.heads; c.d_ff = o.d_ff;
        c.max_seq_len = o.seq > 512 ? o.seq : 512; c.pattern = o.pattern; c.window = o.window; c.logit_softcap = o.softcap; c.seed = o.seed;
        c.mesa_cg_train = o.cg; c.mesa_cg_decode = o.cg_decode; c.mesa_cg_tol = o.cg_tol; c.mesa_chunk = o.chunk; c.mesa_gamma_clamp = o.clamp;
        if ((err = mn_model_init(&m, &c)) != MN_OK) { fprintf(stderr, "train: bad model config: %s\n", mn_strerror(err)); return 1; }
    }
    if (o.seq > m.cfg.max_seq_len) { fprintf(stderr, "train: --seq %zu exceeds the model's max_seq_len %zu\n", o.seq, m.cfg.max_seq_len); return 1; }
    if (ex_mkdirs(o.out) != 0) { fprintf(stderr, "train: cannot create %s\n", o.out); return 1; }
    printf("model: pattern %s, %zu layers, d_model %zu, %zu heads of %zu, d_ff %zu | %zu parameters (%.2f M)\n",
           m.cfg.pattern, m.cfg.n_layer, m.cfg.d_model, m.cfg.n_head, m.cfg.head_dim, m.cfg.d_ff, m.n_trainable, m.n_trainable / 1e6);
    if (strstr(m.cfg.pattern, "mesa"))
        printf("mesa: %d CG steps in training, %d in decoding (stop at relative residual %g), chunk %zu%s\n", m.cfg.mesa_cg_train,
               m.cfg.mesa_cg_decode, m.cfg.mesa_cg_tol, m.cfg.mesa_chunk, m.cfg.mesa_gamma_clamp ? ", gamma clamp" : "");
    printf("data: %s, %zu bytes (%zu train, %zu validation) | batch %zu x %zu tokens | %zu steps\n", o.data, len, split, len - split, o.batch, o.seq, o.steps);

    size_t N = o.batch * o.seq;
    int *tok = (int*)malloc(N * sizeof(int)), *tgt = (int*)malloc(N * sizeof(int));
    char csv[1100]; snprintf(csv, sizeof csv, "%s/loss.csv", o.out);
    if (!o.resume) { FILE* f = fopen(csv, "w"); if (f) { fprintf(f, "step,train_loss,val_loss,lr,tokens_per_s\n"); fclose(f); } }
    size_t step0 = (size_t)meta.step;
    double t0 = ex_now(), tlast = t0, acc = 0, val = NAN; size_t nacc = 0, step;
    int tty = isatty(2), rc = 0;
    mn_adamw hp = { 0.9, 0.98, 1e-8, o.wd };
    for (step = (size_t)meta.step; step < o.steps; step++) {
        mn_real loss;
        double lr = mn_lr_schedule(step, o.warmup, o.steps, o.lr, o.lr * o.lr_min_frac);
        get_batch(tok, tgt, text, 0, split, o.batch, o.seq, &rng, 0);
        err = mn_forward(&m, tok, tgt, o.batch, o.seq, &loss);
        if (err == MN_OK) { mn_zero_grad(&m); err = mn_backward(&m); }
        double gn = err == MN_OK ? mn_clip_grad_norm(&m, o.clip) : NAN;
        if (err != MN_OK || gn != gn) {
            // stop without saving: the last checkpoint on disk stays the last good state
            fprintf(stderr, "\ntrain: step %zu: %s (loss %g, grad norm %g); stopping, checkpoint in %s left as it was\n",
                    step, err ? mn_strerror(err) : "non-finite gradient", (double)loss, gn, o.out);
            rc = 3; break;
        }
        mn_adamw_step(&m, lr, &hp);
        acc += loss; nacc++;
        double now = ex_now(), tps = (double)N * (double)(step + 1 - step0) / (now - t0);
        char eta[32]; ex_fmt_time(eta, sizeof eta, (double)(o.steps - step - 1) * (double)N / tps);
        if (tty && (now - tlast > 0.2 || step + 1 == o.steps)) {
            fprintf(stderr, "\rstep %5zu/%zu | loss %.4f | lr %.2e | %7.0f tok/s | ETA %s   ", step + 1, o.steps, (double)loss, lr, tps, eta);
            tlast = now;
        }
        if ((step + 1) % o.eval_every == 0 || step + 1 == o.steps) {
            val = evaluate(&m, text, split, len, &o, tok, tgt);
            if (tty) fprintf(stderr, "\n");
            printf("step %5zu | train %.4f | val %.4f | %.0f tok/s | %.1f s\n", step + 1, acc / nacc, val, tps, now - t0);
            fflush(stdout);
            FILE* f = fopen(csv, "a");
            if (f) { fprintf(f, "%zu,%.6f,%.6f,%.6g,%.1f\n", step + 1, acc / nacc, val, lr, tps); fclose(f); }
            acc = 0; nacc = 0;
            meta.step = step + 1; meta.rng_state = rng.s; meta.extra[0] = val;
            if ((err = mn_save(&m, o.out, &meta)) != MN_OK) fprintf(stderr, "train: checkpoint failed: %s\n", mn_strerror(err));
            plot_losses(o.out);
        }
    }
    if (rc == 0 && o.sample_len) { mn_rng gr; mn_rng_seed(&gr, o.seed + 1000); generate(&m, &o, &gr); }
    printf("final validation loss %.4f nats/byte (%.3f bits/byte); checkpoint and loss.png in %s\n", val, val / log(2.0), o.out);
    free(tok); free(tgt); free(text);
    mn_model_free(&m);
    return rc;
}
