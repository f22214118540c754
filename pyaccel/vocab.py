"""Facts about a model's vocabulary that pyaccel checks before it mixes tokens of two
sources: whether a draft model can propose for a target (`compare_vocabularies`), a short
fingerprint that files of token ids (n-gram caches) record (`fingerprint`), and chat
content tokenized as text, so that a message holding "<|im_end|>" cannot end its turn
(`tokenize_chat`); and the stream of text pieces a token stream reads as (`Detokenizer`)."""

from __future__ import annotations

import codecs
import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from .backend import LlamaBackend, Vocabulary


@dataclass(frozen=True)
class VocabDifference:
    ok: bool
    reason: str = ""


# Models of one family may pad their vocabularies differently (extra unused ids at the
# end): this much difference in size is tolerated, as llama.cpp's own draft pairing does.
VOCAB_SIZE_SLACK = 128
# Token texts are compared from this id on: the low ids hold special tokens that families
# name differently without changing what the ordinary tokens mean.
VOCAB_CHECK_START = 5


def compare_vocabularies(target: "Vocabulary", draft: "Vocabulary") -> VocabDifference:
    """Can `draft` propose tokens for `target`? Same BOS / EOS handling, vocabulary sizes
    within VOCAB_SIZE_SLACK, and the same text for every shared ordinary token."""
    if target.add_bos != draft.add_bos or (target.add_bos and target.bos != draft.bos):
        return VocabDifference(False, f"different BOS handling (target bos={target.bos}, draft bos={draft.bos})")
    if target.eos != draft.eos:
        return VocabDifference(False, f"different EOS tokens (target {target.eos}, draft {draft.eos})")
    diff = abs(target.n_vocab - draft.n_vocab)
    if diff > VOCAB_SIZE_SLACK:
        return VocabDifference(
            False, f"vocabulary sizes differ by {diff} (target {target.n_vocab}, draft {draft.n_vocab})"
        )
    for tok in range(VOCAB_CHECK_START, min(target.n_vocab, draft.n_vocab)):
        a, b = target.token_text(tok), draft.token_text(tok)
        if a != b:
            return VocabDifference(False, f"token {tok} differs: target {a!r}, draft {b!r}")
    return VocabDifference(True)


def fingerprint(backend: "LlamaBackend") -> int:
    """A nonzero 32-bit digest of every token's text, in id order: two vocabularies that
    give any id another text (or differ in size) differ here but for a 2^-32 chance."""
    digest = hashlib.blake2b(digest_size=4)
    for tok in range(backend.n_vocab):
        digest.update(backend.token_text(tok))
        digest.update(b"\0")
    return int.from_bytes(digest.digest(), "little") or 1


def tokenize_chat(backend: "LlamaBackend", render: Callable[[list[dict[str, str]]], tuple[str, bool]],
                  messages: Sequence[Mapping[str, str]]) -> list[int]:
    """The tokens of `render(messages)` (a chat template or turn format: the prompt text,
    and whether the tokenizer adds its special tokens such as BOS), with the markup
    the template writes parsed into control tokens and the messages' own text kept as text:
    a message that quotes "<end_of_turn>" talks about the token, it does not end its turn.
    Messages that hold no control token's text (nearly all) render and tokenize in one call,
    exactly as before; otherwise each such text is replaced by a placeholder no message can
    hold, and tokenized apart without special parsing where the placeholder lands."""
    quoted = _quoted_control_texts(backend, messages)
    if not quoted:
        text, add_special = render([dict(m) for m in messages])
        return backend.tokenize(text, add_special=add_special, parse_special=True)
    nonce = secrets.token_hex(8)
    pattern = re.compile("|".join(re.escape(t) for t in sorted(quoted, key=len, reverse=True)))
    literals: list[str] = []

    def hide(match: re.Match[str]) -> str:
        literals.append(match.group(0))
        return f"\ue000{nonce}:{len(literals) - 1}\ue001"

    hidden = [{**m, "content": pattern.sub(hide, m["content"])} for m in messages]
    text, add_special = render(hidden)
    pieces = re.split(f"\ue000{nonce}:(\\d+)\ue001", text)
    tokens = backend.tokenize(pieces[0], add_special=add_special, parse_special=True)
    for i in range(1, len(pieces), 2):
        tokens += backend.tokenize(literals[int(pieces[i])], add_special=False, parse_special=False)
        tokens += backend.tokenize(pieces[i + 1], add_special=False, parse_special=True)
    return tokens


def _quoted_control_texts(backend: "LlamaBackend", messages: Sequence[Mapping[str, str]]) -> set[str]:
    """The texts of the control tokens that llama.cpp would parse out of the messages."""
    ids: set[int] = set()
    for m in messages:
        ids.update(backend.tokenize(m["content"], add_special=False, parse_special=True))
    return {backend.token_text(t).decode("utf-8", errors="replace") for t in ids if backend.is_control(t)}


class Detokenizer:
    """Turns a token stream into text pieces, never splitting a UTF-8 character. Bytes that
    are no UTF-8 become U+FFFD; a character the stream ends inside (max_tokens cut it after
    its first bytes) is left out, as it was never finished."""

    def __init__(self, backend: "Vocabulary") -> None:
        self._backend = backend
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token: int) -> str:
        return self._decoder.decode(self._backend.token_bytes(token))

    def flush(self) -> str:
        """The end of the stream: drops the held first bytes of an unfinished character."""
        self._decoder.reset()
        return ""
