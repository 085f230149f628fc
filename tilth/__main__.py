from tilth.cli.main import main

raise SystemExit(main())
