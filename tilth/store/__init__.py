"""One module per durable file format, and the primitives they share."""
