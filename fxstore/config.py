"""Frozen configuration dataclasses, one per stage, passed explicitly as the first argument.

Each field carries a docstring (the attribute docstring under it); the CLI reuses these as
help text. Derived values are properties; validation happens in ``__post_init__``.
"""

from __future__ import annotations
