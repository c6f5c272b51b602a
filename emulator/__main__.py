import sys

from emulator.cli.main import main

sys.exit(main())
