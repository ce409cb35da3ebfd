"""Catalog URLs shown without their passwords (in logs, errors and pages)."""

from __future__ import annotations

from urllib.parse import quote


def masked_url(url: str) -> str:
    """The catalog URL to show in logs, errors and pages: its password as ***."""
    import sqlalchemy as sa  # inside: the DAG files import this module, and sqlalchemy is heavy

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparseable URL may still hold a password: show none of it
        return "<a catalog URL that cannot be parsed>"


def without_secrets(text: str, url: str) -> str:
    """`text` (a driver's error message) with the URL and its password taken out."""
    import sqlalchemy as sa  # as in masked_url

    secrets = [url]
    try:
        parsed = sa.make_url(url)
        password = parsed.password or ""
        secrets += [parsed.render_as_string(hide_password=False), password, quote(password, safe="")]
    except Exception:  # noqa: BLE001
        pass
    for secret in sorted(filter(None, map(str, secrets)), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
