"""Model definitions: the JTCSE twin towers and their cross-attention encoder layers."""
