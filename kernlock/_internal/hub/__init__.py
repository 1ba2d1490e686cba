"""The Hub: the client (`client`), its bounded transport, and the Hub's listing of build variants.

Imports model, compat, errors and settings.
"""
