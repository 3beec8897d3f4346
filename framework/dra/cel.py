"""Kubernetes' DRA CEL environment for device selectors, on the ``common-expression-language`` library.

As ``staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go`` (``newCompiler``, ``DeviceMatches``)
builds it: one variable ``device`` with ``driver`` (string), ``attributes`` (domain -> id -> value, typed
int/bool/string/version) and ``capacity`` (domain -> id -> quantity). An attribute or capacity name
without a domain lives under the driver's name (``parseQualifiedName``). The Kubernetes quantity and
semver libraries (``k8s.io/apiserver/pkg/cel/library``): ``quantity()``, ``isQuantity()``, ``semver()``,
``isSemver()`` and the members ``compareTo``, ``isLessThan``, ``isGreaterThan``, ``add``, ``sub``,
``asInteger``, ``asApproximateFloat``, ``isInteger``, ``sign``, ``major``, ``minor``, ``patch``.

The library has no opaque value types, so a quantity is carried as the one-key map
``{"__quantity__": canonical}`` and a version as ``{"__semver__": canonical}``; canonical forms make
``==`` between two equal quantities (``1Gi``, ``1024Mi``) true, as the Kubernetes type's equality is.

Expressions are compiled once (:class:`CelCache`). A compile error and a run-time error (a missing
attribute, a non-bool result, a bad quantity) are a :class:`CelError` per expression: the caller treats
the device as not matching and reports the error; nothing raises out of :meth:`Selector.matches`.

Known differences from cel-go that this library imposes: ``cel.bind`` (ext.Bindings) is not available,
and a lookup of an unknown domain (``device.attributes["other.example.com"]``) is an error rather than an
empty map, so ``has(device.attributes["other.example.com"].x)`` errors (the device does not match)
where Kubernetes answers false.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from caldera.framework.dra.objects import Device
from caldera.framework.quantity import QuantityError, parse_quantity

_Q = "__quantity__"
_V = "__semver__"


_EXTENSION = "cel.cel"
_loaded: Any = None
_loading = threading.Lock()  # the decision thread and the event loop may both compile first


def _library() -> Any:
    """The CEL library, loaded on first use (a cluster without Dynamic Resource Allocation never
    needs it): its Rust extension module when that can be loaded by itself, else its package."""
    global _loaded
    if _loaded is None:
        with _loading:
            if _loaded is None:
                library = _extension()
                if library is None:
                    import cel

                    library = cel
                _loaded = library
    return _loaded


def _extension() -> Any:
    """The library's extension module ``cel.cel`` (typed by the ``cel/cel.pyi`` it ships; the package
    re-exports it whole, ``from .cel import *``), loaded without running the package's
    ``__init__``, which also imports the library's interactive command-line tool (typer,
    prompt_toolkit, rich, pygments): 0.17 s of CPU and 25 MiB more in the process, measured with
    common-expression-language 0.10, for nothing a scheduler calls. The module is registered under
    its own name, so a later ``import cel`` re-exports this same module (an extension is initialised
    once per process). None when the installed layout is another (no such file, no ``compile``):
    the caller imports the package as usual."""
    loaded = sys.modules.get(_EXTENSION)
    if loaded is not None:
        return loaded
    try:
        package = importlib.util.find_spec("cel")  # finds the package without importing it
    except (ImportError, ValueError):
        return None
    if package is None or not package.submodule_search_locations:
        return None
    for directory in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, "cel" + suffix)
            if not os.path.isfile(path):
                continue
            loader = importlib.machinery.ExtensionFileLoader(_EXTENSION, path)
            spec = importlib.util.spec_from_file_location(_EXTENSION, path, loader=loader)
            if spec is None:
                return None
            module = importlib.util.module_from_spec(spec)
            sys.modules[_EXTENSION] = module
            try:
                loader.exec_module(module)
            except Exception:
                del sys.modules[_EXTENSION]
                return None
            if not (
                callable(getattr(module, "compile", None)) and callable(getattr(module, "Context", None))
            ):
                return None  # registered as loaded: the package's own import finds it there
            return module
    return None


@dataclass(frozen=True, slots=True)
class CelError:
    """One selector expression that failed: at compile time (``kind="compile"``) or on one device."""

    expression: str
    kind: str  # "compile" | "runtime"
    message: str
    device: str = ""  # driver/pool/device, for a run-time error

    def __str__(self) -> str:
        where = f" on device {self.device}" if self.device else ""
        return f"CEL {self.kind} error{where} in {self.expression!r}: {self.message}"


# --- quantities --------------------------------------------------------------------------------------
def _quantity_value(text: object) -> dict[str, str]:
    if not isinstance(text, str):
        raise TypeError(f"quantity() takes a string, not {type(text).__name__}")
    return _quantity_of(parse_quantity(text))


def _quantity_of(number: Decimal) -> dict[str, str]:
    return {_Q: format(number.normalize(), "f") if number else "0"}


def _as_decimal(value: object) -> Decimal:
    if isinstance(value, dict) and _Q in value:
        return Decimal(value[_Q])
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    raise TypeError(f"expected a quantity, got {type(value).__name__}")


def _is_quantity(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        parse_quantity(text)
    except (QuantityError, InvalidOperation):
        return False
    return True


# --- semantic versions (semver 2.0.0, strict, as github.com/blang/semver Parse) ------------------------
_NUM = r"0|[1-9][0-9]*"
_IDENT = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(
    rf"^(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?$"
)


def _parse_semver(text: str) -> tuple[int, int, int, tuple[str, ...]]:
    match = _SEMVER.match(text)
    if match is None:
        raise ValueError(f"invalid semantic version {text!r}")
    pre = tuple(match.group("pre").split(".")) if match.group("pre") else ()
    for part in pre:
        if part.isdigit() and len(part) > 1 and part[0] == "0":
            raise ValueError(
                f"invalid semantic version {text!r}: numeric prerelease part with a leading zero"
            )
    return int(match.group("major")), int(match.group("minor")), int(match.group("patch")), pre


def _semver_value(text: object, normalize: object = False) -> dict[str, str]:
    if not isinstance(text, str):
        raise TypeError(f"semver() takes a string, not {type(text).__name__}")
    if normalize is True:
        text = _normalize_semver(text)
    _parse_semver(text)
    return {_V: text}


def _normalize_semver(text: str) -> str:
    """``semver(s, true)``: a leading "v" dropped, missing minor/patch filled with 0, leading zeros cut."""
    core, sep, rest = text.removeprefix("v").partition("-")
    core, plus, build = core.partition("+")
    parts = [str(int(p)) if p.isdigit() else p for p in core.split(".")]
    parts += ["0"] * (3 - len(parts))
    return ".".join(parts) + (sep + rest if sep else "") + (plus + build if plus else "")


def _is_semver(text: object, normalize: object = False) -> bool:
    try:
        _semver_value(text, normalize)
    except (TypeError, ValueError):
        return False
    return True


def _semver_key(value: object) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
    if not (isinstance(value, dict) and _V in value):
        raise TypeError(f"expected a semver, got {type(value).__name__}")
    major, minor, patch, pre = _parse_semver(value[_V])
    # A release sorts after its prereleases; numeric identifiers sort below alphanumeric ones.
    ids = tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre)
    return major, minor, patch, 0 if pre else 1, ids


def _cmp(a: object, b: object) -> int:
    if isinstance(a, dict) and _V in a:
        ka, kb = _semver_key(a), _semver_key(b)
        return (ka > kb) - (ka < kb)
    da, db = _as_decimal(a), _as_decimal(b)
    return (da > db) - (da < db)


def _semver_part(index: int) -> Callable[[object], int]:
    def part(value: object) -> int:
        return _semver_key(value)[index]  # type: ignore[return-value]

    return part


def _as_integer(value: object) -> int:
    number = _as_decimal(value)
    if number != number.to_integral_value() or not -(2**63) <= number < 2**63:
        raise ValueError("cannot convert value to integer")
    return int(number)


def _is_integer(value: object) -> bool:
    number = _as_decimal(value)
    return bool(number == number.to_integral_value() and -(2**63) <= number < 2**63)


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "quantity": _quantity_value,
    "isQuantity": _is_quantity,
    "semver": _semver_value,
    "isSemver": _is_semver,
    "compareTo": _cmp,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "add": lambda a, b: _quantity_of(_as_decimal(a) + _as_decimal(b)),
    "sub": lambda a, b: _quantity_of(_as_decimal(a) - _as_decimal(b)),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: float(_as_decimal(a)),
    "isInteger": _is_integer,
    "sign": lambda a: (_as_decimal(a) > 0) - (_as_decimal(a) < 0),
    "major": _semver_part(0),
    "minor": _semver_part(1),
    "patch": _semver_part(2),
}


def device_variable(driver: str, device: Device) -> dict[str, Any]:
    """The ``device`` variable for one device, as ``CompilationResult.DeviceMatches`` builds it.

    Raises ValueError for an attribute or capacity that cannot be represented (an unknown attribute
    type, a bad version, a bad quantity), which Kubernetes also reports as an error for that device.
    """
    attributes: dict[str, dict[str, Any]] = {}
    for name, attribute in device.attributes.items():
        domain, ident = _qualified(name, driver)
        value = attribute.value()
        if value is None:
            raise ValueError(f"attribute {name}: unsupported attribute value")
        if attribute.version_value is not None:
            try:
                value = _semver_value(attribute.version_value)
            except ValueError as exc:
                raise ValueError(f"attribute {name}: parse semantic version: {exc}") from None
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in device.capacity.items():
        domain, ident = _qualified(name, driver)
        try:
            capacity.setdefault(domain, {})[ident] = _quantity_of(parse_quantity(cap.value))
        except (QuantityError, InvalidOperation) as exc:
            raise ValueError(f"capacity {name}: {exc}") from None
    # allowMultipleAllocations (DRAConsumableCapacity): false when unset (cel/compile.go DeviceMatches)
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(device.allow_multiple_allocations),
        "attributes": attributes,
        "capacity": capacity,
    }


def _qualified(name: str, default_domain: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


class DeviceContext:
    """One device's CEL evaluation context, built once and shared by every expression."""

    __slots__ = ("context", "error", "label")

    def __init__(self, driver: str, pool: str, device: Device) -> None:
        self.label = f"{driver}/{pool}/{device.name}"
        self.context: Any = None
        self.error = ""
        try:
            variable = device_variable(driver, device)
        except ValueError as exc:
            self.error = str(exc)
            return
        context = _library().Context()
        for name, function in FUNCTIONS.items():
            context.add_function(name, function)
        context.add_variable("device", variable)
        self.context = context


class Selector:
    """One compiled expression. :meth:`matches` answers True, False or a :class:`CelError`."""

    __slots__ = ("error", "expression", "program")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.program: Any = None
        self.error: CelError | None = None
        try:
            self.program = _library().compile(expression)
        except Exception as exc:  # the library raises ValueError for syntax; be safe about others
            self.error = CelError(expression, "compile", f"compilation failed: {exc}")

    def matches(self, device: DeviceContext) -> bool | CelError:
        if self.error is not None:
            return self.error
        if device.context is None:
            return CelError(self.expression, "runtime", device.error, device.label)
        try:
            result = self.program.execute(device.context)
        except Exception as exc:  # a run-time CEL error (missing key, bad call): the device does not match
            return CelError(self.expression, "runtime", _error_text(exc), device.label)
        if not isinstance(result, bool):
            return CelError(
                self.expression,
                "runtime",
                f"must evaluate to bool, not {type(result).__name__}",
                device.label,
            )
        return result


def _error_text(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    return str(exc) or type(exc).__name__


class CelCache:
    """Expressions compiled once, by their text (as ``cel.Cache.GetOrCompile``)."""

    def __init__(self) -> None:
        self._selectors: dict[str, Selector] = {}

    def get(self, expression: str) -> Selector:
        selector = self._selectors.get(expression)
        if selector is None:
            selector = self._selectors[expression] = Selector(expression)
        return selector

    def __len__(self) -> int:
        return len(self._selectors)
