"""The one exception type for user mistakes: the CLI prints its message, never a traceback."""


class JTCSEError(Exception):
    """A problem with the user's input or setup, stated so the user can fix it."""
