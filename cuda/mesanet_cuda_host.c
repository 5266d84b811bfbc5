/* mesanet_cuda_host.c - the CPU side of the CUDA model (mn_cuda_model in mesanet_cuda.h).

   The GPU model keeps a CPU mn_model (float) for what the checkpoint path needs: the parameter
   table (names, shapes, offsets, weight-decay flags), the initialisation, mn_save and mn_load.
   This file compiles its OWN private copy of mesanet.h's implementation (MESANET_STATIC: every
   function static) and exports only the five functions below, so a program may link the CUDA
   library and still define MESANET_IMPLEMENTATION itself, in float or in double (test_cuda's CPU
   reference is a double build), without a clash. The library's model always uses float, like
   the GPU: a checkpoint it writes is byte for byte what the float CPU build writes for the same
   parameters. Build: any C99 compiler (`make cuda` uses $(CC)); link with build/mesanet_cuda.o. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"   /* the private copy: most of it is unused here */
#endif
#ifdef MESANET_DOUBLE
#error "mesanet_cuda_host.c is the float side of the GPU model: build it without MESANET_DOUBLE"
#endif
#define _POSIX_C_SOURCE 200809L   /* mn_save's atomic folder swap (mesanet.h >>io) needs POSIX 2008 */
#define MESANET_STATIC
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#include <stdint.h>

int mn_cuda_host_model_init(mn_model* m, const mn_config* cfg) { return mn_model_init(m, cfg); }
void mn_cuda_host_model_free(mn_model* m) { mn_model_free(m); }
int mn_cuda_host_load(mn_model* m, const char* dir, mn_train_meta* meta) { return mn_load(m, dir, meta); }
size_t mn_cuda_host_flops_per_token(const mn_model* m, size_t T) { return mn_flops_per_token(m, T); }
/* mn_save with the AdamW moments taken from opt_mv (2 * n_params floats: m, then v) when meta is
   given; the model's own moment pointers are restored afterwards. */
int mn_cuda_host_save(mn_model* m, const char* dir, const mn_train_meta* meta, float* opt_mv, uint64_t opt_step) {
    mn_real *km = m->opt_m, *kv = m->opt_v;
    uint64_t ks = m->opt_step;
    int err;
    if (meta && opt_mv) { m->opt_m = opt_mv; m->opt_v = opt_mv + m->n_params; m->opt_step = opt_step; }
    err = mn_save(m, dir, meta);
    m->opt_m = km; m->opt_v = kv; m->opt_step = ks;
    return err;
}
