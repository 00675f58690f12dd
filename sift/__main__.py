import sys

from sift.cli import main

sys.exit(main())
