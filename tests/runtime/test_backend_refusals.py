"""The registry's refusal of a windowed artifact by a backend without a ring cache (runtime.load
asks `backend_class(name, config)` before anything is built) names the backends that do run it,
from each backend class's own `ring_cache` flag (before: a fixed "use backend numpy or ort", and
"it would run them with a full cache", not true of every backend); a backend constructed
directly still refuses it (Backend.__init__)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tickformer.errors import BackendError
from tickformer.model import preset
from tickformer.runtime.backends import REGISTRY, backend_class, ring_cache_backends


def test_the_refusal_lists_exactly_the_backends_with_a_ring_cache():
    windowed = SimpleNamespace(config=preset("tiny").replace(window=4), batch=1)
    growing = backend_class("numpy-growing")
    with pytest.raises(BackendError, match="'numpy-growing' has no ring KV cache"):
        growing.__init__(growing.__new__(growing), windowed)
    with pytest.raises(BackendError) as info:
        backend_class("numpy-growing", windowed.config)
    message = str(info.value)
    assert "'numpy-growing' has no ring KV cache" in message and "window 4" in message
    listed = message.rsplit(": ", 1)[1].split(", ")
    assert listed == ring_cache_backends()
    for name in REGISTRY:  # each flag read from its class: the GPU backends and, once it has one, c
        assert (name in listed) == backend_class(name).ring_cache, name
    assert {"numpy", "ort", "ort-cuda", "ort-trt", "tensorrt"} <= set(listed)
    assert "numpy-growing" not in listed
