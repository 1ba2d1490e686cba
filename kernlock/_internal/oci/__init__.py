"""Kernels as OCI artifacts: where they live (`reference`), the stores that hold them (`registry`
over the OCI distribution API with Docker/ORAS credentials from `credentials`, `layout` on disk) and
the artifact's shape (`artifact`: a manifest per locked variant, an index per lock).

Imports lockfile and below; `fetch` pushes and pulls through it.
"""
