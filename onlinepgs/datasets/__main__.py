"""Print the path of a shipped data file, for use on the command line.

    onlinepgs train "$(python -m onlinepgs.datasets a9a-train)" -o model.pgs
"""
import argparse
import sys

from onlinepgs.datasets import a9a_path

NAMES = {"a9a-train": "train", "a9a-test": "test"}


def main(argv=None):
    """Print the path of the named file; exit 2 with a usage message for an unknown name."""
    parser = argparse.ArgumentParser(
        prog="python -m onlinepgs.datasets",
        description="Print the path of a data file shipped with onlinepgs "
                    "(a9a: UCI Adult, binarized; see onlinepgs.datasets' docstring).")
    parser.add_argument("name", choices=sorted(NAMES))
    args = parser.parse_args(argv)
    print(a9a_path(NAMES[args.name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
