# cython: language_level=3
"""The feature hash, for the compiled readers (cimport it; Python callers use murmurhash3),
and the hashing of one record (`_push_record`: the records of a call and one event alike)."""
from cpython cimport array
from cpython.object cimport PyObject
from libc.stdint cimport uint32_t, uint8_t

cdef extern from *:
    """
    /* an item that cannot change: a str or int key (exactly), a float, int, str, bool or
       None value (exactly); read from the pointers, no reference taken */
    static inline int onlinepgs_unchanging_item(PyObject* key, PyObject* value) {
        PyTypeObject* k = Py_TYPE(key);
        PyTypeObject* v = Py_TYPE(value);
        return (k == &PyUnicode_Type || k == &PyLong_Type)
            && (v == &PyFloat_Type || v == &PyUnicode_Type || v == &PyLong_Type
                || v == &PyBool_Type || value == Py_None);
    }
    """
    bint _unchanging_item "onlinepgs_unchanging_item"(PyObject* key,
                                                      PyObject* value) noexcept

cdef uint32_t murmurhash3_x86_32(const uint8_t* key, Py_ssize_t length,
                                 uint32_t seed) noexcept nogil


cdef enum:
    # the letter of a namespace whose name starts with a NUL byte: letter 0 is RAW_COLUMN
    # (an unhashed, unsigned column index), which would lose the hash's sign
    NUL_NAMESPACE_LETTER = 0x80


cdef inline uint8_t ns_letter(uint8_t first) noexcept nogil:
    """A namespace's letter from its name's first byte (never RAW_COLUMN, 0)."""
    return NUL_NAMESPACE_LETTER if first == 0 else first


cdef class _Entries:
    cdef array.array ns, hashes, values
    cdef Py_ssize_t count, room
    cdef int _size(self, Py_ssize_t n) except -1
    cdef int push(self, uint8_t letter, uint32_t h, double value) except -1
    cdef int truncate(self, Py_ssize_t k) except -1


cdef Py_ssize_t _push_record(object record, Py_ssize_t row, uint32_t hash_seed,
                             _Entries out, list name_out, bint* plain=*) except -1
