"""Small trained Transformers that the export tests (CTranslate2, HuggingFace) run through two engines.

An untrained model repeats one token and almost never ends, so it would not test how two engines
end hypotheses; these are trained for a few steps to copy their source (mapped into the target
vocabulary): they end at varied lengths and still make mistakes.
"""

from __future__ import annotations

import torch

from attnlab.data.tokenizers import CharTokenizer
from attnlab.models.transformer import Transformer, TransformerConfig

BOS, EOS = 2, 3
MAX_LEN = 16
TRAIN_STEPS = 60

SRC_TOK = CharTokenizer.train(["abcdefghijklmnopqrstuvwxyz .,"])
TGT_TOK = CharTokenizer.train(["0123456789+-"])  # a smaller, separate target vocabulary


def tiny_config(
    norm: str, activation: str, shared: bool, src_vocab: int, tgt_vocab: int, *, tie_output: bool = True, **extra
) -> TransformerConfig:
    """The export tests' model shape: 2 + 2 layers, D = 32, 4 heads, F = 64, no dropout (``extra``:
    any other TransformerConfig field, e.g. an attention variant an export must refuse)."""
    return TransformerConfig(
        src_vocab_size=src_vocab,
        tgt_vocab_size=tgt_vocab,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        norm=norm,
        activation=activation,
        share_embeddings=shared,
        tie_output=tie_output,
        max_len=64,
        **extra,
    )


def tiny(
    norm: str, activation: str, shared: bool, seed: int = 0, *, tie_output: bool = True
) -> tuple[Transformer, object, object]:
    """A 2-layer, D = 32 Transformer trained for :data:`TRAIN_STEPS` steps, with its tokenizers."""
    src_tok, tgt_tok = (SRC_TOK, SRC_TOK) if shared else (SRC_TOK, TGT_TOK)
    torch.manual_seed(seed)
    config = tiny_config(norm, activation, shared, src_tok.vocab_size, tgt_tok.vocab_size, tie_output=tie_output)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(TRAIN_STEPS):
        src = random_sources(src_tok, n=32, seed=1000 + step)
        targets = [copy_into(s, tgt_tok) for s in src]
        tgt_in = padded([[BOS] + t for t in targets])  # (B, T)
        labels = padded([t + [EOS] for t in targets])  # (B, T)
        loss = model(padded(src), tgt_in, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), src_tok, tgt_tok


def copy_into(source: list[int], tgt_tok) -> list[int]:
    """The copy task's target: each source id mapped into the target vocabulary."""
    first = tgt_tok.eos_id + 2  # past the special tokens (pad, unk, bos, eos, mask)
    return [first + (i - first) % (tgt_tok.vocab_size - first) for i in source]


def random_sources(src_tok, n: int = 40, seed: int = 1) -> list[list[int]]:
    """``n`` random sources of 1 to 11 ordinary tokens."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 12, (n,), generator=g)
    first = src_tok.eos_id + 2  # past the special tokens (pad, unk, bos, eos, mask)
    return [torch.randint(first, src_tok.vocab_size, (int(k),), generator=g).tolist() for k in lengths]


def padded(rows: list[list[int]]) -> torch.Tensor:
    """Right-padded with id 0. Shape: ``(B, max length)``."""
    out = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)  # pad id 0
    for row, s in enumerate(rows):
        out[row, : len(s)] = torch.tensor(s)
    return out  # (B, S)
