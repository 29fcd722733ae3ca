"""A run's report: one self-contained HTML page of its folds, totals, plots, config and data.

:func:`write_report` reads a run folder (``runs/<run-id>/``, of ``fxstore train`` or
``fxstore backtest``) and writes ``report.html`` into it (or where asked): a page that opens
offline in any browser, with nothing fetched from anywhere: the styles are inline, the
equity plots are embedded as base64 PNG, and every value from the run is HTML-escaped.

It shows

- the totals per policy over every test window, then one table per fold (every policy);
- the pooled Sharpe significance and the run's notes (the oracle, seeds);
- ``equity_all.png`` and each ``fold<NN>/equity.png``;
- the data the run read: the fxcache (its feature-set hash and the SHA-256 of its manifest
  recorded at the start, and whether the store's copy still has it), the bar series version
  and bar manifest SHA-256 the fxcache was built from, and the fxstore versions;
- the run's ``config.json`` as it was written.

A training run that has not finished (no ``metrics.json`` yet) shows the folds it finished.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from fxstore import __version__
from fxstore.errors import InvalidInputError
from fxstore.store import (
    atomic_write_bytes,
    existing_run_dir,
    file_sha256,
    fxcache_dir,
    manifest_path,
    os_errors,
    read_json,
)
from fxstore.train.runs.folder import finished_fold_metrics

__all__ = ["find_run", "render_report", "write_report"]

logger = logging.getLogger(__name__)

REPORT_NAME: Final = "report.html"
_CONFIG: Final = "config.json"
_METRICS: Final = "metrics.json"
Json = Mapping[str, object]


def _fmt(spec: str) -> Callable[[object], str]:
    def cell(value: object) -> str:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "n/a" if value is None else str(value)
        return format(value, spec) if math.isfinite(value) else "n/a"

    return cell


def _ci(value: object) -> str:
    if isinstance(value, list) and len(value) == 2 and None not in value:
        lo, hi = (_fmt(".2f")(v) for v in value)
        return f"{lo} .. {hi}"
    return "n/a"


#: Columns of the metric tables: header, metrics key, how the value is written.
_COLUMNS: Final[tuple[tuple[str, str, Callable[[object], str]], ...]] = (
    ("PnL $", "total_pnl", _fmt(",.2f")),
    ("PnL/day $", "pnl_per_day", _fmt(",.2f")),
    ("Sharpe ann.", "sharpe_daily", _fmt(".2f")),
    ("Sharpe ann. 95% CI", "sharpe_daily_ci", _ci),
    ("PSR", "psr_daily", _fmt(".3f")),
    ("max DD $", "max_drawdown", _fmt(",.2f")),
    ("max DD %", "max_drawdown_fraction", _fmt(".2%")),
    ("trades", "n_trades", _fmt(",d")),
    ("win rate", "win_rate", _fmt(".1%")),
    ("exposure", "exposure", _fmt(".1%")),
    ("days", "n_days", _fmt(",d")),
)

_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1280px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; }
th { background: #f0f3f7; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.agent td { font-weight: 600; }
img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.85em; }
.note { color: #555; }
code { font-size: 0.9em; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _iso(day: object) -> str:
    if not isinstance(day, int):
        return "?"
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


def _span(fold: object) -> str:
    span = fold.get("test_span") if isinstance(fold, dict) else None
    return f"{_iso(span[0])} .. {_iso(span[1])}" if isinstance(span, list) and span else "?"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], n_text: int = 1) -> str:
    """An HTML table; the first `n_text` columns are text, the others numbers (escaped)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f"<td>{_e(c)}</td>" if i < n_text else f'<td class="num">{_e(c)}</td>'
            for i, c in enumerate(row)
        )
        agent = ' class="agent"' if row and str(row[0]).startswith("agent") else ""
        body.append(f"<tr{agent}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _metric_rows(
    policies: Mapping[str, object], extra: Mapping[str, Sequence[str]], order: Sequence[object]
) -> list[list[str]]:
    """One row per policy, those of `order` (the run's policy order) first."""
    first = [p for p in order if isinstance(p, str) and p in policies]
    rows = []
    for policy in [*first, *(p for p in policies if p not in first)]:
        metrics = policies[policy]
        m = metrics if isinstance(metrics, dict) else {}
        cells = [str(policy), *(write(m.get(key)) for _, key, write in _COLUMNS)]
        rows.append([*cells, *extra.get(policy, ())])
    return rows


def find_run(root: Path, run_id: str) -> Path:
    """The folder of run `run_id` under ``<root>/runs/``.

    Raises
    ------
    InvalidInputError
        `run_id` is empty, holds a path separator or '..', or names no run (the message lists
        the runs there are).
    """
    return existing_run_dir(
        Path(root),
        run_id,
        _CONFIG,
        "pass one of those, --store the store that holds it, or make one with `fxstore train` "
        "or `fxstore backtest`.",
    )


def _read_metrics(folder: Path) -> tuple[Json, bool]:
    """The run's metrics.json, or one gathered from its finished folds (and False)."""
    if (folder / _METRICS).is_file():
        return read_json(folder / _METRICS), True
    folds = [read_json(p) for p in finished_fold_metrics(folder)]
    return {"folds": folds, "totals": {}}, False


def _png(path: Path, alt: str) -> str:
    with os_errors(path, "read"):
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<p><img alt="{_e(alt)}" src="data:image/png;base64,{data}"></p>'


def _plots(folder: Path) -> str:
    parts = []
    every = folder / "equity_all.png"
    if every.is_file():
        parts.append("<h3>All folds</h3>" + _png(every, "equity over all folds"))
    for path in sorted(folder.glob("fold*/equity.png")):
        name = path.parent.name
        parts.append(f"<h3>{_e(name)}</h3>" + _png(path, f"equity of {name}"))
    if not parts:
        parts.append('<p class="note">This run has no equity plots (made with --no-plots).</p>')
    elif not every.is_file():
        parts.insert(0, '<p class="note">No equity_all.png: the run predates it.</p>')
    return "".join(parts)


def _data_rows(root: Path, record: Json) -> list[list[str]]:
    """What the run read: the fxcache, the bars it was built from, the versions."""
    cache = record.get("fxcache")
    cache = cache if isinstance(cache, dict) else {}
    symbol, key, sha = cache.get("symbol"), cache.get("key"), cache.get("manifest_sha256")
    rows = [
        ["symbol", str(symbol)],
        ["fxcache (feature-set hash)", str(key)],
        ["fxcache manifest SHA-256 (at the run's start)", str(sha)],
        ["fxcache rows", _fmt(",d")(cache.get("n_rows"))],
        ["bars per day", _fmt(".1f")(cache.get("bars_per_day"))],
    ]
    manifest: Json = {}
    state = "not in this store any more"
    if isinstance(symbol, str) and isinstance(key, str):
        try:
            path = manifest_path(fxcache_dir(root, symbol, key))
        except InvalidInputError:
            path = None
        if path is not None and path.is_file():
            manifest = read_json(path)
            same = file_sha256(path) == sha
            state = "unchanged" if same else "CHANGED since the run (it was rebuilt)"
            rows.append(["fxcache in the store", f"{path}: {state}"])
        else:
            rows.append(["fxcache in the store", state])
    source = manifest.get("source")
    if isinstance(source, dict):
        rows += [
            ["bar series", str(source.get("bars_dir"))],
            ["bar series version", str(source.get("bar_version"))],
            ["bar manifest SHA-256", str(source.get("manifest_sha256"))],
        ]
        if manifest.get("fxstore_version") is not None:
            rows.append(["fxstore version of the fxcache", str(manifest["fxstore_version"])])
    for name in ("config_sha256", "profile_sha256"):
        if record.get(name) is not None:
            rows.append([name.replace("_sha256", " SHA-256"), str(record[name])])
    rows.append(["fxstore version of the run", str(record.get("fxstore_version"))])
    rows.append(["fxstore version of this report", __version__])
    return rows


def _totals_section(metrics: Json, finished: bool) -> str:
    totals = metrics.get("totals")
    if not finished or not isinstance(totals, dict) or not totals:
        return (
            '<p class="note">The run has not finished: no totals yet; the folds it finished '
            "are below.</p>"
        )
    in_sample = metrics.get("in_sample_sharpe_daily")
    share = metrics.get("share_of_oracle")
    of_ceiling = metrics.get("share_of_ceiling")  # absent in runs of older versions
    extra = {
        p: [
            _fmt(".2f")(in_sample.get(p) if isinstance(in_sample, dict) else None),
            _fmt(".1%")(share.get(p) if isinstance(share, dict) else None),
            _fmt(".1%")(of_ceiling.get(p) if isinstance(of_ceiling, dict) else None),
        ]
        for p in totals
    }
    header = [
        "policy",
        *(c[0] for c in _COLUMNS),
        "IS Sharpe ann.",
        "share of oracle",
        "share of ceiling",
    ]
    parts = [_table(header, _metric_rows(totals, extra, _list(metrics.get("policies"))))]
    lines = [_significance_line(s) for s in _list(metrics.get("significance"))]
    lines += [str(n) for n in _list(metrics.get("notes"))]
    if lines:
        parts.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>")
    return "".join(parts)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _significance_line(entry: object) -> str:
    s = entry if isinstance(entry, dict) else {}
    f = _fmt(".3f")
    return (
        f"{s.get('policy')}: Sharpe ann. {_fmt('.2f')(s.get('sharpe_annual'))} over "
        f"{s.get('n_days')} days, PSR {f(s.get('psr'))} (p {f(s.get('psr_p_value'))}); "
        f"deflated Sharpe {f(s.get('dsr'))} (p {f(s.get('dsr_p_value'))}) over "
        f"{s.get('n_trials')} trials"
    )


def _folds_section(metrics: Json) -> str:
    parts = []
    for entry in _list(metrics.get("folds")):
        e = entry if isinstance(entry, dict) else {}
        fold, policies = e.get("fold"), e.get("policies")
        if not isinstance(policies, dict):
            continue
        in_sample = e.get("in_sample_sharpe_daily")
        extra = {
            p: [_fmt(".2f")(in_sample.get(p) if isinstance(in_sample, dict) else None)]
            for p in policies
        }
        index = fold.get("index") if isinstance(fold, dict) else None
        number = index + 1 if isinstance(index, int) else "?"  # counted from 1, as tables do
        parts.append(f"<h3>fold {_e(number)}: test {_e(_span(fold))}</h3>")
        header = ["policy", *(c[0] for c in _COLUMNS), "IS Sharpe ann."]
        parts.append(_table(header, _metric_rows(policies, extra, _list(metrics.get("policies")))))
    return "".join(parts) or '<p class="note">No fold has finished yet.</p>'


def render_report(root: Path, folder: Path) -> str:
    """The report of the run in `folder` (see the module docstring), as one HTML page."""
    record = read_json(folder / _CONFIG)
    metrics, finished = _read_metrics(folder)
    kind = record.get("kind", "run")
    cache = record.get("fxcache")
    symbol = cache.get("symbol") if isinstance(cache, dict) else None
    title = f"fxstore {kind} {folder.name}"
    config = json.dumps(record.get("config"), indent=2, sort_keys=True)
    sections = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">{_e(kind)} of {_e(symbol)}; run folder <code>{_e(folder)}</code>; '
        f"{'finished' if finished else 'not finished'}.</p>",
        "<h2>Totals over every test window</h2>",
        _totals_section(metrics, finished),
        "<h2>Equity</h2>",
        _plots(folder),
        "<h2>Folds</h2>",
        _folds_section(metrics),
        "<h2>Data</h2>",
        _table(["what", "value"], _data_rows(Path(root), record), n_text=2),
        "<h2>Config</h2>",
        f"<pre>{_e(config)}</pre>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(sections)}</body></html>\n"
    )


def write_report(root: Path, run_id: str, out: Path | None = None) -> Path:
    """Write the HTML report of run `run_id` (atomic) and return its path.

    Parameters
    ----------
    root
        Store root (holds ``runs/``).
    run_id
        The run's folder name under ``runs/`` (as ``fxstore train`` printed it).
    out
        The file to write; default ``runs/<run-id>/report.html``.

    Raises
    ------
    InvalidInputError
        No such run, or a run id that would leave ``runs/``; a damaged ``config.json``.
    StoreAccessError
        The page cannot be written to `out`.
    """
    folder = find_run(Path(root), run_id)
    page = render_report(Path(root), folder)
    target = Path(out) if out is not None else folder / REPORT_NAME
    with os_errors(target.parent, "create"):
        target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, page.encode("utf-8"))
    logger.info("wrote the report of %s -> %s", run_id, target)
    return target
