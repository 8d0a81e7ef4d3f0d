"""A JSON document read back, checked against its shape (a TypedDict of shapes.py or
summary_shapes.py) before its values are used."""

import math
from types import UnionType
from typing import (
    Annotated,
    Any,
    NotRequired,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

# --- checking a document read back against its shape -----------------------------------------

# The fields of run.json that rtlab cannot do without (the rest may be missing, as older runs
# and boards leave them): what was measured and how.
MANIFEST_NEEDS = ("plan", "plan.loads", "plan.duration_s", "plan.interval_us", "plan.histogram_us")
_LARGEST = 1 << 53  # no count, µs or size of a run comes near it; JSON readers keep ints exact below


def problem(shape: Any, value: Any, required: tuple[str, ...] = (), where: str = "") -> str | None:
    """Why VALUE (parsed JSON) does not have SHAPE (a type of shapes.py or summary_shapes.py),
    as "<field>: <why>", or None. Fields present must have their type (ints whole, 0 or more and
    below 2**53, floats finite); fields missing are allowed except the dotted paths in REQUIRED."""
    origin = get_origin(shape)
    if shape is Any:
        return None
    if origin is NotRequired:
        return problem(get_args(shape)[0], value, required, where)
    if origin is Annotated:  # a bounded value (boundary/values.py): its type, then its bound
        inner, *bounds = get_args(shape)
        found = problem(inner, value, required, where)
        if found is not None:
            return found
        said = next((why for b in bounds if (why := b.problem(value)) is not None), None)
        return None if said is None else f"{where or 'the document'}: {said}"
    if origin in (Union, UnionType):
        options = get_args(shape)
        if value is None and type(None) in options:
            return None
        said = [problem(option, value, required, where) for option in options if option is not type(None)]
        return None if None in said else said[0]
    name = where or "the document"
    if is_typeddict(shape):
        if not isinstance(value, dict):
            return f"{name}: {_kind(value)}, not an object"
        for key, hint in get_type_hints(shape, include_extras=True).items():
            if key in value:
                inner = tuple(r.partition(".")[2] for r in required if r.startswith(key + "."))
                found = problem(hint, value[key], inner, _join(where, key))
                if found is not None:
                    return found
        missing = [key for key in required if "." not in key and key not in value]
        return f"{_join(where, missing[0])}: missing" if missing else None
    if origin is list:
        if not isinstance(value, list):
            return f"{name}: {_kind(value)}, not a list"
        (item,) = get_args(shape)
        return next((p for i, v in enumerate(value) if (p := problem(item, v, (), f"{name}[{i}]"))), None)
    if origin is dict:
        if not isinstance(value, dict):
            return f"{name}: {_kind(value)}, not an object"
        _, item = get_args(shape)
        return next((p for k, v in value.items() if (p := problem(item, v, (), _join(where, k)))), None)
    if shape is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return f"{name}: {_kind(value)}, not a number"
        return None
    if shape is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name}: {_kind(value)}, not a whole number"
        return None if 0 <= value < _LARGEST else f"{name}: {value} is out of range"
    if shape is type(None):
        return None if value is None else f"{name}: {_kind(value)}, not null"
    if not isinstance(value, shape) or (shape is int and isinstance(value, bool)):
        return f"{name}: {_kind(value)}, not {shape.__name__}"
    return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else str(key)


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return f"a string {value[:20]!r}" if len(value) <= 20 else "a string"
    return {dict: "an object", list: "a list", bool: "a boolean", type(None): "null"}.get(
        type(value), f"{value!r}"[:24]
    )
