"""Samplers of GPU (NVML) and host (psutil) state, shared by doctor, profile and monitor."""
