#!/usr/bin/env python3
"""Logits of one MesaNet checkpoint in flash-linear-attention (fla) and in this library, both ways.

Direction 1: fla builds MesaNetForCausalLM with its own initialisation and saves it
(save_pretrained: model.safetensors + config.json); reference/dump_logits (a double build of
mesanet.h) loads that folder and writes its logits for the same bytes. Done at initialisation and
after a short fla training run. Direction 2: checkpoints written by build/train (a few steps, and a
few hundred) are loaded by transformers' AutoModelForCausalLM.from_pretrained into fla's model.

The yardstick is fla's own self-difference: its chunkwise path (model(ids), what fla trains and
prefills with: q, k rounded to fp16, CG from x0 = 0) against its recurrent decoding kernel
(mesa_net_decoding_one_step token by token: fp32, CG from the Jacobi guess). Differences are
printed as relative max (max|a-b| / max|b|) and relative RMS (||a-b|| / ||b||) over all logits.

Also printed: fla's pure-PyTorch chunkwise CG (ops/mesa_net/naive.py, fp32) in place of its Triton
kernels, which separates the algorithm from fla's fp16 rounding, and generation through fla's cache.

fla is a peer brought in for the run only, never part of the repository. On the GPU machine:
    PYTHONPATH=.fla python3 reference/fla_interop.py --bin .interop/bin --ours .interop/ours --out $OUT
with .fla/fla the package folder of an fla checkout, .interop/bin static builds of
reference/dump_logits.c (make build/dump_logits LDFLAGS=-static; dump_logits: this tree,
dump_logits_before: an older header, optional) and .interop/ours the build/train checkpoints
(init/, trained/). results/fla_interop.md has the commands and the numbers of a run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

T_LEN = 256            # bytes compared: four chunks of 64 (fla's naive chunk form needs whole chunks)
ARCH = dict(hidden_size=256, num_hidden_layers=2, num_heads=4, head_dim=64, vocab_size=256,
            max_cg_step_training=30, max_cg_step_decoding=30, fuse_cross_entropy=False)


def rel(a, b):
    """(relative max, relative RMS) of a against the reference b."""
    d = a - b
    return float(np.abs(d).max() / np.abs(b).max()), float(np.sqrt((d * d).sum() / (b * b).sum()))


def fmt(r):
    return "max %.2e  rms %.2e" % r


class Report:
    def __init__(self, out):
        self.out, self.rows, self.log = out, {}, open(os.path.join(out, "fla_interop.log"), "w")

    def say(self, *a):
        s = " ".join(str(x) for x in a)
        print(s, flush=True)
        self.log.write(s + "\n")
        self.log.flush()

    def pair(self, case, name, a, b):
        r = rel(a, b)
        self.rows.setdefault(case, {})[name] = r
        self.say("  %-44s %s" % (name, fmt(r)))
        return r

    def dump(self):
        with open(os.path.join(self.out, "fla_interop.json"), "w") as f:
            json.dump(self.rows, f, indent=1)


# ---- fla's two paths -----------------------------------------------------------------------------
def fla_modules():
    import fla.layers.mesa_net as layer_mod
    from fla.models.mesa_net import MesaNetConfig, MesaNetForCausalLM
    from fla.modules.l2norm import l2_norm
    from fla.ops.mesa_net import mesa_net_decoding_one_step
    return layer_mod, MesaNetConfig, MesaNetForCausalLM, l2_norm, mesa_net_decoding_one_step


def naive_chunk_core(l2_norm):
    """fla's pure-PyTorch chunkwise CG (ops/mesa_net/naive.py) in fp32 in place of the Triton kernels:
    the same algorithm as model(ids) (x0 = 0, 1e-5 in CG's denominators) without the fp16 q, k, states."""
    from fla.ops.mesa_net.naive import naive_mesa_net_CG

    def core(q, k, v, g, beta, lamb, output_final_state=False, max_CG_iteration=30,
             use_qk_l2norm_in_kernel=True, cu_seqlens=None, **kw):
        assert cu_seqlens is None
        if use_qk_l2norm_in_kernel:
            q, k = l2_norm(q), l2_norm(k)
        o, hkk, hkv = naive_mesa_net_CG(q.float(), k.float(), v.float(), g.float(), lamb.float(), beta.float(),
                                        64, max_CG_iteration=max_CG_iteration)
        return o.to(v.dtype), hkk, hkv
    return core


def recurrent_core(l2_norm, step):
    """A stand-in for chunk_mesa_net that runs fla's decoding kernel over the tokens one by one, i.e.
    what fla's layer does when it generates with a cache (l2_norm on q, k in fp32, then the step)."""
    def core(q, k, v, g, beta, lamb, output_final_state=False, max_CG_iteration=30,
             use_qk_l2norm_in_kernel=True, cu_seqlens=None, **kw):
        assert cu_seqlens is None
        if use_qk_l2norm_in_kernel:
            q, k = l2_norm(q), l2_norm(k)
        B, T, H, K = q.shape
        hkk = q.new_zeros(B, H, K, K, dtype=torch.float32)
        hkv = q.new_zeros(B, H, K, v.shape[-1], dtype=torch.float32)
        outs = []
        for t in range(T):
            o, hkk, hkv = step(q=q[:, t].contiguous(), k=k[:, t].contiguous(), v=v[:, t].contiguous(),
                               g=g[:, t].contiguous(), beta=beta[:, t].contiguous(), lamb=lamb,
                               prev_h_kk=hkk, prev_h_kv=hkv, max_CG_iteration=max_CG_iteration)
            outs.append(o)
        return torch.stack(outs, 1).to(v.dtype), hkk, hkv
    return core


@torch.no_grad()
def fla_logits(model, ids, rep):
    """{'chunk': model(ids), 'recurrent': the decoding kernel token by token, 'naive': fla's fp32
    PyTorch chunk form, 'cache': generation with fla's cache (if this transformers version runs it)}
    as float64 arrays (T, V)."""
    layer_mod, _, _, l2_norm, step = fla_modules()
    model.eval()
    res = {"chunk": model(ids, use_cache=False).logits[0].double().cpu().numpy()}
    saved = layer_mod.chunk_mesa_net
    def naive_step(q, k, v, g, beta, lamb, prev_h_kk, prev_h_kv, max_CG_iteration):
        from fla.ops.mesa_net.naive import naive_mesa_net_decoding_one_step
        return naive_mesa_net_decoding_one_step(q, k, v, g, lamb, beta, prev_h_kk, prev_h_kv, max_CG_iteration)
    for name, core in (("recurrent", recurrent_core(l2_norm, step)), ("naive", naive_chunk_core(l2_norm)),
                       ("recurrent", recurrent_core(l2_norm, naive_step))):   # the last only if the kernel failed
        if name in res:
            continue
        layer_mod.chunk_mesa_net = core
        try:
            res[name] = model(ids, use_cache=False).logits[0].double().cpu().numpy()
        except Exception as e:  # noqa: BLE001
            rep.say("  (fla %s path failed: %s: %s)" % (name, type(e).__name__, e))
        finally:
            layer_mod.chunk_mesa_net = saved
    if "recurrent" not in res:   # without fla's decoding kernel there is no yardstick
        raise RuntimeError("fla's recurrent path did not run")
    try:   # the real generation path: first token through the chunk kernel, then the cache
        out = model(ids[:, :1], use_cache=True)
        rows, pkv = [out.logits[0, -1]], out.past_key_values
        for t in range(1, ids.shape[1]):
            out = model(ids[:, t:t + 1], past_key_values=pkv, use_cache=True)
            rows.append(out.logits[0, -1])
            pkv = out.past_key_values
        res["cache"] = torch.stack(rows).double().cpu().numpy()
    except Exception as e:  # noqa: BLE001 (report and go on: the patched path above is the yardstick)
        rep.say("  (fla generation with its cache failed: %s: %s)" % (type(e).__name__, e))
    return res


# ---- this library -------------------------------------------------------------------------------
def ours(binary, ckpt, tokfile, V, rep):
    """(forward, step) logits from dump_logits, or None when it refuses the checkpoint."""
    a, b = tokfile + ".fwd", tokfile + ".step"
    p = subprocess.run([binary, ckpt, tokfile, a, b], capture_output=True, text=True)
    if p.returncode != 0:
        rep.say("  %s refused %s (exit %d): %s" % (os.path.basename(binary), ckpt, p.returncode, p.stderr.strip()))
        return None
    return np.fromfile(a).reshape(-1, V), np.fromfile(b).reshape(-1, V)


def with_config(src, dst, **kv):
    """A copy of checkpoint src whose config.json has the keys kv set (values as JSON)."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(kv)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return dst


def compare(rep, case, fl, mine, label):
    """The rows of one checkpoint: fla's self-difference, then each of our logits against fla's."""
    rep.pair(case, "fla chunk vs fla recurrent (fla's own)", fl["recurrent"], fl["chunk"])
    if "cache" in fl:
        rep.pair(case, "fla cache generation vs fla recurrent", fl["cache"], fl["recurrent"])
    if "naive" in fl:
        rep.pair(case, "fla naive fp32 chunk vs fla chunk", fl["naive"], fl["chunk"])
    for name, got in mine:
        if got is None:
            continue
        fwd, stp = got
        rep.pair(case, "%s forward vs fla chunk" % name, fwd, fl["chunk"])
        rep.pair(case, "%s forward vs fla recurrent" % name, fwd, fl["recurrent"])
        if "naive" in fl:
            rep.pair(case, "%s forward vs fla naive fp32 chunk" % name, fwd, fl["naive"])
        rep.pair(case, "%s step vs fla recurrent" % name, stp, fl["recurrent"])
        rep.pair(case, "%s step vs %s forward" % (name, name), stp, fwd)
    rep.say("  logits of %s: max |z| %.3f, std %.3f" % (label, np.abs(fl["chunk"]).max(), fl["chunk"].std()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=".interop/bin")
    ap.add_argument("--ours", default=".interop/ours")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/fla_interop"))
    ap.add_argument("--work", default="/tmp/fla_interop_work")
    ap.add_argument("--train_steps", type=int, default=150)
    ap.add_argument("--budget_s", type=float, default=130, help="stop fla's training run after this many seconds")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    rep = Report(args.out)
    import transformers
    import triton
    import fla
    layer_mod, MesaNetConfig, MesaNetForCausalLM, _, _ = fla_modules()
    from transformers import AutoModelForCausalLM
    rep.say("torch %s, triton %s, transformers %s, fla %s, device %s" % (
        torch.__version__, triton.__version__, transformers.__version__, fla.__version__,
        torch.cuda.get_device_name(0)))
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False   # fla's fp32 PyTorch parts in plain fp32
    torch.backends.cudnn.allow_tf32 = False
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "..", "README.md"), "rb").read()
    corpus = text + open(os.path.join(here, "..", "mesanet.h"), "rb").read()
    toks = text[:T_LEN]
    tokfile = os.path.join(args.work, "tokens.bin")
    open(tokfile, "wb").write(toks)
    ids = torch.tensor([list(toks)], device=dev)
    V = ARCH["vocab_size"]
    bins = [(n, os.path.join(args.bin, b)) for n, b in (("ours", "dump_logits"), ("ours-before", "dump_logits_before"))
            if os.path.exists(os.path.join(args.bin, b))]

    # transformers 5 reads _tied_weights_keys as a dict (tied name -> source); fla still declares a
    # list. Nothing is tied here (tie_word_embeddings is false), so the dict is empty.
    if isinstance(getattr(MesaNetForCausalLM, "_tied_weights_keys", None), (list, tuple)):
        MesaNetForCausalLM._tied_weights_keys = {}
    t_start = time.time()

    def fla_case(stage, model):
        """Direction 1: fla saves `model`; we load the folder."""
        d = os.path.join(args.work, "fla_" + stage)
        assert not model.config.tie_word_embeddings
        try:
            model.save_pretrained(d, safe_serialization=True)
        except Exception as e:  # noqa: BLE001 (then the same two files by hand)
            rep.say("  (save_pretrained failed: %s: %s; writing the two files directly)" % (type(e).__name__, e))
            from safetensors.torch import save_file
            os.makedirs(d, exist_ok=True)
            save_file({k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()},
                      os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
            model.config.save_pretrained(d)
        case = "fla-created, " + stage
        shutil.copy(os.path.join(d, "config.json"), os.path.join(args.out, "fla_%s_config.json" % stage))
        rep.say("\n== %s (%s)" % (case, d))
        rep.say("  config.json written by fla: " + json.dumps({k: v for k, v in json.load(open(
            os.path.join(d, "config.json"))).items() if k in ("intermediate_size", "hidden_ratio", "norm_eps",
                                                             "lambda_lower_bound", "tie_word_embeddings")}))
        fl = fla_logits(model, ids, rep)
        mine = []
        for name, b in bins:
            got = ours(b, d, tokfile, V, rep)
            if got is None and name == "ours-before":   # it predates fla's width rule: tell it the width
                ff = model.model.layers[0].mlp.intermediate_size
                got = ours(b, with_config(d, d + "_ff", intermediate_size=ff), tokfile, V, rep)
            mine.append((name, got))
        compare(rep, case, fl, mine, case)

    def ours_case(stage):
        """Direction 2: a build/train folder loaded by fla's from_pretrained."""
        src = os.path.join(args.ours, stage)
        if not os.path.isdir(src):
            rep.say("\n(no %s: skipped)" % src)
            return
        case = "written by build/train, " + stage
        rep.say("\n== %s (%s)" % (case, src))
        try:
            m2, info = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, output_loading_info=True)
        except TypeError:
            m2, info = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32, output_loading_info=True)
        rep.say("  fla loaded %s: missing %s, unexpected %s, mismatched %s" % (
            type(m2).__name__, info.get("missing_keys"), info.get("unexpected_keys"), info.get("mismatched_keys")))
        fl = fla_logits(m2.to(dev).float(), ids, rep)
        mine = [(name, ours(b, src, tokfile, V, rep)) for name, b in bins if name == "ours"]
        alt = with_config(src, os.path.join(args.work, "ours_%s_cgfla" % stage), mesanet_cg_fla=1)
        mine.append(("ours cg_fla=1", ours(os.path.join(args.bin, "dump_logits"), alt, tokfile, V, rep)))
        compare(rep, case, fl, mine, case)

    def guarded(what, fn, *a):
        try:
            fn(*a)
        except Exception:  # noqa: BLE001 (one failed case must not lose the others)
            import traceback
            rep.say("\n!! %s failed:\n%s" % (what, traceback.format_exc()))
        rep.dump()

    torch.manual_seed(0)
    cfg = MesaNetConfig(**ARCH)                  # intermediate_size None: fla's width rule (768 here)
    model = MesaNetForCausalLM(cfg).to(dev).float()
    guarded("direction 1 at init", fla_case, "init", model)
    guarded("direction 2 at init", ours_case, "init")
    guarded("direction 2 trained", ours_case, "trained")

    def train_fla():   # a short fla training run (AdamW on bytes of this repository), then direction 1
        if time.time() - t_start > args.budget_s:
            rep.say("\n(fla training skipped: %.0f s spent, budget %.0f s)" % (time.time() - t_start, args.budget_s))
            return
        data = torch.tensor(list(corpus), dtype=torch.long)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1)
        gen = torch.Generator().manual_seed(1)
        model.train()
        t0 = time.time()
        for it in range(args.train_steps):
            off = torch.randint(0, len(data) - 257, (16,), generator=gen)
            x = torch.stack([data[o:o + 257] for o in off.tolist()]).to(dev)
            logits = model(x[:, :-1], use_cache=False).logits
            loss = F.cross_entropy(logits.reshape(-1, V).float(), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for gr in opt.param_groups:
                gr["lr"] = 2e-3 * min(1.0, (it + 1) / 20)
            opt.step()
            if it in (0, args.train_steps - 1):
                rep.say("\n  fla training step %d: loss %.4f (%.1f s)" % (it + 1, loss.item(), time.time() - t0))
            if time.time() - t_start > args.budget_s:
                rep.say("  (stopped after %d steps: time budget)" % (it + 1))
                break
        fla_case("trained", model)
    guarded("direction 1 trained", train_fla)
    rep.say("\ndone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
