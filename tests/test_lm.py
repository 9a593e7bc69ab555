"""labkit.bench.lm (what bench/lab_lm runs) is lesson 13's generation: the functions the lesson
writes in its cells, run from the notebook's own source, give the same tokens as the kit's
copies; and a pool's rate while all its workers are at work."""

from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from labkit import models
from labkit.bench import lm

LESSON = Path(__file__).resolve().parents[1] / "notebooks" / "13_language_model.ipynb"
CELLS = ("lm-gen", "lm-choose", "lm-gen2")  # forward_cached, choose, generate


def _lesson_generate():
    cells = {c.id: c.source for c in nbformat.read(LESSON, as_version=4).cells}
    namespace = {"torch": torch, "F": F, "END": lm.END}
    for cell in CELLS:
        exec(compile(cells[cell], f"13:{cell}", "exec"), namespace)
    return namespace["generate"]


def _model(seq_len=24):
    torch.manual_seed(3)
    return models.GPT(256, d_model=32, heads=4, layers=2, seq_len=seq_len).eval()


def _tokens(gen, model, prompts, n, **kw):
    return torch.stack(list(gen(model, prompts, n, **kw)), 1).tolist()


@pytest.mark.parametrize(
    "prompts, n, kw",
    [
        ([list(b"def f(x):")], 10, {}),  # greedy, one prompt
        ([list(b"a"), list(b"class Foo:"), list(b"for i in")], 12, {}),  # left-padded batch
        ([list(b"while True:")], 40, {}),  # past the 24-token context: prefilled again
        ([list(b"if"), list(b"import os")], 20, dict(temperatures=[0.9, 0.0], top_ks=[5, 0])),
        ([list(b"x = 1")], 30, dict(temperatures=[1.2], top_ks=[0], seed=7)),  # sampled, past it
    ],
)
def test_the_kits_generation_gives_the_lessons_tokens(prompts, n, kw):
    model = _model()
    lesson = _tokens(_lesson_generate(), model, prompts, n, **kw)
    kit = _tokens(lm.generate, model, prompts, n, **kw)
    assert kit == lesson
    assert all(len(row) == n for row in kit)


def test_the_cache_gives_the_uncached_greedy_tokens():
    """What the lab report's outputs are checked against: greedy tokens with the cache are the
    whole-sequence forward pass's, so a broken copy fails here even if the lesson broke too."""
    model, prompt = _model(seq_len=64), list(b"return self.")
    seq = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(20):
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1)[:, None]], 1)
    assert _tokens(lm.generate, model, [prompt], 20)[0] == seq[0, len(prompt) :].tolist()


def test_all_busy_rate_counts_only_while_every_worker_works():
    # worker a works 0-10 s (5 pieces of 2 s, 10 units each); b starts at 4 s and ends at 8 s
    spans = [("a", t, t + 2, 10) for t in range(0, 10, 2)] + [("b", 4, 6, 30), ("b", 6, 8, 30)]
    rate, window = lm.all_busy_rate(spans)
    assert window == 4  # from b's first start (4) to b's last end (8)
    assert rate == (20 + 60) / 4  # a's two pieces inside, b's two
    half = [("a", 0, 4, 40), ("b", 2, 6, 40)]  # a's piece half inside the 2-4 s window
    assert lm.all_busy_rate(half) == ((20 + 20) / 2, 2)
    gap = [("a", 0, 1, 5), ("a", 3, 4, 5), ("b", 0, 4, 8)]  # a idle 1-3 s: the gap counts
    assert lm.all_busy_rate(gap) == ((10 + 8) / 4, 4)


def test_all_busy_rate_is_none_when_the_workers_never_overlap():
    assert lm.all_busy_rate([("a", 0, 1, 5), ("b", 2, 3, 5)]) is None
    assert lm.all_busy_rate([]) is None
    with pytest.raises(ValueError, match="ends"):
        lm.all_busy_rate([("a", 2, 1, 5)])


def test_idle_gaps_are_each_workers_waits_between_its_pieces():
    rows = [("a", 0, 1, 5), ("a", 0, 1, 5), ("a", 1.5, 2, 5), ("b", 0, 3, 5), ("b", 3.25, 4, 5)]
    assert sorted(lm.idle_gaps(rows)) == [0.25, 0.5]  # two rows of one batch are one piece
    assert lm.idle_gaps([("a", 0, 1, 5)]) == []
    assert lm.idle_gaps([("a", 0, 5, 1), ("a", 1, 2, 1), ("a", 6, 7, 1)]) == [0.0, 1.0]
