"""`python -m warninglight follow DIR`, the same as the `warninglight` console script."""
import sys

from .cli import main

sys.exit(main())
