"""An edge: evals of the orchestrator with pydantic-evals, and the harness's evaluators."""
