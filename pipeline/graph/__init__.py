"""The Beam graphs: build, read, write, the per-shard step."""
