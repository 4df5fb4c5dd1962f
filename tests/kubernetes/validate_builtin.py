#!/usr/bin/env python3
"""Validates Kubernetes objects of built-in kinds with kubernetes-validate (PyPI), strict mode
(unknown fields are errors), against each requested Kubernetes version's OpenAPI schemas.

usage: validate_builtin.py OBJECTS.json VERSION...
OBJECTS.json is a JSON list of objects. Prints one line per object and version; exit 1 when any
object is invalid or has no schema.
"""
import json
import sys

import kubernetes_validate
from importlib.metadata import version as dist_version


def main() -> int:
    objects = json.load(open(sys.argv[1], encoding="utf-8"))
    versions = sys.argv[2:]
    failed = 0
    for v in versions:
        for obj in objects:
            name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
            try:
                used = kubernetes_validate.validate(obj, v, strict=True)
                print(f"ok   {name} against Kubernetes {used} (strict)")
            except Exception as e:  # ValidationError, SchemaNotFoundError, ...
                failed += 1
                print(f"FAIL {name} against Kubernetes {v}: {type(e).__name__}: {e}")
    print(
        f"kubernetes-validate {dist_version('kubernetes-validate')}: "
        f"{len(objects) * len(versions) - failed} of {len(objects) * len(versions)} valid "
        f"({len(objects)} objects x Kubernetes {', '.join(versions)})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
