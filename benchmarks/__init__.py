"""kernlock benchmarks against the anchors (GitHub issue #7).

Run::

    python -m benchmarks                  # full run (~15 min on 2 cores)
    python -m benchmarks --quick          # smoke run (fewer sizes and repetitions, ~3 min)
    python -m benchmarks --only lock      # one benchmark (repeatable): lock, load, cold, verify, scaling, startup
    python -m benchmarks --json out.json  # where the results JSON goes (default: a temp dir; path printed)

Each benchmark starts the test Hub (`kernlock.testing.hub.TestHub`, in-process
thread) over synthetic kernel repos generated at benchmark time into a temp
dir (N kernels x 15 build variants, small Python files plus one `_ops.so`),
with an injected per-request latency of 0 ms and 50 ms (the latter standing in
for a real Hub round trip). Children run in fresh processes pointed at the Hub
through HF_ENDPOINT and a private HF_HOME. Figures are medians over
repetitions and ratios measured in the same run, never absolute timings.

Benchmarks (one module each):

1. `lock`    — `kernlock lock` vs `kernels lock` for 1/10/50 kernels: wall time, requests, bytes,
               and what each lock records (variants, file hashes).
2. `load`    — time to kernel ready, warm cache: `kernlock.apply()` + `get_kernel` vs unlocked
               `get_kernel`; Hub requests; `import kernlock; kernlock.apply()` overhead.
3. `cold`    — bytes a cold load downloads: locked vs unlocked `get_kernel` vs `kernels download`
               (with and without `--all-variants`).
4. `verify`  — `kernlock verify` on a 50 kernels x 20 variants lock next to `python -c pass`;
               checks that it imports neither torch, transformers, kernels nor huggingface_hub.
5. `scaling` — `kernlock lock` of 50/200/500 kernels x 20 targets at 50 ms (lock time, requests, peak RSS,
               verify time); load + validate + coverage check of 10/100/1,000-kernel locks, and the integrity
               re-check of a 256 MB file with and without the verified-file stamp.
6. `startup` — per-child overhead under `kernlock run`: `python -c pass`, `import kernels` and a
               locked `get_kernel` with and without the start-up hook's environment; Hub requests.
`cluster` — N = 1/8/32/64 cold nodes (own HF_HOME each) running `kernlock sync` against the rate-limited
               test Hub, and `sync --from oci://` the CNCF registry after one `vendor --to`: Hub and registry
               requests, wall time, failures; then 64 processes' cold start on one cache and the cross-rank guard.
`resume`  — bytes the CDN re-sends when a `kernlock sync` that lost its connection half-way through
               the `_ops.so` is re-run (resumed with `Range`), next to a sync from byte 0; wall time of each.
`download` — `kernlock sync` of a variant whose `_ops.so` is 256 MB next to `hf_hub_download` of that
               file, each into an empty cache, alternating: wall time and each child's own peak RSS.

The run ends with a summary of targets (PASS/MISS).
"""
