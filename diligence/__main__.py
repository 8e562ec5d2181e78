"""`python -m diligence` is the `diligence` command."""

from diligence.cli import app

app(prog_name="diligence")
