"""`python -m kernlock` runs the command line."""

from kernlock._internal.cli.main import main

main()
