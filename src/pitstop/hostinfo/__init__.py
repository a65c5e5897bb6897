"""Host facts that ``pitstop doctor`` and ``pitstop system`` both read, read one way.

The doctor diagnoses settings that ``pitstop system`` changes (mounts, ``/dev/shm``,
transparent hugepages, the container it runs in), so both go through the same
readers here and cannot disagree about what the machine is:

* :mod:`~pitstop.hostinfo.mounts`: ``/proc/self/mountinfo`` and the mount that holds
  a path;
* :mod:`~pitstop.hostinfo.kernel_text`: the small text formats of procfs and sysfs
  (``/proc/meminfo``, ``[selected]`` menus, tmpfs ``size=`` options);
* :mod:`~pitstop.hostinfo.container`: whether this is a container, and which, and the
  environment of the process looked at.

Everything reads through a :class:`~pitstop.sysroot.Sysroot` and never writes.
"""
