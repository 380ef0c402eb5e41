"""User-facing errors: the CLI prints these as one line and exits non-zero, never a traceback."""


class SipError(Exception):
    """A problem with the user's input, params or files; the message is the whole explanation."""
