"""CLI subcommands, one module each (see tickformer.cli)."""
