"""The run store: SQLite, sealed rows and snapshots, the journal a run writes, and the plans of resume, replay and fork
read from it."""
