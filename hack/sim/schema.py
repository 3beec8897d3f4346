"""Structural schemas of custom resources: pruning of undeclared fields and defaulting, as a real server does.

A real kube-apiserver keeps of a custom resource only what the CRD's structural schema declares
(k8s.io/apiextensions-apiserver `pkg/apiserver/schema/pruning/algorithm.go`, `Prune`): a field that no
`properties` entry and no `additionalProperties` schema names is dropped on every write, unless the schema (or
an enclosing one) sets `x-kubernetes-preserve-unknown-fields: true`; `apiVersion`, `kind` and `metadata` of the
object itself (and of a `x-kubernetes-embedded-resource`) are kept. Defaults (`default:`) fill absent fields of
objects that are present (`pkg/apiserver/schema/defaulting/algorithm.go`, `Default`), at any depth.

The simulator reads the CRDs from `deploy/crds/` (or the folder given), so the schema that is tested is the one
that is installed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("caldera.sim")

# deploy/crds of the source tree this package runs from (an editable install or a checkout).
DEFAULT_CRD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"

_ROOT_KEPT = ("apiVersion", "kind", "metadata")


def load_crd_schemas(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """`plural.group` -> the openAPIV3Schema of the stored version, from CRD manifests."""
    schemas: dict[str, dict[str, Any]] = {}
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec.get("versions") or ():
                if version.get("storage"):
                    schema = (version.get("schema") or {}).get("openAPIV3Schema")
                    if schema:
                        schemas[f"{spec['names']['plural']}.{spec['group']}"] = schema
    return schemas


def crd_files(folder: Path | None = None) -> list[Path]:
    folder = DEFAULT_CRD_DIR if folder is None else Path(folder)
    if not folder.is_dir():
        log.warning("no CRD folder at %s: custom resources are stored without pruning or defaults", folder)
        return []
    return sorted(folder.glob("*.yaml"))


def _prune(value: Any, schema: dict[str, Any] | None, preserve: bool, root: bool = False) -> Any:
    if schema is None:
        return value  # below a preserved field with no schema: kept as sent
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields", preserve))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        embedded = root or schema.get("x-kubernetes-embedded-resource")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if embedded and key in _ROOT_KEPT:
                out[key] = item
            elif key in props:
                out[key] = _prune(item, props[key], preserve)
            elif isinstance(extra, dict):
                out[key] = _prune(item, extra, preserve)
            elif preserve or extra is True:
                out[key] = item
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [_prune(v, items, preserve) for v in value]
        return value
    return value


def _default(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = dict(value)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        for key, item in out.items():
            sub = props.get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if sub is not None and isinstance(item, (dict, list)):
                out[key] = _default(item, sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_default(v, schema["items"]) if isinstance(v, (dict, list)) else v for v in value]
    return value


def prune_and_default(obj: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """What a real server stores of `obj` under `schema`: undeclared fields dropped, defaults filled."""
    pruned = _prune(obj, schema, False, root=True)
    result = _default(pruned, schema)
    return result  # type: ignore[no-any-return]


__all__ = ["DEFAULT_CRD_DIR", "crd_files", "load_crd_schemas", "prune_and_default"]
