"""The embedded local stack: a loopback HTTP front that speaks API Gateway events to the real handler."""
