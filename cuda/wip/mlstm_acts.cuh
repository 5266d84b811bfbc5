// the "mlstm" layer's saved activations (mesanet.h's mn__mlstm_act, without the op's workspace: the GPU op
// recomputes its forward in the model's shared workspace)
typedef struct mn__cm_mlstm_acts {
    float *q, *k, *v;                 // (N,HD) x3
    float *il, *fl, *ig, *fg;         // (N,H) x4: the gates before and after the soft cap
    float *h, *hn, *rs, *ol, *ho;     // (N,HD) x2, (N,H), (N,HD) x2: the cell's output, normed, rstd, the
} mn__cm_mlstm_acts;                  // output gate's pre-activation, normed h times the gate
// its gradient buffers (each written first by its first writer, acc = 0)
typedef struct mn__cm_mlstm_dacts {
    float *dq, *dk, *dv;              // (N,HD) x3
    float *dil, *dfl, *dig, *dfg;     // (N,H) x4
    float *dh, *dhn, *dol, *dho;      // (N,HD) x4
} mn__cm_mlstm_dacts;
