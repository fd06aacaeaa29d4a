"""``tritonml bench``: the benchmark suite and the instruments it measures with.

Modules: ``cases`` (the suite as data, inputs, references), ``memtrace`` (global-memory bytes
counted in Triton's interpreter), ``gpu_compile`` (sm_80/sm_90 compilation without a GPU),
``measure`` (bytes, launches, compile facts, modeled time, the targets), ``timing`` (do_bench on a
GPU), ``output`` (CSV, JSON, markdown, plots), ``run`` (the command), ``tolerances`` (the one
accuracy table), ``long_scans`` (the long scans the chunked regime is for, as the cost model sees
them). Nothing is imported here: ``python -m tritonml.bench.gpu_compile`` runs in a
compiled-mode child process and must not pull in the interpreter's instruments.
"""
