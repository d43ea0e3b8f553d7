"""Services over HTTP: detection anyone may query (`python -m fwsapp serve-detection`)."""
