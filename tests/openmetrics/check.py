"""Parses OpenMetrics with the strict parser of the Python client library
(prometheus_client.openmetrics.parser), from the files named or stdin.
Prints one line per family, "<type> <name> <samples>", and exits 1 with the
parser's complaint when the text is not valid OpenMetrics 1.0.

PYTHONPATH must hold prometheus_client (scripts/test.sh installs it into
.cache/python)."""

import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main():
    texts = [open(p, encoding="utf-8").read() for p in sys.argv[1:]] or [sys.stdin.read()]
    for text in texts:
        try:
            families = list(text_string_to_metric_families(text))
        except Exception as e:  # the parser raises ValueError and others
            print(f"invalid OpenMetrics: {type(e).__name__}: {e}")
            sys.exit(1)
        for f in families:
            print(f"{f.type} {f.name} {len(f.samples)}")


main()
