"""``pitstop lint PATH...``: the command line over the engine, fixer and formats."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import click

from pitstop.errors import EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UsageError
from pitstop.lint.analyze import Selection
from pitstop.lint.formats import FORMATS


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return tuple(out)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--fix", is_flag=True, help="Apply safe fixes to the files.")
@click.option("--unsafe-fixes", is_flag=True,
              help="With --fix/--diff, also apply fixes that may change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option("--select", multiple=True, metavar="CODES",
              help="Only these codes/prefixes/names/categories (comma-separated).")
@click.option("--ignore", multiple=True, metavar="CODES",
              help="Skip these codes/prefixes/names/categories (comma-separated).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Output format.")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False),
              help="pyproject.toml to read [tool.pitstop.lint] from (default: nearest one).")
@click.option("--no-gitignore", is_flag=True, help="Lint files that .gitignore excludes.")
@click.option("--jobs", "-j", type=click.IntRange(1, 256), default=None,
              help="Worker processes (default: the CPUs this process may use).")
@click.option("--no-source", is_flag=True, help="Text format: do not show the source lines.")
@click.option("--statistics", is_flag=True, help="Print a count per code instead of findings.")
def lint(paths: tuple[Path, ...], fix: bool, unsafe_fixes: bool, diff: bool,
         select: tuple[str, ...], ignore: tuple[str, ...], fmt: str, config_path: Path | None,
         no_gitignore: bool, jobs: int | None, no_source: bool, statistics: bool) -> int:
    """Find code that slows PyTorch training: per-batch syncs, DataLoader settings,
    precision, DDP accumulation, and more (loop-aware).

    \b
    Exit status: 0 no findings, 1 findings or files that cannot be checked
    (syntax errors, unreadable), 2 usage errors, missing paths, files --fix may not
    write, 70 internal errors (a bug in pitstop).
    Examples:
      pitstop lint train.py
      pitstop lint src/ --format github
      pitstop lint . --fix --diff
    """
    from pitstop.lint.config import check_codes, find_pyproject, load_config
    from pitstop.lint.discover import discover
    from pitstop.lint.engine import default_options, lint_paths_files
    from pitstop.lint.formats import (
        render_github,
        render_json,
        render_sarif,
        render_text,
        summary_text,
    )

    if unsafe_fixes and not (fix or diff):
        raise UsageError("--unsafe-fixes only makes sense with --fix or --diff")
    targets = list(paths) or [Path(".")]
    if config_path is not None and not config_path.is_file():
        raise UsageError(f"--config {config_path}: no such file")
    config = load_config(config_path if config_path else find_pyproject(targets[0]))
    if select and not _split(select):  # `--select ''` would check every code
        raise UsageError(f"--select {','.join(select)!r} names no code; name the codes to "
                         "check (`pitstop explain --list` shows them)")
    sel_select = _split(select) or config.select
    sel_ignore = _split(ignore) + config.ignore
    check_codes(_split(select), "--select")
    check_codes(_split(ignore), "--ignore")
    options = default_options(Selection(select=sel_select, ignore=sel_ignore))

    files, diags = discover(targets, config, respect_gitignore=not no_gitignore)
    progress_cb = None
    bar = None
    if sys.stderr.isatty() and len(files) > 200:
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
        task = bar.add_task("linting", total=len(files))

        def progress_cb(n: int) -> None:
            bar.advance(task, n)
    try:
        run = lint_paths_files(files, options, config.ignored_for, jobs=jobs, progress=progress_cb)
    finally:
        if bar is not None:
            bar.stop()
    run.diagnostics.extend(diags)

    changed: list[tuple[str, str, str, int]] = []
    if fix or diff:
        from pitstop.lint.fixer import fix_results

        changed = fix_results(run, options, config.ignored_for, unsafe=unsafe_fixes,
                              write=fix and not diff)
        if diff:
            for path, old, new, _n in changed:
                click.echo("".join(difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True),
                    fromfile=path if path.startswith("/") else f"a/{path}",
                    tofile=path if path.startswith("/") else f"b/{path}")), nl=False)
        elif changed:
            fixed_n = sum(n for n in (c[3] for c in changed))
            click.echo(f"Fixed {fixed_n} finding{'s' if fixed_n != 1 else ''} in "
                       f"{len(changed)} file{'s' if len(changed) != 1 else ''}.", err=True)

    findings = run.findings
    diagnostics = run.all_diagnostics
    for d in diagnostics:
        where = d.path + (f":{d.line}" if d.line else "")
        label = {"note": "note", "internal": "internal error"}.get(d.kind, "error")
        click.echo(f"{where}: {label}: {d.message}", err=True)

    if diff:
        pass
    elif statistics:
        from collections import Counter

        from pitstop.findings import get_doc

        counts = Counter(f.code for f in findings)
        for code, n in counts.most_common():
            doc = get_doc(code)
            click.echo(f"{n:6d}  {code}  {doc.name}  [{doc.category}]")
    elif fmt == "json":
        click.echo(render_json(findings), nl=False)
    elif fmt == "sarif":
        click.echo(render_sarif(findings, diagnostics), nl=False)
    elif fmt == "github":
        click.echo(render_github(findings, [d for d in diagnostics if d.kind != "note"]), nl=False)
    else:
        color = sys.stdout.isatty()
        click.echo(render_text(findings, color=color, show_source=not no_source), nl=False)
        unchecked = len({d.path for d in diagnostics if d.kind == "error"})
        nothing_usable = run.files == 0 and any(d.kind == "input" for d in diagnostics)
        if not nothing_usable:  # "No findings in 0 files" would read as a clean bill
            click.echo(summary_text(findings, run.files, unsafe=unsafe_fixes,
                                    unchecked=unchecked), nl=False)

    # As in ruff: a file that cannot be checked (syntax error, undecodable, unreadable)
    # is a diagnostic about the code, exit 1; a named path that cannot be used is exit 2, a bug
    # in pitstop is exit 70.
    if any(d.kind == "internal" for d in diagnostics):
        return EXIT_INTERNAL
    if any(d.kind == "input" for d in diagnostics):
        return EXIT_USAGE
    file_errors = any(d.kind == "error" for d in diagnostics)
    if diff:
        return EXIT_FINDINGS if changed or file_errors else EXIT_OK
    return EXIT_FINDINGS if findings or file_errors else EXIT_OK
