"""Threads sharing one estimator: training calls take turns, readers see whole models."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs.duality import duality_gap

# Four threads, 20 partial_fit calls each, on CSR chunks whose width grows with every
# chunk (issue 32, item 1): each widening call reallocated the state under a pass
# running in another thread (a segfault in 9 of 9 runs) and passes running together
# lost updates.
_REPRODUCTION = r"""
import json, sys, threading
import numpy as np, scipy.sparse as sp
from onlinepgs import PGSClassifier

rng = np.random.RandomState(0)
rows, per_row, calls, threads = 5000, 5, 20, 4
chunks = []
for i in range(calls * threads):
    width = 50 + 25 * i
    X = sp.csr_matrix((rng.rand(rows * per_row), rng.randint(0, width, rows * per_row),
                       np.arange(0, rows * per_row + 1, per_row)), shape=(rows, width))
    chunks.append((X, np.where(rng.rand(rows) > 0.5, 1, -1)))
est = PGSClassifier(sigma=1e-3)

def work(k):
    for j in range(calls):
        X, y = chunks[threads * j + k]
        est.partial_fit(X, y, classes=[-1, 1])

workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(json.dumps({"t": est.t_, "rows": rows * calls * threads,
                  "finite": bool(np.isfinite(est.coef_).all()),
                  "width": est.coef_.shape[1], "n_features_in": est.n_features_in_}))
"""


def test_threads_calling_partial_fit_neither_crash_nor_lose_rows():
    # in a child process: the unserialized code crashed the whole interpreter
    done = subprocess.run([sys.executable, "-c", _REPRODUCTION], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # no thread died with a traceback
    out = json.loads(done.stdout)
    assert out["t"] == out["rows"] == 400_000  # every row trained, none lost
    assert out["finite"]
    assert out["width"] == out["n_features_in"] == 50 + 25 * 79


class _Recording(PGSClassifier):
    """Notes which chunk each training pass ran on, in the order the passes ran."""

    def _partial_fit_unguarded(self, X, y, sample_weight, classes, **kwargs):
        self.ran.append(id(X))  # inside the training lock: the true order
        return super()._partial_fit_unguarded(X, y, sample_weight, classes, **kwargs)


def _growing_chunks(n_chunks, rows, seed=0):
    rng = np.random.RandomState(seed)
    chunks = []
    for i in range(n_chunks):
        width = 10 + 7 * i
        nnz = rows * 4
        X = sp.csr_matrix((rng.randn(nnz), rng.randint(0, width, nnz),
                           np.arange(0, nnz + 1, 4)), shape=(rows, width))
        chunks.append((X, np.where(rng.rand(rows) > 0.5, 1, -1)))
    return chunks


def test_concurrent_partial_fit_equals_a_serial_run_in_the_order_taken():
    chunks = _growing_chunks(24, 3000)
    est = _Recording(p=1.5, sigma=1e-3, iterate="weighted")
    est.ran = []
    by_id = {id(X): k for k, (X, _) in enumerate(chunks)}

    def work(k):
        for X, y in chunks[k::4]:
            est.partial_fit(X, y, classes=[-1, 1])

    workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    order = [by_id[i] for i in est.ran]
    assert sorted(order) == list(range(24))
    assert est.t_ == 24 * 3000

    serial = PGSClassifier(p=1.5, sigma=1e-3, iterate="weighted")
    for k in order:
        serial.partial_fit(*chunks[k], classes=[-1, 1])
    # the same passes in the same order: the same model, bit for bit
    np.testing.assert_array_equal(est.coef_, serial.coef_)
    np.testing.assert_array_equal(est.intercept_, serial.intercept_)
    assert est.online_stats_["n_examples"] == serial.online_stats_["n_examples"]
    assert est.n_features_in_ == serial.n_features_in_ == 10 + 7 * 23


def test_readers_during_partial_fit_see_whole_models():
    rng = np.random.RandomState(1)
    chunks = []
    for _ in range(8):
        X = rng.randn(10000, 40)
        chunks.append((X, X @ rng.randn(40) + 0.1 * rng.randn(10000)))
    probe = chunks[0][0][:50]
    params = dict(sigma=1e-3, radius=50.0)
    serial = PGSRegressor(**params)
    models = set()  # the model after each call: a reader may see any of these only
    for X, y in chunks:
        serial.partial_fit(X, y)
        models.add(serial.predict(probe).tobytes())

    est = PGSRegressor(**params).partial_fit(*chunks[0])
    seen = []

    def train():
        for X, y in chunks[1:]:
            est.partial_fit(X, y)

    trainer = threading.Thread(target=train)
    trainer.start()
    while trainer.is_alive():
        # one read of the weights (coef_ then intercept_ would be two)
        seen.append(est.predict(probe).tobytes())
    trainer.join()
    assert len(seen) > 0
    torn = [i for i, model in enumerate(seen) if model not in models]
    assert not torn, f"{len(torn)} of {len(seen)} reads saw a model halfway through a pass"
    # the certificate reads the same way
    cert = duality_gap(est, *chunks[-1])
    assert np.isfinite(cert.gap)


class _Announcing(PGSClassifier):
    def _new_state(self, *args):
        self.started.set()
        return super()._new_state(*args)


def test_predict_does_not_wait_for_a_whole_fit():
    rng = np.random.RandomState(2)
    X = rng.randn(200, 5)
    y = (X[:, 0] > 0).astype(int)
    est = _Announcing(sigma=1e-2, random_state=0)
    est.started = threading.Event()
    est.fit(X, y)
    before = est.decision_function(X)
    est._cache.clear()  # predict must read the weights from the state, as after a load
    big = rng.randn(100_000, 5)
    est.started.clear()
    fitting = threading.Thread(target=est.set_params(max_epochs=30).fit,
                               args=(big, (big[:, 1] > 0).astype(int)))
    fitting.start()
    assert est.started.wait(60)
    during = est.decision_function(X)
    still_fitting = fitting.is_alive()
    fitting.join()
    assert still_fitting  # predict answered while fit ran: it did not wait for it
    np.testing.assert_array_equal(during, before)  # ... with the model from before it
    assert not np.array_equal(est.decision_function(X), before)  # fit installed its own
