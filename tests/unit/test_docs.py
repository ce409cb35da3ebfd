"""The documentation keeps its promises: every `layout ...` command shown in a code block of
the README or the docs parses with the CLI's own parser, every relative link leads to a file
(and heading) that exists, and the README stays a guide of at most 320 lines.

Commands are parsed, never run: no Spark, no catalog, no network. The documentation's
conventions are expanded into concrete command lines first:

- `[--flag X]` is optional: the line is parsed without any optional part, with all of them,
  and with each one alone;
- `a|b|c` in a word is one line per alternative (`sun|tpch|shift`, `runs|iid`);
- `"SELECT ... "` stands for a query and becomes a real one; a bare `...` is dropped;
- a trailing `# comment` is not part of the command; a quoted argument may go on over
  several lines (`--conf '{...` on one line, `...}'` on the next), as may a line ending in `\\`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
from pathlib import Path

import pytest

from layout_core.cli import build_parser
from tests.helpers.paths import PROJECT

README = PROJECT / "README.md"
DOCS = PROJECT / "docs"
# The guide and every doc: their commands are parsed and their links followed.
REQUIRED = (README, PROJECT / "CHANGELOG.md", *(DOCS / f"{name}.md" for name in (
    "usage", "airflow", "guarantees", "testing", "architecture", "benchmarks")))
COMMAND_FILES = (README, *sorted(DOCS.glob("*.md")))
LINK_FILES = (*COMMAND_FILES, PROJECT / "CHANGELOG.md")
README_MAX_LINES = 320

A_QUERY = "SELECT count(*) FROM lineitem l WHERE l.l_shipdate >= DATE '1995-03-01' AND l.l_quantity < 10"
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "2>&1", "&"}


# --------------------------------------------------------------------------- code blocks


def code_block_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block."""
    lines, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            inside = not inside
        elif inside:
            lines.append((number, line))
    return lines


def _strip_comment(line: str, quote: str | None) -> tuple[str, str | None]:
    """The line without a trailing `# comment`, and the quote still open at its end.
    `quote` is the quote open at its start (a quoted argument that began on an earlier line)."""
    kept = []
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        kept.append(ch)
    return "".join(kept).rstrip(), quote


def layout_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) of every command in a code block that starts with `layout `
    (after an optional `$ ` prompt), its comments stripped and its continuation lines joined."""
    block = code_block_lines(text)
    commands, i = [], 0
    while i < len(block):
        number, line = block[i]
        start = line.strip().removeprefix("$ ").lstrip()
        i += 1
        if not start.startswith("layout "):
            continue
        command, quote = _strip_comment(start, None)
        # a quoted argument goes on to the next line, or the line ends in a backslash
        while (quote or command.endswith("\\")) and i < len(block) and block[i][0] == block[i - 1][0] + 1:
            more, quote = _strip_comment(block[i][1].strip() if not quote else block[i][1], quote)
            command = (command[:-1].rstrip() + " " if command.endswith("\\") else command + "\n") + more.strip()
            i += 1
        commands.append((number, command))
    return commands


# --------------------------------------------------------------------------- conventions


def _raw_tokens(command: str) -> list[str]:
    """The words of a command as written (quotes kept), split on whitespace outside quotes."""
    tokens, current, quote = [], "", None
    for ch in command:
        if quote:
            current += ch
            if ch == quote:
                quote = None
        elif ch in "'\"":
            current += ch
            quote = ch
        elif ch.isspace():
            if current:
                tokens.append(current)
            current = ""
        else:
            current += ch
    if quote:
        raise ValueError(f"a quote is never closed: {command!r}")
    if current:
        tokens.append(current)
    return tokens


def _without_comments(command: str) -> str:
    kept, quote = [], None
    for line in command.split("\n"):
        line, quote = _strip_comment(line, quote)
        kept.append(line)
    return "\n".join(kept)


def concrete_commands(command: str) -> list[str]:
    """The command lines the documented `command` stands for (see the module docstring)."""
    tokens = []
    for token in _raw_tokens(_without_comments(command)):
        if token in SHELL_OPERATORS:  # `layout ... | jq`: the rest is another program
            break
        if token == "...":
            continue
        if token[0] in "'\"" and "..." in token and re.match(r"""^['"]\s*(SELECT|WITH)\b""", token, re.IGNORECASE):
            token = shlex.quote(A_QUERY)
        tokens.append(token)

    # optional parts: [--flag X] (one or more words between brackets outside quotes)
    items: list[str | list[str]] = []
    group: list[str] | None = None
    for token in tokens:
        if group is None and token.startswith("["):
            group, token = [], token[1:]
        if group is not None:
            closes = token.endswith("]")
            token = token[:-1] if closes else token
            if token and token != "...":
                group.append(token)
            if closes:
                items.append(group)
                group = None
        else:
            items.append(token)
    if group is not None:
        raise ValueError(f"a [ is never closed: {command!r}")
    groups = [i for i, item in enumerate(items) if isinstance(item, list)]
    chosen_sets = [set(), set(groups), *({g} for g in groups)]

    lines = []
    for chosen in chosen_sets:
        words: list[str] = []
        for i, item in enumerate(items):
            if isinstance(item, list):
                if i in chosen:
                    words.extend(item)
            else:
                words.append(item)
        # alternatives a|b|c in one word (outside quotes): one line per alternative
        options = [w.split("|") if w[0] not in "'\"" and "|" in w else [w] for w in words]
        for choice in itertools.product(*options):
            line = " ".join(choice)
            if line not in lines:
                lines.append(line)
    return lines


def parse_errors(command: str) -> list[str]:
    """What the CLI's parser says about each concrete line of a documented command (empty:
    every one parses). parse_args exits on a bad line; the command itself never runs."""
    errors = []
    try:
        lines = concrete_commands(command)
    except ValueError as e:
        return [str(e)]
    for line in lines:
        argv = shlex.split(line)
        if argv[:1] != ["layout"]:
            errors.append(f"{line!r}: not a layout command")
            continue
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                build_parser().parse_args(argv[1:])
        except SystemExit as e:
            if e.code not in (0, None):  # 0: --help or --version
                message = said.getvalue().strip().splitlines()
                errors.append(f"{line!r}: {message[-1] if message else f'exit {e.code}'}")
    return errors


# --------------------------------------------------------------------------- the tests


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for path in COMMAND_FILES:
        for number, command in layout_commands(path.read_text()):
            found.append((f"{path.relative_to(PROJECT)}:{number}", command))
    return found


def test_the_docs_are_there():
    assert [str(p.relative_to(PROJECT)) for p in REQUIRED if not p.exists()] == []


def test_the_readme_shows_its_commands():
    readme = [c for where, c in documented_commands() if where.startswith("README.md:")]
    assert len(readme) >= 25, readme  # the command list, the star example, ...
    assert any(c.startswith("layout dag-test layout_star_nightly --conf") and "\n" in c for c in readme)


DOCUMENTED = documented_commands()


@pytest.mark.parametrize("where, command", DOCUMENTED, ids=[where for where, _ in DOCUMENTED])
def test_every_documented_layout_command_parses(where, command):
    errors = parse_errors(command)
    assert not errors, f"{where}: {command}\n" + "\n".join(errors)


def test_the_checker_reports_a_bad_command():
    assert parse_errors('layout route --no-such-flag "SELECT 1"')
    assert any("unrecognized arguments: --no-such-flag" in e for e in parse_errors(
        'layout route "SELECT ... " [--json] [--no-such-flag]'))  # only the variant with the flag
    assert parse_errors("layout no-such-command")
    assert parse_errors("layout bench sun|nope")  # every alternative is parsed
    assert parse_errors("layout workload shift [--w W]")  # --w takes a number
    assert not parse_errors('layout route "SELECT ... " [--json] [--no-dips]   # a comment')


def test_the_conventions_expand_as_documented():
    assert concrete_commands("layout gc --older-than 24h [--dry-run] [--json]") == [
        "layout gc --older-than 24h", "layout gc --older-than 24h --dry-run --json",
        "layout gc --older-than 24h --dry-run", "layout gc --older-than 24h --json"]
    assert concrete_commands("layout bench sun|tpch ...") == ["layout bench sun", "layout bench tpch"]
    assert concrete_commands("layout tpch generate --out d [--skew-mode runs|iid]") == [
        "layout tpch generate --out d", "layout tpch generate --out d --skew-mode runs",
        "layout tpch generate --out d --skew-mode iid"]
    (line,) = concrete_commands('layout rewrite "SELECT ... "')
    assert shlex.split(line)[2] == A_QUERY
    text = "```\nlayout dag-test x --conf '{\"a\": 1,  # not a comment in quotes\n  \"b\": 2}'  # the run's conf\n```\n"
    assert layout_commands(text) == [(2, "layout dag-test x --conf '{\"a\": 1,  # not a comment in quotes\n\"b\": 2}'")]
    assert layout_commands("```\nlayout catalog show \\\n  --catalog sqlite:///c.db\n```\n") == [
        (2, "layout catalog show --catalog sqlite:///c.db")]
    assert layout_commands("```\n$ layout catalog show   # it's here\n```\nlayout stats\n") == [
        (2, "layout catalog show")]


# --------------------------------------------------------------------------- links


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than - and _ dropped,
    spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (outside code blocks), duplicates numbered."""
    seen: dict[str, int] = {}
    inside = False
    for line in path.read_text().splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading and not inside:
            anchor = github_anchor(heading.group(1))
            n = seen.get(anchor, 0)
            seen[anchor] = n + 1
            if n:
                seen[f"{anchor}-{n}"] = 1
    return set(seen)


def relative_links(path: Path) -> list[str]:
    """The targets of the Markdown links of a file, outside code blocks and code spans,
    that are not URLs."""
    text, inside = [], False
    for line in path.read_text().splitlines():
        if line.strip().startswith("```"):
            inside = not inside
        elif not inside:
            text.append(line)
    prose = re.sub(r"`[^`\n]*`", "", "\n".join(text))
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


@pytest.mark.parametrize("path", LINK_FILES, ids=lambda p: str(p.relative_to(PROJECT)))
def test_relative_links_lead_to_files_and_headings(path):
    assert path.exists()
    assert not broken_links(path), "\n".join(broken_links(path))


def test_the_link_checker_finds_broken_links(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## The demo (`make demo`)\n")
    page.write_text("# Page\n\n[ok](other.md#the-demo-make-demo) [self](#page) [web](https://example.com)\n"
                    "[gone](missing.md) [no heading](other.md#nope) `[code](not-a-link.md)`\n"
                    "```\n[in a block](also-not.md)\n```\n")
    assert github_anchor("Sun et al. §7.3 (`layout bench sun --sf 0.1 --sweep`)") == (
        "sun-et-al-73-layout-bench-sun---sf-01---sweep")
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "other.md#nope"]


def test_the_readme_is_a_guide_not_a_notebook():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
