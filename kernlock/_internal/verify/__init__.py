"""`kernlock verify`: the rules' findings plus the cache, remote, signature, `--against` and
advisory checks, in one `VerifyReport` (text, JSON, SARIF).

Imports rules and below; never resolve, fetch or runtime.
"""
