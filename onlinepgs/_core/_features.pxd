# The building of one hashed row (masked, signed, interactions, canonical): the chunks
# of `rows_to_csr` and the per-event rows (_event.pyx) share it.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t

cdef enum:
    MAX_ORDER = 3  # pairs and triples

# A row's entries while it is built: keys[n] = column << 32 | n (sorting the keys sorts
# by column, then by the order the entries were made: duplicates are summed in that
# order, deterministically) and vals[n] the n-th entry's signed value.
ctypedef struct Row:
    uint64_t* keys
    double* vals

cdef Py_ssize_t row_bound(const uint8_t* ns, Py_ssize_t start, Py_ssize_t stop,
                          const uint8_t* letters, const int32_t* orders,
                          Py_ssize_t n_inter) noexcept nogil

cdef Py_ssize_t build_row(const uint8_t* ns, const uint32_t* hashes, const double* values,
                          Py_ssize_t start, Py_ssize_t stop, const uint8_t* letters,
                          const int32_t* orders, Py_ssize_t n_inter, uint32_t mask,
                          int64_t** lists, Row row, double* out_data, int32_t* out32,
                          int64_t* out64) noexcept nogil
