"""Dispatch: each call a script makes becomes one run of a callee, under the run's budget, rules, stuck counters and
answer sources (the journal of a resume, replay or fork; side effects an earlier script made; earlier results; an
eval's baseline; a person's decision), started where the run's `Starter` says."""
