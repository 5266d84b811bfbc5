// generate: sample text from a checkpoint with the recurrent step (O(1) state per token for
// recurrent mixers; a KV cache for attention).
//
//   ./build/generate --ckpt runs/default --prompt "This License " --n 400 --temp 0.8 --top_p 0.95
//
// Exit status: 0 all --n tokens printed; 1 the checkpoint did not load, or generation stopped early
// (the message says why, e.g. an attention model's context is full); 2 a bad command line.
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"

static void usage(FILE* f) {
    fprintf(f, "usage: generate [--ckpt DIR] [--prompt TEXT] [--n N] [--temp X] [--top_k N] [--top_p X] [--seed N]\n"
               "                [--cg N (Mesa decode CG steps)] [--cg_tol EPS (dynamic stop; 0 = fixed)]\n"
               "                [--cg_warm 0-6 (CG start: 0 x0 = 0, 1 Jacobi, 2-4 from the previous solution,\n"
               "                 5, 6 the exact solve of the last 8, 16 tokens' part of H_t: Woodbury)]\n");
}

int main(int argc, char** argv) {
    const char *ckpt = "runs/default", *prompt = "This License ";
    size_t n = 400, top_k = 0, i; double temp = 0.8, top_p = 0.95, cg_tol = -1; uint64_t seed = 1;
    int cg = 0, cg_warm = -1, a, bad = 0;
    #define RANGE(cond, msg) ((cond) && fprintf(stderr, "generate: %s\n", msg) > 0)   // a message, and true
    for (a = 1; a < argc && !bad; a += 2) {
        const char *k = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(k, "-h") || !strcmp(k, "--help")) { usage(stdout); return 0; }
        if (!v) { fprintf(stderr, "generate: option %s needs a value\n", k); usage(stderr); return 2; }
        if (!strcmp(k, "--ckpt")) ckpt = v;
        else if (!strcmp(k, "--prompt")) prompt = v;
        else if (!strcmp(k, "--n")) bad = ex_parse_size(k, v, &n) || RANGE(n > 100000000, "--n at most 1e8");
        else if (!strcmp(k, "--temp")) bad = ex_parse_double(k, v, &temp) || RANGE(temp < 0, "--temp must be >= 0");
        else if (!strcmp(k, "--top_k")) bad = ex_parse_size(k, v, &top_k);
        else if (!strcmp(k, "--top_p"))
            bad = ex_parse_double(k, v, &top_p) || RANGE(top_p < 0 || top_p > 1, "--top_p must be in [0, 1]");
        else if (!strcmp(k, "--seed")) bad = ex_parse_u64(k, v, UINT64_MAX, &seed);
        else if (!strcmp(k, "--cg")) bad = ex_parse_int(k, v, 1, 1000, &cg);
        else if (!strcmp(k, "--cg_warm")) bad = ex_parse_int(k, v, 0, 6, &cg_warm);
        else if (!strcmp(k, "--cg_tol"))
            bad = ex_parse_double(k, v, &cg_tol) || RANGE(cg_tol < 0 || cg_tol >= 1, "--cg_tol must be in [0, 1)");
        else { fprintf(stderr, "generate: unknown option %s\n", k); usage(stderr); return 2; }
    }
    #undef RANGE
    if (bad) return 2;
    mn_model m; mn_state st; mn_rng r; int err = MN_OK, tok;
    if ((err = mn_load(&m, ckpt, NULL)) != MN_OK) {
        fprintf(stderr, "generate: cannot load %s: %s\n", ckpt, mn_strerror(err)); return 1;
    }
    if (cg != 0) m.cfg.mesa_cg_decode = cg;          // decoding settings may differ from the checkpoint's
    if (cg_tol >= 0) m.cfg.mesa_cg_tol = cg_tol;
    if (cg_warm >= 0) m.cfg.mesa_cg_warm = cg_warm;
    size_t V = m.cfg.vocab_size;
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    if (!logits || (err = mn_state_init(&st, &m, 1)) != MN_OK) {
        fprintf(stderr, "generate: cannot set up decoding: %s\n", mn_strerror(err ? err : MN_ERR_ALLOC));
        free(logits); mn_model_free(&m); return 1;
    }
    mn_rng_seed(&r, seed);
    fprintf(stderr, "%s: %zu parameters, pattern %s; state %zu bytes\n", ckpt, m.n_trainable, m.cfg.pattern, st.bytes);
    fputs(prompt, stdout);
    for (i = 0; prompt[i]; i++) { tok = (unsigned char)prompt[i]; if ((err = mn_step(&m, &st, &tok, logits))) break; }
    double t0 = ex_now();
    for (i = 0; i < n && err == MN_OK; i++) {
        tok = mn_sample(logits, V, temp, top_k, top_p, &r, logits + V);
        if (tok < 0) { err = tok; break; }
        putchar((tok >= 32 && tok < 127) || tok == '\n' ? tok : '?');
        err = mn_step(&m, &st, &tok, logits);
        if (err == MN_OK) continue;
        i++;   // the token was printed; the step that would follow it failed
        break;
    }
    printf("\n");
    fprintf(stderr, "%zu tokens in %.2f s (%.0f tokens/s)\n", i, ex_now() - t0, i / (ex_now() - t0));
    if (strstr(m.cfg.pattern, "mesa"))
        fprintf(stderr, "Mesa decoding: %.2f CG steps per token, head and layer on average "
                "(at most %d, stop at relative residual %g)\n",
                mn_state_cg_stats(&m, &st, NULL), m.cfg.mesa_cg_decode, m.cfg.mesa_cg_tol);
    if (err != MN_OK)
        fprintf(stderr, "generate: stopped after %zu of %zu tokens: %s (see above)\n", i, n, mn_strerror(err));
    free(logits); mn_state_free(&st); mn_model_free(&m);
    return err == MN_OK ? 0 : 1;
}
