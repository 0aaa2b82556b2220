"""Small utilities: atomic I/O, YAML, memory checks, path guards, run locks, entry points."""
