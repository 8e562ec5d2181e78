"""The evidence read back: verify a warehouse against its store, pack it for an
auditor and verify a pack, replay a store into a new warehouse, prune what is no longer
needed. Above the sync (a replay runs one); what it reads is kept by
:mod:`diligence.evidence`, below the sync."""
