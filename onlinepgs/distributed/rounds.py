"""One round of distributed PGS: a lane's run over its slice and the driver's merge.

No Dask here: the driver (`onlinepgs.distributed.driver`) schedules these functions
through its tasks (`onlinepgs.distributed.tasks`), and the tests call them directly. The
method (see docs/design/dask.md):

* a **lane** starts from the global state (`PGSState.fork`: lambda, phi, N, M, t, the
  radius; counters and averaged sums at zero) and runs plain PGS over its slice in the
  compiled core;
* the **driver** adds the lanes' changes into the global state (`PGSState.absorb`):
  lambda += the sum of the delta lambdas, t += the sum of the steps, the statistics add
  up, the radius of an "auto" ball is the largest, and the averaged sums add up with the
  round's weights rescaled so that they are exactly the weights of the steps the round
  stands for (`average_factor`).
"""
import numpy as np
import scipy.sparse as sp

from onlinepgs._core import ITERATES

_AVERAGED = {"average": 0, "weighted": 1, "weighted2": 2}


class LaneResult:
    """What a lane sends back to the driver after one round (small: sparse arrays).

    Attributes
    ----------
    steps : int
        Solver steps the lane took (its delta t).
    rows : int
        Rows it consumed.
    dim : int
        Its state's number of coordinates (1 + features; it grows with wide rows).
    span : int
        1 + the largest coordinate its rows reached (`PGSState.span`).
    idx, dlam : ndarray
        Flat entries ``coordinate * K + problem`` whose lambda moved, and by how much.
    cum : ndarray of shape (K,)
        Its averaged sums' weight on every coordinate it did not touch.
    avg_idx, avg_val : ndarray
        Where its averaged sums differ from ``cum * phi`` (phi of the round's start).
    stats : dict
        The round's increments of the counters and sums behind `online_stats_`.
    diverged_row : int or None
        Row of the slice whose loss derivative overflowed (the lane's work is void).
    """

    __slots__ = ("steps", "rows", "dim", "span", "idx", "dlam", "cum", "avg_idx", "avg_val",
                 "stats", "diverged_row", "diverged_at", "radius", "t_step")

    def delta(self):
        return (self.idx, self.dlam, self.cum, self.avg_idx, self.avg_val)


class LaneSlot:
    """A lane's state kept from round to round (threads share memory with the driver).

    The next round brings it up to the global state by copying only the coordinates the
    last merge changed (`PGSState.sync_from`), O(changed) where a fork is O(dim).
    """

    __slots__ = ("state", "round")

    def __init__(self):
        self.state = None
        self.round = None


# Copying a few scattered coordinates beats copying all of them only when they are
# few: whole arrays copy in order (memcpy speed), chosen coordinates miss the cache on
# each. Both give the same state.
_SPARSE_FRACTION = 1 / 16


def _lane_state(base, slot, changed, round_no):
    """A fork of `base`: the slot's state synced (over the merge's coordinates when they
    are few and nothing else moved, else over all, into memory already in use), or a
    new fork if the slot has none of the right shape."""
    lane = None if slot is None else slot.state
    if (lane is not None and lane.dim == base.dim and lane.n_problems == base.n_problems
            and lane.iterate == _lane_iterate(base)):
        sparse = (changed is not None and round_no is not None
                  and slot.round == round_no - 1 and not lane.n_rescales
                  and changed.size < _SPARSE_FRACTION * base.dim)
        lane.sync_from(base, changed if sparse else None)
    else:
        lane = base.fork()
    if slot is not None:
        slot.state, slot.round = lane, round_no
    return lane


def _lane_iterate(state):
    """The iterate code of a lane forked from `state` (averaged ones keep theirs)."""
    averaged = {ITERATES[k] for k in _AVERAGED}
    return state.iterate if state.iterate in averaged else ITERATES["last"]


def slice_coords(pieces, dim):
    """Every coordinate a run over the pieces can touch (sorted): the intercept's 0 and
    1 + the columns of their rows. None (search them all, in order) for dense rows, or
    when the rows hold so many entries that that is cheaper."""
    ranges = []
    for X, _, _, order, _ in pieces:
        if not sp.issparse(X):
            return None
        if order.shape[0]:
            lo, hi = int(order.min()), int(order.max()) + 1
            ranges.append((X, X.indptr[lo], X.indptr[hi]))
    if sum(b - a for _, a, b in ranges) >= _SPARSE_FRACTION * dim:
        return None
    mask = np.zeros(dim, dtype=bool)
    mask[0] = True
    for X, a, b in ranges:
        mask[X.indices[a:b] + 1] = True
    return np.flatnonzero(mask).astype(np.int64)


def run_lane(base, pieces, classifier, n_lanes=1, slot=None, changed=None, round_no=None):
    """Advance a fork of `base` over one slice; return its `LaneResult`.

    pieces: ``(X, y_core, sample_weight, order, row_power_sums)`` runs, trained in turn
    (rows ``order`` of each; X a canonical CSR float64 matrix or a C-contiguous float64
    array, y_core the encoded targets, as `PGSState.run` takes them). Pieces must hold
    whole mini-batches but the last, or the steps would differ from one run over their
    rows. `base` is only read: several lanes may run from the same global state at
    once (threads), each on its own fork.

    With ``n_lanes`` lanes in the round, each local step counts for n_lanes steps: t
    moves by n_lanes and lambda by n_lanes times the step's gradient, so the lane's
    iterate is the one the global state would reach if every lane took the same steps.
    (Counting its steps once, a lane that settles on the optimum of its rows would
    correct the whole error of the round's start, and the sum of n_lanes such
    corrections overshoots n_lanes - 1 times over.) What it sends back is its own share:
    delta lambda = (its lambda - the start's) / n_lanes and delta t = its steps.

    ``slot``, ``changed`` (the coordinates the last merge changed, None if it moved M)
    and ``round_no`` let a lane reuse its state from the previous round (`LaneSlot`).

    The global geometry's: the adaptive geometry's lanes are
    `onlinepgs.distributed.adaptive.run_lane`.
    """
    lane = _lane_state(base, slot, changed, round_no)
    lane.t_step = n_lanes
    out = LaneResult()
    if not train_pieces(lane, pieces, classifier, out):
        return out
    out.radius = lane.radius
    out.t_step = n_lanes
    out.steps = int(lane.t - base.t) // n_lanes
    out.dim = int(lane.dim)
    out.span = int(lane.span)
    _lane_delta(base, lane, out, slice_coords(pieces, lane.dim))
    out.stats = dict(
        n_examples=int(lane.n_examples), n_mistakes=int(lane.n_mistakes),
        sum_weight=float(lane.sum_weight), sum_loss=float(lane.sum_loss),
        sum_weighted_loss=float(lane.sum_weighted_loss), loss0_max=float(lane.loss0_max),
        sum_weighted_loss_reported=float(lane.sum_weighted_loss_reported),
        n_mistakes_reported=int(lane.n_mistakes_reported),
        regret=np.array(lane.regret_a), sum_conj=np.array(lane.sum_conj_a),
        sum_step_loss=np.array(lane.sum_step_loss_a), sum_reg=np.array(lane.sum_reg_a))
    return out


def train_pieces(lane, pieces, classifier, out):
    """Run `lane` over the pieces in turn (growing it for wider rows); count their rows
    into ``out.rows``. False, with ``out.diverged_row`` (piece, row) and
    ``out.diverged_at`` set, where a row's loss derivative overflowed (the rest is not
    run); else True, ``out.diverged_row`` None."""
    out.rows = 0
    out.diverged_row = None
    for number, (X, y_core, sw, order, rps) in enumerate(pieces):
        width = X.shape[1]
        if width + 1 > lane.dim:
            lane.ensure_dim(width)
        if sp.issparse(X):
            lane.run(X.data, X.indices, X.indptr, width, y_core, sw, order, classifier, rps)
        else:
            lane.run(X.ravel(), None, None, width, y_core, sw, order, classifier, rps)
        if lane.diverged:
            out.diverged_row = (number, int(lane.diverged_row))
            out.diverged_at = f"row {lane.diverged_row} of piece {number}"
            return False
        out.rows += int(order.shape[0])
    return True


def _lane_delta(base, lane, out, coords=None):
    """The lane's change of lambda and its averaged sums, sparse where it can be."""
    K = lane.n_problems
    idx, dlam, avg = lane.delta_from(base, coords)
    out.idx, out.dlam = idx, dlam
    if avg is None:
        out.cum = np.zeros(K)
        out.avg_idx, out.avg_val = np.zeros(0, dtype=np.int64), np.zeros(0)
    elif lane.n_restarts or (lane.p != 2.0 and lane.n_rescales):
        # M moved (p < 2: the lane settled every coordinate in new units) or a running sum
        # restarted (every coordinate's sum took it in): send its sums whole
        phi, cum = np.asarray(lane.phi_a), np.asarray(lane.cum_a)[None, :]
        if lane.p == 2.0:
            total = phi * cum - np.asarray(lane.acc_a)
        else:
            total = np.asarray(lane.acc_a) + phi * (cum - np.asarray(lane.mark_a))
        out.cum = np.zeros(K)
        out.avg_idx = np.arange(total.size, dtype=np.int64)
        out.avg_val = np.ascontiguousarray(total.ravel())
    else:
        out.cum = np.array(lane.cum_a)
        out.avg_idx, out.avg_val = idx, avg


def _weight_sum(kind, a, b):
    """sum of t^kind for t in (a, b], exactly (Python integers)."""
    def upto(n):
        if kind == 0:
            return n
        if kind == 1:
            return n * (n + 1) // 2
        return n * (n + 1) * (2 * n + 1) // 6
    return upto(b) - upto(a)


def _spaced_sum(kind, a, spacing, n):
    """sum of (a + spacing * i)^kind for i = 1..n, exactly (Python integers)."""
    s1 = n * (n + 1) // 2
    if kind == 0:
        return n
    if kind == 1:
        return n * a + spacing * s1
    return n * a * a + 2 * a * spacing * s1 + spacing * spacing * (n * (n + 1) * (2 * n + 1) // 6)


def average_factor(iterate, t0, lane_steps, spacing=1):
    """Scale of the lanes' averaged sums in a round that starts at step t0.

    A lane's local step i has local step count ``t0 + spacing * i`` (spacing = the
    lanes of the round, see `run_lane`) and weights its iterate by w of that count
    (w = 1, t or t^2), as a single-process run would. The round stands for the global
    steps t0+1 .. t0+S (S = the lanes' steps together), whose weights sum to W; the
    lanes' weights sum to V; scaling by W / V makes the run's weights add up to the
    closed form that `PGSState.weights` divides by, so the average stays an average.
    With one lane W = V (factor 1); with one step per lane every step of the round gets
    W / (number of lanes): steps taken at the same time weigh the same.
    """
    if iterate not in _AVERAGED:
        return 1.0
    kind = _AVERAGED[iterate]
    total = sum(lane_steps)
    if total == 0:
        return 1.0
    W = _weight_sum(kind, t0, t0 + total)
    V = sum(_spaced_sum(kind, t0, spacing, s) for s in lane_steps)
    return W / V


def merge_round(state, results):
    """Add one round's `LaneResult`s (in lane order) into the global `state`.

    Returns the coordinates whose lambda or phi the merge changed (sorted), or None if
    it moved the scale M (then every phi changed). The global geometry's: the adaptive
    geometry's is `onlinepgs.distributed.adaptive.merge_round`.
    """
    results = [r for r in results if r is not None and r.steps]
    if not results:
        return np.zeros(0, dtype=np.int64)
    iterate = {v: k for k, v in ITERATES.items()}[state.iterate]
    spacing = results[0].t_step
    if any(r.t_step != spacing for r in results):
        raise ValueError("the lanes of a round must count their steps alike (t_step)")
    factor = average_factor(iterate, int(state.t), [r.steps for r in results], spacing)
    dim = max(r.dim for r in results)
    if dim > state.dim:
        state.ensure_dim(dim - 1)
    state.span = max([state.span] + [r.span for r in results])
    best = max(results, key=lambda r: r.stats["loss0_max"])
    if best.stats["loss0_max"] > state.loss0_max:
        # the "auto" ball is the largest any lane reached (a max over rows)
        state.loss0_max = best.stats["loss0_max"]
        state.radius = best.radius
    for r in results:
        s = r.stats
        state.n_examples += s["n_examples"]
        state.n_mistakes += s["n_mistakes"]
        state.sum_weight += s["sum_weight"]
        state.sum_loss += s["sum_loss"]
        state.sum_weighted_loss += s["sum_weighted_loss"]
        state.sum_weighted_loss_reported += s["sum_weighted_loss_reported"]
        state.n_mistakes_reported += s["n_mistakes_reported"]
        state.regret_a += s["regret"]
        state.sum_conj_a += s["sum_conj"]
        state.sum_step_loss_a += s["sum_step_loss"]
        state.sum_reg_a += s["sum_reg"]
    steps = sum(r.steps for r in results)
    rescales = state.n_rescales
    # the merge marks the coordinates it moves in a bitmap (where np.unique over the
    # lanes' entries would sort or hash them)
    changed = np.zeros(state.dim, dtype=np.uint8)
    state.absorb(steps, factor, [r.delta() for r in results], changed)
    if state.n_rescales != rescales:
        return None
    return np.flatnonzero(changed)
