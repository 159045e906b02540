"""What the notebooks share: models by name, the text they train on, exercise checks, sliders.

Models by name. ``load_translator("ja-en")`` (and the other loaders) take the model attnlab ships
under that name — the name ``attnlab translate --model NAME`` and ``attnlab explore`` accept — when
this install has it. Until then (or for the applications attnlab ships no model for) they train a
small stand-in on data the package generates, for a stated number of optimizer steps (a step count,
never the clock, ends the training, so the stand-in is the same on every machine), and keep it
under ``notebooks/runs/`` so the next notebook (or the next run) loads it instead of training
again. Each loads the model through :func:`attnlab.loading.load_model` (the one way attnlab loads a
model by name or path), naming the family it needs. Every loader returns the model with a line (in
Japanese, as the notebooks are) saying which of these it was, and the notebooks print that line: a
heatmap of a stand-in trained for a few hundred steps is not the shipped model's.

Exercises. Each notebook ends with 練習問題 (exercises): a function for the reader to write and a
cell calling :func:`check`, which runs the exercise's test from :mod:`solutions` on it and returns
the function the later cells use — the reader's own when it passes, else the model solution — so
the notebooks run from top to bottom as they are (in CI too) and use the reader's work when it
is right.

Precision. Every training the notebooks run — their own loops (07) and the stand-ins the
loaders train — uses :data:`PRECISION`: ``"fp32"``, or ``"bf16"`` (autocast; the weights stay
fp32) when the environment variable ``ATTNLAB_NOTEBOOK_PRECISION`` says so. It is always named,
never ``"auto"``, so a notebook trains the same way on every machine and prints no probe line;
``tests/notebooks/test_notebooks.py`` runs the training notebooks in both.

Sliders. :func:`three_books_playground` uses ``ipywidgets`` when it is installed (``pip install
'attnlab[notebooks]'``) and says so when it is not; nothing else needs it.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from pathlib import Path
from typing import Any, NamedTuple

import solutions

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: Models the notebooks trained themselves (git-ignored); delete it to train them again.
RUNS = HERE / "runs"
#: tinyshakespeare where the project keeps its corpora (beside the repository); optional.
SHAKESPEARE = REPO.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"


#: The environment variable that picks the precision of the notebooks' training (default fp32).
PRECISION_VARIABLE = "ATTNLAB_NOTEBOOK_PRECISION"


def notebook_precision() -> str:
    """``"fp32"`` or ``"bf16"``, from ``ATTNLAB_NOTEBOOK_PRECISION`` (unset or empty: fp32); a
    clear error for anything else."""
    value = os.environ.get(PRECISION_VARIABLE, "").strip().lower() or "fp32"
    if value not in ("fp32", "bf16"):
        raise ValueError(f"{PRECISION_VARIABLE} must be fp32 or bf16, got {value!r}")
    return value


#: The precision of every training step the notebooks run (see the module's docstring).
PRECISION = notebook_precision()


def autocast():
    """The context the notebooks run their own training steps in: bf16 autocast on the CPU when
    :data:`PRECISION` is bf16, else a no-op (fp32)."""
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=PRECISION == "bf16")


def _suffix() -> str:
    """The runs folder's name suffix: stand-ins trained in bf16 are kept apart from fp32 ones."""
    return "" if PRECISION == "fp32" else f"-{PRECISION}"


class Loaded(NamedTuple):
    """A model and where it came from (printed by the notebooks next to its results)."""

    model: Any  # a Translator, Summarizer, QuestionAnswerer, or (model, tokenizer) pair
    source: str  # 「同梱モデル 'ja-en'」, or what the stand-in was trained on and for how many steps
    shipped: bool = False  # the model attnlab ships under that name (not a stand-in)


#: What the source line adds when a stand-in was trained by an earlier run and is only loaded.
FROM_RUNS = "（notebooks/runs から読み込み）"


# --------------------------------------------------------------------------------------------
# Models by name
# --------------------------------------------------------------------------------------------


def shipped_model(name: str) -> Path | None:
    """The checkpoint folder attnlab ships under ``name``, or ``None`` if this install has none.

    Names are resolved as ``--model NAME`` is (:func:`attnlab.loading.model_dir`): ``minilm`` is
    the all-MiniLM-L6-v2 package; the other names (``demo``, ``ja-en``, ``en-ja``,
    ``shakespeare-char`` …) come with attnlab's model assets.
    """
    from attnlab.loading import model_dir

    if Path(name).exists():  # a folder of that name in the working directory is not a shipped model
        return None
    try:
        return model_dir(name)
    except (FileNotFoundError, ValueError):
        return None


def _stand_in_folder(name: str) -> Path:
    return RUNS / name


def _trained(folder: Path) -> bool:
    return (folder / "best" / "config.json").is_file()


#: Stand-ins for the translators: the generated number task (English words ⇄ kanji numerals).
_TRANSLATION_TASKS = {"ja-en": "numbers-ja-en", "en-ja": "numbers-en-ja", "demo": "numbers-en-ja"}


def load_translator(name: str, *, steps: int = 900, log=print) -> Loaded:
    """The translator ``name`` (``"ja-en"``, ``"en-ja"`` or ``"demo"``): shipped, or a stand-in
    trained for ``steps`` optimizer steps on the generated number task (English number words ⇄
    kanji).

    The stand-in is the demo's Transformer made small (width 64, one encoder and one decoder
    layer): 900 steps (about 30 s on one busy CPU core) get about 80% of the held-out numbers
    exactly right. It stops earlier if it reaches the demo's exact-match target.
    """
    from attnlab.data.tasks import make_splits
    from attnlab.experiments.demo import demo_setup
    from attnlab.loading import load_model
    from attnlab.recipes.translate import train_translation

    path = shipped_model(name)
    if path is not None:
        return Loaded(load_model(path, family="translate"), f"同梱モデル {name!r}", shipped=True)
    task = _TRANSLATION_TASKS[name]
    folder = _stand_in_folder(f"{task}-{steps}steps{_suffix()}")
    source = f"{name!r} の代わりのモデル: 生成データ {task!r} で {steps} 回更新した小さな Transformer"
    if _trained(folder):
        return Loaded(load_model(folder, family="translate"), source + FROM_RUNS)
    log(f"{name!r} はこの attnlab に同梱されていません。代わりのモデルを {task!r} で {steps} 回の更新だけ学習します …")
    splits = make_splits(task, 20000, 200, 200, seed=0)
    setup = demo_setup(folder, seed=0)
    setup = dataclasses.replace(
        setup,
        model_overrides=dict(d_model=64, d_ff=128, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0),
        max_tokens=1000,
        eval_sentences=100,
    )
    if name == "ja-en":  # kanji in, English words out: characters in, a word-sized BPE out
        setup = dataclasses.replace(setup, tokenizer="char", tgt_tokenizer="bpe")
    setup.train = dataclasses.replace(
        setup.train, max_steps=steps, time_budget_s=None, warmup_steps=30, eval_every_steps=100, patience=None,
        progress=False, overwrite=True, precision=PRECISION,
    )  # fmt: skip
    _, _, translator = train_translation(setup, splits.train, splits.valid)
    return Loaded(translator, source)


def sample_text(max_chars: int = 400_000) -> tuple[str, str]:
    """A text to train small language models on, and its name: tinyshakespeare when the
    project's corpora sit beside the repository, else generated number words (one per line)."""
    if SHAKESPEARE.is_file():
        return SHAKESPEARE.read_text(encoding="utf-8")[:max_chars], "tinyshakespeare"
    from attnlab.data.tasks import make_task

    lines, size = [], 0
    for en, _ in make_task("numbers-en-ja", 40000, seed=1):
        lines.append(en)
        size += len(en) + 1
        if size >= max_chars:
            break
    return "\n".join(lines) + "\n", "生成した英語の数詞"


def load_gpt(name: str = "shakespeare-char", *, steps: int = 150, log=print) -> Loaded:
    """A character-level GPT: shipped as ``name``, or a small one trained for ``steps`` optimizer
    steps on :func:`sample_text` (150 steps: about 15 s on one busy CPU core).
    ``Loaded.model`` is ``(model, tokenizer)``."""
    from attnlab.loading import load_model
    from attnlab.recipes.lm import LMSetup, train_lm
    from attnlab.train import TrainConfig

    path = shipped_model(name)
    if path is not None:
        return Loaded(load_model(path, family="lm"), f"同梱モデル {name!r}", shipped=True)
    text, text_name = sample_text()
    folder = _stand_in_folder(f"gpt-{steps}steps{_suffix()}")
    source = f"{name!r} の代わりのモデル: {text_name} で {steps} 回更新した 2 層の文字単位 GPT"
    if _trained(folder):
        return Loaded(load_model(folder, family="lm"), source + FROM_RUNS)
    log(f"{name!r} はこの attnlab に同梱されていません。{text_name} で小さな GPT を {steps} 回の更新だけ学習します …")
    setup = LMSetup(
        model_preset="bench-small",
        model_overrides=dict(n_layers=2, n_positions=128),
        block_size=128,
        batch_size=16,
        eval_tokens=8192,
        train=TrainConfig(
            out_dir=str(folder), max_steps=steps, epochs=100, lr=3e-3, warmup_steps=20,
            eval_every_steps=100, progress=False, overwrite=True, precision=PRECISION,
        ),
    )  # fmt: skip
    train_lm(setup, text)
    return Loaded(load_model(folder, family="lm"), source)


def load_masked_lm(*, steps: int = 1500, log=print) -> Loaded:
    """A small BERT with a masked-LM head trained for ``steps`` optimizer steps on generated
    number words (1500 steps: about 20 s on one busy CPU core; attnlab ships no masked LM: MiniLM
    is a sentence encoder without its MLM head). ``Loaded.model`` is ``(model, tokenizer)``."""
    from attnlab.data.tasks import make_task
    from attnlab.loading import load_model
    from attnlab.recipes.lm import MLMSetup, train_mlm
    from attnlab.train import TrainConfig

    folder = _stand_in_folder(f"mlm-numbers-{steps}steps{_suffix()}")
    source = f"生成した英語の数詞で {steps} 回更新した 2 層の BERT（マスク言語モデル）"
    if _trained(folder):
        return Loaded(load_model(folder, family="lm"), source + FROM_RUNS)
    log(f"生成した英語の数詞で小さなマスク言語モデルを {steps} 回の更新だけ学習します …")
    text = "\n".join(en for en, _ in make_task("numbers-en-ja", 20000, seed=2)) + "\n"
    setup = MLMSetup(
        model_preset="tiny",
        model_overrides=dict(d_model=64, n_heads=4),
        tokenizer="bpe",
        vocab_size=200,
        max_len=32,
        batch_size=8,  # many small steps: with large batches a short run only learns word frequencies, not context
        eval_sequences=128,
        train=TrainConfig(
            out_dir=str(folder), max_steps=steps, epochs=100, lr=3e-3, warmup_steps=20,
            eval_every_steps=100, progress=False, overwrite=True, precision=PRECISION,
        ),
    )  # fmt: skip
    train_mlm(setup, text)
    return Loaded(load_model(folder, family="lm"), source)


def load_summarizer(*, steps: int = 550, log=print) -> Loaded:
    """A pointer-generator trained for ``steps`` optimizer steps (550: about 25 s on one busy CPU
    core) on the generated "facts" task (invented names and numbers the model must copy);
    attnlab ships no summarizer."""
    from attnlab.data.summaries import facts_splits
    from attnlab.loading import load_model
    from attnlab.recipes.summarize import PRESETS, train_summarizer

    folder = _stand_in_folder(f"summarize-facts-{steps}steps{_suffix()}")
    source = f"生成データ（facts）で {steps} 回更新したポインタ生成ネットワーク"
    if _trained(folder):
        return Loaded(load_model(folder, family="summarize"), source + FROM_RUNS)
    log(f"生成データ（facts）でポインタ生成ネットワークを {steps} 回の更新だけ学習します …")
    splits = facts_splits(2000, seed=0, n_valid=50, n_test=20)
    setup = PRESETS["facts"]
    setup = dataclasses.replace(
        setup,
        max_tokens=512,  # small batches: more updates in a short run (the preset's 2048 still repeats words then)
        eval_examples=50,
        train=dataclasses.replace(
            setup.train, out_dir=str(folder), max_steps=steps, time_budget_s=None, epochs=100,
            eval_every_steps=60, progress=False, overwrite=True, precision=PRECISION,
        ),
    )  # fmt: skip
    train_summarizer(setup, splits.train, splits.valid)
    return Loaded(load_model(folder, family="summarize"), source)


def load_question_answerer(*, steps: int = 50, log=print) -> Loaded:
    """MiniLM with a span head fine-tuned for ``steps`` optimizer steps (50: about 35 s on one
    busy CPU core) on the generated facts questions (attnlab ships no question answerer; the full
    recipe, ``attnlab train qa``, takes minutes)."""
    from attnlab.data.squad import facts_splits
    from attnlab.loading import load_model
    from attnlab.recipes.qa import PRESETS, train_qa

    folder = _stand_in_folder(f"qa-facts-{steps}steps{_suffix()}")
    source = f"生成データ（facts）の質問で {steps} 回更新して微調整した MiniLM + 区間ヘッド"
    if _trained(folder):
        return Loaded(load_model(folder, family="qa"), source + FROM_RUNS)
    log(f"生成データ（facts）の質問で MiniLM を {steps} 回の更新だけ微調整します …")
    splits = facts_splits(400, seed=0, n_valid=10, n_test=10)
    setup = PRESETS["facts"]
    setup = dataclasses.replace(
        setup,
        max_tokens=256,  # small batches: more updates in a short run
        eval_examples=20,
        train=dataclasses.replace(
            setup.train, out_dir=str(folder), max_steps=steps, time_budget_s=None, epochs=100, lr=5e-4,
            warmup_steps=5, eval_every_steps=1000, progress=False, overwrite=True, precision=PRECISION,
        ),
    )  # fmt: skip
    train_qa(setup, splits.train, splits.valid)
    return Loaded(load_model(folder, family="qa"), source)


# --------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------


def check(name: str, candidate):
    """Run exercise ``name``'s test (``solutions.TESTS[name]``) on ``candidate``, say how it went,
    and return the function the notebook's later cells should use: the learner's own when it
    passes, else the model solution (after checking that it passes).

    An unfinished function (raising ``NotImplementedError``) and a wrong one (failing the test or
    raising anything else) are both reported, the wrong one with the test's message, so that the
    notebook still runs through to the end with the model solution in their place.
    """
    test, solution = solutions.TESTS[name], getattr(solutions, name)
    try:
        test(candidate)
    except NotImplementedError:
        print(f"練習問題 {name}: まだ書かれていません。この先のセルは解答例を使います。")
    except Exception as error:  # a wrong answer: its message says what differs
        print(f"練習問題 {name}: まだ正しくありません — {type(error).__name__}: {error}")
        print("この先のセルは解答例を使います。")
    else:
        print(f"練習問題 {name}: 正解です。この先のセルはあなたの関数を使います。")
        return candidate
    test(solution)  # the fallback itself must pass
    return solution


def show_solution(name: str) -> None:
    """Print the model solution of exercise ``name`` (its source in notebooks/solutions.py)."""
    print(inspect.getsource(getattr(solutions, name)))


# --------------------------------------------------------------------------------------------
# Sliders (optional: ipywidgets)
# --------------------------------------------------------------------------------------------


def widgets_available() -> bool:
    """Whether ``ipywidgets`` can be imported (``pip install 'attnlab[notebooks]'``)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def three_books_playground(lang: str = "ja"):
    """Sliders for the three books' scores, d_k and the √d_k scaling; each move redraws the
    walk-through (:func:`attnlab.explain.compute_steps`) as a table and bar charts.

    Returns the ``ipywidgets.interactive`` (the notebook displays it), or ``None`` after saying
    how to get the sliders when ``ipywidgets`` is not installed.
    """
    if not widgets_available() or os.environ.get("ATTNLAB_NO_WIDGETS"):
        print("スライダーには ipywidgets が必要です: pip install 'attnlab[notebooks]'")
        print("The sliders need ipywidgets: pip install 'attnlab[notebooks]'")
        return None
    import ipywidgets as w
    from IPython.display import display

    from attnlab.explain import compute_steps, plot_steps, steps_html

    def show(book1: float, book2: float, book3: float, d_k: int, scale: bool) -> None:
        steps = compute_steps([book1, book2, book3], d_k=d_k, scale=scale)
        display(w.HTML(steps_html(steps, lang)), plot_steps(steps, lang=lang))

    score = dict(min=-20.0, max=20.0, step=0.5, continuous_update=False)
    return w.interactive(
        show,
        book1=w.FloatSlider(value=8.0, description="本1 q·k", **score),
        book2=w.FloatSlider(value=4.0, description="本2 q·k", **score),
        book3=w.FloatSlider(value=2.0, description="本3 q·k", **score),
        d_k=w.IntSlider(value=64, min=1, max=1024, description="d_k", continuous_update=False),
        scale=w.Checkbox(value=True, description="÷√d_k"),
    )


# --------------------------------------------------------------------------------------------
# Displays in the notebook's language
# --------------------------------------------------------------------------------------------


def translation_html(translation, lang: str = "ja") -> str:
    """A :class:`attnlab.inference.translate.Translation` as HTML in ``lang``: the sentence and its
    translation, then the last layer's source–target attention averaged over the heads (the
    numbers as a table when the map is small, else a heatmap).

    ``Translation._repr_html_`` (attnlab/inference/translate.py) follows
    ``viz.display_options.lang`` too; this one's caption also says which axis is which (rows the
    translation's tokens as queries, columns the source's as keys), for the exercises' readers.
    """
    from html import escape

    from attnlab.viz import attention_html

    head = f"<div>{escape(translation.source)} → <b>{escape(translation.text)}</b></div>"
    if translation.cross_attention is None:
        return head
    L = translation.cross_attention.shape[0]
    caption = {
        "ja": f"ソース・ターゲット注意: 第{L}層（全 {L} 層の最後）、ヘッドの平均。行が訳文（クエリ）、列が原文（キー）",
        "en": f"source–target attention, layer {L} of {L} (the last), mean over heads",
    }[lang]
    weights = translation.cross_attention[-1].float().mean(0)  # (H, T, S) -> (T, S)
    return head + attention_html(weights, translation.src_tokens, translation.tgt_tokens, caption=caption, lang=lang)


def show_translation(translation, lang: str = "ja") -> None:
    """Display :func:`translation_html` in the notebook."""
    from IPython.display import HTML, display

    display(HTML(translation_html(translation, lang)))


#: Names of attnlab's attention variants (``attnlab experiment variants``) in the notebooks' words.
VARIANT_NAMES = {
    "ja": {"full": "全体（先を隠す工夫のみ）", "sliding_window": "スライディングウィンドウ", "global_window": "グローバル＋ウィンドウ"},
}


def variant_label(variant: str, lang: str = "ja") -> str:
    """``"sliding_window:16"`` → ``"スライディングウィンドウ 16"``; ``"global_window:16:4"`` → its window
    and number of global positions."""
    kind, *numbers = variant.split(":")
    name = VARIANT_NAMES[lang].get(kind, kind)
    if kind == "global_window" and len(numbers) == 2:
        return f"{name}（窓 {numbers[0]}、グローバル {numbers[1]} 個）"
    return f"{name} {numbers[0]}" if numbers else name


def variants_table_html(report, lang: str = "ja") -> str:
    """The table of ``attnlab experiment variants`` (a ``VariantsReport``) with Japanese headers
    (``VariantsReport._repr_html_`` lives in attnlab/experiments/, which these notebooks do not own)."""
    from html import escape

    full = next((r for r in report.results if r.variant == "full"), report.results[0])
    headers = ["変種", "検証損失（最良）", "全体との差", "トークン/秒", "全体との速さの比", "更新の回数", "学習の秒数"]
    cell = "padding:2px 8px;text-align:right"
    rows = ["<tr>" + "".join(f'<th style="{cell}">{h}</th>' for h in headers) + "</tr>"]
    for r in report.results:
        values = [
            variant_label(r.variant, lang), f"{r.best_valid_loss:.3f}", f"{r.best_valid_loss - full.best_valid_loss:+.3f}",
            f"{r.tokens_per_s:,.0f}", f"{r.tokens_per_s / full.tokens_per_s:.2f}×", str(r.steps),
            f"{r.train_seconds:.1f}",
        ]  # fmt: skip
        rows.append("<tr>" + "".join(f'<td style="{cell}">{escape(v)}</td>' for v in values) + "</tr>")
    return f'<table style="border-collapse:collapse">{"".join(rows)}</table>'
