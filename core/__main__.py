from tickformer.cli import main

raise SystemExit(main())
