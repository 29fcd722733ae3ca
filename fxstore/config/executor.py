"""Which executor runs a stage's work units: the local pool, or Ray (:mod:`fxstore.executor`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from fxstore.errors import InvalidInputError

__all__ = ["EXECUTOR_KINDS", "RAY_TIMEOUT_S", "ExecutorConfig", "ExecutorKind"]

ExecutorKind = Literal["local", "ray"]
EXECUTOR_KINDS: Final = ("local", "ray")
#: Seconds to wait for a Ray cluster at an address to answer (``--ray-timeout``).
RAY_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    """Which executor runs a stage's work units (``--executor``, ``--ray-address``)."""

    kind: ExecutorKind = "local"
    """"local": a process pool on this machine (as before); "ray": tasks on a Ray cluster."""

    address: str | None = None
    """Ray only: the cluster to join ("auto", "ray://host:10001", "host:6379"); None starts a
    Ray instance on this machine for the run (or uses the one this process already has)."""

    connect_timeout_s: float = RAY_TIMEOUT_S
    """Ray only: seconds to wait for the cluster at `address` to answer before giving up
    with one error line (``--ray-timeout``)."""

    def __post_init__(self) -> None:
        if not self.connect_timeout_s > 0:
            raise InvalidInputError(
                "`ray_timeout` must be a positive number of seconds, was "
                f"{self.connect_timeout_s!r}."
            )
        if self.kind not in EXECUTOR_KINDS:
            raise InvalidInputError(
                f"`executor` must be one of {', '.join(EXECUTOR_KINDS)}, was {self.kind!r}."
            )
        if self.address is not None and self.kind != "ray":
            raise InvalidInputError(
                f"`ray_address` ({self.address!r}) needs the Ray executor: add --executor ray."
            )

    @property
    def is_ray(self) -> bool:
        return self.kind == "ray"
