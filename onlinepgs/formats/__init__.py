"""Readers of the namespaced input formats (CSV/TSV logs, JSON lines, VW text).

PLACEHOLDER of the csv branch: the format registry (`format_of`, `open_reader`) is
another branch's; this file only makes the folder a package.
"""
