/* The C line parser of the svmlight / libsvm reader: see svmlight_parser.h and the
   docstring of onlinepgs/_core/_svmlight.pyx. */
#include "svmlight_parser.h"

#include <stdlib.h>
#include <string.h>
#include <math.h>

/* 128-bit truncated (rounded down) mantissas of 10^e, e in [-348, 347], most
   significant bit set; filled at import by _fill_pow10 (computed exactly with
   Python integers). */
static uint64_t svm_pow10_hi[SVM_POW10_MAX - SVM_POW10_MIN + 1];
static uint64_t svm_pow10_lo[SVM_POW10_MAX - SVM_POW10_MIN + 1];

static const double svm_exact_pow10[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

void svm_set_pow10(int i, uint64_t hi, uint64_t lo) {
    svm_pow10_hi[i] = hi;
    svm_pow10_lo[i] = lo;
}

static inline uint64_t svm_mul128(uint64_t a, uint64_t b, uint64_t *lo) {
#if defined(__SIZEOF_INT128__)
    unsigned __int128 r = (unsigned __int128)a * b;
    *lo = (uint64_t)r;
    return (uint64_t)(r >> 64);
#else
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    *lo = (mid << 32) | (uint32_t)p00;
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
#endif
}

static inline int svm_clz64(uint64_t x) {  /* x != 0 */
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_clzll(x);
#else
    int n = 0;
    while (!(x & 0x8000000000000000ULL)) { x <<= 1; n++; }
    return n;
#endif
}

/* man * 10^e10 (man != 0) correctly rounded to a normal double, by the
   Eisel-Lemire algorithm; returns 0 when it cannot decide (the caller falls back). */
static int svm_eisel_lemire(uint64_t man, int64_t e10, int neg, double *out) {
    if (e10 < SVM_POW10_MIN || e10 > SVM_POW10_MAX) return 0;
    int clz = svm_clz64(man);
    man <<= clz;
    /* floor(e10 * log2(10)) (arithmetic shift) + 64 + bias - clz, wrapping */
    uint64_t exp2 = (uint64_t)(((217706 * e10) >> 16) + 64 + 1023) - (uint64_t)clz;
    const uint64_t phi = svm_pow10_hi[e10 - SVM_POW10_MIN];
    const uint64_t plo = svm_pow10_lo[e10 - SVM_POW10_MIN];
    uint64_t xlo, xhi = svm_mul128(man, phi, &xlo);
    if ((xhi & 0x1FF) == 0x1FF && xlo + man < man) {
        /* the truncation of the upper product may matter: use all 128 bits */
        uint64_t ylo, yhi = svm_mul128(man, plo, &ylo);
        uint64_t mhi = xhi, mlo = xlo + yhi;
        if (mlo < xlo) mhi++;
        if ((mhi & 0x1FF) == 0x1FF && mlo + 1 == 0 && ylo + man < man) return 0;
        xhi = mhi;
        xlo = mlo;
    }
    uint64_t msb = xhi >> 63;
    uint64_t mant = xhi >> (msb + 9);
    exp2 -= 1 ^ msb;
    if (xlo == 0 && (xhi & 0x1FF) == 0 && (mant & 3) == 1) return 0;  /* tie */
    mant += mant & 1;
    mant >>= 1;
    if (mant >> 53) {
        mant >>= 1;
        exp2 += 1;
    }
    if (exp2 - 1 >= 0x7FF - 1) return 0;  /* subnormal, zero or overflow */
    uint64_t bits = (exp2 << 52) | (mant & 0x000FFFFFFFFFFFFFULL);
    if (neg) bits |= 0x8000000000000000ULL;
    memcpy(out, &bits, sizeof bits);
    return 1;
}

/* The rare undecided cases (subnormals, ties beyond 19 digits): CPython's
   correctly rounded, locale-independent conversion, under the GIL. The token
   is already validated, a syntax Python accepts. */
static int svm_parse_double_slow(const char *s, const char *e, double *out) {
    char stackbuf[128];
    size_t n = (size_t)(e - s);
    char *buf = n < sizeof stackbuf ? stackbuf : (char *)malloc(n + 1);
    char *end = NULL;
    int ok;
    PyGILState_STATE gil;
    if (buf == NULL) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    gil = PyGILState_Ensure();
    *out = PyOS_string_to_double(buf, &end, NULL);
    ok = (end == buf + n) && !PyErr_Occurred();
    PyErr_Clear();
    PyGILState_Release(gil);
    if (buf != stackbuf) free(buf);
    return ok;
}

/* [s, e) as a decimal number (see the module docstring). Returns 1 and the
   correctly rounded value (possibly +-inf on overflow) or 0 on a syntax error. */
int svm_parse_double(const char *s, const char *e, double *out) {
    const char *p = s;
    int neg = 0, any = 0, truncated = 0, ndig = 0;
    uint64_t man = 0;
    int64_t e10 = 0;
    if (p < e && (*p == '+' || *p == '-')) { neg = (*p == '-'); p++; }
    while (p < e && (unsigned)(*p - '0') < 10) {
        unsigned d = (unsigned)(*p - '0');
        any = 1;
        if (ndig < 19) {
            if (man || d) { man = man * 10 + d; ndig++; }
        } else {
            e10++;
            if (d) truncated = 1;
        }
        p++;
    }
    if (p < e && *p == '.') {
        p++;
        while (p < e && (unsigned)(*p - '0') < 10) {
            unsigned d = (unsigned)(*p - '0');
            any = 1;
            if (ndig < 19) {
                if (man || d) { man = man * 10 + d; ndig++; }
                e10--;
            } else if (d) {
                truncated = 1;
            }
            p++;
        }
    }
    if (!any) return 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        int64_t x = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) { eneg = (*p == '-'); p++; }
        if (p >= e || (unsigned)(*p - '0') >= 10) return 0;
        /* Saturated, not clipped short: e10 already holds an offset of up to the
           token's length (one per digit dropped from or added to man), so the
           exponent must keep going well past any such length for e10 + x to have
           the right sign and size. 10^17 exceeds any length in memory (< 2^48),
           and 10^18 + 9 + |offset| stays far inside int64. */
        while (p < e && (unsigned)(*p - '0') < 10) {
            if (x < 100000000000000000LL) x = x * 10 + (*p - '0');
            p++;
        }
        e10 += eneg ? -x : x;
    }
    if (p != e) return 0;
    if (man == 0) {
        *out = neg ? -0.0 : 0.0;
        return 1;
    }
    /* man has ndig digits: man * 10^e10 is in [10^(ndig-1+e10), 10^(ndig+e10)) */
    if (ndig - 1 + e10 >= 309) {
        *out = neg ? -HUGE_VAL : HUGE_VAL;
        return 1;
    }
    if (ndig + e10 <= -324) {  /* below half the smallest subnormal */
        *out = neg ? -0.0 : 0.0;
        return 1;
    }
    if (!truncated) {
        if (man <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {  /* Clinger */
            double v = (double)man;
            v = e10 < 0 ? v / svm_exact_pow10[-e10] : v * svm_exact_pow10[e10];
            *out = neg ? -v : v;
            return 1;
        }
        if (svm_eisel_lemire(man, e10, neg, out)) return 1;
    } else if (man < 9999999999999999999ULL) {
        /* digits dropped: the value lies in [man, man + 1) * 10^e10 */
        double lo, hi;
        if (svm_eisel_lemire(man, e10, neg, &lo)
                && svm_eisel_lemire(man + 1, e10, neg, &hi) && lo == hi) {
            *out = lo;
            return 1;
        }
    }
    return svm_parse_double_slow(s, e, out);
}

/* ---- the fast path of a line ----------------------------------------------
   Used on lines that end with '\n' inside the buffer, at least 8 bytes before
   its end: every loop below stops at the '\n' (no bounds checks) and 8-byte
   loads never leave the buffer. Anything unusual (an error, an index of more
   than 15 digits or out of range, ...) makes svm_fast_line give up on the line,
   which the exact line parser then reads from its start: the fast path only
   ever accepts what that parser accepts, with the same result. */

/* byte classes: 1 = whitespace inside a line, 2 = '#', 3 = '\n' */
unsigned char svm_cls[256];

static const uint64_t svm_pow10_u64[9] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
    100000000ULL};

static inline int svm_ctz64(uint64_t x) {  /* x != 0 */
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    while (!(x & 1)) { x >>= 1; n++; }
    return n;
#endif
}

/* The number of leading decimal digits of p[0..8) (0 to 8 of them) and their
   value in *val (SWAR, no branch on the count); when there is none, *val is
   undefined with svm_digits8_nz and 0 with svm_digits8. Reads 8 bytes. */
static inline int svm_digits8_nz(const char *p, uint64_t *val) {
    uint64_t v, t, nd;
    int b;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    t = v ^ 0x3030303030303030ULL;  /* a digit byte becomes 0..9 */
    /* bit 7 of each byte that is not a digit (a carry out of such a byte only
       disturbs the bytes after it, which do not count) */
    nd = ((t + 0x7676767676767676ULL) | t) & 0x8080808080808080ULL;
    b = nd ? svm_ctz64(nd) : 64;    /* 8 n + 7, or 64 if n == 8 */
    t <<= (unsigned)(7 - b) & 56u;  /* the n digits on top, zeros below (n > 0) */
    t = t * 10 + (t >> 8);
    t = (((t & 0x000000FF000000FFULL) * 0x000F424000000064ULL)
         + (((t >> 16) & 0x000000FF000000FFULL) * 0x0000271000000001ULL)) >> 32;
    *val = (uint32_t)t;
    return b >> 3;
}

static inline int svm_digits8(const char *p, uint64_t *val) {
    uint64_t x;
    int n = svm_digits8_nz(p, &x);
    *val = n ? x : 0;
    return n;
}

/* A number in the common form [+-] d* [. d*] [(e|E) [+-] d{1,3}] with at most 19
   digits in all, when it is an integer below 2^53 times 10^k, |k| <= 22: the
   product or quotient of two exactly represented doubles is then the correctly
   rounded value (Clinger's fast path, as in svm_parse_double). Returns where the
   number ends, which must be at whitespace, '#' or '\n', or NULL (not this form,
   or not followed by such a byte: the caller then uses svm_parse_double on the
   token). */
static const char *svm_fast_double_general(const char *p, double *out) {
    const unsigned char *cls = svm_cls;
    int neg = (*p == '-'), n, ndig, nfrac = 0, e10;
    uint64_t man, chunk;
    double v;
    p += (*p == '-') | (*p == '+');
    if ((unsigned)(p[0] - '0') < 10 && p[1] == '.') {  /* "d.": the usual case */
        man = (uint64_t)(p[0] - '0');
        ndig = 1;
        p += 2;
    } else {
        ndig = n = svm_digits8(p, &man);
        p += n;
        while (n == 8) {
            if (ndig > 19) return NULL;
            n = svm_digits8(p, &chunk);
            man = man * svm_pow10_u64[n] + chunk;
            ndig += n;
            p += n;
        }
        if (*p != '.') goto exponent;
        p++;
    }
    do {  /* the fraction */
        if (ndig + nfrac > 19) return NULL;
        n = svm_digits8(p, &chunk);
        man = man * svm_pow10_u64[n] + chunk;
        nfrac += n;
        p += n;
    } while (n == 8);
    ndig += nfrac;
exponent:
    if (ndig == 0 || ndig > 19) return NULL;
    e10 = -nfrac;
    if (cls[(unsigned char)*p] == 0) {
        int eneg, x = 0, k = 0;
        if ((*p | 0x20) != 'e') return NULL;
        p++;
        eneg = (*p == '-');
        p += (*p == '-') | (*p == '+');
        while ((unsigned)(*p - '0') < 10) {
            if (++k > 3) return NULL;
            x = x * 10 + (*p - '0');
            p++;
        }
        if (k == 0 || cls[(unsigned char)*p] == 0) return NULL;
        e10 += eneg ? -x : x;
    }
    if (man > (1ULL << 53) || (unsigned)(e10 + 22) > 44u) return NULL;
    v = (double)man;
    v = e10 < 0 ? v / svm_exact_pow10[-e10] : v * svm_exact_pow10[e10];
    *out = neg ? -v : v;
    return p;
}

/* svm_fast_double_general, with shortcuts for the most frequent forms:
   "d.ddd" (up to 16 decimals, when the digits make an integer up to 2^53, over
   an exact 10^n) and "d", each followed by whitespace, '#' or '\n'. */
static inline const char *svm_fast_double_at(const char *p, double *out) {
    const unsigned char *cls = svm_cls;
    unsigned d0 = (unsigned)(p[0] - '0');
    if (d0 < 10) {
        if (p[1] == '.') {
            uint64_t frac, man;
            int n = svm_digits8(p + 2, &frac), n2;
            const char *q = p + 2 + n;
            man = d0 * svm_pow10_u64[n] + frac;
            if (cls[(unsigned char)*q] != 0) {  /* n <= 8: at most 9 digits */
                *out = (double)man / svm_exact_pow10[n];
                return q;
            }
            if (n == 8) {  /* more decimals (16 at most, 10^16 is exact) */
                n2 = svm_digits8(q, &frac);
                q += n2;
                man = man * svm_pow10_u64[n2] + frac;
                if (cls[(unsigned char)*q] != 0 && man <= (1ULL << 53)) {
                    *out = (double)man / svm_exact_pow10[8 + n2];
                    return q;
                }
            }
        } else if (cls[(unsigned char)p[1]] != 0) {
            *out = (double)d0;
            return p + 1;
        }
    }
    return svm_fast_double_general(p, out);
}

/* The fast path of one number for the tests (`_fast_float`); the line parser inlines
   svm_fast_double_at, which is one call per entry otherwise (+18% instructions). */
const char *svm_fast_double(const char *p, double *out) {
    return svm_fast_double_at(p, out);
}

/* A number token at p (it ends at whitespace, '#' or '\n'): the fast path, else
   the exact parser on the token. Returns the byte after it (whitespace, '#' or
   '\n') and the finite value, or NULL if it is no finite number. */
static inline const char *svm_fast_token_double(const char *p, double *out) {
    const char *q = svm_fast_double_at(p, out);
    if (q != NULL) return q;
    q = p;
    while (svm_cls[(unsigned char)*q] == 0) q++;
    if (!svm_parse_double(p, q, out) || !(*out - *out == 0.0)) return NULL;
    return q;
}


/* The line starting at s, which ends with a '\n' before e. Sets *endp to the
   byte after its '\n' (ROW, EMPTY). */
int svm_fast_line(const char *s, const char *e, svm_fast_state *st,
                         const char **endp) {
    const unsigned char *cls = svm_cls;
    const char *p = s, *q;
    int64_t *indices = st->indices;
    double *data = st->data;
    const Py_ssize_t start = st->nnz, cap = st->cap;
    Py_ssize_t nnz = start, k;
    const uint64_t shift = (uint64_t)st->shift, jlim = (uint64_t)st->jlim;
    uint64_t idx, chunk, j;
    int64_t prev = -1, row_max = -1;
    int is_sorted = 1, row_zero = 0, n;
    double v;

    while (cls[(unsigned char)*p] == 1) p++;
    if (cls[(unsigned char)*p] >= 2) {
        if (*p == '#') p = (const char *)memchr(p, '\n', (size_t)(e - p));
        *endp = p + 1;
        return SVM_FAST_EMPTY;
    }
    p = svm_fast_token_double(p, &st->label);
    if (p == NULL) return SVM_FAST_BAIL;
    /* qid:[+-]N, first after the label */
    q = p;
    while (cls[(unsigned char)*q] == 1) q++;
    if (q[0] == 'q' && q[1] == 'i' && q[2] == 'd' && q[3] == ':') {
        q += 4;
        q += (*q == '-') | (*q == '+');
        p = q;
        while ((unsigned)(*q - '0') < 10) q++;
        if (q == p || cls[(unsigned char)*q] == 0) return SVM_FAST_BAIL;
        p = q;
    }
    for (;;) {
        /* p is at whitespace, '#' or '\n' */
        if (cls[(unsigned char)*p] != 1) goto end;
        p++;
        n = svm_digits8_nz(p, &idx);  /* the usual case: one blank, an index */
        if (n == 0) {
            while (cls[(unsigned char)*p] == 1) p++;
            if (cls[(unsigned char)*p] != 0) goto end;
            n = svm_digits8_nz(p, &idx);
            if (n == 0) return SVM_FAST_BAIL;
        }
        /* index ':' value */
        q = p + n;
        if (n == 8) {
            n = svm_digits8(q, &chunk);
            if (n == 8) return SVM_FAST_BAIL;  /* > 15 digits */
            idx = idx * svm_pow10_u64[n] + chunk;
            q += n;
        }
        if (*q != ':') return SVM_FAST_BAIL;
        p = svm_fast_token_double(q + 1, &v);
        if (p == NULL) return SVM_FAST_BAIL;
        /* j < 0 (index 0, one-based) wraps and fails too */
        j = idx - shift;
        if (j >= jlim) return SVM_FAST_BAIL;
        if (nnz == cap) return SVM_FAST_GROW;
        indices[nnz] = (int64_t)j;
        data[nnz] = v;
        nnz++;
        is_sorted &= ((int64_t)j > prev);
        prev = (int64_t)j;
    }
end:
    if (*p == '#') p = (const char *)memchr(p, '\n', (size_t)(e - p));
    if (is_sorted) {
        if (nnz > start) {
            row_max = indices[nnz - 1];
            row_zero = indices[start] == 0;
        }
    } else {
        for (k = start; k < nnz; k++) {
            row_max = indices[k] > row_max ? indices[k] : row_max;
            row_zero |= indices[k] == 0;
        }
    }
    st->nnz = nnz;
    st->row_max = row_max;
    st->is_sorted = is_sorted;
    st->row_zero = row_zero;
    *endp = p + 1;
    return SVM_FAST_ROW;
}
