"""The parts every page shares: escaping, the page around a body, links back into the
pages, numbers, times and sizes as people read them, and the error pages."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any
from urllib.parse import urlencode

from layout_core.airflow.pages.reports import format_number


def escape(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def format_time(value: dt.datetime | None) -> str:
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def escaped_number(value: Any) -> str:
    """A number of a metrics file or report, escaped (a value that is no number is shown as text)."""
    return escape(format_number(value))


def href(base: str, path: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return escape(f"{base}{path}" + (f"?{query}" if query else ""))


STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 16px 24px;
       color: #1f2933; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 8px; } h2 { font-size: 1.15em; margin: 24px 0 6px; }
h3 { font-size: 1em; margin: 16px 0 4px; }
nav a { margin-right: 14px; } nav { margin-bottom: 12px; padding-bottom: 6px; border-bottom: 1px solid #d9e2ec; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 0.9em; }
th, td { border: 1px solid #d9e2ec; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f4f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.state-active { color: #0b7a35; font-weight: 600; } .state-failed { color: #b42318; font-weight: 600; }
.state-building { color: #8a6100; } .state-retired, .state-purged { color: #6b7785; }
.note { color: #52606d; font-size: 0.9em; } .error { color: #b42318; }
.box { border: 1px solid #d9e2ec; background: #f8fafc; padding: 10px 14px; margin: 10px 0; max-width: 60em; }
img.plot { border: 1px solid #d9e2ec; margin: 4px 0 10px; max-width: 100%; }
code { background: #f0f4f8; padding: 0 3px; }
"""

# No scripts, nothing from another origin; framed by the Airflow UI (same origin) only.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
                               "frame-ancestors 'self'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
}


def page(title: str, body: str, base: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<nav><a href=\"{href(base, '/')}\">Tables</a>"
        f"<a href=\"{href(base, '/skipping')}\">Skipping</a></nav>"
        f"<h1>{escape(title)}</h1>{body}</body></html>\n")


def state_label(state: str) -> str:
    return f"<span class=\"state-{escape(state)}\">{escape(state)}</span>"


def run_link(base: str, run_id: str) -> str:
    """A version's run id, linked to its run page when it came from a DAG run ("<dag>__<run>")."""
    dag_id, sep, airflow_run = run_id.partition("__")
    if not (sep and dag_id and airflow_run):
        return f"<code>{escape(run_id)}</code>"
    return f"<a href=\"{href(base, '/run', dag_id=dag_id, run_id=airflow_run)}\"><code>{escape(run_id)}</code></a>"


def yes_no(value: bool) -> str:
    return "<strong>yes</strong>" if value else "no"


def format_bytes(n: int) -> str:
    """A number of bytes for people: "1,300 bytes", "12.5 MiB (13,107,200 bytes)"."""
    if abs(n) < 1024:
        return f"{format_number(n)} byte{'' if n == 1 else 's'}"
    value, unit = float(n), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if abs(value) < 1024:
            break
    return f"{value:,.1f} {unit} ({format_number(n)} bytes)"


def shorten(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def more_note(shown: int, total: int, what: str) -> str:
    return "" if total <= shown else f"<p class=\"note\">… and {format_number(total - shown)} more {escape(what)}.</p>"


def render_error(title: str, message: str, base: str = "") -> str:
    return page(title, f"<div class=\"box\"><p class=\"error\"><strong>{escape(message)}</strong></p></div>", base)


def render_unavailable(reason: str, base: str = "") -> str:
    return page("Layout catalog unavailable", (
        "<div class=\"box\"><p class=\"error\"><strong>The layout catalog database cannot be read right now."
        "</strong></p><p>The rest of Airflow is not affected; these pages work again once the database is "
        f"back.</p><p class=\"note\">Reason: {escape(reason)}</p></div>"), base)
