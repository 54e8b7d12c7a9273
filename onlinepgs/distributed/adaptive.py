"""One round of the adaptive geometry on lanes: a lane's run over its slice and the merge.

The adaptive geometry (docs/design/adaptive.md) keeps per (coordinate, problem) the sum
U_j of the scaled gradients (the block's ``lam`` = -U_j, the centered form's -z_j), the
sum n_j of their squares (``sq``), the stabilizer ``stab = (delta + sqrt(n_j)) / eta``
and one over the feature's scale (``inv_scale``, 1 / s_j); its weight is
``v_j = lam_j / (sigma t + stab_j)``. A round (docs/design/dask.md, "The adaptive
geometry"):

* a **lane** runs from a copy of the global state, counting its steps once, and sends
  back the final fields of the coordinates its rows reached (`run_lane`);
* the **merge** (`merge_round`) brings every lane to the merged scales, the largest any
  lane reached, and adds the mean of the lanes' changes: with n lanes in the round,

      s_j     = max over the lanes of s_j^L
      n_j     = n_j^0' + (1/n) sum_L (n_j^L - n_j^0L) (s_j^L / s_j)^2
      -U_j    = lam_j^0' + (1/n) sum_L [(lam_j^L - lam_j^0L) - C_j^L] (s_j^L / s_j) + C_j
      t       = t^0 + the most steps a lane took

  where ``x^0'`` is the round's start raised to the merged scale and ``x^0L`` to the
  lane's, as the core raises a scale (`_raised` in _core/_adaptive.pxd: n_j shrinks by
  (s_old / s_new)^2 and lam moves so that the weight v_j stays, at the round's start
  sigma t), and in the centered form ``C_j^L = (stab_j^L - stab_j^0L) v_j^0`` is the
  lane's stabilizer growth times the weight at the round's start, ``C_j`` the merged
  one's (uncentered: 0). A lane's gradient taken at scale s^L is the same gradient at
  the merged scale times s^L / s, its square times (s^L / s)^2: that is what the ratios
  do. The centered term is taken out of each lane and put back once, at the merged n_j,
  so that it grows with the square root of the merged sum rather than the mean of the
  lanes' square roots.

What it computes: with one lane, the lane's state itself (a single round is the single
process bit for bit, rounds to rounding at most: the merge copies the lane's fields).
With one step per lane and round, the merged round is the adaptive geometry's mini-batch
step whose batch is the round's rows together (its mean gradient, its mean squares, its
centered term at the step's start, t += 1), exactly (to rounding) wherever each lane's
margins are those of the batch: wherever, for each lane and each feature of its rows
that had a weight at the round's start, no other lane's rows raised that feature's scale
beyond the lane's own (always on binary or one-hot features, whose seen scales are 1).
Where another lane did raise it, the lane's margin read the feature at its own smaller
scale: the merge converts the gradient, not the margin. Longer slices: each lane's steps
are taken at its own iterate (delayed gradients, as in the global geometry), and the
merged iterate is, up to the centered term and the scales, the mean of the lanes'.
"""
import numpy as np

from onlinepgs._layout import StateLayout
from onlinepgs.distributed.rounds import slice_coords, train_pieces

__all__ = ["AdaptiveLaneResult", "merge_round", "run_lane"]

# the block's fields (onlinepgs._layout, the adaptive geometry's order)
_FIELDS = StateLayout(geometry="adaptive").fields
_LAM, _SQ, _STAB, _INV = (_FIELDS.index(name) for name in ("lam", "sq", "stab", "inv_scale"))

# the lane's counters and sums behind `online_stats_`, each the round's increment
_COUNTS = ("n_examples", "n_mistakes", "n_mistakes_reported")
_SUMS = ("sum_weight", "sum_loss", "sum_weighted_loss", "sum_weighted_loss_reported")
_ARRAYS = {"regret": "regret_a", "sum_conj": "sum_conj_a",
           "sum_step_loss": "sum_step_loss_a", "sum_reg": "sum_reg_a"}


class AdaptiveLaneResult:
    """What a lane of the adaptive geometry sends back after one round.

    Attributes
    ----------
    steps, rows, dim, span : int
        As `onlinepgs.distributed.rounds.LaneResult` has them.
    coords : ndarray of int64
        The coordinates whose fields moved in the lane (sorted).
    fields : ndarray of shape (len(coords), K, 4)
        Their fields at the lane's end (lam, sq, stab, inv_scale).
    stats : dict
        The round's increments of the counters and sums behind `online_stats_`.
    diverged_row : tuple or None
        (piece, row) where the loss's derivative overflowed (the lane's work is void).
    """

    __slots__ = ("steps", "rows", "dim", "span", "coords", "fields", "stats",
                 "diverged_row", "diverged_at", "radius", "t_step")


def _zero_counters(lane):
    """The lane's counters and statistics at zero, so that after its run they hold the
    round's increments (a copy keeps the global state's)."""
    for name in _COUNTS:
        setattr(lane, name, 0)
    for name in _SUMS:
        setattr(lane, name, 0.0)
    lane.own_weight = 0.0
    for name in _ARRAYS.values():
        arr = getattr(lane, name)
        arr[...] = np.where(np.isnan(arr), np.nan, 0.0)  # unknown sums stay unknown


def run_lane(base, pieces, classifier):
    """Advance a copy of `base` (an adaptive `PGSState`, only read) over one slice, each
    step counted once; return its `AdaptiveLaneResult`. `pieces` as
    `onlinepgs.distributed.rounds.run_lane` takes them. The copy is O(dim) a lane and
    round (the global geometry's lanes sync only what the merge changed)."""
    lane = base.copy()
    _zero_counters(lane)
    out = AdaptiveLaneResult()
    out.t_step = 1
    if not train_pieces(lane, pieces, classifier, out):
        return out
    out.radius = lane.radius
    out.steps = int(lane.t - base.t)
    out.dim = int(lane.dim)
    out.span = int(lane.span)
    coords = slice_coords(pieces, lane.dim)
    if coords is None:
        coords = np.arange(lane.dim, dtype=np.int64)
    block = np.asarray(lane.block_a)[coords]
    start = _start_fields(np.asarray(base.block_a), coords)
    moved = (block != start).any(axis=(1, 2))
    out.coords = np.ascontiguousarray(coords[moved])
    out.fields = np.ascontiguousarray(block[moved])
    out.stats = {name: int(getattr(lane, name)) for name in _COUNTS}
    out.stats.update({name: float(getattr(lane, name)) for name in _SUMS})
    out.stats["loss0_max"] = float(lane.loss0_max)
    out.stats.update({key: np.array(getattr(lane, name)) for key, name in _ARRAYS.items()})
    return out


def _start_fields(block, coords):
    """The global block's fields at `coords`, zero beyond its width (a lane's wider rows
    reach coordinates the global state has not allocated yet)."""
    inside = coords < block.shape[0]
    out = np.zeros((coords.shape[0],) + block.shape[1:])
    out[inside] = block[coords[inside]]
    return out


def _raised(lam, sq, inv_old, inv_new, sigma_t, delta, eta):
    """The fields (lam, sq, stab) of coordinates raised from scale 1 / inv_old to
    1 / inv_new as the core raises one (`_raised`, l1 = 0): where the feature was seen
    (inv_old > 0), its scale grows and its sum of squares is positive, sq shrinks by
    (s_old / s_new)^2 and lam moves so that the weight at sigma t stays."""
    stab = (delta + np.sqrt(sq)) / eta
    grown = (inv_old > 0.0) & (inv_new < inv_old) & (sq > 0.0)
    if not grown.any():
        return lam, sq, stab
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(grown, inv_new / np.where(grown, inv_old, 1.0), 1.0)
        den = sigma_t + stab
        sq_new = np.where(grown, sq * (ratio * ratio), sq)
        stab_new = np.where(grown, (delta + np.sqrt(sq_new)) / eta, stab)
        lam_new = np.where(grown & (den > 0.0), lam * ((sigma_t + stab_new) / den), lam)
    return lam_new, sq_new, stab_new


def merge_round(state, results):
    """Add one round's `AdaptiveLaneResult`s (in lane order) into the global adaptive
    `state` (the module's formulas). Returns the coordinates the merge changed."""
    results = [r for r in results if r is not None and r.steps]
    if not results:
        return np.zeros(0, dtype=np.int64)
    if any(r.t_step != 1 for r in results):
        raise ValueError("the adaptive geometry's lanes count their steps once")
    dim = max(r.dim for r in results)
    if dim > state.dim:
        state.ensure_dim(dim - 1)
    state.span = max([state.span] + [r.span for r in results])
    _add_stats(state, results)
    block = np.asarray(state.block_a)
    if len(results) == 1:
        # one lane: its fields are the merged state's, as they are
        only = results[0]
        block[only.coords] = only.fields
        state.t += only.steps
        return only.coords
    coords = np.unique(np.concatenate([r.coords for r in results]))
    start = block[coords]
    lam0, sq0, inv0 = start[..., _LAM], start[..., _SQ], start[..., _INV]
    sigma_t = state.sigma * float(state.t)
    delta, eta, centered = state.delta, state.eta, bool(state.centered)
    # each lane's fields at the union of the round's coordinates (the start's where
    # the lane left one alone)
    lanes = []
    for r in results:
        fields = start.copy()
        fields[np.searchsorted(coords, r.coords)] = r.fields
        lanes.append(fields)
    # the merged scale, the largest: the smallest positive 1 / s (0 where none saw it)
    invs = np.stack([inv0] + [f[..., _INV] for f in lanes])
    positive = np.where(invs > 0.0, invs, np.inf)
    inv_m = positive.min(axis=0)
    inv_m[np.isinf(inv_m)] = 0.0
    stab0 = (delta + np.sqrt(sq0)) / eta
    with np.errstate(divide="ignore", invalid="ignore"):
        den0 = sigma_t + stab0
        v0 = np.where(den0 > 0.0, lam0 / np.where(den0 > 0.0, den0, 1.0), 0.0)
    lam_m, sq_m, stab_m = _raised(lam0, sq0, inv0, inv_m, sigma_t, delta, eta)
    grad = np.zeros_like(lam0)
    squares = np.zeros_like(lam0)
    for fields in lanes:
        inv_l = fields[..., _INV]
        lam_l, sq_l, _ = _raised(lam0, sq0, inv0, inv_l, sigma_t, delta, eta)
        dlam = fields[..., _LAM] - lam_l
        dsq = fields[..., _SQ] - sq_l
        if centered:
            dlam = dlam - (fields[..., _STAB] - (delta + np.sqrt(sq_l)) / eta) * v0
        # a gradient at scale s^L is the same gradient at s times s^L / s
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(inv_l > 0.0, inv_m / np.where(inv_l > 0.0, inv_l, 1.0), 1.0)
        grad += dlam * ratio
        squares += dsq * (ratio * ratio)
    n = float(len(results))
    sq_new = sq_m + squares / n
    stab_new = (delta + np.sqrt(sq_new)) / eta
    lam_new = lam_m + grad / n
    if centered:
        lam_new = lam_new + (stab_new - stab_m) * v0
    merged = np.empty_like(start)
    merged[..., _LAM] = lam_new
    merged[..., _SQ] = sq_new
    merged[..., _STAB] = stab_new
    merged[..., _INV] = inv_m
    block[coords] = merged
    state.t += max(r.steps for r in results)
    return coords


def _add_stats(state, results):
    """The lanes' counters and sums added into the state's; the worst first loss is the
    largest any lane saw."""
    for r in results:
        s = r.stats
        for name in _COUNTS + _SUMS:
            setattr(state, name, getattr(state, name) + s[name])
        for key, name in _ARRAYS.items():
            arr = getattr(state, name)
            arr += s[key]
        state.loss0_max = max(state.loss0_max, s["loss0_max"])
