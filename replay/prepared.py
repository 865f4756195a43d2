"""Query shapes a page runs on every view, compiled by the ORM once per process.

A trace page runs a dozen small queries; turning each QuerySet into SQL (filters resolved,
joins set up, columns and ordering quoted) cost more CPU than the database spent answering
them (issue 23: a third of a trace page's Python time). Django has no statement cache, and
no well-kept library adds one, so this module is the smallest that does what is needed.

:class:`Prepared` wraps a function that builds a QuerySet from keyword arguments. The first
call per database builds it with placeholder values (one per argument, declared as ``str``
or ``int``), lets the ORM compile it, and keeps the SQL with the position of each
placeholder among its parameters; every call then sends that SQL with its own values, and
turns the rows into what iterating the QuerySet gives, through the compiler's own
converters and Django's own row-to-instance steps (``ModelIterable``'s, for model
instances; ``results_iter``'s tuples for ``values_list``). A shape whose SQL depends on
the values (an ``__in`` list, a value the ORM rewrites such as ``contains``) is refused at
its first call, as is one the row steps here do not cover (``prefetch_related``, a related
manager's known objects, ``values()`` dicts). Tests hold every shape to its QuerySet's own result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router
from django.db.models import QuerySet
from django.db.models.query import (  # type: ignore[attr-defined]  # not in the stubs
    FlatValuesListIterable,
    ModelIterable,
    ValuesListIterable,
    get_related_populators,
)

T = TypeVar("T")

_KINDS = (str, int)


class _Placeholder:
    """The value an argument takes while the shape is compiled: of the declared kind, and
    equal to nothing a query would hold otherwise."""

    def __init__(self, name: str, kind: type, n: int) -> None:
        self.name = name
        self.value: Any = f"\x00prepared:{name}\x00" if kind is str else -(2**62) - n


class _Compiled:
    __slots__ = ("compiler", "constants", "kind", "slots", "sql")

    def __init__(
        self,
        sql: str,
        constants: list[Any],
        slots: list[tuple[int, str]],
        compiler: Any,
        kind: str,
    ) -> None:
        self.sql = sql
        self.constants = constants  # the parameters, placeholders included
        self.slots = slots  # (position, argument) of each placeholder
        self.compiler = compiler
        self.kind = kind


class Prepared(Generic[T]):
    """``build(**arguments)``'s QuerySet, run from SQL compiled once per process and
    database; calling it gives the QuerySet's result as a list."""

    def __init__(self, build: Callable[..., QuerySet[Any]], **arguments: type) -> None:
        for name, kind in arguments.items():
            if kind not in _KINDS:
                raise ImproperlyConfigured(f"{name}: a prepared argument is str or int")
        self._build = build
        self._arguments = arguments
        self._compiled: dict[str, _Compiled] = {}
        self._model: Any = None  # known once compiled: the database is the router's for it
        self._lock = threading.Lock()

    def __call__(self, **values: Any) -> list[T]:
        if values.keys() != self._arguments.keys():
            raise TypeError(f"expected the arguments {sorted(self._arguments)}")
        for name, kind in self._arguments.items():
            if type(values[name]) is not kind:
                raise TypeError(f"{name}: expected {kind.__name__}")
        compiled, alias = self._shape()
        params = list(compiled.constants)
        for position, name in compiled.slots:
            params[position] = values[name]
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        compiler = compiled.compiler
        if compiler.has_extra_select:  # ordering columns beyond the selected ones
            rows = [row[: compiler.col_count] for row in rows]
        results = compiler.results_iter([rows], tuple_expected=compiled.kind != "model")
        if compiled.kind == "flat":
            return [row[0] for row in results]
        if compiled.kind == "tuples":
            return list(results)
        return list(_instances(compiler, results, alias))

    def queryset(self, **values: Any) -> QuerySet[Any]:
        """The QuerySet itself, for these values (what tests hold each call to)."""
        return self._build(**values)

    def _shape(self) -> tuple[_Compiled, str]:
        model = self._model
        alias = router.db_for_read(model) if model is not None else None
        compiled = self._compiled.get(alias) if alias is not None else None
        if compiled is None:
            placeholders = [
                _Placeholder(name, kind, n)
                for n, (name, kind) in enumerate(self._arguments.items())
            ]
            try:
                queryset = self._build(**{p.name: p.value for p in placeholders})
            except (ValueError, TypeError, OverflowError) as exc:
                raise ImproperlyConfigured(
                    f"this shape cannot be prepared: it cannot be built with placeholder "
                    f"values ({exc})"
                ) from None
            alias = queryset.db
            with self._lock:
                compiled = self._compiled.get(alias) or self._compile(queryset, placeholders)
                self._compiled[alias] = compiled
                self._model = queryset.model
        assert alias is not None
        return compiled, alias

    def _compile(self, queryset: QuerySet[Any], placeholders: list[_Placeholder]) -> _Compiled:
        if getattr(queryset, "_prefetch_related_lookups", ()) or getattr(
            queryset, "_known_related_objects", {}
        ):
            raise ImproperlyConfigured("a prepared query cannot prefetch or carry related objects")
        if queryset._iterable_class is ModelIterable:
            kind = "model"
        elif queryset._iterable_class is FlatValuesListIterable:
            kind = "flat"
        elif queryset._iterable_class is ValuesListIterable:
            kind = "tuples"
        else:
            raise ImproperlyConfigured("a prepared query gives instances or values_list rows")
        compiler = queryset.query.get_compiler(using=queryset.db)
        try:
            sql, params = compiler.as_sql()
        except (ValueError, TypeError, OverflowError) as exc:  # a lookup that reads the value
            raise ImproperlyConfigured(
                f"this shape cannot be prepared: the ORM reads its values ({exc})"
            ) from None
        slots: list[tuple[int, str]] = []
        for p in placeholders:
            found = [
                i
                for i, value in enumerate(params)
                if type(value) is type(p.value) and value == p.value
            ]
            if not found:
                raise ImproperlyConfigured(
                    f"{p.name}: the argument does not reach the SQL as a parameter of its own "
                    "(an __in list, or a value the ORM rewrites): this shape cannot be prepared"
                )
            slots += [(i, p.name) for i in found]
        taken = {i for i, _name in slots}
        if any(
            isinstance(value, str) and "\x00prepared:" in value and i not in taken
            for i, value in enumerate(params)
        ):
            raise ImproperlyConfigured(
                "an argument reaches the SQL rewritten (as in a contains lookup): this shape "
                "cannot be prepared"
            )
        return _Compiled(sql, list(params), slots, compiler, kind)


def _instances(compiler: Any, rows: Any, db: str) -> Any:
    """Model instances from converted rows: ``ModelIterable.__iter__``'s steps (Django 5.2),
    but the known related objects, which this module refuses."""
    select, klass_info = compiler.select, compiler.klass_info
    model_cls = klass_info["model"]
    select_fields = klass_info["select_fields"]
    start, end = select_fields[0], select_fields[-1] + 1
    init_list = [f[0].target.attname for f in select[start:end]]
    populators = get_related_populators(klass_info, select, db)
    annotations = compiler.annotation_col_map
    for row in rows:
        obj = model_cls.from_db(db, init_list, row[start:end])
        for populator in populators:
            populator.populate(row, obj)
        if annotations:
            for attr_name, col_pos in annotations.items():
                setattr(obj, attr_name, row[col_pos])
        yield obj
