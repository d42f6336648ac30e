"""Which binding each name of a script refers to, by Python's scoping rules, read from its syntax tree.

The analysis (`_flow`) needs this to follow the script's own functions: a call `helper(...)` runs the
body of the one `def helper` (or `helper = lambda ...`) its name resolves to, and a name bound in the
script (a local `def check_entitlement`, a parameter, a loop target) is not the catalog's callee.

A function is *direct* when its name is bound once in its scope and only ever called by that name:
then every run of its body is at one of those calls. Any other function (a lambda that is not the
value of a plain assignment, a decorated one, a method, one whose name is also read as a value or
bound twice) is a *value*: it can run anywhere, any number of times. A function is *recursive*
when a call in its body (or in the bodies nested in it) can reach it again through direct calls.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(eq=False)
class _Scope:
    node: ast.AST
    parent: _Scope | None
    kind: str  # 'module', 'function', 'class' or 'comprehension'
    bound: dict[str, list[ast.AST]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)


class Scopes:
    """The script's scopes, its bindings and what each read of a name refers to (see the module docstring)."""

    def __init__(self, tree: ast.Module) -> None:
        self.module = _Scope(tree, None, 'module')
        self.scopes: list[_Scope] = [self.module]
        self.reads: list[tuple[ast.Name, _Scope]] = []
        self.called: set[int] = set()
        """ids of the `Name` nodes that are the function of a call."""
        self.decorated: set[int] = set()
        self.named_lambdas: set[int] = set()
        """ids of lambdas that are the whole value of an assignment to one name."""
        self.caller: dict[int, Function] = {}
        """id of a called `Name` -> the (innermost) function whose body holds the call."""
        self._visit(tree, self.module, None)
        self._redirect()
        self._target: dict[int, tuple[_Scope, str] | None] = {
            id(name): self._lookup(scope, name.id) for name, scope in self.reads
        }
        self.values = self._values()
        self.recursive = self._recursive()

    # -- questions -----------------------------------------------------------------------------

    def function(self, name: ast.Name) -> Function | None:
        """The script function a read of `name` certainly refers to, or None."""
        target = self._target.get(id(name))
        if target is None:
            return None
        scope, text = target
        bindings = scope.bound.get(text, [])
        if len(bindings) == 1 and isinstance(bindings[0], Function):
            return bindings[0]
        return None

    def imported(self, name: ast.Name) -> str | None:
        """What a read of `name` certainly holds when its one binding is an import (`asyncio`, `asyncio.gather`)."""
        target = self._target.get(id(name))
        bindings = target[0].bound.get(target[1], []) if target is not None else []
        if len(bindings) != 1 or not isinstance(bindings[0], ast.Import | ast.ImportFrom):
            return None
        statement = bindings[0]
        for alias in statement.names:
            if (alias.asname or alias.name) == name.id:
                if isinstance(statement, ast.ImportFrom):
                    return f'{statement.module}.{alias.name}' if statement.module and not statement.level else None
                return alias.name
        return None

    def is_script_name(self, name: ast.Name) -> bool:
        """Whether a read of `name` refers to a binding the script makes (not to a builtin or a callee)."""
        return self._target.get(id(name)) is not None

    def bindings_of(self, names: set[str]) -> list[tuple[str, ast.AST]]:
        """Every binding the script makes of one of `names`, in source order."""
        found = [(name, node) for scope in self.scopes for name, nodes in scope.bound.items() if name in names
                 for node in nodes]
        return sorted(found, key=lambda item: (getattr(item[1], 'lineno', 0), item[0]))

    # -- building ------------------------------------------------------------------------------

    def _bind(self, scope: _Scope, name: str, node: ast.AST) -> None:
        scope.bound.setdefault(name, []).append(node)

    def _new(self, node: ast.AST, parent: _Scope, kind: str) -> _Scope:
        scope = _Scope(node, parent, kind)
        self.scopes.append(scope)
        return scope

    def _visit(self, node: ast.AST, scope: _Scope, function: Function | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            self._function(node, scope, function)
            return
        if isinstance(node, ast.ClassDef):
            self._bind(scope, node.name, node)
            for child in [*node.bases, *node.keywords, *node.decorator_list]:
                self._visit(child, scope, function)
            inner = self._new(node, scope, 'class')
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.decorated.add(id(stmt))  # a method: reached through an attribute, never by its name
                self._visit(stmt, inner, function)
            return
        if isinstance(node, _COMPREHENSIONS):
            self._comprehension(node, scope, function)
            return
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            owner = scope
            while owner.kind == 'comprehension' and owner.parent is not None:
                owner = owner.parent  # a walrus in a comprehension binds in the enclosing function
            self._bind(owner, node.target.id, node.target)
            self._visit(node.value, scope, function)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            self.called.add(id(node.func))
            if function is not None:
                self.caller[id(node.func)] = function
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Lambda):
            self.named_lambdas.add(id(node.value))
            self._visit(node.value, scope, function)
            self._bind(scope, node.targets[0].id, node.value)
            return
        self._leaf(node, scope)
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope, function)

    def _leaf(self, node: ast.AST, scope: _Scope) -> None:
        """The bindings and reads a node makes by itself (its children are visited apart)."""
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.reads.append((node, scope))
            else:
                self._bind(scope, node.id, node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                self._bind(scope, (alias.asname or alias.name).split('.')[0], node)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            self._bind(scope, node.name, node)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._bind(scope, node.rest, node)
        elif isinstance(node, ast.Global):
            scope.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocals.update(node.names)

    def _function(self, node: Function, scope: _Scope, function: Function | None) -> None:
        if not isinstance(node, ast.Lambda):
            self._bind(scope, node.name, node)
            if node.decorator_list:
                self.decorated.add(id(node))
            for decorator in node.decorator_list:
                self._visit(decorator, scope, function)
            if node.returns is not None:
                self._visit(node.returns, scope, function)
        args = node.args
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                self._visit(default, scope, function)  # evaluated where the function is made
        inner = self._new(node, scope, 'function')
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self._bind(inner, arg.arg, arg)
                if arg.annotation is not None:
                    self._visit(arg.annotation, scope, function)
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            self._visit(stmt, inner, node)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, scope: _Scope,
                       function: Function | None) -> None:
        self._visit(node.generators[0].iter, scope, function)  # evaluated in the enclosing scope
        inner = self._new(node, scope, 'comprehension')
        for i, generator in enumerate(node.generators):
            self._visit(generator.target, inner, function)
            if i:
                self._visit(generator.iter, inner, function)
            for condition in generator.ifs:
                self._visit(condition, inner, function)
        for part in [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]:
            self._visit(part, inner, function)

    def _redirect(self) -> None:
        """Bindings of names declared `global` / `nonlocal` belong to the scope the declaration names."""
        for scope in self.scopes:
            for name in scope.globals | scope.nonlocals:
                nodes = scope.bound.pop(name, [])
                owner = self.module if name in scope.globals else self._enclosing_binder(scope, name)
                if owner is not None:
                    owner.bound.setdefault(name, []).extend(nodes)

    def _enclosing_binder(self, scope: _Scope, name: str) -> _Scope | None:
        outer = scope.parent
        while outer is not None and (outer.kind == 'class' or name not in outer.bound) and outer.kind != 'module':
            outer = outer.parent
        return outer if outer is not None and outer.kind != 'module' else None

    def _lookup(self, scope: _Scope, name: str) -> tuple[_Scope, str] | None:
        here: _Scope | None = scope
        first = True
        while here is not None:
            if name in here.globals:
                return (self.module, name) if name in self.module.bound else None
            if name in here.bound and name not in here.nonlocals and (first or here.kind != 'class'):
                return here, name
            first = False
            here = here.parent
        return None

    def _values(self) -> set[int]:
        """ids of the functions that are values (see the module docstring)."""
        values = set()
        for scope in self.scopes:
            for nodes in scope.bound.values():
                for node in nodes:
                    if isinstance(node, Function) and (len(nodes) > 1 or id(node) in self.decorated
                                                       or scope.kind == 'class'):  # reached as an attribute
                        values.add(id(node))
        for name, _scope in self.reads:
            if id(name) not in self.called:
                target = self._target[id(name)]
                if target is not None:
                    values |= {id(n) for n in target[0].bound.get(target[1], []) if isinstance(n, Function)}
        for scope in self.scopes:
            if isinstance(scope.node, ast.Lambda) and id(scope.node) not in self.named_lambdas:
                values.add(id(scope.node))
        return values

    def _recursive(self) -> set[int]:
        """ids of the functions a direct call in their own body can reach again."""
        calls: dict[int, set[int]] = {}
        for name, _scope in self.reads:
            if id(name) in self.called:
                callee = self.function(name)
                caller = self.caller.get(id(name))
                if callee is not None and caller is not None:
                    calls.setdefault(id(caller), set()).add(id(callee))
        recursive = set()
        for start in calls:
            seen, todo = set(), list(calls[start])
            while todo:
                node = todo.pop()
                if node == start:
                    recursive.add(start)
                    break
                if node not in seen:
                    seen.add(node)
                    todo.extend(calls.get(node, ()))
        return recursive
