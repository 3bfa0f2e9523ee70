"""The identifier sets the mask analysis picks its functions by (:func:`syntax.identifiers`,
:meth:`syntax.NodeCache.identifiers`) must equal the ``Name`` values a plain walk over libcst's
own ``children`` finds in a function body, nested functions, classes and lambdas left out."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from attncheck.lint.analysis.syntax import NodeCache, identifiers

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*(ROOT / "fixtures").rglob("*.py"), *(ROOT / "tests" / "regions_cases").rglob("*.py")])

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)

VARIED = '''
def f(a, *args, b: "T" = None, **kw) -> int:
    global G
    x: Callable[[int], int] = lambda lam_arg: lam_arg + lam_free
    del a[0], q.r
    with open(p) as (h, i):
        pass
    try:
        import os.path as osp, math
        from .pkg import name as alias
    except (KeyError, ValueError) as err:
        raise Err(err) from None
    async def inner(u=default_of_inner):
        return u
    class K(Base, metaclass=Meta):
        attr = 1
    s = f"{x!r:>{width}} {{}}" + b"bytes" + "plain"
    y = [w for w in ws if w if not w] + {k: v for k, v in d.items()} + (g for g in gs)
    match cmd:
        case Point(x=0, y=py) | [first, *rest] if guard:
            out = py
        case {"key": val, **others}:
            out = val
    assert cond, msg
    n = x if t else None
    (walrus := 3)
    yield from gen
    return not True and ~m or m[1:2, ::3]
'''


def _reference(body: cst.CSTNode) -> set[str]:
    """Iterative: the regions cases hold expressions too deep for a recursive walk."""
    out: set[str] = set()
    stack = [body]
    while stack:
        for c in stack.pop().children:
            if isinstance(c, _SCOPES):
                if isinstance(c, cst.Lambda):
                    out.add("lambda")
                continue
            if isinstance(c, cst.Name):
                out.add(c.value)
            stack.append(c)
    return out


def _functions(module: cst.Module) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.FunctionDef):
            found.append(n)
        stack.extend(n.children)
    return found


def test_varied_syntax() -> None:
    module = cst.parse_module(VARIED)
    outer = _functions(module)[0]
    got = identifiers(outer.body)
    assert got == _reference(outer.body)
    assert {"lambda", "G", "Callable", "osp", "alias", "err", "width", "py", "rest", "others",
            "walrus", "gen", "None", "True", "items"} <= got
    # nested scopes are left out: the inner function's names, default and class body
    assert not {"u", "default_of_inner", "attr", "Meta", "lam_arg", "lam_free"} & got


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_function_bodies_of_fixtures(path: Path) -> None:
    try:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        pytest.skip("libcst refuses it")
    cache = NodeCache()
    for fn in _functions(module):
        want = _reference(fn.body)
        assert identifiers(fn.body) == want
        assert cache.identifiers(fn.body) == want
        assert cache.identifiers(fn.body) is cache.identifiers(fn.body)
    assert identifiers(module) == _reference(module)
