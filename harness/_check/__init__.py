"""Before the run: the type check with ty, the hints on its messages, the static analysis of what a script can call,
and the audit of a catalog."""
