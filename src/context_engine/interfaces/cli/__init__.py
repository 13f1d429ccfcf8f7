"""The typer CLI."""
