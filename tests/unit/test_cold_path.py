"""The value objects a first request makes (`mcp_runtime/_value.py`): equal by their public attributes.

That a first request makes no dataclass of ours is tests/local_stack/test_cold_path_as_deployed.py.
"""

from __future__ import annotations

from mcp_runtime._value import ValueObject
from mcp_runtime.context import Principal
from mcp_runtime.sealing import Binding, SealingKey


class Point(ValueObject):
    __slots__ = ("_cache", "x", "y")
    x: int
    y: int
    _cache: str | None

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y, self._cache = x, y, None


class OtherPoint(Point):
    __slots__ = ()


def test_value_objects_are_equal_by_their_declared_public_attributes_and_hash_alike() -> None:
    one, same = Point(1, 2), Point(1, 2)
    same._cache = "computed"
    assert one == same
    assert hash(one) == hash(same)
    assert one != Point(2, 1)
    assert repr(one) == "Point(x=1, y=2)"


def test_a_value_object_is_never_equal_to_one_of_another_class_with_the_same_values() -> None:
    assert Point(1, 2) != OtherPoint(1, 2)
    assert Point(1, 2) != (1, 2)


def test_a_binding_is_compared_by_caller_method_and_target_and_never_shows_its_arguments() -> None:
    binding = Binding("jwt:alice|app", "tools/call", "archive_project", {"secret": "hunter2"})
    assert binding == Binding("jwt:alice|app", "tools/call", "archive_project", {"other": 1})
    assert binding != Binding("jwt:bob|app", "tools/call", "archive_project", {"secret": "hunter2"})
    assert "hunter2" not in repr(binding)


def test_a_sealing_key_never_shows_its_secret() -> None:
    key = SealingKey("k1", b"do-not-print-this-secret-0123456789")
    assert repr(key) == "SealingKey(key_id='k1')"
    assert key == SealingKey("k1", b"do-not-print-this-secret-0123456789")
    assert key != SealingKey("k1", b"another-secret-of-at-least-32-bytes")


def test_principals_are_values() -> None:
    assert Principal("jwt:alice|app", "jwt") == Principal("jwt:alice|app", "jwt")
    assert {Principal("jwt:alice|app", "jwt"), Principal("jwt:alice|app", "jwt")} == {Principal("jwt:alice|app", "jwt")}
    assert Principal("anonymous") == Principal("anonymous", "anonymous")
