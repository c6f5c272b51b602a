"""Work-preserving restart: the write-ahead journal, its use, and the replay."""
