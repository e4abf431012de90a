"""Exceptions for user mistakes. Both subclass standard types, so library callers catch ``ValueError`` /
``FileNotFoundError``; the CLI prints any of them as one ``Error:`` line instead of a traceback."""


class JTCSEError(ValueError):
    """A problem with the user's input or setup, stated so the user can fix it."""


class ModelNotFoundError(JTCSEError, FileNotFoundError):
    """A model path that does not exist (also a ``FileNotFoundError``)."""
