/* fuzz_vecfile.c - libFuzzer target for mn_vec_parse (reference/vecfile.h)

   Build and run (from the repository root):
       clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz_vecfile.c -o fuzz_vecfile
       ./fuzz_vecfile -max_total_time=60 -dict=tests/fuzz_vecfile.dict tests/corpus/vecfile
   (Writing new inputs into tests/corpus/vecfile grows the committed seed set; pass an empty
   scratch directory first, e.g. `mkdir -p /tmp/vcorpus && ./fuzz_vecfile /tmp/vcorpus
   tests/corpus/vecfile`, to keep it small.)

   libFuzzer hands over a heap copy of exactly `size` bytes with no NUL after it, so ASan reports
   any read past len. Beyond "no crash", the target checks the parser's promises and traps when
   one is broken: on error f is all zero and err holds a message; on success every tensor's n is
   the product of its dims and its data is readable. */
#include <stdint.h>
#include <string.h>

#define MN_VECFILE_IMPLEMENTATION
#include "reference/vecfile.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static mn_vec_file g_file; /* ~17 KB: static rather than on the fuzzer's stack */
static const mn_vec_file g_zero;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char err[256];
    size_t i, j;
    int rc = mn_vec_parse(&g_file, (const char*)data, size, err, sizeof(err));
    if (rc != MN_VEC_OK) {
        /* the error path must free everything (LeakSanitizer checks) and zero the struct */
        if (rc >= 0 || memcmp(&g_file, &g_zero, sizeof(g_file)) != 0 || err[0] == '\0') __builtin_trap();
        return 0;
    }
    if (g_file.n_tensor > MN_VEC_MAX_TENSOR || g_file.n_attr > MN_VEC_MAX_ATTR || g_file.op[0] == '\0')
        __builtin_trap();
    for (i = 0; i < g_file.n_tensor; i++) {
        const mn_vec_tensor* t = &g_file.tensor[i];
        size_t n = 1;
        volatile double sink = 0;
        if (t->ndim == 0 || t->ndim > MN_VEC_MAX_NDIM || t->data == NULL) __builtin_trap();
        for (j = 0; j < t->ndim; j++) n *= t->dims[j];
        if (n != t->n || mn_vec_get(&g_file, t->name) != t) __builtin_trap();
        /* touch every value so ASan sees an undersized allocation */
        for (j = 0; j < t->n; j++) sink += t->data[j];
        (void)sink;
    }
    for (i = 0; i < g_file.n_attr; i++) {
        if (mn_vec_attr(&g_file, g_file.attr[i].name) != g_file.attr[i].value) __builtin_trap();
        (void)mn_vec_attr_f(&g_file, g_file.attr[i].name, 0.0);
    }
    mn_vec_free(&g_file);
    return 0;
}
