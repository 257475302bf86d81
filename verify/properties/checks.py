"""The properties `tickformer verify` checks on an exported model under a real backend.

Each `check_*(model)` returns a check: example -> None (holds) or (message, arrays to save).
Inputs come from `strategies` (inside the declared domain), the runs from `runner`.

    finite_outputs          every output value finite (contracts.output_bound / softmax_stability)
    causality               outputs at positions <= t are bitwise unchanged when only inputs after t
                            change (contracts.masking M4; exact, selection masks make it exact)
  artifacts only (tickformer.runtime sessions):
    step_equals_full        stepping through the KV cache == model.onnx full pass, within the
                            manifest tolerance (contracts.decode_equivalence)
    stale_cache_isolation   after reset(), a session that ran another sequence before gives
                            bitwise the outputs of a newly loaded session (contracts.masking M7)
    numpy_vs_backend        the backend's full pass == the numpy reference, within the manifest
                            tolerance
    rejected_step_is_harmless  a step with an input outside the domain (beyond an edge, NaN, inf)
                            raises a TickformerError, leaves the position unchanged, and the
                            following steps give bitwise the outputs of a session that never saw
                            it (contracts.input_domain, contracts.position P2)

Not real-time code.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tickformer.contracts.decode_equivalence import equivalence_excess

Arrays = dict[str, np.ndarray]
Problem = tuple[str, Arrays]  # (message, arrays to save)


def _first_bad(y: np.ndarray) -> str:
    idx = tuple(int(i) for i in np.argwhere(~np.isfinite(y))[0])
    return f"output {float(y[idx])!r} at index {idx} (batch, position, feature)"


def check_finite(model: Any) -> Callable[[np.ndarray], Problem | None]:
    def check(x: np.ndarray) -> Problem | None:
        y = model.full(x)  # [B, T, G]
        if not np.isfinite(y).all():
            return f"non-finite {_first_bad(y)} for an input inside the domain", {"x": x, "y": y}
        return None

    return check


def check_causal(model: Any) -> Callable[[tuple[np.ndarray, np.ndarray, int]], Problem | None]:
    def check(example: tuple[np.ndarray, np.ndarray, int]) -> Problem | None:
        x, other, cut = example
        t = x.shape[1]
        cut = min(cut, t - 2)
        x2 = x.copy()
        x2[:, cut + 1 :] = other[:, cut + 1 :]  # change only the inputs after `cut`
        y, y2 = model.full(x), model.full(x2)  # [B, T, G]
        with np.errstate(invalid="ignore"):  # inf - inf in a non-finite model: reported as nan
            diff = np.abs(
                y[:, : cut + 1].astype(np.float64) - y2[:, : cut + 1].astype(np.float64)
            )  # [B, cut+1, G]
        if not np.array_equal(y[:, : cut + 1], y2[:, : cut + 1], equal_nan=True):
            pos = int(np.argwhere(~(diff == 0) | np.isnan(diff))[0][1])
            return (
                f"output at position {pos} changed (max |diff| "
                f"{np.nanmax(diff) if np.isfinite(diff).any() else 'nan'}) when only inputs after "
                f"position {cut} changed",
                {"x": x, "x_changed": x2, "cut": np.array(cut), "y": y, "y_changed": y2},
            )
        return None

    return check


def _tolerance(model: Any) -> tuple[float, float]:
    tol = model.tolerance or {}
    return float(tol.get("rtol", 1e-4)), float(tol.get("atol", 1e-4))


def check_step_full(model: Any) -> Callable[[np.ndarray], Problem | None]:
    rtol, atol = _tolerance(model)

    def check(x: np.ndarray) -> Problem | None:
        full = model.full(x)  # [B, T, G]
        model.session.reset()
        stepped = model.steps(model.session, x)  # [B, T, G]
        excess = equivalence_excess(stepped, full, rtol, atol)
        if excess > 0:
            return (
                f"step-by-step output differs from the full pass beyond atol={atol:g}, rtol={rtol:g} "
                f"(excess {excess:.3g})",
                {"x": x, "y_step": stepped, "y_full": full},
            )
        return None

    return check


def check_stale_cache(model: Any) -> Callable[[tuple[np.ndarray, np.ndarray]], Problem | None]:
    from tickformer import runtime

    def check(example: tuple[np.ndarray, np.ndarray]) -> Problem | None:
        before, x = example
        model.session.reset()
        model.steps(model.session, before)  # fills the cache with another sequence
        model.session.reset()
        got = model.steps(model.session, x)  # [B, T, G]
        with runtime.load(model.path, backend=model.backend) as fresh:  # a cache nobody wrote
            want = model.steps(fresh, x)
        if not np.array_equal(got, want):
            return "after reset(), outputs depend on the previous sequence's stale cache rows", {
                "before": before,
                "x": x,
                "y_after_reset": got,
                "y_fresh": want,
            }
        return None

    return check


def check_numpy_vs_backend(model: Any) -> Callable[[np.ndarray], Problem | None]:
    rtol, atol = _tolerance(model)

    def check(x: np.ndarray) -> Problem | None:
        got = model.full(x)
        want = model.reference.run(np.ascontiguousarray(x, np.float32))
        excess = equivalence_excess(got, want, rtol, atol)
        if excess > 0:
            return (
                f"{model.backend} differs from the numpy reference beyond atol={atol:g}, rtol={rtol:g} "
                f"(excess {excess:.3g})",
                {"x": x, "y_backend": got, "y_numpy": want},
            )
        return None

    return check


def check_rejected_step(model: Any) -> Callable[[tuple[np.ndarray, int, float]], Problem | None]:
    from tickformer.errors import TickformerError

    lo, hi = model.domain

    def check(example: tuple[np.ndarray, int, float]) -> Problem | None:
        x, cut, bad_value = example
        cut = min(cut, x.shape[1] - 1)
        model.session.reset()
        clean = model.steps(model.session, x)  # [B, T, G] reference, never disturbed
        model.session.reset()
        if cut:
            model.steps(model.session, x[:, :cut])
        bad = x[:, cut : cut + 1].copy()  # [B, 1, F]
        bad.flat[0] = bad_value
        try:
            model.session.step(bad)
        except TickformerError:
            pass
        else:
            return f"a step with input value {bad_value!r} outside the domain [{lo}, {hi}] was accepted", {
                "x": x,
                "cut": np.array(cut),
                "bad": bad,
            }
        if model.session.position != cut:
            return f"a rejected step moved the position from {cut} to {model.session.position}", {
                "x": x,
                "cut": np.array(cut),
                "bad": bad,
            }
        rest = model.steps(model.session, x[:, cut:])  # [B, T - cut, G]
        if not np.array_equal(rest, clean[:, cut:]):
            return "outputs after a rejected step differ from a session that never saw it", {
                "x": x,
                "cut": np.array(cut),
                "bad": bad,
                "y": rest,
                "y_clean": clean[:, cut:],
            }
        return None

    return check
