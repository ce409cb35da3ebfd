"""Split a query log into statements, keeping each statement's header comments.

A query log is plain SQL text: statements end with `;` (outside quotes and
comments). Comment lines directly above a statement travel with it, so the
workload generator's `-- tpch q6 instance 3 params {...}` headers survive.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Statement:
    index: int  # 0-based position in the log
    sql: str  # the statement without its terminating ';'
    comments: tuple[str, ...] = ()  # `--` comment lines directly above it, without the dashes


def split_statements(text: str) -> list[Statement]:
    """Statements of a SQL text; empty statements (a lone ';') are dropped."""
    pieces: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:  # Spark strings take backslash escapes
                current.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in ("'", '"', "`"):
            quote = ch
            current.append(ch)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            current.append(text[i:end])
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            current.append(text[i:end])
            i = end
            continue
        elif ch == ";":
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    pieces.append("".join(current))

    statements = []
    for piece in pieces:
        comments, body = _leading_comments(piece)
        if body.strip():
            statements.append(Statement(len(statements), body.strip(), comments))
    return statements


def _leading_comments(piece: str) -> tuple[tuple[str, ...], str]:
    lines = piece.strip().splitlines()
    comments = []
    while lines and (lines[0].strip().startswith("--") or not lines[0].strip()):
        line = lines.pop(0).strip()
        if line:
            comments.append(line[2:].strip())
    body = "\n".join(lines)
    # A piece that is only comments has no statement.
    if all(not ln.strip() or ln.strip().startswith("--") for ln in lines):
        body = ""
    return tuple(comments), body
