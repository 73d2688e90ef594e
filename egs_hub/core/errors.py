"""Domain exceptions; the service maps each class to one HTTP status."""


class EGSError(Exception):
    """Base of every domain error; ``str(e)`` is a message for people."""


class InvalidRequest(EGSError):
    """Input is malformed; ``field`` names the part that is wrong (HTTP 400)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class PolicyViolation(EGSError):
    """Input is well formed but not acceptable here (HTTP 422)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class IllegalTransition(EGSError):
    """A GPR cannot move from its status to the one asked (HTTP 409)."""


class Conflict(EGSError):
    """The request clashes with current state (HTTP 409)."""


class Forbidden(EGSError):
    """The caller may not do this to a thing it may see (HTTP 403)."""


class NotFound(EGSError):
    """What was asked for does not exist, or the caller may not see it (HTTP 404)."""


class Unavailable(EGSError):
    """The service cannot do it now, and did nothing; the same request may succeed soon (HTTP 503)."""
