# cython: language_level=3
"""The svmlight reader's number parser, for the other compiled readers (cimport it)."""

cdef int parse_number(const char* s, const char* e, double* out) noexcept nogil
