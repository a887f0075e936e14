"""Task data: the task catalogue, a user's own data, splits to batches, metrics, held-out text."""
