"""Tokenizers: subword (BPE or Unigram, on HuggingFace ``tokenizers``), characters, words, and the
tokenizers of pretrained HuggingFace checkpoints.

Every kind implements one interface (:class:`Tokenizer`): ``encode``/``decode`` between text
and ids, ``tokens`` for display labels, the special ids (``pad``, ``unk``, ``bos``, ``eos`` and
optionally ``mask``) and ``save`` to a single JSON file that is stored next to a model
checkpoint. The kinds trained here (:class:`SubwordTokenizer`, :class:`CharTokenizer`,
:class:`WordVocab`) number their special tokens 0–3 (4 for the mask), so ``pad_id`` is 0; a
:class:`PretrainedTokenizer` keeps its checkpoint's ids. :func:`load_tokenizer` restores the first
two, :meth:`WordVocab.load` a word vocabulary, :func:`load_hf_tokenizer` a checkpoint's tokenizer.

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
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, Protocol, overload, runtime_checkable

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from ..files import new_file_mode

__all__ = [
    "SpecialTokens",
    "Tokenizer",
    "SubwordTokenizer",
    "CharTokenizer",
    "WordVocab",
    "PretrainedTokenizer",
    "train_subword_tokenizer",
    "build_tokenizers",
    "load_tokenizer",
    "load_hf_tokenizer",
]

FORMAT = "attnlab.tokenizer"
FORMAT_VERSION = 1
METASPACE = "▁"  # U+2581, the SentencePiece word-start marker; also how spaces are displayed
VOCAB_FORMAT = "attnlab.word_vocab"  # the format tag of a saved WordVocab
_WORD = re.compile(r"\w+(?:[-'.,]\w+)*|[^\w\s]")  # words (with inner - ' . , as in 3.5, 1,200, don't) or one symbol


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

    def __post_init__(self) -> None:
        for name in ("pad", "unk", "bos", "eos", "mask"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value) and not (name == "mask" and value is None):
                raise ValueError(f"special token {name} must be a non-empty string, got {value!r}")

    def as_list(self) -> list[str]:
        """The special tokens in id order."""
        names = [self.pad, self.unk, self.bos, self.eos] + ([self.mask] if self.mask is not None else [])
        if len(set(names)) != len(names):
            raise ValueError(f"special tokens must be distinct, got {names}")
        return names


@runtime_checkable
class Tokenizer(Protocol):
    """What every attnlab tokenizer offers; models and training depend only on this.

    Implemented by :class:`SubwordTokenizer`, :class:`CharTokenizer`, :class:`WordVocab` and
    :class:`PretrainedTokenizer`.

    Shape:
        ``encode``: str → L ids; ``decode``: L ids → str; ``tokens``: str → L display strings.
    """

    @property
    def kind(self) -> str: ...  # "bpe", "unigram", "char", "word", or a pretrained tokenizer's model ("wordpiece", …)
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
    def encode_batch(
        self, texts: Sequence[str], *, add_bos: bool = False, add_eos: bool = False
    ) -> list[list[int]]: ...
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


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


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
    ) -> CharTokenizer:
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


class WordVocab:
    """A word vocabulary (See et al. 2017's summarizer) with the pointer-generator's per-document extension.

    Text is split into words and punctuation marks (:meth:`split`, lower-cased by default); ids
    are ``[PAD]`` 0, ``[UNK]`` 1, ``[BOS]`` 2, ``[EOS]`` 3, then the words. :meth:`encode` maps a
    word outside the vocabulary to ``[UNK]``; the pointer-generator instead gives a document's
    words outside the vocabulary extended ids ``V, V+1, …`` in order of first appearance
    (:meth:`encode_source`), and a summary word outside the vocabulary takes its document's
    extended id if the document has it, else ``[UNK]`` (:meth:`encode_target`); ``decode`` with
    the document's rare words turns extended ids back into words.

    Shape:
        ``split``: str → N words; ``encode_source``: N words → N ids and the document's K rare words.
    """

    SPECIALS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
    pad_id, unk_id, bos_id, eos_id = 0, 1, 2, 3
    mask_id = None  # no masked-LM token

    def __init__(self, words: Sequence[str], *, lowercase: bool = True) -> None:
        words = list(words)
        clash = sorted(set(words) & set(self.SPECIALS))
        if clash:
            raise ValueError(f"vocabulary words {clash} clash with the special tokens")
        if len(set(words)) != len(words):
            raise ValueError("the vocabulary has repeated words")
        self.lowercase = lowercase
        self._itos = list(self.SPECIALS) + words
        self._stoi = {w: i for i, w in enumerate(self._itos)}

    @classmethod
    def build(cls, texts: Iterable[str], *, max_size: int, min_count: int = 1, lowercase: bool = True) -> WordVocab:
        """The ``max_size − 4`` most frequent words occurring at least ``min_count`` times (ties: alphabetical).

        Shape:
            N texts → a vocabulary of at most ``max_size`` entries
        """
        if max_size <= len(cls.SPECIALS):
            raise ValueError(f"max_size must exceed the {len(cls.SPECIALS)} special tokens, got {max_size}")
        if min_count < 1:
            raise ValueError(f"min_count must be ≥ 1, got {min_count}")
        probe = cls([], lowercase=lowercase)
        counts = Counter(w for t in texts for w in probe.split(t))
        ranked = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        return cls(ranked[: max_size - len(cls.SPECIALS)], lowercase=lowercase)

    @property
    def kind(self) -> str:
        return "word"

    @property
    def special_tokens(self) -> SpecialTokens:
        return SpecialTokens(*self.SPECIALS, mask=None)

    @property
    def vocab_size(self) -> int:
        return len(self._itos)

    def split(self, text: str) -> list[str]:
        """Words and punctuation marks of ``text`` (lower-cased if the vocabulary is).

        Shape:
            str → N words
        """
        return _WORD.findall(text.lower() if self.lowercase else text)

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = [self._stoi.get(w, self.unk_id) for w in self.split(text)]
        return _wrap(ids, self.bos_id, self.eos_id, add_bos, add_eos)

    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        return [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]

    def encode_source(self, words: Sequence[str]) -> tuple[list[int], list[str]]:
        """Ids in the extended vocabulary and the document's out-of-vocabulary words (in id order).

        Shape:
            N words → N ids, K rare words (ids ``V … V+K−1``)
        """
        oovs: list[str] = []
        index: dict[str, int] = {}
        ids = []
        for w in words:
            i = self._stoi.get(w)
            if i is None:
                if w not in index:
                    index[w] = self.vocab_size + len(oovs)
                    oovs.append(w)
                i = index[w]
            ids.append(i)
        return ids, oovs

    def encode_target(self, words: Sequence[str], oovs: Sequence[str]) -> list[int]:
        """Summary ids: vocabulary words, the document's rare words by extended id, else ``[UNK]``.

        Shape:
            N words → N ids
        """
        ext = {w: self.vocab_size + k for k, w in enumerate(oovs)}
        return [self._stoi.get(w, ext.get(w, self.unk_id)) for w in words]

    @overload
    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str: ...
    @overload
    def decode(self, ids: Iterable[int], oovs: Sequence[str], *, skip_special: bool = True) -> list[str]: ...

    def decode(self, ids, oovs=None, *, skip_special=True):
        """The words of ``ids`` joined by spaces; with a document's rare words ``oovs``, the list of
        words of extended ids (the pointer-generator's output). ``skip_special`` drops the special
        tokens except ``[UNK]``, which stands for a word.

        Shape:
            N ids → a str, or at most N words with ``oovs``
        """
        rare = () if oovs is None else oovs
        out = []
        for i in _as_int_list(ids):
            if i >= self.vocab_size:
                k = i - self.vocab_size
                if k >= len(rare):
                    raise ValueError(f"extended id {i} but the document has only {len(rare)} rare words")
                out.append(rare[k])
            elif i < 0:
                raise ValueError(f"token id {i} is outside the vocabulary of size {self.vocab_size}")
            elif not skip_special or i >= len(self.SPECIALS) or i == self.unk_id:
                out.append(self._itos[i])
        return out if oovs is not None else " ".join(out)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, skip_special: bool = True) -> list[str]:
        return [self.decode(ids, skip_special=skip_special) for ids in batch]

    def tokens(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[str]:
        return [self.id_to_token(i) for i in self.encode(text, add_bos=add_bos, add_eos=add_eos)]

    def id_to_token(self, token_id: int) -> str:
        if not 0 <= token_id < len(self._itos):
            raise ValueError(f"token id {token_id} is outside the vocabulary of size {len(self._itos)}")
        return self._itos[token_id]

    def token_to_id(self, token: str) -> int | None:
        return self._stoi.get(token)

    def save(self, directory: str | os.PathLike, name: str) -> Path:
        """Write ``directory/name.json``; read it back with :meth:`load`.

        Shape:
            the word list, as JSON
        """
        payload = {"format": VOCAB_FORMAT, "lowercase": self.lowercase, "words": self._itos[len(self.SPECIALS) :]}
        return _write_json_atomically(payload, directory, name)

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordVocab:
        """A vocabulary written by :meth:`save`.

        Shape:
            a JSON file → a vocabulary
        """
        path = Path(path)
        payload = _read_json(path)
        if not isinstance(payload, dict) or payload.get("format") != VOCAB_FORMAT:
            raise ValueError(f"{path}: not an attnlab word vocabulary (format {VOCAB_FORMAT!r})")
        words, lowercase = payload.get("words"), payload.get("lowercase")
        if not (isinstance(words, list) and all(isinstance(w, str) for w in words)):
            raise ValueError(f"{path}: words must be a list of strings")
        if not isinstance(lowercase, bool):
            raise ValueError(f"{path}: lowercase must be true or false, got {lowercase!r}")
        try:
            return cls(words, lowercase=lowercase)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    def __repr__(self) -> str:
        return f"WordVocab(vocab_size={self.vocab_size}, lowercase={self.lowercase})"


class PretrainedTokenizer:
    """The tokenizer of a pretrained HuggingFace checkpoint (a ``tokenizers.Tokenizer``), see
    :func:`load_hf_tokenizer`.

    ``encode`` gives the plain token ids (no special tokens unless ``add_bos``/``add_eos``), as
    every :class:`Tokenizer` does; :meth:`encode_with_offsets` also gives each token's character
    span in the text (question answering maps answers through them). The special tokens keep the
    checkpoint's own ids: for BERT ``bos`` is ``[CLS]`` and ``eos`` is ``[SEP]``; GPT-2 has one
    special token, ``<|endoftext|>``, which serves as bos, eos, unk and padding. :meth:`save`
    writes HuggingFace's own ``tokenizer.json`` format, so any HuggingFace tool reads it too.

    Shape:
        ``encode``: str → L ids; ``decode``: L ids → str; ``tokens``: str → L display strings.
    """

    def __init__(
        self,
        hf_tokenizer: HFTokenizer,
        *,
        pad: str | None,
        unk: str | None,
        bos: str | None,
        eos: str | None,
        mask: str | None = None,
    ) -> None:
        self._hf = hf_tokenizer
        # attnlab pads batches itself and cuts inputs where it needs to; some tokenizer.json files
        # pad or truncate every encoding to a fixed length.
        self._hf.no_padding()
        self._hf.no_truncation()
        self._names = {"pad": pad, "unk": unk, "bos": bos, "eos": eos, "mask": mask}
        self._ids: dict[str, int | None] = {}
        for role, token in self._names.items():
            tid = None if token is None else hf_tokenizer.token_to_id(token)
            if token is not None and tid is None:
                raise ValueError(f"special token {token!r} ({role}) is not in the tokenizer's vocabulary")
            self._ids[role] = tid
        if self._ids["pad"] is None:
            # Models without a padding token (GPT-2) pad with eos; padded positions are masked anyway.
            self._ids["pad"] = self._ids["eos"] if self._ids["eos"] is not None else 0

    @property
    def kind(self) -> str:
        return type(self._hf.model).__name__.lower()  # "wordpiece", "bpe", "unigram", ...

    @property
    def vocab_size(self) -> int:
        return self._hf.get_vocab_size(with_added_tokens=True)

    pad_id = property(lambda self: self._ids["pad"])
    unk_id = property(lambda self: self._ids["unk"])
    bos_id = property(lambda self: self._ids["bos"])
    eos_id = property(lambda self: self._ids["eos"])
    mask_id = property(lambda self: self._ids["mask"])

    def _wrap(self, ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        for flag, role in ((add_bos, "bos"), (add_eos, "eos")):
            if flag and self._ids[role] is None:
                raise ValueError(f"this tokenizer has no {role} token")
        return _wrap(ids, self.bos_id, self.eos_id, add_bos, add_eos)

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        return self._wrap(self._hf.encode(text, add_special_tokens=False).ids, add_bos, add_eos)

    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        encodings = self._hf.encode_batch(list(texts), add_special_tokens=False)
        return [self._wrap(e.ids, add_bos, add_eos) for e in encodings]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of ``text`` (no special tokens) and each token's character span ``(start, end)``
        in ``text`` — through lower-casing and accent stripping, so ``text[start:end]`` is the
        token's original spelling.

        Shape:
            str → L ids and L spans
        """
        enc = self._hf.encode(text, add_special_tokens=False)
        return list(enc.ids), [tuple(o) for o in enc.offsets]

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        return self._hf.decode(_as_int_list(ids), skip_special_tokens=skip_special)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, skip_special: bool = True) -> list[str]:
        return [self.decode(ids, skip_special=skip_special) for ids in batch]

    def tokens(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[str]:
        return [self.id_to_token(i) for i in self.encode(text, add_bos=add_bos, add_eos=add_eos)]

    def id_to_token(self, token_id: int) -> str:
        token = self._hf.id_to_token(int(token_id))
        if token is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary of size {self.vocab_size}")
        return token

    def token_to_id(self, token: str) -> int | None:
        return self._hf.token_to_id(token)

    def save(self, directory: str | os.PathLike, name: str) -> Path:
        """Write ``directory/name.json`` in HuggingFace's ``tokenizer.json`` format; a checkpoint
        saved as ``tokenizer`` reloads with :func:`load_hf_tokenizer` (giving its ``model_type``)."""
        return _write_json_atomically(json.loads(self._hf.to_str()), directory, name)

    def __repr__(self) -> str:
        return f"PretrainedTokenizer(kind={self.kind!r}, vocab_size={self.vocab_size})"


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
    payload = _read_json(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not an attnlab tokenizer file (missing format={FORMAT!r})")
    if payload.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: tokenizer format version {payload.get('version')!r}, expected {FORMAT_VERSION}")
    kind = payload.get("kind")
    if kind not in ("char", "bpe", "unigram"):
        raise ValueError(f"{path}: unknown tokenizer kind {kind!r}")
    # The file may have been edited by hand or damaged: every field's type is checked, and the
    # error names the file.
    try:
        specials = payload["special_tokens"]
        if not isinstance(specials, dict):
            raise ValueError(f"special_tokens must be a JSON object, got {type(specials).__name__}")
        special_tokens = SpecialTokens(**specials)
        if kind == "char":
            chars = payload["chars"]
            if not (isinstance(chars, list) and all(isinstance(c, str) for c in chars)):
                raise ValueError("chars must be a list of single characters")
            return CharTokenizer(chars, special_tokens=special_tokens)
        if not isinstance(payload["hf_tokenizer"], dict):
            raise ValueError("hf_tokenizer must be a JSON object (a HuggingFace tokenizers file)")
        try:
            hf = HFTokenizer.from_str(json.dumps(payload["hf_tokenizer"]))
        except Exception as err:
            if type(err) is not Exception:  # (the tokenizers library raises a bare Exception for a malformed tokenizer)
                raise
            raise ValueError(f"hf_tokenizer is not a valid HuggingFace tokenizer ({err})") from None
        return SubwordTokenizer(hf, model=kind, special_tokens=special_tokens)
    except KeyError as err:
        raise ValueError(f"{path}: no {err.args[0]!r} entry") from None
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from None


def _special_token(entry) -> str | None:
    # special_tokens_map.json writes a token either as a string or as {"content": ...}.
    if isinstance(entry, dict):
        return entry.get("content")
    return entry


def load_hf_tokenizer(path: str | os.PathLike, model_type: str | None = None) -> PretrainedTokenizer:
    """The tokenizer of a HuggingFace checkpoint directory, without network access.

    Reads ``tokenizer.json`` when present; otherwise builds the tokenizer from ``vocab.txt``
    (BERT's WordPiece) or ``vocab.json`` + ``merges.txt`` (GPT-2's byte-level BPE). The special
    tokens come from ``tokenizer_config.json`` / ``special_tokens_map.json`` when present, else
    from ``model_type`` (read from ``config.json`` when not given): ``bert`` takes ``[CLS]`` as
    bos and ``[SEP]`` as eos, anything else GPT-2's ``<|endoftext|>`` if the vocabulary has it.

    Raises:
        FileNotFoundError: no such directory, no ``config.json`` (when ``model_type`` is not
            given), or no tokenizer files.

    Shape:
        a checkpoint directory → a :class:`PretrainedTokenizer`
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such checkpoint directory")
    if model_type is None:
        config = path / "config.json"
        if not config.is_file():
            raise FileNotFoundError(f"{config}: missing (a HuggingFace checkpoint directory has a config.json)")
        model_type = _read_json(config).get("model_type")
    tok_cfg = _read_json(path / "tokenizer_config.json") if (path / "tokenizer_config.json").is_file() else {}
    special_map = _read_json(path / "special_tokens_map.json") if (path / "special_tokens_map.json").is_file() else {}
    for name, value in (("tokenizer_config.json", tok_cfg), ("special_tokens_map.json", special_map)):
        if not isinstance(value, dict):
            raise ValueError(f"{path / name}: must be a JSON object, got {type(value).__name__}")
    names = {k: _special_token(v) for k, v in {**tok_cfg, **special_map}.items() if k.endswith("_token")}
    try:
        return _hf_tokenizer(path, model_type, tok_cfg, names)
    except Exception as err:
        if type(err) is not Exception:  # (the tokenizers library raises a bare Exception for a malformed file)
            raise
        raise ValueError(f"{path}: the tokenizer files could not be read ({' '.join(str(err).split())})") from None


def _hf_tokenizer(path: Path, model_type: str | None, tok_cfg: dict, names: dict) -> PretrainedTokenizer:
    if (path / "tokenizer.json").is_file():
        hf = HFTokenizer.from_file(str(path / "tokenizer.json"))
    elif (path / "vocab.txt").is_file():
        hf = HFTokenizer(models.WordPiece.from_file(str(path / "vocab.txt"), unk_token=names.get("unk_token", "[UNK]")))
        hf.normalizer = normalizers.BertNormalizer(lowercase=tok_cfg.get("do_lower_case", True))
        hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        hf.decoder = decoders.WordPiece()
    elif (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        hf = HFTokenizer(models.BPE.from_file(str(path / "vocab.json"), str(path / "merges.txt")))
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=tok_cfg.get("add_prefix_space", False))
        hf.decoder = decoders.ByteLevel()
    else:
        raise FileNotFoundError(f"{path}: no tokenizer.json, vocab.txt, or vocab.json + merges.txt")
    if model_type == "bert":
        return PretrainedTokenizer(
            hf,
            pad=names.get("pad_token", "[PAD]"),
            unk=names.get("unk_token", "[UNK]"),
            bos=names.get("cls_token", "[CLS]"),
            eos=names.get("sep_token", "[SEP]"),
            mask=names.get("mask_token", "[MASK]"),
        )
    end = "<|endoftext|>"
    return PretrainedTokenizer(
        hf,
        pad=names.get("pad_token"),
        unk=names.get("unk_token", end if hf.token_to_id(end) is not None else None),
        bos=names.get("bos_token", end if hf.token_to_id(end) is not None else None),
        eos=names.get("eos_token", end if hf.token_to_id(end) is not None else None),
        mask=names.get("mask_token"),
    )
