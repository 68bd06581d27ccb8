"""How sizes in bytes are written: binary units named as such (1 MiB = 2**20 bytes), the one
rule for the admin, the pages, the API, ``oep``, refusals and the docs (no Django: the engine
and the command-line client use it too).

A model-size limit, and a model's size beside it, is always written in MiB, the unit the operator
types it in, so the number an operator typed is the number every participant reads. Other sizes
(files, memory) take the binary unit that suits their magnitude: ``evaluation.formats.size``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

MIB = 1 << 20


def _number(value: float, places: int) -> str:
    """``value`` with at most ``places`` decimals (trailing zeros dropped) and thousands
    separators: 400, 315.71, 2,048."""
    rounded = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
    text = f"{rounded:,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def mib_value(size: int) -> float:
    """Bytes as MiB to the two decimals the admin takes, for an API's number field."""
    return float(_number(size / MIB, 2).replace(",", ""))


def mib_text(size: int) -> str:
    """A model size or limit: "400 MiB", "0.29 MiB", "2,048 MiB"."""
    return f"{_number(size / MIB, 2)} MiB"
