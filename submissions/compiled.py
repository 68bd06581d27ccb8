"""Hot reads whose SQL Django compiles once per process and shape, then runs with new values.

Django builds and compiles a queryset's SQL on every execution. For most reads that is a small
part of their time; for a few on the hot path it is most of it: the upload's one read of the
entrant's submissions (seven filtered aggregates) took 12 ms of the web process's CPU per upload
on the 2-core box, where PostgreSQL answers it in about 1.5 ms.

``CompiledRead`` runs such a read through the ORM once per shape, with sentinel values standing
for the caller's, and records the statement Django sent (``connection.execute_wrapper``, the
documented hook). Each parameter that is a sentinel (as given, or as the backend adapts it, e.g.
a datetime as text on SQLite) becomes a slot for the caller's value, adapted the same way; every
other parameter is a constant of the query and stays. Later calls bind the values and run the
statement on a cursor, and convert the result columns the caller names as the backend would.
A read that runs more than one statement raises at once: a programming error, found by the first
call in the tests. The sentinels must be values no real call passes (negative ids, a datetime in
1901, a marked string), of the real values' types.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Field, Value


@dataclass(frozen=True)
class _Statement:
    sql: str
    # Per parameter: ("const", value) or ("value", name, adapt), adapt: whether the backend's
    # adaptation of the sentinel (not the sentinel itself) was what Django sent.
    slots: tuple[tuple[Any, ...], ...]


def _adapted(value: Any) -> Any:
    """How Django's backend sends ``value`` as a query parameter (datetimes may change form)."""
    from datetime import datetime

    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


class CompiledRead:
    """One read of one row (an aggregate, a lookup), compiled once per shape and backend.

    ``run(values)`` is the ORM read (it returns anything; its result is not used): called with
    the sentinels, once per shape, to capture the statement. ``sentinels``: name → a value that
    cannot occur in real calls, of the same type as the real value. ``fields``: result column →
    model field, for columns the backend must convert (a datetime read back from SQLite)."""

    def __init__(
        self,
        run: Callable[[Mapping[str, Any], Hashable], Any],
        sentinels: Mapping[str, Any],
        fields: Mapping[str, Field[Any, Any]] | None = None,
    ) -> None:
        self._run = run
        self._sentinels = dict(sentinels)
        self._fields = dict(fields or {})
        self._statements: dict[tuple[str, str, Hashable], _Statement] = {}

    def _capture(self, shape: Hashable) -> _Statement:
        captured: list[tuple[str, list[Any]]] = []

        def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            captured.append((sql, list(params or ())))
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            self._run(self._sentinels, shape)
        if len(captured) != 1:
            raise RuntimeError(f"a compiled read must be one statement, not {len(captured)}")
        sql, params = captured[0]
        slots: list[tuple[Any, ...]] = []
        for param in params:
            slot: tuple[Any, ...] = ("const", param)
            for name, sentinel in self._sentinels.items():
                for adapt, form in ((False, sentinel), (True, _adapted(sentinel))):
                    if type(param) is type(form) and param == form:
                        slot = ("value", name, adapt)
                        break
                if slot[0] == "value":
                    break
            slots.append(slot)
        return _Statement(sql, tuple(slots))

    def __call__(self, values: Mapping[str, Any], shape: Hashable = None) -> dict[str, Any]:
        """The row the read returns for ``values`` (column name → value), or {} for no row."""
        key = (connection.vendor, connection.alias, shape)
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = self._capture(shape)
        params = [
            slot[1]
            if slot[0] == "const"
            else (_adapted(values[slot[1]]) if slot[2] else values[slot[1]])
            for slot in statement.slots
        ]
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, params)
            row = cursor.fetchone()
            names = [column[0] for column in cursor.description]
        if row is None:
            return {}
        result = dict(zip(names, row, strict=True))
        for name, field in self._fields.items():
            expression = Value(None, output_field=field)
            for convert in connection.ops.get_db_converters(expression):
                result[name] = convert(result[name], expression, connection)
        return result
