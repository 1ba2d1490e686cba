"""The project: `[tool.kernlock]` configuration, its sources and scan, the workspace (which lock,
which targets), and its policy for local kernels and strict mode.

Imports store and below.
"""
