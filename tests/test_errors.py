"""The exceptions: one root, every one exported (ArcticDB's test_base_exception)."""

from __future__ import annotations

import pytest

import fxstore
from fxstore import errors

pytestmark = pytest.mark.quick


def _defined(base: type[BaseException]) -> set[str]:
    """Names of the classes deriving from `base` that fxstore/errors.py defines."""
    own = {n: v for n, v in vars(errors).items() if getattr(v, "__module__", "") == errors.__name__}
    return {n for n, v in own.items() if isinstance(v, type) and issubclass(v, base)}


def _exported(base: type[BaseException]) -> set[str]:
    """Names in ``fxstore.__all__`` of classes deriving from `base`."""
    values = {name: getattr(fxstore, name) for name in fxstore.__all__}
    return {n for n, v in values.items() if isinstance(v, type) and issubclass(v, base)}


def test_every_exception_of_errors_py_is_exported_by_fxstore_and_errors() -> None:
    exceptions = _defined(Exception) - _defined(Warning)

    assert "TrainingDivergedError" in exceptions
    assert exceptions <= _exported(Exception)
    assert exceptions <= set(errors.__all__)


def test_every_exported_exception_subclasses_fxstore_error() -> None:
    exported = _exported(Exception) - _exported(Warning)

    assert exported == _defined(Exception) - _defined(Warning)
    assert all(issubclass(getattr(fxstore, name), fxstore.FxStoreError) for name in exported)


def test_every_exported_warning_subclasses_fxstore_warning() -> None:
    assert _exported(Warning) == {"FxStoreWarning"} == _defined(Warning)
