// the Mamba-2 layers "mamba2", "mamba2_neg" (mesanet.h's mn__ssd_act; N = B*T tokens, DI = 2 d_model,
// Hm = DI / P heads of P = head_dim, state Ns = head_dim, W_in = 2 DI + 2 Ns + Hm, Wc = DI + 2 Ns)
typedef struct mn__cm_ssd_acts {
    float* zx;                      // (N,W_in) the input projection [z | x | B | C | dt]
    float *xbci, *xbcp, *xbc;       // (N,Wc) [x | B | C] before the conv, after conv + bias, after silu
    float *dtp, *delta, *at;        // (N,Hm) dt + dt_bias, Delta, the log-decay (or the [-1,1] transition)
    float* xt;                      // (N,DI) X = x Delta
    float *bh, *ch;                 // (N,Hm,Ns) B and C per head
    float *y, *yz, *yn, *rs;        // (N,DI) SSD + D x, gated, normed; (N) rstd of the norm
} mn__cm_ssd_acts;
typedef struct mn__cm_ssd_dacts {
    float* dzx;                     // (N,W_in)
    float *dxbci, *dxbcp, *dxbc;    // (N,Wc) x3
    float *dyn, *dyz, *dy, *dxt;    // (N,DI) x4
    float *dat, *dbh, *dch;         // (N,Hm), (N,Hm,Ns) x2
    float *tD, *tA, *tdt, *sD;      // (N,DI) the D skip's terms, (N,Hm) x2 A_log's and dt's terms, (DI) sums
} mn__cm_ssd_dacts;
