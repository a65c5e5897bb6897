"""Samplers of GPU (NVML) and host (psutil) state, shared by doctor, profile and monitor.

- :mod:`pitstop.telemetry.nvml` — safe NVML access (snapshots for doctor)
- :mod:`pitstop.telemetry.gpu` — GPU timeline readings
- :mod:`pitstop.telemetry.host` — per-core CPU, iowait, disk reads, process trees
- :mod:`pitstop.telemetry.sampler` — the 10 Hz background sampler
"""
