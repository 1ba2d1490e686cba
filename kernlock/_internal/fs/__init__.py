"""Small file-system utilities every layer above may use: atomic writes, TOML reading and writing,
kernlock's private per-user directory.

Imports only errors and settings.
"""
