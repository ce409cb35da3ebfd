"""The one exception base for mistakes a user can fix (bad input, a missing file, a failed tool).

The CLI prints such an error as one line; any other exception is a bug and
keeps its traceback.
"""


class UserError(Exception):
    """Bad input or environment; the message says what to do."""


class ToolError(UserError, RuntimeError):
    """An external program (tpchgen-cli, airflow) failed or is missing."""
