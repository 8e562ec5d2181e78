"""The evidence a sync keeps: every response by its hash, each sync's manifest sealed
into a chain.

Below the source and the sync: the client hands it responses (through
:class:`pipelines.company_connections.EvidenceLog`), the sync seals its manifest, and
``diligence verify``, the pack, replay and prune read it back. It imports neither dlt nor
DuckDB. Read top to bottom:

* :mod:`.confined`: names and files from outside, checked before use (no link followed,
  no read unbounded);
* :mod:`.store`: :class:`~.store.ResponseStore`, bodies kept once by their SHA-256;
* :mod:`.manifest`: a manifest's records and :func:`~.manifest.load_manifest`;
* :mod:`.merkle`: the hashes that seal a manifest, and Merkle proofs;
* :mod:`.sealing`: :class:`~.sealing.ManifestWriter` and :func:`~.sealing.seal`, after
  the last seal (derived from the manifests; ``HEAD`` and ``CHAIN`` are caches);
* :mod:`.errors`: :class:`~.errors.EvidenceFileError`.
"""
