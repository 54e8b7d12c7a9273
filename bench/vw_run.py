"""Vowpal Wabbit's own driver over a VW text file, one pass, logistic loss: the peer of
``onlinepgs train FILE -o m.pgs --loss logistic --quiet`` timed as a whole process.

    /usr/bin/time -f '%e %M' python bench/vw_run.py imdb_train.vw

(``bench/bench_stream.py`` writes the VW text copy of a data set beside its svmlight one;
needs ``pip install vowpalwabbit``.)
"""
import sys

import vowpalwabbit

workspace = vowpalwabbit.Workspace(f"-d {sys.argv[1]} --loss_function logistic --quiet")
workspace.run_parser()
workspace.finish()
