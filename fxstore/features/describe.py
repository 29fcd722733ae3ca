"""A feature set in words (``fxstore features``) and as the TOML file precompute reads.

:func:`featureset_toml` writes what :func:`~fxstore.features.definitions.load_featureset`
reads back into the same feature set (``examples/features.toml`` is the default one);
:func:`format_featureset` lists every feature and target with its parameters, formula and
units.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fxstore.features.definitions import ExprDef, FeatureDef, FeatureSet, Settings
from fxstore.features.registry import ParamValue

__all__ = ["featureset_toml", "format_featureset"]

#: What an unset tick size means, in both forms.
_TICK_FROM_BARS = "from the bars' contract facts (instrument master) when precompute runs"


def _toml_value(value: ParamValue) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    return repr(value)


def _entry(group: str, definition: FeatureDef | ExprDef) -> list[str]:
    spec = definition.spec
    lines = ["", f"# {spec.formula}", f"# units: {spec.normalisation}", f"[[{group}]]"]
    lines.append(f'name = "{definition.name}"')
    if isinstance(definition, ExprDef):
        lines.append(f"expr = {_toml_value(definition.text)}")
        if definition.reset != "none":
            lines.append(f"reset = {_toml_value(definition.reset)}")
        return lines
    lines.append(f'kind = "{definition.kind}"')
    lines += [f"{name} = {_toml_value(v)}" for name, v in definition.params.items()]
    return lines


def featureset_toml(featureset: FeatureSet, *, title: str) -> str:
    """The TOML file of `featureset`: ``[settings]``, then every feature and target in order.

    Every parameter is written out, with each kind's formula and units as comments, so the
    file is the feature set's full definition; `title` is its first comment line. An unset
    tick size stays unset (a comment says where it comes from).
    """
    settings = featureset.settings
    lines = [f"# {title}", "# Load it with `fxstore precompute --features FILE.toml`.", ""]
    if not featureset.targets:  # a top-level key: before the first table
        lines += ["targets = []", ""]
    lines.append("[settings]")
    if settings.tick_size is None:
        lines.append("# tick_size = 0.25  # index points per tick; unset: the bars' contract facts")
    else:
        lines.append(f"tick_size = {settings.tick_size!r}  # index points per tick")
    lines.append(f"vol_window = {settings.vol_window}  # bars of the volatility normaliser")
    lines.append(f"vol_floor = {settings.vol_floor!r}  # least sigma_t, log-return units")
    if settings.prices != "raw":
        lines.append(f"prices = {settings.prices!r}  # the bars' roll-adjusted price levels")
    for definition in featureset.features:
        lines += _entry("features", definition)
    for definition in featureset.targets:
        lines += _entry("targets", definition)
    return "\n".join(lines).rstrip("\n") + "\n"


def _params(params: Mapping[str, ParamValue]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _shown_params(definition: FeatureDef | ExprDef) -> str:
    if isinstance(definition, ExprDef):  # its text is its formula, on the next line
        return f"reset={definition.reset}"
    return _params(definition.params)


def format_featureset(featureset: FeatureSet, *, tick_source: str | None = None) -> str:
    """Every feature and target with its kind, parameters, units and formula, as text.

    `tick_source` says where a resolved tick size came from (e.g. a bar manifest).
    """
    settings: Settings = featureset.settings
    if settings.tick_size is None:
        tick = f"tick_size   {_TICK_FROM_BARS}"
    else:
        tick = f"tick_size   {settings.tick_size:g} points" + (
            f" ({tick_source})" if tick_source else ""
        )
    lines = [
        f"settings: {tick}",
        f"          vol_window  {settings.vol_window} bars (sigma_t, the volatility normaliser)",
        f"          vol_floor   {settings.vol_floor:g} (least sigma_t, log-return units)",
    ]
    if settings.prices != "raw":
        lines.append(f"          prices      {settings.prices} (the bars' roll-adjusted levels)")
    for group, prefix in (("features", "f_"), ("targets", "target_")):
        definitions = getattr(featureset, group)
        lines += ["", f"{group} ({len(definitions)}):"]
        header = f"  {'column':<20} {'kind':<18} {'parameters':<20} units"
        lines += [header, "  " + "-" * (len(header) + 30)]
        for d in definitions:
            lines.append(
                f"  {prefix + d.name:<20} {d.kind:<18} {_shown_params(d):<20} "
                f"{d.spec.normalisation}"
            )
            lines.append(f"  {'':<20} {d.spec.formula}")
    return "\n".join(lines)
