"""Request parameters, read strictly: each at most once, a blank value is a value, typed by a
serializer. For query strings and for multipart/urlencoded form bodies alike.

Django's ``QueryDict`` keeps the last of repeated keys and DRF reads a blank value from it as
"not given", so ``?board=``, ``?page=1&page=2`` and an upload with ``file`` twice (one of them
silently dropped) used to pass as valid requests although the OpenAPI schema (one scalar each)
calls them invalid. Every API view that takes such parameters reads them here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError


def params_validated(
    serializer_class: type[serializers.Serializer], params: Mapping[str, Any] | list[Any]
) -> dict[str, Any]:
    """The declared parameters of ``params``, validated; a 400 ``{name: [why]}`` otherwise.

    ``params`` is a QueryDict (a query string, a form body) or what else DRF's ``data`` holds
    (a dict, or a list from a JSON body: no parameters at all). Undeclared parameters are
    ignored (clients and proxies add their own, e.g. cache busters).
    """
    if not isinstance(params, Mapping):
        params = {}
    declared: list[str] = list(serializer_class().fields)
    counts = (
        {name: len(params.getlist(name)) for name in declared}
        if isinstance(params, QueryDict)
        else {}
    )
    repeated = {
        name: [f"Give '{name}' once, not {count} times."]
        for name, count in counts.items()
        if count > 1
    }
    if repeated:
        raise ValidationError(repeated)
    # A plain dict, not the QueryDict: DRF would read a blank value from a QueryDict as absent.
    form = serializer_class(data={name: params[name] for name in declared if name in params})
    form.is_valid(raise_exception=True)
    return dict(form.validated_data)
