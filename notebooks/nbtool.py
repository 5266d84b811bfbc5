"""nbtool.py - executes the tutorials and checks them; converts between .ipynb and a plain-text form.

    python3 notebooks/nbtool.py check [NB.ipynb ...]    execute each notebook (default: every CPU one) and
                                                        fail if a cell raises or a saved output differs
    python3 notebooks/nbtool.py update NB.ipynb ...     execute and save the fresh outputs into the file
    python3 notebooks/nbtool.py update --plain NB.ipynb  the same without Jupyter (printed text only)
    python3 notebooks/nbtool.py topy NB.ipynb OUT.py    the cells as a percent-format script (for editing)
    python3 notebooks/nbtool.py frompy IN.py NB.ipynb   and back (outputs empty until `update`)

`make notebooks` runs `check`. What is compared: the text of every output (printed text, results'
text/plain, error text) of every cell not tagged "volatile"; for images only their number and kind, since
PNG bytes depend on the matplotlib build. In the text, numbers are compared as numbers: equal when they
agree to 1e-6 relative, or when both are below 1e-9 in magnitude (the rounding-level differences the
notebooks print, e.g. "max rel. difference 2.5e-15", move with any change to the order of a sum in the
header, and saying "at rounding level" is what such a line claims). A cell whose output varies from run
to run, or with every change to the header's arithmetic (timings, an excerpt of mesanet.h, the numbers of
a training run), carries the tag "volatile" in its metadata and says so in its text; its claims are
checked by the notebook's final assertions instead. A notebook whose metadata has "mesanet": {"needs": "gpu"}
runs only where `nvidia-smi` and build/train_cuda exist; elsewhere `check` skips it and says so.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

try:                 # Jupyter's packages; `update --plain` works without them
    import nbformat
    from nbclient import NotebookClient
except ImportError:
    nbformat = NotebookClient = None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def has_gpu():
    if not shutil.which("nvidia-smi") or not os.path.exists(os.path.join(ROOT, "build", "train_cuda")):
        return False
    return subprocess.call(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


def execute(nb, timeout=600):
    env_dir = HERE
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")   # ipykernel's debugger: no frozen-module notice
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):   # the notebooks' own `make` is not a sub-make of `make notebooks`
        os.environ.pop(k, None)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": env_dir}})
    client.execute()
    return nb


def _text(outputs):
    """The comparable content of a cell's outputs: text, and a placeholder per image."""
    out = []
    for o in outputs:
        if o["output_type"] == "stream":
            out.append(("stream", o["name"], o["text"]))
        elif o["output_type"] in ("execute_result", "display_data"):
            d = o.get("data", {})
            for kind in sorted(d):
                if kind.startswith("image/"):
                    out.append(("image", kind))
                elif kind in ("text/plain", "text/markdown", "text/html"):
                    t = d[kind] if isinstance(d[kind], str) else "".join(d[kind])
                    out.append((kind, t))
        elif o["output_type"] == "error":
            out.append(("error", o["ename"], o["evalue"]))
    # consecutive stream chunks of the same name are one text (the kernel splits them arbitrarily)
    merged = []
    for x in out:
        if merged and x[0] == "stream" and merged[-1][0] == "stream" and merged[-1][1] == x[1]:
            merged[-1] = ("stream", x[1], merged[-1][2] + x[2])
        else:
            merged.append(x)
    return merged


_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def same_text(a, b):
    """a and b equal up to numbers that agree to 1e-6 relative or are both below 1e-9 (see the top)."""
    if _NUM.sub("#", a) != _NUM.sub("#", b):
        return False
    for x, y in zip(_NUM.findall(a), _NUM.findall(b)):
        fx, fy = float(x), float(y)
        if not (abs(fx - fy) <= 1e-6 * max(abs(fx), abs(fy)) or max(abs(fx), abs(fy)) < 1e-9):
            return False
    return True


def same_outputs(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if len(x) != len(y) or x[:-1] != y[:-1] or (x[-1] != y[-1] and not same_text(x[-1], y[-1])):
            return False
    return True


def volatile(cell):
    return "volatile" in cell.get("metadata", {}).get("tags", [])


def check(path):
    saved = nbformat.read(path, as_version=4)
    needs = saved.metadata.get("mesanet", {}).get("needs")
    if needs == "gpu" and not has_gpu():
        print("SKIP  %s (needs a GPU and build/train_cuda; its saved outputs are an H200 recording)"
              % os.path.basename(path))
        return None
    fresh = nbformat.read(path, as_version=4)
    t0 = time.time()
    try:
        execute(fresh)
    except Exception as e:  # a failing cell or assertion: nbclient raises CellExecutionError
        msg = str(e).strip().splitlines()
        print("FAIL  %s: a cell failed:\n      %s" % (os.path.basename(path), "\n      ".join(msg[-12:])))
        return False
    bad = []
    for i, (a, b) in enumerate(zip(saved.cells, fresh.cells)):
        if a.cell_type != "code" or volatile(a):
            continue
        if not same_outputs(_text(a.outputs), _text(b.outputs)):
            bad.append(i)
    if bad:
        print("FAIL  %s: saved outputs differ from a fresh run in cell(s) %s" % (os.path.basename(path), bad))
        for i in bad[:3]:
            print("      cell %d saved: %r" % (i, _text(saved.cells[i].outputs))[:600])
            print("      cell %d fresh: %r" % (i, _text(fresh.cells[i].outputs))[:600])
        return False
    n = sum(1 for c in saved.cells if c.cell_type == "code")
    print("PASS  %s (%d code cells, %d volatile, %.0f s)"
          % (os.path.basename(path), n, sum(1 for c in saved.cells if c.cell_type == "code" and volatile(c)),
             time.time() - t0))
    return True


def update_plain(path):
    """Executes the code cells in this process, in order, and saves their printed text as outputs: for a
    machine without Jupyter (numpy alone), e.g. a GPU machine recording notebook 6. No rich outputs."""
    import contextlib
    import io
    with open(path) as f:
        nb = json.load(f)
    ns, count, cwd = {"__name__": "__main__"}, 0, os.getcwd()
    t0 = time.time()
    os.chdir(HERE)
    sys.path.insert(0, HERE)
    try:
        for c in nb["cells"]:
            if c["cell_type"] != "code":
                continue
            count += 1
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile("".join(c["source"]), "<cell %d>" % count, "exec"), ns)
            c["execution_count"] = count
            c["outputs"] = ([{"output_type": "stream", "name": "stdout", "text": buf.getvalue()}]
                            if buf.getvalue() else [])
    finally:
        os.chdir(cwd)
    with open(path, "w") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("updated %s without Jupyter (%.0f s)" % (path, time.time() - t0))


def update(path):
    nb = nbformat.read(path, as_version=4)
    t0 = time.time()
    execute(nb)
    nbformat.write(nb, path)
    print("updated %s (%.0f s)" % (path, time.time() - t0))


def topy(src, dst):
    nb = nbformat.read(src, as_version=4)
    parts = ["# notebook metadata: " + json.dumps(nb.metadata.get("mesanet", {}))]
    for c in nb.cells:
        tags = c.get("metadata", {}).get("tags", [])
        head = "# %%" + (" [markdown]" if c.cell_type == "markdown" else "")
        head += " volatile" if "volatile" in tags else ""
        body = c.source if c.cell_type == "code" else "\n".join("# " + l if l else "#" for l in c.source.split("\n"))
        parts.append(head + "\n" + body)
    with open(dst, "w") as f:
        f.write("\n\n".join(parts) + "\n")


def frompy(src, dst):
    text = open(src).read()
    meta = {}
    m = re.match(r"# notebook metadata: (.*)\n", text)
    if m:
        meta = json.loads(m.group(1))
        text = text[m.end():]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    if meta:
        nb.metadata["mesanet"] = meta
    for chunk in re.split(r"^(?=# %%)", text, flags=re.M):
        if not chunk.startswith("# %%"):
            continue
        head, _, body = chunk.partition("\n")
        body = body.strip("\n")
        if "[markdown]" in head:
            lines = [l[2:] if l.startswith("# ") else l[1:] if l.startswith("#") else l for l in body.split("\n")]
            cell = nbformat.v4.new_markdown_cell("\n".join(lines))
        else:
            cell = nbformat.v4.new_code_cell(body)
        if "volatile" in head:
            cell.metadata["tags"] = ["volatile"]
        nb.cells.append(cell)
    nbformat.write(nb, dst)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("check", "update", "topy", "frompy"):
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "topy" or cmd == "frompy":
        if len(args) != 2:
            print("usage: nbtool.py %s IN OUT" % cmd)
            return 2
        (topy if cmd == "topy" else frompy)(*args)
        return 0
    plain = "--plain" in args
    args = [a for a in args if a != "--plain"]
    paths = args or sorted(os.path.join(HERE, f) for f in os.listdir(HERE) if re.match(r"\d\d_.*\.ipynb$", f))
    if nbformat is None and not (cmd == "update" and plain):
        print("nbtool: python3 lacks nbformat/nbclient (Debian: python3-nbclient python3-nbformat python3-ipykernel)")
        return 2
    if cmd == "update":
        for p in paths:
            (update_plain if plain else update)(p)
        return 0
    res = [check(p) for p in paths]
    print("notebooks: %d passed, %d failed, %d skipped" % (res.count(True), res.count(False), res.count(None)))
    return 1 if False in res else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
