"""LLM judges aligned to human annotations, and the agreement metrics that prove it."""
