"""Streaming detokenisation: show generated text as the tokens arrive, one complete character at a time.

A byte-level BPE token can end in the middle of a multi-byte UTF-8 character (a Japanese
character is three bytes, an emoji four). Decoding the tokens generated so far then ends in the
replacement character U+FFFD until the character's other bytes arrive, so that text is held back
instead of being printed broken.

Shape:
    token ids in, text out; no tensors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["TextStream"]


class TextStream:
    """The text of a prompt and its continuation, handed out piece by piece as tokens are added.

    ``stream.text`` starts as the prompt as the tokenizer decodes it; print it, then print what
    ``stream.push(token_id)`` returns for each generated token.
    """

    def __init__(self, tokenizer: Any, prompt_ids: Iterable[int]) -> None:
        self.tokenizer = tokenizer  # anything with decode(list[int]) -> str
        self.ids = list(prompt_ids)  # every token so far, prompt first
        self.text = tokenizer.decode(self.ids)  # the text handed out so far

    def push(self, token_id: int) -> str:
        """Add one token; return the new complete text (empty while a character is still incomplete)."""
        self.ids.append(int(token_id))
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""  # the middle of a multi-byte character: wait for its other bytes
        new, self.text = text[len(self.text) :], text
        return new
