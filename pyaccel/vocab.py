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
    from .backend import Vocabulary


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


def fingerprint(backend: "Vocabulary") -> int:
    """A nonzero 32-bit digest of every token's text, in id order: two vocabularies that
    give any id another text (or differ in size) differ here but for a 2^-32 chance."""
    digest = hashlib.blake2b(digest_size=4)
    for tok in range(backend.n_vocab):
        digest.update(backend.token_text(tok))
        digest.update(b"\0")
    return int.from_bytes(digest.digest(), "little") or 1


def tokenize_chat(backend: "Vocabulary", render: Callable[[list[dict[str, str]]], tuple[str, bool]],
                  messages: Sequence[Mapping[str, str]]) -> list[int]:
    """The tokens of `render(messages)` (a chat template or turn format: the prompt text,
    and whether the tokenizer adds its special tokens such as BOS), with the markup the
    template writes parsed into control tokens and the messages' own text kept as text: a
    message that quotes "<end_of_turn>" talks about the token, it does not end its turn.
    Messages that hold no control token's text (nearly all) render and tokenize in one call,
    exactly as before. The text of one that does (less its leading and trailing whitespace,
    which a template may trim) is rendered as a placeholder no message can hold, and
    tokenized whole, without special parsing, where the placeholder lands."""
    quoting = _quoting_markup(backend, messages)
    if not quoting:
        text, add_special = render([dict(m) for m in messages])
        return backend.tokenize(text, add_special=add_special, parse_special=True)
    nonce = secrets.token_hex(8)
    literals: list[str] = []
    hidden = []
    for i, m in enumerate(messages):
        content = m["content"]
        if i in quoting:
            core = content.strip()
            lead, trail = content[:len(content) - len(content.lstrip())], content[len(content.rstrip()):]
            content = f"{lead}\ue000{nonce}:{len(literals)}\ue001{trail}"
            literals.append(core)
        hidden.append({**m, "content": content})
    text, add_special = render(hidden)
    pieces = re.split(f"\ue000{nonce}:(\\d+)\ue001", text)
    tokens = backend.tokenize(pieces[0], add_special=add_special, parse_special=True)
    eos_at_end = add_special and backend.add_eos and tokens[-1:] == [backend.eos]
    if eos_at_end:  # where one call puts it: after the whole prompt
        tokens.pop()
    for i in range(1, len(pieces), 2):
        tokens += backend.tokenize(literals[int(pieces[i])], add_special=False, parse_special=False)
        tokens += backend.tokenize(pieces[i + 1], add_special=False, parse_special=True)
    return tokens + [backend.eos] if eos_at_end else tokens


def _quoting_markup(backend: "Vocabulary", messages: Sequence[Mapping[str, str]]) -> set[int]:
    """Indices of the messages whose text llama.cpp would parse control tokens out of."""
    return {i for i, m in enumerate(messages)
            if any(backend.is_control(t) for t in set(backend.tokenize(m["content"], add_special=False,
                                                                       parse_special=True)))}


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
