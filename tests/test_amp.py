import pytest
import torch
from torch import nn

from labkit import amp, models

CPU = torch.device("cpu")


def _setup():
    torch.manual_seed(0)
    model = models.MLP(32, 64, 4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    return model, opt, x, y


def test_dtype_choice_on_cpu():
    assert amp.amp_dtype(CPU) == torch.bfloat16
    assert isinstance(amp.cpu_has_bf16(), bool)
    assert amp.peak_flops(CPU) is None


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_steps_train(dtype):
    model, opt, x, y = _setup()
    step = amp.make_step(model, opt, nn.functional.cross_entropy, CPU, dtype)
    losses = [step(x, y) for _ in range(30)]
    assert losses[-1] < losses[0]


def test_bf16_saves_activation_bytes():
    model, opt, x, y = _setup()
    fp32 = amp.saved_activation_bytes(model, nn.functional.cross_entropy, x, y, CPU, None)
    bf16 = amp.saved_activation_bytes(model, nn.functional.cross_entropy, x, y, CPU, torch.bfloat16)
    assert 0 < bf16 < fp32


def test_state_bytes_counts_params_grads_and_adam():
    model, opt, x, y = _setup()
    n = sum(p.numel() for p in model.parameters())
    assert amp.state_bytes(model, opt) == 4 * n
    amp.make_step(model, opt, nn.functional.cross_entropy, CPU, None)(x, y)
    assert amp.state_bytes(model, opt) == 4 * n * 4 + 4 * len(
        opt.state
    )  # grads + exp_avg(+sq) + steps


def test_measure_steps_and_flops():
    model, opt, x, y = _setup()
    step = amp.make_step(model, opt, nn.functional.cross_entropy, CPU, None)
    assert amp.measure_steps(step, [(x, y)] * 4, CPU, warmup=1) > 0
    with pytest.raises(ValueError):
        amp.measure_steps(step, [(x, y)], CPU, warmup=2)
    flops = amp.flops_per_step(model, nn.functional.cross_entropy, x, y)
    forward = 2 * 64 * (32 * 64 + 64 * 64 + 64 * 4)  # multiply-adds of the three layers
    assert 2 * forward <= flops <= 3 * forward  # forward + weight grads (+ input grads)


def test_bigger_models_run():
    assert models.ResNetSmall(3, 10, width=8, blocks=1)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    lm = models.TinyTransformer(vocab=50, d_model=32, heads=2, layers=1, seq_len=16)
    assert lm(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 50)
