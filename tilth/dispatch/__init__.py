"""Sessions run on `tilth worker` machines through an existing job engine (RQ on Redis)."""
