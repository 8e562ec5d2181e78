"""The evidence, kept: each sync's responses and manifest, the chain and its seal, the
bucket that carries them between machines, the verified checkpoint. Below the sync,
which hands it what it fetched; read back by :mod:`diligence.audit`."""
