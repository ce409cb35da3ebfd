"""Settings from environment variables, then a YAML file, then defaults.

    LAYOUT_CATALOG_URL   catalog database (SQLAlchemy URL)  default sqlite:///.layout/catalog.db
    LAYOUT_WAREHOUSE     root folder of the laid-out tables  default .layout/warehouse
    LAYOUT_SCHEMA        schema name or file                 default tpch
    LAYOUT_RANGE_SETS    ranges per block and column (n_r)   default 20 (1: min/max only)
    LAYOUT_HISTORY_RETENTION_DAYS  days of query history kept  default 30
    LAYOUT_ALLOWED_ROOTS folders (or URL prefixes) input paths  default unset: any path
                         must lie in, separated like PATH
    LAYOUT_CONFIG        the YAML file                       default ./layout.yaml if present

The YAML file uses the same names in lower case without the prefix:
`catalog_url: postgresql+psycopg2://postgres@127.0.0.1:5432/test`; `allowed_roots` may
also be a YAML list. With allowed roots set, every source, query log, change batch,
warehouse and raw-table path must resolve inside one of them (layout_core.base.params);
unset, any path is accepted, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from layout_core.base.errors import UserError
from layout_core.base.params import parse_roots

DEFAULT_HOME = Path(".layout")


@dataclass(frozen=True)
class Settings:
    catalog_url: str
    warehouse: str
    schema: str
    range_sets: int = 20  # (skipping.zonemaps.DEFAULT_RANGE_SETS; config imports nothing of ours)
    history_retention_days: int = 30
    allowed_roots: tuple[str, ...] = ()  # empty: input paths are not confined


class ConfigError(UserError, ValueError):
    """layout.yaml is not what it should be."""


def _file_settings() -> dict:
    path = os.environ.get("LAYOUT_CONFIG") or ("layout.yaml" if Path("layout.yaml").is_file() else None)
    if not path:
        return {}
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    unknown = set(data) - {"catalog_url", "warehouse", "schema", "range_sets", "history_retention_days",
                           "allowed_roots"}
    if unknown:
        raise ConfigError(f"{path}: unknown settings {sorted(unknown)}")
    return data


def load_settings(**overrides: str | None) -> Settings:
    """Settings with explicit overrides (e.g. from command-line flags) first."""
    from_file = _file_settings()

    def pick(name: str, default):
        return (
            overrides.get(name)
            or os.environ.get(f"LAYOUT_{name.upper()}")
            or from_file.get(name)
            or default
        )

    default_db = (DEFAULT_HOME / "catalog.db").resolve()
    settings = Settings(
        catalog_url=pick("catalog_url", f"sqlite:///{default_db}"),
        warehouse=pick("warehouse", str((DEFAULT_HOME / "warehouse").resolve())),
        schema=pick("schema", "tpch"),
        # n_r of the range-set statistics (1: min/max only); days of query history kept
        range_sets=_bounded_int("range_sets", pick("range_sets", "20"), 1, 256),
        history_retention_days=_bounded_int("history_retention_days", pick("history_retention_days", "30"), 1, 3650),
        allowed_roots=parse_roots(pick("allowed_roots", ())),
    )
    if settings.catalog_url.startswith("sqlite:///"):
        Path(settings.catalog_url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    return settings


def _bounded_int(name: str, text, low: int, high: int) -> int:
    """An integer setting from `low` to `high`, or a ConfigError naming it."""
    try:
        value = int(str(text))
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigError(f"{name} must be an integer from {low} to {high}, not {text!r}")
    return value
