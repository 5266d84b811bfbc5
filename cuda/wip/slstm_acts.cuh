// the "slstm" layer's saved activations (mesanet.h's mn__slstm_act, less the op's workspace: the GPU
// backward takes the model's) and its gradient buffers; C = d_model, NH heads of Dh = C/NH units
typedef struct mn__cm_slstm_acts {
    float *xcp, *xc;                 // (N,C) conv + bias, after silu
    float* x;                        // (N,4C) the gates' input pre-activations, gate-major
    float *y, *c, *n, *m;            // (N,C) the cell's states after each step
    float* rs;                       // (N*NH) rstd of the per-head output norm
} mn__cm_slstm_acts;
typedef struct mn__cm_slstm_dacts {
    float *dy, *dx, *dxc, *dxcp;     // (N,C), (N,4C), (N,C) x2; dy doubles as the forward's normed output
} mn__cm_slstm_dacts;
