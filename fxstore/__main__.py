"""``python -m fxstore`` runs the command-line interface."""

from __future__ import annotations

from fxstore.cli import main

if __name__ == "__main__":
    main()
