"""`python -m diligence` is the `diligence` command (composed in the top-level :mod:`entry`)."""

from entry import main

main()
