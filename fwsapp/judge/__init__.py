"""The pairwise LLM judge: prompts, verdict parsing, backends, the runner, and judged-log import."""
