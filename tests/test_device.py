import pytest
import torch

from labkit import device, params
from labkit.device import DeviceError
from labkit.params import ParameterError

NO_CUDA = not torch.cuda.is_available()


def test_cpu_is_always_cpu():
    assert device.choose("cpu").type == "cpu"
    assert "cpu" in device.describe(device.choose("cpu"))


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_auto_falls_back_to_cpu_without_cuda():
    assert device.choose("auto").type == "cpu"
    assert device.real_gpu_count() == 0


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cuda_without_cuda_fails_clearly():
    with pytest.raises(DeviceError) as err:
        device.choose("cuda")
    msg = str(err.value)
    assert "DEVICE='cuda'" in msg and "DEVICE=auto" in msg and torch.__version__ in msg


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU")
def test_cuda_when_present():  # pragma: no cover - runs on GPU boxes only
    assert device.choose("cuda").type == "cuda"
    assert device.real_gpu_count() >= 1


def test_bad_device_name():
    with pytest.raises(ParameterError, match="auto, cpu, cuda"):
        device.choose("gpu")


def test_seed_everything_repeats_torch():
    params.seed_everything(5)
    a = torch.rand(3)
    params.seed_everything(5)
    assert torch.equal(a, torch.rand(3))


def test_nvidia_smi_missing_gives_empty(monkeypatch):
    monkeypatch.setattr(device.shutil, "which", lambda _name: None)
    assert device.nvidia_smi_gpus() == []


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("how", ["cell", "env"])
def test_setup_stops_every_notebook_on_cuda_without_cuda(how, monkeypatch, tmp_path):
    """DEVICE=cuda without CUDA fails in labkit.setup, before a notebook starts Ray."""
    import labkit

    monkeypatch.delenv("LABKIT_DEVICE", raising=False)
    kwargs = {"RESULTS_DIR": str(tmp_path)}
    if how == "cell":
        kwargs["DEVICE"] = "cuda"
    else:
        monkeypatch.setenv("LABKIT_DEVICE", "cuda")
    with pytest.raises(DeviceError, match="DEVICE='cuda' was asked for"):
        labkit.setup("01_remote_tasks", **kwargs)
    assert (
        labkit.setup("01_remote_tasks", DEVICE="auto", RESULTS_DIR=str(tmp_path)).device == "auto"
    )


@pytest.mark.ray
def test_a_logical_gpu_is_a_share_not_a_device():
    """What trials and replicas run on: a task given a logical GPU computes on the CPU."""
    import ray

    ray.init(address="local", num_cpus=1, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote(num_gpus=1, num_cpus=0)
        def where():
            return ray.get_gpu_ids(), str(device.in_worker())

        gpu_ids, dev = ray.get(where.remote())
        assert gpu_ids and dev == ("cuda" if device.real_gpu_count() else "cpu")
        assert str(device.in_worker()) == "cpu"  # the driver holds no GPU of Ray's
    finally:
        ray.shutdown()
