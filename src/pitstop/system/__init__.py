"""``pitstop system``: the OS settings a training machine wants — shown, applied with
consent, reverted exactly.

Modules: :mod:`~pitstop.system.settings` (the table: read, wanted value, why, changes),
:mod:`~pitstop.system.machine` (mounts, container, GPUs, tools),
:mod:`~pitstop.system.actions` (file writes and commands),
:mod:`~pitstop.system.state` (the saved previous values),
:mod:`~pitstop.system.apply` (apply with rollback, revert),
:mod:`~pitstop.system.command` (the CLI), :mod:`~pitstop.system.codes` (SY### docs).
"""
