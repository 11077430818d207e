"""The index pages of a sweep report: Markdown with the plots linked, and one self-contained HTML
file with the plots embedded as base64 data URIs (so it can be mailed)."""

from __future__ import annotations

import base64
import datetime
import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["Table", "about_lines", "html_document", "html_page", "markdown_page", "slug"]

#: A titled table: (title, header, rows of cells).
Table = tuple[str, list[str], list[list[str]]]


def slug(text: str) -> str:
    """``text`` as a file-name part: runs of other characters become ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "x"


def about_lines(results: str, provenance: Mapping[str, str], version: str) -> list[str]:
    """What produced the report: the results and their spec (paths as given), versions, dates."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    spec = provenance.get("spec", "not recorded (results written without one)")
    lines = [f"Results: {results}; sweep spec: {spec}."]
    if "started_utc" in provenance:
        swept = provenance.get("scaleup_version", "unknown")
        lines.append(f"Swept by scaleup {swept}, started {provenance['started_utc']}.")
    lines.append(f"Report written by scaleup {version} on {now}.")
    return lines


def markdown_page(
    title: str, images: list[str], tables: list[Table], about: Sequence[str] = ()
) -> str:
    """``index.md``: what produced it, the tables, then the PNGs (linked, next to the page)."""
    lines = [f"# {title}", ""]
    if about:
        lines += [*(f"{line}  " for line in about), ""]
    for name, header, body in tables:
        lines += [f"## {name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        lines.append("")
    if images:
        lines += ["## Plots", ""]
        lines += [f"![{name}]({name})\n" for name in images]
    return "\n".join(lines)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:0 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em}
th{background:#f2f2f2}td{text-align:right}td:first-child,td:nth-child(2){text-align:left}
.about{color:#555;font-size:.9em}
figure{margin:1em 0}img{max-width:100%}figcaption{color:#666;font-size:.85em}"""


def html_page(
    title: str, out: Path, images: list[str], tables: list[Table], about: Sequence[str] = ()
) -> str:
    """``index.html``: the tables, then the PNGs in ``out`` embedded, so nothing links outside."""
    pngs = [(name, (out / name).read_bytes()) for name in images]
    return html_document(title, pngs, tables, about)


def html_document(
    title: str,
    images: Sequence[tuple[str, bytes]],
    tables: list[Table],
    about: Sequence[str] = (),
    footer: Sequence[str] = (),
) -> str:
    """A self-contained HTML page: ``about``, the tables, the PNGs (``(caption, bytes)``)
    embedded as base64 data URIs, then ``footer``."""
    esc = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>",
    ]
    if about:
        parts.append("<p class='about'>" + "<br>".join(esc(line) for line in about) + "</p>")
    for name, header, body in tables:
        parts.append(
            f"<h2>{esc(name)}</h2><table><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in header)
            + "</tr>"
        )
        parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in body]
        parts.append("</table>")
    if images:
        parts.append("<h2>Plots</h2>")
    for name, png in images:
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f"<figure><img alt='{esc(name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{esc(name)}</figcaption></figure>"
        )
    if footer:
        parts.append("<footer class='about'>" + "<br>".join(esc(line) for line in footer))
        parts.append("</footer>")
    parts.append("</body></html>")
    return "\n".join(parts)
