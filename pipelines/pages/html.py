"""The pieces of this tool's static HTML pages (the run report, the comparison): one style, escaping,
tables, the page around the sections and small inline-SVG figures. No script and no network: every page carries a Content-Security-Policy
that forbids both, so it opens anywhere. Every piece of data goes through :func:`e`."""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Sequence

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b;margin:0;background:#fafafa}
main{max-width:980px;margin:0 auto;padding:24px 28px 48px;background:#fff}
h1{font-size:1.6em;margin:0 0 4px}h3{font-size:1em;margin:18px 0 6px}
h2{font-size:1.2em;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
p.meta{color:#555;margin:0 0 16px}
table{border-collapse:collapse;font-size:.9em;margin:8px 0}
th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child{text-align:left}
.ok{color:#2e7d32;font-weight:600}.fail{color:#c62828;font-weight:600}
.legend span{display:inline-block;margin-right:14px;font-size:.9em}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
.figures{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0}
.figure{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:150px}
.figure b{display:block;font-size:1.5em}
pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;border:1px solid #e0e0e0;border-radius:4px;
padding:10px 12px;font:13px/1.45 ui-monospace,Menlo,Consolas,monospace}
figure{margin:12px 0}figcaption{color:#555;font-size:.9em;margin-bottom:4px}
.method{color:#444;font-size:.92em}
svg text{font:12px system-ui,sans-serif;fill:#1b1b1b}
"""


def e(value: Any) -> str:
    return escape(str(value), quote=True)


# --- charts -------------------------------------------------------------------------------------

LABEL_WIDTH, BAR_WIDTH, ROW_HEIGHT, VALUE_WIDTH = 190, 520, 22, 70


def stacked_bars(rows: Sequence[tuple[str, Sequence[int]]], colours: Sequence[str], names: Sequence[str],
                 title: str) -> str:
    """Horizontal stacked bars, one row per label; widths share one scale."""
    biggest = max((sum(values) for _, values in rows), default=0) or 1
    height = ROW_HEIGHT * len(rows) + 4
    width = LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH
    parts = [f'<svg role="img" aria-label="{e(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    for n, (label, values) in enumerate(rows):
        y = n * ROW_HEIGHT + 2
        parts.append(f'<text x="0" y="{y + 15}">{e(label)}</text>')
        x = float(LABEL_WIDTH)
        for value, colour, name in zip(values, colours, names):
            if value <= 0:
                continue
            w = BAR_WIDTH * value / biggest
            parts.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{max(w, 1.0):.1f}" height="{ROW_HEIGHT - 6}" '
                         f'fill="{colour}"><title>{e(label)}: {e(name)} {value}</title></rect>')
            x += w
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 15}">{sum(values)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bars(rows: Sequence[tuple[str, int]], colour: str, title: str) -> str:
    return stacked_bars([(label, (value,)) for label, value in rows], (colour,), ("count",), title)


def legend(items: Iterable[tuple[str, str]]) -> str:
    return '<p class="legend">' + "".join(f'<span><i style="background:{colour}"></i>{e(name)}</span>'
                                          for name, colour in items) + "</p>"


def verdict(ok: bool) -> str:
    return '<span class="ok">holds</span>' if ok else '<span class="fail">FAILS</span>'


def figure(value: Any, label: str, ok: bool | None = None) -> str:
    cls = "" if ok is None else (' class="ok"' if ok else ' class="fail"')
    return f'<div class="figure"><b{cls}>{e(value)}</b>{e(label)}</div>'


# --- sections -------------------------------------------------------------------------------------

def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{e(title)}</h2>{body}</section>'


def table(head: Sequence[str], rows: Iterable[Sequence[Any]], foot: Sequence[Any] | None = None,
          text: bool = False) -> str:
    """A table; cells are HTML already (escape data with ``e``). ``text``: cells of text, read from the left."""
    thead = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    tfoot = ("<tfoot><tr>" + "".join(f"<th>{cell}</th>" for cell in foot) + "</tr></tfoot>") if foot else ""
    opening = '<table class="text">' if text else "<table>"
    return f"{opening}<thead><tr>{thead}</tr></thead><tbody>{body}</tbody>{tfoot}</table>"


# --- the page ---------------------------------------------------------------------------------------

def page(title: str, heading: str, body: str, style: str = STYLE) -> str:
    """A whole page: the policy, the style, the heading and ``body`` (HTML already)."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title>",
        f"<style>{style}</style></head><body><main>",
        f"<h1>{e(heading)}</h1>",
        body,
        "</main></body></html>",
    ]) + "\n"
