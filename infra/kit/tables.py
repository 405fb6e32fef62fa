"""Tables as the command output and the generated pages show them: aligned text, and Markdown."""

from __future__ import annotations


def text_table(rows: list[list[str]]) -> list[str]:
    """Rows as aligned, indented text lines (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def markdown_table(rows: list[list[str]]) -> list[str]:
    """Rows as a Markdown table (the first row is the header), `|` in cells escaped, then a blank line."""
    header, *body = rows
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body), ""]
