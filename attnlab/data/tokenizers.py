"""Tokenizers: subword (BPE or Unigram, on HuggingFace ``tokenizers``) and characters.

Both kinds share one interface (:class:`Tokenizer`): ``encode``/``decode`` between text
and ids, ``tokens`` for display labels, the special ids (``pad_id`` is always 0, then
``unk``, ``bos``, ``eos`` and optionally ``mask``), and ``save``/:func:`load_tokenizer`
to a single JSON file that is stored next to a model checkpoint.

Why Metaspace and not ByteLevel (the choice in :func:`train_subword_tokenizer`):
the translator is scored with BLEU on *detokenized* text and shows tokens as heatmap
labels, and it must handle Japanese written without spaces. Metaspace (SentencePiece's
scheme, Kudo & Richardson 2018, §3) turns every space into the visible character ``▁``
before splitting, so the decoder can put exactly those spaces back: ``decode(encode(x))``
returns ``x`` for English, German and Japanese alike (modulo runs of whitespace). Text
with no spaces at all (raw Japanese) is simply one long "word" inside which BPE merges or
the Unigram lattice find subwords, so no word segmenter is needed. ByteLevel (GPT-2's
scheme) would also round-trip, but it splits a kanji into three byte symbols whose
display strings are mojibake and whose boundaries can fall inside a character — useless
as heatmap labels. Digits are split one per token so years and numbers never seen as a
whole are still spelled correctly.

Shape:
    Plain Python: ``encode`` gives a list of L ids, ``encode_batch`` a list of B such lists.
"""

from __future__ import annotations

import json
import os
import tempfile
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Literal, Protocol, Sequence, runtime_checkable

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from ..files import new_file_mode

__all__ = [
    "SpecialTokens",
    "Tokenizer",
    "SubwordTokenizer",
    "CharTokenizer",
    "train_subword_tokenizer",
    "build_tokenizers",
    "load_tokenizer",
]

FORMAT = "attnlab.tokenizer"
FORMAT_VERSION = 1
METASPACE = "▁"  # U+2581, the SentencePiece word-start marker; also how spaces are displayed


@dataclass(frozen=True)
class SpecialTokens:
    """The special token strings; their ids are their order here (pad=0, unk=1, bos=2, eos=3, mask=4).

    Shape:
        Strings only.
    """

    pad: str = "[PAD]"  # padding; id 0 so that zero-initialised id tensors are padding
    unk: str = "[UNK]"  # a character never seen in training
    bos: str = "[BOS]"  # beginning of sequence, first decoder input
    eos: str = "[EOS]"  # end of sequence, last decoder target
    mask: str | None = "[MASK]"  # masked-LM token (BERT); None leaves it out of the vocabulary

    def as_list(self) -> list[str]:
        """The special tokens in id order."""
        names = [self.pad, self.unk, self.bos, self.eos] + ([self.mask] if self.mask is not None else [])
        if len(set(names)) != len(names):
            raise ValueError(f"special tokens must be distinct, got {names}")
        return names


@runtime_checkable
class Tokenizer(Protocol):
    """What every attnlab tokenizer offers; models and training depend only on this.

    Shape:
        ``encode``: str → L ids; ``decode``: L ids → str; ``tokens``: str → L display strings.
    """

    @property
    def kind(self) -> str: ...  # "bpe", "unigram" or "char"
    @property
    def special_tokens(self) -> SpecialTokens: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def pad_id(self) -> int: ...
    @property
    def unk_id(self) -> int: ...
    @property
    def bos_id(self) -> int: ...
    @property
    def eos_id(self) -> int: ...
    @property
    def mask_id(self) -> int | None: ...

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]: ...
    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]: ...
    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str: ...
    def decode_batch(self, batch: Iterable[Iterable[int]], *, skip_special: bool = True) -> list[str]: ...
    def tokens(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[str]: ...
    def id_to_token(self, token_id: int) -> str: ...
    def token_to_id(self, token: str) -> int | None: ...
    def save(self, directory: str | os.PathLike, name: str) -> Path: ...


def _wrap(ids: list[int], bos_id: int, eos_id: int, add_bos: bool, add_eos: bool) -> list[int]:
    return ([bos_id] if add_bos else []) + ids + ([eos_id] if add_eos else [])


def _as_int_list(ids: Iterable[int]) -> list[int]:
    """Accept lists, tuples and 1-D tensors/arrays of ids."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    return [int(i) for i in ids]


def _write_json_atomically(payload: dict, directory: str | os.PathLike, name: str) -> Path:
    """Write ``directory/name.json`` via a temporary file and a rename, so a crash never leaves half a file."""
    if not name or "/" in name or os.sep in name:
        raise ValueError(f"tokenizer name must be a plain file stem, got {name!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, ensure_ascii=False)
        # mkstemp creates the file 0600; give it the mode open() would, as config.json has.
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class SubwordTokenizer:
    """A trained BPE or Unigram tokenizer (HuggingFace ``tokenizers``), see :func:`train_subword_tokenizer`.

    Shape:
        ``encode``: str → L ids; ``encode_batch``: B strs → B lists of ids.
    """

    def __init__(self, hf_tokenizer: HFTokenizer, *, model: str, special_tokens: SpecialTokens):
        if model not in ("bpe", "unigram"):
            raise ValueError(f"model must be 'bpe' or 'unigram', got {model!r}")
        self._hf = hf_tokenizer
        self._model = model
        self._specials = special_tokens
        ids = [hf_tokenizer.token_to_id(tok) for tok in special_tokens.as_list()]
        if ids != list(range(len(ids))):
            raise ValueError(
                f"special tokens {special_tokens.as_list()} must have ids 0..{len(ids) - 1} in the vocabulary, got {ids}"
            )

    @property
    def kind(self) -> str:
        return self._model

    @property
    def special_tokens(self) -> SpecialTokens:
        return self._specials

    @property
    def vocab_size(self) -> int:
        return self._hf.get_vocab_size(with_added_tokens=True)

    pad_id = property(lambda self: 0)
    unk_id = property(lambda self: 1)
    bos_id = property(lambda self: 2)
    eos_id = property(lambda self: 3)
    mask_id = property(lambda self: 4 if self._specials.mask is not None else None)

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = self._hf.encode(text, add_special_tokens=False).ids
        return _wrap(ids, self.bos_id, self.eos_id, add_bos, add_eos)

    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        encodings = self._hf.encode_batch(list(texts), add_special_tokens=False)
        return [_wrap(e.ids, self.bos_id, self.eos_id, add_bos, add_eos) for e in encodings]

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        return self._hf.decode(_as_int_list(ids), skip_special_tokens=skip_special)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, skip_special: bool = True) -> list[str]:
        return self._hf.decode_batch([_as_int_list(ids) for ids in batch], skip_special_tokens=skip_special)

    def tokens(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[str]:
        return [self.id_to_token(i) for i in self.encode(text, add_bos=add_bos, add_eos=add_eos)]

    def id_to_token(self, token_id: int) -> str:
        token = self._hf.id_to_token(int(token_id))
        if token is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary of size {self.vocab_size}")
        return token

    def token_to_id(self, token: str) -> int | None:
        return self._hf.token_to_id(token)

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": self._model,
            "special_tokens": asdict(self._specials),
            "hf_tokenizer": json.loads(self._hf.to_str()),
        }

    def save(self, directory: str | os.PathLike, name: str) -> Path:
        """Write ``directory/name.json``; restore it with :func:`load_tokenizer`."""
        return _write_json_atomically(self.to_dict(), directory, name)

    def __repr__(self) -> str:
        return f"SubwordTokenizer(model={self._model!r}, vocab_size={self.vocab_size})"


class CharTokenizer:
    """One token per Unicode character (NFC-normalised), for tiny tasks and character-level LMs.

    Shape:
        ``encode``: str of L characters → L ids.
    """

    def __init__(self, chars: Sequence[str], *, special_tokens: SpecialTokens = SpecialTokens()):
        specials = special_tokens.as_list()
        for ch in chars:
            if len(ch) != 1:
                raise ValueError(f"CharTokenizer vocabulary entries must be single characters, got {ch!r}")
        if len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer vocabulary has repeated characters")
        self._specials = special_tokens
        self._vocab = specials + list(chars)
        self._n_special = len(specials)
        # Specials are multi-character strings, so they can never collide with a character entry.
        self._index = {tok: i for i, tok in enumerate(self._vocab)}

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int | None = None,
        special_tokens: SpecialTokens = SpecialTokens(),
    ) -> "CharTokenizer":
        """Collect the characters of ``texts``; with ``vocab_size`` keep only the most frequent ones.

        Ties in frequency are broken by code point, so the vocabulary is deterministic.
        """
        counts = Counter()
        for text in texts:
            counts.update(unicodedata.normalize("NFC", text))
        if not counts:
            raise ValueError("cannot train a CharTokenizer on empty text")
        chars = sorted(counts, key=lambda ch: (-counts[ch], ch))
        if vocab_size is not None:
            n_special = len(special_tokens.as_list())
            if vocab_size <= n_special:
                raise ValueError(f"vocab_size={vocab_size} leaves no room next to {n_special} special tokens")
            chars = chars[: vocab_size - n_special]
        return cls(sorted(chars), special_tokens=special_tokens)

    @property
    def kind(self) -> str:
        return "char"

    @property
    def special_tokens(self) -> SpecialTokens:
        return self._specials

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    pad_id = property(lambda self: 0)
    unk_id = property(lambda self: 1)
    bos_id = property(lambda self: 2)
    eos_id = property(lambda self: 3)
    mask_id = property(lambda self: 4 if self._specials.mask is not None else None)

    @property
    def chars(self) -> list[str]:
        """The non-special vocabulary, in id order."""
        return self._vocab[self._n_special :]

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        index, unk = self._index, self.unk_id
        ids = [index.get(ch, unk) for ch in unicodedata.normalize("NFC", text)]
        return _wrap(ids, self.bos_id, self.eos_id, add_bos, add_eos)

    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        return [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        out = []
        for i in _as_int_list(ids):
            if not 0 <= i < len(self._vocab):
                raise ValueError(f"token id {i} is outside the vocabulary of size {len(self._vocab)}")
            if skip_special and i < self._n_special:
                continue
            out.append(self._vocab[i])
        return "".join(out)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, skip_special: bool = True) -> list[str]:
        return [self.decode(ids, skip_special=skip_special) for ids in batch]

    def tokens(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[str]:
        # A space is invisible as a heatmap label, so show it as the word-start marker.
        return [
            METASPACE if tok == " " else tok
            for tok in (self.id_to_token(i) for i in self.encode(text, add_bos=add_bos, add_eos=add_eos))
        ]

    def id_to_token(self, token_id: int) -> str:
        if not 0 <= int(token_id) < len(self._vocab):
            raise ValueError(f"token id {token_id} is outside the vocabulary of size {len(self._vocab)}")
        return self._vocab[int(token_id)]

    def token_to_id(self, token: str) -> int | None:
        return self._index.get(token)

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": "char",
            "special_tokens": asdict(self._specials),
            "chars": self.chars,
        }

    def save(self, directory: str | os.PathLike, name: str) -> Path:
        """Write ``directory/name.json``; restore it with :func:`load_tokenizer`."""
        return _write_json_atomically(self.to_dict(), directory, name)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def train_subword_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    model: Literal["bpe", "unigram"] = "bpe",
    special_tokens: SpecialTokens = SpecialTokens(),
) -> SubwordTokenizer:
    """Train a BPE (Sennrich et al. 2016) or Unigram (Kudo 2018) subword tokenizer on raw text.

    Works unchanged on English, German, Japanese with or without spaces between words; see
    the module docstring for the Metaspace pre-tokenizer/decoder choice. Text is NFC
    normalised (so a decomposed "ü" and a precomposed one get the same ids) but otherwise
    untouched: no lower-casing, no NFKC (which would turn full-width characters half-width
    and break ``decode(encode(x)) == x``). Every character of the training text is in the
    vocabulary; unseen characters become ``[UNK]``. The result may have fewer than
    ``vocab_size`` entries when the text is small.

    Shape:
        texts: N strings → a tokenizer with at most ``vocab_size`` ids.
    """
    if model not in ("bpe", "unigram"):
        raise ValueError(f"model must be 'bpe' or 'unigram', got {model!r}")
    texts = list(texts)
    if not any(t.strip() for t in texts):
        raise ValueError("cannot train a subword tokenizer on empty text")
    specials = special_tokens.as_list()
    if vocab_size <= len(specials):
        raise ValueError(f"vocab_size={vocab_size} leaves no room next to {len(specials)} special tokens")
    if model == "bpe":
        hf = HFTokenizer(models.BPE(unk_token=special_tokens.unk))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    else:
        hf = HFTokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=specials, unk_token=special_tokens.unk, show_progress=False
        )
    hf.normalizer = normalizers.NFC()
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(replacement=METASPACE), pre_tokenizers.Digits(individual_digits=True)]
    )
    hf.decoder = decoders.Metaspace(replacement=METASPACE)
    hf.train_from_iterator(texts, trainer, length=len(texts))
    return SubwordTokenizer(hf, model=model, special_tokens=special_tokens)


def build_tokenizers(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    *,
    kind: Literal["bpe", "unigram", "char"] = "bpe",
    joint: bool = False,
    vocab_size: int | None = None,
    special_tokens: SpecialTokens = SpecialTokens(),
) -> tuple[Tokenizer, Tokenizer]:
    """Train the source and target tokenizers for a translation task.

    With ``joint=True`` one tokenizer is trained on both sides and returned twice (the same
    object), which lets a model tie source and target embeddings. ``vocab_size`` is required
    for subword kinds; for ``"char"`` it optionally caps the vocabulary per tokenizer.

    Shape:
        src_texts, tgt_texts: N strings each → ``(src_tok, tgt_tok)``.
    """
    if kind not in ("bpe", "unigram", "char"):
        raise ValueError(f"kind must be 'bpe', 'unigram' or 'char', got {kind!r}")
    if kind != "char" and vocab_size is None:
        raise ValueError(f"kind={kind!r} needs a vocab_size")

    def train(texts: Sequence[str]) -> Tokenizer:
        if kind == "char":
            return CharTokenizer.train(texts, vocab_size=vocab_size, special_tokens=special_tokens)
        return train_subword_tokenizer(texts, vocab_size, model=kind, special_tokens=special_tokens)

    if joint:
        tok = train(list(src_texts) + list(tgt_texts))
        return tok, tok
    return train(src_texts), train(tgt_texts)


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Restore a tokenizer written by ``save`` (either kind).

    Raises:
        FileNotFoundError, ValueError (not an attnlab tokenizer file, unknown kind).

    Shape:
        Returns a :class:`Tokenizer`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such tokenizer file")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not an attnlab tokenizer file (missing format={FORMAT!r})")
    if payload.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: tokenizer format version {payload.get('version')!r}, expected {FORMAT_VERSION}")
    special_tokens = SpecialTokens(**payload["special_tokens"])
    kind = payload.get("kind")
    if kind == "char":
        return CharTokenizer(payload["chars"], special_tokens=special_tokens)
    if kind in ("bpe", "unigram"):
        hf = HFTokenizer.from_str(json.dumps(payload["hf_tokenizer"]))
        return SubwordTokenizer(hf, model=kind, special_tokens=special_tokens)
    raise ValueError(f"{path}: unknown tokenizer kind {kind!r}")
