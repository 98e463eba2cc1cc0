"""``python -m sharedsub`` runs the CLI."""

import sys

from sharedsub.cli import main

sys.exit(main())
