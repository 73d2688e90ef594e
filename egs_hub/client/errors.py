"""Errors of the EGS client.

Vocabulary: an *error body* is what the service answers on failure,
``{"status": int, "message": str, "field"?: str}``; ``EGSError`` carries it.
Failures that never reached the service use status 0.
"""

from __future__ import annotations


class EGSError(Exception):
    """The service refused a request, or could not be asked; ``str()`` is its message."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, message={self.message!r}, field={self.field!r})"


class EGSConfigError(EGSError):
    """No service URL was given and none is in the environment."""

    def __init__(self, message: str):
        super().__init__(0, message)


class EGSConnectionError(EGSError):
    """The service could not be reached (refused, timed out, name not found)."""

    def __init__(self, message: str):
        super().__init__(0, message)
