"""What checking a document against its schema costs next to parsing it.

    python benchmarks/bench_schema_validate.py [--rounds 5]

A monitor recording is one JSON document per sample (86 400 for a day at 1 s), each
checked by :func:`pitstop.schema.validate` against ``SNAPSHOT_SCHEMA`` when it is
replayed or plotted; ``doctor --from`` checks one facts document against
``FACTS_SCHEMA``. For each, in one process and interleaved round by round: microseconds
per document for ``json.loads``, for ``pitstop.schema.validate`` and for the
``jsonschema`` library's Draft 2020-12 validator on the same schema (the reference the
tests hold ``validate`` to). Prints the best round of each and the ratios.

The documents are real: one ``pitstop monitor --once --json`` snapshot of this machine
and the facts ``pitstop doctor --collect`` gathers here.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any


def _per_doc_us(fn: Callable[[], Any], docs: int, repeats: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / (repeats * docs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--docs", type=int, default=50, help="documents per timing")
    args = parser.parse_args()

    import jsonschema

    from pitstop.doctor.facts import collect
    from pitstop.doctor.probes import ProbeContext
    from pitstop.doctor.schema import FACTS_SCHEMA
    from pitstop.monitor.collector import Collector
    from pitstop.monitor.snapshot import SNAPSHOT_SCHEMA
    from pitstop.schema import validate
    from pitstop.sysroot import Sysroot

    snapshot = Collector(interval_s=1.0, window_s=30.0, follow=[], nvml=None, gpu=False,
                         rescan_s=0.0).once()
    facts = json.loads(json.dumps(collect(ProbeContext(
        sysroot=Sysroot.of(None), data_path="/", environ={})), default=str))
    for name, doc, schema in (("monitor snapshot", snapshot, SNAPSHOT_SCHEMA),
                              ("doctor facts", facts, FACTS_SCHEMA)):
        _compare(name, doc, schema, args.rounds, args.docs, jsonschema, validate)


def _compare(name: str, doc: Any, schema: Any, rounds: int, ndocs: int, jsonschema: Any,
             validate: Callable[[Any, Any], str | None]) -> None:
    text = json.dumps(doc)
    docs = [json.loads(text) for _ in range(ndocs)]
    reference = jsonschema.Draft202012Validator(schema)
    assert validate(doc, schema) is None and reference.is_valid(doc)
    runs: dict[str, list[float]] = {"json.loads": [], "pitstop.schema.validate": [],
                                    "jsonschema": []}
    for _ in range(rounds):
        runs["json.loads"].append(_per_doc_us(lambda: [json.loads(text) for _ in docs],
                                              ndocs, 3))
        runs["pitstop.schema.validate"].append(_per_doc_us(
            lambda: [validate(d, schema) for d in docs], ndocs, 3))
        runs["jsonschema"].append(_per_doc_us(lambda: [reference.is_valid(d) for d in docs],
                                              ndocs, 1))
    best = {k: min(v) for k, v in runs.items()}
    print(f"{name} ({len(text)} bytes of JSON): " + ", ".join(
        f"{k} {v:.0f} us" for k, v in best.items()))
    print(f"  validate / json.loads = {best['pitstop.schema.validate'] / best['json.loads']:.2f}; "
          f"jsonschema / validate = {best['jsonschema'] / best['pitstop.schema.validate']:.1f}")

if __name__ == "__main__":
    main()
