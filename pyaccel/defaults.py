"""Every default of pyaccel lives here: the API, the CLI, the bench and the server read them."""

from __future__ import annotations

# Context of a Model: tokens of KV cache.
N_CTX = 4096
# Tokens llama.cpp evaluates in one call; a verification batch never exceeds it.
N_BATCH = 512
# Parallel sequences of a context: bounds the root-to-leaf paths of a draft tree plus the
# auxiliary sequences of a step (a lookahead window of W columns verifying G n-grams needs
# W + G). With the unified KV cache a sequence costs nothing until it is used.
N_SEQ_MAX = 32
# New tokens of one Python-API call when the caller does not say (the CLI instead lets an
# answer run to its end, up to the context).
MAX_TOKENS = 256
# Sampling: greedy; top-k, top-p and min-p off.
TEMPERATURE = 0.0
TOP_K = 0
TOP_P = 1.0
MIN_P = 0.0
# The method of `Generator(model)` and of the CLI (generate, chat, serve): every proposer in
# one tree, drafting only what pays on this device; "plain" drafts nothing.
METHOD = "auto"
