"""Tests of the Python bridge (notebooks/mesanet.py). Run: python3 tests/test_bridge.py [BUILD]

1. The table: every prototype the bridge binds is, word for word, one of mesanet.h's >>api prototypes.
2. Bit equality in double: BUILD/bridge_ref (tests/bridge_ref.c) runs every mixer op (each form, forward,
   backward, step), the Mesa forms and a small model directly in C and writes inputs and results as hex
   floats; the bridge gets the same inputs and must return the same bits.
3. The golden vectors through the bridge (read with its .vec reader) within check_vectors' 1e-8, and
   write_vec -> read_vec round trips exactly.
4. The float build agrees with the double one; the model round trip through save/load.
5. Error paths: dtype, shape, contiguity, library errors as MesanetError with the library's message,
   a missing symbol and a changed struct layout at load time, malformed .vec files.
Prints one line per failed check and ends with "N passed, N failed".
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "notebooks"))
import mesanet  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", what)


def same(a, b):
    """Bit equality (so -0.0 and 0.0 differ, and NaN equals itself)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.astype(np.float64).view(np.uint64), b.astype(np.float64).view(np.uint64))
    return np.array_equal(a, b)


def raises(exc, fn, *args, contains=None, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        return contains is None or contains in str(e)
    except Exception as e:  # the wrong kind of error is a failure too
        print("  (raised %s: %s)" % (type(e).__name__, e))
        return False
    return False


mn = mesanet.load("f64", os.path.join(BUILD, "libmesanet_f64.so"))

# ---- 1. the table against the header ------------------------------------------------------------------
with open(os.path.join(ROOT, "mesanet.h")) as f:
    header = f.read()
api = header[header.index("// >>api"):header.index("// >>impl")]
declared = {name: (ret, params) for name, ret, params in mesanet.parse_prototypes(api.replace("MNDEF ", ""))}
for name, ret, params in mesanet.parse_prototypes(mesanet._API):
    if name.startswith("mnb_") or name.startswith("mn_vec_"):
        continue
    check(name in declared, "table: %s is not declared in mesanet.h's >>api" % name)
    if name in declared:
        check(declared[name] == (ret, params), "table: %s differs from mesanet.h:\n  bridge %s\n  header %s"
              % (name, (ret, params), declared[name]))

# ---- 2. bit equality with the C programs ----------------------------------------------------------------
ref = tempfile.mkdtemp(prefix="bridge_ref.")
rc = subprocess.call([os.path.join(BUILD, "bridge_ref"), ref])
check(rc == 0, "bridge_ref exited with %d" % rc)


def vec(name):
    return mesanet.read_vec(os.path.join(ref, name + ".vec"), mn).tensors


def expect(case, got, want_tensors, names):
    for n, g in zip(names, got):
        if n is None:
            continue
        check(same(g, want_tensors[n]), "%s: %s differs from the C program (max |diff| %.3g)"
              % (case, n, np.max(np.abs(np.asarray(g, float) - want_tensors[n]))))


for w in (0, 3):
    t = vec("attn_w%d" % w)
    q, k, v, do = t["q"], t["k"], t["v"], t["do"]
    r = mn.attention_forward(q, k, v, window=w, scale=0.5)
    expect("attn w%d" % w, r, t, ["out", "att"])
    expect("attn w%d" % w, mn.attention_backward(do, r.att, q, k, v, window=w, scale=0.5), t, ["dq", "dk", "dv"])
    rn = mn.attention_forward_naive(q, k, v, window=w, scale=0.5)
    expect("attn w%d" % w, rn, t, ["naive.out", "naive.lse"])
    expect("attn w%d" % w, mn.attention_backward_naive(do, rn.out, rn.lse, q, k, v, window=w, scale=0.5), t,
           ["naive.dq", "naive.dk", "naive.dv"])
    B, T, H, Dk = q.shape
    outs = np.zeros_like(t["step.out"])
    for b in range(B):
        kc, vc = np.zeros((T, H, Dk)), np.zeros((T, H, v.shape[3]))
        for s in range(T):
            outs[b, s] = mn.attention_step(kc, vc, q[b, s].copy(), k[b, s].copy(), v[b, s].copy(), s, window=w,
                                           scale=0.5)
    expect("attn w%d" % w, [outs], t, ["step.out"])

for G in (0, 1, 4):
    t = vec("gla_G%d" % G)
    q, k, v, h0, do, dht = t["q"], t["k"], t["v"], t["h0"], t["do"], t["dht"]
    g = t.get("g")
    case = "gla G=%d" % G
    expect(case, mn.gla_forward(q, k, v, g, h0, scale=0.5, chunk=3), t, ["o", "ht"])
    expect(case, mn.gla_backward(do, q, k, v, g, h0, dht, scale=0.5, chunk=3), t,
           ["dq", "dk", "dv", "dg" if G else None, "dh0"])
    expect(case, mn.gla_forward_recurrent(q, k, v, g, h0, scale=0.5), t, ["rec.o", "rec.ht"])
    expect(case, mn.gla_backward_recurrent(do, q, k, v, g, h0, dht, scale=0.5), t,
           ["rec.dq", "rec.dk", "rec.dv", "rec.dg" if G else None, "rec.dh0"])
    st, outs = h0.copy(), np.zeros_like(t["step.out"])
    for s in range(q.shape[1]):
        outs[:, s] = mn.gla_step(st, q[:, s].copy(), k[:, s].copy(), v[:, s].copy(),
                                 None if g is None else g[:, s].copy(), scale=0.5)
    expect(case, [outs, st], t, ["step.out", "step.state"])
    check(g is None or (mn.gla_backward(do, q, k, v, g, h0, dht, scale=0.5, chunk=3).dg is not None), case + " dg")

for gated in (0, 1):
    t = vec("delta_gated" if gated else "delta")
    q, k, v, beta, h0, do, dht = t["q"], t["k"], t["v"], t["beta"], t["h0"], t["do"], t["dht"]
    g = t.get("g")
    case = "gated delta rule" if gated else "delta rule"
    r = mn.delta_rule_forward(q, k, v, beta, g, h0, scale=0.5, chunk=3)
    expect(case, r, t, ["o", "ht", "hs"])
    expect(case, mn.delta_rule_backward(do, r.hs, q, k, v, beta, g, h0, dht, scale=0.5, chunk=3), t,
           ["dq", "dk", "dv", "dbeta", "dg" if gated else None, "dh0"])
    rn = mn.delta_rule_forward_naive(q, k, v, beta, g, h0, scale=0.5)
    expect(case, rn, t, ["naive.o", "naive.ht", "naive.states"])
    expect(case, mn.delta_rule_backward_naive(do, rn.states, q, k, v, beta, g, h0, dht, scale=0.5), t,
           ["naive.dq", "naive.dk", "naive.dv", "naive.dbeta", "naive.dg" if gated else None, "naive.dh0"])
    st, outs = h0.copy(), np.zeros_like(t["step.out"])
    for s in range(q.shape[1]):
        outs[:, s] = mn.delta_rule_step(st, q[:, s].copy(), k[:, s].copy(), v[:, s].copy(), beta[:, s].copy(),
                                        None if g is None else g[:, s].copy(), scale=0.5)
    expect(case, [outs, st], t, ["step.out", "step.state"])

for amode in (mesanet.SSD_LOG_DECAY, mesanet.SSD_TRANSITION):
    t = vec("ssd_transition" if amode else "ssd")
    X, A, Bm, Cm, h0, dy, dht = t["X"], t["A"], t["Bm"], t["Cm"], t["h0"], t["dy"], t["dht"]
    case = "ssd amode=%d" % amode
    if amode == mesanet.SSD_LOG_DECAY:
        expect(case, mn.ssd_forward(X, A, Bm, Cm, h0, chunk=3), t, ["y", "ht"])
        expect(case, mn.ssd_backward(dy, X, A, Bm, Cm, h0, dht, chunk=3), t, ["dX", "dA", "dB", "dC", "dh0"])
    expect(case, mn.ssd_forward_recurrent(X, A, Bm, Cm, h0, amode=amode), t, ["rec.y", "rec.ht"])
    expect(case, mn.ssd_backward_recurrent(dy, X, A, Bm, Cm, h0, dht, amode=amode), t,
           ["rec.dX", "rec.dA", "rec.dB", "rec.dC", "rec.dh0"])
    st, ys = h0.copy(), np.zeros_like(t["step.y"])
    for s in range(X.shape[1]):
        ys[:, s] = mn.ssd_step(st, X[:, s].copy(), A[:, s].copy(), Bm[:, s].copy(), Cm[:, s].copy(), amode=amode)
    expect(case, [ys, st], t, ["step.y", "step.state"])

t = vec("rglru")
seg = t["segment_pos"].astype(np.intc)
p = [t[n] for n in ("x", "a_param", "wx", "bx", "wa", "ba")]
r = mn.rglru_forward(*p, h0=t["h0"], segment_pos=seg)
expect("rglru", r, t, ["y", "ht", "gates"])
expect("rglru", mn.rglru_backward(t["dy"], r.y, r.gates, *p, h0=t["h0"], segment_pos=seg, dht=t["dht"]), t,
       ["dx", "da_param", "dwx", "dbx", "dwa", "dba", "dh0"])
st, ys = t["h0"].copy(), np.zeros_like(t["step.y"])
for s in range(ys.shape[1]):
    ys[:, s] = mn.rglru_step(st, t["x"][:, s].copy(), *p[1:], segment_pos=seg[:, s].copy())
expect("rglru", [ys, st], t, ["step.y", "step.state"])

t = vec("mlstm")
qkv = [t[n] for n in ("q", "k", "v", "ig", "fg")]
s0 = dict(C0=t["C0"], n0=t["n0"], m0=t["m0"])
expect("mlstm", mn.mlstm_forward_parallel(*qkv, scale=0.5), t, ["par.out", "par.norm", "par.stab"])
for mode in (0, 1):
    expect("mlstm", mn.mlstm_backward_parallel(t["do"], *qkv, scale=0.5, mode=mode), t,
           ["par%d.%s" % (mode, n) for n in ("dq", "dk", "dv", "di", "df")])
expect("mlstm", mn.mlstm_forward_recurrent(*qkv, scale=0.5, **s0), t,
       ["rec." + n for n in ("out", "norm", "stab", "Ct", "nt", "mt")])
expect("mlstm", mn.mlstm_forward(*qkv, scale=0.5, chunk=3, **s0), t,
       ["chunk." + n for n in ("out", "norm", "stab", "Ct", "nt", "mt")])
expect("mlstm", mn.mlstm_backward(t["do"], *qkv, scale=0.5, chunk=3, **s0), t,
       ["chunk." + n for n in ("dq", "dk", "dv", "di", "df", "dC0", "dn0")])
C, n, m, outs = t["C0"].copy(), t["n0"].copy(), t["m0"].copy(), np.zeros_like(t["step.out"])
for s in range(outs.shape[1]):
    outs[:, s] = mn.mlstm_step(C, n, m, *[a[:, s].copy() for a in qkv], scale=0.5)
expect("mlstm", [outs, C, n, m], t, ["step.out", "step.C", "step.n", "step.m"])

t = vec("slstm")
s0 = [t[n] for n in ("y0", "c0", "n0", "m0")]
r = mn.slstm_forward(t["x"], t["R"], t["b"], *s0)
expect("slstm", r, t, ["y", "c", "n", "m"])
expect("slstm", mn.slstm_backward(t["dy"], r, t["x"], t["R"], t["b"], *s0), t, ["dx", "dR", "db", "dy0", "dc0", "dn0"])
ss, ys = [a.copy() for a in s0], np.zeros_like(t["step.y"])
for s in range(ys.shape[1]):
    ys[:, s] = mn.slstm_step(*ss, t["x"][:, s].copy(), t["R"], t["b"])
expect("slstm", [ys] + ss[1:], t, ["step.y", "step.c", "step.n", "step.m"])

t = vec("mesa")
a = [t[n] for n in ("q", "k", "v", "g", "beta", "lamb")]
st0 = dict(hkk0=t["hkk0"], hkv0=t["hkv0"])
dst = dict(dhkk=t["dhkk"], dhkv=t["dhkv"])
oc, orr, oe = dict(cg_iters=8, chunk=3), dict(cg_iters=30, cg_tol=1e-3), dict(solver="exact")
gn = ["dq", "dk", "dv", "dg", "dbeta", "dlamb", "dhkk0", "dhkv0"]
r = mn.mesa_forward(*a, **st0, **oc)
expect("mesa chunk", r, t, ["chunk." + n for n in ("out", "xs", "iters", "hkk", "hkv")])
expect("mesa chunk", mn.mesa_backward(t["do"], r.xs, *a, **st0, **dst, **oc), t, ["chunk." + n for n in gn])
expect("mesa tol", mn.mesa_forward_recurrent(*a, **st0, **orr), t,
       ["tol." + n for n in ("out", "xs", "iters", "hkk", "hkv")])
r = mn.mesa_forward_recurrent(*a, **st0, **oe)
expect("mesa exact", r, t, ["exact." + n for n in ("out", "xs", "iters", "hkk", "hkv")])
expect("mesa exact", mn.mesa_backward_recurrent(t["do"], r.xs, *a, **st0, **dst, **oe), t, ["exact." + n for n in gn])
check(same(st0["hkk0"], t["hkk0"]) and same(st0["hkv0"], t["hkv0"]), "mesa: the caller's initial states were modified")
hkk, hkv = t["hkk0"].copy(), t["hkv0"].copy()
outs, its = np.zeros_like(t["step.out"]), np.zeros(t["step.iters"].shape, np.intc)
for b in range(outs.shape[0]):
    for s in range(outs.shape[1]):
        hb, vb = hkk[b].copy(), hkv[b].copy()
        o = mn.mesa_step(hb, vb, *[x[b, s].copy() for x in a[:5]], a[5], cg_iters=5, fla=True, jacobi=True)
        outs[b, s], its[b, s], hkk[b], hkv[b] = o.out, o.iters, hb, vb
expect("mesa step", [outs, its, hkk, hkv], t, ["step.out", "step.iters", "step.hkk", "step.hkv"])

t = vec("model")
model = mn.model(vocab_size=32, d_model=16, n_layer=3, n_head=2, max_seq_len=16, pattern="mesa,gdn,attn",
                 mesa_cg_train=6, mesa_chunk=4, seed=7)
tok, tgt = t["tokens"].astype(np.intc), t["targets"].astype(np.intc)
loss = model.forward(tok, tgt)
model.zero_grad()
model.backward()
expect("model", [np.array([loss]), model.logits(), model.grads], t, ["loss", "logits", "grads"])
model.adamw_step(1e-2)
loss2 = model.forward(tok, tgt)
expect("model", [model.params, np.array([loss2])], t, ["step1.params", "step1.loss"])
state = model.state(2)
lg = np.stack([model.step(state, np.array([tok[0, i], tok[1, i]], np.intc)) for i in range(3)])
expect("model", [lg], t, ["decode.logits"])
check(state.pos == 3, "state.pos after 3 steps is %d" % state.pos)

# ---- 3. golden vectors and .vec round trips -----------------------------------------------------------------


def rel(a, b):
    d = np.max(np.abs(b))
    return np.max(np.abs(a - b)) / (d if d > 0 else 1)


vd = os.path.join(ROOT, "reference", "vectors")
f = mesanet.read_vec(os.path.join(vd, "gated_delta_rule_beta01.vec"), mn)
t, sc = f.tensors, float(f.attrs["scale"])
r = mn.delta_rule_forward(t["q"], t["k"], t["v"], t["beta"], t["g"], t["h0"], scale=sc)
check(rel(r.out, t["out.o"]) < 1e-8 and rel(r.ht, t["out.ht"]) < 1e-8, "gated_delta_rule_beta01.vec: forward")
gr = mn.delta_rule_backward(t["do"], r.hs, t["q"], t["k"], t["v"], t["beta"], t["g"], t["h0"], t["dht"], scale=sc)
check(all(rel(getattr(gr, "d" + n), t["grad." + n]) < 1e-8 for n in ("q", "k", "v", "beta", "g", "h0")),
      "gated_delta_rule_beta01.vec: gradients")
f = mesanet.read_vec(os.path.join(vd, "mesa_exact.vec"), mn)
t = f.tensors
r = mn.mesa_forward_recurrent(t["q"], t["k"], t["v"], t["g"], t["beta"], t["lamb"], solver="exact")
check(rel(r.out, t["out.o"]) < 1e-8 and rel(r.hkk, t["out.h_kk"]) < 1e-8, "mesa_exact.vec: forward")
gr = mn.mesa_backward_recurrent(t["do"], r.xs, t["q"], t["k"], t["v"], t["g"], t["beta"], t["lamb"], solver="exact")
check(all(rel(getattr(gr, "d" + n), t["grad." + n]) < 1e-8 for n in ("q", "k", "v", "g", "beta", "lamb")),
      "mesa_exact.vec: gradients")
tmp = tempfile.mkdtemp(prefix="bridge_vec.")
p = os.path.join(tmp, "mesa_exact.vec")
mesanet.write_vec(p, f.op, f.tensors, f.attrs, source=f.source)
g = mesanet.read_vec(p, mn)
check(g.op == f.op and g.source == f.source and g.attrs == f.attrs and list(g.tensors) == list(f.tensors) and
      all(same(g.tensors[n], f.tensors[n]) for n in f.tensors), "write_vec/read_vec round trip is not exact")
# the intended workflow: outputs of "another implementation" (here the bridge itself) checked by check-vectors
mine = dict(f.tensors)
mine["out.o"], mine["grad.q"] = r.out, gr.dq
mesanet.write_vec(p, f.op, mine, f.attrs, source=f.source)
cv = os.path.join(BUILD, "check_vectors")
if os.path.exists(cv):
    out = subprocess.run([cv, "--tol", "1e-8", tmp], capture_output=True, text=True)
    check(out.returncode == 0 and "1 passed, 0 failed" in out.stdout, "check_vectors on a written file: " + out.stdout)
    mine["out.o"] = r.out * (1 + 1e-6)
    mesanet.write_vec(p, f.op, mine, f.attrs, source=f.source)
    out = subprocess.run([cv, "--tol", "1e-8", tmp], capture_output=True, text=True)
    check(out.returncode != 0 and "FAIL" in out.stdout, "check_vectors accepts a wrong output: " + out.stdout)

# ---- 4. float build; save / load ------------------------------------------------------------------------------------
f32 = mesanet.load("f32", os.path.join(BUILD, "libmesanet_f32.so"))
t = vec("gla_G4")
r64 = mn.gla_forward(t["q"], t["k"], t["v"], t["g"], t["h0"], chunk=3)
r32 = f32.gla_forward(*[t[n].astype(np.float32) for n in ("q", "k", "v", "g", "h0")], chunk=3)
check(r32.out.dtype == np.float32 and rel(r32.out, r64.out) < 1e-5,
      "float build: gla differs by %.2e" % rel(r32.out, r64.out))
ck = os.path.join(tmp, "ckpt")
os.makedirs(ck)
# a Mesa + attention model: the layout whose config.json carries every setting (see the report of this test's
# commit: a hybrid with other mixers loses mesa_cg_train on save)
model = mn.model(vocab_size=32, d_model=16, n_layer=2, n_head=2, max_seq_len=16, pattern="mesa,attn", mesa_cg_train=6,
                 mesa_chunk=4)
model.forward(tok, tgt)
model.zero_grad()
model.backward()
model.adamw_step(1e-2)
loss2 = model.forward(tok, tgt)
model.save(ck, step=11, rng_state=5, extra=(1.5, 0, 0, 0), notes="lr 1e-2")
m2, meta = mn.load_model(ck, optimizer=True)
check(same(m2.params, model.params) and meta["step"] == 11 and meta["rng_state"] == 5 and meta["extra"][0] == 1.5
      and meta["notes"] == "lr 1e-2" and m2.opt_step == 1, "save/load round trip: %s" % meta)
check(same(m2.forward(tok, tgt), loss2) and m2.config["pattern"] == "mesa,attn", "loaded model's loss differs")
check(model.tensor("model.embeddings.weight").shape == (32, 16), "tensor() shape")

# ---- 5. error paths ---------------------------------------------------------------------------------------------
q = np.zeros((1, 4, 2, 4))
check(raises(TypeError, mn.gla_forward, q.astype(np.float32), q, q, contains="dtype float32"), "wrong dtype")
check(raises(ValueError, mn.gla_forward, q, q[:, :3].copy(), q, contains="expected (1, 4, 2, 4)"), "wrong shape")
check(raises(ValueError, mn.gla_forward, q, q, np.zeros((1, 4, 2, 8))[..., ::2], contains="C-contiguous"),
      "non-contiguous")
check(raises(TypeError, mn.gla_forward, q.tolist(), q, q, contains="numpy array"), "a list instead of an array")
check(raises(ValueError, mn.gla_forward, q, q, q, np.zeros((1, 4, 2, 3)), contains="gates per head"), "bad gate width")
check(raises(ValueError, mn.gla_forward, q, q, q, chunk=0, contains="chunk length"), "chunk 0")
check(raises(ValueError, mn.mesa_forward, q, q, q, q[..., 0].copy(), q[..., 0].copy(), np.ones((2, 4)), solver="lu"),
      "unknown solver")
check(raises(ValueError, mn.attention_step, np.zeros((2, 2, 4)), np.zeros((2, 2, 4)), q[0, 0], q[0, 0], q[0, 0], 5,
             contains="too short"), "attention cache too short")
e = None
try:
    mn.model(pattern="mesa,nope")
except mesanet.MesanetError as err:
    e = err
check(e is not None and e.code == -1 and e.name == "MN_ERR_CONFIG" and "unknown mixer 'nope'" in e.message,
      "unknown mixer: %r" % (e,))
check(raises(TypeError, mn.model, d_modle=8, contains="no field 'd_modle'"), "unknown config field")
bad = tok.copy()
bad[0, 0] = 99
check(raises(mesanet.MesanetError, model.forward, bad, tgt, contains="MN_ERR_RANGE: mesanet: token id 99"), "token id")
m3 = mn.model(vocab_size=32, d_model=16, n_layer=1, n_head=2, max_seq_len=16)
check(raises(mesanet.MesanetError, m3.backward, contains="MN_ERR_STATE"), "backward before forward")
check(raises(mesanet.MesanetError, m3.forward, np.zeros((1, 17), np.intc), contains="max_seq_len"), "T > max_seq_len")
check(raises(TypeError, m3.forward, np.zeros((1, 4), np.int64), contains="dtype int64"), "int64 tokens")
check(raises(mesanet.MesanetError, mn.load_model, os.path.join(tmp, "missing"),
             contains="MN_ERR_IO: mesanet: cannot open"), "load from a missing folder")
check(raises(mesanet.MesanetError, m3.save, os.path.join(tmp, "no", "such"), contains="MN_ERR_IO"),
      "save to a missing folder")
check(raises(mesanet.MesanetError, m3.save, tmp, step=1, contains="MN_ERR_STATE"), "optimizer save before a step")
check(raises(mesanet.MesanetError, model.state, 0, contains="n_seq"), "state with 0 sequences")
with open(p, "w") as fh:
    fh.write("op x\nsource y\ntensor a 1 3\n1 2\nend\n")
check(raises(ValueError, mesanet.read_vec, p, mn, contains="line"), "truncated .vec file: no line number")
check(raises(OSError, mesanet.read_vec, os.path.join(tmp, "none.vec"), mn), "missing .vec file")
check(raises(ValueError, mesanet.write_vec, p, "op", {"bad name": np.zeros(2)}), "tensor name with a space")
check(raises(ValueError, mesanet.write_vec, p, "op", {"a": np.zeros((0,))}), "empty tensor")
check(raises(ValueError, mn.task, "nope"), "unknown task")
saved = mesanet._API
mesanet._API = saved + "\nvoid mn_no_such_function(void);\n"
check(raises(ImportError, mesanet.Lib, mn.path, "f64", contains="mn_no_such_function"), "missing symbol at load")
mesanet._API = saved
saved = mesanet._mirror


def shifted(real):
    s = saved(real)

    class MesaOpts(mesanet.ctypes.Structure):
        _fields_ = s["mn_mesa_opts"]._fields_[1:]       # as if the header had dropped `solver`
    s["mn_mesa_opts"] = MesaOpts
    return s


mesanet._mirror = shifted
check(raises(ImportError, mesanet.Lib, mn.path, "f64", contains="mn_mesa_opts"), "changed struct layout at load")
mesanet._mirror = saved
check(raises(FileNotFoundError, mesanet.load, "f64", os.path.join(tmp, "none.so"), contains="make lib"), "missing .so")

print("bridge: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
