"""Before the run: the type check with ty, the hints on its messages, the refusals of what would hide a call, the
static analysis of what a script can call, the worst-case estimate, the audit of a catalog, and the facade's review
(`Review`: check, analyze, estimate)."""
