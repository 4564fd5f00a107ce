"""KIP-932 share partitions and share sessions (see manager.py)."""
