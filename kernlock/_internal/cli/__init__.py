"""The `kernlock` command: `main`, shared options, one module per command under `commands/`.

Imports anything below; commands import the library inside their functions.
"""
