#!/usr/bin/env python3
"""`kustomize build DIR`, with the real kustomize (Go library sigs.k8s.io/kustomize/api) from the
PyPI wheel pykustomize, called through ctypes so that it runs on this machine's Python (the wheel's
own bindings ask for 3.14 and cffi).

usage: kustomize_build.py LIBPYKUSTOMIZE_SO DIR   -> the rendered YAML on stdout; exit 1 on error
       kustomize_build.py LIBPYKUSTOMIZE_SO --version
"""
import ctypes
import json
import sys


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1])
    lib.pykustomize_last_error.restype = ctypes.c_void_p
    lib.pykustomize_version_string.restype = ctypes.c_void_p
    lib.pykustomize_build.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    if sys.argv[2] == "--version":
        print(ctypes.string_at(lib.pykustomize_version_string()).decode())
        return 0
    # The defaults of `kustomize build`: files only from within the kustomization's root,
    # legacy ordering, no plugins, no helm.
    options = json.dumps(
        {
            "load_restrictions": 0,
            "reorder": "legacy",
            "add_managedby_label": False,
            "enable_plugins": False,
            "enable_helm": False,
            "helm_command": "",
        }
    ).encode()
    out = ctypes.c_void_p()
    if lib.pykustomize_build(sys.argv[2].encode(), options, ctypes.byref(out)) != 0:
        err = lib.pykustomize_last_error()
        print(ctypes.string_at(err).decode() if err else "kustomize build failed", file=sys.stderr)
        return 1
    sys.stdout.write(ctypes.string_at(out.value).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
