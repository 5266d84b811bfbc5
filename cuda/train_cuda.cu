// train_cuda: examples/train.c on the GPU - a byte-level MesaNet trained with mn_cuda_model, on one
// GPU or data-parallel over the GPUs of one host (NCCL, one process per GPU).
//
//   ./build/train_cuda --data book.txt --steps 2000 --out runs/gpu      # a small model (below)
//   ./build/train_cuda --anchor --data text.txt --seconds 300           # fla's 40M-parameter anchor
//   ./build/train_cuda --resume runs/gpu --steps 4000                   # continue where it stopped
//   ./build/generate --ckpt runs/gpu --prompt "This License "           # sample on the CPU
//   ./build/train_cuda --gpus 2 --anchor --data text.txt                # the same run on 2 GPUs
//   ./build/train_cuda --anchor --math bf16 --data text.txt --out runs/bf16   # mixed precision
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
// Arithmetic (--math): the projections (every Linear: the mixers', the MLP, the logits) in TF32 (the
// default), fp32, or bf16 operands with fp32 accumulation (ctx->math = MN_CUDA_MATH_BF16: the parameters,
// gradients, AdamW moments and checkpoints stay fp32; the mixer ops run as in TF32 mode).
// FLOPs: mn_flops_per_token(T) counts a forward: 2 per multiply-add of every Linear (lm_head
// included, the embedding lookup not) plus the Mesa op's own count per layer (the count the
// bench programs use: per head and token 2K^2 + 2KV + n (4CK + 2K^2) + 2CK + 2CV + 2KV, n = CG steps, C = chunk); a
// training step is counted as 3x (forward + backward), so
//   MFU = tokens/s * 3 * mn_flops_per_token(T) / (peak * GPUs),
// peak = --peak_tflops (default 989.4: the H200's dense fp16/bf16 tensor-core rate; the TF32 rate,
// 494.7, is printed too). Tokens/s excludes the first step (cuBLAS and allocation warm-up) and the
// evaluations.
//
// MULTI-GPU (data parallel, cuda/dist_cuda.h; NCCL loaded at run time, not needed to build)
//   --gpus N          this program is the launcher: it starts N copies of itself, rank r on device
//                     --device + r (default 0 + r), hands them an NCCL unique id through a pipe,
//                     waits, and when one fails stops the others and exits with its code.
//   --nccl_id FILE    for an external launcher (one process per GPU): rank 0 writes a fresh id to
//                     FILE, the others wait for it (use a new path per run). Rank and world come
//                     from --rank R --world W, else from the environment of mpirun (OMPI_COMM_WORLD_*),
//                     MPICH/Intel MPI (PMI_*), srun (SLURM_*) or torchrun (RANK, WORLD_SIZE); the
//                     device is --device (explicit rank) or --device + the local rank (environment).
//       mpirun -np 2 ./build/train_cuda --nccl_id /tmp/mn_id.$$ --anchor --data text.txt
//       torchrun --standalone --nproc-per-node 2 --no-python ./build/train_cuda --nccl_id /tmp/mn_id.$$ --anchor
//   Every process gets NCCL_NVLS_ENABLE=0 (NVLink multicast stays off; the launcher sets it for its
//   children and each rank sets it again before NCCL starts). NCCL: libnccl.so.2 on the loader's
//   path (LD_LIBRARY_PATH), or MN_NCCL_LIB=/path/to/libnccl.so.2.
//   --batch B is the GLOBAL batch: each of W ranks trains on B/W of its sequences (B % W == 0),
//   rank r on sequences r*B/W .. (r+1)*B/W-1 of the very draw the single GPU makes (all ranks draw
//   the whole batch from the same random stream), so a W-GPU run sees the 1-GPU run's batches. The
//   gradient is the single-GPU gradient of the global batch (dist_cuda.h: WEIGHTING); rank 0
//   alone prints, writes loss.csv and checkpoints and runs the CPU check; --resume loads on every
//   rank. World size 1 (no flag, or --gpus 1) runs in this process with no NCCL: the single-GPU
//   trainer, op for op.
//   --dist_check      (under any world size, e.g. --gpus 2) one step on a fixed global batch with
//                     unequal valid targets per rank, its all-reduced gradient compared tensor by
//                     tensor with a one-process gradient of the same batch (and with a one-GPU
//                     emulation of the split), then --check_steps (20) training steps compared loss
//                     by loss with a one-process run; prints "dist_check: N passed, M failed".
//   --bench N         tokens/s of --bench_steps (30) steps on 1..N GPUs: global batch --batch split
//                     over the GPUs (strong scaling), and --batch per GPU (weak scaling).
//   --bench_decode B  decode tokens/s of mn_cuda_model_step at batch 1 and B, plain and as a CUDA graph (the
//                     model as initialised or --resume'd: the speed of a step does not depend on the weights),
//                     then exit
//   --nccl_self       one process, through an NCCL communicator of one rank: the multi-GPU code path
//                     (every NCCL call, the weighting, the sliced clip) on one GPU, where NCCL
//                     refuses two ranks; with --dist_check it compares that path with the plain one.
#define MESANET_IMPLEMENTATION
#include "examples/common.h"
#pragma nv_diag_suppress 550
#include "mesanet.h"
#pragma nv_diag_default 550
#include "cuda/mesanet_cuda.h"
#include "cuda/dist_cuda.h"
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

typedef struct {
    const char *data, *out, *resume, *prompt, *pattern;
    size_t window;           // --window W for "swa" layers (0: the library's default, 64)
    size_t d_model, layers, heads, head_dim, d_ff, seq, batch, steps, warmup, eval_every, eval_batches, log_every,
           save_every;
    size_t sample_len, top_k, cpu_check;
    size_t gpu_sample;       // --gpu_sample N: also sample N bytes with the GPU decode (mn_cuda_model_step)
    double lr, lr_min_frac, wd, clip, temp, top_p, softcap, cg_tol, seconds, peak_tflops;
    int cg, cg_decode, clamp, math, device;   // math: MN_CUDA_MATH_* of the projections (--math, --fp32)
    int delta_recompute;     // --delta_recompute: DeltaNet / GDN layers recompute instead of keeping (ctx->delta_form)
    int delta_fma;           // --delta_fma_chain: their chunk-to-chunk chain on the FMA kernel (ctx->delta_chain)
    int ssd_tf32;            // --ssd_tf32: Mamba-2's SSD in --math with the local gate gradient (ctx->ssd_tf32)
    int gla_recompute;       // --gla_recompute: GLA-family and Mamba-2 layers recompute (ctx->gla_recompute)
    int mesa_keep;           // --mesa_keep: the Mesa layers keep their chunk-start states (ctx->mesa_keep_states)
    int mesa_scan;           // --mesa_scan: the Mesa op's state scan (ctx->mesa_scan; MN_CUDA_SCAN_TF32X3 default)
    uint64_t seed;
    // multi-GPU
    size_t gpus;             // --gpus N: launch N ranks (1: this process)
    int rank, world;         // --rank R --world W (world 0: not given)
    const char* nccl_id;     // --nccl_id FILE (external launchers)
    int nccl_fd;             // --nccl_fd K: the launcher's pipe (internal)
    int dist_check;          // --dist_check
    size_t check_steps;      // --check_steps N (20)
    size_t bench, bench_steps;   // --bench N: 1..N GPUs; --bench_steps (30)
    const char* bench_out;   // --bench_out FILE: rank 0 writes its tokens/s there (internal)
    int quiet;               // --quiet: no progress lines, loss.csv, checkpoint or CPU check (bench ranks)
    size_t bench_decode;     // --bench_decode B: decode tokens/s at batch 1 and B (no training)
    int nccl_self;           // --nccl_self: one process through an NCCL communicator of one (tests NCCL on one GPU)
} opts;

static void usage(void) {
    printf("usage: train_cuda [--anchor] [--data FILE|DIR] [--out DIR] [--resume DIR] [--pattern mesa,attn,swa,...] "
           "[--window W]\n"
           "             [--d_model N] [--layers N] [--heads N] [--head_dim 64|128] [--d_ff N] [--seq T] [--batch B]\n"
           "             [--steps N] [--seconds S] [--lr X] [--warmup N] [--wd X] [--clip X] [--softcap X] [--seed N]\n"
           "             [--cg N] [--cg_decode N] [--cg_tol EPS] [--gamma_clamp 0|1] [--math fp32|tf32|bf16] [--fp32]\n"
           "             [--delta_recompute] [--delta_fma_chain] [--ssd_tf32] [--gla_recompute] [--mesa_keep]\n"
           "             [--mesa_scan tf32x3|tf32|ffma]\n"
           "             [--log_every N] [--eval_every N] [--eval_batches N] [--save_every N] [--device N] "
           "[--peak_tflops X]\n"
           "             [--cpu_check T] [--sample N] [--gpu_sample N] [--prompt TEXT] [--temp X] [--top_k N]\n"
           "             [--top_p X] [--bench_decode B]\n"
           "             [--gpus N | --nccl_id FILE [--rank R --world W] | --nccl_self] "
           "[--dist_check [--check_steps N]] [--bench N [--bench_steps N]]\n"
           "  --math: the projections' arithmetic: tf32 (default), fp32, or bf16 (bf16 operands, fp32 accumulation,\n"
           "          fp32 master weights and AdamW); --fp32 is --math fp32\n"
           "  --delta_recompute: DeltaNet / GDN layers recompute the chunkwise form's intermediates in the backward\n"
           "          instead of keeping them from the forward (less memory, slower)\n"
           "  --delta_fma_chain: their chunk-to-chunk chain on the fp32 FMA kernel instead of the tensor cores\n"
           "  --mesa_keep: the Mesa layers keep their chunk-start states for the backward (more memory: (T/64 + 1)\n"
           "          B H (Dk^2 + Dk Dv) floats a layer; the same bits, the backward's first state scan skipped)\n"
           "  --gla_recompute: linattn, sgla, gla and Mamba-2 layers recompute the GLA op's chunk states, scores and\n"
           "          cumulative gates in the backward instead of keeping them (less memory, slower, the same bits)\n"
           "  --ssd_tf32: Mamba-2's chunkwise SSD in the --math arithmetic (not 3xTF32), the gate gradient local\n"
           "  --mesa_scan: the Mesa layers' state scan: tf32x3 (default, fp32-accurate states), ffma (exact fp32 on\n"
           "          the FMA units) or tf32 (faster, ~3e-4: the op's fast setting)\n"
           "  --anchor: fla's anchor, hidden 640, 8 layers, 5 heads of 128, MLP 1792, vocab 256, B 16, T 2048, CG 30,\n"
           "            and --seconds 300 unless given (options after it override it)\n"
           "  --gpus N: data parallel over N GPUs of this host (one process each, NCCL; --batch is the global batch)\n"
           "  --nccl_id FILE: one rank of an external launcher (mpirun, torchrun --no-python); rank 0 writes the id\n"
           "  --dist_check: the multi-GPU gradient and a short run against one process; "
           "--bench N: tokens/s on 1..N GPUs\n"
           "  --bench_decode B: decode tokens/s (mn_cuda_model_step, logits to the host) at batch 1 and B, plain and\n"
           "                    as a CUDA graph, then exit\n"
           "  --nccl_self: one process, but through an NCCL communicator of one (the multi-GPU code path on one GPU)\n"
           "  NCCL is loaded at run time (libnccl.so.2 on LD_LIBRARY_PATH, or MN_NCCL_LIB); "
           "NCCL_NVLS_ENABLE=0 is set\n");
}

// the projections' arithmetic, as the progress lines name it
static const char* math_name(int m) {
    return m == MN_CUDA_MATH_FP32 ? "fp32" : m == MN_CUDA_MATH_BF16 ? "bf16 (fp32 accumulation, fp32 master weights)"
                                                                    : "TF32";
}

// an option with three named values (--math, --mesa_scan): *out = vals[k] for v == names[k]; else a message, -1
static int parse_choice(const char* flag, const char* v, const char* const names[3], const int vals[3], int* out) {
    for (int k = 0; k < 3; k++)
        if (!strcmp(v, names[k])) { *out = vals[k]; return 0; }
    fprintf(stderr, "train_cuda: %s takes %s, %s or %s, not %s\n", flag, names[0], names[1], names[2], v);
    return -1;
}

static int parse(opts* o, int argc, char** argv) {
    int i;
    for (i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--anchor")) continue;   // applied before parsing
        EX_OPT_S("--data", data) EX_OPT_S("--out", out) EX_OPT_S("--resume", resume) EX_OPT_S("--prompt", prompt)
        EX_OPT_S("--pattern", pattern) EX_OPT_U("--window", window)
        EX_OPT_U("--d_model", d_model) EX_OPT_U("--layers", layers) EX_OPT_U("--heads", heads)
        EX_OPT_U("--head_dim", head_dim)
        EX_OPT_U("--d_ff", d_ff) EX_OPT_U("--seq", seq) EX_OPT_U("--batch", batch) EX_OPT_U("--steps", steps)
        EX_OPT_U("--warmup", warmup)
        EX_OPT_U("--eval_every", eval_every) EX_OPT_U("--eval_batches", eval_batches) EX_OPT_U("--log_every", log_every)
        EX_OPT_U("--save_every", save_every) EX_OPT_U("--sample", sample_len) EX_OPT_U("--top_k", top_k)
        EX_OPT_U("--cpu_check", cpu_check)
        EX_OPT_U("--gpu_sample", gpu_sample)
        EX_OPT_D("--lr", lr) EX_OPT_D("--wd", wd) EX_OPT_D("--clip", clip) EX_OPT_D("--temp", temp)
        EX_OPT_D("--top_p", top_p)
        EX_OPT_D("--softcap", softcap) EX_OPT_D("--cg_tol", cg_tol) EX_OPT_D("--seconds", seconds)
        EX_OPT_D("--peak_tflops", peak_tflops)
        EX_OPT_U("--gpus", gpus) EX_OPT_S("--nccl_id", nccl_id) EX_OPT_U("--check_steps", check_steps)
        EX_OPT_U("--bench", bench)
        EX_OPT_U("--bench_steps", bench_steps) EX_OPT_U("--bench_decode", bench_decode)
        EX_OPT_S("--bench_out", bench_out)
        if (!strcmp(a, "--seed") && v) { o->seed = strtoull(v, NULL, 10); i++; continue; }
        if (!strcmp(a, "--cg") && v) { o->cg = atoi(v); i++; continue; }
        if (!strcmp(a, "--cg_decode") && v) { o->cg_decode = atoi(v); i++; continue; }
        if (!strcmp(a, "--gamma_clamp") && v) { o->clamp = atoi(v); i++; continue; }
        if (!strcmp(a, "--device") && v) { o->device = atoi(v); i++; continue; }
        if (!strcmp(a, "--rank") && v) { o->rank = atoi(v); i++; continue; }
        if (!strcmp(a, "--world") && v) { o->world = atoi(v); i++; continue; }
        if (!strcmp(a, "--nccl_fd") && v) { o->nccl_fd = atoi(v); i++; continue; }
        if (!strcmp(a, "--fp32")) { o->math = MN_CUDA_MATH_FP32; continue; }
        if (!strcmp(a, "--delta_recompute")) { o->delta_recompute = 1; continue; }
        if (!strcmp(a, "--delta_fma_chain")) { o->delta_fma = 1; continue; }
        if (!strcmp(a, "--ssd_tf32")) { o->ssd_tf32 = 1; continue; }
        if (!strcmp(a, "--gla_recompute")) { o->gla_recompute = 1; continue; }
        if (!strcmp(a, "--mesa_keep")) { o->mesa_keep = 1; continue; }
        if (!strcmp(a, "--mesa_scan") && v) {
            static const char* const names[3] = { "tf32x3", "tf32", "ffma" };
            static const int vals[3] = { MN_CUDA_SCAN_TF32X3, MN_CUDA_SCAN_TF32, MN_CUDA_SCAN_FFMA };
            if (parse_choice(a, v, names, vals, &o->mesa_scan)) return -1;
            i++; continue;
        }
        if (!strcmp(a, "--math") && v) {
            static const char* const names[3] = { "fp32", "tf32", "bf16" };
            static const int vals[3] = { MN_CUDA_MATH_FP32, MN_CUDA_MATH_TF32, MN_CUDA_MATH_BF16 };
            if (parse_choice(a, v, names, vals, &o->math)) return -1;
            i++; continue;
        }
        if (!strcmp(a, "--dist_check")) { o->dist_check = 1; continue; }
        if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        if (!strcmp(a, "--nccl_self")) { o->nccl_self = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); exit(0); }
        fprintf(stderr, "train_cuda: unknown or incomplete option %s\n", a);
        usage();
        return -1;
    }
    return 0;
}

// ---- messages: rank 0 (or a one-process run) as before; other ranks name themselves ----
static int g_rank = 0, g_world = 1;
static void say_err(const char* fmt, ...) {
    va_list ap;
    if (g_world > 1) fprintf(stderr, "train_cuda [rank %d/%d]: ", g_rank, g_world);
    else fprintf(stderr, "train_cuda: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

// Rows b0..b1-1 of B windows of T+1 bytes from text[lo, hi): inputs 0..T-1, targets 1..T (train.c's
// sampler). Every row's offset is drawn (the random stream is the whole batch's, whichever rows
// are kept); row b goes to tok/tgt row b - b0.
static void get_batch(int* tok, int* tgt, const unsigned char* text, size_t lo, size_t hi, size_t B, size_t T,
                      mn_rng* r, int fixed, size_t b0, size_t b1) {
    size_t b, t;
    for (b = 0; b < B; b++) {
        size_t span = hi - lo - T - 1;
        size_t off = lo + (fixed ? (span * b) / (B > 1 ? B - 1 : 1) : (size_t)(mn_rng_u32(r) % (uint32_t)span));
        if (b < b0 || b >= b1) continue;
        for (t = 0; t < T; t++) { tok[(b - b0) * T + t] = text[off + t]; tgt[(b - b0) * T + t] = text[off + t + 1]; }
    }
}

// ---- one rank's training loop (also the reference runs of --dist_check) ----
typedef struct {
    const opts* o;
    mn_cuda_ctx* ctx;
    mn_cuda_model* gm;
    mn_dist* d;                          // world 1: no NCCL
    const unsigned char* text;
    size_t len, split;
    size_t B, Bl, T;                     // global batch, this rank's rows (B / world), sequence length
    int *tok, *tgt;                      // host, at least B*T
    int verbose;                         // progress lines, loss.csv and periodic checkpoints (rank 0 of a training run)
    double fpt, peak;
    float* loss_hist;                    // per step (may be NULL): the global batch's loss
    double* gn_hist;                     // per step (may be NULL): the gradient norm before clipping
    // results
    size_t step_end, tok_steady;
    double t_train, t_steady, wall, val;
} loop_t;

// held-out loss: eval_batches fixed, evenly spaced slices of the validation text (each rank its rows)
static double evaluate(loop_t* L, size_t lo, size_t hi, size_t nb) {
    double sum = 0, s = 0, c = 0;
    float loss;
    int failed = 0;
    size_t b0 = (size_t)L->d->rank * L->Bl;
    if (nb == 0) return NAN;
    for (size_t i = 0; i < nb; i++) {
        size_t sub = (hi - lo) / nb;
        get_batch(L->tok, L->tgt, L->text, lo + i * sub, lo + (i + 1) * sub, L->B, L->T, NULL, 1, b0, b0 + L->Bl);
        int ferr = mn_cuda_model_forward(L->gm, L->tok, L->tgt, L->Bl, L->T, &loss);
        if (mn_dist_step_loss(L->d, L->gm, ferr, &s, &c, &failed) != MN_OK || failed) return NAN;
        sum += (float)(c > 0 ? s / c : 0.0);   // one process: exactly the forward's loss
    }
    return sum / (double)nb;
}

static int train_loop(loop_t* L, mn_rng* rng, mn_train_meta* meta) {
    const opts* o = L->o;
    mn_dist* d = L->d;
    size_t B = L->B, Bl = L->Bl, T = L->T, N = B * T, b0 = (size_t)d->rank * Bl;
    size_t step0 = (size_t)meta->step, step, nacc = 0, tok_steady = 0, tok_log = 0;
    double t_train = 0, t_steady = 0, t_log = 0, acc = 0, val = NAN, gn = 0, lr = 0;
    int rc = 0, err;
    mn_adamw hp = { 0.9, 0.98, 1e-8, o->wd };
    char csv[1100]; snprintf(csv, sizeof csv, "%s/loss.csv", o->out);
    double t_start = ex_now();
    for (step = step0; step < o->steps; step++) {
        if (o->seconds > 0 && t_train >= o->seconds) break;   // t_train is rank 0's on every rank
        double ts = ex_now();
        float loss = NAN;
        double frac = (double)step / (double)o->steps, lsum = 0, lcnt = 0;
        int failed = 0;
        if (o->seconds > 0 && t_train / o->seconds > frac) frac = t_train / o->seconds;
        if (frac > 1) frac = 1;
        lr = step < o->warmup ? o->lr * (double)(step + 1) / (double)o->warmup
                              : o->lr * o->lr_min_frac +
                                0.5 * (o->lr - o->lr * o->lr_min_frac) * (1.0 + cos(3.141592653589793 * frac));
        get_batch(L->tok, L->tgt, L->text, 0, L->split, B, T, rng, 0, b0, b0 + Bl);
        int ferr = mn_cuda_model_forward(L->gm, L->tok, L->tgt, Bl, T, &loss);
        // the global batch's loss sum and valid-target count (one process: the forward's own)
        if ((err = mn_dist_step_loss(d, L->gm, ferr, &lsum, &lcnt, &failed)) != MN_OK) {
            say_err("step %zu: %s\n", step, d->msg); rc = 3; break;
        }
        err = ferr;
        if (!failed) loss = (float)(lcnt > 0 ? lsum / lcnt : 0.0);
        else if (err == MN_OK) err = MN_ERR_NAN;   // another rank's forward failed
        if (err == MN_OK) err = mn_cuda_model_zero_grad(L->gm);
        if (err == MN_OK) err = mn_cuda_model_backward(L->gm);
        // gradient of the global batch: this rank's share weighted by its valid targets, summed
        if (err == MN_OK &&
            (err = mn_dist_reduce_grads(d, L->gm, lcnt > 0 ? (double)L->gm->n_valid / lcnt : 0.0)) != MN_OK)
            snprintf(L->ctx->msg, sizeof L->ctx->msg, "%.250s", d->msg);
        if (err == MN_OK && (err = mn_dist_clip(d, L->gm, o->clip, &gn)) != MN_OK)
            snprintf(L->ctx->msg, sizeof L->ctx->msg, "%.250s", d->msg);
        if (err != MN_OK || gn != gn) {
            // stop without saving: the last checkpoint on disk stays the last good state
            if (d->rank == 0 || ferr != MN_OK || (err != MN_OK && !failed))   // a shared failure: rank 0 reports it
                say_err("step %zu: %s (loss %g, grad norm %g); stopping, checkpoint in %s left as it was\n", step,
                        err ? (failed && ferr == MN_OK ? "another rank's forward failed or its loss is not finite"
                                                       : (L->ctx->msg[0] ? L->ctx->msg : mn_cuda_strerror(err)))
                            : "non-finite gradient", (double)loss, gn, o->out);
            if (err != MN_OK && !failed) d->broken = 1;   // a local failure the other ranks cannot see
            rc = 3; break;
        }
        if ((err = mn_cuda_model_adamw_step(L->gm, lr, &hp)) != MN_OK || (err = mn_cuda_sync(L->ctx)) != MN_OK) {
            say_err("step %zu: AdamW: %s\n", step, L->ctx->msg); d->broken = 1; rc = 3; break;
        }
        double dt = ex_now() - ts;
        if ((err = mn_dist_agree(d, &dt)) != MN_OK) {
            say_err("step %zu: %s\n", step, d->msg); rc = 3; break;
        }   // rank 0's clock
        t_train += dt;
        if (step > step0) { t_steady += dt; tok_steady += N; }
        t_log += dt; tok_log += N;
        if (L->loss_hist) L->loss_hist[step - step0] = loss;
        if (L->gn_hist) L->gn_hist[step - step0] = gn;
        acc += loss; nacc++;
        int last = step + 1 == o->steps || (o->seconds > 0 && t_train >= o->seconds);
        int do_eval = (o->eval_every && (step + 1) % o->eval_every == 0) || last;
        if ((step + 1) % o->log_every == 0 || do_eval) {
            double tps = tok_log / t_log, mfu = tps * 3 * L->fpt / (L->peak * d->world);
            if (do_eval) val = evaluate(L, L->split, L->len, o->eval_batches);   // every rank (collective)
            if (L->verbose) {
                printf("step %6zu | loss %.4f | lr %.2e | grad norm %6.3f | %8.0f tok/s | MFU %4.1f%% | %6.1f s train",
                       step + 1, acc / nacc, lr, gn, tps, 100 * mfu, t_train);
                if (do_eval) printf(" | val %.4f", val);
                printf("\n");
                fflush(stdout);
                FILE* f = fopen(csv, "a");
                if (f) {
                    fprintf(f, "%zu,%.6f,%.6f,%.6g,%.1f,%.5f,%.5g,%.3f\n", step + 1, acc / nacc, do_eval ? val : NAN,
                            lr, tps, mfu, gn, t_train);
                    fclose(f);
                }
            }
            acc = 0; nacc = 0; t_log = 0; tok_log = 0;
        }
        if (L->verbose && o->save_every && (step + 1) % o->save_every == 0 && !last) {
            meta->step = step + 1; meta->rng_state = rng->s; meta->extra[0] = val;
            if ((err = mn_cuda_model_save(L->gm, o->out, meta)) != MN_OK)
                say_err("checkpoint failed: %s\n", L->ctx->msg);
        }
    }
    L->step_end = step; L->tok_steady = tok_steady;
    L->t_train = t_train; L->t_steady = t_steady; L->wall = ex_now() - t_start; L->val = val;
    return rc;
}

// the CPU's recurrent step from the checkpoint (train.c's generate)
static void generate(mn_model* m, const opts* o, mn_rng* r) {
    mn_state st; size_t i, V = m->cfg.vocab_size;
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    const char* p = o->prompt;
    int tok = 0;
    if (!logits || mn_state_init(&st, m, 1) != MN_OK) { free(logits); return; }
    printf("---- sample on the CPU from the checkpoint (temperature %.2f, top-k %zu, top-p %.2f) ----\n%s",
           o->temp, o->top_k, o->top_p, p);
    for (i = 0; p[i]; i++) { tok = (unsigned char)p[i]; if (mn_step(m, &st, &tok, logits) != MN_OK) break; }
    for (i = 0; i < o->sample_len; i++) {
        tok = mn_sample(logits, V, o->temp, o->top_k, o->top_p, r, logits + V);
        putchar((tok >= 32 && tok < 127) || tok == '\n' ? tok : '?');
        if (mn_step(m, &st, &tok, logits) != MN_OK) break;
    }
    printf("\n----\ngeneration: %.1f CG steps per token, head and Mesa layer on average "
           "(at most %d, stop at relative residual %g)\n",
           mn_state_cg_stats(m, &st, NULL), m->cfg.mesa_cg_decode, m->cfg.mesa_cg_tol);
    fflush(stdout);
    mn_state_free(&st);
    free(logits);
}

// the same from the trained model on the GPU (mn_cuda_model_step, one sequence): the prompt, sampler and
// seed of generate, so the two texts agree until float rounding flips a draw
static void generate_gpu(mn_cuda_model* gm, const opts* o, mn_rng* r) {
    mn_cuda_model_state st;
    size_t i, j, V = gm->cfg.vocab_size;
    float* lf = (float*)calloc(V, sizeof(float));              // (V) zeros: an empty prompt samples uniformly first
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    const char* p = o->prompt;
    int tok = 0, err = MN_OK;
    double t0;
    if (!lf || !logits || mn_cuda_model_state_init(&st, gm, 1) != MN_OK) {
        say_err("GPU decode unavailable: %s\n", lf && logits ? gm->ctx->msg : "out of memory");
        free(lf); free(logits);
        return;
    }
    printf("---- sample on the GPU (mn_cuda_model_step; temperature %.2f, top-k %zu, top-p %.2f) ----\n%s", o->temp,
           o->top_k, o->top_p, p);
    t0 = ex_now();
    for (i = 0; p[i] && err == MN_OK; i++) { tok = (unsigned char)p[i]; err = mn_cuda_model_step(gm, &st, &tok, lf); }
    for (i = 0; i < o->gpu_sample && err == MN_OK; i++) {
        for (j = 0; j < V; j++) logits[j] = lf[j];
        tok = mn_sample(logits, V, o->temp, o->top_k, o->top_p, r, logits + V);
        putchar((tok >= 32 && tok < 127) || tok == '\n' ? tok : '?');
        err = mn_cuda_model_step(gm, &st, &tok, lf);
    }
    printf("\n----\n");
    if (err != MN_OK) say_err("GPU decode failed at position %zu: %s\n", st.pos, gm->ctx->msg);
    else printf("GPU decode: %zu tokens in %.2f s (one sequence, a synchronised step per token)\n", st.pos,
                ex_now() - t0);
    fflush(stdout);
    mn_cuda_model_state_free(&st);
    free(lf); free(logits);
}

static void make_config(const opts* o, mn_config* c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 256; c->d_model = o->d_model; c->n_layer = o->layers; c->n_head = o->heads;
    c->head_dim = o->head_dim; c->d_ff = o->d_ff;
    c->max_seq_len = o->seq > 512 ? o->seq : 512; c->pattern = o->pattern; c->window = o->window;
    c->logit_softcap = o->softcap; c->seed = o->seed;
    c->mesa_cg_train = o->cg; c->mesa_cg_decode = o->cg_decode; c->mesa_cg_tol = o->cg_tol;
    c->mesa_gamma_clamp = o->clamp;
}

// ---- what every rank sets up: the text, its device, its stream, the communicator ----
typedef struct {
    unsigned char* text;
    size_t len, split;
    mn_cuda_ctx ctx;
    cudaStream_t stream;     // world > 1: a non-blocking stream for the model and NCCL (world 1: the default
                             // stream, as before)
    mn_dist d;
    int have_ctx, have_dist;
} rank_env;

static void rank_env_free(rank_env* E) {
    if (E->have_dist) mn_dist_free(&E->d);
    if (E->have_ctx) mn_cuda_free(&E->ctx);
    if (E->stream) cudaStreamDestroy(E->stream);
    free(E->text);
    memset(E, 0, sizeof *E);
}

static int rank_env_init(rank_env* E, opts* o, int rank, int world, int device, const mn_nccl_id* id) {
    memset(E, 0, sizeof *E);
    if (ex_read_text(o->data, &E->text, &E->len) != 0 || E->len < 20 * (o->seq + 2)) {
        say_err("need a readable text of at least %zu bytes at %s (pass --data FILE|DIR)\n", 20 * (o->seq + 2),
                o->data);
        return 1;
    }
    E->split = E->len - E->len / 10;
    while (o->eval_batches > 1 && (E->len - E->split) / o->eval_batches <= o->seq + 2) o->eval_batches--;
    if (mn_cuda_init(&E->ctx, device) != MN_OK) {
        say_err("no usable CUDA device %d: %s\n", device, E->ctx.msg); return 1;
    }
    E->have_ctx = 1;
    E->ctx.math = o->math;
    if (o->delta_recompute) E->ctx.delta_form = MN_CUDA_DELTA_RECOMPUTE;
    if (o->delta_fma) E->ctx.delta_chain = MN_CUDA_CHAIN_FMA;
    E->ctx.ssd_tf32 = o->ssd_tf32;
    E->ctx.gla_recompute = o->gla_recompute;
    E->ctx.mesa_keep_states = o->mesa_keep;
    E->ctx.mesa_scan = o->mesa_scan;
    if (world > 1 || id) {   // NCCL beside the legacy default stream risks implicit synchronisation: a stream
                             // of our own
        if (cudaStreamCreateWithFlags(&E->stream, cudaStreamNonBlocking) != cudaSuccess ||
            cublasSetStream((cublasHandle_t)E->ctx.cublas, E->stream) != CUBLAS_STATUS_SUCCESS) {
            say_err("cannot create a CUDA stream on device %d\n", device); return 1;
        }
        E->ctx.stream = (void*)E->stream;
    }
    int err = mn_dist_init(&E->d, &E->ctx, rank, world, id);
    E->have_dist = 1;
    if (err != MN_OK) { say_err("%s (%s)\n", E->d.msg, mn_dist_strerror(err)); return 1; }
    return 0;
}

// --bench_decode B: tokens/s of mn_cuda_model_step, one token for each of b sequences per step, at b = 1 and B,
// each plain and then as a CUDA graph (mn_cuda_model_state.graph = 1: the step recorded once and replayed; a
// pattern with attention runs plainly in both); 16 warm-up steps (the graph is recorded in them), then 256 timed
// ones (positions 16..271); every step copies its (b, V) logits to the host (what a sampler needs), so the
// figure is what generation gets, launches and synchronisation included.
static int bench_decode(mn_cuda_model* gm, size_t Bmax) {
    size_t Bs[2] = { 1, Bmax }, nb = Bmax > 1 ? 2 : 1, V = gm->cfg.vocab_size, warm = 16, timed = 256, k, i, j;
    if (gm->cfg.max_seq_len < warm + timed) {
        say_err("--bench_decode needs max_seq_len >= %zu\n", warm + timed); return 2;
    }
    for (k = 0; k < 2 * nb; k++) {
        size_t b = Bs[k / 2];
        int graph = (int)(k % 2);
        mn_cuda_model_state st;
        int* tok = (int*)malloc(b * sizeof(int));
        float* lg = (float*)malloc(b * V * sizeof(float));   // (b, V)
        mn_rng r; mn_rng_seed(&r, 7);
        int err = tok && lg ? mn_cuda_model_state_init(&st, gm, b) : MN_ERR_ALLOC;
        if (err != MN_OK) {
            say_err("decode bench at batch %zu: %s\n", b, gm->ctx->msg); free(tok); free(lg); return 1;
        }
        st.graph = graph;
        double t0 = 0;
        for (i = 0; i < warm + timed && err == MN_OK; i++) {
            if (i == warm) { cudaDeviceSynchronize(); t0 = ex_now(); }
            for (j = 0; j < b; j++) tok[j] = (int)(mn_rng_u32(&r) % V);
            err = mn_cuda_model_step(gm, &st, tok, lg);
        }
        double dt = ex_now() - t0;
        if (err != MN_OK) say_err("decode bench at batch %zu%s failed: %s\n", b, graph ? " (graph)" : "", gm->ctx->msg);
        else printf("bench_decode: pattern %s, batch %zu, %s: %.0f tokens/s (%.1f us per step, %zu steps after %zu "
                    "warm-up; %zu replayed from a graph)\n", gm->cfg.pattern, b, graph ? "graph" : "plain",
                    (double)(b * timed) / dt, 1e6 * dt / (double)timed, timed, warm, st.graph_steps);
        if (err == MN_OK && graph && st.graph < 0)
            printf("bench_decode: the graph could not be recorded (%s): those steps ran plainly\n", gm->ctx->msg);
        fflush(stdout);
        mn_cuda_model_state_free(&st); free(tok); free(lg);
        if (err != MN_OK) return 1;
    }
    return 0;
}

// ---- a training run on one rank ----
static int run_train(opts o, int rank, int world, int device, const mn_nccl_id* id, const char* id_file) {
    rank_env E;
    int err, rc = 0;
    if (rank_env_init(&E, &o, rank, world, device, id) != 0) { rank_env_free(&E); return 1; }
    if (id_file && rank == 0) unlink(id_file);   // every rank has joined: the id is spent
    mn_cuda_ctx* ctx = &E.ctx;
    int talk = rank == 0 && !o.quiet;
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, device);

    mn_cuda_model gm; mn_train_meta meta; memset(&meta, 0, sizeof meta);
    mn_rng rng; mn_rng_seed(&rng, o.seed);
    if (o.resume) {   // every rank loads the same checkpoint (same parameters, moments and random stream)
        if ((err = mn_cuda_model_load(&gm, ctx, o.resume, &meta)) != MN_OK) {
            say_err("cannot resume from %s: %s (%s)\n", o.resume, mn_cuda_strerror(err), ctx->msg);
            rank_env_free(&E); return 1;
        }
        rng.s = meta.rng_state;
        if (!strcmp(o.out, "runs/cuda")) o.out = o.resume;
        if (talk) printf("resumed %s at step %llu\n", o.resume, (unsigned long long)meta.step);
    } else {
        mn_config c; make_config(&o, &c);
        if ((err = mn_cuda_model_init(&gm, ctx, &c)) != MN_OK) {
            say_err("%s (%s)\n", mn_cuda_strerror(err), ctx->msg); rank_env_free(&E); return 1;
        }
    }
    const mn_config* mc = &gm.cfg;
    if (o.bench_decode) {
        rc = bench_decode(&gm, o.bench_decode); mn_cuda_model_free(&gm); rank_env_free(&E); return rc;
    }
    if (o.seq > mc->max_seq_len) {
        say_err("--seq %zu exceeds the model's max_seq_len %zu\n", o.seq, mc->max_seq_len);
        mn_cuda_model_free(&gm); rank_env_free(&E); return 1;
    }
    if (talk && ex_mkdirs(o.out) != 0) {
        say_err("cannot create %s\n", o.out); mn_cuda_model_free(&gm); rank_env_free(&E); return 1;
    }
    size_t B = o.batch, Bl = B / (size_t)world, T = o.seq, N = B * T;
    if ((err = mn_cuda_model_reserve(&gm, Bl, T)) != MN_OK) {
        say_err("cannot allocate activations for B=%zu T=%zu: %s\n", Bl, T, ctx->msg);
        mn_cuda_model_free(&gm); rank_env_free(&E); return 1;
    }
    double fpt = (double)mn_cuda_model_flops_per_token(&gm, T), peak = o.peak_tflops * 1e12;
    if (talk) {
        printf("device: %s (%d SMs), cuBLAS %s, Mesa CG on fp16 tensor cores, states fp32 | "
               "model on the GPU: %.2f GB\n", prop.name, ctx->sm_count,
               math_name(o.math), mn_cuda_model_device_bytes(&gm) / 1e9);
        if (E.d.comm) {
            char ver[32]; mn_nccl_version_string(mn__nccl.version, ver, sizeof ver);
            printf("data parallel: %d process(es), one GPU each (this one: device %d), NCCL %s (%s), "
                   "NCCL_NVLS_ENABLE=%s | global batch %zu = %d x %zu\n",
                   world, device, ver, mn__nccl.name,
                   getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "(unset)", B, world, Bl);
        }
        printf("model: pattern %s, %zu layers, d_model %zu, %zu heads of %zu, d_ff %zu, vocab %zu | "
               "%zu parameters (%.2f M)\n",
               mc->pattern, mc->n_layer, mc->d_model, mc->n_head, mc->head_dim, mc->d_ff, mc->vocab_size,
               gm.n_trainable, gm.n_trainable / 1e6);
        if (strstr(mc->pattern, "mesa"))
            printf("mesa: %d CG steps in training, %d in decoding (stop at relative residual %g), chunk %zu%s%s\n",
                   mc->mesa_cg_train, mc->mesa_cg_decode, mc->mesa_cg_tol, mc->mesa_chunk,
                   mc->mesa_gamma_clamp ? ", gamma clamp" : "", mc->logit_softcap > 0 ? ", logit soft-cap" : "");
        if (strstr(mc->pattern, "swa")) printf("swa: window %zu\n", mc->window);
        printf("FLOPs: %.1f M per token forward (mn_flops_per_token), %.1f M per trained token (3x); "
               "MFU against %.1f TFLOP/s%s\n", fpt / 1e6, 3 * fpt / 1e6,
               o.peak_tflops, world > 1 ? " per GPU" : "");
        printf("data: %s, %zu bytes (%zu train, %zu validation) | batch %zu x %zu tokens | %zu steps%s",
               o.data, E.len, E.split, E.len - E.split, B, T, o.steps, o.seconds > 0 ? "" : "\n");
        if (o.seconds > 0) printf(" or %.0f s, whichever comes first\n", o.seconds);
        fflush(stdout);
    }

    size_t cap = N + o.cpu_check + 1;
    int *tok = (int*)malloc(cap * sizeof(int)), *tgt = (int*)malloc(cap * sizeof(int));
    if (!tok || !tgt) {
        say_err("out of host memory\n"); free(tok); free(tgt); mn_cuda_model_free(&gm); rank_env_free(&E); return 1;
    }
    char csv[1100]; snprintf(csv, sizeof csv, "%s/loss.csv", o.out);
    if (talk && !o.resume) {
        FILE* f = fopen(csv, "w");
        if (f) { fprintf(f, "step,train_loss,val_loss,lr,tokens_per_s,mfu,grad_norm,train_seconds\n"); fclose(f); }
    }
    size_t step0 = (size_t)meta.step;
    loop_t L; memset(&L, 0, sizeof L);
    L.o = &o; L.ctx = ctx; L.gm = &gm; L.d = &E.d; L.text = E.text; L.len = E.len; L.split = E.split;
    L.B = B; L.Bl = Bl; L.T = T; L.tok = tok; L.tgt = tgt; L.verbose = talk; L.fpt = fpt; L.peak = peak;
    rc = train_loop(&L, &rng, &meta);
    size_t step = L.step_end;
    double val = L.val;
    // every rank leaves the communicator here, together; what follows is rank 0's alone
    mn_dist_free(&E.d); E.have_dist = 0;
    double tps = L.tok_steady > 0 ? L.tok_steady / L.t_steady : (L.t_train > 0 ? N / L.t_train : 0.0);
    if (rank == 0 && o.bench_out && rc == 0) {
        FILE* f = fopen(o.bench_out, "w");
        if (f) { fprintf(f, "%.3f\n", tps); fclose(f); }
        printf("bench: %d GPU%s, global batch %zu (%zu per GPU) x %zu tokens: %.0f tokens/s over %zu steps "
               "after the first (%.1f ms per step)\n",
               world, world > 1 ? "s" : "", B, Bl, T, tps, step - step0 > 0 ? step - step0 - 1 : 0,
               L.tok_steady > 0 ? 1e3 * L.t_steady / (L.tok_steady / (double)N) : 0.0);
        fflush(stdout);
    }
    if (talk && rc == 0 && step > step0) {
        meta.step = step; meta.rng_state = rng.s; meta.extra[0] = val;
        double ts = ex_now();
        if ((err = mn_cuda_model_save(&gm, o.out, &meta)) != MN_OK) {
            say_err("checkpoint failed: %s\n", ctx->msg); rc = 4;
        } else printf("checkpoint: %s/model.safetensors, config.json, optimizer.safetensors (%.1f s)\n",
                      o.out, ex_now() - ts);
        printf("summary: %zu steps, %.2f M tokens in %.1f s of training (%.1f s wall with evaluations); "
               "%.0f tokens/s after the first step "
               "(first step %.2f s); MFU %.1f%% of %.1f TFLOP/s (%.1f%% of the 494.7 TF32 dense rate)%s, "
               "model FLOPs = 3 x %.1f M per token x tokens/s; final validation loss %.4f nats/byte (%.3f bits/byte)\n",
               step - step0, (double)(step - step0) * N / 1e6, L.t_train, L.wall, tps, L.t_train - L.t_steady,
               100 * tps * 3 * fpt / (peak * world), o.peak_tflops, 100 * tps * 3 * fpt / (494.7e12 * world),
               world > 1 ? " per GPU" : "", fpt / 1e6, val, val / log(2.0));
        fflush(stdout);
    }
    // the checkpoint on the CPU: same loss on a held-out window, then a sample
    if (talk && rc == 0 && (o.cpu_check || o.sample_len)) {
        mn_model cpu;
        if ((err = mn_load(&cpu, o.out, NULL)) != MN_OK) {
            say_err("the CPU cannot load %s: %s\n", o.out, mn_strerror(err)); rc = 5;
        } else {
            size_t Tc = o.cpu_check < E.len - E.split - 2 ? o.cpu_check : 0;
            if (Tc) {
                mn_real lc = 0; float lg = 0;
                get_batch(tok, tgt, E.text, E.split, E.len, 1, Tc, NULL, 1, 0, 1);
                double tc = ex_now();
                int e1 = mn_forward(&cpu, tok, tgt, 1, Tc, &lc);
                tc = ex_now() - tc;
                int e2 = mn_cuda_model_forward(&gm, tok, tgt, 1, Tc, &lg);
                printf("checkpoint on the CPU: loss %.6f (GPU %.6f, relative difference %.1e) on %zu held-out tokens "
                       "(CPU forward %.1f s)%s\n",
                       (double)lc, (double)lg, fabs((double)lc - lg) / fabs((double)lc), Tc, tc,
                       e1 || e2 ? " [ERROR]" : "");
            }
            if (o.sample_len) { mn_rng gr; mn_rng_seed(&gr, o.seed + 1000); generate(&cpu, &o, &gr); }
            mn_model_free(&cpu);
        }
    }
    if (talk && rc == 0 && o.gpu_sample) { mn_rng gr; mn_rng_seed(&gr, o.seed + 1000); generate_gpu(&gm, &o, &gr); }
    free(tok); free(tgt);
    mn_cuda_model_free(&gm);
    rank_env_free(&E);
    return rc;
}

// ---- --dist_check ----
static int g_pass = 0, g_fail = 0;
static void check(const char* what, double value, double bound) {
    int ok = value <= bound;   // NaN fails
    printf("  [%s] %-62s %.3e (bound %.0e)\n", ok ? "PASS" : "FAIL", what, value, bound);
    if (ok) g_pass++; else g_fail++;
}
// ||a - b|| / ||b|| over n floats (||a - b|| when b is 0)
static double rel_rms(const float* a, const float* b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { double e = (double)a[i] - b[i]; num += e * e; den += (double)b[i] * b[i]; }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
// every tensor of a against b: the worst ratio (and its name) and the whole block's
static double compare_grads(const mn_cuda_model* gm, const float* a, const float* b, const char** worst_name,
                            double* global) {
    double worst = 0;
    *worst_name = "-";
    for (size_t i = 0; i < gm->n_tensors; i++) {
        double e = rel_rms(a + gm->tensors[i].offset, b + gm->tensors[i].offset, gm->tensors[i].numel);
        if (!(e <= worst)) { worst = e; *worst_name = gm->tensors[i].name; }
    }
    *global = rel_rms(a, b, gm->n_params);
    return worst;
}
// every rank's device block against rank 0's: the count of differing floats and the largest
// difference, summed over the ranks (0 and 0 when the ranks agree bit for bit)
static int cross_rank(mn_dist* d, mn_cuda_ctx* ctx, const float* dev, float* tmp_dev, float* ha, float* hb, size_t n,
                      double* ndiff, double* maxdiff) {
    double v[2] = { 0, 0 };
    int err;
    if ((err = mn_dist_bcast_f32(d, dev, tmp_dev, n, 0)) != MN_OK || (err = mn_dist_wait(d)) != MN_OK) return err;
    if ((err = mn_cuda_download(ctx, ha, dev, n * sizeof(float))) != MN_OK ||
        (err = mn_cuda_download(ctx, hb, tmp_dev, n * sizeof(float))) != MN_OK) return err;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&ha[i], &hb[i], sizeof(float)) != 0) {
            double e = fabs((double)ha[i] - hb[i]); v[0] += 1; if (!(e <= v[1])) v[1] = e;
        }
    if ((err = mn_dist_host_sum(d, v, 2)) != MN_OK) return err;
    *ndiff = v[0]; *maxdiff = v[1];
    return MN_OK;
}

// One step's gradient on a model (rows of tok/tgt: Bb sequences) with the world's weighting;
// *S, *C: the global loss sum and count.
static int grad_step(mn_dist* d, mn_cuda_model* gm, const int* tok, const int* tgt, size_t Bb, size_t T, double* S,
                     double* C, double* norm) {
    float loss; int failed = 0, err;
    int ferr = mn_cuda_model_forward(gm, tok, tgt, Bb, T, &loss);
    if ((err = mn_dist_step_loss(d, gm, ferr, S, C, &failed)) != MN_OK) return err;
    if (failed) return ferr != MN_OK ? ferr : MN_ERR_NAN;
    if ((err = mn_cuda_model_zero_grad(gm)) != MN_OK || (err = mn_cuda_model_backward(gm)) != MN_OK) return err;
    if ((err = mn_dist_reduce_grads(d, gm, *C > 0 ? (double)gm->n_valid / *C : 0.0)) != MN_OK) return err;
    if ((err = mn_dist_clip(d, gm, 0.0, norm)) != MN_OK) return err;   // max_norm 0: the norm only
    return mn_cuda_sync(gm->ctx);
}

// the short run of the check: --check_steps steps of the trainer's loop from a fresh model of --seed
static int check_run(const opts* o, mn_cuda_ctx* ctx, mn_dist* d, const mn_config* c, const rank_env* E, size_t B,
                     size_t Bl, size_t T, int* tok, int* tgt, float* loss_hist, double* gn_hist, mn_cuda_model* gm) {
    opts o2 = *o;
    mn_rng r;
    mn_train_meta meta;
    loop_t L;
    o2.steps = o->check_steps; o2.seconds = 0; o2.eval_every = 0; o2.eval_batches = 0; o2.save_every = 0;
    o2.log_every = (size_t)1 << 40;
    mn_rng_seed(&r, o->seed);
    memset(&meta, 0, sizeof meta);
    memset(&L, 0, sizeof L);
    if (mn_cuda_model_init(gm, ctx, c) != MN_OK || mn_cuda_model_reserve(gm, Bl, T) != MN_OK) {
        say_err("%s\n", ctx->msg); return 1;
    }
    L.o = &o2; L.ctx = ctx; L.gm = gm; L.d = d; L.text = E->text; L.len = E->len; L.split = E->split;
    L.B = B; L.Bl = Bl; L.T = T; L.tok = tok; L.tgt = tgt; L.verbose = 0; L.fpt = 1; L.peak = 1;
    L.loss_hist = loss_hist; L.gn_hist = gn_hist;
    if (train_loop(&L, &r, &meta) != 0 || L.step_end != o2.steps) {
        say_err("the %d-process run stopped at step %zu\n", d->world, L.step_end); return 1;
    }
    return 0;
}

// rank 0, after the world is gone: the one-process references and the report
static int check_report(const opts* o, mn_cuda_ctx* ctx, const mn_config* c, const rank_env* E, int world, size_t B,
                        size_t T, const int* tok, const int* tgt, int* ltok, int* ltgt, const float* g_dist,
                        double loss_step, double C, double norm_dist,
                        double gdiff_n, double gdiff_max, const float* p_dist, double pdiff_n, double pdiff_max,
                        const float* loss_dist, const double* gn_dist) {
    size_t K = o->check_steps, P = 0;
    int rc = 0, err;
    mn_dist one;   // a one-process world on the same device: the single-GPU trainer's path
    mn_cuda_model gm;
    float *g_ref = NULL, *g_emu = NULL, *shard = NULL, *p_ref = NULL, *loss_ref = (float*)calloc(K + 1, sizeof(float));
    double* gn_ref = (double*)calloc(K + 1, sizeof(double));
    double S1 = 0, C1 = 0, norm_ref = 0, worst, global;
    // split vs whole batch, gradients: a shard's products run with other batch sizes, so cuBLAS may
    // pick other algorithms (TF32: operands rounded to 10 bits), and the Mesa CG runs on fp16 tensor
    // cores, where an input change of 1e-7 can flip a rounding 1e-3 wide. Measured on one H200
    // (cuda/results.md run 10), emulated split vs whole batch: TF32 9.5e-4 whole block / 9.2e-3
    // worst tensor, fp32 products 1.6e-3 / 4.1e-3 - the fp16 CG's share dominates either way.
    // With one process nothing is split: that comparison keeps the tight bounds (run 10: 0 exactly).
    double b_block = 5e-3, b_tensor = 2e-2, b1_block = world > 1 ? b_block : 1e-4,
           b1_tensor = world > 1 ? b_tensor : 1e-3;
    const char* wname;
    memset(&gm, 0, sizeof gm);
    if (mn_dist_init(&one, ctx, 0, 1, NULL) != MN_OK) {
        say_err("%s\n", one.msg); free(loss_ref); free(gn_ref); return 1;
    }
    printf("\n1. gradient of one step on the fixed global batch (before clipping), %d process%s against one process "
           "with the whole batch:\n",
           world, world > 1 ? "es" : "");
    printf("  ranks agree bit for bit: %.0f floats differ (largest difference %.3e)\n", gdiff_n, gdiff_max);
    check("floats of the all-reduced gradient that differ between ranks", gdiff_n, 0);
    do {
        if ((err = mn_cuda_model_init(&gm, ctx, c)) != MN_OK || (err = mn_cuda_model_reserve(&gm, B, T)) != MN_OK) {
            say_err("%s (%s)\n", ctx->msg, mn_cuda_strerror(err)); rc = 1; break;
        }
        P = gm.n_params;
        g_ref = (float*)malloc(P * sizeof(float)); g_emu = (float*)calloc(P, sizeof(float));
        shard = (float*)malloc(P * sizeof(float));
        p_ref = (float*)malloc(P * sizeof(float));
        if (!g_ref || !g_emu || !shard || !p_ref || !loss_ref || !gn_ref) {
            say_err("out of host memory\n"); rc = 1; break;
        }
        if ((err = grad_step(&one, &gm, tok, tgt, B, T, &S1, &C1, &norm_ref)) != MN_OK ||
            (err = mn_cuda_model_get(&gm, MN_CUDA_GRADS, g_ref)) != MN_OK) {
            say_err("reference step: %s (%s)\n", ctx->msg, mn_cuda_strerror(err)); rc = 1; break;
        }
        double loss_ref1 = C1 > 0 ? S1 / C1 : 0.0;
        printf("  loss %.8f (one process %.8f), valid targets %.0f (%.0f), gradient norm %.6e (%.6e)\n",
               loss_step, loss_ref1, C, C1, norm_dist, norm_ref);
        check("loss: relative difference", fabs(loss_step - loss_ref1) / fabs(loss_ref1), 1e-5);
        check("valid-target count: difference", fabs(C - C1), 0);
        check("gradient norm: relative difference", fabs(norm_dist - norm_ref) / norm_ref, 1e-4);
        worst = compare_grads(&gm, g_dist, g_ref, &wname, &global);
        printf("  split-vs-whole gradient bounds: whole block %.0e, worst tensor %.0e "
               "(cuBLAS %s; the Mesa CG's fp16 rounding depends on the shard)\n",
               b_block, b_tensor, math_name(o->math));
        check("gradient, whole block: ||g_dist - g_1|| / ||g_1||", global, b1_block);
        check("gradient, worst tensor: ||g_dist - g_1|| / ||g_1||", worst, b1_tensor);
        printf("  (worst tensor: %s)\n", wname);
        // the split emulated on this GPU: shard s's gradient weighted by its share of the valid
        // targets, summed in float as the all-reduce does, against the whole batch's
        size_t k = world > 1 ? (size_t)world : 2;
        if (B % k != 0 || k > 64) {
            printf("  (the one-GPU emulation of a split into %zu needs B %% %zu == 0: skipped)\n", k, k); break;
        }
        size_t Bk = B / k;
        double Se = 0, Ce = 0, ns[64];
        for (size_t s = 0; s < k; s++) {   // the counts first: the weights need the total
            size_t n = 0;
            for (size_t i = s * Bk * T; i < (s + 1) * Bk * T; i++) n += tgt[i] >= 0;
            ns[s] = (double)n; Ce += (double)n;
        }
        for (size_t s = 0; s < k && rc == 0; s++) {
            double Ss = 0, Cs = 0, nrm = 0;
            if ((err = grad_step(&one, &gm, tok + s * Bk * T, tgt + s * Bk * T, Bk, T, &Ss, &Cs, &nrm)) != MN_OK ||
                (err = mn_cuda_model_get(&gm, MN_CUDA_GRADS, shard)) != MN_OK) {
                say_err("emulated split: %s (%s)\n", ctx->msg, mn_cuda_strerror(err)); rc = 1; break;
            }
            float w = (float)(Ce > 0 ? ns[s] / Ce : 0.0);
            for (size_t i = 0; i < P; i++) g_emu[i] += w * shard[i];
            Se += Ss;
        }
        if (rc) break;
        double loss_emu = Ce > 0 ? Se / Ce : 0.0;
        printf("  the split into %zu emulated on one GPU: loss %.8f\n", k, loss_emu);
        check("emulated split: loss relative difference", fabs(loss_emu - loss_ref1) / fabs(loss_ref1), 1e-5);
        worst = compare_grads(&gm, g_emu, g_ref, &wname, &global);
        check("emulated split, whole block vs one process", global, b_block);
        check("emulated split, worst tensor vs one process", worst, b_tensor);
        if (world > 1) {
            worst = compare_grads(&gm, g_dist, g_emu, &wname, &global);
            printf("  all-reduced vs emulated: whole block %.3e, worst tensor %.3e (%s)\n", global, worst, wname);
        }
    } while (0);
    mn_cuda_model_free(&gm);
    printf("\n2. %zu training steps (warmup %zu, lr %.2g, clip %.2g, AdamW), %d process%s against one process:\n",
           K, o->warmup, o->lr, o->clip, world, world > 1 ? "es" : "");
    printf("  ranks agree bit for bit after the run: %.0f parameters differ (largest difference %.3e)\n",
           pdiff_n, pdiff_max);
    check("parameters that differ between ranks after the run", pdiff_n, 0);
    if (rc == 0 && check_run(o, ctx, &one, c, E, B, B, T, ltok, ltgt, loss_ref, gn_ref, &gm) == 0 &&
        mn_cuda_model_get(&gm, MN_CUDA_PARAMS, p_ref) == MN_OK) {
        double worst_l = 0, worst_g = 0;
        printf("  step | loss, %d proc. | loss, 1 proc. | rel. diff | grad norm, %d | grad norm, 1 | rel. diff\n",
               world, world);
        for (size_t s = 0; s < K; s++) {
            double el = fabs((double)loss_dist[s] - loss_ref[s]) / fabs((double)loss_ref[s]);
            double eg = fabs(gn_dist[s] - gn_ref[s]) / fabs(gn_ref[s]);
            if (!(el <= worst_l)) worst_l = el;
            if (!(eg <= worst_g)) worst_g = eg;
            printf("  %4zu | %14.7f | %13.7f | %9.2e | %14.6e | %12.6e | %9.2e\n", s + 1, loss_dist[s], loss_ref[s], el,
                   gn_dist[s], gn_ref[s], eg);
        }
        check("losses step by step: largest relative difference", worst_l, 1e-4);
        check("gradient norms step by step: largest relative difference", worst_g, 1e-3);
        // AdamW turns noise in near-zero gradients into full-size steps, so this one is reported, not bounded
        printf("  parameters after the run: ||p_dist - p_1|| / ||p_1|| = %.3e (reported, no bound)\n",
               rel_rms(p_dist, p_ref, P));
    } else if (rc == 0) { say_err("the one-process run failed: %s\n", ctx->msg); rc = 1; }
    mn_cuda_model_free(&gm);
    mn_dist_free(&one);
    free(g_ref); free(g_emu); free(shard); free(p_ref); free(loss_ref); free(gn_ref);
    printf("dist_check: %d passed, %d failed\n", g_pass, g_fail);
    fflush(stdout);
    return rc ? rc : g_fail ? 6 : 0;
}

static int run_dist_check(opts o, int rank, int world, int device, const mn_nccl_id* id, const char* id_file) {
    rank_env E;
    mn_cuda_model gm;
    mn_config c;
    int err, rc = 0;
    size_t B = o.batch, Bl = B / (size_t)world, T = o.seq, N = B * T, b0 = (size_t)rank * Bl, K = o.check_steps, P = 0;
    int *tok = NULL, *tgt = NULL, *ltok = NULL, *ltgt = NULL;
    float *g_dist = NULL, *hb = NULL, *p_dist = NULL, *tmp_dev = NULL, *loss_dist = NULL;
    double *gn_dist = NULL, S = 0, C = 0, norm_dist = 0, loss_step = 0, gdiff_n = 0, gdiff_max = 0, pdiff_n = 0,
           pdiff_max = 0;
    if (o.resume) { say_err("--dist_check builds fresh models from --seed; drop --resume\n"); return 2; }
    if (K == 0) { say_err("--check_steps must be positive\n"); return 2; }
    memset(&gm, 0, sizeof gm);
    if (rank_env_init(&E, &o, rank, world, device, id) != 0) { rank_env_free(&E); return 1; }
    if (id_file && rank == 0) unlink(id_file);   // every rank has joined: the id is spent
    mn_cuda_ctx* ctx = &E.ctx;
    mn_dist* d = &E.d;
    make_config(&o, &c);
    do {
        if ((err = mn_cuda_model_init(&gm, ctx, &c)) != MN_OK) {
            say_err("%s (%s)\n", mn_cuda_strerror(err), ctx->msg); rc = 1; break;
        }
        P = gm.n_params;
        tok = (int*)malloc(N * sizeof(int)); tgt = (int*)malloc(N * sizeof(int));
        ltok = (int*)malloc(N * sizeof(int)); ltgt = (int*)malloc(N * sizeof(int));
        g_dist = (float*)malloc(P * sizeof(float)); hb = (float*)malloc(P * sizeof(float));
        p_dist = (float*)malloc(P * sizeof(float));
        loss_dist = (float*)calloc(K + 1, sizeof(float)); gn_dist = (double*)calloc(K + 1, sizeof(double));
        if (!tok || !tgt || !ltok || !ltgt || !g_dist || !hb || !p_dist || !loss_dist || !gn_dist ||
            cudaMalloc((void**)&tmp_dev, P * sizeof(float)) != cudaSuccess) {
            say_err("out of memory for the check\n"); tmp_dev = NULL; d->broken = 1; rc = 1; break;
        }
        if (rank == 0) {
            printf("dist_check: %d process%s (rank 0 on device %d), %zu parameters, global batch %zu x %zu "
                   "(%zu per rank), cuBLAS %s, CG %d",
                   world, world > 1 ? "es" : "", device, gm.n_trainable, B, T, Bl, math_name(o.math), o.cg);
            if (d->comm) {
                char ver[32]; mn_nccl_version_string(mn__nccl.version, ver, sizeof ver);
                printf(", through NCCL %s (%s), NCCL_NVLS_ENABLE=%s", ver, mn__nccl.name, getenv("NCCL_NVLS_ENABLE"));
            }
            printf("\n");
            fflush(stdout);
        }
        {   // the fixed global batch: the trainer's first draw, with targets masked unevenly so the ranks
            // hold different numbers of valid targets (sequence 0: its first half; the last: its last quarter)
            mn_rng r; mn_rng_seed(&r, o.seed);
            get_batch(tok, tgt, E.text, 0, E.split, B, T, &r, 0, 0, B);
            for (size_t t = 0; t < T / 2; t++) tgt[t] = -1;
            for (size_t t = T - T / 4; t < T; t++) tgt[(B - 1) * T + t] = -1;
        }
        // 1. one all-reduced step on this rank's rows of the global batch
        if ((err = mn_cuda_model_reserve(&gm, Bl, T)) != MN_OK ||
            (err = grad_step(d, &gm, tok + b0 * T, tgt + b0 * T, Bl, T, &S, &C, &norm_dist)) != MN_OK) {
            say_err("distributed step: %s / %s\n", ctx->msg, d->msg); d->broken = 1; rc = 1; break;
        }
        loss_step = C > 0 ? S / C : 0.0;
        if ((err = cross_rank(d, ctx, gm.grads, tmp_dev, g_dist, hb, P, &gdiff_n, &gdiff_max)) != MN_OK) {
            // g_dist: this rank's gradient
            say_err("gradient comparison across ranks: %s / %s\n", ctx->msg, d->msg); d->broken = 1; rc = 1; break;
        }
        double v[8] = { 0 };   // every rank's valid-target count, for the report
        if (rank < 8) v[rank] = (double)gm.n_valid;
        if (mn_dist_host_sum(d, v, world < 8 ? world : 8) != MN_OK) { say_err("%s\n", d->msg); rc = 1; break; }
        if (rank == 0) {
            printf("one step on the fixed batch: loss %.6f over %.0f valid targets; per rank:", loss_step, C);
            for (int r = 0; r < world && r < 8; r++) printf(" %.0f", v[r]);
            printf("\n");
            fflush(stdout);
        }
        // 2. the short run, every rank
        mn_cuda_model_free(&gm);
        if (check_run(&o, ctx, d, &c, &E, B, Bl, T, ltok, ltgt, loss_dist, gn_dist, &gm) != 0) {
            d->broken = 1; rc = 1; break;
        }
        if ((err = cross_rank(d, ctx, gm.params, tmp_dev, p_dist, hb, P, &pdiff_n, &pdiff_max)) != MN_OK) {
            // p_dist: this rank's parameters
            say_err("parameter comparison across ranks: %s / %s\n", ctx->msg, d->msg); d->broken = 1; rc = 1; break;
        }
    } while (0);
    mn_cuda_model_free(&gm);
    // every rank leaves the communicator together; the references are rank 0's alone
    mn_dist_free(d); E.have_dist = 0;
    if (rc == 0 && rank == 0)
        rc = check_report(&o, ctx, &c, &E, world, B, T, tok, tgt, ltok, ltgt, g_dist, loss_step, C, norm_dist,
                          gdiff_n, gdiff_max, p_dist, pdiff_n, pdiff_max, loss_dist, gn_dist);
    if (tmp_dev) cudaFree(tmp_dev);
    free(tok); free(tgt); free(ltok); free(ltgt); free(g_dist); free(hb); free(p_dist); free(loss_dist); free(gn_dist);
    rank_env_free(&E);
    return rc;
}

// ---- the launcher (--gpus N, --bench N): N copies of this program, one per GPU ----
// Starts nproc ranks (argv + extra + --rank r --world nproc --device base+r [--nccl_fd K]), hands
// each the NCCL unique id through its own pipe, waits. The first rank to fail stops the others
// (SIGTERM, then SIGKILL after 10 s); the exit code is the first failure's (0 when all succeed).
static int launch(int argc, char** argv, int nproc, int base_device, const char* const* extra, int n_extra) {
    char msg[512];
    mn_nccl_id id;
    int fds[64][2], r, rc = 0, alive;
    pid_t pids[64];
    char** args[64];
    char nums[64][4][24];
    if (nproc < 1 || nproc > 64) { fprintf(stderr, "train_cuda: --gpus takes 1 to 64\n"); return 2; }
    if (nproc > 1) {
        if (mn_nccl_load(msg, sizeof msg) != MN_OK) {
            fprintf(stderr, "train_cuda: %s\n", msg); return 1;
        }   // also sets NCCL_NVLS_ENABLE=0
    } else mn_nccl_nvls_off();
    signal(SIGPIPE, SIG_IGN);
    for (r = 0; r < nproc; r++) {
        int k = 0;
        fds[r][0] = fds[r][1] = -1;
        if (nproc > 1 && pipe(fds[r]) != 0) { perror("train_cuda: pipe"); return 1; }
        args[r] = (char**)calloc((size_t)(argc + n_extra + 10), sizeof(char*));
        if (!args[r]) return 1;
        for (int i = 0; i < argc; i++) args[r][k++] = argv[i];
        for (int i = 0; i < n_extra; i++) args[r][k++] = (char*)extra[i];
        snprintf(nums[r][0], 24, "%d", r); snprintf(nums[r][1], 24, "%d", nproc);
        snprintf(nums[r][2], 24, "%d", base_device + r); snprintf(nums[r][3], 24, "%d", fds[r][0]);
        args[r][k++] = (char*)"--rank"; args[r][k++] = nums[r][0];
        args[r][k++] = (char*)"--world"; args[r][k++] = nums[r][1];
        args[r][k++] = (char*)"--device"; args[r][k++] = nums[r][2];
        if (nproc > 1) { args[r][k++] = (char*)"--nccl_fd"; args[r][k++] = nums[r][3]; }
        args[r][k] = NULL;
    }
    fflush(stdout); fflush(stderr);
    int nall = nproc;
    for (r = 0; r < nall; r++) {
        pids[r] = fork();
        if (pids[r] < 0) { perror("train_cuda: fork"); nproc = r; rc = 1; break; }
        if (pids[r] == 0) {   // the child: only its own read end stays open, then this program again
            for (int j = 0; j < nall; j++) {
                if (fds[j][1] >= 0) close(fds[j][1]);
                if (j != r && fds[j][0] >= 0) close(fds[j][0]);
            }
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigaction(SIGPIPE, &dfl, NULL);   // the launcher ignores SIGPIPE; its ranks need not
            execv("/proc/self/exe", args[r]);
            execvp(argv[0], args[r]);
            _exit(127);
        }
    }
    for (r = 0; r < nall; r++) if (fds[r][0] >= 0) { close(fds[r][0]); fds[r][0] = -1; }
    if (nproc > 1 && rc == 0) {   // the id, made after the fork (NCCL's bootstrap thread lives in this process)
        if (mn_nccl_get_id(&id, msg, sizeof msg) != MN_OK) { fprintf(stderr, "train_cuda: %s\n", msg); rc = 1; }
        for (r = 0; r < nproc; r++) {
            size_t put = 0;
            while (rc == 0 && put < sizeof id.bytes) {
                ssize_t w = write(fds[r][1], id.bytes + put, sizeof id.bytes - put);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;   // that rank is gone: waitpid below reports it
                put += (size_t)w;
            }
        }
    }
    for (r = 0; r < nall; r++)
        if (fds[r][1] >= 0) { close(fds[r][1]); fds[r][1] = -1; }   // a rank still waiting reads EOF
    alive = nproc;
    double kill_at = 0;
    int killed_hard = 0;
    while (alive > 0) {
        int st = 0;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p < 0) { if (errno == EINTR) continue; break; }
        if (p == 0) {
            if (kill_at > 0 && !killed_hard && ex_now() > kill_at) {
                for (r = 0; r < nproc; r++) if (pids[r] > 0) kill(pids[r], SIGKILL);
                killed_hard = 1;
            }
            struct timespec ts = { 0, 20 * 1000 * 1000 };
            nanosleep(&ts, NULL);
            continue;
        }
        for (r = 0; r < nproc; r++) if (pids[r] == p) break;
        if (r == nproc) continue;
        pids[r] = -1; alive--;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (code != 0 && rc == 0) {
            rc = code;
            if (alive > 0) {
                fprintf(stderr, "train_cuda: rank %d %s %d; stopping the other %d rank%s\n", r,
                        WIFEXITED(st) ? "exited with code" : "was killed by signal",
                        WIFEXITED(st) ? code : code - 128, alive, alive > 1 ? "s" : "");
                for (int j = 0; j < nproc; j++) if (pids[j] > 0) kill(pids[j], SIGTERM);
                kill_at = ex_now() + 10;
            }
        }
    }
    for (r = 0; r < nall; r++) free(args[r]);
    return rc;
}

// --bench N: tokens/s on 1..N GPUs (fresh ranks for each row), strong and weak scaling
static int bench(int argc, char** argv, const opts* o) {
    int G = (int)o->bench, base = o->device >= 0 ? o->device : 0, rc = 0;
    size_t B = o->batch;
    double tps[2][65];
    char steps[24], batch[65][24];
    memset(tps, 0, sizeof tps);
    if (G < 1 || G > 64) { fprintf(stderr, "train_cuda: --bench takes 1 to 64 GPUs\n"); return 2; }
    snprintf(steps, sizeof steps, "%zu", o->bench_steps);
    printf("bench: %zu steps per row (the first excluded), T %zu, CG %d, cuBLAS %s; "
           "global batch %zu split over the GPUs (strong), "
           "then %zu per GPU (weak); NCCL_NVLS_ENABLE=0\n", o->bench_steps, o->seq, o->cg, math_name(o->math), B, B);
    fflush(stdout);
    for (int weak = 0; weak < 2; weak++)
        for (int w = weak ? 2 : 1; w <= G; w++) {
            size_t Bw = weak ? B * (size_t)w : B;
            char out[64] = "/tmp/mn_bench_XXXXXX";
            int fd = mkstemp(out);
            if (fd < 0) { perror("train_cuda: mkstemp"); return 1; }
            close(fd);
            if (Bw % (size_t)w) {
                printf("bench: global batch %zu does not split over %d GPUs: row skipped\n", Bw, w);
                unlink(out); continue;
            }
            snprintf(batch[w], sizeof batch[w], "%zu", Bw);
            const char* extra[] = { "--bench_out", out, "--quiet", "--steps", steps, "--seconds", "0", "--batch",
                                    batch[w], "--eval_batches", "0", "--eval_every", "0", "--cpu_check", "0",
                                    "--sample", "0", "--save_every", "0", "--log_every", "1000000000" };
            int e = launch(argc, argv, w, base, extra, (int)(sizeof extra / sizeof extra[0]));
            FILE* f = fopen(out, "r");
            if (e == 0 && f && fscanf(f, "%lf", &tps[weak][w]) == 1) {}
            else {
                fprintf(stderr, "train_cuda: bench row (%d GPUs, batch %zu) failed (code %d)\n", w, Bw, e);
                if (!rc) rc = e ? e : 1;
            }
            if (f) fclose(f);
            unlink(out);
        }
    printf("\n| GPUs | global batch | per GPU | tokens/s | x 1 GPU | scaling efficiency |\n"
           "|---|---|---|---|---|---|\n");
    for (int weak = 0; weak < 2; weak++)
        for (int w = weak ? 2 : 1; w <= G; w++) {
            if (tps[weak][w] <= 0) continue;
            size_t Bw = weak ? B * (size_t)w : B;
            double x = tps[0][1] > 0 ? tps[weak][w] / tps[0][1] : 0;
            printf("| %d | %zu | %zu | %.0f | %.2fx | %.1f%% |\n", w, Bw, Bw / (size_t)w, tps[weak][w], x, 100 * x / w);
        }
    fflush(stdout);
    return rc;
}

// ---- rank and world of an externally launched process ----
static int env_int(const char* name, int* out) {
    const char* v = getenv(name);
    char* e;
    long x;
    if (!v || !*v) return 0;
    x = strtol(v, &e, 10);
    if (*e) return 0;
    *out = (int)x;
    return 1;
}
static int rank_from_env(int* rank, int* world, int* local) {
    static const char* const pairs[][3] = {
        { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" },
        { "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID" },
        { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID" },
        { "RANK", "WORLD_SIZE", "LOCAL_RANK" } };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (env_int(pairs[i][0], rank) && env_int(pairs[i][1], world)) {
            if (!env_int(pairs[i][2], local)) *local = *rank;
            return 1;
        }
    return 0;
}
// the id through a file: rank 0 writes it (atomically), the others wait for it
static int id_through_file(const char* path, int rank, mn_nccl_id* id) {
    char msg[512], tmp[1100];
    if (rank == 0) {
        FILE* f;
        if (mn_nccl_get_id(id, msg, sizeof msg) != MN_OK) { say_err("%s\n", msg); return 1; }
        snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
        if (!(f = fopen(tmp, "wb")) || fwrite(id->bytes, 1, sizeof id->bytes, f) != sizeof id->bytes ||
            fclose(f) != 0 || rename(tmp, path) != 0) {
            say_err("cannot write the NCCL id to %s\n", path); return 1;
        }
        return 0;
    }
    double t0 = ex_now();
    time_t born = time(NULL);
    int warned = 0;
    while (1) {
        struct stat st;
        if (stat(path, &st) == 0 && st.st_size == (off_t)sizeof id->bytes) {
            if (st.st_mtime + 120 < born) {
                if (!warned) {
                    say_err("%s is older than this run by over 2 minutes (an earlier run's?): "
                            "waiting for rank 0 to replace it\n", path);
                    warned = 1;
                }
            } else {
                FILE* f = fopen(path, "rb");
                size_t got = f ? fread(id->bytes, 1, sizeof id->bytes, f) : 0;
                if (f) fclose(f);
                if (got == sizeof id->bytes) return 0;
            }
        }
        if (ex_now() - t0 > 600) {
            say_err("no NCCL id at %s after 600 s (rank 0 writes it; give every rank the same new path)\n", path);
            return 1;
        }
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}
static int id_through_fd(int fd, mn_nccl_id* id) {
    size_t got = 0;
    while (got < sizeof id->bytes) {
        ssize_t n = read(fd, id->bytes + got, sizeof id->bytes - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { say_err("the launcher sent no NCCL id (it failed; see its message)\n"); close(fd); return 1; }
        got += (size_t)n;
    }
    close(fd);
    return 0;
}

int main(int argc, char** argv) {
    opts o; memset(&o, 0, sizeof o);
    int anchor = 0, i;
    for (i = 1; i < argc; i++) anchor |= !strcmp(argv[i], "--anchor");
    o.data = "/usr/share/common-licenses"; o.out = "runs/cuda"; o.prompt = "This License ";
    o.d_model = 256; o.layers = 4; o.heads = 2; o.head_dim = 128; o.seq = 1024; o.batch = 16; o.steps = 1000;
    o.cg = 30; o.cg_decode = 30; o.cg_tol = 1e-4; o.pattern = "mesa";
    o.lr = 2e-3; o.lr_min_frac = 0.1; o.warmup = 100; o.wd = 0.1; o.clip = 1.0;
    o.log_every = 10; o.eval_every = 200; o.eval_batches = 4; o.sample_len = 200; o.cpu_check = 128;
    o.temp = 0.8; o.top_p = 0.95; o.seed = 1; o.peak_tflops = 989.4; o.seconds = -1;
    o.device = -1; o.rank = -1; o.nccl_fd = -1; o.check_steps = 20; o.bench_steps = 30;
    o.math = MN_CUDA_MATH_TF32;   // the default: TF32 projections (bf16 is --math bf16)
    if (anchor) {   // fla's anchor (the issue): 318,851 tokens/s on one H200
        o.d_model = 640; o.layers = 8; o.heads = 5; o.head_dim = 128; o.d_ff = 1792; o.batch = 16; o.seq = 2048;
        o.cg = 30;
        o.steps = 1000000; o.eval_every = 100; o.eval_batches = 2;
    }
    if (parse(&o, argc, argv) != 0) return 2;
    if (o.seconds < 0) o.seconds = anchor ? 300 : 0;
    if (o.log_every == 0) o.log_every = 1;
    if (o.batch == 0 || o.seq == 0) { fprintf(stderr, "train_cuda: --batch and --seq must be positive\n"); return 2; }

    // the launchers (this process starts the ranks and touches no GPU)
    if (o.bench && !o.bench_out) return bench(argc, argv, &o);
    if (o.gpus > 1 && o.world <= 0) {
        if (o.batch % o.gpus) {
            fprintf(stderr, "train_cuda: --batch %zu does not split over %zu GPUs "
                    "(the global batch must be a multiple of --gpus)\n", o.batch, o.gpus);
            return 2;
        }
        return launch(argc, argv, (int)o.gpus, o.device >= 0 ? o.device : 0, NULL, 0);
    }

    // this process is one rank
    int rank = 0, world = 1, local = 0, device;
    if (o.world > 0) {   // given: --rank R --world W (the launcher's children, or by hand)
        world = o.world; rank = o.rank;
        device = o.device >= 0 ? o.device : rank;
    } else if (o.nccl_id) {   // an external launcher's environment
        if (!rank_from_env(&rank, &world, &local)) {
            fprintf(stderr, "train_cuda: --nccl_id needs --rank R --world W, "
                    "or the environment of mpirun / srun / torchrun (RANK, WORLD_SIZE)\n");
            return 2;
        }
        device = (o.device >= 0 ? o.device : 0) + local;
    } else device = o.device >= 0 ? o.device : 0;
    g_rank = rank; g_world = world;
    if (world < 1 || rank < 0 || rank >= world) {
        fprintf(stderr, "train_cuda: rank %d outside a world of %d\n", rank, world); return 2;
    }
    if (o.batch % (size_t)world) {
        say_err("--batch %zu does not split over %d processes "
                "(the global batch must be a multiple of the world size)\n", o.batch, world);
        return 2;
    }
    mn_nccl_id id;
    const mn_nccl_id* idp = NULL;
    if (world > 1) {
        mn_nccl_nvls_off();
        if (o.nccl_fd >= 0) { if (id_through_fd(o.nccl_fd, &id) != 0) return 1; }
        else if (o.nccl_id) { if (id_through_file(o.nccl_id, rank, &id) != 0) return 1; }
        else { say_err("a world of %d needs --nccl_id FILE (or start it with --gpus N)\n", world); return 2; }
        idp = &id;
    } else if (o.nccl_self) {   // world 1 through NCCL: the multi-GPU path on one GPU
        char msg[512];
        if (mn_nccl_get_id(&id, msg, sizeof msg) != MN_OK) { say_err("%s\n", msg); return 1; }
        idp = &id;
    }
    const char* id_file = o.nccl_fd < 0 ? o.nccl_id : NULL;
    if (o.dist_check) return run_dist_check(o, rank, world, device, idp, id_file);
    return run_train(o, rank, world, device, idp, id_file);
}
