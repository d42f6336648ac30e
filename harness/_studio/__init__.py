"""An edge: the studio, a local web UI (Starlette) with its page assets in `static/`."""
