"""Build the Cython core of onlinepgs (metadata lives in pyproject.toml).

ONLINEPGS_NO_PREFETCH=1 builds the core without its software prefetches (for measuring
what they bring: docs/benchmarks.md); the results are the same either way.
"""
import os
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

compile_args = ["-O3", "-fno-math-errno", "--param=large-function-growth=2000",
                "--param=max-inline-insns-single=2000", "--param=inline-unit-growth=2000"]
# C sources compiled into an extension beside its .pyx (declared there with
# `cdef extern from "<name>.h"`); the headers are listed so a change rebuilds it
C_SOURCES = {"_svmlight": ["onlinepgs/_core/svmlight_parser.c"]}
# _vw includes svmlight_parser.c in its source (`cdef extern from`), to inline it
C_HEADERS = {"_svmlight": ["onlinepgs/_core/svmlight_parser.h"],
             "_features": ["onlinepgs/_core/rank_sort.h"],
             "_vw": ["onlinepgs/_core/svmlight_parser.h", "onlinepgs/_core/svmlight_parser.c"]}
extensions = [
    Extension(
        f"onlinepgs._core.{name}",
        [f"onlinepgs/_core/{name}.pyx"] + C_SOURCES.get(name, []),
        depends=C_HEADERS.get(name, []),
        include_dirs=[np.get_include(), "onlinepgs/_core"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        + ([("OPGS_NO_PREFETCH", "1")] if os.environ.get("ONLINEPGS_NO_PREFETCH") else []),
        extra_compile_args=compile_args,
    )
    # every compiled module of the core: onlinepgs/_core/*.pyx
    for name in sorted(p.stem for p in Path(__file__).parent.glob("onlinepgs/_core/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
    package_data={"onlinepgs._core": ["*.pxd", "*.pyx", "*.h"],
                  "onlinepgs.datasets": ["*.svm.gz", "README.md"]},
)
