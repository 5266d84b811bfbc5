// train_cuda: examples/train.c on the GPU - a byte-level MesaNet trained with mn_cuda_model.
//
//   ./build/train_cuda --data book.txt --steps 2000 --out runs/gpu      # a small model (below)
//   ./build/train_cuda --anchor --data text.txt --seconds 300           # fla's 40M-parameter anchor
//   ./build/train_cuda --resume runs/gpu --steps 4000                   # continue where it stopped
//   ./build/generate --ckpt runs/gpu --prompt "This License "           # sample on the CPU
//
// Data: the bytes of a text file, or of every regular file of a folder in name order (default
// /usr/share/common-licenses, which Debian-based machines have; a GPU machine may not: pass
// --data, e.g. `cat /usr/share/common-licenses/* README.md mesanet.h > /tmp/data.txt`). The first
// 90% trains, the last 10% validates. Batches are B random windows of T+1 bytes.
// Loop (train.c's): forward, zero_grad, backward, clip to --clip, AdamW (betas 0.9, 0.98, eps 1e-8,
// --wd on matrices only); learning rate: linear warmup over --warmup steps, then cosine to
// lr * 0.1 over the budget, where the budget's fraction used is max(step / --steps, time / --seconds)
// (whichever runs out first ends the run). Every --log_every steps one progress line (loss, lr,
// grad norm, tokens/s, MFU) and a loss.csv row; every --eval_every steps the held-out loss; at the
// end (and every --save_every steps) a checkpoint via mn_save in --out: model.safetensors,
// config.json, optimizer.safetensors - the CPU build's files (build/generate reads them). Then the
// CPU (this program's own float mesanet.h) loads the checkpoint, compares its loss on one held-out
// window with the GPU's (--cpu_check tokens) and samples --sample bytes from it.
// FLOPs: mn_flops_per_token(T) counts a forward: 2 per multiply-add of every Linear (lm_head
// included, the embedding lookup not) plus the Mesa op's own count per layer (anchors.md: per
// head and token 2K^2 + 2KV + n (4CK + 2K^2) + 2CK + 2CV + 2KV, n = CG steps, C = chunk); a
// training step is counted as 3x (forward + backward), so
//   MFU = tokens/s * 3 * mn_flops_per_token(T) / peak,
// peak = --peak_tflops (default 989.4: the H200's dense fp16/bf16 tensor-core rate; the TF32 rate,
// 494.7, is printed too). Tokens/s excludes the first step (cuBLAS and allocation warm-up) and the
// evaluations.
#define MESANET_IMPLEMENTATION
#include "examples/common.h"
#pragma nv_diag_suppress 550
#include "mesanet.h"
#pragma nv_diag_default 550
#include "cuda/mesanet_cuda.h"
#include <cuda_runtime.h>
#include <math.h>

typedef struct {
    const char *data, *out, *resume, *prompt;
    size_t d_model, layers, heads, head_dim, d_ff, seq, batch, steps, warmup, eval_every, eval_batches, log_every, save_every;
    size_t sample_len, top_k, cpu_check;
    double lr, lr_min_frac, wd, clip, temp, top_p, softcap, cg_tol, seconds, peak_tflops;
    int cg, cg_decode, clamp, fp32, device;
    uint64_t seed;
} opts;

static void usage(void) {
    printf("usage: train_cuda [--anchor] [--data FILE|DIR] [--out DIR] [--resume DIR]\n"
           "             [--d_model N] [--layers N] [--heads N] [--head_dim 64|128] [--d_ff N] [--seq T] [--batch B]\n"
           "             [--steps N] [--seconds S] [--lr X] [--warmup N] [--wd X] [--clip X] [--softcap X] [--seed N]\n"
           "             [--cg N] [--cg_decode N] [--cg_tol EPS] [--gamma_clamp 0|1] [--fp32 (cuBLAS fp32, default TF32)]\n"
           "             [--log_every N] [--eval_every N] [--eval_batches N] [--save_every N] [--device N] [--peak_tflops X]\n"
           "             [--cpu_check T] [--sample N] [--prompt TEXT] [--temp X] [--top_k N] [--top_p X]\n"
           "  --anchor: fla's anchor, hidden 640, 8 layers, 5 heads of 128, MLP 1792, vocab 256, B 16, T 2048, CG 30,\n"
           "            and --seconds 300 unless given (options after it override it)\n");
}

static int parse(opts* o, int argc, char** argv) {
    int i;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--anchor")) continue;   // applied before parsing
        EX_OPT_S("--data", data) EX_OPT_S("--out", out) EX_OPT_S("--resume", resume) EX_OPT_S("--prompt", prompt)
        EX_OPT_U("--d_model", d_model) EX_OPT_U("--layers", layers) EX_OPT_U("--heads", heads) EX_OPT_U("--head_dim", head_dim)
        EX_OPT_U("--d_ff", d_ff) EX_OPT_U("--seq", seq) EX_OPT_U("--batch", batch) EX_OPT_U("--steps", steps) EX_OPT_U("--warmup", warmup)
        EX_OPT_U("--eval_every", eval_every) EX_OPT_U("--eval_batches", eval_batches) EX_OPT_U("--log_every", log_every)
        EX_OPT_U("--save_every", save_every) EX_OPT_U("--sample", sample_len) EX_OPT_U("--top_k", top_k) EX_OPT_U("--cpu_check", cpu_check)
        EX_OPT_D("--lr", lr) EX_OPT_D("--wd", wd) EX_OPT_D("--clip", clip) EX_OPT_D("--temp", temp) EX_OPT_D("--top_p", top_p)
        EX_OPT_D("--softcap", softcap) EX_OPT_D("--cg_tol", cg_tol) EX_OPT_D("--seconds", seconds) EX_OPT_D("--peak_tflops", peak_tflops)
        if (!strcmp(a, "--seed") && v) { o->seed = strtoull(v, NULL, 10); i++; continue; }
        if (!strcmp(a, "--cg") && v) { o->cg = atoi(v); i++; continue; }
        if (!strcmp(a, "--cg_decode") && v) { o->cg_decode = atoi(v); i++; continue; }
        if (!strcmp(a, "--gamma_clamp") && v) { o->clamp = atoi(v); i++; continue; }
        if (!strcmp(a, "--device") && v) { o->device = atoi(v); i++; continue; }
        if (!strcmp(a, "--fp32")) { o->fp32 = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); exit(0); }
        fprintf(stderr, "train_cuda: unknown or incomplete option %s\n", a);
        usage();
        return -1;
    }
    return 0;
}

// B windows of T+1 bytes from text[lo, hi): inputs 0..T-1, targets 1..T (train.c's sampler)
static void get_batch(int* tok, int* tgt, const unsigned char* text, size_t lo, size_t hi, size_t B, size_t T, mn_rng* r, int fixed) {
    size_t b, t;
    for (b = 0; b < B; b++) {
        size_t span = hi - lo - T - 1;
        size_t off = lo + (fixed ? (span * b) / (B > 1 ? B - 1 : 1) : (size_t)(mn_rng_u32(r) % (uint32_t)span));
        for (t = 0; t < T; t++) { tok[b * T + t] = text[off + t]; tgt[b * T + t] = text[off + t + 1]; }
    }
}

// held-out loss: eval_batches fixed, evenly spaced slices of the validation text
static double evaluate(mn_cuda_model* gm, const unsigned char* text, size_t lo, size_t hi, size_t nb, size_t B, size_t T, int* tok, int* tgt) {
    double sum = 0; float loss;
    if (nb == 0) return NAN;
    for (size_t i = 0; i < nb; i++) {
        size_t sub = (hi - lo) / nb;
        get_batch(tok, tgt, text, lo + i * sub, lo + (i + 1) * sub, B, T, NULL, 1);
        if (mn_cuda_model_forward(gm, tok, tgt, B, T, &loss) != MN_OK) return NAN;
        sum += loss;
    }
    return sum / (double)nb;
}

// the CPU's recurrent step from the checkpoint (train.c's generate)
static void generate(mn_model* m, const opts* o, mn_rng* r) {
    mn_state st; size_t i, V = m->cfg.vocab_size;
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    const char* p = o->prompt;
    int tok = 0;
    if (!logits || mn_state_init(&st, m, 1) != MN_OK) { free(logits); return; }
    printf("---- sample on the CPU from the checkpoint (temperature %.2f, top-k %zu, top-p %.2f) ----\n%s", o->temp, o->top_k, o->top_p, p);
    for (i = 0; p[i]; i++) { tok = (unsigned char)p[i]; if (mn_step(m, &st, &tok, logits) != MN_OK) break; }
    for (i = 0; i < o->sample_len; i++) {
        tok = mn_sample(logits, V, o->temp, o->top_k, o->top_p, r, logits + V);
        putchar((tok >= 32 && tok < 127) || tok == '\n' ? tok : '?');
        if (mn_step(m, &st, &tok, logits) != MN_OK) break;
    }
    printf("\n----\ngeneration: %.1f CG steps per token, head and Mesa layer on average (at most %d, stop at relative residual %g)\n",
           mn_state_cg_stats(m, &st, NULL), m->cfg.mesa_cg_decode, m->cfg.mesa_cg_tol);
    fflush(stdout);
    mn_state_free(&st);
    free(logits);
}

int main(int argc, char** argv) {
    opts o; memset(&o, 0, sizeof o);
    int anchor = 0, i;
    for (i = 1; i < argc; i++) anchor |= !strcmp(argv[i], "--anchor");
    o.data = "/usr/share/common-licenses"; o.out = "runs/cuda"; o.prompt = "This License ";
    o.d_model = 256; o.layers = 4; o.heads = 2; o.head_dim = 128; o.seq = 1024; o.batch = 16; o.steps = 1000;
    o.cg = 30; o.cg_decode = 30; o.cg_tol = 1e-4;
    o.lr = 2e-3; o.lr_min_frac = 0.1; o.warmup = 100; o.wd = 0.1; o.clip = 1.0;
    o.log_every = 10; o.eval_every = 200; o.eval_batches = 4; o.sample_len = 200; o.cpu_check = 128;
    o.temp = 0.8; o.top_p = 0.95; o.seed = 1; o.peak_tflops = 989.4; o.seconds = -1;
    if (anchor) {   // fla's anchor (the issue): 318,851 tokens/s on one H200
        o.d_model = 640; o.layers = 8; o.heads = 5; o.head_dim = 128; o.d_ff = 1792; o.batch = 16; o.seq = 2048; o.cg = 30;
        o.steps = 1000000; o.eval_every = 100; o.eval_batches = 2;
    }
    if (parse(&o, argc, argv) != 0) return 2;
    if (o.seconds < 0) o.seconds = anchor ? 300 : 0;

    unsigned char* text; size_t len;
    if (ex_read_text(o.data, &text, &len) != 0 || len < 20 * (o.seq + 2)) {
        fprintf(stderr, "train_cuda: need a readable text of at least %zu bytes at %s (pass --data FILE|DIR)\n", 20 * (o.seq + 2), o.data);
        return 1;
    }
    size_t split = len - len / 10;
    while (o.eval_batches > 1 && (len - split) / o.eval_batches <= o.seq + 2) o.eval_batches--;

    mn_cuda_ctx ctx;
    if (mn_cuda_init(&ctx, o.device) != MN_OK) { fprintf(stderr, "train_cuda: no usable CUDA device: %s\n", ctx.msg); return 1; }
    ctx.math = o.fp32 ? MN_CUDA_MATH_FP32 : MN_CUDA_MATH_TF32;
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, o.device);

    mn_cuda_model gm; mn_train_meta meta; memset(&meta, 0, sizeof meta);
    mn_rng rng; mn_rng_seed(&rng, o.seed);
    int err;
    if (o.resume) {
        if ((err = mn_cuda_model_load(&gm, &ctx, o.resume, &meta)) != MN_OK) { fprintf(stderr, "train_cuda: cannot resume from %s: %s (%s)\n", o.resume, mn_cuda_strerror(err), ctx.msg); return 1; }
        rng.s = meta.rng_state;
        if (!strcmp(o.out, "runs/cuda")) o.out = o.resume;
        printf("resumed %s at step %llu\n", o.resume, (unsigned long long)meta.step);
    } else {
        mn_config c; memset(&c, 0, sizeof c);
        c.vocab_size = 256; c.d_model = o.d_model; c.n_layer = o.layers; c.n_head = o.heads; c.head_dim = o.head_dim; c.d_ff = o.d_ff;
        c.max_seq_len = o.seq > 512 ? o.seq : 512; c.pattern = "mesa"; c.logit_softcap = o.softcap; c.seed = o.seed;
        c.mesa_cg_train = o.cg; c.mesa_cg_decode = o.cg_decode; c.mesa_cg_tol = o.cg_tol; c.mesa_gamma_clamp = o.clamp;
        if ((err = mn_cuda_model_init(&gm, &ctx, &c)) != MN_OK) { fprintf(stderr, "train_cuda: %s (%s)\n", mn_cuda_strerror(err), ctx.msg); return 1; }
    }
    const mn_config* mc = &gm.cfg;
    if (o.seq > mc->max_seq_len) { fprintf(stderr, "train_cuda: --seq %zu exceeds the model's max_seq_len %zu\n", o.seq, mc->max_seq_len); return 1; }
    if (ex_mkdirs(o.out) != 0) { fprintf(stderr, "train_cuda: cannot create %s\n", o.out); return 1; }
    size_t B = o.batch, T = o.seq, N = B * T;
    if ((err = mn_cuda_model_reserve(&gm, B, T)) != MN_OK) { fprintf(stderr, "train_cuda: cannot allocate activations for B=%zu T=%zu: %s\n", B, T, ctx.msg); return 1; }
    double fpt = (double)mn_cuda_model_flops_per_token(&gm, T), peak = o.peak_tflops * 1e12;
    printf("device: %s (%d SMs), cuBLAS %s, Mesa CG on fp16 tensor cores, states fp32 | model on the GPU: %.2f GB\n", prop.name, ctx.sm_count,
           o.fp32 ? "fp32" : "TF32", mn_cuda_model_device_bytes(&gm) / 1e9);
    printf("model: mesa, %zu layers, d_model %zu, %zu heads of %zu, d_ff %zu, vocab %zu | %zu parameters (%.2f M)\n",
           mc->n_layer, mc->d_model, mc->n_head, mc->head_dim, mc->d_ff, mc->vocab_size, gm.n_params, gm.n_params / 1e6);
    printf("mesa: %d CG steps in training, %d in decoding (stop at relative residual %g), chunk %zu%s%s\n", mc->mesa_cg_train, mc->mesa_cg_decode,
           mc->mesa_cg_tol, mc->mesa_chunk, mc->mesa_gamma_clamp ? ", gamma clamp" : "", mc->logit_softcap > 0 ? ", logit soft-cap" : "");
    printf("FLOPs: %.1f M per token forward (mn_flops_per_token), %.1f M per trained token (3x); MFU against %.1f TFLOP/s\n", fpt / 1e6, 3 * fpt / 1e6, o.peak_tflops);
    printf("data: %s, %zu bytes (%zu train, %zu validation) | batch %zu x %zu tokens | %zu steps%s", o.data, len, split, len - split, B, T, o.steps,
           o.seconds > 0 ? "" : "\n");
    if (o.seconds > 0) printf(" or %.0f s, whichever comes first\n", o.seconds);
    fflush(stdout);

    int *tok = (int*)malloc(N * sizeof(int)), *tgt = (int*)malloc(N * sizeof(int));
    char csv[1100]; snprintf(csv, sizeof csv, "%s/loss.csv", o.out);
    if (!o.resume) { FILE* f = fopen(csv, "w"); if (f) { fprintf(f, "step,train_loss,val_loss,lr,tokens_per_s,mfu,grad_norm,train_seconds\n"); fclose(f); } }
    size_t step0 = (size_t)meta.step, step, nacc = 0, tok_steady = 0;
    double t_train = 0, t_steady = 0, t_log = 0, acc = 0, val = NAN, gn = 0, lr = 0;
    size_t tok_log = 0;
    int rc = 0;
    mn_adamw hp = { 0.9, 0.98, 1e-8, o.wd };
    double t_start = ex_now();
    for (step = step0; step < o.steps; step++) {
        if (o.seconds > 0 && t_train >= o.seconds) break;
        double ts = ex_now();
        float loss = NAN;
        double frac = (double)step / (double)o.steps;
        if (o.seconds > 0 && t_train / o.seconds > frac) frac = t_train / o.seconds;
        if (frac > 1) frac = 1;
        lr = step < o.warmup ? o.lr * (double)(step + 1) / (double)o.warmup
                             : o.lr * o.lr_min_frac + 0.5 * (o.lr - o.lr * o.lr_min_frac) * (1.0 + cos(3.141592653589793 * frac));
        get_batch(tok, tgt, text, 0, split, B, T, &rng, 0);
        err = mn_cuda_model_forward(&gm, tok, tgt, B, T, &loss);
        if (err == MN_OK) err = mn_cuda_model_zero_grad(&gm);
        if (err == MN_OK) err = mn_cuda_model_backward(&gm);
        if (err == MN_OK) err = mn_cuda_model_clip_grad_norm(&gm, o.clip, &gn);
        if (err != MN_OK || gn != gn) {
            // stop without saving: the last checkpoint on disk stays the last good state
            fprintf(stderr, "train_cuda: step %zu: %s (loss %g, grad norm %g); stopping, checkpoint in %s left as it was\n",
                    step, err ? (ctx.msg[0] ? ctx.msg : mn_cuda_strerror(err)) : "non-finite gradient", (double)loss, gn, o.out);
            rc = 3; break;
        }
        if ((err = mn_cuda_model_adamw_step(&gm, lr, &hp)) != MN_OK || (err = mn_cuda_sync(&ctx)) != MN_OK) {
            fprintf(stderr, "train_cuda: step %zu: AdamW: %s\n", step, ctx.msg); rc = 3; break;
        }
        double dt = ex_now() - ts;
        t_train += dt;
        if (step > step0) { t_steady += dt; tok_steady += N; }
        t_log += dt; tok_log += N;
        acc += loss; nacc++;
        int last = step + 1 == o.steps || (o.seconds > 0 && t_train >= o.seconds);
        int do_eval = (o.eval_every && (step + 1) % o.eval_every == 0) || last;
        if ((step + 1) % o.log_every == 0 || do_eval) {
            double tps = tok_log / t_log, mfu = tps * 3 * fpt / peak;
            if (do_eval) val = evaluate(&gm, text, split, len, o.eval_batches, B, T, tok, tgt);
            printf("step %6zu | loss %.4f | lr %.2e | grad norm %6.3f | %8.0f tok/s | MFU %4.1f%% | %6.1f s train", step + 1, acc / nacc, lr, gn, tps, 100 * mfu, t_train);
            if (do_eval) printf(" | val %.4f", val);
            printf("\n");
            fflush(stdout);
            FILE* f = fopen(csv, "a");
            if (f) { fprintf(f, "%zu,%.6f,%.6f,%.6g,%.1f,%.5f,%.5g,%.3f\n", step + 1, acc / nacc, do_eval ? val : NAN, lr, tps, mfu, gn, t_train); fclose(f); }
            acc = 0; nacc = 0; t_log = 0; tok_log = 0;
        }
        if (o.save_every && (step + 1) % o.save_every == 0 && !last) {
            meta.step = step + 1; meta.rng_state = rng.s; meta.extra[0] = val;
            if ((err = mn_cuda_model_save(&gm, o.out, &meta)) != MN_OK) fprintf(stderr, "train_cuda: checkpoint failed: %s\n", ctx.msg);
        }
    }
    double wall = ex_now() - t_start;
    if (rc == 0 && step > step0) {
        meta.step = step; meta.rng_state = rng.s; meta.extra[0] = val;
        double ts = ex_now();
        if ((err = mn_cuda_model_save(&gm, o.out, &meta)) != MN_OK) { fprintf(stderr, "train_cuda: checkpoint failed: %s\n", ctx.msg); rc = 4; }
        else printf("checkpoint: %s/model.safetensors, config.json, optimizer.safetensors (%.1f s)\n", o.out, ex_now() - ts);
        double tps = tok_steady > 0 ? tok_steady / t_steady : N / t_train;
        printf("summary: %zu steps, %.2f M tokens in %.1f s of training (%.1f s wall with evaluations); %.0f tokens/s after the first step "
               "(first step %.2f s); MFU %.1f%% of %.1f TFLOP/s (%.1f%% of the 494.7 TF32 dense rate), "
               "model FLOPs = 3 x %.1f M per token x tokens/s; final validation loss %.4f nats/byte (%.3f bits/byte)\n",
               step - step0, (double)(step - step0) * N / 1e6, t_train, wall, tps, t_train - t_steady,
               100 * tps * 3 * fpt / peak, o.peak_tflops, 100 * tps * 3 * fpt / 494.7e12, fpt / 1e6, val, val / log(2.0));
        fflush(stdout);
    }
    // the checkpoint on the CPU: same loss on a held-out window, then a sample
    if (rc == 0 && (o.cpu_check || o.sample_len)) {
        mn_model cpu;
        if ((err = mn_load(&cpu, o.out, NULL)) != MN_OK) { fprintf(stderr, "train_cuda: the CPU cannot load %s: %s\n", o.out, mn_strerror(err)); rc = 5; }
        else {
            size_t Tc = o.cpu_check < len - split - 2 ? o.cpu_check : 0;
            if (Tc) {
                mn_real lc = 0; float lg = 0;
                get_batch(tok, tgt, text, split, len, 1, Tc, NULL, 1);
                double tc = ex_now();
                int e1 = mn_forward(&cpu, tok, tgt, 1, Tc, &lc);
                tc = ex_now() - tc;
                int e2 = mn_cuda_model_forward(&gm, tok, tgt, 1, Tc, &lg);
                printf("checkpoint on the CPU: loss %.6f (GPU %.6f, relative difference %.1e) on %zu held-out tokens (CPU forward %.1f s)%s\n",
                       (double)lc, (double)lg, fabs((double)lc - lg) / fabs((double)lc), Tc, tc, e1 || e2 ? " [ERROR]" : "");
            }
            if (o.sample_len) { mn_rng gr; mn_rng_seed(&gr, o.seed + 1000); generate(&cpu, &o, &gr); }
            mn_model_free(&cpu);
        }
    }
    free(tok); free(tgt); free(text);
    mn_cuda_model_free(&gm);
    mn_cuda_free(&ctx);
    return rc;
}
