"""`pyaccel serve`: an OpenAI-compatible HTTP server over one model (the `pyaccel[server]`
extra). Importing this package needs none of the extra's packages; `app` does."""
