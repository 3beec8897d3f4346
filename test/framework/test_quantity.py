from decimal import Decimal

import pytest

from caldera.framework.quantity import QuantityError, parse_bytes, parse_cpu_millis, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("2Gi", Decimal(2 * 2**30)),
        ("500Ki", Decimal(500 * 1024)),
        ("1k", Decimal(1000)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("2.5e-3", Decimal("0.0025")),
        ("1M", Decimal(10**6)),
        ("3Ti", Decimal(3 * 2**40)),
        ("0", Decimal(0)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+1", Decimal(1)),
        ("250u", Decimal("0.00025")),
        ("10n", Decimal("0.00000001")),
        ("1Ei", Decimal(2**60)),
        (" 4 ", Decimal(4)),
        (7, Decimal(7)),
        (0.25, Decimal("0.25")),
    ],
)
def test_valid_quantities(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text", ["", "abc", "1.2.3", "10Gb", "1ki", "Gi", "1 Gi", "--1", "1e", "e3", "0x10", "1m2"]
)
def test_invalid_quantities_name_the_value(text):
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [True, None, [1], float("nan"), float("inf")])
def test_non_quantities_are_rejected(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_cpu_in_millicores_rounds_up_fractions():
    assert parse_cpu_millis("1") == 1000
    assert parse_cpu_millis("100m") == 100
    assert parse_cpu_millis("0.0001") == 1  # a tenth of a millicore is still one millicore
    assert parse_cpu_millis("2.5") == 2500


def test_memory_in_bytes():
    assert parse_bytes("1Gi") == 2**30
    assert parse_bytes("1G") == 10**9
    assert parse_bytes("128974848") == 128974848
    assert parse_bytes("129e6") == 129_000_000
    assert parse_bytes("123Mi") == 123 * 2**20


def test_a_remembered_quantity_is_not_taken_for_a_boolean_of_equal_value() -> None:
    """Quantities read once are remembered; True equals 1 in Python, yet it is still refused."""
    assert parse_cpu_millis(1) == 1000.0 and parse_bytes(1) == 1.0
    with pytest.raises(QuantityError):
        parse_cpu_millis(True)
    with pytest.raises(QuantityError):
        parse_bytes(True)
    assert parse_cpu_millis(1.0) == 1000.0 and parse_cpu_millis("1") == 1000.0
