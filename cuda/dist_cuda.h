/* dist_cuda.h - data-parallel training of mn_cuda_model over the GPUs of one host, through NCCL
   loaded at run time. Header-only; include it from ONE .cu file (build/train_cuda includes it).

   WHAT THIS IS
     One process per GPU, each with its own mn_cuda_model holding the same parameters. Every step
     each rank runs forward + backward on its shard of the global batch; the gradients are summed
     with ncclAllReduce (fp32, in place on the model's grads block), so every rank holds the
     gradient of the WHOLE global batch, then clips by the global norm and takes the same AdamW
     step. Nothing here is home-made communication: the collectives are NCCL's.

   NCCL AT RUN TIME (nothing NCCL is needed to build)
     mn_nccl_load() dlopen()s $MN_NCCL_LIB if set, else "libnccl.so.2", then "libnccl.so", and
     looks up the few functions used; the types they take are declared here (ncclUniqueId is 128
     bytes; ncclResult_t, ncclDataType_t and ncclRedOp_t are int-sized enums; NCCL 2.x ABI). A
     missing library returns MN_ERR_NCCL with one line saying what is missing and how to install
     it (pip: nvidia-nccl-cu13, whose nvidia/nccl/lib folder goes on LD_LIBRARY_PATH; Debian /
     Ubuntu: libnccl2 from NVIDIA's CUDA repository). World size 1 never loads NCCL.
     NVLink multicast (NVLS) is kept off: mn_nccl_load sets NCCL_NVLS_ENABLE=0 in the process's
     environment before NCCL reads it (a different value already set is overridden, with a note on
     stderr), and the launcher in train_cuda sets it before it starts the ranks.

   WEIGHTING (the gradient equals the single-GPU gradient of the global batch)
     mn_cuda_model's loss is the mean over ITS OWN valid targets (n_r of them): its gradient is
     g_r = (1/n_r) sum_{i in r} dl_i. The global mean over N = sum_r n_r targets has gradient
     sum_r (n_r / N) g_r. So after the forward the ranks all-reduce (loss sum, n_r) in double
     (mn_dist_step_loss: the loss of the global batch is sum / N, as the single GPU computes it),
     each scales its gradient by n_r / N (mn_dist_reduce_grads; skipped when it is exactly 1) and
     the scaled gradients are summed. With equal shards and a power-of-two world the scale is
     exactly 1/W and the per-target weights are bit for bit the single GPU's 1/N.

   IDENTICAL ON ALL RANKS
     NCCL's all-reduce hands every rank the same bits. The clip (mn_dist_clip) then sums the
     squares of a different 1/W slice of the (identical) gradient on each rank and all-reduces that
     one double, so the norm and the scale are the same on every rank (a per-rank full sum would
     not be: double atomics add in a varying order); AdamW is elementwise. So parameters stay
     bitwise identical across ranks. mn_dist_agree hands every rank rank 0's value (the step time:
     time-based stopping and the learning-rate schedule then agree).

   ERRORS
     Every function returns MN_OK or a negative code (MN_ERR_NCCL, MN_ERR_CUDA, ...); d->msg holds
     one line. Nothing here calls exit(). A failure that other ranks cannot see (a CUDA fault)
     marks the communicator broken: mn_dist_free then aborts it (ncclCommAbort) instead of
     destroying it. Waits poll the stream and ncclCommGetAsyncError, so a peer's NCCL error ends
     the wait; a peer that simply died is the launcher's job (it stops the other ranks).

   WORLD SIZE 1
     The same calls, with no NCCL: the loss reduce reads the local values, the gradient reduce is a
     no-op, the clip is mn_cuda_model_clip_grad_norm: a 1-process run is the single-GPU trainer.
     (mn_dist_init with world 1 AND an id builds an NCCL communicator of one rank instead, which
     runs the multi-GPU code path, every NCCL call included, on one GPU: train_cuda --nccl_self.) */
#ifndef MN_DIST_CUDA_H
#define MN_DIST_CUDA_H

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "cuda/mesanet_cuda.h"

enum { MN_ERR_NCCL = -22 };   // NCCL missing, or an NCCL call failed (d->msg says which)

typedef struct mn_nccl_id { unsigned char bytes[128]; } mn_nccl_id;   // ncclUniqueId

// ---- the part of nccl.h used here, declared by hand (no header needed at build time) ----
enum { MN__NCCL_SUCCESS = 0, MN__NCCL_IN_PROGRESS = 7 };        // ncclResult_t
enum { MN__NCCL_FLOAT32 = 7, MN__NCCL_FLOAT64 = 8 };             // ncclDataType_t
enum { MN__NCCL_SUM = 0 };                                       // ncclRedOp_t
typedef struct mn__nccl_comm* mn__nccl_comm_t;                   // ncclComm_t
typedef struct mn__nccl_api {
    void* lib;
    int version;                                                 // NCCL_VERSION_CODE of the loaded library
    char name[200];                                              // what was dlopen()ed
    int (*get_version)(int*);
    int (*get_unique_id)(mn_nccl_id*);
    int (*comm_init_rank)(mn__nccl_comm_t*, int nranks, mn_nccl_id id, int rank);
    int (*all_reduce)(const void*, void*, size_t, int dtype, int op, mn__nccl_comm_t, cudaStream_t);
    int (*broadcast)(const void*, void*, size_t, int dtype, int root, mn__nccl_comm_t, cudaStream_t);
    int (*comm_destroy)(mn__nccl_comm_t);
    int (*comm_abort)(mn__nccl_comm_t);
    int (*comm_get_async_error)(mn__nccl_comm_t, int*);
    const char* (*get_error_string)(int);
    const char* (*get_last_error)(mn__nccl_comm_t);              // NCCL >= 2.13; may be NULL
} mn__nccl_api;
static mn__nccl_api mn__nccl;

static inline const char* mn_dist_strerror(int code) {
    return code == MN_ERR_NCCL ? "NCCL error (missing library or a failed NCCL call)" : mn_cuda_strerror(code);
}

// "2.28.9" from a version code (>= 2.9: major*10000 + minor*100 + patch, before: major*1000 + ...)
static inline void mn_nccl_version_string(int code, char* out, size_t cap) {
    if (code >= 10000) snprintf(out, cap, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
    else snprintf(out, cap, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

// NVLink multicast off: NCCL_NVLS_ENABLE=0 before NCCL reads its environment.
static inline void mn_nccl_nvls_off(void) {
    const char* v = getenv("NCCL_NVLS_ENABLE");
    if (v && strcmp(v, "0") != 0)
        fprintf(stderr, "note: NCCL_NVLS_ENABLE=%s overridden to 0 (NVLink multicast stays off)\n", v);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
}

// Loads NCCL (once per process). MN_OK, or MN_ERR_NCCL with one line in msg.
static inline int mn_nccl_load(char* msg, size_t cap) {
    const char* names[2];
    const char* env = getenv("MN_NCCL_LIB");
    char why[200] = "";
    void* h = NULL;
    int n = 0, i;
    if (mn__nccl.lib) return MN_OK;
    mn_nccl_nvls_off();
    if (env && *env) names[n++] = env;
    else { names[n++] = "libnccl.so.2"; names[n++] = "libnccl.so"; }
    for (i = 0; i < n && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && !why[0]) { const char* e = dlerror(); snprintf(why, sizeof why, "%s", e ? e : names[i]); }
        if (h) snprintf(mn__nccl.name, sizeof mn__nccl.name, "%s", names[i]);
    }
    if (!h) {
        snprintf(msg, cap, "NCCL not found (%.150s): multi-GPU runs load libnccl.so.2 at run time - install NCCL "
                 "(pip install nvidia-nccl-cu13, then put its site-packages/nvidia/nccl/lib on LD_LIBRARY_PATH; "
                 "or Debian/Ubuntu apt-get install libnccl2 from NVIDIA's CUDA repository) "
                 "or set MN_NCCL_LIB=/path/to/libnccl.so.2", why);
        return MN_ERR_NCCL;
    }
#define MN__SYM(field, sym, required) do { *(void**)&mn__nccl.field = dlsym(h, sym); \
        if (!mn__nccl.field && (required)) { \
            snprintf(msg, cap, "%.150s has no %s: NCCL 2.4 or newer is needed", mn__nccl.name, sym); \
            dlclose(h); memset(&mn__nccl, 0, sizeof mn__nccl); return MN_ERR_NCCL; } } while (0)
    MN__SYM(get_version, "ncclGetVersion", 1);
    MN__SYM(get_unique_id, "ncclGetUniqueId", 1);
    MN__SYM(comm_init_rank, "ncclCommInitRank", 1);
    MN__SYM(all_reduce, "ncclAllReduce", 1);
    MN__SYM(broadcast, "ncclBroadcast", 1);
    MN__SYM(comm_destroy, "ncclCommDestroy", 1);
    MN__SYM(comm_abort, "ncclCommAbort", 1);
    MN__SYM(comm_get_async_error, "ncclCommGetAsyncError", 1);
    MN__SYM(get_error_string, "ncclGetErrorString", 1);
    MN__SYM(get_last_error, "ncclGetLastError", 0);
#undef MN__SYM
    mn__nccl.lib = h;
    if (mn__nccl.get_version(&mn__nccl.version) != MN__NCCL_SUCCESS) mn__nccl.version = 0;
    return MN_OK;
}

// A fresh unique id (rank 0 or the launcher makes it; needs no GPU).
static inline int mn_nccl_get_id(mn_nccl_id* id, char* msg, size_t cap) {
    int r, err = mn_nccl_load(msg, cap);
    if (err != MN_OK) return err;
    if ((r = mn__nccl.get_unique_id(id)) != MN__NCCL_SUCCESS) {
        snprintf(msg, cap, "ncclGetUniqueId failed: %s", mn__nccl.get_error_string(r));
        return MN_ERR_NCCL;
    }
    return MN_OK;
}

// ---- the communicator ----
typedef struct mn_dist {
    int rank, world;
    mn_cuda_ctx* ctx;      // the model's context: collectives run on ctx->stream (not owned)
    mn__nccl_comm_t comm;  // NULL without NCCL (world 1 unless built with an id)
    double* dev;           // (16) device scratch: [0..7] small reductions, [8] the clip's sum of squares
    double* pin;           // (16) pinned host scratch (asynchronous copies, so waits can poll)
    int broken;            // a local failure: mn_dist_free aborts the communicator
    char msg[512];         // last error, one line
} mn_dist;

static inline int mn__dfail(mn_dist* d, int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    return code;
}
static inline int mn__dnccl(mn_dist* d, const char* what, int r) {
    const char* last = mn__nccl.get_last_error && d->comm ? mn__nccl.get_last_error(d->comm) : NULL;
    d->broken = 1;
    return mn__dfail(d, MN_ERR_NCCL, "rank %d: %s: %s%s%.200s", d->rank, what, mn__nccl.get_error_string(r),
                     last && *last ? " - " : "", last ? last : "");
}
#define MN__DCU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { d->broken = 1; \
        return mn__dfail(d, MN_ERR_CUDA, "rank %d: %s: %s", d->rank, #call, cudaGetErrorString(e_)); } } while (0)
#define MN__DNC(what, call) do { int r_ = (call); if (r_ != MN__NCCL_SUCCESS) return mn__dnccl(d, what, r_); } while (0)
#define MN__DSTREAM ((cudaStream_t)d->ctx->stream)

// Joins the world (after mn_cuda_init picked this rank's device). world == 1 and id NULL: no
// NCCL; world == 1 with an id: an NCCL communicator of one rank (the distributed code path, NCCL
// calls included, on one GPU: for tests; NCCL refuses two ranks on one GPU).
static inline int mn_dist_init(mn_dist* d, mn_cuda_ctx* ctx, int rank, int world, const mn_nccl_id* id) {
    memset(d, 0, sizeof *d);
    d->rank = rank; d->world = world; d->ctx = ctx;
    if (world < 1 || rank < 0 || rank >= world)
        return mn__dfail(d, MN_ERR_CONFIG, "rank %d outside a world of %d", rank, world);
    MN__DCU(cudaMalloc((void**)&d->dev, 16 * sizeof(double)));
    MN__DCU(cudaMallocHost((void**)&d->pin, 16 * sizeof(double)));
    d->broken = 0;
    if (world == 1 && !id) return MN_OK;
    if (!id) return mn__dfail(d, MN_ERR_CONFIG, "a world of %d needs an NCCL unique id", world);
    if (mn_nccl_load(d->msg, sizeof d->msg) != MN_OK) return MN_ERR_NCCL;
    MN__DNC("ncclCommInitRank", mn__nccl.comm_init_rank(&d->comm, world, *id, rank));
    return MN_OK;
}
static inline void mn_dist_free(mn_dist* d) {
    if (d->comm) { if (d->broken) mn__nccl.comm_abort(d->comm); else mn__nccl.comm_destroy(d->comm); }
    if (d->dev) cudaFree(d->dev);
    if (d->pin) cudaFreeHost(d->pin);
    d->comm = NULL; d->dev = NULL; d->pin = NULL;
}

// Waits for the stream; while NCCL work is queued, polls it and the communicator's async error.
static inline int mn_dist_wait(mn_dist* d) {
    long spins = 0;
    if (!d->comm) { MN__DCU(cudaStreamSynchronize(MN__DSTREAM)); return MN_OK; }
    for (;; spins++) {
        cudaError_t e = cudaStreamQuery(MN__DSTREAM);
        int ae = MN__NCCL_SUCCESS;
        if (e == cudaSuccess) return MN_OK;
        if (e != cudaErrorNotReady) {
            d->broken = 1;
            return mn__dfail(d, MN_ERR_CUDA, "rank %d: waiting for the stream: %s", d->rank, cudaGetErrorString(e));
        }
        if (mn__nccl.comm_get_async_error(d->comm, &ae) == MN__NCCL_SUCCESS && ae != MN__NCCL_SUCCESS &&
            ae != MN__NCCL_IN_PROGRESS)
            return mn__dnccl(d, "NCCL asynchronous error", ae);
        if (spins < 20000) sched_yield(); else usleep(100);
    }
}

// In-place sums over the ranks, queued on the stream (world 1: nothing).
static inline int mn_dist_allreduce_f32(mn_dist* d, float* buf, size_t n) {
    if (!d->comm || n == 0) return MN_OK;
    MN__DNC("ncclAllReduce (float)",
            mn__nccl.all_reduce(buf, buf, n, MN__NCCL_FLOAT32, MN__NCCL_SUM, d->comm, MN__DSTREAM));
    return MN_OK;
}
static inline int mn_dist_allreduce_f64(mn_dist* d, double* buf, size_t n) {
    if (!d->comm || n == 0) return MN_OK;
    MN__DNC("ncclAllReduce (double)",
            mn__nccl.all_reduce(buf, buf, n, MN__NCCL_FLOAT64, MN__NCCL_SUM, d->comm, MN__DSTREAM));
    return MN_OK;
}
// dst (n floats, device) = root's src on every rank (world 1: a device copy)
static inline int mn_dist_bcast_f32(mn_dist* d, const float* src, float* dst, size_t n, int root) {
    if (!d->comm) {
        if (dst != src) MN__DCU(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, MN__DSTREAM));
        return MN_OK;
    }
    MN__DNC("ncclBroadcast", mn__nccl.broadcast(src, dst, n, MN__NCCL_FLOAT32, root, d->comm, MN__DSTREAM));
    return MN_OK;
}

// v (n <= 8 host doubles) = their sum over the ranks, on every rank; waits (world 1: unchanged).
static inline int mn_dist_host_sum(mn_dist* d, double* v, int n) {
    int err;
    if (!d->comm) return MN_OK;
    if (n < 1 || n > 8) return mn__dfail(d, MN_ERR_CONFIG, "mn_dist_host_sum: 1 to 8 values");
    memcpy(d->pin, v, (size_t)n * sizeof(double));
    MN__DCU(cudaMemcpyAsync(d->dev, d->pin, (size_t)n * sizeof(double), cudaMemcpyHostToDevice, MN__DSTREAM));
    if ((err = mn_dist_allreduce_f64(d, d->dev, (size_t)n)) != MN_OK) return err;
    MN__DCU(cudaMemcpyAsync(d->pin, d->dev, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, MN__DSTREAM));
    if ((err = mn_dist_wait(d)) != MN_OK) return err;
    memcpy(v, d->pin, (size_t)n * sizeof(double));
    return MN_OK;
}
// *x = rank 0's *x on every rank (world 1: unchanged)
static inline int mn_dist_agree(mn_dist* d, double* x) {
    double v = d->rank == 0 ? *x : 0.0;
    int err;
    if (!d->comm) return MN_OK;
    if ((err = mn_dist_host_sum(d, &v, 1)) != MN_OK) return err;
    *x = v;
    return MN_OK;
}

// ---- the model's step ----
// After this rank's mn_cuda_model_forward returned fwd_err: *sum and *count receive the loss sum
// (double, as the forward summed it) and the number of valid targets over ALL ranks; *failed is
// 1 on every rank when any rank's forward failed or the sum is not finite. Every rank must call
// it, also after a failed forward (that rank then contributes nothing but the failure).
static inline int mn_dist_step_loss(mn_dist* d, mn_cuda_model* cm, int fwd_err, double* sum, double* count,
                                    int* failed) {
    double v[3] = { 0.0, 0.0, 1.0 };
    int err;
    if (fwd_err == MN_OK) {
        if ((err = mn_cuda_download(cm->ctx, &v[0], cm->red, sizeof(double))) != MN_OK) {   // the forward's loss sum
            d->broken = 1;
            return mn__dfail(d, err, "rank %d: %s", d->rank, cm->ctx->msg);
        }
        v[1] = (double)cm->n_valid;
        v[2] = 0.0;
    }
    if ((err = mn_dist_host_sum(d, v, 3)) != MN_OK) return err;
    *sum = v[0]; *count = v[1];
    *failed = v[2] != 0.0 || !(v[0] == v[0]) || v[0] > 1e300 || v[0] < -1e300;
    return MN_OK;
}

#define MN__DFOR(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)
static inline unsigned mn__dgrid(const mn_cuda_ctx* ctx, size_t n) {
    size_t b = (n + 255) / 256, cap = (size_t)(ctx->sm_count > 0 ? ctx->sm_count : 1) * 32;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}
static __global__ void mn__dk_scale(float* g, size_t n, float s) { MN__DFOR(i, n) g[i] *= s; }
// y += a x (the one-GPU emulation of a sum over ranks in train_cuda --dist_check)
static __global__ void mn__dk_axpy(float* y, const float* x, size_t n, float a) { MN__DFOR(i, n) y[i] += a * x[i]; }
// as mesanet_cuda.cu's clip: sum of squares in double (one atomic per warp), then the scale
static __global__ void mn__dk_sumsq(double* ss, const float* g, size_t n) {
    double acc = 0.0;
    MN__DFOR(i, n) acc += (double)g[i] * g[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(ss, acc);
}
static __global__ void mn__dk_clip(float* g, size_t n, const double* ss, double max_norm) {
    double norm = sqrt(*ss);
    if (!(norm <= 1e300) || !(max_norm > 0) || !(norm > max_norm)) return;
    float s = (float)(max_norm / norm);
    MN__DFOR(i, n) g[i] *= s;
}

static inline int mn_dist_scale(mn_dist* d, float* x, size_t n, float s) {
    if (n == 0) return MN_OK;
    mn__dk_scale<<<mn__dgrid(d->ctx, n), 256, 0, MN__DSTREAM>>>(x, n, s);
    MN__DCU(cudaGetLastError());
    return MN_OK;
}
static inline int mn_dist_axpy(mn_dist* d, float* y, const float* x, size_t n, float a) {
    if (n == 0) return MN_OK;
    mn__dk_axpy<<<mn__dgrid(d->ctx, n), 256, 0, MN__DSTREAM>>>(y, x, n, a);
    MN__DCU(cudaGetLastError());
    return MN_OK;
}

// After mn_cuda_model_backward: grads = sum over ranks of weight_r * grads_r, weight = this
// rank's valid targets / all ranks' (from mn_dist_step_loss). Queued, not waited for. World 1: nothing.
static inline int mn_dist_reduce_grads(mn_dist* d, mn_cuda_model* cm, double weight) {
    int err;
    if (!d->comm) return MN_OK;
    if (weight != 1.0 && (err = mn_dist_scale(d, cm->grads, cm->n_params, (float)weight)) != MN_OK) return err;
    return mn_dist_allreduce_f32(d, cm->grads, cm->n_params);
}

// mn_cuda_model_clip_grad_norm over the all-reduced gradient, the same norm and scale on every
// rank; *norm (may be NULL) receives the norm before clipping (NaN if not finite: grads untouched).
static inline int mn_dist_clip(mn_dist* d, mn_cuda_model* cm, double max_norm, double* norm) {
    size_t P = cm->n_params, lo, hi;
    int err;
    if (!d->comm) {
        if ((err = mn_cuda_model_clip_grad_norm(cm, max_norm, norm)) != MN_OK)
            return mn__dfail(d, err, "%s", cm->ctx->msg);
        return MN_OK;
    }
    lo = P * (size_t)d->rank / (size_t)d->world;
    hi = P * (size_t)(d->rank + 1) / (size_t)d->world;
    MN__DCU(cudaMemsetAsync(d->dev + 8, 0, sizeof(double), MN__DSTREAM));
    if (hi > lo) {
        mn__dk_sumsq<<<mn__dgrid(d->ctx, hi - lo), 256, 0, MN__DSTREAM>>>(d->dev + 8, cm->grads + lo, hi - lo);
        MN__DCU(cudaGetLastError());
    }
    if ((err = mn_dist_allreduce_f64(d, d->dev + 8, 1)) != MN_OK) return err;
    if (P) {
        mn__dk_clip<<<mn__dgrid(d->ctx, P), 256, 0, MN__DSTREAM>>>(cm->grads, P, d->dev + 8, max_norm);
        MN__DCU(cudaGetLastError());
    }
    if (norm) {
        MN__DCU(cudaMemcpyAsync(d->pin + 8, d->dev + 8, sizeof(double), cudaMemcpyDeviceToHost, MN__DSTREAM));
        if ((err = mn_dist_wait(d)) != MN_OK) return err;
        *norm = sqrt(d->pin[8]);
        if (!(*norm <= 1e300)) *norm = NAN;
    }
    return MN_OK;
}

#undef MN__DCU
#undef MN__DNC
#undef MN__DSTREAM
#undef MN__DFOR
#endif // MN_DIST_CUDA_H
