"""The catalog: callees and their rules, the stubs the model reads and ty checks against, the manifest a run is
tied to, and what one call can cost at most."""
