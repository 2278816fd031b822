"""The one error type for user mistakes: caught once at the top, printed as one line, exit 2."""


class UserError(Exception):
    """A bad input. The message names the bad value and the valid choices."""

    exit_code = 2
