"""From a profile's ``plugins`` to the plugins that run at each extension point.

Two steps, as kube-scheduler takes them:

1. :func:`merge_plugins` merges the user's plugin sets into the defaults
   (``mergePluginSet`` in ``apis/config/v1/default_plugins.go``): a default
   plugin that the user enables again is replaced in place (so a weight given
   there wins), the user's other plugins are appended, and ``disabled``
   removes defaults (``"*"``: all of them).
2. :func:`expand` spreads the MultiPoint plugins over the extension points
   they implement (``expandMultiPointPlugins`` in ``framework/runtime``):
   per point, plugins enabled there explicitly and also in MultiPoint come
   first, then the MultiPoint ones, then the other explicit ones.

:func:`check_names` runs first, on the plugin sets as written, so its errors
point at the user's entries.
"""

from __future__ import annotations

import logging

from scheduler.config.decode import camel, join
from scheduler.config.effective import EnabledPlugins
from scheduler.config.errors import ConfigError
from scheduler.config.registry import NOT_IMPLEMENTED, PLUGIN_POINTS, known_plugins
from scheduler.config.types import EXTENSION_POINTS, PluginRef, Plugins, PluginSet
from scheduler.logs import kv

logger = logging.getLogger(__name__)

ALL = "*"


def _check_known(name: str, path: str) -> None:
    if name not in PLUGIN_POINTS and name not in NOT_IMPLEMENTED:
        raise ConfigError(None, path, f'unknown plugin "{name}"; known plugins: {known_plugins()}')


def check_names(plugins: Plugins, path: str, warned: set[str]) -> Plugins:
    """Reject unknown plugins, misplaced or repeated ones; drop the ones not implemented.

    ``warned`` collects the names of not-implemented plugins already warned about.
    """
    sets: dict[str, PluginSet] = {}
    for point in (*EXTENSION_POINTS, "multi_point"):
        pset = plugins.point(point)
        where = join(path, camel(point))
        enabled: list[PluginRef] = []
        seen: set[str] = set()
        for i, ref in enumerate(pset.enabled):
            at = join(join(join(where, "enabled"), i), "name")
            if ref.name == ALL:
                raise ConfigError(None, at, f'expected a plugin name ("{ALL}" is only valid in disabled)')
            _check_known(ref.name, at)
            if ref.name in NOT_IMPLEMENTED:
                warn_not_implemented(ref.name, warned)
                continue
            if point != "multi_point" and point not in PLUGIN_POINTS[ref.name]:
                raise ConfigError(
                    None,
                    at,
                    f'plugin "{ref.name}" does not run at {camel(point)}; it runs at: {_points_of(ref.name)}',
                )
            if ref.name in seen:
                raise ConfigError(None, at, f'expected each plugin once, got "{ref.name}" again')
            seen.add(ref.name)
            enabled.append(ref)
        disabled: list[PluginRef] = []
        for i, ref in enumerate(pset.disabled):
            at = join(join(join(where, "disabled"), i), "name")
            if ref.name != ALL:
                _check_known(ref.name, at)
                if ref.name in NOT_IMPLEMENTED:
                    warn_not_implemented(ref.name, warned)
                    continue
            disabled.append(PluginRef(ref.name))
        sets[point] = PluginSet(tuple(enabled), tuple(disabled))
    return Plugins(**sets)


def _points_of(name: str) -> str:
    return ", ".join(camel(p) for p in EXTENSION_POINTS if p in PLUGIN_POINTS[name])


def warn_not_implemented(name: str, warned: set[str]) -> None:
    """Log that a kube-scheduler plugin stays disabled, once per name in ``warned``."""
    if name not in warned:
        warned.add(name)
        logger.warning(
            "Plugin is not implemented by this scheduler; it stays disabled", extra=kv(plugin=name)
        )


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """kube-scheduler's ``mergePluginSet``."""
    disabled = [PluginRef(p.name) for p in custom.disabled] + [PluginRef(p.name) for p in default.disabled]
    disabled_names = {p.name for p in disabled}
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if ALL not in disabled_names:
        for plugin in default.enabled:
            if plugin.name in disabled_names:
                continue
            i = custom_index.get(plugin.name)
            if i is not None:
                plugin = custom.enabled[i]
                replaced.add(i)
            enabled.append(plugin)
    enabled += [p for i, p in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(tuple(enabled), tuple(disabled))


def merge_plugins(default: Plugins, custom: Plugins | None) -> Plugins:
    """kube-scheduler's ``mergePlugins``: each extension point and MultiPoint merged."""
    if custom is None:
        return default
    return Plugins(
        **{
            point: merge_plugin_set(default.point(point), custom.point(point))
            for point in (*EXTENSION_POINTS, "multi_point")
        }
    )


def expand(merged: Plugins) -> tuple[EnabledPlugins, dict[str, int]]:
    """The plugins per extension point, and the score weights, of merged plugin sets."""
    per_point: dict[str, tuple[str, ...]] = {}
    for point in EXTENSION_POINTS:
        pset = merged.point(point)
        explicit = [p.name for p in pset.enabled]
        disabled = {p.name for p in pset.disabled}
        if ALL in disabled:
            per_point[point] = tuple(explicit)
            continue
        multi: list[str] = []
        overridden: set[str] = set()
        for ref in merged.multi_point.enabled:
            if point not in PLUGIN_POINTS[ref.name] or ref.name in disabled:
                continue
            if ref.name in explicit:
                overridden.add(ref.name)
                continue
            if ref.name not in multi:
                multi.append(ref.name)
        ordered = (
            [n for n in explicit if n in overridden] + multi + [n for n in explicit if n not in overridden]
        )
        per_point[point] = tuple(ordered)
    plugins = EnabledPlugins(**per_point)
    weights: dict[str, int] = {}
    for ref in (*merged.score.enabled, *merged.multi_point.enabled):
        if ref.name in plugins.score and ref.name not in weights:
            weights[ref.name] = ref.weight or 1
    return plugins, weights
