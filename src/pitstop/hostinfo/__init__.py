"""Host facts that ``pitstop doctor`` and ``pitstop system`` both read, read one way.

The doctor diagnoses settings that ``pitstop system`` changes (mounts, ``/dev/shm``,
transparent hugepages, the container it runs in), so both go through the same
readers here and cannot disagree about what the machine is:

* :mod:`~pitstop.hostinfo.mounts`: ``/proc/self/mountinfo`` and the mount that holds
  a path;
* :mod:`~pitstop.hostinfo.blockdev`: from a mount down to its disks (partitions,
  device-mapper, md, loop), and the readahead file that governs it;
* :mod:`~pitstop.hostinfo.cpu`: online CPUs, per-CPU cpufreq values, turbo switches;
* :mod:`~pitstop.hostinfo.cgroup`: this process's cgroup CPU quota and memory limit
  (also read by ``pitstop.train.loader`` to size DataLoader workers);
* :mod:`~pitstop.hostinfo.shm`: the size of ``/dev/shm``;
* :mod:`~pitstop.hostinfo.kernel_text`: the small text formats of procfs and sysfs
  (``/proc/meminfo``, ``[selected]`` menus, tmpfs ``size=`` options);
* :mod:`~pitstop.hostinfo.container`: whether this is a container, and which, and the
  environment of the process looked at;
* :mod:`~pitstop.hostinfo.targets`: the values training wants, judged by the doctor and
  set by ``pitstop system``;
* :mod:`~pitstop.hostinfo.recorded`: values a fake tree records because they are not
  files on a real machine (NVML, free space).

Everything reads through a :class:`~pitstop.sysroot.Sysroot` and never writes.
"""
