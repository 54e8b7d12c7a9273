"""Save and load fitted estimators: the ``.pgs`` model file format.

`save_model` writes a fitted `~onlinepgs.PGSClassifier`, `~onlinepgs.PGSRegressor`,
`~onlinepgs.SDCAClassifier` or `~onlinepgs.SDCARegressor` (or its sklearn-free learner,
`onlinepgs.pgs` / `onlinepgs.sdca`) to one file and `load_model` rebuilds it exactly: same
parameters, same fitted attributes and the same solver state, so that training continued
on the loaded model (`partial_fit`) gives bit for bit the coefficients and online
statistics the never-saved model gives on the same data. `load_learner` rebuilds the
learner instead, without importing scikit-learn (the command line's loader).
`read_header` returns a file's header (what ``onlinepgs info`` shows) without building
the model.

The format holds data only: no pickle, nothing executable, so loading a file runs
no code from it. Every field is type- and shape-checked (array shapes against the
solver configuration before anything that size is allocated), and every defect is
reported as a `ModelFileError` naming the file and the reason (a file that cannot
be opened at all raises the usual `OSError`).

Notes
-----
**Container.** A model file (suffix ``.pgs`` by convention) is a zip archive of
``ZIP_STORED`` (uncompressed) entries holding

``header.json``
    The header: one JSON object (strict RFC 8259 JSON, ASCII), described below.
``<name>.npy``
    One entry per array listed in the header's ``"arrays"``, in NumPy's ``.npy``
    format, written with ``allow_pickle=False``. Object arrays are never stored:
    an array of Python strings (e.g. ``feature_names_in_``, or ``classes_`` learnt
    from an object-dtype ``y``) is stored as a fixed-width unicode array and
    marked ``"as_object": true`` so the reader restores the object dtype; any
    other object array is refused.

**Header fields** (format_version 1):

``"format"``
    Always ``"onlinepgs-model"``.
``"format_version"``
    The integer 1 (see *Versioning*).
``"onlinepgs_version"``
    Version of the package that wrote the file (informational).
``"estimator"``
    Class name: ``"PGSClassifier"``, ``"PGSRegressor"``, ``"SDCAClassifier"`` or
    ``"SDCARegressor"`` (the scikit-learn estimator's, also when a learner was saved).
``"params"``
    Every ``get_params()`` value (each None, bool, int, float or str). A
    ``random_state`` holding a RandomState instance cannot be stored: pass an int.
    Reading a file without a parameter that a later onlinepgs added gives that
    parameter its default (in ``_state_params`` too); a parameter this onlinepgs
    does not know is refused, and so are values its parameter checks reject.
``"attributes"``
    The fitted attributes with JSON values: ``n_features_in_``, ``n_iter_``,
    ``t_``, ``_state_params``, ... (every instance attribute whose name ends in
    ``_``, plus ``_state_params``). Array-valued attributes (``classes_``,
    ``feature_names_in_``) are the arrays named ``attributes/<name>``. The
    estimator's read-out cache is not stored (it is rebuilt empty).
``"n_features"``, ``"dimension"``
    Features of the solver state and its dimension (``n_features + 1``; the
    first coordinate carries the intercept). Informational.
``"state"``
    The solver state's scalars (`onlinepgs._core.PGSState.to_dict` without its
    arrays): ``version`` (the solver state's own version), ``config`` (the
    solver's configuration), ``dim``, ``t``, ``rng``, running sums, ... Its
    arrays are the arrays named ``state/<key>``. An SDCA model keeps no solver state:
    ``{"solver": "sdca"}``, its weights the arrays ``state/coef`` (problems x
    features) and ``state/intercept_weight``; its certificate (``duality_gap_``,
    the objectives, ``gap_history_``, ...) and ``dual_coef_`` are fitted attributes
    (per-problem lists of arrays as JSON lists).
``"online_stats"``
    ``online_stats_`` at the time of saving (``{}`` for SDCA; informational: the loaded model
    recomputes it from the state).
``"extra"``
    The caller's ``extra`` object (e.g. the command line's hashing options and
    the number of examples consumed from a stream), ``{}`` when none. Keys
    starting with ``$`` are reserved (refused by the writer).
``"arrays"``
    List of ``{"name", "dtype", "shape"}`` objects (plus ``"as_object": true``
    where it applies), one per ``.npy`` entry, in checksum order. ``dtype`` is
    NumPy's type string (``"<f8"``, ``"<i8"``, ``"<U3"``, ...); the entry is
    ``<name>.npy``.
``"checksum"``
    ``{"algorithm": "sha256", "digest": <64 hex digits>}``, see below.

Floats are written with Python's shortest round-trip representation, so they are
read back exactly. JSON has no infinity or NaN: such a float is written as the
object ``{"$float": "inf"}`` (or ``"-inf"``, ``"nan"``); objects whose only key is
``"$float"`` are reserved for this and decoded by the reader.

**Checksum.** SHA-256 over, in order, the raw bytes (C order, the stored dtype)
of every array in the order of ``"arrays"``, then the canonical JSON of the header
without its ``"checksum"`` field (``json.dumps(header, sort_keys=True,
separators=(",", ":"), ensure_ascii=True, allow_nan=False)`` encoded as ASCII). It
covers the header's content, not its formatting. A mismatch (or a zip CRC error)
means the file is corrupt and it is refused.

**Limits on reading.** A reader trusts nothing a file declares before checking it
against the file's own size: compressed entries (deflate, bzip2, lzma) are refused,
and every entry read must lie within the file, beside the others, so the arrays
allocated add up to at most the file's size and a few KiB declaring gigabytes are
refused at once (loading peaks at about 3 times the file's size; a PGS state stored
by its non-zero rows, `~onlinepgs.model_io.staterows`, at about 3 times the state's
dense size, bounded there; ``load_learner(path, state=False)`` at the reported model's
weights and a few MB, `~onlinepgs.model_io.reported`). ``header.json``
has at most 64 MiB and nests at most 64 levels of lists and objects (checked before
it is parsed); integers in it have at most 4096 bits. `save_model` refuses what a
reader would refuse, so every file it writes loads.

**Versioning.** ``format_version`` is a major version. A reader refuses a file
whose ``format_version`` is greater than the one it knows (`FORMAT_VERSION`):
"written by a newer onlinepgs; upgrade". Changes that an older reader would
misread increase it; new top-level header fields that a reader may ignore do
not (readers ignore unknown top-level fields). The solver state carries its own
``version``, which the reader also checks.

**Writing** is atomic: the archive is written to a temporary file in the target's
directory, flushed, fsynced and renamed (`os.replace`) onto the target, then the
directory is fsynced. If anything fails, the temporary file is removed and a
previous file at the target is left as it was; a full disk says so, naming the
file. The temporary file ``.NAME.<12 hex digits>.tmp`` is locked (``flock``) by its
writer until it is renamed; one that a killed writer left behind is removed by the
next successful write of the same target once it is over a minute old and its lock
is free. The bytes written depend only on the model, ``extra`` and the package
version (entries carry a fixed timestamp).

**Modules.** This module is the public face; the work is done in
`~onlinepgs.model_io.container` (the zip, the checksum, reading with bounded memory),
`~onlinepgs.model_io.writing` (the archive written, its checksum taken as it is),
`~onlinepgs.model_io.atomic` (`replace_atomically`: temporary file, lock, fsync, rename),
`~onlinepgs.model_io.schema` (estimators and learners to and from the header and
arrays), `~onlinepgs.model_io.reported` (a PGS file's reported model without its
states), `~onlinepgs.model_io.jsonvalues` (the header's JSON values and their limits) and
`~onlinepgs.model_io.errors` (`ModelFileError`). None of them imports scikit-learn;
`load_model` does, to build the estimators.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from onlinepgs import PGSClassifier
>>> from onlinepgs.model_io import load_model, read_header, save_model
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 20); y = np.array(["yes", "no"] * 20)
>>> clf = PGSClassifier(sigma=1e-2, random_state=0).fit(X, y)
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = os.path.join(tmp, "model.pgs")
...     save_model(clf, path, extra={"examples_consumed": 40})
...     header = read_header(path)
...     loaded = load_model(path)
>>> header["estimator"], header["format_version"], header["extra"]
('PGSClassifier', 1, {'examples_consumed': 40})
>>> loaded.predict([[1.0, 0.0]])
array(['yes'], dtype='<U3')
>>> bool(np.array_equal(loaded.coef_, clf.coef_))
True
"""
import os

from onlinepgs.model_io import container
from onlinepgs.model_io.atomic import replace_atomically
from onlinepgs.model_io.container import FORMAT_NAME, FORMAT_VERSION
from onlinepgs.model_io.errors import ModelFileError
from onlinepgs.model_io.jsonvalues import from_json

__all__ = ["save_model", "load_model", "load_learner", "read_header", "ModelFileError",
           "replace_atomically", "FORMAT_NAME", "FORMAT_VERSION"]


def save_model(estimator, path, *, extra=None, state=True):
    """Write a fitted estimator to a model file, atomically.

    Parameters
    ----------
    estimator : PGS or SDCA estimator, or its learner
        A fitted estimator. Its parameters must be None, bool, int, float or str
        (a ``random_state`` RandomState instance is refused: use an int).
    path : str or os.PathLike
        The file to write (suffix ``.pgs`` by convention). An existing file is
        replaced only once the new one is complete; on failure it is left intact.
    extra : dict, optional
        JSON-serialisable data stored in the header's ``"extra"`` field (str keys;
        None, bool, int, float, str, lists and dicts), e.g. hashing options or the
        number of examples consumed from a stream. Read it back with `read_header`
        or ``load_model(path, return_header=True)``. Limits (so that what is written
        can be read): lists and dicts nest at most 63 levels (``extra`` itself is
        one; a non-finite float, stored as an object, is one too), integers have at
        most 4096 bits, and the whole header is at most 64 MiB.
    state : bool, default=True
        Store a PGS model's solver state, so that training can resume from the file.
        False stores its weights only (sparse when that is smaller): a smaller file
        that predicts, evaluates and certifies alike but cannot be trained further
        (`onlinepgs.model_io.stateless`). SDCA models have no solver state to drop.

    Raises
    ------
    ModelFileError
        The estimator is not a fitted onlinepgs estimator or learner, holds a value
        the format cannot store, or ``extra`` exceeds the limits above. Nothing is
        written then.
    OSError
        The file cannot be written (the previous file, if any, is intact).
    """
    from onlinepgs.model_io import schema, writing  # the learners: numpy and the compiled core

    path = os.fspath(path)
    writing.write(path, *schema.encode(estimator, path, extra, with_state=state))


def read_header(path, *, verify=True):
    """The header of a model file, as a dict (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
    verify : bool, default=True
        Also read the arrays and check the checksum (so a corrupt file is refused).
        False reads only ``header.json``, which is faster for large models.

    Returns
    -------
    header : dict
        The JSON header, with non-finite floats decoded back to float values.

    Raises
    ------
    ModelFileError
        The file is not a model file this onlinepgs reads, or is corrupt.
    """
    path = os.fspath(path)
    raw, _ = container.read(path, verify=verify)
    return from_json(raw)


def load_model(path, *, return_header=False):
    """Read a model file written by `save_model`: the fitted estimator, exactly.

    Parameters
    ----------
    path : str or os.PathLike
    return_header : bool, default=False
        Also return the header (as `read_header` does) read from the same file
        in the same pass, e.g. for the ``"extra"`` data saved with the model.

    Returns
    -------
    estimator : PGSClassifier, PGSRegressor, SDCAClassifier or SDCARegressor
        Equal to the saved one: parameters, fitted attributes and solver state;
        `partial_fit` continues exactly where the saved model stopped.
    header : dict
        Only with ``return_header=True``.

    Raises
    ------
    ModelFileError
        Not a model file, a file of a newer format_version, a corrupt file
        (checksum mismatch), a malformed header, missing arrays, arrays of the
        wrong shape or dtype, or an unknown estimator class.
    OSError
        The file cannot be opened (e.g. it does not exist).
    """
    return _load(path, return_header, sklearn=True)


def load_learner(path, *, return_header=False, state=True):
    """`load_model` without scikit-learn: the same model as the learner its class stands on.

    A file of a ``PGSClassifier`` gives an `onlinepgs.pgs.PGSClassifierLearner` (and so
    on for ``PGSRegressor``, ``SDCAClassifier``, ``SDCARegressor``): the same parameters,
    fitted attributes and solver state, predicting, certifying and continuing training
    bit for bit as the estimator does. The command line loads models with it, so that
    it never imports scikit-learn. Parameters, returns and errors as `load_model`, and:

    Parameters
    ----------
    state : bool, default=True
        False: the reported model only, as if the file had been saved without its
        solver state (``save_model(..., state=False)``): the same weights, bit for bit,
        intercepts, classes, statistics and sigma, computed from a PGS state read in
        slices of rows, without the dense state or a sigma race's other runs
        (`onlinepgs.model_io.reported`): reading costs the weights (held sparse when
        that is smaller, as such a file holds them) and a few MB, not the state. It
        predicts, evaluates and certifies, but cannot be trained further. What
        ``predict``, ``eval``, ``gap`` and ``info`` load.

    Examples
    --------
    >>> import os, sys, tempfile
    >>> import numpy as np
    >>> from onlinepgs.pgs import PGSRegressorLearner
    >>> from onlinepgs.model_io import load_learner, save_model
    >>> X = np.arange(20.0).reshape(10, 2); y = X @ [1.0, -1.0]
    >>> reg = PGSRegressorLearner(sigma=1e-2, random_state=0).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_model(reg, os.path.join(tmp, "m.pgs"))
    ...     loaded = load_learner(os.path.join(tmp, "m.pgs"))
    >>> type(loaded).__name__, bool(np.array_equal(loaded.predict(X), reg.predict(X)))
    ('PGSRegressorLearner', True)
    """
    return _load(path, return_header, sklearn=False, state=state)


def _load(path, return_header, sklearn, state=True):
    from onlinepgs.model_io import schema

    path = os.fspath(path)
    if not state:
        from onlinepgs.model_io.reported import load_reported

        with container.Archive(path) as archive:
            archive.header()
            estimator, header = load_reported(archive, sklearn)
        return (estimator, header) if return_header else estimator
    raw, arrays = container.read(path, verify=True)
    header = from_json(raw)
    estimator = schema.build(header, arrays, path, sklearn=sklearn)
    return (estimator, header) if return_header else estimator
