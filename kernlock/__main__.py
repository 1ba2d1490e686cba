"""`python -m kernlock` runs the command line."""

from kernlock.cli import main

main()
