"""Structural diffs of JSON values, addressed by RFC 6901 JSON Pointers.

This module is pure: standard library only, no Django, no I/O. It is what replay uses to
report divergences (contracts.md §3: every divergence's ``path`` is a JSON Pointer) and
what the console uses to load large values on demand (:func:`pointer_get`). It mirrors
Verist's ``diff`` / ``applyDiff`` pair (seed 002), with string pointers instead of path
arrays.

Values are JSON values as :func:`json.loads` produces them: ``dict`` (string keys),
``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``.

Equality is **type-strict**, because replay compares canonical bytes, not Python values:

* ``True``, ``1`` and ``1.0`` are three different values (Python says they are equal);
  a change between them is reported as a change at that path.
* ``0.0`` and ``-0.0`` differ (they serialise differently); any two NaNs are equal.
* Two dicts with the same items in a different insertion order are equal (JSON objects
  are unordered); lists are ordered.
* Any other object is an opaque scalar, equal to another only if it has exactly the same
  type and compares ``==``.

Order of :func:`diff`'s entries is deterministic: depth first in the document order of
``a``; inside an object, ``a``'s keys in ``a``'s order (changes and removals), then keys
present only in ``b`` in sorted order (additions); inside an array, index by index over the
common prefix, then the extra tail of the longer array as removals or additions in ascending
index order.

Speed: identical subtrees are skipped with C-speed checks (identity, then ``==``, then a
byte comparison of :mod:`marshal` dumps, which tells ``True``/``1``/``1.0`` apart). Only
subtrees that really differ are walked in Python, and the walk keeps an explicit stack,
so deeply nested documents do not hit the recursion limit.
"""

from __future__ import annotations

import enum
import marshal
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MISSING",
    "DiffEntry",
    "PointerError",
    "apply_diff",
    "diff",
    "first_divergence",
    "iter_diff",
    "pointer_escape",
    "pointer_get",
    "pointer_join",
    "pointer_split",
    "pointer_unescape",
    "strict_equal",
]


class _MissingType(enum.Enum):
    """Type of :data:`MISSING`; an enum so the sentinel survives copy and pickle as itself."""

    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


#: Stands for the absent side of an addition (``before``) or a removal (``after``).
MISSING: Final = _MissingType.MISSING


class PointerError(KeyError, IndexError):
    """A JSON Pointer is malformed or does not resolve in the document.

    It is both a :class:`KeyError` and an :class:`IndexError`, so callers that already catch
    either keep working.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class DiffEntry:
    """One difference: the value at ``path`` was ``before`` and is ``after``.

    ``before`` is :data:`MISSING` for an addition and ``after`` is :data:`MISSING` for a
    removal; both sides are present for a change (including a change of type).
    """

    path: str
    before: Any
    after: Any

    @property
    def kind(self) -> str:
        """``"added"``, ``"removed"`` or ``"changed"``."""
        if self.before is MISSING:
            return "added"
        if self.after is MISSING:
            return "removed"
        return "changed"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"path", "before", "after"}``, plus ``"absent"`` naming a :data:`MISSING` side.

        ``null`` is a legitimate JSON value, so a side that does not exist is written ``null``
        *and* named by ``"absent": "before"`` (an addition) or ``"absent": "after"`` (a
        removal); without ``"absent"`` both sides exist. Replay reports spell divergences
        the same way (``core.formats.native.engine.Divergence``).
        """
        out: dict[str, Any] = {
            "path": self.path,
            "before": None if self.before is MISSING else self.before,
            "after": None if self.after is MISSING else self.after,
        }
        if self.before is MISSING:
            out["absent"] = "before"
        elif self.after is MISSING:
            out["absent"] = "after"
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> DiffEntry:
        """Inverse of :meth:`to_json`. The side ``"absent"`` names is MISSING, and so is a
        ``"before"``/``"after"`` key left out altogether (an older spelling)."""
        absent = obj.get("absent")
        return cls(
            path=obj["path"],
            before=MISSING if absent == "before" else obj.get("before", MISSING),
            after=MISSING if absent == "after" else obj.get("after", MISSING),
        )


# --------------------------------------------------------------------------- pointers

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE = re.compile(r"~(?![01])")


def pointer_escape(token: str) -> str:
    """Escape one reference token: ``~`` becomes ``~0`` and ``/`` becomes ``~1``."""
    if "~" in token:
        token = token.replace("~", "~0")
    if "/" in token:
        token = token.replace("/", "~1")
    return token


def pointer_unescape(token: str) -> str:
    """Undo :func:`pointer_escape`; raise :class:`PointerError` on a bad ``~`` escape."""
    if "~" not in token:
        return token
    if _BAD_ESCAPE.search(token):
        raise PointerError(f"invalid escape in JSON Pointer token {token!r}")
    return token.replace("~1", "/").replace("~0", "~")


def pointer_join(parts: Iterable[str | int]) -> str:
    """Build a pointer from unescaped tokens (array indexes may be ints); ``[]`` gives ``""``."""
    return "".join("/" + pointer_escape(str(part)) for part in parts)


def pointer_split(pointer: str) -> list[str]:
    """Split a pointer into its unescaped tokens; ``""`` (the whole document) gives ``[]``."""
    if pointer == "":
        return []
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise PointerError(f"a JSON Pointer is empty or starts with '/': {pointer!r}")
    return [pointer_unescape(token) for token in pointer[1:].split("/")]


def _array_index(array: list[Any], token: str, pointer: str) -> int:
    if not _ARRAY_INDEX.fullmatch(token):
        raise PointerError(f"{token!r} is not an array index in {pointer!r}")
    index = int(token)
    if index >= len(array):
        raise PointerError(f"index {index} is out of range (length {len(array)}) in {pointer!r}")
    return index


def _step(node: Any, token: str, pointer: str) -> Any:
    if isinstance(node, dict):
        try:
            return node[token]
        except KeyError:
            raise PointerError(f"no member {token!r} in {pointer!r}") from None
    if isinstance(node, list):
        return node[_array_index(node, token, pointer)]
    raise PointerError(f"cannot descend into a {type(node).__name__} at {token!r} in {pointer!r}")


def pointer_get(doc: Any, pointer: str) -> Any:
    """Resolve an RFC 6901 pointer in ``doc`` and return the value it refers to.

    Raise :class:`PointerError` if the pointer is malformed, names a missing member, an
    out-of-range or non-canonical array index (``"01"``, ``"-"``), or descends into a scalar.
    """
    node = doc
    for token in pointer_split(pointer):
        node = _step(node, token, pointer)
    return node


# --------------------------------------------------------------------------- equality


def _scalar_equal(x: Any, y: Any) -> bool:
    """Type-strict equality of two values that are not both dicts or both lists."""
    tx = type(x)
    if tx is not type(y):
        return False
    if tx is float:
        if x == y:
            return x != 0.0 or math.copysign(1.0, x) == math.copysign(1.0, y)
        return math.isnan(x) and math.isnan(y)
    try:
        return bool(x == y)
    except Exception:  # an opaque object with a broken __eq__ is simply "different"
        return False


def _marshal_equal(x: Any, y: Any) -> bool:
    """True only if ``x`` and ``y`` are certainly type-strictly equal (False: unknown).

    Equal marshal bytes mean equal decoded values, types and float bits included. Format 4
    (fast) may encode shared objects as back-references, so equal values can give unequal
    bytes; format 2 has no references and settles it for same-order containers.
    """
    try:
        if marshal.dumps(x) == marshal.dumps(y):
            return True
        return marshal.dumps(x, 2) == marshal.dumps(y, 2)
    except (ValueError, TypeError, RecursionError):  # unmarshallable or too deep
        return False


def strict_equal(a: Any, b: Any) -> bool:
    """Type-strict JSON equality (see the module docstring); ``diff(a, b) == []`` iff true."""
    return first_divergence(a, b) is None


# --------------------------------------------------------------------------- diff

_DICT = 1
_LIST = 2


def _container(value: Any) -> int:
    tv = type(value)
    if tv is dict:
        return _DICT
    if tv is list:
        return _LIST
    if isinstance(value, dict):
        return _DICT
    if isinstance(value, list):
        return _LIST
    return 0


class _Descend:
    """Work item: walk into two containers of the same kind at ``path``."""

    __slots__ = ("a", "b", "path", "pure")

    def __init__(self, a: Any, b: Any, path: str, pure: bool) -> None:
        self.a = a
        self.b = b
        self.path = path
        self.pure = pure


def _compare(av: Any, bv: Any, path: str, pure: bool) -> DiffEntry | _Descend | None:
    """Compare one pair of values; None if equal, an entry, or a container walk to do.

    ``pure`` means an ancestor already compared ``==`` (so the structure matches and only
    numeric types, float signs or key order can differ): skip the C-level shortcuts, which
    would only repeat the same work at every depth, and walk.
    """
    if av is bv:
        return None
    kind = _container(av)
    if kind == 0 or kind != _container(bv):
        if kind == 0 and _scalar_equal(av, bv):
            return None
        return DiffEntry(path, av, bv)
    if pure:
        return _Descend(av, bv, path, True)
    try:
        loosely_equal = av == bv
    except Exception:  # RecursionError on very deep values, or an opaque object's __eq__
        loosely_equal = False
    if not loosely_equal:
        return _Descend(av, bv, path, False)
    if _marshal_equal(av, bv):
        return None
    return _Descend(av, bv, path, True)


def _walk_dict(
    a: dict[Any, Any], b: dict[Any, Any], path: str, pure: bool
) -> Iterator[DiffEntry | _Descend]:
    for key, av in a.items():
        if key in b:
            bv = b[key]
            if av is bv:
                continue
            item = _compare(av, bv, "", pure)
            if item is None:
                continue
            child = path + "/" + pointer_escape(str(key))
            if type(item) is DiffEntry:
                yield DiffEntry(child, av, bv)
            else:
                assert isinstance(item, _Descend)
                item.path = child
                yield item
        else:
            yield DiffEntry(path + "/" + pointer_escape(str(key)), av, MISSING)
    added = b.keys() - a.keys()
    if added:
        for key in sorted(added):
            yield DiffEntry(path + "/" + pointer_escape(str(key)), MISSING, b[key])


def _walk_list(a: list[Any], b: list[Any], path: str, pure: bool) -> Iterator[DiffEntry | _Descend]:
    common = min(len(a), len(b))
    for index in range(common):
        av = a[index]
        bv = b[index]
        if av is bv:
            continue
        item = _compare(av, bv, f"{path}/{index}", pure)
        if item is not None:
            yield item
    for index in range(common, len(a)):
        yield DiffEntry(f"{path}/{index}", a[index], MISSING)
    for index in range(common, len(b)):
        yield DiffEntry(f"{path}/{index}", MISSING, b[index])


def _walk(item: _Descend) -> Iterator[DiffEntry | _Descend]:
    if _container(item.a) == _DICT:
        return _walk_dict(item.a, item.b, item.path, item.pure)
    return _walk_list(item.a, item.b, item.path, item.pure)


def iter_diff(a: Any, b: Any) -> Iterator[DiffEntry]:
    """Yield the entries of :func:`diff` lazily, in the same order.

    Work stops when the caller stops iterating, so ``next(iter_diff(a, b), None)`` only
    walks as far as the first difference.
    """
    root = _compare(a, b, "", False)
    if root is None:
        return
    if isinstance(root, DiffEntry):
        yield root
        return
    stack = [_walk(root)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
        elif type(item) is DiffEntry:
            yield item
        else:
            assert isinstance(item, _Descend)
            stack.append(_walk(item))


def diff(a: Any, b: Any) -> list[DiffEntry]:
    """Return the differences that turn ``a`` into ``b``, in a deterministic order.

    ``[]`` means ``a`` and ``b`` are type-strictly equal. A value whose kind changes
    (object, array, scalar) or a scalar that changes (including ``1`` -> ``1.0`` or
    ``True`` -> ``1``) gives one entry at its own path; a replaced root gives one entry at
    ``""``. See the module docstring for the order and the equality rules.
    """
    return list(iter_diff(a, b))


def first_divergence(a: Any, b: Any) -> DiffEntry | None:
    """Return ``diff(a, b)[0]`` (or None if equal) without computing the rest of the diff."""
    return next(iter_diff(a, b), None)


# --------------------------------------------------------------------------- apply


def _copy(value: Any) -> Any:
    """Deep copy of a JSON value by a marshal round trip: exact types, C speed.

    Format 2 has no back-references, so the copy is a tree even if ``value`` shares a
    sub-object between two places (an edit at one path never shows up at another).
    """
    if _container(value) == 0:
        return value
    try:
        # Loads only bytes dumped on the line itself, never external input.
        return marshal.loads(marshal.dumps(value, 2))  # noqa: S302
    except (ValueError, TypeError, RecursionError):  # opaque scalars inside, or too deep
        return _tree_copy(value)


def _tree_copy(value: Any) -> Any:
    """Copy dicts and lists (iteratively, any depth); other values are shared as they are."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        node = holder[key]
        kind = _container(node)
        if kind == _DICT:
            copied: Any = dict(node)
            stack.extend((copied, k) for k in copied)
        elif kind == _LIST:
            copied = list(node)
            stack.extend((copied, i) for i in range(len(copied)))
        else:
            continue
        holder[key] = copied
    return root[0]


def _parent(doc: Any, tokens: list[str], pointer: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        node = _step(node, token, pointer)
    return node


def _apply_one(doc: Any, entry: DiffEntry, removals: list[DiffEntry]) -> Any:
    tokens = pointer_split(entry.path)
    if not tokens:
        if entry.after is MISSING:
            raise PointerError("cannot remove the whole document")
        return _copy(entry.after)
    parent = _parent(doc, tokens, entry.path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if entry.after is MISSING:
            if last not in parent:
                raise PointerError(f"no member {last!r} to remove at {entry.path!r}")
            del parent[last]
        else:
            parent[last] = _copy(entry.after)
    elif isinstance(parent, list):
        if entry.after is MISSING:
            _array_index(parent, last, entry.path)
            removals.append(entry)  # applied last, from the end, so indexes stay valid
        elif entry.before is MISSING:
            if last == "-":
                parent.append(_copy(entry.after))
            elif not _ARRAY_INDEX.fullmatch(last) or int(last) > len(parent):
                raise PointerError(f"cannot add at {last!r} in {entry.path!r}")
            else:
                parent.insert(int(last), _copy(entry.after))
        else:
            parent[_array_index(parent, last, entry.path)] = _copy(entry.after)
    else:
        raise PointerError(f"cannot descend into a {type(parent).__name__} at {entry.path!r}")
    return doc


def _removal_order(item: tuple[list[str], DiffEntry]) -> tuple[tuple[int, int, str], ...]:
    """Sort key: removals with larger keys go first (deeper and later indexes before earlier)."""
    return tuple(
        (0, int(token), "") if _ARRAY_INDEX.fullmatch(token) else (1, 0, token) for token in item[0]
    )


def apply_diff(a: Any, entries: Iterable[DiffEntry]) -> Any:
    """Return a new value: ``a`` with ``entries`` applied; ``a`` itself is never mutated.

    ``apply_diff(a, diff(a, b))`` is type-strictly equal to ``b`` for all JSON values. The
    result shares nothing with ``a`` or with the entries' values (it is a deep copy). Entries
    are applied in order, except that removals of array elements are applied after the
    other entries and from the last to the first, so an array shrinks from its end and the
    indexes in the entries stay valid. ``before`` values are not checked. A path that does
    not resolve raises :class:`PointerError`.
    """
    doc = _copy(a)
    removals: list[DiffEntry] = []
    for entry in entries:
        doc = _apply_one(doc, entry, removals)
    for tokens, entry in sorted(
        ((pointer_split(e.path), e) for e in removals), key=_removal_order, reverse=True
    ):
        parent = _parent(doc, tokens, entry.path)
        del parent[_array_index(parent, tokens[-1], entry.path)]
    return doc
