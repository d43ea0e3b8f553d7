"""Medical tasks and dataset loaders."""
