"""Worker for tests/training/test_distributed.py: a tiny synthetic task trained by ``attnlab.train.train``.

Run by torchrun (or started by hand with torchrun's environment variables)::

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/distributed_worker.py SPEC.json

SPEC is JSON: ``{"timeout_s": 60, "runs": [RUN, ...], "kill": [rank, call], "hang": [rank, call]}``
with RUN = ``{"train": {TrainConfig fields}, "dropout": 0.0, "resume": false}``. After each run
every rank writes ``out_dir/params_rank{r}.pt`` (its final parameters) and
``out_dir/saves_rank{r}.json`` (how many checkpoints it wrote). ``kill`` makes that rank SIGKILL
itself at its N-th loss computation; ``hang`` makes it sleep there instead.

Shape:
    TinyLM: ids (B, T) → logits (B, T, V); the loss is the mean over real next-token positions.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnlab import checkpoint, distributed
from attnlab.data.batching import bucket_batches
from attnlab.functional import padding_mask
from attnlab.layers import EncoderBlock
from attnlab.train import TrainConfig, train

VOCAB = 23


class TinyLM(nn.Module):
    """Embedding → two causal encoder blocks (one ModuleList: the FSDP units) → output projection.

    Shape:
        ids (B, T), mask (B, T) True at real tokens, labels (B, T) with -100 at ignored places.
    """

    def __init__(self, d_model: int = 16, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.blocks = nn.ModuleList(EncoderBlock(d_model, 2, 2 * d_model, dropout, norm="pre") for _ in range(2))
        self.out_proj = nn.Linear(d_model, VOCAB)

    def forward(self, ids, mask, labels):
        x = self.embed(ids)  # (B, T, D)
        for block in self.blocks:
            x = block(x, key_padding_mask=mask, is_causal=True).hidden  # (B, T, D)
        logits = self.out_proj(x)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)  # (B*T, V) vs (B*T,)


class NextTokenTask:
    """Arithmetic sequences of 3–11 tokens (random start and stride), length-bucketed into batches of at most 40 padded tokens."""

    metric = "loss"
    maximize = False

    def __init__(self, n: int = 48, seed: int = 0, kill=None, hang=None) -> None:
        g = torch.Generator().manual_seed(1234)
        lengths = torch.randint(3, 12, (n + 8,), generator=g).tolist()
        starts = torch.randint(0, VOCAB - 1, (n + 8,), generator=g).tolist()
        strides = torch.randint(1, 4, (n + 8,), generator=g).tolist()
        # Arithmetic sequences over the ids 1..VOCAB-1: learnable once two tokens are seen.
        seqs = [[1 + (a + i * d) % (VOCAB - 1) for i in range(L)] for L, a, d in zip(lengths, starts, strides)]
        self.train_seqs, self.valid_seqs = seqs[:n], seqs[n:]
        self.seed, self.kill, self.hang = seed, kill, hang
        self.calls = 0

    def batches(self, epoch: int, rank: int, world_size: int):
        lens = [len(s) for s in self.train_seqs]
        index = bucket_batches(lens, lens, max_tokens=40, seed=self.seed, epoch=epoch, rank=rank, world_size=world_size)
        return [collate([self.train_seqs[i] for i in b]) for b in index]

    def loss(self, model, batch):
        self.calls += 1
        rank = int(os.environ.get("RANK", "0"))
        if self.kill and rank == self.kill[0] and self.calls == self.kill[1]:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.hang and rank == self.hang[0] and self.calls == self.hang[1]:
            time.sleep(600)
        ids, mask, labels = batch
        return model(ids, mask, labels), int((labels != -100).sum())

    def evaluate(self, model):
        ids, mask, labels = collate(self.valid_seqs)
        return {"loss": float(model(ids, mask, labels))}

    def checkpoint_payload(self):
        return {"model_type": "tiny_next_token"}, {}


def collate(seqs):
    """Pad with 0; labels are the next token (-100 at the last real position and at padding)."""
    lengths = torch.tensor([len(s) for s in seqs])  # (B,)
    T = int(lengths.max())
    ids = torch.tensor([s + [0] * (T - len(s)) for s in seqs])  # (B, T)
    labels = torch.full_like(ids, -100)  # (B, T)
    for row, s in enumerate(seqs):
        labels[row, : len(s) - 1] = torch.tensor(s[1:])
    return ids, padding_mask(lengths, max_len=T), labels


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    ctx = distributed.init_distributed("cpu", timeout_s=spec.get("timeout_s", 60))
    saves = {"count": 0}
    real_save = checkpoint.save_checkpoint

    def counting_save(*args, **kwargs):
        saves["count"] += 1
        return real_save(*args, **kwargs)

    checkpoint.save_checkpoint = counting_save
    for run in spec["runs"]:
        saves["count"] = 0
        torch.manual_seed(0)
        model = TinyLM(dropout=run.get("dropout", 0.0))
        task = NextTokenTask(kill=spec.get("kill"), hang=spec.get("hang"))
        cfg = TrainConfig(**run["train"])
        train(model, task, cfg, resume=run.get("resume", False))
        out = Path(cfg.out_dir)
        torch.save(model.state_dict(), out / f"params_rank{ctx.rank}.pt")
        (out / f"saves_rank{ctx.rank}.json").write_text(json.dumps(saves))
    distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
