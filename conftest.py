"""pytest configuration shared by tests/ and the doctests of onlinepgs/."""
import importlib.util

# onlinepgs.dask is optional: without Dask its doctests cannot be collected (and
# tests/test_dask.py skips itself with the reason)
collect_ignore = []
if importlib.util.find_spec("dask") is None:
    collect_ignore.append("onlinepgs/dask.py")
