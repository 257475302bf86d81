"""Contract: session position bookkeeping.

Statement
    P1  the position (number of tokens in the KV cache) starts at 0 and never exceeds max_len;
    P2  a step that fails (bad input, contract violation, backend error, context full) leaves the
        position unchanged (and the cache rows at and after it are never read, see
        contracts.masking.cache_row_live);
    P3  a successful step advances the position by exactly the number of tokens it consumed;
    P4  reset() sets the position to 0.
Bound
    Exact integer arithmetic.
Reason
    A control loop retries or falls back after a failed step; if the failed step had advanced
    the position, the next step would attend to a garbage key (or skip a real one).

`step_position` is the one function that decides the next position and `can_step` the one that
decides whether a step fits: runtime.Session tabulates both at load by calling them (a call per
step would allocate an int above 256) and steps through the tables (call-site tests:
tests/runtime/test_contract_call_sites.py). O(1), real-time safe. Proven by CrossHair
(`tickformer prove`).
"""

from __future__ import annotations

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = "0 <= position <= max_len; a failed step leaves it unchanged; a successful one adds exactly n"


def can_step(position: int, n_tokens: int, max_len: int) -> bool:
    """Whether n_tokens more tokens fit after `position` (P1). Specified token by token, not by
    the body's inequality: one token fits iff the cache is not full; n tokens fit iff the first
    fits and the other n - 1 fit after it.

    pre: 0 <= position <= max_len and n_tokens >= 1
    post: implies(n_tokens == 1, __return__ == (position != max_len))
    post: implies(n_tokens > 1, __return__ == (position != max_len and can_step(position + 1, n_tokens - 1, max_len)))
    """
    return n_tokens <= max_len - position


def step_position(position: int, n_tokens: int, max_len: int, succeeded: bool) -> int:
    """The position after a step of n_tokens that `succeeded` (P1-P3). A step that does not fit
    counts as failed: the runtime raises ContextFull before touching the cache.

    pre: 0 <= position <= max_len and n_tokens >= 1 and max_len >= 1
    post: 0 <= __return__ <= max_len
    post: succeeded or __return__ == position
    post: __return__ == position or __return__ == position + n_tokens
    post: implies(succeeded and can_step(position, n_tokens, max_len), __return__ == position + n_tokens)
    """
    if succeeded and can_step(position, n_tokens, max_len):
        return position + n_tokens
    return position


def reset_position() -> int:
    """P4.

    post: __return__ == 0
    """
    return 0


def implies(a: bool, b: bool) -> bool:
    return (not a) or b
