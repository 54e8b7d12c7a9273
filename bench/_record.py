"""Where a benchmark run is kept (imported by the scripts of bench/; not a script itself).

One record a script in docs/bench/, one section a run: ``--out FILE#NAME`` writes the run
as the section NAME of FILE (between ``<!-- run NAME -->`` and ``<!-- end of run NAME
-->``), replacing that section's former run and keeping the others; ``--out FILE`` writes
FILE whole. docs/benchmarks.md cites each figure's command and its record's section.
"""
from pathlib import Path


def write_record(out, text):
    """Write `text` (one run's markdown) to `out`, ``FILE`` or ``FILE#NAME``; returns the
    file's path."""
    path, _, name = str(out).partition("#")
    path = Path(path)
    if not name:
        path.write_text(text)
        return path
    begin, end = f"<!-- run {name} -->\n", f"<!-- end of run {name} -->\n"
    section = begin + text.rstrip("\n") + "\n" + end
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old[old.index(begin):]:
        start = old.index(begin)
        stop = old.index(end, start) + len(end)
        new = old[:start] + section + old[stop:]
    else:
        new = old + ("\n" if old and not old.endswith("\n\n") else "") + section
    path.write_text(new)
    return path
