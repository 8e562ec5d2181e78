"""`--password-stdin`: the password read from standard input, as ``docker login`` does.

The password then never appears in the process's arguments (visible to every user in
``ps``) nor in the shell history, nor in the environment. On a terminal it is asked for
without echo; from a pipe (``cat pw.txt | diligence sync --password-stdin``) the first
line is read and its line ending dropped.
"""

from __future__ import annotations

import getpass
import sys

__all__ = ["read_password_stdin"]


def read_password_stdin() -> str:
    """The password from stdin (no echo on a terminal); ValueError when it is empty."""
    if sys.stdin is None:
        raise ValueError("--password-stdin: no standard input")
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise ValueError("--password-stdin: standard input gave an empty password")
    return password
