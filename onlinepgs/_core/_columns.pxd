# The column map's class (onlinepgs/_core/_columns.pyx), for the compiled paths that map
# a row's columns themselves (the per-event path, onlinepgs/_core/_event.pyx).
from libc.stdint cimport int32_t, int64_t


cdef class ColumnMap:
    cdef int64_t[:, ::1] table  # (column, slot) pairs; column EMPTY: free
    cdef Py_ssize_t mask
    cdef int shift
    cdef int64_t[::1] by_slot
    cdef public Py_ssize_t n_slots

    cdef int _grow(self, Py_ssize_t need) except -1
    cdef void _rehash(self, int64_t[:, ::1] old)
    cdef int slots_into(self, const int32_t* columns, Py_ssize_t n, int32_t* out) except -1
    cdef Py_ssize_t found_into(self, const int32_t* columns, const double* values,
                               Py_ssize_t n, int32_t* slots, double* kept) noexcept
