"""tritonml's test suite. A package, so that pytest puts the repository root on sys.path however
it is started: helpers import as ``tests.gpu_compile_cases``, the repository's tools as
``benchmarks``."""
