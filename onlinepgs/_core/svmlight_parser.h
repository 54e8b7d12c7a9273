/* The C line parser of the svmlight / libsvm reader (onlinepgs._core._svmlight).

   Numbers: the correctly rounded double of [+-]? (d+ [. d*] | . d+) ([eE] [+-]? d+)?,
   by Clinger's fast path, the Eisel-Lemire algorithm, and CPython's
   PyOS_string_to_double (under the GIL) for the rare undecided cases. Lines: the fast
   path of a line (svm_fast_line), which gives up on anything unusual and leaves the
   line to the exact parser written in Cython (_Parser._line), which decides every
   error and its position. Compiled into the _svmlight extension (setup.py, sources=);
   declared to Cython by a `cdef extern from "svmlight_parser.h"` block. */
#ifndef ONLINEPGS_SVMLIGHT_PARSER_H
#define ONLINEPGS_SVMLIGHT_PARSER_H

#include <Python.h>
#include <stdint.h>

/* the extension's own symbols: not exported from its shared object */
#if defined(__GNUC__) || defined(__clang__)
#define SVM_HIDDEN __attribute__((visibility("hidden")))
#else
#define SVM_HIDDEN
#endif

/* the range of the 128-bit powers of ten, 10^e for e in [SVM_POW10_MIN, SVM_POW10_MAX] */
#define SVM_POW10_MIN (-348)
#define SVM_POW10_MAX 347

typedef struct {
    /* in */
    int64_t *indices;
    double *data;
    Py_ssize_t nnz, cap;
    int64_t shift;      /* 1 for one-based indices (index 0 is then refused) */
    int64_t jlim;       /* stored indices must be below (else: refused) */
    /* out */
    double label;
    int64_t row_max;
    int is_sorted, row_zero;
} svm_fast_state;

#define SVM_FAST_BAIL 0   /* not for the fast path: use the exact line parser */
#define SVM_FAST_ROW 1    /* a row, entries [st->nnz, new st->nnz) */
#define SVM_FAST_EMPTY 2  /* blank or comment line */
#define SVM_FAST_GROW 3   /* the entry buffers are full: grow them and retry */

/* byte classes, filled by the Cython module at import: 1 = whitespace inside a line,
   2 = '#', 3 = '\n', 0 = anything else */
SVM_HIDDEN extern unsigned char svm_cls[256];

/* entry i (e - SVM_POW10_MIN) of the 128-bit truncated powers of ten (filled at import) */
SVM_HIDDEN void svm_set_pow10(int i, uint64_t hi, uint64_t lo);

/* [s, e) as a decimal number: 1 and the correctly rounded value (+-inf on overflow),
   or 0 on a syntax error. May take the GIL (the rare undecided cases). */
SVM_HIDDEN int svm_parse_double(const char *s, const char *e, double *out);

/* The fast path of a number at p: the byte after it (whitespace, '#' or '\n') and the
   value, or NULL when it declines (svm_parse_double then decides on the whole token). */
SVM_HIDDEN const char *svm_fast_double(const char *p, double *out);

/* The line at s, which ends with a '\n' at least 8 bytes before e: SVM_FAST_ROW (its
   entries appended to st), SVM_FAST_EMPTY, SVM_FAST_GROW or SVM_FAST_BAIL; *endp is set
   to the byte after the '\n' for ROW and EMPTY. */
SVM_HIDDEN int svm_fast_line(const char *s, const char *e, svm_fast_state *st,
                             const char **endp);

#endif
