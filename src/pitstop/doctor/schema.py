"""JSON Schemas: ``pitstop doctor --json`` output (for consumers and the tests) and the
facts document that ``doctor --from`` reads (:data:`FACTS_SCHEMA`, checked by
:func:`pitstop.schema.load_json` before any check sees the facts).

In the report, the facts sections are free-form per probe (each may be
``{"error": reason}``); the ``checks`` list is the stable contract.
"""

from __future__ import annotations

from typing import Any

from pitstop.doctor.facts import SCHEMA_VERSION

REMEDY: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["kind", "text"],
    "properties": {
        "kind": {"enum": ["shell", "code", "pitstop", "text"]},
        "text": {"type": "string", "minLength": 1},
        "note": {"type": "string"},
    },
}

CHECK: dict[str, Any] = {
    "type": "object",
    "required": ["code", "title", "layer", "status", "summary", "evidence", "remedy"],
    "properties": {
        "code": {"type": "string", "pattern": "^DR[0-9]{3}$"},
        "title": {"type": "string", "minLength": 1},
        "layer": {"enum": ["driver", "gpu", "storage", "cpu", "memory", "container",
                           "environment", "platform"]},
        "status": {"enum": ["ok", "warning", "problem", "unknown"]},
        "summary": {"type": "string", "minLength": 1},
        "evidence": {"type": "object"},
        "remedy": REMEDY,
        "subject": {"type": "string"},
        "not_applicable": {"type": "boolean"},
    },
    # a warning or problem always says what to do
    "if": {"properties": {"status": {"enum": ["warning", "problem"]}}},
    "then": {"properties": {"remedy": {"type": "object"}}},
}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pitstop doctor report",
    "type": "object",
    "required": ["schema_version", "facts", "checks"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "facts": {
            "type": "object",
            "required": ["schema_version", "meta"],
            "properties": {"schema_version": {"const": SCHEMA_VERSION},
                           "meta": {"type": "object"}},
            "additionalProperties": {"type": "object"},
        },
        "checks": {"type": "array", "items": CHECK, "minItems": 1},
        "summary": {"type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0}},
    },
}


# ---------------------------------------------------------------- facts (--from)
# What `doctor --from` accepts: the types of every field the checks and the report
# read, in each section as the probes write it. Sections and fields it does not name
# pass unchecked (a newer pitstop may add some); any section may be {"error": reason}
# (its probe failed), and an NVML value may be {"unavailable": reason}. A test keeps
# it in step with the probes: the facts collected here and from every recorded
# machine under tests/ must validate.

def _t(*kinds: str) -> dict[str, Any]:
    return {"type": list(kinds) if len(kinds) > 1 else kinds[0]}


STR, INT, NUM, BOOL = _t("string"), _t("integer"), _t("number"), _t("boolean")
OPT_STR, OPT_INT, OPT_NUM = _t("string", "null"), _t("integer", "null"), _t("number", "null")
OPT_BOOL = _t("boolean", "null")
COUNT = {"type": "integer", "minimum": 0}
OPT_COUNT = {"type": ["integer", "null"], "minimum": 0}
STRINGS: dict[str, Any] = {"type": "array", "items": STR}
STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": STR}
COUNT_MAP: dict[str, Any] = {"type": "object", "additionalProperties": COUNT}


def _section(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"error": STR, **props}}


def _list_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


def _entry(*required: str, **props: Any) -> dict[str, Any]:
    """An object in a list whose ``required`` fields the checks read without a default
    (the probes always write them): a facts file without one is refused at the edge,
    not met by a KeyError in a check."""
    return {**_section(**props), "required": list(required)}


def _nvml(kind: str, **extra: Any) -> dict[str, Any]:
    """An NVML value: the value, null, or {"unavailable": reason} and nothing else
    (``required`` and ``additionalProperties`` constrain only the object form)."""
    return {"type": [kind, "object", "null"], "properties": {"unavailable": STR},
            "required": ["unavailable"], "additionalProperties": False, **extra}


LINK = _section(current_gen=OPT_INT, current_width=OPT_INT, max_gen=OPT_INT,
                max_width=OPT_INT)

NVML_GPU = _section(
    index=INT, name=_nvml("string"), uuid=_nvml("string"), pci_bus_id=_nvml("string"),
    **{k: _nvml("integer") for k in (
        "clock_mem_max_mhz", "clock_mem_mhz", "clock_sm_max_mhz", "clock_sm_mhz",
        "clocks_event_reasons", "memory_total_bytes", "memory_used_bytes", "pcie_link_gen",
        "pcie_link_gen_device_max", "pcie_link_gen_max", "pcie_link_width",
        "pcie_link_width_max", "pcie_replay_counter", "pcie_rx_kbps", "pcie_tx_kbps",
        "temperature_c", "temperature_shutdown_c", "temperature_slowdown_c",
        "utilization_gpu_pct", "utilization_memory_pct")},
    **{k: _nvml("number") for k in ("power_default_limit_w", "power_draw_w", "power_limit_w",
                                     "power_max_limit_w")},
    persistence_mode=_nvml("boolean"),
    ecc_mode_current=_nvml("boolean"),
    compute_capability=_nvml("array", items=INT),
    remapped_rows=_nvml("array"),
    retired_pages_pending=_nvml("boolean"),
    processes=_nvml("array", items=_entry("pid", pid=INT, name=OPT_STR, type=OPT_STR,
                                          used_memory_bytes=_nvml("integer"))),
)

FACTS_SECTIONS: dict[str, dict[str, Any]] = {
    "meta": _section(pitstop_version=STR, collected_at=STR, hostname=OPT_STR, sysroot=OPT_STR,
                     data_path=OPT_STR, measure_io=BOOL, import_torch=BOOL,
                     probe_ms={"type": "object", "additionalProperties": NUM}),
    "platform": _section(kernel=OPT_STR, os_id=OPT_STR, os_version_id=OPT_STR,
                         os_codename=OPT_STR, os_pretty_name=OPT_STR, arch=OPT_STR,
                         virtual_machine=BOOL, hypervisor_cpu_flag=BOOL, dmi_vendor=OPT_STR,
                         dmi_product=OPT_STR),
    "pci": _section(nvidia_gpus=_list_of(_entry(
        "pci_address", pci_address=STR, device_id=STR, driver=OPT_STR, numa_node=OPT_INT, link=LINK,
        upstream_port=STR, upstream_link=LINK, **{"class": STR}))),
    "kernel_modules": _section(
        proc_modules_readable=BOOL, nvidia_loaded=BOOL, nouveau_loaded=BOOL, modules=STRINGS,
        proc_driver_version=OPT_STR, proc_driver_text=OPT_STR, nouveau_blacklisted=BOOL,
        dev_nodes=STRINGS, infiniband_devices=STRINGS),
    "nvidia_module": _section(
        running_kernel=OPT_STR, modules_dir=OPT_STR,
        kernels={"type": "object", "additionalProperties": _entry(
            "nvidia_modules", nvidia_modules=STRINGS, no_modules_dir=BOOL, headers=BOOL)},
        dkms=_list_of(_entry("module", "version", "built_for", module=STR, version=STR,
                             built_for=STRINGS, installed_for=STRINGS, source=BOOL,
                             failed_for=STRING_MAP)),
        secure_boot=_section(efi=BOOL, enabled=OPT_BOOL, lockdown=OPT_STR,
                             sig_enforce=OPT_BOOL, mok_list_readable=BOOL,
                             signing_keys=_list_of(_entry("path", path=STR,
                                                          enrolled=OPT_BOOL)))),
    "nvml": _section(
        available=BOOL, reason=STR, source=STR, self_pid=INT,
        system=_section(driver_version=_nvml("string"), cuda_driver_version=_nvml("string"),
                        nvml_version=_nvml("string"), device_count=_nvml("integer")),
        gpus=_list_of(NVML_GPU)),
    "python": _section(version=OPT_STR, implementation=OPT_STR, executable=OPT_STR,
                       glibc=OPT_STR, sys_path=STRINGS, cwd=OPT_STR, os_cpu_count=OPT_COUNT),
    "torch": _section(
        installed=BOOL, version=OPT_STR, cuda=OPT_STR, hip=OPT_STR, git_version=OPT_STR,
        location=OPT_STR, pins=STRING_MAP, cuda_libs=STRING_MAP, bundled_cudnn=STRINGS,
        bundled_nccl=STRINGS, import_error=STR,
        runtime=_section(version=OPT_STR, cuda=OPT_STR, cuda_available=BOOL,
                         cudnn_available=BOOL, cudnn_version=OPT_INT, cudnn_conv_ok=BOOL,
                         cuda_error=OPT_STR, cudnn_error=OPT_STR, device_count=COUNT,
                         import_s=NUM, num_threads=COUNT, num_interop_threads=COUNT,
                         nccl_version=_t("string", "integer", "array", "null"), nccl_error=STR,
                         import_error=STR)),
    "cpu": _section(
        online=COUNT, physical_cores=OPT_COUNT, cpufreq_present=BOOL, governors=STRING_MAP,
        governor_counts=COUNT_MAP, energy_preferences=COUNT_MAP, scaling_drivers=COUNT_MAP,
        max_freq_mhz=OPT_NUM, affinity=_list_of(INT),
        boost=_section(intel_no_turbo=OPT_INT, cpufreq_boost=OPT_INT,
                       per_policy_boost={"type": "object", "additionalProperties": OPT_INT}),
        cgroup=_section(version=OPT_INT, path=OPT_STR, quota_us=OPT_INT, period_us=OPT_INT,
                        cpus=OPT_NUM, limited_at=OPT_STR),
        numa_nodes={"type": "object", "additionalProperties": _list_of(INT)}),
    "memory": _section(
        mem_total_bytes=OPT_COUNT, mem_available_bytes=OPT_COUNT, swap_total_bytes=OPT_COUNT,
        swap_free_bytes=OPT_COUNT, swappiness=OPT_INT, thp_enabled=OPT_STR, thp_defrag=OPT_STR,
        shm=_section(mounted=BOOL, fstype=OPT_STR, size_option=OPT_STR, size_bytes=OPT_COUNT,
                     source=OPT_STR, free_bytes=OPT_COUNT, size_is_default_half_of_ram=BOOL),
        memlock=_section(soft_bytes=OPT_COUNT, hard_bytes=OPT_COUNT, unlimited=BOOL),
        cgroup=_section(version=OPT_INT, limit_bytes=OPT_COUNT, usage_bytes=OPT_COUNT)),
    "storage": _section(
        path=OPT_STR, mountpoint=OPT_STR, fstype=OPT_STR, source=OPT_STR,
        mount_options=OPT_STR, free_bytes=OPT_COUNT, total_bytes=OPT_COUNT,
        statvfs_error=STR,
        chain=_list_of(_entry("kind", kind=STR, name=OPT_STR, fstype=OPT_STR, source=OPT_STR,
                              dm_name=OPT_STR, backing_file=OPT_STR, read_ahead_kb=OPT_INT,
                              slaves=STRINGS)),
        disks=_list_of(_entry("name", name=STR, transport=OPT_STR, rotational=OPT_INT,
                              model=OPT_STR, vendor=OPT_STR, size_bytes=OPT_COUNT,
                              removable=OPT_INT, scheduler=OPT_STR, read_ahead_kb=OPT_INT,
                              sysfs_path=OPT_STR))),
    "io": _section(
        measured=BOOL, reason=STR, files_sampled=COUNT, bytes_sampled=COUNT, temp_file=BOOL,
        results=_list_of(_section(block_bytes=COUNT, reads=COUNT, seconds=NUM, iops=OPT_NUM,
                                  mb_per_s=OPT_NUM, o_direct=BOOL, queue_depth=COUNT))),
    "container": _section(in_container=BOOL, runtime=OPT_STR, signals=STRINGS,
                          kubernetes=BOOL),
    "environment": _section(variables=STRING_MAP),
}

FACTS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pitstop doctor facts (doctor --collect, read by doctor --from)",
    "type": "object",
    "required": ["schema_version"],
    "properties": {"schema_version": {"const": SCHEMA_VERSION}, **FACTS_SECTIONS},
    "additionalProperties": {"type": "object"},
}
