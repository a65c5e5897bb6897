from __future__ import annotations

from pitstop.docsgen import DOCS_PATH, render_findings_doc
from pitstop.findings import all_docs


def test_docs_are_generated_from_the_registry_and_fresh() -> None:
    assert DOCS_PATH.exists(), "run `python -m pitstop.docsgen`"
    assert DOCS_PATH.read_text(encoding="utf-8") == render_findings_doc(), (
        "docs/findings.md is stale: run `python -m pitstop.docsgen`"
    )


def test_version_and_help(pitstop_cli) -> None:
    r = pitstop_cli("--version")
    assert r.returncode == 0 and "pitstop" in r.stdout
    r = pitstop_cli("--help")
    assert r.returncode == 0
    assert "explain" in r.stdout


def test_explain_known_code_prints_all_sections(pitstop_cli) -> None:
    docs = all_docs()
    if not docs:
        return
    doc = docs[0]
    r = pitstop_cli("explain", doc.code)
    assert r.returncode == 0, r.stderr
    for heading in ("What it does", "Why is this slow?", "Example", "Fix", "Fix safety"):
        assert heading in r.stdout
    # the rule's name works as well as its code
    r2 = pitstop_cli("explain", doc.name)
    assert r2.returncode == 0 and doc.code in r2.stdout


def test_explain_unknown_code_is_a_one_line_usage_error(pitstop_cli) -> None:
    r = pitstop_cli("explain", "XX999")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert "XX999" in r.stderr


def test_unknown_subcommand_exits_2(pitstop_cli) -> None:
    r = pitstop_cli("no-such-command")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
