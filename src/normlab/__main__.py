"""``python -m normlab`` (also what ``torchrun -m normlab`` runs)."""

from normlab.cli import main

raise SystemExit(main())
