"""Pins of the PGS core: today's bits over a grid of configurations.

Before the core (``onlinepgs/_core/_pgs.pyx``, ``_pgs.pxd``, ``onlinepgs/pgs.py``) is
reshaped (issue 51), this suite records what it computes, bit for bit, so that the
reshaped core can show the same bits. Each configuration trains on small deterministic
data and is pinned by sha256 digests (their first 16 hex digits) of

* ``coef_`` and ``intercept_``;
* ``decision_function`` (a regressor's ``predict``) and ``predict`` on held-out rows
  (sparse rows: scipy's loop, not BLAS, whose kernels differ from one CPU to another);
* ``online_stats_`` (the pass's progressive loss, mistakes, regret bound, ...);
* the saved model file: its arrays (the solver state) and its header (the state's
  scalars, the fitted attributes), less the package's version and the checksum; and the
  file saved without the state (the weights only);
* between ``partial_fit`` calls, the scores of one held-out row after each call, read
  from the solver state at the row's coordinates (``PGSState.scores``).

A resumed run (saved and loaded after its second call) is pinned with the parts in which
it differs from the same calls uninterrupted: none, but for l1 on a ball at p = 2, whose
heaps are rebuilt on loading (today's behaviour, pinned as it is).

A configuration the package refuses, or that diverges, is pinned by the class name of
the error (squared losses on R^n at sigma = 0.01 diverge, as docs say they may: the pins
keep where the guards stop them); so is a part that raises (a model that went past the
double range unnoticed cannot be saved).

The grid:

* the full product of the core's own axes, p x l1 x domain x iterate x width (the width:
  40 columns, or the same 40 features spread over 512 or 4,096, where the core keeps a
  list of the coordinates reached), on a binary logistic problem; and a few edges
  (`EDGES`);
* a covering design over every axis (p, l1, domain, iterate, batch size, sigma, the
  problem: binary losses, one-vs-rest, multinomial, Crammer-Singer, regression losses;
  forgetting, sample and class weights, dense or CSR input of 32- or 64-bit indices,
  the width, the calls: ``fit``, ``partial_fit`` in chunks (of growing width), or
  ``partial_fit`` resumed after ``save_model`` / ``load_model``; the intercept; the
  restarts of the averages' running sums): configurations added until every pair of
  values an accepted configuration may hold occurs in a trained one, then (marked
  slow) until every triple does (the core chooses its kernels from several options at
  once: l1 at p = 2 on dense rows is one, which no pair of values pins down);
* covering designs alike over `onlinepgs.dask`'s axes (its lanes run the pass against a
  reference state);
* the command (``onlinepgs train``) on 600 rows of the shipped a9a file, trained whole
  and resumed from a checkpoint.

p = 1.8 is there beside the issue's 2, 1.5 and 1.01 for its mirror map: |x|^(q-1) with
q - 1 = 5/4 takes square roots, 1.5 an integer power, 1.01 exp2 and log2. Forgetting
0.5 decays the past below 2^-200 within the run (the rescaling of the state). The
restarts (``cum_4``) shrink the core's CUM_RANGE to 4 (`onlinepgs._core._pgs.
_set_cum_range`), so that the averages' running sums restart every few steps, as they do
after about 80,000 steps by default.

The data are dyadic rationals of few bits (multiples of 1/16), so that every sum that
makes them (labels, targets) is exact in any order, and their generator is integer
arithmetic (splitmix64), not NumPy's random streams; their digest is pinned too.

The bits are those of this image on an x86-64 CPU with FMA. The core is built without
-march or -ffast-math and has no FMA instruction; its packed square roots (one clone for
AVX-512, AVX2 and the baseline each) give the same bits in every clone (the pins hold
under valgrind, whose CPU has no AVX-512), and neither the hash seed, OpenBLAS's threads
nor NumPy's CPU dispatch moves them. But exp, log and pow come from glibc's libm, which
picks its FMA variants where the CPU has FMA: with those masked
(``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX2,-FMA``) some pins differ (42 of 823).

The pins live in ``tests/states/core_pins.json``. After a change that is MEANT to alter
the bits (never to make a failure go away), regenerate them deliberately and say so in
the commit::

    python tests/test_core_pins.py --regenerate

``python tests/test_core_pins.py --check`` compares without pytest and lists every
configuration that differs, with the parts that differ.
"""
import argparse
import contextlib
import gzip
import hashlib
import io
import itertools
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor, load_model, save_model

PINS = Path(__file__).resolve().parent / "states" / "core_pins.json"

# ---- the axes -----------------------------------------------------------------------------
SIGMA = 1e-2       # the fixed sigma
L1 = 3e-3          # zeroes 8 of the 40 weights (of the 12 features without signal)
# the fixed ball of each p: about 2/3 of the l_p norm of the weights on R^n, so that it binds
RADIUS = {2.0: 4.0, 1.8: 3.5, 1.5: 2.0, 1.01: 0.15}
EPOCHS = 2         # of fit (shuffled, random_state=0)
# the partial_fit calls' rows (resume: saved and loaded after the second call); the first
# is shorter than a batch of 8 (no step: the model read out at t = 0), the others no
# multiples of 8
CHUNK_EDGES = (0, 5, 53, 120, 181, 240)
CHUNKS = len(CHUNK_EDGES) - 1
PROBLEMS = ("binary-logistic", "binary-hinge", "binary-squared_hinge", "binary-smooth_hinge",
            "ovr-logistic", "ovr-squared_hinge", "multinomial", "crammer_singer",
            "regression-squared", "regression-huber", "regression-absolute",
            "regression-epsilon_insensitive")
AXES = {
    "p": (2.0, 1.8, 1.5, 1.01),
    "l1": (0.0, L1),
    "radius": (None, "auto", "fixed"),
    "iterate": ("last", "average", "weighted", "weighted2", "random"),
    "width": ("narrow", "mid", "wide"),
    "batch": (1, 8),
    "sigma": (SIGMA, "auto"),
    "problem": PROBLEMS,
    "forget": (1.0, 0.98, 0.5),
    "weights": ("none", "sample", "class", "balanced"),
    "input": ("csr32", "csr64", "dense"),
    "calls": ("fit", "partial", "resume"),
    "intercept": (1.0, 0.0, 3.0),  # intercept_scaling; 0: fit_intercept=False
    "cum_range": (None, 4.0),      # None: the core's own (2^20)
}
CORE_AXES = ("p", "l1", "radius", "iterate", "width")
DEFAULTS = {"batch": 1, "sigma": SIGMA, "problem": "binary-logistic", "forget": 1.0,
            "weights": "none", "input": "csr32", "calls": "fit", "intercept": 1.0,
            "cum_range": None}
# onlinepgs.dask: no l1, forgetting, class weights or coupled multiclass losses
DASK_AXES = {
    "p": AXES["p"],
    "radius": AXES["radius"],
    "iterate": AXES["iterate"],
    "batch": AXES["batch"],
    "sigma": AXES["sigma"],
    "problem": ("binary-logistic", "binary-hinge", "ovr-logistic", "regression-squared",
                "regression-huber"),
    "weights": ("none", "sample"),
    "input": ("csr32", "dense"),
    "lanes": (1, 2, 3),
    "calls": ("fit", "partial"),
}


def _radius_id(c):
    return f"{RADIUS[c['p']]:g}" if c["radius"] == "fixed" else str(c["radius"]).lower()


def config_id(c):
    """The configuration in words, e.g. p1.5-l1_0-R_auto-weighted2-wide-k8-s_auto-
    ovr-logistic-f0.98-w_balanced-dense-resume-icpt3-cum_4."""
    sigma = "auto" if c["sigma"] == "auto" else f"{c['sigma']:g}"
    cum = "2^20" if c["cum_range"] is None else f"{c['cum_range']:g}"
    return (f"p{c['p']:g}-l1_{c['l1']:g}-R_{_radius_id(c)}-{c['iterate']}-{c['width']}"
            f"-k{c['batch']}-s_{sigma}-{c['problem']}-f{c['forget']:g}-w_{c['weights']}"
            f"-{c['input']}-{c['calls']}-icpt{c['intercept']:g}-cum_{cum}")


def dask_id(c):
    sigma = "auto" if c["sigma"] == "auto" else f"{c['sigma']:g}"
    return (f"dask-lanes{c['lanes']}-p{c['p']:g}-R_{_radius_id(c)}-{c['iterate']}"
            f"-k{c['batch']}-s_{sigma}-{c['problem']}-w_{c['weights']}-{c['input']}"
            f"-{c['calls']}")


def refused(c):
    """Whether today's rules refuse (or cannot apply) the configuration, judged on the
    axes it assigns: l1 keeps only the last iterate at p < 2 and with forgetting, has no
    random iterate, no forgetting at p < 2; a regressor has no class weights
    (docs/design/l1.md, PGSClassifier's l1). Written out here, not asked of the package:
    the grid does not move when the package's rules do, and what the package does with
    each configuration is pinned."""
    get = c.get
    regression = str(get("problem", "")).startswith("regression")
    if regression and get("weights") in ("class", "balanced"):
        return True
    if not get("l1"):
        return False
    p, iterate, forget = get("p"), get("iterate"), get("forget")
    return (iterate == "random"
            or (p is not None and p != 2.0 and iterate not in (None, "last"))
            or (p is not None and p != 2.0 and forget is not None and forget < 1.0)
            or (forget is not None and forget < 1.0 and iterate not in (None, "last")))


# ---- covering designs ---------------------------------------------------------------------
def _completable(axes, partial):
    """Whether some configuration that `refused` accepts assigns `partial`'s values."""
    if refused(partial):
        return False
    for axis, levels in axes.items():
        if axis not in partial:
            return any(_completable(axes, {**partial, axis: v}) for v in levels)
    return True


def _tuples(axes, c, strength):
    """The `strength`-tuples of (axis, level) of a configuration, as index tuples."""
    idx = [(i, axes[a].index(c[a])) for i, a in enumerate(axes)]
    return set(itertools.combinations(idx, strength))


def _feasible_tuples(axes, strength):
    """Every `strength`-tuple of values that a configuration `refused` accepts may hold."""
    names, out = list(axes), set()
    for combo in itertools.combinations(range(len(names)), strength):
        for levels in itertools.product(*(range(len(axes[names[i]])) for i in combo)):
            if _completable(axes, {names[i]: axes[names[i]][lv] for i, lv in zip(combo, levels)}):
                out.add(tuple(zip(combo, levels)))
    return out


def covering(axes, strength, given=()):
    """Configurations that `refused` accepts, added to `given` until every
    `strength`-tuple of values such a configuration may hold occurs in one (greedy and
    deterministic: each starts from the first tuple not yet covered and takes, axis by
    axis, the first value that covers most new tuples). Returns the added ones."""
    names = list(axes)
    uncovered, rows = _feasible_tuples(axes, strength), []
    for row in given:
        uncovered -= _tuples(axes, row, strength)
    while uncovered:
        row = {names[i]: axes[names[i]][lv] for i, lv in min(uncovered)}
        for a, axis in enumerate(names):
            if axis in row:
                continue
            assigned = [(b, axes[other].index(row[other]))
                        for b, other in enumerate(names) if other in row]
            best, best_gain = None, -1
            for lv, v in enumerate(axes[axis]):
                if not _completable(axes, {**row, axis: v}):
                    continue
                gain = sum(tuple(sorted(sub + ((a, lv),))) in uncovered
                           for sub in itertools.combinations(assigned, strength - 1))
                if gain > best_gain:
                    best, best_gain = v, gain
            row[axis] = best
        row = {axis: row[axis] for axis in names}
        rows.append(row)
        uncovered -= _tuples(axes, row, strength)
    return rows


def _designs(axes, first=()):
    """{id: configuration} and the ids of the slow part: `first`, then configurations
    until every pair of values occurs, then (slow) until every triple does."""
    pairs = covering(axes, 2, first)
    triples = covering(axes, 3, list(first) + pairs)
    name = config_id if axes is AXES else dask_id
    out, slow = {}, set()
    for c in list(first) + pairs + triples:
        cid = name(c)
        if cid not in out:
            out[cid] = {axis: c[axis] for axis in axes}
            if any(c is t for t in triples):
                slow.add(cid)
    return out, slow


# configurations of interest the designs need not hold: the squared loss gone past 1e200
# on R^n without a divergence error (its progressive loss NaN: it cannot be saved)
EDGES = [{**DEFAULTS, "p": 1.8, "l1": 0.0, "radius": None, "iterate": "weighted",
          "width": "narrow", "problem": "regression-squared", "weights": "sample"}]


def grid():
    """The core's product and the edges, then the covering designs: ({id: configuration},
    slow ids)."""
    core = [{**DEFAULTS, **dict(zip(CORE_AXES, values))}
            for values in itertools.product(*(AXES[a] for a in CORE_AXES))]
    return _designs(AXES, core + EDGES)


def dask_grid():
    return _designs(DASK_AXES)


# ---- the data: dyadic rationals from integer arithmetic ----------------------------------
N_TRAIN, N_HELD, N_FEATURES, N_CLASSES = 240, 60, 40, 3
NOISE_FEATURES = 12  # the last ones carry no signal (l1 zeroes them)
# the width: 40 columns (every coordinate reached at once), or feature j in column
# (101 j + 7) mod 512 or 4096, where the core keeps a list of the coordinates reached for
# its sweeps: 4,096 keep it throughout, 512 drop it once its budget of updates is spent
WIDTHS = {"narrow": N_FEATURES, "mid": 512, "wide": 4096}


def _bits(key, n):
    """n 64-bit words of splitmix64 at (key, 0..n-1)."""
    with np.errstate(over="ignore"):
        z = (np.uint64(key) << np.uint64(32)) + np.arange(n, dtype=np.uint64)
        z = z * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _ints(key, n, low, high):
    """n integers in [low, high) (the top bits of splitmix64; high - low small)."""
    return low + ((_bits(key, n) >> np.uint64(40)) % np.uint64(high - low)).astype(np.int64)


def _rows(key, n):
    """n rows of N_FEATURES columns: about 5-40% filled (columns 24-27 and 36-39 a tenth
    as often: rare features, untouched for many steps), values multiples of 1/16 in
    [-2, 2] (columns 0-3 scaled by 4, 28-35 by 1/4), row 7 empty."""
    fill = _ints(key, n, 2, 16)[:, None]
    rare = np.ones(N_FEATURES, dtype=np.int64)
    rare[24:28] = rare[36:] = 10
    mask = _ints(key + 1, n * N_FEATURES, 0, 40).reshape(n, N_FEATURES) * rare < fill
    vals = _ints(key + 2, n * N_FEATURES, -32, 33).reshape(n, N_FEATURES) / 16.0
    vals[:, :4] *= 4.0
    vals[:, 28:36] /= 4.0
    dense = np.where(mask & (vals != 0.0), vals, 0.0)
    dense[7] = 0.0
    return dense


def _exact_scores(dense, W):
    """dense @ W term by term in a fixed order (exact anyway: dyadic values of few bits)."""
    out = np.zeros((dense.shape[0], W.shape[1]))
    for j in range(dense.shape[1]):
        out += dense[:, j:j + 1] * W[j]
    return out


def make_data():
    """Training and held-out rows, the three kinds of targets, weights (pure functions of
    the constants above)."""
    W = _ints(90, N_FEATURES * N_CLASSES, -8, 9).reshape(N_FEATURES, N_CLASSES) / 8.0
    W[N_FEATURES - NOISE_FEATURES:] = 0.0
    data = {}
    for part, key, n in (("train", 10, N_TRAIN), ("held", 20, N_HELD)):
        dense = _rows(key, n)
        noise = _ints(key + 3, n * N_CLASSES, -8, 9).reshape(n, N_CLASSES) / 16.0
        scores = _exact_scores(dense, W) + noise
        data[part] = {
            "dense": dense,
            "binary": np.where(scores[:, 0] >= 0.0, 1, -1),
            "multi": np.argmax(scores, axis=1),
            "regression": scores[:, 0],
        }
    # 0, 1/2, 1, 2 and 3 (a row of weight 0 among them)
    data["sample_weight"] = np.array([0.0, 0.5, 1.0, 2.0, 3.0])[_ints(30, N_TRAIN, 0, 5)]
    return data


DATA = make_data()


def data_digest():
    parts = [DATA[part][key] for part in ("train", "held")
             for key in ("dense", "binary", "multi", "regression")]
    return _digest(*parts, DATA["sample_weight"])


def _matrix(part, kind, width="narrow"):
    """The rows of `part` as `kind` ("dense", "csr32", "csr64"), `width` columns wide."""
    dense = DATA[part]["dense"]
    if width != "narrow":
        spread = np.zeros((dense.shape[0], WIDTHS[width]))
        spread[:, (101 * np.arange(N_FEATURES) + 7) % WIDTHS[width]] = dense
        dense = spread
    if kind == "dense":
        return np.array(dense)
    return _as_kind(sp.csr_matrix(dense), kind)


def _as_kind(X, kind):
    """A CSR matrix with the indices of `kind` (scipy's slices make them 32-bit)."""
    if kind == "csr64":
        X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    return X


# ---- digests ------------------------------------------------------------------------------
def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _digest_json(value):
    """Of a JSON-like value (arrays by their dtype, shape and values; float reprs are
    exact)."""
    def canonical(o):
        if isinstance(o, np.ndarray):
            return [o.dtype.str, list(o.shape), o.tolist()]
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(type(o))

    text = json.dumps(value, sort_keys=True, default=canonical)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _file_digest(path):
    """The model file's arrays (name, dtype, shape, bytes) and header, less the version
    of the package that wrote it and the checksum (of both)."""
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("header.json"))
        header.pop("onlinepgs_version", None)
        header.pop("checksum", None)
        arrays = []
        for name in sorted(z.namelist()):
            if name.endswith(".npy"):
                arrays.append(np.frombuffer(name.encode(), dtype=np.uint8))
                arrays.append(np.load(io.BytesIO(z.read(name)), allow_pickle=False))
    return _digest(np.frombuffer(json.dumps(header, sort_keys=True).encode(), np.uint8),
                   *arrays)


# ---- one configuration --------------------------------------------------------------------
def _estimator(c):
    """(the estimator, its target's kind, its classes) of a configuration."""
    kind, _, loss = c["problem"].partition("-")
    radius = RADIUS[c["p"]] if c["radius"] == "fixed" else c["radius"]
    common = dict(p=c["p"], sigma=c["sigma"], l1=c.get("l1", 0.0), radius=radius,
                  batch_size=c["batch"], iterate=c["iterate"], forget=c.get("forget", 1.0),
                  fit_intercept=c.get("intercept", 1.0) != 0.0,
                  intercept_scaling=c.get("intercept", 1.0) or 1.0, max_epochs=EPOCHS,
                  shuffle=True, random_state=0)
    if kind == "regression":
        return PGSRegressor(loss=loss, **common), "regression", None
    if kind in ("multinomial", "crammer_singer"):
        loss = "logistic" if kind == "multinomial" else "hinge"
        clf = PGSClassifier(loss=loss, multi_class=kind, **common)
        target = "multi"
    else:
        clf = PGSClassifier(loss=loss, **common)
        target = "multi" if kind == "ovr" else "binary"
    weights = c["weights"]
    if weights == "class":
        clf.set_params(class_weight={-1: 2.0, 1: 0.5} if target == "binary"
                       else {0: 2.0, 2: 0.5})
    elif weights == "balanced":
        clf.set_params(class_weight="balanced")
    return clf, target, np.unique(DATA["train"][target])


@contextlib.contextmanager
def _cum_range(value):
    """The core's CUM_RANGE set to `value` (None: left as it is) for the block."""
    if value is None:
        yield
        return
    from onlinepgs._core._pgs import _set_cum_range

    old = _set_cum_range(value)
    try:
        yield
    finally:
        _set_cum_range(old)


def _scores(est, X):
    """decision_function (a regressor's: predict)."""
    return getattr(est, "decision_function", est.predict)(X)


def _chunks():
    return list(zip(CHUNK_EDGES[:-1], CHUNK_EDGES[1:]))


def _partial(est, X, kind, y, sw, classes, chunks, between_rows, between):
    """partial_fit over the chunks (a sparse chunk only as wide as its own columns: the
    state widens as they come); after each, the scores of one held-out row."""
    for (a, b), row in zip(chunks, between_rows):
        Xc = X[a:b]
        if sp.issparse(Xc):
            Xc = _as_kind(Xc[:, :Xc.indices.max() + 1 if Xc.nnz else 1], kind)
        est.partial_fit(Xc, y[a:b], sample_weight=None if sw is None else sw[a:b],
                        **({} if classes is None else {"classes": classes}))
        between.append(np.atleast_1d(_scores(est, row)))
    return est


def _outcome(est, held, between, tmp):
    """The digests of a trained estimator; a part that raises is pinned by the error's
    class (a run gone past the double range may not be saved, for one)."""
    def saved(**options):
        path = tmp / "model.pgs"
        save_model(est, path, **options)
        return _file_digest(path)

    parts = {
        "coef": lambda: _digest(est.coef_),
        "intercept": lambda: _digest(est.intercept_),
        "decision": lambda: _digest(_scores(est, held)),
        "predict": lambda: _digest(est.predict(held)),
        "stats": lambda: _digest_json(est.online_stats_),
        "saved": saved,
        "saved_weights": lambda: saved(state=False),
    }
    out = {"between": _digest(*between)} if between else {}
    for name, part in parts.items():
        try:
            out[name] = part()
        except Exception as exc:
            out[name] = f"error {type(exc).__name__}"
    return out


def train(c):
    """The digests of one configuration (or {"error": the class of the refusal or the
    divergence})."""
    width = c["width"]
    held = _matrix("held", "csr32", width)
    # the rows scored between calls: sparse, with the input's indices (dense rows are
    # scored by the model read out, through a dense product)
    between_held = _matrix("held", "csr64" if c["input"] == "csr64" else "csr32", width)
    between_rows = [_as_kind(between_held[i:i + 1], c["input"]) for i in range(CHUNKS)]
    X = _matrix("train", c["input"], width)
    sw = DATA["sample_weight"] if c["weights"] == "sample" else None
    with tempfile.TemporaryDirectory() as tmp, _cum_range(c["cum_range"]):
        tmp = Path(tmp)
        try:
            est, target, classes = _estimator(c)
            y = DATA["train"][target]
            between = []
            if c["calls"] == "fit":
                est.fit(X, y, sample_weight=sw)
            else:
                _partial(est, X, c["input"], y, sw, classes, _chunks(), between_rows, between)
        except Exception as exc:  # a refusal or a divergence: its class is the pin
            return {"error": type(exc).__name__}
        out = _outcome(est, held, between, tmp)
        if c["calls"] == "resume":
            # the same calls, the model saved and loaded after the second: pinned, with
            # the parts that differ from the uninterrupted run's (none is the package's
            # promise; l1 on a ball at p = 2 rebuilds its heaps' keys on loading: the
            # state's bits differ, and at times the model's last bits)
            est, target, classes = _estimator(c)
            between = []
            _partial(est, X, c["input"], y, sw, classes, _chunks()[:2], between_rows[:2],
                     between)
            save_model(est, tmp / "resume.pgs")
            est = load_model(tmp / "resume.pgs")
            _partial(est, X, c["input"], y, sw, classes, _chunks()[2:], between_rows[2:],
                     between)
            resumed = _outcome(est, held, between, tmp)
            out = {**resumed, "resume_differs_in": sorted(k for k in out
                                                          if resumed[k] != out[k])}
    return out


def train_dask(c):
    """The digests of one `onlinepgs.dask` configuration (2 passes, slices of 24 rows,
    blocks of 60 rows, the local threaded scheduler)."""
    import dask.array as da

    import onlinepgs.dask as opd

    held = _matrix("held", "csr32")
    X = _matrix("train", c["input"])
    sw = DATA["sample_weight"] if c["weights"] == "sample" else None
    est, target, classes = _estimator(c)
    y = DATA["train"][target]
    dX = da.from_array(X, chunks=(60, X.shape[1]), asarray=False)
    run = dict(sample_weight=None if sw is None else da.from_array(sw, chunks=60),
               passes=2, n_lanes=c["lanes"], slice_rows=24)
    if classes is not None:
        run["classes"] = classes
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if c["calls"] == "fit":
                opd.fit(est, dX, y, **run)
            else:
                half = N_TRAIN // 2
                for rows in (slice(0, half), slice(half, N_TRAIN)):
                    opd.partial_fit(est, dX[rows], y[rows],
                                    **{**run, "sample_weight": None if sw is None
                                       else da.from_array(sw[rows], chunks=60)})
        except Exception as exc:
            return {"error": type(exc).__name__}
        return _outcome(est, held, [], Path(tmp))


# ---- the command: trained whole, and resumed from a checkpoint ----------------------------
A9A_ROWS, A9A_BAD_LINE = 600, 401
COMMAND_CONFIGS = {
    "defaults": [],
    "p1.5-l1_1e-4-last": ["--p", "1.5", "--l1", "1e-4", "--iterate", "last"],
    "p1.01-R_none-random-k8": ["--p", "1.01", "--radius", "none", "--iterate", "random",
                               "--batch-size", "8", "--sigma", "1e-3"],
    "hinge-f0.99-balanced-R_2": ["--loss", "hinge", "--forget", "0.99", "--class-weight",
                                 "balanced", "--radius", "2", "--sigma", "1e-3"],
}


def _a9a_lines():
    from onlinepgs.datasets import a9a_path

    with gzip.open(a9a_path("train"), "rb") as f:
        return [next(f) for _ in range(A9A_ROWS)]


def train_command(options):
    """The model file's digest of `onlinepgs train` on 600 a9a rows (2 passes, chunks of
    100), after checking that a run stopped by a bad line and resumed from its checkpoint
    (in chunks of 70) ends with the same model and statistics."""
    from onlinepgs.cli import main

    lines = _a9a_lines()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, broken = tmp / "a9a.svm", tmp / "broken.svm"
        data.write_bytes(b"".join(lines))
        broken.write_bytes(b"".join(lines[:A9A_BAD_LINE - 1]) + b"1 3:oops\n"
                           + b"".join(lines[A9A_BAD_LINE - 1:]))
        full, ckpt = tmp / "full.pgs", tmp / "ckpt.pgs"
        common = ["--quiet", "--passes", "2", *options]
        if main(["train", str(data), "-o", str(full), "--chunk-rows", "100", *common]) != 0:
            return {"error": "exit status"}
        with contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(["train", str(broken), "-o", str(ckpt), "--chunk-rows", "100",
                         "--checkpoint-every", "150", *common])
        assert code == 1 and "holds the last checkpoint" in err.getvalue(), err.getvalue()
        assert load_model(ckpt).online_stats_["n_examples"] < A9A_BAD_LINE
        broken.write_bytes(data.read_bytes())
        assert main(["train", str(broken), "-i", str(ckpt), "--resume", "-o", str(ckpt),
                     "--chunk-rows", "70", *common]) == 0
        # the model and its statistics (the state's arrays may differ where no row reached:
        # a random iterate's snapshot marks of coordinates the checkpoint's width lacked)
        model, resumed = load_model(full), load_model(ckpt)
        assert (_digest(resumed.coef_, resumed.intercept_),
                _digest_json(resumed.online_stats_)) == \
            (_digest(model.coef_, model.intercept_), _digest_json(model.online_stats_)), \
            "resumed from a checkpoint: another model"
        return {"saved": _file_digest(full), "coef": _digest(model.coef_, model.intercept_)}


# ---- the pins -----------------------------------------------------------------------------
(GRID, SLOW), (DASK_GRID, DASK_SLOW) = grid(), dask_grid()
PINNED = json.loads(PINS.read_text()) if PINS.exists() else {}


def _compare(got, want, what):
    assert want is not None, (f"{what} is not pinned: regenerate the pins "
                              f"(python tests/test_core_pins.py --regenerate)")
    differ = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    assert not differ, f"{what}: {differ} differ from the pins (got {got}, pinned {want})"


def test_the_data_are_the_pinned_data():
    assert data_digest() == PINNED.get("data"), "the generated data changed: fix the generator"


def test_every_configuration_is_pinned():
    for part, configs in (("configs", GRID), ("dask", DASK_GRID),
                          ("command", COMMAND_CONFIGS)):
        assert sorted(configs) == sorted(PINNED.get(part, {})), (
            f"the {part} grid and its pins disagree: regenerate the pins deliberately")


def _params(configs, slow):
    """The ids, those of the triples' part marked slow (they still run in CI)."""
    return [pytest.param(cid, marks=pytest.mark.slow) if cid in slow else cid
            for cid in configs]


@pytest.mark.parametrize("cid", _params(GRID, SLOW))
def test_core_pin(cid):
    _compare(train(GRID[cid]), PINNED.get("configs", {}).get(cid), cid)


@pytest.mark.parametrize("cid", _params(DASK_GRID, DASK_SLOW))
def test_dask_pin(cid):
    _compare(train_dask(DASK_GRID[cid]), PINNED.get("dask", {}).get(cid), cid)


@pytest.mark.parametrize("name", list(COMMAND_CONFIGS))
def test_command_pin(name):
    _compare(train_command(COMMAND_CONFIGS[name]), PINNED.get("command", {}).get(name),
             f"onlinepgs train {name}")


@pytest.mark.parametrize("part, axes, configs, slow",
                         [("configs", AXES, GRID, SLOW),
                          ("dask", DASK_AXES, DASK_GRID, DASK_SLOW)])
@pytest.mark.parametrize("strength", [2, 3])
def test_every_tuple_of_values_is_trained(part, axes, configs, slow, strength):
    """Every pair of values an accepted configuration may hold occurs in a configuration
    of the quick part that the package accepts (and trains, or trains until it diverges),
    not only in refused ones; every triple in one of the whole grid."""
    pins = PINNED.get(part, {})
    trained = [c for cid, c in configs.items()
               if pins.get(cid, {"error": "OptionError"}).get("error") not in REFUSALS
               and (strength == 3 or cid not in slow)]
    covered = set().union(*(_tuples(axes, c, strength) for c in trained))
    names = list(axes)
    missing = [tuple((names[i], axes[names[i]][lv]) for i, lv in t)
               for t in sorted(_feasible_tuples(axes, strength) - covered)]
    assert not missing, f"{len(missing)} tuples no trained configuration holds: {missing[:5]}"


REFUSALS = ("OptionError", "InvalidParameterError")


def test_the_refusals_are_today_s_rules():
    """The package refuses exactly what `refused` says, and only divergences stop the
    rest."""
    pins = PINNED["configs"]
    wrong = [(cid, pins[cid]) for cid, c in GRID.items()
             if (pins[cid].get("error") in REFUSALS) != refused(c)
             or pins[cid].get("error") not in REFUSALS + (None, "PGSDivergedError")]
    assert not wrong, wrong


def test_the_core_axes_change_the_bits():
    """Each value of the core's axes changes the bits: configurations of the core's
    product that differ in one axis alone have other coefficients, so that the pins see
    the code each value runs (but for radius="auto", which contains the optimum and may
    never bind, and the width, which changes how the core keeps its state, not what it
    computes)."""
    pins = PINNED["configs"]
    for axis in CORE_AXES:
        if axis == "width":
            continue
        by_rest = {}
        for cid, c in GRID.items():
            if any(c[a] != DEFAULTS[a] for a in DEFAULTS) or "error" in pins[cid]:
                continue
            rest = tuple((a, c[a]) for a in CORE_AXES if a != axis)
            by_rest.setdefault(rest, {})[c[axis]] = pins[cid]["coef"]
        for rest, by_value in by_rest.items():
            if axis == "radius":
                by_value.pop("auto", None)
            assert len(set(by_value.values())) == len(by_value), (axis, rest, by_value)


# ---- regeneration -------------------------------------------------------------------------
def compute():
    """Today's pins."""
    return {"data": data_digest(),
            "configs": {cid: train(c) for cid, c in GRID.items()},
            "dask": {cid: train_dask(c) for cid, c in DASK_GRID.items()},
            "command": {name: train_command(o) for name, o in COMMAND_CONFIGS.items()}}


def regenerate():
    start = time.perf_counter()
    pins = compute()
    PINS.parent.mkdir(exist_ok=True)
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    counts = {part: (len(pins[part]), sum("error" in v for v in pins[part].values()))
              for part in ("configs", "dask", "command")}
    print(f"{PINS}: " + ", ".join(f"{part} {n} ({r} refused or diverged)"
                                  for part, (n, r) in counts.items())
          + f", in {time.perf_counter() - start:.1f} s")


def check():
    """Every configuration that differs from the pins, and how (no pytest needed)."""
    got, bad = compute(), 0
    for part in ("configs", "dask", "command"):
        for cid, value in got[part].items():
            want = PINNED.get(part, {}).get(cid) or {}
            differ = sorted(k for k in set(value) | set(want) if value.get(k) != want.get(k))
            if differ:
                bad += 1
                print(part, cid, differ)
    total = sum(len(got[part]) for part in ("configs", "dask", "command"))
    print(f"{bad} of {total} configurations differ from the pins"
          + ("" if got["data"] == PINNED.get("data") else "; the data differ too"))
    return bad


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regenerate", action="store_true",
                        help="rewrite tests/states/core_pins.json from today's core")
    parser.add_argument("--check", action="store_true",
                        help="list the configurations that differ from the pins")
    args = parser.parse_args()
    if args.regenerate:
        regenerate()
    elif args.check:
        sys.exit(1 if check() else 0)
    else:
        parser.print_help()
