"""``pitstop monitor``: GPUs, host and training processes live, and why the GPU waits.

- :mod:`~pitstop.monitor.collector` — sources on their threads → a snapshot per interval
- :mod:`~pitstop.monitor.snapshot` — the snapshot's versioned JSON schema
- :mod:`~pitstop.monitor.diagnosis` — facts from a window of snapshots → profile's verdict
- :mod:`~pitstop.monitor.panels` — what the screen shows (rich renderables)
- :mod:`~pitstop.monitor.app` — the Textual screen (the only module that needs Textual)
- :mod:`~pitstop.monitor.feeds` — live or replayed snapshots for the screen
- :mod:`~pitstop.monitor.recording` — ``--record`` / ``--replay`` files (.jsonl, .csv)
- :mod:`~pitstop.monitor.plot` — ``pitstop plot``
- :mod:`~pitstop.monitor.prometheus` — ``--prometheus`` exporter
- :mod:`~pitstop.monitor.command` — the click commands

The samplers live in :mod:`pitstop.telemetry` (shared with ``pitstop profile``).
"""
