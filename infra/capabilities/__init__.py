"""One construct per capability; `infra.stack` wires them together."""
