// the "hawk" layer's saved activations (mesanet.h's mn__rglru_act, less gelu(y), which the backward
// recomputes from yl, and the final state and workspace, which the model does not keep)
typedef struct mn__cm_rglru_acts {
    float *yl, *xl, *xc, *h, *gates, *hy;   // (N,C) x4: y branch, x branch, conv out, h; (2,N,C); (N,C) h gelu(yl)
} mn__cm_rglru_acts;
typedef struct mn__cm_rglru_dacts {
    float *dhy, *dh, *dyl, *dxc, *dxl;      // (N,C) x5
} mn__cm_rglru_dacts;
