"""The identifier sets the mask analysis picks its functions by (:func:`syntax.identifiers`,
:meth:`syntax.NodeCache.identifiers`) must equal the ``Name`` values a plain walk over libcst's
own ``children`` finds in a function body, nested functions, classes and lambdas left out; the
node walks the analyses read (:func:`syntax.scope_nodes`, :meth:`ModuleIndex.nested`) must give
the nodes, in the order, that a walk building each node's :func:`syntax.child_nodes` gives."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from attncheck.lint.analysis.index import FunctionInfo, ModuleIndex
from attncheck.lint.analysis.syntax import NodeCache, child_nodes, identifiers, scope_nodes

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


def _preorder(node: cst.CSTNode, nested: bool) -> list[cst.CSTNode]:
    """Pre-order over :func:`child_nodes` lists, nested scopes entered only when ``nested``."""
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(c for c in reversed(child_nodes(n)) if nested or not isinstance(c, _SCOPES))
    return out


def _nested_reference(fn: cst.FunctionDef) -> list[cst.FunctionDef]:
    """The ``def`` statements inside ``fn`` (not in a class or lambda), each followed by its
    own: a walk of the statements over :func:`child_nodes`, last child first."""
    out: list[cst.FunctionDef] = []
    stack = list(child_nodes(fn.body))
    while stack:
        n = stack.pop()
        if isinstance(n, cst.FunctionDef):
            out.append(n)
            stack.extend(child_nodes(n.body))
        elif not isinstance(n, (cst.ClassDef, cst.Lambda, cst.BaseExpression)):
            stack.extend(child_nodes(n))
    return out


NESTED = '''
def outer(x):
    def first(a):
        def first_inner(b):
            return b
        class Hidden:
            def method(self):
                pass
        return first_inner(a)
    if x:
        def second(c):
            g = lambda d: d
            return g(c)
    else:
        def third():
            def third_inner():
                def deepest():
                    pass
    return first(x)
'''


def _walk_cases() -> list[cst.Module]:
    modules = [cst.parse_module(VARIED), cst.parse_module(NESTED)]
    for path in FILES[::7]:
        try:
            modules.append(cst.parse_module(path.read_text(encoding="utf-8")))
        except (cst.ParserSyntaxError, cst.CSTValidationError):
            continue
    return modules


def test_scope_nodes_is_the_child_nodes_preorder() -> None:
    for module in _walk_cases():
        for fn in _functions(module):
            for nested in (False, True):
                got, want = scope_nodes(fn.body, nested), _preorder(fn.body, nested)
                assert [id(n) for n in got] == [id(n) for n in want]
    # the root is entered even when it is a scope, and a leaf is its own walk
    for module in _walk_cases()[:2]:
        fn = _functions(module)[0]
        assert [id(n) for n in scope_nodes(fn)] == [id(n) for n in _preorder(fn, False)]
        assert scope_nodes(fn.name) == [fn.name]


def test_nested_functions_order() -> None:
    module = cst.parse_module(NESTED)
    outer = FunctionInfo(module.body[0], None, "outer")
    got = list(ModuleIndex.nested(outer))
    assert [g.node.name.value for g in got] == [
        "third", "third_inner", "deepest", "second", "first", "first_inner"]
    assert {g.qual for g in got} == {f"outer.{g.node.name.value}" for g in got}
    cache = NodeCache()
    for module in _walk_cases():
        for fn in _functions(module):
            info = FunctionInfo(fn, None, "f")
            want = [id(n) for n in _nested_reference(fn)]
            assert [id(g.node) for g in ModuleIndex.nested(info)] == want
            assert [id(g.node) for g in ModuleIndex.nested(info, cache.defs)] == want
