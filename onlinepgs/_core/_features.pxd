# THE builder of one hashed row (docs/design/features.md, "In the compiled core"): a
# row's own features masked and signed, then its interactions, sorted by column with
# duplicates summed in the order they were made. Every row is built by it: the chunks of
# `rows_to_csr` (to_matrix), the rows the PGS pass crosses as it reaches them (`Crossing`,
# `cross_row`) and the per-event rows (_event.pyx); so the three are bit for bit the same.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t

cdef enum:
    MAX_ORDER = 3  # pairs and triples


# The interactions and hashing rows are built for, and the scratch of one row, grown (by
# `builder_reserve`) to the widest row built so far.
cdef struct RowBuilder:
    const uint8_t* letters  # (n_inter, MAX_ORDER): each interaction's letters
    const int32_t* orders  # (n_inter,): 2 or 3
    Py_ssize_t n_inter
    uint32_t mask  # 2**n_bits - 1
    int spare_bits  # 31 - n_bits: the low bits a column leaves in a nonnegative int32
    # room for rows of `entries_room` namespaced entries that make `room` entries
    Py_ssize_t entries_room, room
    # per interaction position, the row's entries its letter takes: positions, hashes
    # and values (MAX_ORDER lists of entries_room each)
    int64_t* positions
    uint32_t* gathered_hashes
    double* gathered_values
    uint32_t* keys  # the entries' columns
    double* vals  # the entries' signed values, in the order they were made
    int32_t* sorted_keys  # the sorted keys (`unique`'s, or a long row's columns)
    double* sorted_vals  # their values
    int32_t* unique  # a short row's sort keys: column << spare_bits | number (padded)
    uint64_t* wide  # a long row's sort keys: column << 32 | number


cdef void builder_init(RowBuilder* b, int n_bits, const uint8_t* letters,
                       const int32_t* orders, Py_ssize_t n_inter) noexcept nogil
cdef int builder_reserve(RowBuilder* b, Py_ssize_t entries, Py_ssize_t bound) except -1
cdef void builder_release(RowBuilder* b) noexcept nogil
cdef int check_row_bound(Py_ssize_t bound, str what) except -1
cdef Py_ssize_t row_bound(const RowBuilder* b, const uint8_t* ns, Py_ssize_t start,
                          Py_ssize_t stop) noexcept nogil
cdef Py_ssize_t emit_row(RowBuilder* b, const uint8_t* ns, const uint32_t* hashes,
                         const double* values, Py_ssize_t start,
                         Py_ssize_t stop) noexcept nogil
cdef Py_ssize_t build_row(RowBuilder* b, const uint8_t* ns, const uint32_t* hashes,
                          const double* values, Py_ssize_t start, Py_ssize_t stop,
                          double* out_data, int32_t* out32, int64_t* out64) noexcept nogil


# A chunk of namespaced rows that the PGS pass crosses one row at a time (`row_crossed`,
# _pass.pxd): no crossed chunk is made; `cross_row` builds row r into a buffer of the
# chunk's widest row.
cdef struct CrossRows:
    # the chunk (NamespacedRows' arrays)
    const uint8_t* ns
    const uint32_t* hashes
    const double* values
    const int64_t* indptr
    Py_ssize_t n_rows
    RowBuilder build  # sized for the chunk's widest row (`build.room` entries)
    # the pass's rows: two slots of build.room entries, row_idx[s * room:] and
    # row_vals[s * room:]; the row at position i of the pass's order goes to slot i % 2,
    # made ahead (while the row before it is learned) or when first reached, once for
    # every run of a lockstep pass (`made_at`: the position each slot holds, or -1)
    int32_t* row_idx
    double* row_vals
    Py_ssize_t made_at[2]
    Py_ssize_t made_nnz[2]


cdef Py_ssize_t cross_row(CrossRows* cx, Py_ssize_t r, int32_t* idx,
                          double* vals) noexcept nogil
cdef Py_ssize_t emit_crossed(CrossRows* cx, Py_ssize_t r) noexcept nogil


cdef class Crossing:
    cdef CrossRows c
    cdef object arrays  # what c points into, kept alive
    cdef readonly Py_ssize_t entries  # the sum of the rows' bounds (`row_bound`)
