"""The command's two kinds of error and its name: what `main` turns into exit codes.

Imports nothing, so that parsing (and ``onlinepgs --help``) stays quick.
"""
PROG = "onlinepgs"


class UserError(Exception):
    """A data, model or argument problem: reported in one line, exit code 1."""


class UsageError(Exception):
    """An option's value the estimator refuses: reported as argparse does, exit code 2."""
