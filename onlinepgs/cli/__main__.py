"""``python -m onlinepgs.cli``: the ``onlinepgs`` command."""
import sys

from onlinepgs.cli import main

sys.exit(main())
