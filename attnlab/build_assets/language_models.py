"""The language models' builds: the character GPT on tinyshakespeare and the masked-LM BERT beside it.

Each trains with the ordinary command (``attnlab train lm``, ``attnlab train mlm``) and is judged
by its validation loss on the last 10% of the text, as its training validates; the model is
loaded through :func:`attnlab.loading.load_model` (family ``"lm"``: ``(model, tokenizer)``) in fp32.

Shape:
    no tensors cross this module's interface: folders and text in, scores and generated text out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.corpus import read_text
from ..loading import load_model, model_dir
from ..models.gpt import gpt_config
from ..recipes import TrainJob
from ..recipes import lm as lm_recipe
from .common import Evaluation, config_from, fast_check, run_nothing

__all__ = ["EXAMPLE_TOKENS", "TextLM", "ShakespeareMLM"]

EXAMPLE_TOKENS = 40  # continuation length of a generator's example outputs (the explorer's too)


@dataclass(frozen=True)
class TextLM:
    """A GPT trained by ``attnlab train lm --preset P`` on a text file (its last 10% validates)."""

    name: str  # the shipped name
    preset: str = "shakespeare-char"  # key of attnlab.recipes.lm.LM_PRESETS
    text: str = "tinyshakespeare/input.txt"  # the training text, under the data folder
    data: str = (
        "tinyshakespeare (1,115,394 characters of Shakespeare, as distributed with char-rnn): the first 90% "
        "trains, the last 10% validates"
    )
    licence: str = "public domain (the text); the text is not shipped"
    overrides: tuple[str, ...] = ()  # further key=value settings (the tests' tiny stand-ins)
    seed: int = 0  # the training's seed
    threads: int | None = None  # as `attnlab train lm` runs by default
    check_tokens: int = 16384  # validation tokens of the fast check

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        args = ["train", "lm", "--text", str(data / self.text), "--preset", self.preset, "--out", str(out)]
        args += ["--seed", str(self.seed), "--overwrite"]
        return args + (["--overrides", *self.overrides] if self.overrides else [])

    def needs(self, data: Path, training: bool) -> list[Path]:
        return [data / self.text]

    def checkpoint(self, run: Path) -> Path:
        return model_dir(run)

    def setup(self) -> lm_recipe.LMSetup:
        job = TrainJob(self.preset, run_nothing, {}, list(self.overrides), seed=self.seed)
        return lm_recipe.LM_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        setup = self.setup()
        _, tokenizer = load_model(directory, family="lm", precision="fp32")
        fields = {**setup.model_overrides, "vocab_size": tokenizer.vocab_size}
        return gpt_config(setup.model_preset, **fields).to_dict()

    def _loss(self, directory: Path, data: Path, tokens: int | None) -> dict[str, float]:
        setup = dataclasses.replace(self.setup(), eval_tokens=tokens)
        model, tokenizer = load_model(directory, family="lm", precision="fp32")
        _, valid_text = lm_recipe.split_text(read_text(data / self.text), setup.valid_fraction)
        valid_ids = torch.tensor(tokenizer.encode(valid_text), dtype=torch.long)  # (N,)
        # LMTask.evaluate reads only the validation ids; the training ids are there to satisfy
        # its checks, so the validation ids stand in for them.
        task = lm_recipe.LMTask(setup, model.config, tokenizer, valid_ids, valid_ids)
        with torch.inference_mode():
            scores = task.evaluate(model)
        return {**scores, "tokens": valid_ids.numel() if tokens is None else min(tokens, valid_ids.numel())}

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._loss(directory, data, None)
        n = min(self.check_tokens, scores["tokens"])
        return Evaluation(
            metrics={"loss": scores["loss"], "perplexity": scores["ppl"], "n": scores["tokens"]},
            evaluation=(
                f"cross-entropy per token (nats) on the whole validation text (the last 10% of {Path(self.text).name}), "
                f"in blocks of the training's length, as the training's validation"
            ),
            check=fast_check(
                "loss",
                self.measure_check(directory, data),
                higher_is_better=False,
                tolerance=0.02,
                n=n,
                how=f"on the first {n:,} validation tokens",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._loss(directory, data, self.check_tokens)["loss"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from ..decode import generate

        model, tokenizer = load_model(directory, family="lm", precision="fp32")
        outputs = {}
        with torch.inference_mode():
            for text in inputs:
                prompt = torch.tensor([tokenizer.encode(text)])  # (1, T0)
                new = min(EXAMPLE_TOKENS, model.config.n_positions - prompt.shape[1])
                full = generate(model, prompt, max_new_tokens=new, temperature=0.0, eos_id=tokenizer.eos_id).tokens
                outputs[text] = tokenizer.decode(full[0, prompt.shape[1] :].tolist())  # full: (1, T)
        return outputs


@dataclass
class ShakespeareMLM:
    """An encoder-only BERT trained by ``attnlab train mlm`` (masked LM) on tinyshakespeare, one
    character a token like shakespeare-char (the same text, read from both sides instead of from the
    left); the last 10% of the text validates. At this size and step count a 1,000-piece BPE
    vocabulary, and characters under the preset's decaying rate, learned only how often each token
    occurs, whatever its neighbours; characters at a constant rate of 3e-3 learn to read them."""

    name: str = "shakespeare-mlm"
    text: str = "tinyshakespeare/input.txt"
    data: str = (
        "tinyshakespeare (1,115,394 characters of Shakespeare, as distributed with char-rnn): the first 90% "
        "trains, the last 10% validates; 15% of the characters masked (80/10/10), no next-sentence task"
    )
    licence: str = "public domain (the text); the text is not shipped"
    max_steps: int = 3000  # optimizer steps (the preset's 10-minute clock is switched off)
    overrides: tuple[str, ...] = (
        "model_preset=tiny",
        "model.d_model=64",
        "model.n_heads=4",
        "model.n_positions=64",
        "max_len=64",
        "batch_size=32",
        "train.lr=3e-3",
        "train.schedule=constant",
        "train.time_budget_s=null",
        "train.eval_every_steps=500",
        "train.warmup_steps=100",
        "train.log_every=100",
    )
    seed: int = 0
    threads: int | None = None
    check_sequences: int = 64  # validation sequences of the fast check

    @property
    def run_key(self) -> str:
        return self.name

    def command(self, data: Path, out: Path) -> list[str]:
        args = ["train", "mlm", "--text", str(data / self.text), "--tokenizer", "char", "--preset", "mini"]
        args += ["--max-steps", str(self.max_steps), "--out", str(out), "--seed", str(self.seed), "--overwrite"]
        return args + ["--overrides", *self.overrides]

    def needs(self, data: Path, training: bool) -> list[Path]:
        return [data / self.text]

    def checkpoint(self, run: Path) -> Path:
        return model_dir(run)

    def setup(self) -> lm_recipe.MLMSetup:
        job = TrainJob("mini", run_nothing, {"tokenizer": "char"}, list(self.overrides), seed=self.seed)
        return lm_recipe.MLM_JOB.setup(job)

    def expected_config(self, directory: Path) -> dict:
        from ..models.bert import bert_config

        setup = self.setup()
        fields = {**setup.model_overrides, **config_from(directory, "vocab_size", "pad_id")}
        return bert_config(setup.model_preset, **fields, next_sentence_head=setup.next_sentence).to_dict()

    def _scores(self, directory: Path, data: Path, sequences: int | None) -> dict[str, float]:
        setup = dataclasses.replace(self.setup(), eval_sequences=sequences)
        model, tokenizer = load_model(directory, family="lm", precision="fp32")
        _, valid_text = lm_recipe.split_text(read_text(data / self.text), setup.valid_fraction)
        valid_ids = lm_recipe.encode_text(tokenizer, valid_text)
        task = lm_recipe.MLMTask(setup, model.config, tokenizer, valid_ids, valid_ids)
        with torch.inference_mode():
            scores = task.evaluate(model)
        return {**scores, "sequences": len(task.valid_segments)}

    def evaluate(self, directory: Path, data: Path) -> Evaluation:
        scores = self._scores(directory, data, None)
        n = self.check_sequences
        return Evaluation(
            metrics={"loss": scores["loss"], "accuracy": scores["accuracy"], "n_sequences": scores["sequences"]},
            evaluation=(
                "masked-LM cross-entropy (nats) and top-1 accuracy on the masked characters of the whole validation "
                "text (the last 10% of input.txt) in sequences of 64 characters, with the training's fixed "
                "evaluation masks"
            ),
            check=fast_check(
                "loss",
                self.measure_check(directory, data),
                higher_is_better=False,
                tolerance=0.05,
                n=n,
                how=f"on the first {n} validation sequences",
            ),
        )

    def measure_check(self, directory: Path, data: Path) -> float:
        return self._scores(directory, data, self.check_sequences)["loss"]

    def example_outputs(self, directory: Path, inputs: Sequence[str]) -> dict[str, str]:
        from ..models.bert import fill_mask

        model, tokenizer = load_model(directory, family="lm", precision="fp32")
        with torch.inference_mode():
            return {
                text: ", ".join(f"{t} ({p:.2f})" for t, p in fill_mask(model, tokenizer, text, top_k=3)[0])
                for text in inputs
            }
