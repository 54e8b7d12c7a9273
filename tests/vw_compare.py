"""onlinepgs's VW reader against VW's own parser (the `vowpalwabbit` package), file by
file: the same rows, labels, importance weights, and in each row the same namespace
letters, the same columns (2**18) and values. Used by tests/test_vw_compat.py; run
``python tests/vw_compare.py DIRECTORY`` for a summary over a folder of VW files (for
instance VW's own test/train-sets)."""
import math
import os
import re
import sys

import numpy as np

NUM = re.compile(rb"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def simple_label_file(path, limit=200_000):
    """Whether every line with content is a simple-label VW line: '|' present, the
    label section 0-3 numbers plus optional 'tag."""
    try:
        data = open(path, "rb").read(limit)
    except OSError:
        return False
    if path.endswith(".gz"):
        return False
    lines = [l for l in data.split(b"\n") if l.strip()]
    if not lines:
        return False
    for l in lines[:2000]:
        if b"|" not in l:
            return False
        head = l.split(b"|", 1)[0].split()
        toks = [t for t in head if not t.startswith(b"'")]
        if len(toks) > 3 or not all(NUM.match(t) for t in toks):
            return False
    return True


def vw_rows(path, bits=18):
    import vowpalwabbit
    vw = vowpalwabbit.Workspace(f"--quiet -b {bits}", enable_logging=True)
    mask = (1 << bits) - 1
    out = []
    for raw in open(path, "rb").read().split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r")
        if not line.strip():
            continue
        ex = vw.parse(line)
        label = ex.get_simplelabel_label()
        label = math.nan if label > 3e38 else label
        feats = []
        for i in range(ex.num_namespaces()):
            ns = ex.namespace(i)
            if ns == 128:
                continue
            for j in range(ex.num_features_in(i)):
                v = ex.feature_weight(i, j)
                if v != 0:
                    feats.append((ns, ex.feature(i, j) & mask, v))
        out.append((label, ex.get_simplelabel_weight(), ex.get_simplelabel_initial(),
                    sorted(feats)))
        vw.finish_example(ex)
    vw.finish()
    return out


def our_rows(path, bits=18, **options):
    from onlinepgs.formats.vw import iter_vw
    mask = (1 << bits) - 1
    reader = iter_vw(path, n_bits=bits, chunk_rows=None, **options)
    # the raw namespaced rows: the parser's chunk before hashing into columns
    parser = reader._parser
    rows = []

    def take():
        ns, hashes, values, indptr, labels, weights, names = parser.take_chunk()
        for r in range(len(labels)):
            a, b = indptr[r], indptr[r + 1]
            feats = sorted((int(ns[k]), int(hashes[k]) & mask, float(values[k]))
                           for k in range(a, b) if values[k] != 0)
            rows.append((float(labels[r]), 1.0 if weights is None else float(weights[r]),
                         feats))
        return None
    reader._take = take
    for _ in reader:
        pass
    return rows


def compare(path, bits=18):
    try:
        want = vw_rows(path, bits)
    except Exception as e:
        return "vw-error", str(e)[:100]
    try:
        got = our_rows(path, bits)
    except Exception as e:
        return "refused", str(e)[:160]
    if len(got) != len(want):
        return "rows", f"{len(got)} vs {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        gl, gw, gf = g
        wl, ww, wi, wf = w
        same_label = (math.isnan(gl) and math.isnan(wl)) or abs(gl - wl) <= 1e-6 * max(1, abs(wl))
        if not same_label:
            return "label", f"row {i}: {gl} vs {wl}"
        if abs(gw - ww) > 1e-6 * max(1, abs(ww)):
            return "weight", f"row {i}: {gw} vs {ww}"
        # VW's values are float32 (parsed its own way, not always correctly rounded):
        # the same letters and columns, values within float32's precision
        gfs, wfs = sorted(gf), sorted(wf)
        if [(n, h) for n, h, _ in gfs] != [(n, h) for n, h, _ in wfs] or not np.allclose(
                [v for *_, v in gfs], [v for *_, v in wfs], rtol=1e-6, atol=0):
            return "features", f"row {i}: ours {gf[:4]} vs vw {wf[:4]}"
    unlabelled = all(math.isnan(w[0]) for w in want)
    return ("same-unlabelled" if unlabelled else "same"), ""


if __name__ == "__main__":
    folder = sys.argv[1]
    results = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not simple_label_file(path):
            continue
        kind, why = compare(path)
        results.setdefault(kind, []).append((name, why))
    for kind, items in sorted(results.items()):
        print(f"{kind}: {len(items)}")
        if kind not in ("same", "same-unlabelled"):
            for name, why in items:
                print(f"   {name}: {why}")
