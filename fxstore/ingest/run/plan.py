"""An ingest request resolved once: :class:`IngestPlan`.

:func:`plan_ingest` turns an :class:`~fxstore.config.IngestConfig` (what the user asked for)
into the facts every part of a run reads: which records to keep (the instrument selection,
parsed once at the boundary), the product root of a front-month run, the bar rule, and
where the series lives in the store. It runs once, at the top of
:func:`fxstore.ingest.ingest`; below it nothing parses an option string or derives the root
again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fxstore.config import BarConfig, IngestConfig, InstrumentSelection, RollConfig
from fxstore.errors import InvalidInputError
from fxstore.ingest.select.continuous import DatabentoMapping, read_resolve_json
from fxstore.ingest.select.front_month import FrontMonthSelector
from fxstore.ingest.select.roll_rules import OpenInterest, read_open_interest
from fxstore.market.calendar import DEFAULT_CALENDAR, Sessions, sessions
from fxstore.market.contracts import root_of_outright, root_of_parent
from fxstore.market.master import InstrumentMaster, calendar_of_symbol, check_facts, root_spec
from fxstore.store import bars_dir

__all__ = ["IngestPlan", "expand_definitions", "plan_ingest"]


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """What one ingest run builds, resolved and validated."""

    #: The request as given; its JSON is what manifests and day files record.
    config: IngestConfig
    #: Which records are kept: all, one instrument id, or the front month.
    selection: InstrumentSelection
    #: The product root whose outrights the front month is chosen from ("ES" of "ES.FUT");
    #: None in modes all and id=N.
    root: str | None
    #: Contract facts (multiplier, tick size, expiry) by raw symbol: definition records of
    #: the inputs and --definitions first, fxstore's table of CME roots second.
    master: InstrumentMaster = field(default_factory=InstrumentMaster)
    #: The calendar of the product's Globex sessions (pandas_market_calendars name): which
    #: trading day each record belongs to, and when each session opens and closes.
    calendar: str = DEFAULT_CALENDAR
    #: ``--roll open-interest``: the open interest of the --statistics files; else None.
    open_interest: OpenInterest | None = None
    #: The --statistics files, expanded (they are inputs: the fingerprint covers them).
    statistics_files: tuple[Path, ...] = ()
    #: ``--roll databento``: the continuous symbol's mapping of --roll-symbology; else None.
    continuous: DatabentoMapping | None = None

    @property
    def roll(self) -> RollConfig:
        """The roll rule and price adjustment."""
        return self.config.roll

    @property
    def records_transitions(self) -> bool:
        """Whether the run prices its rolls and records their transitions in the manifest:
        whenever --roll, --roll-months or --adjust were given (a default run's output stays
        what it always was)."""
        return self.root is not None and not self.roll.is_default

    def new_selector(self) -> FrontMonthSelector | None:
        """A front-month selector of the run's roll rule (None outside front-month mode)."""
        if self.root is None:
            return None
        return FrontMonthSelector(
            self.root,
            self.roll,
            master=self.master,
            table=self.sessions,
            open_interest=self.open_interest,
            continuous=self.continuous,
        )

    @property
    def sessions(self) -> Sessions:
        """The session table of :attr:`calendar` (built once per process)."""
        return sessions(self.calendar)

    @property
    def symbol(self) -> str:
        """The store key and Databento parent symbol ("ES.FUT")."""
        return self.config.symbol

    @property
    def store_symbol(self) -> str:
        """The series' store key: :attr:`symbol`, or "ES.FUT.2" for ``--depth 2``."""
        return self.config.store_symbol

    @property
    def bars(self) -> BarConfig:
        """The bar rule."""
        return self.config.bars

    @property
    def chunk_records(self) -> int:
        """Records per decoded chunk."""
        return self.config.chunk_records

    @property
    def workers(self) -> int:
        """Processes that build trading days in parallel."""
        return self.config.workers

    def bars_for(self, raw_symbol: str, day: dt.date) -> BarConfig:
        """The bar rule for one contract on trading day `day`: with its own multiplier
        (from the master) unless ``--multiplier`` fixed one for the run.

        Raises
        ------
        InvalidInputError
            The master knows nothing of the contract (see
            :meth:`~fxstore.market.master.InstrumentMaster.multiplier`).
        """
        defined = self.master.definition(raw_symbol)
        if defined is not None:  # a definition's expiry must not precede its data
            check_facts(defined, on=day)
        if self.bars.multiplier is not None:
            return self.bars
        multiplier, _ = self.master.multiplier(raw_symbol, day)
        return dataclasses.replace(self.bars, multiplier=multiplier)

    def out_dir(self, store_root: Path) -> Path:
        """The bar series' folder: ``bars/<store symbol>/<instrument-key>/<bar-key>/``
        (the store symbol of ``--depth 2`` is "ES.FUT.2": :func:`fxstore.config.depth_symbol`)."""
        key = self.config.instrument_key
        return bars_dir(store_root, self.store_symbol, key, self.bars.key)


def plan_ingest(config: IngestConfig, definitions: Sequence[Path] = ()) -> IngestPlan:
    """Resolve `config` into a plan: the product root of a front-month run, and the
    instrument master of the `definitions` files (Databento schema ``definition``).

    Raises
    ------
    InvalidInputError
        A front-month symbol that is not a parent symbol (``ROOT.FUT``); a front-month root
        that neither the definitions nor fxstore's table know (without ``--multiplier``);
        an unreadable definition file.
    SchemaError
        A definition file that is not DBN of schema definition.
    """
    selection = config.instrument_mode
    root = root_of_parent(config.symbol) if selection.mode == "front-month" else None
    master = InstrumentMaster.from_files(definitions)
    _check_definitions(config, master)
    if root is not None and config.bars.multiplier is None and not master.knows_root(root):
        root_spec(root)  # raises, naming --definitions
    calendar = calendar_of_symbol(config.symbol)
    statistics = tuple(_expand(config.statistics, "--statistics", "statistics"))
    open_interest = _open_interest(config, statistics)
    if root is not None and config.roll.rule == "calendar" and not master.knows_root(root):
        raise InvalidInputError(
            f"`--roll calendar` needs the last trading days of {root}'s contracts: fxstore's "
            f"table does not hold root {root!r}; pass Databento definition records with "
            "--definitions PATH."
        )
    return IngestPlan(
        config=config,
        selection=selection,
        root=root,
        master=master,
        calendar=calendar,
        open_interest=open_interest,
        statistics_files=statistics,
        continuous=_continuous(config),
    )


def _continuous(config: IngestConfig) -> DatabentoMapping | None:
    """The mapping `--roll databento` follows, from the --roll-symbology file."""
    if config.roll.rule != "databento":
        if config.symbology is not None:
            raise InvalidInputError(
                f"--roll-symbology {config.symbology} is the schedule of `--roll databento`; "
                f"add it, or leave the file out (was `--roll {config.roll.rule}`)."
            )
        return None
    if config.symbology is None:
        raise InvalidInputError(
            "`--roll databento` follows a saved Databento symbology.resolve answer "
            "(stype_in continuous, e.g. ES.c.0): pass it with --roll-symbology FILE."
        )
    return read_resolve_json(config.symbology, config.roll.databento_symbol)


def _check_definitions(config: IngestConfig, master: InstrumentMaster) -> None:
    """Refuse implausible facts (:func:`~fxstore.market.master.check_facts`) in the
    definitions of the futures a run may keep: those of --symbol's root, and the instrument
    of --instrument-mode id=N; before anything is written."""
    selection = config.instrument_mode
    root = config.symbol.removesuffix(".FUT") if config.symbol.endswith(".FUT") else None
    for facts in master.definitions:
        if (root is not None and root_of_outright(facts.raw_symbol) == root) or (
            facts.instrument_id == selection.instrument_id
        ):
            check_facts(facts)


def _open_interest(config: IngestConfig, files: Sequence[Path]) -> OpenInterest | None:
    """The open interest `--roll open-interest` ranks by, from the statistics files."""
    if config.roll.rule != "open-interest":
        return None
    if not files:
        raise InvalidInputError(
            "`--roll open-interest` needs open interest: pass Databento statistics files "
            "(schema 'statistics') of the same days with --statistics PATH."
        )
    found = read_open_interest(files)
    if not len(found):
        names = ", ".join(p.name for p in files[:3])
        raise InvalidInputError(
            f"--statistics {names}: no open-interest record (stat_type 9) in the files; pass "
            "statistics of the root's outrights for the same days."
        )
    return found


def expand_definitions(paths: Sequence[Path]) -> list[Path]:
    """Definition files of ``--definitions``: files as given, folders' *.dbn / *.dbn.zst.

    Raises
    ------
    InvalidInputError
        A path that does not exist, or a folder without DBN files.
    """
    return _expand(paths, "--definitions", "definition")


def _expand(paths: Sequence[Path], option: str, schema: str) -> list[Path]:
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith((".dbn", ".dbn.zst")))
            if not found:
                raise InvalidInputError(
                    f"{option} {path}: the folder holds no *.dbn or *.dbn.zst files; pass "
                    f"Databento {schema} files."
                )
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise InvalidInputError(f"{option} {path}: no such file or folder.")
    return files
