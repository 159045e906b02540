"""The explorer API's request and response schemas (pydantic models; they become ``/openapi.json``).

Every bound a request may not exceed is here, as a field constraint (lengths, ranges, strict
types), so bad input is refused with 422 before a handler runs; :data:`ERRORS` describes the
other refusals a route may answer (their guards are in :mod:`attnlab.web.security`). The handlers
that fill these are in :mod:`attnlab.web.app`.

Shape:
    playground: ``S`` keys (books) of width ``Dk``, values ``(S, Dv)``, output ``(Dv,)``;
    masks and weights: ``(T, S)``; attentions: ``{group: [layer][head][row][col]}``
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ERRORS",
    "MAX_ABS",
    "MAX_KEYS",
    "MAX_KEY_WIDTH",
    "MAX_MASK_LEN",
    "MAX_VALUE_WIDTH",
    "ClassroomInfo",
    "ErrorResponse",
    "GroupInfo",
    "MaskRequest",
    "MaskResponse",
    "ModelInfo",
    "Number",
    "PlaygroundRequest",
    "PlaygroundResponse",
    "RunResponse",
    "run_request_model",
]

MAX_KEYS = 16  # books in the playground (the page shows three)
MAX_KEY_WIDTH = 64  # numbers per key / query vector in the vector mode
MAX_VALUE_WIDTH = 16  # numbers per value vector
MAX_ABS = 1e4  # largest magnitude of any playground number: keeps every result finite
MAX_MASK_LEN = 32  # tokens on a side of the mask grid


# strict: a number must be a JSON number ("d_k": "64" is refused, not converted), a flag a JSON
# boolean. The models are not strict as a whole: FastAPI validates parsed JSON, where a [row,
# column] pair arrives as a list, which strict mode would not take for a tuple.
Number = Annotated[float, Field(ge=-MAX_ABS, le=MAX_ABS, allow_inf_nan=False, strict=True)]


class PlaygroundRequest(BaseModel):
    """Give ``scores`` (q·k per book, for keys of width ``d_k``) or ``query`` with ``keys``."""

    model_config = ConfigDict(extra="forbid")

    scores: list[Number] | None = Field(None, min_length=1, max_length=MAX_KEYS, description="q·k for each key")
    query: list[Number] | None = Field(None, min_length=1, max_length=MAX_KEY_WIDTH, description="the query vector")
    keys: list[Annotated[list[Number], Field(min_length=1, max_length=MAX_KEY_WIDTH)]] | None = Field(
        None, min_length=1, max_length=MAX_KEYS, description="one key vector per book, as wide as the query"
    )
    values: list[Annotated[list[Number], Field(min_length=1, max_length=MAX_VALUE_WIDTH)]] | None = Field(
        None, min_length=1, max_length=MAX_KEYS, description="one value vector per key (default: one-hot)"
    )
    d_k: int = Field(
        64, ge=1, le=1024, strict=True, description="key width used for the √d_k scaling (ignored with query/keys)"
    )
    scale: bool = Field(True, strict=True, description="divide the scores by √d_k")


class PlaygroundResponse(BaseModel):
    raw: list[float] = Field(description="q·k per key")
    scaled: list[float] = Field(description="what enters the softmax: q·k/√d_k, or q·k when scale is off")
    weights: list[float] = Field(description="softmax weights, summing to 1")
    values: list[list[float]] = Field(description="the value vectors used")
    output: list[float] = Field(description="Σ weight · value")
    d_k: int
    scale: bool
    factor: float = Field(description="the multiplier of the raw scores: 1/√d_k, or 1")


class MaskRequest(BaseModel):
    """A self-attention mask over ``length`` tokens (or ``length`` queries × ``key_length`` keys)."""

    model_config = ConfigDict(extra="forbid")

    length: int = Field(8, ge=1, le=MAX_MASK_LEN, strict=True, description="T, the number of query tokens")
    key_length: int | None = Field(
        None, ge=1, le=MAX_MASK_LEN, strict=True, description="S, the number of keys (default T)"
    )
    causal: bool = Field(True, strict=True, description="add the causal mask (no looking ahead)")
    window: int | None = Field(
        None, ge=1, le=MAX_MASK_LEN, strict=True, description="add a sliding window of this size"
    )
    window_causal: bool = Field(True, strict=True, description="window looks back only (else symmetric, ±window//2)")
    padding: int = Field(0, ge=0, le=MAX_MASK_LEN, strict=True, description="how many keys at the end are padding")
    toggled: list[tuple[Annotated[int, Field(ge=0, strict=True)], Annotated[int, Field(ge=0, strict=True)]]] = Field(
        default_factory=list,
        max_length=MAX_MASK_LEN * MAX_MASK_LEN,
        description="[row, column] cells the learner flipped by hand, applied after the helpers",
    )


class MaskResponse(BaseModel):
    length: int
    key_length: int
    parts: dict[str, list[list[bool]]] = Field(description="each helper's mask, broadcast to (T, S)")
    mask: list[list[bool]] = Field(description="all parts combined (logical AND), then the toggled cells flipped")
    weights: list[list[float]] = Field(description="softmax weights under the mask when all scores are equal")


class ModelInfo(BaseModel):
    name: str
    kind: str
    description: dict[str, str] | None = Field(
        None, description="a shipped model's one-line description by language (en, ja); null for other models"
    )
    examples: list[str] = Field(default_factory=list, description="inputs to try (a shipped model's own)")


class GroupInfo(BaseModel):
    name: str = Field(description="encoder_self, decoder_self, cross or self")
    rows: str = Field(description="which token list labels the rows (queries)")
    cols: str = Field(description="which token list labels the columns (keys)")
    layers: int
    heads: int


class RunResponse(BaseModel):
    model: str
    kind: str
    output: str
    tokens: dict[str, list[str]]
    groups: list[GroupInfo]
    attentions: dict[str, list[list[list[list[float]]]]] = Field(description="group -> [layer][head][row][col]")
    elapsed_ms: float


class ClassroomInfo(BaseModel):
    enabled: bool  # started with --classroom
    urls: list[str]  # the addresses students type (the first is the QR code)


class ErrorResponse(BaseModel):
    detail: str


def run_request_model(max_chars: int) -> type[BaseModel]:
    """The body of ``POST /api/run``, built per app: its text bound is ``Limits.max_text_chars``.

    Shape:
        no tensors.
    """

    class RunRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")

        model: str = Field(min_length=1, max_length=200, strict=True, description="a name from GET /api/models")
        text: str = Field(min_length=1, max_length=max_chars, strict=True, description="the input sentence")

    return RunRequest


ERRORS = {
    400: {"model": ErrorResponse, "description": "malformed JSON, or a Host this explorer does not serve"},
    404: {"model": ErrorResponse, "description": "unknown model"},
    408: {"model": ErrorResponse, "description": "request body not received in time"},
    413: {"model": ErrorResponse, "description": "request body too large"},
    429: {"model": ErrorResponse, "description": "busy: too many model requests at once (see Retry-After)"},
}
