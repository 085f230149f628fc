"""`python -m tilth`: the command line (`cli/main.main`)."""

from tilth.cli.main import main

raise SystemExit(main())
