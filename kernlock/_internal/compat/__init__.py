"""The only code that touches kernels', Transformers' and Torch's internals.

`kernels_api` is the version-independent adapter kernlock's other layers use;
`kernels_017`, `kernels_018` and `kernels_019` each describe one kernels line
(where its modules live and what changed), and `kernels_api.line()` picks one once,
by the installed kernels version. `kernels_patch` wraps kernels' modules for `kernlock.apply()`;
`kernels_json_lock` reads and writes kernels' own JSON lock. `transformers` reads Transformers'
kernel tables from its source. An upgrade of either library is reviewed in this folder.
"""
