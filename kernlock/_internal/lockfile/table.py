"""The lock model's dict form, in the style of `packaging.pylock`: typed access with key paths,
generic `to_dict`.

A model class derives from `Table` and writes its own `_from_dict(d, ignored)`
with the `get*` helpers below, spelling each key once; a failure is a
`LockfileError` whose `key_path` locates the value, and `nested` prefixes the
parent's key to errors (and to the unknown keys a newer minor format may carry,
collected in `ignored` instead of refused). `Table.to_dict` is generic: a field's
key is its name with dashes (or `metadata={"key": ...}`), values equal to the
field's default are left out (unless `ALWAYS_WRITTEN`), tuples become lists and
targets their text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import LockfileError, TargetError

REGENERATE = "re-resolve every pin with `kernlock lock --upgrade`"
REPAIR = f"undo the hand edit, or {REGENERATE}"  # the fix for a value this kernlock never writes

# typing has it from Python 3.11; at run time the decorator only marks the function
if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_options: Any) -> Callable[[Any], Any]:
        return lambda function: function


_T = TypeVar("_T")
_TableT = TypeVar("_TableT", bound="Table")
Ignored = list[
    tuple[str | int, ...]
]  # key paths of unknown keys, collected while reading a newer minor
_ALWAYS = object()
ALWAYS_WRITTEN = {
    "always": True
}  # field metadata: `to_dict` writes it even when it holds its default


def invalid(problem: str, *key_path: str | int, fix: str = REPAIR) -> LockfileError:
    """The error for a bad value at `key_path` (relative to the table being read)."""
    return LockfileError(problem, key_path=key_path, fix=fix)


def _kind_name(kind: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        list: "an array",
        dict: "a table",
        bool: "a boolean",
    }.get(kind, kind.__name__)


def type_error(value: Any, kind: type, *key_path: str | int) -> LockfileError:
    """The error for a value at `key_path` that is not a `kind`."""
    found = "a boolean" if isinstance(value, bool) else type(value).__name__
    return invalid(f"expected {_kind_name(kind)}, got {found}", *key_path)


def get(d: Mapping[str, Any], kind: type[_T], key: str) -> _T | None:
    """`d[key]` checked to be a `kind` (TOML's booleans are not integers), or None when absent."""
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise type_error(value, kind, key)
    return value


def get_required(d: Mapping[str, Any], kind: type[_T], key: str) -> _T:
    """`get`, and an error when `key` is absent."""
    value = get(d, kind, key)
    if value is None:
        raise invalid("missing required key", key)
    return value


def get_strings(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """`d[key]` as a tuple of strings (empty when absent)."""
    values = get(d, list, key) or ()
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise type_error(value, str, key, index)
    return tuple(values)


def get_targets(d: Mapping[str, Any], key: str) -> tuple[Target, ...]:
    """`d[key]` as parsed targets (empty when absent)."""
    targets = []
    for index, text in enumerate(get_strings(d, key)):
        try:
            targets.append(parse_target(text))
        except TargetError:
            raise invalid(f"invalid target {text!r}", key, index) from None
    return tuple(targets)


def ensure(condition: bool, key: str, problem: str, fix: str = REPAIR) -> None:
    """Raise `problem` at `key` unless `condition` holds."""
    if not condition:
        raise invalid(problem, key, fix=fix)


def nested(
    parse: Callable[[Mapping[str, Any], Ignored | None], _T],
    value: Any,
    ignored: Ignored | None,
    *keys: str | int,
) -> _T:
    """`parse(value)` located at `keys`: its errors and ignored keys get `keys` as their prefix."""
    if not isinstance(value, dict):
        raise type_error(value, dict, *keys)
    inner: Ignored | None = None if ignored is None else []
    try:
        result = parse(value, inner)
    except LockfileError as error:
        raise error.under(*keys) from None
    if inner:
        ignored.extend((*keys, *path) for path in inner)  # type: ignore[union-attr]
    return result


def get_object(
    d: Mapping[str, Any], cls: type[_TableT], key: str, ignored: Ignored | None
) -> _TableT | None:
    """The table at `key` read as `cls`, or None when absent."""
    value = d.get(key)
    return None if value is None else nested(cls._from_dict, value, ignored, key)


def get_objects(
    d: Mapping[str, Any], cls: type[_TableT], key: str, ignored: Ignored | None
) -> tuple[_TableT, ...]:
    """The array of tables at `key`, each read as `cls` (empty when absent)."""
    values = get(d, list, key) or ()
    return tuple(
        nested(cls._from_dict, value, ignored, key, index) for index, value in enumerate(values)
    )


# ---------------------------------------------------------------- the shared base


_LAYOUTS: dict[type, tuple[tuple[str, str, Any], ...]] = {}
_KEYS: dict[type, frozenset[str]] = {}
_REBUILDERS: dict[type, tuple[tuple[str, str, Callable[[Any], Any] | None], ...]] = {}


def _layout(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """Per field of a model class: attribute name, key in the lock, and the default `to_dict` leaves
    out."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = tuple(
            (
                f.name,
                f.metadata.get("key", f.name.replace("_", "-")),
                _ALWAYS if f.default is MISSING or f.metadata.get("always") else f.default,
            )
            for f in fields(cls)
        )
    return layout


def _keys(cls: type) -> frozenset[str]:
    """The keys a model class reads."""
    keys = _KEYS.get(cls)
    if keys is None:
        keys = _KEYS[cls] = frozenset(key for _, key, _ in _layout(cls))
    return keys


def _rebuilders(cls: type) -> tuple[tuple[str, str, Callable[[Any], Any] | None], ...]:
    """Per field: attribute name, key, and how to rebuild its value from `to_dict` output (from the
    type hints).

    Empty for a class whose `to_dict` output is already its keyword arguments (every key is the
    field's name and no value needs rebuilding): `LockedFile`, most of a lock's objects.
    """
    found = _REBUILDERS.get(cls)
    if found is None:
        import typing

        hints = typing.get_type_hints(cls)
        rebuilders = []
        for name, key, _ in _layout(cls):
            kinds = (*typing.get_args(hints[name]), hints[name])
            model = next(
                (kind for kind in kinds if isinstance(kind, type) and issubclass(kind, Table)), None
            )
            rebuild = model.from_own_dict if model else parse_target if Target in kinds else None
            rebuilders.append((name, key, rebuild))
        plain = all(
            key == name and rebuild is None and typing.get_origin(hints[name]) is not tuple
            for name, key, rebuild in rebuilders
        )
        found = _REBUILDERS[cls] = () if plain else tuple(rebuilders)
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, Table):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Target):
        return str(value)
    return value


@dataclass_transform(frozen_default=True, kw_only_default=True)
def model(cls: type[_TableT]) -> type[_TableT]:
    """The dataclass options of every model class: frozen, keyword-only, slots.

    Equality, hash and repr come from `Table` (one generic method each over the
    fields) instead of three generated per class: before Python 3.13 each generated
    method is compiled on its own at import, and `apply()` imports the whole model.
    """
    return dataclass(frozen=True, kw_only=True, slots=True, eq=False, repr=False)(cls)


class Table:
    """What every model class shares: `from_dict`, the generic `to_dict`, and value equality, hash
    and repr."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields_text = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__qualname__}({fields_text})"

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> Any:
        raise NotImplementedError

    @classmethod
    def _check_keys(cls, d: Mapping[str, Any], ignored: Ignored | None) -> None:
        """Refuse keys this kernlock does not know; collect them instead while reading a newer
        minor."""
        if d.keys() <= _keys(cls):
            return
        unknown = d.keys() - _keys(cls)
        if ignored is None:
            raise invalid(
                "unknown key (written by a newer kernlock?)",
                min(unknown),
                fix=f"upgrade kernlock, or {REGENERATE}",
            )
        ignored.extend((key,) for key in sorted(unknown))

    @classmethod
    def from_dict(cls: type[_TableT], d: Mapping[str, Any], /) -> _TableT:
        """Validate a parsed mapping (TOML keys) into this class; `LockfileError` names the bad key
        path."""
        return nested(cls._from_dict, d, None)

    @classmethod
    def from_own_dict(cls: type[_TableT], d: Mapping[str, Any], /) -> _TableT:
        """Rebuild from what this kernlock's `to_dict` wrote and signed (the parse cache), without
        validating again."""
        rebuilders = _rebuilders(cls)
        if not rebuilders:
            return cls(**d)
        values = {}
        for name, key, rebuild in rebuilders:
            if key in d:
                value = d[key]
                if isinstance(value, list):
                    value = tuple(map(rebuild, value)) if rebuild else tuple(value)
                elif rebuild:
                    value = rebuild(value)
                values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The mapping `from_dict` reads back: TOML keys, lists for tuples, defaults left out."""
        result = {}
        for name, key, default in _layout(type(self)):
            value = getattr(self, name)
            if default is _ALWAYS or value != default:
                result[key] = _plain(value)
        return result
