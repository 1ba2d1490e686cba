"""`python -m kernlock` runs the command line."""

from kernlock.cli.main import main

main()
