// dump_logits: the logits of a checkpoint on given bytes, for comparing this library with another
// implementation (reference/fla_interop.py runs it beside flash-linear-attention's MesaNet).
//
//   dump_logits CKPT TOKENS OUT [OUT_STEP]
//
// CKPT is a checkpoint folder (config.json + model.safetensors, ours or fla's); TOKENS a file
// whose bytes are the token ids (one sequence, each byte < vocab_size). OUT receives the logits of
// the training forward (mn_forward, the chunkwise Mesa form) as T*V little-endian float64 values,
// row t = the logits after token t; OUT_STEP, when given, the same from the decoding step (mn_step,
// one token at a time), i.e. this library's own parallel-vs-recurrent pair. Build it as a double
// build (-DMESANET_DOUBLE) so that what is compared is the arithmetic's definition, not float
// rounding. Exit codes: 0 written, 1 the checkpoint or an output failed, 2 bad usage or input.
#define MESANET_IMPLEMENTATION
#include "../mesanet.h"
#include <stdio.h>
#include <stdlib.h>

// Writes n doubles (converted from mn_real) to path; 0 on success.
static int write_f64(const char* path, const mn_real* x, size_t n) {
    FILE* f = fopen(path, "wb");
    size_t i;
    int ok = f != NULL;
    for (i = 0; ok && i < n; i++) { double d = (double)x[i]; ok = fwrite(&d, sizeof d, 1, f) == 1; }
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) { fprintf(stderr, "dump_logits: cannot write %s\n", path); remove(path); }
    return ok ? 0 : 1;
}

int main(int argc, char** argv) {
    mn_model m;
    mn_state st;
    FILE* f;
    int* tok;
    mn_real *steps, loss = 0;
    size_t T = 0, V, t, cap = 1 << 16;
    int c, err, rc = 0;
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: dump_logits CKPT TOKENS OUT [OUT_STEP]   (logits as T*V float64)\n");
        return 2;
    }
    if (!(f = fopen(argv[2], "rb"))) { fprintf(stderr, "dump_logits: cannot read %s\n", argv[2]); return 2; }
    tok = (int*)malloc(cap * sizeof(int));
    while (tok && T < cap && (c = fgetc(f)) != EOF) tok[T++] = c;
    fclose(f);
    if (!tok || T == 0 || T == cap) {
        fprintf(stderr, "dump_logits: %s: need 1 to %zu bytes\n", argv[2], cap - 1);
        free(tok);
        return 2;
    }
    if ((err = mn_load(&m, argv[1], NULL)) != MN_OK) {
        fprintf(stderr, "dump_logits: cannot load %s: %s\n", argv[1], mn_strerror(err));
        free(tok);
        return 1;
    }
    V = m.cfg.vocab_size;
    for (t = 0; t < T; t++)
        if ((size_t)tok[t] >= V) {
            fprintf(stderr, "dump_logits: byte %d at %zu >= vocab %zu\n", tok[t], t, V);
            rc = 2;
        }
    if (!rc && (err = mn_forward(&m, tok, NULL, 1, T, &loss)) != MN_OK) {
        fprintf(stderr, "dump_logits: forward failed: %s\n", mn_strerror(err));
        rc = 1;
    }
    if (!rc) rc = write_f64(argv[3], mn_logits(&m), T * V);
    if (!rc && argc == 5) {         // the decoding step, token by token from an empty state
        int have_state = 0;
        steps = (mn_real*)malloc(T * V * sizeof(mn_real));
        if (steps && mn_state_init(&st, &m, 1) == MN_OK) have_state = 1;
        else { fprintf(stderr, "dump_logits: out of memory\n"); rc = 1; }
        for (t = 0; !rc && t < T; t++)
            if ((err = mn_step(&m, &st, &tok[t], steps + t * V)) != MN_OK) {
                fprintf(stderr, "dump_logits: step %zu failed: %s\n", t, mn_strerror(err));
                rc = 1;
            }
        if (have_state) mn_state_free(&st);
        if (!rc) rc = write_f64(argv[4], steps, T * V);
        free(steps);
    }
    if (!rc) fprintf(stderr, "dump_logits: %s: T %zu, V %zu, pattern %s\n", argv[1], T, V, m.cfg.pattern);
    mn_model_free(&m);
    free(tok);
    return rc;
}
