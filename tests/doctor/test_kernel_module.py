"""The NVIDIA kernel module for the running kernel (DR009): the probe on real trees, and
each cause with its fix, and DR001/DR007 quoting it."""

from __future__ import annotations

from pathlib import Path

import pytest
from doctor_helpers import load_generator
from test_checks import one

from pitstop.doctor.checks.kernel_module import kernel_flavour, module_cause
from pitstop.doctor.probes import ProbeContext, kmod
from pitstop.sysroot import Sysroot

gen = load_generator()
parts = gen  # make_machines re-exports the parts it builds machines from


def probe(root: Path) -> dict:
    return kmod.probe(ProbeContext(sysroot=Sysroot.of(root), data_path="/", environ={}))


@pytest.mark.parametrize(("name", "main"), [
    ("nvidia.ko", True), ("nvidia-current.ko.xz", True), ("nvidia-current-open.ko.zst", True),
    ("nvidia.ko.gz", True), ("nvidia-uvm.ko", False), ("nvidia_drm.ko", False),
    ("nvidia-current-modeset.ko.xz", False), ("nvidia-peermem.ko", False),
    ("nvidia-fs.ko", False), ("nouveau.ko.xz", False), ("nvidia.o", False),
    ("nvidiafb.ko.xz", False), ("nvidia-wmi-ec-backlight.ko.xz", False),
    ("nvidia-tesla-535.ko", True),
])
def test_main_module_file_names(name: str, main: bool) -> None:
    assert kmod.is_main_module(name) is main


def test_probe_reads_dkms_modules_headers_and_secure_boot(tmp_path: Path) -> None:
    t = parts.Tree(tmp_path)
    t.file("/proc/sys/kernel/osrelease", "6.1.0-37-amd64")
    gen.debian_driver_on_disk(t, debian="12", driver="535.247.01", built_for=("6.1.0-35-amd64",),
                              kernels=("6.1.0-35-amd64", "6.1.0-37-amd64"),
                              headers=("6.1.0-35-amd64",))
    parts.efi(t, secure_boot=True, enrolled=[parts.DKMS_KEY_DER], lockdown="integrity")
    nm = probe(tmp_path)
    assert nm["running_kernel"] == "6.1.0-37-amd64"
    assert nm["kernels"]["6.1.0-35-amd64"] == {
        "nvidia_modules": ["updates/dkms/nvidia-current.ko"], "headers": True}
    assert nm["kernels"]["6.1.0-37-amd64"] == {"nvidia_modules": [], "headers": False}
    assert nm["dkms"] == [{"module": "nvidia-current", "version": "535.247.01",
                           "built_for": ["6.1.0-35-amd64"], "installed_for": ["6.1.0-35-amd64"],
                           "source": True}]
    sb = nm["secure_boot"]
    assert sb["enabled"] is True and sb["lockdown"] == "integrity" and sb["sig_enforce"] is True
    assert sb["signing_keys"] == [{"path": "/var/lib/dkms/mok.pub", "enrolled": True}]


def test_modules_dep_finds_a_module_in_any_directory(tmp_path: Path) -> None:
    t = parts.Tree(tmp_path)
    t.file("/proc/sys/kernel/osrelease", "5.14.0-427.el9.x86_64")
    t.file("/lib/modules/5.14.0-427.el9.x86_64/modules.dep",
           "kernel/fs/ext4/ext4.ko.xz: kernel/fs/jbd2/jbd2.ko.xz\n"
           "kernel/drivers/video/fbdev/nvidia/nvidiafb.ko.xz: kernel/drivers/video/vgastate.ko\n"
           "/lib/modules/5.14.0-427.el9.x86_64/weak-updates/nvidia/nvidia.ko: drm.ko\n")
    nm = probe(tmp_path)
    assert nm["kernels"]["5.14.0-427.el9.x86_64"]["nvidia_modules"] == [
        "weak-updates/nvidia/nvidia.ko"]


def test_legacy_bios_has_no_secure_boot_and_containers_have_no_modules(tmp_path: Path) -> None:
    t = parts.Tree(tmp_path)
    t.file("/proc/sys/kernel/osrelease", "6.8.0-60-generic")
    nm = probe(tmp_path)
    assert nm["modules_dir"] is None and nm["kernels"] == {}
    assert nm["secure_boot"]["enabled"] is False and nm["secure_boot"]["efi"] is False


def test_kernel_upgrade_without_headers(facts_of) -> None:
    facts = facts_of("kernel-upgrade-dkms")
    r = one(facts, "DR009")
    assert r.status == "problem"
    assert "running kernel 6.1.0-37-amd64 (built for 6.1.0-35-amd64)" in r.summary
    assert "headers of 6.1.0-37-amd64 are not installed" in r.summary
    assert r.remedy is not None
    fix = r.remedy.text
    assert "sudo apt install linux-headers-$(uname -r)" in fix
    assert "sudo dkms autoinstall" in fix and "nvidia-kernel-dkms" in fix
    assert "linux-headers-amd64" in fix  # the metapackage that prevents the next one
    dr001 = one(facts, "DR001")
    assert dr001.status == "problem" and "DR009" in dr001.summary
    assert dr001.remedy is not None and dr001.remedy.text == fix
    dr007 = one(facts, "DR007")
    assert "Found no NVIDIA driver" in dr007.summary and "DR009" in dr007.summary
    assert dr007.remedy is not None and dr007.remedy.text == fix
    # With the headers there (the build failed for another reason) no headers line.
    facts["nvidia_module"]["kernels"]["6.1.0-37-amd64"]["headers"] = True
    r = one(facts, "DR009")
    assert "headers" not in r.summary
    assert r.remedy is not None and "linux-headers-$(uname -r)" not in r.remedy.text


def test_ubuntu_prebuilt_modules_name_the_linux_modules_package(facts_of) -> None:
    facts = facts_of("kernel-upgrade-dkms")
    facts["platform"].update(os_id="ubuntu", os_version_id="24.04")
    nm = facts["nvidia_module"]
    nm["dkms"] = []
    nm["running_kernel"] = "6.8.0-60-generic"
    nm["kernels"] = {"6.8.0-58-generic": {"nvidia_modules": ["kernel/nvidia-550/nvidia.ko"],
                                          "headers": False},
                     "6.8.0-60-generic": {"nvidia_modules": [], "headers": False}}
    r = one(facts, "DR009")
    assert r.remedy is not None
    assert "sudo apt install linux-modules-nvidia-550-$(uname -r)" in r.remedy.text
    assert "ubuntu-drivers install" in r.remedy.text
    # Headers do not bring a prebuilt module to the next kernel; its flavour's metapackage
    # does.
    assert "sudo apt install linux-modules-nvidia-550-generic" in r.remedy.text
    assert "linux-headers" not in r.remedy.text
    nm["kernels"]["6.8.0-58-generic"]["nvidia_modules"] = ["kernel/nvidia-570srv/nvidia.ko"]
    r = one(facts, "DR009")
    assert r.remedy is not None and "linux-modules-nvidia-570-server-$(uname -r)" in r.remedy.text
    assert "sudo apt install linux-modules-nvidia-570-server-generic" in r.remedy.text


def test_ubuntu_dkms(facts_of) -> None:
    facts = facts_of("kernel-upgrade-dkms")
    facts["platform"].update(os_id="ubuntu", os_version_id="22.04")
    facts["nvidia_module"]["dkms"] = [{"module": "nvidia", "version": "550.127.05",
                                       "built_for": ["6.1.0-35-amd64"], "installed_for": [],
                                       "source": True}]
    r = one(facts, "DR009")
    assert r.remedy is not None and "nvidia-dkms-550" in r.remedy.text


def test_secure_boot_refuses_the_module(facts_of) -> None:
    facts = facts_of("secure-boot-mok")
    r = one(facts, "DR009")
    assert r.status == "problem" and "Secure Boot is on" in r.summary
    assert r.remedy is not None
    assert "sudo mokutil --import /var/lib/dkms/mok.pub" in r.remedy.text
    assert r.evidence["signing_keys"] == ["/var/lib/dkms/mok.pub: NOT enrolled"]
    assert "Secure Boot" in one(facts, "DR001").summary
    # The key enrolled and the module still not loaded: not Secure Boot's doing.
    facts["nvidia_module"]["secure_boot"]["signing_keys"][0]["enrolled"] = True
    r = one(facts, "DR009")
    assert "Secure Boot" not in r.summary and r.remedy is not None
    assert "sudo modprobe nvidia" in r.remedy.text


def test_nouveau_loaded_first(facts_of) -> None:
    facts = facts_of("secure-boot-mok")
    facts["nvidia_module"]["secure_boot"]["enabled"] = False
    facts["kernel_modules"]["nouveau_loaded"] = True
    r = one(facts, "DR009")
    assert "nouveau" in r.summary and r.remedy is not None
    assert "update-initramfs -u" in r.remedy.text
    dr002 = one(facts, "DR002")
    assert dr002.remedy is not None and dr002.remedy.text == r.remedy.text


def test_when_dr009_does_not_apply(facts_of) -> None:
    assert one(facts_of("rtx4090-workstation"), "DR009").status == "ok"
    # nothing of the driver installed: DR001's install command is the fix
    nouveau = facts_of("nouveau")
    assert one(nouveau, "DR009").not_applicable and module_cause(nouveau) is None
    assert "nvidia-driver" in (one(nouveau, "DR001").remedy.text or "")
    # in a container the module is the host's
    pod = facts_of("k8s-pod-1of4")
    assert one(pod, "DR009").status == "ok"
    pod["kernel_modules"]["nvidia_loaded"] = False
    assert one(pod, "DR009").not_applicable
    assert one(facts_of("powersave"), "DR009").not_applicable


@pytest.mark.parametrize(("release", "flavour"), [
    ("6.1.0-37-amd64", "amd64"), ("6.1.0-37-cloud-amd64", "cloud-amd64"),
    ("6.12.38+deb13-amd64", "amd64"), ("6.8.0-60-generic", "generic"),
    ("6.8.0-1029-aws", "aws"), ("6.12.38", None),
])
def test_kernel_flavour(release: str, flavour: str | None) -> None:
    assert kernel_flavour(release) == flavour


def test_running_kernel_from_proc_version_and_the_older_efi_interface(tmp_path: Path) -> None:
    t = parts.Tree(tmp_path)
    t.file("/proc/version", "Linux version 6.1.0-37-amd64 (debian-kernel@lists.debian.org) "
           "(gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.1.140-1")
    t.bytes("/sys/firmware/efi/vars/SecureBoot-8be4df61-93ca-11d2-aa0d-e1f7a1d1a1c8/data",
            b"\x01")
    nm = probe(tmp_path)
    assert nm["running_kernel"] == "6.1.0-37-amd64"
    assert nm["secure_boot"]["enabled"] is True


def test_nouveau_loaded_after_an_upgrade_gets_the_module_fix(facts_of) -> None:
    facts = facts_of("kernel-upgrade-dkms")
    facts["kernel_modules"].update(nouveau_loaded=True, nouveau_blacklisted=False)
    r = one(facts, "DR002")
    assert r.status == "problem" and "not built for the running kernel" in r.summary
    assert r.remedy is not None
    assert "sudo dkms autoinstall" in r.remedy.text and "blacklist nouveau" in r.remedy.text


def _ubuntu_prebuilt(facts: dict) -> dict:
    """cloud-vm-ebs (Ubuntu, Canonical's prebuilt 550-server module for the running
    kernel) with the module not loaded."""
    facts["kernel_modules"]["nvidia_loaded"] = False
    return facts


def test_secure_boot_does_not_refuse_canonicals_signed_prebuilt_module(facts_of) -> None:
    # Ubuntu's linux-modules-nvidia-* are signed by Canonical, whose key the kernel
    # trusts: no MOK is needed, so Secure Boot is not the cause (and no DKMS key exists).
    facts = _ubuntu_prebuilt(facts_of("cloud-vm-ebs"))
    facts["nvidia_module"]["secure_boot"].update(enabled=True, signing_keys=[])
    r = one(facts, "DR009")
    assert r.status == "problem" and "Secure Boot" not in r.summary, r.summary
    assert r.remedy is not None and "mokutil" not in r.remedy.text
    assert "sudo modprobe nvidia" in r.remedy.text


def test_secure_boot_wording_follows_what_was_read(facts_of) -> None:
    facts = facts_of("secure-boot-mok")
    sb = facts["nvidia_module"]["secure_boot"]
    # The MOK list could not be read: enrolment is unknown, not "not enrolled".
    sb["signing_keys"][0]["enrolled"] = None
    r = one(facts, "DR009")
    assert "could not be read" in r.summary and "not enrolled" not in r.summary
    assert r.evidence["signing_keys"] == ["/var/lib/dkms/mok.pub: enrolment unknown"]
    # No signing key at all: the module may be unsigned; the fix makes one first.
    sb["signing_keys"] = []
    r = one(facts, "DR009")
    assert "no DKMS signing key was found" in r.summary
    assert r.remedy is not None
    lines = r.remedy.text.splitlines()
    assert lines[1].startswith("sudo apt install --reinstall nvidia-kernel-dkms")
    assert "sudo mokutil --import /var/lib/dkms/mok.pub" in r.remedy.text
    # On Ubuntu the key dkms signs with is shim-signed's.
    facts["platform"].update(os_id="ubuntu", os_version_id="24.04")
    r = one(facts, "DR009")
    assert r.remedy is not None
    assert "sudo mokutil --import /var/lib/shim-signed/mok/MOK.der" in r.remedy.text
    assert "nvidia-dkms-550" in r.remedy.text


def test_a_run_installer_module_is_rebuilt_with_the_installer(facts_of) -> None:
    # NVIDIA's .run installer (without --dkms) put nvidia.ko in kernel/drivers/video for
    # the old kernel; apt has no package to reinstall.
    facts = facts_of("kernel-upgrade-dkms")
    nm = facts["nvidia_module"]
    nm["dkms"] = []
    nm["kernels"]["6.1.0-35-amd64"]["nvidia_modules"] = ["kernel/drivers/video/nvidia.ko"]
    r = one(facts, "DR009")
    assert r.remedy is not None
    fix = r.remedy.text
    assert ".run --dkms" in fix and "nvidia-kernel-dkms" not in fix
    assert "linux-headers-$(uname -r)" in fix


def test_a_failed_dkms_build_points_at_its_log(tmp_path: Path, facts_of) -> None:
    # Headers installed, DKMS ran for the new kernel and left only its log (a driver too
    # old for the kernel): the log is the first thing to read, not "install the headers".
    t = parts.Tree(tmp_path)
    t.file("/proc/sys/kernel/osrelease", "6.1.0-37-amd64")
    gen.debian_driver_on_disk(t, debian="12", driver="535.247.01", built_for=("6.1.0-35-amd64",),
                              kernels=("6.1.0-35-amd64", "6.1.0-37-amd64"),
                              headers=("6.1.0-35-amd64", "6.1.0-37-amd64"))
    log = "/var/lib/dkms/nvidia-current/535.247.01/6.1.0-37-amd64/x86_64/log/make.log"
    t.file(log, "error: implicit declaration of function 'drm_fbdev_generic_setup'\n")
    nm = probe(tmp_path)
    assert nm["dkms"][0]["failed_for"] == {"6.1.0-37-amd64": log}
    facts = facts_of("kernel-upgrade-dkms")
    facts["nvidia_module"] = nm
    r = one(facts, "DR009")
    assert f"DKMS's build for 6.1.0-37-amd64 failed ({log})" in r.summary
    assert r.evidence["dkms_build_log"] == log
    assert r.remedy is not None and r.remedy.text.splitlines()[1].startswith(f"less {log}")
    assert "linux-headers-$(uname -r)" not in r.remedy.text


def test_ubuntu_hwe_kernels_get_the_hwe_metapackages(facts_of) -> None:
    # Ubuntu 22.04's GA kernel is 5.15; a 6.8 kernel there is HWE, and plain
    # linux-headers-generic would follow 5.15, not it.
    facts = facts_of("kernel-upgrade-dkms")
    facts["platform"].update(os_id="ubuntu", os_version_id="22.04")
    nm = facts["nvidia_module"]
    nm["running_kernel"] = "6.8.0-60-generic"
    nm["kernels"] = {"6.8.0-58-generic": {"nvidia_modules": ["updates/dkms/nvidia.ko"],
                                          "headers": True},
                     "6.8.0-60-generic": {"nvidia_modules": [], "headers": False}}
    r = one(facts, "DR009")
    assert r.remedy is not None
    assert "sudo apt install linux-headers-generic-hwe-22.04" in r.remedy.text
    nm["dkms"] = []
    nm["kernels"]["6.8.0-58-generic"]["nvidia_modules"] = ["kernel/nvidia-550/nvidia.ko"]
    r = one(facts, "DR009")
    assert r.remedy is not None
    assert "sudo apt install linux-modules-nvidia-550-generic-hwe-22.04" in r.remedy.text
    # The GA kernel of 24.04 is 6.8: plain generic there.
    facts["platform"]["os_version_id"] = "24.04"
    r = one(facts, "DR009")
    assert r.remedy is not None
    assert "sudo apt install linux-modules-nvidia-550-generic\n" in r.remedy.text + "\n"


def test_a_mok_list_split_over_several_variables(tmp_path: Path) -> None:
    # shim mirrors a MOK list too large for one variable into MokListRT, MokListRT1, ...:
    # a key in the second part is enrolled.
    t = parts.Tree(tmp_path)
    t.file("/proc/sys/kernel/osrelease", "6.1.0-37-amd64")
    gen.debian_driver_on_disk(t, debian="12", driver="535.247.01", built_for=("6.1.0-37-amd64",),
                              kernels=("6.1.0-37-amd64",), headers=("6.1.0-37-amd64",))
    parts.efi(t, secure_boot=True, enrolled=[parts.OTHER_CERT_DER], lockdown="integrity")
    attrs = (0x6).to_bytes(4, "little")
    t.bytes("/sys/firmware/efi/efivars/MokListRT1-605dab50-e046-4300-abb6-3dd810dd8b23",
            attrs + bytes(28) + bytes(16) + parts.DKMS_KEY_DER)  # a signature list
    keys = probe(tmp_path)["secure_boot"]["signing_keys"]
    assert keys == [{"path": "/var/lib/dkms/mok.pub", "enrolled": True}]
    # shim's config table, when there, holds the whole list.
    t.bytes("/sys/firmware/efi/mok-variables/MokListRT", parts.OTHER_CERT_DER)
    keys = probe(tmp_path)["secure_boot"]["signing_keys"]
    assert keys == [{"path": "/var/lib/dkms/mok.pub", "enrolled": False}]
