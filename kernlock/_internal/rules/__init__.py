"""The rules a lock must meet, as guards that raise (`require_fresh`, `require_coverage`,
`require_compatible`, GPU archs, signatures) and checks that collect findings (`check_*`):
freshness, coverage, compatibility (the doctor), GPU archs, override values, signatures.

Imports project and below; never verify, resolve, fetch, runtime or cli.
"""
