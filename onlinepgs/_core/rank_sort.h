/* A short row's entries sorted by rank (_features.pyx's `build_row`): each key's place
 * is the count of the row's keys below it, compares without branches (sorting a few
 * dozen random columns by branches mispredicts about half of the compares); keys and
 * values are then written to their places. The keys are distinct (a column and the
 * entry's number in one int32) and padded to a multiple of 16 with INT32_MAX, which is
 * below none of them.
 *
 * Sixteen keys' places are counted at a time, side by side in the lanes of vectors:
 * each key of the row is broadcast and compared with the sixteen at once, into four
 * sums (one chain of additions would wait on each other). Written three times where gcc
 * can: for AVX-512 (a compare into a mask, a masked add: two instructions a key and
 * sixteen lanes), AVX2 (two vectors of eight) and plain C (the baseline x86-64's, whose
 * loops the compiler vectorizes as it can); `opgs_rank_sort_use` picks the best the CPU
 * runs when the module loads (or, for the tests, the one asked for). All give the same
 * order. (Buckets by the top bits first, a radix step, measured slower at the 40-70
 * entries of a click log's row.) */
#ifndef OPGS_RANK_SORT_H
#define OPGS_RANK_SORT_H
#include <stdint.h>
#include <stddef.h>

#define OPGS_RANK_PAD 16  /* the keys are padded to a multiple of this */

static inline void opgs_rank_place(const int32_t* keys, const double* vals, ptrdiff_t n,
                                   ptrdiff_t e0, const int32_t* place,
                                   int32_t* sorted_keys, double* sorted_vals) {
    for (int l = 0; l < 16 && e0 + l < n; l++) {
        sorted_keys[place[l]] = keys[e0 + l];
        sorted_vals[place[l]] = vals[e0 + l];
    }
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
    && defined(__cplusplus)
#include <immintrin.h>
#define OPGS_RANK_VERSIONS 1

__attribute__((target("avx512f")))
static void opgs_rank_sort_avx512(const int32_t* keys, const double* vals, ptrdiff_t n,
                                  ptrdiff_t padded, int32_t* sorted_keys,
                                  double* sorted_vals) {
    const __m512i one = _mm512_set1_epi32(1);
    for (ptrdiff_t e0 = 0; e0 < n; e0 += 16) {
        const __m512i mine = _mm512_loadu_si512(keys + e0);
        __m512i p0 = _mm512_setzero_si512(), p1 = p0, p2 = p0, p3 = p0;
        for (ptrdiff_t f = 0; f < padded; f += 4) {
            p0 = _mm512_mask_add_epi32(
                p0, _mm512_cmpgt_epi32_mask(mine, _mm512_set1_epi32(keys[f])), p0, one);
            p1 = _mm512_mask_add_epi32(
                p1, _mm512_cmpgt_epi32_mask(mine, _mm512_set1_epi32(keys[f + 1])), p1, one);
            p2 = _mm512_mask_add_epi32(
                p2, _mm512_cmpgt_epi32_mask(mine, _mm512_set1_epi32(keys[f + 2])), p2, one);
            p3 = _mm512_mask_add_epi32(
                p3, _mm512_cmpgt_epi32_mask(mine, _mm512_set1_epi32(keys[f + 3])), p3, one);
        }
        int32_t place[16];
        _mm512_storeu_si512(place, _mm512_add_epi32(_mm512_add_epi32(p0, p1),
                                                    _mm512_add_epi32(p2, p3)));
        opgs_rank_place(keys, vals, n, e0, place, sorted_keys, sorted_vals);
    }
}

__attribute__((target("avx2")))
static void opgs_rank_sort_avx2(const int32_t* keys, const double* vals, ptrdiff_t n,
                                ptrdiff_t padded, int32_t* sorted_keys,
                                double* sorted_vals) {
    for (ptrdiff_t e0 = 0; e0 < n; e0 += 16) {
        /* a true compare is -1 in its lane: subtracted, it counts */
        const __m256i lo = _mm256_loadu_si256((const __m256i*)(keys + e0));
        const __m256i hi = _mm256_loadu_si256((const __m256i*)(keys + e0 + 8));
        __m256i lo0 = _mm256_setzero_si256(), lo1 = lo0, hi0 = lo0, hi1 = lo0;
        for (ptrdiff_t f = 0; f < padded; f += 2) {
            const __m256i a = _mm256_set1_epi32(keys[f]), b = _mm256_set1_epi32(keys[f + 1]);
            lo0 = _mm256_sub_epi32(lo0, _mm256_cmpgt_epi32(lo, a));
            hi0 = _mm256_sub_epi32(hi0, _mm256_cmpgt_epi32(hi, a));
            lo1 = _mm256_sub_epi32(lo1, _mm256_cmpgt_epi32(lo, b));
            hi1 = _mm256_sub_epi32(hi1, _mm256_cmpgt_epi32(hi, b));
        }
        int32_t place[16];
        _mm256_storeu_si256((__m256i*)place, _mm256_add_epi32(lo0, lo1));
        _mm256_storeu_si256((__m256i*)(place + 8), _mm256_add_epi32(hi0, hi1));
        opgs_rank_place(keys, vals, n, e0, place, sorted_keys, sorted_vals);
    }
}

#endif

static void opgs_rank_sort_plain(const int32_t* keys, const double* vals, ptrdiff_t n,
                                 ptrdiff_t padded, int32_t* sorted_keys,
                                 double* sorted_vals) {
    for (ptrdiff_t e0 = 0; e0 < n; e0 += 16) {
        int32_t place[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        const int32_t* mine = keys + e0;
        for (ptrdiff_t f = 0; f < padded; f++) {
            const int32_t other = keys[f];
            for (int l = 0; l < 16; l++)
                place[l] += other < mine[l];
        }
        opgs_rank_place(keys, vals, n, e0, place, sorted_keys, sorted_vals);
    }
}

typedef void (*opgs_rank_sort_fn)(const int32_t*, const double*, ptrdiff_t, ptrdiff_t,
                                  int32_t*, double*);
static opgs_rank_sort_fn opgs_rank_sort = opgs_rank_sort_plain;
static int opgs_rank_sort_level = 0;

/* The version to run: level 2 AVX-512, 1 AVX2, 0 plain C, -1 the best the CPU runs; a
 * level the CPU (or the build) cannot run gives the next below. Returns the level. */
static int opgs_rank_sort_use(int level) {
    opgs_rank_sort = opgs_rank_sort_plain;
    opgs_rank_sort_level = 0;
#ifdef OPGS_RANK_VERSIONS
    __builtin_cpu_init();
    if ((level < 0 || level >= 2) && __builtin_cpu_supports("avx512f")) {
        opgs_rank_sort = opgs_rank_sort_avx512;
        opgs_rank_sort_level = 2;
    } else if (level != 0 && __builtin_cpu_supports("avx2")) {
        opgs_rank_sort = opgs_rank_sort_avx2;
        opgs_rank_sort_level = 1;
    }
#endif
    (void)level;
    return opgs_rank_sort_level;
}
#endif
