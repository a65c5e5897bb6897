"""``pitstop explain CODE``: the documentation of a finding code, from the registry."""

from __future__ import annotations

import click

from pitstop.errors import UsageError
from pitstop.findings import CodeDoc, UnknownCodeError, all_docs, get_doc


def doc_to_markdown(doc: CodeDoc, heading: str = "#") -> str:
    """One code's documentation as Markdown (shared by the terminal and docs/findings.md)."""
    parts = [
        f"{heading} {doc.code} `{doc.name}`: {doc.title}",
        "",
        f"*Tool:* `pitstop {doc.tool}` · *Category:* `{doc.category}` · "
        f"*Default severity:* {doc.severity.value}",
        "",
        f"{heading}# What it does",
        "",
        doc.what.strip(),
        "",
        f"{heading}# Why is this slow?",
        "",
        doc.why.strip(),
        "",
        f"{heading}# Example",
        "",
        doc.example.strip("\n"),
        "",
        f"{heading}# Fix",
        "",
        doc.fix.strip("\n"),
        "",
        f"{heading}# Fix safety",
        "",
        doc.fix_safety.strip(),
    ]
    if doc.references:
        parts += ["", f"{heading}# References", ""]
        parts += [f"- {ref}" for ref in doc.references]
    return "\n".join(parts) + "\n"


@click.command()
@click.argument("code", required=False)
@click.option("--list", "list_all", is_flag=True, help="List every code with its title.")
@click.option("--markdown", is_flag=True, help="Print raw Markdown instead of rendering it.")
def explain(code: str | None, list_all: bool, markdown: bool) -> int:
    """Explain a finding CODE: what it detects, why it is slow, the fix and its safety."""
    from rich.console import Console

    console = Console()
    if list_all or code is None:
        from rich.table import Table

        table = Table("code", "name", "tool", "category", "title", box=None)
        for doc in all_docs():
            table.add_row(doc.code, doc.name, doc.tool, doc.category, doc.title)
        console.print(table)
        return 0
    try:
        doc = get_doc(code)
    except UnknownCodeError:
        known = {d.name: d.code for d in all_docs()}
        if code in known:  # accept the rule's name as well as its code
            doc = get_doc(known[code])
        else:
            raise UsageError(
                f"unknown finding code {code!r}; `pitstop explain --list` shows every code"
            ) from None
    text = doc_to_markdown(doc)
    if markdown or not console.is_terminal:
        click.echo(text, nl=False)
    else:
        from rich.markdown import Markdown

        console.print(Markdown(text))
    return 0
