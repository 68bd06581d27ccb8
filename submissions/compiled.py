"""Hot reads whose SQL Django compiles once per process and shape, then runs with new values.

Django builds and compiles a queryset's SQL on every execution. For most reads that is a small
part of their time; for a few on the hot path it is most of it: the upload's one read of the
entrant's submissions (seven filtered aggregates) took 12 ms of the web process's CPU per upload
on the 2-core box, where PostgreSQL answers it in about 1.5 ms; the worker's fair-order query
took 6 ms per dequeue, twice what PostgreSQL spent on it (it is plain SQL now, submissions/
turns.py, for a shape the ORM cannot write).

``CompiledRead`` runs such a read through the ORM once per shape with sentinel values standing
for the caller's, and records the statement Django sent (``connection.execute_wrapper``, the
documented hook). It runs it twice, with two different sets of sentinels: a parameter that is
the same both times is a constant of the query; one that changed must be a sentinel (as given,
or as the backend adapts it, e.g. a datetime as text on SQLite) in both, and becomes a slot for
the caller's value, adapted the same way. A parameter that changed but is neither (Django derived
it from a value, as ``icontains`` does) raises at once, as does a read of more than one
statement: programming errors, found by the first call in the tests. So a constant that happens
to equal a sentinel cannot be mistaken for a slot. Later calls bind the values and run the
statement on a cursor, converting the result columns the caller names as the backend would.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, connections
from django.db.models import Field, Model, QuerySet, Value
from django.db.models.query import get_related_populators
from django.db.models.sql.compiler import SQLCompiler

Values = Mapping[str, Any]


@dataclass(frozen=True)
class _Statement:
    sql: str
    # Per parameter: ("const", value) or ("value", name, adapt), adapt: whether the backend's
    # adaptation of the sentinel (not the sentinel itself) was what Django sent.
    slots: tuple[tuple[Any, ...], ...]
    names: tuple[str, ...]  # the result's columns


def _adapted(value: Any) -> Any:
    """How Django's backend sends ``value`` as a query parameter (dates may change form)."""
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    if isinstance(value, date):
        return connection.ops.adapt_datefield_value(value)
    return value


def _other(value: Any) -> Any:
    """A second sentinel of ``value``'s type, different from it."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"{value!r} cannot be a sentinel: it has no other value to tell it by")
    if isinstance(value, int | float | Decimal):
        return value - 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, date):  # and datetime
        return value + timedelta(days=1)
    raise TypeError(f"no second sentinel for a {type(value).__name__}")


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _sentinel_pairs(given: Values) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two sets of sentinels a shape is captured with; no two of a set alike."""
    first = dict(given)
    second = {name: _other(value) for name, value in first.items()}
    for sentinels in (first, second):
        kept = list(sentinels.values())
        if any(_same(a, b) for i, a in enumerate(kept) for b in kept[i + 1 :]):
            raise ValueError(f"two sentinels are equal, a slot could be either: {sentinels}")
    return first, second


def _slots(
    first: Values,
    second: Values,
    captured: tuple[str, list[Any]],
    captured_again: tuple[str, list[Any]],
) -> tuple[tuple[Any, ...], ...]:
    """Per parameter of a statement captured with ``first`` and again with ``second``: a
    constant, or the slot of the value it follows (see the module's docstring)."""
    (sql, params), (sql_again, params_again) = captured, captured_again
    if sql_again != sql or len(params_again) != len(params):
        raise RuntimeError(f"the read's SQL depends on its values, not only its shape: {sql}")
    slots: list[tuple[Any, ...]] = []
    for position, (one, other) in enumerate(zip(params, params_again, strict=True)):
        if _same(one, other):
            slots.append(("const", one))
            continue
        slot = next(
            (
                ("value", name, adapt)
                for name in first
                for adapt in (False, True)
                if _same(one, _adapted(first[name]) if adapt else first[name])
                and _same(other, _adapted(second[name]) if adapt else second[name])
            ),
            None,
        )
        if slot is None:
            raise RuntimeError(
                f"parameter {position} ({one!r}) follows the values but is none of them "
                f"(a value Django derived from one?): {sql}"
            )
        slots.append(slot)
    return tuple(slots)


def _bound(slots: tuple[tuple[Any, ...], ...], values: Values) -> list[Any]:
    """The statement's parameters for the caller's ``values``."""
    return [
        slot[1]
        if slot[0] == "const"
        else (_adapted(values[slot[1]]) if slot[2] else values[slot[1]])
        for slot in slots
    ]


class CompiledRead:
    """One read, compiled once per shape and backend; ``__call__`` for its first row (as a dict),
    ``rows`` for all of them (as tuples).

    ``run(values, shape)`` is the ORM read (its result is not used): called with sentinels, twice
    per shape, to capture the statement. ``sentinels``: name → a value that real calls do not
    pass, of the real value's type (an int, str, date, datetime, decimal), or a function of the
    shape giving them (for a list whose length is part of the shape). ``fields``: result column
    → model field, for columns the backend must convert (a datetime read back from SQLite)."""

    def __init__(
        self,
        run: Callable[[Values, Hashable], Any],
        sentinels: Values | Callable[[Hashable], Values],
        fields: Mapping[str, Field[Any, Any]] | None = None,
    ) -> None:
        self._run = run
        self._sentinels = sentinels
        self._fields = dict(fields or {})
        self._statements: dict[tuple[str, str, Hashable], _Statement] = {}

    def _record(self, sentinels: Values, shape: Hashable) -> tuple[str, list[Any], list[str]]:
        captured: list[tuple[str, list[Any]]] = []
        names: list[str] = []

        def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            captured.append((sql, list(params or ())))
            result = execute(sql, params, many, context)
            cursor = context["cursor"]
            names[:] = [column[0] for column in cursor.description or ()]
            return result

        with connection.execute_wrapper(record):
            self._run(sentinels, shape)
        if len(captured) != 1:
            raise RuntimeError(f"a compiled read must be one statement, not {len(captured)}")
        return captured[0][0], captured[0][1], names

    def _capture(self, shape: Hashable) -> _Statement:
        given = self._sentinels
        first, second = _sentinel_pairs(given(shape) if callable(given) else given)
        sql, params, names = self._record(first, shape)
        sql_again, params_again, _ = self._record(second, shape)
        slots = _slots(first, second, (sql, params), (sql_again, params_again))
        return _Statement(sql, slots, tuple(names))

    def _execute(self, values: Values, shape: Hashable) -> tuple[_Statement, list[tuple[Any, ...]]]:
        key = (connection.vendor, connection.alias, shape)
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = self._capture(shape)
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, _bound(statement.slots, values))
            rows = cursor.fetchall()
        if self._fields and rows:
            rows = [self._converted(statement, row) for row in rows]
        return statement, rows

    def _converted(self, statement: _Statement, row: tuple[Any, ...]) -> tuple[Any, ...]:
        converted = list(row)
        for name, field in self._fields.items():
            index = statement.names.index(name)
            expression = Value(None, output_field=field)
            for convert in connection.ops.get_db_converters(expression):
                converted[index] = convert(converted[index], expression, connection)
        return tuple(converted)

    def __call__(self, values: Values, shape: Hashable = None) -> dict[str, Any]:
        """The first row the read returns for ``values`` (column name → value), {} for none."""
        statement, rows = self._execute(values, shape)
        return dict(zip(statement.names, rows[0], strict=True)) if rows else {}

    def rows(self, values: Values, shape: Hashable = None) -> list[tuple[Any, ...]]:
        """Every row the read returns for ``values``, as tuples in the statement's column order."""
        return self._execute(values, shape)[1]


@dataclass(frozen=True)
class _ObjectStatement:
    """A compiled model read: its SQL and slots, and what Django's ModelIterable derives from
    the compiler to turn a row into instances (kept, as the iterable keeps them for its rows)."""

    sql: str
    slots: tuple[tuple[Any, ...], ...]
    alias: str
    compiler: SQLCompiler
    converters: dict[int, Any]
    model: type[Model]
    init_list: list[str]
    start: int
    end: int
    populators: list[Any]


class CompiledObject:
    """One model instance by a unique key, its ``select_related`` objects with it, compiled
    once per process and database; ``__call__`` gives the instance, or None for no row.

    ``queryset(values)`` is the read (not evaluated): its SQL is captured from Django's compiler
    with two sets of ``sentinels``, as ``CompiledRead`` captures a statement. Rows become
    instances as Django's own ``ModelIterable`` makes them: the backend's converters,
    ``Model.from_db``, the related objects set as ``select_related`` sets them. Capturing needs
    no query, so a process can ``prepare`` before it forks and its children inherit the SQL:
    the evaluation worker does, for its work horses, each of which read the job's submission
    with its task (4 models, 106 columns), which Django compiled anew in every horse: of the
    7.4 ms from a job's start to its row in hand, about 3 were PostgreSQL's, most of the rest
    that compilation (traced on the 2-core box; 5.4 ms after)."""

    def is_prepared(self) -> bool:
        """Whether the statement for the default database is compiled in this process."""
        return (connection.vendor, connection.alias) in self._statements

    def __init__(self, queryset: Callable[[Values], QuerySet[Any]], sentinels: Values) -> None:
        self._queryset = queryset
        self._sentinels = sentinels
        self._statements: dict[tuple[str, str], _ObjectStatement] = {}

    def prepare(self) -> None:
        """Compile now (for the default database), not at the first call."""
        self._statement()

    def _statement(self) -> _ObjectStatement:
        key = (connection.vendor, connection.alias)
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = self._capture()
        return statement

    def _capture(self) -> _ObjectStatement:
        first, second = _sentinel_pairs(self._sentinels)
        compilers = []
        for sentinels in (first, second):
            queryset = self._queryset(sentinels)
            compilers.append(queryset.query.get_compiler(using=queryset.db))
        captured = [compiler.as_sql() for compiler in compilers]
        sql, params = captured[0]
        slots = _slots(first, second, (sql, list(params)), (captured[1][0], list(captured[1][1])))
        compiler = compilers[0]
        # As ModelIterable and SQLCompiler.results_iter read them, after as_sql filled them.
        select, klass_info = compiler.select, compiler.klass_info
        if klass_info is None or compiler.annotation_col_map:
            raise RuntimeError(f"a compiled object read must select model rows only: {sql}")
        fields = [column[0] for column in select[0 : compiler.col_count]]
        if compiler.has_composite_fields(fields):
            raise RuntimeError(f"composite fields are not supported: {sql}")
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        alias = compiler.using
        return _ObjectStatement(
            sql=sql,
            slots=slots,
            alias=alias,
            compiler=compiler,
            converters=compiler.get_converters(fields),
            model=klass_info["model"],
            init_list=[column[0].target.attname for column in select[start:end]],
            start=start,
            end=end,
            # django-stubs describe a later Django (a fetch_mode argument); 5.2 takes three.
            populators=get_related_populators(klass_info, select, alias),  # type: ignore[call-arg]
        )

    def __call__(self, values: Values) -> Any:
        statement = self._statement()
        with connections[statement.alias].cursor() as cursor:
            cursor.execute(statement.sql, _bound(statement.slots, values))
            rows: list[Any] = cursor.fetchmany(2)
        if len(rows) > 1:
            raise RuntimeError(f"a compiled object read found more than one row: {statement.sql}")
        if not rows:
            return None
        if statement.converters:
            rows = list(statement.compiler.apply_converters(rows, statement.converters))
        row = rows[0]
        instance = statement.model.from_db(
            statement.alias, statement.init_list, row[statement.start : statement.end]
        )
        for populator in statement.populators:
            populator.populate(row, instance)
        return instance
