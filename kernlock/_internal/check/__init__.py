"""`kernlock verify`: freshness, coverage (+ `require_coverage`), integrity, the compatibility
doctor (+ `require_compatible`), the remote checks and the report.

Imports project and below; never resolve, fetch or runtime.
"""
