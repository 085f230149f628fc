from tilth.cli import main

raise SystemExit(main())
