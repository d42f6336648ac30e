"""Tracing: the spans of a run, the offline recorder, and the span tree shown without an account."""
