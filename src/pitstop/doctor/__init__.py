"""``pitstop doctor``: every environment cause of slow training, found in under a second.

Two halves joined by one JSON document, the *facts*:

* :mod:`pitstop.doctor.facts` runs the probes (:mod:`pitstop.doctor.probes`), each
  isolated, and returns a JSON-able facts document with a schema version;
* :mod:`pitstop.doctor.checks` holds pure functions of that document, each returning
  ``ok`` / ``warning`` / ``problem`` / ``unknown`` with evidence and a remedy.

``pitstop doctor --collect`` stops after the first half; ``--from FILE`` runs only the
second, so facts collected on a cluster node can be diagnosed anywhere.
"""
