"""Dispatch: each call a script makes becomes one run of a callee, under the run's budget, rules and history (resume,
replay, fork)."""
