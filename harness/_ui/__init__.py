"""The layer under both user interfaces (the command line and the studio): plain data and choices they share, with no
rich or Starlette in it."""
