"""Contract: ring-buffer slot arithmetic for a sliding-window KV cache.

Statement
    A window cache of W slots stores the key/value of absolute position p in slot p mod W.
    R1  slot(p) is in [0, W);
    R2  the last W positions p-W+1..p occupy W distinct slots (no live entry is overwritten);
    R3  writing position p overwrites exactly the entry of position p - W (the one that just
        left the window);
    R4  the slot holding the k-th most recent live position (k = 0 newest) is
        (p - k) mod W, and it is live iff k < min(W, p + 1).
    The step that writes position p (before its commit: the cache holds positions < p):
    R5  the distance of a key behind a query, as the ring sees it, is (i - j) mod W: the true
        distance i - j for every key inside the window, and the same whether j is the key's
        absolute position (the full pass) or its slot (the step);
    R6  slot s holds the latest position before p that is congruent to s (negative: none yet);
    R7  the step reads slot s iff the position it holds is inside the window of p and was written
        since the start: its distance d is in [1, p] (d = 0 is the slot p overwrites, holding
        p - W); a slot is never read once its position left the window;
    R8  every position of the window but p itself (p-W+1..p-1, those >= 0) is read, at its slot;
    Ring positions: the runtime hands the step a bounded stand-in of p,
    R9  ring_position(p) = p below 3W, then W + (p - W) mod 2W: in [0, 3W), congruent to p mod W,
        >= W iff p >= W (`ring_consistent`);
    R10 the step reads the same slots at the same distances at p and at ring_position(p) (R5,
        R7 depend on p only through p mod W and p >= W), so the step fed ring_position(p) is the
        step at p (`ring_reads_alike`: the 2W-shift, with R9's periodicity, by induction);
    R11 the successor table keeps the ring position consistent with the absolute one;
    R12 with the block b(p) = (p - W) div W (p >= W), p = W (b + 1) + (ring mod W); the state at
        ring position r reads block counter `block_counter(r)`;
    R13 the session's two block counters (one per half of the ring: [W, 2W), [2W, 3W)) are
        written by `block_write` before each commit without touching the one the current state
        reads, and the one the next state reads gives back its absolute position.
Bound
    Exact integer arithmetic (Python ints are unbounded; the runtime keeps p < 2**63).
Reason
    A sliding window gives a step whose cost does not grow with how long the loop has run;
    an off-by-one here silently attends to a stale or overwritten key. The step graph, the numpy
    backend, the device commits and the session call these functions (on ints, numpy arrays or
    graph expressions: `&` and `%` work on all three), so the proofs are about the code that runs.

All functions are O(1) integer arithmetic, real-time safe. Proven by CrossHair (`tickformer prove`).
"""

from __future__ import annotations

from .masking import window_allowed  # noqa: F401  (the docstring conditions use it)

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = (
    "slot = p mod W in [0, W); the last W positions occupy distinct slots; a step reads exactly the "
    "slots whose positions are in its window; ring positions < 3W stand in exactly for p"
)


def ring_slot(position: int, window: int) -> int:
    """R1: slot of absolute position `position` in a ring of `window` slots.

    pre: position >= 0 and window >= 1
    post: 0 <= __return__ < window
    post: (position - __return__) % window == 0
    """
    return position % window


def slots_distinct(p: int, a: int, b: int, window: int) -> bool:
    """R2: two live positions p - a and p - b (0 <= a < b < window, both >= 0) use different slots.

    pre: window >= 1 and 0 <= a < b < window and b <= p
    post: __return__
    """
    return ring_slot(p - a, window) != ring_slot(p - b, window)


def evicted_position(position: int, window: int) -> int:
    """R3: the absolute position whose entry is overwritten when `position` is written
    (-1 while the ring is still filling).

    Specified by what eviction means, not by the body's formula: nothing is evicted while no
    earlier position shares the slot (the slot number is the position itself); otherwise the
    evicted position shares the slot, was in the window of the step before and is not in this
    step's window (which pins it to position - W).

    pre: position >= 0 and window >= 1
    post: __return__ == -1 or ring_slot(__return__, window) == ring_slot(position, window)
    post: (__return__ == -1) == (ring_slot(position, window) == position)
    post: __return__ == -1 or window_allowed(position - 1, __return__, window)
    post: __return__ == -1 or not window_allowed(position, __return__, window)
    """
    return position - window if position >= window else -1


def recent_slot(position: int, k: int, window: int) -> int:
    """R4: slot of the k-th most recent position (k = 0 is `position` itself), or -1 if that
    position is not live (before the start, or already out of the window).

    Specified by the window and by what the slot holds, not by the body's guard: -1 iff position
    - k is not live (before the start or out of the window, contracts.masking M5); otherwise a
    slot in [0, W) that, once `position` is committed, holds position - k (R6).

    pre: position >= 0 and window >= 1 and k >= 0
    post: (__return__ == -1) == (not in_window(position, position - k, window))
    post: __return__ == -1 or 0 <= __return__ < window
    post: __return__ == -1 or held_position(position + 1, __return__, window) == position - k
    """
    if k >= window or k > position:
        return -1
    return (position - k) % window


def window_distance(i: int, j: int, window: int) -> int:
    """R5: how far key j lies behind query i, modulo the window: the relative-position index of
    the score (the column of the bias table, model/layers.py). The full pass calls it with
    absolute positions, the step with slots (R7's second condition: a read slot's distance is
    its position's). Ints, numpy arrays or graph expressions.

    pre: window >= 1
    post: 0 <= __return__ < window
    post: implies(window_allowed(i, j, window), __return__ == i - j)
    """
    return (i - j) % window


def held_position(position: int, slot: int, window: int) -> int:
    """R6: at the step that writes `position` (before its commit), the absolute position whose
    key slot `slot` holds: the latest p < position with ring_slot(p) == slot (negative: none).

    pre: position >= 0 and window >= 1 and 0 <= slot < window
    post: __return__ < position <= __return__ + window
    post: (__return__ - slot) % window == 0
    """
    return position - 1 - (position - 1 - slot) % window


def slot_read(position: int, slot: int, window: int) -> bool:
    """R7: whether the step writing `position` reads ring slot `slot` (selects its score); the
    step graph, the numpy backend and the codegen-free device backends all select with this.

    pre: position >= 0 and window >= 1 and 0 <= slot < window
    post: __return__ == in_window(position, held_position(position, slot, window), window)
    post: not __return__ or held_position(position, slot, window) + window_distance(position, slot, window) == position
    """
    d = window_distance(position, slot, window)
    return (d >= 1) & (d <= position)


def in_window(position: int, held: int, window: int) -> bool:
    """The key of position `held` was written since the start and is in the window of `position`
    (contracts.masking M5): what slot_read must mean."""
    return held >= 0 and window_allowed(position, held, window)


def window_covered(position: int, k: int, window: int) -> bool:
    """R8: position - k (1 <= k < W, k <= position) is read by the step writing `position`, at
    its own slot, which holds exactly it.

    pre: window >= 1 and 1 <= k < window and k <= position
    post: __return__
    """
    slot = ring_slot(position - k, window)
    return slot_read(position, slot, window) and held_position(position, slot, window) == position - k


def ring_position(position: int, window: int) -> int:
    """R9: the bounded stand-in of an absolute position that the session hands the step graph
    (used off the hot path: the session walks the successor table, R11, from ring position 0).

    pre: position >= 0 and window >= 1
    post: 0 <= __return__ < 3 * window
    post: (__return__ >= window) == (position >= window)
    post: implies(position < 3 * window, __return__ == position)
    post: implies(position >= 3 * window, __return__ == ring_position(position - 2 * window, window))
    """
    if position < window:
        return position
    return window + (position - window) % (2 * window)


def ring_consistent(position: int, ring: int, window: int) -> bool:
    """R9's relation between an absolute position and the ring position standing in for it: in
    [0, 3W), congruent mod W, >= W together, equal below 3W. (ring_position(p) satisfies it;
    that it does is checked exhaustively and by Hypothesis, tests/contracts/test_integer_specs.py:
    z3 does not decide the nested modular arithmetic.)"""
    return (
        0 <= ring < 3 * window
        and (ring - position) % window == 0
        and (ring >= window) == (position >= window)
        and implies(position < 3 * window, ring == position)
    )


def next_ring_position(ring: int, window: int) -> int:
    """R11: the ring position after `ring` (the session's successor table, made at load).

    pre: window >= 1 and 0 <= ring < 3 * window
    post: 0 <= __return__ < 3 * window
    post: __return__ >= window or __return__ == ring + 1
    """
    return ring + 1 if ring + 1 < 3 * window else window


def ring_step(position: int, ring: int, window: int) -> bool:
    """R11, by induction: the successor table keeps the ring position standing in for the
    absolute one (the session starts both at 0, where they are equal).

    pre: position >= 0 and window >= 1
    pre: ring_consistent(position, ring, window)
    post: __return__
    """
    return ring_consistent(position + 1, next_ring_position(ring, window), window)


def ring_reads_alike(position: int, slot: int, window: int) -> bool:
    """R10: past the first window, the step at p + 2W reads the same slots (slot_read) at the same
    distances (window_distance) as the step at p. With R9 (ring_position(p) = p below 3W, and
    ring_position(p) = ring_position(p - 2W) from 3W on, both proven posts of ring_position),
    induction over the 2W-blocks gives R10 for every p: the step fed ring_position(p) in [0, 3W)
    is the step at p -- what lets the session feed a bounded ring position for an unbounded p.
    (Stated per 2W-shift because z3 decides periodicity, (x + 2W) mod W = x mod W, but not the
    nested (p - W) mod 2W mod W of ring_position directly: the induction is the docstring's.)

    pre: window >= 1 and position >= window and 0 <= slot < window
    post: __return__
    """
    later = position + 2 * window
    return (slot_read(later, slot, window) == slot_read(position, slot, window)) and (
        window_distance(later, slot, window) == window_distance(position, slot, window)
    )


def ring_block(position: int, window: int) -> int:
    """R12: the W-block of the stream `position` lies in, counted from position W (0 before it).

    pre: position >= 0 and window >= 1
    post: __return__ >= 0
    """
    return (position - window) // window if position >= window else 0


def absolute_position(ring: int, block: int, window: int) -> int:
    """R12: the absolute position of ring position `ring` in block `block` (what the session's
    `position` returns; not on the hot path).

    pre: window >= 1 and 0 <= ring < 3 * window and block >= 0
    post: __return__ >= 0
    post: implies(ring < window, __return__ == ring)
    """
    return ring if ring < window else window * (block + 1) + ring % window


def block_counter(ring: int, window: int) -> int:
    """R12: which of the session's block counters c[0], c[1] the state at ring position `ring`
    reads: c[1] in the ring's last third [2W, 3W), else c[0] (below W none is needed). The session
    tabulates it at load and `position` reads through it.

    pre: window >= 1 and 0 <= ring < 3 * window
    post: __return__ == 0 or __return__ == 1
    """
    return 1 if ring >= 2 * window else 0


def block_write(ring: int, window: int) -> tuple[int, int]:
    """R13: the counter write the step leaving ring position `ring` makes before its commit, as
    (target, source): c[target] = c[source] + 1, where source -1 names a constant -1 (so
    c[target] = 0: entering the first block); target -1: no write. The session tabulates it at
    load as views of one int64 array [c0, c1, -1] and applies it with one ufunc (no allocation);
    `counters_after` is the same write on ints.

    pre: window >= 1 and 0 <= ring < 3 * window
    post: __return__[0] in (-1, 0, 1) and __return__[1] in (-1, 0, 1)
    post: __return__[0] == -1 or __return__[0] != __return__[1]
    """
    if ring == window - 1:
        return 0, -1  # entering the first block: c[0] = -1 + 1 = 0
    if ring == 2 * window - 1:
        return 1, 0  # into the last third: c[1] = c[0] + 1
    if ring == 3 * window - 1:
        return 0, 1  # wrapping to W: c[0] = c[1] + 1
    return -1, -1


def counters_after(ring: int, c0: int, c1: int, window: int) -> tuple[int, int]:
    """R13: the counters after the step leaving ring position `ring` applied block_write (on ints;
    the session does the same write with np.add into views of [c0, c1, -1])."""
    return counters_written(c0, c1, *block_write(ring, window))


def counters_written(c0: int, c1: int, target: int, source: int) -> tuple[int, int]:
    """The counters after a write in block_write's form: cell `target` = cell `source` + 1 over
    the cells [c0, c1, -1]; none when target < 0."""
    cells = [c0, c1, -1]
    if target >= 0:
        cells[target] = cells[source] + 1
    return cells[0], cells[1]


def blocks_tracked(position: int, ring: int, c0: int, c1: int, window: int) -> bool:
    """R13, by induction: if the counter the ring position reads (block_counter) gives back the
    absolute position, then the step's write (block_write, through counters_after) leaves that
    counter alone (so the ring store alone is the commit point: an interrupted step changes
    nothing the state reads) and, at the successor ring position, the counter it reads gives
    back position + 1.

    pre: position >= 0 and window >= 1 and c0 >= 0 and c1 >= 0
    pre: ring_consistent(position, ring, window)
    pre: ring < window or absolute_position(ring, c1 if block_counter(ring, window) == 1 else c0, window) == position
    post: __return__
    """
    after = counters_after(ring, c0, c1, window)
    return counters_track(position, ring, (c0, c1), after, window)


def counters_track(
    position: int, ring: int, before: tuple[int, int], after: tuple[int, int], window: int
) -> bool:
    """R13's conclusion for a step from ring position `ring` that turned the counters `before`
    into `after`: the counter the ring position reads is unchanged, and at the successor ring
    position the counter it reads gives back position + 1 (`blocks_tracked`)."""
    (c0, c1), (n0, n1) = before, after
    read = block_counter(ring, window)
    now = ring < window or (n1 == c1 if read == 1 else n0 == c0)
    following = next_ring_position(ring, window)
    block = n1 if block_counter(following, window) == 1 else n0
    later = following < window or absolute_position(following, block, window) == position + 1
    return now and later


def implies(a: bool, b: bool) -> bool:
    return (not a) or b
