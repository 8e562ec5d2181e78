"""The evidence: what the service said, kept, chained, verified, packed and replayed."""
