"""The Monty sandbox: the worker pool, the loop that answers every pause, the join and progress helpers, granted
host values, and the one conversion of values that cross into the sandbox."""
