// >>cuda_mlstm
// defines: mn_cuda_mlstm_{work_size,forward,backward,step}, mn_cuda_mlstm_{forward,backward}_{recurrent,chunk}
//
// xLSTM's mLSTM (mesanet.h >>mlstm) on the GPU in two forms: the chunk form (the default where it applies,
// described with its kernels further down: the numerator through the GLA op on the tensor cores) and,
// the tested reference and the fallback, the recurrent form, token by token, which computes the
// chunkwise form's sums (the CPU's mn_mlstm_forward / _backward: the same m_t, the same stabilised
// states, for every chunk length). Per head, with lf_t = logsigmoid(f_t):
//   m_t = max(lf_t + m_{t-1}, i_t) ; f'_t = e^{lf_t + m_{t-1} - m_t} ; i'_t = e^{i_t - m_t}    (both <= 1)
//   C_t = f'_t C_{t-1} + i'_t k_t v_t^T ; n_t = f'_t n_{t-1} + i'_t k_t ; q^_t = scale q_t
//   bt_t = n_t.q^_t ; norm_t = max(|bt_t|, e^{-m_t}) ; o_t = C_t^T q^_t / (norm_t + eps)
// Kernels:
//   - mn__k_mlstm_gates: the stabiliser, which depends on the gates only, once per head (not per
//     column slice): one warp per (b,h), each lane a contiguous run of tokens. m_t is a max-plus affine
//     recurrence m -> max(lf + m, i), and such maps compose (x -> max(a + x, c)), so each lane composes
//     its run's map, a warp scan gives every lane its entering m, and the lane replays its run writing
//     m_t, f'_t, i'_t. All in double (the CPU's arithmetic), stored in float.
//   - mn__k_mlstm_scan<RPT, MODE>: one generic recurrent scan S_t = dec S + w b_t c_t^T with a read-out
//     y_t = S_t^T a_t, the state in registers. A block of 4 warps holds 16 columns of the state; in a
//     warp 8 lanes share one column, each with RPT = R/8 of its R rows (rows g, g+8, ..., so the lanes'
//     loads of a row vector are contiguous), and the read-out's sum over rows is 3 shuffles. Grid
//     (columns/16, B*H): 2560 warps at the anchor shape, all resident. The next token's operands are
//     loaded while the current one is computed. The four uses (MODE):
//       0 forward: S = C (rows Dk, columns Dv), a = q, b = k, c = v; the rows also carry n (n.q for
//         the normaliser); writes o, norm, bt, the final state.
//       1 dq (forward in time): S = C^T (rows Dv, columns Dk), a = dN = do/den, b = v, c = k, and the
//         column's n_d: dq = scale (C_t dN_t + dbt_t n_t).
//       2 dv (backward in time): the gradient of C, dC_t = q^_t dN_t^T + f'_{t+1} dC_{t+1} (rows Dk,
//         columns Dv), a = k: dv_t = i'_t dC_t^T k_t; and dC0 = f'_0 dC_0.
//       3 dk (backward in time): dC^T (rows Dv, columns Dk), a = v, and the column's dn_d,
//         dn_t = q^_t dbt_t + f'_{t+1} dn_{t+1}: dk_t = i'_t (dC_t v_t + dn_t); dn0 = f'_0 dn_0; and the
//         warp's share of k_t.dk_t (4 columns) into a per-token slot (no atomics: summed later in order).
//   - mn__k_mlstm_prep: per token, from the recomputed o, bt, den: dN's scale, and (exact mode)
//       forward: o = num / den, den = max(|bt|, e^{-m}) + eps, so: dbt = -(do.o)/den sign(bt) where |bt|
//       wins; dmu = -eps (do.o)/den (m_t enters only through eps e^{m} in unstabilised terms);
//     and q_t.dq_t = dN.num + dbt bt = do.o + dbt bt (dq's definition dotted with q), which the gate
//     gradient needs without reading dq back (dq accumulates into the caller's buffer).
//   - mn__k_mlstm_gates_bwd: the gates by the identity of >>gla (q enters as q e^{F_t}, k as
//     k e^{i_s - F_s}, F the cumulative log forget gate): di_t = k_t.dk_t, dlf_u = sum_{t>=u} (q_t.dq_t -
//     k_t.dk_t), plus (exact) dmu back through m_t = max(lf_t + m_{t-1}, i_t), the larger branch taking
//     it (what reaches m0 is dropped). Both are suffix recurrences (a sum, and dmc -> s (dmu + dmc) with
//     s in {0,1}, affine), so the same lane runs and warp scan (reversed) as the forward gates; double.
//   - mn__k_mlstm_step: the decode step, one block per (sequence, head) streaming its Dk x Dv state once.
// Precision: fp32 states and products (FMA), gates, stabiliser and the gate gradients' sums in double;
// test_cuda mlstm holds them to 2e-5 (outputs) and 1e-4 / 3e-4 (gradients) against the float64 CPU (see
// the bounds there; they held on the H200). Deterministic: every output element has one
// writer, the k.dk partial sums are added in a fixed order.
// Cost: per token and head 4 Dk Dv FLOPs forward, plus 4 Dk Dv for n (each column's 8 lanes carry all of
// n: simple, and the n.q of every token is at hand), 20 Dk Dv backward (the forward again, dq, dv, dk).
// Latency-bound (one token after the other): hence the chunk form below. With Dk = 128 a scan thread holds ~120
// registers (state, this token's and the next token's operands), 4 blocks per SM: at the anchor shape
// (B*H = 80, 640 blocks) the scans run in two waves.

#define MN__MLSTM_RG 8        // lanes sharing one state column (the row groups)
#define MN__MLSTM_COLS 16     // state columns per block (4 warps x 4 columns)
#define MN__MLSTM_PIECE(p, n) \
    do { if (w) w->p = base ? base + off : NULL; off += ((size_t)(n) + 63) / 64 * 64; } while (0)   // w NULL: size

// the workspace: per token and head (B,T,H) m, f', i', bt, den, dbt, dmu, q.dq; the k.dk partials
// (B,T,H,Dk/4); the backward's recomputed output o (B,T,H,Dv); a copy of n0 (B,H,Dk) (nt may alias it)
// The chunk form's pieces (only where it can apply, Dk == Dv in {64, 128}): the per-head shift c (B,H) and
// the range flag, k' = e^{i - c} k and its gradient (B,T,H,Dk), lf = logsigmoid(f), the normaliser b' and
// the per-token factor of its gradient (B,T,H), the chunk summaries (B,H,NT,Dk) with their decays
// (B,H,NT), and the GLA op's own workspace.
typedef struct mn__mlstm_ws {
    float *m, *fp, *ip, *bt, *den, *dbt, *dmu, *qdq, *kdkp, *o, *n0c;
    float *cb, *flag, *kp, *dkp, *lg, *bp, *sc, *nsum, *nA, *gla;
} mn__mlstm_ws;
#define MN__MLSTM_NC 64       // the chunk form's chunk length (the GLA op's)
static size_t mn__mlstm_layout(mn__mlstm_ws* w, float* base, size_t B, size_t T, size_t H, size_t Dk, size_t Dv) {
    size_t N = B * T * H, off = 0;
    MN__MLSTM_PIECE(m, N); MN__MLSTM_PIECE(fp, N); MN__MLSTM_PIECE(ip, N); MN__MLSTM_PIECE(bt, N);
    MN__MLSTM_PIECE(den, N); MN__MLSTM_PIECE(dbt, N); MN__MLSTM_PIECE(dmu, N); MN__MLSTM_PIECE(qdq, N);
    MN__MLSTM_PIECE(kdkp, N * (Dk / 4)); MN__MLSTM_PIECE(o, N * Dv); MN__MLSTM_PIECE(n0c, B * H * Dk);
    if (Dk == Dv && (Dk == 64 || Dk == 128)) {
        const size_t NT = (T + MN__MLSTM_NC - 1) / MN__MLSTM_NC;
        MN__MLSTM_PIECE(cb, B * H); MN__MLSTM_PIECE(flag, 1); MN__MLSTM_PIECE(kp, N * Dk);
        MN__MLSTM_PIECE(dkp, N * Dk); MN__MLSTM_PIECE(lg, N); MN__MLSTM_PIECE(bp, N); MN__MLSTM_PIECE(sc, N);
        MN__MLSTM_PIECE(nsum, B * H * NT * Dk); MN__MLSTM_PIECE(nA, B * H * NT);
        MN__MLSTM_PIECE(gla, mn_cuda_gla_work_size(B, T, H, Dk, Dv, MN__MLSTM_NC));
    } else if (w) {
        w->cb = w->flag = w->kp = w->dkp = w->lg = w->bp = w->sc = w->nsum = w->nA = w->gla = NULL;
    }
    return off;
}
size_t mn_cuda_mlstm_work_size(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t C) {
    (void)C;
    return mn__mlstm_layout(NULL, NULL, B, T, H, Dk, Dv);
}

__device__ __forceinline__ double mn__mlstm_logsig(double x) { return (x < 0 ? x : 0.0) - log1p(exp(-fabs(x))); }

// The stabiliser and the gates' factors (see the section comment). m (B,T,H), fp, ip (B,T,H) written;
// stab (B,T,H), mt (B,H) written when not NULL; ig, fg (B,T,H); m0 (B,H) or NULL (zeros). Blocks of 4
// warps, one warp per (b,h); lane l replays tokens [l L, (l+1) L), L = ceil(T/32).
__global__ void __launch_bounds__(128) mn__k_mlstm_gates(float* m, float* fp, float* ip, float* stab, float* mt,
                                                         const float* ig, const float* fg, const float* m0,
                                                         unsigned BH, unsigned T, unsigned H) {
    const unsigned bh = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (bh >= BH) return;                            // a whole warp leaves together
    const unsigned b = bh / H, h = bh % H, L = (T + 31) / 32, t0 = lane * L;
    const unsigned t1 = t0 + L < T ? t0 + L : T;
    const double mstart = m0 ? (double)m0[bh] : 0.0;
    // the run's map x -> max(A + x, Cm): A the sum of its lf, Cm what the inputs gates make of -inf
    double A = 0.0, Cm = -INFINITY;
    for (unsigned t = t0; t < t1; t++) {
        size_t r = ((size_t)b * T + t) * H + h;
        double lf = mn__mlstm_logsig(fg[r]);
        A += lf;
        Cm = fmax(Cm + lf, (double)ig[r]);
    }
    // inclusive scan over lanes: the earlier map first, then this one: (A, Cm) <- (Ae + A, max(Ce + A, Cm))
    for (int o = 1; o < 32; o <<= 1) {
        double Ae = __shfl_up_sync(0xffffffffu, A, o), Ce = __shfl_up_sync(0xffffffffu, Cm, o);
        if ((int)lane >= o) { Cm = fmax(Ce + A, Cm); A = Ae + A; }
    }
    double Ap = __shfl_up_sync(0xffffffffu, A, 1), Cp = __shfl_up_sync(0xffffffffu, Cm, 1);
    double mm = lane ? fmax(Ap + mstart, Cp) : mstart;   // the m entering the run (m0 = -inf: Cp)
    for (unsigned t = t0; t < t1; t++) {
        size_t r = ((size_t)b * T + t) * H + h;
        double lf = mn__mlstm_logsig(fg[r]), i = ig[r], mn = fmax(lf + mm, i);
        fp[r] = (float)exp(lf + mm - mn);             // 0 when m_{t-1} = -inf
        ip[r] = (float)exp(i - mn);
        m[r] = (float)mn;
        if (stab) stab[r] = (float)mn;
        mm = mn;
    }
    // lane 31's run ends at T (or is empty and starts from everything before): its m is m_{T-1}
    if (mt && lane == 31) mt[bh] = (float)mm;
}

// the arguments of mn__k_mlstm_scan (pointers as in mn_cuda_mlstm_*; m, fp, ip, bt, den, dbt, kdkp the
// workspace's)
typedef struct mn__mlstm_args {
    const float *q, *k, *v, *dout, *C0, *n0;           // (B,T,H,Dk) x2, (B,T,H,Dv) x2, (B,H,Dk,Dv), (B,H,Dk)
    const float *m, *fp, *ip, *dbt;                    // (B,T,H)
    float *out, *norm, *bt, *den, *Ct, *nt;            // (B,T,H,Dv), (B,T,H) x3, (B,H,Dk,Dv), (B,H,Dk)
    float *dq, *dk, *dv, *dC0, *dn0, *kdkp;            // (B,T,H,Dk) x2, (B,T,H,Dv), (B,H,Dk,Dv), (B,H,Dk),
    unsigned T, H, Dk, Dv;                             // (B,T,H,Dk/4)
    float scale, eps;
    int acc;                                           // gradients: 1 accumulate, 0 overwrite
} mn__mlstm_args;

// The token's operands of one scan (see the section comment): a, b (RPT rows each of this thread), c the
// column's entry, and the token's scalars: x[0] f', x[1] i', x[2] m (mode 0) or den, x[3] dbt (modes 1, 3),
// x[4] the column's k (mode 3). r the row (b,t,h). Loaded one token ahead of their use.
template <int RPT, int MODE>
__device__ __forceinline__ void mn__mlstm_load(const mn__mlstm_args& p, size_t r, unsigned g, unsigned col, float* a,
                                               float* b, float& c, float* x) {
    const float *pa, *pb, *pc;
    size_t lr, lc;                                     // the rows' and the column's vector lengths
    if (MODE == 0) { pa = p.q; pb = p.k; pc = p.v; lr = p.Dk; lc = p.Dv; }
    else if (MODE == 1) { pa = p.dout; pb = p.v; pc = p.k; lr = p.Dv; lc = p.Dk; }
    else if (MODE == 2) { pa = p.k; pb = p.q; pc = p.dout; lr = p.Dk; lc = p.Dv; }
    else { pa = p.v; pb = p.dout; pc = p.q; lr = p.Dv; lc = p.Dk; }
#pragma unroll
    for (int i = 0; i < RPT; i++) {
        a[i] = pa[r * lr + g + MN__MLSTM_RG * i];
        b[i] = pb[r * lr + g + MN__MLSTM_RG * i];
    }
    c = pc[r * lc + col];
    x[0] = p.fp[r]; x[1] = p.ip[r];
    x[2] = MODE == 0 ? p.m[r] : p.den[r];
    x[3] = MODE == 1 || MODE == 3 ? p.dbt[r] : 0.f;
    x[4] = MODE == 3 ? p.k[r * lc + col] : 0.f;
}

// The recurrent scans (see the section comment). Grid (columns / 16, B*H), 128 threads.
template <int RPT, int MODE>
__global__ void __launch_bounds__(128) mn__k_mlstm_scan(mn__mlstm_args p) {
    constexpr bool REV = MODE >= 2;
    const unsigned lane = threadIdx.x & 31, g = lane & (MN__MLSTM_RG - 1);
    const unsigned col = blockIdx.x * MN__MLSTM_COLS + (threadIdx.x >> 5) * 4 + (lane >> 3);
    const unsigned bh = blockIdx.y, b = bh / p.H, h = bh % p.H, T = p.T, H = p.H, Dk = p.Dk, Dv = p.Dv;
    float S[RPT], nr[RPT], a[RPT], bb[RPT], an[RPT], bn[RPT], c, cn, x[5], xn[5];
    float z = 0.f;                                     // mode 1: the column's n_d; mode 3: its dn_d
    float dprev = 0.f;                                 // backward scans: f'_{t+1}, the decay of the later state
#pragma unroll
    for (int i = 0; i < RPT; i++) { S[i] = 0.f; nr[i] = 0.f; }
    if (MODE == 0) {
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            const unsigned d = g + MN__MLSTM_RG * i;
            if (p.C0) S[i] = p.C0[((size_t)bh * Dk + d) * Dv + col];
            if (p.n0) nr[i] = p.n0[(size_t)bh * Dk + d];
        }
    } else if (MODE == 1) {                            // C^T: row j, column d
#pragma unroll
        for (int i = 0; i < RPT; i++)
            if (p.C0) S[i] = p.C0[((size_t)bh * Dk + col) * Dv + g + MN__MLSTM_RG * i];
        if (p.n0) z = p.n0[(size_t)bh * Dk + col];
    }
    unsigned t = REV ? T - 1 : 0;
    size_t r = ((size_t)b * T + t) * H + h;
    mn__mlstm_load<RPT, MODE>(p, r, g, col, a, bb, c, x);
    for (unsigned s = 0; s < T; s++) {
        const unsigned tn = REV ? t - 1 : t + 1;       // the next token (unused after the last)
        const size_t rn = ((size_t)b * T + tn) * H + h;
        if (s + 1 < T) mn__mlstm_load<RPT, MODE>(p, rn, g, col, an, bn, cn, xn);
        const float fpt = x[0], ipt = x[1];
        float y = 0.f, nq = 0.f;
        if (MODE == 0) {
            // C = f' C + i' k v^T ; n = f' n + i' k ; y = C^T q, nq = n.q over this thread's rows
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                const float ik = ipt * bb[i];
                S[i] = fmaf(fpt, S[i], ik * c);
                nr[i] = fmaf(fpt, nr[i], ik);
                y = fmaf(S[i], a[i], y);
                nq = fmaf(nr[i], a[i], nq);
            }
        } else if (MODE == 1) {
            // C^T = f' C^T + i' v k^T ; n_d = f' n_d + i' k_d ; y = C dO (dN = dO / den below)
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                S[i] = fmaf(fpt, S[i], (ipt * bb[i]) * c);
                y = fmaf(S[i], a[i], y);
            }
            z = fmaf(fpt, z, ipt * c);
        } else if (MODE == 2) {
            // dC = f'_{t+1} dC + q^ dN^T ; y = dC^T k
            const float dn = c / x[2];
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                S[i] = fmaf(dprev, S[i], (p.scale * bb[i]) * dn);
                y = fmaf(S[i], a[i], y);
            }
        } else {
            // dC^T = f'_{t+1} dC^T + dN q^^T ; dn_d = f'_{t+1} dn_d + q^_d dbt ; y = dC v
            const float rd = 1.f / x[2], qd = p.scale * c;
#pragma unroll
            for (int i = 0; i < RPT; i++) {
                S[i] = fmaf(dprev, S[i], (bb[i] * rd) * qd);
                y = fmaf(S[i], a[i], y);
            }
            z = fmaf(dprev, z, qd * x[3]);
        }
        // the sums over the column's rows: the 8 lanes of the column (xor 1, 2, 4)
#pragma unroll
        for (int o = 1; o < MN__MLSTM_RG; o <<= 1) {
            y += __shfl_xor_sync(0xffffffffu, y, o);
            if (MODE == 0) nq += __shfl_xor_sync(0xffffffffu, nq, o);
        }
        if (MODE == 0) {
            const float btv = p.scale * nq, nrm = fmaxf(fabsf(btv), expf(-x[2])), den = nrm + p.eps;
            if (g == 0) p.out[r * Dv + col] = p.scale * y / den;
            if (col == 0 && g == 0) {
                if (p.norm) p.norm[r] = nrm;
                if (p.bt) { p.bt[r] = btv; p.den[r] = den; }
            }
        } else if (MODE == 1) {
            const float v1 = p.scale * (y / x[2] + x[3] * z);
            if (g == 0) { float* o = p.dq + r * Dk + col; *o = p.acc ? *o + v1 : v1; }
        } else if (MODE == 2) {
            const float v1 = ipt * y;
            if (g == 0) { float* o = p.dv + r * Dv + col; *o = p.acc ? *o + v1 : v1; }
            dprev = fpt;
        } else {
            const float v1 = ipt * (y + z);
            if (g == 0) { float* o = p.dk + r * Dk + col; *o = p.acc ? *o + v1 : v1; }
            // k.dk over the warp's 4 columns (every lane of a column holds the same v1): lanes xor 8, 16
            float part = x[4] * v1;
            part += __shfl_xor_sync(0xffffffffu, part, 8);
            part += __shfl_xor_sync(0xffffffffu, part, 16);
            if (lane == 0) p.kdkp[r * (Dk / 4) + col / 4] = part;
            dprev = fpt;
        }
        if (s + 1 < T) {
#pragma unroll
            for (int i = 0; i < RPT; i++) { a[i] = an[i]; bb[i] = bn[i]; }
            #pragma unroll
            for (int i = 0; i < 5; i++) x[i] = xn[i];
            c = cn; t = tn; r = rn;
        }
    }
    if (MODE == 0) {
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            const unsigned d = g + MN__MLSTM_RG * i;
            if (p.Ct) p.Ct[((size_t)bh * Dk + d) * Dv + col] = S[i];
            if (p.nt && col == 0) p.nt[(size_t)bh * Dk + d] = nr[i];
        }
    } else if (MODE == 2 && p.dC0) {                   // forward: C_0 = f'_0 C0 + ..., so: dC0 += f'_0 dC_0
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            float* o = p.dC0 + ((size_t)bh * Dk + g + MN__MLSTM_RG * i) * Dv + col;
            *o = p.acc ? *o + dprev * S[i] : dprev * S[i];
        }
    } else if (MODE == 3 && p.dn0 && g == 0) {
        float* o = p.dn0 + (size_t)bh * Dk + col;
        *o = p.acc ? *o + dprev * z : dprev * z;
    }
}

// Per token (one warp per row (b,t,h) of NR): dbt, dmu, qdq (see the section comment); o (NR,Dv) the
// recomputed output, bt, den, m (NR) the forward's; exact 0: MN_MLSTM_BW_DETACH (dbt = dmu = 0).
__global__ void __launch_bounds__(256) mn__k_mlstm_prep(float* dbt, float* dmu, float* qdq, const float* dout,
                                                        const float* o, const float* bt, const float* den,
                                                        const float* m, size_t NR, unsigned Dv, float eps, int exact) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    float dot = 0.f;
    for (unsigned j = lane; j < Dv; j += 32) dot = fmaf(dout[r * Dv + j], o[r * Dv + j], dot);
    dot = mn__warp_sum(dot);
    if (lane == 0) {
        const float dn = den[r], b = bt[r];
        float db = 0.f, dm = 0.f;
        if (exact) {
            if (fabsf(b) >= expf(-m[r])) db = -dot / dn * (float)((b > 0) - (b < 0));
            dm = -eps * dot / dn;
        }
        dbt[r] = db; dmu[r] = dm; qdq[r] = dot + db * b;
    }
}

// The gates' gradients (see the section comment): di, df (B,T,H) accumulated (acc) or written; ig, fg the
// gates; m (B,T,H) the stabiliser, m0 (B,H) or NULL; qdq, dmu (B,T,H); kdkp (B,T,H,NW) k.dk in NW parts.
// Blocks of 4 warps, one warp per (b,h), lane l the tokens [l L, (l+1) L) walked backwards.
__global__ void __launch_bounds__(128) mn__k_mlstm_gates_bwd(float* di, float* df, const float* ig, const float* fg,
                                                             const float* m, const float* m0, const float* qdq,
                                                             const float* dmu, const float* kdkp, unsigned BH,
                                                             unsigned T, unsigned H, unsigned NW, int acc) {
    const unsigned bh = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (bh >= BH) return;
    const unsigned b = bh / H, h = bh % H, L = (T + 31) / 32, t0 = lane * L;
    const unsigned t1 = t0 + L < T ? t0 + L : T;
    const double mstart = m0 ? (double)m0[bh] : 0.0;
    // pass 1: the run's sum of (q.dq - k.dk) and its map of dmc, x -> A x + Cc (A in {0, 1})
    double sum = 0.0, A = 1.0, Cc = 0.0;
    for (unsigned t = t1; t-- > t0;) {
        size_t r = ((size_t)b * T + t) * H + h;
        double kdk = 0.0;
        for (unsigned w = 0; w < NW; w++) kdk += kdkp[r * NW + w];
        sum += (double)qdq[r] - kdk;
        double mprev = t ? (double)m[r - H] : mstart;
        int lfw = mn__mlstm_logsig(fg[r]) + mprev >= (double)ig[r];   // forward: the lf branch won
        if (lfw) Cc += dmu[r]; else { A = 0.0; Cc = 0.0; }
    }
    // reversed inclusive scan: lane l's value covers l..31, the later lanes' maps applied first
    for (int o = 1; o < 32; o <<= 1) {
        double Al = __shfl_down_sync(0xffffffffu, A, o), Cl = __shfl_down_sync(0xffffffffu, Cc, o);
        double Sl = __shfl_down_sync(0xffffffffu, sum, o);
        if (lane + o < 32) { Cc = A * Cl + Cc; A = A * Al; sum += Sl; }
    }
    double Sn = __shfl_down_sync(0xffffffffu, sum, 1), Cn = __shfl_down_sync(0xffffffffu, Cc, 1);
    double accs = lane < 31 ? Sn : 0.0, dmc = lane < 31 ? Cn : 0.0;   // what enters the run from later tokens
    for (unsigned t = t1; t-- > t0;) {
        size_t r = ((size_t)b * T + t) * H + h;
        double kdk = 0.0;
        for (unsigned w = 0; w < NW; w++) kdk += kdkp[r * NW + w];
        double f = fg[r], lf = mn__mlstm_logsig(f), mprev = t ? (double)m[r - H] : mstart;
        // (1) k enters as k e^{i}; q e^{F_t}, k e^{-F_s} with F the cumulative lf
        double dit = kdk, dlf, tot;
        accs += (double)qdq[r] - kdk;
        dlf = accs;
        // (2) m_t = max(lf_t + m_{t-1}, i_t): the winning branch takes dL/dm_t
        tot = (double)dmu[r] + dmc;
        if (lf + mprev >= (double)ig[r]) { dlf += tot; dmc = tot; } else { dit += tot; dmc = 0.0; }
        const float gi = (float)dit, gf = (float)(dlf / (1.0 + exp(f)));   // dlf sigmoid(-f)
        di[r] = acc ? di[r] + gi : gi;
        df[r] = acc ? df[r] + gf : gf;
    }
}

static int mn__mlstm_check(mn_cuda_ctx* ctx, const char* who, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                           size_t C) {
    if (Dk % 16 || Dv % 16 || Dk < 16 || Dv < 16 || Dk > 128 || Dv > 128)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk, Dv multiples of 16 in 16..128", __LINE__);
    if (C < 1) return mn__fail(ctx, MN_ERR_CONFIG, who, "needs chunk C >= 1", __LINE__);
    if (B * H == 0 || B * H > 65535 || T == 0 || B * T * H > 0xffffffffu / 8)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs 0 < B*H <= 65535, T > 0", __LINE__);
    return MN_OK;
}
template <int MODE>
static int mn__mlstm_scan_launch(mn_cuda_ctx* ctx, const mn__mlstm_args& p, size_t BH) {
    // rows: Dk for the forward and dv, Dv for dq and dk; columns the other
    const unsigned R = MODE == 0 || MODE == 2 ? p.Dk : p.Dv, Cn = MODE == 0 || MODE == 2 ? p.Dv : p.Dk;
    const dim3 grid(Cn / MN__MLSTM_COLS, (unsigned)BH);
    switch (R / MN__MLSTM_RG) {
    case 2: mn__k_mlstm_scan<2, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 4: mn__k_mlstm_scan<4, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 6: mn__k_mlstm_scan<6, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 8: mn__k_mlstm_scan<8, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 10: mn__k_mlstm_scan<10, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 12: mn__k_mlstm_scan<12, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 14: mn__k_mlstm_scan<14, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    case 16: mn__k_mlstm_scan<16, MODE><<<grid, 128, 0, MN__STREAM>>>(p); break;
    default: return mn__fail(ctx, MN_ERR_CONFIG, "mn__mlstm_scan_launch", "rows not a multiple of 16", __LINE__);
    }
    MN__LAUNCHED();
    return MN_OK;
}
// The gates and the forward scan, shared by both directions: out, norm, bt, den written (bt, den into w)
static int mn__mlstm_fwd(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, float* out, float* norm, float* stab, float* Ct,
                         float* nt, float* mt, const float* q, const float* k, const float* v, const float* ig,
                         const float* fg, const float* C0, const float* n0, const float* m0, size_t B, size_t T,
                         size_t H, size_t Dk, size_t Dv, double scale, double eps) {
    const size_t BH = B * H;
    if (n0) MN__CU(cudaMemcpyAsync(w->n0c, n0, BH * Dk * sizeof(float), cudaMemcpyDeviceToDevice, MN__STREAM));
    mn__k_mlstm_gates<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(w->m, w->fp, w->ip, stab, mt, ig, fg, m0,
                                                                      (unsigned)BH, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__mlstm_args p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.C0 = C0; p.n0 = n0 ? w->n0c : NULL;
    p.m = w->m; p.fp = w->fp; p.ip = w->ip;
    p.out = out; p.norm = norm; p.bt = w->bt; p.den = w->den; p.Ct = Ct; p.nt = nt;
    p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)Dk; p.Dv = (unsigned)Dv;
    p.scale = (float)scale; p.eps = (float)eps;
    return mn__mlstm_scan_launch<0>(ctx, p, BH);
}
int mn_cuda_mlstm_forward_recurrent(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* Ct, float* nt,
                                    float* mt, const float* q, const float* k, const float* v, const float* ig,
                                    const float* fg, const float* C0, const float* n0, const float* m0, size_t B,
                                    size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                                    float* work) {
    MN__TRY(mn__mlstm_check(ctx, "mn_cuda_mlstm_forward", B, T, H, Dk, Dv, C));
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    return mn__mlstm_fwd(ctx, &w, out, norm, stab, Ct, nt, mt, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv, scale,
                         eps);
}
// acc = 0 overwrites dq, dk, dv, di, df, dC0, dn0 (the model's first writer), 1 accumulates
static int mn__mlstm_backward_rec(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                  float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                  const float* v, const float* ig, const float* fg, const float* C0, const float* n0,
                                  const float* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale,
                                  double eps, size_t C, int mode, float* work, int acc) {
    MN__TRY(mn__mlstm_check(ctx, "mn_cuda_mlstm_backward", B, T, H, Dk, Dv, C));
    if (mode != MN_MLSTM_BW_EXACT && mode != MN_MLSTM_BW_DETACH)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mlstm_backward", "mode must be EXACT or DETACH", __LINE__);
    const size_t BH = B * H, NR = B * T * H;
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    // the forward again: o into the workspace, with bt and den
    MN__TRY(mn__mlstm_fwd(ctx, &w, w.o, NULL, NULL, NULL, NULL, NULL, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv,
                          scale, eps));
    mn__k_mlstm_prep<<<(unsigned)((NR + 7) / 8), 256, 0, MN__STREAM>>>(w.dbt, w.dmu, w.qdq, dout, w.o, w.bt, w.den,
                                                                      w.m, NR, (unsigned)Dv, (float)eps,
                                                                      mode == MN_MLSTM_BW_EXACT);
    MN__LAUNCHED();
    mn__mlstm_args p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.dout = dout; p.C0 = C0; p.n0 = n0 ? w.n0c : NULL;
    p.m = w.m; p.fp = w.fp; p.ip = w.ip; p.dbt = w.dbt; p.den = w.den;
    p.dq = dq; p.dk = dk; p.dv = dv; p.dC0 = dC0; p.dn0 = dn0; p.kdkp = w.kdkp;
    p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)Dk; p.Dv = (unsigned)Dv;
    p.scale = (float)scale; p.eps = (float)eps; p.acc = acc;
    MN__TRY(mn__mlstm_scan_launch<1>(ctx, p, BH));
    MN__TRY(mn__mlstm_scan_launch<2>(ctx, p, BH));
    MN__TRY(mn__mlstm_scan_launch<3>(ctx, p, BH));
    mn__k_mlstm_gates_bwd<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(di, df, ig, fg, w.m, m0, w.qdq, w.dmu,
                                                                          w.kdkp, (unsigned)BH, (unsigned)T,
                                                                          (unsigned)H, (unsigned)(Dk / 4), acc);
    MN__LAUNCHED();
    return MN_OK;
}
int mn_cuda_mlstm_backward_recurrent(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                     float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                     const float* v, const float* ig, const float* fg, const float* C0,
                                     const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                                     size_t Dv, double scale, double eps, size_t C, int mode, float* work) {
    return mn__mlstm_backward_rec(ctx, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk,
                                  Dv, scale, eps, C, mode, work, 1);
}
// ---- the chunk form (the default where it applies): the numerator through the GLA op ----
// Without an initial state, the unstabilised numerator and normaliser of token t are sums over j <= t of
// e^{F_t - F_j + i_j} (q^_t.k_j) v_j and e^{F_t - F_j + i_j} q^_t.k_j, F the running sum of lf = logsigmoid(f).
// With a constant c per head (the largest input gate of the sequence), k'_j = e^{i_j - c} k_j turns the first
// into e^c times the GLA op's output with one log-decay lf per token and head (G = 1: chunks of 64 on the
// tensor cores, 3xTF32 in fp32 mode), o'_t; the second is e^c b'_t, b'_t = q^_t.n'_t with
// n'_t = e^{lf_t} n'_{t-1} + k'_t, a Dk-vector scan run here chunkwise (a summary pass per chunk, then each
// chunk replays its 64 tokens from the state its predecessors hand it). With E_t = e^{c - m_t}:
//   bt_t = b'_t E_t ; den_t = max(|bt_t|, e^{-m_t}) + eps ; out_t = o'_t E_t / den_t       (c cancels)
// the recurrent form's quantities exactly, so its per-token prep and gate-gradient kernels are reused.
// Backward: dO' = dout E / den into the GLA op's backward (dq, dk', dv), dB' = dbt E into the vector scan's
// backward (dq += scale dB' n', dk'_j += scale sum_{t>=j} e^{F_t - F_j} dB'_t q_t, the reverse scan),
// dk = e^{i - c} dk', and the gates by the identity of the recurrent form (di = k.dk, dlf from q.dq - k.dk,
// plus the stabiliser's branch). Range: every k' is e^{i_j - c} >= e^{-(max i - min i)} times k, and the
// terms that matter at token t are ~e^{m_t - c} >= e^{-(max i - min i)} (m_t >= i_t) of their natural size,
// so with max i - min i <= 40 per head (the layer's soft cap 15 keeps it <= 30) nothing that counts comes
// near float's underflow (e^{-87}); past that (or non-finite gates) the default falls back to the recurrent
// kernels. The check needs the gates' range on the host: one stream synchronisation per call.
// Precision: the GLA op's (3xTF32 products, fp32 accumulation in fp32 math; plain TF32 in the TF32 and bf16
// modes), the vector scans in fp32 FMAs over at most 64 tokens from their entering state, gates and E in
// double. Deterministic (the range flag is the only atomic, an OR). Cost: the GLA op's (about 0.8 ms
// forward, 3.6 ms forward and backward at B 4, T 4096, H 16, D 128 as measured for it) plus O(D) a token
// for the rest; the backward recomputes the forward.
#define MN__MLSTM_RANGE 40.0

// Per (b,h): cb = max_t i_t; flag set when max - min > RANGE (or not finite). One warp per (b,h).
__global__ void __launch_bounds__(128) mn__k_mlstm_range(float* cb, unsigned* flag, const float* ig, unsigned BH,
                                                         unsigned T, unsigned H) {
    const unsigned bh = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (bh >= BH) return;
    const unsigned b = bh / H, h = bh % H;
    float mx = -INFINITY, mn = INFINITY;
    for (unsigned t = lane; t < T; t += 32) {
        const float i = ig[((size_t)b * T + t) * H + h];
        mx = fmaxf(mx, i);
        mn = fminf(mn, i);
        if (i != i) mn = -INFINITY;                   // NaN: out of range
    }
    for (int o = 16; o; o >>= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    }
    if (lane == 0) {
        cb[bh] = mx;
        if (!((double)mx - (double)mn <= MN__MLSTM_RANGE)) atomicOr(flag, 1u);   // a flag: order does not matter
    }
}
// Per row r = (b,t,h) of NR (one warp each): kp = e^{i - c} k (B,T,H,Dk), lg = logsigmoid(f) (B,T,H).
__global__ void __launch_bounds__(256) mn__k_mlstm_kprep(float* kp, float* lg, const float* k, const float* ig,
                                                         const float* fg, const float* cb, size_t NR, unsigned T,
                                                         unsigned H, unsigned Dk) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const float e = (float)exp((double)ig[r] - (double)cb[bh]);
    for (unsigned d = lane; d < Dk; d += 32) kp[r * Dk + d] = e * k[r * Dk + d];
    if (lane == 0) lg[r] = (float)mn__mlstm_logsig((double)fg[r]);
}

// the arguments of mn__k_mlstm_nrm
typedef struct mn__mlstm_nargs {
    const float *x, *sc, *lg, *q;   // x (B,T,H,Dk) the scanned vectors (k' forward, q reverse), sc (B,T,H) their
                                    // factor (reverse; dq's in MODE 2), lg (B,T,H), q (B,T,H,Dk) (MODE 1)
    float *sum, *A;                 // the chunk summaries (B,H,NT,Dk) and decays e^{sum of the chunk's lf} (B,H,NT)
    float* y;                       // MODE 1 b' (B,T,H) written; MODE 2 dq, MODE 4 dk' (B,T,H,Dk) accumulated
    unsigned T, H, Dk, NT;
    float scale;
} mn__mlstm_nargs;
// The normaliser's vector scan, chunkwise: block (chunk, b*h), thread d one channel (blockDim = Dk <= 128).
//   forward  n'_t = e^{lf_t} n'_{t-1} + k'_t          MODE 0: the chunk's end value from zero -> sum, A
//                                                    MODE 1: b'_t = scale q_t.n'_t (MODE 2: dq_t += sc_t n'_t)
//   reverse  z_j = sc_j q_j + e^{lf_{j+1}} z_{j+1}   MODE 3: e^{lf_first} z_first from zero -> sum, A
//                                                    MODE 4: dk'_j += z_j
// A chunk's entering state is its predecessors' (successors') summaries, each decayed by the chunks between.
template <int MODE>
__global__ void __launch_bounds__(128) mn__k_mlstm_nrm(mn__mlstm_nargs p) {
    __shared__ float prod[MODE == 1 ? MN__MLSTM_NC : 1][129];   // MODE 1: q_t[d] n'_t[d], padded (no conflicts)
    const unsigned c = blockIdx.x, bh = blockIdx.y, d = threadIdx.x, Dk = p.Dk, H = p.H, T = p.T, NT = p.NT;
    const unsigned b = bh / H, h = bh % H, t0 = c * MN__MLSTM_NC;
    const unsigned L = T - t0 < MN__MLSTM_NC ? T - t0 : MN__MLSTM_NC;
    const float* sum = p.sum + (size_t)bh * NT * Dk;
    const float* A = p.A + (size_t)bh * NT;
    float z = 0.f;
    if (MODE == 1 || MODE == 2) {                     // N_c = sum_{c' < c} (prod of A between) s_{c'}
        float P = 1.f;
        for (unsigned cc = c; cc-- > 0;) { z = fmaf(P, sum[(size_t)cc * Dk + d], z); P *= A[cc]; }
    } else if (MODE == 4) {                           // R_c = sum_{c' > c} (prod of A between) rho_{c'}
        float P = 1.f;
        for (unsigned cc = c + 1; cc < NT; cc++) { z = fmaf(P, sum[(size_t)cc * Dk + d], z); P *= A[cc]; }
    }
    double G = 0.0;                                   // the chunk's sum of lf (MODE 0, 3)
    if (MODE <= 2) {
#pragma unroll 4
        for (unsigned j = 0; j < L; j++) {
            const size_t r = ((size_t)b * T + t0 + j) * H + h;
            const float lf = p.lg[r];
            z = fmaf(expf(lf), z, p.x[r * Dk + d]);
            if (MODE == 0) G += lf;
            if (MODE == 1) prod[j][d] = z * p.q[r * Dk + d];
            if (MODE == 2) p.y[r * Dk + d] += p.sc[r] * z;
        }
    } else {
#pragma unroll 4
        for (unsigned j = L; j-- > 0;) {
            const size_t r = ((size_t)b * T + t0 + j) * H + h;
            const float lf = p.lg[r], zz = fmaf(p.sc[r], p.x[r * Dk + d], z);
            if (MODE == 4) p.y[r * Dk + d] += zz;
            z = expf(lf) * zz;                        // what token j hands token j - 1
            if (MODE == 3) G += lf;
        }
    }
    if (MODE == 0 || MODE == 3) {
        p.sum[((size_t)bh * NT + c) * Dk + d] = z;
        if (d == 0) p.A[(size_t)bh * NT + c] = (float)exp(G);
    }
    if (MODE == 1) {
        __syncthreads();
        if (d < L) {                                  // thread d sums token d's row (Dk >= 64 >= L threads)
            float s = 0.f;
            for (unsigned e = 0; e < Dk; e++) s += prod[d][e];
            p.y[((size_t)b * T + t0 + d) * H + h] = p.scale * s;
        }
    }
}
// Per row (one warp each): E = e^{c - m}, bt = b' E, nrm = max(|bt|, e^{-m}), den = nrm + eps, out = o' E / den
// in place (out NULL: skipped); norm (B,T,H) written when not NULL, bt, den (B,T,H) written (the backward's).
__global__ void __launch_bounds__(256) mn__k_mlstm_fin(float* out, float* norm, float* bt, float* den, const float* bp,
                                                       const float* m, const float* cb, size_t NR, unsigned T,
                                                       unsigned H, unsigned Dv, double eps) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const double mm = m[r], E = exp((double)cb[bh] - mm), btv = (double)bp[r] * E;
    const double nrm = fmax(fabs(btv), exp(-mm)), dn = nrm + eps;
    const float f = (float)(E / dn);
    if (out)
        for (unsigned j = lane; j < Dv; j += 32) out[r * Dv + j] *= f;
    if (lane == 0) {
        if (norm) norm[r] = (float)nrm;
        bt[r] = (float)btv;
        den[r] = (float)dn;
    }
}
// Per row (after mn__k_mlstm_prep): dop = dout E / den (B,T,H,Dv) the GLA op's output gradient, sc = scale dbt E
// (B,T,H) the vector scan's (dbt the gradient of the stabilised bt = b' E).
__global__ void __launch_bounds__(256) mn__k_mlstm_dprep(float* dop, float* sc, const float* dout, const float* dbt,
                                                         const float* den, const float* m, const float* cb,
                                                         size_t NR, unsigned T, unsigned H, unsigned Dv, float scale) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const double E = exp((double)cb[bh] - (double)m[r]);
    const float f = (float)(E / (double)den[r]);
    for (unsigned j = lane; j < Dv; j += 32) dop[r * Dv + j] = f * dout[r * Dv + j];
    if (lane == 0) sc[r] = (float)((double)scale * dbt[r] * E);
}
// Per row: dk = e^{i - c} dk' (B,T,H,Dk) accumulated (acc) or written; kdk (B,T,H) = k'.dk' (= k.dk) written.
__global__ void __launch_bounds__(256) mn__k_mlstm_kfin(float* dk, float* kdk, const float* dkp, const float* kp,
                                                        const float* ig, const float* cb, size_t NR, unsigned T,
                                                        unsigned H, unsigned Dk, int acc) {
    const size_t r = blockIdx.x * (size_t)8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31;
    if (r >= NR) return;
    const size_t bh = r / ((size_t)T * H) * H + r % H;
    const float e = (float)exp((double)ig[r] - (double)cb[bh]);
    float part = 0.f;
    for (unsigned d = lane; d < Dk; d += 32) {
        const float g = dkp[r * Dk + d], v1 = e * g;
        part = fmaf(kp[r * Dk + d], g, part);
        dk[r * Dk + d] = acc ? dk[r * Dk + d] + v1 : v1;
    }
    part = mn__warp_sum(part);
    if (lane == 0) kdk[r] = part;
}

template <int MODE>
static int mn__mlstm_nrm_launch(mn_cuda_ctx* ctx, const mn__mlstm_nargs& p, size_t BH) {
    mn__k_mlstm_nrm<MODE><<<dim3(p.NT, (unsigned)BH), p.Dk, 0, MN__STREAM>>>(p);
    MN__LAUNCHED();
    return MN_OK;
}
// whether the chunk form takes the shapes and pointers (the gates' range is the device's check)
static int mn__mlstm_chunk_fits(size_t B, size_t H, size_t Dk, size_t Dv, const void* const* p, int np) {
    if (Dk != Dv || (Dk != 64 && Dk != 128) || B * H > 65535) return 0;
    for (int i = 0; i < np; i++)
        if ((uintptr_t)p[i] % 16) return 0;
    return 1;
}
// the per-head shift c into w->cb; *ok = 1 when every head's input gates span at most MN__MLSTM_RANGE
static int mn__mlstm_range(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, const float* ig, size_t B, size_t T, size_t H,
                           int* ok) {
    const size_t BH = B * H;
    unsigned f = 1;
    MN__CU(cudaMemsetAsync(w->flag, 0, sizeof(unsigned), MN__STREAM));
    mn__k_mlstm_range<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(w->cb, (unsigned*)w->flag, ig, (unsigned)BH,
                                                                      (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    MN__CU(cudaMemcpyAsync(&f, w->flag, sizeof f, cudaMemcpyDeviceToHost, MN__STREAM));
    MN__CU(cudaStreamSynchronize(MN__STREAM));
    *ok = f == 0;
    return MN_OK;
}
// The chunk form's forward (after mn__mlstm_range): the gates (m; stab, mt when not NULL), k', lf, the GLA
// op's o' into out (out NULL: no output, the rest only), b', then out, norm, w->bt, w->den; the forward
// summaries stay in w->nsum, w->nA.
static int mn__mlstm_fwd_chunk(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, float* out, float* norm, float* stab,
                               float* mt, const float* q, const float* k, const float* v, const float* ig,
                               const float* fg, const float* m0, size_t B, size_t T, size_t H, size_t D, double scale,
                               double eps) {
    const size_t BH = B * H, NR = B * T * H;
    const unsigned rb = (unsigned)((NR + 7) / 8);
    mn__k_mlstm_gates<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(w->m, w->fp, w->ip, stab, mt, ig, fg, m0,
                                                                      (unsigned)BH, (unsigned)T, (unsigned)H);
    MN__LAUNCHED();
    mn__k_mlstm_kprep<<<rb, 256, 0, MN__STREAM>>>(w->kp, w->lg, k, ig, fg, w->cb, NR, (unsigned)T, (unsigned)H,
                                                   (unsigned)D);
    MN__LAUNCHED();
    if (out) {                                        // NULL: the backward given the forward's output
        // the GLA products in 3xTF32 whatever ctx->math, as the recurrent form's fp32 (the gate gradients are
        // sums over the sequence that cancel: SSD's measured 17x in plain TF32)
        int math = ctx->math, r;
        ctx->math = MN_CUDA_MATH_FP32;
        r = mn_cuda_gla_forward(ctx, out, NULL, q, w->kp, v, w->lg, NULL, B, T, H, D, D, 1, scale, MN__MLSTM_NC,
                                w->gla);
        ctx->math = math;
        MN__TRY(r);
    }
    mn__mlstm_nargs p;
    memset(&p, 0, sizeof p);
    p.x = w->kp; p.lg = w->lg; p.q = q; p.sum = w->nsum; p.A = w->nA; p.y = w->bp;
    p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)D; p.NT = (unsigned)((T + MN__MLSTM_NC - 1) / MN__MLSTM_NC);
    p.scale = (float)scale;
    MN__TRY(mn__mlstm_nrm_launch<0>(ctx, p, BH));
    MN__TRY(mn__mlstm_nrm_launch<1>(ctx, p, BH));
    mn__k_mlstm_fin<<<rb, 256, 0, MN__STREAM>>>(out, norm, w->bt, w->den, w->bp, w->m, w->cb, NR, (unsigned)T,
                                                 (unsigned)H, (unsigned)D, eps);
    MN__LAUNCHED();
    return MN_OK;
}
// form 0: the chunk form where it applies, else the recurrent one; 2: the chunk form or MN_ERR_CONFIG
static int mn__mlstm_forward_form(mn_cuda_ctx* ctx, int form, float* out, float* norm, float* stab, float* Ct,
                                  float* nt, float* mt, const float* q, const float* k, const float* v,
                                  const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                                  size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps,
                                  size_t C, float* work) {
    const char* who = form ? "mn_cuda_mlstm_forward_chunk" : "mn_cuda_mlstm_forward";
    MN__TRY(mn__mlstm_check(ctx, who, B, T, H, Dk, Dv, C));
    const void* al[5] = { out, q, k, v, work };
    // T >= one chunk: the H200 run 21 measured df wrong at T = 1 (2 checks), right from T = 64 on
    const int fits = T >= MN__MLSTM_NC && !Ct && !nt && !C0 && !n0 && mn__mlstm_chunk_fits(B, H, Dk, Dv, al, 5);
    if (!fits && form)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk == Dv in {64, 128}, no C0, n0, Ct, nt, aligned tensors",
                        __LINE__);
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    int ok = 0;
    if (fits) MN__TRY(mn__mlstm_range(ctx, &w, ig, B, T, H, &ok));
    if (!ok && form) return mn__fail(ctx, MN_ERR_CONFIG, who, "input gates span more than 40 in a head", __LINE__);
    if (!ok)
        return mn__mlstm_fwd(ctx, &w, out, norm, stab, Ct, nt, mt, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv,
                             scale, eps);
    return mn__mlstm_fwd_chunk(ctx, &w, out, norm, stab, mt, q, k, v, ig, fg, m0, B, T, H, Dk, scale, eps);
}
int mn_cuda_mlstm_forward(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* Ct, float* nt, float* mt,
                          const float* q, const float* k, const float* v, const float* ig, const float* fg,
                          const float* C0, const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                          size_t Dv, double scale, double eps, size_t C, float* work) {
    return mn__mlstm_forward_form(ctx, 0, out, norm, stab, Ct, nt, mt, q, k, v, ig, fg, C0, n0, m0, B, T, H, Dk, Dv,
                                  scale, eps, C, work);
}
int mn_cuda_mlstm_forward_chunk(mn_cuda_ctx* ctx, float* out, float* norm, float* stab, float* mt, const float* q,
                                const float* k, const float* v, const float* ig, const float* fg, const float* m0,
                                size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                                float* work) {
    return mn__mlstm_forward_form(ctx, 2, out, norm, stab, NULL, NULL, mt, q, k, v, ig, fg, NULL, NULL, m0, B, T, H,
                                  Dk, Dv, scale, eps, C, work);
}
// The chunk form's backward (after mn__mlstm_range; see the section comment); acc as mn__mlstm_backward_rec;
// osaved (B,T,H,Dv) the forward's output of these arguments (the layer keeps it) or NULL (recomputed).
static int mn__mlstm_bwd_chunk(mn_cuda_ctx* ctx, const mn__mlstm_ws* w, float* dq, float* dk, float* dv, float* di,
                               float* df, const float* dout, const float* q, const float* k, const float* v,
                               const float* ig, const float* fg, const float* m0, size_t B, size_t T, size_t H,
                               size_t D, double scale, double eps, int mode, int acc, const float* osaved) {
    const size_t BH = B * H, NR = B * T * H;
    const unsigned rb = (unsigned)((NR + 7) / 8);
    // the forward again: o into w->o (unless given: the forward's output, bitwise what this would give), with
    // m, bt, den, k', lf and the forward summaries
    MN__TRY(mn__mlstm_fwd_chunk(ctx, w, osaved ? NULL : w->o, NULL, NULL, NULL, q, k, v, ig, fg, m0, B, T, H, D, scale,
                                eps));
    const float* o = osaved ? osaved : w->o;
    mn__k_mlstm_prep<<<rb, 256, 0, MN__STREAM>>>(w->dbt, w->dmu, w->qdq, dout, o, w->bt, w->den, w->m, NR,
                                                  (unsigned)D, (float)eps, mode == MN_MLSTM_BW_EXACT);
    MN__LAUNCHED();
    mn__k_mlstm_dprep<<<rb, 256, 0, MN__STREAM>>>(w->o, w->sc, dout, w->dbt, w->den, w->m, w->cb, NR, (unsigned)T,
                                                   (unsigned)H, (unsigned)D, (float)scale);   // w->o now dO'
    MN__LAUNCHED();
    if (acc) MN__CU(cudaMemsetAsync(w->dkp, 0, NR * D * sizeof(float), MN__STREAM));   // dk' always starts at 0
    {   // in 3xTF32, as the forward
        int math = ctx->math, r;
        ctx->math = MN_CUDA_MATH_FP32;
        r = mn__gla_backward(ctx, dq, w->dkp, dv, NULL, NULL, w->o, NULL, q, w->kp, v, w->lg, NULL, B, T, H, D, D, 1,
                             scale, MN__MLSTM_NC, w->gla, acc);
        ctx->math = math;
        MN__TRY(r);
    }
    if (mode == MN_MLSTM_BW_EXACT) {                  // the normaliser's part (detach: dbt = 0, nothing to add)
        mn__mlstm_nargs p;
        memset(&p, 0, sizeof p);
        p.x = w->kp; p.sc = w->sc; p.lg = w->lg; p.sum = w->nsum; p.A = w->nA; p.y = dq;
        p.T = (unsigned)T; p.H = (unsigned)H; p.Dk = (unsigned)D;
        p.NT = (unsigned)((T + MN__MLSTM_NC - 1) / MN__MLSTM_NC); p.scale = (float)scale;
        MN__TRY(mn__mlstm_nrm_launch<2>(ctx, p, BH));  // reads the forward summaries before MODE 3 replaces them
        p.x = q; p.y = w->dkp;
        MN__TRY(mn__mlstm_nrm_launch<3>(ctx, p, BH));
        MN__TRY(mn__mlstm_nrm_launch<4>(ctx, p, BH));
    }
    mn__k_mlstm_kfin<<<rb, 256, 0, MN__STREAM>>>(dk, w->kdkp, w->dkp, w->kp, ig, w->cb, NR, (unsigned)T, (unsigned)H,
                                                  (unsigned)D, acc);
    MN__LAUNCHED();
    mn__k_mlstm_gates_bwd<<<(unsigned)((BH + 3) / 4), 128, 0, MN__STREAM>>>(di, df, ig, fg, w->m, m0, w->qdq, w->dmu,
                                                                          w->kdkp, (unsigned)BH, (unsigned)T,
                                                                          (unsigned)H, 1u, acc);
    MN__LAUNCHED();
    return MN_OK;
}
// form 0: the chunk form where it applies (no C0, n0, dC0, dn0; Dk == Dv in {64, 128}; the gates' range), else
// the recurrent one; 2: the chunk form or MN_ERR_CONFIG. acc = 0 overwrites the gradients (the model's);
// osaved (B,T,H,Dv) the forward's output or NULL, as in mn__mlstm_bwd_chunk (the recurrent form ignores it).
static int mn__mlstm_backward_form(mn_cuda_ctx* ctx, int form, float* dq, float* dk, float* dv, float* di, float* df,
                                   float* dC0, float* dn0, const float* dout, const float* q, const float* k,
                                   const float* v, const float* ig, const float* fg, const float* C0,
                                   const float* n0, const float* m0, size_t B, size_t T, size_t H, size_t Dk,
                                   size_t Dv, double scale, double eps, size_t C, int mode, float* work, int acc,
                                   const float* osaved) {
    const char* who = form ? "mn_cuda_mlstm_backward_chunk" : "mn_cuda_mlstm_backward";
    MN__TRY(mn__mlstm_check(ctx, who, B, T, H, Dk, Dv, C));
    if (mode != MN_MLSTM_BW_EXACT && mode != MN_MLSTM_BW_DETACH)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "mode must be EXACT or DETACH", __LINE__);
    const void* al[9] = { dq, dk, dv, dout, q, k, v, work, osaved };
    const int fits = T >= MN__MLSTM_NC && !C0 && !n0 && !dC0 && !dn0 && mn__mlstm_chunk_fits(B, H, Dk, Dv, al, 9);
    if (!fits && form)
        return mn__fail(ctx, MN_ERR_CONFIG, who, "needs Dk == Dv in {64, 128}, no C0, n0, dC0, dn0, aligned tensors",
                        __LINE__);
    mn__mlstm_ws w;
    mn__mlstm_layout(&w, work, B, T, H, Dk, Dv);
    int ok = 0;
    if (fits) MN__TRY(mn__mlstm_range(ctx, &w, ig, B, T, H, &ok));
    if (!ok && form) return mn__fail(ctx, MN_ERR_CONFIG, who, "input gates span more than 40 in a head", __LINE__);
    if (!ok)
        return mn__mlstm_backward_rec(ctx, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H,
                                      Dk, Dv, scale, eps, C, mode, work, acc);
    return mn__mlstm_bwd_chunk(ctx, &w, dq, dk, dv, di, df, dout, q, k, v, ig, fg, m0, B, T, H, Dk, scale, eps, mode,
                               acc, osaved);
}
static int mn__mlstm_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df, float* dC0,
                              float* dn0, const float* dout, const float* q, const float* k, const float* v,
                              const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                              size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                              int mode, float* work, int acc, const float* osaved) {
    return mn__mlstm_backward_form(ctx, 0, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H,
                                   Dk, Dv, scale, eps, C, mode, work, acc, osaved);
}
int mn_cuda_mlstm_backward(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df, float* dC0,
                           float* dn0, const float* dout, const float* q, const float* k, const float* v,
                           const float* ig, const float* fg, const float* C0, const float* n0, const float* m0,
                           size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double scale, double eps, size_t C,
                           int mode, float* work) {
    return mn__mlstm_backward_form(ctx, 0, dq, dk, dv, di, df, dC0, dn0, dout, q, k, v, ig, fg, C0, n0, m0, B, T, H,
                                   Dk, Dv, scale, eps, C, mode, work, 1, NULL);
}
int mn_cuda_mlstm_backward_chunk(mn_cuda_ctx* ctx, float* dq, float* dk, float* dv, float* di, float* df,
                                 const float* dout, const float* q, const float* k, const float* v, const float* ig,
                                 const float* fg, const float* m0, size_t B, size_t T, size_t H, size_t Dk, size_t Dv,
                                 double scale, double eps, size_t C, int mode, float* work) {
    return mn__mlstm_backward_form(ctx, 2, dq, dk, dv, di, df, NULL, NULL, dout, q, k, v, ig, fg, NULL, NULL, m0, B, T,
                                   H, Dk, Dv, scale, eps, C, mode, work, 1, NULL);
}

// The decode step: one block of 256 threads per (sequence, head); warp w takes the state rows w, w+8, ...,
// lane l the columns l, l+32, ... (coalesced rows); the gates in double by thread 0 (as the CPU step),
// n and n.q by the first Dk threads, the read-out's column sums over the 8 warps in shared memory.
// C (B,H,Dk,Dv), n (B,H,Dk), m (B,H) in place; out (B,H,Dv); q, k (B,H,Dk), v (B,H,Dv), ig, fg (B,H).
__global__ void __launch_bounds__(256) mn__k_mlstm_step(float* out, float* C, float* n, float* m, const float* q,
                                                        const float* k, const float* v, const float* ig,
                                                        const float* fg, unsigned Dk, unsigned Dv, float scale,
                                                        float eps) {
    __shared__ float sq[128], sk[128], sv[128], red[8][128], snq[8], sg[3];
    const size_t bh = blockIdx.x;
    const unsigned tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    if (tid == 0) {
        double lf = mn__mlstm_logsig(fg[bh]), mo = m[bh], i = ig[bh], mn = fmax(lf + mo, i);
        sg[0] = (float)exp(lf + mo - mn);           // f'
        sg[1] = (float)exp(i - mn);                 // i'
        sg[2] = (float)exp(-mn);                    // the normaliser's floor
        m[bh] = (float)mn;                          // only this thread reads m[bh]
    }
    for (unsigned i = tid; i < Dk; i += 256) { sq[i] = q[bh * Dk + i]; sk[i] = k[bh * Dk + i]; }
    for (unsigned j = tid; j < Dv; j += 256) sv[j] = v[bh * Dv + j];
    __syncthreads();
    const float fp = sg[0], ip = sg[1];
    float part = 0.f;                                // n = f' n + i' k ; n.q
    for (unsigned d = tid; d < Dk; d += 256) {
        float nn = fmaf(fp, n[bh * Dk + d], ip * sk[d]);
        n[bh * Dk + d] = nn;
        part = fmaf(nn, sq[d], part);
    }
    part = mn__warp_sum(part);
    if (lane == 0) snq[w] = part;
    float y[4] = { 0.f, 0.f, 0.f, 0.f };             // C = f' C + i' k v^T ; y = C^T q (this warp's rows)
    for (unsigned d = w; d < Dk; d += 8) {
        float* row = C + (bh * Dk + d) * Dv;
        const float kd = ip * sk[d], qd = sq[d];
#pragma unroll
        for (int cc = 0; cc < 4; cc++) {
            const unsigned j = lane + 32 * cc;
            if (j < Dv) {
                float cv = fmaf(fp, row[j], kd * sv[j]);
                row[j] = cv;
                y[cc] = fmaf(qd, cv, y[cc]);
            }
        }
    }
#pragma unroll
    for (int cc = 0; cc < 4; cc++)
        if (lane + 32 * cc < Dv) red[w][lane + 32 * cc] = y[cc];
    __syncthreads();
    if (tid < Dv) {
        float nq = 0.f, s = 0.f;
        for (int i = 0; i < 8; i++) { nq += snq[i]; s += red[i][tid]; }
        const float den = fmaxf(fabsf(scale * nq), sg[2]) + eps;
        out[bh * Dv + tid] = scale * s / den;
    }
}
int mn_cuda_mlstm_step(mn_cuda_ctx* ctx, float* out, float* C, float* n, float* m, const float* q, const float* k,
                       const float* v, const float* ig, const float* fg, size_t B, size_t H, size_t Dk, size_t Dv,
                       double scale, double eps) {
    if (Dk == 0 || Dv == 0 || Dk > 128 || Dv > 128 || B * H == 0 || B * H > 0x7fffffff)
        return mn__fail(ctx, MN_ERR_CONFIG, "mn_cuda_mlstm_step", "needs 0 < Dk, Dv <= 128, B*H > 0", __LINE__);
    mn__k_mlstm_step<<<(unsigned)(B * H), 256, 0, MN__STREAM>>>(out, C, n, m, q, k, v, ig, fg, (unsigned)Dk,
                                                                 (unsigned)Dv, (float)scale, (float)eps);
    MN__LAUNCHED();
    return MN_OK;
}
