"""Feature sets: named, parameterised instances of the kinds, their settings, hash and TOML form.

A feature set is code (:func:`default_featureset`) or a TOML file that picks and
parameterises definitions (``fxstore precompute --features FILE``)::

    [settings]                # optional; these are the defaults
    # tick_size = 0.25        # index points per tick; unset: the bars' contract facts
    vol_window = 200          # bars of the volatility normaliser
    vol_floor = 1e-6

    [[features]]              # omitted: the default features
    name = "ret_4"            # a default feature, as defined in code
    [[features]]
    name = "ret_8"            # a new one: a kind and its parameters
    kind = "log_return"
    horizon = 8

    [[targets]]               # omitted: the default targets; `targets = []`: none
    name = "fwd_4"            # a default target (fwd_1, fwd_2, fwd_4, fwd_8, fwd_16)
    [[targets]]
    name = "fwd_128"          # a new one: the next 128 bars' return
    kind = "forward_return"
    horizon = 128             # 1 to 256 bars (MAX_TARGET_HORIZON_BARS)

A feature may also be an expression over bar columns and other features of the set
(:mod:`fxstore.features.expressions`, :mod:`fxstore.features.algebra`; docs/guide/expressions.md)::

    [[features]]
    name = "flow_ema32"
    expr = "ema(trade_imb, 32)"   # trade_imb: a feature of the set
    reset = "session"             # optional: restart windows at each trading day

The fxcache key is :meth:`FeatureSet.hash`: 16 hex digits of the SHA-256 of the canonical
JSON of :meth:`FeatureSet.definition` (names, kinds, every parameter, settings, the
definitions' version and each kind's version, and the bar series it is computed from: its
keys and the SHA-256 of its manifest), so changing any of them, or re-ingesting other data,
writes to a new key and old and new shards never mix.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Final

from fxstore.errors import InvalidInputError
from fxstore.features.algebra import ExprDef, check_expressions, first_defined_bars
from fxstore.features.expressions import node_from_json, unparse
from fxstore.features.registry import KINDS, Kind, Param, ParamValue, check_name

__all__ = [
    "DEFAULT_TARGET_HORIZONS",
    "DEFINITIONS_VERSION",
    "FEATURESETS",
    "SLOW_SPANS",
    "ExprDef",
    "FeatureDef",
    "FeatureSet",
    "Settings",
    "classic_featureset",
    "default_featureset",
    "featureset_from_definition",
    "featureset_named",
    "load_featureset",
    "parse_featureset",
    "resolve_featureset",
]

#: Version of the definitions as a whole (conventions shared by every kind: returns within a
#: contract, the volatility normaliser, warm-up rules). Bump it when they change.
DEFINITIONS_VERSION: Final = 1


def _check_float(name: str, value: object, *, low: float, inclusive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"`{name}` must be a finite number, was {value!r}.")
    if value < low or (value == low and not inclusive):
        raise InvalidInputError(
            f"`{name}` must be {'>=' if inclusive else '>'} {low}, was {value}."
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class Settings:
    """Settings shared by every definition of a feature set."""

    tick_size: float | None = None
    """Minimum price increment in index points (ES: 0.25); spread, microprice and VWAP
    distance are in ticks. None: the bars' contract facts (the bar manifest's
    ``contracts``, from Databento definitions or fxstore's table of CME roots) give it when
    precompute runs (:meth:`FeatureSet.with_tick_size`)."""

    vol_window: int = 200
    """Bars of the volatility normaliser sigma_t (rolling RMS of within-contract one-bar log
    returns); every vol-normalised value is defined from bar `vol_window` on."""

    vol_floor: float = 1e-6
    """Lower bound of sigma_t (log-return units), so a market that did not move for
    `vol_window` bars does not divide by zero."""

    prices: str = "raw"
    """Price levels the features read: 'raw' (as traded) or 'adjusted' (the bars'
    roll-adjusted close, VWAP and best bid/ask, from bars ingested with ``--adjust``)."""

    def __post_init__(self) -> None:
        if self.prices not in ("raw", "adjusted"):
            raise InvalidInputError(f"`prices` must be 'raw' or 'adjusted', was {self.prices!r}.")
        if self.tick_size is not None:
            _check_float("tick_size", self.tick_size, low=0.0)
        if isinstance(self.vol_window, bool) or not isinstance(self.vol_window, int):
            raise InvalidInputError(
                f"`vol_window` must be a whole number, was {self.vol_window!r}."
            )
        if self.vol_window < 2:
            raise InvalidInputError(f"`vol_window` must be >= 2 bars, was {self.vol_window}.")
        _check_float("vol_floor", self.vol_floor, low=0.0)

    @property
    def tick(self) -> float:
        """`tick_size`, which must be set (resolved from the bars) by now."""
        if self.tick_size is None:
            raise InvalidInputError(
                "the feature set's `tick_size` is not set: precompute takes it from the bars' "
                "contract facts; set [settings] tick_size to compute features without them."
            )
        return self.tick_size

    def to_json(self) -> dict[str, ParamValue | None]:
        """The settings as JSON data (`tick_size` None: not resolved yet)."""
        out: dict[str, ParamValue | None] = {
            "tick_size": None if self.tick_size is None else float(self.tick_size),
            "vol_window": self.vol_window,
            "vol_floor": float(self.vol_floor),
        }
        if self.prices != "raw":  # absent by default: existing feature-set hashes hold
            out["prices"] = self.prices
        return out


def _check_param(where: str, name: str, spec: Param, value: object) -> ParamValue:
    """Return `value` as the parameter's type, or raise InvalidInputError saying why not."""
    if spec.type is str:
        if not isinstance(value, str) or (spec.choices and value not in spec.choices):
            choices = " or ".join(repr(c) for c in spec.choices)
            raise InvalidInputError(f"{where}: `{name}` must be {choices}, was {value!r}.")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{where}: `{name}` must be a number, was {value!r}.")
    if spec.type is int and value != int(value):
        raise InvalidInputError(f"{where}: `{name}` must be a whole number, was {value!r}.")
    number: int | float = int(value) if spec.type is int else float(value)
    if (spec.low is not None and number < spec.low) or (
        spec.high is not None and number > spec.high
    ):
        high = f" and <= {spec.high:g}" if spec.high is not None else ""
        raise InvalidInputError(f"{where}: `{name}` must be >= {spec.low:g}{high}, was {value!r}.")
    return number


@dataclass(frozen=True, slots=True)
class FeatureDef:
    """One named instance of a kind, e.g. ``FeatureDef("ret_4", "log_return", {"horizon": 4})``.

    Parameters left out take the kind's defaults; `params` is stored complete and sorted.
    The column is ``f_<name>`` for a feature, ``target_<name>`` for a target.
    """

    name: str
    kind: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name)
        where = f"feature {self.name!r}"
        if self.kind not in KINDS:
            known = ", ".join(sorted(KINDS))
            raise InvalidInputError(f"{where}: unknown kind {self.kind!r}; known: {known}.")
        spec = KINDS[self.kind]
        where = f"{'target' if spec.is_target else 'feature'} {self.name!r}"
        unknown = sorted(set(self.params) - set(spec.params))
        if unknown:
            known = ", ".join(spec.params) or "none"
            raise InvalidInputError(
                f"{where}: kind {self.kind!r} has no parameter {unknown[0]!r}; it has: {known}."
            )
        where = f"{where} ({self.kind})"
        params = {
            name: _check_param(where, name, p, self.params.get(name, p.default))
            for name, p in sorted(spec.params.items())
        }
        object.__setattr__(self, "params", MappingProxyType(params))

    @property
    def spec(self) -> Kind:
        """The kind this feature instantiates."""
        return KINDS[self.kind]

    def to_json(self) -> dict[str, object]:
        """Name, kind, the kind's version and every parameter, as JSON data."""
        return {
            "name": self.name,
            "kind": self.kind,
            "kind_version": self.spec.version,
            "params": dict(self.params),
        }


def _check_group(defs: Sequence[FeatureDef | ExprDef], group: str, is_target: bool) -> None:
    seen: set[str] = set()
    for item in defs:
        if not isinstance(item, FeatureDef | ExprDef) or (is_target and isinstance(item, ExprDef)):
            wanted = "FeatureDef" if is_target else "FeatureDef or ExprDef"
            raise InvalidInputError(f"{group} must hold {wanted} items, got {item!r}.")
        if item.spec.is_target and not is_target:
            raise InvalidInputError(
                f"feature {item.name!r}: kind {item.kind!r} looks ahead; make it a target."
            )
        if is_target and not item.spec.is_target:
            raise InvalidInputError(
                f"target {item.name!r}: kind {item.kind!r} is not a target kind "
                f"(targets: {', '.join(k for k, v in KINDS.items() if v.is_target)})."
            )
        if item.name in seen:
            raise InvalidInputError(f"{group[:-1]} name {item.name!r} is used twice.")
        seen.add(item.name)


@dataclass(frozen=True, slots=True)
class FeatureSet:
    """The features and targets precompute writes, and their shared settings."""

    features: tuple[FeatureDef | ExprDef, ...]
    """Feature definitions (built-in kinds or expressions), in column order (at least one)."""

    targets: tuple[FeatureDef, ...] = ()
    """Target definitions (forward-looking, never model inputs), in column order."""

    settings: Settings = field(default_factory=Settings)
    """Tick size and volatility normaliser."""

    def __post_init__(self) -> None:
        if not self.features:
            raise InvalidInputError("a feature set needs at least one feature.")
        _check_group(self.features, "features", is_target=False)
        _check_group(self.targets, "targets", is_target=True)
        check_expressions(self.features, self.targets)

    def with_tick_size(self, tick_size: float) -> FeatureSet:
        """This feature set with `tick_size` (the bars' contract facts) where it sets none."""
        if self.settings.tick_size is not None:
            return self
        return replace(self, settings=replace(self.settings, tick_size=float(tick_size)))

    @property
    def warmup_rows(self) -> int:
        """Leading bars where some feature or target is not defined yet (they are dropped)."""
        window = self.settings.vol_window
        features = first_defined_bars(self.features, window).values()
        return max([*features, *(d.spec.warmup(d.params, window) for d in self.targets)])

    @property
    def max_target_horizon(self) -> int:
        """Bars the longest target looks ahead (the trailing bars without it are dropped)."""
        return max((d.spec.lookahead(d.params) for d in self.targets), default=0)

    def definition(
        self, *, instrument_key: str, bar_key: str, bars_sha256: str
    ) -> dict[str, object]:
        """The canonical JSON data the hash covers: versions, settings, definitions, source.

        The source is the bar series (its keys) and its identity: `bars_sha256`, the SHA-256
        of the bar manifest the features are computed from, so other bars under the same
        keys (a re-ingest of other data) never share a cache key. The tick size must be set
        (:meth:`with_tick_size`): a key is never made of an unresolved setting.
        """
        self.settings.tick  # noqa: B018 -- raises while `tick_size` is unresolved
        return {
            "version": DEFINITIONS_VERSION,
            "settings": self.settings.to_json(),
            "features": [d.to_json() for d in self.features],
            "targets": [d.to_json() for d in self.targets],
            "bars": {
                "instrument_key": instrument_key,
                "bar_key": bar_key,
                "manifest_sha256": bars_sha256,
            },
        }

    def hash(self, *, instrument_key: str, bar_key: str, bars_sha256: str) -> str:
        """16 hex digits of the SHA-256 of the canonical :meth:`definition` (the fxcache key)."""
        blob = json.dumps(
            self.definition(
                instrument_key=instrument_key, bar_key=bar_key, bars_sha256=bars_sha256
            ),
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _defs(entries: Sequence[tuple[str, str, Mapping[str, ParamValue]]]) -> tuple[FeatureDef, ...]:
    return tuple(FeatureDef(name, kind, params) for name, kind, params in entries)


_CLASSIC_FEATURES: Final = _defs(
    [
        *((f"ret_{h}", "log_return", {"horizon": h}) for h in (1, 4, 16, 64)),
        *((f"rv_{n}", "realised_vol", {"window": n}) for n in (16, 64)),
        *((f"ofi_{lv}", "ofi_level", {"level": lv, "window": 100}) for lv in range(10)),
        ("ofi_all", "ofi_multi", {"levels": 10, "window": 100}),
        *((f"book_imb_{n}", "book_imbalance", {"levels": n}) for n in (1, 5, 10)),
        ("spread", "spread_ticks", {}),
        ("microprice", "microprice_offset", {}),
        ("depth", "depth", {"levels": 10, "window": 100}),
        ("trade_imb", "trade_imbalance", {}),
        ("intensity", "trade_intensity", {"window": 100}),
        ("duration", "bar_duration", {"window": 100}),
        ("vwap_dist", "vwap_distance", {}),
        ("tod_sin", "time_of_day", {"fn": "sin"}),
        ("tod_cos", "time_of_day", {"fn": "cos"}),
        ("session_start", "session_start", {}),
    ],
)
#: The classic set's targets: the next 1, 4 and 16 bars (its caches keep their keys).
_CLASSIC_TARGETS: Final = _defs(
    [(f"fwd_{h}", "forward_return", {"horizon": h}) for h in (1, 4, 16)]
)
#: Horizons (bars) of the default set's targets: the ``linear`` reference fits each and
#: chooses one on validation. They stop at the classic set's 16 bars, so the fxcache keeps
#: as many trailing bars and the walk-forward folds keep their gaps (each gap holds the
#: longest horizon: 64 bars would make it three trading days instead of one on bars of ~31
#: a day, and a 240-bar market too short for the default set). Longer horizons, up to 256
#: bars, are one [[targets]] entry each in a feature-set file.
DEFAULT_TARGET_HORIZONS: Final = (1, 2, 4, 8, 16)
_DEFAULT_TARGETS: Final = _defs(
    [(f"fwd_{h}", "forward_return", {"horizon": h}) for h in DEFAULT_TARGET_HORIZONS]
)


#: Spans (bars) of the default set's slow views of the flow: from a few bars to several
#: trading days' worth (a day holds about 75 default bars).
SLOW_SPANS: Final = (4, 8, 16, 32, 64, 128, 256)
#: The flow read over many bars, restarted at each trading day's first bar: exponential
#: averages of the bar's trade imbalance (a ratio), of its signed volume (contracts bought
#: minus sold at the ask and bid), and of the signed volume per trade. Chosen by the feature
#: ceiling (the planted signal's out-of-fold projection on the features): on three synthetic
#: years these 21 views raised its correlation with the signal from 0.47-0.49 to 0.71-0.72
#: and its PnL from about 0% to 43-70% of the oracle's, while views of returns, OFI and the
#: book added nothing (``bench/diag_slow_views.py``, ``bench/bench_ceiling.py``,
#: docs/findings.md).
_SLOW_VIEWS: Final = (
    *(ExprDef(f"trade_imb_ema{n}", f"ema(trade_imb, {n})", "session") for n in SLOW_SPANS),
    *(
        ExprDef(f"signed_vol_ema{n}", f"ema(buy_volume - sell_volume, {n})", "session")
        for n in SLOW_SPANS
    ),
    *(
        ExprDef(
            f"signed_per_trade_ema{n}",
            f"ema(buy_volume - sell_volume, {n}) / (ema(n_trades, {n}) + 1)",
            "session",
        )
        for n in SLOW_SPANS
    ),
)


def classic_featureset() -> FeatureSet:
    """The classic feature set: 30 built-in features read over 1 to 64 bars (the flow at one
    bar), and 3 targets (the next 1, 4 and 16 bars); fxstore's default before the slow views
    (``--features classic``)."""
    return FeatureSet(_CLASSIC_FEATURES, _CLASSIC_TARGETS, Settings())


def default_featureset() -> FeatureSet:
    """The default feature set: the classic set's 30 features, 21 slow views of the flow
    (exponential averages over 4 to 256 bars, restarted each trading day) and 5 targets (the
    next 1, 2, 4, 8 and 16 bars: :data:`DEFAULT_TARGET_HORIZONS`)."""
    return FeatureSet((*_CLASSIC_FEATURES, *_SLOW_VIEWS), _DEFAULT_TARGETS, Settings())


#: Feature sets by name (``precompute --features NAME``, ``fxstore features --features NAME``).
FEATURESETS: Final = {"default": default_featureset, "classic": classic_featureset}


def resolve_featureset(featureset: FeatureSet | None) -> FeatureSet:
    """`featureset`, or the default feature set for None (:class:`~fxstore.config.FeatureConfig`).

    Raises
    ------
    InvalidInputError
        `featureset` is neither None nor a FeatureSet.
    """
    if featureset is None:
        return default_featureset()
    if not isinstance(featureset, FeatureSet):
        raise InvalidInputError(
            f"`features` must be a FeatureSet, was {type(featureset).__name__}."
        )
    return featureset


def _expression(entry: Mapping[str, object], group: str) -> ExprDef:
    """An ``expr`` entry of [[features]] (name, expr and an optional reset)."""
    name = entry["name"]
    if group == "targets":
        raise InvalidInputError(
            f"[[targets]] {name!r}: targets are built-in kinds (forward_return); `expr` "
            "defines features."
        )
    extra = sorted(set(entry) - {"name", "expr", "reset"})
    if extra:
        raise InvalidInputError(
            f"feature {name!r}: an `expr` feature takes only `name`, `expr` and `reset`, "
            f"not {extra[0]!r}."
        )
    reset = entry.get("reset", "none")
    return ExprDef(str(name), entry["expr"], reset)  # type: ignore[arg-type]


def _parse_group(
    entries: object, defaults: tuple[FeatureDef | ExprDef, ...], group: str, where: str
) -> tuple[FeatureDef | ExprDef, ...]:
    if entries is None:
        return defaults
    if not isinstance(entries, list):
        raise InvalidInputError(f"{where}: `{group}` must be an array of tables ([[{group}]]).")
    by_name = {d.name: d for d in defaults}
    out: list[FeatureDef | ExprDef] = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InvalidInputError(f"{where}: [[{group}]] entry {i} needs a `name`.")
        params = {k: v for k, v in entry.items() if k not in ("name", "kind")}
        name, kind = entry["name"], entry.get("kind")
        try:
            if "expr" in entry and kind is None:
                out.append(_expression(entry, group))
                continue
            if kind is None:
                if name not in by_name:
                    known = ", ".join(by_name) or "none"
                    hint = "a `kind`" + (" or an `expr`" if group == "features" else "")
                    raise InvalidInputError(
                        f"[[{group}]] {name!r} is not a default {group[:-1]} (known: "
                        f"{known}); give it {hint}."
                    )
                known_def = by_name[name]
                if isinstance(known_def, ExprDef):  # a default expression feature, as it is
                    if params:
                        raise InvalidInputError(
                            f"[[{group}]] {name!r} is a default expression feature; it takes "
                            f"no parameters, was given {', '.join(sorted(params))} (give it "
                            "another name and an `expr` to change it)."
                        )
                    out.append(known_def)
                    continue
                kind, params = known_def.kind, {**known_def.params, **params}
            out.append(FeatureDef(name, str(kind), params))
        except InvalidInputError as err:
            raise InvalidInputError(f"{where}: {err}") from err
    return tuple(out)


def parse_featureset(doc: Mapping[str, object], where: str = "feature set") -> FeatureSet:
    """Build a feature set from parsed TOML (or JSON) data; see the module docstring.

    Raises
    ------
    InvalidInputError
        Unknown tables, keys, kinds or parameters, or values out of range; the message
        names `where` and the entry.
    """
    unknown = sorted(set(doc) - {"settings", "features", "targets"})
    if unknown:
        raise InvalidInputError(
            f"{where}: unknown key {unknown[0]!r}; expected [settings], [[features]], [[targets]]."
        )
    settings_doc = doc.get("settings", {})
    if not isinstance(settings_doc, dict):
        raise InvalidInputError(f"{where}: [settings] must be a table.")
    known = set(Settings.__dataclass_fields__)
    extra = sorted(set(settings_doc) - known)
    if extra:
        raise InvalidInputError(
            f"{where}: unknown setting {extra[0]!r}; known: {', '.join(sorted(known))}."
        )
    try:
        settings = Settings(**settings_doc)
        features = _parse_group(
            doc.get("features"), default_featureset().features, "features", where
        )
        targets = _parse_group(doc.get("targets"), _DEFAULT_TARGETS, "targets", where)
        # targets are never expressions (_expression refuses them)
        return FeatureSet(
            features, tuple(t for t in targets if isinstance(t, FeatureDef)), settings
        )
    except InvalidInputError as err:
        message = str(err)
        raise InvalidInputError(
            message if message.startswith(where) else f"{where}: {message}"
        ) from err


def load_featureset(path: Path) -> FeatureSet:
    """Read a feature-set TOML file (see the module docstring).

    Raises
    ------
    InvalidInputError
        The file is missing, is not TOML, or does not define a valid feature set.
    """
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read the feature-set file ({err}).") from err
    except tomllib.TOMLDecodeError as err:
        raise InvalidInputError(f"{path}: not valid TOML ({err}).") from err
    return parse_featureset(doc, str(path))


def _entry_of_json(data: Mapping[str, object]) -> dict[str, object]:
    """A definition's JSON (:meth:`FeatureDef.to_json`, :meth:`ExprDef.to_json`) as the
    TOML entry that defines it."""
    if "expr" in data:
        text = unparse(node_from_json(data["expr"]))
        return {"name": data["name"], "expr": text, "reset": data["reset"]}
    params = data["params"]
    if not isinstance(params, dict):
        raise TypeError(params)
    return {"name": data["name"], "kind": data["kind"], **params}


def featureset_from_definition(definition: Mapping[str, object], where: str) -> FeatureSet:
    """The feature set a :meth:`FeatureSet.definition` (an fxcache manifest's ``featureset``)
    records.

    Raises
    ------
    InvalidInputError
        `definition` does not record a valid feature set (`where` names its file).
    """
    try:
        groups = {
            group: [_entry_of_json(d) for d in definition[group]]  # type: ignore[attr-defined]
            for group in ("features", "targets")
        }
        doc = {"settings": definition["settings"], **groups}
    except (KeyError, TypeError) as err:
        raise InvalidInputError(
            f"{where}: the manifest does not record a feature set (missing {err})."
        ) from err
    return parse_featureset(doc, where)


def featureset_named(name_or_path: str | Path) -> FeatureSet:
    """A feature set by name (:data:`FEATURESETS`: ``default``, ``classic``) or from a TOML
    file; a file of that name wins over a built-in name.

    Raises
    ------
    InvalidInputError
        Neither a file nor a known name (the message lists the names), or a bad file.
    """
    path = Path(name_or_path)
    if not path.exists():
        if str(name_or_path) in FEATURESETS:
            return FEATURESETS[str(name_or_path)]()
        raise InvalidInputError(
            f"no feature-set file {str(name_or_path)!r} and no built-in set of that name: "
            f"give a TOML file or one of {', '.join(FEATURESETS)}."
        )
    return load_featureset(path)
