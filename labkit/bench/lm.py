"""Lesson 13's generation, for the lab report that comes after it (``bench/lab_lm``), and the
rate of a pool while all its workers are at work.

Lesson 13 writes a KV-cached forward pass (:func:`forward_cached`), greedy and sampled token
choice (:func:`_choose`) and a generator over a batch of left-padded prompts (:func:`generate`) in
its cells, where the learner reads them; these are copies of those cells, and a test holds each
copy to the lesson's (the same tokens, greedy and sampled, padded, and past the context).
:func:`all_busy_rate` reads a pool's steady state from its workers' own spans.

Used in: lab_lm.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F

END = 0  # the byte that ends a document and pads a prompt on its left (lesson 13's tokenizer)


@torch.no_grad()
def forward_cached(model, tokens, cache, *, start, pad):
    """Run `tokens` (batch, s) at positions start.. on `model`, appending to `cache` (a list of
    (keys, values) per layer); rows are left-padded by `pad`. Returns the last position's logits."""
    b, s = tokens.shape
    dev = tokens.device
    here = torch.arange(start, start + s, device=dev)
    h = model.embed(tokens) + model.pos((here[None] - pad[:, None]).clamp(min=0))
    keys = torch.arange(start + s, device=dev)
    sees = (keys[None, None] <= here[None, :, None]) & (keys[None, None] >= pad[:, None, None])
    sees |= keys[None, None] == here[None, :, None]  # a padding position sees itself (no NaN)
    for i, blk in enumerate(model.blocks):
        d = h.shape[-1]
        q, k, v = blk.qkv(blk.ln1(h)).view(b, s, 3, blk.heads, d // blk.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if len(cache) > i:  # decode: the new keys and values join the cached ones
            k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i] = (k, v)
        else:
            cache.append((k, v))
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=sees[:, None])
        h = h + blk.proj(att.transpose(1, 2).reshape(b, s, d))
        h = h + blk.out(F.gelu(blk.fc(blk.ln2(h)), approximate="tanh"))
    return model.head(model.norm(h[:, -1]))


def _choose(logits, temperatures, top_ks, *, gen):
    """The next token of each row: greedy where its temperature is 0, else sampled."""
    out = logits.argmax(-1)
    for r, (t, k) in enumerate(zip(temperatures, top_ks)):
        if t > 0:
            row = logits[r] / t
            if k:
                row = row.masked_fill(row < row.topk(k).values[-1], float("-inf"))
            out[r] = torch.multinomial(row.softmax(-1), 1, generator=gen)[0]
    return out


@torch.no_grad()
def generate(model, prompts, max_new, *, temperatures=None, top_ks=None, seed=0):
    """Yield the next token of every prompt (a tensor), max_new times, with a KV cache. When the
    context is full, the last half of each row is prefilled again (a new cache) and it goes on."""
    dev, ctx = next(model.parameters()).device, model.pos.num_embeddings
    rows = [[int(t) for t in q] for q in prompts]
    temperatures = temperatures or [0.0] * len(rows)
    top_ks = top_ks or [0] * len(rows)
    gen = torch.Generator(device=dev).manual_seed(seed)

    def prefill(rows):
        n = max(len(r) for r in rows)
        pad = torch.tensor([n - len(r) for r in rows], device=dev)
        tokens = torch.tensor([[END] * (n - len(r)) + r for r in rows], device=dev)
        cache = []
        return forward_cached(model, tokens, cache, start=0, pad=pad), cache, n, pad

    logits, cache, pos, pad = prefill(rows)
    for step in range(max_new):
        nxt = _choose(logits, temperatures, top_ks, gen=gen)
        yield nxt
        if step + 1 == max_new:
            break
        for row, t in zip(rows, nxt.tolist()):
            row.append(t)
        if pos == ctx:  # the context is full: keep the last half of each row
            logits, cache, pos, pad = prefill([r[-(ctx // 2) :] for r in rows])
        else:
            logits = forward_cached(model, nxt[:, None], cache, start=pos, pad=pad)
            pos += 1


def all_busy_rate(spans: Iterable[tuple[Any, float, float, float]]) -> tuple[float, float] | None:
    """The rate while every worker of a pool was at work: ``spans`` are ``(worker, start, end,
    amount)`` for each piece of work, in the workers' wall-clock seconds. The window runs from the
    last worker's first start to the first worker's last end, so it leaves out the pool's start-up
    and its tail, and keeps the gaps between pieces (the work around them); a span counts the
    share of its amount that falls in the window. Returns ``(amount per second, window
    seconds)``, or None when the workers were never all at work at once. The spans come from each
    worker's own clock: across nodes, their skew shifts the window."""
    firsts: dict[Any, float] = {}
    lasts: dict[Any, float] = {}
    kept = []
    for worker, start, end, amount in spans:
        if end < start:
            raise ValueError(f"a span of {worker!r} ends ({end}) before it starts ({start})")
        firsts[worker] = min(firsts.get(worker, start), start)
        lasts[worker] = max(lasts.get(worker, end), end)
        kept.append((start, end, amount))
    if not kept:
        return None
    lo, hi = max(firsts.values()), min(lasts.values())
    if hi <= lo:
        return None
    inside = sum(
        a * (min(e, hi) - max(s, lo)) / (e - s) if e > s else a * (lo <= s <= hi)
        for s, e, a in kept
        if e >= lo and s <= hi
    )
    return inside / (hi - lo), hi - lo


def idle_gaps(spans: Iterable[tuple[Any, float, float, float]]) -> list[float]:
    """The seconds each worker waited between the end of one piece of work and the start of its
    next (``spans`` as for :func:`all_busy_rate`; pieces that share a worker, start and end are
    one piece: the rows of one batch)."""
    pieces: dict[Any, set[tuple[float, float]]] = {}
    for worker, start, end, _ in spans:
        pieces.setdefault(worker, set()).add((start, end))
    out = []
    for done in pieces.values():
        ordered = sorted(done)
        latest = ordered[0][1]  # the latest end so far: pieces that overlap leave no gap
        for start, end in ordered[1:]:
            out.append(max(0.0, start - latest))
            latest = max(latest, end)
    return out
