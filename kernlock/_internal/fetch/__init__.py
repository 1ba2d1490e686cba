"""The locked files onto this machine: `sync` and `vendor`, and the download engine they share
(`download`, with `partial`: resumable private downloads), whose `ensure_variant` the runtime uses
too.

Imports check and below.
"""
