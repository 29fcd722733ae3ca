"""``fxstore verify``: check the store against its manifests, and repair what is derivable."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from fxstore.cli._options import command, json_option, store_option
from fxstore.cli._output import echo_json


@command()
@click.argument("symbol", required=False)
@click.option(
    "--repair",
    is_flag=True,
    help="Remove temporary files of killed writes and rebuild damaged fxcaches from their bars.",
)
@json_option
@store_option
def verify(symbol: str | None, repair: bool, as_json: bool, store_root: Path) -> None:
    """Check every bar series and fxcache (of SYMBOL, or all) against its manifest.

    Each listed file must exist inside the store with the recorded size and SHA-256 (every
    file is read); files that look like data but are not listed, temporary files of killed
    writes and unfinished builds are reported too. Prints one line per problem and a summary;
    exits 1 while any problem is left. --repair fixes only what is safe and derivable and
    never deletes data that may be good: it says what it cannot repair and what to do.

    \b
    Example:
      fxstore verify ES.FUT --repair
    """
    from fxstore.verify import verify_store

    report = verify_store(store_root, symbol, repair=repair)
    if as_json:
        echo_json({**asdict(report), "n_left": report.n_left})
    else:
        for line in report.format_lines():
            click.echo(line)
    if report.n_left:
        raise SystemExit(1)
