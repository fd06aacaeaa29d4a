"""Shared internals every layer uses: the backend choice, dtypes, argument checks, canonical
layouts, the reduce-function enum, and the one package that touches Triton's private API."""
