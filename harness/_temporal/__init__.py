"""An edge: the Temporal engine (workflows, activities, workers). Needs the `temporal` extra."""

import importlib.util

if importlib.util.find_spec('temporalio') is None:  # before any module here imports it, with the fix named
    raise ImportError("The Temporal engine needs the Temporal client: pip install 'harness[temporal]'")
