"""An edge: the `harness` command line (typer and rich)."""


def __getattr__(name: str) -> object:
    # `harness._cli:app` (the entry point of installs made before the CLI became a package) without importing
    # typer for every user of the package's other modules.
    if name == 'app':
        from ._app import app

        return app
    raise AttributeError(name)
