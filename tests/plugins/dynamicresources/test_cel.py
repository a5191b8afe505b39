"""Device selectors in CEL: the ``device`` variable and Kubernetes' quantity and semver."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.plugins.dynamicresources.cel import Compiler, SelectorError, device_view

DRIVER = "gpu.example.com"
GPU = device_view(
    DRIVER,
    {
        "name": "gpu-0",
        "attributes": {
            "model": {"string": "A100"},
            "index": {"int": 3},
            "healthy": {"bool": True},
            "driverVersion": {"version": "1.2.3-rc.1"},
            "numa.example.com/node": {"int": 1},
        },
        "capacity": {"memory": {"value": "40Gi"}},
    },
)
compiler = Compiler()


def matches(expression: str, device: dict = GPU) -> bool:
    return compiler.compile(expression).matches(device)


@pytest.mark.parametrize(
    "expression, want",
    [
        (f'device.driver == "{DRIVER}"', True),
        ('device.driver == "other"', False),
        (f'device.attributes["{DRIVER}"].model == "A100"', True),
        (f'device.attributes["{DRIVER}"].index > 2 && device.attributes["{DRIVER}"].healthy', True),
        ('device.attributes["numa.example.com"].node == 1', True),
        (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) == 0', True),
        (f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("40000Mi"))', True),
        (f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("1Ti"))', True),
        (f'device.capacity["{DRIVER}"].memory == quantity("40960Mi")', True),
        (f'device.capacity["{DRIVER}"].memory.asInteger() == 42949672960', True),
        (f'device.attributes["{DRIVER}"].driverVersion.isLessThan(semver("1.2.3"))', True),
        (f'device.attributes["{DRIVER}"].driverVersion.major() == 1', True),
        (f'device.attributes["{DRIVER}"].?missing.orValue("x") == "x"', True),
        (f'has(device.attributes["{DRIVER}"].model)', True),
        ('has(device.attributes["unknown.example.com"].model)', False),
        ("device.driver.startsWith('gpu.')", True),
        ('isQuantity("1Gi") && !isQuantity("one")', True),
        ('isSemver("1.0.0") && !isSemver("1.0")', True),
        ("device.allowMultipleAllocations", False),
    ],
)
def test_selectors_see_the_device_as_kubernetes_shows_it(expression: str, want: bool) -> None:
    assert matches(expression) is want


def test_a_missing_attribute_is_an_error_with_kubernetes_hint() -> None:
    with pytest.raises(SelectorError) as e:
        matches(f'device.attributes["{DRIVER}"].missing == "x"')
    assert "CEL runtime error" in e.value.message
    assert "optional chaining" in e.value.message


@pytest.mark.parametrize(
    "expression, words",
    [
        ("device.driver ==", "compilation failed"),
        ("1 + 1", "must evaluate to bool"),
        ("nosuchvar == 1", "compilation failed"),
    ],
)
def test_a_bad_expression_does_not_compile(expression: str, words: str) -> None:
    with pytest.raises(SelectorError) as e:
        compiler.compile(expression)
    assert words in e.value.message
    assert e.value.expression == expression


def test_a_dyn_result_that_is_not_bool_is_an_error() -> None:
    with pytest.raises(SelectorError, match="could not be converted to bool"):
        matches(f'device.attributes["{DRIVER}"].model')


def test_each_expression_is_compiled_once() -> None:
    c = Compiler()
    assert c.compile("device.driver == 'a'") is c.compile("device.driver == 'a'")


_version = st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))


@given(_version, _version)
def test_semver_order_is_numeric(a: tuple[int, int, int], b: tuple[int, int, int]) -> None:
    x, y = ".".join(map(str, a)), ".".join(map(str, b))
    assert matches(f'semver("{x}").compareTo(semver("{y}")) == {(a > b) - (a < b)}')


def test_a_prerelease_sorts_before_its_release() -> None:
    assert matches('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))')
    assert matches('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-beta"))')
    assert matches('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))')


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_quantity_order_agrees_with_the_numbers(a: int, b: int) -> None:
    assert matches(f'quantity("{a}m").compareTo(quantity("{b}m")) == {(a > b) - (a < b)}')
