"""The commands a person types: argparse, thin handlers, and the command-only libraries."""
