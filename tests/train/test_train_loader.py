"""loader(): computed settings, their sources, config files, DDP sampler, no orphans."""

from __future__ import annotations

import gc
import json
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist
from torch.utils.data import Dataset, IterableDataset, TensorDataset

from pitstop.hostinfo.cgroup import parse_cgroup2_cpu_max
from pitstop.sysroot import Sysroot
from pitstop.train import loader, loader_settings
from pitstop.train.loader import (
    MachineFacts,
    compute_settings,
    find_config,
    measure_sample_bytes,
    training_threads,
    usable_cpus,
    use_training_threads,
)

MiB = 2**20


def facts(cpus: int = 16, lws: int = 1, ram: int = 64 * 1024 * MiB, shm: int = 32 * 1024 * MiB) -> MachineFacts:
    return MachineFacts(cpus, f"{cpus} CPUs in this process's affinity mask", lws, ram, shm)


@pytest.fixture(autouse=True)
def no_config_around(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PITSTOP_LOADER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def dataset(n: int = 64, shape: tuple[int, ...] = (3, 8, 8)) -> TensorDataset:
    return TensorDataset(torch.randn(n, *shape), torch.arange(n))


# ---------------------------------------------------------------- the computation (pure)

def test_cuda_target_workers_leave_one_cpu_and_pin() -> None:
    s = compute_settings(facts(cpus=16), device=torch.device("cuda"), sample_bytes=1000,
                         sample_why="measured", batch_size=64)
    assert s["num_workers"][0] == 15
    assert s["pin_memory"][0] is True and s["persistent_workers"][0] is True
    assert s["prefetch_factor"][0] == 2
    assert s["num_workers"][1].startswith("computed: ")


def test_local_ranks_share_the_cpus() -> None:
    s = compute_settings(facts(cpus=16, lws=4), device=torch.device("cuda"), sample_bytes=1000,
                         sample_why="measured", batch_size=64)
    assert s["num_workers"][0] == 3
    assert "shared by 4 local ranks" in s["num_workers"][1]


def test_cpu_target_leaves_the_cores_to_compute_and_one_cpu_means_no_workers() -> None:
    s = compute_settings(facts(cpus=16), device=torch.device("cpu"), sample_bytes=10,
                         sample_why="measured", batch_size=8)
    assert s["num_workers"][0] == 4 and s["pin_memory"][0] is False
    one = compute_settings(facts(cpus=1), device=torch.device("cuda"), sample_bytes=10,
                           sample_why="measured", batch_size=8)
    assert one["num_workers"][0] == 0 and one["prefetch_factor"][0] is None
    assert one["persistent_workers"][0] is False


def test_training_threads_are_the_cpus_the_workers_leave_on_cpu_only() -> None:
    assert training_threads(4, device="cpu", facts=facts(cpus=16))[0] == 12
    assert training_threads(2, device="cpu", facts=facts(cpus=16, lws=2))[0] == 6
    assert training_threads(3, device="cpu", facts=facts(cpus=2))[0] == 1  # never below one
    none_without_workers, why = training_threads(0, device="cpu", facts=facts(cpus=2))
    assert none_without_workers is None and "no worker processes" in why
    on_gpu, why = training_threads(15, device=torch.device("cuda"), facts=facts(cpus=16))
    assert on_gpu is None and "cuda" in why


def test_loader_recommends_threads_but_changes_nothing_until_asked(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    dl = loader(dataset(), 8, shuffle=False, device="cpu", num_workers=1)
    try:
        assert torch.get_num_threads() == before  # loader() leaves global settings alone
        value, source = dl.pitstop_settings["torch_threads"]
        cpus = usable_cpus()[0]
        assert value == max(1, cpus - 1) and source.startswith("computed: ")
        assert len(list(dl)) == 8  # the entry is not passed on to DataLoader
        change = use_training_threads(dl)
        assert torch.get_num_threads() == value == change.value and change.before == before
    finally:
        torch.set_num_threads(before)
    no_workers = loader(dataset(), 8, shuffle=False, device="cpu", num_workers=0)
    assert no_workers.pitstop_settings["torch_threads"][0] is None
    change = use_training_threads(no_workers)
    assert change.value == change.before == torch.get_num_threads() == before
    forced = loader_settings(None, 8, device="cpu", num_workers=1, torch_threads=3)
    assert forced["torch_threads"] == (3, "override")


def test_small_shm_bounds_prefetch_then_workers() -> None:
    # 64 MiB /dev/shm (Docker's default): half of it is the budget for batches in flight.
    batch = 224 * 224 * 3 * 4 * 32  # 18.4 MiB float32 images, 32 per batch
    s = compute_settings(facts(cpus=4, shm=64 * MiB), device=torch.device("cuda"),
                         sample_bytes=batch // 32, sample_why="measured", batch_size=32)
    assert s["num_workers"][0] == 1  # 32 MiB budget holds one 18 MiB batch
    assert s["prefetch_factor"][0] == 1
    assert "/dev/shm" in s["num_workers"][1]
    tiny = compute_settings(facts(cpus=4, shm=16 * MiB), device=torch.device("cuda"),
                            sample_bytes=batch // 32, sample_why="measured", batch_size=32)
    assert tiny["num_workers"][0] == 0
    roomy = compute_settings(facts(cpus=4, shm=1024 * MiB), device=torch.device("cuda"),
                             sample_bytes=batch // 32, sample_why="measured", batch_size=32)
    assert roomy["num_workers"][0] == 3
    assert roomy["prefetch_factor"][0] * 3 * batch <= 512 * MiB
    assert roomy["prefetch_factor"][0] >= 2


def test_unmeasurable_sample_says_why() -> None:
    class Stream(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            yield torch.zeros(3)

    assert measure_sample_bytes(Stream()) == (None, "an IterableDataset cannot be sampled without consuming it")
    assert measure_sample_bytes(dataset(4, (3, 8, 8)))[0] == 3 * 8 * 8 * 4 + 8

    class Broken(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 3

        def __getitem__(self, i: int) -> torch.Tensor:
            raise OSError("disk gone")

    size, why = measure_sample_bytes(Broken())
    assert size is None and "disk gone" in why


# ---------------------------------------------------------------- CPUs from cgroups (fake trees)

def write(root: Path, rel: str, text: str) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_limits_cpus(tmp_path: Path) -> None:
    # Hand-made from the kernel's documented formats (cgroup-v2.rst: cpu.max;
    # proc(5): Cpus_allowed_list, /proc/self/cgroup "0::<path>").
    write(tmp_path, "/proc/self/status", "Name:\tpython\nCpus_allowed_list:\t0-63\n")
    write(tmp_path, "/proc/self/cgroup", "0::/kubepods/pod1/ctr\n")
    write(tmp_path, "/sys/fs/cgroup/kubepods/cpu.max", "800000 100000\n")
    write(tmp_path, "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "250000 100000\n")
    cpus, why = usable_cpus(Sysroot(tmp_path))
    assert cpus == 3 and "cgroup quota 2.5 CPUs" in why and "pod1/ctr/cpu.max" in why


def test_cgroup_v1_quota_and_no_quota(tmp_path: Path) -> None:
    write(tmp_path, "/proc/self/status", "Cpus_allowed_list:\t0-3,8-11\n")
    write(tmp_path, "/proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n")
    write(tmp_path, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    write(tmp_path, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    assert usable_cpus(Sysroot(tmp_path))[0] == 8
    write(tmp_path, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "200000\n")
    assert usable_cpus(Sysroot(tmp_path))[0] == 2
    assert parse_cgroup2_cpu_max("max 100000") is None
    assert parse_cgroup2_cpu_max("150000 100000") == 1.5


# ---------------------------------------------------------------- sources: config file, env, override

def test_every_setting_names_its_source(tmp_path: Path) -> None:
    s = loader_settings(dataset(), 16, device="cpu", shuffle=True, drop_last=True)
    assert s["drop_last"] == (True, "override")
    assert s["num_workers"][1].startswith("computed: ")
    assert s["sample_bytes"][0] == 3 * 8 * 8 * 4 + 8


def test_config_file_beats_computed_and_override_beats_config(tmp_path: Path) -> None:
    cfg = tmp_path / "tuned.json"
    cfg.write_text(json.dumps({"settings": {"num_workers": 3, "prefetch_factor": 5},
                               "measured": {"samples_per_s": 1234}}))
    s = loader_settings(dataset(), 16, device="cpu", config=cfg, prefetch_factor=2)
    assert s["num_workers"] == (3, f"config file {cfg}")
    assert s["prefetch_factor"] == (2, "override")


def test_config_found_by_env_then_by_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "pitstop-loader.json"
    local.write_text('{"num_workers": 1}')
    assert find_config(None) == local
    assert loader_settings(dataset(), 8, device="cpu")["num_workers"][1] == f"config file {local}"
    elsewhere = tmp_path / "env.json"
    elsewhere.write_text('{"num_workers": 2}')
    monkeypatch.setenv("PITSTOP_LOADER_CONFIG", str(elsewhere))
    assert loader_settings(dataset(), 8, device="cpu")["num_workers"] == (2, f"config file {elsewhere}")
    assert loader_settings(dataset(), 8, device="cpu", config=False)["num_workers"][1].startswith("computed")


def test_zero_workers_from_config_drops_worker_options(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text('{"num_workers": 0, "persistent_workers": true}')
    s = loader_settings(dataset(), 8, device="cpu", config=cfg)
    assert s["persistent_workers"][0] is False and s["prefetch_factor"][0] is None
    dl = loader(dataset(), 8, shuffle=False, device="cpu", config=cfg)
    assert len(list(dl)) == 8


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "is not valid JSON"),
    ('{"num_workrs": 2}', "unknown setting 'num_workrs'"),
    ('{"num_workers": -1}', "num_workers must be an integer >= 0"),
    ('{"pin_memory": "yes"}', "pin_memory must be true or false"),
    ("[1, 2]", "must hold a JSON object"),
])
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "bad.json"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=message):
        loader_settings(dataset(), 8, device="cpu", config=cfg)


def test_missing_config_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        loader_settings(dataset(), 8, device="cpu", config=tmp_path / "nope.json")
    monkeypatch.setenv("PITSTOP_LOADER_CONFIG", str(tmp_path / "nope.json"))
    with pytest.raises(ValueError, match=r"\$PITSTOP_LOADER_CONFIG=.*unset it"):
        loader_settings(dataset(), 8, device="cpu")


def test_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        loader(dataset(), 0, shuffle=False)


# ---------------------------------------------------------------- real loaders

def worker_children() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def test_worker_processes_are_gone_after_the_loader() -> None:
    before = {p.pid for p in worker_children()}
    dl = loader(dataset(64), 8, shuffle=True, device="cpu", num_workers=2)
    assert dl.persistent_workers and dl.num_workers == 2
    seen = sum(len(x) for x, _ in dl)
    seen += sum(len(x) for x, _ in dl)  # second epoch: the same (persistent) workers
    assert seen == 128
    workers = [p for p in worker_children() if p.pid not in before]
    assert len(workers) == 2
    del dl
    gc.collect()
    _gone, alive = psutil.wait_procs(workers, timeout=20)
    assert alive == [], f"orphaned loader workers: {[p.pid for p in alive]}"
    assert {p.pid for p in worker_children()} <= before


def test_distributed_sampler_shards_and_advances_epochs(tmp_path: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1,
                            timeout=timedelta(seconds=30))
    try:
        dl = loader(dataset(32), 4, shuffle=True, device="cpu", num_workers=0)
        assert "DistributedSampler(rank 0 of 1" in dl.pitstop_settings["sampler"][0]
        assert type(dl.sampler).__name__ == "DistributedSampler"
        first = torch.cat([y for _, y in dl]).tolist()
        second = torch.cat([y for _, y in dl]).tolist()
        assert sorted(first) == sorted(second) == list(range(32))
        assert first != second  # set_epoch was called: a new shuffle each epoch
        dl.set_epoch(0)
        assert torch.cat([y for _, y in dl]).tolist() == first
    finally:
        dist.destroy_process_group()


def test_iterable_dataset_and_describe() -> None:
    class Stream(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            for i in range(10):
                yield torch.tensor([float(i)])

    with pytest.raises(ValueError, match="shuffle=True with an IterableDataset"):
        loader(Stream(), 5, shuffle=True, device="cpu")
    dl = loader(Stream(), 5, shuffle=False, device="cpu", num_workers=0)
    assert [b.shape[0] for b in dl] == [5, 5]
    text = dl.describe()
    assert "num_workers" in text and "[override]" in text


def test_save_config_round_trips_through_the_loader(tmp_path: Path) -> None:
    from pitstop.train.loader import save_config

    path = save_config(tmp_path / "pitstop-loader.json", {"num_workers": 1, "prefetch_factor": 3},
                       measured={"samples_per_s": {"1x3": 812.5}})
    assert json.loads(path.read_text())["settings"] == {"num_workers": 1, "prefetch_factor": 3}
    dl = loader(dataset(), 8, shuffle=False, device="cpu")  # found in the working directory
    assert dl.num_workers == 1 and dl.prefetch_factor == 3
    assert dl.pitstop_settings["prefetch_factor"][1] == f"config file {path}"
    with pytest.raises(ValueError, match="num_workers must be an integer >= 0"):
        save_config(tmp_path / "x.json", {"num_workers": -2})
    assert not (tmp_path / "x.json").exists()


def test_user_samplers_are_respected(tmp_path: Path) -> None:
    from torch.utils.data import BatchSampler, SequentialSampler

    ds = dataset(12)
    dl = loader(ds, 4, shuffle=True, device="cpu", num_workers=0, sampler=SequentialSampler(ds))
    assert torch.cat([y for _, y in dl]).tolist() == list(range(12))
    (tmp_path / "pitstop-loader.json").write_text('{"drop_last": true, "num_workers": 0}')
    dl = loader(ds, 4, shuffle=False, device="cpu",
                batch_sampler=BatchSampler(SequentialSampler(ds), 5, drop_last=False))
    assert [len(y) for _, y in dl] == [5, 5, 2]
