// the DeltaNet / Gated DeltaNet layers' saved activations ("deltanet", "deltanet_neg", "gdn", "gdn_neg")
typedef struct mn__cm_delta_acts {
    float *ql, *kl, *vl, *vc, *q, *k;     // (N,HD) projections, v after conv + silu, q, k after the l2 norm
    float *rq, *rk, *bl, *beta, *al, *g;  // (N,H) rstd of the l2 norms, beta's logit, beta, the decay's
                                          // pre-activation x Wa + dt_bias and the decay g (GDN only)
    float *o, *gl, *on, *ro;              // (N,HD) the op's output, GDN's output gate, normed o; (N,H) rstd
    float* hs;                            // (B,H,NC,D,D) the op's chunk-start states
} mn__cm_delta_acts;
// their gradients; dqc, dkc double as the forward's conv outputs of q and k; dq .. dg are one span
// (the op accumulates into them: zeroed by one memset)
typedef struct mn__cm_delta_dacts {
    float *dql, *dkl, *dvl, *dqc, *dkc;   // (N,HD)
    float *dq, *dk, *dv, *dbeta, *dg;     // (N,HD) x3, (N,H) x2
    float *dbl, *dal, *dO, *don, *dgl;    // (N,H) x2, (N,HD) x3
} mn__cm_delta_dacts;
