import sys

from dpjax.cli import main

sys.exit(main())
