"""What the program's calls hand its functions: every call site of a function, what
each passes for a parameter (and what the callers agree it is), and whether a caller
turns a switch parameter on. :class:`ProgramCalls` is that part of
:class:`~pitstop.lint.program.Program`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitstop.lint.program_answers import Resolved, Sym, query
from pitstop.lint.settings import UNKNOWN, Setting
from pitstop.lint.summary import ModuleSummary


class ProgramCalls:
    """Call-site questions of a :class:`~pitstop.lint.program.Program`."""

    modules: dict[str, ModuleSummary]
    _memo: dict[tuple[Any, ...], Any]
    _callsites: dict[tuple[str, str], list[tuple[str, str, Any]]] | None

    if TYPE_CHECKING:  # answered by the other parts of the program
        def callee(self, key: str, name: str) -> Sym | None: ...
        def resolve(self, key: str, desc: str | None) -> Resolved | None: ...
        def setting(self, name: str) -> Setting | None: ...

    # ------------------------------------------------------------------ calls
    def _callsite_index(self) -> dict[tuple[str, str], list[tuple[str, str, Any]]]:
        if self._callsites is None:
            # Resolving callees may ask about parameters, which need this index: while it
            # is built those questions see it partial, so their memoised answers are
            # dropped afterwards.
            index: dict[tuple[str, str], list[tuple[str, str, Any]]] = {}
            self._callsites = index
            for key, s in self.modules.items():
                for site in s.callsites:
                    if site.callee.startswith(("val:param:", "param:")):
                        continue
                    sym = self.callee(key, site.callee)
                    if sym is None:
                        continue
                    target = sym
                    if sym.kind == "class":
                        target = Sym("func", sym.module, f"{sym.name}.__init__")
                    if target.kind != "func":
                        continue
                    index.setdefault((target.module, target.name), []).append((key, site.caller, site))
            self._memo.clear()
        return self._callsites

    def _call_params(self, module: str, qualname: str) -> list[str] | None:
        """The parameters a call of the function fills by position (a method's without
        `self`), or None when the program has no such function."""
        s = self.modules.get(module)
        f = s.functions.get(qualname) if s is not None else None
        if f is None:
            return None
        params = list(f.params)
        if f.is_method and params and params[0] in {"self", "cls"}:
            params = params[1:]
        return params

    @query
    def switched_on(self, module: str, qualname: str, param: str) -> bool:
        """Does some call of the function (``Class.__init__``: a call of the class) in the
        program pass ``param`` something other than a False/None/0 literal, or an option
        or parameter that may be on, by keyword (by position: a class's), or possibly
        through `*args`/`**kw`?"""
        params = self._call_params(module, qualname)
        if params is None:
            return True
        pos = params.index(param) if param in params else -1
        for key, _caller, site in self._callsite_index().get((module, qualname), ()):
            if site.star or pos in site.on:
                return True
            for entry in site.on:
                if not isinstance(entry, str):
                    continue
                name, _, how = entry.partition("@")  # `param@how` or `#pos@how`
                if (name == param or name == f"#{pos}") and self._turns_on(key, how):
                    return True
        return False

    def builds(self, module: str, cls: str) -> bool:
        """Does some call in the program build class ``cls`` of ``module``?"""
        return bool(self._callsite_index().get((module, f"{cls}.__init__")))

    def _turns_on(self, key: str, how: str) -> bool:
        """Is a switch argument on, as its caller decides it (see ``switches.switch_of``):
        "" on; "setting:X" when the option may be on; "param:F.p" when some call of the
        caller turns its own parameter on."""
        if how.startswith(("setting:", "setting?:")):
            kind, _, name = how.partition(":")
            st = self.setting(name)
            if st is None:
                return kind == "setting"  # (`setting?`: off unless an option says)
            return st.default is UNKNOWN or bool(st.default) or any(bool(c) for c in st.choices)
        if how.startswith("param:"):
            func, _, p = how[6:].rpartition(".")
            return self.switched_on(key, func, p)
        return True

    def passed(self, module: str, qualname: str, param: str) -> list[tuple[str, str | None]]:
        """(caller module, descriptor) of what each call of the function passes for
        ``param`` (None where a call passes nothing the summaries describe)."""
        params = self._call_params(module, qualname) or []
        pos = params.index(param) if param in params else None
        out: list[tuple[str, str | None]] = []
        for caller_key, _caller, site in self._callsite_index().get((module, qualname), ()):
            d = next((v for k, v in site.kwargs if k == param), None)
            if d is None and pos is not None and pos < len(site.args):
                d = site.args[pos]
            out.append((caller_key, d))
        return out

    @query
    def param(self, module: str, qualname: str, param: str) -> Resolved | None:
        """What the callers of a function pass for one of its parameters (when they agree)."""
        params = self._call_params(module, qualname)
        if params is None:
            return None
        seen = [self.resolve(caller_key, d) if d else None
                for caller_key, d in self.passed(module, qualname, param)]
        found = [r for r in seen if r is not None]
        if not found:
            return None
        if all(r == found[0] for r in found):
            return found[0]
        kinds = {r.kind for r in found}
        if len(kinds) == 1:
            k = kinds.pop()
            if k == "device":
                name = "gpu" if any(r.name == "gpu" for r in found) else (
                    "any" if any(r.name == "any" for r in found) else "cpu")
                first = next((r for r in found if r.name == name), found[0])
                return Resolved("device", first.module, name, first.line)
            return Resolved(k)
        return None
