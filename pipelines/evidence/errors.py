"""The errors of the evidence store, a root of their own.

The tree::

    EvidenceFileError (an OSError)   a name or file of an evidence store, a bucket or a
                                     pack that breaks its rule: a name outside its
                                     grammar, a symbolic link, a FIFO or a device, a size
                                     past its bound, data that does not decompress
                                     (see .confined); never transient

An ``OSError``, so a reader that reports an unreadable file as a problem reports these
the same way; its message names the file and the rule, in one line.
"""

from __future__ import annotations

__all__ = ["EvidenceFileError"]


class EvidenceFileError(OSError):
    """A name or a file of an evidence store, a bucket or a pack breaks its rule (see
    :mod:`.confined`): its message names the file and the rule, in one line."""
