"""An edge: the Temporal engine (workflows, activities, workers). Needs the `temporal` extra."""
