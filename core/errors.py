"""One exception hierarchy for the whole package.

Every message names the bad value and says how to fix it. The CLI catches `TickformerError`,
prints its message on one line and exits non-zero; anything else is a bug and shows a traceback.
"""

from __future__ import annotations


class TickformerError(Exception):
    """Base class of every error tickformer raises on purpose."""


class ConfigError(TickformerError, ValueError):
    """A model, export or runtime configuration is invalid."""


class CheckpointError(TickformerError):
    """A checkpoint directory is missing, incomplete, corrupted or inconsistent."""


class ArtifactError(TickformerError):
    """An exported artifact is missing, incomplete, corrupted, tampered with or unsupported."""


class InputError(TickformerError, ValueError):
    """A runtime input has the wrong shape or dtype, is not finite, or is outside the declared domain."""


class ContextFull(TickformerError):
    """A step was requested past max_len; call reset() or re-export with a larger --max-len."""


class SessionClosed(TickformerError):
    """The session was closed; load the artifact again."""


class BackendUnavailable(TickformerError):
    """The requested backend is not installed or has no device here."""


class ContractViolation(TickformerError):
    """A run-time contract check failed (contract mode `check`)."""


class ExportError(TickformerError):
    """Building, checking or writing an exported graph failed."""


class BackendError(TickformerError):
    """A backend failed while running a graph; the session's position and cache are unchanged."""
