"""The exception for user mistakes. It subclasses ``ValueError``, so library callers can catch the
standard type; the CLI prints its message as one ``Error:`` line instead of a traceback."""


class JTCSEError(ValueError):
    """A problem with the user's input or setup, stated so the user can fix it."""
