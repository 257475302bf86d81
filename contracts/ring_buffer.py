"""Contract: ring-buffer slot arithmetic for a sliding-window KV cache.

Statement
    A window cache of W slots stores the key/value of absolute position p in slot p mod W.
    R1  slot(p) is in [0, W);
    R2  the last W positions p-W+1..p occupy W distinct slots (no live entry is overwritten);
    R3  writing position p overwrites exactly the entry of position p - W (the one that just
        left the window);
    R4  the slot holding the k-th most recent live position (k = 0 newest) is
        (p - k) mod W, and it is live iff k < min(W, p + 1).
Bound
    Exact integer arithmetic (Python ints are unbounded; the runtime keeps p < 2**63).
Reason
    A sliding window gives a step whose cost does not grow with how long the loop has run;
    an off-by-one here silently attends to a stale or overwritten key.

All functions are O(1) integer arithmetic, real-time safe. Proven by CrossHair (`tickformer prove`).
"""

from __future__ import annotations

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = "slot = p mod W in [0, W); the last W positions occupy distinct slots; writing p evicts exactly p - W"


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

    pre: position >= 0 and window >= 1
    post: __return__ == -1 or ring_slot(__return__, window) == ring_slot(position, window)
    post: __return__ == -1 or __return__ == position - window
    post: (__return__ == -1) == (position < window)
    """
    return position - window if position >= window else -1


def recent_slot(position: int, k: int, window: int) -> int:
    """R4: slot of the k-th most recent position (k = 0 is `position` itself), or -1 if that
    position is not live (before the start, or already out of the window).

    pre: position >= 0 and window >= 1 and k >= 0
    post: (__return__ == -1) == (k >= window or k > position)
    post: __return__ == -1 or __return__ == ring_slot(position - k, window)
    """
    if k >= window or k > position:
        return -1
    return (position - k) % window
