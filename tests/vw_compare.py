"""onlinepgs's VW reader against VW's own parser (the `vowpalwabbit` package), file by
file: the same rows, labels, importance weights, and in each row the same namespace
letters, columns (2**bits) and values. Used by tests/test_vw_compat.py; for a summary
over folders of VW files (for instance VW's own test/train-sets and test/test-sets)::

    python tests/vw_compare.py FOLDER [FOLDER ...] [--bits B] [--hash-seed S]

VW's side is its text parser on each line as its file reader cuts them: the lines of
the (decompressed) file, a UTF-8 byte order mark at a line's start and one '\\r' before
its '\\n' dropped, empty lines not examples. A file is taken when it is simple-label VW
text: a line with a '|', and on every line a label section of at most three numbers
(once VW's tag is set aside: the last word, when it starts with "'" or touches the bar).
"""
import gzip
import math
import os
import re
import sys

import numpy as np

NUM = re.compile(rb"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
BOM = b"\xef\xbb\xbf"
# what a file's result may be: read as VW reads it (labelled, or unlabelled: rows to
# predict), refused at a line where VW warns too (it reads a part of the line), or not
SAME = ("same", "same-unlabelled")
REFUSED_AS_VW_WARNS = "refused-where-vw-warns"


def file_bytes(path):
    data = open(path, "rb").read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def vw_lines(data):
    """(line number, line) of what VW's file reader makes examples of."""
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.startswith(BOM):
            line = line[3:]
        if line.endswith(b"\r"):
            line = line[:-1]
        if line:
            yield number, line


def label_words(line):
    """The words of a line's label section that VW gives its label parser."""
    head = line.split(b"|", 1)[0]
    if b"\t" in head:
        head = head.split(b"\t", 1)[1]
    words = [w for w in head.split(b" ") if w]
    if words and (not head.endswith(b" ") or words[-1].startswith(b"'")):
        words.pop()  # the tag
    return words


def simple_label_file(path, limit=4000):
    """Whether the file is simple-label VW text (see the module docstring)."""
    try:
        data = file_bytes(path)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    lines = [line for _, line in vw_lines(data)][:limit]
    if not any(b"|" in line for line in lines):
        return False
    return all(len(words) <= 3 and all(NUM.match(w) for w in words)
               for words in map(label_words, lines))


def vw_rows(path, bits=18, hash_seed=0):
    """Per example: (line, label, weight, initial, features, warned): features the
    sorted (letter, column, value) of its namespaces (not VW's constant), warned
    whether VW logged a warning while parsing it."""
    import vowpalwabbit
    from vowpalwabbit.pyvw import Example

    vw = vowpalwabbit.Workspace(f"-b {bits} --hash_seed {hash_seed} --no_stdin",
                                enable_logging=True)
    mask = (1 << bits) - 1
    out = []
    for number, line in vw_lines(file_bytes(path)):
        logged = len(vw.get_log())
        ex, = (Example(vw, raw) for raw in vw._parse(line))  # as read, not stripped
        ex.setup_done = True
        feats = []
        for i in range(ex.num_namespaces()):
            ns = ex.namespace(i)
            if ns == 128:  # VW's constant feature
                continue
            for j in range(ex.num_features_in(i)):
                v = ex.feature_weight(i, j)
                if v != 0:
                    feats.append((ns, ex.feature(i, j) & mask, v))
        label = ex.get_simplelabel_label()
        out.append((number, math.nan if label > 3e38 else label, ex.get_simplelabel_weight(),
                    ex.get_simplelabel_initial(), sorted(feats),
                    len(vw.get_log()) > logged))
        vw.finish_example(ex)
    vw.finish()
    return out


def our_rows(path, bits=18, hash_seed=0, **options):
    """Per row: (label, weight, features) as our reader reads the file, features from
    its raw hashes (before signing and interactions)."""
    from onlinepgs.formats.vw import iter_vw
    mask = (1 << bits) - 1
    reader = iter_vw(path, n_bits=bits, hash_seed=hash_seed, chunk_rows=None, **options)
    parser = reader._parser
    rows = []

    def take():
        ns, hashes, values, indptr, labels, weights, _ = parser.take_chunk()
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


def _close(a, b):
    # VW's numbers are float32 read its own way (not always correctly rounded)
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6 * max(1.0, abs(b))


def compare(path, bits=18, hash_seed=0):
    """(kind, detail): kind one of SAME, REFUSED_AS_VW_WARNS, "refused" (at a line VW
    reads without a warning), "rows", "label", "weight", "initial", "features" (the
    first row that differs) or "vw-error"."""
    from onlinepgs.formats.vw import VWError
    try:
        want = vw_rows(path, bits, hash_seed)
    except Exception as e:  # noqa: BLE001 (a file VW's parser cannot take)
        return "vw-error", str(e)[:100]
    try:
        got = our_rows(path, bits, hash_seed)
    except VWError as e:
        line = next((w for w in want if w[0] == e.line), None)
        if line is not None and line[5]:
            return REFUSED_AS_VW_WARNS, str(e)[:160]
        return "refused", str(e)[:160]
    if len(got) != len(want):
        return "rows", f"{len(got)} vs {len(want)}"
    for (gl, gw, gf), (number, wl, ww, wi, wf, _) in zip(got, want):
        if not _close(gl, wl):
            return "label", f"line {number}: {gl} vs {wl}"
        if not _close(gw, ww):
            return "weight", f"line {number}: {gw} vs {ww}"
        if wi != 0:
            return "initial", f"line {number}: VW's initial prediction {wi} read"
        if [f[:2] for f in gf] != [f[:2] for f in wf] or not all(
                _close(g[2], w[2]) for g, w in zip(gf, wf)):
            return "features", f"line {number}: ours {gf[:4]} vs VW's {wf[:4]}"
    unlabelled = all(math.isnan(w[1]) for w in want)
    return ("same-unlabelled" if unlabelled else "same"), ""


def compare_folders(folders, bits=18, hash_seed=0):
    """{kind: [(path, detail)]} over the simple-label files of the folders."""
    results = {}
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and simple_label_file(path):
                kind, why = compare(path, bits, hash_seed)
                results.setdefault(kind, []).append((path, why))
    return results


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--bits", type=int, default=18)
    parser.add_argument("--hash-seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = compare_folders(args.folders, args.bits, args.hash_seed)
    print(f"{sum(map(len, results.values()))} simple-label files")
    for kind, items in sorted(results.items()):
        print(f"{kind}: {len(items)}")
        if kind not in SAME:
            for path, why in items:
                print(f"   {path}: {why}")
    return 0 if set(results) <= set(SAME) | {REFUSED_AS_VW_WARNS} else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
