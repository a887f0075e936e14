"""Pretrained models and what is built on them: loading, precision, mixout, the MLM head, layer names."""
