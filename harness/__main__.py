"""`python -m harness`: the command line, as the `harness` script runs it."""

from harness._cli._app import app

app(prog_name='harness')
