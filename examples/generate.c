// generate: sample text from a checkpoint with the recurrent step (O(1) state per token for
// recurrent mixers; a KV cache for attention).
//
//   ./build/generate --ckpt runs/default --prompt "This License " --n 400 --temp 0.8 --top_p 0.95
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"

int main(int argc, char** argv) {
    const char *ckpt = "runs/default", *prompt = "This License ";
    size_t n = 400, top_k = 0, i; double temp = 0.8, top_p = 0.95, cg_tol = -1; uint64_t seed = 1;
    int cg = 0;
    int a;
    for (a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--ckpt")) ckpt = argv[a + 1];
        else if (!strcmp(argv[a], "--prompt")) prompt = argv[a + 1];
        else if (!strcmp(argv[a], "--n")) n = (size_t)strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--temp")) temp = strtod(argv[a + 1], NULL);
        else if (!strcmp(argv[a], "--top_k")) top_k = (size_t)strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--top_p")) top_p = strtod(argv[a + 1], NULL);
        else if (!strcmp(argv[a], "--seed")) seed = strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--cg")) cg = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--cg_tol")) cg_tol = strtod(argv[a + 1], NULL);
        else { fprintf(stderr, "generate: unknown option %s\nusage: generate [--ckpt DIR] [--prompt TEXT] [--n N] [--temp X] [--top_k N] [--top_p X] [--seed N]\n"
                             "                [--cg N (Mesa decode CG steps)] [--cg_tol EPS (dynamic stop; 0 = fixed)]\n", argv[a]); return 2; }
    }
    if (a < argc) { fprintf(stderr, "generate: option %s needs a value\n", argv[a]); return 2; }
    mn_model m; mn_state st; mn_rng r; int err, tok;
    if ((err = mn_load(&m, ckpt, NULL)) != MN_OK) { fprintf(stderr, "generate: cannot load %s: %s\n", ckpt, mn_strerror(err)); return 1; }
    if (cg != 0) m.cfg.mesa_cg_decode = cg;          // decoding settings may differ from the checkpoint's
    if (cg_tol >= 0) m.cfg.mesa_cg_tol = cg_tol;
    if ((err = mn_state_init(&st, &m, 1)) != MN_OK) { mn_model_free(&m); return 1; }
    size_t V = m.cfg.vocab_size;
    mn_real* logits = (mn_real*)malloc(3 * V * sizeof(mn_real));
    mn_rng_seed(&r, seed);
    fprintf(stderr, "%s: %zu parameters, pattern %s; state %zu bytes\n", ckpt, m.n_trainable, m.cfg.pattern, st.bytes);
    fputs(prompt, stdout);
    for (i = 0; prompt[i]; i++) { tok = (unsigned char)prompt[i]; if ((err = mn_step(&m, &st, &tok, logits))) break; }
    double t0 = ex_now();
    for (i = 0; i < n && err == MN_OK; i++) {
        tok = mn_sample(logits, V, temp, top_k, top_p, &r, logits + V);
        putchar((tok >= 32 && tok < 127) || tok == '\n' ? tok : '?');
        err = mn_step(&m, &st, &tok, logits);
    }
    printf("\n");
    fprintf(stderr, "%zu tokens in %.2f s (%.0f tokens/s)%s%s\n", i, ex_now() - t0, i / (ex_now() - t0), err ? "; stopped: " : "", err ? mn_strerror(err) : "");
    if (strstr(m.cfg.pattern, "mesa"))
        fprintf(stderr, "Mesa decoding: %.2f CG steps per token, head and layer on average (at most %d, stop at relative residual %g)\n",
                mn_state_cg_stats(&m, &st, NULL), m.cfg.mesa_cg_decode, m.cfg.mesa_cg_tol);
    free(logits); mn_state_free(&st); mn_model_free(&m);
    return 0;
}
