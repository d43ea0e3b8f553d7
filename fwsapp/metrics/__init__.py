"""Text-quality metrics, one module each. Each takes lists of strings and returns one value per item."""
