"""Benchmarks of the sync: ``python -m benchmarks.run`` (``make bench``).

Every scenario starts the sandbox in its own process on 127.0.0.1, runs each
contender in its own child process (so neither shares the GIL with the other, and
the child's peak RSS can be read with ``os.wait4``), and reports medians of several
runs with ratios measured side by side in the same run.

Modules:

- :mod:`benchmarks.harness`: the sandbox process, child jobs with peak memory,
  medians, machine description.
- :mod:`benchmarks.worker`: the child process entry point (one job per process).
- :mod:`benchmarks.ours`: our sync through :func:`diligence.sync.run_sync`, with
  dlt's phase timings from the pipeline trace, then models and exports.
- :mod:`benchmarks.ceiling`: a bare concurrent fetch of the same URLs.
- :mod:`benchmarks.baseline_naive`: a sequential hand-written script.
- :mod:`benchmarks.baseline_rest_api`: dlt's declarative ``rest_api`` source.
- :mod:`benchmarks.counts`: rows per namespace in a warehouse vs the ground truth.
- :mod:`benchmarks.profiling`: summaries of pyinstrument sessions (where time goes).
- :mod:`benchmarks.report`: Markdown tables and goals.
- :mod:`benchmarks.scenarios`: the five scenarios and their tables.
- :mod:`benchmarks.run`: the command line (``make bench``).

The results: a headline (machine, goals, verdicts) in ``benchmarks/RESULTS.md``, every
scenario's tables in ``docs/benchmarks-history.md``. Scratch files (warehouses, logs,
profiles, the bytecode cache of the children, raw figures) go to ``benchmarks/.work/``
(git-ignored).
"""
