"""The plan of a fetch, made before anything is bought: cost, size, instruments, where to.

:func:`plan_fetch` asks Databento's free metadata and symbology endpoints what each part of a
:class:`~fxstore.fetch.request.FetchRequest` holds and costs, and looks in the store for what
was bought or downloaded already, so that nothing is ever bought twice.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fxstore.errors import FxStoreWarning, InvalidInputError, SymbolNotFoundError
from fxstore.fetch.layout import job_dir, read_job_record, verify_folder
from fxstore.remote import location

if TYPE_CHECKING:
    from fxstore.fetch.api import Api
    from fxstore.fetch.request import FetchRequest, Part

__all__ = ["FetchPlan", "PartPlan", "Resolved", "plan_fetch"]

Status = Literal["new", "bought", "complete"]


@dataclass(frozen=True, slots=True)
class Resolved:
    """What one requested symbol resolved to over the requested days."""

    symbol: str
    instrument_ids: tuple[int, ...]
    """Distinct instrument ids, ascending."""


@dataclass(frozen=True, slots=True)
class PartPlan:
    """One schema of the plan: what it costs and how and where it is fetched."""

    part: Part
    status: Status
    """new (to buy), bought (a job was bought earlier: downloaded again at no cost) or
    complete (on disk and intact: skipped)."""
    via: Literal["batch", "stream"]
    job_id: str | None
    """The job (or stream folder) bought earlier; None for a new batch job."""
    cost_usd: float
    """Price of buying it now (0 unless new)."""
    billable_bytes: int | None
    record_count: int | None
    folder: Path
    """The folder it lands in; for a new batch job, ``raw/<DATASET>/<job-id>`` (the job id is
    known once it is submitted)."""


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """Everything the user is shown before buying (:func:`plan_fetch`)."""

    request: FetchRequest
    store_root: Path
    resolved: tuple[Resolved, ...]
    parts: tuple[PartPlan, ...]

    @property
    def cost_usd(self) -> float:
        """US dollars still to spend: the new parts."""
        return sum(p.cost_usd for p in self.parts if p.status == "new")

    def check_max_cost(self) -> None:
        """Raise InvalidInputError when what is left to buy costs more than the request's
        `max_cost_usd`."""
        limit = self.request.max_cost_usd
        if limit is not None and self.cost_usd > limit:
            raise InvalidInputError(
                f"the plan costs ${self.cost_usd:,.2f}, above --max-cost {limit:g}; nothing was "
                "bought: narrow --start/--end or --symbol, or raise --max-cost."
            )

    @property
    def is_complete(self) -> bool:
        """Every part is on disk and intact."""
        return all(p.status == "complete" for p in self.parts)

    def format_text(self) -> str:
        """The plan as the CLI prints it."""
        req = self.request
        lines = [
            f"Plan: {req.dataset} {', '.join(req.symbols)} ({req.stype_in}), {req.start} to "
            f"{req.end} ({_count(self.parts[0].part.n_days, 'UTC day')}; Databento's end "
            f"{self.parts[0].part.end_exclusive} is exclusive)",
        ]
        for item in self.resolved:
            ids = ", ".join(map(str, item.instrument_ids[:8]))
            more = ", ..." if len(item.instrument_ids) > 8 else ""
            lines.append(
                f"  {item.symbol} resolves to {_count(len(item.instrument_ids), 'instrument')} "
                f"(ids {ids}{more})"
            )
        lines.append(
            f"  {'schema':<11} {'records':>15} {'billable':>11} {'cost':>12}  {'via':<7}files go to"
        )
        for p in self.parts:
            records = "-" if p.record_count is None else f"{p.record_count:,}"
            size = "-" if p.billable_bytes is None else _bytes(p.billable_bytes)
            cost = {"new": f"${p.cost_usd:,.2f}", "bought": "paid", "complete": "have it"}
            target = (
                location(p.folder)
                if p.status != "new" or p.job_id
                else f"{location(p.folder.parent)}/<job-id>"
            )
            lines.append(
                f"  {p.part.schema:<11} {records:>15} {size:>11} {cost[p.status]:>12}  "
                f"{p.via:<7}{target}/"
            )
        lines.append(f"  {'total to buy':<39} {f'${self.cost_usd:,.2f}':>12}")
        if any(p.via == "stream" and p.status != "complete" for p in self.parts):
            lines.append(
                "  stream: timeseries.get_range is billed on every call (a killed stream is "
                "bought again); batch jobs download again free for 30 days."
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The plan as JSON data."""
        return {
            "cost_usd": self.cost_usd,
            "resolved": {r.symbol: list(r.instrument_ids) for r in self.resolved},
            "parts": [
                {
                    "schema": p.part.schema,
                    "status": p.status,
                    "via": p.via,
                    "job_id": p.job_id,
                    "cost_usd": p.cost_usd,
                    "billable_bytes": p.billable_bytes,
                    "record_count": p.record_count,
                    "folder": location(p.folder),
                }
                for p in self.parts
            ],
        }


def plan_fetch(api: Api, request: FetchRequest, store_root: Path) -> FetchPlan:
    """Price `request` and find what of it the store already holds; buy nothing.

    Calls symbology.resolve once, then metadata.get_cost, get_billable_size and
    get_record_count for each part not bought before (all free).

    Raises
    ------
    SymbolNotFoundError
        A symbol resolves to no instrument on any requested day.
    DatabentoApiError
        The API refused a call (key, plan, arguments) or kept failing.
    """
    parts = request.parts()
    bought = [_bought_job(store_root, p) for p in parts]
    resolved: tuple[Resolved, ...] = ()
    if any(job is None for job in bought):
        resolved = _resolve(api, parts[0], request.symbols)
    plans = []
    for part, job_id in zip(parts, bought, strict=True):
        if job_id is not None:
            plans.append(_bought(part, job_id, store_root))
            continue
        size = api.billable_bytes(part)
        via: Literal["batch", "stream"] = (
            ("stream" if size <= request.stream_max_bytes else "batch")
            if request.via == "auto"
            else request.via
        )
        stream_id = f"stream-{part.key}" if via == "stream" else None
        folder = job_dir(store_root, part.dataset, stream_id or "job-id")
        plans.append(
            PartPlan(
                part,
                "new",
                via,
                stream_id,
                api.cost_usd(part),
                size,
                api.record_count(part),
                folder,
            )
        )
    return FetchPlan(request, store_root, resolved, tuple(plans))


def _bought_job(store_root: Path, part: Part) -> str | None:
    """The job bought earlier for `part`, unless it is a stream not finished (a stream cannot
    be resumed: it is bought again)."""
    job_id = read_job_record(store_root, part.dataset, part.key)
    is_stream = job_id is not None and job_id.startswith("stream-")
    if is_stream and verify_folder(job_dir(store_root, part.dataset, str(job_id))) is None:
        return None
    return job_id


def _bought(part: Part, job_id: str, store_root: Path) -> PartPlan:
    folder = job_dir(store_root, part.dataset, job_id)
    status: Status = "complete" if verify_folder(folder) is not None else "bought"
    via: Literal["batch", "stream"] = "stream" if job_id.startswith("stream-") else "batch"
    return PartPlan(part, status, via, job_id, 0.0, None, None, folder)


def _resolve(api: Api, part: Part, symbols: Sequence[str]) -> tuple[Resolved, ...]:
    answer = api.resolve(part)
    result = answer.get("result")
    mapping: Mapping[str, object] = result if isinstance(result, Mapping) else {}
    not_found = answer.get("not_found")
    unknown = set(map(str, not_found)) if isinstance(not_found, list) else set()
    missing = [s for s in symbols if s in unknown or not mapping.get(s)]
    if missing:
        raise SymbolNotFoundError(
            f"--symbol {', '.join(missing)}: Databento resolves it to no instrument in "
            f"{part.dataset} from {part.start} to {part.end} (stype {part.stype_in}); check "
            "the symbol, --stype-in and the dates."
        )
    partial = answer.get("partial")
    if isinstance(partial, list) and partial:
        warnings.warn(
            FxStoreWarning(
                f"{', '.join(map(str, partial))} resolve(s) on only some of the requested days."
            ),
            stacklevel=2,
        )
    out = []
    for symbol in symbols:
        intervals = mapping[symbol]
        ids = sorted(
            {int(i["s"]) for i in intervals if isinstance(i, Mapping) and str(i.get("s")).isdigit()}
            if isinstance(intervals, list)
            else set()
        )
        out.append(Resolved(symbol, tuple(ids)))
    return tuple(out)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
