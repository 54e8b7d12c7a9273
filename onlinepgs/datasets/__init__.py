"""A small real data set shipped with onlinepgs, so that the first run needs no download.

``a9a`` is the "Adult" census data (predict whether income exceeds $50K a year) with
its 14 attributes binarized into 123 sparse 0/1 features: 32,561 training rows and
16,281 test rows (whose last feature never occurs, so a reader sizes it 122
wide), labels -1/+1, in gzip-compressed svmlight text (1-based indices).

Source: the UCI Machine Learning Repository, "Adult" (B. Becker and R. Kohavi, 1996,
https://doi.org/10.24432/C5XW20), licensed under CC BY 4.0; binarized by J. Platt
("Fast training of support vector machines using sequential minimal optimization",
1998) and distributed as ``a9a`` / ``a9a.t`` with the LIBSVM data sets of C.-C. Chang
and C.-J. Lin (https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html).
The files here are those, unmodified.

Examples
--------
>>> from onlinepgs import load_svmlight
>>> from onlinepgs.datasets import a9a_path
>>> X, y = load_svmlight(a9a_path("test"))
>>> X.shape[0], X.shape[1] <= 123, sorted(int(label) for label in set(y))
(16281, True, [-1, 1])
"""
from pathlib import Path

__all__ = ["a9a_path"]

_HERE = Path(__file__).resolve().parent
_A9A = {"train": "a9a_train.svm.gz", "test": "a9a_test.svm.gz"}


def a9a_path(part="train"):
    """Path of the shipped a9a file.

    Parameters
    ----------
    part : {"train", "test"}
        The standard training split (32,561 rows) or test split (16,281 rows).

    Returns
    -------
    str
        Absolute path of a gzip svmlight file, readable by ``iter_svmlight``,
        ``load_svmlight`` and the ``onlinepgs`` command.

    Raises
    ------
    ValueError
        If ``part`` is neither "train" nor "test".
    """
    if part not in _A9A:
        raise ValueError(f"a9a_path: part must be 'train' or 'test', not {part!r}")
    return str(_HERE / _A9A[part])
