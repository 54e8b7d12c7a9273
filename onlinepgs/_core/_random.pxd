# The core's random numbers: splitmix64, one 64-bit state word, full period; seeded runs are
# reproducible on every platform (no libc rand). Shared by the PGS and SDCA loops.
from libc.stdint cimport uint64_t, int64_t


cdef inline uint64_t splitmix64(uint64_t* s) noexcept nogil:
    cdef uint64_t z
    s[0] += <uint64_t>0x9E3779B97F4A7C15
    z = s[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline double uniform01(uint64_t* s) noexcept nogil:
    """Uniform in [0, 1) with 53 random bits."""
    return (splitmix64(s) >> 11) * (1.0 / 9007199254740992.0)


cdef inline int64_t below(uint64_t* s, int64_t n) noexcept nogil:
    """Uniform in [0, n) (n < 2^32): the high word scaled by n (Lemire), no division."""
    return <int64_t>(((splitmix64(s) >> 32) * <uint64_t>n) >> 32)
