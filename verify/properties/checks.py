"""The properties `tickformer verify` checks on one of our artifacts under a real backend (the
hooks of models.ArtifactModel make them work for every artifact kind); bare ONNX models have
theirs in foreign_checks.py.

Each `check_*(model)` returns a check: example -> None (holds) or (message, arrays to save).
Inputs come from `strategies` (inside the declared domain), the runs from `runner`.

    finite_outputs          every output value finite (contracts.output_bound / softmax_stability)
    causality               outputs at positions <= t are bitwise unchanged when only inputs after t
                            change (contracts.masking M4; exact, selection masks make it exact)
    padding_mask            encoder-decoder: the decoded outputs are bitwise unchanged when the
                            source's padded positions hold other ids (contracts.masking: padding)
    step_equals_full        stepping through the KV cache == the full pass (model.onnx; for an
                            encoder-decoder the numpy model's teacher-forced pass), within the
                            manifest tolerance (contracts.decode_equivalence)
    stale_cache_isolation   after reset(), a session that ran another sequence before gives
                            bitwise the outputs of a newly loaded session (contracts.masking M7)
    numpy_vs_backend        the backend's outputs == the numpy reference, within the manifest
                            tolerance
    rejected_step_is_harmless  a step with an input outside the domain (beyond an edge, NaN, inf;
                            an id outside the vocabulary) raises a TickformerError, leaves the
                            position unchanged, and the following steps give bitwise the outputs of
                            a session that never saw it (contracts.input_domain, contracts.position P2)
    window_isolation        windowed artifacts: the last output of a stream is bitwise unchanged when
                            only inputs older than its receptive field L (W - 1) + 1 change, stepped
                            on the ring cache and in the full pass (contracts.masking M5)
    slides_past_max_len     windowed artifacts: a sliding session steps 2 max_len + W positions
                            without ContextFull (the ring wraps) and every output equals the windowed
                            full pass within the manifest tolerance (contracts.ring_buffer R5-R13)

Not real-time code.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tickformer import runtime
from tickformer.contracts.decode_equivalence import equivalence_excess
from tickformer.contracts.state_bound import state_excess
from tickformer.errors import ContextFull, TickformerError

from .tolerance import max_abs_diff

Arrays = dict[str, np.ndarray]
Problem = tuple[str, Arrays]  # (message, arrays to save)


def _first_bad(y: np.ndarray) -> str:
    idx = tuple(int(i) for i in np.argwhere(~np.isfinite(y))[0])
    return f"output {float(y[idx])!r} at index {idx} (batch, position, feature)"


def _named(model: Any, example: Any) -> Arrays:
    named = getattr(model, "named", None)
    return named(example) if named is not None else {"x": np.asarray(example)}


def check_finite(model: Any) -> Callable[[Any], Problem | None]:
    def check(example: Any) -> Problem | None:
        y = model.full(example)  # [B, T, G]
        if not np.isfinite(y).all():
            return f"non-finite {_first_bad(y)} for an input inside the domain", {
                **_named(model, example),
                "y": y,
            }
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


def _beyond(got: np.ndarray, want: np.ndarray, tolerance: tuple[float, float], what: str) -> str | None:
    """The message when `got` differs from `want` beyond the manifest tolerance (rtol, atol;
    contracts.decode_equivalence), `what` saying which two; None when they agree."""
    rtol, atol = tolerance
    excess = equivalence_excess(got, want, rtol, atol)
    if excess > 0:
        return f"{what} beyond atol={atol:g}, rtol={rtol:g} (excess {excess:.3g})"
    return None


def check_step_full(model: Any) -> Callable[[Any], Problem | None]:
    tolerance = _tolerance(model)
    start = getattr(model, "start", lambda s, e: s.reset())
    stream = getattr(model, "stream", lambda e: e)
    full_pass = getattr(model, "full_pass", model.full)

    def check(example: Any) -> Problem | None:
        full = full_pass(example)  # [B, T, G]
        start(model.session, example)
        stepped = model.steps(model.session, stream(example))  # [B, T, G]
        problem = _beyond(stepped, full, tolerance, "step-by-step output differs from the full pass")
        if problem is not None:
            return problem, {**_named(model, example), "y_step": stepped, "y_full": full}
        return None

    return check


def check_stale_cache(model: Any) -> Callable[[tuple[Any, Any]], Problem | None]:
    start = getattr(model, "start", lambda s, e: s.reset())
    stream = getattr(model, "stream", lambda e: e)

    def fresh() -> Any:
        if hasattr(model, "fresh"):
            return model.fresh()
        return runtime.load(model.path, backend=model.backend)

    def check(example: tuple[Any, Any]) -> Problem | None:
        before, ex = example
        start(model.session, ex)
        model.steps(model.session, stream(before))  # fills the cache with another sequence
        model.session.reset()
        got = model.steps(model.session, stream(ex))  # [B, T, G]
        with fresh() as new:  # a cache nobody wrote
            start(new, ex)
            want = model.steps(new, stream(ex))
        if not np.array_equal(got, want):
            return "after reset(), outputs depend on the previous sequence's stale cache rows", {
                **{("before" if k == "x" else f"before.{k}"): v for k, v in _named(model, before).items()},
                **_named(model, ex),
                "y_after_reset": got,
                "y_fresh": want,
            }
        return None

    return check


def check_numpy_vs_backend(model: Any) -> Callable[[Any], Problem | None]:
    tolerance = _tolerance(model)
    reference_out = getattr(
        model, "reference_out", lambda x: model.reference.run(np.ascontiguousarray(x, np.float32))
    )

    def check(example: Any) -> Problem | None:
        got = model.full(example)
        want = reference_out(example)
        problem = _beyond(got, want, tolerance, f"{model.backend} differs from the numpy reference")
        if problem is not None:
            return problem, {**_named(model, example), "y_backend": got, "y_numpy": want}
        return None

    return check


def check_source_padding(model: Any) -> Callable[[tuple[Any, np.ndarray]], Problem | None]:
    """Encoder-decoder: the source as set_source pads it (zeros) vs the same source with other
    ids in the padded positions (given to the backend with the same validity mask)."""

    def check(example: tuple[Any, np.ndarray]) -> Problem | None:
        ex, filler = example
        src, tgt = ex
        if src.shape[1] >= model.session.max_len:
            return None  # nothing is padded
        plain = model.full(ex)  # [B, T, V]
        model.session.set_source(np.ascontiguousarray(src, np.int64))
        padded, valid = model.padded_source(src, filler)
        model.session.backend.set_source(padded, valid)  # the same source, other ids where it is padded
        other = model.steps(model.session, tgt)
        if not np.array_equal(plain, other, equal_nan=True):
            return (
                f"decoded outputs changed (max |diff| {max_abs_diff(plain, other):.3g}) when only the source's "
                f"padded positions {src.shape[1]}..{model.session.max_len - 1} held other ids",
                {"src": src, "tgt": tgt, "src_padded": padded, "y": plain, "y_other_padding": other},
            )
        return None

    return check


def check_rejected_step(model: Any) -> Callable[[tuple[Any, int, Any]], Problem | None]:
    lo, hi = model.domain
    start = getattr(model, "start", lambda s, e: s.reset())
    stream = getattr(model, "stream", lambda e: e)

    def check(example: tuple[Any, int, Any]) -> Problem | None:
        ex, cut, bad_value = example
        x = stream(ex)
        cut = min(cut, x.shape[1] - 1)
        start(model.session, ex)
        clean = model.steps(model.session, x)  # [B, T, G] reference, never disturbed
        start(model.session, ex)
        if cut:
            model.steps(model.session, x[:, :cut])
        bad = x[:, cut : cut + 1].copy()  # [B, 1, F] / [B, 1]
        bad.flat[0] = bad_value
        saved = {**_named(model, ex), "cut": np.array(cut), "bad": bad}
        try:
            model.session.step(bad)
        except TickformerError:
            pass
        else:
            return (
                f"a step with input value {bad_value!r} outside the domain [{lo}, {hi}] was accepted",
                saved,
            )
        if model.session.position != cut:
            return f"a rejected step moved the position from {cut} to {model.session.position}", saved
        rest = model.steps(model.session, x[:, cut:])  # [B, T - cut, G]
        if not np.array_equal(rest, clean[:, cut:]):
            return "outputs after a rejected step differ from a session that never saw it", {
                **saved,
                "y": rest,
                "y_clean": clean[:, cut:],
            }
        return None

    return check


# ----------------------------------------------------------------------------- windowed artifacts


def check_window_isolation(model: Any) -> Callable[[tuple[np.ndarray, np.ndarray]], Problem | None]:
    """example (x, other) [B, T, ...] with T > receptive: x with its inputs before T - receptive
    replaced by other's gives bitwise the same last output, stepped and in the full pass."""
    r = model.receptive

    def check(example: tuple[np.ndarray, np.ndarray]) -> Problem | None:
        x, other = example
        t = x.shape[1]
        x2 = np.array(x, copy=True)
        x2[:, : t - r] = other[:, : t - r]
        for how, run in (("full pass", model.full), ("stepped", lambda e: _stepped(model, e))):
            a, b = run(x)[:, -1], run(x2)[:, -1]
            if not np.array_equal(a, b):
                return (
                    f"{how}: the output at position {t - 1} changed when only inputs before position {t - r} "
                    f"changed (window {model.window}, {model.config.n_layers} layers: receptive field {r})",
                    {"x": np.asarray(x), "x_changed": x2, "y": a, "y_changed": b},
                )
        return None

    return check


def _stepped(model: Any, x: np.ndarray) -> np.ndarray:
    model.session.reset()
    return model.steps(model.session, np.asarray(x))


def check_slides_past_max_len(model: Any) -> Callable[[np.ndarray], Problem | None]:
    """example x [B, 2 max_len + W, ...]: stepped from a reset without ContextFull, == model.full(x)."""
    tolerance = _tolerance(model)

    def check(x: np.ndarray) -> Problem | None:
        stepped = _stepped(model, x)  # ContextFull here is a failure (raised to the runner)
        full = model.full(x)
        what = f"sliding past max_len: {x.shape[1]} steps differ from the windowed full pass"
        problem = _beyond(stepped, full, tolerance, what)
        if problem is not None:
            return problem, {"x": np.asarray(x), "y_step": stepped, "y_full": full}
        if model.session.position != x.shape[1]:
            return f"position {model.session.position} after {x.shape[1]} steps", {"x": np.asarray(x)}
        return None

    return check


# ----------------------------------------------------------------------------- ssm artifacts


def check_state_bounded(model: Any) -> Callable[[Any], Problem | None]:
    """ssm: stepping any in-domain sequence from reset(), every layer's state after every step is
    finite and within the manifest's BIBO bound (contracts.state_bound)."""
    bound = np.asarray(model.session.artifact.manifest["state_bound"]["layers"], dtype=np.float64)

    def check(example: Any) -> Problem | None:
        x = np.ascontiguousarray(example, model.dtype)
        model.session.reset()
        for t in range(x.shape[1]):
            model.session.step(np.ascontiguousarray(x[:, t : t + 1]))
            state = model.session.state()  # [B, L, D, N]
            excess = state_excess(state, bound)
            if excess > 0:
                return (
                    f"after step {t}, a layer's state exceeds its BIBO bound by {excess:.3g} (bounds {bound.tolist()})",
                    {**_named(model, example), "state": state.copy()},
                )
        return None

    return check


def check_no_context_full(model: Any) -> Callable[[Any], Problem | None]:
    """ssm: a stream longer than max_len steps on with no ContextFull, and the outputs after
    max_len equal the full pass (the state does not grow; nothing is sized by max_len)."""
    tolerance = _tolerance(model)

    def check(example: Any) -> Problem | None:
        x = np.ascontiguousarray(example, model.dtype)
        model.session.reset()
        try:
            stepped = model.steps(model.session, x)
        except ContextFull as exc:
            return f"ContextFull at position {model.session.position}: {exc}", _named(model, example)
        problem = _beyond(
            stepped, model.full(x), tolerance, "past max_len, stepping differs from the full pass"
        )
        if problem is not None:
            return problem, {**_named(model, example), "y_step": stepped}
        return None

    return check
