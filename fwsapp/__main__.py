import sys

from fwsapp.cli import main

sys.exit(main())
