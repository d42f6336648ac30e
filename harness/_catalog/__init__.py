"""The catalog: callees and their rules, the stubs the model reads and ty checks against, and the manifest a run is
tied to."""
