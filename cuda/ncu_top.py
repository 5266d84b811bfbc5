#!/usr/bin/env python3
"""ncu_top.py - where the GPU time goes, from an Nsight Compute CSV export.

    ncu --metrics gpu__time_duration.sum --csv [--launch-skip N --launch-count M] PROGRAM ARGS > prof.csv
    python3 cuda/ncu_top.py prof.csv [--top 25] [--title "synth cell, transformer"]

prints a markdown table: one row per kernel (the name without its template arguments and parameter list, so
that every instantiation of mn__k_rope counts as one), its launches, total and mean time, and its share of
the profiled total; the last row is the sum. Where mn__k_xent_fwd (the loss, once per training step) is in the
list, a line after the table gives the launches and kernel time per training step. ncu serialises the kernels
and runs them at its own clocks, so the shares are the figure to read, not the absolute times. Lines before the
CSV header (ncu's ==PROF== messages, the program's own output) are skipped. Standard library only (the GPU
machine and Debian's python3 both have it). `--selftest` checks the parser on a built-in sample and exits 0 or 1.
"""
import csv
import io
import sys

UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,   # to microseconds
         "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}                 # (newer ncu: the short names)


def short_name(name):
    """'void mn__k_rope<64>(float*, int)' -> 'mn__k_rope'; cuBLAS/CUTLASS names keep their first word."""
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    depth, out = 0, []
    for ch in n:                      # drop template arguments (nested <...>) and the parameter list
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip() or name


def parse(text):
    """rows of (kernel, microseconds) from ncu's CSV text; ValueError when there is no duration metric"""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\")")
    rows = []
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "")
        if unit not in UNITS:
            raise ValueError("unknown time unit %r" % unit)
        rows.append((short_name(r["Kernel Name"]), float(r["Metric Value"].replace(",", "")) * UNITS[unit]))
    if not rows:
        raise ValueError("no gpu__time_duration.sum rows")
    return rows


MARK = "mn__k_xent_fwd"   # the cross-entropy forward: one launch per training step


def table(rows, top=25, title=None):
    agg = {}
    for k, us in rows:
        n, t = agg.get(k, (0, 0.0))
        agg[k] = (n + 1, t + us)
    total = sum(t for _, t in agg.values())
    out = []
    if title:
        out.append("%s: %d kernel launches, %.1f us in all (ncu's clocks)\n" % (title, len(rows), total))
    out.append("| kernel | launches | total us | mean us | share |")
    out.append("|---|---|---|---|---|")
    ranked = sorted(agg.items(), key=lambda kv: -kv[1][1])
    for k, (n, t) in ranked[:top]:
        out.append("| `%s` | %d | %.1f | %.2f | %.1f %% |" % (k, n, t, t / n, 100.0 * t / total))
    if len(ranked) > top:
        n = sum(v[0] for _, v in ranked[top:])
        t = sum(v[1] for _, v in ranked[top:])
        out.append("| (%d other kernels) | %d | %.1f | %.2f | %.1f %% |" % (len(ranked) - top, n, t, t / n,
                                                                        100.0 * t / total))
    out.append("| all | %d | %.1f | %.2f | 100.0 %% |" % (len(rows), total, total / len(rows)))
    steps = agg.get(MARK, (0, 0.0))[0]
    if steps:   # a training loop's steps: the loss kernel runs once in each
        out.append("\nper training step (%d launches of %s in the list): %.0f launches, %.1f us of kernels" %
                   (steps, MARK, len(rows) / steps, total / steps))
    return "\n".join(out)


HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
          "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]


def sample_row(i, kernel, unit, value):
    f = [str(i), "1", "synth", "h", kernel, "1", "7", "(64, 1, 1)", "(8, 4, 1)", "0", "9.0",
         "Command line profiler metrics", "gpu__time_duration.sum", unit, value]
    return ",".join('"%s"' % x for x in f)


SAMPLE = "\n".join(["==PROF== Connected to process 123", "some program output", ",".join('"%s"' % h for h in HEADER),
                    sample_row(0, "void mn__k_rope<64>(float*, const float*, int)", "usecond", "282.50"),
                    sample_row(1, "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32(Params)", "nsecond",
                               "1,500"),
                    sample_row(2, "void mn__k_rope<128>(float*, const float*, int)", "usecond", "17.50")]) + "\n"


def selftest():
    rows = parse(SAMPLE)
    ok = rows == [("mn__k_rope", 282.5), ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 1.5),
                  ("mn__k_rope", 17.5)]
    t = table(rows, top=1)
    ok = ok and "| `mn__k_rope` | 2 | 300.0 | 150.00 | 99.5 % |" in t and "| (1 other kernels) | 1 | 1.5 |" in t
    ok = ok and "| all | 3 | 301.5 |" in t
    ok = ok and "per training step" not in t
    t = table([("mn__k_xent_fwd", 2.0), ("a", 1.0), ("mn__k_xent_fwd", 2.0), ("a", 3.0)])
    ok = ok and "per training step (2 launches of mn__k_xent_fwd in the list): 2 launches, 4.0 us of kernels" in t
    try:
        parse("no header here\n")
        ok = False
    except ValueError:
        pass
    print("ncu_top selftest: %s" % ("passed" if ok else "FAILED\n" + t))
    return 0 if ok else 1


def main(argv):
    if "--selftest" in argv:
        return selftest()
    args, top, title, i = [], 25, None, 0
    while i < len(argv):
        if argv[i] == "--top" and i + 1 < len(argv):
            top = int(argv[i + 1]); i += 2
        elif argv[i] == "--title" and i + 1 < len(argv):
            title = argv[i + 1]; i += 2
        else:
            args.append(argv[i]); i += 1
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8", errors="replace") as f:
            rows = parse(f.read())
    except (OSError, ValueError) as e:
        print("ncu_top: %s: %s" % (args[0], e), file=sys.stderr)
        return 1
    print(table(rows, top, title))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
