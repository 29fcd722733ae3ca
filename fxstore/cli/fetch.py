"""The ``fetch`` command: buy data from Databento's historical API, cost shown first."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fxstore.cli._options import command, default_of, json_option, quiet_option, store_option
from fxstore.cli._output import echo_json, progress
from fxstore.errors import InvalidInputError
from fxstore.fetch.api import DEFAULT_GATEWAY
from fxstore.remote import location

if TYPE_CHECKING:
    from fxstore.fetch import Api, FetchedPart, FetchPlan, FetchRequest, FetchResult
    from fxstore.fetch.request import Via


def _date(_ctx: click.Context, _param: click.Parameter, value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as err:
        raise click.BadParameter(f"must be a date YYYY-MM-DD, was {value!r}.") from err


def _request_default(name: str) -> object:
    from fxstore.fetch import FetchRequest

    return default_of(FetchRequest, name)


def connect(api_key_file: Path | None, gateway: str) -> Api:
    """The Databento calls, with the key from --api-key-file or DATABENTO_API_KEY."""
    from fxstore.fetch import Api, load_api_key

    key = load_api_key(os.environ.get("DATABENTO_API_KEY"), api_key_file)
    return Api(key, gateway)


def run_fetch(api: Api, plan: FetchPlan, poll_s: float, quiet: bool) -> FetchResult:
    """Buy and download `plan` with the job's state and a bar over its files on stderr."""
    from fxstore.fetch import fetch

    shown: dict[str, str] = {}

    def on_job(job_id: str, state: str, percent: float | None) -> None:
        line = f"job {job_id}: {state}" + (f" {percent:.0f}%" if percent is not None else "")
        if not quiet and shown.get(job_id) != line:
            click.echo(line, err=True)
            shown[job_id] = line

    with progress("download", quiet) as bar:
        started: set[str] = set()

        def on_file(job_id: str, _name: str, _done: int, total: int) -> None:
            if job_id not in started:
                bar.close()
                bar.start(total)
                started.add(job_id)
            bar.advance()

        return fetch(api, plan, poll_s=poll_s, on_job=on_job, on_file=on_file)


def _confirm(plan: FetchPlan) -> None:
    try:
        agreed = click.confirm(f"Buy it for ${plan.cost_usd:,.2f}?", default=False, err=True)
    except click.Abort:
        agreed = False
    if not agreed:
        raise InvalidInputError(
            "not confirmed, nothing was bought: answer y, or pass --yes to buy without asking."
        )


def _check_ingest(request: FetchRequest) -> None:
    if request.schema != "mbp-10" or len(request.symbols) != 1:
        raise InvalidInputError(
            "--ingest builds bars from one parent symbol's mbp-10 data: pass --schema mbp-10 "
            f"and one --symbol (was --schema {request.schema}, --symbol "
            f"{','.join(request.symbols)})."
        )


def _ingest(result: FetchResult, request: FetchRequest, store_root: Path, quiet: bool) -> None:
    from fxstore.cli.data import run_ingest
    from fxstore.config import IngestConfig

    parts = {part.schema: part for part in result.parts}
    definitions = parts.get("definition")
    config = IngestConfig(
        symbol=request.symbols[0],
        workers=os.cpu_count() or 1,
        definitions=(_readable(definitions),) if definitions is not None else (),
    )
    run_ingest(config, [_readable(parts[request.schema])], store_root, quiet)


def _readable(part: FetchedPart) -> Path:
    """The folder of `part` where ingest can read it: itself when its files are here, else
    (in an s3:// store, fetched by another machine) its objects downloaded into the cache."""
    from fxstore.cli._options import remote_settings
    from fxstore.remote import fetch_inputs

    if all((part.folder / file.name).is_file() for file in part.files):
        return part.folder
    endpoint, cache_dir = remote_settings()
    return fetch_inputs([location(part.folder)], endpoint=endpoint, cache_dir=cache_dir)[0]


@command()
@click.option(
    "--symbol",
    default=None,
    help="Databento symbol(s), comma-separated, in --stype-in symbology (ES.FUT).",
)
@click.option("--start", callback=_date, help="First UTC day (YYYY-MM-DD).")
@click.option("--end", callback=_date, help="Last UTC day, inclusive (YYYY-MM-DD).")
@click.option("--schema", default=_request_default("schema"), show_default=True, help="Schema.")
@click.option(
    "--dataset", default=_request_default("dataset"), show_default=True, help="Dataset code."
)
@click.option(
    "--stype-in",
    default=_request_default("stype_in"),
    show_default=True,
    help="Symbology of --symbol: parent, raw_symbol, continuous or instrument_id.",
)
@click.option("--with-definitions", is_flag=True, help="Also fetch the definition schema.")
@click.option(
    "--with-statistics", is_flag=True, help="Also fetch statistics (open interest, settlement)."
)
@click.option(
    "--max-cost",
    type=float,
    default=None,
    help="Refuse to buy when it costs more US dollars than this (no limit when not given).",
)
@click.option("-y", "--yes", is_flag=True, help="Buy without asking.")
@click.option(
    "--dry-run", is_flag=True, default=False, help="Show the plan and its cost; buy nothing."
)
@click.option(
    "--via",
    type=click.Choice(["auto", "batch", "stream"]),
    default=_request_default("via"),
    show_default=True,
    help="batch job (resumable) or timeseries stream; auto streams up to 100 MB billable.",
)
@click.option(
    "--api-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File holding the API key (read in place of the DATABENTO_API_KEY environment variable).",
)
@click.option(
    "--gateway",
    default=DEFAULT_GATEWAY,
    show_default=True,
    help="Databento historical API URL.",
)
@click.option(
    "--poll-seconds",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between looks at a batch job being prepared.",
)
@click.option("--ingest", "then_ingest", is_flag=True, help="Run `fxstore ingest` on the result.")
@store_option
@json_option
@quiet_option
def fetch(
    symbol: str | None,
    start: dt.date | None,
    end: dt.date | None,
    schema: str,
    dataset: str,
    stype_in: str,
    with_definitions: bool,
    with_statistics: bool,
    max_cost: float | None,
    yes: bool,
    dry_run: bool,
    via: Via,
    api_key_file: Path | None,
    gateway: str,
    poll_seconds: float,
    then_ingest: bool,
    store_root: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Buy Databento historical data into <store>/raw/<DATASET>/<job-id>/, cost shown first.

    Prints the plan (cost, billable size, records, resolved instruments, target folders,
    all from free metadata calls), asks before buying unless --yes, refuses above
    --max-cost. Only batch.submit_job and timeseries.get_range are billed. Files are
    checked against their sha256; a killed download resumes; a complete one is skipped.

    \b
    Example:
      fxstore fetch --symbol ES.FUT --start 2024-01-01 --end 2024-06-30 --dry-run
      fxstore fetch --symbol ES.FUT --start 2024-01-01 --end 2024-06-30 \\
        --with-definitions --max-cost 500 --ingest
    """
    from fxstore.fetch import FetchRequest, plan_fetch

    missing = [n for n, v in (("--symbol", symbol), ("--start", start), ("--end", end)) if not v]
    if missing:
        raise InvalidInputError(f"fetch needs {', '.join(missing)}: say what to buy.")
    assert symbol is not None and start is not None and end is not None
    request = FetchRequest(
        symbols=tuple(s.strip() for s in symbol.split(",") if s.strip()),
        start=start,
        end=end,
        dataset=dataset,
        schema=schema,
        stype_in=stype_in,
        with_definitions=with_definitions,
        with_statistics=with_statistics,
        max_cost_usd=max_cost,
        via=via,
    )
    if then_ingest:
        _check_ingest(request)
    api = connect(api_key_file, gateway)
    plan = plan_fetch(api, request, store_root)
    if not as_json:
        click.echo(plan.format_text())
    if dry_run:
        if as_json:
            echo_json(plan.to_json())
        return
    plan.check_max_cost()
    if plan.cost_usd > 0 and not yes:
        if as_json:  # stdout is kept for the JSON report: the plan goes beside the question
            click.echo(plan.format_text(), err=True)
        _confirm(plan)
    result = run_fetch(api, plan, poll_seconds, quiet)
    if as_json:
        echo_json({"plan": plan.to_json(), "fetched": [p.to_json() for p in result.parts]})
    for part in result.parts if not as_json else ():
        verb = "Up to date" if part.was_skipped else "Fetched"
        click.echo(
            f"{verb}: {part.schema} {len(part.files)} file{'s' if len(part.files) != 1 else ''}"
            f" ({part.n_bytes:,} bytes) -> {location(part.folder)}"
        )
    if then_ingest:
        _ingest(result, request, store_root, quiet)
