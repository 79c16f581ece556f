"""Command-line interface: click commands and output formats only."""
