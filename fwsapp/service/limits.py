"""What the detection service accepts: a request's size and a client's rate. Apart from the service itself, which
imports FastAPI, so that `serve-detection --help` and its argument checks are instant."""

MAX_TEXT_CHARACTERS = 200_000
MAX_TOKEN_IDS = 100_000
MAX_BATCH = 256  # texts in one /detect/batch
MAX_BODY_BYTES = 8 * 2**20
DEFAULT_RATE_LIMIT = "120/second"  # per client address, `limits`'s notation
