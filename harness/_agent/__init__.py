"""The orchestrator's tool: `run_workflow` as a pydantic-ai toolset, its description, and the token and cost totals of
a run."""
