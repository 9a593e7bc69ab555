from pathlib import Path

import nbformat
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


LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "07_train_ddp_amp.ipynb"


def _lesson_function(name: str):
    """The function lesson 07 defines in its cell, run from the notebook's own source: a change
    to the lesson's AMP step is what these tests see."""
    cell = next(
        c.source
        for c in nbformat.read(LESSON, as_version=4).cells
        if c.cell_type == "code" and f"def {name}(" in c.source
    )
    namespace = {"torch": torch}
    exec(compile(cell, f"07:{name}", "exec"), namespace)
    return namespace[name]


make_step = _lesson_function("make_amp_step")


def test_dtype_choice_on_cpu():
    assert amp.amp_dtype(CPU) == torch.bfloat16
    assert amp.cpu_has_bf16() == (
        "avx512_bf16" in Path("/proc/cpuinfo").read_text()
        or "amx_bf16" in Path("/proc/cpuinfo").read_text()
    )
    assert amp.peak_flops(CPU) is None


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_steps_train(dtype):
    model, opt, x, y = _setup()
    step = make_step(model, opt, nn.functional.cross_entropy, device=CPU, dtype=dtype)
    losses = [step(x, y) for _ in range(30)]
    assert losses[-1] < losses[0]


def test_bf16_halves_activations_and_adds_weight_copies():
    model, opt, x, y = _setup()
    fp32 = amp.saved_tensor_bytes(
        model, nn.functional.cross_entropy, x=x, y=y, device=CPU, dtype=None
    )
    bf16 = amp.saved_tensor_bytes(
        model, nn.functional.cross_entropy, x=x, y=y, device=CPU, dtype=torch.bfloat16
    )
    assert 0 < bf16["activations"] < fp32["activations"]
    assert fp32["weight_copies"] == 0
    # Backward keeps the bf16 copies of the weights whose inputs need a gradient: the 2nd and
    # 3rd layers (the 1st layer's input is data). 2 bytes an element.
    assert bf16["weight_copies"] == 2 * (64 * 64 + 4 * 64)


def _lm():
    torch.manual_seed(0)
    lm = models.GPT(vocab=64, d_model=32, heads=4, layers=2, seq_len=16)
    toks = torch.randint(0, 64, (4, 17))

    def loss_fn(logits, y):
        return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())

    return lm, loss_fn, toks[:, :-1], toks[:, 1:]


def test_measure_config_reports_a_consistent_row():
    rows = {
        dt: amp.measure_config(_lm, CPU, dt, make_step=make_step, steps=2, warmup=1)
        for dt in (None, torch.bfloat16)
    }
    fp32, bf16 = rows[None], rows[torch.bfloat16]
    params = list(_lm()[0].parameters())
    weights, tensors = sum(p.numel() for p in params), len(params)
    for row in rows.values():
        assert row["s_per_step"] > 0 and row["peak_bytes"] is None and row["mfu"] is None
        assert row["leaked_bytes"] == 0
        assert row["tokens_per_s"] == pytest.approx(4 * 16 / row["s_per_step"])
        # weights, grads and two Adam moments in fp32, plus Adam's step counter per tensor
        assert row["state_bytes"] == 4 * weights * 4 + 4 * tensors
        assert row["footprint"] == row["state_bytes"] + row["activations"] + row["weight_copies"]
    assert fp32["flops_per_step"] == bf16["flops_per_step"] > 0  # FLOPs do not depend on dtype
    assert bf16["weight_copies"] > 0 == fp32["weight_copies"]
    assert bf16["activations"] < fp32["activations"]
    assert torch.get_float32_matmul_precision() == "highest"  # TF32 switched back off


def test_state_bytes_counts_params_grads_and_adam():
    model, opt, x, y = _setup()
    n = sum(p.numel() for p in model.parameters())
    assert amp.state_bytes(model, opt) == 4 * n
    make_step(model, opt, nn.functional.cross_entropy, device=CPU, dtype=None)(x, y)
    assert amp.state_bytes(model, opt) == 4 * n * 4 + 4 * len(
        opt.state
    )  # grads + exp_avg(+sq) + steps


def test_measure_steps_and_flops():
    model, opt, x, y = _setup()
    step = make_step(model, opt, nn.functional.cross_entropy, device=CPU, dtype=None)
    assert amp.measure_steps(step, [(x, y)] * 4, CPU, warmup=1) > 0
    with pytest.raises(ValueError):
        amp.measure_steps(step, [(x, y)], CPU, warmup=2)
    flops = amp.flops_per_step(model, nn.functional.cross_entropy, x=x, y=y)
    forward = 2 * 64 * (32 * 64 + 64 * 64 + 64 * 4)  # multiply-adds of the three layers
    assert 2 * forward <= flops <= 3 * forward  # forward + weight grads (+ input grads)


def test_bigger_models_run():
    assert models.ResNetSmall(3, 10, width=8, blocks=1)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    lm = models.GPT(vocab=50, d_model=32, heads=2, layers=1, seq_len=16)
    assert lm(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 50)
    with pytest.raises(ValueError, match="multiple of heads"):
        models.GPT(d_model=30, heads=4)


def test_gpt_is_causal():
    torch.manual_seed(0)
    lm = models.GPT(vocab=20, d_model=16, heads=2, layers=1, seq_len=8).eval()
    a = torch.randint(0, 20, (1, 8))
    b = a.clone()
    b[0, 5:] = (b[0, 5:] + 1) % 20  # change only the future of position 4
    with torch.no_grad():
        assert torch.allclose(lm(a)[0, :5], lm(b)[0, :5], atol=1e-6)
        assert not torch.allclose(lm(a)[0, 5:], lm(b)[0, 5:])


def test_attention_flops_match_the_flop_counter():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    b, h, t, hd = 2, 4, 16, 8
    q, k, v = (torch.randn(b, h, t, hd, requires_grad=True) for _ in range(3))
    # The CPU's fused kernel is not in flop_counter's table; the math kernel's matmuls are, and
    # are counted as the GPU's flash/efficient kernels are (without the causal half).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert counter.get_total_flops() == amp.attention_flops(b, t, h * hd, layers=1)


@pytest.mark.parametrize(
    "flags, native",
    [("fpu avx512f avx512_bf16", True), ("fpu amx_bf16", True), ("fpu avx2", False)],
)
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, flags, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert amp.cpu_has_bf16(str(cpuinfo)) is native
    assert amp.cpu_has_bf16(str(tmp_path / "missing")) is False


@pytest.mark.parametrize("dtype", [None, torch.bfloat16, torch.float16])
def test_the_kits_copy_of_the_step_trains_as_the_lessons_does(dtype):
    """labkit.amp.make_step (what lab_amp runs) is lesson 07's make_amp_step: from the same
    seed, the same losses and the same weights after each step, in every precision."""
    runs = []
    for make in (make_step, amp.make_step):
        model, opt, x, y = _setup()
        step = make(model, opt, nn.functional.cross_entropy, device=CPU, dtype=dtype)
        runs.append(
            ([step(x, y) for _ in range(5)], [p.detach().clone() for p in model.parameters()])
        )
    (lesson_losses, lesson_params), (kit_losses, kit_params) = runs
    assert lesson_losses == kit_losses
    assert all(torch.equal(a, b) for a, b in zip(lesson_params, kit_params))


def test_workloads_are_seeded_and_shaped():
    shape = dict(vocab=64, d_model=32, heads=4, layers=1, seq_len=16, batch_size=3)
    net, loss_fn, x, y = amp.workload("gpt", shape, seed=1)
    assert x.shape == y.shape == (3, 16) and torch.equal(x[:, 1:], y[:, :-1])  # shifted by one
    assert loss_fn(net(x), y).ndim == 0
    again = amp.workload("gpt", shape, seed=1)
    assert torch.equal(again[2], x)
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), again[0].parameters()))
    net, loss_fn, x, y = amp.workload("cnn", shape, seed=1)
    assert x.shape == (64, 3, 32, 32) and net(x[:2]).shape == (2, 10)
    with pytest.raises(ValueError, match="'gpt', 'cnn', 'resnet'"):
        amp.workload("bert", shape, seed=1)
