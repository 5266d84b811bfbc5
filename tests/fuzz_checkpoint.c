// libFuzzer target for the checkpoint loader as a whole (mn_load's checks, from memory): a set of
// config.json + model.safetensors (+ optimizer.safetensors), so the fuzzer reaches the config-vs-tensor
// checks, the coverage check, the stamps, the optimizer's metadata and the dtype conversions.
//   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz_checkpoint.c -lm
// Input: byte 0 bit 0 = load the optimizer too; bytes 1-2 the length of config.json and 3-6 that of
// model.safetensors (little-endian); then config.json, model.safetensors, and the rest is
// optimizer.safetensors. Beyond "no crash, leak or UB" it traps when a promise is broken: a failed
// load leaves *m and *meta as they were; a successful one holds only finite values and its opt_v >= 0.
// The seeds in tests/corpus/checkpoint are real sets mn_save wrote, packed that way by
//   cc -std=c99 -DFUZZ_MAKE_SEEDS -I. tests/fuzz_checkpoint.c -o /tmp/seeds -lm && /tmp/seeds tests/corpus/checkpoint
#define _POSIX_C_SOURCE 200809L
#define MESANET_IMPLEMENTATION
#ifndef FUZZ_MAKE_SEEDS
#define MN_LOG(...) ((void)0)
#endif
#include "mesanet.h"
#include <string.h>

#ifndef FUZZ_MAKE_SEEDS
int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    static mn_model m, pm;
    static mn_train_meta meta, pmeta;
    mn__src ms, os;
    size_t cl, ml, i;
    int with_meta, err;
    if (size < 7) return 0;
    with_meta = data[0] & 1;
    cl = (size_t)data[1] | (size_t)data[2] << 8;
    ml = (size_t)data[3] | (size_t)data[4] << 8 | (size_t)data[5] << 16 | (size_t)data[6] << 24;
    data += 7; size -= 7;
    if (cl > size) cl = size;
    if (ml > size - cl) ml = size - cl;
    memset(&ms, 0, sizeof ms); memset(&os, 0, sizeof os);
    ms.mem = data + cl; ms.size = ml; ms.path = "model.safetensors";
    os.mem = data + cl + ml; os.size = size - cl - ml; os.path = "optimizer.safetensors";
    memset(&m, 0x5A, sizeof m); memset(&meta, 0xA5, sizeof meta); pm = m; pmeta = meta;
    err = mn__load_set(&m, "fuzz", (const char*)data, cl, &ms, &os, with_meta ? &meta : NULL);
    if (err != MN_OK) {
        if (err >= 0 || memcmp(&m, &pm, sizeof m) || memcmp(&meta, &pmeta, sizeof meta)) __builtin_trap();
        return 0;
    }
    for (i = 0; i < m.n_params; i++) if (!(m.params[i] - m.params[i] == 0)) __builtin_trap();
    if (with_meta)
        for (i = 0; i < m.n_params; i++) if (!(m.opt_m[i] - m.opt_m[i] == 0) || !(m.opt_v[i] >= 0)) __builtin_trap();
    if (m.cfg.pattern != m.pattern_buf || m.n_tensors == 0) __builtin_trap();
    mn_model_free(&m);
    return 0;
}
#else
// Writes one seed per configuration: the set mn_save writes after one AdamW step, packed as above.
#include <sys/stat.h>
static size_t slurp(const char* path, unsigned char* buf, size_t cap) {
    FILE* f = fopen(path, "rb"); size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f) fclose(f);
    return n;
}
int main(int argc, char** argv) {
    const char* pats[2] = { "attn", "mesa" };
    static unsigned char c[1 << 16], mo[1 << 20], op[1 << 20];
    int k;
    if (argc != 2) { fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]); return 2; }
    for (k = 0; k < 2; k++) {
        mn_config cfg; mn_model m; mn_train_meta t; mn_real loss;
        int tok[4] = { 1, 2, 3, 4 }, tgt[4] = { 2, 3, 4, 5 };
        char dir[] = "/tmp/fuzz_seed_XXXXXX", path[600];
        size_t cl, ml, ol; unsigned char hdr[7]; FILE* f;
        memset(&cfg, 0, sizeof cfg); memset(&t, 0, sizeof t);
        cfg.vocab_size = 6; cfg.d_model = 4; cfg.n_layer = 1; cfg.n_head = 1; cfg.d_ff = 4; cfg.max_seq_len = 8;
        cfg.pattern = pats[k];
        if (mn_model_init(&m, &cfg) || mn_forward(&m, tok, tgt, 1, 4, &loss)) return 1;
        mn_zero_grad(&m); mn_backward(&m); mn_adamw_step(&m, 1e-2, NULL);
        t.step = 1; t.rng_state = 7; snprintf(t.notes, sizeof t.notes, "seed %s", pats[k]);
        if (!mkdtemp(dir) || mn_save(&m, dir, &t)) return 1;
        snprintf(path, sizeof path, "%s/config.json", dir); cl = slurp(path, c, sizeof c);
        snprintf(path, sizeof path, "%s/model.safetensors", dir); ml = slurp(path, mo, sizeof mo);
        snprintf(path, sizeof path, "%s/optimizer.safetensors", dir); ol = slurp(path, op, sizeof op);
        hdr[0] = 1; hdr[1] = (unsigned char)cl; hdr[2] = (unsigned char)(cl >> 8);
        hdr[3] = (unsigned char)ml; hdr[4] = (unsigned char)(ml >> 8); hdr[5] = (unsigned char)(ml >> 16); hdr[6] = 0;
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], pats[k]);
        if (!(f = fopen(path, "wb"))) return 1;
        fwrite(hdr, 1, 7, f); fwrite(c, 1, cl, f); fwrite(mo, 1, ml, f); fwrite(op, 1, ol, f); fclose(f);
        printf("%s: %zu + %zu + %zu bytes\n", path, cl, ml, ol);
        mn_model_free(&m);
    }
    return 0;
}
#endif
