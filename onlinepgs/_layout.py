"""THE layout of a PGS solver state's per-coordinate memory: its fields, the arrays that
grow with the model's width, their bytes, and which of them a model file saves.

One definition that every reader of the layout takes: `onlinepgs._core.PGSState`
allocates its arrays from `StateLayout.arrays`, ``max_model_bytes`` budgets a width with
`StateLayout.nbytes` (`onlinepgs.pgs`), and the model file's schema checks a stored
state's arrays against `StateLayout.saved` (`onlinepgs.model_io.schema`,
`onlinepgs.model_io.staterows`). Pure Python (no numpy, no compiled code): any module,
the command's too, can import it.

A state of K problems over ``dim`` coordinates (the intercept's and one per feature)
holds, besides a few arrays of K entries:

``block_a`` (dim, K, S) float64, saved
    The S fields of each (coordinate, problem) side by side (`fields`): ``lam`` (the
    sum of gradients lambda), ``phi`` (p < 2: the l_q map of lambda), ``acc`` (an
    averaged iterate's lazy sum), ``mark`` (p < 2, averaged: the running sum at the last
    touch), ``key`` (l1 on a ball, p = 2: the heap's key), ``on`` (l1, p = 2, averaged:
    the flag of a folded sum); in the adaptive geometry ``sq`` (the sum of the squared
    scaled gradients), ``stab`` (the stabilizer (delta + sqrt(sq)) / eta) and
    ``inv_scale`` (one over the largest |x_j| seen, 0 before), after ``lam``; at p < 2
    ``phi`` in place of ``sq``, ``stab`` unused (the stabilizer is one scalar a problem).
``snap_a``, ``snapv_a`` (dim, K) float64 and int64, saved
    The random iterate's snapshots and their versions; in the adaptive geometry's
    averages, each (coordinate, problem)'s settled sum of weighted iterates and the step
    it holds up to; one row otherwise.
``grad_acc`` (dim K,) float64, ``is_touched`` (dim,) uint8, ``touched`` (dim,) int64
    A mini-batch's (``batch_size > 1``) gradient and the coordinates it touched; one
    entry otherwise (``grad_acc``: dim entries in the adaptive geometry, a row's weights
    kept from its margin for its step).
``seen_a`` (dim // SEEN_DENSE + 1,) int64
    The coordinates the passes reached, for the states that sweep them (`keeps_seen`);
    one entry otherwise. Allocated with ``np.empty``: its pages are mapped only where
    written, but the budget counts them.

Examples
--------
>>> from onlinepgs._layout import StateLayout
>>> layout = StateLayout(p=2.0, iterate="weighted2", radius="auto")
>>> layout.fields, layout.per_feature
(('lam', 'acc'), 18)
>>> layout.nbytes(2**20 + 1)  # the bytes of a state over 2**20 features
18874425
>>> StateLayout(p=2.0, iterate="weighted2", l1=0.1, radius="auto").fields
('lam', 'acc', 'key', 'on')
"""

__all__ = ["StateLayout", "AVERAGED", "SAVED", "SEEN_DENSE", "L1_MARKS_FIELDS", "scales_of"]

# the iterates kept as lazy averages (weights 1, t, t^2)
AVERAGED = ("average", "weighted", "weighted2")
# a state's per-coordinate arrays that a model file saves (the rest is scratch)
SAVED = ("block_a", "snap_a", "snapv_a")
# the list of coordinates reached is dropped past dim / SEEN_DENSE of them, so it needs
# room for dim // SEEN_DENSE + 1 (the compiled core's enum of the same name; checked
# equal when _pgs is imported)
SEEN_DENSE = 4

# the block's fields of an l1 average (p = 2) as states were written before its sums were
# folded with a flag (a model file may hold them: `onlinepgs._core._state_dict.
# unfold_marks_layout` reads them into today's `StateLayout.fields`)
L1_MARKS_FIELDS = ("lam", "acc", "mark", "markp", "ver")

_ITEMSIZE = {"f8": 8, "i8": 8, "u1": 1}


class StateLayout:
    """The per-coordinate layout of a PGS state of one configuration.

    Parameters
    ----------
    p, iterate, l1, radius, batch_size, n_problems
        As `onlinepgs._core.PGSState` takes them (``radius`` None: R^n; "auto" or a
        number: a ball). Other keywords of a state's configuration are accepted and
        ignored (they do not change the layout), so ``StateLayout(**state.config())``
        works.

    Attributes
    ----------
    fields : tuple of str
        The doubles of one (coordinate, problem) in ``block_a``, in their order.
    keeps_norm : bool
        Whether the state keeps N, the l_q map's running sum of lambda (p < 2, or the
        ball's norm at p = 2; not with l1).
    keeps_seen : bool
        Whether the state keeps the list of coordinates reached (it sweeps them).
    block_bytes : int
        Bytes of one coordinate in ``block_a`` (its K problems' fields).
    per_feature : int
        Bytes a feature costs, asymptotically (the list of coordinates reached counts
        8 / SEEN_DENSE = 2).
    """

    def __init__(self, *, p=2.0, iterate="last", l1=0.0, radius=None, batch_size=1,
                 n_problems=1, geometry="global", **_others):
        p, l1 = float(p), float(l1)
        averaged = iterate in AVERAGED
        bounded = radius is not None
        fields = ["lam"]
        if geometry == "adaptive":
            # per coordinate: minus the sum of scaled gradients, the sum of their squares,
            # the stabilizer they give and one over the feature's scale (the largest |x_j|
            # seen; a copy per problem, so that a coordinate's update reads one place), in
            # this order (_core/_adaptive.pxd's AD_* offsets), docs/design/adaptive.md
            # p < 2: its one scalar stabilizer a problem leaves n_j's place to phi_j, the
            # l_q map of lam (the global geometry's), and stab unused (0)
            fields += ["sq" if p == 2.0 else "phi", "stab", "inv_scale"]
        elif p != 2.0:
            fields.append("phi")
        # the adaptive geometry's averages keep their settled sums and the step they hold
        # up to in snap_a and snapv_a (_core/_adaptive_avg.pxd), not in the block
        # (p < 2 keeps the global geometry's acc and mark: its iterate is s_c phi_j)
        self.adaptive_average = geometry == "adaptive" and averaged and p == 2.0
        if averaged and not self.adaptive_average:
            fields.append("acc")
            if p != 2.0:
                fields.append("mark")
        if l1 > 0.0 and p == 2.0 and bounded:
            fields.append("key")  # the heap of the active coordinates on the ball
        if l1 > 0.0 and p == 2.0 and averaged and not self.adaptive_average:
            fields.append("on")  # an average's sums folded, a flag a coordinate
        self.fields = tuple(fields)
        self.n_problems = int(n_problems)
        self.random = iterate == "random"
        self.batched = int(batch_size) > 1
        # the adaptive geometry keeps a row's weights from its margin for its step in
        # grad_acc (an entry per row entry: at most dim, pages mapped only where written),
        # or with batches two sums a (coordinate, problem)
        self.row_cache = geometry == "adaptive"
        # N, the l_q map's running sum (p < 2, or a ball's norm at p = 2), without l1 (on
        # a ball l1 keeps the norm of the soft thresholds in its heaps)
        # (the adaptive geometry at p < 2 too: its iterate is the l_q map's)
        self.keeps_norm = ((p != 2.0 or bounded) and l1 == 0.0
                           and (geometry != "adaptive" or p != 2.0))
        # the sweeps: N's upkeep; l1's recounts of the ball's norm and of N, and the folds
        # of its averages
        # (the adaptive geometry's l1 at p < 2 recounts N(thr) as the global one does)
        self.keeps_seen = self.keeps_norm or (l1 > 0.0 and (bounded or p != 2.0 or averaged)
                                              and (geometry != "adaptive" or p != 2.0))
        K = self.n_problems
        # the bytes of a coordinate in the block (its K problems' fields)
        self.block_bytes = 8 * K * len(self.fields)
        self.per_feature = (self.block_bytes
                            + (16 * K if self.random or self.adaptive_average else 0)
                            + ((16 if self.row_cache else 8) * K + 9 if self.batched
                               else 0)
                            + (8 if self.row_cache and not self.batched else 0)
                            + (8 // SEEN_DENSE if self.keeps_seen else 0))

    @classmethod
    def of(cls, config):
        """The layout of a state's configuration (`PGSState.config`)."""
        return cls(**config)

    def offset(self, field):
        """The field's index in a (coordinate, problem)'s doubles, or None."""
        return self.fields.index(field) if field in self.fields else None

    def arrays(self, dim):
        """{name: (shape, dtype)} of every array whose size grows with the width, for a
        state of `dim` coordinates (dtype as NumPy's "f8", "i8", "u1")."""
        K = self.n_problems
        rows = dim if self.random or self.adaptive_average else 1
        scratch = dim if self.batched else 1
        # a step of several rows sums a gradient per (coordinate, problem), two sums in
        # the adaptive geometry (the gradient and its weighted squares, `batch_ad`)
        grads = (2 * scratch * K if self.batched and self.row_cache
                 else dim if self.row_cache else scratch * K)
        return {"block_a": ((dim, K, len(self.fields)), "f8"),
                "snap_a": ((rows, K), "f8"), "snapv_a": ((rows, K), "i8"),
                "grad_acc": ((grads,), "f8"), "is_touched": ((scratch,), "u1"),
                "touched": ((scratch,), "i8"),
                "seen_a": ((dim // SEEN_DENSE + 1 if self.keeps_seen else 1,), "i8")}

    def saved(self, dim):
        """{name: (shape, dtype)} of the per-coordinate arrays a model file holds."""
        arrays = self.arrays(dim)
        return {name: arrays[name] for name in SAVED}

    def row_arrays(self, dim):
        """The saved arrays with a row per coordinate, sorted by name (those a file may
        store by their non-zero rows, `onlinepgs.model_io.staterows`)."""
        return sorted(name for name, (shape, _) in self.saved(dim).items()
                      if shape[0] == dim)

    def nbytes(self, dim):
        """Bytes of the arrays that grow with the width, for `dim` coordinates: what
        `arrays` allocates, exactly."""
        total = 0
        for shape, dtype in self.arrays(dim).values():
            count = 1
            for n in shape:
                count *= n
            total += count * _ITEMSIZE[dtype]
        return total

    def max_width(self, budget):
        """The most features (dim - 1) whose state takes at most `budget` bytes (-1 when
        not even none fit)."""
        if self.nbytes(1) > budget:
            return -1
        low, high = 0, budget + 1  # fits; does not (a feature takes 8 bytes or more)
        while high - low > 1:  # nbytes grows with dim: the last width that fits
            mid = (low + high) // 2
            if self.nbytes(mid + 1) <= budget:
                low = mid
            else:
                high = mid
        return low


def scales_of(inv_scale):
    """The adaptive geometry's scales s_j from its field ``inv_scale`` (1 / s_j, 0 where no
    value was seen: scale 1 there)."""
    import numpy as np  # this module's layouts need no NumPy; the arrays do

    seen = inv_scale > 0.0
    scales = np.ones(inv_scale.shape[0])
    scales[seen] = 1.0 / inv_scale[seen]
    return scales
