# cython: language_level=3
"""The feature hash, for the compiled readers (cimport it; Python callers use murmurhash3)."""
from libc.stdint cimport uint32_t, uint8_t

cdef uint32_t murmurhash3_x86_32(const uint8_t* key, Py_ssize_t length,
                                 uint32_t seed) noexcept nogil
