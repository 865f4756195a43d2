"""Personal data in stored traces: the crypto, the byte spans of values, the rules that
find them and splicing values back. Pure (no Django)."""
