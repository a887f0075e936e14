from robustkit.cli import main

raise SystemExit(main())
