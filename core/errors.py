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


class DataError(TickformerError, ValueError):
    """A user's data file or arrays cannot be trained on (a missing column, a value that is not a
    number, a NaN, irregular sampling, too few rows or runs); nothing has been written."""


class ExportError(TickformerError):
    """Building, checking or writing an exported graph failed."""


class BackendError(TickformerError):
    """A backend failed while running a graph; the session's position and cache are unchanged."""


class InputRefused(BackendError):
    """A backend's own input check (one that checks inputs itself, `Backend.checks_input`)
    refused the step's input before anything was written. The Session turns it into the
    InputError its own check raises for that input, so callers never see this class."""


class FileRefused(TickformerError):
    """A file was refused before it was read: missing, a link, not a regular file, too large,
    of the wrong size or unreadable (`tickformer.safe_files`). `.name` is the file, `.reason`
    one of `safe_files.REASONS`. Loaders re-raise it as their own error with the fix."""

    name: str = ""
    reason: str = ""
    actual: int = -1  # reason "size": the file's size in bytes


class WriteError(TickformerError, OSError):
    """Writing a file or directory failed (disk full, file-size limit, permissions, a bad path);
    the previous file or directory at the target is intact (`tickformer.durable`)."""


class SessionBusy(TickformerError):
    """A session method was called while another call of the same session was in flight (from
    another thread, or re-entered from a signal handler); sessions are single-threaded."""


class UntrustedArtifact(ArtifactError):
    """A trust key was given and the artifact is unsigned, or its signature is invalid or made
    with another key (`tickformer.signing`)."""
