"""The locked files onto this machine: `sync` and `vendor`.

Imports check and below.
"""
