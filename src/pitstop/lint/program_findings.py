"""Program-level findings (LT005, LT006, LT010, LT011 and their kin): each carries a
condition on the facts of its program (`-reduced_precision +has_linear`), judged once the
program is linked, with what the run's loops do with its loaders."""

from __future__ import annotations

from pitstop.lint.context import ANY, OR, USE_GPU_ANY, USE_LOOP, USE_TRAIN
from pitstop.lint.model import FileResult
from pitstop.lint.program import Program


def condition_holds(condition: str, facts: set[str] | frozenset[str]) -> bool:
    """A program-level finding's condition: ``+fact`` must hold, ``-fact`` must not; a
    token's alternatives are separated by a tab (any one will do); clauses separated by
    `` || `` are alternatives (any clause that holds will do)."""
    return any(_clause_holds(c, facts) for c in condition.split(ANY))


def _clause_holds(clause: str, facts: set[str] | frozenset[str]) -> bool:
    for token in clause.split(" "):
        if not token:
            continue
        sign, alts = token[0], token[1:].split(OR)
        present = any(a in facts for a in alts)
        if sign == "+" and not present:
            return False
        if sign == "-" and present:
            return False
    return True


def program_facts(program: Program, key: str, uses: set[str] | frozenset[str],
                  own: frozenset[str] = frozenset()) -> set[str]:
    """The facts a program-level finding of module ``key`` is judged by: the program's
    (every module that runs with it), what the loops of the run do with loaders, and
    whether some module of the program trains or moves batches to the GPU."""
    facts = program.facts(key) | set(own) | set(uses)
    if any(f.startswith("deterministic_fn:") and f"calls:{f[17:]}" in facts for f in facts):
        facts.add("deterministic")  # a seeding helper that sets it, called unguarded
    members = program.program_of(key) if key in program.modules else {key}
    for prefix, name in ((USE_GPU_ANY, "loader_gpu_any"), (USE_TRAIN, "train_program")):
        if any(prefix + m in uses for m in members):
            facts.add(name)
    summary = program.summary(key)
    if "train_program" not in facts and not any(USE_LOOP + m in uses for m in members) \
            and summary is not None and not summary.script \
            and any(u.startswith(USE_TRAIN) for u in uses):
        # no loop runs with this module that the imports show (they pass through files
        # left out of the run: a model factory): the linted files train, as one program
        facts.add("train_run")
    return facts


def resolve_program_findings(results: list[FileResult], program: Program | None = None
                             ) -> dict[str, set[str]]:
    """Keep a program-level finding only if the facts of its program allow it; returns
    the facts used per module (the fixer re-checks with them)."""
    if program is None:
        program = Program([r.summary for r in results if r.summary is not None])
    uses: set[str] = set()
    for r in results:
        uses |= r.uses
    facts_by_key: dict[str, set[str]] = {}
    for r in results:
        if not any(f.condition for f in r.findings):
            continue
        key = program.key(r.path)
        facts = program_facts(program, key, uses, r.facts)
        facts_by_key[key] = facts
        r.findings = [f for f in r.findings
                      if not f.condition or condition_holds(f.condition, facts)]
    return facts_by_key
