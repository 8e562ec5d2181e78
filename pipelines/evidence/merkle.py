"""The hashes that seal a manifest: its entries' Merkle tree, its content, its link.

A sealed manifest's hash is ``sha256("diligence-manifest:<previous>:<content>:<merkle>")``:
the hash of the manifest sealed before it (the chain), the digest of its header,
outcomes, how it was sealed and the break it recorded (:func:`content_digest`), and the
Merkle root of its entries in canonical order (:func:`merkle_root` of :func:`leaves`).
A Merkle proof (:func:`merkle_proof`) shows one entry is in a manifest without the rest:
what an auditor's pack carries.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from .manifest import Entry

__all__ = ["canonical", "content_digest", "leaf_hash", "leaves", "manifest_hash", "merkle_proof",
           "merkle_root", "root_of_proof"]


def merkle_root(leaves: list[str]) -> str:
    """The Merkle root of hex leaf hashes (an odd one is carried up; no leaf: the hash of
    nothing)."""
    if not leaves:
        return hashlib.sha256(b"").hexdigest()
    level = [bytes.fromhex(leaf) for leaf in leaves]
    while len(level) > 1:
        paired = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0].hex()


def canonical(entries: list[Entry]) -> list[Entry]:
    """Entries in the order a manifest's hash takes them: by namespace, path, method (a
    sync completes its requests in no fixed order)."""
    return sorted(entries, key=lambda e: (e.namespace or "", e.path, e.method, e.fetched_at))


def leaf_hash(entry: Entry) -> str:
    """The Merkle leaf of one entry: the hash of its record."""
    return hashlib.sha256(orjson.dumps(entry.record())).hexdigest()


def leaves(entries: list[Entry]) -> list[str]:
    """The Merkle leaves of entries in canonical order: the hash of each one's record."""
    return [leaf_hash(e) for e in canonical(entries)]


def content_digest(header: dict[str, Any], outcomes: list[list[Any]],
                   how: str = "complete", breaks: str | None = None) -> str:
    """The digest of a manifest's header, outcomes (``[namespace, status, error]``, and
    the row counts of a commit where they were recorded), how it was sealed and the
    chain break it recorded (if any)."""
    document = {"header": header, "outcomes": sorted(outcomes), "how": how, "break": breaks}
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def merkle_proof(leaves: list[str], index: int) -> list[list[str]]:
    """The path from leaf `index` to the root of :func:`merkle_root`: per level, the
    sibling's side (``L`` or ``R``) and hash; a level where the node is carried up adds
    nothing."""
    proof: list[list[str]] = []
    level = [bytes.fromhex(leaf) for leaf in leaves]
    while len(level) > 1:
        sibling = index ^ 1
        if sibling < len(level):
            proof.append(["L" if sibling < index else "R", level[sibling].hex()])
        paired = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level, index = paired, index // 2
    return proof


def root_of_proof(leaf: str, proof: list[list[str]]) -> str:
    """The root that `leaf` and its :func:`merkle_proof` lead to (a malformed proof
    leads nowhere: ValueError)."""
    node = bytes.fromhex(leaf)
    for side, sibling in proof:
        pair = bytes.fromhex(sibling) + node if side == "L" else node + bytes.fromhex(sibling)
        node = hashlib.sha256(pair).digest()
    return node.hex()


def manifest_hash(previous: str | None, content: str, merkle: str) -> str:
    """A sealed manifest's hash: its header and outcomes, its entries' Merkle root, and
    the previous sealed manifest's hash (None: the first of the chain)."""
    return hashlib.sha256(f"diligence-manifest:{previous or ''}:{content}:{merkle}".encode()).hexdigest()
