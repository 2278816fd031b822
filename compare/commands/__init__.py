"""Sub-apps of the `compare` command line, each joined in compare/cli.py with one add_typer line."""
